//! The MCP servers a session has: from the configuration (user, workspace — trusted only as
//! defined when the user allowed it —, and a protocol peer's session), started as the
//! configuration says (sandboxed by default), their tools offered as `mcp__NAME__TOOL`.
//!
//! Every front end opens a session's servers here ([`Servers::open`]), so one place decides
//! which run: a disabled or untrusted server never starts, a server that fails to start is
//! reported and the session runs without its tools. Calls of an `approve = "ask"` server are
//! asked through the session's approver (the editor's prompt, ACP's permission request);
//! without one (headless) they are not run.

mod launch;
pub mod trust;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use serde_json::{Map, Value as Json};

use super::client::{CallOutput, Client, Options, State};
use crate::agent::sandboxed::{Approver, Decision};
use crate::agent::tools::{MCP_PREFIX, McpTools, ToolOutput};
use crate::config::{Approve, Config, McpServer, Origin};
use crate::llm::{ToolCall, ToolSchema};

pub use launch::transport;
pub use trust::Trust;

/// How long a server may take to start, answer `initialize` and list its tools.
pub const STARTUP_TIMEOUT: Duration = Duration::from_secs(30);

/// What an approval of a call shows: the tool's name and its arguments as JSON (a front end
/// finds the call it belongs to by it).
pub fn approval_line(tool: &str, arguments: &Json) -> String {
    format!("{tool} {arguments}")
}

/// Exactly what a headless call of an `approve = "ask"` server returns.
pub const APPROVAL_NEEDED: &str = "not run: approval needed (approve = \"ask\")";

/// The longest text of one call's output kept in the conversation; the whole of a longer
/// one stays in the session's artifacts, where the model can read it.
const MAX_SHOWN: usize = 16 * 1024;

/// Where a server stands, in `wright mcp list`'s words.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Standing {
    /// Not started yet.
    Starting,
    Running,
    Failed,
    /// Defined by a workspace file, and not trusted as defined.
    Untrusted,
    /// `enabled = false`.
    Disabled,
}

/// One server's state, for `wright mcp list`, `wright doctor` and the front ends' reports.
#[derive(Clone, Debug, Serialize)]
pub struct Status {
    pub name: String,
    pub source: &'static str,
    pub state: Standing,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The tools offered to the model (the allow-list applied), by the server's names.
    pub tools: Vec<String>,
}

struct Entry {
    server: McpServer,
    state: Mutex<EntryState>,
}

enum EntryState {
    Starting,
    Running(Arc<Client>),
    Failed(String),
    Untrusted,
    Disabled,
}

/// A session's servers, started in the background; dropping the last handle closes them.
pub struct Servers {
    runtime: tokio::runtime::Handle,
    entries: Vec<Arc<Entry>>,
    approver: Option<Arc<dyn Approver>>,
    /// `mcp__SERVER__TOOL` names the user allowed for the rest of the session.
    allowed: Mutex<HashSet<String>>,
    /// How many servers have settled (started, failed, or never to start).
    settled: tokio::sync::watch::Sender<usize>,
}

/// What a session's servers are made of.
pub struct Setup<'a> {
    /// The configuration's servers (`Config::mcp_servers`).
    pub configured: &'a [McpServer],
    /// A protocol peer's servers for this session (origin `Session`); one of the same name
    /// replaces the configuration's.
    pub session: Vec<McpServer>,
    pub root: &'a Path,
    /// What the user trusted (`Trust::load`).
    pub trust: &'a Trust,
    /// Asks the user before calls of `approve = "ask"` servers; `None` headless.
    pub approver: Option<Arc<dyn Approver>>,
    /// wright's cache folder (the sandbox pool's snapshots), for sandboxed servers.
    pub cache_dir: Option<PathBuf>,
    /// `sandbox.deny_read`: unreadable to sandboxed servers too, besides the credential
    /// stores.
    pub deny_read: Vec<PathBuf>,
}

