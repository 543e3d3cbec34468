//! Where an editor session's edits land: `workspace/applyEdit` on the open documents —
//! versioned, and confirmed from the `didChange` that follows — and the disk for the other
//! files; in review mode, held as proposals until accepted. Every applied plan is remembered
//! for undo.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tower_lsp_server::Client;
use tower_lsp_server::ls_types as lsp;

use super::super::convert;
use crate::agent::AgentEvent;
use crate::agent::tools::EditTarget;
use crate::buffers::{Buffers, DocumentKey, PositionEncoding, offset_to_position};
use crate::edit::{
    Checkpoint, DiskFiles, EditError, FilePlan, FileSource, FileState, GateMode, Plan, Versioned,
};
use crate::workspace::Overlay;

/// How long the `didChange` confirming an applied edit may take to arrive.
const CONFIRMATION: Duration = Duration::from_secs(3);

/// The open buffers, read live: a session sees every keystroke the user types while it runs.
pub struct LiveBuffers(pub Arc<Mutex<Buffers>>);

impl Overlay for LiveBuffers {
    fn buffer_text(&self, path: &Path) -> Option<String> {
        let buffers = self.0.lock().unwrap_or_else(|e| e.into_inner());
        buffers
            .get(&DocumentKey::File(path.to_path_buf()))
            .map(|document| document.text().to_string())
    }
}

/// Edits held for review: per workspace-relative path, the file as it was when the session
/// first changed it (text, and buffer version when open) and the text the agent proposes
/// (`None`: deleted).
type Pending = Arc<Mutex<BTreeMap<PathBuf, Proposal>>>;

#[derive(Clone, Debug)]
struct Proposal {
    base: Option<Versioned>,
    proposed: Option<String>,
}

/// What a review session sees: its own proposals over the live buffers and the disk.
pub struct ReviewOverlay {
    root: PathBuf,
    pending: Pending,
    live: LiveBuffers,
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

/// Edits to the editor's open documents through `workspace/applyEdit`, and to other files on
/// disk; every applied plan remembered for undo.
pub struct EditorTarget {
    client: Client,
    buffers: Arc<Mutex<Buffers>>,
    root: PathBuf,
    runtime: tokio::runtime::Handle,
    disk: DiskFiles,
    gate: GateMode,
    /// The client takes `documentChanges` (versioned edits).
    versioned: bool,
    applied: Mutex<Vec<Checkpoint>>,
    /// `applyMode: "review"`: edits are held here until accepted or rejected.
    review: Option<Pending>,
    /// Where proposals are announced (review mode).
    events: Option<tokio::sync::mpsc::UnboundedSender<AgentEvent>>,
}

impl EditorTarget {
    pub fn new(
        client: Client,
        buffers: Arc<Mutex<Buffers>>,
        root: PathBuf,
        gate: GateMode,
        versioned: bool,
    ) -> Self {
        Self {
            client,
            buffers,
            disk: DiskFiles::new(&root),
            root,
            runtime: tokio::runtime::Handle::current(),
            gate,
            versioned,
            applied: Mutex::new(Vec::new()),
            review: None,
            events: None,
        }
    }

    /// Holds edits for review instead of applying them; proposals are announced on `events`.
    pub fn reviewing(mut self, events: tokio::sync::mpsc::UnboundedSender<AgentEvent>) -> Self {
        self.review = Some(Pending::default());
        self.events = Some(events);
        self
    }

    /// The overlay a session on this target reads through.
    pub fn overlay(&self) -> Arc<dyn Overlay + Send + Sync> {
        let live = LiveBuffers(Arc::clone(&self.buffers));
        match &self.review {
            Some(pending) => Arc::new(ReviewOverlay {
                root: self.root.clone(),
                pending: Arc::clone(pending),
                live,
            }),
            None => Arc::new(live),
        }
    }

