//! `dist`: the VS Code extension packaged as a `.vsix` (`@vscode/vsce`), in `target/dist/`.
//!
//! It runs on the `node` on `PATH` when that is as new as the extension's locked tools ask
//! (`crate::node`), else on the Node `cargo xtask e2e vscode --install` installed. The bundle
//! (`esbuild`) carries every runtime dependency, so the `.vsix` installs offline; this task
//! checks that the package holds the manifest and the bundle just built, and accepts the
//! VS Code the tests run (1.139).

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context as _, bail};

use crate::e2e::run_command_echoing;

/// The VS Code release the end-to-end test runs (code-server 4.139.1).
const TESTED_VSCODE: (u64, u64) = (1, 139);

/// Where the bundle sits in the `.vsix` (vsce puts the extension under `extension/`).
const BUNDLE_IN_VSIX: &str = "extension/dist/extension.js";
const MANIFEST_IN_VSIX: &str = "extension/package.json";

pub fn run() -> anyhow::Result<()> {
    let out_dir = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| crate::project_root().join("target"), Into::into)
        .join("dist");
    let out = package(&out_dir, true)?;
    println!("dist: {}", out.display());
    Ok(())
}

/// Installs the extension's locked dependencies, type-checks, bundles and packages it, checks
/// the package and copies it into `out_dir` as `wright-VERSION.vsix`, which it returns. The
/// tools' output is shown as they run when `echo`.
pub fn package(out_dir: &Path, echo: bool) -> anyhow::Result<PathBuf> {
    let node = crate::node::for_extension()?;
    if let Some((major, minor, patch)) = node.version
        && echo
    {
        println!(
            "dist: Node v{major}.{minor}.{patch}, {} ({})",
            node.label,
            node.node.display()
        );
    }
    let path = node.path()?;
    crate::e2e::vscode::prepare_extension(&path, echo)?;
    let dir = crate::project_root().join("editors/vscode");
    for script in ["build", "package"] {
        run_command_echoing(
            &format!("npm run {script} (editors/vscode)"),
            Command::new("npm")
                .args(["run", "--silent", script])
                .current_dir(&dir)
                .env("PATH", &path),
            echo,
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
    check_vsix(&packaged, &dir.join("dist/extension.js"))?;
    std::fs::create_dir_all(out_dir).with_context(|| format!("creating {}", out_dir.display()))?;
    let out = out_dir.join(format!("wright-{version}.vsix"));
    std::fs::copy(&packaged, &out).with_context(|| format!("writing {}", out.display()))?;
    Ok(out)
}

/// The `.vsix` (a zip) holds the manifest, and the bundle is the one just built (its CRC-32
/// in the zip's directory is the file's): an older bundle, or none, would install an
/// extension that is not this source.
fn check_vsix(vsix: &Path, bundle: &Path) -> anyhow::Result<()> {
    let file = std::fs::File::open(vsix).with_context(|| format!("opening {}", vsix.display()))?;
    let mut archive = zip::ZipArchive::new(file)
        .with_context(|| format!("reading {} as a zip", vsix.display()))?;
    if archive.by_name_raw(MANIFEST_IN_VSIX.as_bytes()).is_err() {
        bail!("{} lacks {MANIFEST_IN_VSIX}", vsix.display());
    }
    let packed_crc = archive
        .by_name_raw(BUNDLE_IN_VSIX.as_bytes())
        .with_context(|| format!("{} lacks the bundle {BUNDLE_IN_VSIX}", vsix.display()))?
        .crc32();
    let mut built = Vec::new();
    std::fs::File::open(bundle)
        .and_then(|mut file| file.read_to_end(&mut built))
        .with_context(|| format!("reading {}", bundle.display()))?;
    if crc32fast::hash(&built) != packed_crc {
        bail!(
            "{BUNDLE_IN_VSIX} in {} is not the bundle just built ({})",
            vsix.display(),
            bundle.display()
        );
    }
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
    use super::{BUNDLE_IN_VSIX, MANIFEST_IN_VSIX, caret_accepts};

    /// `cargo xtask dist` end to end, into a temporary folder: the package is a zip with the
    /// manifest and the bundle the build just wrote. It runs `npm ci` (seconds, from npm's
    /// cache); without a Node new enough it says so and passes, except under `CI`.
    #[test]
    fn dist_packages_the_manifest_and_the_freshly_built_bundle() {
        if let Err(err) = crate::node::for_extension() {
            assert!(std::env::var_os("CI").is_none(), "{err}");
            eprintln!("skipped: {err}");
            return;
        }
        let out = wright_tests::TempDir::new("dist");
        let vsix = super::package(out.path(), false).expect("cargo xtask dist");
        assert_eq!(vsix, out.path().join("wright-0.1.0.vsix"));
        let mut archive = zip::ZipArchive::new(std::fs::File::open(&vsix).unwrap()).unwrap();
        let names: Vec<String> = archive
            .file_names()
            .map(|name| name.unwrap().into_owned())
            .collect();
        assert!(
            names.iter().any(|name| name == MANIFEST_IN_VSIX),
            "{names:?}"
        );
        let bundle = crate::project_root().join("editors/vscode/dist/extension.js");
        let built = std::fs::read(&bundle).unwrap();
        let packed = archive
            .by_name_raw(BUNDLE_IN_VSIX.as_bytes())
            .expect("the bundle");
        assert_eq!(packed.size(), built.len() as u64);
        assert_eq!(packed.crc32(), crc32fast::hash(&built));
        // The manifest's entry point is that bundle.
        let manifest: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(crate::project_root().join("editors/vscode/package.json"))
                .unwrap(),
        )
        .unwrap();
        assert_eq!(
            manifest["main"]
                .as_str()
                .map(|main| main.trim_start_matches("./")),
            BUNDLE_IN_VSIX.strip_prefix("extension/")
        );
    }

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
