//! Learning from use, headless: scripted `wright exec` sessions that land edits, fail one,
//! and have one undone (`wright exec --undo`), then `wright stats --json` counts them exactly;
//! `wright trajectories export` gives triples that `wright apply` reproduces and chat lines
//! in the fine-tuning shape, with the planted secrets (an `sk-…` key the agent read, a `.env`
//! value in an edited file) redacted unless `--no-redact`.

use serde_json::{Value, json};
use wright_tests::provider::{Reply, ScriptedProvider};
use wright_tests::{TempDir, workspace_command, wright_apply};

const LIB: &str = "pub fn add(a: i32, b: i32) -> i32 {\n    a - b\n}\n";
const DB: &str = "pub const URL: &str = \"postgres://app:planted-dotenv-value-77@db\";\npub fn port() -> u16 {\n    5431\n}\n";
const KEYS: &str = "pub const KEY: &str = \"sk-planted0123456789abcdefXYZ\";\n";

fn call(id: &str, name: &str, arguments: Value) -> Reply {
    Reply::call(id, name, &arguments)
}

fn lines(bytes: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(bytes)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect()
}

#[test]
fn stats_count_kept_undone_and_failed_edits_and_exports_reapply_with_secrets_redacted() {
    let dir = TempDir::new("learning");
    dir.write("ws/src/lib.rs", LIB);
    dir.write("ws/src/db.rs", DB);
    dir.write("ws/src/keys.rs", KEYS);
    dir.write("ws/.env", "DB_PASSWORD=planted-dotenv-value-77\n");
    dir.write(
        "ws/.wright/config.toml",
        "[agent]\napprove_commands = \"git push*\"\n",
    );
    let provider = ScriptedProvider::start();
    let bin = wright_tests::wright_bin();
    let run = |args: &[&str]| {
        let output = workspace_command(&bin, &dir, args, Some(&provider), "sk-learning-test")
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        output
    };

    // Session 1: reads the key file, lands an edit and a patch, fails an edit: kept twice.
    provider.push(call("r1", "read_file", json!({"path": "src/keys.rs"})));
    provider.push(call(
        "e1",
        "edit",
        json!({"path": "src/lib.rs", "old_string": "a - b", "new_string": "a + b"}),
    ));
    provider.push(call(
        "e2",
        "apply_patch",
        json!({"patch": "*** Begin Patch\n*** Update File: src/db.rs\n@@\n pub fn port() -> u16 {\n-    5431\n+    5432\n }\n*** End Patch\n"}),
    ));
    provider.push(call(
        "e3",
        "edit",
        json!({"path": "src/lib.rs", "old_string": "no such text", "new_string": "x"}),
    ));
    // A command that runs, and one the approval list holds back (no one to ask headless).
    provider.push(call("c1", "run_command", json!({"command": "echo ran"})));
    provider.push(call(
        "c2",
        "run_command",
        json!({"command": "git push origin main"}),
    ));
    provider.push(Reply::text("Fixed add and the port."));
    run(&["exec", "--json", "fix add and the port"]);

    // Session 2: one edit, undone.
    provider.push(call(
        "e4",
        "edit",
        json!({"path": "src/lib.rs", "old_string": "pub fn add", "new_string": "pub fn sum"}),
    ));
    provider.push(Reply::text("Renamed."));
    run(&["exec", "--json", "rename add"]);
    run(&["exec", "--undo", "--json"]);
    let fixed = LIB.replacen("a - b", "a + b", 1);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("ws/src/lib.rs")).unwrap(),
        fixed
    );

    let stats: Value = serde_json::from_slice(&run(&["stats", "--json"]).stdout).unwrap();
    assert_eq!(stats["since_days"], 30, "{stats}");
    assert_eq!(stats["sessions"], 2, "{stats}");
    assert_eq!(stats["turns"], 2, "{stats}");
    assert_eq!(
        stats["edits"],
        json!({"proposed": 4, "applied": 3, "rejected": 0, "undone": 1, "kept": 2}),
        "{stats}"
    );
    assert_eq!(
        stats["commands"],
        json!({"run": 1, "refused": 1, "escalated": 0}),
        "{stats}"
    );
    let listed: Value = serde_json::from_slice(&run(&["sessions", "--json"]).stdout).unwrap();
    let input: u64 = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["usage"]["input"].as_u64().unwrap())
        .sum();
    assert_eq!(stats["usage"]["input"], input, "{stats}");
    assert!(stats["costUsd"].is_number(), "{stats}");
    let model = &stats["models"]["openai/gpt-4.1"];
    assert_eq!(model["sessions"], 2, "{stats}");
    assert_eq!(model["edits"]["kept"], 2, "{stats}");
    assert!(stats["firstEditSecs"].is_u64(), "{stats}");
    // Every workspace: this one is the only one.
    let all: Value = serde_json::from_slice(&run(&["stats", "--all", "--json"]).stdout).unwrap();
    assert_eq!(all["edits"], stats["edits"], "{all}");
    // The table says the same.
    let table = String::from_utf8(run(&["stats"]).stdout).unwrap();
    let all = table.lines().find(|l| l.starts_with("all ")).expect(&table);
    let cells: Vec<&str> = all.split_whitespace().collect();
    assert_eq!(
        &cells[1..10],
        ["2", "2", "4", "3", "0", "1", "2", "1", "1"],
        "{table}"
    );

    // Triples: one per landed edit, each reapplied by `wright apply` exactly.
    let exported = run(&["trajectories", "export"]);
    let triples = lines(&exported.stdout);
    assert_eq!(triples.len(), 3, "{triples:?}");
    let kept: Vec<(&str, bool)> = triples
        .iter()
        .map(|t| (t["path"].as_str().unwrap(), t["kept"].as_bool().unwrap()))
        .collect();
    assert_eq!(
        kept,
        [
            ("src/lib.rs", true),
            ("src/db.rs", true),
            ("src/lib.rs", false)
        ]
    );
    assert_eq!(triples[0]["format"], "json");
    assert_eq!(triples[1]["format"], "patch");
    for (at, triple) in triples.iter().enumerate() {
        for field in ["session", "model", "original", "edit", "final"] {
            assert!(triple[field].is_string(), "{field}: {triple}");
        }
        let scratch = TempDir::new(&format!("learning-apply-{at}"));
        let path = triple["path"].as_str().unwrap();
        scratch.write(&format!("ws/{path}"), triple["original"].as_str().unwrap());
        let root = scratch.path().join("ws");
        let format = triple["format"].as_str().unwrap();
        let applied = wright_apply(
            &bin,
            &root,
            &["--format", format],
            triple["edit"].as_str().unwrap(),
        );
        assert!(
            applied.status.success(),
            "{triple}: {}",
            String::from_utf8_lossy(&applied.stderr)
        );
        assert_eq!(
            std::fs::read_to_string(root.join(path)).unwrap(),
            triple["final"].as_str().unwrap(),
            "{triple}"
        );
    }
    let kept_only = lines(&run(&["trajectories", "export", "--kept-only"]).stdout);
    assert_eq!(kept_only.len(), 2);

    // Chat: one line per session, system message first, the tool calls and outputs.
    let out = dir.path().join("chat.jsonl");
    run(&[
        "trajectories",
        "export",
        "--format",
        "chat",
        "--out",
        out.to_str().unwrap(),
    ]);
    let chat_text = std::fs::read_to_string(&out).unwrap();
    let chats = lines(chat_text.as_bytes());
    assert_eq!(chats.len(), 2);
    let messages = chats[0]["messages"].as_array().unwrap();
    assert_eq!(messages[0]["role"], "system");
    assert_eq!(messages[1]["role"], "user");
    let calls: Vec<&str> = messages
        .iter()
        .filter_map(|m| m["tool_calls"].as_array())
        .flatten()
        .map(|c| c["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        calls,
        [
            "read_file",
            "edit",
            "apply_patch",
            "edit",
            "run_command",
            "run_command"
        ]
    );
    assert!(
        messages
            .iter()
            .any(|m| m["role"] == "tool" && m["tool_call_id"] == "r1")
    );
    let tools: Vec<&str> = chats[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(
        tools.contains(&"edit") && tools.contains(&"apply_patch"),
        "{tools:?}"
    );

    // The planted secrets are out of both exports, and in them with --no-redact.
    let triples_text = String::from_utf8(exported.stdout).unwrap();
    for (name, text) in [("triples", &triples_text), ("chat", &chat_text)] {
        for secret in ["planted-dotenv-value-77", "sk-planted0123456789abcdefXYZ"] {
            assert!(!text.contains(secret), "{name} holds {secret}");
        }
        assert!(text.contains("[REDACTED]"), "{name}");
    }
    let raw_triples =
        String::from_utf8(run(&["trajectories", "export", "--no-redact"]).stdout).unwrap();
    assert!(raw_triples.contains("planted-dotenv-value-77"));
    let raw_chat = String::from_utf8(
        run(&["trajectories", "export", "--format", "chat", "--no-redact"]).stdout,
    )
    .unwrap();
    assert!(raw_chat.contains("sk-planted0123456789abcdefXYZ"));
}

mod editor {
    //! In the editor: an undo to a checkpoint takes back only the later edit, and edits the
    //! editor refuses count as rejected.

    use serde_json::{Value, json};
    use wright_tests::provider::{Dialect, Reply, ScriptedProvider, Turn};
    use wright_tests::session::{
        agent_spawn, applies, apply_edit_request, finished, run, start_agent_server,
        versioned_edits,
    };
    use wright_tests::{Editor, TempDir, file_uri, workspace_command};

    const LIB: &str = "pub fn add(a: i32, b: i32) -> i32 {\n    a - b\n}\n";

    fn edit_turn(id: &str, old: &str, new: &str) -> Reply {
        Reply::stream(
            Dialect::OpenAi,
            &Turn::default().tool_call(
                id,
                "edit",
                &json!({"path": "src/lib.rs", "old_string": old, "new_string": new}).to_string(),
            ),
        )
    }

    fn stats(dir: &TempDir) -> Value {
        let output = workspace_command(
            &wright_tests::wright_bin(),
            dir,
            &["stats", "--json"],
            None,
            "",
        )
        .output()
        .unwrap();
        assert!(output.status.success());
        serde_json::from_slice(&output.stdout).unwrap()
    }

    fn start(dir: &TempDir, provider: &ScriptedProvider) -> (Editor, String) {
        let mut editor = start_agent_server(&agent_spawn(dir, provider), versioned_edits());
        let uri = file_uri(&dir.path().join("ws/src/lib.rs"));
        editor.open(&uri, "rust", 1, LIB);
        (editor, uri)
    }

    #[test]
    fn an_undo_to_a_checkpoint_undoes_only_the_later_edit_in_the_stats() {
        let dir = TempDir::new("learning-editor-undo");
        dir.write("ws/src/lib.rs", LIB);
        let provider = ScriptedProvider::start();
        provider.push(edit_turn("e1", "    a - b\n", "    a + b\n"));
        provider.push(edit_turn("e2", "pub fn add", "pub fn sum"));
        provider.push(Reply::stream(Dialect::OpenAi, &Turn::text(&["Done."])));
        let (mut editor, uri) = start(&dir, &provider);
        let session = run(&mut editor, "fix and rename add");
        let first = LIB.replace("a - b", "a + b");
        let second = first.replace("pub fn add", "pub fn sum");
        for (version, text) in [(2, &first), (3, &second)] {
            let (id, _) = apply_edit_request(&mut editor);
            applies(&mut editor, &id, &uri, version, text);
        }
        assert_eq!(finished(&mut editor, &session)["status"], "done");
        let undo = editor.send_request(
            "wright/undo",
            json!({"sessionId": session, "checkpoint": 1}),
        );
        let (id, _) = apply_edit_request(&mut editor);
        applies(&mut editor, &id, &uri, 4, &first);
        let undone = editor.expect_response(&json!(undo));
        assert_eq!(undone["result"]["files"], json!(["src/lib.rs"]), "{undone}");
        // The editor's view of the same: `wright/stats`, with the day's kept and undone.
        let editor_stats = editor.request("wright/stats", json!({}));
        assert_eq!(
            editor_stats["edits"],
            json!({"proposed": 2, "applied": 2, "rejected": 0, "undone": 1, "kept": 1}),
            "{editor_stats}"
        );
        assert_eq!(editor_stats["sinceDays"], 30);
        let days = editor_stats["days"].as_array().unwrap();
        assert_eq!(days.len(), 1, "{editor_stats}");
        assert_eq!(
            (&days[0]["kept"], &days[0]["undone"]),
            (&json!(1), &json!(1))
        );
        assert_eq!(days[0]["day"].as_str().unwrap().len(), 10);
        editor.shutdown();

        let stats = stats(&dir);
        assert_eq!(stats["edits"], editor_stats["edits"], "{stats}");
    }

    #[test]
    fn edits_the_editor_refuses_are_rejected_in_the_stats() {
        let dir = TempDir::new("learning-editor-refused");
        dir.write("ws/src/lib.rs", LIB);
        let provider = ScriptedProvider::start();
        provider.push(edit_turn("e1", "    a - b\n", "    a + b\n"));
        provider.push(edit_turn("e2", "    a - b\n", "    b + a\n"));
        provider.push(Reply::stream(Dialect::OpenAi, &Turn::text(&["Gave up."])));
        let (mut editor, uri) = start(&dir, &provider);
        let session = run(&mut editor, "fix add");
        // The user typed meanwhile: the stale edit is refused, and its retry not confirmed.
        let (id, _) = apply_edit_request(&mut editor);
        let typed = format!("// typed by the user\n{LIB}");
        editor.notify(
            "textDocument/didChange",
            json!({"textDocument": {"uri": uri, "version": 2}, "contentChanges": [{"text": typed}]}),
        );
        editor.respond(
            &id,
            json!({"applied": false, "failureReason": "version mismatch"}),
        );
        let (id, _) = apply_edit_request(&mut editor);
        editor.respond(&id, json!({"applied": true}));
        assert_eq!(finished(&mut editor, &session)["status"], "done");
        editor.shutdown();

        let stats = stats(&dir);
        assert_eq!(
            stats["edits"],
            json!({"proposed": 2, "applied": 0, "rejected": 2, "undone": 0, "kept": 0}),
            "{stats}"
        );
    }

    #[test]
    fn in_review_an_accepted_proposal_is_applied_and_kept_and_a_rejected_one_rejected() {
        let dir = TempDir::new("learning-editor-review");
        dir.write("ws/src/lib.rs", LIB);
        let provider = ScriptedProvider::start();
        provider.push(edit_turn("e1", "    a - b\n", "    a + b\n"));
        provider.push(Reply::stream(Dialect::OpenAi, &Turn::text(&["Proposed."])));
        let (mut editor, uri) = start(&dir, &provider);
        let review = |editor: &mut Editor, task: &str| {
            let run = editor.request(
                "wright/agentRun",
                json!({"task": task, "applyMode": "review"}),
            );
            let session = run["sessionId"].as_str().unwrap().to_owned();
            assert_eq!(finished(editor, &session)["status"], "done");
            session
        };
        let first = review(&mut editor, "fix add");
        let accept = editor.send_request("wright/editsAccept", json!({"sessionId": first}));
        let (id, _) = apply_edit_request(&mut editor);
        let fixed = LIB.replace("a - b", "a + b");
        applies(&mut editor, &id, &uri, 2, &fixed);
        let accepted = editor.expect_response(&json!(accept));
        assert_eq!(
            accepted["result"]["files"],
            json!(["src/lib.rs"]),
            "{accepted}"
        );

        provider.push(edit_turn("e2", "pub fn add", "pub fn sum"));
        provider.push(Reply::stream(Dialect::OpenAi, &Turn::text(&["Proposed."])));
        let second = review(&mut editor, "rename add");
        let rejected = editor.request("wright/editsReject", json!({"sessionId": second}));
        assert_eq!(rejected["files"], json!(["src/lib.rs"]), "{rejected}");
        assert_eq!(editor.text_of(&uri), (2, fixed));
        editor.shutdown();

        let stats = stats(&dir);
        assert_eq!(
            stats["edits"],
            json!({"proposed": 2, "applied": 1, "rejected": 1, "undone": 0, "kept": 1}),
            "{stats}"
        );
        // Only the accepted edit is a triple.
        let exported = workspace_command(
            &wright_tests::wright_bin(),
            &dir,
            &["trajectories", "export"],
            None,
            "",
        )
        .output()
        .unwrap();
        let triples: Vec<&str> = std::str::from_utf8(&exported.stdout)
            .unwrap()
            .lines()
            .collect();
        assert_eq!(triples.len(), 1, "{triples:?}");
        let triple: Value = serde_json::from_str(triples[0]).unwrap();
        assert_eq!(triple["kept"], true);
        assert_eq!(triple["final"], LIB.replace("a - b", "a + b"));
    }
}
