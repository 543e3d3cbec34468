//! The connect supervisor: decides, for every `connect` a command makes, whether it may
//! reach that socket, and makes the connection itself.
//!
//! A read-only mount does not stop `connect(2)` on a Unix socket, landlock does not cover
//! it, and a seccomp filter cannot read the address (it is behind a pointer). So the
//! command's `connect` calls are handed, by a user-notification filter (`seccomp.rs`), to
//! this supervisor, which runs in the namespace's init (in the sandbox's mount namespace,
//! outside the filter). For each call it copies the address out of the caller's memory and
//! takes a duplicate of the caller's socket (`pidfd_getfd`); then:
//!
//! - a path-named Unix socket is opened (`O_PATH`, resolved from the caller's working
//!   folder, as the kernel would) and allowed only if it lies on one of the mounts the
//!   sandbox made writable (the workspace or its snapshot, /tmp, /dev/shm, paths granted
//!   writable): a socket the command could have bound itself. Every host socket (the Docker
//!   daemon's, D-Bus and systemd's buses, ssh-agent, gpg-agent, anything under `$HOME`) is on
//!   the read-only mounts of the host's tree and is refused with EACCES. The connection is
//!   then made to `/proc/self/fd/N` of that very inode, so nothing the command renames
//!   meanwhile can swap the socket checked for another;
//! - an abstract Unix socket is allowed when the run has a network namespace of its own
//!   (abstract names are per network namespace) or landlock scopes them (ABI 6); otherwise
//!   refused;
//! - any other family is connected as asked (the namespace and the main filter already
//!   decide what it can reach).
//!
//! The supervisor never lets the kernel continue the caller's own call
//! (`SECCOMP_USER_NOTIF_FLAG_CONTINUE` would re-read the address after the check, which
//! another thread of the caller could have changed): it connects its duplicate, which is the
//! caller's socket, with the address it checked, and answers with that result. A connect that
//! may block (a blocking socket) is made on a thread of its own, so one slow peer stalls no
//! other caller.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Connections handled on threads at once; past it they are handled in turn.
const MAX_THREADS: usize = 64;

/// The largest address copied (a `sockaddr_storage`).
const MAX_ADDRESS: usize = 128;

/// What the supervisor allows.
#[derive(Clone, Debug)]
pub(crate) struct Policy {
    /// Mount ids (`statx`'s `stx_mnt_id`) of the sandbox's writable trees.
    pub mounts: Vec<u64>,
    /// Whether abstract Unix sockets are scoped (own network namespace, or landlock ABI 6).
    pub abstract_scoped: bool,
}

pub(crate) struct Supervisor {
    listener: OwnedFd,
    policy: Arc<Policy>,
    threads: Arc<AtomicUsize>,
    /// The kernel's size of `struct seccomp_notif` (it may be larger than libc's).
    notif_size: usize,
}

/// The mount id of `path`.
pub(crate) fn mount_id(path: &std::path::Path) -> io::Result<u64> {
    let statx = rustix::fs::statx(
        rustix::fs::CWD,
        path,
        rustix::fs::AtFlags::empty(),
        rustix::fs::StatxFlags::MNT_ID,
    )?;
    Ok(statx.stx_mnt_id)
}

