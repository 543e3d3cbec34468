//! A test editor: spawns the real `wright` binary and speaks framed JSON-RPC to it over stdio,
//! as VS Code or Neovim would.
//!
//! It is strict on purpose: every byte the server writes to stdout must be a well-formed frame
//! (logging to stdout would corrupt the protocol), every message the server sends must be read
//! by the test (an unexpected warning is a bug to look at, not noise), and every wait is bounded
//! so a hung server fails the test instead of hanging it.

pub mod first_byte;
pub mod installed;
pub mod mcp;
pub mod provider;
pub mod recovery;
pub mod session;
pub mod text_model;

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// `wright ARGS --root <dir>/ws` of the binary `bin` with a clean environment: `HOME` is
/// `dir`, the XDG folders are private ones under it, and with a provider its model and `key`.
pub fn workspace_command(
    bin: &Path,
    dir: &TempDir,
    args: &[&str],
    provider: Option<&provider::ScriptedProvider>,
    key: &str,
) -> Command {
    let mut command = Command::new(bin);
    command
        .args(args)
        .arg("--root")
        .arg(dir.path().join("ws"))
        .env_clear()
        .env("HOME", dir.path())
        .env("XDG_CACHE_HOME", dir.path().join("cache"))
        .env("XDG_DATA_HOME", dir.path().join("data"))
        .env("XDG_CONFIG_HOME", dir.path().join("config"));
    if let Some(provider) = provider {
        command
            .env("WRIGHT_MODEL", "openai/gpt-4.1")
            .env("OPENAI_BASE_URL", provider.openai_base_url())
            .env("OPENAI_API_KEY", key);
    }
    command
}

/// `wright apply ARGS --root ROOT` of the binary `bin`, `input` on its stdin, a clean
/// environment.
pub fn wright_apply(bin: &Path, root: &Path, args: &[&str], input: &str) -> std::process::Output {
    let mut child = Command::new(bin)
        .arg("apply")
        .arg("--root")
        .arg(root)
        .args(args)
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running wright");
    // wright may exit (a usage error) before reading its input: a broken pipe is fine.
    let _ = child.stdin.take().unwrap().write_all(input.as_bytes());
    child.wait_with_output().unwrap()
}

/// How long any single wait may take before the test fails.
pub const TIMEOUT: Duration = Duration::from_secs(20);

/// The `wright` binary under test: `$WRIGHT_BIN`, else the one Cargo built next to this test.
pub fn wright_bin() -> PathBuf {
    if let Some(path) = std::env::var_os("WRIGHT_BIN") {
        return PathBuf::from(path);
    }
    // Test executables live in target/<profile>/deps; the binary is in target/<profile>.
    let exe = std::env::current_exe().expect("current_exe");
    let profile_dir = exe
        .ancestors()
        .find(|dir| dir.join("wright").is_file())
        .unwrap_or_else(|| {
            panic!(
                "no wright binary near {}: run `cargo build -p wright` first or set WRIGHT_BIN",
                exe.display()
            )
        });
    profile_dir.join("wright")
}

