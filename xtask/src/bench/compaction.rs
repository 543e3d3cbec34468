//! `cargo xtask bench compaction`: what compaction saves over a long scripted session, what
//! it costs the prompt cache, and whether the stable signals survive.
//!
//! The session (120 steps by default) is scripted over this repository's own sources: reads
//! of real files (several read again after an edit), greps over them, `cargo test` runs
//! listing the workspace's real test names with failures that get fixed over time, a
//! `cargo build` with errors, and the pytest, unittest, jest, vitest, go test and tsc outputs
//! of `server/src/compaction/fixtures/`. The same steps are appended to two transcripts: one
//! left alone (the peer) and one run through `Compactor::after_step` with the default
//! settings. Measured per step: the prompt tokens (o200k estimates, as the compactor counts
//! them), the tokens a prefix cache could serve (the messages equal to the previous
//! request's, from the start), and the bytes of the OpenAI request body that repeat the
//! previous one from its first byte. At the end: every failing test name and error location
//! of every command output must still be in the compacted prompt.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::json;
use wright::compaction::{ArtifactStore, Compactor, MASK_PREFIX, Settings};
use wright::llm::tokens::{count, estimate_fixed, estimate_message};
use wright::llm::{Message, Sampling, ToolCall, ToolSchema, Transcript};

const DEFAULT_STEPS: usize = 120;

pub fn run(args: &[String]) -> anyhow::Result<String> {
    let steps = match args {
        [] => DEFAULT_STEPS,
        [flag, n] if flag == "--steps" => n.parse().context("--steps takes a number")?,
        other => bail!("bench compaction takes [--steps N], found {other:?}"),
    };
    let root = crate::project_root();
    let corpus = Corpus::load(&root)?;
    let script = script(&corpus, steps);
    measure(&root, &script)
}

/// One scripted step: what the model says, the call it makes, what the tool returns.
struct Step {
    text: String,
    tool: &'static str,
    arguments: serde_json::Value,
    output: String,
}

/// The repository's sources and test names the script is made of.
struct Corpus {
    /// (path relative to the root, text), Rust files of `server/src` of a readable size.
    files: Vec<(String, String)>,
    /// (test path as cargo prints it, file, line of its `fn`).
    tests: Vec<(String, String, usize)>,
}

