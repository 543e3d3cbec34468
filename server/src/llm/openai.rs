//! The OpenAI-compatible Chat Completions client: OpenAI itself and the local servers that
//! speak its API (Ollama, llama.cpp, vLLM, LM Studio).
//!
//! The request body is serialised in a fixed key order with the stable parts first (settings,
//! tools, then the append-only messages), so each step's request extends the previous one
//! byte for byte and the provider's prefix cache holds. The stream's tool calls arrive as
//! deltas keyed by `index` (several calls in parallel); they are assembled here and closed
//! when the answer ends.

use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderValue};
use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

use super::error::LlmError;
use super::sse::SseEvent;
use super::transport::{self, Call, Decoder, EventStream, Fault, HttpSettings};
use super::types::{Event, FinishReason, Message, ModelId, Request, ToolCall, Usage};
use super::{ApiKey, ChatModel};

pub struct OpenAiClient {
    model: ModelId,
    url: String,
    key: Option<ApiKey>,
    http: reqwest::Client,
    settings: HttpSettings,
}

impl OpenAiClient {
    /// A client for `model` at `base_url` (ending in `/v1` for most servers). A local server
    /// needs no key.
    pub fn new(
        model: ModelId,
        base_url: &str,
        key: Option<ApiKey>,
        settings: HttpSettings,
    ) -> Result<Self, LlmError> {
        Ok(Self {
            url: format!("{}/chat/completions", base_url.trim_end_matches('/')),
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

impl ChatModel for OpenAiClient {
    fn takes_images(&self) -> bool {
        true
    }

    fn model(&self) -> &ModelId {
        &self.model
    }

    fn stream(&self, request: &Request) -> EventStream {
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert("accept", HeaderValue::from_static("text/event-stream"));
        if let Some(key) = &self.key {
            match key.header_value("Bearer ") {
                Ok(value) => {
                    headers.insert(AUTHORIZATION, value);
                }
                Err(kind) => {
                    return EventStream::from_items(vec![Err(LlmError::new(&self.model, kind))]);
                }
            }
        }
        let call = Call {
            model: self.model.clone(),
            url: self.url.clone(),
            headers,
            body: self.request_body(request),
            key: self.key.as_ref().map(|key| key.expose().to_owned()),
        };
        let mut settings = self.settings.clone();
        if request.single_attempt {
            settings.max_attempts = 1;
        }
        transport::spawn(self.http.clone(), settings, call, || {
            Box::<OpenAiDecoder>::default()
        })
    }
}

/// Models that accept predicted outputs (`prediction`).
pub fn supports_prediction(model: &str) -> bool {
    let name = model.rsplit('/').next().unwrap_or(model);
    name.starts_with("gpt-4o") || name.starts_with("gpt-4.1")
}

/// Reasoning models take `max_completion_tokens` and no `temperature`.
fn is_reasoning(model: &str) -> bool {
    let name = model.rsplit('/').next().unwrap_or(model);
    ["o1", "o3", "o4", "gpt-5"]
        .iter()
        .any(|prefix| name.starts_with(prefix))
}

#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    stream: bool,
    stream_options: StreamOptions,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_completion_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt_cache_key: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    parallel_tool_calls: Option<bool>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<Tool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    prediction: Option<Prediction<'a>>,
    messages: Vec<WireMessage<'a>>,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[derive(Serialize)]
struct Tool<'a> {
    r#type: &'static str,
    function: Function<'a>,
}

#[derive(Serialize)]
struct Function<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a Json,
}

#[derive(Serialize)]
struct Prediction<'a> {
    r#type: &'static str,
    content: &'a str,
}

#[derive(Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
enum WireMessage<'a> {
    System {
        content: &'a str,
    },
    User {
        content: UserContent<'a>,
    },
    Assistant {
        content: Option<&'a str>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<WireCall<'a>>,
    },
    Tool {
        tool_call_id: &'a str,
        content: &'a str,
    },
}

