//! A scripted model provider: a real HTTP/1.1 server on 127.0.0.1 that speaks OpenAI Chat
//! Completions and Anthropic Messages with real SSE framing, answering each request with the
//! next reply of its script, and misbehaving on demand.
//!
//! Written from the providers' public API descriptions and sharing no code with wright, so a
//! client bug cannot hide behind a matching server bug. Streams are sent as the services
//! send them: one SSE event per chunk of the chunked encoding, tool-call arguments in small
//! fragments (and, on request, every event split across several TCP writes). Faults: error
//! answers (429 with `Retry-After`, 500, 529, 401, 404 unknown model, 400 context too long),
//! a stream cut mid-event, a stream that stalls, slow tokens, a late first byte; invalid
//! tool-call JSON is simply a turn whose arguments are invalid.
//!
//! Every request is recorded (method, path, headers, body) and every reply's fate is an
//! [`Outcome`], so tests can check what a client sent and whether it hung up. It runs on its
//! own threads, so synchronous and async tests use it alike; dropping it stops it.

use std::collections::VecDeque;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use serde_json::{Value, json};

/// Which API a reply imitates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dialect {
    OpenAi,
    Anthropic,
}

/// One tool call of a scripted turn. `arguments` is sent as written, valid JSON or not.
#[derive(Clone, Debug)]
pub struct ScriptedCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

/// What the model "says" in one answer.
#[derive(Clone, Debug, Default)]
pub struct Turn {
    /// Text deltas, in order.
    pub text: Vec<String>,
    pub tool_calls: Vec<ScriptedCall>,
    /// Prompt tokens in all, of which read from and written to the cache, and output tokens.
    pub input_tokens: u64,
    pub cached_tokens: u64,
    pub cache_write_tokens: u64,
    pub output_tokens: u64,
    /// The provider's stop reason; by default `stop`/`end_turn`, or the tool-call reason
    /// when there are calls.
    pub finish: Option<String>,
    /// How many characters of arguments go in one delta (default 8, like the services).
    pub argument_fragment: usize,
}

impl Turn {
    pub fn text(pieces: &[&str]) -> Self {
        Self {
            text: pieces.iter().map(|p| (*p).to_owned()).collect(),
            ..Self::default()
        }
    }

    pub fn tool_call(mut self, id: &str, name: &str, arguments: &str) -> Self {
        self.tool_calls.push(ScriptedCall {
            id: id.to_owned(),
            name: name.to_owned(),
            arguments: arguments.to_owned(),
        });
        self
    }

    pub fn usage(mut self, input: u64, cached: u64, output: u64) -> Self {
        self.input_tokens = input;
        self.cached_tokens = cached;
        self.output_tokens = output;
        self
    }

    pub fn cache_write(mut self, tokens: u64) -> Self {
        self.cache_write_tokens = tokens;
        self
    }

    pub fn finish(mut self, reason: &str) -> Self {
        self.finish = Some(reason.to_owned());
        self
    }

    fn fragments(&self, arguments: &str) -> Vec<String> {
        let size = if self.argument_fragment == 0 {
            8
        } else {
            self.argument_fragment
        };
        let chars: Vec<char> = arguments.chars().collect();
        chars.chunks(size).map(|c| c.iter().collect()).collect()
    }
}

/// Error answers as the providers word them.
#[derive(Clone, Debug)]
pub enum Fault {
    /// 429 with this `Retry-After` value (seconds or an HTTP date).
    RateLimited { retry_after: Option<String> },
    /// 500.
    ServerError,
    /// 529 (Anthropic) or 503 (OpenAI): overloaded.
    Overloaded,
    /// 401, a wrong key.
    Unauthorized,
    /// 404, a model the provider does not have.
    UnknownModel,
    /// 400, the prompt exceeds the context window.
    ContextTooLong,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum End {
    Complete,
    /// After this many events, half of the next one and a hang-up.
    CutAfter(usize),
    /// After this many events, silence until the client hangs up.
    StallAfter(usize),
}

/// What the system prompt of wright's session-title call starts with.
pub const TITLE_PROMPT: &str = "You name coding sessions.";

/// The title the provider answers every title call with.
pub const TITLE: &str = "Scripted session title";

/// One scripted answer.
#[derive(Clone, Debug)]
pub struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    /// A plain body (errors), or SSE events each with its framing.
    body: Vec<u8>,
    events: Option<Vec<String>>,
    token_delay: Duration,
    write_size: Option<usize>,
    header_delay: Duration,
    end: End,
    /// Answered by the provider itself (a title call): no outcome is recorded.
    untracked: bool,
}

