//! `cargo xtask bench e2e`: the whole loop of a 20-step task against the model's own time.
//!
//! The task is real work on a copy of the example workspace: reads (`list_dir`, `read_file`,
//! `grep`, `find_symbol`, `outline`, `find_references`), edits that land (`edit`,
//! `multi_edit`), and `cargo test` through `run_command` in the sandbox, then the answer. The
//! model is the scripted provider of `wright-tests` on 127.0.0.1, each reply streamed as a
//! model streams it: 300 ms to the first byte, then one SSE event per token, 20 ms apart
//! (50 tokens/s). The model's own time is what the provider spends on each request, from its
//! arrival to its stream's last byte, summed: the peer every figure is divided by.
//!
//! The same script runs through `wright exec` (wall time: process start to exit) and through
//! an editor session, `wright lsp` driven as an editor drives it (wall time: `wright/agentRun`
//! sent to the `finished` event; the edits applied to the editor's buffer and confirmed; the
//! server's start and first index apart). The rest is split along the session's timeline:
//! start-up (to the first model request), each step's gap (a reply's last byte to the next
//! request: the tool, from its `toolCall` to its `toolResult` as the client saw them, and the
//! harness around it), and the tail (the last reply to the end). The sandboxed test run is
//! set against the same `cargo test` run bare on the same files, in the same invocation.
//!
//! Runs from a release build, handed over like `bench index`.

use std::fmt::Write as _;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Value, json};
use wright_tests::provider::{Dialect, Reply, ScriptedProvider, Turn};
use wright_tests::session::{agent_spawn, apply_text_edits, versioned_edits};
use wright_tests::{Editor, TempDir, file_uri, wright_bin};

const USAGE: &str = "usage: cargo xtask bench e2e [--rounds N]

  --rounds N   sessions per front end, taken in turns (default 3)";

/// Time to the first byte of every reply.
const FIRST_BYTE: Duration = Duration::from_millis(300);
/// The gap between two SSE events of a reply: 50 tokens per second.
const TOKEN: Duration = Duration::from_millis(20);
/// Characters of tool-call arguments per SSE event (about a token of code).
const ARGUMENT_FRAGMENT: usize = 4;
/// The ratio the issue asks for: everything wright adds within 10% of the model's time.
const TARGET: f64 = 1.10;

/// The task, as the user words it.
const TASK: &str = "Add `sub` and `checked_rem` to the calculator, each with a test, and \
                    make sure the tests pass.";
const TEST_COMMAND: &str = "cargo test";
/// What the test run must report: the old test and the two new ones.
const TESTS_PASS: &str = "test result: ok. 3 passed";

