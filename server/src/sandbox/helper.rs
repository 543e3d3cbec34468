//! The processes behind `wright __sandbox-exec`: the binary re-executed fresh (so
//! single-threaded), which builds the isolation around each command and waits for it.
//!
//! Four processes take part, because the kernel imposes the order:
//!
//! 0. the zygote (the executed binary) stays in the host's namespaces and in its cgroup and
//!    forks one helper per request it receives (see [`main`]);
//! 1. the helper unshares the user, mount, pid, ipc, uts (and, unless the host network is
//!    allowed, net) namespaces — `unshare(CLONE_NEWUSER)` requires a single-threaded caller,
//!    which is why this runs before any runtime starts — maps its own uid and gid, and forks;
//! 2. the child is pid 1 of the new pid namespace (the init): it builds the mount tree (the
//!    workspace writable, everything else read-only, private /tmp, /dev and /proc), applies
//!    landlock, forks the command and reaps until the command exits. When the init dies the
//!    kernel kills everything left in the namespace, so killing it kills the whole tree;
//! 3. the command: rlimits, capabilities dropped, the seccomp filters, exec.
//!
//! The helper enforces the wall time itself (and the runner's cancellation, signalled by
//! closing the run's control pipe) by killing the init, so when the helper exits, no process
//! of the run is left. An attached run (a server living as long as its caller wants) has no
//! wall time: only the closing of the control pipe, or the command's own exit, ends it.

// host paths: the run's own mount tree (inside its namespaces), /proc and the sandbox's folders; the workspace is only mounted, never read or written here.

use std::ffi::{CStr, CString};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::spec::{HelperSpec, Layer, OVERLAY_STAGE, PRIVATE_TMP, Report, STATUS_FD, Tier};
use super::supervisor::{self, Supervisor};
use super::{Network, landlock_rules, seccomp};

/// A failed setup step: the stage names the step, for the error the runner reports.
struct Failure {
    stage: &'static str,
    error: io::Error,
}

type Step<T> = Result<T, Failure>;

fn fail(stage: &'static str) -> Failure {
    Failure {
        stage,
        error: io::Error::last_os_error(),
    }
}

/// Checks a libc return value (-1 is failure, with errno).
fn check<T: Copy + PartialEq + From<i8>>(stage: &'static str, ret: T) -> Step<T> {
    if ret == T::from(-1) {
        Err(fail(stage))
    } else {
        Ok(ret)
    }
}

fn cstring(stage: &'static str, path: &Path) -> Step<CString> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| Failure {
        stage,
        error: io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte in a path"),
    })
}

/// Writes one report line to the status pipe; a single `write` under PIPE_BUF is atomic, so
/// the helper's and the init's lines never interleave.
fn report(message: &Report) {
    let mut line = serde_json::to_vec(message).unwrap_or_default();
    line.push(b'\n');
    // SAFETY: writing a valid buffer to a descriptor; a closed pipe only returns an error.
    unsafe { libc::write(STATUS_FD, line.as_ptr().cast(), line.len()) };
}

/// The helper's entry point, called by `main` before anything else runs. Never returns.
///
/// The process `main` starts is the zygote: it serves one run after another, each request a
/// specification plus the run's five pipe ends (stdin, stdout, stderr, status, control) received on
/// its stdin, a Unix socket, and forks one helper per run. Forking a small, already started
/// process is much cheaper than executing the binary again, and the zygote stays in its
/// cgroup, so runs need no cgroup move. It exits when the runner closes the socket.
pub fn main() -> ! {
    // A SIGCHLD handler (without SA_RESTART) interrupts the wait for the next request, so
    // exited helpers are reaped at once rather than at the next request.
    extern "C" fn wake(_: libc::c_int) {}
    // SAFETY: installing a handler that does nothing, in a single-threaded process.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = wake as extern "C" fn(libc::c_int) as libc::sighandler_t;
        libc::sigaction(libc::SIGCHLD, &action, std::ptr::null_mut());
    }
    let mut code = 0;
    loop {
        reap_helpers();
        let (spec, fds) = match receive_request() {
            Ok(Some(request)) => request,
            Ok(None) => break,
            Err(_) => {
                code = 1;
                break;
            }
        };
        // SAFETY: the zygote is single-threaded, so the child may run arbitrary code.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            let code = serve(spec, fds);
            // SAFETY: leave without running exit handlers meant for the zygote.
            unsafe { libc::_exit(code) }
        }
        for fd in fds {
            // SAFETY: the descriptors were received for the child, which has its own copies
            // (the stdin's write end stays with the runner alone, so end of file reaches the
            // command once the runner closes it).
            unsafe { libc::close(fd) };
        }
    }
    // Wait for every helper before leaving: an orphaned one would become the host init's
    // zombie, and a zombie keeps the cgroup from being removed.
    let mut status = 0;
    // SAFETY: waiting for our own children.
    while unsafe { libc::waitpid(-1, &mut status, 0) } > 0 {}
    std::process::exit(code)
}

/// Collects exited helpers (their results travelled on their status pipes).
fn reap_helpers() {
    let mut status = 0;
    // SAFETY: non-blocking waits for our own children.
    while unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) } > 0 {}
}

/// One run's helper: puts the received pipe ends in place, then isolates and waits.
fn serve(spec: Vec<u8>, received: [i32; 5]) -> i32 {
    // SAFETY: descriptor calls on descriptors this process owns.
    let control = unsafe {
        // The zygote's SIGCHLD handler is not the helper's business.
        libc::signal(libc::SIGCHLD, libc::SIG_DFL);
        // Out of the way of 0 to 3 first, whatever numbers they arrived with (close-on-exec).
        let [stdin, stdout, stderr, status, control] =
            received.map(|fd| libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 10));
        for fd in received {
            libc::close(fd);
        }
        // The command's stdin is what the runner sent (fd 0 was the zygote's socket):
        // /dev/null for a command, a pipe from the runner for an attached run.
        libc::dup2(stdin, 0);
        libc::dup2(stdout, 1);
        libc::dup2(stderr, 2);
        // The status pipe must reach the init (fork keeps it) but not the command (exec drops
        // it); the control channel stays with this helper only.
        libc::dup3(status, STATUS_FD, libc::O_CLOEXEC);
        for fd in [stdin, stdout, stderr, status] {
            libc::close(fd);
        }
        control
    };
    report(&Report::Started {
        pid: std::process::id(),
    });
    let result = serde_json::from_slice::<HelperSpec>(&spec)
        .map_err(|error| Failure {
            stage: "reading the specification",
            error: io::Error::new(io::ErrorKind::InvalidData, error),
        })
        .and_then(|spec| run(&spec, control));
    match result {
        Ok(code) => code,
        Err(failure) => {
            report(&Report::SetupFailed {
                stage: failure.stage.to_owned(),
                error: failure.error.to_string(),
            });
            125
        }
    }
}

