//! Errors of a model call: which provider and model, what happened (with the HTTP status when
//! there was one), and what the user can do about it.
//!
//! Provider messages are included because they are often the most precise explanation, but
//! shortened and with the API key removed: some providers echo part of a rejected key.

use std::time::Duration;

use super::types::{ModelId, Provider};

#[derive(Debug, thiserror::Error)]
#[error("{model}: {kind}")]
pub struct LlmError {
    pub model: ModelId,
    pub kind: ErrorKind,
}

impl LlmError {
    pub fn new(model: &ModelId, kind: ErrorKind) -> Self {
        Self {
            model: model.clone(),
            kind,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ErrorKind {
    #[error(
        "the provider refused the API key (HTTP {status}: {detail}); check {variable} \
         (or providers.{provider}.api_key in your user configuration file)",
        variable = provider.key_variable()
    )]
    Auth {
        provider: Provider,
        status: u16,
        detail: String,
    },
    #[error(
        "no API key: set {variable} (or providers.{provider}.api_key in your user configuration \
         file)",
        variable = provider.key_variable()
    )]
    MissingKey { provider: Provider },
    #[error(
        "the provider does not know this model (HTTP {status}: {detail}); check the model name \
         (WRIGHT_MODEL, `model` or `models.*.model`) and the base URL"
    )]
    UnknownModel { status: u16, detail: String },
    #[error(
        "the prompt is longer than the model's context window (HTTP {status}: {detail}); shorten \
         the task or let compaction shrink the transcript, or pick a model with a larger window"
    )]
    ContextTooLong { status: u16, detail: String },
    #[error(
        "rate limited (HTTP 429) after {attempts} attempt(s){after}: {detail}; wait, or lower \
         the request rate, or raise the account's limits",
        after = retry_after.map(|d| format!(", the provider asked to wait {}s", d.as_secs())).unwrap_or_default()
    )]
    RateLimited {
        attempts: u32,
        retry_after: Option<Duration>,
        detail: String,
    },
    #[error(
        "the account has no quota left (HTTP {status}: {detail}); check the provider's billing"
    )]
    Quota { status: u16, detail: String },
    #[error(
        "the provider failed (HTTP {status}) after {attempts} attempt(s): {detail}; try again \
         later"
    )]
    Server {
        status: u16,
        attempts: u32,
        detail: String,
    },
    #[error("the provider refused the request (HTTP {status}): {detail}")]
    Rejected { status: u16, detail: String },
    #[error(
        "cannot reach the provider after {attempts} attempt(s): {detail}; check the base URL \
         and that the server (a local one too) is running"
    )]
    Connect { attempts: u32, detail: String },
    #[error(
        "no answer within {}s after {attempts} attempt(s); the provider may be overloaded \
         (raise llm.first_byte_timeout_secs for slow local models)",
        after.as_secs_f32()
    )]
    FirstByteTimeout { after: Duration, attempts: u32 },
    #[error(
        "the stream stalled: nothing for {}s after part of the answer had arrived (raise \
         llm.idle_timeout_secs for slow local models)",
        after.as_secs_f32()
    )]
    Stalled { after: Duration },
    #[error(
        "the stream was cut after part of the answer had arrived, {attempts} time(s) in a row \
         ({detail}); each partial answer was dropped; try again later"
    )]
    StreamCut { attempts: u32, detail: String },
    #[error(
        "the stream was cut before any of the answer arrived, after {attempts} attempt(s): \
         {detail}"
    )]
    CutBeforeAnswer { attempts: u32, detail: String },
    #[error(
        "the model's response exceeded {} of text and tool-call arguments and was stopped \
         there; ask for less per step (one file or one change at a time), or raise \
         llm.max_response_mib if answers this long are expected",
        in_binary_units(*limit)
    )]
    TooLarge {
        /// Bytes.
        limit: usize,
    },
    #[error("the provider reported an error in the stream: {detail}")]
    InStream { detail: String },
    #[error("the provider's answer could not be understood: {detail}")]
    Protocol { detail: String },
    #[error("invalid configuration: {detail}")]
    Config { detail: String },
    #[error("the local model failed: {detail}")]
    Local { detail: String },
}

