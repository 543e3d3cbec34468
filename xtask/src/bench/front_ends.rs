//! The front ends' share of a step, for `cargo xtask bench agent`: the same scripted session
//! (instant answers, one `read_file` per step, then text) through `wright acp` and through
//! `wright lsp`, both the debug binary on a copy of the example workspace, the model the
//! scripted provider of `wright-tests` over loopback HTTP. A step's time is the gap between
//! two model requests as the provider received them; everything but the front end (the HTTP
//! round trip, the tool, the journal) is the same in both, so the difference is what each
//! front end adds: its events as `session/update` lines or as `wright/agentEvent` frames.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{Context, bail};
use serde_json::{Value, json};
use wright_tests::provider::{Dialect, Reply, ScriptedProvider, Turn};
use wright_tests::session::{agent_spawn, finished_event, start_agent_server, versioned_edits};
use wright_tests::{TempDir, wright_bin};

/// Steps of each session (one model request each) and the sessions per front end, taken in
/// turns so that drift on a shared machine falls on both alike.
/// Under `agent.max_steps`' default of 50.
pub const STEPS: usize = 40;
pub const ROUNDS: usize = 4;

/// The p50 and p99 step gaps of each front end, in milliseconds.
pub struct Figures {
    pub acp: (f64, f64),
    pub lsp: (f64, f64),
}

pub fn measure() -> anyhow::Result<Figures> {
    crate::bench::shared::build_wright_debug()?;
    let (mut acp, mut lsp) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        acp.extend(gaps(FrontEnd::Acp)?);
        lsp.extend(gaps(FrontEnd::Lsp)?);
    }
    Ok(Figures {
        acp: (percentile(&mut acp, 50), percentile(&mut acp, 99)),
        lsp: (percentile(&mut lsp, 50), percentile(&mut lsp, 99)),
    })
}

#[derive(Clone, Copy)]
enum FrontEnd {
    Acp,
    Lsp,
}

fn script(provider: &ScriptedProvider) {
    for step in 0..STEPS {
        let turn = Turn::text(&["Reading."]).tool_call(
            &format!("c{step}"),
            "read_file",
            &json!({"path": "src/lib.rs"}).to_string(),
        );
        provider.push(Reply::stream(Dialect::OpenAi, &turn));
    }
    provider.push(Reply::stream(Dialect::OpenAi, &Turn::text(&["Done."])));
}

/// One session's step gaps through `front_end`, in milliseconds.
fn gaps(front_end: FrontEnd) -> anyhow::Result<Vec<f64>> {
    let dir = TempDir::new("bench-front-ends");
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(ws.join("src"))?;
    std::fs::copy(
        crate::project_root().join("tests/fixtures/example-workspace/src/lib.rs"),
        ws.join("src/lib.rs"),
    )
    .context("copying the example workspace")?;
    let provider = ScriptedProvider::start();
    script(&provider);
    let spawn = agent_spawn(&dir, &provider);
    match front_end {
        FrontEnd::Lsp => {
            let mut editor = start_agent_server(&spawn, versioned_edits());
            let run = editor.request("wright/agentRun", json!({"task": "read the code"}));
            let session = run["sessionId"].as_str().unwrap_or_default().to_owned();
            let outcome = finished_event(&mut editor, &session);
            if outcome["status"] != "done" {
                bail!("the LSP session ended {outcome}");
            }
            editor.discard(|m| {
                m["method"] == "wright/agentEvent" || m["method"] == "window/logMessage"
            });
            editor.shutdown();
        }
        FrontEnd::Acp => acp_session(&dir, &spawn.env)?,
    }
    let requests = provider.requests();
    if requests.len() != STEPS + 1 {
        bail!("{} model requests, expected {}", requests.len(), STEPS + 1);
    }
    Ok(requests
        .windows(2)
        .map(|pair| (pair[1].received - pair[0].received).as_secs_f64() * 1000.0)
        .collect())
}

/// The session through `wright acp`, as a client without fs capabilities: initialize,
/// session/new, one session/prompt, its updates read and dropped until the answer.
fn acp_session(dir: &TempDir, env: &[(String, String)]) -> anyhow::Result<()> {
    let mut child = Command::new(wright_bin())
        .arg("acp")
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .env("HOME", dir.path().join("home"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("starting wright acp")?;
    let mut stdin = child.stdin.take().context("stdin")?;
    let mut lines = BufReader::new(child.stdout.take().context("stdout")?).lines();
    let mut answer = |id: u64| -> anyhow::Result<Value> {
        for line in lines.by_ref() {
            let message: Value = serde_json::from_str(&line?)?;
            if message["id"] == id && message.get("method").is_none() {
                if let Some(error) = message.get("error") {
                    bail!("wright acp refused request {id}: {error}");
                }
                return Ok(message["result"].clone());
            }
        }
        bail!("wright acp closed its output before answering {id}")
    };
    let ws = std::fs::canonicalize(dir.path().join("ws"))?;
    let requests = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1, "clientCapabilities": {}}}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": ws, "mcpServers": []}}),
    ];
    writeln!(stdin, "{}", requests[0])?;
    answer(1)?;
    writeln!(stdin, "{}", requests[1])?;
    let session = answer(2)?["sessionId"].clone();
    let prompt = json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": {"sessionId": session, "prompt": [{"type": "text", "text": "read the code"}]}});
    writeln!(stdin, "{prompt}")?;
    let stop = answer(3)?;
    if stop["stopReason"] != "end_turn" {
        bail!("the ACP session ended {stop}");
    }
    drop(stdin);
    let started = std::time::Instant::now();
    while child.try_wait()?.is_none() {
        if started.elapsed() > Duration::from_secs(10) {
            let _ = child.kill();
            bail!("wright acp did not exit when its input closed");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(())
}

fn percentile(values: &mut [f64], percent: usize) -> f64 {
    values.sort_by(f64::total_cmp);
    values[(values.len() * percent / 100).min(values.len() - 1)]
}
