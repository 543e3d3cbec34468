//! The agent's commands in the sandbox: `run_command` and `run_tests` become isolated runs
//! through the process's pool — in the workspace itself for `wright exec`, in the session's
//! snapshot for the editor (the editor's unsaved buffers written into it before each command,
//! so commands see what the user sees). A run the sandbox refused (the network, a write
//! outside, a limit) is re-run with that one permission widened only when the user allows it.

pub use crate::config::values::NetworkPolicy;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use super::Cancel;
use super::tools::{CommandOutput, CommandRunner};
use crate::sandbox::escalation::{self, Widening};
use crate::sandbox::pool::PoolConfig;
use crate::sandbox::{
    ChangeKind, Filesystem, Limits, LocalBackend, Outcome, Pool, Request, SandboxError,
    SharedSnapshot,
};

/// How the refusal of a command that needed the user's approval and did not get it begins
/// (`wright stats` counts them by it).
pub const NOT_RUN: &str = "not run: ";

/// What the user answers when a command needs more than the sandbox allows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    Allow,
    /// For the rest of the session.
    AllowAlways,
    Deny,
}

impl NetworkPolicy {
    /// The configuration's policy (validated when read, so a bad value is the default).
    pub fn from_config(config: &crate::config::Config) -> Self {
        config
            .get("sandbox.network")
            .and_then(|value| value.parse().ok())
            .unwrap_or_default()
    }
}

/// Asks the user (the editor's approval prompt). Blocking.
pub trait Approver: Send + Sync {
    /// `kind` is `network`, `write`, `time`, `memory`, `processes`, `protected` or `fallback`.
    fn ask(&self, kind: &str, command: &str, reason: &str) -> Decision;
}

/// The sandbox pool of this process, started on first use (its zygotes and spare layers are
/// prepared once and serve every session).
pub fn pool(cache_dir: &Path) -> Result<Arc<Pool>, String> {
    static POOL: OnceLock<Result<Arc<Pool>, String>> = OnceLock::new();
    POOL.get_or_init(|| {
        let backend = LocalBackend::new().map_err(|err| format!("the sandbox: {err}"))?;
        let cores = std::thread::available_parallelism().map_or(2, usize::from);
        Ok(Pool::new(
            backend,
            PoolConfig {
                concurrency: cores * 2,
                warm_zygotes: 1,
                spare_snapshots: 1,
                snapshot_base: cache_dir.join("sandbox"),
            },
        ))
    })
    .clone()
}

/// The open buffers (and held proposals) to write into a snapshot: workspace-relative paths
/// and their texts.
pub type BufferTexts = Box<dyn Fn() -> Vec<(PathBuf, Vec<u8>)> + Send + Sync>;

pub struct SandboxRunner {
    pool: Arc<Pool>,
    root: PathBuf,
    runtime: tokio::runtime::Handle,
    /// The session's snapshot and what to write into it before each command; `None` runs in
    /// the workspace itself.
    snapshot: Option<(SharedSnapshot, BufferTexts)>,
    approver: Option<Arc<dyn Approver>>,
    /// Widenings the user allowed for the rest of the session.
    allowed: Mutex<Vec<Widening>>,
    /// Patterns of commands the configuration wants approved before they run
    /// (`agent.approve_commands`), and those the user allowed for the session.
    approve: Vec<String>,
    approved: Mutex<Vec<String>>,
    network: NetworkPolicy,
    /// The configuration's `sandbox.*` settings, applied to every request.
    settings: crate::sandbox::policy::SandboxSettings,
}

impl SandboxRunner {
    /// Commands in the workspace itself (headless runs: the disk is the working copy).
    pub fn in_place(pool: Arc<Pool>, root: &Path) -> Self {
        Self {
            pool,
            root: root.to_path_buf(),
            runtime: tokio::runtime::Handle::current(),
            snapshot: None,
            approver: None,
            allowed: Mutex::new(Vec::new()),
            approve: Vec::new(),
            approved: Mutex::new(Vec::new()),
            network: NetworkPolicy::Ask,
            settings: Default::default(),
        }
    }

    /// What the configuration says of commands: `agent.approve_commands`, the `sandbox.*`
    /// settings and the network policy — every front end's sessions run under the same.
    pub fn configured(self, config: &crate::config::Config) -> Self {
        self.requiring_approval(approval_patterns(config))
            .with_settings(crate::sandbox::policy::settings(config))
            .with_network(NetworkPolicy::from_config(config))
    }

