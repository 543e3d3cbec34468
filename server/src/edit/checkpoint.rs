//! Checkpoints: every applied plan's inverse, so an edit can be undone exactly.
//!
//! A checkpoint holds each touched file's state before and after; its inverse is itself a
//! plan, computed against the after state, so undoing refuses (as `stale`) when a file has
//! changed since, instead of overwriting someone else's change. Undo runs newest first, which
//! restores the exact bytes even after several edits to the same file. An editor session's
//! checkpoints are also kept on disk ([`CheckpointLog`], 0600 in a 0700 folder), so its edits
//! can be undone after the server restarts. What is read back from disk is checked before it
//! is applied ([`Checkpoint::validate`]): its paths are clean and relative, each once, and
//! applying it goes through the same checks as any edit (links out, protected paths).

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

    /// Refuses a checkpoint read back from disk whose paths an edit could not have had: empty,
    /// absolute, climbing with `..`, not in their clean form, or twice.
    pub fn validate(&self) -> Result<(), EditError> {
        let mut seen = std::collections::BTreeSet::new();
        for (path, _, _) in &self.files {
            let text = path.to_string_lossy();
            let clean = super::plan::relative_path(&text)?;
            if &clean != path || text.trim() != text {
                return Err(EditError::BadPath {
                    path: text.into_owned(),
                    reason: "is not a path an edit records; the undo record was not written \
                             by wright",
                });
            }
            if !seen.insert(clean) {
                return Err(EditError::BadPath {
                    path: text.into_owned(),
                    reason: "is recorded twice; the undo record was not written by wright",
                });
            }
        }
        Ok(())
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
        // host path: the checkpoint log, wright's own file in its data folder.
        std::fs::symlink_metadata(&self.path).is_ok_and(|meta| meta.is_file())
    }

    /// The checkpoints recorded, oldest first; none when there is no log (or it is not one
    /// wright wrote: a link, another user's file, logged).
    pub fn load(&self) -> Vec<Checkpoint> {
        let Some(bytes) = self.read() else {
            return Vec::new();
        };
        String::from_utf8_lossy(&bytes)
            .lines()
            .map_while(|line| serde_json::from_str(line).ok())
            .collect()
    }

    fn read(&self) -> Option<Vec<u8>> {
        match crate::files::read_private(&self.path, MAX_LOG) {
            Ok(bytes) => Some(bytes),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => None,
            Err(err) => {
                tracing::warn!(
                    "the undo checkpoints {} are not read back: {err}",
                    self.path.display()
                );
                None
            }
        }
    }

    /// How many checkpoints the log holds, without parsing them (what `wright/sessions`
    /// lists): its complete lines, since only the last can have been cut.
    pub fn count(&self) -> usize {
        self.read()
            .map_or(0, |bytes| memchr::memchr_iter(b'\n', &bytes).count())
    }

    /// Adds `checkpoint` after the others.
    pub fn append(&self, checkpoint: &Checkpoint) {
        let appended = (|| {
            let mut file = crate::files::append_private(&self.path)?;
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
            // host path: likewise.
            match std::fs::remove_file(&self.path) {
                Err(err) if err.kind() != std::io::ErrorKind::NotFound => Err(err),
                _ => Ok(()),
            }
        } else {
            let bytes: Vec<u8> = checkpoints.iter().flat_map(line).collect();
            crate::files::write_private(&self.path, &bytes)
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

/// The most a checkpoint log is read back: it holds whole files before and after, so a long
/// session's is large, but not without end.
const MAX_LOG: u64 = 1 << 30;

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
        // It holds the user's code: 0600 in a 0700 folder.
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir.join("sessions/s1.checkpoints")), 0o600);
        assert_eq!(mode(&dir.join("sessions")), 0o700);
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
        // A link planted at the log's name is not read through (nor appended to).
        let victim = dir.join("victim");
        std::fs::write(&victim, line(&checkpoint(0))).unwrap();
        std::os::unix::fs::symlink(&victim, dir.join("sessions/s1.checkpoints")).unwrap();
        assert!(log.load().is_empty());
        log.append(&checkpoint(1));
        assert_eq!(std::fs::read(&victim).unwrap(), line(&checkpoint(0)));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_checkpoint_read_back_names_only_clean_relative_paths_each_once() {
        let of = |paths: &[&str]| Checkpoint {
            files: paths
                .iter()
                .map(|p| (PathBuf::from(p), Some("a".to_owned()), None))
                .collect(),
        };
        assert!(of(&["src/lib.rs", "README.md"]).validate().is_ok());
        for bad in [
            &["../outside"][..],
            &["/etc/passwd"],
            &["src/../../x"],
            &["./src/lib.rs"],
            &[" src/lib.rs"],
            &[""],
            &["a.rs", "a.rs"],
        ] {
            let err = of(bad).validate().unwrap_err();
            assert_eq!(err.kind(), "bad_path", "{bad:?}: {err}");
        }
    }
}