/// A fresh directory under the system temp dir, removed when dropped.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(name: &str) -> Self {
        Self::new_in(&std::env::temp_dir(), name)
    }

    /// A fresh directory under `base`.
    pub fn new_in(base: &Path, name: &str) -> Self {
        static COUNTER: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = base.join(format!("wright-test-{name}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("creating a temp dir");
        // Canonical, so paths compare equal to what the server reports.
        Self(std::fs::canonicalize(&dir).expect("canonicalize temp dir"))
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    /// Writes `contents` at `relative`, creating parent directories.
    pub fn write(&self, relative: &str, contents: &str) -> PathBuf {
        let path = self.0.join(relative);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(&path, contents).expect("write");
        path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The `file://` URI of an absolute path (percent-encoding what URIs need).
pub fn file_uri(path: &Path) -> String {
    let mut uri = String::from("file://");
    for byte in path.to_str().expect("UTF-8 path").bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'/' | b'-' | b'_' | b'.' | b'~' => {
                uri.push(byte as char)
            }
            _ => uri.push_str(&format!("%{byte:02X}")),
        }
    }
    uri
}

/// How to start the server.
#[derive(Clone, Debug, Default)]
pub struct Spawn {
    /// The binary; [`wright_bin`] when `None`.
    pub bin: Option<PathBuf>,
    /// `--root`.
    pub root: Option<PathBuf>,
    /// Extra arguments after `lsp`.
    pub args: Vec<String>,
    /// Environment variables to set; the environment is otherwise cleared but for PATH, so the
    /// developer's own configuration and keys never leak into a test.
    pub env: Vec<(String, String)>,
}

/// One running server and the editor side of its conversation.
pub struct Editor {
    child: Child,
    stdin: Option<ChildStdin>,
    incoming: Receiver<Incoming>,
    unread: VecDeque<Value>,
    next_id: i64,
    stderr: Stderr,
    stderr_reader: Option<std::thread::JoinHandle<()>>,
    /// Answers to `workspace/configuration`, one value per requested item.
    pub configuration: Value,
    finished: bool,
}

/// The server's stderr as captured so far.
#[derive(Clone, Default)]
pub struct Stderr(Arc<Mutex<String>>);

impl Stderr {
    pub fn text(&self) -> String {
        self.0.lock().unwrap().clone()
    }
}

enum Incoming {
    Message(Value),
    /// stdout carried something that is not a frame: the protocol is corrupt.
    Corrupt(String),
    Closed,
}

impl Editor {
    /// Starts `wright lsp` with a clean environment (XDG and HOME pointed at an empty temp dir
    /// unless `spawn.env` sets them).
    pub fn spawn(spawn: &Spawn) -> Self {
        let mut command = Command::new(spawn.bin.clone().unwrap_or_else(wright_bin));
        if let Some(root) = &spawn.root {
            command.arg("--root").arg(root);
        }
        command.arg("lsp").args(&spawn.args);
        command.env_clear();
        if let Some(path) = std::env::var_os("PATH") {
            command.env("PATH", path);
        }
        let isolated_home =
            std::env::temp_dir().join(format!("wright-test-home-{}", std::process::id()));
        command.env("HOME", &isolated_home);
        command.env("XDG_CONFIG_HOME", isolated_home.join("config"));
        command.env("WRIGHT_LOG", "wright=debug");
        for (key, value) in &spawn.env {
            command.env(key, value);
        }
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = command.spawn().expect("spawning wright");

        let stdout = child.stdout.take().expect("stdout");
        let (tx, incoming) = mpsc::channel();
        std::thread::spawn(move || read_frames(stdout, &tx));

        let stderr = Stderr::default();
        let mut pipe = child.stderr.take().expect("stderr");
        let sink = Arc::clone(&stderr.0);
        let stderr_reader = std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });

        Self {
            stdin: child.stdin.take(),
            child,
            incoming,
            unread: VecDeque::new(),
            next_id: 1,
            stderr,
            stderr_reader: Some(stderr_reader),
            configuration: Value::Null,
            finished: false,
        }
    }

    /// Spawns and completes `initialize`/`initialized` with `capabilities`, folders and options;
    /// reads the server's "ready" log message. Returns the `initialize` result.
    pub fn start(spawn: &Spawn, init: Value) -> (Self, Value) {
        let mut editor = Self::spawn(spawn);
        let result = editor.request("initialize", init);
        editor.notify("initialized", json!({}));
        editor.expect_log(3, "ready");
        (editor, result)
    }

    /// The standard `initialize` params: one folder, UTF-16 only (the common client).
    pub fn init_params(root: &Path) -> Value {
        json!({
            "processId": null,
            "capabilities": {},
            "workspaceFolders": [{"uri": file_uri(root), "name": "root"}],
        })
    }

    /// `textDocument/didOpen`.
    pub fn open(&mut self, uri: &str, language_id: &str, version: i32, text: &str) {
        self.notify(
            "textDocument/didOpen",
            json!({"textDocument": {"uri": uri, "languageId": language_id, "version": version, "text": text}}),
        );
    }

    /// `textDocument/didChange` with one ranged change, positions as `(line, character)`.
    pub fn change(
        &mut self,
        uri: &str,
        version: i32,
        start: (u32, u32),
        end: (u32, u32),
        text: &str,
    ) {
        self.notify(
            "textDocument/didChange",
            json!({
                "textDocument": {"uri": uri, "version": version},
                "contentChanges": [{
                    "range": {
                        "start": {"line": start.0, "character": start.1},
                        "end": {"line": end.0, "character": end.1},
                    },
                    "text": text,
                }],
            }),
        );
    }

    /// The server's `(version, text)` of an open document (`wright/viewFileText`).
    pub fn text_of(&mut self, uri: &str) -> (i64, String) {
        let result = self.request("wright/viewFileText", json!({"textDocument": {"uri": uri}}));
        (
            result["version"].as_i64().expect("version"),
            result["text"].as_str().expect("text").to_owned(),
        )
    }

    /// Asks `workspace/symbol` until `accept` holds (indexing is in the background), or fails.
    pub fn symbols_until(&mut self, query: &str, accept: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let result = self.request("workspace/symbol", json!({"query": query}));
            let symbols = result.as_array().cloned().unwrap_or_default();
            if accept(&symbols) {
                return symbols;
            }
            if Instant::now() > deadline {
                self.fail(&format!(
                    "workspace/symbol {query:?} never satisfied the test: {symbols:?}"
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// `wright/status`.
    pub fn status(&mut self) -> Value {
        self.request("wright/status", Value::Null)
    }

    /// What the server wrote to stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.text()
    }

    /// A handle on the server's stderr that stays readable after `shutdown` (complete by then).
    pub fn stderr_handle(&self) -> Stderr {
        self.stderr.clone()
    }

    pub fn send_raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        stdin.write_all(bytes).expect("writing to the server");
        stdin.flush().expect("flushing to the server");
    }

    pub fn send(&mut self, message: &Value) {
        let body = serde_json::to_vec(message).unwrap();
        let mut frame = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
        frame.extend(body);
        self.send_raw(&frame);
    }

    pub fn notify(&mut self, method: &str, params: Value) {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    /// Sends a request and returns its id, without waiting.
    pub fn send_request(&mut self, method: &str, params: Value) -> i64 {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    /// Sends a request and returns the whole response (result or error).
    pub fn request_response(&mut self, method: &str, params: Value) -> Value {
        let id = self.send_request(method, params);
        self.expect_response(&json!(id))
    }

    /// Sends a request and returns its result; fails the test on an error response.
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        let response = self.request_response(method, params);
        if let Some(error) = response.get("error") {
            self.fail(&format!("{method} failed: {error}"));
        }
        response["result"].clone()
    }

    /// Waits for the response with `id` (which may be `null`).
    pub fn expect_response(&mut self, id: &Value) -> Value {
        self.expect(&format!("a response with id {id}"), |m| {
            m.get("method").is_none() && m.get("id") == Some(id)
        })
    }

    /// Waits for a notification with `method`; returns its params.
    pub fn expect_notification(&mut self, method: &str) -> Value {
        self.expect(&format!("a {method} notification"), |m| {
            m["method"] == method && m.get("id").is_none()
        })["params"]
            .clone()
    }

    /// Waits for a server → client request with `method` (already answered); returns its params.
    pub fn expect_server_request(&mut self, method: &str) -> Value {
        self.expect(&format!("a {method} request"), |m| {
            m["method"] == method && m.get("id").is_some()
        })["params"]
            .clone()
    }

    /// Waits for a `window/logMessage` of `kind` (1 error … 4 log) containing `text`.
    pub fn expect_log(&mut self, kind: u64, text: &str) -> String {
        let message = self.expect(
            &format!("a log message of type {kind} containing {text:?}"),
            |m| {
                m["method"] == "window/logMessage"
                    && m["params"]["type"] == kind
                    && m["params"]["message"]
                        .as_str()
                        .is_some_and(|s| s.contains(text))
            },
        );
        message["params"]["message"].as_str().unwrap().to_owned()
    }

    /// Takes the first message (read or arriving) that `matches`.
    pub fn expect(&mut self, what: &str, matches: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            if let Some(at) = self.unread.iter().position(&matches) {
                return self.unread.remove(at).unwrap();
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match self.incoming.recv_timeout(left) {
                Ok(Incoming::Message(message)) => self.receive(message),
                Ok(Incoming::Corrupt(what)) => self.fail(&format!("stdout is corrupt: {what}")),
                Ok(Incoming::Closed) | Err(RecvTimeoutError::Disconnected) => self.fail(&format!(
                    "the server closed stdout while the test waited for {what}"
                )),
                Err(RecvTimeoutError::Timeout) => {
                    self.fail(&format!("timed out after {TIMEOUT:?} waiting for {what}"))
                }
            }
        }
    }

    /// Takes an already received message that `matches`, without waiting.
    pub fn try_take(&mut self, matches: impl Fn(&Value) -> bool) -> Option<Value> {
        self.drain_arrived();
        let at = self.unread.iter().position(matches)?;
        self.unread.remove(at)
    }

    /// Queues a message; answers server → client requests as a permissive editor would.
    fn receive(&mut self, message: Value) {
        if let (Some(method), Some(id)) = (message["method"].as_str(), message.get("id")) {
            let result = match method {
                // The test answers edits itself (see `respond`): applying or refusing them is
                // what agent tests are about.
                "workspace/applyEdit" | "wright/requestApproval" => {
                    self.unread.push_back(message);
                    return;
                }
                "workspace/configuration" => {
                    let items = message["params"]["items"].as_array().map_or(0, Vec::len);
                    Value::Array(vec![self.configuration.clone(); items])
                }
                _ => Value::Null,
            };
            let id = id.clone();
            self.send(&json!({"jsonrpc": "2.0", "id": id, "result": result}));
        }
        self.unread.push_back(message);
    }

    /// Answers the server → client request `id` with `result`.
    pub fn respond(&mut self, id: &Value, result: Value) {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "result": result}));
    }

    /// Drops every already received message that `matches`; returns how many.
    pub fn discard(&mut self, matches: impl Fn(&Value) -> bool) -> usize {
        self.drain_arrived();
        let before = self.unread.len();
        self.unread.retain(|message| !matches(message));
        before - self.unread.len()
    }

    /// Reads whatever has arrived without waiting.
    fn drain_arrived(&mut self) {
        while let Ok(incoming) = self.incoming.try_recv() {
            match incoming {
                Incoming::Message(message) => self.receive(message),
                Incoming::Corrupt(what) => self.fail(&format!("stdout is corrupt: {what}")),
                Incoming::Closed => break,
            }
        }
    }

    /// Fails the test if the server sent anything the test has not read.
    pub fn assert_all_read(&mut self) {
        self.drain_arrived();
        if !self.unread.is_empty() {
            let unread: Vec<String> = self.unread.iter().map(Value::to_string).collect();
            self.fail(&format!(
                "the test left {} server message(s) unread:\n  {}",
                unread.len(),
                unread.join("\n  ")
            ));
        }
    }

    /// `shutdown` then `exit`; waits for the process and returns its status. Fails the test if
    /// a server message was left unread.
    pub fn shutdown(mut self) -> ExitStatus {
        let response = self.request_response("shutdown", Value::Null);
        assert_eq!(response["result"], Value::Null, "shutdown: {response}");
        self.notify("exit", Value::Null);
        let status = self.wait();
        self.assert_all_read();
        self.finished = true;
        status
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Kills the server with SIGKILL (a crash: nothing of it runs after) and waits for it.
    pub fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.finished = true;
    }

    /// Closes the server's stdin (an editor that died) and waits for the process.
    pub fn close_stdin(mut self) -> ExitStatus {
        self.stdin = None;
        let status = self.wait();
        self.assert_all_read();
        self.finished = true;
        status
    }

    /// Waits for the process to exit, reading what it still sends.
    pub fn wait(&mut self) -> ExitStatus {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                if let Some(reader) = self.stderr_reader.take() {
                    let _ = reader.join();
                }
                // Let the reader thread deliver what was written before exit.
                while let Ok(incoming) = self.incoming.recv_timeout(Duration::from_secs(2)) {
                    match incoming {
                        Incoming::Message(message) => self.unread.push_back(message),
                        Incoming::Corrupt(what) => self.fail(&format!("stdout is corrupt: {what}")),
                        Incoming::Closed => break,
                    }
                }
                return status;
            }
            if Instant::now() > deadline {
                self.fail("the server did not exit");
            }
            self.drain_arrived();
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn fail(&mut self, what: &str) -> ! {
        let _ = self.child.kill();
        self.finished = true;
        panic!("{what}\n--- server stderr ---\n{}", self.stderr());
    }
}