/// Receives one request from the socket on fd 0: an 8-byte little-endian length carrying the
/// five descriptors, then that many bytes of JSON. `None` when the runner closed the socket.
fn receive_request() -> io::Result<Option<(Vec<u8>, [i32; 5])>> {
    let mut length = [0u8; 8];
    // Room for one SCM_RIGHTS message of five descriptors.
    let mut control = [0u64; 8];
    let mut iov = libc::iovec {
        iov_base: length.as_mut_ptr().cast(),
        iov_len: length.len(),
    };
    // SAFETY: a zeroed msghdr is valid; the pointers below outlive the call.
    let mut message: libc::msghdr = unsafe { std::mem::zeroed() };
    message.msg_iov = &mut iov;
    message.msg_iovlen = 1;
    message.msg_control = control.as_mut_ptr().cast();
    message.msg_controllen = std::mem::size_of_val(&control);
    let received = loop {
        // SAFETY: a valid msghdr; descriptors received are close-on-exec.
        let n = unsafe { libc::recvmsg(0, &mut message, libc::MSG_CMSG_CLOEXEC) };
        if n >= 0 {
            break n as usize;
        }
        let error = io::Error::last_os_error();
        if error.kind() != io::ErrorKind::Interrupted {
            return Err(error);
        }
        reap_helpers();
    };
    if received == 0 {
        return Ok(None);
    }
    let mut fds = [-1; 5];
    // SAFETY: walking the control messages the kernel filled in.
    unsafe {
        let header = libc::CMSG_FIRSTHDR(&message);
        if !header.is_null()
            && (*header).cmsg_level == libc::SOL_SOCKET
            && (*header).cmsg_type == libc::SCM_RIGHTS
        {
            let data = libc::CMSG_DATA(header).cast::<i32>();
            let count = ((*header).cmsg_len as usize - libc::CMSG_LEN(0) as usize) / 4;
            for (i, slot) in fds.iter_mut().enumerate().take(count.min(5)) {
                *slot = std::ptr::read_unaligned(data.add(i));
            }
        }
    }
    if fds.contains(&-1) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "a request without its five descriptors",
        ));
    }
    if received < length.len() {
        read_exact(&mut length[received..]).map_err(io::Error::other)?;
    }
    let length = u64::from_le_bytes(length);
    if length > MAX_SPEC_BYTES {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("a specification of {length} bytes"),
        ));
    }
    let mut json = vec![0u8; length as usize];
    read_exact(&mut json).map_err(io::Error::other)?;
    Ok(Some((json, fds)))
}

/// The largest specification accepted (arguments and environment included).
const MAX_SPEC_BYTES: u64 = 16 << 20;

/// Reads exactly `buf.len()` bytes from the zygote's socket.
fn read_exact(buf: &mut [u8]) -> Result<(), String> {
    let mut filled = 0;
    while filled < buf.len() {
        // SAFETY: reading into the unfilled part of a valid buffer.
        let n = unsafe { libc::read(0, buf[filled..].as_mut_ptr().cast(), buf.len() - filled) };
        match n {
            0 => return Err("the socket closed inside a request".to_owned()),
            n if n > 0 => filled += n as usize,
            _ => {
                let error = io::Error::last_os_error();
                if error.kind() != io::ErrorKind::Interrupted {
                    return Err(error.to_string());
                }
            }
        }
    }
    Ok(())
}

fn run(spec: &HelperSpec, control: i32) -> Step<i32> {
    if spec.tier == Tier::Landlock {
        return run_without_namespaces(spec, control);
    }
    // SAFETY: getuid/getgid cannot fail.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    let mut flags = libc::CLONE_NEWUSER
        | libc::CLONE_NEWNS
        | libc::CLONE_NEWPID
        | libc::CLONE_NEWIPC
        | libc::CLONE_NEWUTS;
    if spec.network != Network::Host {
        flags |= libc::CLONE_NEWNET;
    }
    let host_limits = UserLimits::read_host();
    // SAFETY: this process is single-threaded (main calls us before any thread starts).
    check("unsharing namespaces", unsafe { libc::unshare(flags) })?;
    // Map our own ids only: no privilege is needed for that, and it keeps files the command
    // creates owned by the user. setgroups must be denied before an unprivileged gid_map.
    let write = |file: &str, text: String| {
        std::fs::write(file, text).map_err(|error| Failure {
            stage: "mapping user and group ids",
            error,
        })
    };
    write("/proc/self/setgroups", "deny".to_owned())?;
    write("/proc/self/uid_map", format!("{uid} {uid} 1\n"))?;
    write("/proc/self/gid_map", format!("{gid} {gid} 1\n"))?;

    let filter =
        seccomp::compile(spec.network, seccomp::Sockets::Supervised).map_err(|error| Failure {
            stage: "compiling the seccomp filter",
            error: io::Error::other(error.to_string()),
        })?;

    // The init holds the write end of this pipe (close-on-exec, so the command does not): its
    // end of file tells us the init, and so the whole namespace, is gone.
    let mut alive = [0; 2];
    // SAFETY: a valid two-element array.
    check("creating a pipe", unsafe {
        libc::pipe2(alive.as_mut_ptr(), libc::O_CLOEXEC)
    })?;
    let start = Instant::now();
    // SAFETY: single-threaded, so the child may run arbitrary code after fork.
    let init = check("forking the init", unsafe { libc::fork() })?;
    if init == 0 {
        // SAFETY: closing descriptors the init must not keep.
        unsafe {
            libc::close(alive[0]);
            libc::close(control);
        }
        let code = init_main(spec, &filter, &host_limits);
        // SAFETY: leave without running the parent's exit handlers twice.
        unsafe { libc::_exit(code) }
    }
    // SAFETY: the init has its own copy.
    unsafe { libc::close(alive[1]) };

    let deadline = spec
        .timeout_ms
        .map(|millis| start + Duration::from_millis(millis));
    let (mut timed_out, mut cancelled) = (false, false);
    loop {
        // Without a wall time, poll wakes for the init's end or the control pipe only.
        let left = time_left(deadline);
        if left.is_zero() {
            timed_out = true;
            break;
        }
        let mut fds = [
            libc::pollfd {
                fd: alive[0],
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: control,
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        let millis = left.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: a valid array of pollfd.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, millis.max(1)) };
        if n < 0 {
            continue; // EINTR
        }
        if fds[0].revents != 0 {
            break;
        }
        if fds[1].revents != 0 {
            let mut buf = [0u8; 64];
            // SAFETY: reading into a valid buffer.
            let read = unsafe { libc::read(control, buf.as_mut_ptr().cast(), buf.len()) };
            if read <= 0 {
                cancelled = true;
                break;
            }
        }
    }
    if timed_out || cancelled {
        // SAFETY: the init is our child; SIGKILL to a pid namespace's init from its parent
        // namespace is always delivered, and its death takes the namespace with it.
        unsafe { libc::kill(init, libc::SIGKILL) };
    }
    let mut status = 0;
    // SAFETY: waiting for our own child.
    while unsafe { libc::waitpid(init, &mut status, 0) } < 0 {
        if io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            break;
        }
    }
    // SAFETY: a zeroed rusage is a valid out-parameter.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage);
        usage
    };
    let millis = |t: libc::timeval| t.tv_sec as u64 * 1000 + t.tv_usec as u64 / 1000;
    report(&Report::Finished {
        timed_out,
        cancelled,
        cpu_ms: millis(usage.ru_utime) + millis(usage.ru_stime),
        max_rss_kb: usage.ru_maxrss as u64,
    });
    Ok(0)
}

