//! Sessions as conversations over LSP, against the scripted provider: a follow-up turn with
//! the whole history, steering while a turn runs, plan mode then code mode, a model switch
//! that keeps the history, review per hunk (one hunk of two applied, the other rejected and
//! told to the model), the title and the usage with its cost, `@path` mentions; and headless,
//! `wright exec --resume SESSION MESSAGE`, `--plan` and `wright sessions --json`.

use serde_json::{Value, json};
use wright_tests::provider::{Dialect, Reply, ScriptedProvider, TITLE, Turn};
use wright_tests::session::{
    agent_spawn, applies, apply_edit_request, start_agent_server, versioned_edits,
};
use wright_tests::{Editor, TempDir, file_uri, workspace_command};

const LIB: &str = "pub fn add(a: i32, b: i32) -> i32 {\n    a - b\n}\n\npub fn sub(a: i32, b: i32) -> i32 {\n    a + b\n}\n";

fn start(dir: &TempDir, provider: &ScriptedProvider) -> Editor {
    start_agent_server(&agent_spawn(dir, provider), versioned_edits())
}

fn text(answer: &str) -> Reply {
    Reply::text(answer)
}

fn call(id: &str, name: &str, arguments: Value) -> Reply {
    Reply::call(id, name, &arguments)
}

/// Waits for the session's next event of `kind`; returns its params.
fn event(editor: &mut Editor, session: &str, kind: &str) -> Value {
    editor.expect(&format!("a {kind} event"), |m| {
        m["method"] == "wright/agentEvent"
            && m["params"]["sessionId"] == session
            && m["params"]["kind"] == kind
    })["params"]
        .clone()
}

/// Drops the events and log messages read so far (a test reads only those it checks).
fn drain(editor: &mut Editor) {
    editor.discard(|m| m["method"] == "wright/agentEvent" || m["method"] == "window/logMessage");
}

/// The user messages of a request, in order.
fn user_messages(request: &Value) -> Vec<String> {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| match &m["content"] {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        })
        .collect()
}

#[test]
fn a_follow_up_turn_carries_the_whole_history_and_the_session_gets_a_title_and_a_cost() {
    let dir = TempDir::new("conversation-follow-up");
    dir.write("ws/src/lib.rs", LIB);
    let provider = ScriptedProvider::start();
    provider.push(Reply::stream(
        Dialect::OpenAi,
        &Turn::text(&["The first answer."]).usage(1000, 0, 20),
    ));
    let mut editor = start(&dir, &provider);
    let run = editor.request("wright/agentRun", json!({"task": "explain add"}));
    let session = run["sessionId"].as_str().unwrap().to_owned();
    let turn = event(&mut editor, &session, "turn");
    assert_eq!(
        (turn["turn"].clone(), turn["message"].clone()),
        (json!(1), json!("explain add"))
    );
    let usage = event(&mut editor, &session, "usage");
    assert_eq!(usage["contextTokens"], 1020, "{usage}");
    assert!(usage["contextWindow"].as_u64().unwrap() > 0, "{usage}");
    // gpt-4.1 at $2 per million input tokens and $8 per million output.
    let cost = usage["costUsd"].as_f64().unwrap();
    assert!(
        (cost - (1000.0 * 2.0 + 20.0 * 8.0) / 1e6).abs() < 1e-9,
        "{usage}"
    );
    let done = event(&mut editor, &session, "finished");
    assert_eq!(done["turn"], 1);
    assert_eq!(done["outcome"]["status"], "done");
    let title = event(&mut editor, &session, "title");
    assert_eq!(title["title"], TITLE);
    let title_request = &provider.title_requests()[0];
    assert!(
        title_request.tool_names().is_empty(),
        "a title call offers no tool"
    );
    assert!(title_request.body_text().contains("explain add"));

    provider.push(text("The second answer."));
    let prompt = editor.request(
        "wright/agentPrompt",
        json!({"sessionId": session, "message": "and now the sub in @src/lib.rs, please"}),
    );
    assert_eq!(prompt["turn"], 2, "{prompt}");
    let turn = event(&mut editor, &session, "turn");
    assert_eq!(turn["turn"], 2);
    let done = event(&mut editor, &session, "finished");
    assert_eq!(
        (done["turn"].clone(), done["outcome"]["message"].clone()),
        (json!(2), json!("The second answer."))
    );
    let requests = provider.requests();
    assert_eq!(requests.len(), 2);
    let (first, second) = (requests[0].json(), requests[1].json());
    let history = first["messages"].as_array().unwrap();
    assert_eq!(
        &second["messages"].as_array().unwrap()[..history.len()],
        &history[..],
        "the follow-up extends the first turn's request"
    );
    let asked = user_messages(&second).last().cloned().unwrap();
    assert!(
        asked.contains("and now the sub in @src/lib.rs, please"),
        "{asked}"
    );
    assert!(
        asked.contains("pub fn sub(a: i32, b: i32)"),
        "the mention attaches the file: {asked}"
    );
    assert!(second.to_string().contains("The first answer."));

    let sessions = editor.request("wright/sessions", json!(null));
    let listed = &sessions["sessions"][0];
    assert_eq!(listed["title"], TITLE, "{sessions}");
    assert_eq!(listed["turns"], 2, "{sessions}");
    assert_eq!(listed["model"], "openai/gpt-4.1", "{sessions}");
    assert!(listed["costUsd"].as_f64().unwrap() > 0.0, "{sessions}");
    drain(&mut editor);
    editor.shutdown();
}

