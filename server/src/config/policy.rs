//! Typed views of the policy keys for the code that enforces them (the sandbox, the edit
//! tools), so none of it parses configuration text itself.

use std::path::{Component, Path, PathBuf};

use super::Config;
use super::schema::items;

/// What runs where user namespaces are refused (`sandbox.fallback`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Fallback {
    /// Commands do not run: no weaker tier without the user's consent.
    #[default]
    Off,
    /// The tier without namespaces (landlock and seccomp), which promises less.
    Landlock,
}

impl std::str::FromStr for Fallback {
    type Err = String;

    fn from_str(value: &str) -> Result<Self, String> {
        match value {
            "off" => Ok(Self::Off),
            "landlock" => Ok(Self::Landlock),
            other => Err(format!("expected off or landlock, found {other:?}")),
        }
    }
}

/// The folders the agent may never write in place, whatever the configuration says: a write
/// there runs later, outside any sandbox (git hooks, wright's own configuration).
pub const ALWAYS_PROTECTED: &[&str] = &[".git", ".wright"];

/// The sandbox's policy keys, combined from the user's layers and the workspace files (a
/// workspace file can only have tightened them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SandboxSettings {
    /// Workspace-relative paths read-only to the agent's commands and edit tools:
    /// [`ALWAYS_PROTECTED`] first, then `sandbox.protected`, normalised (no `.`, no trailing
    /// `/`; never absolute, never `..`: refused when read).
    pub protected: Vec<PathBuf>,
    /// Absolute paths unreadable inside the sandbox besides the built-in credential stores
    /// (`sandbox.deny_read`; a leading `~` is the home the caller gave).
    pub deny_read: Vec<PathBuf>,
    /// MiB one run may write to its snapshot layer and /tmp together (`sandbox.disk_mb`).
    pub disk_mb: u64,
    /// The size of the private /tmp in MiB (`sandbox.tmp_mb`).
    pub tmp_mb: u64,
    /// `sandbox.fallback`.
    pub fallback: Fallback,
}

impl Default for SandboxSettings {
    /// What an empty configuration gives.
    fn default() -> Self {
        Self {
            protected: ALWAYS_PROTECTED.iter().map(PathBuf::from).collect(),
            deny_read: Vec::new(),
            disk_mb: DEFAULT_DISK_MB,
            tmp_mb: DEFAULT_TMP_MB,
            fallback: Fallback::Off,
        }
    }
}

/// `sandbox.disk_mb` and `sandbox.tmp_mb` when unset.
const DEFAULT_DISK_MB: u64 = 4096;
const DEFAULT_TMP_MB: u64 = 1024;

impl Config {
    /// The items of a list key (`agent.approve_commands`, `sandbox.protected`, …); none when
    /// it is unset.
    pub fn list(&self, key: &str) -> Vec<&str> {
        self.get(key)
            .map(|value| items(value).collect())
            .unwrap_or_default()
    }

    /// The sandbox's settings; `home` expands a leading `~` of `sandbox.deny_read` (the
    /// caller knows the user's home, from `HOME` or the password database).
    pub fn sandbox_settings(&self, home: &Path) -> SandboxSettings {
        let mut protected: Vec<PathBuf> = ALWAYS_PROTECTED.iter().map(PathBuf::from).collect();
        for item in self.list("sandbox.protected") {
            let path = workspace_relative(item);
            if !protected.contains(&path) {
                protected.push(path);
            }
        }
        let deny_read = self
            .list("sandbox.deny_read")
            .into_iter()
            .map(|item| match item.strip_prefix('~') {
                Some("") => home.to_path_buf(),
                Some(rest) => home.join(rest.trim_start_matches('/')),
                None => PathBuf::from(item),
            })
            .collect();
        let number = |key: &str, default: u64| self.get_u64(key).unwrap_or(default);
        SandboxSettings {
            protected,
            deny_read,
            disk_mb: number("sandbox.disk_mb", DEFAULT_DISK_MB),
            tmp_mb: number("sandbox.tmp_mb", DEFAULT_TMP_MB),
            fallback: self
                .get("sandbox.fallback")
                .and_then(|value| value.parse().ok())
                .unwrap_or_default(),
        }
    }
}

/// `./docs/adr/` → `docs/adr`: the path's normal components only.
pub(super) fn workspace_relative(item: &str) -> PathBuf {
    Path::new(item)
        .components()
        .filter(|c| matches!(c, Component::Normal(_)))
        .collect()
}
