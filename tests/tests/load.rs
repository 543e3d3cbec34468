//! Many sessions at once on one server: 32 concurrent sessions, each editing its own file
//! through its own script, while the editor keeps typing and asking for symbols. Every session
//! finishes `done` with its own edit and nobody else's, the editor's buffer holds exactly what
//! was typed, and the journals parse. Correctness only: the latency under load is measured by
//! `cargo xtask bench load`.

use serde_json::json;
use wright_tests::provider::{Dialect, Reply, Turn};
use wright_tests::session::{
    agent_spawn, finished_event, journal, server_writes_unopened_files, start_agent_server,
};
use wright_tests::{TempDir, file_uri};

const SESSIONS: usize = 32;

#[test]
fn thirty_two_concurrent_sessions_all_finish_with_their_own_results() {
    let dir = TempDir::new("load");
    for n in 0..SESSIONS {
        dir.write(
            &format!("ws/src/f{n:02}.rs"),
            &format!("pub fn value_{n:02}() -> u32 {{\n    0\n}}\n"),
        );
    }
    dir.write("ws/src/typed.rs", "");
    let provider = wright_tests::provider::ScriptedProvider::start();
    for n in 0..SESSIONS {
        let marker = format!("[session {n:02}]");
        let path = format!("src/f{n:02}.rs");
        let turn = |name: &str, arguments: serde_json::Value| {
            Reply::stream(
                Dialect::OpenAi,
                &Turn::default().tool_call(&format!("c{n}"), name, &arguments.to_string()),
            )
        };
        provider.push_for(
            &marker,
            turn(
                "edit",
                json!({"path": path, "old_string": "    0\n", "new_string": format!("    {}\n", 100 + n)}),
            ),
        );
        provider.push_for(&marker, turn("read_file", json!({"path": path})));
        provider.push_for(
            &marker,
            Reply::stream(Dialect::OpenAi, &Turn::text(&[&format!("Set {n:02}.")])),
        );
    }
    let mut editor = start_agent_server(
        &agent_spawn(&dir, &provider),
        server_writes_unopened_files(),
    );
    let typed_uri = file_uri(&dir.path().join("ws/src/typed.rs"));
    editor.open(&typed_uri, "rust", 1, "");

    let sessions: Vec<String> = (0..SESSIONS)
        .map(|n| {
            let run = editor.request(
                "wright/agentRun",
                json!({"task": format!("[session {n:02}] set the value of f{n:02}.rs to {}", 100 + n)}),
            );
            run["sessionId"].as_str().unwrap().to_owned()
        })
        .collect();
    // The editor keeps working meanwhile.
    let mut typed = String::new();
    for version in 2..100 {
        let line = format!("// line {version}\n");
        let end = (version - 2) as u32;
        editor.change(&typed_uri, version, (end, 0), (end, 0), &line);
        typed.push_str(&line);
        if version % 10 == 0 {
            editor.request("workspace/symbol", json!({"query": "value"}));
            assert_eq!(
                editor.text_of(&typed_uri),
                (i64::from(version), typed.clone())
            );
        }
    }

    for (n, session) in sessions.iter().enumerate() {
        let outcome = finished_event(&mut editor, session);
        assert_eq!(outcome["status"], "done", "session {n}: {outcome:#}");
        assert_eq!(outcome["message"], format!("Set {n:02}."), "session {n}");
        assert_eq!(
            outcome["filesChanged"],
            json!([format!("src/f{n:02}.rs")]),
            "session {n}"
        );
        let lines = journal(&dir, session, false);
        assert_eq!(lines.last().unwrap()["kind"], "end", "session {n}");
    }
    editor.discard(|m| m["method"] == "wright/agentEvent" || m["method"] == "window/logMessage");
    for n in 0..SESSIONS {
        assert_eq!(
            std::fs::read_to_string(dir.path().join(format!("ws/src/f{n:02}.rs"))).unwrap(),
            format!("pub fn value_{n:02}() -> u32 {{\n    {}\n}}\n", 100 + n),
            "session {n}'s edit"
        );
    }
    // Each session's model saw its own file read back, never another's.
    for request in provider.requests() {
        let body = request.body_text();
        let own: Vec<usize> = (0..SESSIONS)
            .filter(|n| body.contains(&format!("[session {n:02}]")))
            .collect();
        assert_eq!(own.len(), 1, "one session per request");
        let messages = request.json()["messages"].clone();
        for result in messages
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "tool")
        {
            let content = result["content"].as_str().unwrap();
            for other in (0..SESSIONS).filter(|m| *m != own[0]) {
                assert!(
                    !content.contains(&format!("value_{other:02}")),
                    "session {} saw f{other:02}.rs: {content}",
                    own[0]
                );
            }
        }
    }
    assert_eq!(provider.pending_replies(), 0);
    assert_eq!(editor.text_of(&typed_uri), (99, typed));
    editor.shutdown();
}
