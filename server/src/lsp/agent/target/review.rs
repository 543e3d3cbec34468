//! Review mode: the edits a session proposes are held, shown to the editor as proposals with
//! their hunks, and applied when the user accepts them (all, or the hunks they name) or
//! dropped; what commands and reads of a reviewing session see is its proposals over the live
//! buffers. What the user rejected is told to the model at its next step.

use super::*;
use crate::agent::events::Hunk;
use crate::edit::hunks::{self, LineHunk};

#[derive(Clone, Debug)]
pub(super) struct Proposal {
    pub(super) base: Option<Versioned>,
    pub(super) proposed: Option<String>,
    /// The ids of the hunks base → proposed, in order (one for a new or deleted file).
    pub(super) hunk_ids: Vec<String>,
}

impl Proposal {
    fn base_text(&self) -> &str {
        self.base.as_ref().map_or("", |b| b.text.as_str())
    }

    /// The hunks, in lines of the base; a new or deleted file is one hunk.
    fn line_hunks(&self) -> Vec<LineHunk> {
        match (&self.base, &self.proposed) {
            (Some(base), Some(after)) => hunks::line_hunks(&base.text, after),
            _ => vec![LineHunk {
                old: 0..0,
                new: 0..0,
            }],
        }
    }

    /// Whether it is a whole-file change (a creation or a deletion), taken or left whole.
    fn whole_file(&self) -> bool {
        self.base.is_none() || self.proposed.is_none()
    }
}

/// What the user picked of the held proposals.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pick {
    Accept,
    Reject,
}

