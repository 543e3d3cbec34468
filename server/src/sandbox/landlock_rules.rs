//! The landlock ruleset: reading and executing anywhere but the hidden paths, writing only
//! under the workspace (unless it is read-only to the run), the extra writable paths, /tmp
//! and /dev/shm (in the landlock tier: the run's private temporary folder instead), and to
//! the few device nodes of /dev. Without
//! network permission, TCP bind and connect are refused too; signals and abstract Unix
//! sockets stay within the sandbox (ABI 6 scopes).
//!
//! In the namespace tier this is the second wall (the mount tree is the first: the hidden
//! paths are covered there, so reads are granted on `/` whole). In the landlock tier it is
//! the only file wall, and landlock can only grant, never subtract: the hidden paths are
//! kept unreadable by granting reads on everything beside them instead of on `/` — each
//! folder on the way to a hidden path is granted its own listing, and every entry in it but
//! that path is granted whole. Entries created later in those folders are not readable.
//!
//! Applied by the init after the mount tree is built (a landlocked process can no longer
//! mount) and inherited by the command. Best effort: an older kernel enforces what it knows,
//! and the status says how much that was.

use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, LandlockStatus,
    PathBeneath, PathFd, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope,
    path_beneath_rules,
};

use super::Network;
use super::spec::{HelperSpec, Tier};

/// The newest ABI whose rights this ruleset asks for.
const TARGET: ABI = ABI::V6;

/// Restricts the calling process (and its future children). Returns how far it went, and
/// whether abstract Unix sockets and signals are scoped to the sandbox (ABI 6).
pub(crate) fn restrict(spec: &HelperSpec) -> Result<(String, bool), String> {
    let mut writable = Vec::new();
    if spec.workspace_writable {
        writable.push(spec.workspace.clone());
    }
    writable.extend(spec.extra_writable.iter().cloned());
    match spec.tier {
        Tier::Namespaces => {
            writable.push("/tmp".into());
            writable.push("/dev/shm".into());
        }
        // The host's /tmp and /dev/shm are shared: only the run's own folder in it.
        Tier::Landlock => writable.extend(spec.private_tmp.iter().cloned()),
    }
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(TARGET))
        .map_err(|e| e.to_string())?;
    if spec.network == Network::Off {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(TARGET))
            .map_err(|e| e.to_string())?;
    }
    let read = AccessFs::from_read(TARGET);
    let created = ruleset
        .scope(Scope::from_all(TARGET))
        .map_err(|e| e.to_string())?
        .create()
        .map_err(|e| e.to_string())?;
    let created = match spec.tier {
        Tier::Namespaces => created
            .add_rules(path_beneath_rules(["/"], read))
            .map_err(|e| e.to_string())?,
        Tier::Landlock => {
            let mut created = created;
            for (path, access) in readable_around(&spec.hidden, read) {
                // A path that vanished meanwhile is simply not granted.
                if let Ok(fd) = PathFd::new(&path) {
                    created = created
                        .add_rule(PathBeneath::new(fd, access))
                        .map_err(|e| e.to_string())?;
                }
            }
            created
        }
    };
    let status = created
        .add_rules(path_beneath_rules(
            ["/dev"],
            read | AccessFs::WriteFile | AccessFs::IoctlDev,
        ))
        .map_err(|e| e.to_string())?
        .add_rules(path_beneath_rules(&writable, AccessFs::from_all(TARGET)))
        .map_err(|e| e.to_string())?
        .restrict_self()
        .map_err(|e| e.to_string())?;
    let scoped = matches!(
        status.landlock,
        LandlockStatus::Available { effective_abi, .. } if effective_abi >= ABI::V6
    ) && status.ruleset != RulesetStatus::NotEnforced;
    let words = match status.ruleset {
        RulesetStatus::FullyEnforced => "enforced".to_owned(),
        RulesetStatus::PartiallyEnforced => "partially enforced (older kernel)".to_owned(),
        RulesetStatus::NotEnforced => "not enforced (unsupported by the kernel)".to_owned(),
    };
    Ok((words, scoped))
}

/// The read rules that cover the whole tree but `hidden`: for each folder that holds a
/// hidden path, its listing alone, and each of its other entries whole.
fn readable_around(
    hidden: &[PathBuf],
    read: BitFlags<AccessFs>,
) -> Vec<(PathBuf, BitFlags<AccessFs>)> {
    let mut rules = Vec::new();
    walk_around(Path::new("/"), hidden, read, &mut rules);
    rules
}

fn walk_around(
    dir: &Path,
    hidden: &[PathBuf],
    read: BitFlags<AccessFs>,
    rules: &mut Vec<(PathBuf, BitFlags<AccessFs>)>,
) {
    let below: Vec<&PathBuf> = hidden.iter().filter(|h| h.starts_with(dir)).collect();
    if below.iter().any(|h| h.as_path() == dir) {
        return;
    }
    if below.is_empty() {
        rules.push((dir.to_owned(), read));
        return;
    }
    // The folder's listing: landlock grants `ReadDir` on a whole hierarchy, so the names in
    // the hidden folders below can be listed too (their files stay unreadable).
    rules.push((dir.to_owned(), AccessFs::ReadDir.into()));
    // host path: the landlock tier enumerates the host's folders around the hidden paths.
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        if is_dir {
            walk_around(&path, hidden, read, rules);
        } else if !hidden.contains(&path) {
            rules.push((path, read & file_access()));
        }
    }
}

/// The rights that apply to a file (landlock refuses folder rights on a file's rule).
fn file_access() -> BitFlags<AccessFs> {
    AccessFs::from_file(TARGET)
}
