//! The agent inside the editor: `wright/agentRun` against the scripted provider, the edit
//! arriving as a versioned `workspace/applyEdit` on the open (unsaved) document, confirmed by
//! the `didChange` that follows; an edit the editor refuses (the user typed) reported to the
//! model; `wright/undo` through the same path; `wright/sessions`; cancellation; approvals
//! (network and configured commands, "allow always" remembered).

use serde_json::{Value, json};
use wright_tests::provider::{Dialect, Reply, ScriptedProvider, Turn};
use wright_tests::session::{
    agent_spawn, applies, apply_edit_request, apply_text_edits, finished, journal, run,
    start_agent_server, versioned_edits,
};
use wright_tests::{Editor, TempDir, file_uri};

const LIB: &str = "pub fn add(a: i32, b: i32) -> i32 {\n    a - b\n}\n";

fn start(dir: &TempDir, provider: &ScriptedProvider) -> Editor {
    start_with(dir, provider, versioned_edits())
}

/// The server on `<dir>/ws`, its model the scripted provider, its cache and data in `dir`,
/// initialized with `capabilities`.
fn start_with(dir: &TempDir, provider: &ScriptedProvider, capabilities: Value) -> Editor {
    start_agent_server(&agent_spawn(dir, provider), capabilities)
}

fn edit_turn(id: &str, old: &str, new: &str) -> Turn {
    Turn::default().tool_call(
        id,
        "edit",
        &json!({"path": "src/lib.rs", "old_string": old, "new_string": new}).to_string(),
    )
}

/// Waits for the session's next `wright/agentEvent` of `kind`; returns its params.
fn agent_event(editor: &mut Editor, session: &str, kind: &str) -> Value {
    editor.expect(&format!("a {kind} event"), |m| {
        m["method"] == "wright/agentEvent"
            && m["params"]["sessionId"] == session
            && m["params"]["kind"] == kind
    })["params"]
        .clone()
}

#[test]
fn an_agent_edit_lands_in_the_open_buffer_versioned_and_undo_takes_it_back() {
    let dir = TempDir::new("lsp-agent");
    dir.write("ws/src/lib.rs", "on disk, not what the editor shows\n");
    let provider = ScriptedProvider::start();
    provider.push(Reply::stream(
        Dialect::OpenAi,
        &edit_turn("e1", "    a - b\n", "    a + b\n"),
    ));
    provider.push(Reply::stream(Dialect::OpenAi, &Turn::text(&["Fixed add."])));
    let mut editor = start(&dir, &provider);
    let uri = file_uri(&dir.path().join("ws/src/lib.rs"));
    // The buffer differs from the disk: the agent must work on what the editor shows.
    editor.open(&uri, "rust", 7, LIB);

    let run = editor.request(
        "wright/agentRun",
        json!({"task": "fix add", "textDocument": {"uri": uri}}),
    );
    let session = run["sessionId"].as_str().unwrap().to_owned();

    let (id, change) = apply_edit_request(&mut editor);
    assert_eq!(change["textDocument"]["uri"], uri);
    assert_eq!(
        change["textDocument"]["version"], 7,
        "computed against the version seen"
    );
    assert_eq!(
        change["edits"],
        json!([{"range": {"start": {"line": 1, "character": 6}, "end": {"line": 1, "character": 7}}, "newText": "+"}]),
        "the smallest edit: the editor keeps the cursor and marks around it"
    );
    let fixed = LIB.replace("a - b", "a + b");
    // As editors do: the change, then the answer.
    applies(&mut editor, &id, &uri, 8, &fixed);
    // The confirmation is an input of the session's loop: sent on, and journaled.
    let applied = agent_event(&mut editor, &session, "editApplied");
    assert_eq!(applied["paths"], json!(["src/lib.rs"]), "{applied}");

    let outcome = finished(&mut editor, &session);
    assert_eq!(outcome["status"], "done", "{outcome}");
    assert_eq!(outcome["filesChanged"], json!(["src/lib.rs"]));
    let journaled: Vec<Value> = journal(&dir, &session, false)
        .into_iter()
        .filter(|line| line["kind"] == "tool")
        .collect();
    assert_eq!(
        journaled,
        [json!({"kind": "tool", "event": {"kind": "editApplied", "paths": ["src/lib.rs"]}})]
    );
    let result = &provider.requests()[1].json()["messages"];
    let tool = result
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap();
    assert!(
        tool["content"]
            .as_str()
            .unwrap()
            .contains("update src/lib.rs"),
        "{tool}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("ws/src/lib.rs")).unwrap(),
        "on disk, not what the editor shows\n",
        "the edit went to the buffer, not the disk"
    );

    let sessions = editor.request("wright/sessions", json!(null));
    assert_eq!(sessions["sessions"][0]["status"], "done");
    assert_eq!(sessions["sessions"][0]["task"], "fix add");

    // Undo goes through the editor too.
    let undo_id = editor.send_request("wright/undo", json!({}));
    let (id, change) = apply_edit_request(&mut editor);
    assert_eq!(change["textDocument"]["version"], 8);
    applies(&mut editor, &id, &uri, 9, LIB);
    let undone = editor.expect_response(&json!(undo_id));
    assert_eq!(undone["result"]["files"], json!(["src/lib.rs"]), "{undone}");
    let (version, text) = editor.text_of(&uri);
    assert_eq!((version, text.as_str()), (9, LIB));
    editor.shutdown();
}

