//! Faults around a running agent session, over stdio with the real binary: a provider that
//! errs, stalls, cuts its stream, sends tool calls that make no sense or an answer of 50 MB;
//! commands that ignore SIGTERM, leave children behind, flood their output or never end; an
//! editor that refuses an edit with an error, closes the document mid-run, types during an
//! edit, or disappears.
//!
//! For each: the session ends (or goes on) with a status that says what happened, the server
//! answers other requests meanwhile (checked once the fault is under way: the provider has
//! the session's request, the command's process runs), no buffer text is lost, and the
//! session's journal parses line by line and ends with the outcome the editor was told. The client-level behaviour of
//! each provider fault (retry or not, the wording) is tested in `server/tests/llm.rs`; this
//! file is about what the whole server does with it.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use wright_tests::provider::{Dialect, Fault, Reply, ScriptedProvider, Turn};
use wright_tests::session::{
    TEST_KEY, agent_spawn, applies, apply_edit_request, finished, journal, run, start_agent_server,
    versioned_edits, wait_until,
};
use wright_tests::{Editor, TempDir, file_uri};

const LIB: &str = "pub fn add(a: i32, b: i32) -> i32 {\n    a - b\n}\n";

/// Short timeouts so a stall is a second, not a minute; two attempts per call.
const FAST_LLM: &str = "[llm]\nidle_timeout_secs = 1\nfirst_byte_timeout_secs = 2\nmax_attempts = 2\nmax_retry_wait_secs = 2\n";

/// A workspace with `src/lib.rs` open in the editor (its unsaved text differs from the disk).
struct Fixture {
    dir: TempDir,
    provider: ScriptedProvider,
    editor: Editor,
    uri: String,
    /// What the editor's buffer holds.
    text: String,
}

impl Fixture {
    fn new(name: &str) -> Self {
        let dir = TempDir::new(name);
        dir.write("ws/src/lib.rs", "on disk\n");
        dir.write("ws/.wright/config.toml", FAST_LLM);
        let provider = ScriptedProvider::start();
        let mut editor = start_agent_server(&agent_spawn(&dir, &provider), versioned_edits());
        let uri = file_uri(&dir.path().join("ws/src/lib.rs"));
        editor.open(&uri, "rust", 1, LIB);
        Self {
            dir,
            provider,
            editor,
            uri,
            text: LIB.to_owned(),
        }
    }

    /// The server answers an editor's requests, and holds the buffer as the editor does.
    fn still_serving(&mut self, what: &str) {
        let symbols = self
            .editor
            .request_response("workspace/symbol", json!({"query": "add"}));
        assert!(symbols.get("result").is_some(), "{what}: {symbols}");
        let (_, text) = self.editor.text_of(&self.uri);
        assert_eq!(text, self.text, "{what}: the buffer lost text");
    }

    /// The journal of `session` parses and its end line carries `status`.
    fn journal_ends(&self, session: &str, status: &str, what: &str) -> Vec<Value> {
        let lines = journal(&self.dir, session, false);
        let last = lines.last().unwrap();
        assert_eq!(last["kind"], "end", "{what}: {last}");
        assert_eq!(last["outcome"]["status"], status, "{what}: {last}");
        lines
    }

    /// The content of every tool result in the last request the model got.
    fn last_tool_results(&self) -> Vec<String> {
        self.provider.requests().last().unwrap().tool_results()
    }
}

fn text(pieces: &[&str]) -> Reply {
    Reply::stream(Dialect::OpenAi, &Turn::text(pieces))
}

fn call(name: &str, arguments: &str) -> Reply {
    Reply::stream(
        Dialect::OpenAi,
        &Turn::default().tool_call("c1", name, arguments),
    )
}

fn fault(fault: Fault) -> Reply {
    Reply::fault(Dialect::OpenAi, fault)
}

/// One provider fault: the replies the session meets, the status it ends with, and words its
/// reason (a failure) or the model's last tool result (a bad call) must contain.
struct ProviderCase {
    name: &'static str,
    replies: Vec<Reply>,
    status: &'static str,
    /// Whether a step is asked again after a cut (the editor gets `stepRetried`).
    retried: bool,
    reason: Option<&'static str>,
    tool_result: Option<&'static str>,
}

