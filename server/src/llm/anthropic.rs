//! The Anthropic Messages client: streaming events, `tool_use`/`tool_result`, and
//! `cache_control` breakpoints on the stable prefix.
//!
//! Anthropic caches a prompt prefix only where the request marks one. Three breakpoints are
//! set (of the four allowed): the last tool, the system prompt, and the last block of the
//! history. The history breakpoint moves forward every step; Anthropic's cache key is the
//! content up to a breakpoint, not the marker, so the next step reads what this one wrote.

use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderValue};
use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

use super::error::LlmError;
use super::sse::SseEvent;
use super::transport::{self, Call, Decoder, EventStream, Fault, HttpSettings};
use super::types::{Event, FinishReason, Message, ModelId, Request, ToolCall, Usage};
use super::{ApiKey, ChatModel};

/// The API version these types follow.
const API_VERSION: &str = "2023-06-01";

pub struct AnthropicClient {
    model: ModelId,
    url: String,
    key: ApiKey,
    http: reqwest::Client,
    settings: HttpSettings,
}

impl AnthropicClient {
    /// A client for `model` at `base_url` (`https://api.anthropic.com`, without `/v1`).
    pub fn new(
        model: ModelId,
        base_url: &str,
        key: ApiKey,
        settings: HttpSettings,
    ) -> Result<Self, LlmError> {
        Ok(Self {
            url: format!("{}/v1/messages", base_url.trim_end_matches('/')),
            http: super::http_client(&model, &settings)?,
            model,
            key,
            settings,
        })
    }

    /// The exact bytes sent for `request`.
    pub fn request_body(&self, request: &Request) -> Vec<u8> {
        request_body(&self.model.model, request)
    }
}

impl ChatModel for AnthropicClient {
    fn takes_images(&self) -> bool {
        true
    }

    fn model(&self) -> &ModelId {
        &self.model
    }

    fn stream(&self, request: &Request) -> EventStream {
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert("anthropic-version", HeaderValue::from_static(API_VERSION));
        match self.key.header_value("") {
            Ok(value) => {
                headers.insert("x-api-key", value);
            }
            Err(kind) => {
                return EventStream::from_items(vec![Err(LlmError::new(&self.model, kind))]);
            }
        }
        let call = Call {
            model: self.model.clone(),
            url: self.url.clone(),
            headers,
            body: self.request_body(request),
            key: Some(self.key.expose().to_owned()),
        };
        let mut settings = self.settings.clone();
        if request.single_attempt {
            settings.max_attempts = 1;
        }
        transport::spawn(self.http.clone(), settings, call, || {
            Box::<AnthropicDecoder>::default()
        })
    }
}

#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    max_tokens: u32,
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<Tool<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    system: Vec<Block<'a>>,
    messages: Vec<WireMessage<'a>>,
}

#[derive(Clone, Copy, Serialize)]
struct CacheControl {
    r#type: &'static str,
}

const EPHEMERAL: Option<CacheControl> = Some(CacheControl {
    r#type: "ephemeral",
});

#[derive(Serialize)]
struct Tool<'a> {
    name: &'a str,
    description: &'a str,
    input_schema: &'a Json,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_control: Option<CacheControl>,
}

