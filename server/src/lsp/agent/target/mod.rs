//! Where an editor session's edits land: `workspace/applyEdit` — versioned text edits on the
//! open documents, and, when the client declares them, unversioned edits and create / rename /
//! delete operations for the files it has not opened — each confirmed from what follows (the
//! `didChange` or `didOpen`, or the disk); the disk directly for a client that cannot take
//! them. In review mode, edits are held as proposals until accepted. Every applied plan is
//! remembered for undo.
//!
//! An editor's `applied: true` is not trusted: the texts an open document goes through after
//! the edit was sent tell whether the edit landed on the text it was computed against, was
//! skipped, or was applied to text the user had changed meanwhile (a client that does not check
//! versions). An edit that landed only in part or misplaced is taken back, and the user told
//! when it cannot be.

mod review;
mod undo;

use review::Proposal;
pub use review::ReviewOverlay;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tower_lsp_server::Client;
use tower_lsp_server::ls_types as lsp;

use super::super::convert;
use crate::agent::tools::{EditTarget, Protection, check_inside};
use crate::agent::{ToolEvent, ToolEvents};
use crate::buffers::{
    Buffers, DocumentKey, Following, Position, PositionEncoding, TextChange, apply_changes,
    offset_to_position,
};
use crate::edit::plan::replacement;
use crate::edit::{
    ActionKind, Checkpoint, CheckpointLog, DiskFiles, EditError, FilePlan, FileSource, FileState,
    GateMode, Plan, Replacement, Versioned,
};
use crate::workspace::Overlay;

/// How long the `didChange` confirming an applied edit may take to arrive.
const CONFIRMATION: Duration = Duration::from_secs(3);

/// What the client declared it takes in a `workspace/applyEdit`
/// (`workspace.workspaceEdit` in its capabilities), and what is known of its handler.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EditCapabilities {
    /// `documentChanges`: versioned text document edits, and unversioned ones for files it
    /// has not opened.
    pub document_changes: bool,
    pub create: bool,
    pub rename: bool,
    pub delete: bool,
    /// Neovim's own client, without a plugin that declares `documentChanges`: its handler
    /// applies versioned `documentChanges` although the client does not declare them, but
    /// checks the version only of a request's first `TextDocumentEdit` and only when it is
    /// above 0, and answers `applied: true` when it skipped a stale edit. So it gets its open
    /// documents' edits versioned, one document per request, never at version 0 (a buffer
    /// that changed since Neovim's `didOpen` at version 0 is at its changedtick, above 1).
    pub neovim_builtin: bool,
}

impl EditCapabilities {
    /// What the client declared, and who it is (`clientInfo.name`).
    pub fn of_client(
        capabilities: Option<&lsp::ClientCapabilities>,
        client_name: Option<&str>,
    ) -> Self {
        let edit = capabilities
            .and_then(|caps| caps.workspace.as_ref())
            .and_then(|ws| ws.workspace_edit.as_ref());
        let operations = edit
            .and_then(|edit| edit.resource_operations.as_deref())
            .unwrap_or_default();
        let document_changes = edit.and_then(|edit| edit.document_changes) == Some(true);
        Self {
            document_changes,
            create: operations.contains(&lsp::ResourceOperationKind::Create),
            rename: operations.contains(&lsp::ResourceOperationKind::Rename),
            delete: operations.contains(&lsp::ResourceOperationKind::Delete),
            neovim_builtin: !document_changes && client_name == Some("Neovim"),
        }
    }

    /// Whether the open documents' edits go as versioned `documentChanges`.
    fn versioned(&self) -> bool {
        self.document_changes || self.neovim_builtin
    }

