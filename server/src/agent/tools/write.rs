//! `edit`, `multi_edit`, `apply_patch` and `write_file`: every change goes through the edit
//! engine (the matching ladder: exactly one place or a refusal that says why), the syntax
//! gate, the workspace's file policy (no path whose links lead out of it; `.git`, `.wright`
//! and `sandbox.protected` only with the user's leave, [`Protection`]), and the session's
//! [`EditTarget`], all files or none.

use std::fmt::Write as _;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::json;

use super::{Args, Failure, ToolContext, ToolOutput, ToolResult, workspace_path};
use crate::agent::sandboxed::{Approver, Decision};
use crate::config::ALWAYS_PROTECTED;
use crate::edit::gate::introduced_errors;
use crate::edit::{self, EditError, FileSource, Format, GateMode, Plan};
use crate::files::Root;

/// The workspace paths the agent's edits may not change on their own (`docs/security.md`,
/// "What the server itself writes"): `.git` (any folder of that name: git runs what its
/// configuration and hooks name, outside the sandbox), `.wright` (this workspace's wright
/// configuration) and `sandbox.protected`. Without an approver (headless) such an edit is
/// refused; in the editor the user is asked (`wright/requestApproval` kind `protected`).
pub struct Protection {
    /// Workspace-relative, clean.
    paths: Vec<PathBuf>,
    approver: Option<Arc<dyn Approver>>,
    /// The protected paths the user allowed for the rest of the session.
    allowed: Mutex<Vec<PathBuf>>,
}

impl Default for Protection {
    fn default() -> Self {
        Self::new(Vec::new())
    }
}

impl Protection {
    /// [`ALWAYS_PROTECTED`] and `paths` (the configuration's `sandbox.protected`, as
    /// `SandboxSettings::protected` holds them).
    pub fn new(paths: Vec<PathBuf>) -> Self {
        let mut all: Vec<PathBuf> = ALWAYS_PROTECTED.iter().map(PathBuf::from).collect();
        for path in paths {
            let clean: PathBuf = path
                .components()
                .filter(|c| matches!(c, Component::Normal(_)))
                .collect();
            if !clean.as_os_str().is_empty() && !all.contains(&clean) {
                all.push(clean);
            }
        }
        Self {
            paths: all,
            approver: None,
            allowed: Mutex::new(Vec::new()),
        }
    }

    /// The configuration's protected paths.
    pub fn from_config(config: &crate::config::Config) -> Self {
        Self::new(crate::sandbox::policy::settings(config).protected)
    }

    /// Asks `approver` (the user, in the editor) before refusing.
    pub fn asking(mut self, approver: Arc<dyn Approver>) -> Self {
        self.approver = Some(approver);
        self
    }

    /// The protected path that covers the workspace-relative `path`, as written or where its
    /// links lead beneath `root`, and why it is protected.
    pub fn covering(&self, root: Option<&Root>, path: &Path) -> Option<(PathBuf, &'static str)> {
        let judge = |path: &Path| -> Option<(PathBuf, &'static str)> {
            let mut prefix = PathBuf::new();
            for component in path.components() {
                prefix.push(component);
                if component.as_os_str() == ".git" {
                    return Some((
                        prefix,
                        "git runs what its configuration and hooks there name, outside the \
                         sandbox",
                    ));
                }
            }
            self.paths
                .iter()
                .find(|protected| path.starts_with(protected))
                .map(|protected| {
                    let why = if protected == Path::new(".wright") {
                        "it holds this workspace's wright configuration"
                    } else {
                        "it is listed in sandbox.protected"
                    };
                    (protected.clone(), why)
                })
        };
        judge(path).or_else(|| {
            let resolved = root?.resolved(path).ok()?;
            judge(&resolved)
        })
    }

    /// `Ok` when none of `paths` is protected, or the user allowed each that is;
    /// [`EditError::Protected`] naming the first that is not.
    pub fn check<'a>(
        &self,
        root: Option<&Root>,
        paths: impl IntoIterator<Item = &'a Path>,
    ) -> Result<(), EditError> {
        for path in paths {
            let Some((protected, why)) = self.covering(root, path) else {
                continue;
            };
            let refused = |reason: String| EditError::Protected {
                path: path.to_owned(),
                reason,
            };
            let allowed = self.allowed.lock().unwrap_or_else(|e| e.into_inner());
            if allowed.contains(&protected) {
                continue;
            }
            drop(allowed);
            let reason = format!("{} is protected: {why}", protected.display());
            let Some(approver) = &self.approver else {
                return Err(refused(why.to_owned()));
            };
            let command = format!("edit {}", path.display());
            match approver.ask("protected", &command, &reason) {
                Decision::Allow => {}
                Decision::AllowAlways => self
                    .allowed
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(protected),
                Decision::Deny => {
                    return Err(refused(format!("{why}; the user did not allow it")));
                }
            }
        }
        Ok(())
    }
}

/// Refuses a plan that reaches through a symbolic link out of the workspace (or, in a root
/// that cannot be opened, any plan): what the editor would otherwise write through, since it
/// follows links in the buffers it saves.
pub fn check_inside(root: &Root, plan: &Plan) -> Result<(), EditError> {
    for file in &plan.files {
        match root.resolved(&file.path) {
            Ok(_) => {}
            Err(err) if err.is_not_found() => {}
            Err(err) => return Err(err.into()),
        }
    }
    Ok(())
}