    /// The configuration's `sandbox.*` settings (protected and hidden paths, the disk and
    /// /tmp bounds, the landlock tier's consent).
    pub fn with_settings(mut self, settings: crate::sandbox::policy::SandboxSettings) -> Self {
        if settings.fallback == crate::config::Fallback::Landlock {
            self.pool.backend().allow_fallback(true);
        }
        self.settings = settings;
        self
    }

    /// Commands run with the network (`Allow`), without it (`Deny`), or without it unless
    /// the user allows it for a command the sandbox refused a connection (`Ask`).
    pub fn with_network(mut self, policy: NetworkPolicy) -> Self {
        self.network = policy;
        self
    }

    /// Commands matching one of `patterns` (`*` stands for any text) run only once the user
    /// allowed them; with no one to ask, they do not run.
    pub fn requiring_approval(mut self, patterns: Vec<String>) -> Self {
        self.approve = patterns;
        self
    }

    /// `Err` (why it does not run) when `command` needs an approval it did not get.
    fn approved(&self, command: &str) -> Result<(), String> {
        let Some(pattern) = self
            .approve
            .iter()
            .find(|pattern| wildcard_match(pattern, command.trim()))
        else {
            return Ok(());
        };
        let approved = self.approved.lock().unwrap_or_else(|e| e.into_inner());
        if approved.contains(pattern) {
            return Ok(());
        }
        drop(approved);
        let reason =
            format!("the configuration asks for approval of commands matching `{pattern}`");
        let Some(approver) = &self.approver else {
            return Err(format!(
                "{NOT_RUN}{reason}, and this session cannot ask the user"
            ));
        };
        match approver.ask("command", command, &reason) {
            Decision::Deny => Err(format!("{NOT_RUN}{reason}, and the user did not allow it")),
            Decision::Allow => Ok(()),
            Decision::AllowAlways => {
                self.approved
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(pattern.clone());
                Ok(())
            }
        }
    }

    /// Commands in `snapshot`, which receives `buffers` before each of them.
    pub fn in_snapshot(mut self, snapshot: SharedSnapshot, buffers: BufferTexts) -> Self {
        self.snapshot = Some((snapshot, buffers));
        self
    }

    pub fn with_approver(mut self, approver: Arc<dyn Approver>) -> Self {
        self.approver = Some(approver);
        self
    }

    fn execute(&self, command: &str, request: &Request) -> Result<Outcome, String> {
        match self.runtime.block_on(self.pool.run(request.clone())) {
            Ok(outcome) => Ok(outcome),
            // Namespaces are refused here: the weaker tier runs only if the user says so.
            Err(SandboxError::NoNamespaces(why)) => {
                let reason = format!(
                    "the sandbox cannot make its namespaces here ({why}); the landlock tier \
                     keeps writes to the workspace, the network off, host sockets and \
                     credential stores out of reach, but has no private /tmp, no pid \
                     namespace and no snapshot"
                );
                let decision = self.approver.as_ref().map_or(Decision::Deny, |approver| {
                    approver.ask("fallback", command, &reason)
                });
                if decision == Decision::Deny {
                    return Err(format!("{NOT_RUN}{reason}, and the user did not allow it"));
                }
                self.pool.backend().allow_fallback(true);
                self.runtime
                    .block_on(self.pool.run(request.clone()))
                    .map_err(|err| err.to_string())
            }
            Err(err) => Err(err.to_string()),
        }
    }
}

impl CommandRunner for SandboxRunner {
    fn run(
        &self,
        command: &str,
        timeout: Duration,
        cancel: &Cancel,
    ) -> Result<CommandOutput, String> {
        self.approved(command)?;
        let filesystem = match &self.snapshot {
            Some((snapshot, _)) => {
                self.write_buffers(&mut snapshot.lock().unwrap_or_else(|e| e.into_inner()))?;
                Filesystem::Snapshot(Arc::clone(snapshot))
            }
            None => Filesystem::InPlace,
        };
        self.run_in(command, timeout, cancel, filesystem)
    }

    /// In a snapshot of its own, which goes back to the pool after the command: the
    /// workspace (and the session's snapshot) never see its writes.
    fn run_discarding(
        &self,
        command: &str,
        timeout: Duration,
        cancel: &Cancel,
    ) -> Result<CommandOutput, String> {
        self.approved(command)?;
        let mut snapshot = self
            .pool
            .new_snapshot(&self.root)
            .map_err(|err| format!("making a throw-away snapshot: {err}"))?;
        self.write_buffers(&mut snapshot)?;
        let shared = Arc::new(Mutex::new(snapshot));
        let ran = self.run_in(
            command,
            timeout,
            cancel,
            Filesystem::Snapshot(Arc::clone(&shared)),
        );
        if let Ok(snapshot) = Arc::try_unwrap(shared) {
            self.pool
                .recycle(snapshot.into_inner().unwrap_or_else(|e| e.into_inner()));
        }
        ran
    }
}

