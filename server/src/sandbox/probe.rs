//! Which isolation primitives this machine offers, found by trying each one cheaply in a
//! throw-away child process (never by reading configuration files, which can lie: securityfs
//! may be unmounted while landlock works). `wright doctor` reports them, and tests skip a
//! promise only when its primitive is reported unavailable here.

// host paths: /proc, /sys and the kernel's interfaces, to tell what the machine allows.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use super::cgroup;

/// One primitive: available or not, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Primitive {
    pub name: &'static str,
    pub available: bool,
    pub detail: String,
}

/// Probes every primitive. `scratch` is a folder for the overlay probe's layers (it is
/// created and removed again), on the file system snapshots will use.
pub fn probe_all(scratch: &Path) -> Vec<Primitive> {
    let userns = user_namespaces();
    let overlay = if userns.available {
        overlay_in_user_namespace(scratch)
    } else {
        Primitive {
            name: "overlayfs",
            available: false,
            detail: "needs user namespaces".to_owned(),
        }
    };
    let cgroups = cgroup::Support::detect();
    vec![
        userns,
        overlay,
        landlock(),
        seccomp(),
        Primitive {
            name: "cgroups",
            available: !matches!(cgroups, cgroup::Support::Unavailable { .. }),
            detail: cgroups.describe(),
        },
    ]
}

/// Runs `body` in a forked child and returns its exit code. The body may only make system
/// calls on data prepared before the fork (the parent may have other threads).
fn in_child(body: impl FnOnce() -> i32) -> io::Result<i32> {
    // SAFETY: the child runs only `body`, which makes raw system calls, then _exits.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    if pid == 0 {
        let code = body();
        // SAFETY: leaving the child without running the parent's exit handlers.
        unsafe { libc::_exit(code) }
    }
    let mut status = 0;
    // SAFETY: waiting for our own child.
    if unsafe { libc::waitpid(pid, &mut status, 0) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        255
    })
}

fn errno() -> i32 {
    io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(255)
        .min(254)
}

fn describe_errno(code: i32) -> String {
    io::Error::from_raw_os_error(code).to_string()
}

/// Writes `text` to `path` with raw calls (safe after fork).
fn write_raw(path: &CString, text: &CString) -> bool {
    // SAFETY: valid C strings; raw calls only.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY);
        if fd < 0 {
            return false;
        }
        let bytes = text.as_bytes();
        let ok = libc::write(fd, bytes.as_ptr().cast(), bytes.len()) == bytes.len() as isize;
        libc::close(fd);
        ok
    }
}

fn user_namespaces() -> Primitive {
    match namespace_refusal() {
        None => Primitive {
            name: "user namespaces",
            available: true,
            detail: "user, mount, pid and network namespaces can be created, with the \
                     capabilities to build a mount tree in them"
                .to_owned(),
        },
        Some(why) => Primitive {
            name: "user namespaces",
            available: false,
            detail: why,
        },
    }
}

/// Why the sandbox's namespaces cannot be made here (the cause, and the remedy), or `None`
/// when they can. Tried once per process in a throw-away child: unsharing them, mapping the
/// user, and one mount, which is what fails where AppArmor lets an unprivileged program
/// create a user namespace but gives it no capabilities in it (Ubuntu 23.10 and later).
pub fn namespace_refusal() -> Option<String> {
    static REFUSAL: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    REFUSAL.get_or_init(try_namespaces).clone()
}

/// Which isolation commands get here, for `wright doctor`: its name, what it keeps, and what
/// it does not promise.
pub struct TierReport {
    pub tier: &'static str,
    pub detail: String,
    pub not_promised: Vec<&'static str>,
}

/// What the landlock tier cannot give.
pub const LANDLOCK_TIER_GAPS: &[&str] = &[
    "a private /tmp (the run gets a private folder under the host's, as TMPDIR)",
    "a pid namespace (commands see the host's processes; landlock ABI 6 keeps signals and \
     ptrace within the run)",
    "snapshots (editor sessions' commands need one and are refused)",
    "a private loopback (loopback permission means no network)",
    "read-only .git, .wright and sandbox.protected in place",
    "Unix sockets beyond socketpair's",
];