impl Reply {
    /// A streamed answer with the whole `turn`.
    pub fn stream(dialect: Dialect, turn: &Turn) -> Self {
        let events = match dialect {
            Dialect::OpenAi => openai_events(turn),
            Dialect::Anthropic => anthropic_events(turn),
        };
        Self::sse(events)
    }

    /// A streamed OpenAI answer of one piece of text.
    pub fn text(answer: &str) -> Self {
        Self::stream(Dialect::OpenAi, &Turn::text(&[answer]))
    }

    /// A streamed OpenAI answer of one tool call.
    pub fn call(id: &str, name: &str, arguments: &Value) -> Self {
        Self::stream(
            Dialect::OpenAi,
            &Turn::default().tool_call(id, name, &arguments.to_string()),
        )
    }

    /// A streamed answer of raw SSE events (each already framed, ending in a blank line).
    pub fn sse(events: Vec<String>) -> Self {
        Self {
            status: 200,
            headers: vec![
                ("content-type".to_owned(), "text/event-stream".to_owned()),
                ("cache-control".to_owned(), "no-cache".to_owned()),
            ],
            body: Vec::new(),
            events: Some(events),
            token_delay: Duration::ZERO,
            write_size: None,
            header_delay: Duration::ZERO,
            end: End::Complete,
            untracked: false,
        }
    }

    /// A non-streamed answer with a JSON body.
    pub fn json(status: u16, body: &Value) -> Self {
        Self {
            status,
            headers: vec![("content-type".to_owned(), "application/json".to_owned())],
            body: body.to_string().into_bytes(),
            events: None,
            token_delay: Duration::ZERO,
            write_size: None,
            header_delay: Duration::ZERO,
            end: End::Complete,
            untracked: false,
        }
    }

    /// An error answer as `dialect`'s provider sends it.
    pub fn fault(dialect: Dialect, fault: Fault) -> Self {
        let (status, code, kind, message) = match &fault {
            Fault::RateLimited { .. } => (
                429,
                "rate_limit_exceeded",
                "rate_limit_error",
                "Rate limit reached for requests",
            ),
            Fault::ServerError => (500, "server_error", "api_error", "The server had an error"),
            Fault::Overloaded => (
                if dialect == Dialect::Anthropic {
                    529
                } else {
                    503
                },
                "server_overloaded",
                "overloaded_error",
                "Overloaded",
            ),
            Fault::Unauthorized => (
                401,
                "invalid_api_key",
                "authentication_error",
                "Incorrect API key provided",
            ),
            Fault::UnknownModel => (
                404,
                "model_not_found",
                "not_found_error",
                "The model `no-such-model` does not exist",
            ),
            Fault::ContextTooLong => (
                400,
                "context_length_exceeded",
                "invalid_request_error",
                "This model's maximum context length is 128000 tokens. However, your messages resulted in 131072 tokens.",
            ),
        };
        let body = match dialect {
            Dialect::OpenAi => {
                json!({"error": {"message": message, "type": "invalid_request_error", "param": null, "code": code}})
            }
            Dialect::Anthropic => {
                let message = if matches!(fault, Fault::ContextTooLong) {
                    "prompt is too long: 210000 tokens > 200000 maximum"
                } else {
                    message
                };
                json!({"type": "error", "error": {"type": kind, "message": message}})
            }
        };
        let mut reply = Self::json(status, &body);
        if let Fault::RateLimited {
            retry_after: Some(value),
        } = fault
        {
            reply = reply.header("retry-after", &value);
        }
        reply
    }

    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    /// Waits this long between events (a model producing tokens at its pace).
    pub fn token_delay(mut self, delay: Duration) -> Self {
        self.token_delay = delay;
        self
    }

    /// Writes every event in pieces of at most `bytes`, each its own chunk and TCP write.
    pub fn split_writes(mut self, bytes: usize) -> Self {
        self.write_size = Some(bytes.max(1));
        self
    }

    /// Waits this long before the status line (a provider slow to start answering).
    pub fn header_delay(mut self, delay: Duration) -> Self {
        self.header_delay = delay;
        self
    }

    /// Sends `events` events, then half of the next one, then closes the connection.
    pub fn cut_after(mut self, events: usize) -> Self {
        self.end = End::CutAfter(events);
        self
    }

