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

use crate::agent::conversation::{Conversation, Mode, ModelSwitch, UserMessage};
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
/// One session of this server: a conversation, running a turn or waiting for the next.
struct Entry {
    id: String,
    task: String,
    cancel: Cancel,
    target: Arc<EditorTarget>,
    conversation: Arc<Conversation>,
    /// What the session works in, for a model switch's connection.
    config: crate::config::Config,
    /// Where the session is journaled: its data folder and root.
    journaled: (PathBuf, PathBuf),
    state: Mutex<EntryState>,
}

#[derive(Clone)]
struct EntryState {
    status: &'static str,
    steps: u32,
    files_changed: Vec<String>,
    turn: u32,
    title: Option<String>,
    model: String,
    cost_usd: f64,
}

/// The sessions of this server, oldest first.
#[derive(Default)]
pub struct Agents {
    sessions: Mutex<Vec<Arc<Entry>>>,
}

/// What the editor offers every session: where edits go, and how the user is asked.
#[derive(Clone)]
pub struct Editor {
    pub client: Client,
    pub buffers: Arc<Mutex<Buffers>>,
    /// What the client takes in a `workspace/applyEdit`.
    pub edit_capabilities: EditCapabilities,
    /// The client shows `$/progress`.
    pub progress: bool,
    /// The client declared `experimental.wrightRequestApproval`.
    pub approval_requests: bool,
}

/// Where a session works: the workspace folder, its configuration and index, and where the
/// user is in it.
pub struct Place {
    pub root: PathBuf,
    pub config: crate::config::Config,
    pub index: Option<Arc<crate::index::Index>>,
    pub focus: agent::prompt::EditorFocus,
}

/// What the user asked for when opening a session.
pub struct Ask<'a> {
    pub begin: Begin<'a>,
    pub model: Option<&'a str>,
    pub mode: Option<Mode>,
    /// `applyMode: "review"`: hold the edits until `wright/editsAccept`.
    pub review: bool,
    /// Show each turn's outcome with `window/showMessage` too (the session was started by a
    /// command, from a client that may read no `wright/agentEvent`).
    pub announce: bool,
}

/// What a message joined: the session and its turn.
pub struct Joined {
    pub session_id: String,
    pub turn: u32,
}

