//! The tools the model sees: their stable names, arguments and JSON schemas (`docs/design.md`, "Tools
//! the model sees"), and the dispatch from a model's tool call to the code that does the work.
//!
//! A tool never fails the session: unknown names, arguments that are not JSON or do not fit
//! the schema, and refusals (an ambiguous edit, a missing file) all come back to the model as
//! an error result that says what to fix, with the schema when the arguments were wrong.
//! Outputs are compact and stable: line numbers on reads, grep results grouped by file,
//! command output capped head and tail.

mod commands;
mod find;
mod mentions;
mod plan;
mod read;
mod write;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Map, Value as Json, json};

pub use commands::{COULD_NOT_RUN, CommandOutput, CommandRunner};
pub use mentions::{Attachment, attachments};
pub use plan::{PlanStep, StepStatus};
pub use write::{EditTarget, Protection, check_inside};

use crate::agent::Cancel;
use crate::compaction::ArtifactStore;
use crate::index::Index;
use crate::llm::{ToolCall, ToolSchema};
use crate::workspace::{Overlay, WalkOptions};

/// The workspace as the tools see it.
pub struct ToolContext {
    pub root: PathBuf,
    /// Open buffers over the disk: reads and searches see what the editor shows.
    pub overlay: Arc<dyn Overlay + Send + Sync>,
    /// `None` when the workspace has no index (find_symbol and friends say so).
    pub index: Option<Arc<Index>>,
    pub walk: WalkOptions,
    /// Where edits go: the disk (headless) or the editor.
    pub edits: Arc<dyn EditTarget>,
    /// Where commands run; `None` leaves `run_command` and `run_tests` out of the tool list.
    pub commands: Option<Arc<dyn CommandRunner>>,
    /// The configured test command (`agent.test_command`), else detected.
    pub test_command: Option<String>,
    /// The session's cancellation, which a running command honours too.
    pub cancel: Cancel,
    /// The plan the model keeps with `update_plan`.
    pub plan: Mutex<Vec<PlanStep>>,
    /// Plan mode: only [`PLAN_TOOLS`] are offered and run, commands in a throw-away snapshot.
    pub plan_mode: AtomicBool,
    /// The tools of the session's MCP servers (`mcp__SERVER__TOOL`), when it has any.
    pub mcp: Option<Arc<dyn McpTools>>,
}

/// Tools a session's MCP servers offer, named `mcp__SERVER__TOOL` (`mcp::servers` has them).
/// None of them is read-only: a server's tool may do anything, so plan mode refuses them.
pub trait McpTools: Send + Sync {
    /// The tools as the servers list them now (a server's list may change while the session
    /// runs), in a stable order.
    fn schemas(&self) -> Vec<ToolSchema>;
    /// Runs one call of a tool [`McpTools::schemas`] offered; `None` when `name` is none of
    /// them. Blocking (the agent runs tools on a blocking thread).
    fn call(&self, call: &ToolCall) -> Option<ToolOutput>;
}

/// The prefix of every MCP server's tool.
pub const MCP_PREFIX: &str = "mcp__";

/// The tools whose calls run commands (in the sandbox).
pub const COMMAND_TOOLS: &[&str] = &["run_command", "run_tests"];

/// The tools of plan mode: they read, keep the plan, and run commands whose writes are
/// thrown away.
pub const PLAN_TOOLS: &[&str] = &[
    "list_dir",
    "read_file",
    "grep",
    "find_symbol",
    "outline",
    "find_references",
    "read_artifact",
    "update_plan",
    "run_command",
];

impl ToolContext {
    pub fn in_plan_mode(&self) -> bool {
        self.plan_mode.load(Ordering::SeqCst)
    }

    pub fn set_plan_mode(&self, plan: bool) {
        self.plan_mode.store(plan, Ordering::SeqCst);
    }

    /// Whether `spec` is offered now: commands need a runner, plan mode keeps to its tools.
    fn offers(&self, spec: &Spec) -> bool {
        (!spec.needs_commands || self.commands.is_some())
            && (!self.in_plan_mode() || PLAN_TOOLS.contains(&spec.name))
    }
}

