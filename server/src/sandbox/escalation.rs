//! Escalation: recognising that a command failed because the sandbox refused it something
//! (a write outside the workspace, the network, a system call, a limit), and the one
//! permission that would let it through. Widening happens only after the user approves,
//! through the agent's approval path; this module only classifies and widens a request.

use std::path::{Path, PathBuf};

use super::{Exceeded, Network, Outcome, Request};

/// What the sandbox refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// A write (or other access) to a path outside the writable trees.
    Path(PathBuf),
    /// A socket or a connection: the network is off.
    Network,
    /// A system call the seccomp filter refuses (or a SIGSYS).
    SystemCall,
    /// A resource limit.
    Limit(Exceeded),
    /// A write to `.git`, `.wright` or a `sandbox.protected` path in place (relative to the
    /// workspace).
    Protected(PathBuf),
}

/// A failed run the sandbox is responsible for, with the output line that shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub refused: Refused,
    pub evidence: String,
}

/// A permission that would let a refused command through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Widening {
    AllowNetwork,
    Writable(PathBuf),
    DoubleTimeout,
    DoubleMemory,
    DoubleProcesses,
    /// A protected path (relative to the workspace) writable for the re-run.
    Unprotect(PathBuf),
}

impl Refusal {
    /// The permission to ask the user for; `None` when no permission would help (a refused
    /// system call stays refused).
    pub fn widening(&self) -> Option<Widening> {
        match &self.refused {
            Refused::Path(path) => Some(Widening::Writable(path.clone())),
            Refused::Protected(path) => Some(Widening::Unprotect(path.clone())),
            Refused::Network => Some(Widening::AllowNetwork),
            Refused::SystemCall => None,
            Refused::Limit(Exceeded::WallTime | Exceeded::CpuTime) => Some(Widening::DoubleTimeout),
            Refused::Limit(Exceeded::Memory) => Some(Widening::DoubleMemory),
            Refused::Limit(Exceeded::Processes) => Some(Widening::DoubleProcesses),
            Refused::Limit(Exceeded::FileSize | Exceeded::Output | Exceeded::Disk) => None,
        }
    }

    /// One sentence for a human or a model.
    pub fn explain(&self) -> String {
        let what = match &self.refused {
            Refused::Path(path) => format!(
                "the sandbox refused access to {} (only the workspace and /tmp are writable)",
                path.display()
            ),
            Refused::Network => {
                "the sandbox has no network (re-run with --allow-net if the user approves)"
                    .to_owned()
            }
            Refused::SystemCall => "the sandbox refused a system call".to_owned(),
            Refused::Protected(path) => format!(
                "{} is protected: .git, .wright and the paths of sandbox.protected are \
                 read-only to commands run in place (they would run code later, outside the \
                 sandbox, or change wright's own settings)",
                path.display()
            ),
            Refused::Limit(limit) => {
                format!("the command hit the sandbox's {} limit", limit.name())
            }
        };
        format!("{what}: {}", self.evidence.trim())
    }
}

/// Applies a widening to a request, for the re-run the user approved.
pub fn widen(request: &mut Request, widening: &Widening) {
    let limits = &mut request.limits;
    match widening {
        Widening::AllowNetwork => request.permissions.network = Network::Host,
        Widening::Writable(path) => {
            // The folder that holds the refused path, so the command can also create it.
            let dir = if path.is_dir() {
                path.clone()
            } else {
                path.parent()
                    .map_or_else(|| path.clone(), Path::to_path_buf)
            };
            if !request.permissions.extra_writable.contains(&dir) {
                request.permissions.extra_writable.push(dir);
            }
        }
        Widening::DoubleTimeout => {
            limits.timeout *= 2;
            limits.cpu_seconds = limits.cpu_seconds.map(|s| s * 2);
        }
        Widening::DoubleMemory => limits.memory_bytes *= 2,
        Widening::DoubleProcesses => limits.processes *= 2,
        Widening::Unprotect(path) => request.unprotected.push(path.clone()),
    }
}

/// Network failures as C libraries and common tools word them.
const NETWORK_SIGNS: &[&str] = &[
    "Address family not supported",
    "Network is unreachable",
    "Temporary failure in name resolution",
    "Could not resolve host",
    "Name or service not known",
    "failed to lookup address",
    "nodename nor servname",
];