impl Agents {
    /// Opens a session: a new one on a task, an interrupted one taken up from its journal, or
    /// the next turn of one an earlier server journaled; its id at once, the work in the
    /// background.
    pub fn start(
        self: &Arc<Self>,
        editor: Editor,
        place: Place,
        ask: Ask<'_>,
    ) -> Result<Joined, String> {
        let env = |var: &str| std::env::var(var).ok();
        let data_dir = crate::config::data_dir(&env).map_err(|e| e.to_string())?;
        let cache_dir = crate::config::cache_dir(&env).map_err(|e| e.to_string())?;
        let prepared = Prepared::prepare(Plan {
            config: &place.config,
            root: &place.root,
            data_dir: &data_dir,
            begin: ask.begin,
            model: ask.model,
            id_prefix: "s",
            mode: ask.mode,
        })?;
        let (id, task, turn) = (prepared.id.clone(), prepared.task.clone(), prepared.turn());
        let config = &place.config;
        let gate = config
            .get("edit.syntax_gate")
            .and_then(|value| value.parse().ok())
            .unwrap_or_default();
        let (events, mut received) = tokio::sync::mpsc::unbounded_channel();
        let (tool_events, tool_inbox) = tokio::sync::mpsc::unbounded_channel();
        // One approver for the session: commands that need more than the sandbox allows and
        // edits of protected paths ask the user through it.
        let approver: Arc<dyn agent::sandboxed::Approver> = Arc::new(EditorApprover {
            client: editor.client.clone(),
            runtime: tokio::runtime::Handle::current(),
            session: id.clone(),
            custom_request: editor.approval_requests,
            tool_events: tool_events.clone(),
        });
        let target = EditorTarget::new(
            editor.client.clone(),
            Arc::clone(&editor.buffers),
            place.root.clone(),
            gate,
            editor.edit_capabilities,
            tool_events.clone(),
        )
        .protecting(agent::tools::Protection::from_config(config).asking(Arc::clone(&approver)))
        .recording(checkpoint_log(&data_dir, &place.root, &id));
        target.set_reviewing(ask.review);
        let target = Arc::new(target);
        let cancel = Cancel::new();
        // The session's MCP servers start now, in the background; its first request waits
        // for them (below), each bounded by its startup timeout.
        let servers = crate::mcp::servers::Servers::open(
            config,
            &place.root,
            &data_dir,
            Vec::new(),
            Some(Arc::clone(&approver)),
        );
        let sandbox = session_sandbox(&cache_dir, &place, &id, &target, approver);
        let tools = Arc::new(ToolContext {
            root: place.root.clone(),
            overlay: target.overlay(),
            index: place.index.clone(),
            walk: crate::workspace::WalkOptions {
                max_file_size: config
                    .get_u64("index.max_file_size")
                    .unwrap_or(crate::workspace::DEFAULT_MAX_FILE_SIZE),
                ..Default::default()
            },
            edits: target.clone(),
            commands: sandbox.as_ref().map(|(runner, _)| Arc::clone(runner) as _),
            test_command: config.get("agent.test_command").map(str::to_owned),
            cancel: cancel.clone(),
            plan: Mutex::default(),
            plan_mode: Default::default(),
            mcp: servers.tools(),
        });
        let entry = Arc::new(Entry {
            id: id.clone(),
            task: task.clone(),
            cancel,
            target,
            conversation: prepared.conversation(),
            config: place.config.clone(),
            journaled: (data_dir.clone(), place.root.clone()),
            state: Mutex::new(EntryState {
                status: "running",
                steps: 0,
                files_changed: Vec::new(),
                turn,
                title: None,
                model: prepared.models.decision.model.to_string(),
                cost_usd: 0.0,
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
            index: place.index,
            overlay: Arc::new(LiveBuffers(Arc::clone(&editor.buffers))),
            focus: place.focus,
        };
        let session_id = id.clone();
        tokio::spawn(async move {
            let opened = tokio::task::spawn_blocking(move || prepared.open(context)).await;
            let Ok(opened) = opened else {
                tracing::error!("session {session_id}: preparing its first request panicked");
                return;
            };
            for problem in servers.started().await {
                tracing::warn!("session {session_id}: {problem}");
            }
            let mut session = opened.session(tools, events, Some(tool_inbox));
            session.converse().await;
            drop(session);
            servers.close().await;
            // The session's snapshot layer goes back to the pool once nothing uses it.
            if let Some((runner, (pool, snapshot))) = sandbox {
                drop(runner);
                if let Ok(snapshot) = Arc::try_unwrap(snapshot) {
                    pool.recycle(snapshot.into_inner().unwrap_or_else(|e| e.into_inner()));
                }
            }
        });
        let client = editor.client;
        let reporter_entry = Arc::clone(&entry);
        tokio::spawn(async move {
            let mut progress = None;
            let mut seq = 0;
            while let Some(event) = received.recv().await {
                seq += 1;
                reporter_entry.observe(&event);
                if editor.progress && matches!(event, AgentEvent::Turn { .. }) {
                    progress = begin_progress(&client, &reporter_entry).await;
                }
                if let (true, AgentEvent::Finished { outcome, .. }) = (ask.announce, &event) {
                    let (kind, message) = announcement(&reporter_entry.id, outcome);
                    client.show_message(kind, message).await;
                }
                if let (Some(progress), Some(message)) = (&progress, progress_message(&event)) {
                    progress.report(message).await;
                }
                if matches!(event, AgentEvent::Finished { .. })
                    && let Some(done) = progress.take()
                {
                    let status = reporter_entry.state().status;
                    done.finish_with_message(format!("wright: {status}")).await;
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
        });
        Ok(Joined {
            session_id: id,
            turn,
        })
    }

    /// The user's next message to session `id`: it steers the running turn, or starts the
    /// next; a session this server does not hold is taken up from its journal.
    pub fn prompt(
        self: &Arc<Self>,
        editor: Editor,
        place: Place,
        id: &str,
        message: UserMessage,
        mode: Option<Mode>,
        model: Option<&str>,
    ) -> Result<Joined, String> {
        message.check(true)?;
        let Some(entry) = self.find(Some(id)) else {
            return self.start(
                editor,
                place,
                Ask {
                    begin: Begin::FollowUp(id, message),
                    model,
                    mode,
                    review: false,
                    announce: false,
                },
            );
        };
        entry.configure(mode, model)?;
        let joined = entry.conversation.prompt(message)?;
        Ok(Joined {
            session_id: entry.id.clone(),
            turn: joined.turn,
        })
    }

    /// `wright/sessionConfigure`: from the session's next step on.
    pub fn configure(
        &self,
        id: &str,
        mode: Option<Mode>,
        model: Option<&str>,
        review: Option<bool>,
    ) -> Result<(), String> {
        let entry = self
            .find(Some(id))
            .ok_or_else(|| format!("no session {id:?} in this server; send it a message (wright/agentPrompt) to take it up"))?;
        entry.configure(mode, model)?;
        if let Some(review) = review {
            entry.target.set_reviewing(review);
        }
        Ok(())
    }

    /// The last session of this server, for `wright.agent.prompt`.
    pub fn last(&self) -> Option<String> {
        self.find(None).map(|entry| entry.id.clone())
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
                title: recorded.title,
                turns: recorded.turns,
                model: recorded.model,
                cost_usd: recorded.spent.cost_usd,
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
                title: state.title,
                turns: state.turn,
                model: state.model,
                cost_usd: state.cost_usd,
            }
        }));
        listed
    }

    /// Applies (`accept`) or drops the edits session `id` holds for review (the hunks
    /// named, or all). Blocking.
    pub fn review(
        &self,
        id: &str,
        accept: bool,
        hunks: Option<&[String]>,
    ) -> Result<proto::ReviewResult, String> {
        let entry = self
            .find(Some(id))
            .ok_or_else(|| format!("no session {id:?}"))?;
        if !entry.target.reviews() {
            return Err(format!(
                "session {id} applies its edits as it goes (applyMode \"auto\"); nothing is held"
            ));
        }
        let files = match (hunks, accept) {
            (Some(hunks), _) => entry
                .target
                .pick_hunks(hunks, accept)
                .map_err(|err| format!("nothing applied: {err}; the other hunks stay proposed"))?,
            (None, true) => entry.target.accept().map_err(|err| {
                format!("nothing applied: {err}; reject the edits, or run the task again")
            })?,
            (None, false) => entry.target.reject(),
        };
        // For `wright stats`: which held edits the user took or dropped.
        let (data_dir, root) = &entry.journaled;
        let line = agent::journal::Line::Review {
            accepted: accept,
            paths: files.clone(),
            hunks: hunks.map(<[String]>::to_vec),
            at: agent::journal::now(),
        };
        if let Err(err) = agent::journal::append_to(data_dir, root, &entry.id, &line) {
            tracing::warn!("{err}; `wright stats` will not know of this review");
        }
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
        let (data_dir, roots) = (earlier.data_dir.clone(), earlier.roots.clone());
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
        // For `wright stats`: the journal says which edits were taken back. The session is
        // journaled on one of the roots (the others hold no journal of that id).
        for root in &roots {
            let _ = agent::journal::record_undo(
                &data_dir,
                root,
                &session_id,
                files.clone(),
                keep as u32,
            )
            .inspect_err(|err| tracing::warn!("{err}; `wright stats` will not know of this undo"));
        }
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
            AgentEvent::Finished { outcome, .. } => state.status = status_name(outcome.status),
            AgentEvent::Turn { turn, .. } => {
                state.turn = *turn;
                state.status = "running";
            }
            AgentEvent::Title { title } => state.title = Some(title.clone()),
            AgentEvent::Model { model, .. } => state.model.clone_from(model),
            AgentEvent::Usage {
                cost_usd: Some(cost),
                ..
            } => state.cost_usd = *cost,
            _ => {}
        }
    }