/// What a tool call returns to the model.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ToolOutput {
    pub content: String,
    pub is_error: bool,
    /// Workspace-relative paths the call changed (edits), for the session's report.
    pub changed: Vec<String>,
    /// The whole output when `content` shows only part of it (a long command's head and
    /// tail): the session keeps it as an artifact the model can read back.
    pub whole: Option<String>,
    /// The files an edit landed, before and after, for the session's journal.
    pub landed: Vec<crate::agent::journal::EditedFile>,
    /// Images the call returned (an MCP tool's): a model that takes images sees them in a
    /// message after the step's results, since a tool result carries text only.
    pub images: Vec<crate::agent::conversation::Image>,
}

impl ToolOutput {
    pub fn ok(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            ..Self::default()
        }
    }

    pub fn error(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            is_error: true,
            ..Self::default()
        }
    }
}

/// One tool: its schema and whether it only reads (read-only calls run in parallel).
struct Spec {
    name: &'static str,
    description: &'static str,
    read_only: bool,
    needs_commands: bool,
    parameters: fn() -> Json,
}

const SPECS: &[Spec] = &[
    Spec {
        name: "list_dir",
        description: "List a directory of the workspace as a tree (ignore rules respected).",
        read_only: true,
        needs_commands: false,
        parameters: || {
            object(
                &[],
                json!({
                    "path": {"type": "string", "description": "relative to the workspace root; default the root"},
                    "depth": {"type": "integer", "minimum": 1, "maximum": 6, "description": "levels to show; default 2"},
                }),
            )
        },
    },
    Spec {
        name: "read_file",
        description: "Read a text file with line numbers (the editor's unsaved text when it is open). Read only the lines you need.",
        read_only: true,
        needs_commands: false,
        parameters: || {
            object(
                &["path"],
                json!({
                    "path": {"type": "string"},
                    "start_line": {"type": "integer", "minimum": 1, "description": "first line, 1-based"},
                    "end_line": {"type": "integer", "minimum": 1, "description": "last line, inclusive"},
                }),
            )
        },
    },
    Spec {
        name: "grep",
        description: "Search the workspace with a regular expression (Rust regex syntax). Results are grouped by file with line numbers.",
        read_only: true,
        needs_commands: false,
        parameters: || {
            object(
                &["pattern"],
                json!({
                    "pattern": {"type": "string"},
                    "glob": {"type": "string", "description": "only files matching this glob, e.g. *.rs or src/**"},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 1000, "description": "most matching lines; default 100"},
                }),
            )
        },
    },
    Spec {
        name: "find_symbol",
        description: "Find definitions by name in the symbol index (exact names first, then names sharing identifier parts).",
        read_only: true,
        needs_commands: false,
        parameters: || {
            object(
                &["query"],
                json!({
                    "query": {"type": "string"},
                    "kind": {"type": "string", "description": "function, method, class, interface, type, constant, field, macro, module"},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 200, "description": "default 20"},
                }),
            )
        },
    },
    Spec {
        name: "outline",
        description: "The definitions of one file, nested, with their lines.",
        read_only: true,
        needs_commands: false,
        parameters: || object(&["path"], json!({"path": {"type": "string"}})),
    },
    Spec {
        name: "find_references",
        description: "Where a name is used (calls, implementations), from the symbol index.",
        read_only: true,
        needs_commands: false,
        parameters: || {
            object(
                &["name"],
                json!({
                    "name": {"type": "string"},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 500, "description": "default 50"},
                }),
            )
        },
    },
    Spec {
        name: "edit",
        description: "Replace old_string with new_string in one file. old_string must match exactly one place (include enough surrounding lines), unless replace_all is true. Read the file first.",
        read_only: false,
        needs_commands: false,
        parameters: || {
            object(
                &["path", "old_string", "new_string"],
                json!({
                    "path": {"type": "string"},
                    "old_string": {"type": "string"},
                    "new_string": {"type": "string"},
                    "replace_all": {"type": "boolean", "description": "replace every match; default false"},
                }),
            )
        },
    },
    Spec {
        name: "multi_edit",
        description: "Several replacements in one file, applied in order, all or none.",
        read_only: false,
        needs_commands: false,
        parameters: || {
            object(
                &["path", "edits"],
                json!({
                    "path": {"type": "string"},
                    "edits": {
                        "type": "array",
                        "minItems": 1,
                        "items": object(&["old_string", "new_string"], json!({
                            "old_string": {"type": "string"},
                            "new_string": {"type": "string"},
                            "replace_all": {"type": "boolean"},
                        })),
                    },
                }),
            )
        },
    },
    Spec {
        name: "apply_patch",
        description: "Apply a patch in the *** Begin Patch / *** End Patch format (Add File, Delete File, Update File with optional Move to, @@ hunks), to several files, all or none.",
        read_only: false,
        needs_commands: false,
        parameters: || object(&["patch"], json!({"patch": {"type": "string"}})),
    },
    Spec {
        name: "write_file",
        description: "Create a file, or overwrite a whole file, with content.",
        read_only: false,
        needs_commands: false,
        parameters: || {
            object(
                &["path", "content"],
                json!({"path": {"type": "string"}, "content": {"type": "string"}}),
            )
        },
    },
    Spec {
        name: "run_command",
        description: "Run a shell command in the workspace's sandbox (no network; writes stay in the workspace). Output is capped, head and tail kept.",
        read_only: false,
        needs_commands: true,
        parameters: || {
            object(
                &["command"],
                json!({
                    "command": {"type": "string"},
                    "timeout_secs": {"type": "integer", "minimum": 1, "maximum": 3600, "description": "default 120"},
                }),
            )
        },
    },
    Spec {
        name: "run_tests",
        description: "Run the project's tests (the test command is detected: cargo, pytest, unittest, npm, go) and report the failures.",
        read_only: false,
        needs_commands: true,
        parameters: || {
            object(
                &[],
                json!({"filter": {"type": "string", "description": "only tests whose name matches"}}),
            )
        },
    },
    Spec {
        name: "read_artifact",
        description: "Read back a tool output that was moved out of the conversation to keep it short (its placeholder names the id), by line range.",
        read_only: true,
        needs_commands: false,
        parameters: || {
            object(
                &["id"],
                json!({
                    "id": {"type": "string", "description": "the artifact id, like a12"},
                    "start_line": {"type": "integer", "minimum": 1},
                    "end_line": {"type": "integer", "minimum": 1},
                }),
            )
        },
    },
    Spec {
        name: "update_plan",
        description: "Set your visible plan: the steps and the status of each.",
        read_only: false,
        needs_commands: false,
        parameters: || {
            object(
                &["steps"],
                json!({
                    "steps": {
                        "type": "array",
                        "items": object(&["title", "status"], json!({
                            "title": {"type": "string"},
                            "status": {"type": "string", "enum": ["pending", "in_progress", "done"]},
                        })),
                    },
                }),
            )
        },
    },
];

