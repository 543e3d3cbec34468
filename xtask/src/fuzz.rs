//! `cargo xtask fuzz [--seconds N] [TARGET…]`: runs each cargo-fuzz target of `server/fuzz/`
//! (every edit-format parser, and parse-plan-apply on `auto`) for a bounded time.
//!
//! Inputs start from the seeds committed in `server/fuzz/seeds/` (the Codex scenarios'
//! patches and a few edits in each other format). Needs `cargo install cargo-fuzz`. libFuzzer's instrumentation flags are nightly-only, so on
//! a stable toolchain the run sets `RUSTC_BOOTSTRAP=1` and uses no sanitizer (the engine is
//! safe Rust: a panic is what the fuzzer looks for).

use std::process::Command;

use anyhow::{Context, bail};

const TARGETS: [&str; 5] = ["patch", "search_replace", "udiff", "json", "auto_apply"];

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
    for target in targets {
        println!("fuzz: {target} for {seconds} s");
        let status = Command::new("cargo")
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
            .status()
            .with_context(|| format!("running cargo fuzz run {target}"))?;
        if !status.success() {
            bail!(
                "fuzz target {target} failed ({status}); the crashing input is under server/fuzz/artifacts/{target}/"
            );
        }
    }
    Ok(())
}

/// The seed folders of `server/fuzz/seeds/` for a target.
fn seeds(fuzz_dir: &std::path::Path, target: &str) -> Vec<std::path::PathBuf> {
    let seeds = fuzz_dir.join("seeds");
    match target {
        "auto_apply" => ["patch", "search_replace", "udiff", "json"]
            .iter()
            .map(|format| seeds.join(format))
            .collect(),
        format => vec![seeds.join(format)],
    }
}