#[test]
fn a_message_while_a_turn_runs_steers_it_at_the_next_step() {
    let dir = TempDir::new("conversation-steering");
    dir.write("ws/src/lib.rs", LIB);
    let provider = ScriptedProvider::start();
    // The first step's command takes a while: the user writes meanwhile.
    provider.push(call(
        "c1",
        "run_command",
        json!({"command": "sleep 2; echo slept"}),
    ));
    provider.push(text("Done, with the empty list handled."));
    let mut editor = start(&dir, &provider);
    let run = editor.request("wright/agentRun", json!({"task": "fix the list"}));
    let session = run["sessionId"].as_str().unwrap().to_owned();
    event(&mut editor, &session, "toolCall");
    let prompt = editor.request(
        "wright/agentPrompt",
        json!({"sessionId": session, "message": "also handle the empty list"}),
    );
    assert_eq!(
        prompt["turn"], 1,
        "steering joins the running turn: {prompt}"
    );
    let done = event(&mut editor, &session, "finished");
    assert_eq!(done["turn"], 1);
    let requests = provider.requests();
    assert_eq!(requests.len(), 2);
    let second = requests[1].json();
    let messages = second["messages"].as_array().unwrap();
    let last = messages.last().unwrap();
    assert_eq!(last["role"], "user", "{second}");
    assert!(
        last["content"]
            .as_str()
            .unwrap()
            .contains("also handle the empty list")
    );
    assert_eq!(
        messages[messages.len() - 2]["role"],
        "tool",
        "after the tool results"
    );
    drain(&mut editor);
    editor.shutdown();
}

#[test]
fn plan_mode_offers_only_reading_tools_and_a_later_code_turn_carries_the_plan_out() {
    let dir = TempDir::new("conversation-plan");
    dir.write("ws/src/lib.rs", LIB);
    let provider = ScriptedProvider::start();
    // A plan turn: the model tries an edit (refused) and a command whose write is thrown away.
    provider.push(call(
        "e1",
        "edit",
        json!({"path": "src/lib.rs", "old_string": "a - b", "new_string": "a + b"}),
    ));
    provider.push(call(
        "c1",
        "run_command",
        json!({"command": "echo scratch > scratch.txt; cat scratch.txt"}),
    ));
    provider.push(text("Plan:\n1. In src/lib.rs, make add return a + b."));
    let mut editor = start(&dir, &provider);
    let uri = file_uri(&dir.path().join("ws/src/lib.rs"));
    editor.open(&uri, "rust", 1, LIB);
    let run = editor.request(
        "wright/agentRun",
        json!({"task": "fix add", "mode": "plan"}),
    );
    let session = run["sessionId"].as_str().unwrap().to_owned();
    let done = event(&mut editor, &session, "finished");
    assert_eq!(done["outcome"]["status"], "done", "{done}");
    let requests = provider.requests();
    let mut offered = requests[0].tool_names();
    offered.sort();
    assert_eq!(
        offered,
        [
            "find_references",
            "find_symbol",
            "grep",
            "list_dir",
            "outline",
            "read_artifact",
            "read_file",
            "run_command",
            "update_plan"
        ]
    );
    let results = requests[1].tool_results();
    assert!(
        results[0].contains("not offered in plan mode"),
        "{}",
        results[0]
    );
    let results = requests[2].tool_results();
    assert!(results[1].contains("scratch"), "{}", results[1]);
    assert!(
        !dir.path().join("ws/scratch.txt").exists(),
        "a plan's command writes nothing"
    );
    assert_eq!(
        editor.text_of(&uri),
        (1, LIB.to_owned()),
        "a plan changes no file"
    );
    drain(&mut editor);

    // Code mode carries it out.
    provider.push(call(
        "e2",
        "edit",
        json!({"path": "src/lib.rs", "old_string": "a - b", "new_string": "a + b"}),
    ));
    provider.push(text("Done."));
    let prompt = editor.request(
        "wright/agentPrompt",
        json!({"sessionId": session, "message": "go ahead", "mode": "code"}),
    );
    assert_eq!(prompt["turn"], 2);
    let mode = event(&mut editor, &session, "mode");
    assert_eq!(mode["mode"], "code");
    let (id, change) = apply_edit_request(&mut editor);
    let fixed = LIB.replacen("a - b", "a + b", 1);
    assert_eq!(change["textDocument"]["version"], 1);
    applies(&mut editor, &id, &uri, 2, &fixed);
    assert_eq!(event(&mut editor, &session, "finished")["turn"], 2);
    let requests = provider.requests();
    let code = requests[3].json();
    assert!(requests[3].tool_names().contains(&"edit".to_owned()));
    assert!(
        code.to_string().contains("make add return a + b"),
        "the plan is in the history"
    );
    drain(&mut editor);
    editor.shutdown();
}

