//! A session's files as an ACP client offers them: reads through `fs/read_text_file` (the
//! editor's unsaved text) when the client declared `fs.readTextFile`, writes through
//! `fs/write_text_file` when it declared `fs.writeTextFile`, the disk otherwise. Edits are
//! still planned by the edit engine (the unique-match ladder and all) against what the client
//! shows; only the last step, writing the new text, goes through the client. What the client
//! read or wrote is the session's overlay, which its commands' snapshot receives.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::json;

use super::peer::Peer;
use crate::agent::disk::DiskTarget;
use crate::agent::tools::{EditTarget, Protection};
use crate::edit::{EditError, FileSource, FileState, GateMode, Plan, Versioned};
use crate::workspace::Overlay;

/// One file an edit changed, for the tool call's diff.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Changed {
    pub path: PathBuf,
    pub before: Option<String>,
    pub after: Option<String>,
}

/// The client's side of a session's files.
pub struct ClientFiles {
    peer: Arc<Peer>,
    session: String,
    root: PathBuf,
    reads: bool,
    writes: bool,
    /// Texts read or written through the client, by workspace-relative path.
    seen: Mutex<BTreeMap<PathBuf, String>>,
    /// What the edits of the running tool call changed, taken by its result.
    changed: Mutex<Vec<Changed>>,
}

impl ClientFiles {
    pub fn new(peer: Arc<Peer>, session: &str, root: &Path, reads: bool, writes: bool) -> Self {
        Self {
            peer,
            session: session.to_owned(),
            root: root.to_owned(),
            reads,
            writes,
            seen: Mutex::default(),
            changed: Mutex::default(),
        }
    }

    /// The workspace-relative form of `absolute` when it names a file inside the root by
    /// plain components only: nothing else is ever asked of, or written through, the client
    /// (the tools check paths first; this holds even if one forgot).
    fn inside(&self, absolute: &Path) -> Option<PathBuf> {
        let relative = absolute.strip_prefix(&self.root).ok()?;
        let plain = relative
            .components()
            .all(|part| matches!(part, std::path::Component::Normal(_)));
        (plain && !relative.as_os_str().is_empty()).then(|| relative.to_owned())
    }

    /// The text the client shows for `absolute`, if it reads files and has it.
    fn read(&self, absolute: &Path) -> Option<String> {
        if !self.reads {
            return None;
        }
        let relative = self.inside(absolute)?;
        let answer = self.peer.request_blocking(
            "fs/read_text_file",
            json!({"sessionId": self.session, "path": absolute}),
        );
        match answer {
            Ok(value) => {
                let text = value["content"].as_str()?.to_owned();
                self.seen
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(relative, text.clone());
                Some(text)
            }
            Err(why) => {
                tracing::debug!("fs/read_text_file {}: {why}", absolute.display());
                None
            }
        }
    }

    /// The texts the client read or wrote, for the commands' snapshot.
    pub fn texts(&self) -> Vec<(PathBuf, Vec<u8>)> {
        self.seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(path, text)| (path.clone(), text.clone().into_bytes()))
            .collect()
    }

    /// What the edits changed since the last call.
    pub fn take_changed(&self) -> Vec<Changed> {
        std::mem::take(&mut *self.changed.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

impl Overlay for ClientFiles {
    fn buffer_text(&self, path: &Path) -> Option<String> {
        self.read(path)
    }

    /// What the client showed or was given already: a grep over the workspace reads the disk
    /// for the rest instead of asking the client file by file.
    fn held_text(&self, path: &Path) -> Option<String> {
        let relative = self.inside(path)?;
        self.seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&relative)
            .cloned()
    }
}

/// The edit target of an ACP session: plans checked against what the client shows, the new
/// texts written through the client when it writes files, the rest (and everything, when it
/// does not) on disk through [`DiskTarget`].
pub struct AcpTarget {
    disk: DiskTarget,
    files: Arc<ClientFiles>,
}

impl AcpTarget {
    pub fn new(disk: DiskTarget, files: Arc<ClientFiles>) -> Self {
        Self { disk, files }
    }

    fn record(&self, plan: &Plan) {
        let mut changed = self.files.changed.lock().unwrap_or_else(|e| e.into_inner());
        for file in &plan.files {
            changed.push(Changed {
                path: self.files.root.join(&file.path),
                before: file.before.as_ref().map(|b| b.text.clone()),
                after: file.after.clone(),
            });
        }
    }
}

impl FileSource for AcpTarget {
    fn state(&self, path: &Path) -> Result<FileState, EditError> {
        let on_disk = self.disk.source().state(path)?;
        if matches!(on_disk, FileState::Directory) {
            return Ok(on_disk);
        }
        Ok(match self.files.read(&self.files.root.join(path)) {
            Some(text) => FileState::File(Versioned {
                text,
                version: None,
            }),
            None => on_disk,
        })
    }
}

impl EditTarget for AcpTarget {
    fn source(&self) -> &dyn FileSource {
        self
    }

    fn apply(&self, plan: &Plan) -> Result<(), EditError> {
        if !self.files.writes {
            self.disk.apply(plan)?;
            self.record(plan);
            return Ok(());
        }
        // Every file is checked before anything is written: all of the plan, or none of it.
        for file in &plan.files {
            let now = match self.state(&file.path)? {
                FileState::File(current) => Some(current.text),
                _ => None,
            };
            if now.as_ref() != file.before.as_ref().map(|b| &b.text) {
                return Err(EditError::Stale {
                    path: file.path.clone(),
                });
            }
        }
        let deletions = Plan {
            files: plan
                .files
                .iter()
                .filter(|file| file.after.is_none())
                .cloned()
                .collect(),
            ..Plan::default()
        };
        for file in plan.files.iter().filter(|file| file.after.is_some()) {
            let absolute = self.files.root.join(&file.path);
            if self.files.inside(&absolute).is_none() {
                return Err(EditError::Io {
                    path: file.path.clone(),
                    source: std::io::Error::other("outside the session's folder"),
                });
            }
            let text = file.after.clone().unwrap_or_default();
            self.files
                .peer
                .request_blocking(
                    "fs/write_text_file",
                    json!({"sessionId": self.files.session, "path": absolute, "content": text}),
                )
                .map_err(|why| EditError::Io {
                    path: file.path.clone(),
                    source: std::io::Error::other(format!("the client did not write it: {why}")),
                })?;
            self.files
                .seen
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(file.path.clone(), text);
        }
        if !deletions.files.is_empty() {
            self.disk.apply(&deletions)?;
        }
        self.record(plan);
        Ok(())
    }

    fn gate(&self) -> GateMode {
        self.disk.gate()
    }

    fn protection(&self) -> &Protection {
        self.disk.protection()
    }
}
