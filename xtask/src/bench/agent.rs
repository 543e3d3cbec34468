//! `cargo xtask bench agent`: what the agent's harness adds to each step of a session.
//!
//! A 100-step session on an instant model (an in-process `ChatModel` that answers each request
//! at once with one tool call) over a copy of the example workspace, journaled to a temporary
//! data folder as real sessions are. The session is a conversation of five turns of 20 steps:
//! each turn's end (the model answers text) is followed at once by the user's next message, as
//! an editor sends it, so the turn boundaries are measured with the steps. Each step's time is the gap between two model requests:
//! reading the answer, running the tool, compaction's bookkeeping (each output kept as an
//! artifact file), the journal's flushed lines, the events, building the next request. The tool's own work (a `read_file` of
//! a small file) is timed alone and taken off, which leaves the harness overhead. The peer,
//! measured in the same run, is the least work any harness does per step: serialising the
//! step's request body for the OpenAI API. Peak memory is the process's high-water mark after
//! the session, against before it.
//!
//! Then the front ends' share (`front_ends.rs`): the same kind of session through `wright acp`
//! and through `wright lsp`, the binaries over stdio, in the same run.
//!
//! It runs in the debug build `cargo xtask` uses, so the figures are upper bounds of a
//! release build's.

use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use wright::agent::launch::{self, Begin, Plan, Prepared};
use wright::agent::tools::{self, ToolContext};
use wright::agent::{self, Cancel, Limits};
use wright::edit::GateMode;
use wright::llm::{
    ChatModel, Event, EventStream, FinishReason, ModelId, Request, ToolCall, Usage, openai,
};
use wright::workspace::{DiskOnly, WalkOptions};

const STEPS: u32 = 100;
/// The conversation's turns; the model ends one every `STEPS / TURNS` steps.
const TURNS: u32 = 5;

/// Answers every request at once with one `read_file`, and the last with text; remembers when
/// each request came, and (`keep`) the request itself.
struct InstantModel {
    id: ModelId,
    keep: bool,
    requests: Mutex<Vec<(Instant, Option<Request>)>>,
}

impl ChatModel for InstantModel {
    fn model(&self) -> &ModelId {
        &self.id
    }

    fn stream(&self, request: &Request) -> EventStream {
        // The session's title: a side call beside the first turn, not a step.
        if request.tools.is_empty() {
            return EventStream::from_items(vec![
                Ok(Event::TextDelta("Bench session".into())),
                Ok(Event::Finish(FinishReason::Stop)),
            ]);
        }
        let mut requests = self.requests.lock().unwrap_or_else(|e| e.into_inner());
        requests.push((Instant::now(), self.keep.then(|| request.clone())));
        let step = requests.len();
        let usage = Event::Usage(Usage {
            input: 1000,
            output: 20,
            ..Usage::default()
        });
        let items = if (step as u32).is_multiple_of(STEPS / TURNS) {
            vec![
                Event::TextDelta("done".into()),
                usage,
                Event::Finish(FinishReason::Stop),
            ]
        } else {
            let call = read_call(step);
            vec![
                Event::ToolCallStart {
                    index: 0,
                    id: call.id.clone(),
                    name: call.name.clone(),
                },
                Event::ToolCallArgs {
                    index: 0,
                    fragment: call.arguments.clone(),
                },
                Event::ToolCallEnd { index: 0, call },
                usage,
                Event::Finish(FinishReason::ToolCalls),
            ]
        };
        EventStream::from_items(items.into_iter().map(Ok).collect())
    }
}

fn read_call(step: usize) -> ToolCall {
    ToolCall {
        id: format!("call_{step}"),
        name: "read_file".into(),
        arguments: r#"{"path": "src/lib.rs", "start_line": 1, "end_line": 40}"#.into(),
    }
}

