//! `wright acp` driven by real ACP client libraries: the official TypeScript SDK
//! (`@agentclientprotocol/sdk`, `tests/acp/client.mjs`) and the Python SDK
//! (`agent-client-protocol`, `tests/acp/client.py`), each spawning `wright acp` and running a
//! scenario against the scripted provider; both SDKs parse what wright sends with their models
//! of the published schema. Plus raw frames for what no SDK sends: garbage, a huge line, bogus
//! ids.
//!
//! The libraries come from `cargo xtask e2e acp --install` (pinned in `tests/acp/`, installed
//! under `target/editors/acp-node` and `target/editors/acp-venv`). Without them the tests say
//! they are skipped, except under `CI`, where a missing install fails them.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use wright_tests::installed::{self, editors, repository};
use wright_tests::provider::{Dialect, Reply, ScriptedProvider, Turn};
use wright_tests::session::agent_spawn;
use wright_tests::{TempDir, wright_bin};

/// How long one client scenario may take in all.
const SCENARIO_TIMEOUT: Duration = Duration::from_secs(120);

/// A 1×1 PNG.
const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

const LIB: &str = "pub fn add(a: i32, b: i32) -> i32 {\n    a - b\n}\n";

#[derive(Clone, Copy, Debug)]
enum Sdk {
    Node,
    Python,
}

/// Whether `sdk`'s library is installed at its pinned version; outside CI a missing install
/// skips the test, saying so.
fn available(sdk: Sdk) -> bool {
    let (pin, copy) = match sdk {
        Sdk::Node => (
            "package-lock.json",
            editors().join("acp-node/package-lock.json"),
        ),
        Sdk::Python => (
            "requirements.txt",
            editors().join("acp-venv/wright-requirements.txt"),
        ),
    };
    installed::available(
        installed::current("tests/acp", pin, &copy),
        &format!("the {sdk:?} ACP client library is"),
        "cargo xtask e2e acp --install",
    )
}

fn node() -> PathBuf {
    std::env::var_os("WRIGHT_NODE").map_or_else(|| PathBuf::from("node"), PathBuf::from)
}

/// What a scenario left: its records, in order.
struct Transcript {
    records: Vec<Value>,
    stderr: String,
}

impl Transcript {
    fn all(&self, kind: &str) -> Vec<&Value> {
        self.records.iter().filter(|r| r["type"] == kind).collect()
    }

    /// The answers (or errors) to the steps named `op`, in order.
    fn answers(&self, op: &str) -> Vec<&Value> {
        self.records
            .iter()
            .filter(|r| (r["type"] == "answer" || r["type"] == "error") && r["op"] == op)
            .collect()
    }

    fn answer(&self, op: &str) -> &Value {
        let answers = self.answers(op);
        let answer = answers
            .first()
            .unwrap_or_else(|| panic!("no answer to {op}: {self}"));
        assert_eq!(answer["type"], "answer", "{op} failed: {answer}\n{self}");
        &answer["result"]
    }

    fn updates(&self, kind: &str) -> Vec<&Value> {
        self.records
            .iter()
            .filter(|r| r["type"] == "update" && r["update"]["sessionUpdate"] == kind)
            .map(|r| &r["update"])
            .collect()
    }

    fn requests(&self, method: &str) -> Vec<&Value> {
        self.records
            .iter()
            .filter(|r| r["type"] == "request" && r["method"] == method)
            .map(|r| &r["params"])
            .collect()
    }

    /// The agent's text of the whole transcript, its chunks joined.
    fn text(&self, kind: &str) -> String {
        self.updates(kind)
            .iter()
            .map(|u| u["content"]["text"].as_str().unwrap_or_default())
            .collect()
    }
}

impl std::fmt::Display for Transcript {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for record in &self.records {
            writeln!(f, "{record}")?;
        }
        write!(f, "stderr:\n{}", self.stderr)
    }
}

