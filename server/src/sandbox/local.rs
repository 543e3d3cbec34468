//! The Linux backend's runner: spawns the helper (`wright __sandbox-exec`), hands it the
//! specification, captures the command's output with a cap while it runs, and assembles the
//! outcome from the helper's reports. The helper does the isolating; this side only prepares
//! what needs the host's view (the run's cgroup, the snapshot's folders) and reads.

use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStderr, ChildStdin, ChildStdout, Stdio};
use std::sync::Mutex;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::Snapshot;
use super::capture::Captured;
use super::cgroup::{RunGroup, Support};
use super::spec::{HELPER_SUBCOMMAND, HelperSpec, OVERLAY_STAGE, Report, Rlimits, STATUS_FD};
use super::{
    Backend, Exceeded, Filesystem, Isolation, Limits, Network, Outcome, Request, SandboxError, env,
};

/// How long past the wall time the runner waits for the helper before killing it itself.
const GRACE: Duration = Duration::from_secs(10);

/// Runs commands on this machine with namespaces, landlock, seccomp, cgroups and rlimits.
pub struct LocalBackend {
    helper: PathBuf,
    cgroups: Support,
    host_env: Vec<(String, String)>,
    /// Why snapshots cannot be overlays here, once a mount failed (or copies were asked for).
    overlay_unavailable: Mutex<Option<String>>,
}

/// A helper started ahead, in its cgroup, waiting for its specification.
pub struct Prepared {
    helper: Helper,
    group: Option<RunGroup>,
}

impl Prepared {
    /// The helper's process id.
    pub fn pid(&self) -> u32 {
        self.helper.child.id()
    }
}

/// A helper process started ahead of its command, waiting for its specification.
struct Helper {
    child: Child,
    /// The specification goes in here; closing it asks the helper to kill the command.
    stdin: Option<ChildStdin>,
    stdout: ChildStdout,
    stderr: ChildStderr,
    status: std::fs::File,
}

impl LocalBackend {
    /// A backend whose helper is this very executable (the `wright` binary).
    pub fn new() -> io::Result<Self> {
        Ok(Self::with_helper(std::env::current_exe()?))
    }

    /// A backend whose helper is the `wright` binary at `helper` (for other executables that
    /// link the library, such as benchmarks).
    pub fn with_helper(helper: PathBuf) -> Self {
        Self {
            helper,
            cgroups: Support::detect(),
            host_env: std::env::vars().collect(),
            overlay_unavailable: Mutex::new(None),
        }
    }

    /// Makes snapshots reflink copies instead of overlays (for workspaces an overlay cannot
    /// serve, such as files owned by another user, which overlayfs in a user namespace cannot
    /// copy up).
    pub fn prefer_copies(&mut self) {
        self.overlay_unavailable = Mutex::new(Some("copies were asked for".to_owned()));
    }

    /// A snapshot of `workspace` in the new folder `dir`: an overlay unless one already failed
    /// to mount here (not probed ahead: trying costs nothing, probing a fork and a mount), else
    /// a reflink copy, else an error saying why neither is possible (the caller may then run
    /// in place, with the user's consent). A run whose overlay fails to mount returns
    /// [`SandboxError::OverlayUnavailable`]; the next snapshot is then a copy.
    pub fn snapshot(&self, dir: PathBuf, workspace: &Path) -> io::Result<Snapshot> {
        let workspace = std::fs::canonicalize(workspace)?;
        let unavailable = self
            .overlay_unavailable
            .lock()
            .map_or_else(|_| Some("a poisoned lock".to_owned()), |why| why.clone());
        match unavailable {
            None => Snapshot::create(dir, &workspace),
            Some(why) => Snapshot::create_copy(dir, &workspace).map_err(|err| {
                io::Error::new(
                    err.kind(),
                    format!("no snapshot is possible: overlayfs: {why}; reflink copy: {err}"),
                )
            }),
        }
    }

    pub fn cgroups(&self) -> &Support {
        &self.cgroups
    }