pub fn run(args: &[String]) -> anyhow::Result<String> {
    if let Some(arg) = args.first() {
        bail!("bench agent takes no arguments, found {arg:?}");
    }
    let root = std::env::temp_dir().join(format!("wright-bench-agent-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(root.join("src"))?;
    let example = crate::project_root().join("tests/fixtures/example-workspace/src/lib.rs");
    std::fs::copy(&example, root.join("src/lib.rs")).context("copying the example workspace")?;
    let data_dir =
        std::env::temp_dir().join(format!("wright-bench-agent-data-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&data_dir);
    let result = measure(&root, &data_dir);
    let _ = std::fs::remove_dir_all(&root);
    let _ = std::fs::remove_dir_all(&data_dir);
    let mut body = result?;
    let figures = super::front_ends::measure()?;
    let ((acp50, acp99), (lsp50, lsp99)) = (figures.acp, figures.lsp);
    writeln!(
        body,
        "\nThrough the front ends, the binaries over stdio: the same session ({} steps of an \
         instant `read_file` answer from the scripted provider over loopback HTTP, then text), \
         through `wright acp` (updates as `session/update` lines) against `wright lsp` \
         (`wright/agentEvent` frames), taken in turns, {} sessions each; a step is the gap \
         between two model requests as the provider received them (the HTTP round trip and the \
         tool included, alike in both). The p99 is a few one-off stalls within a session, \
         which land on either front end from run to run; the p50 is the per-step \
         cost.\n",
        super::front_ends::STEPS,
        super::front_ends::ROUNDS
    )?;
    writeln!(
        body,
        "| measure | `wright acp` | peer | peer's figure | ratio | target | met |\n|---|---|---|---|---|---|---|"
    )?;
    for (what, acp, lsp) in [("p50", acp50, lsp50), ("p99", acp99, lsp99)] {
        writeln!(
            body,
            "| a step through the front end, {what} | {acp:.3} ms | the same step through `wright lsp` | {lsp:.3} ms | {:.2}× | ≤ 1.5× | {} |",
            acp / lsp.max(1e-6),
            if acp <= lsp * 1.5 { "yes" } else { "**no**" }
        )?;
    }
    Ok(body)
}

fn context(root: &std::path::Path) -> Arc<ToolContext> {
    Arc::new(ToolContext {
        root: root.to_path_buf(),
        overlay: Arc::new(DiskOnly),
        index: None,
        walk: WalkOptions::default(),
        edits: Arc::new(agent::disk::DiskTarget::new(root, GateMode::Report)),
        commands: None,
        test_command: None,
        cancel: Cancel::new(),
        plan: Mutex::default(),
        plan_mode: Default::default(),
        mcp: None,
    })
}

/// Runs the session; returns the model, which remembers the requests.
fn session(
    runtime: &tokio::runtime::Runtime,
    root: &std::path::Path,
    data_dir: &std::path::Path,
    keep: bool,
) -> anyhow::Result<Arc<InstantModel>> {
    let model = Arc::new(InstantModel {
        id: ModelId::parse("openai/instant").map_err(anyhow::Error::msg)?,
        keep,
        requests: Mutex::new(Vec::new()),
    });
    // Opened as the editor and `wright exec` open theirs, with a real journal and artifact
    // store: their writes (flushed at every message, each output a file) are part of every step.
    let config = wright::config::Config::default();
    let instant = Arc::clone(&model);
    let mut prepared = Prepared::prepare_with(
        Plan {
            config: &config,
            root,
            data_dir,
            begin: Begin::Task("read the library again and again"),
            model: None,
            id_prefix: "bench",
            mode: None,
        },
        move |_, _, _| {
            Ok(agent::Models {
                decision: wright::router::Decision {
                    tier: wright::router::Tier::Strong,
                    model: instant.id.clone(),
                    reason: "the bench's instant model".to_owned(),
                },
                task: instant.clone(),
                summary: instant,
            })
        },
    )
    .map_err(anyhow::Error::msg)?;
    prepared.limits = Limits {
        max_steps: STEPS,
        ..Limits::default()
    };
    prepared.compaction = wright::compaction::Settings::default();
    let conversation = prepared.conversation();
    let opened = prepared.open(launch::Context {
        index: None,
        overlay: Arc::new(DiskOnly),
        focus: Default::default(),
    });
    if opened.journal_path().is_none() {
        bail!("the session's journal could not be created (see the log)");
    }
    let (events, mut received) = tokio::sync::mpsc::unbounded_channel();
    let outcomes = runtime.block_on(async {
        // A reader like the editor's: every event is taken off the channel, and each turn's
        // end is answered at once with the next message, as a user's follow-up.
        let reader = tokio::spawn(async move {
            let mut outcomes = Vec::new();
            while let Some(event) = received.recv().await {
                if let agent::AgentEvent::Finished { turn, outcome } = event {
                    outcomes.push(outcome);
                    if turn < TURNS {
                        let message = agent::conversation::UserMessage {
                            text: format!("good; go on reading (turn {})", turn + 1),
                            ..Default::default()
                        };
                        if let Err(why) = conversation.prompt(message) {
                            eprintln!("bench agent: the follow-up was refused: {why}");
                            conversation.close();
                        }
                    } else {
                        conversation.close();
                    }
                }
            }
            outcomes
        });
        let mut session = opened.session(context(root), events, None);
        session.converse().await;
        drop(session);
        reader.await.unwrap_or_default()
    });
    let steps = outcomes.last().map_or(0, |outcome| outcome.steps);
    if outcomes.len() != TURNS as usize || steps != STEPS {
        bail!(
            "the conversation ended after {} turns and {steps} steps: {:?}",
            outcomes.len(),
            outcomes.last().map(|outcome| &outcome.reason)
        );
    }
    Ok(model)
}

fn measure(root: &std::path::Path, data_dir: &std::path::Path) -> anyhow::Result<String> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    // Memory first, with nothing kept but the session's own state. The tokenizer compaction
    // counts with is loaded once per process, not per session: loaded before, and told apart.
    let memory_start = high_water_kb();
    std::hint::black_box(wright::llm::tokens::count("warm up"));
    let memory_before = high_water_kb();
    session(&runtime, root, data_dir, false)?;
    let memory_after = high_water_kb();
    let model = session(&runtime, root, data_dir, true)?;

    // The tool's own work, alone.
    let tools = context(root);
    let mut tool_times: Vec<Duration> = (0..STEPS as usize)
        .map(|step| {
            let started = Instant::now();
            std::hint::black_box(tools::call(&tools, &read_call(step)));
            started.elapsed()
        })
        .collect();
    let tool = median(&mut tool_times);

    let requests = model.requests.lock().unwrap_or_else(|e| e.into_inner());
    let mut gaps: Vec<Duration> = requests
        .windows(2)
        .map(|pair| (pair[1].0 - pair[0].0).saturating_sub(tool))
        .collect();
    // The gaps from a turn's last request (its text answer) to the next turn's first: the
    // turn's end, the follow-up, the new turn's message; no tool runs.
    let per_turn = (STEPS / TURNS) as usize;
    let mut boundaries: Vec<Duration> = (1..TURNS as usize)
        .map(|turn| requests[turn * per_turn].0 - requests[turn * per_turn - 1].0)
        .collect();
    let mut serialise: Vec<Duration> = requests
        .iter()
        .filter_map(|(_, request)| request.as_ref())
        .map(|request| {
            let started = Instant::now();
            std::hint::black_box(openai::request_body("gpt-4.1", request));
            started.elapsed()
        })
        .collect();
    let (p50, p99) = (percentile(&mut gaps, 50), percentile(&mut gaps, 99));
    let boundary = median(&mut boundaries);
    let peer50 = percentile(&mut serialise, 50);
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;

    let mut body = String::new();
    writeln!(
        body,
        "A {STEPS}-step session on an instant in-process model (one `read_file` of 40 lines per \
         step), over a copy of the example workspace, journaled (each message flushed, each \
         output an artifact file), as a conversation of {TURNS} turns: each turn's end is \
         answered at once with a follow-up message; debug build, so upper bounds.\n"
    )?;
    writeln!(
        body,
        "| measure | wright | peer | peer's figure | ratio | target | met |\n|---|---|---|---|---|---|---|"
    )?;
    writeln!(
        body,
        "| harness overhead per step, p50 (step gap − the tool's own {:.3} ms) | {:.3} ms | serialising the step's OpenAI request body | {:.3} ms | {:.1}× | < 5 ms | {} |",
        ms(tool),
        ms(p50),
        ms(peer50),
        ms(p50) / ms(peer50).max(1e-6),
        if ms(p50) < 5.0 { "yes" } else { "**no**" }
    )?;
    writeln!(
        body,
        "| harness overhead per step, p99 | {:.3} ms | same, p50 | {:.3} ms | {:.1}× | < 20 ms | {} |",
        ms(p99),
        ms(peer50),
        ms(p99) / ms(peer50).max(1e-6),
        if ms(p99) < 20.0 { "yes" } else { "**no**" }
    )?;
    writeln!(
        body,
        "| a turn's end to the next turn's first request (the follow-up), median of {} | {:.3} ms | same peer | {:.3} ms | {:.1}× | report | — |",
        TURNS - 1,
        ms(boundary),
        ms(peer50),
        ms(boundary) / ms(peer50).max(1e-6),
    )?;
    writeln!(
        body,
        "| peak memory added by the session (VmHWM after − before) | {} KB | — | — | — | report | — |",
        memory_after.saturating_sub(memory_before)
    )?;
    writeln!(
        body,
        "| the o200k tokenizer, loaded once per process (VmHWM) | {} KB | — | — | — | report | — |",
        memory_before.saturating_sub(memory_start)
    )?;
    writeln!(
        body,
        "\nThe last request carried {} messages; the session used {} model calls.",
        requests
            .last()
            .and_then(|(_, r)| r.as_ref())
            .map_or(0, |r| r.messages.len()),
        requests.len()
    )?;
    Ok(body)
}

fn median(values: &mut [Duration]) -> Duration {
    percentile(values, 50)
}

fn percentile(values: &mut [Duration], percent: usize) -> Duration {
    values.sort();
    values[(values.len() - 1) * percent / 100]
}

/// The process's peak resident memory so far, in KB (Linux).
fn high_water_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix("VmHWM:"))
                .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}
