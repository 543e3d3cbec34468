//! Checkpoints: every applied plan's inverse, so an edit can be undone exactly.
//!
//! A checkpoint holds each touched file's state before and after; its inverse is itself a
//! plan, computed against the after state, so undoing refuses (as `stale`) when a file has
//! changed since, instead of overwriting someone else's change. Undo runs newest first, which
//! restores the exact bytes even after several edits to the same file. An editor session's
//! checkpoints are also kept on disk ([`CheckpointLog`]), so its edits can be undone after the
//! server restarts.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::EditError;
use super::plan::{FilePlan, Plan, Versioned, replacement};

/// The before and after states of the files one applied plan changed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
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

/// A session's applied checkpoints on disk, `<sessions>/<id>.checkpoints`, one JSON line each,
/// oldest first: appended (and synced) as each edit lands, rewritten when undo takes some
/// back. Failing to write it loses only undo after a restart, so failures are logged, not
/// raised; a line that does not parse (a write cut by a kill) ends what is read.
#[derive(Clone, Debug)]
pub struct CheckpointLog {
    path: PathBuf,
}

impl CheckpointLog {
    /// The log of session `session_id` in the sessions folder `dir` (beside its journal).
    pub fn new(dir: &Path, session_id: &str) -> Self {
        Self {
            path: dir.join(format!("{session_id}.checkpoints")),
        }
    }

    pub fn exists(&self) -> bool {
        self.path.is_file()
    }

    /// The checkpoints recorded, oldest first; none when there is no log.
    pub fn load(&self) -> Vec<Checkpoint> {
        let Ok(text) = std::fs::read_to_string(&self.path) else {
            return Vec::new();
        };
        text.lines()
            .map_while(|line| serde_json::from_str(line).ok())
            .collect()
    }

    /// How many checkpoints the log holds, without parsing them (what `wright/sessions`
    /// lists): its complete lines, since only the last can have been cut.
    pub fn count(&self) -> usize {
        std::fs::read(&self.path).map_or(0, |bytes| memchr::memchr_iter(b'\n', &bytes).count())
    }

    /// Adds `checkpoint` after the others.
    pub fn append(&self, checkpoint: &Checkpoint) {
        let appended = (|| {
            std::fs::create_dir_all(crate::durable::parent(&self.path))?;
            let mut file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&self.path)?;
            file.write_all(&line(checkpoint))?;
            file.sync_data()
        })();
        if let Err(err) = appended {
            self.warn(&err);
        }
    }

    /// Replaces the log with `checkpoints`, atomically; removes it when there are none.
    pub fn rewrite(&self, checkpoints: &[Checkpoint]) {
        let written = if checkpoints.is_empty() {
            match std::fs::remove_file(&self.path) {
                Err(err) if err.kind() != std::io::ErrorKind::NotFound => Err(err),
                _ => Ok(()),
            }
        } else {
            let bytes: Vec<u8> = checkpoints.iter().flat_map(line).collect();
            crate::durable::replace_beside(&self.path, &bytes)
        };
        if let Err(err) = written {
            self.warn(&err);
        }
    }

    fn warn(&self, err: &std::io::Error) {
        tracing::warn!(
            "could not record undo checkpoints in {}: {err}; this session's edits cannot be \
             undone after the server restarts",
            self.path.display()
        );
    }
}

fn line(checkpoint: &Checkpoint) -> Vec<u8> {
    let mut line = serde_json::to_vec(checkpoint).expect("checkpoints serialise");
    line.push(b'\n');
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_reads_back_what_was_appended_and_rewritten_and_stops_at_a_cut_line() {
        let dir = std::env::temp_dir().join(format!("wright-checkpoints-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let log = CheckpointLog::new(&dir.join("sessions"), "s1");
        assert!(!log.exists() && log.load().is_empty());
        let checkpoint = |n: usize| Checkpoint {
            files: vec![(
                PathBuf::from("src/lib.rs"),
                Some(format!("v{n}\n")),
                (n < 3).then(|| format!("v{}\n", n + 1)),
            )],
        };
        for n in 0..4 {
            log.append(&checkpoint(n));
        }
        assert_eq!(log.load(), (0..4).map(checkpoint).collect::<Vec<_>>());
        assert_eq!(log.count(), 4);
        log.rewrite(&[checkpoint(0)]);
        assert_eq!(log.load(), vec![checkpoint(0)]);
        // A kill in the middle of an append leaves a partial last line.
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(dir.join("sessions/s1.checkpoints"))
            .unwrap();
        file.write_all(b"{\"files\":[[\"src/li").unwrap();
        assert_eq!(log.load(), vec![checkpoint(0)]);
        assert_eq!(log.count(), 1);
        log.rewrite(&[]);
        assert!(!log.exists());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
