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

mod approval;
mod target;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tower_lsp_server::Client;
use tower_lsp_server::ls_types as lsp;
use wright_protocol as proto;

use crate::agent::launch::{self, Begin, Plan, Prepared};
use crate::agent::sandboxed::SandboxRunner;
use crate::agent::tools::ToolContext;
use crate::agent::{self, AgentEvent, Cancel, FinalStatus};
use crate::buffers::Buffers;
use crate::edit::{CheckpointLog, GateMode};
use approval::EditorApprover;
pub use target::EditCapabilities;
use target::{EditorTarget, LiveBuffers};

/// The `wright/agentEvent` notification.
pub enum AgentEventNotification {}

impl lsp::notification::Notification for AgentEventNotification {
    type Params = proto::AgentEventParams;
    const METHOD: &'static str = proto::AgentEvent::METHOD;
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
    /// What the client takes in a `workspace/applyEdit`.
    pub edit_capabilities: EditCapabilities,
    pub progress: bool,
    /// Where session journals go.
    pub data_dir: PathBuf,
    /// `applyMode: "review"`: hold the edits until `wright/editsAccept`.
    pub review: bool,
    /// Where the sandbox's layers live.
    pub cache_dir: PathBuf,
    /// The client declared `experimental.wrightRequestApproval`.
    pub approval_requests: bool,
    /// Show the outcome with `window/showMessage` too (the session was started by the
    /// `wright.agent.run` command, by a client that may read no `wright/agentEvent`).
    pub announce: bool,
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
        let prepared = Prepared::prepare(Plan {
            config: &start.config,
            root: &start.root,
            data_dir: &start.data_dir,
            begin: match resume {
                Some(id) => Begin::Resume(id),
                None => Begin::Task(&task),
            },
            model,
            id_prefix: "s",
        })?;
        let (id, task) = (prepared.id.clone(), prepared.task.clone());
        let gate = start
            .config
            .get("edit.syntax_gate")
            .and_then(|value| value.parse().ok())
            .unwrap_or_default();
        let (events, mut received) = tokio::sync::mpsc::unbounded_channel();
        let (tool_events, tool_inbox) = tokio::sync::mpsc::unbounded_channel();
        // One approver for the session: commands that need more than the sandbox allows and
        // edits of protected paths ask the user through it.
        let approver: Arc<dyn agent::sandboxed::Approver> = Arc::new(EditorApprover {
            client: start.client.clone(),
            runtime: tokio::runtime::Handle::current(),
            session: id.clone(),
            custom_request: start.approval_requests,
            tool_events: tool_events.clone(),
        });
        let target = EditorTarget::new(
            start.client.clone(),
            Arc::clone(&start.buffers),
            start.root.clone(),
            gate,
            start.edit_capabilities,
            tool_events.clone(),
        )
        .protecting(
            agent::tools::Protection::from_config(&start.config).asking(Arc::clone(&approver)),
        )
        .recording(checkpoint_log(&start.data_dir, &start.root, &id));
        let target = Arc::new(if start.review {
            target.reviewing()
        } else {
            target
        });
        let cancel = Cancel::new();
        let sandbox = session_sandbox(&start, &id, &target, approver);
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

