//! `wright acp`: the Agent Client Protocol (protocol version 1) on stdio, a second front end
//! over the session core `wright lsp` uses — the same launcher, journal, tools, sandbox,
//! compaction and edit engine — so ACP clients (Zed, JetBrains IDEs, CodeCompanion, avante,
//! agent-shell) can drive wright.
//!
//! The wire types are wright's own serde shapes for the subset it speaks, checked against the
//! published schema by the tests that drive it with the official TypeScript and Python client
//! libraries (the `agent-client-protocol` crate's API changed between every major version).
//! A line that is not JSON gets a -32700 error and the agent keeps serving; stdout carries
//! nothing but protocol.

mod files;
mod peer;
mod updates;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::agent::conversation::{Conversation, Image, Mode, ModelSwitch, UserMessage};
use crate::agent::launch::{self, Begin, Plan, Prepared};
use crate::agent::sandboxed::{Approver, Decision, SandboxRunner};
use crate::agent::tools::ToolContext;
use crate::agent::{self, AgentEvent, Cancel, FinalStatus};
use crate::config::McpServer;
use crate::config::{self, Config, Layers};
use crate::index::{self, Index};
use files::{AcpTarget, ClientFiles};
use peer::Peer;

/// The protocol version wright speaks.
const PROTOCOL_VERSION: u64 = 1;
/// The longest line read; a longer one is refused (and skipped) without buffering it all.
const MAX_LINE: usize = 32 * 1024 * 1024;

/// What the client declared at `initialize`.
#[derive(Clone, Copy, Debug, Default)]
struct ClientFs {
    read: bool,
    write: bool,
}

/// One ACP session: before its first prompt only its folder and settings; after it, the
/// running conversation.
struct AcpSession {
    id: String,
    root: PathBuf,
    config: Config,
    mode: Mode,
    model: Option<String>,
    /// The client's `mcpServers`, started with the configuration's when the session runs.
    mcp: Vec<McpServer>,
    /// Taken up from the journal (`session/load`): its first prompt continues it.
    journaled: bool,
    running: Option<Running>,
}

/// A session whose conversation runs.
struct Running {
    conversation: Arc<Conversation>,
    cancel: Cancel,
    /// `session/prompt` requests waiting for the end of their turn, by turn.
    waiting: Arc<Mutex<HashMap<u32, Vec<Value>>>>,
}

struct Agent {
    peer: Arc<Peer>,
    fs: Mutex<ClientFs>,
    sessions: Mutex<HashMap<String, AcpSession>>,
    /// One symbol index per session root, shared by the sessions there (as `wright lsp`
    /// keeps one per workspace), opened and refreshed by a root's first prompt.
    indexes: Arc<Mutex<HashMap<PathBuf, Arc<Index>>>>,
}

/// Serves ACP on stdin/stdout until the client closes stdin; the process's exit code.
pub async fn run_stdio() -> i32 {
    let (out, mut lines) = tokio::sync::mpsc::unbounded_channel::<String>();
    let writer = tokio::spawn(async move {
        let mut stdout = tokio::io::stdout();
        while let Some(mut line) = lines.recv().await {
            line.push('\n');
            if stdout.write_all(line.as_bytes()).await.is_err() || stdout.flush().await.is_err() {
                break;
            }
        }
    });
    let agent = Arc::new(Agent {
        peer: Arc::new(Peer::new(out)),
        fs: Mutex::default(),
        sessions: Mutex::default(),
        indexes: Arc::default(),
    });
    let mut reader = BufReader::new(tokio::io::stdin());
    loop {
        match read_line(&mut reader).await {
            Ok(Some(Line::Text(line))) => agent.received(&line),
            Ok(Some(Line::TooLong)) => agent.peer.error(
                &Value::Null,
                -32700,
                &format!("a line over {} MiB; skipped", MAX_LINE >> 20),
            ),
            Ok(None) => break,
            Err(err) => {
                tracing::error!("reading stdin: {err}");
                break;
            }
        }
    }
    // Sessions still running are cancelled: their client is gone.
    for session in agent
        .sessions
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .values()
    {
        if let Some(running) = &session.running {
            running.cancel.cancel();
            running.conversation.close();
        }
    }
    drop(agent);
    let _ = tokio::time::timeout(std::time::Duration::from_secs(2), writer).await;
    0
}