/// One step of the script: what the model says, then its one tool call (none: the answer).
struct Step {
    text: &'static str,
    call: Option<(&'static str, Value)>,
}

/// What the tools are, for the breakdown.
#[derive(Clone, Copy, PartialEq, Eq)]
enum ToolKind {
    Read,
    Edit,
    TestRun,
}

fn kind_of(tool: &str) -> ToolKind {
    match tool {
        "edit" | "multi_edit" => ToolKind::Edit,
        "run_command" => ToolKind::TestRun,
        _ => ToolKind::Read,
    }
}

/// The 20 steps: reads, four edits that land, a test run, and the answer.
fn script() -> Vec<Step> {
    let step = |text, name, arguments| Step {
        text,
        call: Some((name, arguments)),
    };
    let added_test = "        assert_eq!(add(2, 3), 5);\n    }\n\n    #[test]\n    fn subtracts() {\n        assert_eq!(sub(5, 3), 2);\n    }\n";
    let sub_test = "    fn subtracts() {\n        assert_eq!(sub(5, 3), 2);\n    }\n";
    vec![
        step(
            "I'll look at the workspace's layout first.",
            "list_dir",
            json!({}),
        ),
        step(
            "Now the manifest, for the crate's name and edition.",
            "read_file",
            json!({"path": "Cargo.toml"}),
        ),
        step(
            "And the library itself.",
            "read_file",
            json!({"path": "src/lib.rs"}),
        ),
        step(
            "Which functions are public today?",
            "grep",
            json!({"pattern": "pub fn \\w+", "glob": "*.rs"}),
        ),
        step(
            "Where is `checked_div` defined?",
            "find_symbol",
            json!({"query": "checked_div"}),
        ),
        step(
            "The file's outline, to place the new functions.",
            "outline",
            json!({"path": "src/lib.rs"}),
        ),
        step(
            "I'll add `sub` right after `add`.",
            "edit",
            json!({
                "path": "src/lib.rs",
                "old_string": "    a + b\n}\n",
                "new_string": "    a + b\n}\n\n/// Subtracts `b` from `a`.\npub fn sub(a: i64, b: i64) -> i64 {\n    a - b\n}\n",
            }),
        ),
        step(
            "Let me check that the new function reads well.",
            "read_file",
            json!({"path": "src/lib.rs", "start_line": 1, "end_line": 14}),
        ),
        step(
            "Next, `checked_rem` after `checked_div`.",
            "edit",
            json!({
                "path": "src/lib.rs",
                "old_string": "Some(a / b) }\n}\n",
                "new_string": "Some(a / b) }\n}\n\n/// The remainder of `a` by `b`, or `None` when `b` is zero.\npub fn checked_rem(a: i64, b: i64) -> Option<i64> {\n    if b == 0 { None } else { Some(a % b) }\n}\n",
            }),
        ),
        step(
            "Both checked functions should be there now.",
            "grep",
            json!({"pattern": "fn checked_"}),
        ),
        step(
            "Now a test for each new function.",
            "multi_edit",
            json!({
                "path": "src/lib.rs",
                "edits": [
                    {"old_string": "        assert_eq!(add(2, 3), 5);\n    }\n", "new_string": added_test},
                    {"old_string": sub_test, "new_string": format!("{sub_test}\n    #[test]\n    fn remainders() {{\n        assert_eq!(checked_rem(7, 3), Some(1));\n        assert_eq!(checked_rem(7, 0), None);\n    }}\n")},
                ],
            }),
        ),
        step(
            "Let me read the tests module back.",
            "read_file",
            json!({"path": "src/lib.rs", "start_line": 20}),
        ),
        step(
            "The crate's first line should name what it offers.",
            "edit",
            json!({
                "path": "src/lib.rs",
                "old_string": "//! A tiny calculator: the",
                "new_string": "//! A tiny calculator (add, sub, checked_div, checked_rem): the",
            }),
        ),
        step(
            "Is `add` used anywhere else?",
            "find_references",
            json!({"name": "add"}),
        ),
        step(
            "Does anything else in the workspace mention the new functions?",
            "grep",
            json!({"pattern": "checked_rem|sub\\("}),
        ),
        step(
            "The outline again, with the new functions.",
            "outline",
            json!({"path": "src/lib.rs"}),
        ),
        step(
            "One last look at the whole file.",
            "read_file",
            json!({"path": "src/lib.rs"}),
        ),
        step(
            "And the sources folder, to be sure nothing stray was written.",
            "list_dir",
            json!({"path": "src"}),
        ),
        step(
            "Now the tests.",
            "run_command",
            json!({"command": TEST_COMMAND}),
        ),
        Step {
            text: "Added `sub` and `checked_rem` to the calculator, each with a test; `cargo test` \
                   passes (3 tests).",
            call: None,
        },
    ]
}

/// A step's reply as the provider streams it, and how long the stream takes by the script.
struct Scripted {
    reply: Reply,
    tokens: usize,
    expected: Duration,
}

fn scripted(index: usize, step: &Step) -> Scripted {
    let pieces: Vec<&str> = step.text.split_inclusive(' ').collect();
    let mut turn = Turn::text(&pieces);
    turn.argument_fragment = ARGUMENT_FRAGMENT;
    let mut tokens = pieces.len();
    // The role chunk first; then the finish, usage and [DONE] events (`provider.rs`).
    let mut events = 1 + pieces.len() + 3;
    if let Some((name, arguments)) = &step.call {
        let arguments = arguments.to_string();
        let fragments = arguments.chars().count().div_ceil(ARGUMENT_FRAGMENT);
        tokens += fragments;
        // The call's header, then its argument fragments.
        events += 1 + fragments;
        turn = turn.tool_call(&call_id(index), name, &arguments);
    }
    let turn = turn.usage(0, 0, tokens as u64);
    Scripted {
        reply: Reply::stream(Dialect::OpenAi, &turn)
            .header_delay(FIRST_BYTE)
            .token_delay(TOKEN),
        tokens,
        // The first event goes with the first byte; each other one waits its token's time.
        expected: FIRST_BYTE + TOKEN * (events as u32 - 1),
    }
}

/// A tool call as the client saw it go: from its `toolCall` event to its `toolResult`.
#[derive(Clone)]
struct ToolSpan {
    name: String,
    started: Instant,
    ended: Option<Instant>,
    is_error: bool,
    output: String,
}

/// One session's timeline: the front end's start and end, the provider's records, the tools.
struct Timeline {
    start: Instant,
    end: Instant,
    requests: Vec<Instant>,
    stream_ends: Vec<Instant>,
    tools: Vec<ToolSpan>,
}

/// One part of a [`Breakdown`], for the report's rows.
type Part = fn(&Breakdown) -> f64;

/// Where one session's time went, in milliseconds.
#[derive(Clone, Copy, Default)]
struct Breakdown {
    wall: f64,
    model: f64,
    startup: f64,
    reads: f64,
    edits: f64,
    test_run: f64,
    harness: f64,
    tail: f64,
    /// The longest harness share of a single step.
    harness_max: f64,
}

impl Breakdown {
    fn ratio(&self) -> f64 {
        self.wall / self.model
    }
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

fn analyse(timeline: &Timeline, steps: usize) -> anyhow::Result<Breakdown> {
    let Timeline {
        start,
        end,
        requests,
        stream_ends,
        tools,
    } = timeline;
    if requests.len() != steps || stream_ends.len() != steps {
        bail!(
            "{} model requests and {} whole replies, expected {steps} of each",
            requests.len(),
            stream_ends.len()
        );
    }
    if tools.len() != steps - 1 {
        bail!("{} tool calls seen, expected {}", tools.len(), steps - 1);
    }
    let mut figures = Breakdown {
        wall: ms(*end - *start),
        startup: ms(requests[0] - *start),
        tail: ms(*end - stream_ends[steps - 1]),
        ..Breakdown::default()
    };
    for (request, stream_end) in requests.iter().zip(stream_ends) {
        figures.model += ms(*stream_end - *request);
    }
    for (step, tool) in tools.iter().enumerate() {
        let gap = ms(requests[step + 1] - stream_ends[step]);
        let ended = tool.ended.context("a tool call without its result")?;
        // The client reads the events a little after the session sends them: the tool's
        // time is bounded by its step's gap.
        let started = tool.started.max(stream_ends[step]);
        let ended = ended.min(requests[step + 1]);
        let own = ms(ended.saturating_duration_since(started)).min(gap);
        match kind_of(&tool.name) {
            ToolKind::Read => figures.reads += own,
            ToolKind::Edit => figures.edits += own,
            ToolKind::TestRun => figures.test_run += own,
        }
        figures.harness += gap - own;
        figures.harness_max = figures.harness_max.max(gap - own);
    }
    Ok(figures)
}

/// Every tool succeeded, the script's calls ran in its order, and the test run passed (its
/// whole output as the model got it in the last request).
fn check_work(
    tools: &[ToolSpan],
    steps: &[Step],
    provider: &ScriptedProvider,
) -> anyhow::Result<()> {
    let expected: Vec<&str> = steps
        .iter()
        .filter_map(|step| step.call.as_ref().map(|(name, _)| *name))
        .collect();
    let seen: Vec<&str> = tools.iter().map(|tool| tool.name.as_str()).collect();
    if seen != expected {
        bail!("the tools ran as {seen:?}, the script calls {expected:?}");
    }
    if let Some(failed) = tools.iter().find(|tool| tool.is_error) {
        bail!("{} failed: {}", failed.name, failed.output);
    }
    let test_call = steps
        .iter()
        .position(|step| {
            step.call
                .as_ref()
                .is_some_and(|(name, _)| kind_of(name) == ToolKind::TestRun)
        })
        .map(call_id)
        .context("the script runs no test")?;
    let last = provider.requests().pop().context("no model request")?;
    let results = last.tool_results_by_id();
    let output = results
        .iter()
        .find(|(id, _)| *id == test_call)
        .map(|(_, content)| content.as_str())
        .context("the test run's result never reached the model")?;
    if !output.contains(TESTS_PASS) {
        bail!("the test run did not report {TESTS_PASS:?}:\n{output}");
    }
    Ok(())
}

/// The id of step `index`'s tool call.
fn call_id(index: usize) -> String {
    format!("call_{}", index + 1)
}

/// The provider with the whole script queued; the replies' tokens and scripted time.
fn provider_with_script(steps: &[Step]) -> (ScriptedProvider, usize, Duration) {
    let provider = ScriptedProvider::start();
    let (mut tokens, mut expected) = (0, Duration::ZERO);
    for (index, step) in steps.iter().enumerate() {
        let scripted = scripted(index, step);
        tokens += scripted.tokens;
        expected += scripted.expected;
        provider.push(scripted.reply);
    }
    (provider, tokens, expected)
}

/// The toolchain the sandboxed `cargo test` uses, as the developer's shell has it: the
/// commands see PATH, HOME, CARGO_HOME and RUSTUP_HOME (`sandbox/env.rs` passes them).
struct Toolchain {
    path: String,
    cargo_home: PathBuf,
    rustup_home: PathBuf,
    rustup_toolchain: Option<String>,
}

impl Toolchain {
    fn from_env() -> anyhow::Result<Self> {
        let home = PathBuf::from(std::env::var_os("HOME").context("HOME is not set")?);
        let var =
            |name: &str, default: PathBuf| std::env::var_os(name).map_or(default, PathBuf::from);
        Ok(Self {
            path: std::env::var("PATH").context("PATH is not set")?,
            cargo_home: var("CARGO_HOME", home.join(".cargo")),
            rustup_home: var("RUSTUP_HOME", home.join(".rustup")),
            rustup_toolchain: std::env::var("RUSTUP_TOOLCHAIN").ok(),
        })
    }