impl SandboxRunner {
    /// Writes the open buffers (and held proposals) into `snapshot`, for a session that has
    /// them.
    fn write_buffers(&self, snapshot: &mut crate::sandbox::Snapshot) -> Result<(), String> {
        let Some((_, buffers)) = &self.snapshot else {
            return Ok(());
        };
        snapshot
            .write_buffers(&buffers())
            .map_err(|err| format!("writing the editor's buffers into the snapshot: {err}"))
    }

    /// Runs an approved `command` on `filesystem`, asking the user for more when the sandbox
    /// refused what it needed.
    fn run_in(
        &self,
        command: &str,
        timeout: Duration,
        cancel: &Cancel,
        filesystem: Filesystem,
    ) -> Result<CommandOutput, String> {
        let mut request = Request {
            argv: vec!["sh".into(), "-c".into(), command.into()],
            workspace: self.root.clone(),
            filesystem,
            limits: Limits {
                timeout,
                ..Limits::default()
            },
            cancel: Some(cancel.flag()),
            ..Request::default()
        };
        crate::sandbox::policy::apply(&self.settings, &mut request);
        for widening in self
            .allowed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
        {
            escalation::widen(&mut request, widening);
        }
        if self.network == NetworkPolicy::Allow {
            escalation::widen(&mut request, &Widening::AllowNetwork);
        }
        let mut outcome = self.execute(command, &request)?;
        let mut note = None;
        if let Some(refusal) = escalation::classify(&request, &outcome)
            && !outcome.cancelled
        {
            let reason = refusal.explain();
            note = Some(match (refusal.widening(), &self.approver) {
                (Some(Widening::AllowNetwork), _) if self.network == NetworkPolicy::Deny => {
                    format!(
                        "{reason}; the configuration keeps the network off (sandbox.network = deny)"
                    )
                }
                (Some(widening), Some(approver)) => {
                    match approver.ask(kind(&widening), command, &reason) {
                        Decision::Deny => format!("{reason}; the user did not allow more"),
                        decision => {
                            if decision == Decision::AllowAlways {
                                self.allowed
                                    .lock()
                                    .unwrap_or_else(|e| e.into_inner())
                                    .push(widening.clone());
                            }
                            escalation::widen(&mut request, &widening);
                            outcome = self.execute(command, &request)?;
                            format!(
                                "{reason}; run again with {} as the user allowed",
                                what(&widening)
                            )
                        }
                    }
                }
                (Some(widening), None) => format!(
                    "{reason}; {} needs the user's approval, which this session cannot ask for",
                    what(&widening)
                ),
                (None, _) => reason,
            });
        }
        Ok(output(&outcome, note))
    }
}