    /// The version to send for a document the server holds at `version`: Neovim's handler
    /// does not check version 0, but does check 1, which no buffer that changed since its
    /// `didOpen` (at 0) is at.
    fn sent_version(&self, version: i32) -> i32 {
        if self.neovim_builtin {
            version.max(1)
        } else {
            version
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
    /// Edits held for review, until accepted or rejected.
    review: Pending,
    /// `applyMode: "review"` (switchable between steps): edits go to `review`.
    reviewing: std::sync::atomic::AtomicBool,
    /// Numbers the hunks of proposals, so their ids are unique in the session.
    hunk_counter: std::sync::atomic::AtomicU64,
    /// What the user rejected of the proposals, for the model's next request.
    notes: Mutex<Vec<String>>,
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
            review: Pending::default(),
            reviewing: Default::default(),
            hunk_counter: Default::default(),
            notes: Mutex::default(),
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

    /// Holds edits for review (`true`) or applies them (`false`) from now on; what is held
    /// stays held until accepted or rejected.
    pub fn set_reviewing(&self, reviewing: bool) {
        self.reviewing
            .store(reviewing, std::sync::atomic::Ordering::SeqCst);
    }

    fn is_reviewing(&self) -> bool {
        self.reviewing.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The overlay a session on this target reads through: its held proposals over the live
    /// buffers.
    pub fn overlay(&self) -> Arc<dyn Overlay + Send + Sync> {
        Arc::new(ReviewOverlay {
            root: self.root.clone(),
            pending: Arc::clone(&self.review),
            live: LiveBuffers(Arc::clone(&self.buffers)),
        })
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

    /// The open document at `path` as the server holds it, followed from now on.
    fn follow(&self, path: &Path) -> Option<Followed> {
        let mut buffers = self.buffers.lock().unwrap_or_else(|e| e.into_inner());
        let (following, document) = buffers.follow(&DocumentKey::File(self.root.join(path)))?;
        Some(Followed {
            buffers: Arc::clone(&self.buffers),
            following: Some(following),
            version: document.version(),
            text: document.text().to_string(),
        })
    }

    fn open_document(&self, path: &Path) -> Option<(i32, String)> {
        let buffers = self.buffers.lock().unwrap_or_else(|e| e.into_inner());
        buffers
            .get(&DocumentKey::File(self.root.join(path)))
            .map(|document| (document.version(), document.text().to_string()))
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
            match self.follow(&file.path) {
                Some(_) if file.after.is_none() && !self.capabilities.deletes_open() => {
                    return Err(EditError::BadPath {
                        path: file.path.to_string_lossy().into_owned(),
                        reason: "is open in the editor, which cannot delete files through \
                                 its edits; leave it, or ask the user to delete it",
                    });
                }
                Some(followed) => {
                    // The buffer must still hold what the plan was computed against.
                    if before != Some(followed.text.as_str()) {
                        return Err(EditError::Stale {
                            path: file.path.clone(),
                        });
                    }
                    let edits = match &file.after {
                        Some(_) => file.edits.clone(),
                        None => vec![replacement(&followed.text, "")],
                    };
                    open.push(OpenFile {
                        path: file.path.clone(),
                        edits,
                        after: file.after.clone(),
                        followed,
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

    /// Sends the edit in as many requests as the client needs (one per document for Neovim's
    /// own client, which checks the version of the first only), each confirmed before the
    /// next; when one fails, what the others changed is taken back.
    fn apply_in_editor(
        &self,
        open: &[OpenFile],
        unopened: &[&FilePlan],
        plan: &Plan,
    ) -> Result<(), EditError> {
        let requests: Vec<&[OpenFile]> = if self.capabilities.neovim_builtin && !open.is_empty() {
            open.chunks(1).collect()
        } else {
            vec![open]
        };
        let mut landed = Vec::new();
        for (index, request) in requests.into_iter().enumerate() {
            let unopened = if index == 0 { unopened } else { &[] };
            match self.deliver(request, unopened, plan) {
                Ok(()) => landed.extend(request.iter().filter_map(OpenFile::landed)),
                Err(failure) => {
                    landed.extend(failure.take_back);
                    return Err(self.recover(failure.error, landed));
                }
            }
        }
        Ok(())
    }

    /// One `workspace/applyEdit` of `open` and `unopened`, confirmed from what the editor
    /// shows next (`applied: true` is not proof).
    fn deliver(
        &self,
        open: &[OpenFile],
        unopened: &[&FilePlan],
        plan: &Plan,
    ) -> Result<(), Failure> {
        let encoding = self
            .buffers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .encoding();
        let first = open
            .first()
            .map(|file| file.path.clone())
            .or_else(|| unopened.first().map(|file| file.path.clone()))
            .unwrap_or_default();
        let refused = |error: EditError| Failure {
            error,
            take_back: Vec::new(),
        };
        let sent: Vec<Vec<lsp::TextEdit>> = open
            .iter()
            .map(|file| text_edits(&file.followed.text, &file.edits, encoding))
            .collect();
        let edit = if self.capabilities.versioned() {
            let mut operations = Vec::new();
            for (file, edits) in open.iter().zip(&sent) {
                let path = self.root.join(&file.path);
                let version = self.capabilities.sent_version(file.followed.version);
                operations.push(
                    text_document_edit(&path, Some(version), edits.clone()).map_err(refused)?,
                );
                if file.after.is_none() {
                    operations.push(delete_file(file_uri(&path).map_err(refused)?));
                }
            }
            operations.extend(
                self.unopened_operations(unopened, plan, encoding)
                    .map_err(refused)?,
            );
            lsp::WorkspaceEdit {
                document_changes: Some(lsp::DocumentChanges::Operations(operations)),
                ..Default::default()
            }
        } else {
            let mut changes = HashMap::new();
            for (file, edits) in open.iter().zip(&sent) {
                let uri = file_uri(&self.root.join(&file.path)).map_err(refused)?;
                changes.insert(uri, edits.clone());
            }
            lsp::WorkspaceEdit {
                changes: Some(changes),
                ..Default::default()
            }
        };
        let stale = |path: &Path| EditError::Stale {
            path: path.to_path_buf(),
        };
        let client = self.client.clone();
        let response = self
            .runtime
            .block_on(async move { client.apply_edit(edit).await })
            .map_err(|_| refused(stale(&first)))?;
        if !response.applied {
            tracing::info!(
                "the editor rejected an agent edit: {}",
                response
                    .failure_reason
                    .as_deref()
                    .unwrap_or("no reason given")
            );
            return Err(refused(stale(&first)));
        }
        // Every file must show the plan's result — an open buffer in the texts it went
        // through since, another file from the `didOpen` of the buffer the editor opened to
        // edit it, or on disk.
        let mut watches: Vec<Watch> = open
            .iter()
            .zip(sent)
            .map(|(file, sent)| Watch::new(file, sent))
            .collect();
        let deadline = Instant::now() + CONFIRMATION;
        loop {
            for (watch, file) in watches.iter_mut().zip(open) {
                if matches!(watch.landing, Landing::Pending) {
                    watch.landing = self.landing(file, watch, encoding);
                }
            }
            let landed = |open: &[OpenFile], watches: &[Watch]| -> Vec<TakeBack> {
                open.iter()
                    .zip(watches)
                    .filter(|(_, watch)| matches!(watch.landing, Landing::Applied))
                    .filter_map(|(file, _)| file.landed())
                    .collect()
            };
            if let Some((file, watch)) = open
                .iter()
                .zip(&watches)
                .find(|(_, watch)| matches!(watch.landing, Landing::Misplaced { .. }))
            {
                let Landing::Misplaced { on, result } = &watch.landing else {
                    unreachable!("found as misplaced")
                };
                tracing::info!(
                    "the editor applied an agent edit of {} to text the user had changed since",
                    file.path.display()
                );
                let mut take_back = landed(open, &watches);
                take_back.push(TakeBack {
                    path: file.path.clone(),
                    now: result.clone(),
                    restore: on.clone(),
                    misplaced: true,
                });
                return Err(Failure {
                    error: stale(&file.path),
                    take_back,
                });
            }
            let open_pending = open
                .iter()
                .zip(&watches)
                .find(|(_, watch)| matches!(watch.landing, Landing::Pending));
            let unopened_pending = unopened.iter().find(|file| !self.shows(file));
            let (path, unconfirmed) = match (open_pending, unopened_pending) {
                (None, None) => return Ok(()),
                (Some((file, _)), _) => (&file.path, false),
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
            return Err(Failure {
                error: if unconfirmed {
                    EditError::Unconfirmed { path }
                } else {
                    EditError::Stale { path }
                },
                take_back: landed(open, &watches),
            });
        }
    }

    /// How `file`'s edit has landed so far, judged from the texts its buffer went through
    /// since it was sent (or, when the buffer was closed or reopened since, from what the
    /// editor and the disk show now).
    fn landing(&self, file: &OpenFile, watch: &mut Watch, encoding: PositionEncoding) -> Landing {
        let (Some(after), Some(texts)) = (&watch.after, file.followed.texts()) else {
            return if self.shows_at(&file.path, file.after.as_deref()) {
                Landing::Applied
            } else {
                Landing::Pending
            };
        };
        while watch.examined < texts.len() {
            let (_, text) = &texts[watch.examined];
            if text == after {
                return Landing::Applied;
            }
            // The edit applied (by position, as a client that does not check versions does)
            // to a text the user had changed: one of the texts before this one.
            for (index, (_, earlier)) in texts[..watch.examined].iter().enumerate() {
                if watch.merged.len() <= index {
                    watch
                        .merged
                        .push(apply_sent(earlier, &watch.sent, encoding));
                }
                if watch.merged[index].as_ref() == Some(text) {
                    return Landing::Misplaced {
                        on: earlier.to_string(),
                        result: text.to_string(),
                    };
                }
            }
            watch.examined += 1;
        }
        Landing::Pending
    }

    /// Takes back `changes` (what the edit that failed, or the requests before it, changed),
    /// and returns the error to report: `error` when all of them were taken back, else that
    /// the edit may be there, misplaced. The user is told of an edit that landed misplaced,
    /// and of any change that could not be taken back.
    fn recover(&self, error: EditError, changes: Vec<TakeBack>) -> EditError {
        if changes.is_empty() {
            return error;
        }
        let misplaced: Vec<String> = changes
            .iter()
            .filter(|change| change.misplaced)
            .map(|change| display_path(&change.path))
            .collect();
        let kept = self.take_back(changes);
        let message = if kept.is_empty() {
            if misplaced.is_empty() {
                return error;
            }
            format!(
                "wright: the agent's edit of {} landed on text you had just changed; it was \
                 taken back, and the agent will redo it",
                misplaced.join(", ")
            )
        } else {
            let names: Vec<String> = kept.iter().map(|path| display_path(path)).collect();
            format!(
                "wright: the agent's edit of {} landed on text you had just changed (or only \
                 in part) and could not be taken back: check it (undo takes it back)",
                names.join(", ")
            )
        };
        tracing::warn!("{message}");
        let client = self.client.clone();
        self.runtime.block_on(async move {
            client
                .show_message(lsp::MessageType::WARNING, message)
                .await;
        });
        match kept.into_iter().next() {
            Some(path) => EditError::Misapplied { path },
            None => error,
        }
    }

    /// Brings each document back to the text it had before, when it still reads what the
    /// edit made of it; the paths it could not bring back.
    fn take_back(&self, changes: Vec<TakeBack>) -> Vec<PathBuf> {
        let mut kept = Vec::new();
        let mut open = Vec::new();
        for change in changes {
            match self.follow(&change.path) {
                Some(followed) if followed.text == change.now => open.push(OpenFile {
                    edits: vec![replacement(&change.now, &change.restore)],
                    path: change.path,
                    after: Some(change.restore),
                    followed,
                }),
                _ => kept.push(change.path),
            }
        }
        let requests: Vec<&[OpenFile]> = if self.capabilities.neovim_builtin {
            open.chunks(1).collect()
        } else {
            vec![&open[..]]
        };
        for request in requests.into_iter().filter(|request| !request.is_empty()) {
            if self.deliver(request, &[], &Plan::default()).is_err() {
                kept.extend(request.iter().map(|file| file.path.clone()));
            }
        }
        kept
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

    /// Whether the editor or the disk shows `file`'s result.
    fn shows(&self, file: &FilePlan) -> bool {
        self.shows_at(&file.path, file.after.as_deref())
    }

    /// Whether the editor or the disk shows `after` at `path`: an open buffer holding it, or,
    /// with no buffer open, the disk; a deleted file (`None`) gone from the disk, its buffer
    /// (if the editor has not closed it yet) emptied.
    fn shows_at(&self, path: &Path, after: Option<&str>) -> bool {
        let on_disk = || self.disk_text(path).ok().flatten();
        match (self.open_document(path), after) {
            (Some((_, text)), Some(after)) => text == after,
            (open, None) => open.is_none_or(|(_, text)| text.is_empty()) && on_disk().is_none(),
            (None, after) => on_disk().as_deref() == after,
        }
    }
}

/// An open document an edit changes: as the server held it when the edit was checked against
/// it (and followed from then on), the edit, and its result (`None`: deleted).
struct OpenFile {
    path: PathBuf,
    edits: Vec<Replacement>,
    after: Option<String>,
    followed: Followed,
}

impl OpenFile {
    /// How to take back this edit once it landed; `None` for a deletion (its buffer is gone).
    fn landed(&self) -> Option<TakeBack> {
        Some(TakeBack {
            path: self.path.clone(),
            now: self.after.clone()?,
            restore: self.followed.text.clone(),
            misplaced: false,
        })
    }
}

/// An open document as the server held it when it started following it; stops following
/// when dropped.
struct Followed {
    buffers: Arc<Mutex<Buffers>>,
    following: Option<Following>,
    version: i32,
    text: String,
}

impl Followed {
    /// The texts the document went through since; `None` when it was closed or reopened.
    fn texts(&self) -> Option<Vec<(i32, ropey::Rope)>> {
        let buffers = self.buffers.lock().unwrap_or_else(|e| e.into_inner());
        buffers.followed(self.following.as_ref()?)
    }
}

impl Drop for Followed {
    fn drop(&mut self) {
        if let Some(following) = self.following.take() {
            self.buffers
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .unfollow(following);
        }
    }
}

/// What is known of how an edit sent to the editor landed in one open document.
enum Landing {
    /// Not shown yet.
    Pending,
    /// The edit's result appeared: it was applied to the text it was computed against.
    Applied,
    /// The edit was applied to `on`, a text the user had changed since, making `result`.
    Misplaced { on: String, result: String },
}

/// The judging of one open document's edit, kept across the polls of the confirmation.
struct Watch {
    /// The LSP edits sent, against the text the edit was computed for.
    sent: Vec<lsp::TextEdit>,
    after: Option<ropey::Rope>,
    /// How many of the texts followed were looked at already.
    examined: usize,
    /// The sent edits applied to each of the texts looked at (`None`: they do not apply).
    merged: Vec<Option<ropey::Rope>>,
    landing: Landing,
}

impl Watch {
    fn new(file: &OpenFile, sent: Vec<lsp::TextEdit>) -> Self {
        Self {
            sent,
            after: file.after.as_deref().map(ropey::Rope::from_str),
            examined: 0,
            merged: Vec::new(),
            landing: Landing::Pending,
        }
    }
}

/// A change to bring back: the document at `path` should read `now`, and is to read
/// `restore` again.
struct TakeBack {
    path: PathBuf,
    now: String,
    restore: String,
    /// The edit landed on text the user had changed (rather than being one part of an edit
    /// whose other part failed).
    misplaced: bool,
}

/// Why a request's edit did not hold, and what of it landed.
struct Failure {
    error: EditError,
    take_back: Vec<TakeBack>,
}

/// `text` with the LSP edits `sent` applied as a client applies them, by position whatever
/// the text; `None` when their ranges do not apply.
fn apply_sent(
    text: &ropey::Rope,
    sent: &[lsp::TextEdit],
    encoding: PositionEncoding,
) -> Option<ropey::Rope> {
    let position = |p: lsp::Position| Position::new(p.line, p.character);
    let mut changes: Vec<TextChange> = sent
        .iter()
        .map(|edit| TextChange {
            range: Some((position(edit.range.start), position(edit.range.end))),
            text: edit.new_text.clone(),
        })
        .collect();
    // All of them are against the same text: applied last first, each leaves the positions
    // of those before it as they were.
    changes.sort_by_key(|change| std::cmp::Reverse(change.range.map(|(start, _)| start)));
    apply_changes(text, &changes, encoding, |_| {}).ok()
}

fn display_path(path: &Path) -> String {
    path.to_string_lossy().replace('\\', "/")
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
        if let Some(proposal) = self
            .review
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(path)
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
        if self.is_reviewing() {
            return self.propose(plan);
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

    fn take_review_notes(&self) -> Vec<String> {
        std::mem::take(&mut *self.notes.lock().unwrap_or_else(|e| e.into_inner()))
    }

    fn held(&self) -> Vec<String> {
        self.held_summary()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn capabilities(workspace_edit: serde_json::Value) -> lsp::ClientCapabilities {
        serde_json::from_value(serde_json::json!({"workspace": {"workspaceEdit": workspace_edit}}))
            .unwrap()
    }

    #[test]
    fn neovim_is_told_apart_only_when_it_declares_no_document_changes() {
        let builtin =
            capabilities(serde_json::json!({"resourceOperations": ["rename", "create", "delete"]}));
        let neovim = EditCapabilities::of_client(Some(&builtin), Some("Neovim"));
        assert!(neovim.neovim_builtin && neovim.versioned() && !neovim.document_changes);
        assert_eq!((neovim.sent_version(0), neovim.sent_version(7)), (1, 7));
        // wright.nvim declares documentChanges and checks every version itself.
        let plugin = capabilities(serde_json::json!({"documentChanges": true}));
        let with_plugin = EditCapabilities::of_client(Some(&plugin), Some("Neovim"));
        assert!(!with_plugin.neovim_builtin && with_plugin.versioned());
        assert_eq!(with_plugin.sent_version(0), 0);
        let other = EditCapabilities::of_client(Some(&builtin), Some("helix"));
        assert!(!other.neovim_builtin && !other.versioned());
    }

    #[test]
    fn sent_edits_apply_by_position_to_whatever_text_they_meet() {
        let base = "one\ntwo\n";
        let edits = text_edits(
            base,
            &[replacement(base, "one\n2\n")],
            PositionEncoding::Utf16,
        );
        let typed = ropey::Rope::from_str("typed\none\ntwo\n");
        let merged = apply_sent(&typed, &edits, PositionEncoding::Utf16).unwrap();
        // Line 1 was "two" when the edit was computed; in the text it met, it is "one".
        assert_eq!(merged.to_string(), "typed\n2\ntwo\n");
    }
}