/// A user message's content: text, or text and images as parts.
#[derive(Serialize)]
#[serde(untagged)]
enum UserContent<'a> {
    Text(&'a str),
    Parts(Vec<Part<'a>>),
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Part<'a> {
    Text { text: &'a str },
    ImageUrl { image_url: ImageUrl },
}

#[derive(Serialize)]
struct ImageUrl {
    /// A `data:` URL.
    url: String,
}

#[derive(Serialize)]
struct WireCall<'a> {
    id: &'a str,
    r#type: &'static str,
    function: WireFunction<'a>,
}

#[derive(Serialize)]
struct WireFunction<'a> {
    name: &'a str,
    arguments: &'a str,
}

/// The request body for `model`. Tool results carry no error flag in this API: the agent
/// words a failed call's content so the model sees it failed.
pub fn request_body(model: &str, request: &Request) -> Vec<u8> {
    let reasoning = is_reasoning(model);
    let mut messages = Vec::with_capacity(request.messages.len() + 1);
    if !request.system.is_empty() {
        messages.push(WireMessage::System {
            content: &request.system,
        });
    }
    for message in &request.messages {
        if let Message::Image { media_type, data } = message {
            // An image joins the user message before it, whose text becomes a part.
            let image = Part::ImageUrl {
                image_url: ImageUrl {
                    url: format!("data:{media_type};base64,{data}"),
                },
            };
            match messages.last_mut() {
                Some(WireMessage::User { content }) => {
                    let parts = match std::mem::replace(content, UserContent::Parts(Vec::new())) {
                        UserContent::Text(text) => vec![Part::Text { text }, image],
                        UserContent::Parts(mut parts) => {
                            parts.push(image);
                            parts
                        }
                    };
                    *content = UserContent::Parts(parts);
                }
                _ => messages.push(WireMessage::User {
                    content: UserContent::Parts(vec![image]),
                }),
            }
            continue;
        }
        messages.push(match message {
            Message::User(text) => WireMessage::User {
                content: UserContent::Text(text),
            },
            Message::Image { .. } => unreachable!("images joined the user message above"),
            Message::Assistant { text, tool_calls } => WireMessage::Assistant {
                content: (!text.is_empty() || tool_calls.is_empty()).then_some(text.as_str()),
                tool_calls: tool_calls
                    .iter()
                    .map(|call| WireCall {
                        id: &call.id,
                        r#type: "function",
                        function: WireFunction {
                            name: &call.name,
                            arguments: &call.arguments,
                        },
                    })
                    .collect(),
            },
            Message::ToolResult {
                call_id, content, ..
            } => WireMessage::Tool {
                tool_call_id: call_id,
                content,
            },
        });
    }
    let prediction = request
        .prediction
        .as_deref()
        .filter(|_| supports_prediction(model) && request.tools.is_empty());
    let body = Body {
        model,
        stream: true,
        stream_options: StreamOptions {
            include_usage: true,
        },
        temperature: request.sampling.temperature.filter(|_| !reasoning),
        max_tokens: (!reasoning).then_some(request.sampling.max_tokens),
        max_completion_tokens: reasoning.then_some(request.sampling.max_tokens),
        prompt_cache_key: request.cache_key.as_deref(),
        parallel_tool_calls: (!request.tools.is_empty()).then_some(true),
        tools: request
            .tools
            .iter()
            .map(|tool| Tool {
                r#type: "function",
                function: Function {
                    name: &tool.name,
                    description: &tool.description,
                    parameters: &tool.parameters,
                },
            })
            .collect(),
        prediction: prediction.map(|content| Prediction {
            r#type: "content",
            content,
        }),
        messages,
    };
    serde_json::to_vec(&body).expect("a request body always serialises")
}

#[derive(Deserialize)]
struct Chunk {
    #[serde(default)]
    choices: Vec<Choice>,
    usage: Option<WireUsage>,
    error: Option<Json>,
}

#[derive(Deserialize)]
struct Choice {
    delta: Option<Delta>,
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Delta {
    content: Option<String>,
    tool_calls: Option<Vec<DeltaCall>>,
}

#[derive(Deserialize)]
struct DeltaCall {
    index: Option<usize>,
    id: Option<String>,
    function: Option<DeltaFunction>,
}

#[derive(Deserialize)]
struct DeltaFunction {
    name: Option<String>,
    arguments: Option<String>,
}

#[derive(Deserialize)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
    prompt_tokens_details: Option<PromptDetails>,
}

