//! The client against an rmcp server in the same process, over real pipes: calls, the timeout
//! and its cancellation, a changed tool list, and a server that dies (started again once, then
//! failed).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig,
};
use rmcp::service::{RequestContext, RunningService};
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt as _};

use super::*;

/// The test server's state, shared by its runs.
#[derive(Default)]
struct World {
    /// `hang` saw the client's notifications/cancelled.
    cancelled: AtomicBool,
    /// `rename` was called: the tool list is now `echo2`.
    renamed: AtomicBool,
    /// `tools/list` answers with one more page, always.
    endless: AtomicBool,
    /// How many `tools/list` requests came.
    listings: AtomicUsize,
}

#[derive(Clone)]
struct TestServer {
    world: Arc<World>,
}

fn schema() -> Arc<serde_json::Map<String, serde_json::Value>> {
    Arc::new(
        serde_json::json!({"type": "object"})
            .as_object()
            .cloned()
            .unwrap_or_default(),
    )
}

impl ServerHandler for TestServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let listing = self.world.listings.fetch_add(1, Ordering::SeqCst);
        if self.world.endless.load(Ordering::SeqCst) {
            let mut page = ListToolsResult::with_all_items(vec![rmcp::model::Tool::new(
                format!("tool{listing}"),
                "one more",
                schema(),
            )]);
            page.next_cursor = Some(format!("page{listing}"));
            return Ok(page);
        }
        let echo = if self.world.renamed.load(Ordering::SeqCst) {
            "echo2"
        } else {
            "echo"
        };
        Ok(ListToolsResult::with_all_items(
            [echo, "hang", "rename"]
                .into_iter()
                .map(|name| rmcp::model::Tool::new(name, format!("the {name} tool"), schema()))
                .collect(),
        ))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let text = match &*request.name {
            "echo" | "echo2" => request
                .arguments
                .and_then(|a| a.get("message").cloned())
                .unwrap_or_default()
                .to_string(),
            "hang" => {
                context.ct.cancelled().await;
                self.world.cancelled.store(true, Ordering::SeqCst);
                return Err(ErrorData::internal_error("cancelled", None));
            }
            "rename" => {
                self.world.renamed.store(true, Ordering::SeqCst);
                let _ = context.peer.notify_tool_list_changed().await;
                "renamed".to_owned()
            }
            "storm" => {
                for _ in 0..2000 {
                    let _ = context.peer.notify_tool_list_changed().await;
                }
                "stormed".to_owned()
            }
            other => {
                return Err(ErrorData::invalid_params(format!("no tool {other}"), None));
            }
        };
        Ok(CallToolResponse::Complete(CallToolResult::success(vec![
            ContentBlock::text(text),
        ])))
    }
}

/// Starts a [`TestServer`] on a task, over two pipes, for each launch.
#[derive(Default)]
struct InProcess {
    world: Arc<World>,
    launches: AtomicUsize,
    running: Mutex<Option<RunningService<RoleServer, TestServer>>>,
    /// Launches after this many fail, as a server that cannot start again would.
    fail_after: Option<usize>,
}

impl InProcess {
    /// Ends the running server, as its process dying would.
    async fn kill(&self) {
        let running = self.running.lock().unwrap().take();
        if let Some(running) = running {
            let _ = running.cancel().await;
        }
    }
}

impl Launch for Arc<InProcess> {
    fn launch(&self) -> std::io::Result<Pipes> {
        let launches = self.launches.fetch_add(1, Ordering::SeqCst) + 1;
        if self.fail_after.is_some_and(|limit| launches > limit) {
            return Err(std::io::Error::other("no such program"));
        }
        let (server_in, client_out) = std::io::pipe()?;
        let (client_in, server_out) = std::io::pipe()?;
        let server = TestServer {
            world: self.world.clone(),
        };
        let read = tokio::net::unix::pipe::Receiver::from_owned_fd(server_in.into())?;
        let write = tokio::net::unix::pipe::Sender::from_owned_fd(server_out.into())?;
        let this = self.clone();
        tokio::spawn(async move {
            if let Ok(running) = server.serve((read, write)).await {
                *this.running.lock().unwrap() = Some(running);
            }
        });
        Ok(Pipes {
            stdin: client_out.into(),
            stdout: client_in.into(),
            stderr: None,
            guard: Box::new(()),
        })
    }

    fn describe(&self) -> String {
        "the test server".to_owned()
    }
}