#[test]
fn a_refused_or_unconfirmed_edit_is_reported_to_the_model_and_nothing_is_lost() {
    let dir = TempDir::new("lsp-agent-stale");
    dir.write("ws/src/lib.rs", LIB);
    let provider = ScriptedProvider::start();
    provider.push(Reply::stream(
        Dialect::OpenAi,
        &edit_turn("e1", "    a - b\n", "    a + b\n"),
    ));
    provider.push(Reply::stream(
        Dialect::OpenAi,
        &edit_turn("e2", "    a - b\n", "    b + a\n"),
    ));
    provider.push(Reply::stream(Dialect::OpenAi, &Turn::text(&["Gave up."])));
    let mut editor = start(&dir, &provider);
    let uri = file_uri(&dir.path().join("ws/src/lib.rs"));
    editor.open(&uri, "rust", 1, LIB);
    let session = run(&mut editor, "fix add");

    // The user typed meanwhile: the editor refuses the stale version.
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
    // The retry is computed against version 2; this editor claims success but changes nothing
    // (as Neovim does for an edit it skips): without a matching didChange it does not count.
    let (id, change) = apply_edit_request(&mut editor);
    assert_eq!(change["textDocument"]["version"], 2);
    editor.respond(&id, json!({"applied": true}));
    for _ in 0..2 {
        let rejected = agent_event(&mut editor, &session, "editRejected");
        assert_eq!(rejected["paths"], json!(["src/lib.rs"]), "{rejected}");
        assert!(
            rejected["reason"]
                .as_str()
                .unwrap()
                .contains("changed since the edit was planned"),
            "{rejected}"
        );
    }

    let outcome = finished(&mut editor, &session);
    assert_eq!(outcome["status"], "done");
    assert_eq!(outcome["filesChanged"], json!([]), "{outcome}");
    let messages = provider.requests()[2].json()["messages"].clone();
    let results: Vec<&str> = messages
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(results.len(), 2);
    for result in results {
        assert!(
            result.contains("changed since the edit was planned"),
            "{result}"
        );
    }
    let (version, text) = editor.text_of(&uri);
    assert_eq!(
        (version, text),
        (2, typed),
        "the user's keystrokes are all there"
    );
    editor.shutdown();
}

#[test]
fn runs_with_an_unknown_model_or_apply_mode_are_refused_with_a_reason() {
    let dir = TempDir::new("lsp-agent-refused");
    dir.write("ws/src/lib.rs", LIB);
    let provider = ScriptedProvider::start();
    let mut editor = start(&dir, &provider);
    let mode = editor.request_response(
        "wright/agentRun",
        json!({"task": "x", "applyMode": "sideways"}),
    );
    assert!(
        mode["error"]["message"]
            .as_str()
            .unwrap()
            .contains("\"auto\" or \"review\""),
        "{mode}"
    );
    let unknown =
        editor.request_response("wright/agentRun", json!({"task": "x", "model": "nonsense"}));
    assert!(unknown.get("error").is_some(), "{unknown}");
    let cancel = editor.request(
        "wright/agentCancel",
        json!({"sessionId": "no-such-session"}),
    );
    assert_eq!(cancel["cancelled"], false);
    let undo = editor.request_response("wright/undo", json!({}));
    assert!(
        undo["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no agent session"),
        "{undo}"
    );
    editor.shutdown();
}

