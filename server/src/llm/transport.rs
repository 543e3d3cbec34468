//! One streamed model call over HTTP: timeouts, retries with jittered exponential backoff
//! honouring `Retry-After`, SSE decoding into events, and cancellation.
//!
//! The call runs in its own task that feeds a bounded channel; the [`EventStream`] owns the
//! task and aborts it when dropped, which drops the HTTP request and closes its connection at
//! once (the agent cancels a step by dropping its stream).
//!
//! Retry policy: 408, 409, 429 (not an exhausted quota) and 5xx answers, connection failures,
//! a first byte that never comes, and a stream cut or stalled **before any event reached the
//! caller** are retried, up to `max_attempts` in all. Once an event has been delivered a cut
//! is an error: replaying would show the caller the same text twice, and the model may not
//! say the same thing again.
//!
//! An answer is capped: once its text and tool-call arguments pass `max_response_bytes`, the
//! call ends with an error (never retried: the model would likely say it all again) and the
//! connection is dropped, so a runaway answer is neither held whole nor passed on.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant, SystemTime};

use futures_util::{Stream, StreamExt};
use reqwest::header::HeaderMap;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::timeout;

use super::error::{self, ErrorKind, LlmError};
use super::sse::{SseEvent, SseParser};
use super::types::{Event, FinishReason, ModelId, ToolCall, Usage};

/// Timeouts and the retry budget of model calls (`llm.*` in the configuration).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpSettings {
    pub connect_timeout: Duration,
    /// From sending the request to the first byte of the answer's body: the provider's queue
    /// and prompt processing (long for big prompts on local models).
    pub first_byte_timeout: Duration,
    /// Longest silence between two chunks of the body once it started.
    pub idle_timeout: Duration,
    /// Attempts in all, the first included.
    pub max_attempts: u32,
    /// The first retry waits about this long; each next one twice as long.
    pub backoff_base: Duration,
    pub backoff_max: Duration,
    /// The longest wait a `Retry-After` is honoured for.
    pub max_retry_wait: Duration,
    /// The most text and tool-call arguments one answer may hold, in bytes: past it the call
    /// ends in [`ErrorKind::TooLarge`] instead of holding, journaling and showing the rest.
    pub max_response_bytes: usize,
}

/// `max_response_bytes` by default: far beyond any useful answer (a whole file rewritten is
/// tens of kilobytes), small enough that one runaway answer costs little memory.
const DEFAULT_MAX_RESPONSE_MIB: usize = 4;

impl Default for HttpSettings {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(10),
            first_byte_timeout: Duration::from_secs(120),
            idle_timeout: Duration::from_secs(60),
            max_attempts: 4,
            backoff_base: Duration::from_millis(500),
            backoff_max: Duration::from_secs(8),
            max_retry_wait: Duration::from_secs(60),
            max_response_bytes: DEFAULT_MAX_RESPONSE_MIB << 20,
        }
    }
}

/// Turns a provider's SSE events into [`Event`]s. One decoder per attempt.
pub(crate) trait Decoder: Send {
    /// Takes one SSE event, pushing the events it completes. `Ok(true)` when the answer is
    /// complete (its final events pushed).
    fn event(&mut self, sse: &SseEvent, out: &mut Vec<Event>) -> Result<bool, Fault>;
    /// The body ended without the provider's end marker: push what completes the answer, or
    /// say it was cut.
    fn end(&mut self, out: &mut Vec<Event>) -> Result<(), Fault>;
}

/// What a decoder found wrong with the stream.
#[derive(Debug)]
pub(crate) enum Fault {
    /// An error event from the provider; `retriable` when it means "overloaded, try again".
    Provider { detail: String, retriable: bool },
    /// Data that is not what the protocol says.
    Protocol(String),
    /// The stream ended before the answer was complete.
    Incomplete,
}

/// One HTTP request, ready to be sent (again, on retry).
pub(crate) struct Call {
    pub model: ModelId,
    pub url: String,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
    /// To remove it from any provider message quoted in an error.
    pub key: Option<String>,
}

/// The streamed answer of one model call: `Result<Event, LlmError>` items, ending after
/// `Finish` or after an error. Dropping it cancels the call.
pub struct EventStream {
    rx: mpsc::Receiver<Result<Event, LlmError>>,
    task: Option<JoinHandle<()>>,
}

