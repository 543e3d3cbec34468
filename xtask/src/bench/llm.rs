//! `cargo xtask bench llm`: what wright's model clients add to a model call, and how much of
//! each request of a session is a cacheable prefix of the one before.
//!
//! Against the scripted provider of `wright-tests` on loopback, so the provider costs nothing
//! and the client's own cost shows:
//! - per streamed token: a long streamed answer read through the client (SSE parsing, event
//!   decoding, tool-call assembly, the channel to the caller), against the same bytes read
//!   through `reqwest` with no parsing (the peer), both in this run; the difference per token
//!   is compared with the 20 ms between tokens of a 50 tokens/s stream;
//! - per request: short answers one after another, the client (serialising the request,
//!   retries armed, decoding) against the same requests sent pre-serialised through `reqwest`;
//! - prefix stability: a 50-step scripted session through the client (tool calls, results,
//!   one compaction), the share of each request's bytes that repeat the previous request
//!   from its start, against a builder that puts the step's volatile facts (time, step) in
//!   the system prompt.
//!
//! It runs in the debug build `cargo xtask` uses (dependencies unoptimised too), so the
//! overheads are upper bounds of a release build's.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures_util::StreamExt;
use serde_json::json;
use wright::llm::{
    self, AnthropicClient, ChatModel, HttpSettings, Message, ModelId, OpenAiClient, Request,
    Sampling, ToolSchema, Transcript,
};
use wright_tests::provider::{Dialect, Reply, ScriptedProvider, Turn};

const TOKENS: usize = 4000;
const REQUESTS: usize = 200;
const STEPS: usize = 50;
const COMPACT_AT: usize = 30;
const RUNS: usize = 5;
/// The interval between tokens of a 50 tokens/s stream.
const TOKEN_INTERVAL: Duration = Duration::from_millis(20);

pub fn run(args: &[String]) -> anyhow::Result<String> {
    if let Some(arg) = args.first() {
        bail!("bench llm takes no arguments, found {arg:?}");
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting tokio")?;
    runtime.block_on(measure())
}

fn client(dialect: Dialect, provider: &ScriptedProvider) -> anyhow::Result<Box<dyn ChatModel>> {
    let settings = HttpSettings::default();
    let key = llm::ApiKey::new("sk-bench");
    Ok(match dialect {
        Dialect::OpenAi => Box::new(OpenAiClient::new(
            ModelId::parse("openai/gpt-4.1").map_err(anyhow::Error::msg)?,
            &provider.openai_base_url(),
            Some(key),
            settings,
        )?),
        Dialect::Anthropic => Box::new(AnthropicClient::new(
            ModelId::parse("anthropic/claude-sonnet-4-5").map_err(anyhow::Error::msg)?,
            &provider.anthropic_base_url(),
            key,
            settings,
        )?),
    })
}

fn endpoint(dialect: Dialect, provider: &ScriptedProvider) -> String {
    match dialect {
        Dialect::OpenAi => format!("{}/chat/completions", provider.openai_base_url()),
        Dialect::Anthropic => format!("{}/v1/messages", provider.anthropic_base_url()),
    }
}

fn tools() -> Vec<ToolSchema> {
    ["read_file", "grep", "find_symbol", "edit", "run_command"]
        .iter()
        .map(|name| ToolSchema {
            name: (*name).to_owned(),
            description: format!("The {name} tool of wright's agent, described as the model sees it."),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}, "pattern": {"type": "string"}}}),
        })
        .collect()
}

fn small_request() -> Request {
    Request {
        system: "You are wright's coding agent.".into(),
        tools: tools(),
        messages: vec![Message::User("Where is the configuration parsed?".into())],
        sampling: Sampling::default(),
        cache_key: Some("bench".into()),
        prediction: None,
        single_attempt: false,
    }
}

async fn through_client(model: &dyn ChatModel, request: &Request) -> anyhow::Result<usize> {
    let mut stream = model.stream(request);
    let mut events = 0;
    while let Some(event) = stream.next().await {
        event?;
        events += 1;
    }
    Ok(events)
}

