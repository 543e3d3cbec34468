//! The [`Client`]: a live rmcp session to one server, started again once when it dies.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation,
    PaginatedRequestParams, ProtocolVersion,
};
use rmcp::service::{ClientInitializeError, NotificationContext, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, Peer, RoleClient, ServiceError, ServiceExt as _};
use tokio::sync::watch;

use super::stdio::{CheckedStdout, StderrTail, StdoutVerdict};
use super::unrouted::EndOnUnroutedError;
use super::{CallOutput, McpError, Options, State, Tail, Tool, Transport, render};

/// The longest JSON-RPC message read from a stdio server; a longer line is dropped by rmcp
/// (and the call it answered times out) rather than held in memory.
const MAX_MESSAGE: usize = 16 * 1024 * 1024;
/// How long a message about a server that exited waits for the rest of its stderr.
const STDERR_SETTLE: Duration = Duration::from_millis(300);

/// One server's connection; clones share it.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

struct Inner {
    name: String,
    transport: Transport,
    options: Options,
    shared: Arc<Shared>,
    /// The live session; replaced when the server is started again.
    slot: tokio::sync::Mutex<Slot>,
}

/// What the notification handler and the client both see.
struct Shared {
    name: String,
    tools: RwLock<Vec<Tool>>,
    tools_version: watch::Sender<u64>,
    state: Mutex<State>,
    info: RwLock<(String, Option<String>)>,
    /// A `tools/list_changed` came that no listing has answered yet.
    refresh_wanted: AtomicBool,
    /// A task is listing the tools again.
    refreshing: AtomicBool,
}

struct Slot {
    live: Option<Arc<Session>>,
    restarted: bool,
}

/// A server's tools, at most: past this many (or pages) the list is cut, so that a server
/// paging forever cannot grow wright's memory.
const MAX_TOOLS: usize = 1000;
const MAX_PAGES: usize = 100;

/// All pages of `tools/list`, bounded by [`MAX_TOOLS`] and [`MAX_PAGES`].
async fn list_tools(peer: &Peer<RoleClient>) -> Result<Vec<rmcp::model::Tool>, ServiceError> {
    let mut tools = Vec::new();
    let mut cursor = None;
    for _ in 0..MAX_PAGES {
        let params = PaginatedRequestParams::default().with_cursor(cursor);
        let page = peer.list_tools(Some(params)).await?;
        tools.extend(page.tools);
        if tools.len() >= MAX_TOOLS {
            tools.truncate(MAX_TOOLS);
            tracing::warn!("a server lists more than {MAX_TOOLS} tools: the rest are left out");
            break;
        }
        cursor = page.next_cursor;
        if cursor.is_none() {
            break;
        }
    }
    Ok(tools)
}

/// A request that could not be sent.
struct Undelivered(ServiceError);

/// One run of the server.
struct Session {
    service: RunningService<RoleClient, Handler>,
    /// Set when a request could not be delivered (an HTTP server gone, a closed pipe).
    broken: AtomicBool,
    /// An HTTP server's refusal that named no request, which ended the session.
    rejected: Option<Arc<Mutex<Option<String>>>>,
    stderr: Option<Arc<StderrTail>>,
    verdict: Option<Arc<StdoutVerdict>>,
    /// Ends the server's processes when the session goes.
    _guard: Option<Box<dyn Send + Sync>>,
}

impl Session {
    fn peer(&self) -> &Peer<RoleClient> {
        self.service.peer()
    }

    fn is_dead(&self) -> bool {
        self.broken.load(Ordering::SeqCst) || self.peer().is_transport_closed()
    }

    /// Resolves when the transport has ended.
    async fn closed(&self) {
        while !self.peer().is_transport_closed() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The refusal that ended the session, if one did.
    fn rejected(&self) -> Option<String> {
        self.rejected
            .as_ref()
            .and_then(|r| r.lock().unwrap_or_else(|e| e.into_inner()).clone())
    }

    fn stderr(&self) -> Tail {
        Tail(self.stderr.as_ref().map(|t| t.text()).unwrap_or_default())
    }
}

#[derive(Clone)]
struct Handler {
    shared: Arc<Shared>,
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        // The newest version that has the `initialize` handshake (2026-07-28 replaced it with
        // `server/discover`); a server on an older one answers with that, and rmcp accepts it.
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("wright", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::V_2025_11_25)
    }