impl EventStream {
    /// A stream of given items, for scripted models in tests and for errors found before any
    /// request was made.
    pub fn from_items(items: Vec<Result<Event, LlmError>>) -> Self {
        let (tx, rx) = mpsc::channel(items.len().max(1));
        for item in items {
            // Cannot fail: the channel has room for every item and the receiver is alive.
            let _ = tx.try_send(item);
        }
        Self { rx, task: None }
    }

    /// The stream of events another producer sends (the local model's blocking thread):
    /// dropping the stream closes the channel, which the producer sees as cancellation.
    #[cfg_attr(
        not(feature = "local"),
        allow(dead_code, reason = "only the local model produces events this way")
    )]
    pub(crate) fn from_receiver(rx: mpsc::Receiver<Result<Event, LlmError>>) -> Self {
        Self { rx, task: None }
    }

    /// Reads the whole answer.
    pub async fn collect_response(mut self) -> Result<Response, LlmError> {
        let mut response = Response::default();
        while let Some(item) = self.next().await {
            match item? {
                Event::TextDelta(text) => response.text.push_str(&text),
                Event::ToolCallEnd { call, .. } => response.tool_calls.push(call),
                Event::Usage(usage) => response.usage = Some(usage),
                Event::Finish(reason) => response.finish = Some(reason),
                Event::ToolCallStart { .. } | Event::ToolCallArgs { .. } => {}
                Event::Restarted { .. } => response = Response::default(),
            }
        }
        Ok(response)
    }
}

impl Stream for EventStream {
    type Item = Result<Event, LlmError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.rx.poll_recv(cx)
    }
}

impl Drop for EventStream {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// A whole answer, for callers that do not need it streamed (side calls, tests).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Response {
    pub text: String,
    pub tool_calls: Vec<ToolCall>,
    pub usage: Option<Usage>,
    pub finish: Option<FinishReason>,
}

/// Starts the call in a task of the current tokio runtime.
pub(crate) fn spawn(
    client: reqwest::Client,
    settings: HttpSettings,
    call: Call,
    decoder: fn() -> Box<dyn Decoder>,
) -> EventStream {
    // Small: events are tiny and a slow reader should slow the reading of the socket.
    let (tx, rx) = mpsc::channel(64);
    let task = tokio::spawn(drive(client, settings, call, decoder, tx));
    EventStream {
        rx,
        task: Some(task),
    }
}

type Sender = mpsc::Sender<Result<Event, LlmError>>;

/// Why one attempt did not complete.
#[derive(Debug)]
enum Failure {
    Status {
        status: u16,
        retry_after: Option<Duration>,
        body: Vec<u8>,
    },
    Connect(String),
    FirstByte,
    Idle,
    Cut(String),
    Stream(Fault),
    /// The answer's text and tool-call arguments passed `max_response_bytes`.
    TooLarge,
    /// The caller dropped the stream.
    ReceiverGone,
}

impl Failure {
    fn retriable(&self) -> bool {
        match self {
            Self::Status { status, body, .. } => {
                retriable_status(*status)
                    && !error::code_from_body(body).contains("insufficient_quota")
            }
            Self::Connect(_) | Self::FirstByte | Self::Idle | Self::Cut(_) => true,
            Self::Stream(Fault::Provider { retriable, .. }) => *retriable,
            Self::Stream(Fault::Incomplete) => true,
            Self::Stream(Fault::Protocol(_)) | Self::TooLarge | Self::ReceiverGone => false,
        }
    }

    /// For the log of a retry; provider text is redacted as in errors.
    fn summary(&self, key: Option<&str>) -> String {
        let text = match self {
            Self::Status { status, .. } => format!("HTTP {status}"),
            Self::Connect(detail) | Self::Cut(detail) => detail.clone(),
            Self::FirstByte => "no first byte in time".to_owned(),
            Self::Idle => "stream stalled".to_owned(),
            Self::TooLarge => "answer too large".to_owned(),
            Self::Stream(fault) => format!("{fault:?}"),
            Self::ReceiverGone => "cancelled".to_owned(),
        };
        error::redact(&text, key)
    }