async fn connect(launcher: &Arc<InProcess>, call_timeout: Duration) -> Client {
    let options = Options {
        call_timeout,
        connect_timeout: Duration::from_secs(10),
    };
    Client::connect(
        "test",
        Transport::Stdio(Arc::new(launcher.clone())),
        options,
    )
    .await
    .unwrap()
}

/// Waits until the client saw its session end.
async fn until_dead(client: &Client) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if !client.is_live().await {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the client never saw the server die"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn message(text: &str) -> serde_json::Map<String, serde_json::Value> {
    serde_json::json!({"message": text})
        .as_object()
        .cloned()
        .unwrap_or_default()
}

#[tokio::test]
async fn tools_are_listed_and_called() {
    let launcher = Arc::new(InProcess::default());
    let client = connect(&launcher, Duration::from_secs(10)).await;
    let names: Vec<String> = client.tools().into_iter().map(|t| t.name).collect();
    assert_eq!(names, ["echo", "hang", "rename"]);
    assert_eq!(client.protocol_version(), "2025-11-25");
    let output = client.call("echo", message("hi")).await.unwrap();
    assert_eq!(output.text, "\"hi\"");
    assert!(!output.is_error);
    let refused = client.call("nope", Default::default()).await.unwrap_err();
    assert!(
        matches!(refused, McpError::Refused { .. }) && refused.to_string().contains("no tool nope"),
        "{refused}"
    );
    assert_eq!(client.state(), State::Running);
    client.close().await;
}

#[tokio::test]
async fn a_call_past_its_timeout_is_cancelled_and_reported() {
    let launcher = Arc::new(InProcess::default());
    let client = connect(&launcher, Duration::from_millis(300)).await;
    let started = Instant::now();
    let error = client.call("hang", Default::default()).await.unwrap_err();
    assert!(matches!(error, McpError::CallTimeout { .. }), "{error}");
    assert!(error.to_string().contains("0.3 s"), "{error}");
    assert!(started.elapsed() < Duration::from_secs(5));
    let deadline = Instant::now() + Duration::from_secs(5);
    while !launcher.world.cancelled.load(Ordering::SeqCst) {
        assert!(
            Instant::now() < deadline,
            "the server never saw notifications/cancelled"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // The connection is still good.
    assert_eq!(
        client.call("echo", message("after")).await.unwrap().text,
        "\"after\""
    );
}

#[tokio::test]
async fn a_changed_tool_list_is_listed_again() {
    let launcher = Arc::new(InProcess::default());
    let client = connect(&launcher, Duration::from_secs(10)).await;
    let mut changed = client.tools_changed();
    let before = *changed.borrow_and_update();
    client.call("rename", Default::default()).await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), changed.changed())
        .await
        .expect("tools_changed was never bumped")
        .unwrap();
    assert!(*changed.borrow() > before);
    let names: Vec<String> = client.tools().into_iter().map(|t| t.name).collect();
    assert_eq!(names, ["echo2", "hang", "rename"]);
}