#[derive(Deserialize)]
struct PromptDetails {
    cached_tokens: Option<u64>,
}

/// A tool call being assembled from its deltas.
struct Partial {
    /// The `index` the server gave it.
    wire_index: Option<usize>,
    id: String,
    name: String,
    arguments: String,
    started: bool,
}

#[derive(Default)]
pub(crate) struct OpenAiDecoder {
    calls: Vec<Partial>,
    finish: Option<FinishReason>,
    usage: Option<Usage>,
}

impl OpenAiDecoder {
    /// Which call a delta belongs to. The index is the key; servers that omit it (some local
    /// ones) send one call at a time, so a new id starts a new call.
    fn slot(&mut self, delta: &DeltaCall) -> usize {
        let found = match delta.index {
            Some(index) => self
                .calls
                .iter()
                .position(|call| call.wire_index == Some(index)),
            None => match &delta.id {
                Some(id) => self.calls.iter().position(|call| &call.id == id),
                None => self.calls.len().checked_sub(1),
            },
        };
        found.unwrap_or_else(|| {
            self.calls.push(Partial {
                wire_index: delta.index,
                id: String::new(),
                name: String::new(),
                arguments: String::new(),
                started: false,
            });
            self.calls.len() - 1
        })
    }

    fn take_call(&mut self, delta: DeltaCall, out: &mut Vec<Event>) {
        let index = self.slot(&delta);
        let call = &mut self.calls[index];
        if let Some(id) = delta.id.filter(|id| !id.is_empty()) {
            call.id = id;
        }
        let (name, arguments) = match delta.function {
            Some(function) => (function.name, function.arguments),
            None => (None, None),
        };
        if let Some(name) = name.filter(|name| !name.is_empty()) {
            call.name.push_str(&name);
        }
        if let Some(fragment) = arguments.filter(|fragment| !fragment.is_empty()) {
            call.arguments.push_str(&fragment);
            if call.started {
                out.push(Event::ToolCallArgs { index, fragment });
            }
        }
        if !call.started && !call.name.is_empty() {
            call.started = true;
            if call.id.is_empty() {
                call.id = format!("call_{index}");
            }
            out.push(Event::ToolCallStart {
                index,
                id: call.id.clone(),
                name: call.name.clone(),
            });
            if !call.arguments.is_empty() {
                out.push(Event::ToolCallArgs {
                    index,
                    fragment: call.arguments.clone(),
                });
            }
        }
    }

    fn complete(&mut self, out: &mut Vec<Event>) -> Result<(), Fault> {
        let Some(finish) = self.finish.take() else {
            return Err(Fault::Incomplete);
        };
        for (index, call) in self.calls.drain(..).enumerate() {
            if !call.started {
                return Err(Fault::Protocol(format!("tool call {index} has no name")));
            }
            out.push(Event::ToolCallEnd {
                index,
                call: ToolCall {
                    id: call.id,
                    name: call.name,
                    arguments: if call.arguments.trim().is_empty() {
                        "{}".to_owned()
                    } else {
                        call.arguments
                    },
                },
            });
        }
        if let Some(usage) = self.usage.take() {
            out.push(Event::Usage(usage));
        }
        out.push(Event::Finish(finish));
        Ok(())
    }
}

