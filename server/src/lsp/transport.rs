//! The JSON-RPC loop: reads frames, dispatches them to the tower-lsp-server service, writes
//! replies and the server's own requests and notifications.
//!
//! Why not tower-lsp-server's `Server`: it stops serving at the first malformed frame, and with
//! its default concurrency of four, four slow requests stop it from reading anything else,
//! `$/cancelRequest` included. Here:
//!
//! - malformed input gets an answer (a JSON-RPC error, or a `window/logMessage` when there is
//!   nobody to answer) and the loop goes on;
//! - every handler future is first polled by the reader itself, before the next message is
//!   decoded, so a `didChange` handler that mutates the buffers before its first `.await` is
//!   applied before any later message is looked at: no request ever sees a half-applied state,
//!   and pipelined messages (`initialize` then `initialized` at once) are handled in order;
//! - nothing bounds the number of requests in flight: long work spawns its own tasks, and the
//!   reader never stops reading.

use std::sync::atomic::{AtomicBool, Ordering};
use std::task::Poll;

use futures_util::future::BoxFuture;
use futures_util::stream::FuturesUnordered;
use futures_util::{FutureExt, Sink, SinkExt, Stream, StreamExt};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;
use tower_lsp_server::jsonrpc::{Request, Response};
use tower_lsp_server::ls_types::{self as lsp, notification, notification::Notification};
use tower_lsp_server::{ClientSocket, ExitedError};
use tower_service::Service;

use super::framing::{self, Decoder, Frame};

/// How the loop ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The client sent `exit`; the specification wants exit code 0 only after `shutdown`.
    Exit { after_shutdown: bool },
    /// The client closed our input without `exit` (it crashed, or was killed).
    InputClosed { after_shutdown: bool },
}

impl Outcome {
    /// The process exit code the specification asks for.
    pub fn exit_code(self) -> i32 {
        match self {
            Self::Exit {
                after_shutdown: true,
            }
            | Self::InputClosed {
                after_shutdown: true,
            } => 0,
            _ => 1,
        }
    }
}

type Reply = BoxFuture<'static, Option<Response>>;

/// Serves `service` over `input`/`output` until `exit` or end of input.
pub async fn serve<I, O, S>(input: I, output: O, service: S, socket: ClientSocket) -> Outcome
where
    I: AsyncRead + Unpin,
    O: AsyncWrite + Unpin,
    S: Service<Request, Response = Option<Response>, Error = ExitedError>,
    S::Future: Send + 'static,
{
    let (outgoing_tx, outgoing_rx) = mpsc::unbounded_channel::<Vec<u8>>();
    let (reply_tx, reply_rx) = mpsc::unbounded_channel::<Reply>();
    let (server_requests, client_responses) = socket.split();
    let after_shutdown = AtomicBool::new(false);

    let reader_outgoing = outgoing_tx.clone();
    let reader = async {
        let outcome = read_loop(
            input,
            service,
            client_responses,
            reply_tx,
            reader_outgoing,
            &after_shutdown,
        )
        .await;
        // Nobody reads the log any more, and the writer must see its queue close.
        super::client_log::stop();
        outcome
    };
    let driver = drive_handlers(reply_rx, outgoing_tx);
    let writer = write_loop(output, outgoing_rx, server_requests);
    let (outcome, (), ()) = tokio::join!(reader, driver, writer);
    outcome
}

