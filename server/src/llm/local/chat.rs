//! The chat protocol of the local model: the ChatML prompt SmolLM2 (and Qwen-style models)
//! are trained on, tools described and called the Hermes way (`<tools>` in the system turn,
//! `<tool_call>{"name", "arguments"}</tool_call>` in the answer, `<tool_response>` in the next
//! user turn), and the decoder that turns chosen tokens into the same [`Event`]s the remote
//! clients stream.

use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::json;

use super::LocalError;
use super::constraint::{CallGrammar, Part};
use super::generate::{Flow, Policy};
use super::tokenizer::{Tokenizer, Utf8Stream};
use crate::llm::types::{Event, Message, Request, ToolCall};
use wright_kernels::choice::argmax;

const CALL_OPEN: &str = "<tool_call>";

/// SmolLM2's own system prompt, used when the request has none (as its chat template does).
const DEFAULT_SYSTEM: &str = "You are a helpful AI assistant named SmolLM, trained by Hugging Face";

/// The ChatML text of a request, ending with the open assistant turn.
pub fn render(request: &Request) -> String {
    let mut system = if request.system.trim().is_empty() {
        DEFAULT_SYSTEM.to_owned()
    } else {
        request.system.clone()
    };
    if !request.tools.is_empty() {
        system.push_str(
            "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n\
             You are provided with function signatures within <tools></tools> XML tags:\n<tools>",
        );
        for tool in &request.tools {
            let schema = json!({
                "type": "function",
                "function": {
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.parameters,
                }
            });
            system.push('\n');
            system.push_str(&schema.to_string());
        }
        system.push_str(
            "\n</tools>\n\nFor each function call, return a json object with function name and \
             arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": \
             <function-name>, \"arguments\": <args-json-object>}\n</tool_call>",
        );
    }
    let mut text = format!("<|im_start|>system\n{system}<|im_end|>\n");
    let mut in_tool_results = false;
    for message in &request.messages {
        let is_result = matches!(message, Message::ToolResult { .. });
        if in_tool_results && !is_result {
            text.push_str("<|im_end|>\n");
        }
        match message {
            Message::User(content) => {
                text.push_str(&format!("<|im_start|>user\n{content}<|im_end|>\n"));
            }
            // The local model reads no images (messages with one are refused before they get
            // here); an image from an earlier model's turn is named, not shown.
            Message::Image { media_type, .. } => {
                text.push_str(&format!(
                    "<|im_start|>user\n[an image ({media_type}) the user attached]<|im_end|>\n"
                ));
            }
            Message::Assistant {
                text: content,
                tool_calls,
            } => {
                text.push_str("<|im_start|>assistant\n");
                text.push_str(content);
                for call in tool_calls {
                    let arguments = if call.arguments.trim().is_empty() {
                        "{}"
                    } else {
                        call.arguments.as_str()
                    };
                    if !text.ends_with('\n') {
                        text.push('\n');
                    }
                    text.push_str(&format!(
                        "<tool_call>\n{{\"name\": {}, \"arguments\": {arguments}}}\n</tool_call>",
                        json!(call.name)
                    ));
                }
                text.push_str("<|im_end|>\n");
            }
            Message::ToolResult {
                content, is_error, ..
            } => {
                if !in_tool_results {
                    text.push_str("<|im_start|>user");
                }
                let status = if *is_error { " (error)" } else { "" };
                text.push_str(&format!(
                    "\n<tool_response{status}>\n{content}\n</tool_response>"
                ));
            }
        }
        in_tool_results = is_result;
    }
    if in_tool_results {
        text.push_str("<|im_end|>\n");
    }
    text.push_str("<|im_start|>assistant\n");
    text
}

/// The first line of `prediction` (newline included) when it opens a fenced code block.
pub fn fence_opening(prediction: &str) -> Option<&str> {
    let line = &prediction[..prediction.find('\n')? + 1];
    line.starts_with("```").then_some(line)
}

/// Tool call ids unique in the process, as remote providers' are.
static NEXT_CALL: AtomicU64 = AtomicU64::new(1);

enum Mode<'t> {
    Text,
    Call {
        grammar: CallGrammar<'t>,
        arguments: Vec<u8>,
        arguments_stream: Utf8Stream,
    },
}

