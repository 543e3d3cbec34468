//! The agent inside the editor: sessions started by `wright/agentRun` (or the
//! `wright.agent.run` command), their events as `wright/agentEvent` notifications and
//! `$/progress`, and their edits as versioned `workspace/applyEdit`s.
//!
//! The editor's buffers are the truth. An edit to an open document is computed against the
//! text and version the server holds, sent with that version, and then confirmed from the
//! `didChange` that follows: a client's `applied: true` is not proof (Neovim answers it after
//! silently skipping a stale edit), so until the buffer holds the edit's result the edit counts
//! as rejected, and the agent is told to read the file again. Files no editor has open are
//! written on disk, atomically, like `wright exec` does; the editor's file watcher shows them.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tower_lsp_server::Client;
use tower_lsp_server::ls_types as lsp;
use wright_protocol as proto;

use super::convert;
use crate::agent::sandboxed::{Approver, Decision, SandboxRunner};
use crate::agent::tools::{EditTarget, ToolContext};
use crate::agent::{self, AgentEvent, Cancel, FinalStatus, Limits, Session};
use crate::buffers::{Buffers, DocumentKey, PositionEncoding, offset_to_position};
use crate::edit::{
    Checkpoint, DiskFiles, EditError, FilePlan, FileSource, FileState, GateMode, Plan, Versioned,
};
use crate::workspace::Overlay;

/// How long the `didChange` confirming an applied edit may take to arrive.
const CONFIRMATION: Duration = Duration::from_secs(3);

/// The `wright/agentEvent` notification.
pub enum AgentEventNotification {}

impl lsp::notification::Notification for AgentEventNotification {
    type Params = proto::AgentEventParams;
    const METHOD: &'static str = proto::AgentEvent::METHOD;
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
    fn reviewing(mut self, events: tokio::sync::mpsc::UnboundedSender<AgentEvent>) -> Self {
        self.review = Some(Pending::default());
        self.events = Some(events);
        self
    }