async fn through_reqwest(http: &reqwest::Client, url: &str, body: &[u8]) -> anyhow::Result<usize> {
    let response = http
        .post(url)
        .header("content-type", "application/json")
        .body(body.to_vec())
        .send()
        .await?;
    let mut bytes = 0;
    let mut stream = response.bytes_stream();
    while let Some(chunk) = stream.next().await {
        bytes += chunk?.len();
    }
    Ok(bytes)
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

/// Median time of `RUNS` streamed answers of `TOKENS` tokens, client and peer.
async fn streaming(dialect: Dialect) -> anyhow::Result<(Duration, Duration)> {
    let provider = ScriptedProvider::start();
    let model = client(dialect, &provider)?;
    let http = reqwest::Client::builder().tcp_nodelay(true).build()?;
    let request = small_request();
    let pieces: Vec<String> = (0..TOKENS).map(|i| format!(" tok{}", i % 97)).collect();
    let pieces: Vec<&str> = pieces.iter().map(String::as_str).collect();
    let turn = Turn::text(&pieces).usage(3000, 2048, TOKENS as u64);
    let body = match dialect {
        Dialect::OpenAi => llm::openai::request_body("gpt-4.1", &request),
        Dialect::Anthropic => llm::anthropic::request_body("claude-sonnet-4-5", &request),
    };
    let url = endpoint(dialect, &provider);
    let (mut ours, mut peer) = (Vec::new(), Vec::new());
    // One warm-up of each, then alternate so drift hits both alike.
    for run in 0..=RUNS {
        provider.push(Reply::stream(dialect, &turn));
        let started = Instant::now();
        let events = through_client(model.as_ref(), &request).await?;
        let elapsed = started.elapsed();
        anyhow::ensure!(
            events >= TOKENS,
            "{dialect:?}: {events} events for {TOKENS} tokens"
        );
        provider.push(Reply::stream(dialect, &turn));
        let started = Instant::now();
        through_reqwest(&http, &url, &body).await?;
        if run > 0 {
            ours.push(elapsed);
            peer.push(started.elapsed());
        }
    }
    Ok((median(ours), median(peer)))
}

/// Median time of `REQUESTS` one-token answers, client and peer.
async fn per_request(dialect: Dialect) -> anyhow::Result<(Duration, Duration)> {
    let provider = ScriptedProvider::start();
    let model = client(dialect, &provider)?;
    let http = reqwest::Client::builder().tcp_nodelay(true).build()?;
    let request = small_request();
    let turn = Turn::text(&["ok"]).usage(3000, 2048, 1);
    let body = match dialect {
        Dialect::OpenAi => llm::openai::request_body("gpt-4.1", &request),
        Dialect::Anthropic => llm::anthropic::request_body("claude-sonnet-4-5", &request),
    };
    let url = endpoint(dialect, &provider);
    let (mut ours, mut peer) = (Vec::new(), Vec::new());
    for run in 0..=RUNS {
        for _ in 0..REQUESTS {
            provider.push(Reply::stream(dialect, &turn));
        }
        let started = Instant::now();
        for _ in 0..REQUESTS {
            through_client(model.as_ref(), &request).await?;
        }
        let elapsed = started.elapsed();
        for _ in 0..REQUESTS {
            provider.push(Reply::stream(dialect, &turn));
        }
        let started = Instant::now();
        for _ in 0..REQUESTS {
            through_reqwest(&http, &url, &body).await?;
        }
        if run > 0 {
            ours.push(elapsed);
            peer.push(started.elapsed());
        }
    }
    Ok((median(ours), median(peer)))
}

fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// Of all bytes sent after the first request, the share that repeats the previous request
/// from its start (what a provider's prefix cache can serve).
fn prefix_share(bodies: &[Vec<u8>]) -> f64 {
    let (mut shared, mut total) = (0usize, 0usize);
    for pair in bodies.windows(2) {
        shared += common_prefix(&pair[0], &pair[1]);
        total += pair[1].len();
    }
    shared as f64 / total.max(1) as f64
}

fn session_turn(step: usize) -> Turn {
    if step + 1 == STEPS {
        return Turn::text(&["The prices are parsed in ", "server/src/llm/accounting.rs."]);
    }
    Turn::text(&["Looking further."])
        .tool_call(
            &format!("call_{step}_a"),
            "grep",
            &format!(r#"{{"pattern": "price_{step}"}}"#),
        )
        .tool_call(
            &format!("call_{step}_b"),
            "read_file",
            &format!(r#"{{"path": "src/module_{step}.rs"}}"#),
        )
}

/// What a tool returned: a few hundred bytes, as a real grep or read would.
fn tool_output(step: usize, call: &llm::ToolCall) -> String {
    (0..12)
        .map(|line| {
            format!(
                "src/module_{step}.rs:{line}: fn {}_{line}() {{ /* … */ }}\n",
                call.name
            )
        })
        .collect()
}

/// Runs the 50-step session through the client; returns the bodies the provider received
/// and, for the peer, the bodies of the same session with volatile facts in the system prompt.
async fn session(dialect: Dialect) -> anyhow::Result<(Vec<Vec<u8>>, Vec<Vec<u8>>)> {
    let provider = ScriptedProvider::start();
    let model = client(dialect, &provider)?;
    for step in 0..STEPS {
        provider.push(Reply::stream(dialect, &session_turn(step)));
    }
    let system = "You are wright's coding agent. Work in small verified steps.".repeat(8);
    let mut transcript = Transcript::new(
        system.clone(),
        tools(),
        Sampling::default(),
        Some("bench".into()),
    );
    transcript.push(Message::User(
        "Find where model prices are parsed and explain the format.".into(),
    ));
    let mut peer = Vec::new();
    for step in 0..STEPS {
        if step == COMPACT_AT {
            let keep = transcript.messages().len().saturating_sub(6);
            transcript.compact(
                keep,
                "Searched modules 0 to 24 for price parsing; not found yet.",
            );
        }
        let request = transcript.request();
        let naive = Request {
            system: format!(
                "{system}\nStep {step}; time 2026-11-29T12:{:02}:00Z.",
                step % 60
            ),
            ..request.clone()
        };
        peer.push(match dialect {
            Dialect::OpenAi => llm::openai::request_body("gpt-4.1", &naive),
            Dialect::Anthropic => llm::anthropic::request_body("claude-sonnet-4-5", &naive),
        });
        let response = model.stream(&request).collect_response().await?;
        transcript.push(Message::Assistant {
            text: response.text.clone(),
            tool_calls: response.tool_calls.clone(),
        });
        for call in &response.tool_calls {
            transcript.push(Message::ToolResult {
                call_id: call.id.clone(),
                content: tool_output(step, call),
                is_error: false,
            });
        }
        if !response.tool_calls.is_empty() {
            transcript.push(Message::User(format!(
                "(step {step}; volatile facts go here)"
            )));
        }
    }
    let ours = provider.requests().into_iter().map(|r| r.body).collect();
    Ok((ours, peer))
}

async fn measure() -> anyhow::Result<String> {
    let mut out = String::new();
    writeln!(
        out,
        "Against the scripted provider of `wright-tests` on 127.0.0.1, debug build (an upper \
         bound). Median of {RUNS} runs after a warm-up.\n"
    )?;
    writeln!(out, "### Client overhead\n")?;
    writeln!(
        out,
        "| dialect | streamed answer of {TOKENS} tokens: wright / plain reqwest (no parsing) | overhead per token | share of a 20 ms token interval (50 tokens/s) | {REQUESTS} one-token requests: wright / plain reqwest | overhead per request |"
    )?;
    writeln!(out, "|---|---|---:|---:|---|---:|")?;
    for dialect in [Dialect::OpenAi, Dialect::Anthropic] {
        eprintln!("bench llm: streaming, {dialect:?}");
        let (ours, peer) = streaming(dialect).await?;
        let per_token = ours.saturating_sub(peer) / TOKENS as u32;
        eprintln!("bench llm: requests, {dialect:?}");
        let (ours_requests, peer_requests) = per_request(dialect).await?;
        let per_request = ours_requests.saturating_sub(peer_requests) / REQUESTS as u32;
        writeln!(
            out,
            "| {dialect:?} | {:.1} ms / {:.1} ms ({:.2}×) | {:.1} µs | {:.3}% | {:.1} ms / {:.1} ms ({:.2}×) | {:.0} µs |",
            ours.as_secs_f64() * 1e3,
            peer.as_secs_f64() * 1e3,
            ours.as_secs_f64() / peer.as_secs_f64(),
            per_token.as_secs_f64() * 1e6,
            per_token.as_secs_f64() / TOKEN_INTERVAL.as_secs_f64() * 100.0,
            ours_requests.as_secs_f64() * 1e3,
            peer_requests.as_secs_f64() * 1e3,
            ours_requests.as_secs_f64() / peer_requests.as_secs_f64(),
            per_request.as_secs_f64() * 1e6,
        )?;
    }
    writeln!(out, "\nTarget: under 1% of the 20 ms token interval.\n")?;
    writeln!(
        out,
        "### Prompt prefix stability over a {STEPS}-step session\n"
    )?;
    writeln!(
        out,
        "Each step: the model's text and two tool calls, their outputs, a user message with the \
         step's volatile facts; compaction rewrites history once, before step {COMPACT_AT}. \
         Figure: of all bytes sent after the first request, the share that repeats the previous \
         request from its first byte (a cacheable prefix). Peer: the same session with the \
         volatile facts in the system prompt.\n"
    )?;
    writeln!(
        out,
        "| dialect | wright | volatile facts in the system prompt | requests | bytes sent |"
    )?;
    writeln!(out, "|---|---:|---:|---:|---:|")?;
    for dialect in [Dialect::OpenAi, Dialect::Anthropic] {
        eprintln!("bench llm: session, {dialect:?}");
        let (ours, peer) = session(dialect).await?;
        anyhow::ensure!(ours.len() == STEPS, "{dialect:?}: {} requests", ours.len());
        writeln!(
            out,
            "| {dialect:?} | {:.1}% | {:.1}% | {} | {} |",
            prefix_share(&ours) * 100.0,
            prefix_share(&peer) * 100.0,
            ours.len(),
            ours.iter().map(Vec::len).sum::<usize>(),
        )?;
    }
    writeln!(
        out,
        "\nAnthropic's figure is on the bytes as sent: its history cache breakpoint moves to the \
         newest block each step, so each request repeats the previous one up to the old \
         breakpoint (the cache is keyed by content, not by the marker)."
    )?;
    Ok(out)
}
