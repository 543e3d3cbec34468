//! Where the repository and the peers the tests install live (`cargo xtask e2e … --install`
//! puts them under `<target>/editors`), and whether an install is at its pinned version:
//! without it a test says it is skipped, except under `CI`, where a missing install fails it.

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

/// Whether `copy` (what an install kept of its pin file) is the pin file `pins/pin` of the
/// repository, that is, the install is of exactly the pinned versions.
pub fn current(pins: &str, pin: &str, copy: &Path) -> bool {
    let wanted = std::fs::read(repository().join(pins).join(pin)).expect("the pin file");
    std::fs::read(copy).is_ok_and(|have| have == wanted)
}

/// `installed`, or (outside CI) false after saying that `what` is skipped and how to
/// install it; under CI a missing install fails the test.
pub fn available(installed: bool, what: &str, install: &str) -> bool {
    if installed {
        return true;
    }
    let message = format!(
        "{what} not installed (or not at the pinned versions) under {}: run `{install}`",
        editors().display()
    );
    assert!(
        std::env::var_os("CI").is_none(),
        "{message} (CI must install it first)"
    );
    eprintln!("skipped: {message}");
    false
}
