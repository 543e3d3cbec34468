//! `wright mcp serve`: the agent's own tools (symbols, grep, reads, context, edits, patches,
//! sandboxed commands) offered to any MCP client, through `rmcp`'s server.
//!
//! Every tool but `context` is the agent's tool table itself (`agent::tools`: the same
//! schemas, the same dispatch, the same refusals), so a client gets exactly what wright's own
//! agent gets: an ambiguous edit is a tool result with `isError: true` naming the candidate
//! lines, a patch lands on every file or none. `run_command` adds one argument here,
//! `in_place`: without it a command runs in a throw-away snapshot of the workspace (its writes
//! are reported and dropped), with it in the workspace itself.

mod http;
mod stdio;

pub use http::{HttpError, bind, loopback_address, serve_http};
pub use stdio::serve_stdio;

use std::path::PathBuf;
use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
    ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Map, Value as Json, json};

use crate::agent::Cancel;
use crate::agent::tools::{self, CommandRunner, EditTarget, ToolContext, ToolOutput};
use crate::index::Index;
use crate::llm::ToolCall;
use crate::workspace::{DiskOnly, WalkOptions};

/// The tools offered, in this order: the agent's table's names, and `context`.
pub const TOOLS: &[&str] = &[
    "find_symbol",
    "outline",
    "find_references",
    "grep",
    "read_file",
    "context",
    "edit",
    "multi_edit",
    "apply_patch",
    "run_command",
];

/// The tools that read the symbol index, which is brought up to date before each of them.
const INDEXED: &[&str] = &["find_symbol", "outline", "find_references", "context"];

/// Tokens of code `context` returns when the client names no budget.
const CONTEXT_BUDGET: usize = 8000;

/// The symbol index as the server gets it: built (or refreshed) on demand, so a tool sees
/// the workspace as it is now; `Err` says why there is none.
pub type IndexSource = Arc<dyn Fn() -> Result<Arc<Index>, String> + Send + Sync>;

/// Where commands run: in a throw-away snapshot (the default) or in the workspace.
pub struct Commands {
    pub in_snapshot: Arc<dyn CommandRunner>,
    pub in_place: Arc<dyn CommandRunner>,
}

/// The workspace the server works on, and how its tools reach it.
pub struct Workspace {
    pub root: PathBuf,
    pub walk: WalkOptions,
    /// Where edits land (the disk, atomically, protected paths refused).
    pub edits: Arc<dyn EditTarget>,
    /// `Err(why)` when the sandbox cannot run here: `run_command` then says why.
    pub commands: Result<Commands, String>,
    pub index: IndexSource,
}

/// The MCP server over one workspace (cheap to clone: one per HTTP session shares it).
#[derive(Clone)]
pub struct Server {
    workspace: Arc<Workspace>,
}

impl Server {
    pub fn new(workspace: Workspace) -> Self {
        Self {
            workspace: Arc::new(workspace),
        }
    }

    /// The tool context of one call: the workspace, the index when the tool reads it, and
    /// the runner the call asked for.
    fn context(
        &self,
        index: Option<Arc<Index>>,
        commands: Option<Arc<dyn CommandRunner>>,
        cancel: Cancel,
    ) -> ToolContext {
        let workspace = &self.workspace;
        ToolContext {
            root: workspace.root.clone(),
            overlay: Arc::new(DiskOnly),
            index,
            walk: workspace.walk.clone(),
            edits: Arc::clone(&workspace.edits),
            commands,
            test_command: None,
            cancel,
            plan: Default::default(),
            plan_mode: Default::default(),
            // wright's own engines only: no MCP server's tools are served on.
            mcp: None,
        }
    }

