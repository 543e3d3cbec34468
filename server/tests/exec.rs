//! `wright exec` end to end: the real binary, a workspace on disk, and the scripted provider
//! of `wright-tests` playing the model over real SSE — reads (in parallel), a refused and a
//! landed edit, arguments that are not JSON, an unknown tool, the final answer, `--json`, and
//! `--undo`; a task on a Python project whose tests run for real, failing then passing; then
//! the ways a run fails: a wrong key, the step, token and time limits, no model configured.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::{Value, json};
use wright_tests::TempDir;
use wright_tests::provider::{Dialect, Fault, Reply, ScriptedProvider, Turn};

const LIB: &str = "pub fn add(a: i32, b: i32) -> i32 {\n    a - b\n}\n\npub fn sub(a: i32, b: i32) -> i32 {\n    a - b\n}\n";

/// A workspace and private XDG folders (index cache, undo record, no user configuration).
fn setup(name: &str) -> TempDir {
    let dir = TempDir::new(name);
    dir.write("ws/src/lib.rs", LIB);
    dir.write("ws/AGENTS.md", "Use four spaces.\n");
    dir
}

/// `wright exec ARGS --root <ws>` with a clean environment and, with a provider, its model.
fn command(dir: &TempDir, provider: Option<&ScriptedProvider>, args: &[&str]) -> Command {
    wright_tests::workspace_command(
        Path::new(env!("CARGO_BIN_EXE_wright")),
        dir,
        &[&["exec"], args].concat(),
        provider,
        "sk-exec-test-key",
    )
}

fn exec(dir: &TempDir, provider: Option<&ScriptedProvider>, args: &[&str]) -> Output {
    command(dir, provider, args)
        .output()
        .expect("running wright exec")
}