async fn read_loop<I, S>(
    mut input: I,
    mut service: S,
    mut client_responses: impl Sink<Response> + Unpin,
    reply_tx: mpsc::UnboundedSender<Reply>,
    outgoing: mpsc::UnboundedSender<Vec<u8>>,
    after_shutdown: &AtomicBool,
) -> Outcome
where
    I: AsyncRead + Unpin,
    S: Service<Request, Response = Option<Response>, Error = ExitedError>,
    S::Future: Send + 'static,
{
    let mut decoder = Decoder::default();
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        while let Some(frame) = decoder.next_frame() {
            let body = match frame {
                Frame::Message(body) => body,
                Frame::ShortMessage { body, declared } => {
                    let note = format!(
                        "a message declared Content-Length {declared} but ended after {} bytes; \
                         it was read as complete, but the client's framing is wrong",
                        body.len()
                    );
                    tracing::warn!("{note}");
                    tell(&outgoing, lsp::MessageType::WARNING, &note);
                    body
                }
                Frame::Skipped { bytes, reason } => {
                    let note =
                        format!("skipped {bytes} bytes of input that were not a message: {reason}");
                    tracing::warn!("{note}");
                    tell(&outgoing, lsp::MessageType::ERROR, &note);
                    continue;
                }
            };
            match classify(&body) {
                Incoming::Request { request, problem } => {
                    if let Some(problem) = problem {
                        let note = format!(
                            "ignored {}: its params are invalid ({problem}); if it changed a \
                             document, close and reopen that document",
                            request.method()
                        );
                        tracing::error!("{note}");
                        tell(&outgoing, lsp::MessageType::ERROR, &note);
                        continue;
                    }
                    let method = request.method().to_owned();
                    // The log goes to the client from the first record its `initialize` causes.
                    if method == "initialize"
                        && super::client_log::wanted(request.params())
                        && super::client_log::route_to(outgoing.clone())
                    {
                        tracing::debug!(
                            "the client asked for the log: it goes as window/logMessage"
                        );
                    }
                    // Method, id and size only: bodies can carry keys (initializationOptions).
                    tracing::trace!("<- {method} id={:?} ({} bytes)", request.id(), body.len());
                    if method == "shutdown" {
                        after_shutdown.store(true, Ordering::Relaxed);
                    }
                    if std::future::poll_fn(|cx| service.poll_ready(cx))
                        .await
                        .is_err()
                    {
                        return Outcome::Exit {
                            after_shutdown: after_shutdown.load(Ordering::Relaxed),
                        };
                    }
                    // The first poll happens here, before the next message is even decoded:
                    // a handler's synchronous prefix (a didChange applied to its rope, the
                    // server state set by initialize) runs strictly in arrival order.
                    let mut reply = service
                        .call(request)
                        .map(Result::ok)
                        .map(Option::flatten)
                        .boxed();
                    match futures_util::poll!(&mut reply) {
                        Poll::Ready(Some(response)) => send(&outgoing, &response),
                        Poll::Ready(None) => {}
                        Poll::Pending => {
                            let _ = reply_tx.send(reply);
                        }
                    }
                    if method == "exit" {
                        return Outcome::Exit {
                            after_shutdown: after_shutdown.load(Ordering::Relaxed),
                        };
                    }
                }
                Incoming::Response(response) => {
                    if client_responses.send(response).await.is_err() {
                        tracing::debug!("a response arrived for a request nobody awaits");
                    }
                }
                Incoming::Invalid(error) => send(&outgoing, &error),
            }
        }
        match input.read(&mut chunk).await {
            Ok(0) => {
                return Outcome::InputClosed {
                    after_shutdown: after_shutdown.load(Ordering::Relaxed),
                };
            }
            Ok(n) => decoder.extend(&chunk[..n]),
            Err(err) => {
                tracing::error!("reading the client's messages failed: {err}");
                return Outcome::InputClosed {
                    after_shutdown: after_shutdown.load(Ordering::Relaxed),
                };
            }
        }
    }
}

/// Polls the handlers that did not finish on their first poll, and queues each reply for
/// writing. When the reader ends, replies still pending get a short grace to be sent; after
/// `exit` or end of input nobody waits longer than that.
async fn drive_handlers(
    mut replies: mpsc::UnboundedReceiver<Reply>,
    outgoing: mpsc::UnboundedSender<Vec<u8>>,
) {
    let mut running = FuturesUnordered::new();
    loop {
        tokio::select! {
            next = replies.recv() => match next {
                Some(reply) => running.push(reply),
                None => break,
            },
            Some(reply) = running.next(), if !running.is_empty() => {
                if let Some(response) = reply {
                    send(&outgoing, &response);
                }
            }
        }
    }
    let drain = async {
        while let Some(reply) = running.next().await {
            if let Some(response) = reply {
                send(&outgoing, &response);
            }
        }
    };
    let _ = tokio::time::timeout(EXIT_GRACE, drain).await;
}

/// How long replies still running at `exit` may take to be sent.
const EXIT_GRACE: std::time::Duration = std::time::Duration::from_millis(500);

async fn write_loop<O: AsyncWrite + Unpin>(
    mut output: O,
    mut outgoing: mpsc::UnboundedReceiver<Vec<u8>>,
    mut server_requests: impl Stream<Item = Request> + Unpin,
) {
    let mut broken = false;
    loop {
        let body = tokio::select! {
            biased;
            body = outgoing.recv() => match body {
                Some(body) => body,
                None => break,
            },
            Some(request) = server_requests.next() => to_json(&request),
        };
        broken = broken || write_frame(&mut output, &body).await.is_err();
    }
    // The reader and the handlers are done: send what the server still had to say.
    while let Some(Some(request)) = server_requests.next().now_or_never() {
        broken = broken || write_frame(&mut output, &to_json(&request)).await.is_err();
    }
    if broken {
        tracing::warn!("the client stopped reading our output");
    }
}