#[test]
fn a_model_switch_keeps_the_history_images_reach_the_model_and_bad_input_is_refused() {
    let dir = TempDir::new("conversation-switch");
    dir.write("ws/src/lib.rs", LIB);
    let provider = ScriptedProvider::start();
    provider.push(text("First."));
    let mut editor = start(&dir, &provider);
    let run = editor.request("wright/agentRun", json!({"task": "look at add"}));
    let session = run["sessionId"].as_str().unwrap().to_owned();
    event(&mut editor, &session, "finished");
    let refused = editor.request_response(
        "wright/sessionConfigure",
        json!({"sessionId": session, "mode": "draft"}),
    );
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    let configured = editor.request(
        "wright/sessionConfigure",
        json!({"sessionId": session, "model": "openai/gpt-4.1-mini"}),
    );
    assert_eq!(configured, json!({}));
    drain(&mut editor);
    let refused = editor.request_response(
        "wright/agentPrompt",
        json!({"sessionId": session, "message": "see", "images": [{"mediaType": "image/tiff", "data": "AAAA"}]}),
    );
    let why = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(why.contains("image/png"), "{refused}");
    provider.push(text("Second."));
    editor.request(
        "wright/agentPrompt",
        json!({"sessionId": session, "message": "again, with this screenshot",
               "images": [{"mediaType": "image/png", "data": "iVBORw0KGgo="}]}),
    );
    let model = event(&mut editor, &session, "model");
    assert_eq!(model["model"], "openai/gpt-4.1-mini");
    event(&mut editor, &session, "finished");
    let requests = provider.requests();
    let (first, second) = (requests[0].json(), requests[1].json());
    assert_eq!(
        (first["model"].clone(), second["model"].clone()),
        (json!("gpt-4.1"), json!("gpt-4.1-mini"))
    );
    let history = first["messages"].as_array().unwrap();
    assert_eq!(
        &second["messages"].as_array().unwrap()[..history.len()],
        &history[..]
    );
    let asked = second["messages"].as_array().unwrap().last().unwrap();
    assert_eq!(
        asked["content"][1],
        json!({"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}),
        "{asked}"
    );
    drain(&mut editor);
    editor.shutdown();
}

#[test]
fn one_hunk_of_two_is_accepted_the_other_rejected_and_the_model_is_told() {
    let dir = TempDir::new("conversation-hunks");
    dir.write("ws/src/lib.rs", LIB);
    let provider = ScriptedProvider::start();
    provider.push(call(
        "m1",
        "multi_edit",
        json!({"path": "src/lib.rs", "edits": [
            {"old_string": "add(a: i32, b: i32) -> i32 {\n    a - b", "new_string": "add(a: i32, b: i32) -> i32 {\n    a + b"},
            {"old_string": "sub(a: i32, b: i32) -> i32 {\n    a + b", "new_string": "sub(a: i32, b: i32) -> i32 {\n    a - b"}
        ]}),
    ));
    provider.push(text("Proposed both."));
    let mut editor = start(&dir, &provider);
    let uri = file_uri(&dir.path().join("ws/src/lib.rs"));
    editor.open(&uri, "rust", 1, LIB);
    let run = editor.request(
        "wright/agentRun",
        json!({"task": "swap the operators", "applyMode": "review"}),
    );
    let session = run["sessionId"].as_str().unwrap().to_owned();
    let proposed = event(&mut editor, &session, "editProposed");
    let hunks = proposed["hunks"].as_array().unwrap().clone();
    assert_eq!(hunks.len(), 2, "{proposed}");
    assert_eq!(
        (hunks[0]["startLine"].clone(), hunks[0]["endLine"].clone()),
        (json!(2), json!(2))
    );
    assert_eq!(hunks[0]["oldText"], "    a - b\n");
    assert_eq!(hunks[1]["newText"], "    a - b\n");
    event(&mut editor, &session, "finished");

    // The user typed a line at the top since: the accepted hunk still lands on its line.
    let typed = format!("// mine\n{LIB}");
    editor.change(&uri, 2, (0, 0), (0, 0), "// mine\n");
    let accept = editor.send_request(
        "wright/editsAccept",
        json!({"sessionId": session, "hunks": [hunks[0]["id"]]}),
    );
    let (id, change) = apply_edit_request(&mut editor);
    assert_eq!(change["textDocument"]["version"], 2);
    let expected = typed.replacen("    a - b\n", "    a + b\n", 1);
    applies(&mut editor, &id, &uri, 3, &expected);
    let accepted = editor.expect_response(&json!(accept));
    assert_eq!(
        accepted["result"]["files"],
        json!(["src/lib.rs"]),
        "{accepted}"
    );
    assert_eq!(
        editor.text_of(&uri),
        (3, expected.clone()),
        "exactly that hunk"
    );
    let left = event(&mut editor, &session, "editProposed");
    let left_hunks = left["hunks"].as_array().unwrap();
    assert_eq!(left_hunks.len(), 1, "{left}");
    assert_eq!(
        left_hunks[0]["id"], hunks[1]["id"],
        "the other keeps its id"
    );

    let rejected = editor.request(
        "wright/editsReject",
        json!({"sessionId": session, "hunks": [hunks[1]["id"]]}),
    );
    assert_eq!(rejected["files"], json!(["src/lib.rs"]));
    let unknown = editor.request_response(
        "wright/editsAccept",
        json!({"sessionId": session, "hunks": [hunks[1]["id"]]}),
    );
    assert!(unknown.get("error").is_some(), "{unknown}");
    assert_eq!(editor.text_of(&uri), (3, expected));

    provider.push(text("Understood."));
    editor.request(
        "wright/agentPrompt",
        json!({"sessionId": session, "message": "why did you swap sub?"}),
    );
    event(&mut editor, &session, "finished");
    let last = provider.requests().last().unwrap().json();
    let told = user_messages(&last).join("\n");
    assert!(
        told.contains("the user rejected these proposed changes"),
        "{told}"
    );
    // Line 6 of the proposal, line 7 once the user's line is above it.
    assert!(told.contains("lines 7-7"), "{told}");
    drain(&mut editor);
    editor.shutdown();
}

#[test]
fn headless_a_finished_session_continues_with_a_message_and_sessions_lists_it() {
    let dir = TempDir::new("conversation-exec");
    dir.write("ws/src/lib.rs", LIB);
    let provider = ScriptedProvider::start();
    let bin = wright_tests::wright_bin();
    let exec = |args: &[&str]| {
        workspace_command(&bin, &dir, args, Some(&provider), "sk-conversation-test")
            .output()
            .unwrap()
    };
    provider.push(text("Planned: change add."));
    let planned = exec(&["exec", "--plan", "--json", "plan the fix"]);
    assert!(
        planned.status.success(),
        "{}",
        String::from_utf8_lossy(&planned.stderr)
    );
    let offered = provider.requests()[0].tool_names();
    assert!(!offered.contains(&"edit".to_owned()) && offered.contains(&"read_file".to_owned()));
    let listed = exec(&["sessions", "--json"]);
    let sessions: Value = serde_json::from_slice(&listed.stdout).unwrap();
    let id = sessions[0]["id"].as_str().unwrap().to_owned();
    assert_eq!(sessions[0]["state"], "done", "{sessions}");
    assert_eq!(sessions[0]["turns"], 1, "{sessions}");

    provider.push(call(
        "e1",
        "edit",
        json!({"path": "src/lib.rs", "old_string": "a - b", "new_string": "a + b"}),
    ));
    provider.push(text("Fixed."));
    let resumed = exec(&["exec", "--resume", &id, "--json", "now carry it out"]);
    assert!(
        resumed.status.success(),
        "{}",
        String::from_utf8_lossy(&resumed.stderr)
    );
    let result: Value = serde_json::from_slice(&resumed.stdout).unwrap();
    assert_eq!(result["message"], "Fixed.");
    // Without --plan, the follow-up works in code mode: the edit landed.
    assert_eq!(
        std::fs::read_to_string(dir.path().join("ws/src/lib.rs")).unwrap(),
        LIB.replacen("a - b", "a + b", 1)
    );
    let requests = provider.requests();
    let follow_up = requests[1].json();
    assert!(
        follow_up.to_string().contains("Planned: change add."),
        "the history"
    );
    assert!(
        user_messages(&follow_up)
            .last()
            .unwrap()
            .contains("now carry it out")
    );
    let listed = exec(&["sessions", "--json"]);
    let sessions: Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(sessions[0]["turns"], 2, "{sessions}");
    for field in [
        "id", "title", "state", "turns", "model", "updated", "usage", "costUsd",
    ] {
        assert!(sessions[0].get(field).is_some(), "{field} in {sessions}");
    }
}
