//! Attached runs: a long-lived process (a stdio server) started inside the sandbox with the
//! same walls as a command — namespaces, landlock, seccomp, no network unless allowed, the
//! credential stores hidden, the cgroup's memory and process limits — but its stdin a pipe
//! from the caller, its stdout and stderr handed over uncaptured, and no wall time or CPU
//! bound: it lives until the caller drops its handle (which kills the whole tree and reaps
//! everything: helper, zygote, cgroup) or until it exits by itself.

// host paths: the runner's own pipes and the sandbox's own folders; the workspace only as a path to mount.

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::cgroup::Events;
use super::local::{
    PrivateTmp, parse_reports, pipe, protected_in_place, send_request, workspace_and_cwd,
};
use super::spec::Report;
use super::{Filesystem, LocalBackend, Pool, Prepared, Request, SandboxError, policy};

/// How long the sandbox may take to be set up around an attached run before it is given up.
const SETUP_WAIT: Duration = Duration::from_secs(30);

/// A started attached run: the caller's ends of its stdio, and the handle that keeps it alive.
pub struct Attached {
    /// The run's stdin (the caller writes; closing it is the run's end of file).
    pub stdin: OwnedFd,
    /// The run's stdout (the caller reads), uncaptured.
    pub stdout: OwnedFd,
    /// The run's stderr (the caller reads), uncaptured.
    pub stderr: OwnedFd,
    /// Dropping it ends the run and every process it started.
    pub handle: AttachedHandle,
}

/// What keeps an attached run alive; dropping it kills the run's whole process tree, then
/// ends its zygote and removes its cgroup (blocking for a few milliseconds, at most about
/// two seconds).
pub struct AttachedHandle {
    /// Closing it asks the helper to kill the run.
    control: Option<File>,
    /// The helper's reports (non-blocking).
    status: File,
    reports: Vec<u8>,
    /// How the run ended, once known.
    ended: Option<String>,
    helper_pid: u32,
    /// The zygote that serves this run alone, and its cgroup.
    prepared: Option<Prepared>,
    events_before: Option<Events>,
    /// Removed once every process of the run is gone.
    private_tmp: Option<PrivateTmp>,
    // Held, not read: dropped last, it removes the stand-in folders no run needs any more.
    _placeholders: policy::Placeholders,
}

impl AttachedHandle {
    /// The process id of the run's helper, on the host: the run's processes are its
    /// descendants (helper → the pid namespace's init → the command, in the namespace tier;
    /// helper → the command in the landlock tier).
    pub fn pid(&self) -> u32 {
        self.helper_pid
    }

    /// How the run ended — `exited with status N`, `killed by signal N`, `the sandbox could
    /// not be set up (STAGE): ERROR` — or `None` while it runs. Never blocks.
    pub fn try_exit(&mut self) -> Option<String> {
        if self.ended.is_none() {
            self.read_reports();
        }
        self.ended.clone()
    }

    /// Reads what the status pipe holds; at its end of file (the helper is gone), says how
    /// the run ended.
    fn read_reports(&mut self) {
        let mut buf = [0u8; 4096];
        let closed = loop {
            match self.status.read(&mut buf) {
                Ok(0) => break true,
                Ok(n) => self.reports.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break false,
                Err(_) => break true,
            }
        };
        if closed {
            self.ended = Some(self.describe_end());
        }
    }

    fn describe_end(&self) -> String {
        let reports = parse_reports(&self.reports);
        let mut wait_status = None;
        let mut finished = false;
        for report in &reports {
            match report {
                Report::SetupFailed { stage, error } => {
                    return format!("the sandbox could not be set up ({stage}): {error}");
                }
                Report::Command { wait_status: s } => wait_status = Some(*s),
                Report::Finished { .. } => finished = true,
                _ => {}
            }
        }
        let out_of_memory = match (&self.prepared, &self.events_before) {
            (
                Some(Prepared {
                    group: Some(group), ..
                }),
                Some(before),
            ) => group.events().oom_kills > before.oom_kills,
            _ => false,
        };
        let mut words = match wait_status {
            Some(status) if libc::WIFEXITED(status) => {
                format!("exited with status {}", libc::WEXITSTATUS(status))
            }
            Some(status) if libc::WIFSIGNALED(status) => {
                format!("killed by signal {}", libc::WTERMSIG(status))
            }
            _ if finished => "ended before the command reported".to_owned(),
            _ => "the sandbox's helper ended without its final report".to_owned(),
        };
        if out_of_memory {
            words.push_str(" (a process of the run was killed for exceeding its memory limit)");
        }
        words
    }
}

impl Drop for AttachedHandle {
    fn drop(&mut self) {
        // The helper reads end of file on its control channel and kills the tree; the zygote,
        // its socket closed, reaps the helper and exits (`Zygote`'s drop waits for it, and
        // kills it past two seconds); the group is removed once empty; the temporary folder
        // and the placeholders go last, when nothing of the run can use them.
        self.control = None;
        self.prepared = None;
        self.private_tmp = None;
    }
}

impl LocalBackend {
    /// Starts `request` attached, in a zygote of its own. See [`Attached`].
    pub fn spawn_attached(&self, request: &Request) -> Result<Attached, SandboxError> {
        let prepared = self.prepare()?;
        self.spawn_attached_prepared(prepared, request)
    }