impl ErrorKind {
    /// The HTTP status, when the provider answered with one.
    pub fn status(&self) -> Option<u16> {
        match self {
            Self::Auth { status, .. }
            | Self::UnknownModel { status, .. }
            | Self::ContextTooLong { status, .. }
            | Self::Quota { status, .. }
            | Self::Server { status, .. }
            | Self::Rejected { status, .. } => Some(*status),
            Self::RateLimited { .. } => Some(429),
            _ => None,
        }
    }
}

/// A size as its configuration reads: whole MiB (`4 MiB`), else KiB.
fn in_binary_units(bytes: usize) -> String {
    if bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{} KiB", bytes.div_ceil(1 << 10))
    }
}

/// The provider's own explanation from an error body, shortened, without the key.
pub fn detail_from_body(body: &[u8], key: Option<&str>) -> String {
    let text = String::from_utf8_lossy(body);
    let message = serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .and_then(|json| {
            let error = json.get("error")?;
            error
                .get("message")
                .and_then(|m| m.as_str())
                .map(str::to_owned)
                .or_else(|| error.as_str().map(str::to_owned))
        })
        .unwrap_or_else(|| text.trim().to_owned());
    redact(&shorten(&message), key)
}

/// The provider's error code or type from an error body (`model_not_found`,
/// `context_length_exceeded`, `insufficient_quota`, `not_found_error`).
pub fn code_from_body(body: &[u8]) -> String {
    let Ok(json) = serde_json::from_slice::<serde_json::Value>(body) else {
        return String::new();
    };
    let Some(error) = json.get("error") else {
        return String::new();
    };
    ["code", "type"]
        .iter()
        .filter_map(|field| error.get(*field).and_then(|v| v.as_str()))
        .collect::<Vec<_>>()
        .join(" ")
}

pub fn redact(text: &str, key: Option<&str>) -> String {
    match key {
        Some(key) if key.len() >= 4 && text.contains(key) => text.replace(key, "<redacted>"),
        _ => text.to_owned(),
    }
}

fn shorten(text: &str) -> String {
    const MAX: usize = 400;
    if text.len() <= MAX {
        return text.to_owned();
    }
    let mut end = MAX;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// Whether an error body says the prompt is too long, as the providers and the common local
/// servers word it.
pub fn says_context_too_long(code: &str, detail: &str) -> bool {
    let detail = detail.to_ascii_lowercase();
    code.contains("context_length_exceeded")
        || [
            "context length",
            "context window",
            "maximum context",
            "prompt is too long",
            "too many tokens",
            "exceeds the context",
        ]
        .iter()
        .any(|phrase| detail.contains(phrase))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn details_come_from_the_error_message_without_the_key() {
        let body = br#"{"error":{"message":"Incorrect API key provided: sk-secret-123.","type":"invalid_request_error","code":"invalid_api_key"}}"#;
        assert_eq!(
            detail_from_body(body, Some("sk-secret-123")),
            "Incorrect API key provided: <redacted>."
        );
        assert_eq!(
            code_from_body(body),
            "invalid_api_key invalid_request_error"
        );
        let anthropic =
            br#"{"type":"error","error":{"type":"not_found_error","message":"model: x"}}"#;
        assert_eq!(code_from_body(anthropic), "not_found_error");
        assert_eq!(detail_from_body(b"plain text\n", None), "plain text");
        assert!(detail_from_body("é".repeat(500).as_bytes(), None).ends_with('…'));
    }

    #[test]
    fn messages_name_the_model_status_and_remedy() {
        let model = ModelId::parse("openai/gpt-4.1").unwrap();
        let error = LlmError::new(
            &model,
            ErrorKind::Auth {
                provider: Provider::OpenAi,
                status: 401,
                detail: "bad key".into(),
            },
        );
        let text = error.to_string();
        assert!(text.starts_with("openai/gpt-4.1: "), "{text}");
        assert!(
            text.contains("HTTP 401") && text.contains("OPENAI_API_KEY"),
            "{text}"
        );
        assert_eq!(error.kind.status(), Some(401));
    }

    #[test]
    fn context_errors_are_recognised_in_their_usual_wordings() {
        assert!(says_context_too_long("context_length_exceeded", ""));
        assert!(says_context_too_long(
            "",
            "prompt is too long: 210000 tokens > 200000 maximum"
        ));
        assert!(says_context_too_long(
            "",
            "This model's maximum context length is 128000 tokens"
        ));
        assert!(!says_context_too_long(
            "invalid_request_error",
            "temperature out of range"
        ));
    }
}