impl Drop for Editor {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        if !std::thread::panicking() {
            self.finished = true;
            self.assert_all_read();
            panic!("the test dropped the editor without shutting the server down");
        }
    }
}

/// Reads frames from the server's stdout until it closes; anything else is corruption.
fn read_frames(stdout: impl Read, tx: &mpsc::Sender<Incoming>) {
    let mut reader = BufReader::new(stdout);
    loop {
        let mut length = None;
        loop {
            let mut line = String::new();
            match reader.read_line(&mut line) {
                Ok(0) if length.is_none() => {
                    let _ = tx.send(Incoming::Closed);
                    return;
                }
                Ok(_) => {}
                Err(err) => {
                    let _ = tx.send(Incoming::Corrupt(format!("unreadable header: {err}")));
                    return;
                }
            }
            if line == "\r\n" && length.is_some() {
                break;
            }
            match line
                .strip_suffix("\r\n")
                .and_then(|l| l.strip_prefix("Content-Length: "))
            {
                Some(value) if length.is_none() => length = value.parse::<usize>().ok(),
                _ => {
                    let _ = tx.send(Incoming::Corrupt(format!("not a header line: {line:?}")));
                    return;
                }
            }
        }
        let mut body = vec![0; length.expect("length")];
        if let Err(err) = reader.read_exact(&mut body) {
            let _ = tx.send(Incoming::Corrupt(format!("truncated body: {err}")));
            return;
        }
        match serde_json::from_slice(&body) {
            Ok(message) => {
                if tx.send(Incoming::Message(message)).is_err() {
                    return;
                }
            }
            Err(err) => {
                let text = String::from_utf8_lossy(&body);
                let _ = tx.send(Incoming::Corrupt(format!(
                    "body is not JSON ({err}): {text}"
                )));
                return;
            }
        }
    }
}