/// What commands and reads of a reviewing session see: its own proposals over the live
/// buffers and the disk.
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
        let proposals = self
            .review
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
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
            files.push(file_plan(path, current, proposal.proposed.clone()));
        }
        let plan = Plan {
            files,
            ..Plan::default()
        };
        self.apply_unrecorded(&plan)?;
        self.remember(&plan);
        self.review
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        Ok(relative_names(proposals.keys()))
    }

    /// Applies (`accept`) or drops the hunks `ids` names, all together or none: a hunk whose
    /// lines the user changed since is refused with nothing applied. Hunks not named stay
    /// proposed (recomputed over the new text). The files touched.
    pub fn pick_hunks(&self, ids: &[String], accept: bool) -> Result<Vec<String>, EditError> {
        let pick = if accept { Pick::Accept } else { Pick::Reject };
        let proposals = self
            .review
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if let Some(unknown) = ids
            .iter()
            .find(|id| !proposals.values().any(|p| p.hunk_ids.contains(id)))
        {
            return Err(EditError::BadPath {
                path: unknown.clone(),
                reason: "is no hunk this session holds (it may have been accepted, rejected or \
                         replaced by a later proposal)",
            });
        }
        let mut files = Vec::new();
        let mut next: Vec<(PathBuf, Option<Proposal>)> = Vec::new();
        let mut notes = Vec::new();
        for (path, proposal) in &proposals {
            let all = proposal.line_hunks();
            let named: Vec<bool> = proposal
                .hunk_ids
                .iter()
                .map(|id| ids.contains(id))
                .collect();
            if !named.contains(&true) {
                continue;
            }
            let chosen: Vec<LineHunk> = pick_of(&all, &named, true);
            let rest: Vec<LineHunk> = pick_of(&all, &named, false);
            let rest_ids: Vec<String> = pick_of(&proposal.hunk_ids, &named, false);
            if pick == Pick::Reject {
                for hunk in &chosen {
                    notes.push(describe(path, proposal, hunk));
                }
            }
            if proposal.whole_file() {
                if pick == Pick::Accept {
                    let current = match self.live_state(path)? {
                        FileState::File(current) => Some(current),
                        _ => None,
                    };
                    if current.as_ref().map(|c| &c.text) != proposal.base.as_ref().map(|b| &b.text)
                    {
                        return Err(EditError::Stale { path: path.clone() });
                    }
                    files.push(file_plan(path, current, proposal.proposed.clone()));
                }
                next.push((path.clone(), None));
                continue;
            }
            let after = proposal.proposed.clone().unwrap_or_default();
            let base = proposal.base_text();
            let new_base = match pick {
                Pick::Reject => proposal.base.clone(),
                Pick::Accept => {
                    let current = match self.live_state(path)? {
                        FileState::File(current) => current,
                        _ => return Err(EditError::Stale { path: path.clone() }),
                    };
                    let text = hunks::apply_to(base, &after, &current.text, &chosen)
                        .map_err(|_| EditError::Stale { path: path.clone() })?;
                    files.push(file_plan(path, Some(current), Some(text.clone())));
                    Some(Versioned {
                        text,
                        version: None,
                    })
                }
            };
            let new_base_text = new_base.as_ref().map_or("", |b| b.text.as_str());
            let (proposed, left_out) = hunks::apply_what_fits(base, &after, new_base_text, &rest);
            for &index in &left_out {
                notes.push(format!(
                    "{}: a proposed change no longer fits the file (the user changed its lines) \
                     and was dropped: {}",
                    path.display(),
                    describe(path, proposal, &rest[index])
                ));
            }
            let kept_ids: Vec<String> = rest_ids
                .iter()
                .enumerate()
                .filter(|(i, _)| !left_out.contains(i))
                .map(|(_, id)| id.clone())
                .collect();
            next.push((
                path.clone(),
                (proposed != new_base_text).then_some(Proposal {
                    base: new_base,
                    proposed: Some(proposed),
                    hunk_ids: kept_ids,
                }),
            ));
        }
        if !files.is_empty() {
            let plan = Plan {
                files,
                ..Plan::default()
            };
            self.apply_unrecorded(&plan)?;
            self.remember(&plan);
        }
        let mut held = self.review.lock().unwrap_or_else(|e| e.into_inner());
        let mut touched = Vec::new();
        for (path, proposal) in next {
            touched.push(path.clone());
            match proposal {
                Some(mut proposal) => {
                    // The kept hunks keep their ids when the recomputed ones line up with them.
                    if proposal.line_hunks().len() != proposal.hunk_ids.len() {
                        proposal.hunk_ids = self.new_hunk_ids(&proposal);
                    }
                    self.announce(&path, &proposal);
                    held.insert(path, proposal);
                }
                None => {
                    held.remove(&path);
                }
            }
        }
        drop(held);
        if !notes.is_empty() {
            self.notes
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .extend(notes);
        }
        Ok(relative_names(touched.iter()))
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
        for (path, proposal) in self.review.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            if let Some(text) = &proposal.proposed {
                texts.insert(path.clone(), text.clone().into_bytes());
            }
        }
        texts.into_iter().collect()
    }

    /// Whether edits are held for review, or some still are.
    pub fn reviews(&self) -> bool {
        self.is_reviewing()
            || !self
                .review
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .is_empty()
    }

    /// Drops every held edit; the files they would have changed. The model hears of it.
    pub fn reject(&self) -> Vec<String> {
        let proposals = std::mem::take(&mut *self.review.lock().unwrap_or_else(|e| e.into_inner()));
        let notes: Vec<String> = proposals
            .iter()
            .flat_map(|(path, proposal)| {
                proposal
                    .line_hunks()
                    .iter()
                    .map(|hunk| describe(path, proposal, hunk))
                    .collect::<Vec<_>>()
            })
            .collect();
        self.notes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(notes);
        relative_names(proposals.keys())
    }

    /// The hunks still held, one line each, for the model at a turn's start.
    pub fn held_summary(&self) -> Vec<String> {
        let held = self.review.lock().unwrap_or_else(|e| e.into_inner());
        held.iter()
            .flat_map(|(path, proposal)| {
                proposal
                    .line_hunks()
                    .iter()
                    .map(|hunk| describe(path, proposal, hunk))
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    fn new_hunk_ids(&self, proposal: &Proposal) -> Vec<String> {
        proposal
            .line_hunks()
            .iter()
            .map(|_| {
                let n = self
                    .hunk_counter
                    .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                format!("h{}", n + 1)
            })
            .collect()
    }

    /// Tells the session (and through it the editor) what is proposed for `path` now.
    fn announce(&self, path: &Path, proposal: &Proposal) {
        let _ = self.tool_events.send(ToolEvent::EditProposed {
            path: path.to_string_lossy().replace('\\', "/"),
            before: proposal.base.as_ref().map(|b| b.text.clone()),
            after: proposal.proposed.clone(),
            hunks: wire_hunks(proposal),
        });
    }

    /// Holds `plan` for review, checked against what the session sees.
    pub(super) fn propose(&self, plan: &Plan) -> Result<(), EditError> {
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
        let mut held = self.review.lock().unwrap_or_else(|e| e.into_inner());
        for file in &plan.files {
            let base = match held.get(&file.path) {
                Some(proposal) => proposal.base.clone(),
                None => match self.live_state(&file.path)? {
                    FileState::File(current) => Some(current),
                    _ => None,
                },
            };
            let mut proposal = Proposal {
                base,
                proposed: file.after.clone(),
                hunk_ids: Vec::new(),
            };
            if proposal.base.as_ref().map(|b| &b.text) == proposal.proposed.as_ref() {
                // The agent put the file back as it was: nothing is proposed any more.
                held.remove(&file.path);
                continue;
            }
            proposal.hunk_ids = self.new_hunk_ids(&proposal);
            self.announce(&file.path, &proposal);
            held.insert(file.path.clone(), proposal);
        }
        Ok(())
    }
}

/// The plan that turns `current` into `after` (`None`: deletes the file).
fn file_plan(path: &Path, current: Option<Versioned>, after: Option<String>) -> FilePlan {
    FilePlan {
        path: path.to_owned(),
        edits: match (&current, &after) {
            (Some(before), Some(after)) => {
                vec![crate::edit::plan::replacement(&before.text, after)]
            }
            _ => Vec::new(),
        },
        before: current,
        after,
    }
}

/// The items of `all` whose `named` flag is `keep`.
fn pick_of<T: Clone>(all: &[T], named: &[bool], keep: bool) -> Vec<T> {
    all.iter()
        .zip(named)
        .filter(|(_, named)| **named == keep)
        .map(|(item, _)| item.clone())
        .collect()
}

/// The hunks of `proposal` as the protocol shows them.
fn wire_hunks(proposal: &Proposal) -> Vec<Hunk> {
    proposal
        .line_hunks()
        .iter()
        .zip(&proposal.hunk_ids)
        .map(|(hunk, id)| wire_hunk(proposal, hunk, id))
        .collect()
}

/// One hunk of `proposal` with its texts (a whole-file proposal is one hunk of it all).
fn wire_hunk(proposal: &Proposal, hunk: &LineHunk, id: &str) -> Hunk {
    let before = hunks::lines(proposal.base_text());
    let after = hunks::lines(proposal.proposed.as_deref().unwrap_or_default());
    let (old, new) = if proposal.whole_file() {
        (0..before.len(), 0..after.len())
    } else {
        (hunk.old.clone(), hunk.new.clone())
    };
    Hunk {
        id: id.to_owned(),
        start_line: old.start as u32 + 1,
        end_line: old.end as u32,
        old_text: before[old].concat(),
        new_text: after[new].concat(),
    }
}

/// One hunk in a line the model reads: where, what was there, what was proposed.
fn describe(path: &Path, proposal: &Proposal, hunk: &LineHunk) -> String {
    let shown = |text: &str| {
        let text = text.trim_end();
        match text.char_indices().nth(200) {
            Some((cut, _)) => format!("{}…", &text[..cut]),
            None => text.to_owned(),
        }
    };
    let h = wire_hunk(proposal, hunk, "");
    format!(
        "{} lines {}-{}: {:?} -> {:?}",
        path.display(),
        h.start_line,
        h.end_line.max(h.start_line),
        shown(&h.old_text),
        shown(&h.new_text)
    )
}