/// Runs `wright exec TASK` until the provider has received `requests` requests, then kills
/// it with SIGKILL; returns its stderr, the session id it printed and its process id.
fn kill_after(
    dir: &TempDir,
    provider: &ScriptedProvider,
    task: &str,
    requests: usize,
) -> (String, String, u32) {
    let mut child = command(dir, Some(provider), &[task])
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while provider.requests().len() < requests {
        assert!(
            std::time::Instant::now() < deadline,
            "request {requests} never came"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let pid = child.id();
    child.kill().unwrap(); // SIGKILL: no cleanup runs
    let stderr = text(&child.wait_with_output().unwrap().stderr);
    let id = session_id(&stderr);
    (stderr, id, pid)
}

/// The session id `wright exec` prints on stderr when a run starts.
fn session_id(stderr: &str) -> String {
    stderr
        .split("session ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no session id in {stderr}"))
        .to_owned()
}

/// What `wright exec --json` printed.
fn json_result(out: &Output) -> Value {
    serde_json::from_str(text(&out.stdout).trim())
        .expect("wright exec --json prints one JSON result")
}

/// Asserts the result's `reason` says `expected`.
fn assert_reason(result: &Value, expected: &str) {
    let reason = result["reason"].as_str().unwrap_or_default();
    assert!(reason.contains(expected), "{expected:?} in {result}");
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn read(dir: &TempDir, path: &str) -> String {
    std::fs::read_to_string(dir.path().join("ws").join(path)).unwrap()
}

/// The tool results the model was sent in its last request, by call id.
fn tool_results(provider: &ScriptedProvider) -> Vec<(String, String)> {
    provider.requests().last().unwrap().tool_results_by_id()
}

#[test]
fn a_task_reads_edits_and_finishes_and_undo_puts_the_files_back() {
    let dir = setup("exec-task");
    let provider = ScriptedProvider::start();
    let turns = [
        Turn::text(&["Let me look."])
            .tool_call("r1", "read_file", &json!({"path": "src/lib.rs"}).to_string())
            .tool_call("r2", "grep", &json!({"pattern": "a - b"}).to_string()),
        // Ambiguous: `a - b` is in both functions.
        Turn::default().tool_call(
            "e1",
            "edit",
            &json!({"path": "src/lib.rs", "old_string": "    a - b\n", "new_string": "    a + b\n"})
                .to_string(),
        ),
        Turn::default()
            .tool_call(
                "e2",
                "edit",
                &json!({"path": "src/lib.rs", "old_string": "add(a: i32, b: i32) -> i32 {\n    a - b", "new_string": "add(a: i32, b: i32) -> i32 {\n    a + b"})
                    .to_string(),
            )
            .tool_call("bad", "read_file", "{\"path\": \"src/lib.rs\"")
            .tool_call("u1", "launch_missiles", "{}"),
        Turn::text(&["Fixed ", "add: it subtracted."]).usage(1200, 1000, 40),
    ];
    for turn in &turns {
        provider.push(Reply::stream(Dialect::OpenAi, turn));
    }

    let out = exec(&dir, Some(&provider), &["fix add in src/lib.rs", "--json"]);
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let result = json_result(&out);
    assert_eq!(result["status"], "done", "{result}");
    assert_eq!(result["message"], "Fixed add: it subtracted.");
    assert_eq!(result["steps"], 4);
    assert_eq!(result["filesChanged"], json!(["src/lib.rs"]));
    assert_eq!(result["usage"]["input"], 1200);
    assert_eq!(result["model"], "openai/gpt-4.1");
    assert_eq!(
        read(&dir, "src/lib.rs"),
        LIB.replacen("    a - b", "    a + b", 1)
    );
    assert!(
        stderr.contains("→ read_file"),
        "progress on stderr: {stderr}"
    );
    assert!(!stderr.contains("sk-exec-test-key"), "no key in output");

    let requests = provider.requests();
    assert_eq!(requests.len(), 4);
    let first = requests[0].json();
    assert!(
        first["messages"][0]["content"]
            .as_str()
            .unwrap()
            .contains("Use four spaces."),
        "AGENTS.md is in the system prompt"
    );
    assert!(
        first["messages"][1]["content"]
            .as_str()
            .unwrap()
            .starts_with("Task: fix add in src/lib.rs"),
    );
    // Each request extends the previous one: the prompt prefix stays cacheable.
    for pair in requests.windows(2) {
        let (before, after) = (pair[0].json(), pair[1].json());
        let before = before["messages"].as_array().unwrap();
        assert_eq!(
            &after["messages"].as_array().unwrap()[..before.len()],
            &before[..]
        );
        assert_eq!(pair[0].json()["tools"], pair[1].json()["tools"]);
    }

    let results = tool_results(&provider);
    let result = |id: &str| &results.iter().find(|(call, _)| call == id).unwrap().1;
    assert!(result("r1").contains("2\t    a - b"), "{}", result("r1"));
    assert!(
        result("r2").starts_with("src/lib.rs\n  2: "),
        "{}",
        result("r2")
    );
    assert!(
        result("e1").contains("matches 2 places"),
        "{}",
        result("e1")
    );
    assert!(
        result("e2").contains("update src/lib.rs"),
        "{}",
        result("e2")
    );
    assert!(
        result("bad").contains("not valid JSON"),
        "{}",
        result("bad")
    );
    assert!(result("u1").contains("unknown tool"), "{}", result("u1"));

    let undo = exec(&dir, None, &["--undo"]);
    assert!(undo.status.success(), "{}", text(&undo.stderr));
    assert_eq!(read(&dir, "src/lib.rs"), LIB);
    let again = exec(&dir, None, &["--undo"]);
    assert_eq!(again.status.code(), Some(1), "nothing left to undo");
}

/// A small Python project whose tests the agent runs for real: unittest, since it configures
/// no pytest.
const CALC: &str = "def add(a, b):\n    return a - b\n";
const TEST_CALC: &str = "import unittest\n\nfrom calc import add\n\n\nclass AddTest(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n\n\nif __name__ == \"__main__\":\n    unittest.main()\n";

#[test]
fn a_task_on_a_python_project_reads_edits_runs_its_tests_and_finishes() {
    let dir = TempDir::new("exec-python");
    dir.write("ws/calc.py", CALC);
    dir.write("ws/test_calc.py", TEST_CALC);
    let provider = ScriptedProvider::start();
    let call = |id: &str, name: &str, arguments: Value| {
        Turn::default().tool_call(id, name, &arguments.to_string())
    };
    for turn in [
        call("r", "read_file", json!({"path": "calc.py"})),
        call("t1", "run_tests", json!({})),
        call(
            "e",
            "edit",
            json!({"path": "calc.py", "old_string": "return a - b", "new_string": "return a + b"}),
        ),
        call("t2", "run_tests", json!({"filter": "test_add"})),
        Turn::text(&["add adds; the test passes."]),
    ] {
        provider.push(Reply::stream(Dialect::OpenAi, &turn));
    }
    let out = exec(&dir, Some(&provider), &["make the tests pass", "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let result = json_result(&out);
    assert_eq!(result["status"], "done", "{result}");
    assert_eq!(result["filesChanged"], json!(["calc.py"]));
    assert_eq!(read(&dir, "calc.py"), "def add(a, b):\n    return a + b\n");

    let results = tool_results(&provider);
    let result = |id: &str| &results.iter().find(|(call, _)| call == id).unwrap().1;
    assert!(
        result("r").contains("2\t    return a - b"),
        "{}",
        result("r")
    );
    // The detected command ran for real and failed; its failure comes first, parsed.
    let failed = result("t1");
    assert!(
        failed.starts_with("unittest: ") && failed.contains("test_add"),
        "{failed}"
    );
    assert!(
        failed.contains("$ python3 -m unittest\nexit code 1,"),
        "{failed}"
    );
    assert!(failed.contains("AssertionError: -1 != 5"), "{failed}");
    let passed = result("t2");
    assert!(
        passed.starts_with(
            "unittest: 0 failed, 1 passed\n$ python3 -m unittest -k 'test_add'\nexit code 0,"
        ),
        "{passed}"
    );
    assert!(
        passed.contains("Ran 1 test") && passed.contains("\nOK"),
        "{passed}"
    );
}

#[test]
fn undo_refuses_when_a_file_changed_since_the_run() {
    let dir = setup("exec-undo-stale");
    let provider = ScriptedProvider::start();
    provider.push(Reply::stream(
        Dialect::OpenAi,
        &Turn::default().tool_call(
            "w",
            "write_file",
            &json!({"path": "NOTES.md", "content": "notes\n"}).to_string(),
        ),
    ));
    provider.push(Reply::stream(
        Dialect::OpenAi,
        &Turn::text(&["Wrote notes."]),
    ));
    let out = exec(&dir, Some(&provider), &["write notes"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).trim(), "Wrote notes.");
    std::fs::write(dir.path().join("ws/NOTES.md"), "the user's own notes\n").unwrap();
    let undo = exec(&dir, None, &["--undo"]);
    assert_eq!(undo.status.code(), Some(1));
    assert!(
        text(&undo.stderr).contains("nothing restored"),
        "{}",
        text(&undo.stderr)
    );
    assert_eq!(read(&dir, "NOTES.md"), "the user's own notes\n");
}

#[test]
fn failures_end_the_run_with_a_reason() {
    // A wrong key: the provider's 401 becomes a message naming the variable to check.
    let dir = setup("exec-401");
    let provider = ScriptedProvider::start();
    provider.push(Reply::fault(Dialect::OpenAi, Fault::Unauthorized));
    let out = exec(&dir, Some(&provider), &["anything", "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let result = json_result(&out);
    assert_eq!(result["status"], "failed");
    assert_reason(&result, "OPENAI_API_KEY");

    // The step limit.
    let dir = setup("exec-steps");
    let provider = ScriptedProvider::start();
    for _ in 0..2 {
        provider.push(Reply::stream(
            Dialect::OpenAi,
            &Turn::default().tool_call("l", "list_dir", "{}"),
        ));
    }
    let out = exec(
        &dir,
        Some(&provider),
        &["loop", "--max-steps", "2", "--json"],
    );
    assert_eq!(out.status.code(), Some(1));
    let result = json_result(&out);
    assert_reason(&result, "step limit (2)");
    assert_eq!(provider.requests().len(), 2);

    // No model at all.
    let dir = setup("exec-no-model");
    let out = exec(&dir, None, &["anything"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("WRIGHT_MODEL"),
        "{}",
        text(&out.stderr)
    );
    assert!(Path::new(&dir.path().join("ws/src/lib.rs")).exists());
}

#[test]
fn the_configured_limits_end_a_run_and_the_command_line_wins_over_the_step_limit() {
    // agent.max_tokens: the provider's count, input and output, over the limit.
    let dir = setup("exec-token-limit");
    dir.write("ws/.wright/config.toml", "[agent]\nmax_tokens = 1000\n");
    let provider = ScriptedProvider::start();
    for _ in 0..2 {
        provider.push(Reply::stream(
            Dialect::OpenAi,
            &Turn::default()
                .tool_call("l", "list_dir", "{}")
                .usage(900, 0, 200),
        ));
    }
    let out = exec(&dir, Some(&provider), &["look", "--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let result = json_result(&out);
    assert_eq!(result["status"], "failed", "{result}");
    assert_reason(
        &result,
        "used 1100 tokens, over the session's limit of 1000",
    );
    assert_eq!(provider.requests().len(), 1);

    // agent.max_wall_secs: a model that never answers is given up on at the deadline.
    let dir = setup("exec-time-limit");
    dir.write("ws/.wright/config.toml", "[agent]\nmax_wall_secs = 1\n");
    let provider = ScriptedProvider::start();
    provider.push(Reply::stream(Dialect::OpenAi, &Turn::text(&["never"])).stall_after(0));
    let started = std::time::Instant::now();
    let out = exec(&dir, Some(&provider), &["wait", "--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        started.elapsed() < std::time::Duration::from_secs(30),
        "the deadline, not the stream's idle timeout, ended it"
    );
    let result = json_result(&out);
    assert_reason(&result, "time limit of 1 s");

    // agent.max_steps, and --max-steps over it.
    let dir = setup("exec-configured-steps");
    dir.write("ws/.wright/config.toml", "[agent]\nmax_steps = 1\n");
    let provider = ScriptedProvider::start();
    for _ in 0..3 {
        provider.push(Reply::stream(
            Dialect::OpenAi,
            &Turn::default().tool_call("l", "list_dir", "{}"),
        ));
    }
    let out = exec(&dir, Some(&provider), &["loop", "--json"]);
    let result = json_result(&out);
    assert_reason(&result, "step limit (1)");
    assert_eq!(provider.requests().len(), 1);
    let out = exec(
        &dir,
        Some(&provider),
        &["loop", "--max-steps", "2", "--json"],
    );
    let result = json_result(&out);
    assert_reason(&result, "step limit (2)");
    assert_eq!(provider.requests().len(), 3);
}

/// A workspace with a 400-line file and a context window small enough that reading it in four
/// parts passes the compaction threshold; the provider scripted to read those four parts.
fn compaction_setup(name: &str) -> (TempDir, ScriptedProvider) {
    let dir = setup(name);
    let big: String = (1..=400)
        .map(|n| format!("pub const C{n}: u32 = {n};\n"))
        .collect();
    dir.write("ws/src/big.rs", &big);
    dir.write(
        "ws/.wright/config.toml",
        "[compaction]\ncontext_window = 6000\nthreshold_percent = 50\nkeep_recent = 1\n",
    );
    let provider = ScriptedProvider::start();
    for (n, start) in [1, 101, 201, 301].into_iter().enumerate() {
        provider.push(Reply::stream(
            Dialect::OpenAi,
            &Turn::default().tool_call(
                &format!("r{n}"),
                "read_file",
                &json!({"path": "src/big.rs", "start_line": start, "end_line": start + 99})
                    .to_string(),
            ),
        ));
    }
    (dir, provider)
}

#[test]
fn a_long_session_is_compacted_and_masked_outputs_stay_readable() {
    let (dir, provider) = compaction_setup("exec-compaction");
    provider.push(Reply::stream(
        Dialect::OpenAi,
        &Turn::default().tool_call(
            "a",
            "read_artifact",
            r#"{"id": "a1", "start_line": 3, "end_line": 4}"#,
        ),
    ));
    provider.push(Reply::stream(
        Dialect::OpenAi,
        &Turn::text(&["Read it all."]),
    ));

    let out = exec(&dir, Some(&provider), &["read big.rs", "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("compacted:"),
        "{}",
        text(&out.stderr)
    );
    let last = provider.requests().last().unwrap().json();
    let messages = last["messages"].as_array().unwrap();
    let contents: Vec<&str> = messages
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert!(
        contents[0]
            .starts_with("[masked tool output: read_file src/big.rs lines 1-100 → artifact a1"),
        "{}",
        contents[0]
    );
    // The newest output is never masked, and the artifact reads back whole.
    let artifact = contents.last().unwrap();
    assert!(artifact.contains("pub const C2: u32 = 2;"), "{artifact}");
    assert!(
        !artifact.contains("C5:"),
        "only the lines asked for: {artifact}"
    );
}

#[test]
fn a_session_killed_midway_resumes_from_its_journal_and_undo_covers_both_runs() {
    let dir = setup("exec-resume");
    let provider = ScriptedProvider::start();
    provider.push(Reply::stream(
        Dialect::OpenAi,
        &Turn::default()
            .tool_call(
                "e1",
                "edit",
                &json!({"path": "src/lib.rs", "old_string": "add(a: i32, b: i32) -> i32 {\n    a - b", "new_string": "add(a: i32, b: i32) -> i32 {\n    a + b"})
                    .to_string(),
            )
            .usage(100, 0, 10),
    ));
    // The second answer never comes: the process is killed while it waits.
    provider.push(Reply::stream(Dialect::OpenAi, &Turn::text(&["never"])).stall_after(0));
    let (_, id, pid) = kill_after(&dir, &provider, "fix add", 2);
    assert_eq!(read(&dir, "src/lib.rs"), LIB.replacen("a - b", "a + b", 1));
    // Had the kill fallen between an edit's write and its rename, this would be left; the
    // next run removes it (its writer is gone) and leaves a live process's alone.
    let stale = dir.write(&format!("ws/src/.lib.rs.wright-{pid}-0.tmp"), "half");
    let live = dir.write(
        &format!("ws/src/.lib.rs.wright-{}-0.tmp", std::process::id()),
        "in flight",
    );

    provider.push(Reply::stream(
        Dialect::OpenAi,
        &Turn::text(&["Resumed; add is fixed."]).usage(50, 0, 5),
    ));
    let out = exec(&dir, Some(&provider), &["--resume", &id, "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let result = json_result(&out);
    assert_eq!(result["status"], "done", "{result}");
    // The steps and tokens of the killed process count: the journal recorded them.
    assert_eq!(result["steps"], 2, "{result}");
    assert_eq!(
        (&result["usage"]["input"], &result["usage"]["output"]),
        (&json!(150), &json!(15)),
        "{result}"
    );
    assert!(!stale.exists() && live.exists());
    std::fs::remove_file(live).unwrap();
    // The resumed request carries the whole history the killed process had sent.
    let requests = provider.requests();
    let (before, after) = (requests[1].json(), requests[2].json());
    let before = before["messages"].as_array().unwrap();
    assert_eq!(
        &after["messages"].as_array().unwrap()[..before.len()],
        &before[..]
    );
    // A finished session is not resumed again.
    let again = exec(&dir, Some(&provider), &["--resume", &id]);
    assert_eq!(again.status.code(), Some(1));
    assert!(
        text(&again.stderr).contains("already ended"),
        "{}",
        text(&again.stderr)
    );
    // The edit made before the kill is undone: the record was saved as it happened.
    let undo = exec(&dir, None, &["--undo"]);
    assert!(undo.status.success(), "{}", text(&undo.stderr));
    assert_eq!(read(&dir, "src/lib.rs"), LIB);
}

#[test]
fn a_compacted_session_killed_and_resumed_still_finishes_with_its_masked_history() {
    let (dir, provider) = compaction_setup("exec-compaction-resume");
    provider.push(Reply::stream(Dialect::OpenAi, &Turn::text(&["never"])).stall_after(0));
    let (stderr, id, _) = kill_after(&dir, &provider, "read big.rs", 5);
    assert!(stderr.contains("compacted:"), "{stderr}");

    // The placeholders name artifacts of the killed process: they read back, the same text.
    provider.push(Reply::stream(
        Dialect::OpenAi,
        &Turn::default().tool_call(
            "a",
            "read_artifact",
            r#"{"id": "a1", "start_line": 3, "end_line": 4}"#,
        ),
    ));
    provider.push(Reply::stream(Dialect::OpenAi, &Turn::text(&["All read."])));
    let out = exec(&dir, Some(&provider), &["--resume", &id, "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let requests = provider.requests();
    // The resumed request is the interrupted one, placeholders and all, plus nothing else.
    assert_eq!(
        requests[5].json()["messages"],
        requests[4].json()["messages"]
    );
    assert!(
        requests[5]
            .body_text()
            .contains("[masked tool output: read_file src/big.rs lines 1-100 → artifact a1")
    );
    let results = tool_results(&provider);
    let artifact = &results.iter().find(|(call, _)| call == "a").unwrap().1;
    assert!(
        artifact.starts_with("[artifact a1 from read_file: lines 3-4 of "),
        "{artifact}"
    );
    assert!(
        artifact.contains("pub const C2: u32 = 2;") && artifact.contains("pub const C3: u32 = 3;"),
        "the text read before the kill: {artifact}"
    );
}

#[test]
fn commands_run_in_the_sandbox_in_place_and_refusals_are_explained() {
    let dir = setup("exec-commands");
    dir.write(
        "ws/.wright/config.toml",
        "[agent]\napprove_commands = \"git push*; touch forbidden*\"\ntest_command = \"printf 'FAILED tests/test_math.py::test_add - AssertionError: 1 != 2\\\\n=== 1 failed, 2 passed in 0.02s ===\\\\n'; exit 1\"\n",
    );
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let provider = ScriptedProvider::start();
    let call = |id: &str, name: &str, arguments: Value| {
        Turn::default().tool_call(id, name, &arguments.to_string())
    };
    provider.push(Reply::stream(
        Dialect::OpenAi,
        &call(
            "c1",
            "run_command",
            json!({"command": "echo made > made.txt && cat made.txt && echo $OPENAI_API_KEY"}),
        ),
    ));
    provider.push(Reply::stream(
        Dialect::OpenAi,
        &call("t1", "run_tests", json!({})),
    ));
    provider.push(Reply::stream(
        Dialect::OpenAi,
        &call("s1", "run_command", json!({"command": "seq 1 20000"})),
    ));
    provider.push(Reply::stream(
        Dialect::OpenAi,
        &call(
            "a1",
            "run_command",
            json!({"command": "touch forbidden.txt"}),
        ),
    ));
    provider.push(Reply::stream(
        Dialect::OpenAi,
        &call(
            "n1",
            "run_command",
            json!({"command": format!("bash -c 'echo hi > /dev/tcp/127.0.0.1/{port}'"), "timeout_secs": 10}),
        ),
    ));
    provider.push(Reply::stream(Dialect::OpenAi, &Turn::text(&["Ran them."])));
    let out = exec(&dir, Some(&provider), &["run things", "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        read(&dir, "made.txt"),
        "made\n",
        "in place: the workspace is writable"
    );
    let results = tool_results(&provider);
    let result = |id: &str| &results.iter().find(|(call, _)| call == id).unwrap().1;
    assert!(result("c1").contains("exit code 0"), "{}", result("c1"));
    assert!(result("c1").contains("made\n"), "{}", result("c1"));
    assert!(
        !result("c1").contains("sk-exec-test-key"),
        "no credentials inside: {}",
        result("c1")
    );
    // The failures come first, parsed: name, message, location.
    assert!(
        result("t1")
            .starts_with("pytest: 1 failed, 2 passed; failed: tests/test_math.py::test_add"),
        "{}",
        result("t1")
    );
    assert!(result("t1").contains("exit code 1"), "{}", result("t1"));
    // A command the configuration wants approved does not run without someone to ask.
    assert!(
        result("a1").contains("asks for approval"),
        "{}",
        result("a1")
    );
    assert!(!dir.path().join("ws/forbidden.txt").exists());
    // A long output: head and tail in the prompt, the whole of it an artifact.
    assert!(result("s1").contains("\n1\n2\n") && result("s1").contains("\n20000\n"));
    assert!(
        result("s1").contains("(the whole output: read_artifact a"),
        "{}",
        result("s1")
    );
    let refused = result("n1");
    assert!(refused.contains("sandbox: "), "{refused}");
    assert!(refused.contains("approval"), "{refused}");
    drop(listener);
}

#[test]
fn the_key_can_come_from_a_command_in_the_user_configuration_never_from_the_workspace() {
    let dir = setup("exec-key-command");
    dir.write(
        "config/wright/config.toml",
        "[providers.openai]\napi_key_command = \"echo sk-from-the-command\"\n",
    );
    // A repository must not be able to run commands on the host.
    dir.write(
        "ws/.wright/config.toml",
        "[providers.openai]\napi_key_command = \"touch pwned\"\n",
    );
    let provider = ScriptedProvider::start();
    provider.push(Reply::stream(Dialect::OpenAi, &Turn::text(&["Hello."])));
    let out = command(&dir, None, &["say hello"])
        .env("WRIGHT_MODEL", "openai/gpt-4.1")
        .env("OPENAI_BASE_URL", provider.openai_base_url())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        provider.requests()[0].header("authorization"),
        Some("Bearer sk-from-the-command")
    );
    assert!(!dir.path().join("ws/pwned").exists());
    assert!(
        text(&out.stderr).contains("api_key_command"),
        "the workspace file's key is reported: {}",
        text(&out.stderr)
    );
    assert!(!text(&out.stderr).contains("sk-from-the-command"));
}

#[test]
fn a_workspace_file_adds_to_the_users_approvals_and_cannot_replace_them() {
    let dir = setup("exec-approvals-union");
    dir.write(
        "config/wright/config.toml",
        "[agent]\napprove_commands = \"touch forbidden*\"\n",
    );
    // A repository (or a command that rewrote this file) trying to drop the user's gate.
    dir.write(
        "ws/.wright/config.toml",
        "[agent]\napprove_commands = \"git push*\"\n",
    );
    let provider = ScriptedProvider::start();
    for (id, command) in [("u", "touch forbidden.txt"), ("w", "git push origin main")] {
        provider.push(Reply::stream(
            Dialect::OpenAi,
            &Turn::default().tool_call(id, "run_command", &json!({"command": command}).to_string()),
        ));
    }
    provider.push(Reply::stream(Dialect::OpenAi, &Turn::text(&["Tried."])));
    let out = exec(&dir, Some(&provider), &["run them", "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let results = tool_results(&provider);
    for id in ["u", "w"] {
        let result = &results.iter().find(|(call, _)| call == id).unwrap().1;
        assert!(result.contains("asks for approval"), "{id}: {result}");
    }
    assert!(
        !dir.path().join("ws/forbidden.txt").exists(),
        "the user's own gate still holds"
    );
}

#[test]
fn a_workspace_file_may_keep_the_network_off_but_never_open_it() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let connect = json!({
        "command": format!("bash -c 'echo hi > /dev/tcp/127.0.0.1/{port}'"),
        "timeout_secs": 10,
    });
    let run = |name: &str, network: &str| {
        let dir = setup(name);
        dir.write(
            "ws/.wright/config.toml",
            &format!("[sandbox]\nnetwork = \"{network}\"\n"),
        );
        let provider = ScriptedProvider::start();
        provider.push(Reply::stream(
            Dialect::OpenAi,
            &Turn::default().tool_call("n", "run_command", &connect.to_string()),
        ));
        provider.push(Reply::stream(Dialect::OpenAi, &Turn::text(&["Done."])));
        let out = exec(&dir, Some(&provider), &["connect", "--json"]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        (tool_results(&provider)[0].1.clone(), text(&out.stderr))
    };
    let (opened, stderr) = run("exec-network-loosen", "allow");
    assert!(opened.contains("sandbox: "), "still off: {opened}");
    assert!(
        listener.accept().is_err(),
        "the host's listener was reached"
    );
    assert!(
        !stderr.contains("sandbox.network"),
        "not a problem: {stderr}"
    );
    let (closed, stderr) = run("exec-network-tighten", "deny");
    assert!(
        closed.contains("the configuration keeps the network off (sandbox.network = deny)"),
        "{closed}"
    );
    assert!(!stderr.contains("sandbox.network"), "{stderr}");
}

/// The user's file names the scripted provider's model; `extra` goes on top of it.
fn user_model(dir: &TempDir, provider: &ScriptedProvider, extra: &str) {
    dir.write(
        "config/wright/config.toml",
        &format!(
            "{extra}model = \"openai/gpt-4.1\"\n[providers.openai]\nbase_url = \"{}\"\n",
            provider.openai_base_url()
        ),
    );
}

/// `wright exec` with only the key from the environment: the model comes from the files.
fn exec_with_files(dir: &TempDir, task: &str) -> Output {
    command(dir, None, &[task])
        .env("OPENAI_API_KEY", "sk-exec-test-key")
        .output()
        .unwrap()
}

#[test]
fn a_workspace_naming_a_gguf_file_of_its_own_is_refused_and_the_users_model_serves() {
    let dir = setup("exec-workspace-gguf");
    // Not a model: loading it would fail; running a real one would run the repository's file.
    dir.write("ws/repo_model.gguf", "GGUF\u{3}\0\0\0 not really a model");
    dir.write(
        "ws/.wright/config.toml",
        "model = \"local/repo_model.gguf\"\n[providers.local]\npath = \"repo_model.gguf\"\n",
    );
    let provider = ScriptedProvider::start();
    user_model(&dir, &provider, "allow_workspace_model = true\n");
    provider.push(Reply::stream(Dialect::OpenAi, &Turn::text(&["Hello."])));
    let out = exec_with_files(&dir, "say hello");
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(provider.requests().len(), 1, "{stderr}");
    assert_eq!(provider.requests()[0].json()["model"], "gpt-4.1");
    let file = dir.path().join("ws/.wright/config.toml");
    for key in ["`model`", "`providers.local.path`"] {
        assert!(
            stderr
                .lines()
                .any(|line| line.contains(&file.display().to_string()) && line.contains(key)),
            "{key} refused, naming the file: {stderr}"
        );
    }
    assert!(
        stderr.contains("a repository must not choose a local model"),
        "{stderr}"
    );
}

#[test]
fn the_users_model_wins_over_a_workspaces() {
    let dir = setup("exec-user-model");
    dir.write(
        "ws/.wright/config.toml",
        "model = \"openai/gpt-4.1-mini\"\n",
    );
    let provider = ScriptedProvider::start();
    user_model(&dir, &provider, "");
    provider.push(Reply::stream(Dialect::OpenAi, &Turn::text(&["Hello."])));
    let out = exec_with_files(&dir, "say hello");
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(provider.requests()[0].json()["model"], "gpt-4.1");
}

#[test]
fn allow_workspace_model_lets_the_workspaces_model_serve() {
    let dir = setup("exec-allow-workspace-model");
    dir.write(
        "ws/.wright/config.toml",
        "model = \"openai/gpt-4.1-mini\"\n",
    );
    let provider = ScriptedProvider::start();
    user_model(&dir, &provider, "allow_workspace_model = true\n");
    provider.push(Reply::stream(Dialect::OpenAi, &Turn::text(&["Hello."])));
    // Over the user's file and their WRIGHT_MODEL alike: the user let the workspace choose.
    let out = command(&dir, None, &["say hello"])
        .env("OPENAI_API_KEY", "sk-exec-test-key")
        .env("WRIGHT_MODEL", "openai/gpt-4.1")
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("configuration:"), "no problem: {stderr}");
    assert_eq!(provider.requests()[0].json()["model"], "gpt-4.1-mini");
}

#[test]
fn ctrl_c_cancels_a_running_command_at_once_and_its_processes_die() {
    let dir = setup("exec-cancel-command");
    let provider = ScriptedProvider::start();
    provider.push(Reply::stream(
        Dialect::OpenAi,
        &Turn::default().tool_call(
            "c",
            "run_command",
            &json!({"command": "echo started; sleep 3; touch late.txt"}).to_string(),
        ),
    ));
    let child = command(&dir, Some(&provider), &["wait", "--json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The command is running once the model's answer is in and a moment has passed.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while provider.outcomes().is_empty() {
        assert!(std::time::Instant::now() < deadline, "no model call");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    let interrupted = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(interrupted.success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let result = json_result(&out);
    assert_eq!(result["status"], "cancelled", "{result}");
    // Past the command's own end: it was killed, not left running.
    std::thread::sleep(std::time::Duration::from_secs(4));
    assert!(!dir.path().join("ws/late.txt").exists());
}

#[test]
fn a_run_that_failed_resumes_and_a_finished_one_does_not() {
    let dir = setup("exec-resume-failed");
    let provider = ScriptedProvider::start();
    for _ in 0..3 {
        provider.push(Reply::stream(
            Dialect::OpenAi,
            &Turn::default()
                .tool_call("l", "list_dir", "{}")
                .usage(100, 0, 10),
        ));
    }
    let out = exec(
        &dir,
        Some(&provider),
        &["look", "--max-steps", "1", "--json"],
    );
    assert_eq!(out.status.code(), Some(1));
    let id = session_id(&text(&out.stderr));
    // A resumed session goes on with the budget it has left, not a fresh one: one more step.
    let resumed = exec(
        &dir,
        Some(&provider),
        &["--resume", &id, "--max-steps", "2", "--json"],
    );
    assert_eq!(resumed.status.code(), Some(1));
    let result: Value = serde_json::from_str(text(&resumed.stdout).trim()).unwrap();
    assert_reason(&result, "step limit (2)");
    assert_eq!(provider.requests().len(), 2, "one step in the resumed run");
    assert_eq!(
        (&result["steps"], &result["usage"]["input"]),
        (&json!(2), &json!(200)),
        "{result}"
    );
    provider.push(Reply::stream(Dialect::OpenAi, &Turn::text(&["Looked."])));
    // The third scripted tool call, then the answer.
    let resumed = exec(&dir, Some(&provider), &["--resume", &id, "--json"]);
    assert!(resumed.status.success(), "{}", text(&resumed.stderr));
    let result: Value = serde_json::from_str(text(&resumed.stdout).trim()).unwrap();
    assert_eq!(result["message"], "Looked.");
    assert_eq!(result["steps"], 4, "{result}");
    let again = exec(&dir, Some(&provider), &["--resume", &id]);
    assert_eq!(again.status.code(), Some(1));
    assert!(
        text(&again.stderr).contains("the model finished it"),
        "{}",
        text(&again.stderr)
    );
}

/// `command` run under a pseudo-terminal (util-linux `script`), so that wright's stdout and
/// stderr are a terminal; what the terminal received, with the pty's `\r\n` made `\n`.
fn on_a_terminal(command: &Command) -> String {
    let quote =
        |word: &std::ffi::OsStr| format!("'{}'", word.to_str().unwrap().replace('\'', "'\\''"));
    let mut line: Vec<String> = command
        .get_envs()
        .filter_map(|(key, value)| Some(format!("{}={}", key.to_str()?, quote(value?))))
        .collect();
    line.insert(0, "env -i".to_owned());
    line.push(quote(command.get_program()));
    line.extend(command.get_args().map(quote));
    let out = Command::new("script")
        .args(["-q", "-e", "-c", &line.join(" "), "/dev/null"])
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .output()
        .expect("running script (util-linux)");
    String::from_utf8_lossy(&out.stdout).replace("\r\n", "\n")
}

#[test]
fn control_sequences_from_the_model_and_in_file_names_reach_a_terminal_escaped() {
    let dir = setup("exec-terminal-escapes");
    let planted = "evil\u{1b}]0;pwned\u{7}.py";
    dir.write(
        &format!("ws/{planted}"),
        "def hostile_marker():\n    pass\n",
    );
    let provider = ScriptedProvider::start();
    let answer =
        "Done.\u{1b}]52;c;Y3VybCBldmlsfHNo\u{7}\u{1b}[2J\rwright: all tests passed\u{9b}31m";
    provider.push(Reply::stream(Dialect::OpenAi, &Turn::text(&[answer])));
    let seen = on_a_terminal(&command(&dir, Some(&provider), &["say done"]));
    assert_eq!(provider.requests().len(), 1, "{seen}");
    assert!(
        seen.contains(
            "\\x1b]52;c;Y3VybCBldmlsfHNo\\x07\\x1b[2J\\rwright: all tests passed\\u{9b}31m"
        ),
        "{seen:?}"
    );
    // wright's own log lines may be coloured; nothing of the model's reaches the terminal raw.
    for raw in ["\u{1b}]52", "\u{1b}[2J", "\u{9b}", "\rwright: all"] {
        assert!(!seen.contains(raw), "{raw:?} in {seen:?}");
    }

    // Repository file names, in `wright grep` (and any listing) on a terminal.
    let root = dir.path().join("ws");
    let mut grep = Command::new(env!("CARGO_BIN_EXE_wright"));
    grep.args(["grep", "hostile_marker", "--root"])
        .arg(&root)
        .env_clear()
        .env("HOME", dir.path())
        .env("XDG_CACHE_HOME", dir.path().join("cache"));
    let seen = on_a_terminal(&grep);
    assert!(seen.contains("evil\\x1b]0;pwned\\x07.py:1:"), "{seen:?}");
    assert!(!seen.contains("\u{1b}]0;pwned"), "{seen:?}");

    // Piped, the bytes are the data, unchanged; `--json` is JSON.
    let piped = grep.output().unwrap();
    assert!(
        text(&piped.stdout).starts_with(&format!("{planted}:1:")),
        "{piped:?}"
    );
    let json = grep.arg("--json").output().unwrap();
    let line: Value =
        serde_json::from_slice(json.stdout.split(|b| *b == b'\n').next().unwrap()).unwrap();
    assert_eq!(line["path"], planted);

    // A command's output through `wright sandbox run`: escaped on a terminal, byte-exact piped.
    let mut run = Command::new(env!("CARGO_BIN_EXE_wright"));
    run.args(["sandbox", "run", "--root"])
        .arg(&root)
        .args(["--", "printf", "out\\033]52;c;eA==\\007\\033[2J\\n"])
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", dir.path())
        .env("XDG_CACHE_HOME", dir.path().join("cache"));
    let seen = on_a_terminal(&run);
    assert!(
        seen.contains("out\\x1b]52;c;eA==\\x07\\x1b[2J\n"),
        "{seen:?}"
    );
    let piped = run.output().unwrap();
    assert_eq!(piped.stdout, b"out\x1b]52;c;eA==\x07\x1b[2J\n", "{piped:?}");
}

#[test]
fn a_stream_cut_mid_answer_is_asked_again_and_the_task_finishes() {
    let dir = setup("exec-stream-cut");
    let provider = ScriptedProvider::start();
    let edit = Turn::text(&["I will fix ", "add now."]).tool_call(
        "e1",
        "edit",
        &json!({"path": "src/lib.rs", "old_string": "add(a: i32, b: i32) -> i32 {\n    a - b", "new_string": "add(a: i32, b: i32) -> i32 {\n    a + b"})
            .to_string(),
    );
    // Cut once in the middle of the tool call's arguments (after the text), then whole.
    provider.push(Reply::stream(Dialect::OpenAi, &edit).cut_after(6));
    provider.push(Reply::stream(Dialect::OpenAi, &edit));
    provider.push(Reply::stream(Dialect::OpenAi, &Turn::text(&["Fixed add."])));
    let out = exec(&dir, Some(&provider), &["fix add in src/lib.rs", "--json"]);
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let result = json_result(&out);
    assert_eq!(result["status"], "done", "{result}");
    assert_eq!(result["message"], "Fixed add.");
    assert_eq!(result["steps"], 2, "the retried call is the same step");
    assert_eq!(provider.requests().len(), 3);
    assert_eq!(
        read(&dir, "src/lib.rs"),
        LIB.replacen("    a - b", "    a + b", 1)
    );
    assert!(
        stderr.contains("step 1 again: the answer was cut"),
        "{stderr}"
    );
    // The model's next request carries the whole answer once, not the cut one too.
    let second = provider.requests()[2].body_text().to_owned();
    assert_eq!(second.matches("I will fix add now.").count(), 1, "{second}");
}