const PATH_SIGNS: &[&str] = &[
    "Read-only file system",
    "Permission denied",
    "Operation not permitted",
];

/// Whether `outcome` (of `request`) failed because of the sandbox, and how.
pub fn classify(request: &Request, outcome: &Outcome) -> Option<Refusal> {
    if outcome.exit_code == 0 {
        return None;
    }
    if outcome.signal == Some(libc::SIGSYS) {
        return Some(Refusal {
            refused: Refused::SystemCall,
            evidence: "killed by SIGSYS".to_owned(),
        });
    }
    if let Some(&limit) = outcome
        .exceeded
        .iter()
        .find(|e| !matches!(e, Exceeded::Output))
    {
        return Some(Refusal {
            refused: Refused::Limit(limit),
            evidence: format!("exit status {}", outcome.exit_code),
        });
    }
    let text = format!("{}\n{}", outcome.stderr.text(), outcome.stdout.text());
    for line in text.lines() {
        let network_off = request.permissions.network != Network::Host;
        if network_off && NETWORK_SIGNS.iter().any(|sign| line.contains(sign)) {
            return Some(refusal(Refused::Network, line));
        }
        if !PATH_SIGNS.iter().any(|sign| line.contains(sign)) {
            continue;
        }
        if line.contains("Read-only file system")
            && let Some(path) = protected_path(line, request)
        {
            return Some(refusal(Refused::Protected(path), line));
        }
        if let Some(path) = outside_path(line, request) {
            return Some(refusal(Refused::Path(path), line));
        }
        let lower = line.to_ascii_lowercase();
        if network_off
            && ["socket", "connect", "network", "bind"]
                .iter()
                .any(|w| lower.contains(w))
        {
            return Some(refusal(Refused::Network, line));
        }
        if line.contains("Operation not permitted") {
            return Some(refusal(Refused::SystemCall, line));
        }
    }
    None
}

fn refusal(refused: Refused, line: &str) -> Refusal {
    Refusal {
        refused,
        evidence: line.to_owned(),
    }
}

/// The protected path (`.git`, `.wright`, `sandbox.protected`) a line names, relative to
/// the workspace: the top of it, which is what is read-only.
fn protected_path(line: &str, request: &Request) -> Option<PathBuf> {
    if matches!(request.filesystem, super::Filesystem::Snapshot(_)) {
        return None;
    }
    let protected: Vec<PathBuf> = super::policy::ALWAYS_PROTECTED
        .iter()
        .map(PathBuf::from)
        .chain(request.protected.iter().cloned())
        .collect();
    words(line).find_map(|word| {
        let path = Path::new(word);
        let relative = path.strip_prefix(&request.workspace).unwrap_or(path);
        let relative = relative.strip_prefix("./").unwrap_or(relative);
        protected.iter().find(|p| relative.starts_with(p)).cloned()
    })
}

/// The words of an output line that may be paths.
fn words(line: &str) -> impl Iterator<Item = &str> {
    line.split(|c: char| c.is_whitespace() || matches!(c, '\'' | '"' | '`' | '‘' | '’' | ','))
        .map(|word| word.trim_end_matches(':'))
        .filter(|word| !word.is_empty())
}

/// The first absolute path named on the line that is outside every writable tree.
fn outside_path(line: &str, request: &Request) -> Option<PathBuf> {
    let writable = |path: &Path| {
        path.starts_with(&request.workspace)
            || path.starts_with("/tmp")
            || path.starts_with("/dev/shm")
            || request
                .permissions
                .extra_writable
                .iter()
                .any(|w| path.starts_with(w))
    };
    words(line)
        .filter(|word| word.starts_with('/') && word.len() > 1)
        .map(PathBuf::from)
        .find(|path| !writable(path))
}

#[cfg(test)]
mod tests {
    use super::super::{Captured, Isolation, Limits};
    use super::*;
    use std::time::Duration;