/// The landlock tier, where namespaces are refused and the user allowed it: no namespace,
/// landlock (reads around the hidden paths, writes to the workspace and the run's own
/// temporary folder), the seccomp filter with no Unix socket but `socketpair`'s, rlimits.
/// There is no pid namespace to take the tree down with, so this helper is the command's
/// subreaper: every process the command leaves is re-parented to it and killed when the run
/// ends.
fn run_without_namespaces(spec: &HelperSpec, control: i32) -> Step<i32> {
    let filter =
        seccomp::compile(spec.network, seccomp::Sockets::PairsOnly).map_err(|error| Failure {
            stage: "compiling the seccomp filter",
            error: io::Error::other(error.to_string()),
        })?;
    // SAFETY: plain process-attribute calls.
    check("becoming the run's subreaper", unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    })?;
    let start = Instant::now();
    // SAFETY: this process is single-threaded, so the child may run arbitrary code.
    let command = check("forking the command", unsafe { libc::fork() })?;
    if command == 0 {
        // SAFETY: the control channel is the helper's only; no controlling terminal.
        unsafe {
            libc::close(control);
            libc::setsid();
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        }
        match landlock_rules::restrict(spec) {
            Ok((status, _)) => report(&Report::Landlock { status }),
            Err(error) => {
                report(&Report::SetupFailed {
                    stage: "applying landlock".to_owned(),
                    error,
                });
                // SAFETY: leaving the child.
                unsafe { libc::_exit(125) }
            }
        }
        exec_command(spec, &filter, -1);
    }
    let deadline = spec
        .timeout_ms
        .map(|millis| start + Duration::from_millis(millis));
    let (mut timed_out, mut cancelled, mut wait_status) = (false, false, None);
    while wait_status.is_none() {
        let mut status = 0;
        // SAFETY: waiting for the command without blocking.
        match unsafe { libc::waitpid(command, &mut status, libc::WNOHANG) } {
            pid if pid == command => {
                wait_status = Some(status);
                break;
            }
            _ => {}
        }
        reap_helpers();
        let left = time_left(deadline);
        if left.is_zero() {
            timed_out = true;
            break;
        }
        let mut fds = [libc::pollfd {
            fd: control,
            events: libc::POLLIN,
            revents: 0,
        }];
        // Polled in short slices: the command's exit is noticed within them.
        // SAFETY: a valid array of pollfd.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), 1, left.as_millis().clamp(1, 20) as i32) };
        if n > 0 {
            let mut buf = [0u8; 64];
            // SAFETY: reading into a valid buffer.
            if unsafe { libc::read(control, buf.as_mut_ptr().cast(), buf.len()) } <= 0 {
                cancelled = true;
                break;
            }
        }
    }
    kill_descendants();
    if let Some(status) = wait_status {
        report(&Report::Command {
            wait_status: status,
        });
    }
    // SAFETY: a zeroed rusage is a valid out-parameter.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage);
        usage
    };
    let millis = |t: libc::timeval| t.tv_sec as u64 * 1000 + t.tv_usec as u64 / 1000;
    report(&Report::Finished {
        timed_out,
        cancelled,
        cpu_ms: millis(usage.ru_utime) + millis(usage.ru_stime),
        max_rss_kb: usage.ru_maxrss as u64,
    });
    Ok(0)
}