impl Supervisor {
    pub(crate) fn new(listener: OwnedFd, policy: Policy) -> Self {
        let mut sizes: libc::seccomp_notif_sizes =
            // SAFETY: a plain C struct of integers.
            unsafe { std::mem::zeroed() };
        // SAFETY: SECCOMP_GET_NOTIF_SIZES fills the struct passed.
        let got = unsafe {
            libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_GET_NOTIF_SIZES,
                0,
                &mut sizes as *mut libc::seccomp_notif_sizes,
            )
        };
        let notif_size = if got == 0 {
            usize::from(sizes.seccomp_notif).max(std::mem::size_of::<libc::seccomp_notif>())
        } else {
            std::mem::size_of::<libc::seccomp_notif>()
        };
        Self {
            listener,
            policy: Arc::new(policy),
            threads: Arc::new(AtomicUsize::new(0)),
            notif_size,
        }
    }

    pub(crate) fn fd(&self) -> RawFd {
        self.listener.as_raw_fd()
    }

    /// Receives one notification (the listener is readable) and answers it, here or on a
    /// thread. A notification that vanished (its caller was killed) is no error.
    pub(crate) fn handle_one(&self) {
        // u64s so the buffer is aligned for the struct.
        let mut buf = vec![0u64; self.notif_size.div_ceil(8)];
        // SAFETY: the buffer is at least as large as the kernel's seccomp_notif and zeroed,
        // as NOTIF_RECV requires.
        let received = unsafe {
            libc::ioctl(
                self.listener.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_RECV,
                buf.as_mut_ptr(),
            )
        };
        if received < 0 {
            return;
        }
        // SAFETY: the kernel filled the struct's prefix, which is libc's seccomp_notif.
        let notif: libc::seccomp_notif = unsafe { std::ptr::read(buf.as_ptr().cast()) };
        let Ok(socket) = take_socket(&notif) else {
            // The caller is gone or its descriptor was closed: let its call fail as such.
            respond(self.listener.as_raw_fd(), notif.id, Err(libc::EBADF));
            return;
        };
        let Some(address) = read_address(&notif) else {
            respond(self.listener.as_raw_fd(), notif.id, Err(libc::EFAULT));
            return;
        };
        // Only now is the copy known to be the caller's (not a recycled pid's memory).
        if !id_valid(self.listener.as_raw_fd(), notif.id) {
            return;
        }
        let listener = self.listener.as_raw_fd();
        let policy = Arc::clone(&self.policy);
        let blocking = is_blocking(&socket);
        let pid = notif.pid;
        if blocking && self.threads.load(Ordering::Relaxed) < MAX_THREADS {
            self.threads.fetch_add(1, Ordering::Relaxed);
            let threads = Arc::clone(&self.threads);
            // The listener outlives every thread: the init ends (and the threads with it)
            // only after its loop, which holds the listener, returns.
            let spawned = std::thread::Builder::new()
                .stack_size(64 << 10)
                .spawn(move || {
                    let result = connect(&policy, pid, &socket, &address);
                    respond(listener, notif.id, result);
                    threads.fetch_sub(1, Ordering::Relaxed);
                });
            if spawned.is_err() {
                self.threads.fetch_sub(1, Ordering::Relaxed);
                respond(listener, notif.id, Err(libc::EAGAIN));
            }
        } else {
            let result = connect(&policy, pid, &socket, &address);
            respond(listener, notif.id, result);
        }
    }
}

/// A duplicate of the socket the caller passed.
fn take_socket(notif: &libc::seccomp_notif) -> io::Result<OwnedFd> {
    // SAFETY: pidfd_open of a pid, no pointers.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, notif.pid as libc::pid_t, 0) };
    if pidfd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: pidfd_open returned a fresh descriptor we now own.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd as RawFd) };
    // SAFETY: pidfd_getfd with the caller's descriptor number, no pointers.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_pidfd_getfd,
            pidfd.as_raw_fd(),
            notif.data.args[0] as RawFd,
            0,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: pidfd_getfd returned a fresh descriptor we now own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// The address the caller passed, copied out of its memory.
fn read_address(notif: &libc::seccomp_notif) -> Option<Vec<u8>> {
    let length = (notif.data.args[2] as usize).min(MAX_ADDRESS);
    let mut out = vec![0u8; length];
    if length == 0 {
        return Some(out);
    }
    let local = libc::iovec {
        iov_base: out.as_mut_ptr().cast(),
        iov_len: length,
    };
    let remote = libc::iovec {
        iov_base: notif.data.args[1] as usize as *mut libc::c_void,
        iov_len: length,
    };
    // SAFETY: one local iovec over `out`, one remote iovec in the caller's address space
    // (the kernel checks it).
    let read =
        unsafe { libc::process_vm_readv(notif.pid as libc::pid_t, &local, 1, &remote, 1, 0) };
    (read == length as isize).then_some(out)
}