impl Corpus {
    fn load(root: &Path) -> anyhow::Result<Self> {
        let mut paths = Vec::new();
        collect(&root.join("server/src"), &mut paths);
        paths.sort();
        let mut files = Vec::new();
        let mut tests = Vec::new();
        for path in paths {
            let text = std::fs::read_to_string(&path)?;
            let relative = path
                .strip_prefix(root)?
                .to_string_lossy()
                .replace('\\', "/");
            let module = relative
                .trim_start_matches("server/src/")
                .trim_end_matches(".rs")
                .trim_end_matches("/mod")
                .replace('/', "::");
            let lines: Vec<&str> = text.lines().collect();
            for (i, line) in lines.iter().enumerate() {
                if line.trim_start().starts_with("#[test]")
                    || line.trim_start().starts_with("#[tokio::test]")
                {
                    let name = lines[i + 1..].iter().take(3).find_map(|l| {
                        l.trim_start()
                            .strip_prefix("fn ")
                            .or_else(|| l.trim_start().strip_prefix("async fn "))
                            .and_then(|rest| rest.split('(').next())
                    });
                    if let Some(name) = name {
                        tests.push((format!("{module}::tests::{name}"), relative.clone(), i + 2));
                    }
                }
            }
            if (150..=900).contains(&lines.len()) {
                files.push((relative, text));
            }
        }
        if files.len() < 20 || tests.len() < 100 {
            bail!(
                "the corpus is too small ({} files, {} tests)",
                files.len(),
                tests.len()
            );
        }
        Ok(Self { files, tests })
    }
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `read_file`'s output: numbered lines.
fn numbered(text: &str, start: usize, end: usize) -> String {
    text.lines()
        .enumerate()
        .skip(start - 1)
        .take(end + 1 - start)
        .map(|(i, line)| format!("{:>6}\t{line}\n", i + 1))
        .collect()
}

fn grep(corpus: &Corpus, pattern: &str) -> String {
    let mut out = String::new();
    let mut hits = 0;
    for (path, text) in &corpus.files {
        for (i, line) in text.lines().enumerate() {
            if line.contains(pattern) && hits < 80 {
                hits += 1;
                let _ = writeln!(out, "{path}:{}:{line}", i + 1);
            }
        }
    }
    out
}

/// A `cargo test` run over the workspace's real test names, the given ones failing with a
/// panic at the line of their `fn`.
fn cargo_test(corpus: &Corpus, failing: &[usize]) -> String {
    let mut out = String::from(
        "   Compiling wright v0.1.0 (/work/wright/server)\n    Finished `test` profile [unoptimized + debuginfo] target(s) in 21.37s\n     Running unittests src/lib.rs (target/debug/deps/wright-4be0f1d2c3a49e5b)\n\n",
    );
    let _ = writeln!(out, "running {} tests", corpus.tests.len());
    for (i, (name, _, _)) in corpus.tests.iter().enumerate() {
        let verdict = if failing.contains(&i) { "FAILED" } else { "ok" };
        let _ = writeln!(out, "test {name} ... {verdict}");
    }
    if !failing.is_empty() {
        out.push_str("\nfailures:\n\n");
        for &i in failing {
            let (name, file, line) = &corpus.tests[i];
            let _ = write!(
                out,
                "---- {name} stdout ----\n\nthread '{name}' (4{i:04}) panicked at {}:{}:9:\nassertion `left == right` failed\n  left: {}\n right: {}\nnote: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n\n",
                file.trim_start_matches("server/"),
                line + 3,
                i * 7 % 23,
                i * 7 % 23 + 1
            );
        }
        out.push_str("\nfailures:\n");
        for &i in failing {
            let _ = writeln!(out, "    {}", corpus.tests[i].0);
        }
    }
    let _ = writeln!(
        out,
        "\ntest result: {}. {} passed; {} failed; 0 ignored; 0 measured; 0 filtered out; finished in 3.41s",
        if failing.is_empty() { "ok" } else { "FAILED" },
        corpus.tests.len() - failing.len(),
        failing.len()
    );
    out
}

fn cargo_build_errors(file: &str, line: usize) -> String {
    let file = file.trim_start_matches("server/");
    format!(
        "   Compiling wright v0.1.0 (/work/wright/server)\n\
         error[E0308]: mismatched types\n  --> {file}:{line}:24\n   |\n{line} |         let total: usize = estimate;\n   |                -----   ^^^^^^^^ expected `usize`, found `Option<usize>`\n   |                |\n   |                expected due to this\n   |\n   = note: expected type `usize`\n              found enum `Option<usize>`\nhelp: consider using `Option::expect` to unwrap the `Option<usize>` value, panicking if the value is an `Option::None`\n   |\n{line} |         let total: usize = estimate.expect(\"REASON\");\n   |                                    +++++++++++++++++\n\n\
         error[E0425]: cannot find value `low_water` in this scope\n  --> {file}:{}:17\n   |\n{} |         if total <= low_water {{\n   |                     ^^^^^^^^^ not found in this scope\n\n\
         Some errors have detailed explanations: E0308, E0425.\nFor more information about an error, try `rustc --explain E0308`.\nerror: could not compile `wright` (lib) due to 2 previous errors\n",
        line + 12,
        line + 12
    )
}

/// The scripted session: a cycle of ten steps over a moving set of files.
fn script(corpus: &Corpus, steps: usize) -> Vec<Step> {
    let fixtures: [(&str, &str); 7] = [
        (
            "cd tools && python -m pytest",
            include_str!("../../../server/src/compaction/fixtures/pytest.txt"),
        ),
        (
            "python3 -m unittest",
            include_str!("../../../server/src/compaction/fixtures/unittest.txt"),
        ),
        (
            "cd editors/vscode && npx jest",
            include_str!("../../../server/src/compaction/fixtures/jest.txt"),
        ),
        (
            "cd editors/vscode && npx vitest run",
            include_str!("../../../server/src/compaction/fixtures/vitest.txt"),
        ),
        (
            "cd tools/gen && go test ./...",
            include_str!("../../../server/src/compaction/fixtures/go_test.txt"),
        ),
        (
            "cd editors/vscode && npx tsc --noEmit",
            include_str!("../../../server/src/compaction/fixtures/tsc.txt"),
        ),
        ("cargo build -p wright", ""),
    ];
    let patterns = [
        "Transcript",
        "fn parse",
        "Result<",
        "tracing::",
        "pub struct",
        "unwrap_or",
        "Config",
        "impl ",
        "Message::",
        "to_owned()",
        "HashMap",
        "Path",
    ];
    let n = corpus.files.len();
    let t = corpus.tests.len();
    let mut script = Vec::with_capacity(steps);
    for step in 0..steps {
        let cycle = step / 10;
        let (a_path, a_text) = &corpus.files[(cycle * 3) % n];
        let (b_path, b_text) = &corpus.files[(cycle * 3 + 1) % n];
        let (c_path, c_text) = &corpus.files[(cycle * 5 + 2) % n];
        let lines = |text: &str| text.lines().count().min(300);
        // Three tests fail at first; one is fixed every four cycles.
        let failing: Vec<usize> = [t / 5, t / 2, t * 4 / 5]
            .into_iter()
            .take(3usize.saturating_sub(cycle / 4))
            .collect();
        let (text, tool, arguments, output) = match step % 10 {
            0 => {
                let pattern = patterns[cycle % patterns.len()];
                (
                    format!("Looking for `{pattern}` across the server."),
                    "grep",
                    json!({"pattern": pattern}),
                    grep(corpus, pattern),
                )
            }
            1 => (
                format!("Reading {a_path}."),
                "read_file",
                json!({"path": a_path}),
                numbered(a_text, 1, lines(a_text)),
            ),
            2 => (
                format!("The first half of {b_path} has the helper."),
                "read_file",
                json!({"path": b_path, "start_line": 1, "end_line": 120}),
                numbered(b_text, 1, 120),
            ),
            3 => (
                format!("Fixing the estimate in {a_path}."),
                "edit",
                json!({"path": a_path, "old_string": "let total = estimate;", "new_string": "let total = estimate.unwrap_or(0);"}),
                format!("Applied 1 replacement to {a_path} (lines 41-41)."),
            ),
            4 => (
                format!("Reading {a_path} again after the edit."),
                "read_file",
                json!({"path": a_path}),
                numbered(a_text, 1, lines(a_text)),
            ),
            5 => (
                "Running the tests.".to_owned(),
                "run_tests",
                json!({}),
                cargo_test(corpus, &failing),
            ),
            6 => (
                "Where is it defined?".to_owned(),
                "find_symbol",
                json!({"query": "estimate_request"}),
                "server/src/llm/tokens.rs:22:1 fn estimate_request(request: &Request) -> usize\n"
                    .to_owned(),
            ),
            7 => (
                format!("Reading {c_path}."),
                "read_file",
                json!({"path": c_path}),
                numbered(c_text, 1, lines(c_text)),
            ),
            8 => {
                let (command, output) = fixtures[cycle % fixtures.len()];
                let output = if output.is_empty() {
                    cargo_build_errors(a_path, 40 + cycle)
                } else {
                    output.to_owned()
                };
                (
                    format!("Checking with `{command}`."),
                    "run_command",
                    json!({"command": command}),
                    output,
                )
            }
            _ => (
                format!("Outline of {b_path}."),
                "outline",
                json!({"path": b_path}),
                b_text
                    .lines()
                    .enumerate()
                    .filter(|(_, l)| {
                        l.starts_with("pub fn")
                            || l.starts_with("fn ")
                            || l.starts_with("pub struct")
                            || l.starts_with("impl")
                    })
                    .map(|(i, l)| format!("{:>5}  {}\n", i + 1, l.trim_end_matches('{').trim()))
                    .collect(),
            ),
        };
        script.push(Step {
            text,
            tool,
            arguments,
            output,
        });
    }
    script
}

fn tools() -> Vec<ToolSchema> {
    [
        "list_dir",
        "read_file",
        "grep",
        "find_symbol",
        "outline",
        "find_references",
        "edit",
        "multi_edit",
        "apply_patch",
        "write_file",
        "run_command",
        "run_tests",
        "read_artifact",
        "update_plan",
    ]
    .iter()
    .map(|name| ToolSchema {
        name: (*name).to_owned(),
        description: format!("The {name} tool of table in docs/design.md."),
        parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
    })
    .collect()
}

/// Per-request figures of one transcript over the session.
#[derive(Default)]
struct Track {
    tokens: Vec<usize>,
    /// Tokens of the messages equal to the previous request's, from the start (with the
    /// fixed part): what a prefix cache can serve.
    cacheable: Vec<usize>,
    shared_bytes: usize,
    sent_bytes: usize,
    previous_messages: Vec<Message>,
    previous_body: Vec<u8>,
    /// Token counts per message, recounted only after a rewrite.
    per_message: Vec<usize>,
    rewrites: u32,
}

impl Track {
    fn observe(&mut self, transcript: &Transcript, fixed: usize) {
        let request = transcript.request();
        if transcript.rewrites() != self.rewrites {
            self.per_message.clear();
            self.rewrites = transcript.rewrites();
        }
        let start = self.per_message.len();
        self.per_message
            .extend(request.messages[start..].iter().map(estimate_message));
        let per_message = &self.per_message;
        let same = request
            .messages
            .iter()
            .zip(&self.previous_messages)
            .take_while(|(a, b)| a == b)
            .count();
        let total = fixed + per_message.iter().sum::<usize>();
        let cacheable = if self.previous_messages.is_empty() {
            0
        } else {
            fixed + per_message[..same].iter().sum::<usize>()
        };
        self.tokens.push(total);
        self.cacheable.push(cacheable);
        let body = wright::llm::openai::request_body("gpt-4.1", &request);
        if !self.previous_body.is_empty() {
            self.shared_bytes += body
                .iter()
                .zip(&self.previous_body)
                .take_while(|(a, b)| a == b)
                .count();
            self.sent_bytes += body.len();
        }
        self.previous_body = body;
        self.previous_messages = request.messages.clone();
    }