impl Servers {
    /// Starts every enabled, trusted server of `setup` in parallel, each bounded by
    /// [`STARTUP_TIMEOUT`], on the current runtime; returns at once ([`Servers::started`]
    /// waits for them).
    pub fn start(setup: Setup<'_>) -> Arc<Self> {
        let mut servers: Vec<McpServer> = setup.configured.to_vec();
        for server in setup.session {
            match servers.iter_mut().find(|s| s.name == server.name) {
                Some(same) => *same = server,
                None => servers.push(server),
            }
        }
        let runtime = tokio::runtime::Handle::current();
        let entries: Vec<Arc<Entry>> = servers
            .into_iter()
            .map(|server| {
                let state = if !server.enabled {
                    EntryState::Disabled
                } else if !setup.trust.allows(setup.root, &server) {
                    EntryState::Untrusted
                } else {
                    EntryState::Starting
                };
                Arc::new(Entry {
                    server,
                    state: Mutex::new(state),
                })
            })
            .collect();
        let this = Arc::new(Self {
            runtime: runtime.clone(),
            approver: setup.approver,
            allowed: Mutex::new(HashSet::new()),
            settled: tokio::sync::watch::Sender::new(0),
            entries,
        });
        for entry in &this.entries {
            if !matches!(*lock(&entry.state), EntryState::Starting) {
                this.settled.send_modify(|n| *n += 1);
                continue;
            }
            let entry = Arc::clone(entry);
            let settled = this.settled.clone();
            let root = setup.root.to_path_buf();
            let cache_dir = setup.cache_dir.clone();
            let deny_read = setup.deny_read.clone();
            runtime.spawn(async move {
                let state =
                    match connect(&entry.server, &root, cache_dir.as_deref(), &deny_read).await {
                        Ok(client) => EntryState::Running(Arc::new(client)),
                        Err(error) => EntryState::Failed(error),
                    };
                *lock(&entry.state) = state;
                settled.send_modify(|n| *n += 1);
            });
        }
        this
    }

    /// Opens the servers of a session in the workspace at `root`: the configuration's and
    /// the peer's `session` ones, as trusted in `data_dir`. What every front end calls.
    pub fn open(
        config: &Config,
        root: &Path,
        data_dir: &Path,
        session: Vec<McpServer>,
        approver: Option<Arc<dyn Approver>>,
    ) -> Arc<Self> {
        let (trust, problem) = Trust::load(data_dir);
        if let Some(problem) = problem {
            tracing::warn!("MCP servers: {problem}; no workspace server is trusted");
        }
        let env = |var: &str| std::env::var(var).ok();
        Self::start(Setup {
            configured: config.mcp_servers(),
            session,
            root,
            trust: &trust,
            approver,
            cache_dir: crate::config::cache_dir(&env).ok(),
            deny_read: crate::sandbox::policy::settings(config).deny_read,
        })
    }

    /// The servers' tools for a session's [`crate::agent::tools::ToolContext`]: none when it
    /// has no server.
    pub fn tools(self: &Arc<Self>) -> Option<Arc<dyn McpTools>> {
        (!self.entries.is_empty()).then(|| Arc::clone(self) as Arc<dyn McpTools>)
    }

    /// Waits until every server started, failed or was never to start, and says what did not
    /// start and why (one line each, for the front end to show).
    pub async fn started(&self) -> Vec<String> {
        let total = self.entries.len();
        let mut settled = self.settled.subscribe();
        let _ = settled.wait_for(|n| *n >= total).await;
        self.statuses()
            .into_iter()
            .filter_map(|status| match status.state {
                Standing::Failed => Some(format!(
                    "{}; the session runs without its tools",
                    status.error.unwrap_or_default()
                )),
                Standing::Untrusted => Some(format!(
                    "MCP server `{}` not started: {}",
                    status.name,
                    status.error.unwrap_or_default()
                )),
                _ => None,
            })
            .collect()
    }

