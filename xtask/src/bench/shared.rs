//! What the benches share: recording a section of `docs/benchmarks.md`, and building the
//! `wright` they measure.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, bail};

/// Replaces the section of `docs/benchmarks.md` between this bench's markers (appending it
/// the first time), stamped with the command and the date.
pub fn record(name: &str, command: &str, body: &str) -> anyhow::Result<()> {
    let path = crate::project_root().join("docs/benchmarks.md");
    let existing = std::fs::read_to_string(&path).unwrap_or_else(|_| {
        "# Benchmarks\n\nEach section is written by the command it names; figures are ratios against a \
         peer measured in the same run (absolute times drift on shared machines; ratios hold).\n"
            .to_owned()
    });
    let (open, close) = (
        format!("<!-- bench:{name} -->"),
        format!("<!-- /bench:{name} -->"),
    );
    let date = std::process::Command::new("date")
        .arg("-u")
        .arg("+%Y-%m-%d")
        .output()?;
    let section = format!(
        "{open}\n## {name}\n\n`{command}` ({}, {} cores)\n\n{body}\n{close}",
        String::from_utf8_lossy(&date.stdout).trim(),
        std::thread::available_parallelism().map_or(1, usize::from),
    );
    let updated = match (existing.find(&open), existing.find(&close)) {
        (Some(start), Some(end)) if start < end => {
            format!(
                "{}{section}{}",
                &existing[..start],
                &existing[end + close.len()..]
            )
        }
        _ => format!("{}\n{section}\n", existing.trim_end()),
    };
    std::fs::write(&path, updated)?;
    println!("recorded in {}", path.display());
    Ok(())
}

/// Builds the debug `wright` the end-to-end benches drive over stdio (the binary
/// `wright_tests::wright_bin` finds next to this task's).
pub fn build_wright_debug() -> anyhow::Result<()> {
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(["build", "--quiet", "-p", "wright"])
        .current_dir(crate::project_root())
        .status()
        .context("running cargo")?;
    if !status.success() {
        bail!("cargo build -p wright failed");
    }
    Ok(())
}

/// Builds `wright` and this task in release mode and runs the release build of the task, for
/// benches that time optimised code (the release build records its section itself).
pub fn hand_over_to_release(name: &str, args: &[String]) -> anyhow::Result<()> {
    eprintln!("bench {name}: building wright and xtask in release mode");
    let root = crate::project_root();
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(["build", "--release", "-p", "wright", "-p", "xtask"])
        .current_dir(&root)
        .status()
        .context("running cargo")?;
    if !status.success() {
        bail!("cargo build --release failed");
    }
    let exe = std::env::current_exe()?;
    let target = exe
        .parent()
        .and_then(Path::parent)
        .context("the xtask binary lives in target/debug")?;
    let status = Command::new(target.join("release/xtask"))
        .args(["bench", name])
        .args(args)
        .status()
        .context("running the release build of xtask")?;
    if !status.success() {
        bail!("the benchmark failed");
    }
    Ok(())
}
