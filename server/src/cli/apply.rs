//! `wright apply`: an edit from stdin applied to the files under the root, all or none, with
//! the report `docs/design.md` specifies (human text, or one JSON document with `--json`).
//!
//! Exit codes: 0 applied (or, with `--dry-run`, would apply), 1 refused with nothing written,
//! 2 the files could not be read or written.

use std::path::Path;

use serde_json::{Value, json};

use wright::config::{Layers, user_file};
use wright::edit::gate::{GateMode, SyntaxError, introduced_errors};
use wright::edit::plan::{Plan, plan};
use wright::edit::{DiskFiles, EditError, Format, Tier, format};

#[derive(Clone, Copy, Debug)]
pub struct Options {
    pub format: Format,
    pub dry_run: bool,
    pub json: bool,
    pub gate: GateMode,
}

/// What the command prints and its exit code.
#[derive(Debug)]
pub struct Outcome {
    pub code: u8,
    pub stdout: String,
    pub stderr: String,
}

/// The syntax gate's mode from `edit.syntax_gate` in the configuration layers for `root`. An
/// invalid value is one of the layers' problems (`wright doctor` shows them) and leaves the
/// default.
pub fn configured_gate(root: &Path, env: &dyn Fn(&str) -> Option<String>) -> GateMode {
    let layers = Layers::load(user_file(env), &[root.to_path_buf()], env);
    layers
        .resolve()
        .get("edit.syntax_gate")
        .and_then(|value| value.parse().ok())
        .unwrap_or_default()
}

/// Plans `input` against the files under `root`, gates it, and applies it unless dry-running.
pub fn run(root: &Path, input: &str, options: Options) -> Outcome {
    let files = DiskFiles::new(root);
    let mut syntax = Vec::new();
    let result = (|| {
        let ops = format::parse(input, options.format)?;
        let plan = plan(&ops, &files)?;
        if options.gate != GateMode::Off {
            syntax = introduced_errors(&plan);
            if options.gate == GateMode::Refuse
                && let Some(first) = syntax.first()
            {
                let path = first.path.clone();
                let errors = syntax.iter().filter(|e| e.path == path).cloned().collect();
                return Err(EditError::Syntax { path, errors });
            }
        }
        if !options.dry_run {
            files.apply(&plan)?;
        }
        Ok(plan)
    })();
    report(result, &syntax, options)
}

fn report(result: Result<Plan, EditError>, syntax: &[SyntaxError], options: Options) -> Outcome {
    let code = match &result {
        Ok(_) => 0,
        Err(err) if err.is_io() => 2,
        Err(_) => 1,
    };
    let warnings: String = if result.is_ok() {
        syntax
            .iter()
            .map(|e| format!("warning: the edit introduced a syntax error: {e}\n"))
            .collect()
    } else {
        String::new()
    };
    if options.json {
        let files: Vec<Value> = match &result {
            Ok(plan) => plan
                .actions
                .iter()
                .map(|a| {
                    let mut file = json!({"path": a.path, "action": a.kind.name()});
                    if let Some(to) = &a.to {
                        file["to"] = json!(to);
                    }
                    file
                })
                .collect(),
            Err(_) => Vec::new(),
        };
        let error = match &result {
            Ok(_) => Value::Null,
            Err(err) => {
                let mut error = json!({"kind": err.kind(), "message": err.to_string()});
                if let Some(path) = err.path() {
                    error["path"] = json!(path);
                }
                if let EditError::Ambiguous { candidates, .. } = err {
                    error["candidates"] = json!(candidates);
                }
                error
            }
        };
        let hunks: Vec<Value> = match &result {
            Ok(plan) => plan
                .hunks
                .iter()
                .map(|h| json!({"path": h.path, "line": h.line, "tier": h.tier as u8}))
                .collect(),
            Err(_) => Vec::new(),
        };
        let mut document = json!({
            "applied": result.is_ok() && !options.dry_run,
            "files": files,
            "error": error,
            "hunks": hunks,
        });
        if !syntax.is_empty() {
            document["syntax_errors"] = syntax
                .iter()
                .map(|e| json!({"path": e.path, "line": e.line, "column": e.column, "message": e.message}))
                .collect();
        }
        return Outcome {
            code,
            stdout: format!("{document}\n"),
            stderr: warnings,
        };
    }
    match result {
        Ok(plan) => {
            let verb = if options.dry_run { "would " } else { "" };
            let mut stdout: String = plan
                .actions
                .iter()
                .map(|a| match &a.to {
                    Some(to) => format!(
                        "{verb}{} {} -> {}\n",
                        a.kind.name(),
                        a.path.display(),
                        to.display()
                    ),
                    None => format!("{verb}{} {}\n", a.kind.name(), a.path.display()),
                })
                .collect();
            // A hunk placed by a loose tier is worth knowing about: the model's copy drifted.
            for hunk in plan.hunks.iter().filter(|h| h.tier > Tier::Exact) {
                stdout.push_str(&format!(
                    "  {}:{}: located by {}\n",
                    hunk.path.display(),
                    hunk.line,
                    hunk.tier
                ));
            }
            Outcome {
                code,
                stdout,
                stderr: warnings,
            }
        }
        Err(err) if err.is_io() => Outcome {
            code,
            stdout: String::new(),
            stderr: format!("wright: nothing written: {err}\n"),
        },
        Err(err) => Outcome {
            code,
            stdout: String::new(),
            stderr: format!("wright: refused, nothing written: {err}\n"),
        },
    }
}