fn object(required: &[&str], properties: Json) -> Json {
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}

/// The tools of a session in its mode, in their stable order (part of the cached prompt
/// prefix).
pub fn schemas(context: &ToolContext) -> Vec<ToolSchema> {
    let mut schemas: Vec<ToolSchema> = SPECS
        .iter()
        .filter(|spec| context.offers(spec))
        .map(schema)
        .collect();
    if let Some(mcp) = context.mcp.as_ref().filter(|_| !context.in_plan_mode()) {
        schemas.extend(mcp.schemas());
    }
    schemas
}

/// Every tool's schema, whatever a session offers: what a fine-tuning export declares.
pub fn all_schemas() -> Vec<ToolSchema> {
    SPECS.iter().map(schema).collect()
}

fn schema(spec: &Spec) -> ToolSchema {
    ToolSchema {
        name: spec.name.to_owned(),
        description: spec.description.to_owned(),
        parameters: (spec.parameters)(),
    }
}

/// Whether `name` only reads (and may run alongside other reads).
pub fn is_read_only(name: &str) -> bool {
    SPECS.iter().any(|spec| spec.name == name && spec.read_only)
}

/// Runs one tool call. Blocking: the agent runs it on a blocking thread.
pub fn call(context: &ToolContext, call: &ToolCall) -> ToolOutput {
    if call.name.starts_with(MCP_PREFIX)
        && let Some(mcp) = &context.mcp
    {
        if context.in_plan_mode() {
            return ToolOutput::error(format!(
                "{:?} is not offered in plan mode, which changes no file (a server's tool may \
                 change anything): finish with the plan (the user switches to code mode to \
                 carry it out)",
                call.name
            ));
        }
        if let Some(output) = mcp.call(call) {
            return output;
        }
    }
    let available = |spec: &&Spec| context.offers(spec);
    let Some(spec) = SPECS.iter().filter(available).find(|s| s.name == call.name) else {
        let names: Vec<&str> = SPECS.iter().filter(available).map(|s| s.name).collect();
        let names = names.join(", ");
        if context.in_plan_mode() && SPECS.iter().any(|s| s.name == call.name) {
            return ToolOutput::error(format!(
                "{:?} is not offered in plan mode, which changes no file: finish with the plan \
                 (the user switches to code mode to carry it out); the tools are: {names}",
                call.name
            ));
        }
        return ToolOutput::error(format!(
            "unknown tool {:?}; the tools are: {names}",
            call.name
        ));
    };
    let arguments = match call
        .parsed_arguments()
        .and_then(|arguments| declared(spec, arguments))
    {
        Ok(arguments) => Args(arguments),
        Err(why) => return invalid(spec, &why),
    };
    let result = match spec.name {
        "list_dir" => read::list_dir(context, &arguments),
        "read_file" => read::read_file(context, &arguments),
        "grep" => find::grep(context, &arguments),
        "find_symbol" => find::find_symbol(context, &arguments),
        "outline" => find::outline(context, &arguments),
        "find_references" => find::find_references(context, &arguments),
        "edit" => write::edit(context, &arguments),
        "multi_edit" => write::multi_edit(context, &arguments),
        "apply_patch" => write::apply_patch(context, &arguments),
        "write_file" => write::write_file(context, &arguments),
        "run_command" => commands::run_command(context, &arguments),
        "run_tests" => commands::run_tests(context, &arguments),
        "update_plan" => plan::update_plan(context, &arguments),
        // The session owns the artifacts and answers these itself, with `read_artifact`.
        "read_artifact" => Err(Failure::Refused(
            "read_artifact is answered by the session".to_owned(),
        )),
        other => unreachable!("every tool in SPECS is dispatched: {other}"),
    };
    match result {
        Ok(output) => output,
        Err(Failure::Arguments(why)) => invalid(spec, &why),
        Err(Failure::Refused(why)) => ToolOutput::error(why),
    }
}