#[test]
fn cancelling_a_session_mid_stream_hangs_up_on_the_provider_at_once() {
    let dir = TempDir::new("lsp-agent-cancel");
    dir.write("ws/src/lib.rs", LIB);
    let provider = ScriptedProvider::start();
    // A model that would talk for a minute, one word a second; it stalls after its first
    // words so the test does not depend on timing.
    let words: Vec<String> = (0..60).map(|n| format!("word{n} ")).collect();
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    provider.push(Reply::stream(Dialect::OpenAi, &Turn::text(&words)).stall_after(3));
    let mut editor = start(&dir, &provider);
    let session = run(&mut editor, "talk");
    editor.expect("the model's first words", |m| {
        m["method"] == "wright/agentEvent" && m["params"]["kind"] == "textDelta"
    });
    let cancel = editor.request("wright/agentCancel", json!({"sessionId": session}));
    assert_eq!(cancel["cancelled"], true);
    let outcome = finished(&mut editor, &session);
    assert_eq!(outcome["status"], "cancelled", "{outcome}");
    // The HTTP request was dropped, not waited out.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !provider
        .outcomes()
        .iter()
        .any(|o| matches!(o, wright_tests::provider::Outcome::ClientClosed { .. }))
    {
        assert!(
            std::time::Instant::now() < deadline,
            "{:?}",
            provider.outcomes()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let sessions = editor.request("wright/sessions", json!(null));
    assert_eq!(sessions["sessions"][0]["status"], "cancelled");
    editor.shutdown();
}

#[test]
fn a_session_of_a_killed_server_is_listed_as_interrupted_and_resumes() {
    let dir = TempDir::new("lsp-agent-resume");
    dir.write("ws/src/lib.rs", LIB);
    let provider = ScriptedProvider::start();
    provider.push(Reply::stream(
        Dialect::OpenAi,
        &Turn::default().tool_call("l", "list_dir", "{}"),
    ));
    provider.push(Reply::stream(Dialect::OpenAi, &Turn::text(&["never"])).stall_after(0));
    let mut editor = start(&dir, &provider);
    let session = run(&mut editor, "look around");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while provider.requests().len() < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "the second request never came"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    editor.kill();

    provider.push(Reply::stream(Dialect::OpenAi, &Turn::text(&["Looked."])));
    let mut editor = start(&dir, &provider);
    let sessions = editor.request("wright/sessions", json!(null));
    assert_eq!(
        sessions["sessions"][0]["sessionId"],
        session.as_str(),
        "{sessions}"
    );
    assert_eq!(sessions["sessions"][0]["status"], "interrupted");
    assert_eq!(sessions["sessions"][0]["task"], "look around");
    let resumed = editor.request("wright/agentRun", json!({"task": "", "sessionId": session}));
    assert_eq!(resumed["sessionId"], session.as_str());
    let outcome = finished(&mut editor, &session);
    assert_eq!(outcome["status"], "done", "{outcome}");
    let requests = provider.requests();
    let (before, after) = (requests[1].json(), requests[2].json());
    let before = before["messages"].as_array().unwrap();
    assert_eq!(
        &after["messages"].as_array().unwrap()[..before.len()],
        &before[..]
    );
    let sessions = editor.request("wright/sessions", json!(null));
    assert_eq!(
        sessions["sessions"].as_array().unwrap().len(),
        1,
        "{sessions}"
    );
    assert_eq!(sessions["sessions"][0]["status"], "done");
    editor.shutdown();
}

#[test]
fn review_mode_holds_edits_until_accepted_and_reject_drops_them() {
    let dir = TempDir::new("lsp-agent-review");
    dir.write("ws/src/lib.rs", LIB);
    let provider = ScriptedProvider::start();
    let session_turns = |provider: &ScriptedProvider| {
        provider.push(Reply::stream(
            Dialect::OpenAi,
            &edit_turn("e1", "    a - b\n", "    a + b\n"),
        ));
        // The session reads its own proposal back.
        provider.push(Reply::stream(
            Dialect::OpenAi,
            &Turn::default().tool_call("r1", "read_file", r#"{"path": "src/lib.rs"}"#),
        ));
        provider.push(Reply::stream(Dialect::OpenAi, &Turn::text(&["Proposed."])));
    };
    session_turns(&provider);
    let mut editor = start(&dir, &provider);
    let uri = file_uri(&dir.path().join("ws/src/lib.rs"));
    editor.open(&uri, "rust", 1, LIB);
    let run = editor.request(
        "wright/agentRun",
        json!({"task": "fix add", "applyMode": "review"}),
    );
    let session = run["sessionId"].as_str().unwrap().to_owned();
    let proposed = editor.expect("an editProposed event", |m| {
        m["method"] == "wright/agentEvent" && m["params"]["kind"] == "editProposed"
    });
    let fixed = LIB.replace("a - b", "a + b");
    assert_eq!(proposed["params"]["path"], "src/lib.rs");
    assert_eq!(proposed["params"]["before"], LIB);
    assert_eq!(proposed["params"]["after"], fixed.as_str());
    assert_eq!(finished(&mut editor, &session)["status"], "done");
    let read_back = &provider.requests()[2].json()["messages"];
    assert!(
        read_back.to_string().contains("a + b"),
        "the session reads its own proposal"
    );
    assert_eq!(
        editor.text_of(&uri),
        (1, LIB.to_owned()),
        "nothing applied yet"
    );

    let accept_id = editor.send_request("wright/editsAccept", json!({"sessionId": session}));
    let (id, change) = apply_edit_request(&mut editor);
    assert_eq!(change["textDocument"]["version"], 1);
    applies(&mut editor, &id, &uri, 2, &fixed);
    let accepted = editor.expect_response(&json!(accept_id));
    assert_eq!(
        accepted["result"]["files"],
        json!(["src/lib.rs"]),
        "{accepted}"
    );

    // A second review session, rejected: the buffer keeps the accepted text.
    session_turns(&provider);
    let run = editor.request(
        "wright/agentRun",
        json!({"task": "fix add again", "applyMode": "review"}),
    );
    let second = run["sessionId"].as_str().unwrap().to_owned();
    finished(&mut editor, &second);
    let rejected = editor.request("wright/editsReject", json!({"sessionId": second}));
    assert_eq!(
        rejected["files"],
        json!([]),
        "nothing to hold: a + b was already there"
    );
    assert_eq!(editor.text_of(&uri), (2, fixed));
    let auto = editor.request_response("wright/editsAccept", json!({"sessionId": "nope"}));
    assert!(auto.get("error").is_some(), "{auto}");
    editor.shutdown();
}

#[test]
fn commands_see_the_unsaved_buffers_in_a_snapshot_and_ask_before_using_the_network() {
    let dir = TempDir::new("lsp-agent-commands");
    dir.write("ws/src/lib.rs", "on disk\n");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let provider = ScriptedProvider::start();
    let call = |id: &str, command: &str| {
        Turn::default().tool_call(id, "run_command", &json!({"command": command}).to_string())
    };
    provider.push(Reply::stream(
        Dialect::OpenAi,
        &call("c1", "cat src/lib.rs && echo built > out.txt"),
    ));
    provider.push(Reply::stream(
        Dialect::OpenAi,
        &call(
            "c2",
            &format!("bash -c 'echo hi > /dev/tcp/127.0.0.1/{port}'"),
        ),
    ));
    provider.push(Reply::stream(Dialect::OpenAi, &Turn::text(&["Done."])));
    let root = dir.path().join("ws");
    let mut editor = start_with(
        &dir,
        &provider,
        json!({
            "workspace": {"workspaceEdit": {"documentChanges": true}},
            "experimental": {"wrightRequestApproval": true},
        }),
    );
    let uri = file_uri(&root.join("src/lib.rs"));
    editor.open(&uri, "rust", 1, "unsaved in the editor\n");
    let session = run(&mut editor, "build");

    let ask = editor.expect("a wright/requestApproval request", |m| {
        m["method"] == "wright/requestApproval" && m.get("id").is_some()
    });
    assert_eq!(ask["params"]["kind"], "network", "{ask}");
    assert_eq!(ask["params"]["sessionId"], session.as_str());
    editor.respond(&ask["id"], json!({"decision": "allow"}));
    let approval = agent_event(&mut editor, &session, "approval");
    assert_eq!(approval["decision"], "allow", "{approval}");
    assert!(
        approval["command"].as_str().unwrap().contains("/dev/tcp"),
        "{approval}"
    );
    assert_eq!(finished(&mut editor, &session)["status"], "done");

    let results = provider.requests()[2].json()["messages"].clone();
    let results: Vec<&str> = results
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert!(
        results[0].contains("unsaved in the editor"),
        "{}",
        results[0]
    );
    assert!(results[0].contains("added out.txt"), "{}", results[0]);
    assert!(
        !root.join("out.txt").exists(),
        "the snapshot keeps the workspace untouched"
    );
    assert!(results[1].contains("as the user allowed"), "{}", results[1]);
    assert!(results[1].contains("exit code 0"), "{}", results[1]);
    listener.set_nonblocking(true).unwrap();
    assert!(
        listener.accept().is_ok(),
        "the allowed run reached the host listener"
    );
    editor.shutdown();
}

/// The last tool results the model was sent, oldest first.
fn tool_results(provider: &ScriptedProvider) -> Vec<String> {
    provider.requests().last().unwrap().tool_results()
}

/// "Allow always" is remembered for the session: the second command that needs the network
/// runs with it, and the editor is not asked again.
#[test]
fn a_network_access_allowed_always_is_not_asked_again_in_the_session() {
    let dir = TempDir::new("lsp-agent-allow-always");
    dir.write("ws/src/lib.rs", LIB);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let provider = ScriptedProvider::start();
    for id in ["c1", "c2"] {
        provider.push(Reply::stream(
            Dialect::OpenAi,
            &Turn::default().tool_call(
                id,
                "run_command",
                &json!({"command": format!("bash -c 'echo {id} > /dev/tcp/127.0.0.1/{port}'")})
                    .to_string(),
            ),
        ));
    }
    provider.push(Reply::stream(Dialect::OpenAi, &Turn::text(&["Done."])));
    let mut editor = start_with(
        &dir,
        &provider,
        json!({"experimental": {"wrightRequestApproval": true}}),
    );
    let session = run(&mut editor, "connect twice");
    let ask = editor.expect("a wright/requestApproval request", |m| {
        m["method"] == "wright/requestApproval" && m.get("id").is_some()
    });
    assert_eq!(ask["params"]["kind"], "network", "{ask}");
    editor.respond(&ask["id"], json!({"decision": "allowAlways"}));
    let approval = agent_event(&mut editor, &session, "approval");
    assert_eq!(approval["decision"], "allowAlways", "{approval}");
    assert_eq!(finished(&mut editor, &session)["status"], "done");
    assert!(
        editor
            .try_take(|m| m["method"] == "wright/requestApproval")
            .is_none(),
        "the second command was not asked about"
    );
    let results = tool_results(&provider);
    assert!(
        results[0].contains("as the user allowed") && results[0].contains("exit code 0"),
        "{}",
        results[0]
    );
    // The second ran with the network from the start: nothing refused, no note.
    assert!(results[1].contains("exit code 0"), "{}", results[1]);
    assert!(!results[1].contains("sandbox:"), "{}", results[1]);
    listener.set_nonblocking(true).unwrap();
    let mut received = Vec::new();
    while let Ok((mut stream, _)) = listener.accept() {
        stream.set_nonblocking(false).unwrap();
        let mut text = String::new();
        std::io::Read::read_to_string(&mut stream, &mut text).unwrap();
        received.push(text.trim().to_owned());
    }
    assert!(
        received.contains(&"c1".to_owned()) && received.contains(&"c2".to_owned()),
        "both commands reached the host listener: {received:?}"
    );
    editor.shutdown();
}

/// A command `agent.approve_commands` names is asked about through `wright/requestApproval`
/// before it runs, every time until it is allowed always: denied, it does not run.
#[test]
fn commands_the_configuration_names_are_asked_about_before_they_run() {
    let dir = TempDir::new("lsp-agent-approve-commands");
    dir.write("ws/src/lib.rs", LIB);
    dir.write(
        "ws/.wright/config.toml",
        "[agent]\napprove_commands = \"git push*; echo approved*\"\n",
    );
    let provider = ScriptedProvider::start();
    for id in ["d", "a"] {
        provider.push(Reply::stream(
            Dialect::OpenAi,
            &Turn::default().tool_call(
                id,
                "run_command",
                &json!({"command": format!("echo approved {id}")}).to_string(),
            ),
        ));
    }
    provider.push(Reply::stream(
        Dialect::OpenAi,
        &Turn::default().tool_call("free", "run_command", r#"{"command": "echo free"}"#),
    ));
    provider.push(Reply::stream(Dialect::OpenAi, &Turn::text(&["Done."])));
    let mut editor = start_with(
        &dir,
        &provider,
        json!({"experimental": {"wrightRequestApproval": true}}),
    );
    let session = run(&mut editor, "echo things");
    for (command, decision) in [("echo approved d", "deny"), ("echo approved a", "allow")] {
        let ask = editor.expect("a wright/requestApproval request", |m| {
            m["method"] == "wright/requestApproval" && m.get("id").is_some()
        });
        assert_eq!(ask["params"]["kind"], "command", "{ask}");
        assert_eq!(ask["params"]["command"], command, "{ask}");
        assert_eq!(ask["params"]["sessionId"], session.as_str());
        assert!(
            ask["params"]["reason"]
                .as_str()
                .unwrap()
                .contains("`echo approved*`"),
            "{ask}"
        );
        editor.respond(&ask["id"], json!({"decision": decision}));
    }
    assert_eq!(finished(&mut editor, &session)["status"], "done");
    assert!(
        editor
            .try_take(|m| m["method"] == "wright/requestApproval")
            .is_none(),
        "a command no pattern names is not asked about"
    );
    let results = tool_results(&provider);
    assert!(
        results[0].contains("the user did not allow it") && !results[0].contains("exit code"),
        "{}",
        results[0]
    );
    assert!(
        results[1].contains("exit code 0") && results[1].contains("approved a"),
        "{}",
        results[1]
    );
    assert!(results[2].contains("exit code 0"), "{}", results[2]);
    editor.shutdown();
}

/// `sandbox.network` from the editor's settings: `allow` at initialize runs the command with
/// the network and asks nothing; `deny`, sent on change, refuses it without asking.
#[test]
fn the_network_policy_comes_from_the_editor_settings_and_follows_their_changes() {
    let dir = TempDir::new("lsp-agent-network");
    dir.write("ws/src/lib.rs", LIB);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let provider = ScriptedProvider::start();
    let connect = Turn::default().tool_call(
        "c1",
        "run_command",
        &json!({"command": format!("bash -c 'echo hi > /dev/tcp/127.0.0.1/{port}'")}).to_string(),
    );
    for _ in 0..2 {
        provider.push(Reply::stream(Dialect::OpenAi, &connect));
        provider.push(Reply::stream(Dialect::OpenAi, &Turn::text(&["Done."])));
    }
    let root = dir.path().join("ws");
    let spawn = agent_spawn(&dir, &provider);
    let mut init = Editor::init_params(&root);
    init["capabilities"] = json!({"experimental": {"wrightRequestApproval": true}});
    init["initializationOptions"] = json!({"sandbox": {"network": "allow"}});
    let mut editor = Editor::start(&spawn, init).0;
    let tool_result = |request: usize| {
        provider.requests()[request].json()["messages"]
            .as_array()
            .unwrap()
            .iter()
            .rev()
            .find(|m| m["role"] == "tool")
            .map(|m| m["content"].as_str().unwrap().to_owned())
            .unwrap()
    };

    let session = run(&mut editor, "connect");
    assert_eq!(finished(&mut editor, &session)["status"], "done");
    let allowed = tool_result(1);
    assert!(allowed.contains("exit code 0"), "{allowed}");
    listener.set_nonblocking(true).unwrap();
    assert!(
        listener.accept().is_ok(),
        "with sandbox.network = allow the command reached the host listener"
    );

    editor.notify(
        "workspace/didChangeConfiguration",
        json!({"settings": {"wright": {"sandbox": {"network": "deny"}}}}),
    );
    let status = editor.status();
    let network = status["settings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["key"] == "sandbox.network")
        .unwrap()
        .clone();
    assert_eq!(network["value"], "deny", "{network}");
    let session = run(&mut editor, "connect again");
    assert_eq!(finished(&mut editor, &session)["status"], "done");
    let denied = tool_result(3);
    assert!(denied.contains("sandbox.network = deny"), "{denied}");
    assert!(
        listener.accept().is_err(),
        "with sandbox.network = deny nothing reached the listener"
    );
    // No approval was asked in either run (the editor would have to read it).
    editor.assert_all_read();
    editor.shutdown();
}

#[test]
fn code_actions_carry_their_command_and_start_a_session() {
    let dir = TempDir::new("lsp-agent-code-actions");
    dir.write("ws/src/lib.rs", LIB);
    let provider = ScriptedProvider::start();
    provider.push(Reply::stream(Dialect::OpenAi, &Turn::text(&["Fixed."])));
    let mut editor = start(&dir, &provider);
    let uri = file_uri(&dir.path().join("ws/src/lib.rs"));
    editor.open(&uri, "rust", 1, LIB);
    let range = json!({"start": {"line": 1, "character": 4}, "end": {"line": 1, "character": 9}});
    let actions = editor.request(
        "textDocument/codeAction",
        json!({
            "textDocument": {"uri": uri},
            "range": range,
            "context": {"diagnostics": [{"range": range, "message": "expected sum, found difference"}]},
        }),
    );
    let actions = actions.as_array().unwrap();
    let titles: Vec<&str> = actions
        .iter()
        .map(|a| a["title"].as_str().unwrap())
        .collect();
    assert_eq!(
        titles,
        [
            "wright: fix this with the agent",
            "wright: explain this code",
            "wright: write tests for this code",
            "wright: document this code"
        ]
    );
    let fix = &actions[0];
    assert_eq!(fix["kind"], "quickfix");
    let command = &fix["command"];
    assert_eq!(command["command"], "wright.agent.run");
    let task = command["arguments"][0]["task"].as_str().unwrap();
    assert!(
        task.contains("src/lib.rs") && task.contains("line 2: expected sum, found difference"),
        "{task}"
    );
    // A client that resolves the action it runs (VS Code) gets it back as it is.
    let resolved = editor.request("codeAction/resolve", fix.clone());
    assert_eq!(&resolved, fix);
    // What a client that does not resolve does with the action: run its command as given.
    let run = editor.request(
        "workspace/executeCommand",
        json!({"command": command["command"], "arguments": command["arguments"]}),
    );
    let session = run["sessionId"].as_str().unwrap().to_owned();
    assert_eq!(finished(&mut editor, &session)["status"], "done");
    // Started by the command: the outcome is shown too, for a client that reads no events.
    let shown = editor.expect_notification("window/showMessage");
    assert_eq!(shown["type"], 3, "{shown}");
    assert_eq!(shown["message"], format!("wright {session} done: Fixed."));
    let first = provider.requests()[0].json();
    let message = first["messages"][1]["content"].as_str().unwrap();
    assert!(
        message.contains("The user's current file: src/lib.rs"),
        "{message}"
    );
    assert!(message.contains("The user selected lines 2-2"), "{message}");
    editor.shutdown();

    // A client that shows the events itself declares it, and gets no message.
    let dir = TempDir::new("lsp-agent-code-actions-events");
    dir.write("ws/src/lib.rs", LIB);
    let provider = ScriptedProvider::start();
    provider.push(Reply::stream(Dialect::OpenAi, &Turn::text(&["Fixed."])));
    let mut editor = start_with(
        &dir,
        &provider,
        json!({"experimental": {"wrightAgentEvents": true}}),
    );
    let run = editor.request(
        "workspace/executeCommand",
        json!({"command": "wright.agent.run", "arguments": ["fix add"]}),
    );
    let session = run["sessionId"].as_str().unwrap().to_owned();
    assert_eq!(finished(&mut editor, &session)["status"], "done");
    editor.shutdown();
}

/// A session of two edits to the open `src/lib.rs` (a fix, then a rename), applied by the
/// editor and finished: the editor, the document's URI, the session, and the text after each
/// edit.
struct TwoEdits {
    editor: Editor,
    uri: String,
    session: String,
    first: String,
    second: String,
}

/// `wright/undo` with `params`, its edit applied by the editor (the buffer at `uri` becoming
/// version `version`, holding `text`); the response.
fn undo_applied(editor: &mut Editor, params: Value, uri: &str, version: i32, text: &str) -> Value {
    let undo = editor.send_request("wright/undo", params);
    let (id, _) = apply_edit_request(editor);
    applies(editor, &id, uri, version, text);
    editor.expect_response(&json!(undo))
}

fn a_session_of_two_edits(dir: &TempDir, provider: &ScriptedProvider) -> TwoEdits {
    dir.write("ws/src/lib.rs", LIB);
    provider.push(Reply::stream(
        Dialect::OpenAi,
        &edit_turn("e1", "    a - b\n", "    a + b\n"),
    ));
    provider.push(Reply::stream(
        Dialect::OpenAi,
        &edit_turn("e2", "pub fn add", "pub fn sum"),
    ));
    provider.push(Reply::stream(Dialect::OpenAi, &Turn::text(&["Done."])));
    let mut editor = start(dir, provider);
    let uri = file_uri(&dir.path().join("ws/src/lib.rs"));
    editor.open(&uri, "rust", 1, LIB);
    let session = run(&mut editor, "fix and rename add");
    let first = LIB.replace("a - b", "a + b");
    let second = first.replace("pub fn add", "pub fn sum");
    // The editor applies each edit, with the change notification editors send.
    for (version, text) in [(2, &first), (3, &second)] {
        let (id, _) = apply_edit_request(&mut editor);
        applies(&mut editor, &id, &uri, version, text);
    }
    assert_eq!(finished(&mut editor, &session)["status"], "done");
    TwoEdits {
        editor,
        uri,
        session,
        first,
        second,
    }
}

#[test]
fn undo_goes_back_to_a_checkpoint() {
    let dir = TempDir::new("lsp-agent-checkpoint");
    let provider = ScriptedProvider::start();
    let TwoEdits {
        mut editor,
        uri,
        session,
        first,
        ..
    } = a_session_of_two_edits(&dir, &provider);
    let sessions = editor.request("wright/sessions", json!(null));
    assert_eq!(sessions["sessions"][0]["checkpoints"], 2);

    // Back to the first checkpoint: the rename goes, the fix stays.
    let undone = undo_applied(
        &mut editor,
        json!({"sessionId": session, "checkpoint": 1}),
        &uri,
        4,
        &first,
    );
    assert_eq!(undone["result"]["files"], json!(["src/lib.rs"]), "{undone}");
    assert_eq!(editor.text_of(&uri), (4, first));
    let sessions = editor.request("wright/sessions", json!(null));
    assert_eq!(sessions["sessions"][0]["checkpoints"], 1);
    let past = editor.request_response(
        "wright/undo",
        json!({"sessionId": session, "checkpoint": 5}),
    );
    assert!(
        past["error"]["message"]
            .as_str()
            .unwrap()
            .contains("past them"),
        "{past}"
    );
    editor.shutdown();
}

#[test]
fn a_sessions_edits_can_be_undone_after_the_server_restarts() {
    let dir = TempDir::new("lsp-agent-undo-restart");
    let provider = ScriptedProvider::start();
    let TwoEdits {
        editor,
        uri,
        session,
        first,
        second,
    } = a_session_of_two_edits(&dir, &provider);
    editor.shutdown();

    // A new server lists the session with its two edits and takes the rename back through
    // the editor, which still holds the edited (unsaved) buffer.
    let mut editor = start(&dir, &provider);
    editor.open(&uri, "rust", 1, &second);
    let sessions = editor.request("wright/sessions", json!(null));
    assert_eq!(sessions["sessions"][0]["sessionId"], session.as_str());
    assert_eq!(sessions["sessions"][0]["checkpoints"], 2, "{sessions}");
    let undone = undo_applied(
        &mut editor,
        json!({"sessionId": session, "checkpoint": 1}),
        &uri,
        2,
        &first,
    );
    assert_eq!(undone["result"]["files"], json!(["src/lib.rs"]), "{undone}");
    let sessions = editor.request("wright/sessions", json!(null));
    assert_eq!(sessions["sessions"][0]["checkpoints"], 1, "{sessions}");
    editor.kill();

    // After a kill, the last session (no id given) goes back to before the agent.
    let mut editor = start(&dir, &provider);
    editor.open(&uri, "rust", 1, &first);
    let undone = undo_applied(&mut editor, json!({}), &uri, 2, LIB);
    assert_eq!(undone["result"]["sessionId"], session.as_str(), "{undone}");
    assert_eq!(editor.text_of(&uri), (2, LIB.to_owned()));
    let sessions = editor.request("wright/sessions", json!(null));
    assert_eq!(sessions["sessions"][0]["checkpoints"], 0, "{sessions}");
    editor.shutdown();
}

/// The editor's buffers in the tests that emulate one: uri → (version, text).
type Buffers = std::collections::HashMap<String, (i64, String)>;

fn uri_path(uri: &Value) -> std::path::PathBuf {
    let uri = uri.as_str().expect("a uri");
    let path = uri.strip_prefix("file://").expect("a file uri");
    assert!(
        !path.contains('%'),
        "the test paths need no decoding: {uri}"
    );
    path.into()
}

/// Applies a `workspace/applyEdit` as VS Code does: resource operations on disk (a deleted or
/// renamed buffer closed), text edits in buffers (opening the file first, `didOpen`, when it
/// is not open; a versioned edit checked against the buffer), each followed by its
/// `didChange`; then the answer.
fn applies_like_vscode(editor: &mut Editor, request: &Value, buffers: &mut Buffers) {
    for change in request["params"]["edit"]["documentChanges"]
        .as_array()
        .expect("documentChanges")
    {
        match change["kind"].as_str() {
            Some("create") => {
                let path = uri_path(&change["uri"]);
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                assert!(!path.exists(), "create must not overwrite {path:?}");
                std::fs::write(path, "").unwrap();
            }
            Some("rename") => {
                std::fs::rename(uri_path(&change["oldUri"]), uri_path(&change["newUri"])).unwrap();
                let old = change["oldUri"].as_str().unwrap();
                assert!(!buffers.contains_key(old), "renames only unopened files");
            }
            Some("delete") => {
                std::fs::remove_file(uri_path(&change["uri"])).unwrap();
                let uri = change["uri"].as_str().unwrap();
                if buffers.remove(uri).is_some() {
                    editor.notify(
                        "textDocument/didClose",
                        json!({"textDocument": {"uri": uri}}),
                    );
                }
            }
            _ => {
                let document = &change["textDocument"];
                let uri = document["uri"].as_str().unwrap().to_owned();
                if !buffers.contains_key(&uri) {
                    assert!(document["version"].is_null(), "{change}");
                    let text = std::fs::read_to_string(uri_path(&document["uri"])).unwrap();
                    editor.open(&uri, "rust", 1, &text);
                    buffers.insert(uri.clone(), (1, text));
                }
                let (version, text) = buffers.get_mut(&uri).unwrap();
                if !document["version"].is_null() {
                    assert_eq!(document["version"], *version, "{change}");
                }
                *text = apply_text_edits(text, &change["edits"]);
                *version += 1;
                editor.notify(
                    "textDocument/didChange",
                    json!({"textDocument": {"uri": uri, "version": *version}, "contentChanges": [{"text": *text}]}),
                );
            }
        }
    }
    editor.respond(&request["id"], json!({"applied": true}));
}

/// The next `workspace/applyEdit` request, whole.
fn apply_edit(editor: &mut Editor) -> Value {
    editor.expect("a workspace/applyEdit request", |m| {
        m["method"] == "workspace/applyEdit" && m.get("id").is_some()
    })
}

/// What a `workspace/applyEdit` does, one line per change: its kind and workspace path, and
/// the version of a text edit.
fn operations(request: &Value, root: &std::path::Path) -> Vec<String> {
    let relative = |uri: &Value| {
        uri_path(uri)
            .strip_prefix(root)
            .unwrap()
            .display()
            .to_string()
    };
    request["params"]["edit"]["documentChanges"]
        .as_array()
        .expect("documentChanges")
        .iter()
        .map(|change| match change["kind"].as_str() {
            Some("rename") => format!(
                "rename {} -> {}",
                relative(&change["oldUri"]),
                relative(&change["newUri"])
            ),
            Some(kind) => format!("{kind} {}", relative(&change["uri"])),
            None => format!(
                "edit {} version {}",
                relative(&change["textDocument"]["uri"]),
                change["textDocument"]["version"]
            ),
        })
        .collect()
}

const PATCH: &str = "*** Begin Patch\n*** Add File: src/new.rs\n+pub fn new() {}\n\
    *** Update File: src/lib.rs\n@@\n-    a - b\n+    a + b\n*** Delete File: src/old.rs\n\
    *** Update File: src/a.rs\n*** Move to: src/b.rs\n@@\n-pub fn a() {}\n+pub fn b() {}\n\
    *** End Patch\n";

fn patch_turn() -> Turn {
    Turn::default().tool_call("p1", "apply_patch", &json!({"patch": PATCH}).to_string())
}

fn operations_workspace(name: &str) -> TempDir {
    let dir = TempDir::new(name);
    dir.write("ws/src/lib.rs", LIB);
    dir.write("ws/src/old.rs", "// old\n");
    dir.write("ws/src/a.rs", "pub fn a() {}\n");
    dir
}

#[test]
fn files_the_editor_has_not_opened_change_through_its_operations_and_undo_reverses_them() {
    let dir = operations_workspace("lsp-agent-operations");
    let root = dir.path().join("ws");
    let provider = ScriptedProvider::start();
    provider.push(Reply::stream(Dialect::OpenAi, &patch_turn()));
    provider.push(Reply::stream(Dialect::OpenAi, &Turn::text(&["Done."])));
    let mut editor = start_with(
        &dir,
        &provider,
        json!({"workspace": {"workspaceEdit": {
            "documentChanges": true, "resourceOperations": ["create", "rename", "delete"],
        }}}),
    );
    let mut buffers = Buffers::new();
    let session = run(&mut editor, "reshape the crate");

    let request = apply_edit(&mut editor);
    assert_eq!(
        operations(&request, &root),
        [
            "rename src/a.rs -> src/b.rs",
            "edit src/b.rs version null",
            "edit src/lib.rs version null",
            "create src/new.rs",
            "edit src/new.rs version null",
            "delete src/old.rs",
        ],
        "one edit, every file through the editor: {request}"
    );
    applies_like_vscode(&mut editor, &request, &mut buffers);
    let outcome = finished(&mut editor, &session);
    assert_eq!(outcome["status"], "done", "{outcome}");
    assert_eq!(
        outcome["filesChanged"],
        json!([
            "src/a.rs",
            "src/b.rs",
            "src/lib.rs",
            "src/new.rs",
            "src/old.rs"
        ])
    );
    // The server wrote nothing itself: the text waits, unsaved, in the editor's buffers.
    let disk = |path: &str| std::fs::read_to_string(root.join(path)).ok();
    assert_eq!(disk("src/lib.rs").as_deref(), Some(LIB));
    assert_eq!(disk("src/new.rs").as_deref(), Some(""));
    assert_eq!(disk("src/b.rs").as_deref(), Some("pub fn a() {}\n"));
    assert_eq!((disk("src/a.rs"), disk("src/old.rs")), (None, None));
    let uri = |path: &str| file_uri(&root.join(path));
    assert_eq!(
        editor.text_of(&uri("src/lib.rs")).1,
        LIB.replace("a - b", "a + b")
    );
    assert_eq!(editor.text_of(&uri("src/b.rs")).1, "pub fn b() {}\n");
    assert_eq!(editor.text_of(&uri("src/new.rs")).1, "pub fn new() {}\n");

    // Undo goes through the editor too; the buffers it opened are emptied at their version
    // before their files are deleted, so a keystroke typed meanwhile makes the editor refuse.
    let undo = editor.send_request("wright/undo", json!({"sessionId": session}));
    let request = apply_edit(&mut editor);
    assert_eq!(
        operations(&request, &root),
        [
            "edit src/b.rs version 2",
            "delete src/b.rs",
            "edit src/lib.rs version 2",
            "edit src/new.rs version 2",
            "delete src/new.rs",
            "create src/a.rs",
            "edit src/a.rs version null",
            "create src/old.rs",
            "edit src/old.rs version null",
        ],
        "{request}"
    );
    applies_like_vscode(&mut editor, &request, &mut buffers);
    let undone = editor.expect_response(&json!(undo));
    assert_eq!(
        undone["result"]["files"],
        json!([
            "src/a.rs",
            "src/b.rs",
            "src/lib.rs",
            "src/new.rs",
            "src/old.rs"
        ]),
        "{undone}"
    );
    assert_eq!((disk("src/b.rs"), disk("src/new.rs")), (None, None));
    assert_eq!(editor.text_of(&uri("src/lib.rs")).1, LIB);
    assert_eq!(editor.text_of(&uri("src/a.rs")).1, "pub fn a() {}\n");
    assert_eq!(editor.text_of(&uri("src/old.rs")).1, "// old\n");
    editor.shutdown();
}

#[test]
fn a_client_without_resource_operations_gets_new_and_deleted_files_on_disk() {
    let dir = operations_workspace("lsp-agent-no-operations");
    let root = dir.path().join("ws");
    let provider = ScriptedProvider::start();
    provider.push(Reply::stream(Dialect::OpenAi, &patch_turn()));
    provider.push(Reply::stream(Dialect::OpenAi, &Turn::text(&["Done."])));
    let mut editor = start(&dir, &provider);
    let session = run(&mut editor, "reshape the crate");
    // The change to an existing file still goes to the editor; the rest the server writes.
    let request = apply_edit(&mut editor);
    assert_eq!(
        operations(&request, &root),
        ["edit src/lib.rs version null"]
    );
    applies_like_vscode(&mut editor, &request, &mut Buffers::new());
    assert_eq!(finished(&mut editor, &session)["status"], "done");
    let disk = |path: &str| std::fs::read_to_string(root.join(path)).ok();
    assert_eq!(
        disk("src/lib.rs").as_deref(),
        Some(LIB),
        "the edit is in the buffer"
    );
    assert_eq!(
        editor.text_of(&file_uri(&root.join("src/lib.rs"))).1,
        LIB.replace("a - b", "a + b")
    );
    assert_eq!(disk("src/new.rs").as_deref(), Some("pub fn new() {}\n"));
    assert_eq!(disk("src/b.rs").as_deref(), Some("pub fn b() {}\n"));
    assert_eq!((disk("src/a.rs"), disk("src/old.rs")), (None, None));
    editor.shutdown();
}

#[test]
fn an_unversioned_edit_the_editor_never_shows_is_not_redone() {
    let dir = TempDir::new("lsp-agent-unconfirmed");
    dir.write("ws/src/lib.rs", LIB);
    let provider = ScriptedProvider::start();
    provider.push(Reply::stream(
        Dialect::OpenAi,
        &edit_turn("e1", "    a - b\n", "    a + b\n"),
    ));
    provider.push(Reply::stream(
        Dialect::OpenAi,
        &Turn::text(&["Told the user."]),
    ));
    let mut editor = start(&dir, &provider);
    let session = run(&mut editor, "fix add");
    // The file is not open: the edit carries no version. This editor claims it applied it and
    // shows nothing, neither in a buffer nor on disk.
    let (id, change) = apply_edit_request(&mut editor);
    assert!(change["textDocument"]["version"].is_null(), "{change}");
    editor.respond(&id, json!({"applied": true}));
    let outcome = finished(&mut editor, &session);
    assert_eq!(outcome["filesChanged"], json!([]), "{outcome}");
    let messages = provider.requests()[1].json()["messages"].clone();
    let result = messages
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap()["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(result.contains("Do not redo it"), "{result}");
    assert_eq!(provider.requests().len(), 2, "no retry was asked for");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("ws/src/lib.rs")).unwrap(),
        LIB
    );
    editor.shutdown();
}