    /// Every server's state and tools.
    pub fn statuses(&self) -> Vec<Status> {
        self.entries
            .iter()
            .map(|entry| {
                let (state, error, tools) = match &*lock(&entry.state) {
                    EntryState::Starting => (Standing::Starting, None, Vec::new()),
                    EntryState::Running(client) => match client.state() {
                        State::Running => (
                            Standing::Running,
                            None,
                            client
                                .tools()
                                .into_iter()
                                .map(|tool| tool.name)
                                .filter(|name| entry.server.allows(name))
                                .collect(),
                        ),
                        State::Failed { error } => (Standing::Failed, Some(error), Vec::new()),
                    },
                    EntryState::Failed(error) => {
                        (Standing::Failed, Some(error.clone()), Vec::new())
                    }
                    EntryState::Untrusted => (
                        Standing::Untrusted,
                        Some(format!(
                            "defined in a workspace file and not trusted as defined; `wright mcp \
                             trust {}` starts it",
                            entry.server.name
                        )),
                        Vec::new(),
                    ),
                    EntryState::Disabled => (Standing::Disabled, None, Vec::new()),
                };
                Status {
                    name: entry.server.name.clone(),
                    source: entry.server.origin.name(),
                    state,
                    error,
                    tools,
                }
            })
            .collect()
    }

    fn running(&self) -> impl Iterator<Item = (&McpServer, Arc<Client>)> {
        self.entries
            .iter()
            .filter_map(|entry| match &*lock(&entry.state) {
                EntryState::Running(client) => Some((&entry.server, Arc::clone(client))),
                _ => None,
            })
    }

    /// The server and tool a model's tool name means, when a running server offers it.
    fn find(&self, name: &str) -> Option<(&McpServer, Arc<Client>, String)> {
        let rest = name.strip_prefix(MCP_PREFIX)?;
        self.running().find_map(|(server, client)| {
            let tool = rest
                .strip_prefix(server.name.as_str())?
                .strip_prefix("__")?;
            (server.allows(tool) && client.tools().iter().any(|t| t.name == tool))
                .then(|| (server, client, tool.to_owned()))
        })
    }

    /// Asks before a call of an `approve = "ask"` server; `Err` is what the model is told.
    fn approve(&self, server: &McpServer, name: &str, arguments: &Json) -> Result<(), String> {
        if server.approve == Approve::Auto || lock(&self.allowed).contains(name) {
            return Ok(());
        }
        let Some(approver) = &self.approver else {
            return Err(APPROVAL_NEEDED.to_owned());
        };
        let reason = match server.origin {
            Origin::Workspace => format!(
                "the MCP server `{}` (defined in the workspace's .wright/config.toml) asks \
                 before each call (approve = \"ask\")",
                server.name
            ),
            _ => format!(
                "the MCP server `{}` asks before each call (approve = \"ask\")",
                server.name
            ),
        };
        match approver.ask("mcp", &approval_line(name, arguments), &reason) {
            Decision::Allow => Ok(()),
            Decision::AllowAlways => {
                lock(&self.allowed).insert(name.to_owned());
                Ok(())
            }
            Decision::Deny => Err(format!("not run: the user declined the call of {name}")),
        }
    }
}

impl Servers {
    /// Closes every running server (a session's end; dropping the last handle does it too,
    /// without waiting).
    pub async fn close(&self) {
        let clients: Vec<Arc<Client>> = self.running().map(|(_, client)| client).collect();
        for client in clients {
            client.close().await;
        }
    }
}

impl McpTools for Servers {
    fn schemas(&self) -> Vec<ToolSchema> {
        let mut schemas = Vec::new();
        for (server, client) in self.running() {
            if client.state() != State::Running {
                continue;
            }
            for tool in client.tools() {
                if !server.allows(&tool.name) {
                    continue;
                }
                let name = format!("{MCP_PREFIX}{}__{}", server.name, tool.name);
                if !model_name(&name) {
                    tracing::warn!(
                        "MCP server `{}`: its tool {:?} is not offered: a model's tool name \
                         holds at most 64 letters, digits, `_` and `-`",
                        server.name,
                        tool.name
                    );
                    continue;
                }
                schemas.push(ToolSchema {
                    name,
                    description: tool.description.unwrap_or_default(),
                    parameters: object_schema(tool.input_schema),
                });
            }
        }
        schemas
    }

