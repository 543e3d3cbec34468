//! The Linux backend's runner: starts a zygote (`wright __sandbox-exec`), sends it each run's
//! specification and pipes, captures the command's output with a cap while it runs, and
//! assembles the outcome from the helper's reports. The helper does the isolating; this side
//! only prepares what needs the host's view (the cgroup, the snapshot's folders) and reads.

// host paths: the sandbox's own folders in the user's cache, the cgroup and /proc; the workspace only as a path to mount.

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::Mutex;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::Snapshot;
use super::capture::Captured;
use super::cgroup::{RunGroup, Support};
use super::policy;
use super::spec::{HELPER_SUBCOMMAND, HelperSpec, OVERLAY_STAGE, Report, Rlimits, Tier};
use super::{
    Backend, Environment, Exceeded, Filesystem, Isolation, Limits, Network, Outcome, Request,
    SandboxError, env,
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
    /// Whether the user allowed the landlock tier where namespaces are refused
    /// (`sandbox.fallback = "landlock"`, or the editor's prompt).
    fallback: std::sync::atomic::AtomicBool,
}

/// A zygote started ahead, in its cgroup, waiting for requests. It serves one run at a time
/// and can serve many in turn (see `helper.rs`).
pub struct Prepared {
    // Declared first so it drops (its process killed and reaped) before the group, which can
    // only be removed once empty.
    pub(super) zygote: Zygote,
    pub(super) group: Option<RunGroup>,
}

impl Prepared {
    /// Sets the run's memory and process limits on the zygote's group (where there is one).
    pub(super) fn limit(&mut self, request: &Request) -> Result<(), SandboxError> {
        match &mut self.group {
            Some(group) => group
                .set_limits(request.limits.memory_bytes, request.limits.processes)
                .map_err(SandboxError::Prepare),
            None => Ok(()),
        }
    }

    /// The zygote's process id.
    pub fn pid(&self) -> u32 {
        self.zygote.child.id()
    }

    /// Whether the zygote can serve another run (a memory limit may have killed it).
    pub fn is_alive(&mut self) -> bool {
        matches!(self.zygote.child.try_wait(), Ok(None))
    }
}

/// The zygote process and the runner's end of its socket.
pub(super) struct Zygote {
    child: Child,
    pub(super) socket: UnixStream,
}