/// `read_artifact` against the session's artifact store.
pub fn read_artifact(store: &ArtifactStore, call: &ToolCall) -> ToolOutput {
    let spec = SPECS
        .iter()
        .find(|spec| spec.name == "read_artifact")
        .expect("read_artifact is a tool");
    let result = call
        .parsed_arguments()
        .and_then(|arguments| declared(spec, arguments))
        .map_err(Failure::Arguments)
        .and_then(|arguments| {
            let arguments = Args(arguments);
            let id = arguments.string("id")?;
            let start = arguments.optional_u64("start_line")?.map(|n| n as usize);
            let end = arguments.optional_u64("end_line")?.map(|n| n as usize);
            store
                .read(id.trim(), start, end)
                .map_err(|err| Failure::Refused(err.to_string()))
        });
    match result {
        Ok(text) => ToolOutput::ok(text),
        Err(Failure::Arguments(why)) => invalid(spec, &why),
        Err(Failure::Refused(why)) => ToolOutput::error(why),
    }
}

/// `arguments`, when they hold no key the schema does not declare. Every schema says
/// `additionalProperties: false`, and a misspelt optional argument (`startLine` for
/// `start_line`) ignored would do something else than asked (read the whole file) without a
/// word: the model is told instead.
fn declared(spec: &Spec, arguments: Map<String, Json>) -> Result<Map<String, Json>, String> {
    let arguments = Json::Object(arguments);
    if let Some(why) = undeclared(&(spec.parameters)(), &arguments, "") {
        return Err(why);
    }
    let Json::Object(arguments) = arguments else {
        unreachable!("made an object above")
    };
    Ok(arguments)
}