    /// Starts a helper; it waits, idle, until given a specification.
    fn spawn_helper(&self) -> io::Result<Helper> {
        let mut fds = [0; 2];
        // SAFETY: a valid two-element array.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: pipe2 returned two fresh descriptors we now own.
        let (read_end, write_end) =
            unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        let status_write = write_end.as_raw_fd();
        let mut command = std::process::Command::new(&self.helper);
        command
            .arg(HELPER_SUBCOMMAND)
            // The helper needs nothing from the server's environment; the command's own
            // environment travels, filtered, in the specification.
            .env_clear()
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            command.pre_exec(move || {
                if status_write == STATUS_FD {
                    if libc::fcntl(STATUS_FD, libc::F_SETFD, 0) < 0 {
                        return Err(io::Error::last_os_error());
                    }
                } else if libc::dup2(status_write, STATUS_FD) < 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut child = command.spawn()?;
        drop(write_end);
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(io::Error::other("the helper's pipes are missing"));
        };
        Ok(Helper {
            child,
            stdin: Some(stdin),
            stdout,
            stderr,
            status: std::fs::File::from(read_end),
        })
    }

    /// Starts a helper and puts it in a fresh cgroup. Moving a process between cgroups is the
    /// slowest step of a start on cgroup v1 (milliseconds: the kernel waits for an RCU grace
    /// period), which is why the pool does this ahead, off the command's path. The group's
    /// limits are set from the request just before the run.
    pub fn prepare(&self) -> Result<Prepared, SandboxError> {
        let helper = self.spawn_helper().map_err(SandboxError::Spawn)?;
        let defaults = Limits::default();
        let group = self
            .cgroups
            .create(defaults.memory_bytes, defaults.processes)
            .map_err(SandboxError::Prepare)?;
        // Assembled first, so a failure below drops the helper before its group.
        let prepared = Prepared { helper, group };
        if let Some(group) = &prepared.group {
            group.add(prepared.pid()).map_err(SandboxError::Prepare)?;
        }
        Ok(prepared)
    }

    /// Runs `request` in a prepared helper.
    pub fn run_prepared(
        &self,
        prepared: Prepared,
        request: &Request,
    ) -> Result<Outcome, SandboxError> {
        // Kept whole so that every return drops the helper (killed and reaped) before its
        // group (which can only be removed once empty): fields drop in declaration order.
        let mut prepared = prepared;
        if let Some(group) = &mut prepared.group {
            group
                .set_limits(request.limits.memory_bytes, request.limits.processes)
                .map_err(SandboxError::Prepare)?;
        }
        let started = Instant::now();
        let workspace = std::fs::canonicalize(&request.workspace).map_err(SandboxError::Prepare)?;
        let relative_cwd = request.cwd.as_deref().unwrap_or(Path::new(""));
        if !relative_cwd
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)))
        {
            return Err(SandboxError::Prepare(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "the working folder {} is not inside the workspace",
                    relative_cwd.display()
                ),
            )));
        }
        let cwd = workspace.join(relative_cwd);
        let snapshot_guard = match &request.filesystem {
            Filesystem::InPlace => None,
            Filesystem::Snapshot(shared) => Some(
                shared
                    .lock()
                    .map_err(|_| SandboxError::Prepare(io::Error::other("a poisoned snapshot")))?,
            ),
        };
        if let Some(snapshot) = &snapshot_guard
            && snapshot.workspace() != workspace
        {
            return Err(SandboxError::Prepare(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the snapshot belongs to another workspace",
            )));
        }
        let before = snapshot_guard.as_ref().map(|s| s.scan());
        let limits = &request.limits;
        let cgroup_used = prepared.group.is_some();
        let memory_by_cgroup = cgroup_used && self.cgroups.limits_memory();
        let spec = HelperSpec {
            argv: request.argv.clone(),
            env: env::build(self.host_env.iter().cloned(), &request.env),
            workspace: workspace.clone(),
            extra_writable: request.permissions.extra_writable.clone(),
            cwd,
            layer: snapshot_guard.as_ref().map(|s| s.layer()),
            network: request.permissions.network,
            timeout_ms: limits.timeout.as_millis() as u64,
            rlimits: Rlimits {
                cpu_seconds: limits.cpu_seconds(),
                file_size_bytes: limits.file_size_bytes,
                processes: limits.processes,
                address_space_bytes: (!memory_by_cgroup).then_some(limits.memory_bytes),
            },
        };
        let json = serde_json::to_vec(&spec).map_err(|e| SandboxError::Prepare(e.into()))?;
        let mut line = (json.len() as u64).to_le_bytes().to_vec();
        line.extend_from_slice(&json);
        prepared
            .helper
            .stdin
            .as_mut()
            .ok_or_else(|| SandboxError::Protocol("the helper was already used".to_owned()))?
            .write_all(&line)
            .map_err(SandboxError::Spawn)?;

        let reading = read_all(&mut prepared.helper, request, started);
        let wait = prepared.helper.child.wait();
        let after = snapshot_guard.as_ref().map(|s| s.scan());
        let (stdout, stderr, reports) = reading.map_err(SandboxError::Spawn)?;
        wait.map_err(SandboxError::Spawn)?;

        let mut wait_status = None;
        let mut finished = None;
        let mut landlock = "not applied".to_owned();
        for report in reports {
            match report {
                Report::SetupFailed { stage, error } => {
                    if stage == OVERLAY_STAGE {
                        if let Ok(mut why) = self.overlay_unavailable.lock() {
                            *why = Some(error.clone());
                        }
                        return Err(SandboxError::OverlayUnavailable(error));
                    }
                    return Err(SandboxError::Setup { stage, error });
                }
                Report::Landlock { status } => landlock = status,
                Report::Command { wait_status: s } => wait_status = Some(s),
                Report::Finished { .. } => finished = Some(report),
            }
        }
        let Some(Report::Finished {
            timed_out,
            cancelled,
            cpu_ms,
            max_rss_kb,
        }) = finished
        else {
            return Err(SandboxError::Protocol(
                "the helper ended without its final report".to_owned(),
            ));
        };
        let (exit_code, signal) = match wait_status {
            _ if timed_out => (124, None),
            Some(status) if libc::WIFEXITED(status) => (libc::WEXITSTATUS(status), None),
            Some(status) if libc::WIFSIGNALED(status) => {
                (128 + libc::WTERMSIG(status), Some(libc::WTERMSIG(status)))
            }
            // Cancelled before the command reported.
            _ => (137, Some(libc::SIGKILL)),
        };
        let mut exceeded = Vec::new();
        if timed_out {
            exceeded.push(Exceeded::WallTime);
        }
        if let Some(group) = &prepared.group {
            if group.memory_exceeded() {
                exceeded.push(Exceeded::Memory);
            }
            if group.processes_exceeded() {
                exceeded.push(Exceeded::Processes);
            }
        }
        match signal {
            Some(libc::SIGXCPU) => exceeded.push(Exceeded::CpuTime),
            Some(libc::SIGKILL) if cpu_ms / 1000 >= limits.cpu_seconds() => {
                exceeded.push(Exceeded::CpuTime)
            }
            Some(libc::SIGXFSZ) => exceeded.push(Exceeded::FileSize),
            _ => {}
        }
        if stdout.truncated() || stderr.truncated() {
            exceeded.push(Exceeded::Output);
        }
        let changes = match (&snapshot_guard, before, after) {
            (Some(snapshot), Some(before), Some(after)) => snapshot.changes(&before, &after),
            _ => Vec::new(),
        };
        let isolation = Isolation {
            network: request.permissions.network.name().to_owned(),
            filesystem: snapshot_guard
                .as_ref()
                .map_or("in-place", |s| s.kind().name())
                .to_owned(),
            pid: "namespace".to_owned(),
            limits_enforced_by: if cgroup_used {
                format!("{} + rlimits", self.cgroups.describe())
            } else {
                "rlimits".to_owned()
            },
            landlock,
            seccomp: if request.permissions.network == Network::Off {
                "dangerous calls and non-Unix sockets refused".to_owned()
            } else {
                "dangerous calls refused".to_owned()
            },
        };
        Ok(Outcome {
            exit_code,
            signal,
            timed_out,
            cancelled,
            stdout,
            stderr,
            duration: started.elapsed(),
            cpu: Duration::from_millis(cpu_ms),
            max_rss_kb,
            changes,
            exceeded,
            isolation,
            limits: request.limits.clone(),
        })
    }
}