impl Drop for Zygote {
    /// Closing the socket lets the zygote reap its helpers and exit, so that none is left as
    /// a zombie for the host's init (which may never reap it) holding the cgroup; a zygote
    /// that does not exit soon (a run still going) is killed.
    fn drop(&mut self) {
        let _ = self.socket.shutdown(std::net::Shutdown::Both);
        let deadline = Instant::now() + Duration::from_secs(2);
        while Instant::now() < deadline {
            match self.child.try_wait() {
                Ok(None) => std::thread::sleep(Duration::from_micros(200)),
                Ok(Some(_)) | Err(_) => return,
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The runner's ends of one run's pipes.
pub(super) struct RunPipes {
    pub(super) stdout: File,
    pub(super) stderr: File,
    pub(super) status: File,
    /// Closing it asks the helper to kill the run.
    pub(super) control: Option<File>,
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
            fallback: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Allows (or forbids again) the landlock tier where namespaces are refused; it is
    /// never used silently.
    pub fn allow_fallback(&self, allowed: bool) {
        self.fallback.store(allowed, Ordering::Relaxed);
    }

    /// The isolation runs get here: namespaces where the kernel allows them; else the
    /// landlock tier if the user allowed it; else an error naming the cause and the remedy.
    pub fn tier(&self) -> Result<Tier, SandboxError> {
        match super::probe::namespace_refusal() {
            None => Ok(Tier::Namespaces),
            Some(_) if self.fallback.load(Ordering::Relaxed) => Ok(Tier::Landlock),
            Some(why) => Err(SandboxError::NoNamespaces(why)),
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

    /// The run's environment, as its request's `environment` says; in the landlock tier
    /// TMPDIR is the run's own folder (there is no private /tmp).
    pub(super) fn command_env(
        &self,
        request: &Request,
        private_tmp: Option<&PrivateTmp>,
    ) -> Vec<(String, String)> {
        let host = self.host_env.iter().cloned();
        let mut command_env = match request.environment {
            Environment::AllowList => env::build(host, &request.env),
            Environment::Exact => env::build_exact(host, &request.env),
        };
        if let Some(tmp) = private_tmp {
            for (name, value) in &mut command_env {
                if name == "TMPDIR" {
                    *value = tmp.0.to_string_lossy().into_owned();
                }
            }
        }
        command_env
    }

    /// The paths hidden from the run: the credential stores under the server's HOME,
    /// wright's own folders, the runtime folders and `deny_read`.
    pub(super) fn hidden_paths(&self, request: &Request) -> Vec<PathBuf> {
        let host_env = |name: &str| {
            self.host_env
                .iter()
                .find(|(key, _)| key == name)
                .map(|(_, value)| value.clone())
        };
        policy::hidden_paths(&host_env, &request.deny_read)
    }

    /// Starts a zygote; it waits, idle, until given a request.
    fn spawn_zygote(&self) -> io::Result<Zygote> {
        let (socket, theirs) = UnixStream::pair()?;
        let child = std::process::Command::new(&self.helper)
            .arg(HELPER_SUBCOMMAND)
            // The zygote needs nothing from the server's environment; each command's own
            // environment travels, filtered, in its specification.
            .env_clear()
            .stdin(Stdio::from(OwnedFd::from(theirs)))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        Ok(Zygote { child, socket })
    }

    /// Starts a zygote and puts it in a fresh cgroup. Moving a process between cgroups is the
    /// slowest step of a start on cgroup v1 (milliseconds: the kernel waits for an RCU grace
    /// period), which is why it is done once per zygote, and by the pool ahead of time. The
    /// group's limits are set from each request just before its run.
    pub fn prepare(&self) -> Result<Prepared, SandboxError> {
        let zygote = self.spawn_zygote().map_err(SandboxError::Spawn)?;
        let defaults = Limits::default();
        let group = self
            .cgroups
            .create(defaults.memory_bytes, defaults.processes)
            .map_err(SandboxError::Prepare)?;
        // Assembled first, so a failure below drops the zygote before its group.
        let prepared = Prepared { zygote, group };
        if let Some(group) = &prepared.group {
            group.add(prepared.pid()).map_err(SandboxError::Prepare)?;
        }
        Ok(prepared)
    }

    /// What every run's helper is told, a command's or an attached one's: what it runs and
    /// sees, its walls and its limits; no layer, wall time, CPU bound or disk bound (a
    /// command's run sets those).
    pub(super) fn helper_spec(
        &self,
        request: &Request,
        tier: Tier,
        (workspace, cwd): (PathBuf, PathBuf),
        protected: Vec<PathBuf>,
        private_tmp: Option<&PrivateTmp>,
        memory_by_cgroup: bool,
    ) -> HelperSpec {
        let limits = &request.limits;
        HelperSpec {
            argv: request.argv.clone(),
            env: self.command_env(request, private_tmp),
            workspace,
            workspace_writable: !matches!(request.filesystem, Filesystem::ReadOnly),
            extra_writable: request.permissions.extra_writable.clone(),
            extra_readable: request.readable.clone(),
            cwd,
            layer: None,
            network: effective_network(tier, request.permissions.network),
            timeout_ms: None,
            rlimits: Rlimits {
                cpu_seconds: None,
                file_size_bytes: limits.file_size_bytes,
                processes: limits.processes,
                address_space_bytes: (!memory_by_cgroup).then_some(limits.memory_bytes),
            },
            protected,
            hidden: self.hidden_paths(request),
            disk_bytes: None,
            tmp_bytes: limits.tmp_bytes,
            tier,
            private_tmp: private_tmp.map(PrivateTmp::path),
        }
    }

    /// Runs `request` through a prepared zygote, which can serve further runs afterwards.
    pub fn run_prepared(
        &self,
        prepared: &mut Prepared,
        request: &Request,
    ) -> Result<Outcome, SandboxError> {
        prepared.limit(request)?;
        let started = Instant::now();
        let tier = self.tier()?;
        if tier == Tier::Landlock && matches!(request.filesystem, Filesystem::Snapshot(_)) {
            return Err(SandboxError::TierCannot(
                "give a snapshot (it needs a mount namespace): the command would run in place",
            ));
        }
        let (workspace, cwd) = workspace_and_cwd(request)?;
        let snapshot_guard = match &request.filesystem {
            Filesystem::InPlace | Filesystem::ReadOnly => None,
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
        let in_place = snapshot_guard.is_none();
        let (protected, placeholders) = if in_place {
            protected_in_place(request, &workspace, tier)
        } else {
            // A snapshot's writes stay in its layer, never copied back.
            (Vec::new(), policy::Placeholders::none())
        };
        let disk_bytes = (!in_place).then_some(limits.disk_bytes);
        let private_tmp = PrivateTmp::for_tier(tier)?;
        let mut spec = self.helper_spec(
            request,
            tier,
            (workspace.clone(), cwd),
            protected,
            private_tmp.as_ref(),
            memory_by_cgroup,
        );
        let network = spec.network;
        spec.layer = snapshot_guard.as_ref().map(|s| s.layer());
        spec.timeout_ms = Some(limits.timeout.as_millis() as u64);
        spec.rlimits.cpu_seconds = Some(limits.cpu_seconds());
        // One file can never pass the disk bound alone.
        spec.rlimits.file_size_bytes = disk_bytes.map_or(limits.file_size_bytes, |disk| {
            disk.min(limits.file_size_bytes)
        });
        spec.disk_bytes = disk_bytes;
        let json = serde_json::to_vec(&spec).map_err(|e| SandboxError::Prepare(e.into()))?;
        let events_before = prepared.group.as_ref().map(RunGroup::events);
        // host path: the null device, the command's stdin.
        let null = File::open("/dev/null").map_err(SandboxError::Spawn)?;
        let mut pipes = send_request(&prepared.zygote.socket, &json, OwnedFd::from(null))
            .map_err(SandboxError::Spawn)?;
        let reading = read_all(&mut pipes, request, started);
        drop(placeholders);
        let after = snapshot_guard.as_ref().map(|s| s.scan());
        let (stdout, stderr, reports) = reading.map_err(SandboxError::Spawn)?;

        let mut wait_status = None;
        let mut finished = None;
        let mut landlock = "not applied".to_owned();
        let mut disk_exceeded = false;
        let mut kernel_limits = None;
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
                Report::Started { .. } => {}
                Report::Command { wait_status: s } => wait_status = Some(s),
                Report::DiskExceeded { .. } => disk_exceeded = true,
                Report::KernelLimits { status } => kernel_limits = Some(status),
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
        if disk_exceeded {
            exceeded.push(Exceeded::Disk);
        }
        if let (Some(group), Some(before)) = (&prepared.group, events_before) {
            let after = group.events();
            if after.oom_kills > before.oom_kills {
                exceeded.push(Exceeded::Memory);
            }
            if after.forks_refused > before.forks_refused {
                exceeded.push(Exceeded::Processes);
            }
        }
        // A shell reports its child's death by signal N as the status 128+N.
        let reported = signal.or((129..=128 + 64)
            .contains(&exit_code)
            .then(|| exit_code - 128));
        match reported {
            Some(libc::SIGXCPU) => exceeded.push(Exceeded::CpuTime),
            // RLIMIT_CPU's hard limit is a SIGKILL; an out-of-memory kill is one too.
            Some(libc::SIGKILL)
                if signal.is_some()
                    && !exceeded.contains(&Exceeded::Memory)
                    && cpu_ms / 1000 >= limits.cpu_seconds() =>
            {
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
        drop(private_tmp);
        let isolation = Isolation {
            network: network.name().to_owned(),
            filesystem: match tier {
                Tier::Landlock => "landlock".to_owned(),
                Tier::Namespaces => snapshot_guard
                    .as_ref()
                    .map_or("in-place", |s| s.kind().name())
                    .to_owned(),
            },
            pid: match tier {
                Tier::Namespaces => "namespace",
                Tier::Landlock => "shared",
            }
            .to_owned(),
            limits_enforced_by: {
                let mut by = if cgroup_used {
                    format!("{} + rlimits", self.cgroups.describe())
                } else {
                    "rlimits".to_owned()
                };
                if let Some(status) = kernel_limits {
                    by.push_str(&format!("; {status}"));
                }
                by
            },
            landlock,
            seccomp: match (tier, network) {
                (Tier::Landlock, _) => {
                    "dangerous calls, namespaces and every Unix socket but socketpair's refused"
                        .to_owned()
                }
                (_, Network::Off) => "dangerous calls and non-Unix sockets refused; every \
                                      connect supervised"
                    .to_owned(),
                _ => "dangerous calls refused; every connect supervised".to_owned(),
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
        let mut prepared = self.prepare()?;
        self.run_prepared(&mut prepared, request)
    }
}

/// Sends one request to a zygote: the specification's length with the five pipe ends the
/// helper gets (the command's `stdin`; stdout, stderr and status write ends; the control
/// read end), then the JSON. Returns the runner's ends.
pub(super) fn send_request(
    socket: &UnixStream,
    json: &[u8],
    stdin: OwnedFd,
) -> io::Result<RunPipes> {
    let (stdout, stdout_w) = pipe()?;
    let (stderr, stderr_w) = pipe()?;
    let (status, status_w) = pipe()?;
    let (control_r, control) = pipe()?;
    let theirs = [
        stdin.as_raw_fd(),
        stdout_w.as_raw_fd(),
        stderr_w.as_raw_fd(),
        status_w.as_raw_fd(),
        control_r.as_raw_fd(),
    ];
    let header = (json.len() as u64).to_le_bytes();
    let mut iov = libc::iovec {
        iov_base: header.as_ptr().cast_mut().cast(),
        iov_len: header.len(),
    };
    let mut space = [0u64; 8];
    // SAFETY: a zeroed msghdr is valid; the control buffer holds one SCM_RIGHTS message of
    // five descriptors (CMSG_SPACE(20) is 40 bytes on 64-bit Linux, within `space`).
    let sent = unsafe {
        let mut message: libc::msghdr = std::mem::zeroed();
        message.msg_iov = &mut iov;
        message.msg_iovlen = 1;
        message.msg_control = space.as_mut_ptr().cast();
        message.msg_controllen = libc::CMSG_SPACE(std::mem::size_of_val(&theirs) as u32) as usize;
        let header = libc::CMSG_FIRSTHDR(&message);
        (*header).cmsg_level = libc::SOL_SOCKET;
        (*header).cmsg_type = libc::SCM_RIGHTS;
        (*header).cmsg_len = libc::CMSG_LEN(std::mem::size_of_val(&theirs) as u32) as usize;
        std::ptr::copy_nonoverlapping(
            theirs.as_ptr(),
            libc::CMSG_DATA(header).cast::<i32>(),
            theirs.len(),
        );
        libc::sendmsg(socket.as_raw_fd(), &message, libc::MSG_NOSIGNAL)
    };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut socket = socket;
    socket.write_all(&header[sent as usize..])?;
    socket.write_all(json)?;
    // Our copies of the helper's ends go, so end of file means the helper's side closed.
    drop((stdin, stdout_w, stderr_w, status_w, control_r));
    Ok(RunPipes {
        stdout,
        stderr,
        status,
        control: Some(control),
    })
}

/// A pipe's (read, write) ends, both close-on-exec.
pub(super) fn pipe() -> io::Result<(File, File)> {
    let mut fds = [0; 2];
    // SAFETY: a valid two-element array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: pipe2 returned two fresh descriptors we now own.
    Ok(unsafe { (File::from_raw_fd(fds[0]), File::from_raw_fd(fds[1])) })
}

type Reading = (Captured, Captured, Vec<Report>);

/// Reads stdout, stderr and the status pipe until all three close (the helper and its
/// namespace are gone then), enforcing cancellation (by closing the control pipe) and a
/// last-resort deadline (by killing the helper, whose death takes the namespace down).
fn read_all(pipes: &mut RunPipes, request: &Request, started: Instant) -> io::Result<Reading> {
    let cap = request.limits.output_cap;
    let mut out = Captured::new(cap);
    let mut err = Captured::new(cap);
    let mut status = Vec::new();
    let deadline = started + request.limits.timeout + GRACE;
    let mut killed = false;
    let mut open = [true; 3];
    let mut buf = vec![0u8; 64 * 1024];
    while open.iter().any(|o| *o) {
        let cancelled = request
            .cancel
            .as_ref()
            .is_some_and(|flag| flag.load(Ordering::Relaxed));
        if cancelled {
            // The helper reads end of file on its control channel and kills the tree.
            pipes.control = None;
        }
        if !killed && Instant::now() > deadline {
            killed = true;
            if let Some(pid) = helper_pid(&status) {
                // SAFETY: signalling the run's helper, which the zygote has not reaped
                // (its status pipe is still open).
                unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
            }
        }
        let raw = [
            pipes.stdout.as_raw_fd(),
            pipes.stderr.as_raw_fd(),
            pipes.status.as_raw_fd(),
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
                0 => pipes.stdout.read(&mut buf),
                1 => pipes.stderr.read(&mut buf),
                _ => pipes.status.read(&mut buf),
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
    Ok((out, err, parse_reports(&status)))
}

pub(super) fn parse_reports(status: &[u8]) -> Vec<Report> {
    status
        .split(|b| *b == b'\n')
        .filter(|line| !line.is_empty())
        .filter_map(|line| serde_json::from_slice(line).ok())
        .collect()
}

fn helper_pid(status: &[u8]) -> Option<u32> {
    parse_reports(status)
        .into_iter()
        .find_map(|report| match report {
            Report::Started { pid } => Some(pid),
            _ => None,
        })
}

/// The landlock tier's private temporary folder: made fresh (0700) under the host's
/// temporary folder for one run, removed with everything in it after.
pub(super) struct PrivateTmp(PathBuf);

impl PrivateTmp {
    pub(super) fn make() -> io::Result<Self> {
        use std::sync::atomic::AtomicU64;
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let path = std::env::temp_dir().join(format!(
            "wright-run-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        // host path: a fresh folder of this process's own; create_dir fails if one is there.
        std::fs::DirBuilder::new().mode(0o700).create(&path)?;
        Ok(Self(path))
    }

    pub(super) fn path(&self) -> std::path::PathBuf {
        self.0.clone()
    }

    /// The landlock tier's stand-in for a private /tmp; the namespace tier mounts its own.
    pub(super) fn for_tier(tier: Tier) -> Result<Option<Self>, SandboxError> {
        match tier {
            Tier::Namespaces => Ok(None),
            Tier::Landlock => Self::make().map(Some).map_err(SandboxError::Prepare),
        }
    }
}

impl Drop for PrivateTmp {
    fn drop(&mut self) {
        // host path: the run's own folder, removed through handles (links not followed).
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The workspace root (resolved) and the working folder (inside it) of a request.
pub(super) fn workspace_and_cwd(request: &Request) -> Result<(PathBuf, PathBuf), SandboxError> {
    // host path: the workspace root as given, resolved once for the helper.
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
    Ok((workspace, cwd))
}

/// The paths of the workspace made read-only for a run that is not in a snapshot: `.git`,
/// `.wright` and `sandbox.protected` when the workspace is writable; when it is read-only,
/// the same only if a writable path reaches into it (else nothing there is writable anyway,
/// and no stand-in folder is made). The landlock tier has no mount namespace to make them
/// read-only in (said in `wright doctor` and docs/security.md).
pub(super) fn protected_in_place(
    request: &Request,
    workspace: &Path,
    tier: Tier,
) -> (Vec<PathBuf>, policy::Placeholders) {
    let writable_inside = request
        .permissions
        .extra_writable
        .iter()
        .any(|path| path.starts_with(workspace) || workspace.starts_with(path));
    let needed = match request.filesystem {
        Filesystem::ReadOnly => writable_inside,
        Filesystem::InPlace | Filesystem::Snapshot(_) => true,
    };
    if needed && tier == Tier::Namespaces {
        policy::protected_paths(workspace, &request.protected, &request.unprotected)
    } else {
        (Vec::new(), policy::Placeholders::none())
    }
}

/// Without a network namespace of its own, loopback is the host's: off instead.
pub(super) fn effective_network(tier: Tier, asked: Network) -> Network {
    match (tier, asked) {
        (Tier::Landlock, Network::Loopback) => Network::Off,
        (_, network) => network,
    }
}

/// Where throw-away snapshots go: beside the user's cache, never inside a workspace.
pub fn snapshot_base(
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<PathBuf, crate::config::NoPrivateDir> {
    Ok(crate::config::cache_dir(env)?.join("sandbox"))
}

/// A fresh, uniquely named snapshot folder path under `base`.
pub fn fresh_snapshot_dir(base: &Path) -> PathBuf {
    use std::sync::atomic::AtomicU64;
    static NEXT: AtomicU64 = AtomicU64::new(0);
    base.join(format!(
        "snap-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ))
}