/// Kills every descendant of this process (a subreaper: orphans come back to it) until none
/// is left, and reaps them.
fn kill_descendants() {
    loop {
        let children = children_of_self();
        if children.is_empty() {
            // Zombies already re-parented and dead.
            reap_helpers();
            if children_of_self().is_empty() {
                return;
            }
            continue;
        }
        for pid in children {
            // SAFETY: signalling our own child.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        let mut status = 0;
        // SAFETY: reaping our own children.
        while unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) } > 0 {}
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The live children of this process, from /proc (every thread's list).
fn children_of_self() -> Vec<libc::pid_t> {
    let mut out = Vec::new();
    // host path: the process's own task list in /proc.
    if let Ok(tasks) = std::fs::read_dir("/proc/self/task") {
        for task in tasks.flatten() {
            // host path: the task's children list in /proc.
            if let Ok(list) = std::fs::read_to_string(task.path().join("children")) {
                out.extend(
                    list.split_whitespace()
                        .filter_map(|pid| pid.parse::<i32>().ok()),
                );
            }
        }
    }
    out
}

/// Per-user kernel resources (the `/proc/sys/user` counters, kept per user namespace and
/// charged to every namespace above): a command in the run's namespace gets a quarter of
/// what the host allows its user for inotify and fanotify, so the host's own programs keep
/// working while it runs, and no nested namespace of any kind (the run's were made already;
/// the seccomp filter refuses them too).
struct UserLimits {
    host: Vec<(&'static str, u64)>,
}

/// The counters bounded to a share of the host's.
const SHARED_LIMITS: &[&str] = &[
    "max_inotify_instances",
    "max_inotify_watches",
    "max_fanotify_groups",
    "max_fanotify_marks",
];

/// The counters set to zero.
const NO_NAMESPACES: &[&str] = &[
    "max_user_namespaces",
    "max_mnt_namespaces",
    "max_pid_namespaces",
    "max_net_namespaces",
    "max_ipc_namespaces",
    "max_uts_namespaces",
    "max_cgroup_namespaces",
    "max_time_namespaces",
];

impl UserLimits {
    /// The host's values, read before unsharing (a new namespace starts unbounded and shows
    /// its own).
    fn read_host() -> Self {
        let host = SHARED_LIMITS
            .iter()
            .filter_map(|name| {
                let value = std::fs::read_to_string(format!("/proc/sys/user/{name}")).ok()?;
                Some((*name, value.trim().parse().ok()?))
            })
            .collect();
        Self { host }
    }

    /// Writes the bounds into the namespace just made (its root may); says what held.
    fn bound_this_namespace(&self) -> String {
        let mut failed = Vec::new();
        let mut set = |name: &str, value: u64| {
            if std::fs::write(format!("/proc/sys/user/{name}"), value.to_string()).is_err() {
                failed.push(name.to_owned());
            }
        };
        for (name, host) in &self.host {
            set(name, (host / 4).max(1));
        }
        for name in NO_NAMESPACES {
            set(name, 0);
        }
        if failed.is_empty() {
            "inotify and fanotify bounded to a quarter of the user's, no nested namespaces"
                .to_owned()
        } else {
            format!("not bounded by this kernel: {}", failed.join(", "))
        }
    }
}

/// The init: pid 1 of the run's pid namespace.
fn init_main(spec: &HelperSpec, filter: &seccomp::Program, limits: &UserLimits) -> i32 {
    // SAFETY: plain process-attribute calls.
    unsafe {
        // If the helper is killed (the runner's last resort), take the namespace down too.
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        // No controlling terminal: nothing can be injected into the user's.
        libc::setsid();
    }
    let fail = |stage: &str, error: String| {
        report(&Report::SetupFailed {
            stage: stage.to_owned(),
            error,
        });
        125
    };
    // Opened before the mount tree hides wright's own folders, where the layer lives.
    let mut disk = DiskWatch::open(spec);
    if let Err(failure) = build_mount_tree(spec).and_then(|()| network(spec)) {
        return fail(failure.stage, failure.error.to_string());
    }
    let _ = hostname();
    // After the mount tree: cloning its trees made mount namespaces of their own.
    report(&Report::KernelLimits {
        status: limits.bound_this_namespace(),
    });
    let mut mounts = Vec::new();
    let mut writable: Vec<PathBuf> = vec!["/tmp".into(), "/dev/shm".into()];
    if spec.workspace_writable {
        writable.push(spec.workspace.clone());
    }
    writable.extend(spec.extra_writable.iter().cloned());
    for path in &writable {
        match supervisor::mount_id(path) {
            Ok(id) => mounts.push(id),
            Err(error) => return fail("reading the writable mounts", error.to_string()),
        }
    }
    let scoped = match landlock_rules::restrict(spec) {
        Ok((status, scoped)) => {
            report(&Report::Landlock { status });
            scoped
        }
        Err(error) => return fail("applying landlock", error),
    };
    let policy = supervisor::Policy {
        mounts,
        // Abstract names belong to a network namespace: the run's own, unless it shares the
        // host's, where only landlock's scope (ABI 6) keeps them apart.
        abstract_scoped: spec.network != Network::Host || scoped,
    };
    // SIGCHLD arrives on a descriptor, so one poll waits for the command, the supervisor's
    // calls and the disk check alike.
    // SAFETY: a sigset built with the libc calls, blocked before the fork so none is lost.
    let signals = unsafe {
        let mut mask: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut mask);
        libc::sigaddset(&mut mask, libc::SIGCHLD);
        libc::sigprocmask(libc::SIG_BLOCK, &mask, std::ptr::null_mut());
        libc::signalfd(-1, &mask, libc::SFD_CLOEXEC | libc::SFD_NONBLOCK)
    };
    if signals < 0 {
        return fail(
            "waiting for the command",
            io::Error::last_os_error().to_string(),
        );
    }
    // The command hands its connect filter's listener over this pair.
    let mut handoff = [0; 2];
    // SAFETY: a valid two-element array.
    if unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
            0,
            handoff.as_mut_ptr(),
        )
    } < 0
    {
        return fail(
            "creating the supervisor's channel",
            io::Error::last_os_error().to_string(),
        );
    }
    // SAFETY: the init is single-threaded until the fork below.
    let command = unsafe { libc::fork() };
    if command < 0 {
        return fail(
            "forking the command",
            io::Error::last_os_error().to_string(),
        );
    }
    if command == 0 {
        // SAFETY: the child's copies of descriptors it must not keep.
        unsafe {
            libc::close(handoff[0]);
            libc::close(signals);
        }
        exec_command(spec, filter, handoff[1]);
    }
    // SAFETY: the command has its own copy.
    unsafe { libc::close(handoff[1]) };
    // Blocks until the command sent the listener, or died (or exec'd) without: end of file.
    let supervisor = receive_fd(handoff[0]).map(|listener| Supervisor::new(listener, policy));
    // SAFETY: the channel has served.
    unsafe { libc::close(handoff[0]) };
    // Reap everything (orphans re-parent to us) until the command itself exits; returning then
    // ends the namespace and with it whatever the command left running.
    let mut listening = supervisor.is_some();
    loop {
        let mut fds = [
            libc::pollfd {
                fd: signals,
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: match &supervisor {
                    Some(supervisor) if listening => supervisor.fd(),
                    _ => -1,
                },
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        let timeout = disk.as_ref().map_or(-1, DiskWatch::wait_ms);
        // SAFETY: a valid array of pollfd.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, timeout) };
        if n < 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return 125;
        }
        if fds[1].revents & libc::POLLIN != 0
            && let Some(supervisor) = &supervisor
        {
            supervisor.handle_one();
        } else if fds[1].revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0 {
            // No process of the run is under the filter any more.
            listening = false;
        }
        if let Some(watch) = &mut disk
            && let Some(bytes) = watch.check()
        {
            report(&Report::DiskExceeded { bytes });
            // SAFETY: in its own pid namespace, kill(-1) from the init reaches every other
            // process of the run and nothing outside it.
            unsafe { libc::kill(-1, libc::SIGKILL) };
            disk = None;
        }
        if fds[0].revents != 0 {
            let mut info = [0u8; 128];
            // SAFETY: draining the signalfd into a buffer of a siginfo's size.
            while unsafe { libc::read(signals, info.as_mut_ptr().cast(), info.len()) } > 0 {}
            loop {
                let mut status = 0;
                // SAFETY: waiting for any child of ours, without blocking.
                let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
                if pid == command {
                    report(&Report::Command {
                        wait_status: status,
                    });
                    return 0;
                }
                if pid <= 0 {
                    break;
                }
            }
        }
    }
}

/// Receives one descriptor (`SCM_RIGHTS`) on `socket`; `None` at end of file.
fn receive_fd(socket: i32) -> Option<std::os::fd::OwnedFd> {
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    let mut control = [0u64; 4];
    // SAFETY: a zeroed msghdr is valid; the pointers below outlive the call.
    let mut message: libc::msghdr = unsafe { std::mem::zeroed() };
    message.msg_iov = &mut iov;
    message.msg_iovlen = 1;
    message.msg_control = control.as_mut_ptr().cast();
    message.msg_controllen = std::mem::size_of_val(&control);
    loop {
        // SAFETY: a valid msghdr; a descriptor received is close-on-exec.
        let n = unsafe { libc::recvmsg(socket, &mut message, libc::MSG_CMSG_CLOEXEC) };
        if n > 0 {
            break;
        }
        if n == 0 || io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return None;
        }
    }
    // SAFETY: reading the one control message the kernel filled in.
    unsafe {
        let header = libc::CMSG_FIRSTHDR(&message);
        if header.is_null()
            || (*header).cmsg_level != libc::SOL_SOCKET
            || (*header).cmsg_type != libc::SCM_RIGHTS
        {
            return None;
        }
        let fd = std::ptr::read_unaligned(libc::CMSG_DATA(header).cast::<i32>());
        Some(std::os::fd::FromRawFd::from_raw_fd(fd))
    }
}

