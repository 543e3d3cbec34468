//! The sandbox: the only place wright spawns processes. Every command runs isolated — its own
//! user, mount, pid, network, ipc and uts namespaces; the root file system read-only, the
//! workspace (or a snapshot of it) writable, a private /tmp; landlock and seccomp as second
//! walls; an allow-listed environment; wall time, CPU, memory, process and file-size limits;
//! output captured with a cap.
//!
//! `Backend` is the seam for where sandboxes run; `LocalBackend` runs them on this machine
//! through a re-executed zygote that forks a helper per run (`helper.rs`), or starts one
//! attached (`attached.rs`: a long-lived server on pipes, ended by dropping its handle),
//! `Pool` schedules runs and prepares their resources ahead, `Snapshot` is a session's layer
//! (an overlay, or a reflink copy), `escalation` recognises what the sandbox refused, and
//! `probe` tells `wright doctor` which primitives this machine has.

mod attached;
mod capture;
mod cgroup;
mod diff;
mod env;
pub mod escalation;
mod helper;
pub mod host;
mod landlock_rules;
mod local;
pub mod policy;
pub mod pool;
pub mod probe;
mod seccomp;
mod snapshot;
mod spec;
mod supervisor;

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub use attached::{Attached, AttachedHandle};
pub use capture::{Captured, DEFAULT_CAP};
pub use cgroup::Support as CgroupSupport;
pub use env::looks_secret;
pub use helper::main as helper_main;
pub use local::{LocalBackend, Prepared, fresh_snapshot_dir, snapshot_base};
pub use pool::Pool;
pub use snapshot::{Change, ChangeKind, Scan, Snapshot, SnapshotKind, remove_tree};
pub use spec::HELPER_SUBCOMMAND;

/// A session's snapshot, shared by the runs that use it one at a time.
pub type SharedSnapshot = Arc<Mutex<Snapshot>>;

/// Where a command's writes to the workspace go.
#[derive(Clone, Debug, Default)]
pub enum Filesystem {
    /// Into the workspace itself.
    #[default]
    InPlace,
    /// Into the snapshot's upper layer; the workspace on disk is untouched.
    Snapshot(SharedSnapshot),
    /// Nowhere: the workspace is read-only; only `Permissions::extra_writable` (absolute
    /// paths, inside the workspace or not) and the private /tmp are writable. What a
    /// sandboxed server gets.
    ReadOnly,
}

/// Which variables a run gets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Environment {
    /// A command's: the allow-listed variables of wright's environment, then `Request::env`,
    /// credential-like names dropped from both.
    #[default]
    AllowList,
    /// Only PATH, HOME and LANG of wright's environment, then `Request::env` as given,
    /// credential-like names included (the user named them for this run: a server's
    /// configured `env`); wright's own keys never reach the run. What a sandboxed server gets.
    Exact,
}

/// What a command may reach over the network.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Network {
    /// A network namespace of its own and only Unix sockets: nothing to connect to.
    #[default]
    Off,
    /// Its own network namespace, with IP sockets on its own loopback only (for test suites
    /// that start local servers); the host is unreachable.
    Loopback,
    /// The host's network.
    Host,
}

impl Network {
    pub fn name(self) -> &'static str {
        match self {
            Self::Off => "none",
            Self::Loopback => "loopback",
            Self::Host => "host",
        }
    }
}

/// What a command may do beyond the defaults; widened only after the user approves.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Permissions {
    pub network: Network,
    /// Trees outside the workspace the command may write.
    pub extra_writable: Vec<PathBuf>,
}

/// Resource limits of one run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Wall time; past it the whole process tree is killed (exit status 124).
    pub timeout: Duration,
    pub memory_bytes: u64,
    pub processes: u64,
    /// CPU seconds per process; `None` means as many as the wall time.
    pub cpu_seconds: Option<u64>,
    pub file_size_bytes: u64,
    /// Bytes kept of stdout and of stderr each (head and tail).
    pub output_cap: usize,
    /// What a snapshot run may write to its layer, /tmp and /dev/shm together (in place,
    /// writes to the workspace itself are not bounded).
    pub disk_bytes: u64,
    /// The size of the private /tmp (and of /dev/shm).
    pub tmp_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(300),
            memory_bytes: 4 << 30,
            processes: 512,
            cpu_seconds: None,
            file_size_bytes: 1 << 30,
            output_cap: DEFAULT_CAP,
            disk_bytes: 4096 << 20,
            tmp_bytes: 1024 << 20,
        }
    }
}

impl Limits {
    pub fn cpu_seconds(&self) -> u64 {
        self.cpu_seconds
            .unwrap_or_else(|| self.timeout.as_secs().max(1))
    }
}