    fn into_kind(
        self,
        call: &Call,
        settings: &HttpSettings,
        attempts: u32,
        delivered: bool,
    ) -> ErrorKind {
        let key = call.key.as_deref();
        match self {
            Self::Status {
                status,
                retry_after,
                body,
            } => classify(call, status, retry_after, &body, attempts),
            Self::Connect(detail) => ErrorKind::Connect {
                attempts,
                detail: error::redact(&detail, key),
            },
            Self::FirstByte => ErrorKind::FirstByteTimeout {
                after: settings.first_byte_timeout,
                attempts,
            },
            Self::Idle => ErrorKind::Stalled {
                after: settings.idle_timeout,
            },
            Self::Cut(detail) if delivered => ErrorKind::StreamCut { attempts, detail },
            Self::Cut(detail) => ErrorKind::CutBeforeAnswer { attempts, detail },
            Self::Stream(Fault::Incomplete) => {
                Self::Cut("the body ended before the answer was complete".to_owned())
                    .into_kind(call, settings, attempts, delivered)
            }
            Self::Stream(Fault::Provider { detail, .. }) => ErrorKind::InStream {
                detail: error::redact(&detail, key),
            },
            Self::Stream(Fault::Protocol(detail)) => ErrorKind::Protocol { detail },
            Self::TooLarge => ErrorKind::TooLarge {
                limit: settings.max_response_bytes,
            },
            Self::ReceiverGone => ErrorKind::Protocol {
                detail: "the caller went away".to_owned(),
            },
        }
    }
}

fn retriable_status(status: u16) -> bool {
    matches!(status, 408 | 409 | 429)
        || (500..=599).contains(&status) && !matches!(status, 501 | 505)
}

/// Maps an error answer to what it means for the user.
fn classify(
    call: &Call,
    status: u16,
    retry_after: Option<Duration>,
    body: &[u8],
    attempts: u32,
) -> ErrorKind {
    let detail = error::detail_from_body(body, call.key.as_deref());
    let code = error::code_from_body(body);
    match status {
        401 | 403 => ErrorKind::Auth {
            provider: call.model.provider,
            status,
            detail,
        },
        404 => ErrorKind::UnknownModel { status, detail },
        429 if code.contains("insufficient_quota") => ErrorKind::Quota { status, detail },
        429 => ErrorKind::RateLimited {
            attempts,
            retry_after,
            detail,
        },
        _ if error::says_context_too_long(&code, &detail) || status == 413 => {
            ErrorKind::ContextTooLong { status, detail }
        }
        400 if code.contains("model_not_found") => ErrorKind::UnknownModel { status, detail },
        500..=599 => ErrorKind::Server {
            status,
            attempts,
            detail,
        },
        _ => ErrorKind::Rejected { status, detail },
    }
}

async fn drive(
    client: reqwest::Client,
    settings: HttpSettings,
    call: Call,
    decoder: fn() -> Box<dyn Decoder>,
    tx: Sender,
) {
    let mut attempt = 0;
    loop {
        attempt += 1;
        let mut delivered = false;
        let failure =
            match attempt_once(&client, &settings, &call, decoder(), &tx, &mut delivered).await {
                Ok(()) => return,
                Err(Failure::ReceiverGone) => return,
                Err(failure) => failure,
            };
        // A cut after part of the answer is retried as one before it, with the same attempts;
        // the consumer is told first, so it drops what it received (and showed).
        if failure.retriable() && attempt < settings.max_attempts {
            if delivered {
                let reason = failure.summary(call.key.as_deref());
                if tx.send(Ok(Event::Restarted { reason })).await.is_err() {
                    return;
                }
            }
            let retry_after = match &failure {
                Failure::Status { retry_after, .. } => *retry_after,
                _ => None,
            };
            let wait = match retry_after {
                Some(wait) => wait.min(settings.max_retry_wait),
                None => backoff(&settings, attempt, jitter_seed()),
            };
            tracing::warn!(
                model = %call.model,
                attempt,
                wait_ms = wait.as_millis() as u64,
                reason = %failure.summary(call.key.as_deref()),
                "model call failed, retrying"
            );
            tokio::time::sleep(wait).await;
            continue;
        }
        let kind = failure.into_kind(&call, &settings, attempt, delivered);
        let error = LlmError::new(&call.model, kind);
        tracing::warn!(error = %error, "model call failed");
        let _ = tx.send(Err(error)).await;
        return;
    }
}

