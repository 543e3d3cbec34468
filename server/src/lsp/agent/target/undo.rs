//! Undo: every plan an editor session applied is remembered (and logged for a later server),
//! and taken back newest first, to any checkpoint, all or none per plan.

use super::*;

impl EditorTarget {
    /// Records an applied plan for undo.
    pub(super) fn remember(&self, plan: &Plan) {
        let checkpoint = Checkpoint::of(plan);
        if let Some(log) = &self.log {
            log.append(&checkpoint);
        }
        self.applied
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(checkpoint);
    }

    /// Edits applied and not undone.
    pub fn checkpoints(&self) -> usize {
        self.applied.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Undoes the plans this target applied after the first `keep`, newest first, all or none
    /// per plan.
    pub fn undo_to(&self, keep: usize) -> Result<Vec<String>, EditError> {
        let applied: Vec<Checkpoint> = self
            .applied
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let mut files = Vec::new();
        for checkpoint in applied.iter().skip(keep).rev() {
            // Read back from disk: only what an edit could have recorded, and a protected
            // path only with the user's leave again.
            checkpoint.validate()?;
            let root = crate::files::Root::open(&self.root)?;
            self.protection.check(
                Some(&root),
                checkpoint.files.iter().map(|(path, _, _)| path.as_path()),
            )?;
            self.apply_unrecorded(&checkpoint.inverse())?;
            let mut applied = self.applied.lock().unwrap_or_else(|e| e.into_inner());
            applied.pop();
            if let Some(log) = &self.log {
                log.rewrite(&applied);
            }
            drop(applied);
            for (path, _, _) in &checkpoint.files {
                let path = path.to_string_lossy().replace('\\', "/");
                if !files.contains(&path) {
                    files.push(path);
                }
            }
        }
        Ok(files)
    }
}