enum Line {
    Text(String),
    TooLong,
}

/// The next line, without its newline; `None` at the end of input. Invalid UTF-8 is replaced
/// (the JSON parse then refuses it with a message).
async fn read_line(reader: &mut BufReader<tokio::io::Stdin>) -> std::io::Result<Option<Line>> {
    let mut line = Vec::new();
    let mut too_long = false;
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok((!line.is_empty() || too_long).then(|| finish(line, too_long)));
        }
        let (chunk, done) = match memchr::memchr(b'\n', available) {
            Some(at) => (&available[..at], Some(at + 1)),
            None => (available, None),
        };
        if !too_long {
            if line.len() + chunk.len() > MAX_LINE {
                too_long = true;
                line = Vec::new();
            } else {
                line.extend_from_slice(chunk);
            }
        }
        let consumed = done.unwrap_or(available.len());
        reader.consume(consumed);
        if done.is_some() {
            return Ok(Some(finish(line, too_long)));
        }
    }
}

fn finish(line: Vec<u8>, too_long: bool) -> Line {
    if too_long {
        Line::TooLong
    } else {
        Line::Text(String::from_utf8_lossy(&line).into_owned())
    }
}

impl Agent {
    /// One line from the client.
    fn received(self: &Arc<Self>, line: &str) {
        if line.trim().is_empty() {
            return;
        }
        let message: Value = match serde_json::from_str(line) {
            Ok(message) => message,
            Err(err) => {
                self.peer
                    .error(&Value::Null, -32700, &format!("not JSON: {err}"));
                return;
            }
        };
        let method = message["method"].as_str().map(str::to_owned);
        let id = message.get("id").cloned();
        match (method, id) {
            (Some(method), Some(id)) => {
                let agent = Arc::clone(self);
                let params = message.get("params").cloned().unwrap_or(Value::Null);
                tokio::spawn(async move { agent.request(&method, id, params).await });
            }
            (Some(method), None) => {
                let params = message.get("params").cloned().unwrap_or(Value::Null);
                self.notification(&method, &params);
            }
            (None, Some(_)) => self.peer.answered(&message),
            (None, None) => self.peer.error(
                &Value::Null,
                -32600,
                "not a JSON-RPC request, notification or response",
            ),
        }
    }

    async fn request(self: Arc<Self>, method: &str, id: Value, params: Value) {
        let answer = match method {
            "initialize" => Ok(self.initialize(&params)),
            "authenticate" => Ok(json!({})),
            "session/new" => self.new_session(&params),
            "session/load" => self.load_session(&params),
            "session/prompt" => {
                // Answered when the turn ends.
                if let Err((code, message)) = self.prompt(&id, &params) {
                    self.peer.error(&id, code, &message);
                }
                return;
            }
            "session/set_mode" => self.set_mode(&params),
            "session/set_config_option" => self.set_model(&params),
            other => Err((-32601, format!("wright acp has no method {other:?}"))),
        };
        match answer {
            Ok(result) => self.peer.respond(&id, result),
            Err((code, message)) => self.peer.error(&id, code, &message),
        }
    }

    fn notification(&self, method: &str, params: &Value) {
        if method == "session/cancel"
            && let Some(id) = params["sessionId"].as_str()
            && let Some(session) = self
                .sessions
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(id)
            && let Some(running) = &session.running
        {
            running.cancel.cancel();
        }
    }

