//! Where an editor session's edits land: `workspace/applyEdit` — versioned text edits on the
//! open documents, and, when the client declares them, unversioned edits and create / rename /
//! delete operations for the files it has not opened — each confirmed from what follows (the
//! `didChange` or `didOpen`, or the disk); the disk directly for a client that cannot take
//! them. In review mode, edits are held as proposals until accepted. Every applied plan is
//! remembered for undo.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tower_lsp_server::Client;
use tower_lsp_server::ls_types as lsp;

use super::super::convert;
use crate::agent::tools::{EditTarget, Protection, check_inside};
use crate::agent::{ToolEvent, ToolEvents};
use crate::buffers::{Buffers, DocumentKey, PositionEncoding, offset_to_position};
use crate::edit::plan::replacement;
use crate::edit::{
    ActionKind, Checkpoint, CheckpointLog, DiskFiles, EditError, FilePlan, FileSource, FileState,
    GateMode, Plan, Replacement, Versioned,
};
use crate::workspace::Overlay;

/// How long the `didChange` confirming an applied edit may take to arrive.
const CONFIRMATION: Duration = Duration::from_secs(3);

/// What the client declared it takes in a `workspace/applyEdit`
/// (`workspace.workspaceEdit` in its capabilities).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EditCapabilities {
    /// `documentChanges`: versioned text document edits, and unversioned ones for files it
    /// has not opened.
    pub document_changes: bool,
    pub create: bool,
    pub rename: bool,
    pub delete: bool,
}

impl EditCapabilities {
    pub fn of_client(capabilities: Option<&lsp::ClientCapabilities>) -> Self {
        let Some(edit) = capabilities
            .and_then(|caps| caps.workspace.as_ref())
            .and_then(|ws| ws.workspace_edit.as_ref())
        else {
            return Self::default();
        };
        let operations = edit.resource_operations.as_deref().unwrap_or_default();
        Self {
            document_changes: edit.document_changes == Some(true),
            create: operations.contains(&lsp::ResourceOperationKind::Create),
            rename: operations.contains(&lsp::ResourceOperationKind::Rename),
            delete: operations.contains(&lsp::ResourceOperationKind::Delete),
        }
    }

    /// Whether the client can delete an open document safely: emptied by a versioned edit
    /// (refused if the user typed since), then deleted, in one edit.
    fn deletes_open(&self) -> bool {
        self.document_changes && self.delete
    }

    /// Whether the client can take the change of `file`, which it has not opened: a text
    /// edit without a version, and the resource operation creating or deleting it needs.
    fn takes_unopened(&self, file: &FilePlan) -> bool {
        self.document_changes
            && match (&file.before, &file.after) {
                (None, _) => self.create,
                (Some(_), None) => self.delete,
                (Some(_), Some(_)) => true,
            }
    }
}

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
    capabilities: EditCapabilities,
    applied: Mutex<Vec<Checkpoint>>,
    /// Where `applied` is also kept, so undo outlives the server.
    log: Option<CheckpointLog>,
    /// `applyMode: "review"`: edits are held here until accepted or rejected.
    review: Option<Pending>,
    /// Where the session hears of edits applied, refused and proposed.
    tool_events: ToolEvents,
    /// `.git`, `.wright`, `sandbox.protected`: written only once the user allowed it.
    protection: Protection,
}

impl EditorTarget {
    pub fn new(
        client: Client,
        buffers: Arc<Mutex<Buffers>>,
        root: PathBuf,
        gate: GateMode,
        capabilities: EditCapabilities,
        tool_events: ToolEvents,
    ) -> Self {
        Self {
            client,
            buffers,
            disk: DiskFiles::new(&root),
            root,
            runtime: tokio::runtime::Handle::current(),
            gate,
            capabilities,
            applied: Mutex::new(Vec::new()),
            log: None,
            review: None,
            tool_events,
            protection: Protection::default(),
        }
    }

