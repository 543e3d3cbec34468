//! `e2e acp`: installs the ACP client libraries that `tests/tests/acp.rs` drives `wright acp`
//! with — the TypeScript SDK from npm (`tests/acp/package.json` and its lock, `npm ci` into
//! `target/editors/acp-node`) and the Python SDK from PyPI (`tests/acp/requirements.txt`, into
//! the venv `target/editors/acp-venv`) — then runs those tests.
//!
//! Each install is current when its copy of the pin file equals the one in `tests/acp/`
//! (written last, after a successful install, so an interrupted one is redone; the tests
//! compare the same files). `--install` installs what is missing, then tests;
//! `--install-only` only installs (what `.ci/run` does before its test command). Node is the
//! one on PATH (or `$WRIGHT_NODE`); the venv is made by `python3` (or `$PYTHON`).

use std::path::Path;
use std::process::Command;

use anyhow::{Context, bail};

use super::{editors_dir, install_flags, run_command};

pub fn run(args: &[String]) -> anyhow::Result<()> {
    let (install, test) = install_flags("acp", args)?;
    let root = crate::project_root();
    let pins = root.join("tests/acp");
    let node_dir = editors_dir().join("acp-node");
    let venv = editors_dir().join("acp-venv");
    let node_current = current(
        &pins.join("package-lock.json"),
        &node_dir.join("package-lock.json"),
    );
    let python_current = current(
        &pins.join("requirements.txt"),
        &venv.join("wright-requirements.txt"),
    );
    let current = node_current && python_current;
    if !install && !current {
        bail!("the ACP client libraries are not installed: run `cargo xtask e2e acp --install`");
    }
    if node_current {
        println!(
            "e2e acp: the TypeScript SDK is installed in {}",
            node_dir.display()
        );
    } else {
        install_node(&pins, &node_dir)?;
    }
    if python_current {
        println!("e2e acp: the Python SDK is installed in {}", venv.display());
    } else {
        install_python(&pins, &venv)?;
    }
    if !test {
        return Ok(());
    }
    run_command(
        "the ACP tests",
        Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
            .args(["test", "-p", "wright-tests", "--test", "acp"])
            .current_dir(&root),
    )
}

/// Whether `copy` holds what `pin` holds.
fn current(pin: &Path, copy: &Path) -> bool {
    match (std::fs::read(pin), std::fs::read(copy)) {
        (Ok(pin), Ok(copy)) => pin == copy,
        _ => false,
    }
}

fn install_node(pins: &Path, dir: &Path) -> anyhow::Result<()> {
    println!(
        "e2e acp: installing the TypeScript SDK into {} (npm ci)",
        dir.display()
    );
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    // The lock is copied last: it is what marks the install as done.
    let _ = std::fs::remove_file(dir.join("package-lock.json"));
    std::fs::copy(pins.join("package.json"), dir.join("package.json"))
        .context("copying package.json")?;
    let lock = std::fs::read(pins.join("package-lock.json")).context("reading the lock")?;
    std::fs::write(dir.join("package-lock.json"), &lock).context("writing the lock")?;
    let npm = std::env::var_os("WRIGHT_NPM").unwrap_or_else(|| "npm".into());
    let installed = run_command(
        "npm ci",
        Command::new(npm)
            .args(["ci", "--no-audit", "--no-fund", "--ignore-scripts"])
            .current_dir(dir),
    );
    if installed.is_err() {
        let _ = std::fs::remove_file(dir.join("package-lock.json"));
    }
    installed
}

fn install_python(pins: &Path, venv: &Path) -> anyhow::Result<()> {
    println!("e2e acp: installing the Python SDK into {}", venv.display());
    let marker = venv.join("wright-requirements.txt");
    let _ = std::fs::remove_file(&marker);
    if !venv.join("bin/python").exists() {
        let python = std::env::var_os("PYTHON").unwrap_or_else(|| "python3".into());
        run_command(
            "creating the venv (on Debian, `apt-get install python3-venv`)",
            Command::new(python).args(["-m", "venv"]).arg(venv),
        )?;
    }
    run_command(
        "pip install",
        Command::new(venv.join("bin/pip"))
            .args([
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "--no-deps",
                "-r",
            ])
            .arg(pins.join("requirements.txt")),
    )?;
    std::fs::copy(pins.join("requirements.txt"), &marker).context("marking the install")?;
    Ok(())
}