/// Greedy decoding of a chat answer into events; tool calls constrained to the grammar.
pub struct ChatDecoder<'a> {
    tokenizer: &'a Tokenizer,
    tools: &'a [String],
    mode: Mode<'a>,
    text: Utf8Stream,
    /// Text not yet emitted because it may be the start of `<tool_call>`.
    held: String,
    calls: Vec<ToolCall>,
    emit: &'a mut dyn FnMut(Event) -> bool,
    /// Tokens by logit, reused between steps of a constrained call.
    ranking: Vec<u32>,
}

impl<'a> ChatDecoder<'a> {
    pub fn new(
        tokenizer: &'a Tokenizer,
        tools: &'a [String],
        emit: &'a mut dyn FnMut(Event) -> bool,
    ) -> Self {
        Self {
            tokenizer,
            tools,
            mode: Mode::Text,
            text: Utf8Stream::default(),
            held: String::new(),
            calls: Vec::new(),
            emit,
            ranking: Vec::new(),
        }
    }

    pub fn calls(&self) -> &[ToolCall] {
        &self.calls
    }

    /// Whether the answer stopped inside a tool call (its budget ran out).
    pub fn in_call(&self) -> bool {
        matches!(self.mode, Mode::Call { .. })
    }

    fn send(&mut self, event: Event) -> Result<(), LocalError> {
        if (self.emit)(event) {
            Ok(())
        } else {
            Err(LocalError::Cancelled)
        }
    }

    /// Emits held text that can no longer be the start of a tool call.
    fn flush_text(&mut self, all: bool) -> Result<(), LocalError> {
        let keep = if all {
            0
        } else {
            (1..CALL_OPEN.len())
                .rev()
                .find(|n| self.held.ends_with(&CALL_OPEN[..*n]))
                .unwrap_or(0)
        };
        let cut = self.held.len() - keep;
        if cut > 0 {
            let text: String = self.held.drain(..cut).collect();
            self.send(Event::TextDelta(text))?;
        }
        Ok(())
    }

    /// Ends the answer: the text still held back goes out.
    pub fn finish(&mut self) -> Result<(), LocalError> {
        let rest = self.text.finish();
        self.held.push_str(&rest);
        self.flush_text(true)
    }

    fn feed_call(&mut self, bytes: &[u8]) -> Result<(), LocalError> {
        for &byte in bytes {
            let Mode::Call {
                grammar,
                arguments,
                arguments_stream,
            } = &mut self.mode
            else {
                return Err(LocalError::Degenerate(
                    "the model wrote past the end of its tool call in one token".into(),
                ));
            };
            let part = grammar.feed(byte).ok_or_else(|| {
                LocalError::Degenerate(format!(
                    "the model's tool call is not valid after {:?}",
                    String::from_utf8_lossy(arguments)
                ))
            })?;
            match part {
                Part::Envelope | Part::Name => {}
                Part::NameEnd => {
                    let index = self.calls.len();
                    let name = grammar.name();
                    let id = format!("local_{}", NEXT_CALL.fetch_add(1, Ordering::Relaxed));
                    self.calls.push(ToolCall {
                        id: id.clone(),
                        name: name.clone(),
                        arguments: String::new(),
                    });
                    self.send(Event::ToolCallStart { index, id, name })?;
                }
                Part::Arguments | Part::ArgumentsEnd => {
                    arguments.push(byte);
                    let fragment = arguments_stream.push(&[byte]);
                    if !fragment.is_empty() {
                        let index = self.calls.len() - 1;
                        self.send(Event::ToolCallArgs { index, fragment })?;
                    }
                }
                Part::End => {
                    let Mode::Call { arguments, .. } =
                        std::mem::replace(&mut self.mode, Mode::Text)
                    else {
                        unreachable!("matched above")
                    };
                    let index = self.calls.len() - 1;
                    let call = &mut self.calls[index];
                    call.arguments = String::from_utf8_lossy(&arguments).into_owned();
                    let call = call.clone();
                    self.send(Event::ToolCallEnd { index, call })?;
                }
            }
        }
        Ok(())
    }
}