/// Runs `scenario` with `sdk`'s client against `wright acp` in `dir` (its `ws` the workspace,
/// its data and cache directories private), the model being `provider`.
fn scenario(sdk: Sdk, dir: &TempDir, provider: &ScriptedProvider, scenario: &Value) -> Transcript {
    let file = dir.path().join(format!("scenario-{sdk:?}.json"));
    std::fs::write(&file, scenario.to_string()).unwrap();
    let mut command = match sdk {
        Sdk::Node => {
            let mut command = Command::new(node());
            command
                .env_clear()
                .arg(repository().join("tests/acp/client.mjs"))
                .env("ACP_NODE_MODULES", editors().join("acp-node/node_modules"));
            command
        }
        Sdk::Python => {
            let mut command = Command::new(editors().join("acp-venv/bin/python"));
            command
                .env_clear()
                .arg(repository().join("tests/acp/client.py"));
            command
        }
    };
    // As the LSP tests' servers: nothing of the developer's environment (configuration, keys)
    // but PATH.
    command
        .arg(&file)
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", dir.path().join("home"))
        .env("WRIGHT_BIN", wright_bin())
        .env("WRIGHT_LOG", "wright=debug")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (key, value) in agent_spawn(dir, provider).env {
        command.env(key, value);
    }
    let mut child = command.spawn().expect("starting the ACP client");
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut text = String::new();
        stdout.read_to_string(&mut text).unwrap();
        text
    });
    let err = std::thread::spawn(move || {
        let mut text = String::new();
        stderr.read_to_string(&mut text).unwrap();
        text
    });
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if started.elapsed() > SCENARIO_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let transcript = Transcript {
        records: out
            .join()
            .unwrap()
            .lines()
            .map(|line| {
                serde_json::from_str(line).unwrap_or_else(|_| json!({"type": "text", "line": line}))
            })
            .collect(),
        stderr: err.join().unwrap(),
    };
    if std::env::var_os("WRIGHT_ACP_SHOW").is_some() {
        eprintln!("the {sdk:?} client's transcript:\n{transcript}");
    }
    match status {
        None => panic!("the {sdk:?} client overran {SCENARIO_TIMEOUT:?}:\n{transcript}"),
        Some(status) if !status.success() => {
            panic!("the {sdk:?} client failed ({status}):\n{transcript}")
        }
        Some(_) => {}
    }
    assert!(
        transcript.all("exit").iter().all(|e| e["code"] == 0),
        "wright acp exited with an error:\n{transcript}"
    );
    transcript
}

fn text(answer: &str) -> Reply {
    Reply::text(answer)
}

fn call(id: &str, name: &str, arguments: Value) -> Reply {
    Reply::call(id, name, &arguments)
}

fn prompt(text: &str) -> Value {
    json!({"op": "prompt", "prompt": [{"type": "text", "text": text}]})
}

fn workspace(dir: &TempDir) -> String {
    std::fs::canonicalize(dir.path().join("ws"))
        .unwrap()
        .display()
        .to_string()
}

