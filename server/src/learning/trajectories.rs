//! `wright trajectories export`: the journaled sessions as training data, JSON lines of edit
//! triples (the file before, the edit as the model wrote it, the file after) or of whole
//! conversations in the OpenAI fine-tuning chat shape.

use std::path::Path;

use serde_json::{Value as Json, json};

use super::redact::Redactor;
use super::{LandedEdit, Session};
use crate::edit::{self, Format};
use crate::llm::Message;

/// One line per landed edit of a file, whose `edit` applied with `wright apply --format
/// FORMAT` to `original` gives `final` exactly. `None` when no edit text does (a file the
/// edit created or deleted has no whole original or final).
pub fn triple(session: &Session, landed: &LandedEdit, redactor: Option<&Redactor>) -> Option<Json> {
    let clean = |text: &str| redactor.map_or_else(|| text.to_owned(), |r| r.redact(text));
    let original = clean(landed.file.before.as_deref()?);
    let last = clean(landed.file.after.as_deref()?);
    let path = &landed.file.path;
    // The model's own edit when it gives the final text from the original alone, else the
    // whole-file replacement that does (a patch over several files, a write_file).
    let (text, format) = as_written(landed, path)
        .map(|(text, format)| (clean(&text), format))
        .filter(|(text, format)| gives(path, &original, text, *format, &last))
        .or_else(|| {
            let whole = json!({"path": path, "old_string": original, "new_string": last});
            Some((whole.to_string(), Format::Json))
                .filter(|(text, format)| gives(path, &original, text, *format, &last))
        })?;
    Some(json!({
        "path": path,
        "original": original,
        "edit": text,
        "final": last,
        "format": format.name(),
        "session": session.recorded.session_id,
        "model": session.recorded.model,
        "kept": landed.kept,
    }))
}

/// The edit as the model wrote it: the arguments of `edit` and `multi_edit` (the `json`
/// format, the path made relative to the root), the patch of `apply_patch`.
fn as_written(landed: &LandedEdit, path: &str) -> Option<(String, Format)> {
    let mut arguments: serde_json::Map<String, Json> =
        serde_json::from_str(&landed.arguments).ok()?;
    match landed.tool.as_str() {
        "edit" | "multi_edit" => {
            arguments.remove("file_path");
            arguments.insert("path".to_owned(), json!(path));
            Some((Json::Object(arguments).to_string(), Format::Json))
        }
        "apply_patch" => Some((arguments.get("patch")?.as_str()?.to_owned(), Format::Patch)),
        _ => None,
    }
}

/// Whether `text` in `format`, applied to `original` at `path`, leaves exactly `last`, and
/// touches nothing else: what `wright apply` would do, in memory.
fn gives(path: &str, original: &str, text: &str, format: Format, last: &str) -> bool {
    let Ok(ops) = edit::format::parse(text, format) else {
        return false;
    };
    let source = edit::MemoryFiles::new([(path, original)]);
    match edit::plan::plan(&ops, &source) {
        Ok(plan) => {
            plan.files.len() == 1
                && plan.files[0].path == Path::new(path)
                && plan.files[0].after.as_deref() == Some(last)
        }
        Err(_) => false,
    }
}

/// One session in the OpenAI fine-tuning chat shape: `messages` (the system prompt, then the
/// history as the session last had it, tool calls and outputs as recorded) and `tools` (every
/// tool's schema).
pub fn chat(session: &Session, system: &str, redactor: Option<&Redactor>) -> Json {
    let clean = |text: &str| redactor.map_or_else(|| text.to_owned(), |r| r.redact(text));
    let mut messages = vec![json!({"role": "system", "content": clean(system)})];
    for message in &session.recorded.messages {
        match message {
            Message::User(text) => messages.push(json!({"role": "user", "content": clean(text)})),
            // Images are not text to train on; the user's words around them stay.
            Message::Image { .. } => {}
            Message::Assistant { text, tool_calls } => {
                let mut assistant = json!({"role": "assistant", "content": clean(text)});
                if !tool_calls.is_empty() {
                    assistant["tool_calls"] = tool_calls
                        .iter()
                        .map(|call| {
                            json!({
                                "id": call.id,
                                "type": "function",
                                "function": {"name": call.name, "arguments": clean(&call.arguments)},
                            })
                        })
                        .collect();
                }
                messages.push(assistant);
            }
            Message::ToolResult {
                call_id, content, ..
            } => messages.push(json!({
                "role": "tool",
                "tool_call_id": call_id,
                "content": clean(content),
            })),
        }
    }
    let tools: Vec<Json> = crate::agent::tools::all_schemas()
        .into_iter()
        .map(|schema| {
            json!({
                "type": "function",
                "function": {
                    "name": schema.name,
                    "description": schema.description,
                    "parameters": schema.parameters,
                },
            })
        })
        .collect();
    json!({"messages": messages, "tools": tools})
}