    fn call(&self, call: &ToolCall) -> Option<ToolOutput> {
        let (server, client, tool) = self.find(&call.name)?;
        let arguments: Map<String, Json> = match call.parsed_arguments() {
            Ok(arguments) => arguments,
            Err(why) => return Some(ToolOutput::error(format!("invalid arguments: {why}"))),
        };
        if let Err(why) = self.approve(server, &call.name, &Json::Object(arguments.clone())) {
            return Some(ToolOutput::error(why));
        }
        let result = self
            .runtime
            .block_on(async move { client.call(&tool, arguments).await });
        Some(match result {
            Ok(output) => rendered(output),
            Err(error) => ToolOutput::error(error.to_string()),
        })
    }
}

impl Drop for Servers {
    fn drop(&mut self) {
        let clients: Vec<Arc<Client>> = self.running().map(|(_, client)| client).collect();
        if clients.is_empty() {
            return;
        }
        // The last handle may go on a runtime thread, where blocking is not allowed: the
        // clients close on the runtime, and a stdio server's process ends with its guard.
        self.runtime.spawn(async move {
            for client in clients {
                client.close().await;
            }
        });
    }
}

/// A call's output as the model sees it: text (long text shown head and tail, whole in the
/// artifacts); an error when the server said so.
fn rendered(output: CallOutput) -> ToolOutput {
    let text = output.text;
    let mut result = if output.is_error {
        ToolOutput::error(String::new())
    } else {
        ToolOutput::ok(String::new())
    };
    if text.len() > MAX_SHOWN {
        let head = floor(&text, MAX_SHOWN / 2);
        let tail = ceil(&text, text.len() - MAX_SHOWN / 2);
        result.content = format!(
            "{}\n… ({} bytes left out) …\n{}\n",
            &text[..head],
            tail - head,
            &text[tail..]
        );
        result.whole = Some(text);
    } else {
        result.content = text;
    }
    result.images = output
        .images
        .into_iter()
        .map(|image| crate::agent::conversation::Image {
            media_type: image.mime_type,
            data: image.data,
        })
        .collect();
    result
}

