//! The disk as an edit target (headless runs: `wright exec`, the bench): edits land in the
//! workspace on disk, each applied atomically, and the whole run is recorded so `wright exec
//! --undo` can put every file back as it was — refusing, file by file checked first, if
//! anything changed since.
//!
//! The undo record is wright's own file (0600 in a 0700 folder of the data folder), and what
//! is read back is checked before anything is written: a record that is a link, belongs to
//! another user, names another workspace, or holds a path no edit of a run could have had
//! (outside the root, `.git`, `.wright`, `sandbox.protected`, a link leading out) is refused.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use super::tools::{EditTarget, Protection};
use crate::edit::{Checkpoint, DiskFiles, EditError, FileSource, GateMode, Plan};

/// The disk as an edit target, remembering each touched file's state before the run's first
/// change to it and after its last, and (when recording) saving that undo record after every
/// edit, so a run killed halfway can still be undone.
pub struct DiskTarget {
    files: DiskFiles,
    root: PathBuf,
    gate: GateMode,
    /// Where the undo record is saved, and the session it belongs to.
    recording: Option<(PathBuf, String)>,
    /// Each touched file's text before the run and now (`None`: missing).
    touched: Mutex<BTreeMap<PathBuf, UndoFile>>,
    /// Headless: protected paths are refused, there is no one to ask.
    protection: Protection,
}

impl DiskTarget {
    pub fn new(root: &Path, gate: GateMode) -> Self {
        Self {
            files: DiskFiles::new(root),
            root: root.to_path_buf(),
            gate,
            recording: None,
            touched: Mutex::new(BTreeMap::new()),
            protection: Protection::default(),
        }
    }

    /// Refuses edits of the paths `protection` covers (`.git` and `.wright` are always).
    pub fn protecting(mut self, protection: Protection) -> Self {
        self.protection = protection;
        self
    }

    /// Saves the undo record of session `session_id` under `data_dir` after every edit,
    /// continuing the record already there if it is that session's (a resumed run) and
    /// passes [`UndoRecord::validate`] (call [`DiskTarget::protecting`] first).
    pub fn recording(mut self, data_dir: &Path, session_id: &str) -> Self {
        let location = UndoRecord::location(data_dir, &self.root);
        if let Ok(record) = UndoRecord::load(data_dir, &self.root)
            && record.session_id == session_id
            && record
                .validate(&location, &self.root, &self.protection)
                .inspect_err(|err| tracing::warn!("{err}; this run starts a new one"))
                .is_ok()
        {
            let touched = self.touched.get_mut().unwrap_or_else(|e| e.into_inner());
            for file in record.files {
                touched.insert(file.path.clone(), file);
            }
        }
        self.recording = Some((data_dir.to_path_buf(), session_id.to_owned()));
        self
    }

    /// What the run changed, as an undo record (`None` when it changed nothing).
    pub fn record(&self) -> Option<UndoRecord> {
        let touched = self.touched.lock().unwrap_or_else(|e| e.into_inner());
        let files: Vec<UndoFile> = touched
            .values()
            .filter(|file| file.before != file.after)
            .cloned()
            .collect();
        (!files.is_empty()).then(|| UndoRecord {
            root: self.root.clone(),
            session_id: self
                .recording
                .as_ref()
                .map(|(_, id)| id.clone())
                .unwrap_or_default(),
            files,
        })
    }
}

impl EditTarget for DiskTarget {
    fn source(&self) -> &dyn FileSource {
        &self.files
    }

    fn apply(&self, plan: &Plan) -> Result<(), EditError> {
        self.files.apply(plan)?;
        let mut touched = self.touched.lock().unwrap_or_else(|e| e.into_inner());
        for file in &plan.files {
            let before = file.before.as_ref().map(|b| b.text.clone());
            touched
                .entry(file.path.clone())
                .and_modify(|touched| touched.after.clone_from(&file.after))
                .or_insert(UndoFile {
                    path: file.path.clone(),
                    before,
                    after: file.after.clone(),
                });
        }
        drop(touched);
        if let (Some((data_dir, _)), Some(record)) = (&self.recording, self.record())
            && let Err(err) = record.save(data_dir)
        {
            tracing::warn!("could not save the undo record: {err}");
        }
        Ok(())
    }

    fn gate(&self) -> GateMode {
        self.gate
    }

    fn protection(&self) -> &Protection {
        &self.protection
    }
}