    /// The tools, with the agent's schemas (and `in_place` added to `run_command`'s).
    pub fn tools(&self) -> Vec<Tool> {
        // A runner that is never called: it only makes the table list `run_command`.
        let listing = self.context(
            None,
            Some(Arc::new(Unavailable(String::new()))),
            Cancel::new(),
        );
        let mut listed: Vec<Tool> = tools::schemas(&listing)
            .into_iter()
            .filter(|schema| TOOLS.contains(&schema.name.as_str()))
            .map(|schema| {
                let mut parameters = schema.parameters;
                let mut description = schema.description;
                if schema.name == "run_command" {
                    parameters["properties"]["in_place"] = json!({
                        "type": "boolean",
                        "description": "run in the workspace itself, its writes kept; default false: \
                                        in a throw-away snapshot, its writes reported and dropped",
                    });
                    description = "Run a shell command with `sh -c` in wright's sandbox over the \
                                   workspace: no network, nothing outside the workspace written; by \
                                   default in a throw-away snapshot (the files it changed are listed \
                                   with their diffs, the workspace is left as it was), with in_place \
                                   true in the workspace itself (.git, .wright and sandbox.protected \
                                   stay read-only). Output is capped, head and tail kept."
                        .to_owned();
                }
                tool(&schema.name, description, parameters)
            })
            .collect();
        listed.push(tool(
            "context",
            "The code of the workspace most relevant to a task or question, ranked (definitions it \
             names, their callers and neighbours, a map of the related files) and fitted to a \
             token budget."
                .to_owned(),
            json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "the task or question, in words; name the identifiers you know"},
                    "budget": {"type": "integer", "minimum": 100, "maximum": 100000, "description": "tokens the code may take (o200k tokenizer); default 8000"},
                },
                "required": ["query"],
                "additionalProperties": false,
            }),
        ));
        listed.sort_by_key(|tool| TOOLS.iter().position(|name| *name == tool.name));
        listed
    }

    /// Runs one call, blocking (the caller puts it on a blocking thread).
    pub fn call(&self, name: &str, arguments: Map<String, Json>, cancel: Cancel) -> ToolOutput {
        if !TOOLS.contains(&name) {
            // As the agent's table answers an unknown name (and the TypeScript SDK's server):
            // a tool error the caller can read and act on.
            return ToolOutput::error(format!(
                "unknown tool {name:?}; the tools are: {}",
                TOOLS.join(", ")
            ));
        }
        let index = if INDEXED.contains(&name) {
            match (self.workspace.index)() {
                Ok(index) if name == "context" => return context(&index, &arguments),
                Ok(index) => Some(index),
                Err(why) if name == "context" => {
                    return ToolOutput::error(format!("no symbol index: {why}"));
                }
                Err(why) => {
                    tracing::warn!("working without the symbol index: {why}");
                    None
                }
            }
        } else {
            None
        };
        let mut arguments = arguments;
        let commands: Option<Arc<dyn CommandRunner>> = if name == "run_command" {
            let in_place = match arguments.remove("in_place") {
                None | Some(Json::Null) => false,
                Some(Json::Bool(value)) => value,
                Some(other) => {
                    return ToolOutput::error(format!(
                        "invalid arguments for run_command: \"in_place\" must be true or false, \
                         found {other}"
                    ));
                }
            };
            Some(match &self.workspace.commands {
                Ok(commands) if in_place => Arc::clone(&commands.in_place),
                Ok(commands) => Arc::clone(&commands.in_snapshot),
                Err(why) => Arc::new(Unavailable(why.clone())),
            })
        } else {
            None
        };
        let context = self.context(index, commands, cancel);
        let call = ToolCall {
            id: "mcp".to_owned(),
            name: name.to_owned(),
            arguments: Json::Object(arguments).to_string(),
        };
        tools::call(&context, &call)
    }
}

fn tool(name: &str, description: String, parameters: Json) -> Tool {
    let Json::Object(schema) = parameters else {
        unreachable!("every tool's parameters are an object schema")
    };
    let read_only = tools::is_read_only(name) || name == "context";
    Tool::new(name.to_owned(), description, Arc::new(schema)).with_annotations(
        ToolAnnotations::new()
            .read_only(read_only)
            .destructive(false)
            // Nothing here reaches the network.
            .open_world(false),
    )
}

