//! Everything about talking to models: the provider-neutral chat interface ([`ChatModel`],
//! [`Request`], [`Event`]), the OpenAI-compatible and Anthropic clients, retries and
//! timeouts, the prompt builder that keeps prefixes cacheable, usage accounting, and token
//! counting, and the in-process `local` provider (GGUF models on the CPU, [`local`]). The only
//! code that talks to models, and the only place `reqwest` is used.

pub mod accounting;
pub mod anthropic;
pub mod error;
#[cfg(feature = "local")]
pub mod local;
pub mod openai;
pub mod prompt;
pub mod sse;
pub mod tokens;
pub mod transport;
pub mod types;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use reqwest::header::HeaderValue;

pub use accounting::{Price, PriceTable, SessionUsage};
pub use anthropic::AnthropicClient;
pub use error::{ErrorKind, LlmError};
pub use openai::OpenAiClient;
pub use prompt::Transcript;
pub use transport::{EventStream, HttpSettings, Response};
pub use types::{
    Event, FinishReason, Message, ModelId, Provider, Request, Sampling, ToolCall, ToolSchema, Usage,
};

use crate::config::Config;

/// A chat model: one request in, a stream of events out. The real clients and scripted test
/// models implement it, so the agent does not know which it drives.
pub trait ChatModel: Send + Sync {
    fn model(&self) -> &ModelId;

    /// Starts the call; must be called inside a tokio runtime. Dropping the stream cancels
    /// the call and closes its connection.
    fn stream(&self, request: &Request) -> EventStream;

    /// Whether its requests may carry images ([`Message::Image`]).
    fn takes_images(&self) -> bool {
        false
    }
}

/// An API key. Never printed: its `Debug` says only whether it is set, it has no `Display`,
/// and it travels in a header marked sensitive.
#[derive(Clone)]
pub struct ApiKey(String);

impl ApiKey {
    /// Surrounding whitespace (a trailing newline from a file or a command) is dropped.
    pub fn new(key: &str) -> Self {
        Self(key.trim().to_owned())
    }

    fn expose(&self) -> &str {
        &self.0
    }

    fn header_value(&self, prefix: &str) -> Result<HeaderValue, ErrorKind> {
        let mut value = HeaderValue::from_str(&format!("{prefix}{}", self.0)).map_err(|_| {
            ErrorKind::Config {
                detail: "the API key holds characters an HTTP header cannot carry".to_owned(),
            }
        })?;
        value.set_sensitive(true);
        Ok(value)
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

/// The HTTP client of one model: connection pool, connect timeout, no Nagle delay (tokens
/// are small writes).
fn http_client(model: &ModelId, settings: &HttpSettings) -> Result<reqwest::Client, LlmError> {
    reqwest::Client::builder()
        .connect_timeout(settings.connect_timeout)
        .tcp_nodelay(true)
        .user_agent(concat!("wright/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|err| {
            LlmError::new(
                model,
                ErrorKind::Config {
                    detail: format!("cannot set up HTTP: {err}"),
                },
            )
        })
}

impl HttpSettings {
    /// The `llm.*` keys, defaults where unset.
    pub fn from_config(config: &Config) -> Self {
        let defaults = Self::default();
        let secs =
            |key: &str, default: Duration| config.get_u64(key).map_or(default, Duration::from_secs);
        Self {
            connect_timeout: secs("llm.connect_timeout_secs", defaults.connect_timeout),
            first_byte_timeout: secs("llm.first_byte_timeout_secs", defaults.first_byte_timeout),
            idle_timeout: secs("llm.idle_timeout_secs", defaults.idle_timeout),
            max_attempts: config
                .get_u64("llm.max_attempts")
                .map_or(defaults.max_attempts, |n| n.clamp(1, 20) as u32),
            max_retry_wait: secs("llm.max_retry_wait_secs", defaults.max_retry_wait),
            max_response_bytes: config.get_u64("llm.max_response_mib").map_or(
                defaults.max_response_bytes,
                |mib| {
                    usize::try_from(mib)
                        .unwrap_or(usize::MAX)
                        .saturating_mul(1 << 20)
                },
            ),
            ..defaults
        }
    }
}

/// A client for `model` with the base URL, key and timeouts of the configuration. The
/// public OpenAI and Anthropic endpoints need a key; a local OpenAI-compatible server does
/// not.
pub fn connect(config: &Config, model: &ModelId) -> Result<Arc<dyn ChatModel>, LlmError> {
    let settings = HttpSettings::from_config(config);
    let provider = model.provider.name();
    let base_url = config
        .get(&format!("providers.{provider}.base_url"))
        .unwrap_or_default();
    let key = match (
        config.get(&format!("providers.{provider}.api_key")),
        config.get(&format!("providers.{provider}.api_key_command")),
    ) {
        (Some(key), _) => Some(ApiKey::new(key)),
        (None, Some(command)) => Some(ApiKey::new(
            &crate::sandbox::host::secret_from_command(command).map_err(|why| {
                LlmError::new(
                    model,
                    ErrorKind::Config {
                        detail: format!("providers.{provider}.api_key_command: {why}"),
                    },
                )
            })?,
        )),
        (None, None) => None,
    };
    let missing_key = || {
        LlmError::new(
            model,
            ErrorKind::MissingKey {
                provider: model.provider,
            },
        )
    };
    Ok(match model.provider {
        #[cfg(feature = "local")]
        Provider::Local => Arc::new(local::LocalModel::connect(config, model)?),
        #[cfg(not(feature = "local"))]
        Provider::Local => {
            return Err(LlmError::new(
                model,
                ErrorKind::Config {
                    detail: "this wright was built without the `local` feature; rebuild with \
                             default features to run GGUF models in process"
                        .to_owned(),
                },
            ));
        }
        Provider::OpenAi => {
            if key.is_none() && base_url.starts_with("https://api.openai.com") {
                return Err(missing_key());
            }
            Arc::new(OpenAiClient::new(model.clone(), base_url, key, settings)?)
        }
        Provider::Anthropic => {
            let key = key.ok_or_else(missing_key)?;
            Arc::new(AnthropicClient::new(
                model.clone(),
                base_url,
                key,
                settings,
            )?)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A model that answers from a script, as the agent's unit tests can plug in.
    struct Scripted(ModelId);

    impl ChatModel for Scripted {
        fn model(&self) -> &ModelId {
            &self.0
        }

        fn stream(&self, request: &Request) -> EventStream {
            let answer = format!("{} message(s) seen", request.messages.len());
            EventStream::from_items(vec![
                Ok(Event::TextDelta(answer)),
                Ok(Event::Finish(FinishReason::Stop)),
            ])
        }
    }

    #[tokio::test]
    async fn a_scripted_model_plugs_in_where_a_client_does() {
        let model: Arc<dyn ChatModel> = Arc::new(Scripted(ModelId::parse("openai/fake").unwrap()));
        let request = Request {
            messages: vec![Message::User("hi".into())],
            ..Request::default()
        };
        let response = model.stream(&request).collect_response().await.unwrap();
        assert_eq!(response.text, "1 message(s) seen");
        assert_eq!(response.finish, Some(FinishReason::Stop));
    }

    #[test]
    fn keys_never_show_in_debug_output() {
        let key = ApiKey::new("sk-very-secret\n");
        assert_eq!(format!("{key:?}"), "ApiKey(<redacted>)");
        assert_eq!(key.expose(), "sk-very-secret");
        let header = key.header_value("Bearer ").unwrap();
        assert!(header.is_sensitive());
        assert!(!format!("{header:?}").contains("very-secret"));
    }
}