    fn initialize(&self, params: &Value) -> Value {
        let fs = &params["clientCapabilities"]["fs"];
        *self.fs.lock().unwrap_or_else(|e| e.into_inner()) = ClientFs {
            read: fs["readTextFile"].as_bool() == Some(true),
            write: fs["writeTextFile"].as_bool() == Some(true),
        };
        json!({
            "protocolVersion": PROTOCOL_VERSION,
            "agentCapabilities": {
                "loadSession": true,
                "promptCapabilities": {"image": true, "audio": false, "embeddedContext": true},
                "mcpCapabilities": {"http": true, "sse": false},
            },
            // The provider's key comes from the environment or the configuration: nothing to do.
            "authMethods": [],
            "agentInfo": {"name": "wright", "title": "wright", "version": env!("CARGO_PKG_VERSION")},
        })
    }

    /// The session's folder, configuration and MCP servers (`mcpServers`, the session's own
    /// beside the configuration's) from `cwd`.
    fn place(params: &Value) -> Result<(PathBuf, Config, Vec<McpServer>), (i64, String)> {
        let servers =
            crate::mcp::servers::from_acp(&params["mcpServers"]).map_err(|why| (-32602, why))?;
        let cwd = params["cwd"]
            .as_str()
            .ok_or((-32602, "cwd: an absolute path is required".to_owned()))?;
        let cwd = Path::new(cwd);
        if !cwd.is_absolute() {
            return Err((
                -32602,
                format!("cwd {}: not an absolute path", cwd.display()),
            ));
        }
        // host path: the session's folder, named by the client, before any handle on it.
        let root = std::fs::canonicalize(cwd)
            .map_err(|err| (-32602, format!("cwd {}: {err}", cwd.display())))?;
        let env = |var: &str| std::env::var(var).ok();
        let config =
            Layers::load(config::user_file(&env), std::slice::from_ref(&root), &env).resolve();
        for problem in config.problems() {
            tracing::warn!("configuration: {problem}");
        }
        Ok((root, config, servers))
    }

    fn new_session(&self, params: &Value) -> Result<Value, (i64, String)> {
        let (root, config, mcp) = Self::place(params)?;
        let id = agent::journal::new_session_id("acp");
        let model = config.get("model").map(str::to_owned);
        let answer = json!({
            "sessionId": id,
            "modes": modes(Mode::Code),
            "configOptions": [model_option(model.as_deref().unwrap_or("auto"))],
        });
        self.sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(
                id.clone(),
                AcpSession {
                    id,
                    root,
                    config,
                    mode: Mode::Code,
                    model,
                    mcp,
                    journaled: false,
                    running: None,
                },
            );
        Ok(answer)
    }

    /// `session/load`: the conversation replayed from the journal as updates, then the
    /// answer; its next prompt continues it.
    fn load_session(&self, params: &Value) -> Result<Value, (i64, String)> {
        let (root, config, mcp) = Self::place(params)?;
        let id = params["sessionId"]
            .as_str()
            .ok_or((-32602, "sessionId is required".to_owned()))?;
        let env = |var: &str| std::env::var(var).ok();
        let data_dir = config::data_dir(&env).map_err(|err| (-32603, err.to_string()))?;
        let recorded =
            agent::journal::Recorded::find(&agent::journal::sessions_dir(&data_dir, &root), id)
                .map_err(|err| (-32002, err.to_string()))?;
        for update in updates::replay(&recorded, &root) {
            self.peer
                .notify("session/update", json!({"sessionId": id, "update": update}));
        }
        let answer = json!({
            "modes": modes(recorded.mode),
            "configOptions": [model_option(&recorded.model)],
        });
        // A session this process already runs keeps running: loading it again only replays.
        self.sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(id.to_owned())
            .or_insert_with(|| AcpSession {
                id: id.to_owned(),
                root,
                config,
                mode: recorded.mode,
                model: Some(recorded.model.clone()),
                mcp,
                journaled: true,
                running: None,
            });
        Ok(answer)
    }

