//! The agent's edits in the editor against what a repository can hold: `.git/config` is
//! written only once the user allowed it through `wright/requestApproval` kind `protected`;
//! a link out of the workspace is refused whether the editor has it open or not, and the
//! file it leads to is never written nor its text sent to the provider.

use std::os::unix::fs::symlink;

use serde_json::{Value, json};
use wright_tests::provider::{Dialect, Reply, ScriptedProvider, Turn};
use wright_tests::session::{agent_spawn, finished, run, start_agent_server};
use wright_tests::{Editor, TempDir, file_uri};

const GIT_CONFIG: &str = "[core]\n\tbare = false\n";
const OUTSIDE_TEXT: &str = "export SECRET_OUTSIDE_TEXT=1\n";

/// A client that takes no `documentChanges` (the server writes unopened files itself) and
/// answers `wright/requestApproval`.
fn start(dir: &TempDir, provider: &ScriptedProvider) -> Editor {
    start_agent_server(
        &agent_spawn(dir, provider),
        json!({"experimental": {"wrightRequestApproval": true}}),
    )
}

fn edit_git_config(id: &str) -> Turn {
    Turn::default().tool_call(
        id,
        "edit",
        &json!({"path": ".git/config", "old_string": "bare = false", "new_string": "fsmonitor = \"touch pwned\""})
            .to_string(),
    )
}

fn approval(editor: &mut Editor) -> Value {
    editor.expect("a wright/requestApproval request", |m| {
        m["method"] == "wright/requestApproval" && m.get("id").is_some()
    })
}

#[test]
fn git_config_is_written_only_once_the_user_allows_it() {
    let dir = TempDir::new("lsp-protected-edit");
    dir.write("ws/src/lib.rs", "pub fn f() {}\n");
    dir.write("ws/.git/config", GIT_CONFIG);
    let provider = ScriptedProvider::start();
    for id in ["denied", "allowed"] {
        provider.push(Reply::stream(Dialect::OpenAi, &edit_git_config(id)));
    }
    provider.push(Reply::stream(Dialect::OpenAi, &Turn::text(&["Done."])));
    let mut editor = start(&dir, &provider);
    let session = run(&mut editor, "set up git");
    let config = || std::fs::read_to_string(dir.path().join("ws/.git/config")).unwrap();

    let ask = approval(&mut editor);
    assert_eq!(ask["params"]["kind"], "protected", "{ask}");
    assert_eq!(ask["params"]["sessionId"], session.as_str());
    assert!(
        ask["params"]["command"]
            .as_str()
            .unwrap()
            .contains(".git/config"),
        "{ask}"
    );
    assert!(
        ask["params"]["reason"]
            .as_str()
            .unwrap()
            .contains("git runs"),
        "the reason says why: {ask}"
    );
    editor.respond(&ask["id"], json!({"decision": "deny"}));
    let ask = approval(&mut editor);
    assert_eq!(ask["params"]["kind"], "protected", "{ask}");
    // Denied, nothing was written.
    assert_eq!(config(), GIT_CONFIG);
    editor.respond(&ask["id"], json!({"decision": "allow"}));
    assert_eq!(finished(&mut editor, &session)["status"], "done");

    let results = provider.requests().last().unwrap().tool_results();
    assert!(
        results[0].contains("is protected") && results[0].contains("did not allow"),
        "{}",
        results[0]
    );
    assert!(results[1].contains("update .git/config"), "{}", results[1]);
    assert_eq!(config(), "[core]\n\tfsmonitor = \"touch pwned\"\n");
    editor.shutdown();
}

#[test]
fn a_link_out_of_the_workspace_is_refused_open_or_not() {
    let dir = TempDir::new("lsp-link-out-edit");
    dir.write("ws/src/lib.rs", "pub fn f() {}\n");
    let outside = dir.write("outside/bashrc", OUTSIDE_TEXT);
    let root = dir.path().join("ws");
    symlink(&outside, root.join("notes.md")).unwrap();
    symlink(&outside, root.join("open.md")).unwrap();
    symlink(dir.path().join("outside"), root.join("linked")).unwrap();
    let provider = ScriptedProvider::start();
    let turn = Turn::default()
        .tool_call(
            "closed",
            "write_file",
            &json!({"path": "notes.md", "content": "pwned\n"}).to_string(),
        )
        .tool_call(
            "opened",
            "edit",
            &json!({"path": "open.md", "old_string": "SECRET", "new_string": "pwned"}).to_string(),
        )
        .tool_call(
            "folder",
            "write_file",
            &json!({"path": "linked/new.txt", "content": "pwned\n"}).to_string(),
        );
    provider.push(Reply::stream(Dialect::OpenAi, &turn));
    provider.push(Reply::stream(Dialect::OpenAi, &Turn::text(&["Done."])));
    let mut editor = start(&dir, &provider);
    // The user has the link open (with unsaved text): an edit through the editor would be
    // saved back through the link.
    editor.open(
        &file_uri(&root.join("open.md")),
        "markdown",
        1,
        "# SECRET notes\n",
    );
    let session = run(&mut editor, "edit the notes");
    assert_eq!(finished(&mut editor, &session)["status"], "done");
    assert!(
        editor
            .try_take(|m| m["method"] == "workspace/applyEdit")
            .is_none(),
        "nothing was sent to the editor to apply"
    );
    let results = provider.requests().last().unwrap().tool_results();
    assert_eq!(results.len(), 3, "{results:?}");
    for (result, name) in results.iter().zip(["notes.md", "open.md", "linked"]) {
        assert!(result.contains("leads outside the workspace"), "{result}");
        assert!(result.contains(name), "{result}");
    }
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), OUTSIDE_TEXT);
    assert_eq!(
        std::fs::read_dir(dir.path().join("outside"))
            .unwrap()
            .count(),
        1
    );
    for request in provider.requests() {
        assert!(
            !request.body_text().contains("SECRET_OUTSIDE_TEXT"),
            "the outside text reached the provider"
        );
    }
    editor.shutdown();
}
