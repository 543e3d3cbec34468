//! Checkpoints: every applied plan's inverse, so an edit can be undone exactly.
//!
//! A checkpoint holds each touched file's state before and after; its inverse is itself a
//! plan, computed against the after state, so undoing refuses (as `stale`) when a file has
//! changed since, instead of overwriting someone else's change. Undo runs newest first, which
//! restores the exact bytes even after several edits to the same file.

use std::path::PathBuf;

use super::EditError;
use super::plan::{FilePlan, Plan, Versioned, replacement};

/// The before and after states of the files one applied plan changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checkpoint {
    pub files: Vec<(PathBuf, Option<String>, Option<String>)>,
}

impl Checkpoint {
    pub fn of(plan: &Plan) -> Self {
        Self {
            files: plan
                .files
                .iter()
                .map(|f| {
                    let before = f.before.as_ref().map(|b| b.text.clone());
                    (f.path.clone(), before, f.after.clone())
                })
                .collect(),
        }
    }

    /// The plan that undoes this one.
    pub fn inverse(&self) -> Plan {
        let files = self
            .files
            .iter()
            .map(|(path, before, after)| FilePlan {
                path: path.clone(),
                edits: match (after, before) {
                    (Some(a), Some(b)) => vec![replacement(a, b)],
                    _ => Vec::new(),
                },
                before: after.as_ref().map(|text| Versioned {
                    text: text.clone(),
                    version: None,
                }),
                after: before.clone(),
            })
            .collect();
        Plan {
            files,
            actions: Vec::new(),
            hunks: Vec::new(),
        }
    }
}

/// The applied plans of a session, newest last.
#[derive(Clone, Debug, Default)]
pub struct Checkpoints {
    stack: Vec<Checkpoint>,
}

impl Checkpoints {
    pub fn record(&mut self, plan: &Plan) {
        self.stack.push(Checkpoint::of(plan));
    }

    pub fn len(&self) -> usize {
        self.stack.len()
    }

    pub fn is_empty(&self) -> bool {
        self.stack.is_empty()
    }

    /// Undoes the newest checkpoint with `apply`; it stays recorded if undoing fails.
    /// Returns whether there was one.
    pub fn undo_last(
        &mut self,
        apply: impl FnOnce(&Plan) -> Result<(), EditError>,
    ) -> Result<bool, EditError> {
        let Some(last) = self.stack.last() else {
            return Ok(false);
        };
        apply(&last.inverse())?;
        self.stack.pop();
        Ok(true)
    }
}
