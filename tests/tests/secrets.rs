//! Secrets handling end to end: a session runs with API keys in the server's environment,
//! trace logging to a file, a command that dumps its environment, and a provider that
//! refuses the key. The key reaches the provider in its header and nowhere else: not the
//! log, the journal, the artifacts or any file the server wrote, not an event, log message or
//! answer the editor got, not a request body, not the sandboxed command's environment.

use std::path::Path;

use serde_json::{Value, json};
use wright_tests::provider::{Dialect, Fault, Reply, ScriptedProvider, Turn};
use wright_tests::session::{TEST_KEY, agent_spawn, run, start_agent_server, versioned_edits};
use wright_tests::{TempDir, file_uri};

const OTHER_KEY: &str = "sk-ant-other-secret-9876543210";

/// Every file under `dir` that contains `needle`.
fn files_containing(dir: &Path, needle: &str, found: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files_containing(&path, needle, found);
        } else if std::fs::read(&path)
            .is_ok_and(|bytes| bytes.windows(needle.len()).any(|w| w == needle.as_bytes()))
        {
            found.push(path.display().to_string());
        }
    }
}

#[test]
fn api_keys_stay_out_of_logs_journals_events_and_the_sandbox() {
    let dir = TempDir::new("secrets");
    dir.write(
        "ws/src/lib.rs",
        "pub fn add(a: i32, b: i32) -> i32 { a + b }\n",
    );
    let provider = ScriptedProvider::start();
    let call = |name: &str, arguments: Value| {
        Reply::stream(
            Dialect::OpenAi,
            &Turn::default().tool_call("c", name, &arguments.to_string()),
        )
    };
    provider.push(call(
        "run_command",
        json!({"command": "env; tr '\\0' '\\n' < /proc/self/environ; echo END-OF-ENV"}),
    ));
    provider.push(call("read_file", json!({"path": "src/lib.rs"})));
    provider.push(Reply::fault(Dialect::OpenAi, Fault::Unauthorized));

    let log = dir.path().join("wright.log");
    let mut spawn = agent_spawn(&dir, &provider);
    spawn.args = vec!["--log-file".into(), log.display().to_string()];
    spawn.env.push(("WRIGHT_LOG".into(), "trace".into()));
    spawn
        .env
        .push(("ANTHROPIC_API_KEY".into(), OTHER_KEY.into()));
    let mut editor = start_agent_server(&spawn, versioned_edits());
    let uri = file_uri(&dir.path().join("ws/src/lib.rs"));
    editor.open(
        &uri,
        "rust",
        1,
        "pub fn add(a: i32, b: i32) -> i32 { a + b }\n",
    );
    let session = run(&mut editor, "look at the environment");

    // Everything the editor is told, until the session ends.
    let mut told = Vec::new();
    loop {
        let message = editor.expect("a notification or request from the server", |m| {
            m.get("method").is_some()
        });
        if message["method"] == "window/showMessageRequest" {
            editor.respond(&message["id"], Value::Null);
        }
        let done = message["method"] == "wright/agentEvent"
            && message["params"]["sessionId"] == session
            && message["params"]["kind"] == "finished";
        told.push(message);
        if done {
            break;
        }
    }
    let outcome = &told.last().unwrap()["params"]["outcome"];
    assert_eq!(outcome["status"], "failed", "{outcome}");
    assert!(
        outcome["reason"]
            .as_str()
            .unwrap()
            .contains("OPENAI_API_KEY"),
        "the reason names the variable: {outcome}"
    );
    told.push(editor.status());
    told.push(editor.request("wright/sessions", Value::Null));
    let stderr = editor.stderr_handle();
    assert!(editor.shutdown().success());

    // The command ran, and its environment reached the model: without the keys.
    let requests = provider.requests();
    let env_dump = requests[1].json()["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap().to_owned())
        .unwrap();
    assert!(
        env_dump.contains("END-OF-ENV") && env_dump.contains("PATH="),
        "{env_dump}"
    );
    for key in [TEST_KEY, OTHER_KEY] {
        assert!(!env_dump.contains(key), "the sandbox saw a key: {env_dump}");
        assert!(
            !env_dump.contains("API_KEY"),
            "a key variable reached the sandbox: {env_dump}"
        );
        for (n, request) in requests.iter().enumerate() {
            assert!(
                !request.body_text().contains(key),
                "request {n}'s body holds a key"
            );
        }
        for message in &told {
            assert!(
                !message.to_string().contains(key),
                "the editor was told a key: {message}"
            );
        }
        let mut found = Vec::new();
        files_containing(dir.path(), key, &mut found);
        assert!(found.is_empty(), "files holding a key: {found:?}");
        assert!(!stderr.text().contains(key));
    }
    // The key was in use (this test would pass vacuously otherwise), in its header only.
    assert_eq!(
        requests[0].header("authorization"),
        Some(format!("Bearer {TEST_KEY}").as_str())
    );
    let log = std::fs::read_to_string(&log).unwrap();
    assert!(
        log.contains("TRACE") && log.contains("wright/agentRun"),
        "trace logging happened"
    );
}
