//! A session's events as ACP `session/update`s: the model's text as `agent_message_chunk`, a
//! tool call as `tool_call` (its kind, title and locations) and its result as
//! `tool_call_update` (a diff for each file an edit changed, the output as text), the plan,
//! usage, the mode; and a journaled conversation replayed as the same updates.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::files::Changed;
use crate::agent::AgentEvent;
use crate::agent::journal::Recorded;
use crate::llm::Message;

/// Maps one session's events; it remembers the calls in flight.
pub struct Mapper {
    root: PathBuf,
    /// The diffs of the running tool call's edits.
    changed: Vec<Changed>,
    /// Tool calls by id: their name (for the result's kind).
    calls: HashMap<String, String>,
}

impl Mapper {
    pub fn new(root: &Path) -> Self {
        Self {
            root: root.to_owned(),
            changed: Vec::new(),
            calls: HashMap::new(),
        }
    }

    /// What the edits of the tool call about to report changed.
    pub fn changed(&mut self, changed: Vec<Changed>) {
        self.changed.extend(changed);
    }

    pub fn map(&mut self, event: &AgentEvent) -> Vec<Value> {
        match event {
            AgentEvent::TextDelta { text } => vec![chunk("agent_message_chunk", text)],
            // ACP has no way to take back text shown: the answer says it starts over, so the
            // cut part the client keeps reads as what it was.
            AgentEvent::StepRetried { reason, .. } => vec![chunk(
                "agent_message_chunk",
                &format!("\n\n[the answer was cut ({reason}); it restarts]\n\n"),
            )],
            // The harness's own notes on the work, not the model's answer: thoughts. (The
            // model clients stream no reasoning text; these are the thoughts there are.)
            AgentEvent::Compacted {
                tokens_before,
                tokens_after,
                summarized,
                ..
            } => vec![chunk(
                "agent_thought_chunk",
                &format!(
                    "The context was compacted ({}): {tokens_before} → {tokens_after} tokens.\n",
                    if *summarized {
                        "older turns summarized"
                    } else {
                        "old outputs masked"
                    }
                ),
            )],
            AgentEvent::ToolCall {
                id,
                name,
                arguments,
            } => {
                self.calls.insert(id.clone(), name.clone());
                vec![tool_call(
                    &self.root,
                    id,
                    name,
                    arguments,
                    "in_progress",
                    Vec::new(),
                )]
            }
            AgentEvent::ToolResult {
                id,
                name,
                is_error,
                output,
            } => {
                self.calls.remove(id);
                let mut content: Vec<Value> = std::mem::take(&mut self.changed)
                    .into_iter()
                    .filter(|changed| changed.after.is_some())
                    .map(|changed| {
                        let mut diff = json!({
                            "type": "diff",
                            "path": changed.path,
                            "newText": changed.after.unwrap_or_default(),
                        });
                        if let Some(before) = changed.before {
                            diff["oldText"] = json!(before);
                        }
                        diff
                    })
                    .collect();
                content.push(text_content(output));
                vec![json!({
                    "sessionUpdate": "tool_call_update",
                    "toolCallId": id,
                    "kind": kind(name),
                    "status": if *is_error { "failed" } else { "completed" },
                    "content": content,
                })]
            }
            AgentEvent::Plan { steps } => vec![json!({
                "sessionUpdate": "plan",
                "entries": steps.iter().map(|step| json!({
                    "content": step.title,
                    "priority": "medium",
                    "status": match serde_json::to_value(step.status).ok().as_ref().and_then(Value::as_str) {
                        Some("done") => "completed",
                        Some("in_progress") => "in_progress",
                        _ => "pending",
                    },
                })).collect::<Vec<_>>(),
            })],
            AgentEvent::Usage {
                context_tokens,
                context_window,
                cost_usd,
                ..
            } => {
                let mut update = json!({
                    "sessionUpdate": "usage_update",
                    "used": context_tokens,
                    "size": context_window,
                });
                if let Some(cost) = cost_usd {
                    update["cost"] = json!({"amount": cost, "currency": "USD"});
                }
                vec![update]
            }
            AgentEvent::Mode { mode } => vec![json!({
                "sessionUpdate": "current_mode_update",
                "currentModeId": mode,
            })],
            AgentEvent::Error { message } => {
                vec![chunk(
                    "agent_message_chunk",
                    &format!("\n\nerror: {message}\n"),
                )]
            }
            _ => Vec::new(),
        }
    }
}