fn id_valid(listener: RawFd, id: u64) -> bool {
    let mut id = id;
    // SAFETY: NOTIF_ID_VALID reads a u64.
    unsafe { libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_ID_VALID, &mut id) == 0 }
}

fn is_blocking(socket: &OwnedFd) -> bool {
    // SAFETY: F_GETFL on a descriptor we own.
    let flags = unsafe { libc::fcntl(socket.as_raw_fd(), libc::F_GETFL) };
    flags >= 0 && flags & libc::O_NONBLOCK == 0
}

fn respond(listener: RawFd, id: u64, result: Result<i64, i32>) {
    let mut response = libc::seccomp_notif_resp {
        id,
        val: 0,
        error: 0,
        flags: 0,
    };
    match result {
        Ok(value) => response.val = value,
        Err(errno) => response.error = -errno,
    }
    // SAFETY: NOTIF_SEND reads the response; a vanished caller only makes it fail.
    unsafe { libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_SEND, &mut response) };
}

/// Decides and, if allowed, connects `socket` (the caller's, duplicated) to `address`.
fn connect(policy: &Policy, pid: u32, socket: &OwnedFd, address: &[u8]) -> Result<i64, i32> {
    let family = address
        .get(..2)
        .map(|b| u16::from_ne_bytes([b[0], b[1]]) as i32);
    if family != Some(libc::AF_UNIX) {
        return raw_connect(socket, address);
    }
    let path = &address[2..];
    if path.is_empty() {
        return raw_connect(socket, address);
    }
    if path[0] == 0 {
        return if policy.abstract_scoped {
            raw_connect(socket, address)
        } else {
            Err(libc::EACCES)
        };
    }
    let end = path.iter().position(|&b| b == 0).unwrap_or(path.len());
    let path = std::ffi::OsStr::from_bytes(&path[..end]);
    let opened = open_socket(pid, std::path::Path::new(path))?;
    let allowed = rustix::fs::statx(
        &opened,
        "",
        rustix::fs::AtFlags::EMPTY_PATH,
        rustix::fs::StatxFlags::MNT_ID,
    )
    .is_ok_and(|statx| policy.mounts.contains(&statx.stx_mnt_id));
    if !allowed {
        return Err(libc::EACCES);
    }
    let through = format!("/proc/self/fd/{}", opened.as_raw_fd());
    let mut checked = vec![0u8; 2];
    checked.copy_from_slice(&address[..2]);
    checked.extend_from_slice(through.as_bytes());
    checked.push(0);
    raw_connect(socket, &checked)
}

use std::os::unix::ffi::OsStrExt;

/// Opens the socket `path` names as the caller would reach it (relative paths from its
/// working folder), without any access to it; anything but a socket is refused.
fn open_socket(pid: u32, path: &std::path::Path) -> Result<OwnedFd, i32> {
    let base: PathBuf = if path.is_absolute() {
        PathBuf::from("/")
    } else {
        PathBuf::from(format!("/proc/{pid}/cwd"))
    };
    let base = rustix::fs::open(
        &base,
        rustix::fs::OFlags::PATH | rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )
    .map_err(|errno| errno.raw_os_error())?;
    let opened = rustix::fs::openat(
        &base,
        path,
        rustix::fs::OFlags::PATH | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )
    .map_err(|errno| errno.raw_os_error())?;
    let stat = rustix::fs::fstat(&opened).map_err(|errno| errno.raw_os_error())?;
    if rustix::fs::FileType::from_raw_mode(stat.st_mode) != rustix::fs::FileType::Socket {
        return Err(libc::ECONNREFUSED);
    }
    Ok(opened)
}

fn raw_connect(socket: &OwnedFd, address: &[u8]) -> Result<i64, i32> {
    // SAFETY: connect with a buffer of the length given.
    let ret = unsafe {
        libc::connect(
            socket.as_raw_fd(),
            address.as_ptr().cast(),
            address.len() as libc::socklen_t,
        )
    };
    if ret < 0 {
        Err(io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO))
    } else {
        Ok(0)
    }
}
