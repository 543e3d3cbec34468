//! `dist`: the VS Code extension packaged as a `.vsix` (`@vscode/vsce`), in `target/dist/`.
//!
//! The bundle (`esbuild`) carries every runtime dependency, so the `.vsix` installs offline;
//! this task checks that it holds the bundle and accepts the VS Code the tests run (1.139).

use std::process::Command;

use anyhow::{Context as _, bail};

use crate::e2e::run_command;

/// The VS Code release the end-to-end test runs (code-server 4.139.1).
const TESTED_VSCODE: (u64, u64) = (1, 139);

pub fn run() -> anyhow::Result<()> {
    let tools = crate::e2e::vscode::Tools::new();
    crate::e2e::vscode::prepare_extension(&tools)?;
    let dir = crate::project_root().join("editors/vscode");
    let path = tools.path()?;
    for script in ["build", "package"] {
        run_command(
            &format!("npm run {script} (editors/vscode)"),
            Command::new("npm")
                .args(["run", "--silent", script])
                .current_dir(&dir)
                .env("PATH", &path),
        )?;
    }
    let manifest: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("package.json")).context("reading package.json")?,
    )
    .context("parsing package.json")?;
    let engine = manifest["engines"]["vscode"].as_str().unwrap_or_default();
    if !caret_accepts(engine, TESTED_VSCODE) {
        bail!(
            "engines.vscode {engine:?} does not accept VS Code {}.{}",
            TESTED_VSCODE.0,
            TESTED_VSCODE.1
        );
    }
    let version = manifest["version"]
        .as_str()
        .context("package.json has no version")?;
    let packaged = dir.join("dist/wright.vsix");
    // A zip names its members uncompressed in its headers.
    let bytes =
        std::fs::read(&packaged).with_context(|| format!("reading {}", packaged.display()))?;
    let bundle = b"extension/dist/extension.js";
    if !bytes.windows(bundle.len()).any(|window| window == bundle) {
        bail!(
            "{} lacks the bundle extension/dist/extension.js",
            packaged.display()
        );
    }
    let out_dir = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| crate::project_root().join("target"), Into::into)
        .join("dist");
    std::fs::create_dir_all(&out_dir).with_context(|| format!("creating {}", out_dir.display()))?;
    let out = out_dir.join(format!("wright-{version}.vsix"));
    std::fs::copy(&packaged, &out).with_context(|| format!("writing {}", out.display()))?;
    println!("dist: {}", out.display());
    Ok(())
}

/// Whether a `^MAJOR.MINOR.PATCH` range accepts `MAJOR.MINOR` (the only form used here).
fn caret_accepts(range: &str, (major, minor): (u64, u64)) -> bool {
    let Some(version) = range.strip_prefix('^') else {
        return false;
    };
    let mut parts = version.split('.').map(str::parse::<u64>);
    match (parts.next(), parts.next()) {
        (Some(Ok(want_major)), Some(Ok(want_minor))) => want_major == major && want_minor <= minor,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::caret_accepts;

    #[test]
    fn the_engine_range_is_read_as_vsce_reads_a_caret() {
        assert!(caret_accepts("^1.138.0", (1, 139)));
        assert!(caret_accepts("^1.139.0", (1, 139)));
        assert!(!caret_accepts("^1.140.0", (1, 139)));
        assert!(!caret_accepts("^2.0.0", (1, 139)));
        assert!(!caret_accepts("1.139.0", (1, 139)));
    }

    #[test]
    fn the_extension_accepts_the_tested_vscode() {
        let manifest: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(crate::project_root().join("editors/vscode/package.json"))
                .unwrap(),
        )
        .unwrap();
        let engine = manifest["engines"]["vscode"].as_str().unwrap();
        assert!(caret_accepts(engine, super::TESTED_VSCODE), "{engine}");
    }
}