fn chunk(kind: &str, text: &str) -> Value {
    json!({"sessionUpdate": kind, "content": {"type": "text", "text": text}})
}

fn text_content(text: &str) -> Value {
    json!({"type": "content", "content": {"type": "text", "text": text}})
}

/// ACP's kind of a wright tool.
fn kind(name: &str) -> &'static str {
    match name {
        "read_file" | "list_dir" | "read_artifact" => "read",
        "grep" | "find_symbol" | "find_references" | "outline" => "search",
        "edit" | "multi_edit" | "apply_patch" | "write_file" => "edit",
        "run_command" | "run_tests" => "execute",
        "update_plan" => "think",
        _ => "other",
    }
}

/// A `tool_call` update: a title from its name and main argument, the path it touches.
fn tool_call(
    root: &Path,
    id: &str,
    name: &str,
    arguments: &str,
    status: &str,
    content: Vec<Value>,
) -> Value {
    let args: Value = serde_json::from_str(arguments).unwrap_or(Value::Null);
    let target = ["path", "command", "pattern", "query", "name"]
        .iter()
        .find_map(|key| args.get(*key).and_then(Value::as_str));
    let title = match target {
        Some(target) => format!("{name} {}", target.lines().next().unwrap_or_default()),
        None => name.to_owned(),
    };
    let locations: Vec<Value> = args
        .get("path")
        .and_then(Value::as_str)
        .map(|path| vec![json!({"path": root.join(path)})])
        .unwrap_or_default();
    json!({
        "sessionUpdate": "tool_call",
        "toolCallId": id,
        "title": title,
        "kind": kind(name),
        "status": status,
        "locations": locations,
        "rawInput": args,
        "content": content,
    })
}

/// A journaled conversation as the updates a client shows: the user's messages, the model's
/// text, each tool call with its final status and output.
pub fn replay(recorded: &Recorded, root: &Path) -> Vec<Value> {
    let mut updates = Vec::new();
    let mut results: HashMap<&str, (&str, bool)> = HashMap::new();
    for message in &recorded.messages {
        if let Message::ToolResult {
            call_id,
            content,
            is_error,
        } = message
        {
            results.insert(call_id, (content, *is_error));
        }
    }
    for message in &recorded.messages {
        match message {
            Message::User(text) => updates.push(chunk("user_message_chunk", text)),
            Message::Assistant { text, tool_calls } => {
                if !text.is_empty() {
                    updates.push(chunk("agent_message_chunk", text));
                }
                for call in tool_calls {
                    let (status, content) = match results.get(call.id.as_str()) {
                        Some((output, false)) => ("completed", vec![text_content(output)]),
                        Some((output, true)) => ("failed", vec![text_content(output)]),
                        None => ("failed", Vec::new()),
                    };
                    updates.push(tool_call(
                        root,
                        &call.id,
                        &call.name,
                        &call.arguments,
                        status,
                        content,
                    ));
                }
            }
            Message::ToolResult { .. } | Message::Image { .. } => {}
        }
    }
    updates
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_compaction_is_a_thought_and_a_retried_step_says_the_answer_restarts() {
        let mut mapper = Mapper::new(Path::new("/ws"));
        let compacted = mapper.map(&AgentEvent::Compacted {
            masked: 3,
            tokens_before: 9000,
            tokens_after: 4000,
            summarized: false,
        });
        assert_eq!(compacted[0]["sessionUpdate"], "agent_thought_chunk");
        let thought = compacted[0]["content"]["text"].as_str().unwrap();
        assert!(thought.contains("9000 → 4000"), "{thought}");
        let retried = mapper.map(&AgentEvent::StepRetried {
            step: 2,
            reason: "the stream was cut".into(),
        });
        assert_eq!(retried[0]["sessionUpdate"], "agent_message_chunk");
        let said = retried[0]["content"]["text"].as_str().unwrap();
        assert!(said.contains("restarts"), "{said}");
    }
}
