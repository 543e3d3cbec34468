//! `cargo xtask fuzz [--seconds N] [TARGET…]`: runs each cargo-fuzz target of `server/fuzz/`
//! (every edit-format parser, parse-plan-apply on `auto`, the LSP `Content-Length` framing,
//! position conversion in the three encodings, the test-output parsers) for a bounded time,
//! and records each target's executions in `docs/benchmarks.md`.
//!
//! Inputs start from the seeds committed in `server/fuzz/seeds/` (the Codex scenarios'
//! patches, a few edits in each other format, framed and broken JSON-RPC streams, texts of
//! CRLF, emoji and CJK, and the outputs of each test runner). Needs `cargo install cargo-fuzz`. libFuzzer's instrumentation flags are nightly-only, so on
//! a stable toolchain the run sets `RUSTC_BOOTSTRAP=1` and uses no sanitizer (the engine is
//! safe Rust: a panic is what the fuzzer looks for).

use std::process::Command;

use anyhow::{Context, bail};

const TARGETS: [&str; 8] = [
    "patch",
    "search_replace",
    "udiff",
    "json",
    "auto_apply",
    "framing",
    "positions",
    "signals",
];

pub fn run(args: &[String]) -> anyhow::Result<()> {
    let mut seconds = 60;
    let mut targets = Vec::new();
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "--seconds" => {
                seconds = args.get(i + 1).context("--seconds N")?.parse()?;
                i += 1;
            }
            name if TARGETS.contains(&name) => targets.push(name),
            other => bail!(
                "unknown argument {other:?}; targets are {}",
                TARGETS.join(", ")
            ),
        }
        i += 1;
    }
    if targets.is_empty() {
        targets = TARGETS.to_vec();
    }
    let installed = Command::new("cargo").args(["fuzz", "--version"]).output();
    if !installed.is_ok_and(|out| out.status.success()) {
        bail!("cargo-fuzz is not installed: run `cargo install cargo-fuzz`");
    }
    let fuzz_dir = crate::project_root().join("server/fuzz");
    for target in &targets {
        std::fs::create_dir_all(fuzz_dir.join("corpus").join(target))?;
    }
    // Instrumented builds kept apart from normal ones: under CARGO_TARGET_DIR/fuzz if set.
    let target_dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(|dir| std::path::PathBuf::from(dir).join("fuzz"))
        .unwrap_or_else(|| fuzz_dir.join("target"));
    let command = format!("cargo xtask fuzz {}", args.join(" "));
    let mut rows = Vec::new();
    for target in targets {
        println!("fuzz: {target} for {seconds} s");
        let output = Command::new("cargo")
            .current_dir(&fuzz_dir)
            .env("RUSTC_BOOTSTRAP", "1")
            .env_remove("CARGO_TARGET_DIR")
            .args(["fuzz", "run", "--sanitizer", "none", "--target-dir"])
            .arg(&target_dir)
            .arg(target)
            // The working corpus first (new inputs go there), then the committed seeds: every
            // seed for the target that reads any format.
            .arg(fuzz_dir.join("corpus").join(target))
            .args(seeds(&fuzz_dir, target))
            .arg("--")
            .arg(format!("-max_total_time={seconds}"))
            .stdout(std::process::Stdio::inherit())
            .output()
            .with_context(|| format!("running cargo fuzz run {target}"))?;
        let log = String::from_utf8_lossy(&output.stderr);
        eprint!("{log}");
        if !output.status.success() {
            bail!(
                "fuzz target {target} failed ({}); the crashing input is under server/fuzz/artifacts/{target}/",
                output.status
            );
        }
        let (runs, ran_for) = done_line(&log)
            .with_context(|| format!("{target}: libFuzzer printed no `Done N runs` line"))?;
        rows.push(format!(
            "| {target} | {} | {runs} | {ran_for} s | {} |",
            seeds(&fuzz_dir, target)
                .iter()
                .map(|dir| std::fs::read_dir(dir).map_or(0, Iterator::count))
                .sum::<usize>(),
            runs / ran_for.max(1),
        ));
    }
    let body = format!(
        "libFuzzer through cargo-fuzz, no sanitizer (the code is safe Rust: a panic or a failed \
         property assertion is the crash looked for), debug assertions on, one process per \
         target, starting from the committed seeds. No target crashed.\n\n\
         | target | seeds | executions without a crash | time | executions/s |\n\
         |---|---:|---:|---:|---:|\n{}\n",
        rows.join("\n")
    );
    crate::bench::record("fuzz", &command, &body)
}

/// libFuzzer's closing `Done 123456 runs in 60 second(s)`: the runs and the seconds.
fn done_line(log: &str) -> Option<(u64, u64)> {
    let line = log.lines().rev().find(|line| line.starts_with("Done "))?;
    let mut words = line.split_whitespace();
    let runs = words.nth(1)?.parse().ok()?;
    let seconds = words.nth(2)?.parse().ok()?;
    Some((runs, seconds))
}

/// The seed folders of `server/fuzz/seeds/` for a target.
fn seeds(fuzz_dir: &std::path::Path, target: &str) -> Vec<std::path::PathBuf> {
    let seeds = fuzz_dir.join("seeds");
    match target {
        "auto_apply" => ["patch", "search_replace", "udiff", "json"]
            .iter()
            .map(|format| seeds.join(format))
            .collect(),
        other => vec![seeds.join(other)],
    }
}
