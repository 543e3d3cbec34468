//! The landlock ruleset, the file system's second wall: reading and executing anywhere,
//! writing only under the workspace, the extra writable paths, /tmp and /dev/shm, and to the
//! few device nodes of the sandbox's /dev. Without network permission, TCP bind and connect
//! are refused too; signals and abstract Unix sockets stay within the sandbox (ABI 6 scopes).
//!
//! Applied by the init after the mount tree is built (a landlocked process can no longer
//! mount) and inherited by the command. Best effort: an older kernel enforces what it knows,
//! and the status says how much that was.

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, Ruleset, RulesetAttr,
    RulesetCreatedAttr, RulesetStatus, Scope, path_beneath_rules,
};

use super::Network;
use super::spec::HelperSpec;

/// The newest ABI whose rights this ruleset asks for.
const TARGET: ABI = ABI::V6;

/// Restricts the calling process (and its future children). Returns how far it went.
pub(crate) fn restrict(spec: &HelperSpec) -> Result<String, String> {
    let mut writable = vec![spec.workspace.clone()];
    writable.extend(spec.extra_writable.iter().cloned());
    writable.push("/tmp".into());
    writable.push("/dev/shm".into());
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(TARGET))
        .map_err(|e| e.to_string())?;
    if spec.network == Network::Off {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(TARGET))
            .map_err(|e| e.to_string())?;
    }
    let status = ruleset
        .scope(Scope::from_all(TARGET))
        .map_err(|e| e.to_string())?
        .create()
        .map_err(|e| e.to_string())?
        .add_rules(path_beneath_rules(["/"], AccessFs::from_read(TARGET)))
        .map_err(|e| e.to_string())?
        .add_rules(path_beneath_rules(
            ["/dev"],
            AccessFs::from_read(TARGET) | AccessFs::WriteFile | AccessFs::IoctlDev,
        ))
        .map_err(|e| e.to_string())?
        .add_rules(path_beneath_rules(&writable, AccessFs::from_all(TARGET)))
        .map_err(|e| e.to_string())?
        .restrict_self()
        .map_err(|e| e.to_string())?;
    Ok(match status.ruleset {
        RulesetStatus::FullyEnforced => "enforced".to_owned(),
        RulesetStatus::PartiallyEnforced => "partially enforced (older kernel)".to_owned(),
        RulesetStatus::NotEnforced => "not enforced (unsupported by the kernel)".to_owned(),
    })
}