    fn set_mode(&self, params: &Value) -> Result<Value, (i64, String)> {
        let mode = Mode::parse(params["modeId"].as_str().unwrap_or_default())
            .map_err(|why| (-32602, why))?;
        let id = params["sessionId"].as_str().unwrap_or_default();
        let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        let session = sessions
            .get_mut(id)
            .ok_or((-32002, format!("no session {id:?}")))?;
        session.mode = mode;
        if let Some(running) = &session.running {
            running.conversation.configure(Some(mode), None);
        }
        Ok(json!({}))
    }

    fn set_model(&self, params: &Value) -> Result<Value, (i64, String)> {
        if params["configId"] != "model" {
            return Err((-32602, format!("no config option {}", params["configId"])));
        }
        let model = params["value"]
            .as_str()
            .ok_or((-32602, "value: a model name is required".to_owned()))?;
        let id = params["sessionId"].as_str().unwrap_or_default();
        let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        let session = sessions
            .get_mut(id)
            .ok_or((-32002, format!("no session {id:?}")))?;
        let models = agent::Models::connect(&session.config, Some(model), "")
            .map_err(|why| (-32602, why))?;
        let name = models.decision.model.to_string();
        if let Some(running) = &session.running {
            running.conversation.configure(
                None,
                Some(ModelSwitch {
                    name: name.clone(),
                    task: models.task,
                }),
            );
        }
        session.model = Some(name.clone());
        Ok(json!({"configOptions": [model_option(&name)]}))
    }

    /// `session/prompt`: a turn of the session's conversation (its first starts it); answered
    /// when the turn ends.
    fn prompt(self: &Arc<Self>, id: &Value, params: &Value) -> Result<(), (i64, String)> {
        let session_id = params["sessionId"].as_str().unwrap_or_default().to_owned();
        let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        let session = sessions.get_mut(&session_id).ok_or((
            -32002,
            format!("no session {session_id:?}: session/new or session/load first"),
        ))?;
        let message = user_message(
            params["prompt"].as_array().map_or(&[][..], Vec::as_slice),
            &session.root,
        )
        .map_err(|why| (-32602, why))?;
        if let Some(running) = &session.running {
            let joined = running
                .conversation
                .prompt(message)
                .map_err(|why| (-32602, why))?;
            running
                .waiting
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .entry(joined.turn)
                .or_default()
                .push(id.clone());
            return Ok(());
        }
        let running = self.start(session, message).map_err(|why| (-32603, why))?;
        running
            .waiting
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(running.conversation.turn().0)
            .or_default()
            .push(id.clone());
        session.running = Some(running);
        Ok(())
    }