    /// Starts `request` attached in `prepared`, which then serves this run alone until the
    /// handle is dropped.
    ///
    /// The request's `argv`, `workspace`, `cwd`, `filesystem` (`ReadOnly` or `InPlace`; a
    /// snapshot is refused: its layer would be held for the session), `permissions`, `env`
    /// and `environment`, `protected`, `deny_read` and the limits on memory, processes, file
    /// size and /tmp apply as to a command; `limits.timeout`, `limits.cpu_seconds`,
    /// `limits.output_cap`, `limits.disk_bytes` and `cancel` do not. Works in the landlock
    /// tier too (where the user allowed it), with that tier's weaker walls.
    pub fn spawn_attached_prepared(
        &self,
        mut prepared: Prepared,
        request: &Request,
    ) -> Result<Attached, SandboxError> {
        if matches!(request.filesystem, Filesystem::Snapshot(_)) {
            return Err(SandboxError::AttachedCannot(
                "use a snapshot (its layer serves one run at a time)",
            ));
        }
        let tier = self.tier()?;
        prepared.limit(request)?;
        let (workspace, cwd) = workspace_and_cwd(request)?;
        let (protected, placeholders) = protected_in_place(request, &workspace, tier);
        let private_tmp = PrivateTmp::for_tier(tier)?;
        let memory_by_cgroup = prepared.group.is_some() && self.cgroups().limits_memory();
        let spec = self.helper_spec(
            request,
            tier,
            (workspace, cwd),
            protected,
            private_tmp.as_ref(),
            memory_by_cgroup,
        );
        let json = serde_json::to_vec(&spec).map_err(|e| SandboxError::Prepare(e.into()))?;
        let (stdin_r, stdin) = pipe().map_err(SandboxError::Spawn)?;
        let events_before = prepared.group.as_ref().map(|group| group.events());
        let pipes = send_request(&prepared.zygote.socket, &json, OwnedFd::from(stdin_r))
            .map_err(SandboxError::Spawn)?;
        set_nonblocking(&pipes.status).map_err(SandboxError::Spawn)?;
        let mut handle = AttachedHandle {
            control: pipes.control,
            status: pipes.status,
            reports: Vec::new(),
            ended: None,
            helper_pid: 0,
            prepared: Some(prepared),
            events_before,
            private_tmp,
            _placeholders: placeholders,
        };
        handle.helper_pid = wait_for_setup(&mut handle)?;
        Ok(Attached {
            stdin: OwnedFd::from(stdin),
            stdout: OwnedFd::from(pipes.stdout),
            stderr: OwnedFd::from(pipes.stderr),
            handle,
        })
    }
}

/// Waits until the helper reported the sandbox set up (landlock is the last step before the
/// command is started, in both tiers), or its failure; returns the helper's pid.
fn wait_for_setup(handle: &mut AttachedHandle) -> Result<u32, SandboxError> {
    let deadline = Instant::now() + SETUP_WAIT;
    loop {
        handle.read_reports();
        let reports = parse_reports(&handle.reports);
        for report in &reports {
            if let Report::SetupFailed { stage, error } = report {
                return Err(SandboxError::Setup {
                    stage: stage.clone(),
                    error: error.clone(),
                });
            }
        }
        let pid = reports.iter().find_map(|report| match report {
            Report::Started { pid } => Some(*pid),
            _ => None,
        });
        let set_up = reports
            .iter()
            .any(|report| matches!(report, Report::Landlock { .. }));
        match pid {
            Some(pid) if set_up => return Ok(pid),
            // A command that failed before landlock without saying why (it cannot: every
            // setup step reports) would end here.
            _ if handle.ended.is_some() => {
                return Err(SandboxError::Protocol(format!(
                    "the run ended during its setup: {}",
                    handle.ended.clone().unwrap_or_default()
                )));
            }
            _ if Instant::now() > deadline => {
                return Err(SandboxError::Protocol(format!(
                    "the sandbox was not set up within {} s",
                    SETUP_WAIT.as_secs()
                )));
            }
            _ => {}
        }
        let mut poll = libc::pollfd {
            fd: handle.status.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        unsafe { libc::poll(&mut poll, 1, 50) };
    }
}

fn set_nonblocking(file: &File) -> io::Result<()> {
    let fd = file.as_raw_fd();
    // SAFETY: reading and setting the flags of a descriptor we own.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags < 0 || libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

impl Pool {
    /// Starts `request` attached (see [`LocalBackend::spawn_attached_prepared`]) in a zygote
    /// prepared ahead when one is idle. It takes no slot of the concurrency limit: a server
    /// lives as long as its session and would hold one for good. Blocking (milliseconds).
    pub fn spawn_attached(self: &Arc<Self>, request: &Request) -> Result<Attached, SandboxError> {
        // A warm zygote may have died meanwhile (a memory limit, or killed from outside).
        let prepared = match self.take_zygote() {
            Some(mut warm) => {
                if warm.is_alive() {
                    warm
                } else {
                    self.backend().prepare()?
                }
            }
            None => self.backend().prepare()?,
        };
        self.refill_in_background();
        self.backend().spawn_attached_prepared(prepared, request)
    }
}