    fn outcome(exit_code: i32, stderr: &str) -> Outcome {
        let mut err = Captured::new(1024);
        err.push(stderr.as_bytes());
        Outcome {
            exit_code,
            signal: None,
            timed_out: false,
            cancelled: false,
            stdout: Captured::new(1024),
            stderr: err,
            duration: Duration::ZERO,
            cpu: Duration::ZERO,
            max_rss_kb: 0,
            changes: Vec::new(),
            exceeded: Vec::new(),
            isolation: Isolation {
                network: "none".into(),
                filesystem: "in-place".into(),
                pid: "namespace".into(),
                limits_enforced_by: "rlimits".into(),
                landlock: "enforced".into(),
                seccomp: "on".into(),
            },
            limits: Limits::default(),
        }
    }

    fn request() -> Request {
        Request {
            workspace: "/work/ws".into(),
            ..Request::default()
        }
    }

    #[test]
    fn a_write_outside_is_a_path_refusal_that_widens_to_its_folder() {
        let r = request();
        let o = outcome(
            1,
            "touch: cannot touch '/etc/wright': Read-only file system\n",
        );
        let refusal = classify(&r, &o).unwrap();
        assert_eq!(refusal.refused, Refused::Path("/etc/wright".into()));
        let mut widened = r.clone();
        widen(&mut widened, &refusal.widening().unwrap());
        assert_eq!(widened.permissions.extra_writable, [PathBuf::from("/etc")]);
    }

    #[test]
    fn a_write_to_git_in_place_is_a_protected_refusal_the_user_may_lift() {
        let r = request();
        for line in [
            "error: could not lock config file .git/config: Read-only file system",
            "sh: 1: cannot create /work/ws/.git/hooks/pre-commit: Read-only file system",
            "touch: cannot touch './.wright/config.toml': Read-only file system",
        ] {
            let refusal = classify(&r, &outcome(1, line)).unwrap();
            let Refused::Protected(path) = &refusal.refused else {
                panic!("{line}: {refusal:?}")
            };
            assert!(
                path == Path::new(".git") || path == Path::new(".wright"),
                "{line}"
            );
            assert!(
                refusal.explain().contains("protected"),
                "{}",
                refusal.explain()
            );
            let mut widened = r.clone();
            widen(&mut widened, &refusal.widening().unwrap());
            assert_eq!(widened.unprotected.as_slice(), std::slice::from_ref(path));
        }
        // sandbox.protected paths count too; in a snapshot nothing is protected.
        let mut with = r.clone();
        with.protected = vec![PathBuf::from("deploy")];
        let line = "cannot create deploy/key: Read-only file system";
        assert_eq!(
            classify(&with, &outcome(1, line)).unwrap().refused,
            Refused::Protected("deploy".into())
        );
    }

    #[test]
    fn network_failures_are_recognised_only_without_network() {
        let r = request();
        let o = outcome(7, "curl: (6) Could not resolve host: example.com\n");
        assert_eq!(classify(&r, &o).unwrap().refused, Refused::Network);
        let o = outcome(1, "socket: Operation not permitted\n");
        assert_eq!(
            classify(&r, &o).unwrap().widening(),
            Some(Widening::AllowNetwork)
        );
        let mut with_net = r.clone();
        with_net.permissions.network = Network::Host;
        assert_eq!(
            classify(&with_net, &o).map(|r| r.refused),
            Some(Refused::SystemCall)
        );
    }

    #[test]
    fn ordinary_failures_and_writes_inside_are_not_refusals() {
        let r = request();
        assert_eq!(
            classify(&r, &outcome(1, "test failed: expected 2, got 3\n")),
            None
        );
        let inside = outcome(1, "cp: cannot create '/work/ws/x': Permission denied\n");
        assert_eq!(classify(&r, &inside), None);
        assert_eq!(
            classify(&r, &outcome(0, "Read-only file system /etc")),
            None
        );
    }

    #[test]
    fn limits_and_sigsys_are_refusals() {
        let r = request();
        let mut o = outcome(124, "");
        o.exceeded.push(Exceeded::WallTime);
        assert_eq!(
            classify(&r, &o).unwrap().widening(),
            Some(Widening::DoubleTimeout)
        );
        let mut o = outcome(159, "");
        o.signal = Some(libc::SIGSYS);
        assert_eq!(classify(&r, &o).unwrap().refused, Refused::SystemCall);
    }
}