    /// Sets the mode and the model from the next step on; a model that cannot be connected
    /// is refused here, with what to configure.
    fn configure(&self, mode: Option<Mode>, model: Option<&str>) -> Result<(), String> {
        let switch = match model {
            Some(model) => {
                let models = agent::Models::connect(&self.config, Some(model), &self.task)?;
                Some(ModelSwitch {
                    name: models.decision.model.to_string(),
                    task: models.task,
                })
            }
            None => None,
        };
        self.conversation.configure(mode, switch);
        Ok(())
    }
}

/// Starts a `$/progress` for the turn beginning, when the client takes it.
async fn begin_progress(
    client: &Client,
    entry: &Entry,
) -> Option<
    tower_lsp_server::OngoingProgress<
        tower_lsp_server::Unbounded,
        tower_lsp_server::NotCancellable,
    >,
> {
    let turn = entry.state().turn;
    // The first turn's token is the session's (`wright/agent/<id>`); later turns add theirs.
    let token = match turn {
        1 => format!("wright/agent/{}", entry.id),
        turn => format!("wright/agent/{}/{turn}", entry.id),
    };
    let token = lsp::ProgressToken::String(token);
    client.create_work_done_progress(token.clone()).await.ok()?;
    Some(
        client
            .progress(token, "wright")
            .with_message(short(&entry.task))
            .begin()
            .await,
    )
}
/// A session's command runner: a snapshot of the workspace from the pool, which receives the
/// open buffers under the root (and, in review mode, the held proposals) before each command.
/// `None`, logged, when the sandbox cannot start: the session then has no command tools.
#[allow(
    clippy::type_complexity,
    reason = "the runner and its buffer feed are returned together; a named type would be used once"
)]
fn session_sandbox(
    cache_dir: &Path,
    place: &Place,
    session: &str,
    target: &Arc<EditorTarget>,
    approver: Arc<dyn agent::sandboxed::Approver>,
) -> Option<(
    Arc<SandboxRunner>,
    (Arc<crate::sandbox::Pool>, crate::sandbox::SharedSnapshot),
)> {
    let pool = agent::sandboxed::pool(cache_dir)
        .inspect_err(|err| tracing::warn!("session {session} runs no commands: {err}"))
        .ok()?;
    let snapshot = pool
        .new_snapshot(&place.root)
        .inspect_err(|err| tracing::warn!("session {session} runs no commands: {err}"))
        .ok()?;
    let snapshot = Arc::new(Mutex::new(snapshot));
    let target = Arc::clone(target);
    let buffers: agent::sandboxed::BufferTexts = Box::new(move || target.texts_for_commands());
    let runner = SandboxRunner::in_place(Arc::clone(&pool), &place.root)
        .in_snapshot(Arc::clone(&snapshot), buffers)
        .configured(&place.config)
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
        AgentEvent::Finished { outcome, .. } => {
            Some(format!("{:?}", outcome.status).to_lowercase())
        }
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
