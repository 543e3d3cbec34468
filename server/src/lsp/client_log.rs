//! The server's log as `window/logMessage` notifications, for a client that asks for it with
//! `experimental.wrightLogMessages` in its `initialize` capabilities: VS Code's language client
//! shows every line a server writes to stderr as an error, so an INFO record read there is an
//! `[error]` line. Such a client gets each record with its level as the message type (error 1,
//! warning 2, info 3, debug and trace 4), and stderr keeps only what cannot be sent: records
//! from before the `initialize` request, errors after the client is gone, and panics.
//!
//! [`layer`] and [`StderrGate`] are installed by the binary with the tracing subscriber (only
//! when the log goes to stderr: a `--log-file` keeps it all); the transport turns the route on
//! when it reads an `initialize` that asks for it ([`wanted`], [`route_to`]) and off when its
//! reader ends ([`stop`]). Records go straight into the transport's outgoing queue, never
//! through tower-lsp-server's `Client` (which drops notifications before `initialized`, and
//! logs as it sends).

use std::cell::Cell;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedSender;
use tracing::field::{Field, Visit};
use tracing::subscriber::Interest;
use tracing::{Event, Level, Metadata, Subscriber};
use tracing_subscriber::layer::{Context, Filter, Layer};

/// Where records go now.
const TO_STDERR: u8 = 0;
const TO_CLIENT: u8 = 1;
/// The client asked for the log and is gone: only errors go to stderr.
const CLIENT_GONE: u8 = 2;

static ROUTE: AtomicU8 = AtomicU8::new(TO_STDERR);
/// The transport's queue of frames to write, while the route is [`TO_CLIENT`].
static OUTGOING: Mutex<Option<UnboundedSender<Vec<u8>>>> = Mutex::new(None);
/// Whether the binary installed [`layer`]: without it there is nothing to route.
static INSTALLED: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// Set while the transport writes a frame: what it logs then stays on stderr, or every
    /// record sent would make another.
    static WRITING: Cell<bool> = const { Cell::new(false) };
}

/// The layer that sends records to the client once one asked for them.
pub fn layer() -> ClientLog {
    INSTALLED.store(true, Ordering::Relaxed);
    ClientLog
}

/// See [`layer`].
pub struct ClientLog;

/// The per-layer filter of the stderr writer: every record until a client asks for the log,
/// then only what is logged while a frame is written; errors once the client is gone.
pub struct StderrGate;

impl<S: Subscriber> Filter<S> for StderrGate {
    fn enabled(&self, metadata: &Metadata<'_>, _: &Context<'_, S>) -> bool {
        match ROUTE.load(Ordering::Relaxed) {
            TO_CLIENT => WRITING.get(),
            CLIENT_GONE => *metadata.level() == Level::ERROR,
            _ => true,
        }
    }

    // Where a record goes changes while the server runs: ask for every record.
    fn callsite_enabled(&self, _: &'static Metadata<'static>) -> Interest {
        Interest::sometimes()
    }
}

impl<S: Subscriber> Layer<S> for ClientLog {
    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        if ROUTE.load(Ordering::Relaxed) != TO_CLIENT || WRITING.get() {
            return;
        }
        let metadata = event.metadata();
        let mut text = Text::default();
        event.record(&mut text);
        let message = format!("{}: {}{}", metadata.target(), text.message, text.fields);
        let frame = notification(message_type(*metadata.level()), &message);
        let sent = OUTGOING
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .is_some_and(|outgoing| outgoing.send(frame).is_ok());
        if !sent {
            ROUTE.store(CLIENT_GONE, Ordering::Relaxed);
            if *metadata.level() == Level::ERROR {
                eprintln!("ERROR {message}");
            }
        }
    }
}

/// The `window/logMessage` type of a record's level.
fn message_type(level: Level) -> u8 {
    match level {
        Level::ERROR => 1,
        Level::WARN => 2,
        Level::INFO => 3,
        _ => 4,
    }
}

fn notification(kind: u8, message: &str) -> Vec<u8> {
    let frame = json!({
        "jsonrpc": "2.0",
        "method": "window/logMessage",
        "params": {"type": kind, "message": message},
    });
    serde_json::to_vec(&frame).expect("a log message serializes")
}

/// A record's message and its other fields (` key=value`).
#[derive(Default)]
struct Text {
    message: String,
    fields: String,
}

impl Visit for Text {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message.push_str(value);
        } else {
            let _ = write!(self.fields, " {}={value}", field.name());
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.message, "{value:?}");
        } else {
            let _ = write!(self.fields, " {}={value:?}", field.name());
        }
    }
}

/// Whether `initialize`'s params ask for the log (`experimental.wrightLogMessages: true`).
pub fn wanted(params: Option<&Value>) -> bool {
    params
        .and_then(|params| params.pointer("/capabilities/experimental/wrightLogMessages"))
        .and_then(Value::as_bool)
        == Some(true)
}

/// Sends every record from now on to the client through `outgoing` (frames the transport
/// writes). False, and nothing changes, when there is no log to route (no [`layer`]).
pub fn route_to(outgoing: UnboundedSender<Vec<u8>>) -> bool {
    if !INSTALLED.load(Ordering::Relaxed) {
        return false;
    }
    *OUTGOING.lock().unwrap_or_else(|e| e.into_inner()) = Some(outgoing);
    ROUTE.store(TO_CLIENT, Ordering::Relaxed);
    true
}

/// Whether records go to the client now.
pub fn routed() -> bool {
    ROUTE.load(Ordering::Relaxed) == TO_CLIENT
}

/// The client is gone (the transport's reader ended): records are no longer sent, and the
/// transport's queue is let go so its writer can finish. Only errors reach stderr after.
pub fn stop() {
    if OUTGOING
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take()
        .is_some()
    {
        ROUTE.store(CLIENT_GONE, Ordering::Relaxed);
    }
}

/// Runs `write` (the transport writing a frame) with its own records kept off the client.
pub fn writing<T>(write: impl FnOnce() -> T) -> T {
    WRITING.set(true);
    let result = write();
    WRITING.set(false);
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_true_experimental_capability_asks_for_the_log() {
        let asks = json!({"capabilities": {"experimental": {"wrightLogMessages": true}}});
        assert!(wanted(Some(&asks)));
        let declines = json!({"capabilities": {"experimental": {"wrightLogMessages": "yes"}}});
        assert!(!wanted(Some(&declines)));
        assert!(!wanted(Some(&json!({"capabilities": {}}))));
        assert!(!wanted(None));
    }

    #[test]
    fn levels_become_message_types_and_records_a_notification() {
        let types: Vec<u8> = [
            Level::ERROR,
            Level::WARN,
            Level::INFO,
            Level::DEBUG,
            Level::TRACE,
        ]
        .into_iter()
        .map(message_type)
        .collect();
        assert_eq!(types, [1, 2, 3, 4, 4]);
        let frame: Value = serde_json::from_slice(&notification(3, "wright::x: hi")).unwrap();
        assert_eq!(
            frame,
            json!({"jsonrpc": "2.0", "method": "window/logMessage", "params": {"type": 3, "message": "wright::x: hi"}})
        );
    }
}