impl Decoder for OpenAiDecoder {
    fn event(&mut self, sse: &SseEvent, out: &mut Vec<Event>) -> Result<bool, Fault> {
        if sse.data.trim() == "[DONE]" {
            self.complete(out)?;
            return Ok(true);
        }
        let chunk: Chunk = serde_json::from_str(&sse.data)
            .map_err(|err| Fault::Protocol(format!("a stream chunk is not valid JSON: {err}")))?;
        if let Some(error) = chunk.error {
            let text = error.to_string();
            let retriable = ["server_error", "overloaded", "rate_limit"]
                .iter()
                .any(|word| text.contains(word));
            let detail = error
                .get("message")
                .and_then(Json::as_str)
                .map_or(text.clone(), str::to_owned);
            return Err(Fault::Provider { detail, retriable });
        }
        if let Some(usage) = chunk.usage {
            self.usage = Some(Usage {
                input: usage.prompt_tokens,
                cached_input: usage
                    .prompt_tokens_details
                    .and_then(|details| details.cached_tokens)
                    .unwrap_or(0),
                output: usage.completion_tokens,
                cache_write: 0,
            });
        }
        // One answer is asked for (no `n`): the first choice is the answer.
        if let Some(choice) = chunk.choices.into_iter().next() {
            if let Some(delta) = choice.delta {
                if let Some(text) = delta.content.filter(|text| !text.is_empty()) {
                    out.push(Event::TextDelta(text));
                }
                for call in delta.tool_calls.unwrap_or_default() {
                    self.take_call(call, out);
                }
            }
            if let Some(reason) = choice.finish_reason {
                self.finish = Some(match reason.as_str() {
                    "stop" => FinishReason::Stop,
                    "tool_calls" | "function_call" => FinishReason::ToolCalls,
                    "length" => FinishReason::Length,
                    "content_filter" => FinishReason::ContentFilter,
                    _ => FinishReason::Other(reason),
                });
            }
        }
        Ok(false)
    }