    /// Opens the session through the launcher with the client's files, wright's sandbox and
    /// the client's permission prompts, and forwards its events as `session/update`s.
    fn start(
        self: &Arc<Self>,
        session: &AcpSession,
        message: UserMessage,
    ) -> Result<Running, String> {
        let env = |var: &str| std::env::var(var).ok();
        let data_dir = config::data_dir(&env).map_err(|err| err.to_string())?;
        let cache_dir = config::cache_dir(&env).map_err(|err| err.to_string())?;
        let task = message.text.clone();
        let begin = if session.journaled {
            Begin::FollowUp(&session.id, message.clone())
        } else {
            Begin::Task(&task)
        };
        let mut prepared = Prepared::prepare(Plan {
            config: &session.config,
            root: &session.root,
            data_dir: &data_dir,
            begin,
            model: session.model.as_deref(),
            id_prefix: "acp",
            mode: Some(session.mode),
        })?;
        prepared.name(&session.id);
        let fs = *self.fs.lock().unwrap_or_else(|e| e.into_inner());
        let client_files = Arc::new(ClientFiles::new(
            Arc::clone(&self.peer),
            &session.id,
            &session.root,
            fs.read,
            fs.write,
        ));
        let client_approver = Arc::new(ClientApprover::new(Arc::clone(&self.peer), &session.id));
        let approver: Arc<dyn Approver> = Arc::clone(&client_approver) as Arc<dyn Approver>;
        let protection =
            agent::tools::Protection::from_config(&session.config).asking(Arc::clone(&approver));
        let gate = session
            .config
            .get("edit.syntax_gate")
            .and_then(|value| value.parse().ok())
            .unwrap_or_default();
        let disk = agent::disk::DiskTarget::new(&session.root, gate)
            .protecting(protection)
            .recording(&data_dir, &session.id);
        let target = Arc::new(AcpTarget::new(disk, Arc::clone(&client_files)));
        let cancel = Cancel::new();
        let servers = crate::mcp::servers::Servers::open(
            &session.config,
            &session.root,
            &data_dir,
            session.mcp.clone(),
            Some(Arc::clone(&approver)),
        );
        let mcp_tools = servers.tools();
        let commands = agent::sandboxed::pool(&cache_dir)
            .and_then(|pool| {
                let snapshot = pool
                    .new_snapshot(&session.root)
                    .map_err(|err| format!("the session's snapshot: {err}"))?;
                let texts = Arc::clone(&client_files);
                let runner = SandboxRunner::in_place(pool, &session.root)
                    .in_snapshot(
                        Arc::new(Mutex::new(snapshot)),
                        Box::new(move || texts.texts()),
                    )
                    .configured(&session.config)
                    .with_approver(Arc::clone(&approver));
                Ok(Arc::new(runner))
            })
            .inspect_err(|err| tracing::warn!("session {} runs no commands: {err}", session.id))
            .ok();
        let walk = crate::workspace::WalkOptions {
            max_file_size: session
                .config
                .get_u64("index.max_file_size")
                .unwrap_or(crate::workspace::DEFAULT_MAX_FILE_SIZE),
            ..Default::default()
        };
        let test_command = session.config.get("agent.test_command").map(str::to_owned);
        let tool_cancel = cancel.clone();
        let tool_files = Arc::clone(&client_files);
        let indexes = Arc::clone(&self.indexes);
        let root = session.root.clone();
        let (events, mut received) = tokio::sync::mpsc::unbounded_channel();
        let conversation = prepared.conversation();
        let waiting: Arc<Mutex<HashMap<u32, Vec<Value>>>> = Arc::default();
        let session_id = session.id.clone();
        tokio::spawn(async move {
            let opened = tokio::task::spawn_blocking(move || {
                // Without an index the agent still greps and reads; the log says why.
                let index = shared_index(&indexes, &root, &cache_dir, &walk);
                let tools = Arc::new(ToolContext {
                    root,
                    overlay: tool_files.clone(),
                    index: index.clone(),
                    walk,
                    edits: target,
                    commands: commands.map(|runner| runner as _),
                    test_command,
                    cancel: tool_cancel,
                    plan: Mutex::default(),
                    plan_mode: Default::default(),
                    mcp: mcp_tools,
                });
                let context = launch::Context {
                    index,
                    overlay: tool_files,
                    focus: Default::default(),
                };
                (prepared.open(context), tools)
            })
            .await;
            let Ok((opened, tools)) = opened else {
                tracing::error!("session {session_id}: preparing its first request panicked");
                return;
            };
            for problem in servers.started().await {
                tracing::warn!("session {session_id}: {problem}");
            }
            let mut session = opened.session(tools, events, None);
            session.converse().await;
            drop(session);
            servers.close().await;
        });
        let peer = Arc::clone(&self.peer);
        let session_id = session.id.clone();
        let answers = Arc::clone(&waiting);
        let root = session.root.clone();
        tokio::spawn(async move {
            let mut mapper = updates::Mapper::new(&root);
            while let Some(event) = received.recv().await {
                client_approver.track(&event);
                if let AgentEvent::ToolResult { .. } = &event {
                    mapper.changed(client_files.take_changed());
                }
                for update in mapper.map(&event) {
                    peer.notify(
                        "session/update",
                        json!({"sessionId": session_id, "update": update}),
                    );
                }
                if let AgentEvent::Finished { turn, outcome } = &event {
                    let ids = answers
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .remove(turn)
                        .unwrap_or_default();
                    for id in ids {
                        match stop_reason(outcome) {
                            Ok(reason) => peer.respond(&id, json!({"stopReason": reason})),
                            Err(why) => peer.error(&id, -32603, &why),
                        }
                    }
                }
            }
        });
        Ok(Running {
            conversation,
            cancel,
            waiting,
        })
    }
}