/// initialize, authenticate (nothing to do), a new session with its modes and model, two
/// prompts of one conversation (the second request carries the first), a garbage line between
/// them that the SDK's connection survives, set_mode, the model switched, MCP servers refused.
#[test]
fn a_session_of_two_prompts_through_the_typescript_sdk() {
    if !available(Sdk::Node) {
        return;
    }
    let dir = TempDir::new("acp-two-prompts");
    dir.write("ws/src/lib.rs", LIB);
    let ws = workspace(&dir);
    let provider = ScriptedProvider::start();
    provider.push(Reply::stream(
        Dialect::OpenAi,
        &Turn::text(&["The first ", "answer."]).usage(1000, 0, 20),
    ));
    provider.push(text("The second answer."));
    provider.push(text("The plan."));
    let transcript = scenario(
        Sdk::Node,
        &dir,
        &provider,
        &json!({"steps": [
            {"op": "initialize"},
            {"op": "authenticate"},
            {"op": "new", "cwd": ws},
            prompt("explain add"),
            {"op": "raw", "line": "this is not JSON\n"},
            {"op": "prompt", "prompt": [
                {"type": "text", "text": "and now"},
                {"type": "resource_link", "uri": format!("file://{ws}/src/lib.rs"), "name": "lib.rs"},
                {"type": "resource", "resource": {"uri": "file:///notes.md", "text": "NOTES BODY", "mimeType": "text/markdown"}},
                {"type": "image", "mimeType": "image/png", "data": PNG},
            ]},
            {"op": "set_mode", "modeId": "plan"},
            {"op": "set_model", "value": "openai/gpt-4.1-mini"},
            prompt("plan it"),
            {"op": "new", "cwd": ws, "mcpServers": [{"name": "bad name", "command": "/bin/true", "args": [], "env": []}]},
        ]}),
    );
    let init = transcript.answer("initialize");
    assert_eq!(init["protocolVersion"], 1, "{init}");
    let caps = &init["agentCapabilities"];
    assert_eq!(caps["loadSession"], true);
    assert_eq!(
        caps["promptCapabilities"],
        json!({"image": true, "audio": false, "embeddedContext": true})
    );
    assert_eq!(caps["mcpCapabilities"]["http"], true, "{caps}");
    assert_eq!(init["authMethods"], json!([]));
    let new = transcript.answer("new");
    assert_eq!(new["modes"]["currentModeId"], "code");
    let modes: Vec<&str> = new["modes"]["availableModes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(modes, ["code", "plan"]);
    assert_eq!(new["configOptions"][0]["id"], "model");
    assert_eq!(new["configOptions"][0]["currentValue"], "openai/gpt-4.1");
    let prompts = transcript.answers("prompt");
    assert_eq!(prompts.len(), 3, "{transcript}");
    for answer in &prompts {
        assert_eq!(answer["result"]["stopReason"], "end_turn", "{transcript}");
    }
    assert_eq!(
        transcript.text("agent_message_chunk"),
        "The first answer.The second answer.The plan."
    );
    let modes = transcript.updates("current_mode_update");
    assert_eq!(
        modes.last().unwrap()["currentModeId"],
        "plan",
        "{transcript}"
    );
    assert_eq!(
        provider.requests()[2].json()["model"],
        "gpt-4.1-mini",
        "the switched model answers the next prompt"
    );
    let usage = transcript.updates("usage_update");
    assert!(
        usage
            .iter()
            .any(|u| u["used"] == 1020 && u["size"].as_u64() > Some(0)),
        "{transcript}"
    );
    let requests = provider.requests();
    assert_eq!(requests.len(), 3);
    let (first, second) = (requests[0].json(), requests[1].json());
    let history = first["messages"].as_array().unwrap();
    assert_eq!(
        &second["messages"].as_array().unwrap()[..history.len()],
        &history[..],
        "the second prompt extends the first turn's request"
    );
    let asked = second["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .to_string();
    assert!(
        asked.contains("@src/lib.rs") && asked.contains("NOTES BODY"),
        "{asked}"
    );
    assert_eq!(transcript.answer("set_mode"), &json!({}));
    let switched = transcript.answer("set_model");
    assert_eq!(
        switched["configOptions"][0]["currentValue"],
        "openai/gpt-4.1-mini"
    );
    let refused = transcript.answers("new")[1];
    assert_eq!(refused["type"], "error", "{refused}");
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .contains("may hold only letters, digits"),
        "{refused}"
    );
}

/// With the client's fs capabilities: `read_file` sees the editor's unsaved text (through
/// `fs/read_text_file`), an edit is computed against it and written through
/// `fs/write_text_file` (the disk untouched), and its tool call carries the whole-file diff,
/// an absolute location and the edit kind.
#[test]
fn reads_and_edits_go_through_the_client_and_show_as_diffs() {
    if !available(Sdk::Node) {
        return;
    }
    let dir = TempDir::new("acp-client-files");
    dir.write("ws/src/lib.rs", LIB);
    dir.write("ws/src/other.rs", "pub fn helper() {}\n");
    let ws = workspace(&dir);
    let path = format!("{ws}/src/lib.rs");
    let unsaved = "pub fn add(a: i32, b: i32) -> i32 {\n    a - b // UNSAVED\n}\n";
    let provider = ScriptedProvider::start();
    provider.push(call(
        "p1",
        "update_plan",
        json!({"steps": [{"title": "read add", "status": "in_progress"}, {"title": "fix add", "status": "pending"}]}),
    ));
    provider.push(call("r1", "read_file", json!({"path": "src/lib.rs"})));
    provider.push(call(
        "e1",
        "edit",
        json!({"path": "src/lib.rs", "old_string": "a - b // UNSAVED", "new_string": "a + b"}),
    ));
    provider.push(call("s1", "find_symbol", json!({"query": "add"})));
    // A grep walks every file: the texts the client gave, the disk for the rest.
    provider.push(call("g1", "grep", json!({"pattern": "a \\+ b|fn helper"})));
    provider.push(text("Fixed."));
    let transcript = scenario(
        Sdk::Node,
        &dir,
        &provider,
        &json!({
            "fs": {"read": true, "write": true},
            "unsaved": {path.clone(): unsaved},
            "steps": [{"op": "initialize"}, {"op": "new", "cwd": ws}, prompt("fix add")],
        }),
    );
    assert_eq!(
        transcript.answer("prompt")["stopReason"],
        "end_turn",
        "{transcript}"
    );
    let plans = transcript.updates("plan");
    assert_eq!(
        plans[0]["entries"],
        json!([
            {"content": "read add", "priority": "medium", "status": "in_progress"},
            {"content": "fix add", "priority": "medium", "status": "pending"},
        ]),
        "{transcript}"
    );
    let read_output = &provider.requests()[2].tool_results()[1];
    assert!(read_output.contains("UNSAVED"), "{read_output}");
    assert!(
        transcript
            .requests("fs/read_text_file")
            .iter()
            .all(|r| r["path"] == path.as_str()),
        "{transcript}"
    );
    let after = unsaved.replace("a - b // UNSAVED", "a + b");
    let writes = transcript.requests("fs/write_text_file");
    assert_eq!(writes.len(), 1, "{transcript}");
    assert_eq!(writes[0]["path"], path.as_str());
    assert_eq!(writes[0]["content"], after.as_str());
    assert_eq!(
        std::fs::read_to_string(dir.path().join("ws/src/lib.rs")).unwrap(),
        LIB,
        "the disk is the client's to write"
    );
    let calls = transcript.updates("tool_call");
    let edit = calls
        .iter()
        .find(|c| c["toolCallId"] == "e1")
        .expect("the edit's tool_call");
    assert_eq!(edit["kind"], "edit");
    assert_eq!(edit["locations"], json!([{"path": path}]));
    let read = calls.iter().find(|c| c["toolCallId"] == "r1").unwrap();
    assert_eq!(read["kind"], "read");
    let done = transcript.updates("tool_call_update");
    let edited = done.iter().find(|u| u["toolCallId"] == "e1").unwrap();
    assert_eq!(edited["status"], "completed");
    assert_eq!(
        edited["content"][0],
        json!({"type": "diff", "path": path, "oldText": unsaved, "newText": after}),
        "{transcript}"
    );
    let results = provider.requests().last().unwrap().tool_results();
    let found = &results[results.len() - 2];
    assert!(
        found.contains("src/lib.rs"),
        "the session has the symbol index: {found}"
    );
    let grepped = results.last().unwrap();
    assert!(
        grepped.contains("src/lib.rs") && grepped.contains("a + b"),
        "grep sees the text written through the client: {grepped}"
    );
    assert!(grepped.contains("src/other.rs"), "{grepped}");
    let read_done = done.iter().find(|u| u["toolCallId"] == "r1").unwrap();
    assert_eq!(read_done["content"][0]["type"], "content");
    assert!(
        read_done["content"][0]["content"]["text"]
            .as_str()
            .unwrap()
            .contains("UNSAVED")
    );
}

/// Through the Python SDK, without client fs: an edit lands on disk; after the process
/// restarted, `session/load` replays the conversation (the user's message, the model's text,
/// the tool call with its final status and output) before it answers, and a prompt then
/// continues it with its history.
#[test]
fn a_session_loads_after_a_restart_through_the_python_sdk() {
    if !available(Sdk::Python) {
        return;
    }
    let dir = TempDir::new("acp-load");
    dir.write("ws/src/lib.rs", LIB);
    let ws = workspace(&dir);
    let provider = ScriptedProvider::start();
    provider.push(call(
        "e1",
        "edit",
        json!({"path": "src/lib.rs", "old_string": "a - b", "new_string": "a + b"}),
    ));
    provider.push(text("Fixed add."));
    provider.push(text("Still fixed."));
    let transcript = scenario(
        Sdk::Python,
        &dir,
        &provider,
        &json!({"steps": [
            {"op": "initialize"},
            {"op": "new", "cwd": ws},
            prompt("fix add"),
            {"op": "restart"},
            {"op": "initialize"},
            {"op": "load", "cwd": ws},
            prompt("is it fixed?"),
        ]}),
    );
    let prompts = transcript.answers("prompt");
    assert!(
        prompts.len() == 2
            && prompts
                .iter()
                .all(|p| p["result"]["stopReason"] == "end_turn"),
        "{transcript}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("ws/src/lib.rs")).unwrap(),
        LIB.replace("a - b", "a + b")
    );
    let path = format!("{ws}/src/lib.rs");
    let diff = transcript
        .updates("tool_call_update")
        .into_iter()
        .find(|u| u["toolCallId"] == "e1")
        .unwrap()["content"][0]
        .clone();
    assert_eq!(
        diff,
        json!({"type": "diff", "path": path, "oldText": LIB, "newText": LIB.replace("a - b", "a + b")})
    );
    // The records after the restart: the replay comes before load's answer.
    let restart = transcript
        .records
        .iter()
        .position(|r| r["type"] == "exit")
        .unwrap();
    let loaded = transcript
        .records
        .iter()
        .position(|r| r["op"] == "load")
        .unwrap();
    assert_eq!(transcript.records[loaded]["type"], "answer", "{transcript}");
    let replay: Vec<&Value> = transcript.records[restart..loaded]
        .iter()
        .filter(|r| r["type"] == "update")
        .map(|r| &r["update"])
        .collect();
    let kinds: Vec<&str> = replay
        .iter()
        .map(|u| u["sessionUpdate"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["user_message_chunk", "tool_call", "agent_message_chunk"],
        "{transcript}"
    );
    assert!(
        replay[0]["content"]["text"]
            .as_str()
            .unwrap()
            .contains("fix add")
    );
    assert_eq!(replay[1]["toolCallId"], "e1");
    assert_eq!(replay[1]["status"], "completed");
    assert_eq!(replay[1]["kind"], "edit");
    assert_eq!(replay[1]["locations"], json!([{"path": path}]));
    assert_eq!(replay[2]["content"]["text"], "Fixed add.");
    let requests = provider.requests();
    let last = requests.last().unwrap().json();
    let asked = last["messages"].to_string();
    assert!(
        asked.contains("fix add") && asked.contains("Fixed add.") && asked.contains("is it fixed?"),
        "the prompt after load carries the history: {asked}"
    );
}

/// `agent.approve_commands` names a command: `session/request_permission` asks with the four
/// option kinds; rejected, the model is told and the turn goes on; allowed always, the next
/// one is not asked again. A command the sandbox refused the network is asked about too:
/// rejected always, the next one is refused without asking; in a new session, allowed once, it
/// runs again with the network.
#[test]
fn permissions_are_asked_rejected_and_remembered() {
    if !available(Sdk::Node) {
        return;
    }
    let dir = TempDir::new("acp-permission");
    dir.write("ws/src/lib.rs", LIB);
    dir.write(
        "ws/.wright/config.toml",
        "[agent]\napprove_commands = \"echo approved*\"\n",
    );
    let ws = workspace(&dir);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    let connect = json!({"command": format!("bash -c 'echo hi > /dev/tcp/127.0.0.1/{port}'")});
    let provider = ScriptedProvider::start();
    for id in ["r", "a", "b"] {
        provider.push(call(
            id,
            "run_command",
            json!({"command": format!("echo approved {id}")}),
        ));
    }
    provider.push(call("n1", "run_command", connect.clone()));
    provider.push(call("n2", "run_command", connect.clone()));
    provider.push(text("Done."));
    provider.push(call("n3", "run_command", connect));
    provider.push(text("Done again."));
    let transcript = scenario(
        Sdk::Node,
        &dir,
        &provider,
        &json!({
            "permissions": ["reject_once", "allow_always", "reject_always", "allow_once"],
            "steps": [
                {"op": "initialize"},
                {"op": "new", "cwd": ws},
                prompt("echo things"),
                {"op": "new", "cwd": ws},
                prompt("connect again"),
            ],
        }),
    );
    let prompts = transcript.answers("prompt");
    assert!(
        prompts.len() == 2
            && prompts
                .iter()
                .all(|p| p["result"]["stopReason"] == "end_turn"),
        "{transcript}"
    );
    let asked = transcript.requests("session/request_permission");
    assert_eq!(asked.len(), 4, "{transcript}");
    let kinds: Vec<&str> = asked[0]["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["allow_once", "allow_always", "reject_once", "reject_always"]
    );
    // Each question names the card of the call that runs the command.
    let calls: Vec<&str> = asked
        .iter()
        .map(|a| a["toolCall"]["toolCallId"].as_str().unwrap())
        .collect();
    assert_eq!(calls, ["r", "a", "n1", "n3"], "{transcript}");
    let titles: Vec<&str> = asked
        .iter()
        .map(|a| a["toolCall"]["title"].as_str().unwrap())
        .collect();
    assert!(titles[0].contains("echo approved r"), "{titles:?}");
    assert!(titles[1].contains("echo approved a"), "{titles:?}");
    assert!(
        titles[2].starts_with("network") && titles[3].starts_with("network"),
        "{titles:?}"
    );
    let requests = provider.requests();
    let results = requests[5].tool_results();
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
    assert!(
        results[2].contains("exit code 0") && results[2].contains("approved b"),
        "{}",
        results[2]
    );
    assert!(
        results[3].contains("the user did not allow more"),
        "{}",
        results[3]
    );
    assert!(
        results[4].contains("the user did not allow more"),
        "rejected always: {}",
        results[4]
    );
    let last = requests.last().unwrap().tool_results();
    assert!(last[0].contains("as the user allowed"), "{}", last[0]);
    assert!(
        listener.accept().is_ok(),
        "the allowed command reached the listener"
    );
    assert!(listener.accept().is_err(), "the rejected ones did not");
    let failed = transcript
        .updates("tool_call_update")
        .into_iter()
        .find(|u| u["toolCallId"] == "r")
        .unwrap();
    assert_eq!(failed["kind"], "execute");
}

/// `session/cancel` while the answer streams slowly ends the prompt with `cancelled`; the
/// session takes the next prompt.
#[test]
fn cancel_ends_a_slow_answer_with_cancelled() {
    if !available(Sdk::Node) {
        return;
    }
    let dir = TempDir::new("acp-cancel");
    dir.write("ws/src/lib.rs", LIB);
    let ws = workspace(&dir);
    let provider = ScriptedProvider::start();
    let slow: Vec<String> = (0..200).map(|i| format!("word{i} ")).collect();
    let slow: Vec<&str> = slow.iter().map(String::as_str).collect();
    provider.push(
        Reply::stream(Dialect::OpenAi, &Turn::text(&slow)).token_delay(Duration::from_millis(50)),
    );
    // The next prompt's answer is cut and asked again: the client is told it restarts.
    provider
        .push(Reply::stream(Dialect::OpenAi, &Turn::text(&["Half ", "an answer"])).cut_after(2));
    provider.push(text("After the cancel."));
    let transcript = scenario(
        Sdk::Node,
        &dir,
        &provider,
        &json!({"steps": [
            {"op": "initialize"},
            {"op": "new", "cwd": ws},
            {"op": "prompt_then_cancel", "after": "agent_message_chunk", "prompt": [{"type": "text", "text": "talk"}]},
            prompt("again"),
        ]}),
    );
    assert_eq!(
        transcript.answer("prompt_then_cancel")["stopReason"],
        "cancelled",
        "{transcript}"
    );
    assert_eq!(
        transcript.answer("prompt")["stopReason"],
        "end_turn",
        "{transcript}"
    );
    let said = transcript.text("agent_message_chunk");
    assert!(said.ends_with("After the cancel."), "{said}");
    assert!(said.contains("it restarts]"), "{said}");
}

/// A client that sends garbage: a line that is not JSON gets -32700 with a null id, a line
/// over the limit is refused without being kept, a response to a request never made and a
/// request with an unknown method get nothing or an error; the agent keeps serving. The
/// wire is read raw here: no SDK sends such things.
#[test]
fn malformed_and_hostile_lines_are_answered_and_serving_goes_on() {
    let dir = TempDir::new("acp-malformed");
    dir.write("ws/src/lib.rs", LIB);
    let provider = ScriptedProvider::start();
    let mut command = Command::new(wright_bin());
    command
        .arg("acp")
        .env_clear()
        .env("HOME", dir.path().join("home"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    for (key, value) in agent_spawn(&dir, &provider).env {
        command.env(key, value);
    }
    let mut child = command.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let (lines, received) = std::sync::mpsc::channel::<String>();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let next = || -> Value {
        let line = received
            .recv_timeout(Duration::from_secs(20))
            .expect("an answer from wright acp");
        serde_json::from_str(&line)
            .unwrap_or_else(|err| panic!("not JSON on stdout: {line:?}: {err}"))
    };
    stdin
        .write_all(b"{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\n")
        .unwrap();
    let error = next();
    assert_eq!(
        (error["id"].clone(), error["error"]["code"].clone()),
        (Value::Null, json!(-32700)),
        "{error}"
    );
    // A line of 40 MiB with no JSON in it: refused as a whole, one answer.
    let huge = vec![b'x'; 40 << 20];
    stdin.write_all(&huge).unwrap();
    stdin.write_all(b"\n").unwrap();
    let error = next();
    assert_eq!(error["error"]["code"], -32700, "{error}");
    // A response to nothing, a response with an id that is an object, a bare value.
    stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":987,\"result\":{}}\n{\"jsonrpc\":\"2.0\",\"id\":{\"a\":1},\"result\":null}\n[1,2]\n")
        .unwrap();
    let error = next();
    assert_eq!(error["error"]["code"], -32600, "{error}");
    stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":\"x\",\"method\":\"fs/nothing\",\"params\":{}}\n")
        .unwrap();
    let error = next();
    assert_eq!(
        (error["id"].clone(), error["error"]["code"].clone()),
        (json!("x"), json!(-32601)),
        "{error}"
    );
    stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"session/prompt\",\"params\":{\"sessionId\":\"nope\",\"prompt\":[]}}\n")
        .unwrap();
    let error = next();
    assert_eq!(error["id"], 2, "{error}");
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no session"),
        "{error}"
    );
    let ws = std::fs::canonicalize(dir.path().join("ws")).unwrap();
    let load = json!({"jsonrpc": "2.0", "id": 4, "method": "session/load", "params": {
        "sessionId": "../../../etc/passwd", "cwd": ws, "mcpServers": []}});
    stdin.write_all(format!("{load}\n").as_bytes()).unwrap();
    let error = next();
    assert_eq!(
        (error["id"].clone(), error["error"]["code"].clone()),
        (json!(4), json!(-32002)),
        "{error}"
    );
    stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"initialize\",\"params\":{\"protocolVersion\":1}}\n")
        .unwrap();
    let init = next();
    assert_eq!(
        (
            init["id"].clone(),
            init["result"]["protocolVersion"].clone()
        ),
        (json!(3), json!(1)),
        "{init}"
    );
    drop(stdin);
    assert!(child.wait().unwrap().success());
}