    fn end(&mut self, out: &mut Vec<Event>) -> Result<(), Fault> {
        // Some servers end the body without `[DONE]`; a finish reason means the answer is whole.
        self.complete(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::types::{Sampling, ToolSchema};

    fn decode(body: &str, chunk: usize) -> Result<Vec<Event>, String> {
        crate::llm::transport::decode_in_chunks(OpenAiDecoder::default(), body, chunk)
    }

    const PARALLEL: &str = concat!(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Reading.\"}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_a\",\"type\":\"function\",\"function\":{\"name\":\"read_file\",\"arguments\":\"\"}}]}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"pa\"}}]}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,\"id\":\"call_b\",\"type\":\"function\",\"function\":{\"name\":\"grep\",\"arguments\":\"{\\\"pattern\\\":\"}}]}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"th\\\":\\\"a.rs\\\"}\"}}]}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,\"function\":{\"arguments\":\"\\\"fn\\\"}\"}}]}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}],\"usage\":null}\n\n",
        "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":1200,\"completion_tokens\":40,\"prompt_tokens_details\":{\"cached_tokens\":1024}}}\n\n",
        "data: [DONE]\n\n",
    );

    #[test]
    fn parallel_tool_calls_are_assembled_from_interleaved_deltas() {
        for chunk in [1, 7, 64, PARALLEL.len()] {
            let events = decode(PARALLEL, chunk).unwrap();
            let ends: Vec<_> = events
                .iter()
                .filter_map(|event| match event {
                    Event::ToolCallEnd { index, call } => Some((*index, call.clone())),
                    _ => None,
                })
                .collect();
            assert_eq!(ends.len(), 2);
            assert_eq!(ends[0].1.arguments, r#"{"path":"a.rs"}"#);
            assert_eq!(ends[0].1.name, "read_file");
            assert_eq!((ends[1].0, ends[1].1.id.as_str()), (1, "call_b"));
            assert_eq!(ends[1].1.arguments, r#"{"pattern":"fn"}"#);
            let fragments: String = events
                .iter()
                .filter_map(|event| match event {
                    Event::ToolCallArgs { index: 1, fragment } => Some(fragment.as_str()),
                    _ => None,
                })
                .collect();
            assert_eq!(fragments, r#"{"pattern":"fn"}"#);
            assert_eq!(events[0], Event::TextDelta("Reading.".into()));
            assert_eq!(
                events[events.len() - 2],
                Event::Usage(Usage {
                    input: 1200,
                    cached_input: 1024,
                    output: 40,
                    cache_write: 0
                })
            );
            assert_eq!(events.last(), Some(&Event::Finish(FinishReason::ToolCalls)));
        }
    }

    #[test]
    fn a_stream_without_finish_is_incomplete_and_one_without_done_is_whole() {
        let cut = "data: {\"choices\":[{\"delta\":{\"content\":\"Hel\"}}]}\n\n";
        assert_eq!(decode(cut, 5), Err("Incomplete".to_owned()));
        let no_done =
            "data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"},\"finish_reason\":\"stop\"}]}\n\n";
        assert_eq!(
            decode(no_done, 5).unwrap(),
            vec![
                Event::TextDelta("Hi".into()),
                Event::Finish(FinishReason::Stop)
            ]
        );
    }

    #[test]
    fn calls_without_index_are_told_apart_by_id() {
        let body = concat!(
            "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"id\":\"x\",\"function\":{\"name\":\"outline\",\"arguments\":\"{}\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"id\":\"y\",\"function\":{\"name\":\"grep\",\"arguments\":\"{\\\"pattern\\\":\\\"a\\\"}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\n",
            "data: [DONE]\n\n",
        );
        let events = decode(body, 3).unwrap();
        let names: Vec<_> = events
            .iter()
            .filter_map(|event| match event {
                Event::ToolCallEnd { index, call } => Some((*index, call.name.as_str())),
                _ => None,
            })
            .collect();
        assert_eq!(names, vec![(0, "outline"), (1, "grep")]);
    }

    #[test]
    fn an_error_chunk_is_a_provider_fault() {
        let body =
            "data: {\"error\":{\"message\":\"overloaded, retry\",\"type\":\"server_error\"}}\n\n";
        let result = decode(body, 4);
        assert!(result.unwrap_err().contains("retriable: true"));
    }

    #[test]
    fn an_image_joins_its_user_message_as_a_data_url_part() {
        let request = Request {
            messages: vec![
                Message::User("what is this?".into()),
                Message::Image {
                    media_type: "image/png".into(),
                    data: "iVBORw0KGgo=".into(),
                },
                Message::User("and this".into()),
            ],
            ..Request::default()
        };
        let body: serde_json::Value =
            serde_json::from_slice(&request_body("gpt-4.1", &request)).unwrap();
        let messages = body["messages"].as_array().unwrap();
        assert_eq!(messages.len(), 2, "{body}");
        assert_eq!(
            messages[0]["content"],
            serde_json::json!([
                {"type": "text", "text": "what is this?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
            ])
        );
        assert_eq!(messages[1]["content"], "and this");
    }

    #[test]
    fn body_keys_are_in_a_fixed_order_and_capabilities_decide_parameters() {
        let request = Request {
            system: "sys".into(),
            tools: vec![ToolSchema {
                name: "grep".into(),
                description: "search".into(),
                parameters: serde_json::json!({"type": "object", "properties": {"pattern": {"type": "string"}}}),
            }],
            messages: vec![Message::User("hi".into())],
            sampling: Sampling {
                temperature: Some(0.0),
                max_tokens: 100,
            },
            cache_key: Some("session-1".into()),
            prediction: Some("fn main() {}".into()),
            single_attempt: false,
        };
        let body = String::from_utf8(request_body("gpt-4.1", &request)).unwrap();
        assert!(body.starts_with(
            r#"{"model":"gpt-4.1","stream":true,"stream_options":{"include_usage":true},"temperature":0.0,"max_tokens":100,"prompt_cache_key":"session-1","parallel_tool_calls":true,"tools":[{"type":"function","function":{"name":"grep""#
        ), "{body}");
        assert!(
            body.ends_with(
                r#""messages":[{"role":"system","content":"sys"},{"role":"user","content":"hi"}]}"#
            ),
            "{body}"
        );
        assert!(
            !body.contains("prediction"),
            "no predictions with tools: {body}"
        );

        let rewrite = Request {
            tools: Vec::new(),
            ..request.clone()
        };
        let body = String::from_utf8(request_body("gpt-4.1-mini", &rewrite)).unwrap();
        assert!(
            body.contains(r#""prediction":{"type":"content","content":"fn main() {}"}"#),
            "{body}"
        );
        assert!(!body.contains("parallel_tool_calls"));
        let body = String::from_utf8(request_body("qwen2.5-coder:7b", &rewrite)).unwrap();
        assert!(!body.contains("prediction"));
        let body = String::from_utf8(request_body("o4-mini", &rewrite)).unwrap();
        assert!(
            body.contains(r#""max_completion_tokens":100"#) && !body.contains("temperature"),
            "{body}"
        );
    }
}