    async fn on_tool_list_changed(&self, context: NotificationContext<RoleClient>) {
        // One refresher at a time, on a task of its own (the notification handler must not
        // wait for a request whose answer the same service loop delivers); a storm of
        // notifications becomes one more listing, not one task each.
        let shared = self.shared.clone();
        shared.refresh_wanted.store(true, Ordering::SeqCst);
        if shared.refreshing.swap(true, Ordering::SeqCst) {
            return;
        }
        let peer = context.peer.clone();
        tokio::spawn(async move {
            loop {
                while shared.refresh_wanted.swap(false, Ordering::SeqCst) {
                    match list_tools(&peer).await {
                        Ok(tools) => shared.set_tools(tools),
                        Err(error) => tracing::warn!(
                            server = %shared.name,
                            "listing the tools again after tools/list_changed: {error}"
                        ),
                    }
                }
                shared.refreshing.store(false, Ordering::SeqCst);
                // A notification between the last check and the store above is not lost.
                if !shared.refresh_wanted.load(Ordering::SeqCst)
                    || shared.refreshing.swap(true, Ordering::SeqCst)
                {
                    break;
                }
            }
        });
    }
}

impl Shared {
    fn set_tools(&self, tools: Vec<rmcp::model::Tool>) {
        let tools = tools
            .into_iter()
            .map(|tool| Tool {
                name: tool.name.into_owned(),
                description: tool.description.map(|d| d.into_owned()),
                input_schema: serde_json::Value::Object((*tool.input_schema).clone()),
            })
            .collect();
        *self.tools.write().unwrap_or_else(|e| e.into_inner()) = tools;
        self.tools_version.send_modify(|version| *version += 1);
    }

    fn fail(&self, error: &McpError) {
        *self.state.lock().unwrap_or_else(|e| e.into_inner()) = State::Failed {
            error: error.to_string(),
        };
    }
}

impl Client {
    /// Starts (or reaches) the server, initializes and lists its tools.
    pub async fn connect(
        name: &str,
        transport: Transport,
        options: Options,
    ) -> Result<Client, McpError> {
        let shared = Arc::new(Shared {
            name: name.to_owned(),
            tools: RwLock::new(Vec::new()),
            tools_version: watch::Sender::new(0),
            state: Mutex::new(State::Running),
            info: RwLock::new((String::new(), None)),
            refresh_wanted: AtomicBool::new(false),
            refreshing: AtomicBool::new(false),
        });
        let inner = Arc::new(Inner {
            name: name.to_owned(),
            transport,
            options,
            shared,
            slot: tokio::sync::Mutex::new(Slot {
                live: None,
                restarted: false,
            }),
        });
        let session = inner.start().await?;
        inner.slot.lock().await.live = Some(session);
        Ok(Client { inner })
    }