    /// The variables `wright` (and the bare peer run) gets besides its own: `home` stands in
    /// for the user's home, the toolchain stays where it is installed.
    fn env(&self, home: &Path) -> Vec<(String, String)> {
        let mut env = vec![
            ("PATH".to_owned(), self.path.clone()),
            ("HOME".to_owned(), home.display().to_string()),
            (
                "CARGO_HOME".to_owned(),
                self.cargo_home.display().to_string(),
            ),
            (
                "RUSTUP_HOME".to_owned(),
                self.rustup_home.display().to_string(),
            ),
        ];
        if let Some(toolchain) = &self.rustup_toolchain {
            env.push(("RUSTUP_TOOLCHAIN".to_owned(), toolchain.clone()));
        }
        env
    }
}

/// A fresh copy of the example workspace at `<dir>/ws`.
fn example_workspace(dir: &TempDir) -> anyhow::Result<PathBuf> {
    let example = crate::project_root().join("tests/fixtures/example-workspace");
    let ws = dir.path().join("ws");
    for file in ["Cargo.toml", "src/lib.rs"] {
        let text = std::fs::read_to_string(example.join(file))
            .with_context(|| format!("reading the example workspace's {file}"))?;
        dir.write(&format!("ws/{file}"), &text);
    }
    Ok(ws)
}

/// The task through `wright exec`: process start to exit; the tools from its stderr.
fn exec_session(steps: &[Step], toolchain: &Toolchain) -> anyhow::Result<(Timeline, String)> {
    let dir = TempDir::new("bench-e2e-exec");
    let ws = example_workspace(&dir)?;
    let (provider, _, _) = provider_with_script(steps);
    let mut command = Command::new(wright_bin());
    command
        .arg("--root")
        .arg(&ws)
        .args(["exec", TASK, "--json"])
        .env_clear()
        .envs(toolchain.env(&dir.path().join("home")))
        .envs(xdg_and_model(&dir, &provider))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let start = Instant::now();
    let mut child = command.spawn().context("starting wright exec")?;
    let stderr = child.stderr.take().context("stderr")?;
    let stdout = child.stdout.take().context("stdout")?;
    let tools = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::new(Mutex::new(String::new()));
    let reader = {
        let (tools, log) = (Arc::clone(&tools), Arc::clone(&log));
        std::thread::spawn(move || read_exec_progress(stderr, &tools, &log))
    };
    let output = std::thread::spawn(move || std::io::read_to_string(stdout));
    let status = child.wait().context("waiting for wright exec")?;
    let end = Instant::now();
    let _ = reader.join();
    let result = output
        .join()
        .map_err(|_| anyhow::anyhow!("the stdout reader panicked"))??;
    let log = log.lock().unwrap_or_else(|e| e.into_inner()).clone();
    if !status.success() {
        bail!("wright exec ended {status}: {result}\n{log}");
    }
    let outcome: Value = serde_json::from_str(result.trim()).context("wright exec --json")?;
    if outcome["status"] != "done" {
        bail!("wright exec ended {outcome}");
    }
    let tools = tools.lock().unwrap_or_else(|e| e.into_inner()).clone();
    check_work(&tools, steps, &provider).with_context(|| log.clone())?;
    let text = std::fs::read_to_string(ws.join("src/lib.rs"))?;
    let timeline = Timeline {
        start,
        end,
        requests: provider.requests().iter().map(|r| r.received).collect(),
        stream_ends: provider.stream_ends(),
        tools,
    };
    Ok((timeline, text))
}

fn scripted_model_time(steps: &[Step]) -> Duration {
    steps
        .iter()
        .enumerate()
        .map(|(index, step)| scripted(index, step).expected)
        .sum()
}

/// The XDG folders under `dir` and the scripted provider as the model.
fn xdg_and_model(dir: &TempDir, provider: &ScriptedProvider) -> Vec<(String, String)> {
    let under = |name: &str| dir.path().join(name).display().to_string();
    vec![
        ("XDG_CACHE_HOME".to_owned(), under("cache")),
        ("XDG_DATA_HOME".to_owned(), under("data")),
        ("XDG_CONFIG_HOME".to_owned(), under("config")),
        ("WRIGHT_MODEL".to_owned(), "openai/gpt-4.1".to_owned()),
        ("OPENAI_BASE_URL".to_owned(), provider.openai_base_url()),
        ("OPENAI_API_KEY".to_owned(), "sk-bench-e2e".to_owned()),
    ]
}

/// `wright exec`'s progress lines: `→ NAME ARGS` when a tool starts, `  ✓ …` or `  ✗ …` when
/// it returns; each stamped as it arrives.
fn read_exec_progress(
    stderr: std::process::ChildStderr,
    tools: &Mutex<Vec<ToolSpan>>,
    log: &Mutex<String>,
) {
    for line in BufReader::new(stderr).lines() {
        let Ok(line) = line else { break };
        let at = Instant::now();
        let mut tools = tools.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(call) = line.strip_prefix("→ ") {
            let name = call.split(' ').next().unwrap_or_default().to_owned();
            tools.push(ToolSpan {
                name,
                started: at,
                ended: None,
                is_error: false,
                output: String::new(),
            });
        } else if let Some((mark, first_line)) = line
            .strip_prefix("  ✓ ")
            .map(|rest| (false, rest))
            .or_else(|| line.strip_prefix("  ✗ ").map(|rest| (true, rest)))
            && let Some(open) = tools.last_mut().filter(|tool| tool.ended.is_none())
        {
            open.ended = Some(at);
            open.is_error = mark;
            open.output = first_line.to_owned();
        }
        drop(tools);
        let mut log = log.lock().unwrap_or_else(|e| e.into_inner());
        log.push_str(&line);
        log.push('\n');
    }
}

/// The editor's side of a server's start, from the process spawned, in milliseconds.
#[derive(Clone, Copy)]
struct ServerStart {
    /// `initialize` answered.
    initialized: f64,
    /// The server's "ready" log message read.
    ready: f64,
    /// `workspace/symbol` answering from the index.
    indexed: f64,
}

/// The task through `wright lsp` as an editor runs it: the library open, `wright/agentRun`
/// sent, each `workspace/applyEdit` applied to the buffer (its `didChange`, then the answer),
/// until the `finished` event. The server's start is timed apart, the index ready before the
/// task, as when a user opens a project and then asks.
fn lsp_session(
    steps: &[Step],
    toolchain: &Toolchain,
) -> anyhow::Result<(Timeline, String, ServerStart)> {
    let dir = TempDir::new("bench-e2e-lsp");
    let ws = example_workspace(&dir)?;
    let (provider, _, _) = provider_with_script(steps);
    let mut spawn = agent_spawn(&dir, &provider);
    spawn.env.extend(toolchain.env(&dir.path().join("home")));
    // The test editor asks for debug logging; an editor leaves wright's default.
    spawn
        .env
        .push(("WRIGHT_LOG".to_owned(), "warn,wright=info".to_owned()));
    let mut init = Editor::init_params(&ws);
    init["capabilities"] = versioned_edits();
    let spawned = Instant::now();
    let mut editor = Editor::spawn(&spawn);
    editor.request("initialize", init);
    let initialized = ms(spawned.elapsed());
    editor.notify("initialized", json!({}));
    editor.expect_log(3, "ready");
    let ready = ms(spawned.elapsed());
    editor.symbols_until("checked_div", |symbols| !symbols.is_empty());
    let indexed = ms(spawned.elapsed());
    editor.discard(|_| true);
    let run = drive_session(&mut editor, &ws, steps, &provider);
    match run {
        Ok((timeline, text)) => {
            editor.discard(|_| true);
            editor.shutdown();
            let start = ServerStart {
                initialized,
                ready,
                indexed,
            };
            Ok((timeline, text, start))
        }
        Err(err) => {
            editor.kill();
            Err(err)
        }
    }
}

/// The session's messages, as the editor handles them; returns the timeline and the
/// library's text in the editor's buffer at the end.
fn drive_session(
    editor: &mut Editor,
    ws: &Path,
    steps: &[Step],
    provider: &ScriptedProvider,
) -> anyhow::Result<(Timeline, String)> {
    let library = file_uri(&ws.join("src/lib.rs"));
    let mut buffers = std::collections::HashMap::new();
    let text = std::fs::read_to_string(ws.join("src/lib.rs"))?;
    editor.open(&library, "rust", 1, &text);
    buffers.insert(library.clone(), (1_i64, text));
    let start = Instant::now();
    let id = editor.send_request(
        "wright/agentRun",
        json!({"task": TASK, "textDocument": {"uri": library}}),
    );
    let answer = editor.expect_response(&json!(id));
    let session = answer["result"]["sessionId"]
        .as_str()
        .with_context(|| format!("wright/agentRun: {answer}"))?
        .to_owned();
    let ours = |m: &Value| {
        m["method"] == "workspace/applyEdit"
            || m["method"] == "wright/requestApproval"
            || (m["method"] == "wright/agentEvent"
                && m["params"]["sessionId"] == session.as_str()
                && ["toolCall", "toolResult", "finished"]
                    .contains(&m["params"]["kind"].as_str().unwrap_or_default()))
    };
    let mut tools: Vec<ToolSpan> = Vec::new();
    let end = loop {
        let message = editor.expect("the session's next tool event, edit or end", ours);
        let at = Instant::now();
        editor.discard(|m| !ours(m));
        let params = &message["params"];
        match (message["method"].as_str(), params["kind"].as_str()) {
            (Some("workspace/applyEdit"), _) => apply_edit(editor, &message, &mut buffers)?,
            (Some("wright/requestApproval"), _) => {
                bail!("the session asked for an approval no step needs: {params}")
            }
            (_, Some("toolCall")) => tools.push(ToolSpan {
                name: params["name"].as_str().unwrap_or_default().to_owned(),
                started: at,
                ended: None,
                is_error: false,
                output: String::new(),
            }),
            (_, Some("toolResult")) => {
                let open = tools
                    .last_mut()
                    .filter(|tool| tool.ended.is_none())
                    .context("a tool result before its call")?;
                open.ended = Some(at);
                open.is_error = params["isError"] == true;
                open.output = params["output"].as_str().unwrap_or_default().to_owned();
            }
            _ => {
                let outcome = &params["outcome"];
                if outcome["status"] != "done" {
                    bail!("the editor's session ended {outcome}");
                }
                break at;
            }
        }
    };
    check_work(&tools, steps, provider)?;
    let text = buffers
        .remove(&library)
        .map(|(_, text)| text)
        .context("the library's buffer")?;
    let timeline = Timeline {
        start,
        end,
        requests: provider.requests().iter().map(|r| r.received).collect(),
        stream_ends: provider.stream_ends(),
        tools,
    };
    Ok((timeline, text))
}

/// Applies a `workspace/applyEdit` of text edits as an editor does: each document's edits to
/// its buffer (opened from disk first when it is not open), its `didChange`, then the answer.
fn apply_edit(
    editor: &mut Editor,
    request: &Value,
    buffers: &mut std::collections::HashMap<String, (i64, String)>,
) -> anyhow::Result<()> {
    let changes = request["params"]["edit"]["documentChanges"]
        .as_array()
        .with_context(|| format!("an edit without documentChanges: {request}"))?;
    for change in changes {
        let document = &change["textDocument"];
        let uri = document["uri"]
            .as_str()
            .with_context(|| format!("not a text edit: {change}"))?
            .to_owned();
        if !buffers.contains_key(&uri) {
            let path = uri.strip_prefix("file://").context("a file uri")?;
            let text = std::fs::read_to_string(path)?;
            editor.open(&uri, "rust", 1, &text);
            buffers.insert(uri.clone(), (1, text));
        }
        let (version, text) = buffers.get_mut(&uri).context("the buffer")?;
        if !document["version"].is_null() && document["version"] != *version {
            bail!(
                "an edit for version {} of a buffer at {version}",
                document["version"]
            );
        }
        *text = apply_text_edits(text, &change["edits"]);
        *version += 1;
        let (version, text) = (*version, text.clone());
        editor.notify(
            "textDocument/didChange",
            json!({"textDocument": {"uri": uri, "version": version}, "contentChanges": [{"text": text}]}),
        );
    }
    editor.respond(&request["id"], json!({"applied": true}));
    Ok(())
}

/// The test command run bare (no sandbox, no wright) on a fresh copy whose library is
/// `library`, as the session's test run found it; its wall time in milliseconds.
fn bare_test_run(toolchain: &Toolchain, library: &str) -> anyhow::Result<f64> {
    let dir = TempDir::new("bench-e2e-bare");
    let ws = example_workspace(&dir)?;
    std::fs::write(ws.join("src/lib.rs"), library)?;
    let started = Instant::now();
    let out = Command::new("sh")
        .args(["-c", TEST_COMMAND])
        .current_dir(&ws)
        .env_clear()
        .envs(toolchain.env(&dir.path().join("home")))
        .output()
        .context("running the test command")?;
    let took = ms(started.elapsed());
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() || !stdout.contains(TESTS_PASS) {
        bail!(
            "the bare test run failed: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(took)
}

/// Runs from a release build (handed over like `bench index`): the figure is what a user's
/// `wright` adds, and a debug build spends seconds where a release one spends milliseconds
/// (the tokenizer's tables, regex compilation). `None` when handed over (the release build
/// recorded the section).
pub fn run(args: &[String]) -> anyhow::Result<Option<String>> {
    let mut rounds = 3;
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "--rounds" => {
                rounds = rest.next().context(USAGE)?.parse().context(USAGE)?;
            }
            _ => bail!("unknown argument {arg:?}\n{USAGE}"),
        }
    }
    if rounds == 0 {
        bail!("--rounds must be at least 1\n{USAGE}");
    }
    if cfg!(debug_assertions) {
        return super::shared::hand_over_to_release("e2e", args).map(|()| None);
    }
    let toolchain = Toolchain::from_env()?;
    let steps = script();
    let measured = measure(&steps, &toolchain, rounds)?;
    Ok(Some(report(&steps, &measured)))
}

/// Every round's figures.
struct Measured {
    exec: Vec<Breakdown>,
    lsp: Vec<Breakdown>,
    /// The bare test runs, in milliseconds.
    bare: Vec<f64>,
    starts: Vec<ServerStart>,
}

/// Each round: the task through `wright exec`, through the editor, and the bare test run.
fn measure(steps: &[Step], toolchain: &Toolchain, rounds: usize) -> anyhow::Result<Measured> {
    let scripted = scripted_model_time(steps);
    let mut measured = Measured {
        exec: Vec::new(),
        lsp: Vec::new(),
        bare: Vec::new(),
        starts: Vec::new(),
    };
    for round in 1..=rounds {
        eprintln!("bench e2e: round {round} of {rounds}");
        let (timeline, exec_text) = exec_session(steps, toolchain)?;
        check_model_time(&timeline, scripted)?;
        measured.exec.push(analyse(&timeline, steps.len())?);
        let (timeline, lsp_text, start) = lsp_session(steps, toolchain)?;
        check_model_time(&timeline, scripted)?;
        measured.lsp.push(analyse(&timeline, steps.len())?);
        measured.starts.push(start);
        if lsp_text != exec_text {
            bail!(
                "the editor's buffer and wright exec's file differ:\n{lsp_text}\n---\n{exec_text}"
            );
        }
        measured.bare.push(bare_test_run(toolchain, &exec_text)?);
    }
    Ok(measured)
}

/// The provider's streams took at least what the script says (its sleeps never run short),
/// and not much more: otherwise the peer itself would be off.
fn check_model_time(timeline: &Timeline, scripted: Duration) -> anyhow::Result<()> {
    let measured: Duration = timeline
        .requests
        .iter()
        .zip(&timeline.stream_ends)
        .map(|(request, end)| *end - *request)
        .sum();
    if measured < scripted || measured > scripted.mul_f64(1.05) {
        bail!(
            "the provider streamed for {:.0} ms, the script says {:.0} ms",
            ms(measured),
            ms(scripted)
        );
    }
    Ok(())
}

/// The round whose ratio is the median: its breakdown is shown whole, so its parts add up.
fn median_round(rounds: &[Breakdown]) -> Breakdown {
    let mut sorted = rounds.to_vec();
    sorted.sort_by(|a, b| a.ratio().total_cmp(&b.ratio()));
    sorted[sorted.len() / 2]
}

fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted[sorted.len() / 2]
}

fn report(steps: &[Step], measured: &Measured) -> String {
    let Measured {
        exec: exec_rounds,
        lsp: lsp_rounds,
        bare: bare_runs,
        starts,
    } = measured;
    let (exec, lsp) = (median_round(exec_rounds), median_round(lsp_rounds));
    let count = |kind: ToolKind| {
        steps
            .iter()
            .filter(|step| {
                step.call
                    .as_ref()
                    .is_some_and(|(name, _)| kind_of(name) == kind)
            })
            .count()
    };
    let (reads, edits) = (count(ToolKind::Read), count(ToolKind::Edit));
    let gaps = steps.len() - 1;
    let tokens: usize = steps
        .iter()
        .enumerate()
        .map(|(index, step)| scripted(index, step).tokens)
        .sum();
    let scripted_time = ms(scripted_model_time(steps));
    let bare = median(bare_runs);
    let rounds = exec_rounds.len();
    let mut body = String::new();
    let _ = writeln!(
        body,
        "A {}-step task on a copy of the example workspace (\"{TASK}\"): {gaps} tool calls — \
         {reads} reads (`list_dir`, `read_file`, `grep`, `find_symbol`, `outline`, \
         `find_references`), {edits} edits that land (`edit`, `multi_edit`), `{TEST_COMMAND}` \
         through `run_command` in the sandbox — then the answer. The model is the scripted \
         provider on 127.0.0.1: each reply {} ms to its first byte, then one SSE event per token \
         {} ms apart (50 tokens/s); {tokens} tokens in {} replies. The model's own time is the \
         provider's: each request's arrival to its stream's last byte, summed (the script's \
         figure: {scripted_time:.0} ms). Release build of `wright`; {rounds} sessions per front \
         end, in turns; each figure below is from the session of median ratio.\n",
        steps.len(),
        FIRST_BYTE.as_millis(),
        TOKEN.as_millis(),
        steps.len(),
    );
    let _ = writeln!(
        body,
        "| front end | wall time | the model's own time (peer) | ratio | each session | target | met |\n\
         |---|---:|---:|---:|---|---|---|"
    );
    for (name, figures, all) in [
        ("`wright exec` (process start to exit)", exec, exec_rounds),
        (
            "editor session (`wright lsp`: `wright/agentRun` sent to `finished`)",
            lsp,
            lsp_rounds,
        ),
    ] {
        let each: Vec<String> = all.iter().map(|b| format!("{:.3}", b.ratio())).collect();
        let _ = writeln!(
            body,
            "| {name} | {:.0} ms | {:.0} ms | {:.3}× | {} | ≤ {TARGET:.2}× | {} |",
            figures.wall,
            figures.model,
            figures.ratio(),
            each.join(", "),
            if figures.ratio() <= TARGET {
                "yes"
            } else {
                "no"
            },
        );
    }
    let _ = writeln!(
        body,
        "\nWhere the rest goes (the same sessions; a step's gap is a reply's last byte to the \
         next request, the tool in it from its `toolCall` to its `toolResult` as the client \
         saw them):\n\n\
         | share of the wall time | `wright exec` | editor session |\n|---|---:|---:|"
    );
    let share =
        |value: f64, of: &Breakdown| format!("{value:.0} ms ({:.1}%)", 100.0 * value / of.model);
    let rows: [(&str, Part); 6] = [
        (
            "start-up: process start (editor: `agentRun` sent) to the first model request",
            |b| b.startup,
        ),
        ("tools: the reads", |b| b.reads),
        (
            "tools: the edits (editor: `workspace/applyEdit`, the buffer's `didChange`, the answer)",
            |b| b.edits,
        ),
        ("tools: the sandboxed test run", |b| b.test_run),
        ("harness: the rest of the step gaps", |b| b.harness),
        (
            "tail: the last reply's end to exit (editor: to `finished`)",
            |b| b.tail,
        ),
    ];
    let _ = writeln!(
        body,
        "| the model streaming (the peer) | {:.0} ms | {:.0} ms |",
        exec.model, lsp.model
    );
    for (name, value) in rows {
        let _ = writeln!(
            body,
            "| {name} | {} | {} |",
            share(value(&exec), &exec),
            share(value(&lsp), &lsp)
        );
    }
    let _ = writeln!(
        body,
        "| harness: the longest of one step | {:.1} ms | {:.1} ms |\n\
         | everything wright adds (wall − model) | {} | {} |",
        exec.harness_max,
        lsp.harness_max,
        share(exec.wall - exec.model, &exec),
        share(lsp.wall - lsp.model, &lsp),
    );
    let _ = writeln!(
        body,
        "\n{reads} reads and {edits} edits over {gaps} steps. The same `{TEST_COMMAND}` run bare \
         on the same files (no sandbox, no wright; median of {}): {bare:.0} ms; the sandboxed \
         run took {:+.0} ms over it through `wright exec` (in place), {:+.0} ms in the editor's \
         session (in its snapshot).",
        bare_runs.len(),
        exec.test_run - bare,
        lsp.test_run - bare,
    );
    let start =
        |pick: fn(&ServerStart) -> f64| median(&starts.iter().map(pick).collect::<Vec<_>>());
    let _ = writeln!(
        body,
        "\nThe editor's server start, before the task (median of {}, from the process spawned): \
         `initialize` answered {:.0} ms, the \"ready\" message {:.0} ms, the index answering \
         `workspace/symbol` {:.0} ms.",
        starts.len(),
        start(|s| s.initialized),
        start(|s| s.ready),
        start(|s| s.indexed),
    );
    body
}