/// Sends the descriptor `fd` over `socket` (`SCM_RIGHTS`).
fn send_fd(socket: i32, fd: i32) -> io::Result<()> {
    let byte = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: byte.as_ptr().cast_mut().cast(),
        iov_len: 1,
    };
    let mut space = [0u64; 4];
    // SAFETY: a zeroed msghdr is valid; the control buffer holds one SCM_RIGHTS message of
    // one descriptor (CMSG_SPACE(4) is 24 bytes on 64-bit Linux, within `space`).
    let sent = unsafe {
        let mut message: libc::msghdr = std::mem::zeroed();
        message.msg_iov = &mut iov;
        message.msg_iovlen = 1;
        message.msg_control = space.as_mut_ptr().cast();
        message.msg_controllen = libc::CMSG_SPACE(4) as usize;
        let header = libc::CMSG_FIRSTHDR(&message);
        (*header).cmsg_level = libc::SOL_SOCKET;
        (*header).cmsg_type = libc::SCM_RIGHTS;
        (*header).cmsg_len = libc::CMSG_LEN(4) as usize;
        std::ptr::write_unaligned(libc::CMSG_DATA(header).cast::<i32>(), fd);
        libc::sendmsg(socket, &message, libc::MSG_NOSIGNAL)
    };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The bound on what a snapshot run writes (`sandbox.disk_mb`): its layer (measured as the
/// blocks allocated, against what it held when the run started), /tmp and /dev/shm, checked
/// every quarter second, less often when measuring the layer takes long (at most a
/// twentieth of the time goes to it). A run can pass the bound by what it writes between
/// two checks before everything in it is killed.
struct DiskWatch {
    layer: Option<(crate::files::Dir, u64)>,
    limit: u64,
    interval: Duration,
    next: Instant,
}

impl DiskWatch {
    fn open(spec: &HelperSpec) -> Option<Self> {
        let limit = spec.disk_bytes?;
        let layer = match &spec.layer {
            Some(Layer::Overlay { upper, .. }) => Some(upper.clone()),
            Some(Layer::Copy { tree }) => Some(tree.clone()),
            None => None,
        }
        .and_then(|path| crate::files::Root::open_layer(path).ok())
        .and_then(|root| root.open_root_dir().ok())
        .map(|dir| {
            let baseline = allocated(&dir);
            (dir, baseline)
        });
        Some(Self {
            layer,
            limit,
            interval: Duration::from_millis(250),
            next: Instant::now() + Duration::from_millis(250),
        })
    }

    fn wait_ms(&self) -> i32 {
        self.next
            .saturating_duration_since(Instant::now())
            .as_millis()
            .min(i32::MAX as u128) as i32
    }

    /// The bytes written, when past the limit and it is time to look.
    fn check(&mut self) -> Option<u64> {
        if Instant::now() < self.next {
            return None;
        }
        let started = Instant::now();
        let layer = self.layer.as_ref().map_or(0, |(dir, baseline)| {
            allocated(dir).saturating_sub(*baseline)
        });
        let used = layer + tmpfs_used("/tmp") + tmpfs_used("/dev/shm");
        self.interval = Duration::from_millis(250).max(started.elapsed() * 20);
        self.next = Instant::now() + self.interval;
        (used > self.limit).then_some(used)
    }
}

/// The bytes allocated under `dir`, through handles (never a link, any depth).
fn allocated(dir: &crate::files::Dir) -> u64 {
    let Ok(entries) = dir.entries() else {
        return 0;
    };
    let mut total = dir.stat().map_or(0, |s| s.blocks_bytes);
    for entry in entries {
        if entry.kind == rustix::fs::FileType::Directory {
            if let Ok(child) = dir.open_dir(&entry.name) {
                total += allocated(&child);
            }
        } else if let Ok(stat) = dir.lstat(&entry.name) {
            total += stat.blocks_bytes;
        }
    }
    total
}

/// The bytes in use on the tmpfs at `path`.
fn tmpfs_used(path: &str) -> u64 {
    rustix::fs::statfs(path).map_or(0, |fs| {
        (fs.f_blocks.saturating_sub(fs.f_bfree)).saturating_mul(fs.f_bsize as u64)
    })
}

#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

const MOUNT_ATTR_RDONLY: u64 = 0x1;
const OPEN_TREE_CLONE: libc::c_uint = 0x1;
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x4;

fn mount_setattr(stage: &'static str, path: &CStr, recursive: bool, set: u64) -> Step<()> {
    let attr = MountAttr {
        attr_set: set,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    let flags = if recursive { libc::AT_RECURSIVE } else { 0 };
    // SAFETY: a valid path and a mount_attr of the size passed.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            path.as_ptr(),
            flags,
            &attr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    check(stage, ret).map(drop)
}

/// A detached copy of the mount tree at `path` (a bind mount not attached anywhere yet), so it
/// survives /tmp or /dev being covered and is untouched by the read-only pass.
fn clone_tree(stage: &'static str, path: &Path) -> Step<i32> {
    clone_tree_with(stage, path, 0)
}

/// `clone_tree`, but a symbolic link at `path` itself is refused, not followed.
fn clone_tree_not_following(stage: &'static str, path: &Path) -> Step<i32> {
    clone_tree_with(stage, path, libc::AT_SYMLINK_NOFOLLOW as libc::c_uint)
}

fn clone_tree_with(stage: &'static str, path: &Path, flags: libc::c_uint) -> Step<i32> {
    let path = cstring(stage, path)?;
    // SAFETY: a valid path.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_open_tree,
            libc::AT_FDCWD,
            path.as_ptr(),
            OPEN_TREE_CLONE
                | libc::O_CLOEXEC as libc::c_uint
                | libc::AT_RECURSIVE as libc::c_uint
                | flags,
        )
    };
    check(stage, fd).map(|fd| fd as i32)
}

