//! `e2e acp` and `e2e mcp`: install the protocol libraries and peers that `tests/tests/acp.rs`
//! and `tests/tests/mcp*.rs` drive wright with — npm packages (`tests/NAME/package.json` and its
//! lock, `npm ci` into `target/editors/NAME-node`) and PyPI packages
//! (`tests/NAME/requirements.txt`, into the venv `target/editors/NAME-venv`) — then run those
//! tests.
//!
//! Each install is current when its copy of the pin file equals the one in `tests/NAME/`
//! (written last, after a successful install, so an interrupted one is redone; the tests
//! compare the same files). `--install` installs what is missing, then tests;
//! `--install-only` only installs (what `.ci/run` does before its test command). Node is the
//! one on PATH (or `$WRIGHT_NODE`); the venv is made by `python3` (or `$PYTHON`). For MCP, the
//! conformance suite needs Node 22 or later: the Node chosen (fetched from npm when the
//! machine has none that new) is written to `target/editors/mcp-node/wright-node`, where the
//! tests read it.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, bail};

use super::{editors_dir, install_flags, run_command};

/// One protocol's test libraries.
pub struct Libraries {
    /// `acp` or `mcp`: the folder under `tests/`, the prefix under `target/editors/`.
    pub name: &'static str,
    /// What they are, for messages.
    pub what: &'static str,
    /// The test targets of `wright-tests` that use them.
    pub tests: &'static [&'static str],
    /// Whether the tests need a Node newer than the one on PATH may be (recorded in
    /// `NAME-node/wright-node`).
    pub record_node: bool,
}

pub const ACP: Libraries = Libraries {
    name: "acp",
    what: "the ACP client libraries",
    tests: &["acp"],
    record_node: false,
};

pub const MCP: Libraries = Libraries {
    name: "mcp",
    what: "the MCP servers, client SDK and conformance suite",
    tests: &["mcp_serve", "mcp_client", "mcp_servers"],
    record_node: true,
};

pub fn run(libraries: &Libraries, args: &[String]) -> anyhow::Result<()> {
    let name = libraries.name;
    let (install, test) = install_flags(name, args)?;
    let root = crate::project_root();
    let pins = root.join("tests").join(name);
    let node_dir = editors_dir().join(format!("{name}-node"));
    let venv = editors_dir().join(format!("{name}-venv"));
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
        bail!(
            "{} are not installed: run `cargo xtask e2e {name} --install`",
            libraries.what
        );
    }
    if node_current {
        println!(
            "e2e {name}: the npm packages are installed in {}",
            node_dir.display()
        );
    } else {
        install_node(name, &pins, &node_dir)?;
    }
    if libraries.record_node {
        record_node(&node_dir)?;
    }
    if python_current {
        println!(
            "e2e {name}: the PyPI packages are installed in {}",
            venv.display()
        );
    } else {
        install_python(name, &pins, &venv)?;
    }
    if !test {
        return Ok(());
    }
    let mut cargo = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cargo.args(["test", "-p", "wright-tests"]);
    for target in libraries.tests {
        cargo.args(["--test", target]);
    }
    run_command(&format!("the {name} tests"), cargo.current_dir(&root))
}

/// Writes the path of a Node that satisfies every package of the lock to `wright-node`
/// (fetching Node 24 from npm when none does).
fn record_node(dir: &Path) -> anyhow::Result<()> {
    let chosen = crate::node::for_lock(&dir.join("package-lock.json"))?;
    std::fs::write(
        dir.join("wright-node"),
        chosen.node.as_os_str().as_encoded_bytes(),
    )
    .context("recording the Node to use")
}

/// Whether `copy` holds what `pin` holds.
fn current(pin: &Path, copy: &Path) -> bool {
    match (std::fs::read(pin), std::fs::read(copy)) {
        (Ok(pin), Ok(copy)) => pin == copy,
        _ => false,
    }
}

fn install_node(name: &str, pins: &Path, dir: &Path) -> anyhow::Result<()> {
    println!(
        "e2e {name}: installing the npm packages into {} (npm ci)",
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

fn install_python(name: &str, pins: &Path, venv: &Path) -> anyhow::Result<()> {
    println!(
        "e2e {name}: installing the PyPI packages into {}",
        venv.display()
    );
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
