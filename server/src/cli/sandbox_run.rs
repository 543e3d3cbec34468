//! `wright sandbox run`: one command through the local backend, its result as the command's
//! own output and exit status, or as the JSON document of `docs/design.md`.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use wright::sandbox::{
    Backend, Filesystem, Limits, LocalBackend, Network, Outcome, Permissions, Request,
    SandboxError, escalation, fresh_snapshot_dir, remove_tree, snapshot_base,
};

/// The flags of `wright sandbox run`.
#[derive(Clone, Debug)]
pub struct Options {
    pub allow_net: bool,
    pub timeout: Duration,
    pub memory_mb: u64,
    pub snapshot: bool,
    pub json: bool,
    /// The configuration's `sandbox.*` settings.
    pub settings: wright::sandbox::policy::SandboxSettings,
}

/// What the binary prints and exits with.
pub struct Printed {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub code: u8,
}

/// Runs `argv` isolated over `root`.
pub fn run(
    root: &Path,
    argv: Vec<String>,
    options: &Options,
    env: &dyn Fn(&str) -> Option<String>,
) -> Printed {
    let refuse = |message: String| Printed {
        stdout: Vec::new(),
        stderr: format!("wright: {message}\n").into_bytes(),
        code: 1,
    };
    let backend = match LocalBackend::new() {
        Ok(backend) => backend,
        Err(err) => return refuse(format!("locating the wright binary: {err}")),
    };
    backend.allow_fallback(options.settings.fallback == wright::config::Fallback::Landlock);
    let mut request = Request {
        argv,
        workspace: root.to_path_buf(),
        permissions: Permissions {
            network: if options.allow_net {
                Network::Host
            } else {
                Network::Off
            },
            extra_writable: Vec::new(),
        },
        limits: Limits {
            timeout: options.timeout,
            memory_bytes: options.memory_mb << 20,
            ..Limits::default()
        },
        ..Request::default()
    };
    wright::sandbox::policy::apply(&options.settings, &mut request);
    // A snapshot is tried as an overlay first; if this machine cannot mount one, once more
    // as whatever `LocalBackend::snapshot` falls back to.
    let mut attempts = if options.snapshot { 2 } else { 1 };
    let outcome = loop {
        attempts -= 1;
        let snapshot = if options.snapshot {
            let base = match snapshot_base(env) {
                Ok(base) => base,
                Err(err) => return refuse(err.to_string()),
            };
            match backend.snapshot(fresh_snapshot_dir(&base), root) {
                Ok(snapshot) => Some(Arc::new(Mutex::new(snapshot))),
                Err(err) => {
                    return refuse(format!(
                        "{err} (without --snapshot the command writes the workspace in place)"
                    ));
                }
            }
        } else {
            None
        };
        request.filesystem = snapshot
            .clone()
            .map_or(Filesystem::InPlace, Filesystem::Snapshot);
        let result = backend.run(&request);
        if let Some(snapshot) = snapshot
            && let Ok(snapshot) = snapshot.lock()
            && let Err(err) = remove_tree(snapshot.dir())
        {
            tracing::warn!("removing the snapshot {}: {err}", snapshot.dir().display());
        }
        match result {
            Ok(outcome) => break outcome,
            Err(SandboxError::OverlayUnavailable(why)) if attempts > 0 => {
                tracing::warn!("overlayfs is unavailable ({why}); trying a reflink copy");
            }
            Err(err) => {
                return refuse(format!(
                    "{err} (`wright doctor` shows which isolation primitives this machine has)"
                ));
            }
        }
    };
    let code = outcome.exit_code.clamp(0, 255) as u8;
    if options.json {
        let mut stdout = serde_json::to_vec_pretty(&to_json(&outcome)).unwrap_or_default();
        stdout.push(b'\n');
        return Printed {
            stdout,
            stderr: Vec::new(),
            code,
        };
    }
    let mut stderr = outcome.stderr.text().into_bytes();
    if outcome.timed_out {
        stderr.extend_from_slice(
            format!(
                "wright: timed out after {} s; every process of the command was killed\n",
                options.timeout.as_secs_f64()
            )
            .as_bytes(),
        );
    }
    if let Some(refusal) = escalation::classify(&request, &outcome) {
        stderr.extend_from_slice(format!("wright: {}\n", refusal.explain()).as_bytes());
    }
    Printed {
        stdout: outcome.stdout.text().into_bytes(),
        stderr,
        code,
    }
}

/// The `--json` document (`docs/design.md`, "Command line").
pub fn to_json(outcome: &Outcome) -> Value {
    let limits = &outcome.limits;
    json!({
        "exit_code": outcome.exit_code,
        "timed_out": outcome.timed_out,
        "stdout": outcome.stdout.text(),
        "stderr": outcome.stderr.text(),
        "truncated": outcome.truncated(),
        "duration_ms": outcome.duration.as_millis() as u64,
        "changed_files": outcome
            .changes
            .iter()
            .map(|change| change.path.to_string_lossy().into_owned())
            .collect::<Vec<_>>(),
        "isolation": {
            "network": outcome.isolation.network,
            "filesystem": outcome.isolation.filesystem,
            "pid": outcome.isolation.pid,
            "limits": {
                "timeout_s": limits.timeout.as_secs_f64(),
                "memory_mb": limits.memory_bytes >> 20,
                "processes": limits.processes,
                "cpu_s": limits.cpu_seconds(),
                "file_size_mb": limits.file_size_bytes >> 20,
                "output_bytes": limits.output_cap,
                "enforced_by": outcome.isolation.limits_enforced_by,
                "exceeded": outcome.exceeded.iter().map(|e| e.name()).collect::<Vec<_>>(),
            },
            "landlock": outcome.isolation.landlock,
            "seccomp": outcome.isolation.seccomp,
        },
    })
}