impl Policy for ChatDecoder<'_> {
    fn choose(&mut self, logits: &[f32]) -> Result<u32, LocalError> {
        let Mode::Call { grammar, .. } = &self.mode else {
            return Ok(argmax(logits));
        };
        let allowed = |id: u32| {
            self.tokenizer
                .token_bytes(id)
                .is_some_and(|bytes| !bytes.is_empty() && grammar.accepts(bytes))
        };
        let best = argmax(logits);
        if allowed(best) {
            return Ok(best);
        }
        // Rarely needed (the model usually writes valid JSON): rank every token, take the
        // most likely one the grammar allows. Ties keep the lower id, as `argmax` does.
        let usable = logits.len().min(self.tokenizer.vocab_size());
        self.ranking.clear();
        self.ranking.extend(0..usable as u32);
        self.ranking.sort_by(|a, b| {
            logits[*b as usize]
                .total_cmp(&logits[*a as usize])
                .then(a.cmp(b))
        });
        self.ranking
            .iter()
            .copied()
            .find(|id| allowed(*id))
            .ok_or_else(|| {
                LocalError::Degenerate("no token of the vocabulary continues the tool call".into())
            })
    }

    fn constrained(&self) -> bool {
        self.in_call()
    }

    fn accept(&mut self, token: u32) -> Result<Flow, LocalError> {
        let Some(bytes) = self.tokenizer.token_bytes(token) else {
            // A control token (`<|im_end|>`, end of text): the turn is over.
            return Ok(Flow::Stop);
        };
        if self.in_call() {
            self.feed_call(bytes)?;
            return Ok(Flow::Continue);
        }
        let piece = self.text.push(bytes);
        self.held.push_str(&piece);
        if let Some(at) = self.held.find(CALL_OPEN) {
            let after = self.held.split_off(at + CALL_OPEN.len());
            self.held.truncate(at);
            let before = self.held.trim_end().to_owned();
            self.held.clear();
            if !before.is_empty() {
                self.send(Event::TextDelta(before))?;
            }
            self.mode = Mode::Call {
                grammar: CallGrammar::new(self.tools),
                arguments: Vec::new(),
                arguments_stream: Utf8Stream::default(),
            };
            // The rest of the token that completed the tag is the call's first bytes.
            self.feed_call(after.as_bytes())?;
            return Ok(Flow::Continue);
        }
        self.flush_text(false)?;
        Ok(Flow::Continue)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::types::ToolSchema;

    #[test]
    fn only_a_fenced_prediction_opens_the_answer() {
        assert_eq!(
            fence_opening("```rust\nfn main() {}\n```"),
            Some("```rust\n")
        );
        assert_eq!(fence_opening("fn main() {}\n"), None);
        assert_eq!(fence_opening("```"), None, "a fence with no line after it");
    }

    #[test]
    fn a_transcript_renders_as_chatml_with_tools_and_results() {
        let request = Request {
            system: "Be brief.".into(),
            tools: vec![ToolSchema {
                name: "read_file".into(),
                description: "Reads a file".into(),
                parameters: json!({"type": "object"}),
            }],
            messages: vec![
                Message::User("Show main.rs".into()),
                Message::Assistant {
                    text: "Reading.".into(),
                    tool_calls: vec![ToolCall {
                        id: "c1".into(),
                        name: "read_file".into(),
                        arguments: r#"{"path":"main.rs"}"#.into(),
                    }],
                },
                Message::ToolResult {
                    call_id: "c1".into(),
                    content: "fn main() {}".into(),
                    is_error: false,
                },
            ],
            ..Request::default()
        };
        let text = render(&request);
        assert!(
            text.starts_with("<|im_start|>system\nBe brief.\n\n# Tools"),
            "{text}"
        );
        assert!(text.contains(r#""name":"read_file""#), "{text}");
        assert!(text.contains(
            "<|im_start|>assistant\nReading.\n<tool_call>\n{\"name\": \"read_file\", \
             \"arguments\": {\"path\":\"main.rs\"}}\n</tool_call><|im_end|>\n"
        ));
        assert!(text.ends_with(
            "<|im_start|>user\n<tool_response>\nfn main() {}\n</tool_response><|im_end|>\n\
             <|im_start|>assistant\n"
        ));
        let plain = render(&Request {
            messages: vec![Message::User("hi".into())],
            ..Request::default()
        });
        assert_eq!(
            plain,
            format!(
                "<|im_start|>system\n{DEFAULT_SYSTEM}<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n\
                 <|im_start|>assistant\n"
            )
        );
    }
}