/// The index of `root`, opened and brought up to date the first time a session there asks;
/// `None` (logged) when it cannot be.
fn shared_index(
    indexes: &Mutex<HashMap<PathBuf, Arc<Index>>>,
    root: &Path,
    cache_dir: &Path,
    walk: &crate::workspace::WalkOptions,
) -> Option<Arc<Index>> {
    // Held while opening: a second session on the same root waits for the first's index
    // rather than open the same store twice.
    let mut indexes = indexes.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(index) = indexes.get(root) {
        if let Err(err) = index.refresh(&|_| {}) {
            tracing::warn!("refreshing the index of {}: {err}", root.display());
        }
        return Some(Arc::clone(index));
    }
    let opened = Index::open(
        root,
        index::Options {
            cache_dir: cache_dir.to_owned(),
            walk: walk.clone(),
        },
    )
    .and_then(|index| index.refresh(&|_| {}).map(|_| index));
    match opened {
        Ok(index) => {
            let index = Arc::new(index);
            indexes.insert(root.to_owned(), Arc::clone(&index));
            Some(index)
        }
        Err(err) => {
            tracing::warn!(
                "{}: working without the symbol index: {err}",
                root.display()
            );
            None
        }
    }
}

/// The prompt's content blocks as the user's message: text as it is, a resource link as an
/// `@path` mention (inside the folder) or its URI, an embedded text resource attached, images
/// kept.
fn user_message(blocks: &[Value], root: &Path) -> Result<UserMessage, String> {
    let mut text = String::new();
    let mut images = Vec::new();
    for block in blocks {
        match block["type"].as_str() {
            Some("text") => text.push_str(block["text"].as_str().unwrap_or_default()),
            Some("resource_link") => {
                let uri = block["uri"].as_str().unwrap_or_default();
                let shown = file_path(uri)
                    .and_then(|path| path.strip_prefix(root).ok().map(Path::to_path_buf))
                    .map_or_else(
                        || uri.to_owned(),
                        |relative| format!("@{}", relative.display()),
                    );
                text.push_str(&format!(" {shown} "));
            }
            Some("resource") => {
                let resource = &block["resource"];
                match resource["text"].as_str() {
                    Some(body) => text.push_str(&format!(
                        "\n\n{}:\n```\n{}\n```\n",
                        resource["uri"].as_str().unwrap_or("an attached resource"),
                        body.trim_end()
                    )),
                    None => {
                        return Err(
                            "an embedded resource without text: wright reads text resources only"
                                .to_owned(),
                        );
                    }
                }
            }
            Some("image") => images.push(Image {
                media_type: block["mimeType"].as_str().unwrap_or_default().to_owned(),
                data: block["data"].as_str().unwrap_or_default().to_owned(),
            }),
            Some("audio") => {
                return Err("wright takes no audio (promptCapabilities.audio is false)".to_owned());
            }
            other => return Err(format!("a content block of type {other:?}")),
        }
    }
    Ok(UserMessage {
        text: text.trim().to_owned(),
        images,
        ..UserMessage::default()
    })
}

/// The path a `file://` URI names, percent-decoded and normalised lexically (`..` applied), so
/// `file:///ws/../elsewhere` is judged by where it leads, as the LSP front end judges URIs.
fn file_path(uri: &str) -> Option<PathBuf> {
    let path = PathBuf::from(percent_decode(uri.strip_prefix("file://")?)?);
    path.is_absolute().then(|| crate::files::normalize(&path))
}

fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// How a turn's end reads as ACP's `stopReason`; a failure other than a limit is an error.
fn stop_reason(outcome: &agent::Outcome) -> Result<&'static str, String> {
    match outcome.status {
        FinalStatus::Done => Ok("end_turn"),
        FinalStatus::Cancelled => Ok("cancelled"),
        FinalStatus::Failed => {
            let reason = outcome.reason.clone().unwrap_or_default();
            if reason.contains("step limit") {
                Ok("max_turn_requests")
            } else if reason.contains("output token limit") || reason.contains("tokens, over") {
                Ok("max_tokens")
            } else if reason.contains("content filter") {
                Ok("refusal")
            } else {
                Err(reason)
            }
        }
    }
}

fn modes(current: Mode) -> Value {
    json!({
        "currentModeId": current.name(),
        "availableModes": [
            {"id": "code", "name": "Code", "description": "Every tool: reads, edits, commands in the sandbox"},
            {"id": "plan", "name": "Plan", "description": "Reads only (commands in a throw-away copy); ends with a plan"},
        ],
    })
}

fn model_option(current: &str) -> Value {
    json!({
        "id": "model",
        "name": "Model",
        "category": "model",
        "type": "select",
        "currentValue": current,
        "options": [{"value": current, "name": current}],
    })
}

/// Permission through `session/request_permission`: a command the sandbox refused the
/// network (or more), one `agent.approve_commands` names, an edit of a protected path.
/// "Allow always" is remembered by the core (the pattern or the widening, for the session);
/// "reject always" here, so the user is not asked again what they refused for good.
struct ClientApprover {
    peer: Arc<Peer>,
    session: String,
    /// What was rejected always: the kind, and for a named command or a protected path the
    /// reason (which names the pattern or the path), since those are asked one by one.
    rejected: Mutex<std::collections::HashSet<(String, String)>>,
    asked: std::sync::atomic::AtomicU64,
    /// The `run_command` calls in flight, by id, with their command line: a question about a
    /// command names the client's card of the call that runs it. (The core's question carries
    /// no call id; the command line finds it, the latest call first.)
    running: Mutex<Vec<(String, String)>>,
    /// Signalled when a call joins `running`: a command `agent.approve_commands` names asks
    /// before it runs, possibly before its event has come through the session's channel.
    call_started: std::sync::Condvar,
}

impl ClientApprover {
    fn new(peer: Arc<Peer>, session: &str) -> Self {
        Self {
            peer,
            session: session.to_owned(),
            rejected: Mutex::default(),
            asked: std::sync::atomic::AtomicU64::new(0),
            running: Mutex::default(),
            call_started: std::sync::Condvar::new(),
        }
    }

    /// Follows the session's calls that may ask (from the events the client is sent):
    /// `run_command`, by its command line, and MCP tools, by the line their approval shows
    /// (the tool's name and its arguments as JSON).
    fn track(&self, event: &AgentEvent) {
        let mut running = self.running.lock().unwrap_or_else(|e| e.into_inner());
        match event {
            AgentEvent::ToolCall {
                id,
                name,
                arguments,
            } if name == "run_command" || name.starts_with(crate::agent::tools::MCP_PREFIX) => {
                let arguments = serde_json::from_str::<Value>(arguments).ok();
                let command = if name == "run_command" {
                    arguments.and_then(|args| args["command"].as_str().map(str::to_owned))
                } else {
                    arguments.map(|args| crate::mcp::servers::approval_line(name, &args))
                };
                if let Some(command) = command {
                    running.push((id.clone(), command));
                    self.call_started.notify_all();
                }
            }
            AgentEvent::ToolResult { id, .. } => running.retain(|(running, _)| running != id),
            _ => {}
        }
    }