async fn attempt_once(
    client: &reqwest::Client,
    settings: &HttpSettings,
    call: &Call,
    mut decoder: Box<dyn Decoder>,
    tx: &Sender,
    delivered: &mut bool,
) -> Result<(), Failure> {
    let started = Instant::now();
    let request = client
        .post(&call.url)
        .headers(call.headers.clone())
        .body(call.body.clone());
    let response = match timeout(settings.first_byte_timeout, request.send()).await {
        Err(_) => return Err(Failure::FirstByte),
        Ok(Err(err)) => return Err(Failure::Connect(describe(err))),
        Ok(Ok(response)) => response,
    };
    let status = response.status().as_u16();
    if !(200..300).contains(&status) {
        let retry_after = retry_after(response.headers(), SystemTime::now());
        let body = read_error_body(response, settings.idle_timeout).await;
        return Err(Failure::Status {
            status,
            retry_after,
            body,
        });
    }
    // A server that ignored `stream: true` (or answers an error with 200) sends JSON: say so
    // rather than call it a cut stream.
    let content_type = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .unwrap_or("")
        .to_owned();
    if content_type.contains("json") {
        let body = read_error_body(response, settings.idle_timeout).await;
        return Err(Failure::Stream(Fault::Protocol(format!(
            "expected an event stream, got {content_type}: {}",
            error::detail_from_body(&body, call.key.as_deref())
        ))));
    }
    let mut body = response.bytes_stream();
    let mut parser = SseParser::default();
    let mut sse = Vec::new();
    let mut events = Vec::new();
    let mut started_body = false;
    // Text and tool-call argument bytes decoded so far (a stream cut before any event is
    // retried from nothing, so this counts one attempt).
    let mut answer_bytes = 0usize;
    loop {
        let wait = if started_body {
            settings.idle_timeout
        } else {
            settings
                .first_byte_timeout
                .saturating_sub(started.elapsed())
        };
        let chunk = match timeout(wait, body.next()).await {
            Err(_) if started_body => return Err(Failure::Idle),
            Err(_) => return Err(Failure::FirstByte),
            Ok(None) => {
                decoder.end(&mut events).map_err(Failure::Stream)?;
                return deliver(&mut events, tx, delivered).await;
            }
            Ok(Some(Err(err))) => return Err(Failure::Cut(describe(err))),
            Ok(Some(Ok(chunk))) => chunk,
        };
        started_body = true;
        parser.feed(&chunk, &mut sse);
        let mut complete = false;
        for event in sse.drain(..) {
            if decoder
                .event(&event, &mut events)
                .map_err(Failure::Stream)?
            {
                complete = true;
                break;
            }
        }
        answer_bytes += events.iter().map(answer_size).sum::<usize>();
        if answer_bytes > settings.max_response_bytes {
            return Err(Failure::TooLarge);
        }
        deliver(&mut events, tx, delivered).await?;
        if complete {
            // Read the rest of the body (the end of the chunked encoding) so the connection
            // goes back to the pool, without keeping the caller's stream open meanwhile.
            let idle = settings.idle_timeout;
            tokio::spawn(async move {
                let _ = timeout(idle, async { while body.next().await.is_some() {} }).await;
            });
            return Ok(());
        }
    }
}

/// What an event adds to the answer the caller accumulates: its text or argument bytes.
fn answer_size(event: &Event) -> usize {
    match event {
        Event::TextDelta(text) => text.len(),
        Event::ToolCallArgs { fragment, .. } => fragment.len(),
        _ => 0,
    }
}

async fn deliver(
    events: &mut Vec<Event>,
    tx: &Sender,
    delivered: &mut bool,
) -> Result<(), Failure> {
    for event in events.drain(..) {
        tx.send(Ok(event))
            .await
            .map_err(|_| Failure::ReceiverGone)?;
        *delivered = true;
    }
    Ok(())
}

/// The body of an error answer, at most 64 KiB, within the idle timeout.
async fn read_error_body(response: reqwest::Response, idle: Duration) -> Vec<u8> {
    const MAX: usize = 64 * 1024;
    let mut body = Vec::new();
    let mut stream = response.bytes_stream();
    while let Ok(Some(Ok(chunk))) = timeout(idle, stream.next()).await {
        body.extend_from_slice(&chunk);
        if body.len() >= MAX {
            body.truncate(MAX);
            break;
        }
    }
    body
}