    /// The server's tools, as last listed.
    pub fn tools(&self) -> Vec<Tool> {
        self.inner
            .shared
            .tools
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Bumped each time the tools are listed again.
    pub fn tools_changed(&self) -> watch::Receiver<u64> {
        self.inner.shared.tools_version.subscribe()
    }

    /// Calls `tool`; a server found dead is started again first, once in the client's life.
    pub async fn call(
        &self,
        tool: &str,
        arguments: serde_json::Map<String, serde_json::Value>,
    ) -> Result<CallOutput, McpError> {
        let session = self.inner.live_session().await?;
        match self.call_on(&session, tool, arguments.clone()).await {
            // The request never left (a closed pipe, an HTTP server gone): the server did not
            // run it, so it is safe to send again to the server started anew.
            Err(Undelivered(error)) => {
                session.broken.store(true, Ordering::SeqCst);
                tracing::info!(server = %self.inner.name, "a call was not delivered: {error}");
                let session = self.inner.live_session().await?;
                match self.call_on(&session, tool, arguments).await {
                    Err(Undelivered(error)) => {
                        session.broken.store(true, Ordering::SeqCst);
                        Err(self.inner.died(&session, &error.to_string()).await)
                    }
                    Ok(result) => result,
                }
            }
            Ok(result) => result,
        }
    }

    /// One call on `session`: its outcome, or why it was not delivered.
    async fn call_on(
        &self,
        session: &Session,
        tool: &str,
        arguments: serde_json::Map<String, serde_json::Value>,
    ) -> Result<Result<CallOutput, McpError>, Undelivered> {
        let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
        let timeout = self.inner.options.call_timeout;
        // On the timeout the call's future is dropped, and rmcp sends notifications/cancelled
        // for a request dropped unanswered.
        Ok(
            match tokio::time::timeout(timeout, async {
                tokio::select! {
                    result = session.peer().call_tool(params) => result,
                    // A transport that ends may leave the request unanswered for good.
                    () = session.closed() => Err(ServiceError::TransportClosed),
                }
            })
            .await
            {
                Err(_) => Err(McpError::CallTimeout {
                    server: self.inner.name.clone(),
                    tool: tool.to_owned(),
                    timeout,
                }),
                Ok(Ok(result)) => Ok(render::render(result)),
                Ok(Err(ServiceError::McpError(error))) => Err(McpError::Refused {
                    server: self.inner.name.clone(),
                    tool: tool.to_owned(),
                    reason: error.message.into_owned(),
                }),
                Ok(Err(error @ ServiceError::TransportSend(_))) => return Err(Undelivered(error)),
                Ok(Err(error)) if session.rejected().is_some() => {
                    // Refused as a request of a session it does not know: not run.
                    return Err(Undelivered(error));
                }
                Ok(Err(error)) => {
                    // Sent, then the connection ended: the server may have run it; not sent
                    // again.
                    session.broken.store(true, Ordering::SeqCst);
                    Err(self.inner.died(session, &error.to_string()).await)
                }
            },
        )
    }

    /// The protocol version the server agreed to.
    pub fn protocol_version(&self) -> String {
        self.info().0
    }

    /// The server's own name for itself (`serverInfo.name`).
    pub fn server_name(&self) -> Option<String> {
        self.info().1
    }

    fn info(&self) -> (String, Option<String>) {
        self.inner
            .shared
            .info
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub fn state(&self) -> State {
        self.inner
            .shared
            .state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Whether the current session still answers, as the next call will find it.
    #[cfg(test)]
    pub(super) async fn is_live(&self) -> bool {
        match &self.inner.slot.lock().await.live {
            Some(session) => !session.is_dead(),
            None => false,
        }
    }

    /// Ends the session and the server's processes.
    pub async fn close(&self) {
        let session = self.inner.slot.lock().await.live.take();
        if let Some(session) = session {
            let cancel = session.service.cancellation_token();
            cancel.cancel();
        }
    }
}

impl Inner {
    /// The live session, or a new one when the server died and was not restarted yet.
    async fn live_session(&self) -> Result<Arc<Session>, McpError> {
        let mut slot = self.slot.lock().await;
        if let State::Failed { error } =
            &*self.shared.state.lock().unwrap_or_else(|e| e.into_inner())
        {
            return Err(McpError::Failed {
                server: self.name.clone(),
                reason: error.clone(),
            });
        }
        let dead = match &slot.live {
            Some(session) if !session.is_dead() => return Ok(session.clone()),
            Some(session) => Some(session.clone()),
            None => None,
        };
        let why = match &dead {
            Some(session) => self.died(session, "it exited").await,
            None => McpError::Closed {
                server: self.name.clone(),
                reason: "closed by wright".to_owned(),
                stderr: Tail::default(),
            },
        };
        slot.live = None;
        if slot.restarted || dead.is_none() {
            let failed = McpError::Failed {
                server: self.name.clone(),
                reason: why.to_string(),
            };
            self.shared.fail(&failed);
            return Err(failed);
        }
        slot.restarted = true;
        tracing::info!(server = %self.name, "starting it again: {why}");
        match self.start().await {
            Ok(session) => {
                slot.live = Some(session.clone());
                Ok(session)
            }
            Err(error) => {
                let failed = McpError::Failed {
                    server: self.name.clone(),
                    reason: format!("{why}; starting it again: {error}"),
                };
                self.shared.fail(&failed);
                Err(failed)
            }
        }
    }

    /// What to say about a session that stopped answering.
    async fn died(&self, session: &Session, reason: &str) -> McpError {
        if let Some(stderr) = &session.stderr {
            stderr.settle(STDERR_SETTLE).await;
        }
        if let Some(line) = session.verdict.as_ref().and_then(|v| {
            v.not_json_rpc
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone()
        }) {
            return McpError::NotJsonRpc {
                server: self.name.clone(),
                line,
                stderr: session.stderr(),
            };
        }
        let reason = match session.rejected() {
            Some(refusal) => format!("it refused the session: {refusal}"),
            None => reason.to_owned(),
        };
        McpError::Closed {
            server: self.name.clone(),
            reason,
            stderr: session.stderr(),
        }
    }

    /// Starts the server (or opens the HTTP session), initializes and lists the tools.
    async fn start(&self) -> Result<Arc<Session>, McpError> {
        let handler = Handler {
            shared: self.shared.clone(),
        };
        let timeout = self.options.connect_timeout;
        let mut rejected = None;
        let (started, stderr, verdict, guard, url) = match &self.transport {
            Transport::Stdio(launch) => {
                let start_error = |error| McpError::Start {
                    server: self.name.clone(),
                    command: launch.describe(),
                    error,
                };
                let pipes = launch.launch().map_err(start_error)?;
                let guard = pipes.guard;
                let stderr = match pipes.stderr {
                    Some(fd) => Some(StderrTail::spawn(
                        &self.name,
                        super::stdio::receiver(fd).map_err(start_error)?,
                    )),
                    None => None,
                };
                let verdict = Arc::new(StdoutVerdict::default());
                let stdout = CheckedStdout::new(
                    super::stdio::receiver(pipes.stdout).map_err(start_error)?,
                    verdict.clone(),
                );
                let stdin = super::stdio::sender(pipes.stdin).map_err(start_error)?;
                let transport =
                    AsyncRwTransport::new_client(stdout, stdin).with_max_line_length(MAX_MESSAGE);
                let started = tokio::time::timeout(timeout, handler.serve(transport)).await;
                (started, stderr, Some(verdict), Some(guard), None)
            }
            Transport::Http { url, bearer_token } => {
                let mut config = StreamableHttpClientTransportConfig::with_uri(url.as_str());
                if let Some(token) = bearer_token {
                    config = config.auth_header(token.clone());
                }
                // rmcp's HTTP client has no TLS provider of its own: it takes the process's
                // default, which is ring here (already installed is fine).
                let _ = rustls::crypto::ring::default_provider().install_default();
                let transport =
                    EndOnUnroutedError::new(StreamableHttpClientTransport::from_config(config));
                rejected = Some(transport.rejected.clone());
                let started = tokio::time::timeout(timeout, handler.serve(transport)).await;
                (started, None, None, None, Some(url.clone()))
            }
        };
        let tail = || Tail(stderr.as_ref().map(|t| t.text()).unwrap_or_default());
        let not_json_rpc = || {
            verdict.as_ref().and_then(|v| {
                v.not_json_rpc
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .clone()
            })
        };
        let service = match started {
            Ok(Ok(service)) => service,
            Err(_) => {
                if let Some(line) = not_json_rpc() {
                    return Err(McpError::NotJsonRpc {
                        server: self.name.clone(),
                        line,
                        stderr: tail(),
                    });
                }
                return Err(McpError::InitializeTimeout {
                    server: self.name.clone(),
                    timeout,
                    stderr: tail(),
                });
            }
            Ok(Err(error)) => {
                if let Some(stderr) = &stderr {
                    stderr.settle(STDERR_SETTLE).await;
                }
                if let Some(line) = not_json_rpc() {
                    return Err(McpError::NotJsonRpc {
                        server: self.name.clone(),
                        line,
                        stderr: tail(),
                    });
                }
                if let Some(refusal) = rejected
                    .as_ref()
                    .and_then(|r| r.lock().unwrap_or_else(|e| e.into_inner()).clone())
                {
                    return Err(McpError::Handshake {
                        server: self.name.clone(),
                        reason: format!("it refused `initialize`: {refusal}"),
                        stderr: tail(),
                    });
                }
                return Err(self.handshake_error(&error, url, tail()));
            }
        };
        let session = Arc::new(Session {
            service,
            rejected,
            broken: AtomicBool::new(false),
            stderr,
            verdict,
            _guard: guard,
        });
        if let Some(info) = session.peer().peer_info() {
            *self.shared.info.write().unwrap_or_else(|e| e.into_inner()) = (
                info.protocol_version.to_string(),
                info.server_info.as_ref().map(|i| i.name.clone()),
            );
        }
        match tokio::time::timeout(timeout, list_tools(session.peer())).await {
            Ok(Ok(tools)) => self.shared.set_tools(tools),
            Ok(Err(error)) => {
                return Err(McpError::Handshake {
                    server: self.name.clone(),
                    reason: format!("listing its tools: {error}"),
                    stderr: session.stderr(),
                });
            }
            Err(_) => {
                return Err(McpError::Handshake {
                    server: self.name.clone(),
                    reason: format!("it did not list its tools within {} s", timeout.as_secs()),
                    stderr: session.stderr(),
                });
            }
        }
        Ok(session)
    }

    fn handshake_error(
        &self,
        error: &ClientInitializeError,
        url: Option<String>,
        stderr: Tail,
    ) -> McpError {
        let reason = error_chain(error);
        if let Some(url) = url
            && matches!(
                error,
                ClientInitializeError::TransportError { .. }
                    | ClientInitializeError::ConnectionClosed(_)
            )
        {
            return McpError::Unreachable {
                server: self.name.clone(),
                url,
                reason: plain_reason(&format!("{error:?}"), &reason),
            };
        }
        let exited = match error {
            ClientInitializeError::ConnectionClosed(_) => true,
            // Writing `initialize` to a process that is gone.
            ClientInitializeError::TransportError { .. } => {
                format!("{error:?}").contains("BrokenPipe")
            }
            _ => false,
        };
        if exited {
            return McpError::Closed {
                server: self.name.clone(),
                reason: "it exited before answering `initialize`".to_owned(),
                stderr,
            };
        }
        McpError::Handshake {
            server: self.name.clone(),
            reason,
            stderr,
        }
    }
}

/// An error and its causes, as one line.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// The part of a transport error a user acts on (connection refused, a DNS failure), found in
/// the error's debug form (the HTTP client's causes are not all in its display chain).
fn plain_reason(debug: &str, chain: &str) -> String {
    // The chain names rmcp's types and wright's request: noise once the cause is known.
    for (needle, plain) in [
        (
            "ConnectionRefused",
            "connection refused: nothing listens there (is the server running, on that port?)",
        ),
        ("dns error", "the host name does not resolve"),
        ("TimedOut", "the connection timed out"),
        (
            "AuthRequired",
            "it asks for authorization (HTTP 401): the bearer token is missing or refused \
             (wright sends a bearer token, and does not do OAuth)",
        ),
        (
            "InsufficientScope",
            "it refused the bearer token (HTTP 403: insufficient scope)",
        ),
        ("HttpStatus", "the server answered with an HTTP error"),
    ] {
        if debug.contains(needle) {
            return plain.to_owned();
        }
    }
    chain.to_owned()
}