    /// The tool call a question about `command` belongs to; a call id of its own otherwise
    /// (clients add a call they have not seen).
    fn call_id(&self, kind: &str, command: &str) -> String {
        /// Long enough for the event on its way, short enough not to hold up a question
        /// about a command that is no call of the model's.
        const EVENT_ON_ITS_WAY: std::time::Duration = std::time::Duration::from_millis(200);
        let matches = |running: &Vec<(String, String)>| {
            running
                .iter()
                .rev()
                .find(|(_, line)| line == command)
                .cloned()
        };
        let running = self.running.lock().unwrap_or_else(|e| e.into_inner());
        let found = if kind == "protected" {
            None
        } else {
            let (running, _) = self
                .call_started
                .wait_timeout_while(running, EVENT_ON_ITS_WAY, |running| {
                    matches(running).is_none()
                })
                .unwrap_or_else(|e| e.into_inner());
            matches(&running)
        };
        match found {
            Some((id, _)) => id,
            None => {
                let n = self
                    .asked
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
                    + 1;
                format!("permission-{n}")
            }
        }
    }

    fn key(kind: &str, reason: &str) -> (String, String) {
        let scoped = matches!(kind, "command" | "protected" | "mcp");
        (
            kind.to_owned(),
            if scoped {
                reason.to_owned()
            } else {
                String::new()
            },
        )
    }
}

impl Approver for ClientApprover {
    fn ask(&self, kind: &str, command: &str, reason: &str) -> Decision {
        let key = Self::key(kind, reason);
        if self
            .rejected
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(&key)
        {
            return Decision::Deny;
        }
        let call_id = self.call_id(kind, command);
        let answer = self.peer.request_blocking(
            "session/request_permission",
            json!({
                "sessionId": self.session,
                "toolCall": {
                    "toolCallId": call_id,
                    "title": format!("{kind}: {command}"),
                    "kind": if kind == "protected" { "edit" } else { "execute" },
                    "status": "pending",
                    "rawInput": {"kind": kind, "command": command},
                    "content": [{"type": "content", "content": {"type": "text", "text": reason}}],
                },
                "options": [
                    {"optionId": "allow_once", "name": "Allow", "kind": "allow_once"},
                    {"optionId": "allow_always", "name": "Allow always", "kind": "allow_always"},
                    {"optionId": "reject_once", "name": "Reject", "kind": "reject_once"},
                    {"optionId": "reject_always", "name": "Reject always", "kind": "reject_always"},
                ],
            }),
        );
        match answer {
            Ok(value) if value["outcome"]["outcome"] == "selected" => {
                match value["outcome"]["optionId"].as_str() {
                    Some("allow_once") => Decision::Allow,
                    Some("allow_always") => Decision::AllowAlways,
                    Some("reject_always") => {
                        self.rejected
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .insert(key);
                        Decision::Deny
                    }
                    _ => Decision::Deny,
                }
            }
            // `cancelled` (the prompt was cancelled) or anything else: not allowed.
            Ok(_) => Decision::Deny,
            Err(why) => {
                tracing::warn!("session/request_permission: {why}");
                Decision::Deny
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(uri: &str) -> String {
        let blocks = [json!({"type": "resource_link", "uri": uri, "name": "x"})];
        user_message(&blocks, Path::new("/ws")).unwrap().text
    }

    #[test]
    fn a_resource_link_is_a_mention_only_where_it_leads_inside_the_folder() {
        assert_eq!(link("file:///ws/src/lib.rs"), "@src/lib.rs");
        assert_eq!(link("file:///ws/sub/..%2Fsrc/lib.rs"), "@src/lib.rs");
        // Climbing out is no mention of a workspace file: the URI stays text.
        assert_eq!(link("file:///ws/../etc/passwd"), "file:///ws/../etc/passwd");
        assert_eq!(link("https://example.com/x"), "https://example.com/x");
    }
}