    /// Edits of the paths `protection` covers wait for the user's leave (or are refused).
    pub fn protecting(mut self, protection: Protection) -> Self {
        self.protection = protection;
        self
    }

    /// Keeps the applied edits in `log` too, starting from those it holds (a resumed
    /// session's, or an earlier server's session being undone).
    pub fn recording(mut self, log: CheckpointLog) -> Self {
        let applied = log.load();
        if log.exists() {
            // Drops a line cut by a kill, so what is appended next reads back.
            log.rewrite(&applied);
        }
        self.applied = Mutex::new(applied);
        self.log = Some(log);
        self
    }

    /// Records an applied plan for undo.
    fn remember(&self, plan: &Plan) {
        let checkpoint = Checkpoint::of(plan);
        if let Some(log) = &self.log {
            log.append(&checkpoint);
        }
        self.applied
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(checkpoint);
    }

    /// Holds edits for review instead of applying them.
    pub fn reviewing(mut self) -> Self {
        self.review = Some(Pending::default());
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
            let _ = self.tool_events.send(ToolEvent::EditProposed {
                path: file.path.to_string_lossy().replace('\\', "/"),
                before: proposal.base.as_ref().map(|b| b.text.clone()),
                after: proposal.proposed.clone(),
            });
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

    /// Applies `plan` through the editor — the open documents versioned, the other files too
    /// when the client takes what they need — and confirms it; what the client cannot take
    /// goes to the disk.
    fn apply_unrecorded(&self, plan: &Plan) -> Result<(), EditError> {
        // The editor follows links in what it saves: a path leading out is refused here,
        // whether the buffer is open or not.
        check_inside(&crate::files::Root::open(&self.root)?, plan)?;
        let mut open = Vec::new();
        let mut unopened = Vec::new();
        for file in &plan.files {
            let before = file.before.as_ref().map(|b| b.text.as_str());
            match self.open_document(&file.path) {
                Some(_) if file.after.is_none() && !self.capabilities.deletes_open() => {
                    return Err(EditError::BadPath {
                        path: file.path.to_string_lossy().into_owned(),
                        reason: "is open in the editor, which cannot delete files through \
                                 its edits; leave it, or ask the user to delete it",
                    });
                }
                Some((version, text)) => {
                    // The buffer must still hold what the plan was computed against.
                    if before != Some(text.as_str()) {
                        return Err(EditError::Stale {
                            path: file.path.clone(),
                        });
                    }
                    open.push(OpenFile {
                        plan: file,
                        version,
                        text,
                    });
                }
                None => unopened.push(file),
            }
        }
        let (through_editor, on_disk): (Vec<&FilePlan>, Vec<&FilePlan>) = unopened
            .into_iter()
            .partition(|file| self.capabilities.takes_unopened(file));
        if !open.is_empty() || !through_editor.is_empty() {
            self.apply_in_editor(&open, &through_editor, plan)?;
        }
        if !on_disk.is_empty() {
            self.disk.apply(&Plan {
                files: on_disk.into_iter().cloned().collect(),
                ..Plan::default()
            })?;
        }
        Ok(())
    }

    fn apply_in_editor(
        &self,
        open: &[OpenFile],
        unopened: &[&FilePlan],
        plan: &Plan,
    ) -> Result<(), EditError> {
        let encoding = self
            .buffers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .encoding();
        let edit = if self.capabilities.document_changes {
            let mut operations = Vec::new();
            for file in open {
                let path = self.root.join(&file.plan.path);
                let edits = match &file.plan.after {
                    Some(_) => text_edits(&file.text, &file.plan.edits, encoding),
                    None => text_edits(&file.text, &[replacement(&file.text, "")], encoding),
                };
                operations.push(text_document_edit(&path, Some(file.version), edits)?);
                if file.plan.after.is_none() {
                    operations.push(delete_file(file_uri(&path)?));
                }
            }
            operations.extend(self.unopened_operations(unopened, plan, encoding)?);
            lsp::WorkspaceEdit {
                document_changes: Some(lsp::DocumentChanges::Operations(operations)),
                ..Default::default()
            }
        } else {
            let mut changes = HashMap::new();
            for file in open {
                let uri = file_uri(&self.root.join(&file.plan.path))?;
                changes.insert(uri, text_edits(&file.text, &file.plan.edits, encoding));
            }
            lsp::WorkspaceEdit {
                changes: Some(changes),
                ..Default::default()
            }
        };
        let first = plan.files[0].path.clone();
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
        // `applied: true` is not trusted: every file must show the plan's result — an open
        // buffer from its `didChange`, another file from the `didOpen` of the buffer the
        // editor opened to edit it, or on disk.
        let deadline = Instant::now() + CONFIRMATION;
        loop {
            let open_pending = open.iter().find(|file| !self.shows(file.plan));
            let unopened_pending = unopened.iter().find(|file| !self.shows(file));
            let (path, unconfirmed) = match (open_pending, unopened_pending) {
                (None, None) => return Ok(()),
                (Some(file), _) => (&file.plan.path, false),
                (None, Some(file)) => (&file.path, true),
            };
            if Instant::now() <= deadline {
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
            tracing::info!(
                "the editor said it applied an edit to {} but never showed it",
                path.display()
            );
            let path = path.clone();
            // A versioned edit the editor skipped is safe to redo; an unversioned one might
            // sit in a buffer wright cannot see, and redoing it could apply it twice.
            return Err(if unconfirmed {
                EditError::Unconfirmed { path }
            } else {
                EditError::Stale { path }
            });
        }
    }

    /// The operations that bring the files the editor has not opened to the plan's result:
    /// unversioned text edits, creations, deletions, and renames for the plan's moves when
    /// the client takes them. Each file must still be on disk what the plan was computed
    /// against.
    fn unopened_operations(
        &self,
        files: &[&FilePlan],
        plan: &Plan,
        encoding: PositionEncoding,
    ) -> Result<Vec<lsp::DocumentChangeOperation>, EditError> {
        let find = |path: &Path| files.iter().copied().find(|file| file.path == path);
        // Moves whose source goes away and whose destination is new: destination → source.
        let renames: HashMap<&Path, &FilePlan> = if self.capabilities.rename {
            plan.actions
                .iter()
                .filter(|action| action.kind == ActionKind::Move)
                .filter_map(|action| {
                    let source = find(&action.path)?;
                    let destination = find(action.to.as_deref()?)?;
                    (source.before.is_some()
                        && source.after.is_none()
                        && destination.before.is_none()
                        && destination.after.is_some())
                    .then_some((destination.path.as_path(), source))
                })
                .collect()
        } else {
            HashMap::new()
        };
        let renamed = |path: &Path| renames.values().any(|source| source.path == path);
        let mut operations = Vec::new();
        for file in files {
            let on_disk = self.disk_text(&file.path)?;
            if on_disk.as_ref() != file.before.as_ref().map(|b| &b.text) {
                return Err(EditError::Stale {
                    path: file.path.clone(),
                });
            }
            let path = self.root.join(&file.path);
            let uri = file_uri(&path)?;
            match (&file.before, &file.after, renames.get(file.path.as_path())) {
                (_, Some(after), Some(source)) => {
                    let before = &source.before.as_ref().map_or("", |b| b.text.as_str());
                    operations.push(lsp::DocumentChangeOperation::Op(lsp::ResourceOp::Rename(
                        lsp::RenameFile {
                            old_uri: file_uri(&self.root.join(&source.path))?,
                            new_uri: uri,
                            options: Some(lsp::RenameFileOptions {
                                overwrite: Some(false),
                                ignore_if_exists: Some(false),
                            }),
                            annotation_id: None,
                        },
                    )));
                    if before != after {
                        let edits = text_edits(before, &[replacement(before, after)], encoding);
                        operations.push(text_document_edit(&path, None, edits)?);
                    }
                }
                (_, None, _) if renamed(&file.path) => {}
                (None, after, _) => {
                    operations.push(lsp::DocumentChangeOperation::Op(lsp::ResourceOp::Create(
                        lsp::CreateFile {
                            uri,
                            options: Some(lsp::CreateFileOptions {
                                overwrite: Some(false),
                                ignore_if_exists: Some(false),
                            }),
                            annotation_id: None,
                        },
                    )));
                    if let Some(text) = after.as_deref().filter(|text| !text.is_empty()) {
                        let edits = text_edits("", &[replacement("", text)], encoding);
                        operations.push(text_document_edit(&path, None, edits)?);
                    }
                }
                (Some(_), None, _) => operations.push(delete_file(uri)),
                (Some(before), Some(_), None) => {
                    let edits = text_edits(&before.text, &file.edits, encoding);
                    operations.push(text_document_edit(&path, None, edits)?);
                }
            }
        }
        Ok(operations)
    }

    /// The text of `path` on disk; `None` when no file is there.
    fn disk_text(&self, path: &Path) -> Result<Option<String>, EditError> {
        Ok(match self.disk.state(path)? {
            FileState::File(current) => Some(current.text),
            _ => None,
        })
    }

    /// Whether the editor or the disk shows `file`'s result: an open buffer holding it, or,
    /// with no buffer open, the disk; a deleted file gone from the disk, its buffer (if the
    /// editor has not closed it yet) emptied.
    fn shows(&self, file: &FilePlan) -> bool {
        let on_disk = || self.disk_text(&file.path).ok().flatten();
        match (self.open_document(&file.path), &file.after) {
            (Some((_, text)), Some(after)) => &text == after,
            (open, None) => open.is_none_or(|(_, text)| text.is_empty()) && on_disk().is_none(),
            (None, after) => &on_disk() == after,
        }
    }
}

/// An open document a plan changes, as the server holds it.
struct OpenFile<'a> {
    plan: &'a FilePlan,
    version: i32,
    text: String,
}

fn delete_file(uri: lsp::Uri) -> lsp::DocumentChangeOperation {
    lsp::DocumentChangeOperation::Op(lsp::ResourceOp::Delete(lsp::DeleteFile {
        uri,
        options: Some(lsp::DeleteFileOptions {
            recursive: Some(false),
            ignore_if_not_exists: Some(false),
        }),
        annotation_id: None,
    }))
}

fn text_document_edit(
    path: &Path,
    version: Option<i32>,
    edits: Vec<lsp::TextEdit>,
) -> Result<lsp::DocumentChangeOperation, EditError> {
    Ok(lsp::DocumentChangeOperation::Edit(lsp::TextDocumentEdit {
        text_document: lsp::OptionalVersionedTextDocumentIdentifier {
            uri: file_uri(path)?,
            version,
        },
        edits: edits.into_iter().map(lsp::OneOf::Left).collect(),
    }))
}

/// The LSP edits that apply `replacements` (byte ranges of `text`) to `text`, in the
/// negotiated encoding.
fn text_edits(
    text: &str,
    replacements: &[Replacement],
    encoding: PositionEncoding,
) -> Vec<lsp::TextEdit> {
    let rope = ropey::Rope::from_str(text);
    let position = |offset: usize| {
        let position = offset_to_position(&rope, offset, encoding);
        lsp::Position::new(position.line, position.character)
    };
    replacements
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
        let paths = relative_names(plan.files.iter().map(|file| &file.path));
        if let Err(err) = self.apply_unrecorded(plan) {
            let _ = self.tool_events.send(ToolEvent::EditRejected {
                paths,
                reason: err.to_string(),
            });
            return Err(err);
        }
        let _ = self.tool_events.send(ToolEvent::EditApplied { paths });
        self.remember(plan);
        Ok(())
    }

    fn gate(&self) -> GateMode {
        self.gate
    }

    fn protection(&self) -> &Protection {
        &self.protection
    }
}