async fn write_frame<O: AsyncWrite + Unpin>(output: &mut O, body: &[u8]) -> std::io::Result<()> {
    super::client_log::writing(|| tracing::trace!("-> {} bytes", body.len()));
    output.write_all(&framing::encode(body)).await?;
    output.flush().await
}

/// Tells the client `note` as a log message, unless the record just logged reached it already.
fn tell(outgoing: &mpsc::UnboundedSender<Vec<u8>>, kind: lsp::MessageType, note: &str) {
    if !super::client_log::routed() {
        send(outgoing, &log_message(kind, note));
    }
}

fn send(outgoing: &mpsc::UnboundedSender<Vec<u8>>, message: &impl serde::Serialize) {
    // The writer outlives the reader and the driver, so the channel is open while they send.
    let _ = outgoing.send(to_json(message));
}

fn to_json(message: &impl serde::Serialize) -> Vec<u8> {
    serde_json::to_vec(message).expect("JSON-RPC messages serialize")
}

fn log_message(kind: lsp::MessageType, message: &str) -> Value {
    json!({
        "jsonrpc": "2.0",
        "method": notification::LogMessage::METHOD,
        "params": lsp::LogMessageParams { typ: kind, message: format!("wright: {message}") },
    })
}

/// One decoded message.
enum Incoming {
    /// A request or a notification; for a notification whose method we know, what is wrong
    /// with its params.
    Request {
        request: Request,
        problem: Option<String>,
    },
    Response(Response),
    /// An error response for the client.
    Invalid(Value),
}

fn classify(body: &[u8]) -> Incoming {
    let value: Value = match serde_json::from_slice(body) {
        Ok(value) => value,
        Err(err) => {
            return Incoming::Invalid(error_response(
                Value::Null,
                -32700,
                &format!("Parse error: {err}"),
            ));
        }
    };
    let Value::Object(object) = &value else {
        return Incoming::Invalid(error_response(
            Value::Null,
            -32600,
            "Invalid request: expected a JSON-RPC object (LSP has no batches)",
        ));
    };
    let id = match object.get("id") {
        Some(id @ (Value::Number(_) | Value::String(_))) => id.clone(),
        _ => Value::Null,
    };
    if object.contains_key("method") {
        let problem = match (object.get("method"), object.contains_key("id")) {
            (Some(Value::String(method)), false) => {
                check_notification_params(method, object.get("params"))
            }
            _ => None,
        };
        return match serde_json::from_value::<Request>(value) {
            Ok(request) => Incoming::Request { request, problem },
            Err(err) => Incoming::Invalid(error_response(
                id,
                -32600,
                &format!("Invalid request: {err}"),
            )),
        };
    }
    if object.contains_key("result") || object.contains_key("error") {
        return match serde_json::from_value::<Response>(value) {
            Ok(response) => Incoming::Response(response),
            Err(err) => Incoming::Invalid(error_response(
                id,
                -32600,
                &format!("Invalid response: {err}"),
            )),
        };
    }
    Incoming::Invalid(error_response(
        id,
        -32600,
        "Invalid request: neither a request (no `method`) nor a response (no `result` or `error`)",
    ))
}

/// tower-lsp-server drops a notification whose params do not deserialize without a word; for
/// the notifications that carry the user's text, that is a lost keystroke, so check them here
/// and say so.
fn check_notification_params(method: &str, params: Option<&Value>) -> Option<String> {
    fn check<T: DeserializeOwned>(params: Option<&Value>) -> Option<String> {
        T::deserialize(params.unwrap_or(&Value::Null))
            .err()
            .map(|err| err.to_string())
    }
    use notification as n;
    match method {
        n::DidOpenTextDocument::METHOD => check::<lsp::DidOpenTextDocumentParams>(params),
        n::DidChangeTextDocument::METHOD => check::<lsp::DidChangeTextDocumentParams>(params),
        n::DidCloseTextDocument::METHOD => check::<lsp::DidCloseTextDocumentParams>(params),
        n::DidSaveTextDocument::METHOD => check::<lsp::DidSaveTextDocumentParams>(params),
        n::DidChangeWorkspaceFolders::METHOD => {
            check::<lsp::DidChangeWorkspaceFoldersParams>(params)
        }
        n::DidChangeWatchedFiles::METHOD => check::<lsp::DidChangeWatchedFilesParams>(params),
        n::DidChangeConfiguration::METHOD => check::<lsp::DidChangeConfigurationParams>(params),
        _ => None,
    }
}