    /// Sends `events` events, then nothing, keeping the connection open.
    pub fn stall_after(mut self, events: usize) -> Self {
        self.end = End::StallAfter(events);
        self
    }
}

fn sse_event(name: Option<&str>, data: &Value) -> String {
    match name {
        Some(name) => format!("event: {name}\ndata: {data}\n\n"),
        None => format!("data: {data}\n\n"),
    }
}

fn openai_events(turn: &Turn) -> Vec<String> {
    let chunk = |delta: Value, finish: Value| {
        sse_event(
            None,
            &json!({
                "id": "chatcmpl-scripted", "object": "chat.completion.chunk", "created": 0,
                "model": "scripted", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
                "usage": null,
            }),
        )
    };
    let mut events = vec![chunk(
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    )];
    for piece in &turn.text {
        events.push(chunk(json!({"content": piece}), Value::Null));
    }
    for (index, call) in turn.tool_calls.iter().enumerate() {
        events.push(chunk(
            json!({"tool_calls": [{"index": index, "id": call.id, "type": "function",
                "function": {"name": call.name, "arguments": ""}}]}),
            Value::Null,
        ));
        for fragment in turn.fragments(&call.arguments) {
            events.push(chunk(
                json!({"tool_calls": [{"index": index, "function": {"arguments": fragment}}]}),
                Value::Null,
            ));
        }
    }
    let finish = turn.finish.clone().unwrap_or_else(|| {
        if turn.tool_calls.is_empty() {
            "stop".to_owned()
        } else {
            "tool_calls".to_owned()
        }
    });
    events.push(chunk(json!({}), json!(finish)));
    events.push(sse_event(
        None,
        &json!({
            "id": "chatcmpl-scripted", "object": "chat.completion.chunk", "created": 0,
            "model": "scripted", "choices": [],
            "usage": {"prompt_tokens": turn.input_tokens, "completion_tokens": turn.output_tokens,
                "total_tokens": turn.input_tokens + turn.output_tokens,
                "prompt_tokens_details": {"cached_tokens": turn.cached_tokens}},
        }),
    ));
    events.push("data: [DONE]\n\n".to_owned());
    events
}

fn anthropic_events(turn: &Turn) -> Vec<String> {
    let uncached = turn
        .input_tokens
        .saturating_sub(turn.cached_tokens)
        .saturating_sub(turn.cache_write_tokens);
    let mut events = vec![sse_event(
        Some("message_start"),
        &json!({"type": "message_start", "message": {
            "id": "msg_scripted", "type": "message", "role": "assistant", "model": "scripted",
            "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": uncached, "cache_creation_input_tokens": turn.cache_write_tokens,
                "cache_read_input_tokens": turn.cached_tokens, "output_tokens": 1}}}),
    )];
    let mut block = 0;
    if !turn.text.is_empty() {
        events.push(sse_event(
            Some("content_block_start"),
            &json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ));
        events.push(sse_event(Some("ping"), &json!({"type": "ping"})));
        for piece in &turn.text {
            events.push(sse_event(
                Some("content_block_delta"),
                &json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": piece}}),
            ));
        }
        events.push(sse_event(
            Some("content_block_stop"),
            &json!({"type": "content_block_stop", "index": 0}),
        ));
        block = 1;
    }
    for call in &turn.tool_calls {
        events.push(sse_event(
            Some("content_block_start"),
            &json!({"type": "content_block_start", "index": block, "content_block":
                {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}}),
        ));
        let mut fragments = vec![String::new()];
        fragments.extend(turn.fragments(&call.arguments));
        for fragment in fragments {
            events.push(sse_event(
                Some("content_block_delta"),
                &json!({"type": "content_block_delta", "index": block, "delta":
                    {"type": "input_json_delta", "partial_json": fragment}}),
            ));
        }
        events.push(sse_event(
            Some("content_block_stop"),
            &json!({"type": "content_block_stop", "index": block}),
        ));
        block += 1;
    }
    let finish = turn.finish.clone().unwrap_or_else(|| {
        if turn.tool_calls.is_empty() {
            "end_turn".to_owned()
        } else {
            "tool_use".to_owned()
        }
    });
    events.push(sse_event(
        Some("message_delta"),
        &json!({"type": "message_delta", "delta": {"stop_reason": finish, "stop_sequence": null},
            "usage": {"output_tokens": turn.output_tokens}}),
    ));
    events.push(sse_event(
        Some("message_stop"),
        &json!({"type": "message_stop"}),
    ));
    events
}