impl Backend for LocalBackend {
    fn name(&self) -> &'static str {
        "linux-local"
    }

    fn run(&self, request: &Request) -> Result<Outcome, SandboxError> {
        let prepared = self.prepare()?;
        self.run_prepared(prepared, request)
    }
}

type Reading = (Captured, Captured, Vec<Report>);

/// Reads stdout, stderr and the status pipe until all three close, enforcing cancellation
/// (by closing the helper's stdin) and a last-resort deadline (by killing the helper, whose
/// death takes the namespace down).
fn read_all(helper: &mut Helper, request: &Request, started: Instant) -> io::Result<Reading> {
    let cap = request.limits.output_cap;
    let mut out = Captured::new(cap);
    let mut err = Captured::new(cap);
    let mut status = Vec::new();
    let deadline = started + request.limits.timeout + GRACE;
    let mut open = [true; 3];
    let mut buf = vec![0u8; 64 * 1024];
    while open.iter().any(|o| *o) {
        let cancelled = request
            .cancel
            .as_ref()
            .is_some_and(|flag| flag.load(Ordering::Relaxed));
        if cancelled {
            // The helper reads end of file on its control channel and kills the tree.
            helper.stdin = None;
        }
        if Instant::now() > deadline {
            let _ = helper.child.kill();
        }
        let raw = [
            helper.stdout.as_raw_fd(),
            helper.stderr.as_raw_fd(),
            helper.status.as_raw_fd(),
        ];
        let mut fds: Vec<libc::pollfd> = raw
            .iter()
            .zip(open)
            .map(|(&fd, is_open)| libc::pollfd {
                fd: if is_open { fd } else { -1 },
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        // SAFETY: a valid array of pollfd.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), 3, 100) };
        if n < 0 {
            let error = io::Error::last_os_error();
            if error.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(error);
        }
        for (index, pollfd) in fds.iter().enumerate() {
            if !open[index] || pollfd.revents == 0 {
                continue;
            }
            let read = match index {
                0 => helper.stdout.read(&mut buf),
                1 => helper.stderr.read(&mut buf),
                _ => helper.status.read(&mut buf),
            };
            match read {
                Ok(0) => open[index] = false,
                Ok(n) => match index {
                    0 => out.push(&buf[..n]),
                    1 => err.push(&buf[..n]),
                    _ => status.extend_from_slice(&buf[..n]),
                },
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
    let reports = status
        .split(|b| *b == b'\n')
        .filter(|line| !line.is_empty())
        .filter_map(|line| serde_json::from_slice(line).ok())
        .collect();
    Ok((out, err, reports))
}

/// Where throw-away snapshots go: beside the user's cache, never inside a workspace.
pub(crate) fn snapshot_base(env: &dyn Fn(&str) -> Option<String>) -> PathBuf {
    crate::config::cache_dir(env).join("sandbox")
}

/// A fresh, uniquely named snapshot folder path under `base`.
pub(crate) fn fresh_snapshot_dir(base: &Path) -> PathBuf {
    use std::sync::atomic::AtomicU64;
    static NEXT: AtomicU64 = AtomicU64::new(0);
    base.join(format!(
        "snap-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ))
}

impl Drop for Helper {
    /// An idle helper reads end of file and exits; a used one was already waited for.
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