fn attach_tree(stage: &'static str, tree: i32, path: &Path) -> Step<()> {
    let target = cstring(stage, path)?;
    // SAFETY: a detached tree's descriptor and a valid target path.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            tree,
            c"".as_ptr(),
            libc::AT_FDCWD,
            target.as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH,
        )
    };
    check(stage, ret)?;
    // SAFETY: the descriptor is ours.
    unsafe { libc::close(tree) };
    Ok(())
}

fn mount(
    stage: &'static str,
    source: &CStr,
    target: &Path,
    fstype: &CStr,
    flags: libc::c_ulong,
    data: &str,
) -> Step<()> {
    let target = cstring(stage, target)?;
    let data = CString::new(data).map_err(|_| Failure {
        stage,
        error: io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte in mount options"),
    })?;
    // SAFETY: valid C strings.
    let ret = unsafe {
        libc::mount(
            source.as_ptr(),
            target.as_ptr(),
            fstype.as_ptr(),
            flags,
            data.as_ptr().cast(),
        )
    };
    check(stage, ret).map(drop)
}

/// Overlay options separate paths with `,` and `:`; escape them as overlayfs expects.
fn overlay_path(path: &Path) -> String {
    let mut out = String::new();
    for c in path.to_string_lossy().chars() {
        if matches!(c, ',' | ':' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Device nodes a command may use; bwrap's `--dev` offers the same set.
const DEVICES: &[&str] = &["null", "zero", "full", "random", "urandom", "tty"];

/// The mount tree: the order matters at every step, as the comments say.
fn build_mount_tree(spec: &HelperSpec) -> Step<()> {
    // Nothing we mount may propagate back to the host (a less privileged mount namespace
    // already turns shared mounts into slaves; this makes it explicit).
    mount(
        "making mounts private",
        c"none",
        Path::new("/"),
        c"",
        libc::MS_REC | libc::MS_PRIVATE,
        "",
    )?;
    // The snapshot is mounted over the workspace's own path, so paths inside are the paths
    // outside. The upper directory must still be writable here, before the read-only pass.
    let mut workspace_tree = spec.workspace.clone();
    match &spec.layer {
        Some(Layer::Overlay { upper, work }) => {
            let options = format!(
                "lowerdir={},upperdir={},workdir={},userxattr",
                overlay_path(&spec.workspace),
                overlay_path(upper),
                overlay_path(work)
            );
            mount(
                OVERLAY_STAGE,
                c"overlay",
                &spec.workspace,
                c"overlay",
                0,
                &options,
            )?;
        }
        Some(Layer::Copy { tree }) => workspace_tree = tree.clone(),
        None => {}
    }
    // Detached copies of the writable trees and of the device nodes, taken before anything
    // covers them (a workspace under /tmp is hidden by the private /tmp until re-attached).
    let mut writable = vec![(
        spec.workspace.clone(),
        clone_tree("cloning the workspace", &workspace_tree)?,
    )];
    for path in &spec.extra_writable {
        writable.push((path.clone(), clone_tree("cloning a writable path", path)?));
    }
    // Only those the private /tmp covers: everything else is visible (read-only) already.
    // Never through a link: anyone may plant one in the host's /tmp, and a tree cloned
    // through it (of `/`, say) would show what the hidden paths cover, beyond their reach.
    let mut readable = Vec::new();
    for path in &spec.extra_readable {
        let Ok(meta) = std::fs::symlink_metadata(path) else {
            continue;
        };
        if path.starts_with(PRIVATE_TMP) && !meta.file_type().is_symlink() {
            let tree = clone_tree_not_following("cloning a readable tree", path)?;
            readable.push((path.clone(), tree, meta.is_dir()));
        }
    }
    let mut devices = Vec::new();
    for name in DEVICES {
        let path = Path::new("/dev").join(name);
        if let Ok(tree) = clone_tree("cloning a device", &path) {
            devices.push((path, tree));
        }
    }
    // Everything the namespace inherited becomes read-only, recursively, in one call.
    mount_setattr("making the root read-only", c"/", true, MOUNT_ATTR_RDONLY)?;

    let nosuid_nodev = libc::MS_NOSUID | libc::MS_NODEV;
    // A /dev of our own: only the harmless devices, never the host's disks.
    mount(
        "mounting /dev",
        c"tmpfs",
        Path::new("/dev"),
        c"tmpfs",
        libc::MS_NOSUID | libc::MS_NOEXEC,
        "mode=0755,size=64k",
    )?;
    for (path, tree) in devices {
        std::fs::write(&path, b"").map_err(|error| Failure {
            stage: "creating a device mount point",
            error,
        })?;
        attach_tree("mounting a device", tree, &path)?;
    }
    for (link, target) in [
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ] {
        let _ = std::os::unix::fs::symlink(target, Path::new("/dev").join(link));
    }
    make_dir(Path::new("/dev/shm"), 0o1777)?;
    // What a hidden path is covered with: an empty folder or file, read-only.
    make_dir(Path::new(EMPTY_DIR), 0o555)?;
    std::fs::write(EMPTY_FILE, b"").map_err(|error| Failure {
        stage: "creating the empty file hidden files are covered with",
        error,
    })?;
    mount_setattr("making /dev read-only", c"/dev", false, MOUNT_ATTR_RDONLY)?;
    // Sized, so a command cannot fill the memory of the host with files (tmpfs pages are
    // also charged to the run's memory limit).
    let sized = format!("mode=1777,size={}", spec.tmp_bytes.max(1 << 20));
    mount(
        "mounting /dev/shm",
        c"tmpfs",
        Path::new("/dev/shm"),
        c"tmpfs",
        nosuid_nodev,
        &sized,
    )?;
    mount(
        "mounting the private /tmp",
        c"tmpfs",
        Path::new("/tmp"),
        c"tmpfs",
        nosuid_nodev,
        &sized,
    )?;
    // /proc of the new pid namespace: only the run's own processes are visible.
    mount(
        "mounting /proc",
        c"proc",
        Path::new("/proc"),
        c"proc",
        nosuid_nodev | libc::MS_NOEXEC,
        "",
    )?;
    // Before the writable trees, which may lie inside one of these and are attached over it.
    for (path, tree, is_dir) in readable {
        make_mount_point(&path, is_dir)?;
        attach_tree("attaching a readable tree", tree, &path)?;
        let c = cstring("making a readable tree read-only", &path)?;
        mount_setattr(
            "making a readable tree read-only",
            &c,
            true,
            MOUNT_ATTR_RDONLY,
        )?;
    }
    // The workspace among them even when read-only: it must stay visible.
    let writable_paths: Vec<PathBuf> = writable.iter().map(|(path, _)| path.clone()).collect();
    for (index, (path, tree)) in writable.into_iter().enumerate() {
        make_mount_point(&path, true)?;
        attach_tree("attaching a writable tree", tree, &path)?;
        // A read-only workspace is still re-attached (one under /tmp would be covered
        // otherwise), then made read-only before the writable paths inside it are attached
        // over it, so that those stay writable.
        if index == 0 && !spec.workspace_writable {
            let c = cstring("making the workspace read-only", &path)?;
            mount_setattr(
                "making the workspace read-only",
                &c,
                true,
                MOUNT_ATTR_RDONLY,
            )?;
        }
    }
    // In place, `.git`, `.wright` and the protected paths become read-only: a command cannot
    // plant a hook, a `core.fsmonitor` or a configuration that runs later, outside.
    for path in &spec.protected {
        let c = cstring("protecting a path", path)?;
        bind(&c, &c, "protecting a path")?;
        mount_setattr("protecting a path", &c, true, MOUNT_ATTR_RDONLY)?;
    }
    // Credential stores, wright's own folders and the user's runtime folder (its sockets
    // included) are covered with an empty folder or file. A path that holds a writable tree
    // cannot be covered without hiding that tree too, and is left as it is.
    for path in &spec.hidden {
        if writable_paths.iter().any(|w| w.starts_with(path)) {
            continue;
        }
        let Ok(meta) = std::fs::metadata(path) else {
            continue;
        };
        let source = if meta.is_dir() { EMPTY_DIR } else { EMPTY_FILE };
        let source = cstring("hiding a path", Path::new(source))?;
        let target = cstring("hiding a path", path)?;
        bind(&source, &target, "hiding a path")?;
        mount_setattr("hiding a path", &target, false, MOUNT_ATTR_RDONLY)?;
    }
    Ok(())
}

/// Makes the folder (or, for a file, the empty file) a tree is attached at: under a tmpfs it
/// must be made; elsewhere it exists already.
fn make_mount_point(path: &Path, is_dir: bool) -> Step<()> {
    let made = if is_dir {
        std::fs::create_dir_all(path)
    } else {
        path.parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| match std::fs::File::create_new(path) {
                Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
                other => other.map(drop),
            })
    };
    made.map_err(|error| Failure {
        stage: "making a mount point",
        error,
    })
}

/// How long to wait for the next event: until the deadline, or (without one) an hour, after
/// which the loop just looks again.
fn time_left(deadline: Option<Instant>) -> Duration {
    deadline.map_or(Duration::from_secs(3600), |deadline| {
        deadline.saturating_duration_since(Instant::now())
    })
}

/// The empty folder and file hidden paths are covered with (in the sandbox's own /dev).
const EMPTY_DIR: &str = "/dev/.wright-empty";
const EMPTY_FILE: &str = "/dev/.wright-empty-file";

/// A bind mount of `source` on `target`.
fn bind(source: &CStr, target: &CStr, stage: &'static str) -> Step<()> {
    // SAFETY: valid C strings; no data.
    let ret = unsafe {
        libc::mount(
            source.as_ptr(),
            target.as_ptr(),
            std::ptr::null(),
            libc::MS_BIND | libc::MS_REC,
            std::ptr::null(),
        )
    };
    check(stage, ret).map(drop)
}

fn make_dir(path: &Path, mode: u32) -> Step<()> {
    let c = cstring("making a directory", path)?;
    // SAFETY: a valid path; mkdir is not subject to the umask for the sticky bit, chmod is.
    unsafe {
        check("making a directory", libc::mkdir(c.as_ptr(), mode))?;
        check("making a directory", libc::chmod(c.as_ptr(), mode))?;
    }
    Ok(())
}

/// A fresh network namespace has its loopback down; with loopback permission, bring it up so
/// servers a command starts for itself (tests against localhost) work, while nothing outside
/// is reachable.
fn network(spec: &HelperSpec) -> Step<()> {
    if spec.network != Network::Loopback {
        return Ok(());
    }
    // SAFETY: an ifreq is plain data; the ioctls read and write it.
    unsafe {
        let socket = check(
            "bringing up loopback",
            libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0),
        )?;
        let mut request: libc::ifreq = std::mem::zeroed();
        for (slot, byte) in request.ifr_name.iter_mut().zip(b"lo\0") {
            *slot = *byte as libc::c_char;
        }
        check(
            "bringing up loopback",
            libc::ioctl(socket, libc::SIOCGIFFLAGS, &mut request),
        )?;
        request.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
        check(
            "bringing up loopback",
            libc::ioctl(socket, libc::SIOCSIFFLAGS, &request),
        )?;
        libc::close(socket);
    }
    Ok(())
}

fn hostname() -> io::Result<()> {
    let name = b"wright-sandbox";
    // SAFETY: a valid buffer and length.
    if unsafe { libc::sethostname(name.as_ptr().cast(), name.len()) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The command's own process: limits, no capabilities, the filters (the connect filter's
/// listener sent to the init over `handoff`), exec. Never returns.
fn exec_command(spec: &HelperSpec, filter: &seccomp::Program, handoff: i32) -> ! {
    let name = spec.argv.first().map_or("", String::as_str);
    let die = |what: &str, error: io::Error, code: i32| -> ! {
        let message = format!("wright sandbox: {what}: {error}\n");
        // SAFETY: writing a valid buffer to stderr, then leaving.
        unsafe {
            libc::write(2, message.as_ptr().cast(), message.len());
            libc::_exit(code)
        }
    };
    // Rust ignores SIGPIPE in its own programs and an ignored signal stays ignored across exec:
    // restore the default (and an empty signal mask) so `yes | head` ends as in a shell.
    // SAFETY: resetting dispositions and the mask of this single-threaded process.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
    }
    if let Err(error) = std::env::set_current_dir(&spec.cwd) {
        die(&format!("cd {}", spec.cwd.display()), error, 126);
    }
    if let Err(error) = set_rlimits(spec) {
        die("setting limits", error, 126);
    }
    if let Err(error) = drop_capabilities() {
        die("dropping capabilities", error, 126);
    }
    let path = match resolve(name, spec) {
        Some(path) => path,
        None => die(
            name,
            io::Error::new(io::ErrorKind::NotFound, "command not found"),
            127,
        ),
    };
    let to_c = |s: &[u8]| CString::new(s).unwrap_or_default();
    let program = to_c(path.as_os_str().as_bytes());
    let argv: Vec<CString> = spec.argv.iter().map(|a| to_c(a.as_bytes())).collect();
    let envp: Vec<CString> = spec
        .env
        .iter()
        .map(|(k, v)| to_c(format!("{k}={v}").as_bytes()))
        .collect();
    let mut argv_ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    argv_ptrs.push(std::ptr::null());
    let mut envp_ptrs: Vec<*const libc::c_char> = envp.iter().map(|e| e.as_ptr()).collect();
    envp_ptrs.push(std::ptr::null());
    // Every descriptor but stdio closes at exec (landlock's, the status pipe, any leaked one).
    // SAFETY: close_range with CLOEXEC only sets flags.
    unsafe {
        libc::syscall(
            libc::SYS_close_range,
            3u32,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    };
    // The connect filter first (the main filter refuses a second listener), its listener to
    // the init, which supervises every connect from here on.
    if handoff >= 0 {
        let listener = seccomp::install(
            &seccomp::connect_filter(),
            libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
        )
        .and_then(|listener| {
            let sent = send_fd(handoff, listener);
            // SAFETY: the init has its own copy now (or none, and the run fails).
            unsafe {
                libc::close(listener);
                libc::close(handoff);
            }
            sent
        });
        if let Err(error) = listener {
            die("installing the connect supervisor's filter", error, 126);
        }
    }
    // Last, because the filters also refuse calls the steps above make.
    for filter in [filter, &seccomp::guard()] {
        if let Err(error) = seccompiler::apply_filter(filter) {
            die(
                "applying the seccomp filter",
                io::Error::other(error.to_string()),
                126,
            );
        }
    }
    // SAFETY: NUL-terminated arrays of valid C strings.
    unsafe { libc::execve(program.as_ptr(), argv_ptrs.as_ptr(), envp_ptrs.as_ptr()) };
    let error = io::Error::last_os_error();
    let code = if error.kind() == io::ErrorKind::NotFound {
        127
    } else {
        126
    };
    die(name, error, code)
}

/// `execvp`'s search, over the PATH the command is given (not the helper's own).
fn resolve(name: &str, spec: &HelperSpec) -> Option<PathBuf> {
    if name.is_empty() {
        return None;
    }
    if name.contains('/') {
        return Some(PathBuf::from(name));
    }
    let path = spec
        .env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map_or("/usr/local/bin:/usr/bin:/bin", |(_, v)| v.as_str());
    path.split(':')
        .filter(|dir| !dir.is_empty())
        .map(|dir| Path::new(dir).join(name))
        .find(|candidate| {
            let Ok(c) = CString::new(candidate.as_os_str().as_bytes()) else {
                return false;
            };
            // SAFETY: a valid path.
            candidate.is_file() && unsafe { libc::access(c.as_ptr(), libc::X_OK) } == 0
        })
}

fn set_rlimits(spec: &HelperSpec) -> io::Result<()> {
    let limits = spec.rlimits;
    let set = |resource, soft: u64, hard: u64| {
        let limit = libc::rlimit {
            rlim_cur: soft,
            rlim_max: hard,
        };
        // SAFETY: a valid rlimit.
        if unsafe { libc::setrlimit(resource, &limit) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    };
    // SIGXCPU at the soft limit, SIGKILL a second later.
    if let Some(seconds) = limits.cpu_seconds {
        set(libc::RLIMIT_CPU, seconds, seconds.saturating_add(1))?;
    }
    set(
        libc::RLIMIT_FSIZE,
        limits.file_size_bytes,
        limits.file_size_bytes,
    )?;
    // Counted per user within the run's fresh user namespace; the pids cgroup is the real
    // bound (root's own processes are exempt from RLIMIT_NPROC).
    set(libc::RLIMIT_NPROC, limits.processes, limits.processes)?;
    set(libc::RLIMIT_CORE, 0, 0)?;
    // Counted per user across namespaces like the inotify counters: a run gets a share of
    // signals queued and POSIX message-queue bytes, and little locked memory.
    set(libc::RLIMIT_SIGPENDING, 4096, 4096)?;
    set(libc::RLIMIT_MSGQUEUE, 256 << 10, 256 << 10)?;
    set(libc::RLIMIT_MEMLOCK, 8 << 20, 8 << 20)?;
    if let Some(bytes) = limits.address_space_bytes {
        set(libc::RLIMIT_AS, bytes, bytes)?;
    }
    Ok(())
}

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;

/// Whether this process holds any capability (permitted).
fn has_capabilities() -> bool {
    let mut header = CapHeader {
        version: LINUX_CAPABILITY_VERSION_3,
        pid: 0,
    };
    let mut data = [CapData {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: capget fills two CapData for version 3.
    let ret = unsafe { libc::syscall(libc::SYS_capget, &mut header, data.as_mut_ptr()) };
    ret != 0 || data.iter().any(|d| d.permitted != 0)
}

/// Drops every capability for good. The command runs as its user's own uid; for root that is
/// uid 0 of the namespace, which exec would otherwise fill with capabilities again, so the
/// securebits forbid that first, then the bounding and ambient sets and the current sets are
/// emptied.
fn drop_capabilities() -> io::Result<()> {
    let last_cap: u32 = std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(40);
    let securebits = libc::SECBIT_NOROOT
        | libc::SECBIT_NOROOT_LOCKED
        | libc::SECBIT_NO_SETUID_FIXUP
        | libc::SECBIT_NO_SETUID_FIXUP_LOCKED
        | libc::SECBIT_KEEP_CAPS_LOCKED;
    // SAFETY: prctl and capset with valid arguments.
    unsafe {
        // Setting securebits needs CAP_SETPCAP: a process without any capability (an
        // unprivileged user in the landlock tier) has none to regain by exec either.
        if libc::prctl(libc::PR_SET_SECUREBITS, securebits as libc::c_ulong) < 0
            && has_capabilities()
        {
            return Err(io::Error::last_os_error());
        }
        for cap in 0..=last_cap {
            libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong);
        }
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
            0,
            0,
            0,
        );
        let mut header = CapHeader {
            version: LINUX_CAPABILITY_VERSION_3,
            pid: 0,
        };
        let data = [CapData {
            effective: 0,
            permitted: 0,
            inheritable: 0,
        }; 2];
        if libc::syscall(libc::SYS_capset, &mut header, data.as_ptr()) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}
