//! Where the MCP peers the tests use are installed (`cargo xtask e2e mcp --install`, pinned in
//! `tests/mcp/`): the npm packages under `target/editors/mcp-node` (servers, the TypeScript
//! SDK, the conformance suite) with the Node that runs them, and the PyPI `mcp` package in the
//! venv `target/editors/mcp-venv`. Without them a test says it is skipped, except under `CI`,
//! where a missing install fails it.

use std::path::PathBuf;

use crate::installed::{available, current};
pub use crate::installed::{editors, repository};

const PINS: &str = "tests/mcp";
const INSTALL: &str = "cargo xtask e2e mcp --install";

/// The installed npm packages (their `node_modules` is beneath).
pub fn node_dir() -> PathBuf {
    editors().join("mcp-node")
}

/// The venv holding PyPI's `mcp`.
pub fn venv() -> PathBuf {
    editors().join("mcp-venv")
}

/// Whether the npm packages are installed at the pinned versions; outside CI a missing
/// install skips the test, saying so.
pub fn npm_available() -> bool {
    available(
        current(
            PINS,
            "package-lock.json",
            &node_dir().join("package-lock.json"),
        ) && node_dir().join("wright-node").is_file(),
        "the MCP test npm packages are",
        INSTALL,
    )
}

/// Whether the Python SDK is installed at the pinned version (see `npm_available`).
pub fn python_available() -> bool {
    available(
        current(
            PINS,
            "requirements.txt",
            &venv().join("wright-requirements.txt"),
        ),
        "the MCP test PyPI packages are",
        INSTALL,
    )
}

/// The Node the install chose (22 or later: the conformance suite needs it).
pub fn node() -> PathBuf {
    let recorded = std::fs::read_to_string(node_dir().join("wright-node"))
        .expect("the install records its Node in mcp-node/wright-node");
    PathBuf::from(recorded.trim())
}

/// An installed package's program, `node_modules/.bin/NAME` (a script Node runs).
pub fn bin(name: &str) -> PathBuf {
    node_dir().join("node_modules/.bin").join(name)
}

/// The venv's Python.
pub fn python() -> PathBuf {
    venv().join("bin/python")
}
