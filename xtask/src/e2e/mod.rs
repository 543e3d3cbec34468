//! `e2e`: end-to-end tests in real editors, and the tools they need, installed from the package
//! registries under `target/editors/` (never into the system, apart from the Debian packages a
//! browser needs).

mod libraries;
mod nvim;
pub mod vscode;

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context as _, bail};

pub fn run(args: &[String]) -> anyhow::Result<()> {
    match args.first().map(String::as_str) {
        Some("acp") => libraries::run(&libraries::ACP, &args[1..]),
        Some("mcp") => libraries::run(&libraries::MCP, &args[1..]),
        Some("nvim") => nvim::run(&args[1..]),
        Some("vscode") => vscode::run(&args[1..]),
        _ => bail!(
            "usage: cargo xtask e2e acp [--install | --install-only] | \
             cargo xtask e2e mcp [--install | --install-only] | \
             cargo xtask e2e nvim [--install | --install-only] | \
             cargo xtask e2e vscode [--install] [--no-run]"
        ),
    }
}

/// Where the editors and their helpers are installed: `<target dir>/editors`.
pub fn editors_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| crate::project_root().join("target"), PathBuf::from)
        .join("editors")
}

/// Runs `command`, failing with `what` when it cannot start or exits unsuccessfully.
pub fn run_command(what: &str, command: &mut Command) -> anyhow::Result<()> {
    let status = command
        .status()
        .with_context(|| format!("{what}: starting {command:?}"))?;
    if !status.success() {
        bail!("{what} failed ({status})");
    }
    Ok(())
}

/// `run_command` when `echo`; otherwise the command's output is kept and shown only in the
/// error, so that a test calling a task keeps its own output readable.
pub fn run_command_echoing(what: &str, command: &mut Command, echo: bool) -> anyhow::Result<()> {
    if echo {
        return run_command(what, command);
    }
    let output = command
        .output()
        .with_context(|| format!("{what}: starting {command:?}"))?;
    if !output.status.success() {
        bail!(
            "{what} failed ({}):\n{}{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(())
}

/// `--install` (install what is missing, then test) or `--install-only`: whether to install,
/// and whether to run the tests, for `cargo xtask e2e NAME`.
pub fn install_flags(name: &str, args: &[String]) -> anyhow::Result<(bool, bool)> {
    let (mut install, mut test) = (false, true);
    for arg in args {
        match arg.as_str() {
            "--install" => install = true,
            "--install-only" => (install, test) = (true, false),
            other => {
                bail!(
                    "e2e {name}: unknown argument {other:?}; expected --install or --install-only"
                )
            }
        }
    }
    Ok((install, test))
}