fn floor(text: &str, mut at: usize) -> usize {
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

fn ceil(text: &str, mut at: usize) -> usize {
    while !text.is_char_boundary(at) {
        at += 1;
    }
    at
}

/// A tool name every provider accepts.
fn model_name(name: &str) -> bool {
    name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// The server's schema, as an object schema (providers require one at the top).
fn object_schema(schema: Json) -> Json {
    match schema {
        Json::Object(map) if map.get("type").and_then(Json::as_str) == Some("object") => {
            Json::Object(map)
        }
        Json::Object(mut map) if !map.contains_key("type") => {
            map.insert("type".to_owned(), Json::String("object".to_owned()));
            Json::Object(map)
        }
        _ => serde_json::json!({"type": "object", "properties": {}}),
    }
}

async fn connect(
    server: &McpServer,
    root: &Path,
    cache_dir: Option<&Path>,
    deny_read: &[PathBuf],
) -> Result<Client, String> {
    let transport = launch::transport(server, root, cache_dir, deny_read)?;
    let options = Options {
        call_timeout: Duration::from_secs(server.timeout_secs),
        connect_timeout: STARTUP_TIMEOUT,
    };
    let connecting = Client::connect(&server.name, transport, options);
    match tokio::time::timeout(STARTUP_TIMEOUT + Duration::from_secs(5), connecting).await {
        Ok(Ok(client)) => Ok(client),
        Ok(Err(error)) => Err(error.to_string()),
        Err(_) => Err(format!(
            "MCP server `{}` did not start within {} s",
            server.name,
            STARTUP_TIMEOUT.as_secs()
        )),
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// The servers an ACP client passes in `session/new` or `session/load` (`mcpServers`): stdio
/// ones `{name, command, args, env: [{name, value}]}`, run in the sandbox as a configured one
/// would be, and HTTP ones `{type: "http", name, url, headers: [{name, value}]}`. Their calls
/// are asked first (`approve = "ask"`), through the client's permission request.
pub fn from_acp(servers: &Json) -> Result<Vec<McpServer>, String> {
    let Some(servers) = servers.as_array() else {
        return match servers {
            Json::Null => Ok(Vec::new()),
            other => Err(format!("mcpServers: expected a list, found {other}")),
        };
    };
    let pairs = |value: &Json, what: &str| -> Result<Vec<(String, String)>, String> {
        let Some(items) = value.as_array() else {
            return match value {
                Json::Null => Ok(Vec::new()),
                other => Err(format!("{what}: expected a list, found {other}")),
            };
        };
        items
            .iter()
            .map(
                |item| match (item["name"].as_str(), item["value"].as_str()) {
                    (Some(name), Some(value)) => Ok((name.to_owned(), value.to_owned())),
                    _ => Err(format!("{what}: expected {{name, value}}, found {item}")),
                },
            )
            .collect()
    };
    let mut out: Vec<McpServer> = Vec::new();
    for server in servers {
        let name = server["name"]
            .as_str()
            .ok_or_else(|| format!("mcpServers: a server without a name: {server}"))?;
        if !crate::config::valid_name(name) {
            return Err(format!(
                "mcpServers: {name:?}: {}",
                crate::config::NAME_RULE
            ));
        }
        if out.iter().any(|s| s.name == name) {
            return Err(format!("mcpServers: two servers are named {name:?}"));
        }
        let reach = match server["type"].as_str() {
            None | Some("stdio") => {
                let command = server["command"]
                    .as_str()
                    .filter(|command| !command.trim().is_empty())
                    .ok_or_else(|| format!("mcpServers: {name:?}: `command` is required"))?;
                let args = match &server["args"] {
                    Json::Null => Vec::new(),
                    Json::Array(args) => args
                        .iter()
                        .map(|arg| {
                            arg.as_str().map(str::to_owned).ok_or_else(|| {
                                format!("mcpServers: {name:?}: `args` must be strings")
                            })
                        })
                        .collect::<Result<_, _>>()?,
                    other => return Err(format!("mcpServers: {name:?}: `args`: {other}")),
                };
                crate::config::Reach::Stdio {
                    command: command.to_owned(),
                    args,
                    env: pairs(&server["env"], &format!("mcpServers: {name:?}: env"))?
                        .into_iter()
                        .collect(),
                    cwd: None,
                    sandbox: true,
                    network: false,
                    writable: Vec::new(),
                }
            }
            Some("http") => {
                let url = server["url"]
                    .as_str()
                    .filter(|url| url.starts_with("http://") || url.starts_with("https://"))
                    .ok_or_else(|| {
                        format!("mcpServers: {name:?}: `url` must be an http:// or https:// URL")
                    })?;
                crate::config::Reach::Http {
                    url: url.to_owned(),
                    bearer_token_env: None,
                    headers: pairs(
                        &server["headers"],
                        &format!("mcpServers: {name:?}: headers"),
                    )?,
                }
            }
            Some(other) => {
                return Err(format!(
                    "mcpServers: {name:?}: the transport {other:?} is not supported (stdio and \
                     http are)"
                ));
            }
        };
        out.push(McpServer {
            name: name.to_owned(),
            origin: Origin::Session,
            source: crate::config::Source::Session,
            reach,
            approve: Approve::Ask,
            tools: None,
            timeout_secs: crate::config::DEFAULT_TIMEOUT_SECS,
            enabled: true,
        });
    }
    Ok(out)
}