fn error_response(id: Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::io::{AsyncBufReadExt, BufReader, DuplexStream};
    use tower_lsp_server::jsonrpc::Result as RpcResult;
    use tower_lsp_server::{LanguageServer, LspService};

    use super::*;

    struct Sleeper;

    impl LanguageServer for Sleeper {
        async fn initialize(&self, _: lsp::InitializeParams) -> RpcResult<lsp::InitializeResult> {
            Ok(lsp::InitializeResult::default())
        }
        async fn shutdown(&self) -> RpcResult<()> {
            Ok(())
        }
    }

    impl Sleeper {
        async fn sleep(&self) -> RpcResult<()> {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            Ok(())
        }
    }

    async fn read_message(output: &mut BufReader<DuplexStream>) -> Value {
        let mut length = 0;
        loop {
            let mut line = String::new();
            output.read_line(&mut line).await.unwrap();
            if line == "\r\n" {
                break;
            }
            length = line
                .trim()
                .strip_prefix("Content-Length: ")
                .unwrap()
                .parse()
                .unwrap();
        }
        let mut body = vec![0; length];
        output.read_exact(&mut body).await.unwrap();
        serde_json::from_slice(&body).unwrap()
    }

    /// A request that would run for an hour is cancelled, and later requests are answered
    /// while it runs: the reader never blocks on a slow handler.
    #[tokio::test]
    async fn cancel_request_ends_a_running_handler_and_others_keep_flowing() {
        let (service, socket) = LspService::build(|_| Sleeper)
            .custom_method("test/sleep", Sleeper::sleep)
            .finish();
        let (mut client_in, server_in) = tokio::io::duplex(1 << 16);
        let (server_out, client_out) = tokio::io::duplex(1 << 16);
        let server = tokio::spawn(serve(server_in, server_out, service, socket));
        let mut output = BufReader::new(client_out);
        let messages = [
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}}}),
            json!({"jsonrpc": "2.0", "id": 2, "method": "test/sleep"}),
            json!({"jsonrpc": "2.0", "id": 3, "method": "test/sleep"}),
            json!({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 2}}),
            json!({"jsonrpc": "2.0", "id": 4, "method": "shutdown"}),
        ];
        for message in &messages {
            client_in
                .write_all(&framing::encode(message.to_string().as_bytes()))
                .await
                .unwrap();
        }
        let mut seen = Vec::new();
        for _ in 0..3 {
            seen.push(read_message(&mut output).await);
        }
        let by_id = |id: i64| {
            seen.iter()
                .find(|m| m["id"] == id)
                .unwrap_or_else(|| panic!("{seen:?}"))
        };
        assert!(by_id(1)["result"]["capabilities"].is_object());
        assert_eq!(by_id(2)["error"]["code"], -32800, "{seen:?}");
        assert_eq!(by_id(4)["result"], Value::Null);
        client_in
            .write_all(&framing::encode(br#"{"jsonrpc":"2.0","method":"exit"}"#))
            .await
            .unwrap();
        let outcome = server.await.unwrap();
        assert_eq!(
            outcome,
            Outcome::Exit {
                after_shutdown: true
            }
        );
        assert_eq!(outcome.exit_code(), 0);
    }

    #[test]
    fn classify_answers_each_kind_of_bad_message() {
        let Incoming::Invalid(error) = classify(b"{not json") else {
            panic!()
        };
        assert_eq!(error["error"]["code"], -32700);
        assert_eq!(error["id"], Value::Null);
        let Incoming::Invalid(error) = classify(b"[1,2]") else {
            panic!()
        };
        assert_eq!(error["error"]["code"], -32600);
        let Incoming::Invalid(error) = classify(br#"{"id":7,"jsonrpc":"2.0"}"#) else {
            panic!()
        };
        assert_eq!(
            (error["id"].clone(), error["error"]["code"].clone()),
            (json!(7), json!(-32600))
        );
        let Incoming::Request { problem, .. } = classify(
            br#"{"jsonrpc":"2.0","method":"textDocument/didChange","params":{"textDocument":{}}}"#,
        ) else {
            panic!()
        };
        assert!(problem.unwrap().contains("missing field"));
    }
}