    /// The overlay a session on this target reads through.
    fn overlay(&self) -> Arc<dyn Overlay + Send + Sync> {
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
    fn texts_for_commands(&self) -> Vec<(PathBuf, Vec<u8>)> {
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

    /// Undoes every plan this target applied, newest first, all or none per plan.
    pub fn undo_all(&self) -> Result<Vec<String>, EditError> {
        let applied: Vec<Checkpoint> = self
            .applied
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let mut files = Vec::new();
        for checkpoint in applied.iter().rev() {
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

/// One session of this server.
struct Entry {
    id: String,
    task: String,
    cancel: Cancel,
    target: Arc<EditorTarget>,
    state: Mutex<EntryState>,
}

#[derive(Clone)]
struct EntryState {
    status: &'static str,
    steps: u32,
    files_changed: Vec<String>,
}

/// The sessions of this server, oldest first.
#[derive(Default)]
pub struct Agents {
    sessions: Mutex<Vec<Arc<Entry>>>,
}

/// Everything a new session needs from the server.
pub struct Start {
    pub client: Client,
    pub buffers: Arc<Mutex<Buffers>>,
    pub root: PathBuf,
    pub config: crate::config::Config,
    pub index: Option<Arc<crate::index::Index>>,
    pub walk: crate::workspace::WalkOptions,
    pub focus: agent::prompt::EditorFocus,
    pub versioned_edits: bool,
    pub progress: bool,
    /// Where session journals go.
    pub data_dir: PathBuf,
    /// `applyMode: "review"`: hold the edits until `wright/editsAccept`.
    pub review: bool,
    /// Where the sandbox's layers live.
    pub cache_dir: PathBuf,
    /// The client declared `experimental.wrightRequestApproval`.
    pub approval_requests: bool,
}

impl Agents {
    /// Starts a session on `task`, or (`resume`) takes up an interrupted one from its
    /// journal, with its task and model; its id at once, the work in the background.
    pub fn start(
        self: &Arc<Self>,
        start: Start,
        task: String,
        model: Option<&str>,
        resume: Option<&str>,
    ) -> Result<String, String> {
        let resumed = resume
            .map(|id| agent::journal::resume(&start.data_dir, &start.root, id))
            .transpose()?;
        let task = resumed
            .as_ref()
            .map_or(task, |(recorded, ..)| recorded.task.clone());
        let model = model.or(resumed
            .as_ref()
            .map(|(recorded, ..)| recorded.model.as_str()));
        let models = agent::Models::connect(&start.config, model, &task)?;
        let gate = start
            .config
            .get("edit.syntax_gate")
            .and_then(|value| value.parse().ok())
            .unwrap_or_default();
        let (events, mut received) = tokio::sync::mpsc::unbounded_channel();
        let target = EditorTarget::new(
            start.client.clone(),
            Arc::clone(&start.buffers),
            start.root.clone(),
            gate,
            start.versioned_edits,
        );
        let target = Arc::new(if start.review {
            target.reviewing(events.clone())
        } else {
            target
        });
        let cancel = Cancel::new();
        let id = match resume {
            Some(id) => id.to_owned(),
            None => agent::journal::new_session_id("s"),
        };
        let sandbox = session_sandbox(&start, &id, &target);
        let tools = Arc::new(ToolContext {
            root: start.root.clone(),
            overlay: target.overlay(),
            index: start.index.clone(),
            walk: start.walk,
            edits: target.clone(),
            commands: sandbox.as_ref().map(|(runner, _)| Arc::clone(runner) as _),
            test_command: start.config.get("agent.test_command").map(str::to_owned),
            cancel: cancel.clone(),
            plan: Mutex::default(),
        });
        let entry = Arc::new(Entry {
            id: id.clone(),
            task: task.clone(),
            cancel,
            target,
            state: Mutex::new(EntryState {
                status: "running",
                steps: 0,
                files_changed: Vec::new(),
            }),
        });
        self.sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Arc::clone(&entry));

        let (history, journal) = match resumed {
            Some((_, history, journal)) => (history, Some(journal)),
            None => {
                let context = start.index.as_deref().map(|index| {
                    crate::retrieval::retrieve(
                        index,
                        &LiveBuffers(Arc::clone(&start.buffers)),
                        &crate::retrieval::Query {
                            text: task.clone(),
                            budget: 4000,
                            current_file: start.focus.path.clone(),
                            ..crate::retrieval::Query::default()
                        },
                    )
                });
                agent::journal::begin(
                    &start.data_dir,
                    &start.root,
                    &id,
                    &task,
                    &models.decision.model.to_string(),
                    agent::prompt::task_message(&task, &start.focus, context.as_ref()),
                )
            }
        };
        let _ = events.send(models.event());
        let mut session = Session::new(agent::Setup {
            id: id.clone(),
            model: models.task,
            summary_model: models.summary,
            compaction: crate::compaction::Settings::from_config(&start.config),
            tools,
            system: agent::prompt::system_prompt(&start.root),
            history,
            journal,
            limits: Limits::default(),
            events,
        });
        tokio::spawn(async move {
            let _ = session.run().await;
            drop(session);
            // The session's snapshot layer goes back to the pool once nothing uses it.
            if let Some((runner, (pool, snapshot))) = sandbox {
                drop(runner);
                if let Ok(snapshot) = Arc::try_unwrap(snapshot) {
                    pool.recycle(snapshot.into_inner().unwrap_or_else(|e| e.into_inner()));
                }
            }
        });
        let client = start.client;
        let reporter_entry = Arc::clone(&entry);
        tokio::spawn(async move {
            let progress = if start.progress {
                let token =
                    lsp::ProgressToken::String(format!("wright/agent/{}", reporter_entry.id));
                match client.create_work_done_progress(token.clone()).await {
                    Ok(()) => Some(
                        client
                            .progress(token, "wright")
                            .with_message(short(&reporter_entry.task))
                            .begin()
                            .await,
                    ),
                    Err(_) => None,
                }
            } else {
                None
            };
            let mut seq = 0;
            while let Some(event) = received.recv().await {
                seq += 1;
                reporter_entry.observe(&event);
                if let (Some(progress), Some(message)) = (&progress, progress_message(&event)) {
                    progress.report(message).await;
                }
                let event = match serde_json::to_value(&event) {
                    Ok(serde_json::Value::Object(map)) => map,
                    _ => continue,
                };
                client
                    .send_notification::<AgentEventNotification>(proto::AgentEventParams {
                        session_id: reporter_entry.id.clone(),
                        seq,
                        event,
                    })
                    .await;
            }
            if let Some(progress) = progress {
                let status = reporter_entry.state().status;
                progress
                    .finish_with_message(format!("wright: {status}"))
                    .await;
            }
        });
        Ok(id)
    }

    fn find(&self, id: Option<&str>) -> Option<Arc<Entry>> {
        let sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        match id {
            Some(id) => sessions.iter().find(|entry| entry.id == id).cloned(),
            None => sessions.last().cloned(),
        }
    }

    /// Cancels the session `id` (every running one when `None`); whether one was running.
    pub fn cancel(&self, id: Option<&str>) -> bool {
        let sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        let mut cancelled = false;
        for entry in sessions.iter().filter(|e| id.is_none_or(|id| e.id == id)) {
            if entry.state().status == "running" {
                entry.cancel.cancel();
                cancelled = true;
            }
        }
        cancelled
    }

    /// This server's sessions, after those journaled on `roots` by earlier servers (an
    /// interrupted one can be resumed with `wright/agentRun`'s `sessionId`).
    pub fn list(&self, data_dir: &Path, roots: &[PathBuf]) -> Vec<proto::SessionInfo> {
        let sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        let mut listed: Vec<proto::SessionInfo> = roots
            .iter()
            .flat_map(|root| {
                agent::journal::Recorded::list(&agent::journal::sessions_dir(data_dir, root))
            })
            .filter(|recorded| !sessions.iter().any(|e| e.id == recorded.session_id))
            .map(|recorded| proto::SessionInfo {
                status: match &recorded.outcome {
                    Some(outcome) => status_name(outcome.status).to_owned(),
                    None => "interrupted".to_owned(),
                },
                steps: recorded.outcome.as_ref().map_or(0, |o| o.steps),
                files_changed: recorded
                    .outcome
                    .as_ref()
                    .map(|o| o.files_changed.clone())
                    .unwrap_or_default(),
                session_id: recorded.session_id,
                task: recorded.task,
            })
            .collect();
        listed.extend(sessions.iter().map(|entry| {
            let state = entry.state();
            proto::SessionInfo {
                session_id: entry.id.clone(),
                task: entry.task.clone(),
                status: state.status.to_owned(),
                steps: state.steps,
                files_changed: state.files_changed,
            }
        }));
        listed
    }

    /// Applies (`accept`) or drops the edits session `id` holds for review. Blocking.
    pub fn review(&self, id: &str, accept: bool) -> Result<proto::ReviewResult, String> {
        let entry = self
            .find(Some(id))
            .ok_or_else(|| format!("no session {id:?}"))?;
        if entry.target.review.is_none() {
            return Err(format!(
                "session {id} applies its edits as it goes (applyMode \"auto\"); nothing is held"
            ));
        }
        let files = if accept {
            entry.target.accept().map_err(|err| {
                format!("nothing applied: {err}; reject the edits, or run the task again")
            })?
        } else {
            entry.target.reject()
        };
        Ok(proto::ReviewResult {
            session_id: entry.id.clone(),
            files,
        })
    }

    /// Reverts the edits of session `id` (the last session when `None`). Blocking.
    pub fn undo(&self, id: Option<&str>) -> Result<proto::UndoResult, String> {
        let entry = self.find(id).ok_or_else(|| match id {
            Some(id) => format!("no session {id:?}"),
            None => "no agent session to undo".to_owned(),
        })?;
        if entry.state().status == "running" {
            return Err(format!(
                "session {} is still running; cancel it first",
                entry.id
            ));
        }
        let files = entry
            .target
            .undo_all()
            .map_err(|err| format!("nothing more restored: {err}"))?;
        Ok(proto::UndoResult {
            session_id: entry.id.clone(),
            files,
        })
    }
}

impl Entry {
    fn state(&self) -> EntryState {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn observe(&self, event: &AgentEvent) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        match event {
            AgentEvent::StepStarted { step } => state.steps = *step,
            AgentEvent::FilesChanged { paths } => {
                for path in paths {
                    if !state.files_changed.contains(path) {
                        state.files_changed.push(path.clone());
                    }
                }
            }
            AgentEvent::Finished { outcome } => state.status = status_name(outcome.status),
            _ => {}
        }
    }
}

/// A session's command runner: a snapshot of the workspace from the pool, which receives the
/// open buffers under the root (and, in review mode, the held proposals) before each command.
/// `None`, logged, when the sandbox cannot start: the session then has no command tools.
#[allow(clippy::type_complexity)]
fn session_sandbox(
    start: &Start,
    session: &str,
    target: &Arc<EditorTarget>,
) -> Option<(
    Arc<SandboxRunner>,
    (Arc<crate::sandbox::Pool>, crate::sandbox::SharedSnapshot),
)> {
    let pool = agent::sandboxed::pool(&start.cache_dir)
        .inspect_err(|err| tracing::warn!("session {session} runs no commands: {err}"))
        .ok()?;
    let snapshot = pool
        .new_snapshot(&start.root)
        .inspect_err(|err| tracing::warn!("session {session} runs no commands: {err}"))
        .ok()?;
    let snapshot = Arc::new(Mutex::new(snapshot));
    let target = Arc::clone(target);
    let buffers: agent::sandboxed::BufferTexts = Box::new(move || target.texts_for_commands());
    let runner = SandboxRunner::in_place(Arc::clone(&pool), &start.root)
        .in_snapshot(Arc::clone(&snapshot), buffers)
        .with_approver(Arc::new(EditorApprover {
            client: start.client.clone(),
            runtime: tokio::runtime::Handle::current(),
            session: session.to_owned(),
            custom_request: start.approval_requests,
        }));
    Some((Arc::new(runner), (pool, snapshot)))
}

/// Approvals through the editor: `wright/requestApproval` for a client that declared it,
/// `window/showMessageRequest` otherwise; no answer (Helix) is a denial.
struct EditorApprover {
    client: Client,
    runtime: tokio::runtime::Handle,
    session: String,
    custom_request: bool,
}

impl Approver for EditorApprover {
    fn ask(&self, kind: &str, command: &str, reason: &str) -> Decision {
        let client = self.client.clone();
        let params = proto::RequestApprovalParams {
            session_id: self.session.clone(),
            kind: kind.to_owned(),
            command: Some(command.to_owned()),
            reason: reason.to_owned(),
        };
        let custom = self.custom_request;
        let answer = self.runtime.block_on(async move {
            if custom {
                let result = client
                    .send_request::<RequestApprovalRequest>(params)
                    .await
                    .ok()?;
                return Some(match result.decision.as_str() {
                    "allow" => Decision::Allow,
                    "allowAlways" => Decision::AllowAlways,
                    _ => Decision::Deny,
                });
            }
            let actions = ["Allow", "Allow always", "Deny"]
                .map(|title| lsp::MessageActionItem {
                    title: title.to_owned(),
                    properties: HashMap::new(),
                })
                .to_vec();
            let message = format!(
                "wright: `{}` needs more than the sandbox allows: {}. Allow it?",
                params.command.unwrap_or_default(),
                params.reason
            );
            let chosen = client
                .show_message_request(lsp::MessageType::WARNING, message, Some(actions))
                .await
                .ok()??;
            Some(match chosen.title.as_str() {
                "Allow" => Decision::Allow,
                "Allow always" => Decision::AllowAlways,
                _ => Decision::Deny,
            })
        });
        answer.unwrap_or(Decision::Deny)
    }
}

/// `wright/requestApproval`, as tower-lsp-server sends a request.
enum RequestApprovalRequest {}

impl lsp::request::Request for RequestApprovalRequest {
    type Params = proto::RequestApprovalParams;
    type Result = proto::RequestApprovalResult;
    const METHOD: &'static str = proto::RequestApproval::METHOD;
}

fn status_name(status: FinalStatus) -> &'static str {
    match status {
        FinalStatus::Done => "done",
        FinalStatus::Cancelled => "cancelled",
        FinalStatus::Failed => "failed",
    }
}

/// What the progress line says for an event, if anything.
fn progress_message(event: &AgentEvent) -> Option<String> {
    match event {
        AgentEvent::StepStarted { step } => Some(format!("step {step}: thinking")),
        AgentEvent::ToolCall {
            name, arguments, ..
        } => {
            let path = serde_json::from_str::<serde_json::Value>(arguments)
                .ok()
                .and_then(|v| {
                    ["path", "pattern", "query", "name", "command"]
                        .iter()
                        .find_map(|key| v.get(*key).and_then(|p| p.as_str()).map(str::to_owned))
                });
            Some(match path {
                Some(path) => format!("{name} {}", short(&path)),
                None => name.clone(),
            })
        }
        AgentEvent::Finished { outcome } => Some(format!("{:?}", outcome.status).to_lowercase()),
        _ => None,
    }
}

fn short(text: &str) -> String {
    let line = text.lines().next().unwrap_or_default();
    match line.char_indices().nth(60) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line.to_owned(),
    }
}
