//! The ACP connection's two directions on stdio: newline-delimited JSON-RPC 2.0, one message
//! per line. Outgoing lines go through one writer task (nothing else writes stdout); requests
//! to the client (file reads and writes, permissions) wait for their answer by id, from async
//! code or from a tool's blocking thread.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

/// How long a question to the user may wait before the agent gives up on it (a permission the
/// user never answers counts as a refusal).
const USER_TIMEOUT: Duration = Duration::from_secs(600);
/// How long the client may take over a file read or write: it answers from its buffers, and a
/// client that never does must not hold a tool (and the turn) for as long as a user may think.
const FILE_TIMEOUT: Duration = Duration::from_secs(30);

fn timeout(method: &str) -> Duration {
    if method.starts_with("fs/") {
        FILE_TIMEOUT
    } else {
        USER_TIMEOUT
    }
}

/// The client's answer: its result, or its error object.
type Answer = Result<Value, Value>;

pub struct Peer {
    out: mpsc::UnboundedSender<String>,
    next_id: AtomicU64,
    pending: Mutex<HashMap<u64, oneshot::Sender<Answer>>>,
    runtime: tokio::runtime::Handle,
}

impl Peer {
    /// A peer writing its lines to `out`.
    pub fn new(out: mpsc::UnboundedSender<String>) -> Self {
        Self {
            out,
            next_id: AtomicU64::new(1),
            pending: Mutex::default(),
            runtime: tokio::runtime::Handle::current(),
        }
    }

    fn send(&self, message: &Value) {
        // A closed stdout ends the connection; the reader notices and stops.
        let _ = self.out.send(message.to_string());
    }

    pub fn notify(&self, method: &str, params: Value) {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    pub fn respond(&self, id: &Value, result: Value) {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "result": result}));
    }

    pub fn error(&self, id: &Value, code: i64, message: &str) {
        self.send(
            &json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}),
        );
    }

    /// Sends a request to the client and waits for its answer. `Err` says why there is none
    /// (the client's error message, a timeout, the connection closed).
    pub async fn request(&self, method: &str, params: Value) -> Result<Value, String> {
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        let (answer, answered) = oneshot::channel();
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, answer);
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let limit = timeout(method);
        let result = tokio::time::timeout(limit, answered).await;
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&id);
        match result {
            Ok(Ok(Ok(value))) => Ok(value),
            Ok(Ok(Err(error))) => Err(error["message"]
                .as_str()
                .map_or_else(|| error.to_string(), str::to_owned)),
            Ok(Err(_)) => Err("the client closed the connection".to_owned()),
            Err(_) => Err(format!(
                "the client did not answer {method} within {} s",
                limit.as_secs()
            )),
        }
    }

    /// [`Peer::request`] from a blocking thread (a tool's).
    pub fn request_blocking(&self, method: &str, params: Value) -> Result<Value, String> {
        self.runtime.block_on(self.request(method, params))
    }

    /// A response from the client: handed to the request waiting for it (an unknown id is
    /// dropped: a late answer to a request that timed out).
    pub fn answered(&self, message: &Value) {
        let Some(id) = message["id"].as_u64() else {
            return;
        };
        let waiting = self
            .pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&id);
        if let Some(waiting) = waiting {
            let answer = match message.get("error") {
                Some(error) => Err(error.clone()),
                None => Ok(message.get("result").cloned().unwrap_or(Value::Null)),
            };
            let _ = waiting.send(answer);
        }
    }
}