/// The tier runs get, given whether the user allowed the landlock tier.
pub fn tier_report(fallback_allowed: bool) -> TierReport {
    match namespace_refusal() {
        None => TierReport {
            tier: "namespaces",
            detail: "user, mount, pid, ipc, uts and network namespaces, landlock, seccomp \
                     with every connect supervised, cgroups where available"
                .to_owned(),
            not_promised: Vec::new(),
        },
        Some(why) if fallback_allowed => TierReport {
            tier: "landlock",
            detail: format!(
                "sandbox.fallback = \"landlock\" (namespaces refused: {why}): writes confined \
                 to the workspace and the run's own temporary folder, no network, no host \
                 socket, credential stores unreadable"
            ),
            not_promised: LANDLOCK_TIER_GAPS.to_vec(),
        },
        Some(why) => TierReport {
            tier: "none",
            detail: format!("commands are refused: {why}"),
            not_promised: Vec::new(),
        },
    }
}

/// Where the AppArmor profile that lets wright make its namespaces is kept in the repository.
pub const APPARMOR_PROFILE: &str = "server/packaging/apparmor.d/wright";

fn try_namespaces() -> Option<String> {
    let flags = libc::CLONE_NEWUSER | libc::CLONE_NEWNS | libc::CLONE_NEWPID | libc::CLONE_NEWNET;
    // SAFETY: getuid/getgid cannot fail.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    let uid_map = CString::new(format!("{uid} {uid} 1")).unwrap_or_default();
    let gid_map = CString::new(format!("{gid} {gid} 1")).unwrap_or_default();
    let deny = CString::new("deny").unwrap_or_default();
    let paths = (
        CString::new("/proc/self/setgroups").unwrap_or_default(),
        CString::new("/proc/self/uid_map").unwrap_or_default(),
        CString::new("/proc/self/gid_map").unwrap_or_default(),
    );
    // Exit codes: 0 works; 1..=99 unshare's errno; 100 + errno a failed map or mount.
    let result = in_child(|| {
        // SAFETY: raw calls on strings prepared before the fork.
        unsafe {
            if libc::unshare(flags) != 0 {
                return errno().min(99);
            }
            if !(write_raw(&paths.0, &deny)
                && write_raw(&paths.1, &uid_map)
                && write_raw(&paths.2, &gid_map))
            {
                return 100 + errno().min(99);
            }
            if libc::mount(
                c"none".as_ptr(),
                c"/".as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ) != 0
            {
                return 100 + errno().min(99);
            }
        }
        0
    });
    let apparmor =
        std::fs::read_to_string("/proc/sys/kernel/apparmor_restrict_unprivileged_userns")
            .is_ok_and(|v| v.trim() == "1");
    let remedy_apparmor = format!(
        "AppArmor restricts unprivileged user namespaces here \
         (kernel.apparmor_restrict_unprivileged_userns = 1): install the profile shipped in \
         wright's repository, {APPARMOR_PROFILE}, with the path of your wright binary in it \
         (`sudo install -m 644 {APPARMOR_PROFILE} /etc/apparmor.d/wright && sudo \
         apparmor_parser -r /etc/apparmor.d/wright`), or allow the weaker landlock tier with \
         sandbox.fallback = \"landlock\""
    );
    let sysctl = |name: &str| {
        std::fs::read_to_string(name)
            .ok()
            .map(|v| v.trim().to_owned())
    };
    match result {
        Ok(0) => None,
        Ok(code) => {
            let (step, errno) = if code >= 100 {
                ("mapping the user or mounting in it", code - 100)
            } else {
                ("unshare", code)
            };
            let cause = if apparmor {
                remedy_apparmor
            } else if sysctl("/proc/sys/user/max_user_namespaces").as_deref() == Some("0") {
                "user.max_user_namespaces is 0 (raise it, or allow the weaker landlock tier \
                 with sandbox.fallback = \"landlock\")"
                    .to_owned()
            } else if sysctl("/proc/sys/kernel/unprivileged_userns_clone").as_deref() == Some("0") {
                "kernel.unprivileged_userns_clone is 0 (set it to 1, or allow the weaker \
                 landlock tier with sandbox.fallback = \"landlock\")"
                    .to_owned()
            } else {
                "a container or a hardened kernel refuses them (run wright where user \
                 namespaces are allowed, or allow the weaker landlock tier with \
                 sandbox.fallback = \"landlock\")"
                    .to_owned()
            };
            Some(format!("{step} failed: {}; {cause}", describe_errno(errno)))
        }
        Err(err) => Some(format!("could not fork a probe: {err}")),
    }
}