/// The patterns of `agent.approve_commands`.
pub fn approval_patterns(config: &crate::config::Config) -> Vec<String> {
    config
        .get("agent.approve_commands")
        .unwrap_or_default()
        .split(';')
        .map(str::trim)
        .filter(|pattern| !pattern.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Whether `text` matches `pattern`, in which `*` stands for any text (none included).
fn wildcard_match(pattern: &str, text: &str) -> bool {
    let mut parts = pattern.trim().split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    for (i, part) in parts.iter().enumerate() {
        if i == parts.len() - 1 {
            return rest.ends_with(part);
        }
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.is_empty()
}

fn kind(widening: &Widening) -> &'static str {
    match widening {
        Widening::AllowNetwork => "network",
        Widening::Writable(_) => "write",
        Widening::DoubleTimeout => "time",
        Widening::DoubleMemory => "memory",
        Widening::DoubleProcesses => "processes",
        Widening::Unprotect(_) => "protected",
    }
}

fn what(widening: &Widening) -> String {
    match widening {
        Widening::AllowNetwork => "the network".to_owned(),
        Widening::Writable(path) => format!("{} writable", path.display()),
        Widening::DoubleTimeout => "twice the time".to_owned(),
        Widening::DoubleMemory => "twice the memory".to_owned(),
        Widening::DoubleProcesses => "twice the processes".to_owned(),
        Widening::Unprotect(path) => format!("{} writable", path.display()),
    }
}

/// Changes without a diff past this many in one top folder are counted, not listed: a
/// build's output (`target/`, `node_modules/`) would fill the model's context with names.
const LISTED_PER_FOLDER: usize = 10;

/// The lines the model reads of what a command changed: every change with a diff (text the
/// agent may turn into edits), and the others listed up to [`LISTED_PER_FOLDER`] per top
/// folder, the rest of that folder counted in one line.
fn change_lines(changes: &[crate::sandbox::Change]) -> Vec<String> {
    let folder = |change: &crate::sandbox::Change| {
        let mut parts = change.path.components();
        let first = parts.next();
        // A file at the top is its own folder: never counted with others.
        parts
            .next()
            .and(first)
            .map(|first| first.as_os_str().to_owned())
    };
    let mut without_diff: std::collections::HashMap<std::ffi::OsString, usize> =
        std::collections::HashMap::new();
    for change in changes.iter().filter(|change| change.diff.is_none()) {
        if let Some(folder) = folder(change) {
            *without_diff.entry(folder).or_default() += 1;
        }
    }
    let mut listed: std::collections::HashMap<std::ffi::OsString, usize> =
        std::collections::HashMap::new();
    let mut lines = Vec::new();
    for change in changes {
        if change.diff.is_none()
            && let Some(folder) = folder(change)
        {
            let total = without_diff[&folder];
            let shown = listed.entry(folder.clone()).or_default();
            if total > LISTED_PER_FOLDER && *shown >= LISTED_PER_FOLDER {
                if *shown == LISTED_PER_FOLDER {
                    lines.push(format!(
                        "… and {} more under {}/ (not listed)",
                        total - LISTED_PER_FOLDER,
                        folder.to_string_lossy()
                    ));
                    *shown += 1;
                }
                continue;
            }
            *shown += 1;
        }
        let kind = match change.kind {
            ChangeKind::Added => "added",
            ChangeKind::Modified => "modified",
            ChangeKind::Deleted => "deleted",
        };
        let mut line = format!("{kind} {}", change.path.display());
        if let Some(note) = &change.note {
            line.push_str(&format!(" ({note})"));
        }
        if let Some(diff) = &change.diff {
            line.push('\n');
            line.push_str(diff);
        }
        lines.push(line);
    }
    lines
}

fn output(outcome: &Outcome, note: Option<String>) -> CommandOutput {
    let changes = change_lines(&outcome.changes);
    CommandOutput {
        exit_code: outcome.signal.is_none().then_some(outcome.exit_code),
        timed_out: outcome.timed_out,
        stdout: outcome.stdout.text(),
        stderr: outcome.stderr.text(),
        truncated: outcome.truncated(),
        duration_ms: outcome.duration.as_millis() as u64,
        note,
        changes,
    }
}

#[cfg(test)]
mod tests {
    use super::wildcard_match;

    #[test]
    fn many_new_files_of_a_build_are_counted_per_folder_and_every_diff_is_listed() {
        use crate::sandbox::{Change, ChangeKind};
        let change = |path: &str, diff: Option<&str>| Change {
            path: path.into(),
            kind: if diff.is_some() {
                ChangeKind::Modified
            } else {
                ChangeKind::Added
            },
            diff: diff.map(str::to_owned),
            note: None,
        };
        let mut changes: Vec<Change> = (0..300)
            .map(|n| change(&format!("target/debug/deps/lib{n}.rlib"), None))
            .collect();
        changes.push(change("src/lib.rs", Some("@@ -1 +1 @@\n-a\n+b")));
        changes.extend((0..3).map(|n| change(&format!("src/new{n}.rs"), None)));
        changes.push(change("Cargo.lock", None));
        let lines = super::change_lines(&changes);
        assert_eq!(lines.len(), 10 + 1 + 1 + 3 + 1, "{lines:#?}");
        assert_eq!(lines[10], "… and 290 more under target/ (not listed)");
        assert!(lines.contains(&"modified src/lib.rs\n@@ -1 +1 @@\n-a\n+b".to_owned()));
        assert!(lines.contains(&"added src/new2.rs".to_owned()));
        assert!(lines.contains(&"added Cargo.lock".to_owned()));
    }

    #[test]
    fn approval_patterns_match_with_stars() {
        assert!(wildcard_match("git push*", "git push origin main"));
        assert!(wildcard_match("git push*", "git push"));
        assert!(!wildcard_match("git push*", "git status"));
        assert!(wildcard_match("rm -rf *", "rm -rf target"));
        assert!(wildcard_match("*deploy*", "make deploy-prod"));
        assert!(wildcard_match("make", "make"));
        assert!(!wildcard_match("make", "make test"));
        assert!(!wildcard_match("*.sh", "run.sh now"));
    }
}