/// Where a session's edits land: the files on disk (headless), or the editor's buffers.
pub trait EditTarget: Send + Sync {
    /// The files as edits must be planned against: what the target will check the plan's
    /// `before` states against when it applies.
    fn source(&self) -> &dyn FileSource;

    /// Applies `plan`, every file or none; refuses it (`EditError::Stale`) when a file is no
    /// longer what the plan was computed against.
    fn apply(&self, plan: &Plan) -> Result<(), EditError>;

    /// What the syntax gate does with an edit that introduces parse errors.
    fn gate(&self) -> GateMode {
        GateMode::Report
    }

    /// Which paths the agent's edits may change only with the user's leave, and who is asked.
    fn protection(&self) -> &Protection;

    /// What the user decided of the held proposals since the last call (hunks rejected), for
    /// the model's next request; each note once.
    fn take_review_notes(&self) -> Vec<String> {
        Vec::new()
    }

    /// The proposals still held, one line each, listed to the model when a turn starts.
    fn held(&self) -> Vec<String> {
        Vec::new()
    }
}

pub(super) fn edit(context: &ToolContext, args: &Args) -> ToolResult {
    let path = path_argument(context, args)?;
    let edit = json!({
        "path": path,
        "old_string": args.string("old_string")?,
        "new_string": args.string("new_string")?,
        "replace_all": args.optional_bool("replace_all")?,
    });
    apply(context, &edit.to_string(), Format::Json)
}

pub(super) fn multi_edit(context: &ToolContext, args: &Args) -> ToolResult {
    let path = path_argument(context, args)?;
    let edits = args.array("edits")?;
    if edits.is_empty() {
        return Err(Failure::Arguments("\"edits\" is empty".to_owned()));
    }
    apply(
        context,
        &json!({"path": path, "edits": edits}).to_string(),
        Format::Json,
    )
}

pub(super) fn apply_patch(context: &ToolContext, args: &Args) -> ToolResult {
    apply(context, args.string("patch")?, Format::Patch)
}

pub(super) fn write_file(context: &ToolContext, args: &Args) -> ToolResult {
    let path = workspace_path(context, args.string("path")?)?;
    let content = args.string("content")?;
    let ops = [edit::FileOp::Add {
        path: path.to_string_lossy().into_owned(),
        content: content.to_owned(),
    }];
    land(context, &ops)
}

fn path_argument(context: &ToolContext, args: &Args) -> Result<String, Failure> {
    Ok(workspace_path(context, args.string("path")?)?
        .to_string_lossy()
        .into_owned())
}

fn apply(context: &ToolContext, input: &str, format: Format) -> ToolResult {
    let ops = edit::format::parse(input, format)
        .map_err(|err| Failure::Refused(format!("the edit does not parse: {err}")))?;
    land(context, &ops)
}

/// Plans `ops` against the target's files, gates and applies the plan, and says what changed
/// where (or, refused, what to fix).
fn land(context: &ToolContext, ops: &[edit::FileOp]) -> ToolResult {
    let target = context.edits.as_ref();
    // The engine's messages say what to change (candidate lines of an ambiguous match, the
    // nearest text of a missing one).
    let refused = |err: EditError| match err {
        EditError::Unconfirmed { .. } => Failure::Refused(err.to_string()),
        err => Failure::Refused(format!("refused, nothing changed: {err}")),
    };
    let plan = edit::plan::plan(ops, target.source()).map_err(refused)?;
    if plan.files.is_empty() {
        return Ok(ToolOutput::ok(
            "nothing changed: the new text equals the old",
        ));
    }
    let root = Root::open(&context.root).map_err(|err| refused(err.into()))?;
    check_inside(&root, &plan).map_err(refused)?;
    target
        .protection()
        .check(
            Some(&root),
            plan.files.iter().map(|file| file.path.as_path()),
        )
        .map_err(refused)?;
    let syntax = match target.gate() {
        GateMode::Off => Vec::new(),
        _ => introduced_errors(&plan),
    };
    if target.gate() == GateMode::Refuse && !syntax.is_empty() {
        let mut message = "refused: the edit introduces syntax errors:\n".to_owned();
        for error in &syntax {
            let _ = writeln!(message, "  {error}");
        }
        return Err(Failure::Refused(message));
    }
    target.apply(&plan).map_err(refused)?;

    let mut out = String::new();
    for action in &plan.actions {
        let path = action.path.to_string_lossy().replace('\\', "/");
        let _ = write!(out, "{} {path}", action.kind.name());
        if let Some(to) = &action.to {
            let _ = write!(out, " -> {}", to.to_string_lossy().replace('\\', "/"));
        }
        let placed: Vec<String> = plan
            .hunks
            .iter()
            .filter(|hunk| hunk.path == action.path)
            .map(|hunk| format!("line {} ({})", hunk.line, hunk.tier.name()))
            .collect();
        if !placed.is_empty() {
            let _ = write!(out, ": {}", placed.join(", "));
        }
        out.push('\n');
    }
    for error in &syntax {
        let _ = writeln!(
            out,
            "warning: the edit introduced a syntax error at {error}; fix it"
        );
    }
    let mut output = ToolOutput::ok(out);
    output.changed = plan
        .files
        .iter()
        .map(|file| file.path.to_string_lossy().replace('\\', "/"))
        .collect();
    output.landed = plan
        .files
        .iter()
        .map(|file| crate::agent::journal::EditedFile {
            path: file.path.to_string_lossy().replace('\\', "/"),
            before: file.before.as_ref().map(|before| before.text.clone()),
            after: file.after.clone(),
        })
        .collect();
    Ok(output)
}
