//! A command in an editor session replaces folders of its snapshot with links to a folder
//! outside the workspace (`rm -rf src && ln -s /elsewhere src`); before the next command the
//! server copies the open unsaved buffer and, in review mode, the held proposal into the
//! layer. It must write real files there, never through the links: nothing outside is
//! written, created or deleted (the folder the old code deleted is the `main.rs/` one).

use serde_json::json;
use wright_tests::provider::{Dialect, Reply, ScriptedProvider, Turn};
use wright_tests::session::{agent_spawn, finished, start_agent_server, versioned_edits};
use wright_tests::{TempDir, file_uri};

#[test]
fn links_a_command_planted_in_its_layer_are_never_followed_by_the_server() {
    let dir = TempDir::new("layer-links");
    dir.write("ws/src/main.rs", "on disk\n");
    dir.write("ws/notes/readme.md", "notes on disk\n");
    let outside = dir.path().join("outside");
    dir.write("outside/main.rs/inside/keep.txt", "must survive\n");
    dir.write("outside/victim.md", "victim\n");
    let provider = ScriptedProvider::start();
    let command = |id: &str, command: &str| {
        Turn::default().tool_call(id, "run_command", &json!({"command": command}).to_string())
    };
    provider.push(Reply::stream(
        Dialect::OpenAi,
        &command(
            "c1",
            &format!(
                "rm -rf src notes && ln -s {0} src && ln -s {0} notes && ln -s {0}/victim.md top.md",
                outside.display()
            ),
        ),
    ));
    // A proposal (review mode) for a file under the linked folder.
    provider.push(Reply::stream(
        Dialect::OpenAi,
        &Turn::default().tool_call(
            "w1",
            "write_file",
            &json!({"path": "notes/readme.md", "content": "proposed notes\n"}).to_string(),
        ),
    ));
    provider.push(Reply::stream(
        Dialect::OpenAi,
        &command(
            "c2",
            "cat src/main.rs notes/readme.md; test -L src || echo src is a folder",
        ),
    ));
    provider.push(Reply::stream(Dialect::OpenAi, &Turn::text(&["Done."])));
    let mut editor = start_agent_server(&agent_spawn(&dir, &provider), versioned_edits());
    let uri = file_uri(&dir.path().join("ws/src/main.rs"));
    editor.open(&uri, "rust", 1, "unsaved in the editor\n");
    let run = editor.request(
        "wright/agentRun",
        json!({"task": "tidy up", "applyMode": "review"}),
    );
    let session = run["sessionId"].as_str().unwrap().to_owned();
    assert_eq!(finished(&mut editor, &session)["status"], "done");

    // Outside: nothing written, created or deleted.
    assert_eq!(
        std::fs::read_to_string(outside.join("main.rs/inside/keep.txt")).unwrap(),
        "must survive\n"
    );
    assert_eq!(
        std::fs::read_to_string(outside.join("victim.md")).unwrap(),
        "victim\n"
    );
    let entries: Vec<_> = std::fs::read_dir(&outside)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(entries.len(), 2, "{entries:?}");
    // The second command saw the buffer and the proposal, as real files in its layer.
    let results = provider.requests()[3].tool_results();
    let second = results.last().unwrap();
    assert!(second.contains("unsaved in the editor"), "{second}");
    assert!(second.contains("proposed notes"), "{second}");
    assert!(second.contains("src is a folder"), "{second}");
    // And the workspace on disk is as it was.
    assert_eq!(
        std::fs::read_to_string(dir.path().join("ws/src/main.rs")).unwrap(),
        "on disk\n"
    );
    editor.shutdown();
}