#[test]
fn provider_faults_end_or_continue_the_session_with_a_clear_status() {
    let mut fixture = Fixture::new("faults-provider");
    let huge = "x".repeat(1024 * 1024);
    let cases = vec![
        ProviderCase {
            name: "429 with Retry-After, then an answer",
            replies: vec![
                fault(Fault::RateLimited {
                    retry_after: Some("1".into()),
                }),
                text(&["Done."]),
            ],
            status: "done",
            reason: None,
            tool_result: None,
            retried: false,
        },
        ProviderCase {
            name: "500, then an answer",
            replies: vec![fault(Fault::ServerError), text(&["Done."])],
            status: "done",
            reason: None,
            tool_result: None,
            retried: false,
        },
        ProviderCase {
            name: "401",
            replies: vec![fault(Fault::Unauthorized)],
            status: "failed",
            reason: Some("OPENAI_API_KEY"),
            tool_result: None,
            retried: false,
        },
        ProviderCase {
            name: "unknown model",
            replies: vec![fault(Fault::UnknownModel)],
            status: "failed",
            reason: Some("model"),
            tool_result: None,
            retried: false,
        },
        ProviderCase {
            name: "context too long",
            replies: vec![fault(Fault::ContextTooLong)],
            status: "failed",
            reason: Some("context"),
            tool_result: None,
            retried: false,
        },
        ProviderCase {
            name: "stream cut mid-token, then whole",
            replies: vec![
                text(&["Half", " an ans", "wer"]).cut_after(2),
                text(&["Whole answer."]),
            ],
            status: "done",
            reason: None,
            tool_result: None,
            retried: true,
        },
        ProviderCase {
            name: "stream cut mid-token on every attempt",
            replies: vec![
                text(&["Half", " an ans", "wer"]).cut_after(2),
                text(&["Half", " an ans", "wer"]).cut_after(2),
            ],
            status: "failed",
            reason: Some("cut"),
            tool_result: None,
            retried: true,
        },
        ProviderCase {
            name: "stream stalled after output on every attempt",
            replies: vec![
                text(&["Thinking", " more"]).stall_after(2),
                text(&["Thinking", " more"]).stall_after(2),
            ],
            status: "failed",
            reason: Some("stall"),
            tool_result: None,
            retried: true,
        },
        ProviderCase {
            name: "tool-call arguments that are not JSON",
            replies: vec![
                call("read_file", r#"{"path": "src/lib.rs""#),
                text(&["Done."]),
            ],
            status: "done",
            reason: None,
            tool_result: Some("JSON"),
            retried: false,
        },
        ProviderCase {
            name: "a tool that does not exist",
            replies: vec![
                call("delete_everything", r#"{"path": "/"}"#),
                text(&["Done."]),
            ],
            status: "done",
            reason: None,
            tool_result: Some("unknown tool \"delete_everything\""),
            retried: false,
        },
        ProviderCase {
            name: "a 50 MB answer",
            replies: vec![text(&vec![huge.as_str(); 50])],
            status: "failed",
            reason: Some("the model's response exceeded 4 MiB"),
            tool_result: None,
            retried: false,
        },
    ];
    for case in cases {
        for reply in case.replies {
            fixture.provider.push(reply);
        }
        let started = Instant::now();
        let requests = fixture.provider.requests().len();
        let session = run(&mut fixture.editor, &format!("fault: {}", case.name));
        // The fault is under way once the provider has the session's request (a stall
        // stalls, a retry waits, a flood streams): only then does serving meanwhile count.
        wait_until(
            &format!("{}: the session's request to reach the provider", case.name),
            Duration::from_secs(20),
            || fixture.provider.requests().len() > requests,
        );
        fixture.still_serving(case.name);
        if case.retried {
            let retried = fixture.editor.expect("a stepRetried event", |m| {
                m["method"] == "wright/agentEvent"
                    && m["params"]["sessionId"] == session
                    && m["params"]["kind"] == "stepRetried"
            });
            assert_eq!(retried["params"]["step"], 1, "{}: {retried}", case.name);
        }
        let outcome = finished(&mut fixture.editor, &session);
        assert_eq!(outcome["status"], case.status, "{}: {outcome:#}", case.name);
        if let Some(words) = case.reason {
            let reason = outcome["reason"].as_str().unwrap_or_default();
            assert!(
                reason.contains(words),
                "{}: the reason {reason:?} should say {words:?}",
                case.name
            );
            assert!(!reason.contains(TEST_KEY), "{}: {reason}", case.name);
        }
        if let Some(words) = case.tool_result {
            let results = fixture.last_tool_results();
            assert!(
                results.last().is_some_and(|r| r.contains(words)),
                "{}: the model was not told {words:?}: {results:?}",
                case.name
            );
        }
        assert_eq!(
            fixture.provider.pending_replies(),
            0,
            "{}: a reply was not consumed",
            case.name
        );
        let journaled: usize = fixture
            .journal_ends(&session, case.status, case.name)
            .iter()
            .map(|line| line.to_string().len())
            .sum();
        // A model's answer is capped (llm.max_response_mib, 4 by default): what the session
        // holds and journals stays within a few times that, whatever the provider sends.
        assert!(
            journaled < 16 << 20,
            "{}: {journaled} bytes journaled",
            case.name
        );
        fixture.still_serving(case.name);
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{}: took {:?}",
            case.name,
            started.elapsed()
        );
    }
    fixture.editor.shutdown();
}

/// The process ids of the processes whose command line is `sleep SECONDS` (each case sleeps
/// a number of its own, so leftovers are told apart). The sandbox's pid namespaces hide
/// nothing from the host's /proc.
fn sleepers(seconds: u32) -> Vec<i32> {
    let wanted = format!("sleep\0{seconds}\0");
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter(|entry| {
            std::fs::read(entry.path().join("cmdline"))
                .is_ok_and(|cmdline| cmdline == wanted.as_bytes())
        })
        .filter_map(|entry| entry.file_name().to_str()?.parse().ok())
        .collect()
}

fn sleeper_alive(seconds: u32) -> bool {
    !sleepers(seconds).is_empty()
}

/// Ends `sleep SECONDS` (SIGKILL), letting the command that waits on it go on.
fn release(seconds: u32) {
    for pid in sleepers(seconds) {
        // SAFETY: kill(2) only sends a signal; the pid is a `sleep` of this test's command.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
}

/// One command fault: what the model runs, words its tool result must contain, and the
/// `sleep` that must not outlive the session (0 for none).
struct CommandCase {
    name: &'static str,
    command: &'static str,
    timeout_secs: u64,
    result: &'static [&'static str],
    sleeper: u32,
    /// The `sleep` whose life shows the fault is under way: the server must answer while it
    /// runs.
    under_way: u32,
    /// Whether the command waits on that `sleep` mid-fault until the test ends it (else the
    /// case's timeout ends it).
    gate: bool,
    /// A command that hit a limit makes the server ask the user whether to allow more (this
    /// editor declines).
    asks: bool,
}

#[test]
fn command_faults_are_bounded_reported_and_leave_no_process_behind() {
    let mut fixture = Fixture::new("faults-commands");
    let cases = [
        CommandCase {
            name: "ignores SIGTERM",
            command: "trap '' TERM; echo stubborn; sleep 1001",
            timeout_secs: 2,
            result: &["stubborn", "timed out"],
            sleeper: 1001,
            under_way: 1001,
            gate: false,
            asks: true,
        },
        CommandCase {
            name: "forks and exits, leaving a child that holds its output",
            // The parent waits (on `sleep 2002`) with its child started, then exits.
            command: "(sleep 1002 &) ; echo parent gone; sleep 2002; true",
            timeout_secs: 30,
            result: &["parent gone", "exit code 0"],
            sleeper: 1002,
            under_way: 2002,
            gate: true,
            asks: false,
        },
        CommandCase {
            name: "floods its output",
            // Half of the flood, a wait (on `sleep 2003`) with the pipe open, the other half.
            command: "{ head -c 50000000 /dev/zero; sleep 2003; head -c 50000000 /dev/zero; } \
                      | tr '\\0' y; echo; echo the end",
            timeout_secs: 60,
            result: &["yyyy", "the end"],
            sleeper: 0,
            under_way: 2003,
            gate: true,
            asks: false,
        },
        CommandCase {
            name: "never ends",
            command: "echo started; sleep 1004",
            timeout_secs: 2,
            result: &["started", "timed out"],
            sleeper: 1004,
            under_way: 1004,
            gate: false,
            asks: true,
        },
    ];
    for case in cases {
        fixture.provider.push(call(
            "run_command",
            &json!({"command": case.command, "timeout_secs": case.timeout_secs}).to_string(),
        ));
        fixture.provider.push(text(&["Done."]));
        let started = Instant::now();
        let session = run(&mut fixture.editor, &format!("fault: {}", case.name));
        wait_until(
            &format!("{}: the command to be under way", case.name),
            Duration::from_secs(20),
            || sleeper_alive(case.under_way),
        );
        fixture.still_serving(case.name);
        if case.gate {
            release(case.under_way);
        }
        let outcome = finished(&mut fixture.editor, &session);
        assert_eq!(outcome["status"], "done", "{}: {outcome:#}", case.name);
        let asked = fixture
            .editor
            .discard(|m| m["method"] == "window/showMessageRequest");
        assert_eq!(
            asked,
            usize::from(case.asks),
            "{}: asked {asked} times",
            case.name
        );
        let results = fixture.last_tool_results();
        let result = results.last().expect("a tool result");
        for words in case.result {
            assert!(
                result.contains(words),
                "{}: {words:?} missing from {}",
                case.name,
                &result[..result.len().min(2000)]
            );
        }
        assert!(
            result.len() < 64 * 1024,
            "{}: {} bytes of output reached the model",
            case.name,
            result.len()
        );
        if case.sleeper != 0 {
            wait_until(
                &format!("{}: sleep {} to die", case.name, case.sleeper),
                Duration::from_secs(5),
                || !sleeper_alive(case.sleeper),
            );
        }
        fixture.journal_ends(&session, "done", case.name);
        fixture.still_serving(case.name);
        assert!(
            started.elapsed() < Duration::from_secs(40),
            "{}: took {:?}",
            case.name,
            started.elapsed()
        );
    }

    // Cancelled while its command runs: the session ends at once, and so does the command.
    fixture.provider.push(call(
        "run_command",
        &json!({"command": "sleep 1005", "timeout_secs": 600}).to_string(),
    ));
    let session = run(&mut fixture.editor, "fault: cancelled mid-command");
    wait_until("the command to start", Duration::from_secs(20), || {
        sleeper_alive(1005)
    });
    fixture.still_serving("cancelled mid-command");
    let cancelled = fixture
        .editor
        .request("wright/agentCancel", json!({"sessionId": session}));
    assert_eq!(cancelled["cancelled"], true);
    let outcome = finished(&mut fixture.editor, &session);
    assert_eq!(outcome["status"], "cancelled", "{outcome:#}");
    wait_until("sleep 1005 to die", Duration::from_secs(5), || {
        !sleeper_alive(1005)
    });
    fixture.journal_ends(&session, "cancelled", "cancelled mid-command");
    fixture.editor.shutdown();
}

fn edit_call(old: &str, new: &str) -> Reply {
    call(
        "edit",
        &json!({"path": "src/lib.rs", "old_string": old, "new_string": new}).to_string(),
    )
}

#[test]
fn editor_faults_lose_no_keystroke_and_the_session_carries_on() {
    let mut fixture = Fixture::new("faults-editor");
    let uri = fixture.uri.clone();

    // The editor answers the edit with an error instead of a result.
    fixture
        .provider
        .push(edit_call("    a - b\n", "    a + b\n"));
    fixture.provider.push(text(&["Done."]));
    let session = run(
        &mut fixture.editor,
        "fault: applyEdit answered with an error",
    );
    let (id, _) = apply_edit_request(&mut fixture.editor);
    fixture.still_serving("applyEdit pending");
    fixture.editor.send(&json!({
        "jsonrpc": "2.0", "id": id,
        "error": {"code": -32603, "message": "the editor could not apply the edit"},
    }));
    let outcome = finished(&mut fixture.editor, &session);
    assert_eq!(outcome["status"], "done", "{outcome:#}");
    assert_eq!(outcome["filesChanged"], json!([]), "{outcome:#}");
    let results = fixture.last_tool_results();
    // The editor's error counts as a refusal: the model is told to read the file again.
    assert!(
        results
            .last()
            .unwrap()
            .contains("changed since the edit was planned"),
        "the model was not told the edit failed: {results:?}"
    );
    fixture.journal_ends(&session, "done", "applyEdit error");
    fixture.still_serving("applyEdit error");

    // The user types while the edit is on its way; a lax editor applies it anyway on top.
    fixture
        .provider
        .push(edit_call("    a - b\n", "    a + b\n"));
    fixture.provider.push(text(&["Done."]));
    let session = run(&mut fixture.editor, "fault: didChange during the edit");
    let (id, change) = apply_edit_request(&mut fixture.editor);
    assert_eq!(change["textDocument"]["version"], 1);
    let typed = format!("// typed during the edit\n{LIB}");
    fixture
        .editor
        .change(&uri, 2, (0, 0), (0, 0), "// typed during the edit\n");
    let both = typed.replace("a - b", "a + b");
    applies(&mut fixture.editor, &id, &uri, 3, &both);
    fixture.text = both.clone();
    let outcome = finished(&mut fixture.editor, &session);
    assert_eq!(outcome["status"], "done", "{outcome:#}");
    assert_eq!(
        fixture.editor.text_of(&uri),
        (3, both),
        "the user's line and the edit"
    );
    fixture.journal_ends(&session, "done", "didChange during the edit");
    fixture.still_serving("didChange during the edit");

    // The document is closed (unsaved) while its edit is pending: the editor claims the edit
    // but no change follows, so it does not count, and the disk is left as it was.
    fixture
        .provider
        .push(edit_call("    a + b\n", "    a * b\n"));
    fixture
        .provider
        .push(call("read_file", r#"{"path": "src/lib.rs"}"#));
    fixture.provider.push(text(&["Done."]));
    let session = run(&mut fixture.editor, "fault: the document closes mid-run");
    let (id, _) = apply_edit_request(&mut fixture.editor);
    fixture.editor.notify(
        "textDocument/didClose",
        json!({"textDocument": {"uri": uri}}),
    );
    fixture.editor.respond(&id, json!({"applied": true}));
    let outcome = finished(&mut fixture.editor, &session);
    assert_eq!(outcome["status"], "done", "{outcome:#}");
    assert_eq!(outcome["filesChanged"], json!([]), "{outcome:#}");
    let results = fixture.last_tool_results();
    assert!(
        results.last().unwrap().contains("on disk"),
        "after the close the session reads the disk: {results:?}"
    );
    assert_eq!(
        std::fs::read_to_string(fixture.dir.path().join("ws/src/lib.rs")).unwrap(),
        "on disk\n"
    );
    fixture.journal_ends(&session, "done", "document closed");
    fixture.editor.open(&uri, "rust", 10, &fixture.text.clone());
    fixture.still_serving("document closed and reopened");
    fixture.editor.shutdown();
}

#[test]
fn an_editor_that_disconnects_mid_session_leaves_a_whole_journal_and_no_process() {
    let fixture = Fixture::new("faults-disconnect");
    let Fixture {
        dir,
        provider,
        mut editor,
        ..
    } = fixture;
    provider.push(call(
        "run_command",
        &json!({"command": "sleep 1006", "timeout_secs": 600}).to_string(),
    ));
    let session = run(&mut editor, "fault: the editor goes away");
    wait_until("the command to start", Duration::from_secs(20), || {
        sleeper_alive(1006)
    });
    editor.discard(|m| m["method"] == "wright/agentEvent" || m["method"] == "window/logMessage");
    let started = Instant::now();
    editor.close_stdin();
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    wait_until("sleep 1006 to die", Duration::from_secs(5), || {
        !sleeper_alive(1006)
    });
    let lines = journal(&dir, &session, false);
    assert!(lines.iter().any(|l| l["kind"] == "message"), "{lines:?}");

    // The next server lists it, and it can be taken up again.
    provider.push(text(&["Picked up."]));
    let mut editor = start_agent_server(&agent_spawn(&dir, &provider), versioned_edits());
    let sessions = editor.request("wright/sessions", Value::Null);
    let listed = &sessions["sessions"][0];
    assert_eq!(listed["sessionId"], session.as_str(), "{sessions}");
    assert!(
        listed["status"] == "interrupted" || listed["status"] == "cancelled",
        "{sessions}"
    );
    let resumed = editor.request("wright/agentRun", json!({"task": "", "sessionId": session}));
    assert_eq!(resumed["sessionId"], session.as_str());
    assert_eq!(finished(&mut editor, &session)["status"], "done");
    editor.shutdown();
}