/// The files one `wright exec` run changed, before and after.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UndoRecord {
    pub root: PathBuf,
    /// The session whose edits these are.
    #[serde(default)]
    pub session_id: String,
    pub files: Vec<UndoFile>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UndoFile {
    pub path: PathBuf,
    pub before: Option<String>,
    pub after: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum UndoError {
    #[error("no `wright exec` run to undo in {}", .0.display())]
    Nothing(PathBuf),
    #[error("the undo record {} cannot be read: {reason}", path.display())]
    Unreadable { path: PathBuf, reason: String },
    #[error(
        "the undo record {} is refused, nothing restored: {reason}",
        path.display()
    )]
    Invalid { path: PathBuf, reason: String },
    #[error("nothing restored: {0}")]
    Refused(EditError),
}

/// The most an undo record is read back (it holds whole files before and after).
const MAX_RECORD: u64 = 1 << 30;

impl UndoRecord {
    /// Where the last run's record for `root` lives under `data_dir`.
    pub fn location(data_dir: &Path, root: &Path) -> PathBuf {
        let key = crate::index::root_key(root);
        data_dir.join("exec").join(format!("{key}.json"))
    }

    /// Writes the record atomically and durably (a synced temporary renamed into place),
    /// 0600 in a 0700 folder, so it still describes the files after a crash or a power loss
    /// and no other user reads them.
    pub fn save(&self, data_dir: &Path) -> std::io::Result<PathBuf> {
        let path = Self::location(data_dir, &self.root);
        let bytes = serde_json::to_vec(self).map_err(std::io::Error::other)?;
        crate::files::write_private(&path, &bytes)?;
        Ok(path)
    }

    /// The last run's record on `root`, read back as only wright writes it (a regular file
    /// of this user, never through a link) and parsed; its contents are judged by
    /// [`UndoRecord::validate`].
    pub fn load(data_dir: &Path, root: &Path) -> Result<Self, UndoError> {
        let path = Self::location(data_dir, root);
        let text = match crate::files::read_private(&path, MAX_RECORD) {
            Ok(text) => text,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                return Err(UndoError::Nothing(root.to_path_buf()));
            }
            Err(err) => {
                return Err(UndoError::Unreadable {
                    path,
                    reason: err.to_string(),
                });
            }
        };
        serde_json::from_slice(&text).map_err(|err| UndoError::Unreadable {
            path,
            reason: err.to_string(),
        })
    }

    /// Refuses a record (read from `path`) for `root` that a run of wright on `root` could
    /// not have written: another workspace's, a path outside the root or not in its clean
    /// form, one twice, or one `protection` covers (as written or where its links lead).
    /// Links that lead out are refused when the files are read and written.
    pub fn validate(
        &self,
        path: &Path,
        root: &Path,
        protection: &Protection,
    ) -> Result<Checkpoint, UndoError> {
        let invalid = |reason: String| UndoError::Invalid {
            path: path.to_owned(),
            reason,
        };
        if self.root != root {
            return Err(invalid(format!(
                "it names the workspace {}, not {}",
                self.root.display(),
                root.display()
            )));
        }
        let checkpoint = Checkpoint {
            files: self
                .files
                .iter()
                .map(|file| (file.path.clone(), file.before.clone(), file.after.clone()))
                .collect(),
        };
        checkpoint
            .validate()
            .map_err(|err| invalid(err.to_string()))?;
        let files = crate::files::Root::open(root).ok();
        protection
            .check(
                files.as_ref(),
                self.files.iter().map(|file| file.path.as_path()),
            )
            .map_err(|err| invalid(err.to_string()))?;
        Ok(checkpoint)
    }

    /// Restores every file of the last run on `root` to its state before the run, all or
    /// none: a file changed since the run refuses the whole undo. The record is removed once
    /// restored.
    pub fn undo(
        data_dir: &Path,
        root: &Path,
        protection: &Protection,
    ) -> Result<Vec<PathBuf>, UndoError> {
        let path = Self::location(data_dir, root);
        let record = Self::load(data_dir, root)?;
        let checkpoint = record.validate(&path, root, protection)?;
        DiskFiles::new(root)
            .apply(&checkpoint.inverse())
            .map_err(UndoError::Refused)?;
        // host path: the undo record, wright's own file in its data folder.
        let _ = std::fs::remove_file(&path);
        Ok(record.files.into_iter().map(|file| file.path).collect())
    }
}