    /// The file as the editor and the disk have it, proposals aside.
    fn live_state(&self, path: &Path) -> Result<FileState, EditError> {
        match self.open_document(path) {
            Some((version, text)) => Ok(FileState::File(Versioned {
                text,
                version: Some(version),
            })),
            None => self.disk.state(path),
        }
    }

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
        self.applied
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Checkpoint::of(&plan));
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
    fn propose(&self, pending: &Pending, plan: &Plan) -> Result<(), EditError> {
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
            if let Some(events) = &self.events {
                let _ = events.send(AgentEvent::EditProposed {
                    path: file.path.to_string_lossy().replace('\\', "/"),
                    before: proposal.base.as_ref().map(|b| b.text.clone()),
                    after: proposal.proposed.clone(),
                });
            }
            held.insert(file.path.clone(), proposal);
        }
        Ok(())
    }

    fn open_document(&self, path: &Path) -> Option<(i32, String)> {
        let buffers = self.buffers.lock().unwrap_or_else(|e| e.into_inner());
        buffers
            .get(&DocumentKey::File(self.root.join(path)))
            .map(|document| (document.version(), document.text().to_string()))
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
            self.apply_unrecorded(&checkpoint.inverse())?;
            self.applied.lock().unwrap_or_else(|e| e.into_inner()).pop();
            for (path, _, _) in &checkpoint.files {
                let path = path.to_string_lossy().replace('\\', "/");
                if !files.contains(&path) {
                    files.push(path);
                }
            }
        }
        Ok(files)
    }

    /// Applies `plan`: open documents through the editor (versioned, confirmed), the rest on
    /// disk.
    fn apply_unrecorded(&self, plan: &Plan) -> Result<(), EditError> {
        let mut in_editor = Vec::new();
        let mut on_disk = Vec::new();
        for file in &plan.files {
            let before = file.before.as_ref().map(|b| b.text.as_str());
            match self.open_document(&file.path) {
                Some((version, text)) => {
                    // The buffer must still hold what the plan was computed against.
                    if before != Some(text.as_str()) || file.after.is_none() {
                        return Err(EditError::Stale {
                            path: file.path.clone(),
                        });
                    }
                    in_editor.push((file, version, text));
                }
                None => on_disk.push(file.clone()),
            }
        }
        if !in_editor.is_empty() {
            self.apply_in_editor(&in_editor)?;
        }
        if !on_disk.is_empty() {
            self.disk.apply(&Plan {
                files: on_disk,
                ..Plan::default()
            })?;
        }
        Ok(())
    }

    fn apply_in_editor(&self, files: &[(&FilePlan, i32, String)]) -> Result<(), EditError> {
        let encoding = self
            .buffers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .encoding();
        let mut document_edits = Vec::new();
        let mut changes = HashMap::new();
        for (file, version, text) in files {
            let uri = file_uri(&self.root.join(&file.path))?;
            let edits = text_edits(text, file, encoding);
            if self.versioned {
                document_edits.push(lsp::TextDocumentEdit {
                    text_document: lsp::OptionalVersionedTextDocumentIdentifier {
                        uri,
                        version: Some(*version),
                    },
                    edits: edits.into_iter().map(lsp::OneOf::Left).collect(),
                });
            } else {
                changes.insert(uri, edits);
            }
        }
        let edit = if self.versioned {
            lsp::WorkspaceEdit {
                document_changes: Some(lsp::DocumentChanges::Edits(document_edits)),
                ..Default::default()
            }
        } else {
            lsp::WorkspaceEdit {
                changes: Some(changes),
                ..Default::default()
            }
        };
        let first = files[0].0.path.clone();
        let stale = || EditError::Stale {
            path: first.clone(),
        };
        let client = self.client.clone();
        let response = self
            .runtime
            .block_on(async move { client.apply_edit(edit).await })
            .map_err(|_| stale())?;
        if !response.applied {
            tracing::info!(
                "the editor rejected an agent edit: {}",
                response
                    .failure_reason
                    .as_deref()
                    .unwrap_or("no reason given")
            );
            return Err(stale());
        }
        // Confirmation: every buffer holds the plan's result.
        let deadline = Instant::now() + CONFIRMATION;
        loop {
            let pending = files.iter().find(|(file, _, _)| {
                self.open_document(&file.path).map(|(_, text)| text) != file.after
            });
            let Some((file, _, _)) = pending else {
                return Ok(());
            };
            if Instant::now() > deadline {
                tracing::info!(
                    "the editor said it applied an edit to {} but its buffer never showed it",
                    file.path.display()
                );
                return Err(EditError::Stale {
                    path: file.path.clone(),
                });
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// The LSP edits that turn `text` (the buffer, equal to the plan's `before`) into the plan's
/// `after`, in the negotiated encoding.
fn text_edits(text: &str, file: &FilePlan, encoding: PositionEncoding) -> Vec<lsp::TextEdit> {
    let rope = ropey::Rope::from_str(text);
    let position = |offset: usize| {
        let position = offset_to_position(&rope, offset, encoding);
        lsp::Position::new(position.line, position.character)
    };
    file.edits
        .iter()
        .map(|replacement| lsp::TextEdit {
            range: lsp::Range::new(
                position(replacement.range.start),
                position(replacement.range.end),
            ),
            new_text: replacement.text.clone(),
        })
        .collect()
}

fn file_uri(path: &Path) -> Result<lsp::Uri, EditError> {
    convert::path_uri(path).ok_or_else(|| EditError::BadPath {
        path: path.display().to_string(),
        reason: "cannot be named by a URI",
    })
}

impl FileSource for EditorTarget {
    fn state(&self, path: &Path) -> Result<FileState, EditError> {
        if let Some(pending) = &self.review
            && let Some(proposal) = pending.lock().unwrap_or_else(|e| e.into_inner()).get(path)
        {
            return Ok(match &proposal.proposed {
                Some(text) => FileState::File(Versioned {
                    text: text.clone(),
                    version: None,
                }),
                None => FileState::Missing,
            });
        }
        self.live_state(path)
    }
}

fn relative_names<'a>(paths: impl Iterator<Item = &'a PathBuf>) -> Vec<String> {
    paths
        .map(|path| path.to_string_lossy().replace('\\', "/"))
        .collect()
}

impl EditTarget for EditorTarget {
    fn source(&self) -> &dyn FileSource {
        self
    }

    fn apply(&self, plan: &Plan) -> Result<(), EditError> {
        if let Some(pending) = &self.review {
            return self.propose(pending, plan);
        }
        self.apply_unrecorded(plan)?;
        self.applied
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Checkpoint::of(plan));
        Ok(())
    }

    fn gate(&self) -> GateMode {
        self.gate
    }
}
