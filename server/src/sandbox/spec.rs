//! What the runner tells the zygote (a length-prefixed JSON document and the run's five pipe
//! ends, on the zygote's socket) and what the helper reports back (JSON lines on the status
//! pipe, its fd 3): the only contract between the two halves of a run, which live in
//! different processes.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::Network;

/// The internal subcommand `wright` is re-executed with to become a zygote.
pub const HELPER_SUBCOMMAND: &str = "__sandbox-exec";

/// The setup stage whose failure means overlayfs cannot be used here.
pub(crate) const OVERLAY_STAGE: &str = "mounting the overlay snapshot";

/// Where the namespace tier mounts the run's private temporary folder, over the host's.
pub(crate) const PRIVATE_TMP: &str = "/tmp";

/// The file descriptor of the status pipe in the helper.
pub(crate) const STATUS_FD: i32 = 3;

/// Everything the helper needs to set up one isolated command.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct HelperSpec {
    pub argv: Vec<String>,
    pub env: Vec<(String, String)>,
    /// The workspace: the first writable tree (unless `workspace_writable` is false), and
    /// where the snapshot is mounted.
    pub workspace: PathBuf,
    /// Whether the command may write the workspace; when not, only `extra_writable` (which
    /// may lie inside it) and /tmp are writable.
    pub workspace_writable: bool,
    /// Further trees the command may write (granted by escalation), besides /tmp.
    pub extra_writable: Vec<PathBuf>,
    /// Trees of the host's /tmp attached read-only over the private one (`Request::readable`).
    pub extra_readable: Vec<PathBuf>,
    pub cwd: PathBuf,
    /// The snapshot layer the workspace is seen through; `None` runs in place.
    pub layer: Option<Layer>,
    pub network: Network,
    /// The wall time; `None` for a run that lasts until the runner ends it (an attached one).
    pub timeout_ms: Option<u64>,
    pub rlimits: Rlimits,
    /// Paths inside the workspace made read-only (in place: `.git`, `.wright`,
    /// `sandbox.protected`), absolute. Each exists (the runner makes placeholders).
    pub protected: Vec<PathBuf>,
    /// Paths covered with an empty read-only folder or file (credential stores, wright's own
    /// folders, the user's runtime folder), absolute; only those that exist.
    pub hidden: Vec<PathBuf>,
    /// What the run may write to its snapshot layer, /tmp and /dev/shm together.
    pub disk_bytes: Option<u64>,
    /// The size of the private /tmp (and of /dev/shm).
    pub tmp_bytes: u64,
    /// How the command is isolated.
    pub tier: Tier,
    /// The landlock tier's stand-in for a private /tmp: a fresh folder of the run's own
    /// under the host's temporary folder (its `TMPDIR`).
    pub private_tmp: Option<PathBuf>,
}

/// The isolation a run gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Tier {
    /// User, mount, pid, ipc, uts (and network) namespaces, landlock and seccomp.
    Namespaces,
    /// Where namespaces are refused, with the user's consent: landlock and seccomp only.
    Landlock,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Layer {
    /// An overlay: the workspace is the lower layer, writes go to `upper`.
    Overlay { upper: PathBuf, work: PathBuf },
    /// A reflink copy of the workspace, mounted in its place.
    Copy { tree: PathBuf },
}

/// Per-process limits set with setrlimit just before exec.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub(crate) struct Rlimits {
    /// `None`: unlimited (an attached run lives as long as its caller wants).
    pub cpu_seconds: Option<u64>,
    pub file_size_bytes: u64,
    pub processes: u64,
    /// Address space: only when no memory cgroup can hold the limit.
    pub address_space_bytes: Option<u64>,
}

/// One line on the status pipe.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Report {
    /// The helper for this run exists (its pid, for the runner's last-resort kill).
    Started { pid: u32 },
    /// The sandbox could not be set up; the command never ran.
    SetupFailed { stage: String, error: String },
    /// How far landlock could be enforced by this kernel.
    Landlock { status: String },
    /// The command's raw wait status, reported by the namespace's init.
    Command { wait_status: i32 },
    /// The run wrote more than its disk bound; everything in it was killed.
    DiskExceeded { bytes: u64 },
    /// Kernel resources the run's user namespace was bounded to (or why not).
    KernelLimits { status: String },
    /// The helper's last word: the whole tree is gone.
    Finished {
        timed_out: bool,
        cancelled: bool,
        cpu_ms: u64,
        max_rss_kb: u64,
    },
}
