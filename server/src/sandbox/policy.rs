//! What a command may neither read nor change, whatever else it may: the paths the runner
//! hands the helper to hide (the user's credential stores, wright's own configuration, data
//! and cache, the user's runtime folder with its sockets, `sandbox.deny_read`) and, in
//! place, to make read-only (`.git`, `.wright`, `sandbox.protected`), which run code later,
//! outside the sandbox, or set wright's own policy.

use std::path::{Path, PathBuf};

use crate::files::Root;

/// Credential stores under the home folder, unreadable to commands by default.
pub const CREDENTIAL_STORES: &[&str] = &[
    ".ssh",
    ".aws",
    ".gnupg",
    ".config/gcloud",
    ".config/gh",
    ".kube",
    ".docker",
    ".netrc",
    ".git-credentials",
    ".npmrc",
    ".pypirc",
    ".local/share/keyrings",
];

pub use crate::config::{ALWAYS_PROTECTED, SandboxSettings};

/// The absolute paths to hide from a command, given the server's environment and the
/// configuration's `sandbox.deny_read` (absolute, or `~/…`). Paths that do not exist are
/// left out by the helper.
pub fn hidden_paths(env: &dyn Fn(&str) -> Option<String>, deny_read: &[PathBuf]) -> Vec<PathBuf> {
    let home = env("HOME")
        .filter(|home| Path::new(home).is_absolute())
        .map(PathBuf::from);
    let mut hidden = Vec::new();
    if let Some(home) = &home {
        hidden.extend(CREDENTIAL_STORES.iter().map(|store| home.join(store)));
        // `credentials` and `credentials.toml`, whichever the cargo version wrote.
        let cargo = env("CARGO_HOME")
            .filter(|dir| Path::new(dir).is_absolute())
            .map_or_else(|| home.join(".cargo"), PathBuf::from);
        hidden.push(cargo.join("credentials"));
        hidden.push(cargo.join("credentials.toml"));
    }
    // wright's own folders: the user's keys, other sessions' journals, layers and indexes.
    if let Some(config) = crate::config::user_file(env).and_then(|f| f.parent().map(Path::to_owned))
    {
        hidden.push(config);
    }
    hidden.extend(crate::config::data_dir(env));
    hidden.extend(crate::config::cache_dir(env));
    // The runtime folders hold the session's sockets (D-Bus, systemd, gpg-agent, the
    // desktop's): none is a command's to use.
    hidden.push(PathBuf::from("/run/user"));
    if let Some(runtime) = env("XDG_RUNTIME_DIR").filter(|dir| Path::new(dir).is_absolute()) {
        hidden.push(PathBuf::from(runtime));
    }
    for path in deny_read {
        let expanded = match (path.strip_prefix("~"), &home) {
            (Ok(rest), Some(home)) => home.join(rest),
            _ => path.clone(),
        };
        if expanded.is_absolute() {
            hidden.push(expanded);
        }
    }
    hidden.sort();
    hidden.dedup();
    hidden
}

/// The paths of `workspace` to make read-only in place: `.git`, `.wright` and `extra`
/// (workspace-relative), each as where it leads (a link inside protects its target; one
/// that leads out needs nothing, the outside is read-only already). An absent `.git` or
/// `.wright` gets an empty folder to stand in, so a command cannot create one either (git
/// ignores an empty `.git`); the [`Placeholders`] returned remove them once no run of this
/// process uses them any more.
/// `allowed` are the ones the user let this run write.
pub fn protected_paths(
    workspace: &Path,
    extra: &[PathBuf],
    allowed: &[PathBuf],
) -> (Vec<PathBuf>, Placeholders) {
    let mut placeholders = Placeholders {
        workspace: workspace.to_owned(),
        held: Vec::new(),
    };
    let Ok(root) = Root::open(workspace) else {
        return (Vec::new(), placeholders);
    };
    let mut protected = Vec::new();
    let mut held = HELD.lock().unwrap_or_else(|e| e.into_inner());
    let always = ALWAYS_PROTECTED.iter().map(|p| (PathBuf::from(p), true));
    for (relative, always) in always.chain(extra.iter().map(|p| (p.clone(), false))) {
        let Ok(relative) = root.relative(&relative) else {
            continue;
        };
        if relative.as_os_str().is_empty() || allowed.contains(&relative) {
            continue;
        }
        let absolute = root.join(&relative);
        match root.stat(&relative) {
            Ok(Some(_)) => {
                if let Some(count) = held.get_mut(&absolute) {
                    // A stand-in another run made: held by this one too.
                    *count += 1;
                    placeholders.held.push(absolute.clone());
                }
                if let Ok(resolved) = root.resolved(&relative) {
                    protected.push(root.join(&resolved));
                }
            }
            Ok(None) if always && root.create_dir_all(&relative).is_ok() => {
                held.insert(absolute.clone(), 1);
                placeholders.held.push(absolute.clone());
                protected.push(absolute);
            }
            _ => {}
        }
    }
    protected.sort();
    protected.dedup();
    (protected, placeholders)
}

/// The stand-in folders of this process's runs, with how many runs hold each.
static HELD: std::sync::Mutex<std::collections::BTreeMap<PathBuf, usize>> =
    std::sync::Mutex::new(std::collections::BTreeMap::new());

/// The stand-ins a run holds; dropped after the run, the last holder removes each (if still
/// empty: it was read-only to the command).
#[must_use]
pub struct Placeholders {
    workspace: PathBuf,
    held: Vec<PathBuf>,
}

impl Placeholders {
    /// Nothing held (a run in a snapshot).
    pub fn none() -> Self {
        Self {
            workspace: PathBuf::new(),
            held: Vec::new(),
        }
    }
}

impl Drop for Placeholders {
    fn drop(&mut self) {
        if self.held.is_empty() {
            return;
        }
        let mut held = HELD.lock().unwrap_or_else(|e| e.into_inner());
        let root = Root::open(&self.workspace).ok();
        for path in &self.held {
            let Some(count) = held.get_mut(path) else {
                continue;
            };
            *count -= 1;
            if *count == 0 {
                held.remove(path);
                if let (Some(root), Ok(relative)) = (&root, path.strip_prefix(&self.workspace)) {
                    let _ = root.remove_dir(relative);
                }
            }
        }
    }
}

/// Applies the configuration's `sandbox.*` settings to a request (its own protected and
/// hidden paths kept): the protected paths in place, the hidden ones, the disk and /tmp
/// bounds. The landlock tier's consent is the backend's ([`super::LocalBackend::allow_fallback`]).
pub fn apply(settings: &SandboxSettings, request: &mut super::Request) {
    for path in &settings.protected {
        if !request.protected.contains(path) {
            request.protected.push(path.clone());
        }
    }
    request.deny_read.extend(settings.deny_read.iter().cloned());
    request.limits.disk_bytes = settings.disk_mb << 20;
    request.limits.tmp_bytes = settings.tmp_mb << 20;
}

/// The settings of `config` for a run on this machine (`~` in `sandbox.deny_read` is the
/// server's `HOME`).
pub fn settings(config: &crate::config::Config) -> SandboxSettings {
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default();
    config.sandbox_settings(&home)
}
