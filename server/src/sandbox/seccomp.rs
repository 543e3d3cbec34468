//! The seccomp filters every sandboxed command runs under.
//!
//! The main filter (seccompiler's) refuses with EPERM: sockets other than Unix ones (unless
//! loopback or the host's network is allowed) and netlink ones other than `NETLINK_ROUTE`
//! (interface listing; never netfilter), Unix datagram sockets (whose `sendmsg` can name any
//! path, which no filter can read), the calls that reach past the sandbox's namespaces
//! (tracing, mounting, kernel keyrings, BPF, module loading, rebooting…), namespace changes
//! (`unshare`, `setns`, and `clone` with any `CLONE_NEW*` flag: a nested user namespace would
//! hand the command every capability over its own mounts and nf_tables), and a second
//! seccomp listener (which could answer the connect supervisor's calls in its place). The
//! hand-written guard answers `clone3` with ENOSYS (its flags are behind a pointer no filter
//! can read; libc then falls back to `clone`, whose flags the main filter checks) and refuses
//! x32 calls. The connect filter hands every `connect` to the supervisor in the init
//! (`supervisor.rs`).
//!
//! The filters are a second wall: namespaces and landlock already confine what these calls
//! could reach, but a refused call is one fewer kernel surface to trust.

use std::collections::BTreeMap;

use super::Network;
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

pub(crate) type Program = BpfProgram;

/// Refused outright, whatever their arguments.
const REFUSED: &[libc::c_long] = &[
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_chroot,
    libc::SYS_open_tree,
    libc::SYS_move_mount,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_mount_setattr,
    libc::SYS_unshare,
    libc::SYS_setns,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_reboot,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_acct,
    libc::SYS_syslog,
    libc::SYS_quotactl,
    libc::SYS_userfaultfd,
    libc::SYS_open_by_handle_at,
    // io_uring can open sockets without the socket() call this filter inspects.
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_settimeofday,
    libc::SYS_clock_settime,
    libc::SYS_clock_adjtime,
    libc::SYS_adjtimex,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_iopl,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_ioperm,
];

/// Socket families a command may open (netlink only as `NETLINK_ROUTE`, see `compile`).
fn allowed_families(network: Network) -> &'static [libc::c_int] {
    match network {
        Network::Off => &[libc::AF_UNIX, libc::AF_NETLINK],
        Network::Loopback | Network::Host => &[
            libc::AF_UNIX,
            libc::AF_INET,
            libc::AF_INET6,
            libc::AF_NETLINK,
        ],
    }
}

/// The flags of `clone` that make a new namespace (`CLONE_NEWTIME` shares its bit with the
/// exit signal and is valid only in `unshare` and `clone3`, both refused anyway).
const CLONE_NAMESPACES: &[libc::c_int] = &[
    libc::CLONE_NEWNS,
    libc::CLONE_NEWCGROUP,
    libc::CLONE_NEWUTS,
    libc::CLONE_NEWIPC,
    libc::CLONE_NEWUSER,
    libc::CLONE_NEWPID,
    libc::CLONE_NEWNET,
];

/// Where the command runs, which decides how Unix sockets are confined.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Sockets {
    /// In the sandbox's namespaces: every `connect` goes through the supervisor, which lets
    /// through only sockets on the sandbox's own mounts.
    Supervised,
    /// Without namespaces (the landlock tier): there is no mount of the sandbox's own to tell
    /// its sockets from the host's, so a command gets no Unix socket but `socketpair`'s.
    PairsOnly,
}

/// Compiles the main filter for this machine's architecture. An architecture mismatch (a
/// 32-bit call on a 64-bit kernel) kills the process: those calls bypass the numbers
/// checked here.
pub(crate) fn compile(
    network: Network,
    sockets: Sockets,
) -> Result<Program, seccompiler::BackendError> {
    use SeccompCmpArgLen::{Dword, Qword};
    let arch = TargetArch::try_from(std::env::consts::ARCH)?;
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> =
        REFUSED.iter().map(|&call| (call, Vec::new())).collect();
    let condition =
        |argument, length, op, value: u64| SeccompCondition::new(argument, length, op, value);
    for call in [libc::SYS_socket, libc::SYS_socketpair] {
        // Refused when its family is none of the allowed ones…
        let family = allowed_families(network)
            .iter()
            .map(|&family| condition(0, Dword, SeccompCmpOp::Ne, family as u64))
            .collect::<Result<Vec<_>, _>>()?;
        let mut call_rules = vec![
            SeccompRule::new(family)?,
            // …when it is netlink other than NETLINK_ROUTE (protocol 0)…
            SeccompRule::new(vec![
                condition(0, Dword, SeccompCmpOp::Eq, libc::AF_NETLINK as u64)?,
                condition(2, Dword, SeccompCmpOp::Ne, libc::NETLINK_ROUTE as u64)?,
            ])?,
            // …and when it is a Unix datagram socket (the low bits of the type; the high ones
            // are SOCK_CLOEXEC and SOCK_NONBLOCK).
            SeccompRule::new(vec![
                condition(0, Dword, SeccompCmpOp::Eq, libc::AF_UNIX as u64)?,
                condition(
                    1,
                    Dword,
                    SeccompCmpOp::MaskedEq(0xf),
                    libc::SOCK_DGRAM as u64,
                )?,
            ])?,
        ];
        if sockets == Sockets::PairsOnly && call == libc::SYS_socket {
            call_rules.push(SeccompRule::new(vec![condition(
                0,
                Dword,
                SeccompCmpOp::Eq,
                libc::AF_UNIX as u64,
            )?])?);
        }
        rules.insert(call, call_rules);
    }
    rules.insert(
        libc::SYS_clone,
        CLONE_NAMESPACES
            .iter()
            .map(|&flag| {
                SeccompRule::new(vec![condition(
                    0,
                    Qword,
                    SeccompCmpOp::MaskedEq(flag as u64),
                    flag as u64,
                )?])
            })
            .collect::<Result<Vec<_>, _>>()?,
    );
    rules.insert(
        libc::SYS_seccomp,
        vec![SeccompRule::new(vec![condition(
            1,
            Qword,
            SeccompCmpOp::MaskedEq(libc::SECCOMP_FILTER_FLAG_NEW_LISTENER),
            libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
        )?])?],
    );
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )?;
    filter.try_into()
}

const LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
const JEQ_K: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
const JGE_K: u16 = 0x35; // BPF_JMP | BPF_JGE | BPF_K
const RET_K: u16 = 0x06; // BPF_RET | BPF_K
const RET_ERRNO: u32 = 0x0005_0000;
const RET_ALLOW: u32 = 0x7fff_0000;
/// `offsetof(struct seccomp_data, nr)` and `arch`.
const DATA_NR: u32 = 0;
const DATA_ARCH: u32 = 4;

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 62 | 0x8000_0000 | 0x4000_0000;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 183 | 0x8000_0000 | 0x4000_0000;

fn op(code: u16, jt: u8, jf: u8, k: u32) -> seccompiler::sock_filter {
    seccompiler::sock_filter { code, jt, jf, k }
}

/// The hand-written guard: `clone3` answered with ENOSYS, so libc falls back to `clone`,
/// whose flags the main filter can read; on x86_64, x32 calls (the same architecture tag
/// with bit 30 set in the number, which a filter keyed on numbers never matches) refused.
/// Other architectures are left to the main filter, which kills them.
pub(crate) fn guard() -> Program {
    #[cfg(target_arch = "x86_64")]
    const X32_SYSCALL_BIT: u32 = 0x4000_0000;
    let clone3 = libc::SYS_clone3 as u32;
    let mut program = vec![
        op(LD_W_ABS, 0, 0, DATA_ARCH),
        // Not this architecture: the main filter decides.
        op(JEQ_K, 1, 0, AUDIT_ARCH),
        op(RET_K, 0, 0, RET_ALLOW),
        op(LD_W_ABS, 0, 0, DATA_NR),
        op(JEQ_K, 0, 1, clone3),
        op(RET_K, 0, 0, RET_ERRNO | libc::ENOSYS as u32),
    ];
    #[cfg(target_arch = "x86_64")]
    program.extend([
        op(JGE_K, 0, 1, X32_SYSCALL_BIT),
        op(RET_K, 0, 0, RET_ERRNO | libc::EPERM as u32),
    ]);
    program.push(op(RET_K, 0, 0, RET_ALLOW));
    program
}

/// The connect filter: every native `connect` goes to the supervisor holding the filter's
/// listener (installed with `SECCOMP_FILTER_FLAG_NEW_LISTENER`).
pub(crate) fn connect_filter() -> Program {
    let connect = libc::SYS_connect as u32;
    vec![
        op(LD_W_ABS, 0, 0, DATA_ARCH),
        op(JEQ_K, 1, 0, AUDIT_ARCH),
        op(RET_K, 0, 0, RET_ALLOW),
        op(LD_W_ABS, 0, 0, DATA_NR),
        op(JEQ_K, 0, 1, connect),
        op(RET_K, 0, 0, libc::SECCOMP_RET_USER_NOTIF),
        op(RET_K, 0, 0, RET_ALLOW),
    ]
}

/// Installs `program` on the calling thread (no_new_privs set first, as an unprivileged
/// filter needs) with `flags`; returns what `seccomp(2)` returned (the listener's descriptor
/// with `SECCOMP_FILTER_FLAG_NEW_LISTENER`).
pub(crate) fn install(program: &Program, flags: libc::c_ulong) -> std::io::Result<i32> {
    let prog = libc::sock_fprog {
        len: program.len() as u16,
        filter: program.as_ptr().cast_mut().cast(),
    };
    // SAFETY: prctl and seccomp with valid arguments; `prog` outlives the call.
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let ret = libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            flags,
            &prog as *const libc::sock_fprog,
        );
        if ret < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(ret as i32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filter_compiles_with_and_without_network() {
        let closed = compile(Network::Off, Sockets::Supervised).unwrap();
        let open = compile(Network::Host, Sockets::Supervised).unwrap();
        assert!(!closed.is_empty());
        // Allowing more families adds conditions to the socket rules.
        assert!(open.len() > closed.len());
    }
}