/// A model that asks for paths outside the session's root gets a tool error, and the client
/// is never asked to read or write them; a client answering reads with a huge text or an
/// error does not crash the agent.
#[test]
fn paths_outside_the_root_never_reach_the_client() {
    if !available(Sdk::Node) {
        return;
    }
    let dir = TempDir::new("acp-outside");
    dir.write("ws/src/lib.rs", LIB);
    dir.write("outside.txt", "secret\n");
    let ws = workspace(&dir);
    let outside = std::fs::canonicalize(dir.path().join("outside.txt")).unwrap();
    let provider = ScriptedProvider::start();
    provider.push(call("r1", "read_file", json!({"path": "../outside.txt"})));
    provider.push(call("r2", "read_file", json!({"path": outside})));
    provider.push(call(
        "e1",
        "edit",
        json!({"path": "../outside.txt", "old_string": "secret", "new_string": "owned"}),
    ));
    provider.push(call(
        "w1",
        "write_file",
        json!({"path": outside, "content": "owned"}),
    ));
    provider.push(text("Tried."));
    let transcript = scenario(
        Sdk::Node,
        &dir,
        &provider,
        &json!({
            "fs": {"read": true, "write": true},
            "steps": [{"op": "initialize"}, {"op": "new", "cwd": ws}, prompt("escape")],
        }),
    );
    assert_eq!(
        transcript.answer("prompt")["stopReason"],
        "end_turn",
        "{transcript}"
    );
    for request in transcript
        .requests("fs/read_text_file")
        .into_iter()
        .chain(transcript.requests("fs/write_text_file"))
    {
        assert!(
            request["path"]
                .as_str()
                .unwrap()
                .starts_with(&format!("{ws}/")),
            "the client was asked about {request}"
        );
    }
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "secret\n");
    let results = provider.requests().last().unwrap().tool_results();
    assert_eq!(results.len(), 4);
    assert!(
        results
            .iter()
            .all(|r| !r.contains("secret") || r.contains("outside")),
        "{results:?}"
    );
}

