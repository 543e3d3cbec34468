//! Where the MCP peers the tests use are installed (`cargo xtask e2e mcp --install`, pinned in
//! `tests/mcp/`): the npm packages under `target/editors/mcp-node` (servers, the TypeScript
//! SDK, the conformance suite) with the Node that runs them, and the PyPI `mcp` package in the
//! venv `target/editors/mcp-venv`. Without them a test says it is skipped, except under `CI`,
//! where a missing install fails it.

use std::path::{Path, PathBuf};

/// The repository this crate is in.
pub fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ is inside the repository")
        .to_path_buf()
}

/// `<target>/editors`.
pub fn editors() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| repository().join("target"), PathBuf::from)
        .join("editors")
}

/// The installed npm packages (their `node_modules` is beneath).
pub fn node_dir() -> PathBuf {
    editors().join("mcp-node")
}

/// The venv holding PyPI's `mcp`.
pub fn venv() -> PathBuf {
    editors().join("mcp-venv")
}

fn current(pin: &str, copy: &Path) -> bool {
    let wanted = std::fs::read(repository().join("tests/mcp").join(pin)).expect("the pin file");
    std::fs::read(copy).is_ok_and(|have| have == wanted)
}

/// Whether the npm packages are installed at the pinned versions; outside CI a missing
/// install skips the test, saying so.
pub fn npm_available() -> bool {
    available(
        current("package-lock.json", &node_dir().join("package-lock.json"))
            && node_dir().join("wright-node").is_file(),
        "npm packages",
    )
}

/// Whether the Python SDK is installed at the pinned version (see `npm_available`).
pub fn python_available() -> bool {
    available(
        current("requirements.txt", &venv().join("wright-requirements.txt")),
        "PyPI packages",
    )
}

fn available(installed: bool, what: &str) -> bool {
    if installed {
        return true;
    }
    let message = format!(
        "the MCP test {what} are not installed (or not at the pinned versions) under {}: run \
         `cargo xtask e2e mcp --install`",
        editors().display()
    );
    assert!(
        std::env::var_os("CI").is_none(),
        "{message} (CI must install them first)"
    );
    eprintln!("skipped: {message}");
    false
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
