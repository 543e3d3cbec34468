//! The provider-neutral vocabulary: what a request to a chat model holds and the events its
//! streamed answer is made of.
//!
//! Both clients translate from and to exactly these types, so the agent, the router and a
//! scripted test model never see a provider's wire format.

use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

pub use crate::config::values::{ModelId, Provider};

/// A tool the model may call: its name, what it does, and a JSON schema of its arguments.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolSchema {
    pub name: String,
    pub description: String,
    pub parameters: Json,
}

/// A tool call as the model made it. `arguments` is the JSON text the model wrote, kept as
/// written (it may be invalid: the agent tells the model so rather than guessing).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

impl ToolCall {
    /// The arguments parsed, or why they are not a JSON object.
    pub fn parsed_arguments(&self) -> Result<serde_json::Map<String, Json>, String> {
        match serde_json::from_str::<Json>(&self.arguments) {
            Ok(Json::Object(map)) => Ok(map),
            Ok(other) => Err(format!(
                "expected a JSON object of arguments, found {other}"
            )),
            Err(err) => Err(format!("the arguments are not valid JSON: {err}")),
        }
    }
}

/// One entry of the conversation history.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "role",
    content = "body",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum Message {
    User(String),
    /// An image the user attached, right after their message's text.
    Image {
        media_type: String,
        /// Base64.
        data: String,
    },
    Assistant {
        text: String,
        tool_calls: Vec<ToolCall>,
    },
    ToolResult {
        call_id: String,
        content: String,
        is_error: bool,
    },
}

/// Sampling settings. They are part of the request's stable prefix, so an agent keeps them
/// fixed for a task.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sampling {
    /// `None` leaves the provider's default (reasoning models accept no other).
    pub temperature: Option<f32>,
    pub max_tokens: u32,
}

impl Default for Sampling {
    fn default() -> Self {
        Self {
            temperature: None,
            max_tokens: 8192,
        }
    }
}

/// Everything one model call needs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Request {
    pub system: String,
    pub tools: Vec<ToolSchema>,
    pub messages: Vec<Message>,
    pub sampling: Sampling,
    /// Routes requests of one session to the same provider cache (OpenAI's
    /// `prompt_cache_key`); a session id is a good value.
    pub cache_key: Option<String>,
    /// The expected output, for whole-file rewrites (OpenAI's predicted outputs). Sent only to
    /// models that support it, and only without tools (OpenAI refuses the two together).
    pub prediction: Option<String>,
    /// A side call that is a nicety (a session's title): one attempt, never retried.
    pub single_attempt: bool,
}

/// Why the model stopped.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// The model finished its answer.
    Stop,
    /// The model wants its tool calls run.
    ToolCalls,
    /// `max_tokens` was reached: the answer is truncated.
    Length,
    /// The provider withheld or refused the content.
    ContentFilter,
    /// A reason this client does not know, as the provider spelled it.
    Other(String),
}

/// Token counts of one call, the same meaning for every provider: `input` counts the whole
/// prompt, of which `cached_input` was read from the provider's cache and `cache_write` was
/// written to it (Anthropic bills those differently; OpenAI reports no writes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    pub input: u64,
    pub cached_input: u64,
    pub output: u64,
    pub cache_write: u64,
}

impl Usage {
    pub fn add(&mut self, other: &Usage) {
        self.input += other.input;
        self.cached_input += other.cached_input;
        self.output += other.output;
        self.cache_write += other.cache_write;
    }
}

/// One event of a streamed answer. Order: text and tool-call events as they arrive (a call's
/// `Start`, its `Args`, its `End`); then `Usage` when the provider reported it; then `Finish`,
/// always last. `index` numbers the tool calls of one answer from 0. `Restarted` may come
/// anywhere before `Finish`: the answer starts over.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    TextDelta(String),
    ToolCallStart {
        index: usize,
        id: String,
        name: String,
    },
    ToolCallArgs {
        index: usize,
        fragment: String,
    },
    ToolCallEnd {
        index: usize,
        call: ToolCall,
    },
    Usage(Usage),
    Finish(FinishReason),
    /// The stream was cut (or stalled) after part of the answer had arrived, and the call is
    /// made again: everything received since the call began is void. Nothing of a partial
    /// answer was acted on (tool calls run only after `Finish`), so asking again is safe.
    Restarted {
        reason: String,
    },
}