#[derive(Serialize)]
struct WireMessage<'a> {
    role: &'static str,
    content: Vec<Block<'a>>,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block<'a> {
    Text {
        text: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
    ToolUse {
        id: &'a str,
        name: &'a str,
        input: Json,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
    ToolResult {
        tool_use_id: &'a str,
        content: &'a str,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
    Image {
        source: ImageSource<'a>,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
}

#[derive(Serialize)]
struct ImageSource<'a> {
    r#type: &'static str,
    media_type: &'a str,
    data: &'a str,
}

impl Block<'_> {
    fn mark(&mut self) {
        match self {
            Self::Text { cache_control, .. }
            | Self::ToolUse { cache_control, .. }
            | Self::ToolResult { cache_control, .. }
            | Self::Image { cache_control, .. } => *cache_control = EPHEMERAL,
        }
    }
}

/// The arguments of an earlier call as the API wants them back: an object. Arguments the
/// model wrote invalid (and was told so) are kept as a string inside one.
fn tool_input(arguments: &str) -> Json {
    match serde_json::from_str::<Json>(arguments) {
        Ok(object @ Json::Object(_)) => object,
        _ => serde_json::json!({ "invalid_arguments": arguments }),
    }
}

/// The request body for `model`. Consecutive tool results travel in one user message, as the
/// API asks.
pub fn request_body(model: &str, request: &Request) -> Vec<u8> {
    let mut messages: Vec<WireMessage> = Vec::with_capacity(request.messages.len());
    for message in &request.messages {
        match message {
            // A user's message after tool results (steering, a later turn's first message)
            // joins their user turn: the roles alternate.
            Message::User(_) | Message::Image { .. } => {
                let block = match message {
                    Message::User(text) => Block::Text {
                        text,
                        cache_control: None,
                    },
                    Message::Image { media_type, data } => Block::Image {
                        source: ImageSource {
                            r#type: "base64",
                            media_type,
                            data,
                        },
                        cache_control: None,
                    },
                    _ => unreachable!("a user message or an image"),
                };
                match messages.last_mut() {
                    Some(last) if last.role == "user" => last.content.push(block),
                    _ => messages.push(WireMessage {
                        role: "user",
                        content: vec![block],
                    }),
                }
            }
            Message::Assistant { text, tool_calls } => {
                let mut content = Vec::with_capacity(tool_calls.len() + 1);
                if !text.is_empty() {
                    content.push(Block::Text {
                        text,
                        cache_control: None,
                    });
                }
                content.extend(tool_calls.iter().map(|call| Block::ToolUse {
                    id: &call.id,
                    name: &call.name,
                    input: tool_input(&call.arguments),
                    cache_control: None,
                }));
                // The API refuses an empty turn; an empty answer carries nothing to keep.
                if !content.is_empty() {
                    messages.push(WireMessage {
                        role: "assistant",
                        content,
                    });
                }
            }
            Message::ToolResult {
                call_id,
                content,
                is_error,
            } => {
                let block = Block::ToolResult {
                    tool_use_id: call_id,
                    content,
                    is_error: *is_error,
                    cache_control: None,
                };
                match messages.last_mut() {
                    Some(last)
                        if last.role == "user"
                            && matches!(last.content.last(), Some(Block::ToolResult { .. })) =>
                    {
                        last.content.push(block)
                    }
                    _ => messages.push(WireMessage {
                        role: "user",
                        content: vec![block],
                    }),
                }
            }
        }
    }
    if let Some(block) = messages.last_mut().and_then(|m| m.content.last_mut()) {
        block.mark();
    }
    let tool_count = request.tools.len();
    let body = Body {
        model,
        max_tokens: request.sampling.max_tokens,
        stream: true,
        temperature: request.sampling.temperature,
        tools: request
            .tools
            .iter()
            .enumerate()
            .map(|(i, tool)| Tool {
                name: &tool.name,
                description: &tool.description,
                input_schema: &tool.parameters,
                cache_control: if i + 1 == tool_count { EPHEMERAL } else { None },
            })
            .collect(),
        system: if request.system.is_empty() {
            Vec::new()
        } else {
            vec![Block::Text {
                text: &request.system,
                cache_control: EPHEMERAL,
            }]
        },
        messages,
    };
    serde_json::to_vec(&body).expect("a request body always serialises")
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireEvent {
    MessageStart {
        message: StartMessage,
    },
    ContentBlockStart {
        index: usize,
        content_block: StartBlock,
    },
    ContentBlockDelta {
        index: usize,
        delta: BlockDelta,
    },
    ContentBlockStop {
        index: usize,
    },
    MessageDelta {
        delta: MessageDelta,
        usage: Option<WireUsage>,
    },
    MessageStop,
    Error {
        error: Json,
    },
    /// `ping`, and event types added after this client was written.
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
struct StartMessage {
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum StartBlock {
    ToolUse {
        id: String,
        name: String,
    },
    /// Text (its deltas carry the text) and thinking blocks, which are not shown.
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum BlockDelta {
    TextDelta {
        text: String,
    },
    InputJsonDelta {
        partial_json: String,
    },
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
struct MessageDelta {
    stop_reason: Option<String>,
}

#[derive(Deserialize)]
struct WireUsage {
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    cache_creation_input_tokens: Option<u64>,
    cache_read_input_tokens: Option<u64>,
}

struct OpenCall {
    block: usize,
    call: ToolCall,
    closed: bool,
}

#[derive(Default)]
pub(crate) struct AnthropicDecoder {
    calls: Vec<OpenCall>,
    /// Uncached input, cache reads, cache writes, output, as last reported.
    input: u64,
    cache_read: u64,
    cache_write: u64,
    output: u64,
    saw_usage: bool,
    stop: Option<FinishReason>,
}

impl AnthropicDecoder {
    fn take_usage(&mut self, usage: WireUsage) {
        self.saw_usage = true;
        // message_delta repeats cumulative counts; a field it omits keeps its earlier value.
        self.input = usage.input_tokens.unwrap_or(self.input);
        self.output = usage.output_tokens.unwrap_or(self.output);
        self.cache_write = usage
            .cache_creation_input_tokens
            .unwrap_or(self.cache_write);
        self.cache_read = usage.cache_read_input_tokens.unwrap_or(self.cache_read);
    }

    fn call_of_block(&mut self, block: usize) -> Option<(usize, &mut OpenCall)> {
        self.calls
            .iter_mut()
            .enumerate()
            .find(|(_, open)| open.block == block && !open.closed)
    }
}

impl Decoder for AnthropicDecoder {
    fn event(&mut self, sse: &SseEvent, out: &mut Vec<Event>) -> Result<bool, Fault> {
        let event: WireEvent = serde_json::from_str(&sse.data).map_err(|err| {
            Fault::Protocol(format!(
                "a stream event is not what the Messages API sends: {err}"
            ))
        })?;
        match event {
            WireEvent::MessageStart { message } => {
                if let Some(usage) = message.usage {
                    self.take_usage(usage);
                }
            }
            WireEvent::ContentBlockStart {
                index: block,
                content_block: StartBlock::ToolUse { id, name },
            } => {
                let index = self.calls.len();
                out.push(Event::ToolCallStart {
                    index,
                    id: id.clone(),
                    name: name.clone(),
                });
                self.calls.push(OpenCall {
                    block,
                    call: ToolCall {
                        id,
                        name,
                        arguments: String::new(),
                    },
                    closed: false,
                });
            }
            WireEvent::ContentBlockStart { .. } => {}
            WireEvent::ContentBlockDelta {
                index: block,
                delta,
            } => match delta {
                BlockDelta::TextDelta { text } if !text.is_empty() => {
                    out.push(Event::TextDelta(text))
                }
                BlockDelta::InputJsonDelta { partial_json } if !partial_json.is_empty() => {
                    let Some((index, open)) = self.call_of_block(block) else {
                        return Err(Fault::Protocol(format!(
                            "arguments for block {block}, which is not a tool call"
                        )));
                    };
                    open.call.arguments.push_str(&partial_json);
                    out.push(Event::ToolCallArgs {
                        index,
                        fragment: partial_json,
                    });
                }
                _ => {}
            },
            WireEvent::ContentBlockStop { index: block } => {
                if let Some((index, open)) = self.call_of_block(block) {
                    open.closed = true;
                    let mut call = open.call.clone();
                    if call.arguments.trim().is_empty() {
                        call.arguments = "{}".to_owned();
                    }
                    out.push(Event::ToolCallEnd { index, call });
                }
            }
            WireEvent::MessageDelta { delta, usage } => {
                if let Some(usage) = usage {
                    self.take_usage(usage);
                }
                if let Some(reason) = delta.stop_reason {
                    self.stop = Some(match reason.as_str() {
                        "end_turn" | "stop_sequence" => FinishReason::Stop,
                        "tool_use" => FinishReason::ToolCalls,
                        "max_tokens" | "model_context_window_exceeded" => FinishReason::Length,
                        "refusal" => FinishReason::ContentFilter,
                        _ => FinishReason::Other(reason),
                    });
                }
            }
            WireEvent::MessageStop => {
                let Some(stop) = self.stop.take() else {
                    return Err(Fault::Protocol(
                        "message_stop without a stop reason".to_owned(),
                    ));
                };
                if self.calls.iter().any(|open| !open.closed) {
                    return Err(Fault::Protocol(
                        "message_stop with a tool call still open".to_owned(),
                    ));
                }
                if self.saw_usage {
                    out.push(Event::Usage(Usage {
                        input: self.input + self.cache_read + self.cache_write,
                        cached_input: self.cache_read,
                        output: self.output,
                        cache_write: self.cache_write,
                    }));
                }
                out.push(Event::Finish(stop));
                return Ok(true);
            }
            WireEvent::Error { error } => {
                let kind = error.get("type").and_then(Json::as_str).unwrap_or("");
                let detail = error
                    .get("message")
                    .and_then(Json::as_str)
                    .map_or_else(|| error.to_string(), |message| format!("{kind}: {message}"));
                return Err(Fault::Provider {
                    detail,
                    retriable: matches!(
                        kind,
                        "overloaded_error" | "api_error" | "rate_limit_error"
                    ),
                });
            }
            WireEvent::Other => {}
        }
        Ok(false)
    }

    fn end(&mut self, _out: &mut Vec<Event>) -> Result<(), Fault> {
        Err(Fault::Incomplete)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::types::{Sampling, ToolSchema};

    fn decode(body: &str, chunk: usize) -> Result<Vec<Event>, String> {
        crate::llm::transport::decode_in_chunks(AnthropicDecoder::default(), body, chunk)
    }

    const TOOL_USE: &str = concat!(
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"usage\":{\"input_tokens\":12,\"cache_creation_input_tokens\":300,\"cache_read_input_tokens\":2000,\"output_tokens\":1}}}\n\n",
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
        "event: ping\ndata: {\"type\":\"ping\"}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Let me look.\"}}\n\n",
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"read_file\",\"input\":{}}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"path\\\": \\\"sr\"}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"c/a.rs\\\"}\"}}\n\n",
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n",
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":2,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_2\",\"name\":\"list_dir\",\"input\":{}}}\n\n",
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":2}\n\n",
        "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":57}}\n\n",
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
    );

    #[test]
    fn an_image_is_a_base64_block_of_the_users_turn() {
        let request = Request {
            messages: vec![
                Message::User("what is this?".into()),
                Message::Image {
                    media_type: "image/jpeg".into(),
                    data: "/9j/4AAQ".into(),
                },
            ],
            ..Request::default()
        };
        let body: serde_json::Value =
            serde_json::from_slice(&request_body("claude-sonnet-4-5", &request)).unwrap();
        let messages = body["messages"].as_array().unwrap();
        assert_eq!(messages.len(), 1, "{body}");
        let image = &messages[0]["content"][1];
        assert_eq!(image["type"], "image", "{body}");
        assert_eq!(
            image["source"],
            serde_json::json!({"type": "base64", "media_type": "image/jpeg", "data": "/9j/4AAQ"})
        );
    }

    #[test]
    fn tool_use_blocks_become_calls_and_usage_counts_the_cache() {
        for chunk in [1, 13, TOOL_USE.len()] {
            let events = decode(TOOL_USE, chunk).unwrap();
            assert_eq!(events[0], Event::TextDelta("Let me look.".into()));
            assert_eq!(
                events[1],
                Event::ToolCallStart {
                    index: 0,
                    id: "toolu_1".into(),
                    name: "read_file".into()
                }
            );
            let ends: Vec<_> = events
                .iter()
                .filter_map(|event| match event {
                    Event::ToolCallEnd { index, call } => Some((*index, call.arguments.clone())),
                    _ => None,
                })
                .collect();
            assert_eq!(
                ends,
                vec![
                    (0, r#"{"path": "src/a.rs"}"#.to_owned()),
                    (1, "{}".to_owned())
                ]
            );
            assert_eq!(
                events[events.len() - 2],
                Event::Usage(Usage {
                    input: 2312,
                    cached_input: 2000,
                    output: 57,
                    cache_write: 300
                })
            );
            assert_eq!(events.last(), Some(&Event::Finish(FinishReason::ToolCalls)));
        }
    }

    #[test]
    fn error_events_and_cut_streams_are_faults() {
        let overloaded = "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n";
        let fault = decode(overloaded, 7).unwrap_err();
        assert!(
            fault.contains("retriable: true") && fault.contains("Overloaded"),
            "{fault}"
        );
        let cut = &TOOL_USE[..TOOL_USE.len() / 2];
        assert_eq!(decode(cut, 9), Err("Incomplete".to_owned()));
    }

    #[test]
    fn breakpoints_mark_tools_system_and_the_last_history_block() {
        let request = Request {
            system: "sys".into(),
            tools: vec![
                ToolSchema {
                    name: "grep".into(),
                    description: "search".into(),
                    parameters: serde_json::json!({"type": "object"}),
                },
                ToolSchema {
                    name: "read_file".into(),
                    description: "read".into(),
                    parameters: serde_json::json!({"type": "object"}),
                },
            ],
            messages: vec![
                Message::User("task".into()),
                Message::Assistant {
                    text: String::new(),
                    tool_calls: vec![
                        ToolCall {
                            id: "t1".into(),
                            name: "grep".into(),
                            arguments: r#"{"pattern":"x"}"#.into(),
                        },
                        ToolCall {
                            id: "t2".into(),
                            name: "read_file".into(),
                            arguments: r#"{"path":"#.into(),
                        },
                    ],
                },
                Message::ToolResult {
                    call_id: "t1".into(),
                    content: "a.rs:1".into(),
                    is_error: false,
                },
                Message::ToolResult {
                    call_id: "t2".into(),
                    content: "invalid arguments".into(),
                    is_error: true,
                },
            ],
            sampling: Sampling {
                temperature: None,
                max_tokens: 1000,
            },
            cache_key: Some("ignored".into()),
            prediction: None,
            single_attempt: false,
        };
        let body = String::from_utf8(request_body("claude-sonnet-4-5", &request)).unwrap();
        let expected = concat!(
            r#"{"model":"claude-sonnet-4-5","max_tokens":1000,"stream":true,"#,
            r#""tools":[{"name":"grep","description":"search","input_schema":{"type":"object"}},"#,
            r#"{"name":"read_file","description":"read","input_schema":{"type":"object"},"cache_control":{"type":"ephemeral"}}],"#,
            r#""system":[{"type":"text","text":"sys","cache_control":{"type":"ephemeral"}}],"#,
            r#""messages":[{"role":"user","content":[{"type":"text","text":"task"}]},"#,
            r#"{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"grep","input":{"pattern":"x"}},"#,
            r#"{"type":"tool_use","id":"t2","name":"read_file","input":{"invalid_arguments":"{\"path\":"}}]},"#,
            r#"{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"a.rs:1"},"#,
            r#"{"type":"tool_result","tool_use_id":"t2","content":"invalid arguments","is_error":true,"cache_control":{"type":"ephemeral"}}]}]}"#,
        );
        assert_eq!(body, expected);
    }
}