/// `context`: what `wright context` prints, for the model on the other side.
fn context(index: &Index, arguments: &Map<String, Json>) -> ToolOutput {
    let unknown: Vec<&String> = arguments
        .keys()
        .filter(|key| !matches!(key.as_str(), "query" | "budget"))
        .collect();
    if let Some(key) = unknown.first() {
        return ToolOutput::error(format!(
            "invalid arguments for context: unknown argument {key:?} (the arguments are: query, \
             budget)"
        ));
    }
    let query = match arguments.get("query") {
        Some(Json::String(query)) if !query.trim().is_empty() => query,
        _ => {
            return ToolOutput::error(
                "invalid arguments for context: \"query\" is required, a non-empty string",
            );
        }
    };
    let budget = match arguments.get("budget") {
        None | Some(Json::Null) => CONTEXT_BUDGET,
        Some(value) => match value.as_u64() {
            Some(budget) => (budget as usize).clamp(100, 100_000),
            None => {
                return ToolOutput::error(format!(
                    "invalid arguments for context: \"budget\" must be a positive integer, \
                     found {value}"
                ));
            }
        },
    };
    let retrieved = crate::retrieval::retrieve(
        index,
        &DiskOnly,
        &crate::retrieval::Query {
            text: query.clone(),
            budget,
            ..crate::retrieval::Query::default()
        },
    );
    let mut text = String::new();
    for snippet in &retrieved.snippets {
        // Each snippet's text begins with its own header line (path and lines).
        text.push_str(&snippet.text);
        if !text.ends_with('\n') {
            text.push('\n');
        }
    }
    if retrieved.snippets.is_empty() {
        text.push_str("nothing in the index matches the query\n");
    }
    text.push_str(&format!(
        "({} of {} tokens)\n",
        retrieved.tokens, retrieved.budget
    ));
    ToolOutput::ok(text)
}

/// A runner that refuses, saying why commands cannot run here.
struct Unavailable(String);

impl CommandRunner for Unavailable {
    fn run(
        &self,
        _command: &str,
        _timeout: std::time::Duration,
        _cancel: &Cancel,
    ) -> Result<tools::CommandOutput, String> {
        Err(self.0.clone())
    }
}

/// Runs every command in a throw-away snapshot: the runner's discarding mode, as its default.
pub struct InSnapshot(pub Arc<dyn CommandRunner>);

impl CommandRunner for InSnapshot {
    fn run(
        &self,
        command: &str,
        timeout: std::time::Duration,
        cancel: &Cancel,
    ) -> Result<tools::CommandOutput, String> {
        self.0.run_discarding(command, timeout, cancel)
    }

    fn run_discarding(
        &self,
        command: &str,
        timeout: std::time::Duration,
        cancel: &Cancel,
    ) -> Result<tools::CommandOutput, String> {
        self.0.run_discarding(command, timeout, cancel)
    }
}

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("wright", env!("CARGO_PKG_VERSION")))
            .with_instructions(format!(
                "wright's engines over the workspace {}: find_symbol, outline, find_references \
                 and context read its symbol index; edit, multi_edit and apply_patch change \
                 files only where the old text matches exactly one place, every file or none; \
                 run_command runs in a sandbox without network, in a throw-away snapshot \
                 unless in_place is true. Paths are relative to the workspace.",
                self.workspace.root.display()
            ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let cancel = Cancel::new();
        // The client's `notifications/cancelled` ends a running command too.
        let watcher = {
            let cancel = cancel.clone();
            let token = context.ct.clone();
            tokio::spawn(async move {
                token.cancelled().await;
                cancel.cancel();
            })
        };
        let server = self.clone();
        let name = request.name.to_string();
        let arguments = request.arguments.unwrap_or_default();
        let ran = tokio::task::spawn_blocking(move || server.call(&name, arguments, cancel)).await;
        watcher.abort();
        let output = ran.map_err(|err| {
            ErrorData::internal_error(format!("the tool call failed: {err}"), None)
        })?;
        tracing::debug!(tool = %request.name, error = output.is_error, "tool call");
        let content = vec![ContentBlock::text(output.content)];
        Ok(CallToolResponse::Complete(if output.is_error {
            CallToolResult::error(content)
        } else {
            CallToolResult::success(content)
        }))
    }
}
