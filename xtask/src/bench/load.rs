//! `cargo xtask bench load [--requests N]`: how fast the server answers the editor while agent
//! sessions run on it.
//!
//! One `wright lsp` (the debug build) on a copy of the example workspace, its model the
//! scripted provider of `wright-tests`, answering each session's steps with a few slow tokens
//! and a tool call (`grep`, `read_file`, `find_symbol`, `outline` in turn). With N sessions
//! running (N = 1, 8, 32), the editor types into an open buffer and, after each keystroke,
//! asks `workspace/symbol` and `wright/viewFileText`; each request's round trip is timed.
//! The peer is the same editor traffic on the same server setup with no session (N = 0), run
//! in the same invocation: the figure is the p99 under load against that p99.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Value, json};
use wright_tests::provider::{Dialect, Reply, ScriptedProvider, Turn};
use wright_tests::session::{
    agent_spawn, finished_event, server_writes_unopened_files, start_agent_server,
};
use wright_tests::{TempDir, file_uri};

const LOADS: [usize; 4] = [0, 1, 8, 32];
/// Keystrokes (and their requests) sent before the clock starts, in every run alike.
const WARM_UP: usize = 20;
/// Steps each session is scripted for: more than the measurement lasts.
const STEPS: usize = 150;

struct Run {
    sessions: usize,
    /// Sessions still running when the last request was answered.
    running_at_end: usize,
    symbol: Vec<Duration>,
    view: Vec<Duration>,
}

pub fn run(args: &[String]) -> anyhow::Result<String> {
    let mut requests = 600;
    match args {
        [] => {}
        [flag, n] if flag == "--requests" => requests = n.parse().context("--requests N")?,
        other => bail!("bench load takes [--requests N], found {other:?}"),
    }
    super::shared::build_wright_debug()?;
    let runs = LOADS
        .iter()
        .map(|&sessions| measure(sessions, requests))
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(report(&runs, requests))
}

fn measure(sessions: usize, requests: usize) -> anyhow::Result<Run> {
    eprintln!("bench load: {sessions} session(s), {requests} keystrokes");
    let dir = TempDir::new("bench-load");
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(ws.join("src"))?;
    std::fs::copy(
        crate::project_root().join("tests/fixtures/example-workspace/src/lib.rs"),
        ws.join("src/lib.rs"),
    )
    .context("copying the example workspace")?;
    std::fs::write(ws.join("src/typed.rs"), "")?;
    let provider = ScriptedProvider::start();
    script(&provider, sessions);
    let mut editor = start_agent_server(
        &agent_spawn(&dir, &provider),
        server_writes_unopened_files(),
    );
    let uri = file_uri(&ws.join("src/typed.rs"));
    editor.open(&uri, "rust", 1, "");
    // Measure once the index is up, in every run alike.
    editor.symbols_until("lib", |_| true);
    let mut ids = Vec::new();
    let (mut symbol, mut view) = (Vec::new(), Vec::new());
    for n in 0..WARM_UP + requests {
        // The sessions start one per keystroke, inside the timed window: a session's start
        // (routing, retrieval for its task, its journal) is part of the load.
        if n >= WARM_UP && ids.len() < sessions {
            let run = editor.request(
                "wright/agentRun",
                json!({"task": format!("[load {:02}] look around the workspace", ids.len())}),
            );
            ids.push(run["sessionId"].as_str().unwrap_or_default().to_owned());
        }
        let line = u32::try_from(n)?;
        editor.change(&uri, i32::try_from(n)? + 2, (line, 0), (line, 0), "x\n");
        let start = Instant::now();
        editor.request("workspace/symbol", json!({"query": "parse"}));
        symbol.push(start.elapsed());
        let start = Instant::now();
        editor.request("wright/viewFileText", json!({"textDocument": {"uri": uri}}));
        view.push(start.elapsed());
        editor
            .discard(|m| m["method"] == "wright/agentEvent" || m["method"] == "window/logMessage");
    }
    let listed = editor.request("wright/sessions", Value::Null);
    let running_at_end = listed["sessions"].as_array().map_or(0, |all| {
        all.iter().filter(|s| s["status"] == "running").count()
    });
    for id in &ids {
        editor.request("wright/agentCancel", json!({"sessionId": id}));
    }
    for id in &ids {
        finished_event(&mut editor, id);
    }
    editor.discard(|m| m["method"] == "wright/agentEvent" || m["method"] == "window/logMessage");
    editor.shutdown();
    Ok(Run {
        sessions,
        running_at_end,
        symbol,
        view,
    })
}

/// Each session's script: slow tokens, then one of four read-only tools, `STEPS` times.
fn script(provider: &ScriptedProvider, sessions: usize) {
    let tools = [
        ("grep", json!({"pattern": "fn "})),
        ("read_file", json!({"path": "src/lib.rs"})),
        ("find_symbol", json!({"query": "parse"})),
        ("outline", json!({"path": "src/lib.rs"})),
    ];
    for n in 0..sessions {
        let marker = format!("[load {n:02}]");
        for step in 0..STEPS {
            let (name, arguments) = &tools[step % tools.len()];
            let turn = Turn::text(&["Looking ", "at ", "the ", "code."]).tool_call(
                &format!("c{step}"),
                name,
                &arguments.to_string(),
            );
            provider.push_for(
                &marker,
                Reply::stream(Dialect::OpenAi, &turn).token_delay(Duration::from_millis(25)),
            );
        }
    }
}

fn percentile(samples: &[Duration], p: f64) -> Duration {
    let mut sorted = samples.to_vec();
    sorted.sort();
    let at = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[at]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

fn report(runs: &[Run], requests: usize) -> String {
    let base = &runs[0];
    let (base_symbol, base_view) = (percentile(&base.symbol, 0.99), percentile(&base.view, 0.99));
    let mut out = format!(
        "One `wright lsp` (debug build) on the example workspace. The sessions start one per \
         keystroke at the beginning of the timed window; the model is the scripted provider \
         (4 tokens 25 ms apart, then a `grep`, `read_file`, `find_symbol` or `outline` call, \
         {STEPS} steps per session). The editor types {requests} keystrokes into an open \
         buffer (after {WARM_UP} untimed), each followed by `workspace/symbol` and \
         `wright/viewFileText`; each request's round trip is timed from the editor. Peer: the \
         same traffic with no session, in the same invocation.\n\n\
         | sessions | running at the end | workspace/symbol p50 | p99 | p99 vs no load | viewFileText p50 | p99 | p99 vs no load |\n\
         |---:|---:|---:|---:|---:|---:|---:|---:|\n"
    );
    for run in runs {
        let (symbol, view) = (percentile(&run.symbol, 0.99), percentile(&run.view, 0.99));
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {:.2}× | {} | {} | {:.2}× |",
            run.sessions,
            run.running_at_end,
            ms(percentile(&run.symbol, 0.5)),
            ms(symbol),
            symbol.as_secs_f64() / base_symbol.as_secs_f64(),
            ms(percentile(&run.view, 0.5)),
            ms(view),
            view.as_secs_f64() / base_view.as_secs_f64(),
        );
    }
    out
}
