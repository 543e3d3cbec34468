//! The stdio transport: one JSON-RPC message per line on stdin and stdout.
//!
//! `rmcp`'s own line transport drops a line that is not JSON without a word and ends the
//! session on a notification that comes before `initialize`; this one answers every line it
//! cannot take with a JSON-RPC error (a parse error, or an invalid request carrying the
//! request's id when it has one) and keeps serving. Lines are bounded, so a peer that never
//! sends a newline cannot make the server hold its stream in memory.

use std::sync::Arc;

use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::{RoleServer, ServiceExt};
use serde_json::{Value as Json, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::Mutex;

use super::Server;

/// The longest line taken, as `rmcp`'s transports bound theirs.
const MAX_LINE: usize = 16 * 1024 * 1024;

/// Serves `server` on stdin/stdout until the client closes stdin.
pub async fn serve_stdio(server: Server) -> std::io::Result<()> {
    serve_on(server, tokio::io::stdin(), tokio::io::stdout()).await
}

/// Serves `server` on `input` and `output` (stdio, or pipes in tests).
pub async fn serve_on<R, W>(server: Server, input: R, output: W) -> std::io::Result<()>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    let transport = LineTransport {
        input: BufReader::new(input),
        output: Arc::new(Mutex::new(output)),
        initialized: false,
    };
    let running = server
        .serve(transport)
        .await
        .map_err(|err| std::io::Error::other(err.to_string()))?;
    running
        .waiting()
        .await
        .map_err(|err| std::io::Error::other(err.to_string()))?;
    Ok(())
}

struct LineTransport<R, W> {
    input: BufReader<R>,
    output: Arc<Mutex<W>>,
    /// Whether `initialize` has gone through: before it, rmcp takes only requests.
    initialized: bool,
}

async fn write_line<W: AsyncWrite + Unpin>(output: &Mutex<W>, line: String) -> std::io::Result<()> {
    let mut output = output.lock().await;
    output.write_all(line.as_bytes()).await?;
    output.write_all(b"\n").await?;
    output.flush().await
}

impl<R, W> LineTransport<R, W>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    /// The next line, at most [`MAX_LINE`] bytes (`Err(())` for a longer one, skipped to
    /// its end); `None` at the end of the input.
    async fn read_line(&mut self) -> Option<Result<Vec<u8>, ()>> {
        let mut line = Vec::new();
        let mut oversized = false;
        loop {
            let available = match self.input.fill_buf().await {
                Ok(available) => available,
                Err(err) => {
                    tracing::warn!("reading stdin: {err}");
                    return None;
                }
            };
            if available.is_empty() {
                return if line.is_empty() && !oversized {
                    None
                } else if oversized {
                    Some(Err(()))
                } else {
                    Some(Ok(line))
                };
            }
            let newline = available.iter().position(|byte| *byte == b'\n');
            let take = newline.map_or(available.len(), |at| at + 1);
            if !oversized {
                if line.len() + take > MAX_LINE {
                    oversized = true;
                    line = Vec::new();
                } else {
                    line.extend_from_slice(&available[..take]);
                }
            }
            self.input.consume(take);
            if newline.is_some() {
                return Some(if oversized { Err(()) } else { Ok(line) });
            }
        }
    }

    async fn answer_error(&mut self, id: Json, code: i64, message: String) {
        tracing::warn!("stdin: {message}");
        let response =
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}});
        if let Err(err) = write_line(&self.output, response.to_string()).await {
            tracing::warn!("writing to stdout: {err}");
        }
    }
}

impl<R, W> Transport<RoleServer> for LineTransport<R, W>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let output = Arc::clone(&self.output);
        async move {
            let line = serde_json::to_string(&item).map_err(std::io::Error::other)?;
            write_line(&output, line).await
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            let line = match self.read_line().await? {
                Ok(line) => line,
                Err(()) => {
                    self.answer_error(
                        Json::Null,
                        -32600,
                        format!("message longer than {MAX_LINE} bytes, skipped"),
                    )
                    .await;
                    continue;
                }
            };
            let text = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(&line);
            let text = text.strip_suffix(b"\n").unwrap_or(text);
            let text = text.strip_suffix(b"\r").unwrap_or(text);
            if text.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let value: Json = match serde_json::from_slice(text) {
                Ok(value) => value,
                Err(err) => {
                    self.answer_error(Json::Null, -32700, format!("parse error: {err}"))
                        .await;
                    continue;
                }
            };
            let id = value
                .get("id")
                .filter(|id| id.is_string() || id.is_number())
                .cloned();
            let method = value
                .get("method")
                .and_then(Json::as_str)
                .map(str::to_owned);
            match serde_json::from_value::<RxJsonRpcMessage<RoleServer>>(value) {
                Ok(message) => {
                    let is_request = matches!(message, rmcp::model::JsonRpcMessage::Request(_));
                    if !self.initialized && !is_request {
                        // rmcp would end the session on it; a notification needs no answer.
                        tracing::debug!(
                            "stdin: a notification or response before initialize, ignored"
                        );
                        continue;
                    }
                    if method.as_deref() == Some("initialize") {
                        self.initialized = true;
                    }
                    return Some(message);
                }
                // A notification no one handles (another protocol's, a newer revision's)
                // needs no answer.
                Err(_) if id.is_none() && method.is_some() => {
                    tracing::debug!("stdin: notification {method:?} not understood, ignored");
                }
                Err(err) => {
                    self.answer_error(
                        id.unwrap_or(Json::Null),
                        -32600,
                        format!("invalid request: {err}"),
                    )
                    .await;
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.output.lock().await.flush().await
    }
}