/// The first key of `value`, at any depth, that `schema` does not allow, said with where it
/// is and the keys that are allowed there.
fn undeclared(schema: &Json, value: &Json, at: &str) -> Option<String> {
    match value {
        Json::Object(map) => {
            let properties = schema.get("properties").and_then(Json::as_object)?;
            let closed = schema.get("additionalProperties") == Some(&Json::Bool(false));
            if closed && let Some(key) = map.keys().find(|key| !properties.contains_key(*key)) {
                let known: Vec<&str> = properties.keys().map(String::as_str).collect();
                return Some(format!(
                    "unknown argument {key:?}{at} (the arguments are: {})",
                    known.join(", ")
                ));
            }
            map.iter().find_map(|(key, value)| {
                let schema = properties.get(key)?;
                undeclared(schema, value, &format!(" in {key:?}"))
            })
        }
        Json::Array(items) => {
            let schema = schema.get("items")?;
            items.iter().enumerate().find_map(|(index, item)| {
                undeclared(schema, item, &format!("{at}, item {}", index + 1))
            })
        }
        _ => None,
    }
}

fn invalid(spec: &Spec, why: &str) -> ToolOutput {
    ToolOutput::error(format!(
        "invalid arguments for {}: {why}. The schema is: {}",
        spec.name,
        (spec.parameters)()
    ))
}

/// Why a tool did not do its work.
#[derive(Debug)]
enum Failure {
    /// The arguments do not fit the schema: the model gets the schema back.
    Arguments(String),
    /// The work was refused or failed: the message says what to do.
    Refused(String),
}

type ToolResult = Result<ToolOutput, Failure>;

/// A call's arguments, with typed getters that say which argument is wrong and why.
struct Args(Map<String, Json>);

impl Args {
    fn string(&self, name: &str) -> Result<&str, Failure> {
        self.optional_string(name)?
            .ok_or_else(|| Failure::Arguments(format!("{name:?} is required")))
    }

    fn optional_string(&self, name: &str) -> Result<Option<&str>, Failure> {
        match self.0.get(name) {
            None | Some(Json::Null) => Ok(None),
            Some(Json::String(text)) => Ok(Some(text)),
            Some(other) => Err(Failure::Arguments(format!(
                "{name:?} must be a string, found {other}"
            ))),
        }
    }

    fn optional_u64(&self, name: &str) -> Result<Option<u64>, Failure> {
        match self.0.get(name) {
            None | Some(Json::Null) => Ok(None),
            // Models write numbers as strings often enough to accept the unambiguous ones.
            Some(Json::String(text)) if text.trim().parse::<u64>().is_ok() => {
                Ok(text.trim().parse().ok())
            }
            Some(value) => value.as_u64().map(Some).ok_or_else(|| {
                Failure::Arguments(format!(
                    "{name:?} must be a positive integer, found {value}"
                ))
            }),
        }
    }

    fn optional_bool(&self, name: &str) -> Result<bool, Failure> {
        match self.0.get(name) {
            None | Some(Json::Null) => Ok(false),
            Some(Json::Bool(value)) => Ok(*value),
            Some(other) => Err(Failure::Arguments(format!(
                "{name:?} must be true or false, found {other}"
            ))),
        }
    }

    fn array(&self, name: &str) -> Result<&Vec<Json>, Failure> {
        match self.0.get(name) {
            Some(Json::Array(items)) => Ok(items),
            None => Err(Failure::Arguments(format!("{name:?} is required"))),
            Some(other) => Err(Failure::Arguments(format!(
                "{name:?} must be an array, found {other}"
            ))),
        }
    }
}

/// `path` as the model wrote it, made relative to the root and refused when it leaves it.
fn workspace_path(context: &ToolContext, path: &str) -> Result<PathBuf, Failure> {
    let trimmed = path.trim();
    let relative = match Path::new(trimmed).strip_prefix(&context.root) {
        Ok(inside) => inside.to_path_buf(),
        Err(_) if Path::new(trimmed).is_absolute() => {
            return Err(Failure::Refused(format!(
                "{trimmed}: outside the workspace ({}); use a path relative to it",
                context.root.display()
            )));
        }
        Err(_) => PathBuf::from(trimmed.trim_start_matches("./")),
    };
    crate::edit::plan::relative_path(&relative.to_string_lossy())
        .map_err(|err| Failure::Refused(err.to_string()))
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod write_tests;