    fn total(&self) -> usize {
        self.tokens.iter().sum()
    }

    fn uncached(&self) -> usize {
        self.total() - self.cacheable.iter().sum::<usize>()
    }

    fn prefix_share(&self) -> f64 {
        self.shared_bytes as f64 / self.sent_bytes.max(1) as f64
    }
}

fn measure(root: &Path, script: &[Step]) -> anyhow::Result<String> {
    let new_transcript = || {
        let mut transcript = Transcript::new(
            "You are wright's coding agent. Work in small verified steps.".to_owned(),
            tools(),
            Sampling::default(),
            Some("bench-compaction".to_owned()),
        );
        transcript.push(Message::User(
            "Make `cargo test -p wright` pass: the token estimates of compaction are off."
                .to_owned(),
        ));
        transcript
    };
    let mut plain = new_transcript();
    let mut compacted = new_transcript();
    let settings = Settings::default();
    let mut compactor = Compactor::new(settings, Some(root), ArtifactStore::in_memory());
    let fixed = estimate_fixed(&plain.request());
    let (mut ours, mut peer) = (Track::default(), Track::default());
    let (mut batches, mut masked, mut summaries_needed) = (0, 0, 0);
    let mut step_times: Vec<Duration> = Vec::new();
    for (n, step) in script.iter().enumerate() {
        let call = ToolCall {
            id: format!("call_{n}"),
            name: step.tool.to_owned(),
            arguments: step.arguments.to_string(),
        };
        for transcript in [&mut plain, &mut compacted] {
            transcript.push(Message::Assistant {
                text: step.text.clone(),
                tool_calls: vec![call.clone()],
            });
            transcript.push(Message::ToolResult {
                call_id: call.id.clone(),
                content: step.output.clone(),
                is_error: false,
            });
        }
        let started = Instant::now();
        let report = compactor.after_step(&mut compacted)?;
        step_times.push(started.elapsed());
        if let Some(report) = report {
            batches += usize::from(report.masked > 0);
            masked += report.masked;
            summaries_needed += usize::from(report.needs_summary);
        }
        peer.observe(&plain, fixed);
        ours.observe(&compacted, fixed);
        if n % 20 == 19 {
            eprintln!("bench compaction: step {}", n + 1);
        }
    }

    // Every signal of every command output, masked or not, must be in the final prompt.
    let final_prompt: String = compacted
        .messages()
        .iter()
        .map(|m| match m {
            Message::User(text) => text.clone(),
            Message::Assistant { text, .. } => text.clone(),
            Message::ToolResult { content, .. } => content.clone(),
            Message::Image { .. } => String::new(),
        })
        .collect::<Vec<_>>()
        .join("\n");
    let (mut keys, mut kept, mut outputs_with_signals) = (0, 0, 0);
    let mut missing = Vec::new();
    for (n, step) in script.iter().enumerate() {
        let call = ToolCall {
            id: format!("call_{n}"),
            name: step.tool.to_owned(),
            arguments: step.arguments.to_string(),
        };
        let recorded = compactor.record(&call, &step.output, false)?;
        let Some(signals) = &recorded.signals else {
            continue;
        };
        // An output still verbatim holds its signals in its own spelling (`file(3,5)`).
        let verbatim = compacted.messages().iter().any(|m| {
            matches!(m, Message::ToolResult { call_id, content, .. } if *call_id == call.id && *content == step.output)
        });
        let output_keys = signals.keys();
        outputs_with_signals += usize::from(!output_keys.is_empty());
        for key in output_keys {
            keys += 1;
            if verbatim || final_prompt.contains(&key) {
                kept += 1;
            } else {
                missing.push(format!("{key} ({})", recorded.artifact));
            }
        }
    }
    let placeholders = compacted
        .messages()
        .iter()
        .filter(|m| matches!(m, Message::ToolResult { content, .. } if content.starts_with(MASK_PREFIX)))
        .count();
    step_times.sort();
    let median = step_times[step_times.len() / 2];
    let slowest = step_times[step_times.len() - 1];

    let steps = script.len();
    let mut out = String::new();
    let reads = script.iter().filter(|s| s.tool == "read_file").count();
    let tests = script.iter().filter(|s| s.tool == "run_tests").count();
    let output_tokens: usize = script.iter().map(|s| count(&s.output)).sum();
    writeln!(
        out,
        "A scripted {steps}-step session over this repository's sources: {reads} file reads \
         (each cycle of ten steps reads a file, edits it and reads it again), greps, {tests} \
         `cargo test` runs listing the workspace's {} real test names (three failing, fixed one \
         by one), a `cargo build` with errors, and the pytest, unittest, jest, vitest, go test \
         and tsc outputs of `server/src/compaction/fixtures/`; {output_tokens} tokens of tool \
         output in all. Peer: the same transcript without compaction, in the same run. \
         Compaction with the default settings (context window {}, threshold {}%, keep the \
         newest {}). Token counts are the o200k estimates the compactor uses.\n",
        script
            .iter()
            .find(|s| s.tool == "run_tests")
            .map_or(0, |s| s.output.matches("\ntest ").count()),
        settings.context_window,
        settings.threshold * 100 / settings.context_window,
        settings.keep_recent,
    )?;
    writeln!(
        out,
        "| | without compaction (peer) | with compaction | ratio |"
    )?;
    writeln!(out, "|---|---:|---:|---:|")?;
    let row = |out: &mut String, label: &str, peer: usize, ours: usize| {
        let _ = writeln!(
            out,
            "| {label} | {peer} | {ours} | {:.2} |",
            ours as f64 / peer.max(1) as f64
        );
    };
    row(&mut out, "total input tokens", peer.total(), ours.total());
    row(
        &mut out,
        "prompt tokens at the last step",
        *peer.tokens.last().unwrap_or(&0),
        *ours.tokens.last().unwrap_or(&0),
    );
    row(
        &mut out,
        "largest prompt",
        peer.tokens.iter().copied().max().unwrap_or(0),
        ours.tokens.iter().copied().max().unwrap_or(0),
    );
    row(
        &mut out,
        "input tokens not served by a prefix cache",
        peer.uncached(),
        ours.uncached(),
    );
    // Cached input is billed at a quarter of the price at gpt-4.1's list prices ($2 and
    // $0.50 per million), a tenth at Anthropic's (whose cache writes cost more).
    let billed = |track: &Track| track.uncached() + (track.total() - track.uncached()) / 4;
    row(
        &mut out,
        "billed input, cached tokens at a quarter (gpt-4.1 list prices)",
        billed(&peer),
        billed(&ours),
    );
    writeln!(
        out,
        "| bytes of each request repeating the previous one from its start | {:.1}% | {:.1}% | |",
        peer.prefix_share() * 100.0,
        ours.prefix_share() * 100.0
    )?;
    let ratio = ours.total() as f64 / peer.total().max(1) as f64;
    writeln!(
        out,
        "\nTarget: total input tokens at most half the peer's: {:.0}% ({}). Masking ran in \
         {batches} batches ({masked} outputs masked, {placeholders} placeholders in the final \
         prompt); {summaries_needed} step(s) reported that a summary was needed.\n",
        ratio * 100.0,
        if ratio <= 0.5 { "met" } else { "not met" }
    )?;
    writeln!(
        out,
        "Stable signals: {kept} of {keys} ({:.1}%; target 100%) failing test names and error \
         locations of the {outputs_with_signals} command outputs with signals are in the final \
         compacted prompt{}.\n",
        kept as f64 * 100.0 / keys.max(1) as f64,
        if missing.is_empty() {
            String::new()
        } else {
            format!("; missing: {}", missing.join(", "))
        }
    )?;
    writeln!(
        out,
        "Compactor overhead per step (`after_step`: recording, estimating, masking; debug \
         build): median {:.2} ms, slowest {:.1} ms.\n",
        median.as_secs_f64() * 1e3,
        slowest.as_secs_f64() * 1e3
    )?;
    writeln!(out, "Prompt tokens per step:\n")?;
    let marks: Vec<usize> = (1..=steps).filter(|s| s % 10 == 0 || *s == 1).collect();
    writeln!(
        out,
        "| step | {} |",
        marks
            .iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join(" | ")
    )?;
    writeln!(out, "|---|{}", "---:|".repeat(marks.len()))?;
    for (label, track) in [("without", &peer), ("with", &ours)] {
        writeln!(
            out,
            "| {label} | {} |",
            marks
                .iter()
                .map(|s| track.tokens[s - 1].to_string())
                .collect::<Vec<_>>()
                .join(" | ")
        )?;
    }
    if !missing.is_empty() {
        bail!("signals lost:\n{out}");
    }
    Ok(out)
}