/// Mounts a throw-away overlay in a throw-away user namespace, with its layers in `scratch`.
fn overlay_in_user_namespace(scratch: &Path) -> Primitive {
    let unavailable = |detail: String| Primitive {
        name: "overlayfs",
        available: false,
        detail,
    };
    let dir = scratch.join(format!("probe-{}", std::process::id()));
    let made = ["lower", "upper", "work", "merged"]
        .iter()
        .try_for_each(|d| std::fs::create_dir_all(dir.join(d)));
    if let Err(err) = made {
        return unavailable(format!(
            "cannot make probe folders in {}: {err}",
            scratch.display()
        ));
    }
    let c = |p: &Path| CString::new(p.as_os_str().as_bytes()).unwrap_or_default();
    let merged = c(&dir.join("merged"));
    let options = CString::new(format!(
        "lowerdir={},upperdir={},workdir={},userxattr",
        dir.join("lower").display(),
        dir.join("upper").display(),
        dir.join("work").display()
    ))
    .unwrap_or_default();
    // SAFETY: getuid/getgid cannot fail.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    let uid_map = CString::new(format!("{uid} {uid} 1")).unwrap_or_default();
    let gid_map = CString::new(format!("{gid} {gid} 1")).unwrap_or_default();
    let deny = CString::new("deny").unwrap_or_default();
    let paths = (
        CString::new("/proc/self/setgroups").unwrap_or_default(),
        CString::new("/proc/self/uid_map").unwrap_or_default(),
        CString::new("/proc/self/gid_map").unwrap_or_default(),
    );
    let result = in_child(|| {
        // SAFETY: raw calls on strings prepared before the fork.
        unsafe {
            if libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS) != 0 {
                return errno();
            }
            if !(write_raw(&paths.0, &deny)
                && write_raw(&paths.1, &uid_map)
                && write_raw(&paths.2, &gid_map))
            {
                return errno();
            }
            if libc::mount(
                c"overlay".as_ptr(),
                merged.as_ptr(),
                c"overlay".as_ptr(),
                0,
                options.as_ptr().cast(),
            ) != 0
            {
                return errno();
            }
        }
        0
    });
    let _ = super::snapshot::remove_tree(&dir);
    match result {
        Ok(0) => Primitive {
            name: "overlayfs",
            available: true,
            detail: format!(
                "snapshots mount in a user namespace (upper layers in {})",
                scratch.display()
            ),
        },
        Ok(code) => unavailable(format!(
            "mounting an overlay in a user namespace failed: {} (snapshots fall back to \
             reflink copies where the file system supports them)",
            describe_errno(code)
        )),
        Err(err) => unavailable(format!("could not fork a probe: {err}")),
    }
}

const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;

fn landlock() -> Primitive {
    // SAFETY: the documented version query: no ruleset, size 0.
    let abi = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    if abi > 0 {
        return Primitive {
            name: "landlock",
            available: true,
            detail: format!("ABI {abi}"),
        };
    }
    let why = match io::Error::last_os_error().raw_os_error() {
        Some(libc::ENOSYS) => "the kernel is built without landlock".to_owned(),
        Some(libc::EOPNOTSUPP) => {
            "landlock is disabled (add it to the lsm= boot parameter)".to_owned()
        }
        _ => io::Error::last_os_error().to_string(),
    };
    Primitive {
        name: "landlock",
        available: false,
        detail: why,
    }
}

const SECCOMP_GET_ACTION_AVAIL: libc::c_uint = 2;
const SECCOMP_RET_ERRNO: u32 = 0x0005_0000;

fn seccomp() -> Primitive {
    let action = SECCOMP_RET_ERRNO;
    // SAFETY: asks whether the ERRNO action is available; reads a u32.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            SECCOMP_GET_ACTION_AVAIL,
            0u32,
            &action as *const u32,
        )
    };
    if ret == 0 {
        Primitive {
            name: "seccomp",
            available: true,
            detail: "filters with the errno action".to_owned(),
        }
    } else {
        Primitive {
            name: "seccomp",
            available: false,
            detail: io::Error::last_os_error().to_string(),
        }
    }
}