/// The client's `mcpServers` in `session/new`: server-everything over stdio, started sandboxed
/// for the session; its tools offered to the model by their `mcp__NAME__TOOL` names; each call
/// asked through `session/request_permission` (a client's servers ask before each call), the
/// allowed one answered by the server and seen by the model, the rejected one not run.
#[test]
fn a_clients_mcp_server_is_asked_before_each_call_and_answers_the_model() {
    if !available(Sdk::Node) || !wright_tests::mcp::npm_available() {
        return;
    }
    let dir = TempDir::new("acp-mcp");
    dir.write("ws/README.md", "a workspace\n");
    let ws = workspace(&dir);
    let script = wright_tests::mcp::node_dir()
        .join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    let everything = json!({
        "name": "everything",
        "command": wright_tests::mcp::node(),
        "args": [script, "stdio"],
        "env": [],
    });
    let provider = ScriptedProvider::start();
    provider.push(call(
        "e1",
        "mcp__everything__echo",
        json!({"message": "a marker 51c2"}),
    ));
    provider.push(call(
        "e2",
        "mcp__everything__echo",
        json!({"message": "a second marker"}),
    ));
    provider.push(text("Done."));
    let transcript = scenario(
        Sdk::Node,
        &dir,
        &provider,
        &json!({
            "permissions": ["allow_once", "reject_once"],
            "steps": [
                {"op": "initialize"},
                {"op": "new", "cwd": ws, "mcpServers": [everything]},
                prompt("echo through the server"),
            ],
        }),
    );
    assert_eq!(
        transcript.answer("prompt")["stopReason"],
        "end_turn",
        "{transcript}"
    );
    let requests = provider.requests();
    assert_eq!(requests.len(), 3, "{transcript}");
    let tools = requests[0].tool_names();
    assert!(
        tools.iter().any(|t| t == "mcp__everything__echo"),
        "{tools:?}"
    );
    let asked = transcript.requests("session/request_permission");
    let calls: Vec<&str> = asked
        .iter()
        .map(|a| a["toolCall"]["toolCallId"].as_str().unwrap())
        .collect();
    assert_eq!(calls, ["e1", "e2"], "{transcript}");
    let allowed = &requests[1].tool_results()[0];
    assert!(
        allowed.contains("Echo: a marker 51c2"),
        "the server's answer: {allowed}"
    );
    let results = requests[2].tool_results();
    assert_eq!(results.len(), 2, "{results:?}");
    let rejected = &results[1];
    assert!(
        rejected.contains("not run: the user declined the call of mcp__everything__echo")
            && !rejected.contains("Echo:"),
        "the rejected call was not run: {rejected}"
    );
}