        let _ = events.send(prepared.model_event());
        // Retrieval for the task message (token counting, the repository map) and the
        // journal's first lines take from milliseconds to seconds: they run on a blocking
        // thread inside the session's task, so `agentRun` answers at once and the runtime's
        // workers stay free for the editor's requests.
        let context = launch::Context {
            index: start.index.clone(),
            overlay: Arc::new(LiveBuffers(Arc::clone(&start.buffers))),
            focus: start.focus.clone(),
        };
        let session_id = id.clone();
        tokio::spawn(async move {
            let opened = tokio::task::spawn_blocking(move || prepared.open(context)).await;
            let Ok(opened) = opened else {
                tracing::error!("session {session_id}: preparing its first request panicked");
                return;
            };
            let mut session = opened.session(tools, events, Some(tool_inbox));
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
                if let (true, AgentEvent::Finished { outcome }) = (start.announce, &event) {
                    let (kind, message) = announcement(&reporter_entry.id, outcome);
                    client.show_message(kind, message).await;
                }
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
                    .into_iter()
                    .map(move |recorded| (root, recorded))
            })
            .filter(|(_, recorded)| !sessions.iter().any(|e| e.id == recorded.session_id))
            .map(|(root, recorded)| proto::SessionInfo {
                status: match &recorded.outcome {
                    Some(outcome) => status_name(outcome.status).to_owned(),
                    None => "interrupted".to_owned(),
                },
                steps: recorded.spent.steps,
                files_changed: recorded
                    .outcome
                    .as_ref()
                    .map(|o| o.files_changed.clone())
                    .unwrap_or_default(),
                checkpoints: checkpoint_log(data_dir, root, &recorded.session_id).count() as u32,
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
                checkpoints: entry.target.checkpoints() as u32,
            }
        }));
        listed
    }

    /// Applies (`accept`) or drops the edits session `id` holds for review. Blocking.
    pub fn review(&self, id: &str, accept: bool) -> Result<proto::ReviewResult, String> {
        let entry = self
            .find(Some(id))
            .ok_or_else(|| format!("no session {id:?}"))?;
        if !entry.target.reviews() {
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

    /// Reverts the edits of session `id` (the last session when `None`): one of this server's,
    /// or one an earlier server journaled on `earlier`'s roots, whose edits are read back from
    /// its checkpoint log. Blocking.
    pub fn undo(
        &self,
        id: Option<&str>,
        checkpoint: Option<u32>,
        earlier: Earlier,
    ) -> Result<proto::UndoResult, String> {
        let (session_id, target) = match self.find(id) {
            Some(entry) if entry.state().status == "running" => {
                return Err(format!(
                    "session {} is still running; cancel it first",
                    entry.id
                ));
            }
            Some(entry) => (entry.id.clone(), Arc::clone(&entry.target)),
            None => earlier.target(id).ok_or_else(|| match id {
                Some(id) => format!("no session {id:?}"),
                None => "no agent session to undo".to_owned(),
            })?,
        };
        let applied = target.checkpoints();
        let keep = checkpoint.map_or(0, |n| n as usize);
        if keep > applied {
            return Err(format!(
                "session {session_id} has {applied} edits applied; checkpoint {keep} is past them"
            ));
        }
        let files = target
            .undo_to(keep)
            .map_err(|err| format!("nothing more restored: {err}"))?;
        Ok(proto::UndoResult { session_id, files })
    }
}

/// Session `id`'s checkpoint log, beside its journal.
fn checkpoint_log(data_dir: &Path, root: &Path, id: &str) -> CheckpointLog {
    CheckpointLog::new(&agent::journal::sessions_dir(data_dir, root), id)
}

/// What undoing an earlier server's session needs: the editor its edits go back through, and
/// where sessions are journaled.
pub struct Earlier {
    pub client: Client,
    pub buffers: Arc<Mutex<Buffers>>,
    pub edit_capabilities: EditCapabilities,
    pub data_dir: PathBuf,
    pub roots: Vec<PathBuf>,
}

impl Earlier {
    /// A target holding the checkpoints of session `id` (the newest journaled when `None`),
    /// found on one of the roots.
    fn target(self, id: Option<&str>) -> Option<(String, Arc<EditorTarget>)> {
        let (root, id) = self.roots.iter().rev().find_map(|root| {
            let dir = agent::journal::sessions_dir(&self.data_dir, root);
            let recorded = agent::journal::Recorded::list(&dir);
            let found = match id {
                Some(id) => recorded.into_iter().find(|r| r.session_id == id),
                None => recorded.into_iter().last(),
            };
            found.map(|recorded| (root.clone(), recorded.session_id))
        })?;
        // Nothing listens to the events of an undo.
        let (tool_events, _) = tokio::sync::mpsc::unbounded_channel();
        let target = EditorTarget::new(
            self.client,
            self.buffers,
            root.clone(),
            GateMode::default(),
            self.edit_capabilities,
            tool_events,
        )
        .recording(checkpoint_log(&self.data_dir, &root, &id));
        Some((id, Arc::new(target)))
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
#[allow(
    clippy::type_complexity,
    reason = "the runner and its buffer feed are returned together; a named type would be used once"
)]
fn session_sandbox(
    start: &Start,
    session: &str,
    target: &Arc<EditorTarget>,
    approver: Arc<dyn agent::sandboxed::Approver>,
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
        .requiring_approval(agent::sandboxed::approval_patterns(&start.config))
        .with_settings(crate::sandbox::policy::settings(&start.config))
        .with_network(agent::sandboxed::NetworkPolicy::from_config(&start.config))
        .with_approver(approver);
    Some((Arc::new(runner), (pool, snapshot)))
}
/// What `window/showMessage` says of a finished session: its status, files and last words.
fn announcement(id: &str, outcome: &agent::Outcome) -> (lsp::MessageType, String) {
    let kind = match outcome.status {
        FinalStatus::Done => lsp::MessageType::INFO,
        FinalStatus::Cancelled => lsp::MessageType::WARNING,
        FinalStatus::Failed => lsp::MessageType::ERROR,
    };
    let mut message = format!("wright {id} {}", status_name(outcome.status));
    if !outcome.files_changed.is_empty() {
        message.push_str(&format!(" ({})", outcome.files_changed.join(", ")));
    }
    let words = match (&outcome.reason, outcome.message.trim()) {
        (_, text) if !text.is_empty() => text.to_owned(),
        (Some(reason), _) => reason.clone(),
        (None, _) => String::new(),
    };
    if !words.is_empty() {
        message.push_str(": ");
        message.push_str(&words);
    }
    (kind, message)
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
        AgentEvent::StepRetried { step, .. } => {
            Some(format!("step {step}: the answer was cut, asking again"))
        }
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