#[tokio::test]
async fn a_server_that_dies_is_started_again_once_then_failed() {
    let launcher = Arc::new(InProcess::default());
    let client = connect(&launcher, Duration::from_secs(10)).await;
    launcher.kill().await;
    until_dead(&client).await;
    // The next call starts it again, and goes through.
    assert_eq!(
        client.call("echo", message("one")).await.unwrap().text,
        "\"one\""
    );
    assert_eq!(launcher.launches.load(Ordering::SeqCst), 2);
    assert_eq!(client.state(), State::Running);
    launcher.kill().await;
    until_dead(&client).await;
    let error = client.call("echo", message("two")).await.unwrap_err();
    assert!(matches!(error, McpError::Failed { .. }), "{error}");
    assert!(error.to_string().contains("`test`"), "{error}");
    assert!(matches!(client.state(), State::Failed { .. }));
    // Failed stays failed: no third start.
    assert!(client.call("echo", message("three")).await.is_err());
    assert_eq!(launcher.launches.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_restart_that_cannot_start_fails_with_both_reasons() {
    let launcher = Arc::new(InProcess {
        fail_after: Some(1),
        ..InProcess::default()
    });
    let client = connect(&launcher, Duration::from_secs(10)).await;
    launcher.kill().await;
    until_dead(&client).await;
    let error = client
        .call("echo", message("x"))
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("closed the connection"), "{error}");
    assert!(error.contains("no such program"), "{error}");
    assert!(matches!(client.state(), State::Failed { .. }));
}

/// Pipes to nobody: the server process "runs" but never says a word.
struct Silent {
    held: Mutex<Vec<std::io::PipeWriter>>,
}

impl Launch for Silent {
    fn launch(&self) -> std::io::Result<Pipes> {
        let (server_in, client_out) = std::io::pipe()?;
        let (client_in, server_out) = std::io::pipe()?;
        // Its stdout stays open (held here), so the client waits for an answer that never comes.
        self.held.lock().unwrap().push(server_out);
        // Its stdin's read end lives with the guard: the handshake's request is taken and
        // never answered.
        Ok(Pipes {
            stdin: client_out.into(),
            stdout: client_in.into(),
            stderr: None,
            guard: Box::new(server_in),
        })
    }

    fn describe(&self) -> String {
        "a silent server".to_owned()
    }
}

#[tokio::test]
async fn a_server_that_never_answers_initialize_times_out() {
    let options = Options {
        call_timeout: Duration::from_secs(10),
        connect_timeout: Duration::from_millis(300),
    };
    let launch = Silent {
        held: Mutex::new(Vec::new()),
    };
    let started = Instant::now();
    let error = match Client::connect("mute", Transport::Stdio(Arc::new(launch)), options).await {
        Ok(_) => panic!("connected to a server that says nothing"),
        Err(error) => error,
    };
    assert!(
        matches!(error, McpError::InitializeTimeout { .. }),
        "{error}"
    );
    assert!(
        error
            .to_string()
            .contains("`mute` did not answer `initialize` within 0.3 s"),
        "{error}"
    );
    assert!(started.elapsed() < Duration::from_secs(5));
}

/// server-everything over streamable HTTP on `port`, started as the user.
fn everything_http(port: u16) -> crate::sandbox::host::HostProcess {
    let command = crate::sandbox::host::HostCommand {
        program: wright_tests::mcp::node().display().to_string(),
        args: vec![
            wright_tests::mcp::bin("mcp-server-everything")
                .display()
                .to_string(),
            "streamableHttp".to_owned(),
        ],
        cwd: std::env::temp_dir(),
        env: vec![("PORT".to_owned(), port.to_string())],
    };
    let process = command.spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "server-everything never listened"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    process
}

/// Waits until nothing listens on `port` (a killed server's socket closes a moment later).
fn until_refused(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
        assert!(Instant::now() < deadline, "the server still listens");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[tokio::test]
async fn an_http_server_that_goes_away_is_reached_again_once() {
    if !wright_tests::mcp::npm_available() {
        return;
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let server = everything_http(port);
    let transport = Transport::Http {
        url: format!("http://127.0.0.1:{port}/mcp"),
        bearer_token: None,
    };
    let options = Options {
        call_timeout: Duration::from_secs(8),
        ..Options::default()
    };
    let client = Client::connect("everything", transport, options)
        .await
        .unwrap();
    assert_eq!(
        client.call("echo", message("one")).await.unwrap().text,
        "Echo: one"
    );
    // Stopped and started again (a new process, so the old session is unknown to it).
    drop(server);
    until_refused(port);
    let server = everything_http(port);
    assert_eq!(
        client.call("echo", message("two")).await.unwrap().text,
        "Echo: two"
    );
    assert_eq!(client.state(), State::Running);
    drop(server);
    until_refused(port);
    let error = client.call("echo", message("three")).await.unwrap_err();
    assert!(matches!(error, McpError::Failed { .. }), "{error}");
    assert!(matches!(client.state(), State::Failed { .. }));
}

#[tokio::test]
async fn a_server_paging_forever_gets_a_bounded_list() {
    let launcher = Arc::new(InProcess::default());
    launcher.world.endless.store(true, Ordering::SeqCst);
    let client = connect(&launcher, Duration::from_secs(10)).await;
    assert_eq!(client.tools().len(), 100);
    assert_eq!(launcher.world.listings.load(Ordering::SeqCst), 100);
}

#[tokio::test]
async fn a_storm_of_list_changed_notifications_is_a_few_listings() {
    let launcher = Arc::new(InProcess::default());
    let client = connect(&launcher, Duration::from_secs(10)).await;
    client.call("storm", Default::default()).await.unwrap();
    // Let the refresher drain what is left of the storm.
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut last = usize::MAX;
    loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let now = launcher.world.listings.load(Ordering::SeqCst);
        if now == last {
            break;
        }
        last = now;
        assert!(Instant::now() < deadline, "the listings never stopped");
    }
    assert!(last >= 2, "the tools were never listed again");
    assert!(last < 1000, "{last} listings for 2000 notifications");
    assert_eq!(client.tools().len(), 3);
}
