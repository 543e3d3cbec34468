//! The seccomp filter every sandboxed command runs under: sockets other than Unix ones (unless
//! loopback or the host's network is allowed), and the calls that reach past the sandbox's namespaces (tracing,
//! mounting, kernel keyrings, BPF, module loading, rebooting…), fail with EPERM.
//!
//! The filter is a second wall: namespaces and landlock already confine what these calls could
//! reach, but a refused call is one fewer kernel surface to trust.

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

/// Socket families a command may open.
fn allowed_families(network: Network) -> &'static [libc::c_int] {
    match network {
        Network::Off => &[libc::AF_UNIX],
        Network::Loopback => &[libc::AF_UNIX, libc::AF_INET, libc::AF_INET6],
        Network::Host => &[
            libc::AF_UNIX,
            libc::AF_INET,
            libc::AF_INET6,
            libc::AF_NETLINK,
        ],
    }
}

/// Compiles the filter for this machine's architecture. An architecture mismatch (a 32-bit
/// call on a 64-bit kernel) kills the process: those calls bypass the numbers checked here.
pub(crate) fn compile(network: Network) -> Result<Program, seccompiler::BackendError> {
    let arch = TargetArch::try_from(std::env::consts::ARCH)?;
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> =
        REFUSED.iter().map(|&call| (call, Vec::new())).collect();
    // A socket call matches (and is refused) when its family is none of the allowed ones.
    let conditions = |argument| -> Result<Vec<SeccompCondition>, seccompiler::BackendError> {
        allowed_families(network)
            .iter()
            .map(|&family| {
                SeccompCondition::new(
                    argument,
                    SeccompCmpArgLen::Dword,
                    SeccompCmpOp::Ne,
                    family as u64,
                )
            })
            .collect()
    };
    for call in [libc::SYS_socket, libc::SYS_socketpair] {
        rules.insert(call, vec![SeccompRule::new(conditions(0)?)?]);
    }
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )?;
    filter.try_into()
}

/// On x86_64, x32 system calls carry the same architecture tag with bit 30 set in their
/// number, so a filter keyed on numbers (as seccompiler's is) never matches them. This second
/// filter refuses every x32 call (wright's commands are 64-bit; kernels rarely enable x32).
#[cfg(target_arch = "x86_64")]
pub(crate) fn x32_guard() -> Program {
    const LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
    const JEQ_K: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
    const JGE_K: u16 = 0x35; // BPF_JMP | BPF_JGE | BPF_K
    const RET_K: u16 = 0x06; // BPF_RET | BPF_K
    const AUDIT_ARCH_X86_64: u32 = 62 | 0x8000_0000 | 0x4000_0000;
    const X32_SYSCALL_BIT: u32 = 0x4000_0000;
    const RET_ERRNO: u32 = 0x0005_0000;
    const RET_ALLOW: u32 = 0x7fff_0000;
    let op = |code, jt, jf, k| seccompiler::sock_filter { code, jt, jf, k };
    vec![
        op(LD_W_ABS, 0, 0, 4), // seccomp_data.arch
        op(JEQ_K, 0, 3, AUDIT_ARCH_X86_64),
        op(LD_W_ABS, 0, 0, 0), // seccomp_data.nr
        op(JGE_K, 0, 1, X32_SYSCALL_BIT),
        op(RET_K, 0, 0, RET_ERRNO | libc::EPERM as u32),
        op(RET_K, 0, 0, RET_ALLOW),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filter_compiles_with_and_without_network() {
        let closed = compile(Network::Off).unwrap();
        let open = compile(Network::Host).unwrap();
        assert!(!closed.is_empty());
        // Allowing more families adds conditions to the socket rules.
        assert!(open.len() > closed.len());
    }
}
