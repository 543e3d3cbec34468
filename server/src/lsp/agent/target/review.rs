//! Review mode: the edits a session proposes are held, shown to the editor as proposals, and
//! applied all together when the user accepts them (or dropped): what commands and reads of a
//! reviewing session see is its proposals over the live buffers.

use super::*;

#[derive(Clone, Debug)]
pub(super) struct Proposal {
    pub(super) base: Option<Versioned>,
    pub(super) proposed: Option<String>,
}

/// What a review session sees: its own proposals over the live buffers and the disk.
pub struct ReviewOverlay {
    pub(super) root: PathBuf,
    pub(super) pending: Pending,
    pub(super) live: LiveBuffers,
}

impl Overlay for ReviewOverlay {
    fn buffer_text(&self, path: &Path) -> Option<String> {
        let relative = path.strip_prefix(&self.root).ok()?;
        let pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        match pending.get(relative) {
            Some(proposal) => proposal.proposed.clone(),
            None => {
                drop(pending);
                self.live.buffer_text(path)
            }
        }
    }
}

impl EditorTarget {
    /// Applies every held edit, all files or none: refused, with nothing applied, when a file
    /// changed since the agent first edited it (the user typed, or saved another version).
    pub fn accept(&self) -> Result<Vec<String>, EditError> {
        let Some(pending) = &self.review else {
            return Ok(Vec::new());
        };
        let proposals = pending.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let mut files = Vec::new();
        for (path, proposal) in &proposals {
            let current = match self.live_state(path)? {
                FileState::File(current) => Some(current),
                FileState::Missing => None,
                FileState::Directory => return Err(EditError::NotAFile { path: path.clone() }),
            };
            let base_text = proposal.base.as_ref().map(|b| &b.text);
            if current.as_ref().map(|c| &c.text) != base_text {
                return Err(EditError::Stale { path: path.clone() });
            }
            files.push(FilePlan {
                path: path.clone(),
                edits: match (&current, &proposal.proposed) {
                    (Some(before), Some(after)) => {
                        vec![crate::edit::plan::replacement(&before.text, after)]
                    }
                    _ => Vec::new(),
                },
                before: current,
                after: proposal.proposed.clone(),
            });
        }
        let plan = Plan {
            files,
            ..Plan::default()
        };
        self.apply_unrecorded(&plan)?;
        self.remember(&plan);
        pending.lock().unwrap_or_else(|e| e.into_inner()).clear();
        Ok(relative_names(proposals.keys()))
    }

    /// What commands must see besides the disk: the open buffers under the root, then (review
    /// mode) the held proposals over them.
    pub fn texts_for_commands(&self) -> Vec<(PathBuf, Vec<u8>)> {
        let mut texts: BTreeMap<PathBuf, Vec<u8>> = {
            let buffers = self.buffers.lock().unwrap_or_else(|e| e.into_inner());
            buffers
                .snapshot()
                .into_iter()
                .filter_map(|(key, document)| match key {
                    DocumentKey::File(path) => {
                        let relative = path.strip_prefix(&self.root).ok()?.to_path_buf();
                        Some((relative, document.text().to_string().into_bytes()))
                    }
                    DocumentKey::Other(_) => None,
                })
                .collect()
        };
        if let Some(pending) = &self.review {
            for (path, proposal) in pending.lock().unwrap_or_else(|e| e.into_inner()).iter() {
                if let Some(text) = &proposal.proposed {
                    texts.insert(path.clone(), text.clone().into_bytes());
                }
            }
        }
        texts.into_iter().collect()
    }

    /// Whether edits are held for review.
    pub fn reviews(&self) -> bool {
        self.review.is_some()
    }

    /// Drops every held edit; the files they would have changed.
    pub fn reject(&self) -> Vec<String> {
        let Some(pending) = &self.review else {
            return Vec::new();
        };
        let proposals = std::mem::take(&mut *pending.lock().unwrap_or_else(|e| e.into_inner()));
        relative_names(proposals.keys())
    }

    /// Holds `plan` for review, checked against what the session sees.
    pub(super) fn propose(&self, pending: &Pending, plan: &Plan) -> Result<(), EditError> {
        for file in &plan.files {
            let seen = match self.state(&file.path)? {
                FileState::File(current) => Some(current.text),
                _ => None,
            };
            if seen.as_ref() != file.before.as_ref().map(|b| &b.text) {
                return Err(EditError::Stale {
                    path: file.path.clone(),
                });
            }
        }
        let mut held = pending.lock().unwrap_or_else(|e| e.into_inner());
        for file in &plan.files {
            let base = match held.get(&file.path) {
                Some(proposal) => proposal.base.clone(),
                None => match self.live_state(&file.path)? {
                    FileState::File(current) => Some(current),
                    _ => None,
                },
            };
            let proposal = Proposal {
                base,
                proposed: file.after.clone(),
            };
            let _ = self.tool_events.send(ToolEvent::EditProposed {
                path: file.path.to_string_lossy().replace('\\', "/"),
                before: proposal.base.as_ref().map(|b| b.text.clone()),
                after: proposal.proposed.clone(),
            });
            held.insert(file.path.clone(), proposal);
        }
        Ok(())
    }
}