/// A reqwest error in words, with its causes (reqwest's own message is often just "error
/// sending request").
fn describe(err: reqwest::Error) -> String {
    let err = err.without_url();
    let mut text = err.to_string();
    let mut source = std::error::Error::source(&err);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// How long the provider asked to wait: `retry-after-ms` (OpenAI), else `Retry-After` in
/// seconds or as an HTTP date.
pub(crate) fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    if let Some(ms) = header("retry-after-ms").and_then(|v| v.parse::<f64>().ok())
        && ms.is_finite()
        && ms >= 0.0
    {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    let value = header("retry-after")?;
    if let Ok(seconds) = value.parse::<f64>() {
        return (seconds.is_finite() && seconds >= 0.0).then(|| Duration::from_secs_f64(seconds));
    }
    let date = httpdate::parse_http_date(value).ok()?;
    Some(date.duration_since(now).unwrap_or(Duration::ZERO))
}

/// Exponential backoff with jitter: between half and all of `base · 2^(attempt-1)`, capped.
/// `seed` picks the point in that range (random in production, fixed in tests).
pub(crate) fn backoff(settings: &HttpSettings, attempt: u32, seed: u64) -> Duration {
    let exponent = attempt.saturating_sub(1).min(16);
    let full = settings
        .backoff_base
        .saturating_mul(1 << exponent)
        .min(settings.backoff_max);
    let fraction = 0.5 + (seed % 1000) as f64 / 2000.0;
    full.mul_f64(fraction)
}

fn jitter_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    // RandomState is seeded randomly per instance: enough randomness to spread retries of
    // several clients without a dependency.
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    let now = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH);
    hasher.write_u128(now.unwrap_or_default().as_nanos());
    hasher.finish()
}

/// Feeds `body` to `decoder` in `chunk`-byte pieces, as the network would: the events it
/// decodes, or its fault. For the decoders' tests.
#[cfg(test)]
pub(crate) fn decode_in_chunks(
    mut decoder: impl Decoder,
    body: &str,
    chunk: usize,
) -> Result<Vec<Event>, String> {
    let mut parser = SseParser::default();
    let (mut sse, mut out) = (Vec::new(), Vec::new());
    for piece in body.as_bytes().chunks(chunk) {
        parser.feed(piece, &mut sse);
        for event in sse.drain(..) {
            if decoder
                .event(&event, &mut out)
                .map_err(|f| format!("{f:?}"))?
            {
                return Ok(out);
            }
        }
    }
    decoder.end(&mut out).map_err(|f| format!("{f:?}"))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, value.parse().unwrap());
        }
        map
    }

    #[test]
    fn retry_after_reads_seconds_milliseconds_and_dates() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_784_000_000);
        assert_eq!(
            retry_after(&headers(&[("retry-after", "7")]), now),
            Some(Duration::from_secs(7))
        );
        assert_eq!(
            retry_after(
                &headers(&[("retry-after", "7"), ("retry-after-ms", "1500")]),
                now
            ),
            Some(Duration::from_millis(1500))
        );
        let later = httpdate::fmt_http_date(now + Duration::from_secs(30));
        assert_eq!(
            retry_after(&headers(&[("retry-after", &later)]), now),
            Some(Duration::from_secs(30))
        );
        let past = httpdate::fmt_http_date(now - Duration::from_secs(30));
        assert_eq!(
            retry_after(&headers(&[("retry-after", &past)]), now),
            Some(Duration::ZERO)
        );
        assert_eq!(retry_after(&headers(&[("retry-after", "soon")]), now), None);
        assert_eq!(retry_after(&headers(&[("retry-after", "-3")]), now), None);
        assert_eq!(retry_after(&HeaderMap::new(), now), None);
    }

    #[test]
    fn backoff_doubles_within_jitter_and_is_capped() {
        let settings = HttpSettings {
            backoff_base: Duration::from_millis(100),
            backoff_max: Duration::from_millis(1000),
            ..HttpSettings::default()
        };
        for seed in [0, 499, 999, 123_456_789] {
            for (attempt, full) in [
                (1, 100),
                (2, 200),
                (3, 400),
                (4, 800),
                (5, 1000),
                (40, 1000),
            ] {
                let wait = backoff(&settings, attempt, seed);
                let full = Duration::from_millis(full);
                assert!(
                    wait >= full / 2 && wait <= full,
                    "attempt {attempt} seed {seed}: {wait:?}"
                );
            }
        }
        assert_ne!(backoff(&settings, 3, 0), backoff(&settings, 3, 999));
    }

    #[test]
    fn retriable_statuses() {
        for status in [408, 409, 429, 500, 502, 503, 504, 529] {
            assert!(retriable_status(status), "{status}");
        }
        for status in [400, 401, 403, 404, 413, 422, 501] {
            assert!(!retriable_status(status), "{status}");
        }
        let quota = Failure::Status {
            status: 429,
            retry_after: None,
            body: br#"{"error":{"code":"insufficient_quota","message":"no"}}"#.to_vec(),
        };
        assert!(!quota.retriable());
    }
}