/// One command to run.
#[derive(Clone, Debug, Default)]
pub struct Request {
    pub argv: Vec<String>,
    /// The workspace root.
    pub workspace: PathBuf,
    /// The working folder, relative to the workspace (default: its root).
    pub cwd: Option<PathBuf>,
    pub filesystem: Filesystem,
    pub permissions: Permissions,
    pub limits: Limits,
    /// Variables to set besides the ones from wright's environment `environment` lets
    /// through (credential-like names are dropped unless `environment` is `Exact`).
    pub env: Vec<(String, String)>,
    pub environment: Environment,
    /// Set to cancel the run; the whole tree is killed.
    pub cancel: Option<Arc<AtomicBool>>,
    /// Workspace-relative paths read-only to the command in place, besides `.git` and
    /// `.wright` (`sandbox.protected`).
    pub protected: Vec<PathBuf>,
    /// Paths unreadable to the command besides the credential stores (`sandbox.deny_read`).
    pub deny_read: Vec<PathBuf>,
    /// Protected paths the user allowed this run to write (an approved escalation).
    pub unprotected: Vec<PathBuf>,
    /// Trees of the host's /tmp the command must still see, read-only, through its private
    /// /tmp (its own program installed there); absolute. See [`host_tmp_tree`].
    pub readable: Vec<PathBuf>,
}

/// The tree of the host's /tmp that holds `path` (`/tmp/NAME` for `/tmp/NAME/…`): what a
/// command needs in [`Request::readable`] to see `path`, which its private /tmp covers.
/// `None` for a path elsewhere, which the command sees already.
pub fn host_tmp_tree(path: &Path) -> Option<PathBuf> {
    let rest = path.strip_prefix(spec::PRIVATE_TMP).ok()?;
    let first = rest.components().next()?;
    matches!(first, std::path::Component::Normal(_))
        .then(|| Path::new(spec::PRIVATE_TMP).join(first))
}

/// A limit the run hit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exceeded {
    WallTime,
    CpuTime,
    Memory,
    Processes,
    FileSize,
    Output,
    /// What a run wrote to its snapshot layer, /tmp and /dev/shm (`sandbox.disk_mb`).
    Disk,
}

impl Exceeded {
    pub fn name(self) -> &'static str {
        match self {
            Self::WallTime => "timeout",
            Self::CpuTime => "cpu",
            Self::Memory => "memory",
            Self::Processes => "processes",
            Self::FileSize => "file_size",
            Self::Output => "output",
            Self::Disk => "disk",
        }
    }
}

/// How a run was isolated, as reported to users and the agent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Isolation {
    /// `none` (a namespace with only loopback) or `host`.
    pub network: String,
    /// `overlay` (writes land in the snapshot) or `in-place`.
    pub filesystem: String,
    /// `namespace`.
    pub pid: String,
    /// Which mechanisms held the limits.
    pub limits_enforced_by: String,
    pub landlock: String,
    pub seccomp: String,
}

/// What a run did.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// The command's exit status; 128+N when killed by signal N; 124 on timeout.
    pub exit_code: i32,
    pub signal: Option<i32>,
    pub timed_out: bool,
    pub cancelled: bool,
    pub stdout: Captured,
    pub stderr: Captured,
    pub duration: Duration,
    pub cpu: Duration,
    pub max_rss_kb: u64,
    /// Files the command changed (snapshot runs only).
    pub changes: Vec<Change>,
    pub exceeded: Vec<Exceeded>,
    pub isolation: Isolation,
    pub limits: Limits,
}

impl Outcome {
    pub fn truncated(&self) -> bool {
        self.stdout.truncated() || self.stderr.truncated()
    }
}

/// Why a run could not happen (a command that ran and failed is an `Outcome`, not this).
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("starting the sandbox's zygote: {0}")]
    Spawn(std::io::Error),
    #[error("preparing the sandbox: {0}")]
    Prepare(std::io::Error),
    #[error("the sandbox could not be set up ({stage}): {error}")]
    Setup { stage: String, error: String },
    #[error("overlayfs cannot be mounted here ({0}); the next snapshot will be a reflink copy")]
    OverlayUnavailable(String),
    #[error("the sandbox helper broke its protocol: {0}")]
    Protocol(String),
    /// Namespaces are refused here and the user has not allowed the landlock tier.
    #[error(
        "the sandbox cannot isolate commands here: {0}. `wright doctor` says more; \
         sandbox.fallback = \"landlock\" allows a weaker tier (no private /tmp, no pid \
         namespace, no snapshot), with your consent only"
    )]
    NoNamespaces(String),
    /// The landlock tier cannot give what the run asked for.
    #[error("the landlock tier cannot {0}")]
    TierCannot(&'static str),
    /// An attached run asked for what only a run to completion can have.
    #[error("an attached run cannot {0}")]
    AttachedCannot(&'static str),
}

/// Where sandboxes run: this machine today; a cluster could be another implementation.
pub trait Backend: Send + Sync {
    fn name(&self) -> &'static str;
    /// Runs one command to completion (blocking).
    fn run(&self, request: &Request) -> Result<Outcome, SandboxError>;
}
