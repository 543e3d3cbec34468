//! `edit`, `multi_edit`, `apply_patch` and `write_file`: every change goes through the edit
//! engine (the matching ladder: exactly one place or a refusal that says why), the syntax
//! gate, and the session's [`EditTarget`], all files or none.

use std::fmt::Write as _;

use serde_json::json;

use super::{Args, Failure, ToolContext, ToolOutput, ToolResult, workspace_path};
use crate::edit::gate::introduced_errors;
use crate::edit::{self, EditError, FileSource, Format, GateMode, Plan};

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
    Ok(output)
}