/// A request as the server received it.
#[derive(Clone, Debug)]
pub struct RecordedRequest {
    pub method: String,
    pub path: String,
    /// Names in lower case, in the order received.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub received: Instant,
}

impl RecordedRequest {
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("the request body is JSON")
    }

    /// The content of every tool result the request carries (OpenAI dialect), oldest first.
    pub fn tool_results(&self) -> Vec<String> {
        self.json()["messages"]
            .as_array()
            .expect("messages")
            .iter()
            .filter(|m| m["role"] == "tool")
            .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
            .collect()
    }

    /// The names of the tools the request offered (OpenAI dialect), in order.
    pub fn tool_names(&self) -> Vec<String> {
        self.json()["tools"]
            .as_array()
            .map(|tools| {
                tools
                    .iter()
                    .filter_map(|tool| tool["function"]["name"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Every tool result the request carries (OpenAI dialect) as (call id, content), oldest
    /// first.
    pub fn tool_results_by_id(&self) -> Vec<(String, String)> {
        self.json()["messages"]
            .as_array()
            .expect("messages")
            .iter()
            .filter(|m| m["role"] == "tool")
            .map(|m| {
                (
                    m["tool_call_id"].as_str().unwrap_or_default().to_owned(),
                    m["content"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect()
    }

    pub fn body_text(&self) -> &str {
        std::str::from_utf8(&self.body).expect("the request body is UTF-8")
    }
}

/// What became of one reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Sent whole.
    Completed,
    /// Cut on purpose after this many events.
    Cut { after_events: usize },
    /// The client hung up after this many events had been written.
    ClientClosed { after_events: usize },
    /// A request came with no reply left in the script (answered 500).
    NoReplyQueued,
}

#[derive(Default)]
struct State {
    /// Each reply with the text a request's body must contain to take it (any request when
    /// `None`).
    replies: VecDeque<(Option<String>, Reply)>,
    requests: Vec<RecordedRequest>,
    /// The session-title side calls, answered by the provider itself (see [`TITLE`]).
    title_requests: Vec<RecordedRequest>,
    outcomes: Vec<Outcome>,
    /// When the first byte of each scripted reply's stream was written (a benchmark's clock:
    /// wall time, so another process, an editor, can stamp what it saw against it).
    first_bytes: Vec<SystemTime>,
    /// When the last byte of each scripted reply's stream was written whole (a benchmark's
    /// clock: from its request's `received` to here is the time the model itself took).
    stream_ends: Vec<Instant>,
}

struct Shared {
    state: Mutex<State>,
    shutdown: AtomicBool,
}

impl Shared {
    fn record_outcome(&self, outcome: Outcome) {
        self.state.lock().unwrap().outcomes.push(outcome);
    }

    fn stopping(&self) -> bool {
        self.shutdown.load(Ordering::SeqCst)
    }
}

pub struct ScriptedProvider {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

impl ScriptedProvider {
    /// Starts on a free port of 127.0.0.1.
    pub fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("binding 127.0.0.1");
        let addr = listener.local_addr().expect("local addr");
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            shutdown: AtomicBool::new(false),
        });
        let accept_shared = Arc::clone(&shared);
        let accept = std::thread::spawn(move || {
            for stream in listener.incoming() {
                if accept_shared.stopping() {
                    break;
                }
                let Ok(stream) = stream else { continue };
                let shared = Arc::clone(&accept_shared);
                std::thread::spawn(move || serve_connection(stream, &shared));
            }
        });
        Self {
            addr,
            shared,
            accept: Some(accept),
        }
    }

    /// `OPENAI_BASE_URL` for clients: `http://127.0.0.1:PORT/v1`.
    pub fn openai_base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// `ANTHROPIC_BASE_URL` for clients: `http://127.0.0.1:PORT`.
    pub fn anthropic_base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Queues a reply: each request takes the oldest it may take.
    pub fn push(&self, reply: Reply) -> &Self {
        self.shared
            .state
            .lock()
            .unwrap()
            .replies
            .push_back((None, reply));
        self
    }

    /// Queues a reply only a request whose body contains `marker` takes (a session's task
    /// names its marker, and every request of the session repeats the task): concurrent
    /// sessions then each get their own script, in order.
    pub fn push_for(&self, marker: &str, reply: Reply) -> &Self {
        self.shared
            .state
            .lock()
            .unwrap()
            .replies
            .push_back((Some(marker.to_owned()), reply));
        self
    }

    pub fn pending_replies(&self) -> usize {
        self.shared.state.lock().unwrap().replies.len()
    }

    /// The requests the sessions made, the title side calls aside.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.state.lock().unwrap().requests.clone()
    }

    /// The session-title side calls, each answered with [`TITLE`].
    pub fn title_requests(&self) -> Vec<RecordedRequest> {
        self.shared.state.lock().unwrap().title_requests.clone()
    }

    pub fn outcomes(&self) -> Vec<Outcome> {
        self.shared.state.lock().unwrap().outcomes.clone()
    }

    /// When each streamed scripted reply (title calls aside) began, in the order they did.
    pub fn first_bytes(&self) -> Vec<SystemTime> {
        self.shared.state.lock().unwrap().first_bytes.clone()
    }

    /// When each streamed scripted reply (title calls aside) was sent whole, in the order
    /// they were: streams cut, stalled or hung up on are not here.
    pub fn stream_ends(&self) -> Vec<Instant> {
        self.shared.state.lock().unwrap().stream_ends.clone()
    }
}

impl Drop for ScriptedProvider {
    fn drop(&mut self) {
        self.shared.shutdown.store(true, Ordering::SeqCst);
        // Wakes the accept loop so it sees the flag.
        let _ = TcpStream::connect(self.addr);
        if let Some(accept) = self.accept.take() {
            let _ = accept.join();
        }
    }
}

/// How often a waiting connection thread looks at the shutdown flag.
const POLL: Duration = Duration::from_millis(20);

fn serve_connection(stream: TcpStream, shared: &Shared) {
    let _ = stream.set_nodelay(true);
    let _ = stream.set_read_timeout(Some(POLL));
    let Ok(write_half) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(stream);
    let mut writer = write_half;
    loop {
        let request = match read_request(&mut reader, shared) {
            Some(request) => request,
            None => return,
        };
        let reply = {
            let mut state = shared.state.lock().unwrap();
            let body = String::from_utf8_lossy(&request.body).into_owned();
            // A session's title is a side call the scripts need not plan for: answered here,
            // and kept apart from the session's own requests.
            if body.contains(TITLE_PROMPT) {
                let dialect = if request.path.ends_with("/messages") {
                    Dialect::Anthropic
                } else {
                    Dialect::OpenAi
                };
                state.title_requests.push(request);
                drop(state);
                let mut reply = Reply::stream(dialect, &Turn::text(&[TITLE]));
                reply.untracked = true;
                if !send_reply(&mut writer, reader.get_ref(), &reply, shared) {
                    let _ = writer.shutdown(Shutdown::Both);
                    return;
                }
                continue;
            }
            state.requests.push(request);
            let at = state
                .replies
                .iter()
                .position(|(marker, _)| marker.as_ref().is_none_or(|m| body.contains(m.as_str())));
            at.and_then(|at| state.replies.remove(at))
                .map(|(_, reply)| reply)
        };
        let keep_open = match reply {
            Some(reply) => send_reply(&mut writer, reader.get_ref(), &reply, shared),
            None => {
                let body = json!({"error": {"message": "scripted provider: no reply queued for this request"}}).to_string();
                let _ = write!(
                    writer,
                    "HTTP/1.1 500 Internal Server Error\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                    body.len()
                );
                shared.record_outcome(Outcome::NoReplyQueued);
                true
            }
        };
        if !keep_open {
            let _ = writer.shutdown(Shutdown::Both);
            return;
        }
    }
}

/// Reads one request (head and `Content-Length` body); `None` when the client closed the
/// connection or the server stops.
fn read_request(reader: &mut BufReader<TcpStream>, shared: &Shared) -> Option<RecordedRequest> {
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        match reader.read_until(b'\n', &mut head) {
            Ok(0) => return None,
            Ok(_) => {}
            Err(err) if is_timeout(&err) => {
                if shared.stopping() {
                    return None;
                }
            }
            Err(_) => return None,
        }
    }
    let received = Instant::now();
    let head = String::from_utf8_lossy(&head);
    let mut lines = head.split("\r\n");
    let mut request_line = lines.next()?.split(' ');
    let method = request_line.next()?.to_owned();
    let path = request_line.next()?.to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    let length = headers
        .iter()
        .find(|(name, _)| name == "content-length")
        .and_then(|(_, value)| value.parse::<usize>().ok())
        .unwrap_or(0);
    let mut body = vec![0; length];
    let mut read = 0;
    while read < length {
        match reader.read(&mut body[read..]) {
            Ok(0) => return None,
            Ok(n) => read += n,
            Err(err) if is_timeout(&err) => {
                if shared.stopping() {
                    return None;
                }
            }
            Err(_) => return None,
        }
    }
    Some(RecordedRequest {
        method,
        path,
        headers,
        body,
        received,
    })
}

fn is_timeout(err: &io::Error) -> bool {
    matches!(
        err.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

/// Sleeps `duration` in small steps; false if the server is stopping.
fn pause(duration: Duration, shared: &Shared) -> bool {
    let deadline = Instant::now() + duration;
    loop {
        if shared.stopping() {
            return false;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return true;
        }
        std::thread::sleep(left.min(POLL));
    }
}

fn status_text(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Status",
    }
}

/// Writes `reply`; whether the connection can serve another request.
fn send_reply(writer: &mut TcpStream, reader: &TcpStream, reply: &Reply, shared: &Shared) -> bool {
    // A title call's reply is no scripted reply's outcome.
    let record = |outcome| {
        if !reply.untracked {
            shared.record_outcome(outcome);
        }
    };
    if !pause(reply.header_delay, shared) {
        return false;
    }
    let mut head = format!(
        "HTTP/1.1 {} {}\r\n",
        reply.status,
        status_text(reply.status)
    );
    for (name, value) in &reply.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    let Some(events) = &reply.events else {
        head.push_str(&format!("content-length: {}\r\n\r\n", reply.body.len()));
        let mut bytes = head.into_bytes();
        bytes.extend_from_slice(&reply.body);
        let sent = writer.write_all(&bytes).is_ok();
        record(if sent {
            Outcome::Completed
        } else {
            Outcome::ClientClosed { after_events: 0 }
        });
        return sent;
    };
    head.push_str("transfer-encoding: chunked\r\n\r\n");
    if writer.write_all(head.as_bytes()).is_err() {
        record(Outcome::ClientClosed { after_events: 0 });
        return false;
    }
    for (sent, event) in events.iter().enumerate() {
        match reply.end {
            End::CutAfter(n) if n == sent => {
                // Half an event inside a chunk that promises all of it, then a hang-up: what a
                // dropped connection looks like to the client.
                let half = &event.as_bytes()[..event.len() / 2];
                let _ = write!(writer, "{:x}\r\n", event.len());
                let _ = writer.write_all(half);
                let _ = writer.flush();
                record(Outcome::Cut { after_events: n });
                return false;
            }
            End::StallAfter(n) if n == sent => {
                let outcome = wait_for_hang_up(reader, shared, n);
                record(outcome);
                return false;
            }
            _ => {}
        }
        if sent > 0 && !pause(reply.token_delay, shared) {
            return false;
        }
        if sent == 0 && !reply.untracked {
            shared
                .state
                .lock()
                .unwrap()
                .first_bytes
                .push(SystemTime::now());
        }
        let size = reply.write_size.unwrap_or(event.len());
        for piece in event.as_bytes().chunks(size) {
            let mut chunk = format!("{:x}\r\n", piece.len()).into_bytes();
            chunk.extend_from_slice(piece);
            chunk.extend_from_slice(b"\r\n");
            if writer
                .write_all(&chunk)
                .and_then(|()| writer.flush())
                .is_err()
            {
                record(Outcome::ClientClosed { after_events: sent });
                return false;
            }
        }
    }
    let finished = writer
        .write_all(b"0\r\n\r\n")
        .and_then(|()| writer.flush())
        .is_ok();
    if finished && !reply.untracked {
        shared
            .state
            .lock()
            .unwrap()
            .stream_ends
            .push(Instant::now());
    }
    record(if finished {
        Outcome::Completed
    } else {
        Outcome::ClientClosed {
            after_events: events.len(),
        }
    });
    finished
}

/// Keeps a stalled stream open until the client hangs up (or the server stops).
fn wait_for_hang_up(reader: &TcpStream, shared: &Shared, after_events: usize) -> Outcome {
    let mut reader = reader;
    let mut buf = [0u8; 256];
    loop {
        match reader.read(&mut buf) {
            Ok(0) => return Outcome::ClientClosed { after_events },
            Ok(_) => {}
            Err(err) if is_timeout(&err) => {
                if shared.stopping() {
                    return Outcome::Cut { after_events };
                }
            }
            Err(_) => return Outcome::ClientClosed { after_events },
        }
    }
}
