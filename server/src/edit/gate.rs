//! The syntax gate: re-parses each file a plan touches with its tree-sitter grammar and finds
//! the parse errors the edit introduced, not the ones the file already had.
//!
//! An error is "already there" when the text before the edit had an error of the same kind at
//! the same place (offsets before the replacement unchanged, after it shifted by the change in
//! length). Files in languages wright has no grammar for pass unchecked.

pub use crate::config::values::GateMode;
use std::collections::HashSet;
use std::fmt;
use std::path::PathBuf;

use super::plan::{ActionKind, Plan, replacement};
use crate::languages::Language;

/// A parse error an edit introduced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyntaxError {
    pub path: PathBuf,
    /// 1-based.
    pub line: usize,
    /// 1-based, in bytes.
    pub column: usize,
    pub message: String,
}

impl fmt::Display for SyntaxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}",
            self.path.display(),
            self.line,
            self.column,
            self.message
        )
    }
}

/// The parse errors the plan introduces, per file in plan order.
pub fn introduced_errors(plan: &Plan) -> Vec<SyntaxError> {
    let mut introduced = Vec::new();
    for file in &plan.files {
        let (Some(after), Some(language)) = (&file.after, Language::from_path(&file.path)) else {
            continue;
        };
        // What the file was: itself before, or the file it was moved from.
        let before = file.before.as_ref().or_else(|| {
            let from = plan.actions.iter().find(|a| {
                a.kind == ActionKind::Move && a.to.as_deref() == Some(file.path.as_path())
            })?;
            plan.files
                .iter()
                .find(|f| f.path == from.path)?
                .before
                .as_ref()
        });
        let edit = before.map(|b| replacement(&b.text, after));
        let known: HashSet<(usize, String)> = before
            .map(|b| {
                errors(language, &b.text)
                    .into_iter()
                    .map(|(o, _, m)| (o, m))
                    .collect()
            })
            .unwrap_or_default();
        for (offset, (row, column), message) in errors(language, after) {
            // The error's offset in the text before: unchanged before the edit, shifted after it.
            let old_offset = match &edit {
                Some(edit) if offset < edit.range.start => Some(offset),
                Some(edit) if offset >= edit.range.start + edit.text.len() => {
                    Some(offset - edit.text.len() + edit.range.len())
                }
                _ => None,
            };
            if old_offset.is_none_or(|o| !known.contains(&(o, message.clone()))) {
                introduced.push(SyntaxError {
                    path: file.path.clone(),
                    line: row + 1,
                    column: column + 1,
                    message,
                });
            }
        }
    }
    introduced
}

/// Every outermost error or missing node: byte offset, (row, column), message.
fn errors(language: Language, text: &str) -> Vec<(usize, (usize, usize), String)> {
    let mut parser = language.parser();
    let Some(tree) = parser.parse(text, None) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    let mut cursor = tree.walk();
    let mut descend = true;
    loop {
        let node = cursor.node();
        if descend && (node.is_error() || node.is_missing()) {
            let message = if node.is_missing() {
                format!("missing `{}`", node.kind())
            } else {
                let snippet: String = text[node.byte_range()].chars().take(30).collect();
                format!("syntax error at `{}`", snippet.lines().next().unwrap_or(""))
            };
            let point = node.start_position();
            found.push((node.start_byte(), (point.row, point.column), message));
            descend = false;
        }
        if descend && node.has_error() && cursor.goto_first_child() {
            continue;
        }
        if cursor.goto_next_sibling() {
            descend = true;
            continue;
        }
        loop {
            if !cursor.goto_parent() {
                return found;
            }
            if cursor.goto_next_sibling() {
                descend = true;
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::edit::plan::{Action, FilePlan, Versioned};

    fn plan_of(path: &str, before: &str, after: &str) -> Plan {
        Plan {
            files: vec![FilePlan {
                path: path.into(),
                before: Some(Versioned {
                    text: before.into(),
                    version: None,
                }),
                after: Some(after.into()),
                edits: vec![replacement(before, after)],
            }],
            actions: Vec::new(),
            hunks: Vec::new(),
        }
    }

    #[test]
    fn reports_errors_the_edit_introduced_with_positions() {
        let plan = plan_of("a.rs", "fn a() {}\nfn b() {}\n", "fn a() {}\nfn b( {}\n");
        let errors = introduced_errors(&plan);
        assert!(!errors.is_empty());
        assert_eq!(errors[0].line, 2, "{errors:?}");
        assert!(
            errors[0].to_string().starts_with("a.rs:2:"),
            "{}",
            errors[0]
        );
    }

    #[test]
    fn errors_already_there_are_not_blamed_on_the_edit() {
        let before = "fn broken( {}\n\nfn ok() { 1 }\n";
        let plan = plan_of("a.rs", before, &before.replace("{ 1 }", "{ 2 }"));
        assert_eq!(introduced_errors(&plan), []);
        let plan = plan_of("notes.txt", "x", "(((");
        assert_eq!(introduced_errors(&plan), []);
    }

    #[test]
    fn a_moved_file_is_compared_with_its_source() {
        let source = "fn broken( {}\n";
        let mut plan = plan_of("old.rs", source, source);
        plan.files[0].after = None;
        plan.files[0].edits.clear();
        plan.files.push(FilePlan {
            path: "new.rs".into(),
            before: None,
            after: Some(source.into()),
            edits: Vec::new(),
        });
        plan.actions.push(Action {
            path: "old.rs".into(),
            kind: ActionKind::Move,
            to: Some("new.rs".into()),
        });
        assert_eq!(introduced_errors(&plan), []);
        plan.actions.clear();
        assert_eq!(introduced_errors(&plan).len(), 1);
    }

    #[test]
    fn a_new_file_is_checked_whole() {
        let mut plan = plan_of("new.py", "", "def f(:\n    pass\n");
        plan.files[0].before = None;
        plan.files[0].edits.clear();
        assert_eq!(introduced_errors(&plan).len(), 1);
    }
}
