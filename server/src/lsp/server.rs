//! The language server's handlers: lifecycle, document sync, workspace folders, configuration,
//! and wright's own requests.
//!
//! Every handler that changes state does so synchronously, before its first `.await`; the
//! transport polls handlers in arrival order, so state changes happen in arrival order too.
//! Locks are `std` mutexes and are never held across an `.await`.

use crate::agent::prompt::CodeTask;
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use serde_json::Value;
use tower_lsp_server::jsonrpc::{Error as RpcError, Result as RpcResult};
use tower_lsp_server::ls_types as lsp;
use tower_lsp_server::{Client, LanguageServer};
use wright_protocol as proto;

use super::agent::{Agents, Ask, Earlier, EditCapabilities, Editor, Place};
use super::convert;
use super::indexing::Indexes;
use crate::agent::conversation::{Mode, UserMessage};
use crate::agent::launch::Begin;
use crate::buffers::{Buffers, Document, DocumentKey, VersionOrder};
use crate::config::{self, Config, Layers};

/// What the server is started with, from the command line.
#[derive(Clone, Debug)]
pub struct ServerOptions {
    /// The root to use when the client names none (`--root`, default the current directory).
    pub default_root: PathBuf,
    /// Where the log goes, to report in status (`stderr` or a path).
    pub log: String,
}

pub struct Backend {
    client: Client,
    options: ServerOptions,
    buffers: Arc<Mutex<Buffers>>,
    workspace: Mutex<Workspace>,
    client_capabilities: OnceLock<lsp::ClientCapabilities>,
    /// `clientInfo.name`: some clients' handlers differ from what they declare.
    client_name: OnceLock<String>,
    indexes: Arc<Indexes>,
    agents: Arc<Agents>,
}

/// The workspace roots and the configuration that depends on them.
struct Workspace {
    roots: Vec<PathBuf>,
    layers: Layers,
    config: Config,
    /// Problems already told to the user, so a reload repeats none of them.
    reported: HashSet<String>,
}

fn process_env(var: &str) -> Option<String> {
    std::env::var(var).ok()
}

/// wright's own folder, or the request's refusal saying why there is none.
fn own_dir(dir: Result<PathBuf, config::NoPrivateDir>) -> RpcResult<PathBuf> {
    dir.map_err(|err| RpcError {
        code: tower_lsp_server::jsonrpc::ErrorCode::ServerError(-32002),
        message: err.to_string().into(),
        data: None,
    })
}

/// A session the agent could not open or continue, with its reason.
fn session_refused(message: String) -> RpcError {
    RpcError {
        code: tower_lsp_server::jsonrpc::ErrorCode::ServerError(-32002),
        message: message.into(),
        data: None,
    }
}

/// `applyMode`: whether edits are held for review.
fn apply_mode(text: &str) -> RpcResult<bool> {
    match text {
        "auto" => Ok(false),
        "review" => Ok(true),
        other => Err(RpcError::invalid_params(format!(
            "applyMode {other:?}: expected \"auto\" or \"review\""
        ))),
    }
}

fn mode_of(text: &str) -> RpcResult<Mode> {
    Mode::parse(text).map_err(RpcError::invalid_params)
}

fn range_start(range: proto::Range) -> lsp::Position {
    lsp::Position::new(range.start.line, range.start.character)
}

fn range_end(range: proto::Range) -> lsp::Position {
    lsp::Position::new(range.end.line, range.end.character)
}

/// The cache folder the indexes use: the user's, or (no `HOME`) a fresh one of this process,
/// never a shared one.
fn index_cache_dir() -> PathBuf {
    match config::cache_dir(&process_env) {
        Ok(dir) => dir,
        Err(err) => match crate::files::fresh_private_dir("wright-cache") {
            Ok(dir) => {
                tracing::error!(
                    "{err}; the index is kept in {} for this process only",
                    dir.display()
                );
                dir
            }
            Err(fresh) => {
                tracing::error!(
                    "{err}; no private folder could be made for the index either ({fresh}), so it is not kept"
                );
                PathBuf::from("/nonexistent/wright-cache")
            }
        },
    }
}

/// Runs `work` (which waits on the editor, through `workspace/applyEdit`) on a blocking thread
/// while the transport carries the editor's answers; its refusal is error -32003.
async fn on_blocking_thread<T: Send + 'static>(
    what: &str,
    work: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> RpcResult<T> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|err| RpcError {
            code: tower_lsp_server::jsonrpc::ErrorCode::InternalError,
            message: format!("{what} failed: {err}").into(),
            data: None,
        })?
        .map_err(|message| RpcError {
            code: tower_lsp_server::jsonrpc::ErrorCode::ServerError(-32003),
            message: message.into(),
            data: None,
        })
}

/// A poisoned lock means a handler panicked mid-update; the data is still the best we have, and
/// refusing every later request would lose the user's buffers for good.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Backend {
    pub fn new(client: Client, options: ServerOptions) -> Self {
        let roots = vec![options.default_root.clone()];
        let layers = Layers::load(config::user_file(&process_env), &roots, &process_env);
        let buffers = Arc::new(Mutex::new(Buffers::default()));
        Self {
            indexes: Indexes::start(Arc::clone(&buffers), index_cache_dir()),
            client,
            options,
            buffers,
            workspace: Mutex::new(Workspace {
                config: layers.resolve(),
                roots,
                layers,
                reported: HashSet::new(),
            }),
            client_capabilities: OnceLock::new(),
            client_name: OnceLock::new(),
            agents: Arc::default(),
        }
    }

    async fn log(&self, kind: lsp::MessageType, message: impl std::fmt::Display) {
        self.client
            .log_message(kind, format!("wright: {message}"))
            .await;
    }

    /// Changes the workspace under its lock, re-resolves the configuration, and tells the user
    /// about problems not reported before.
    async fn update_workspace(&self, change: impl FnOnce(&mut Workspace)) {
        let fresh: Vec<String> = {
            let mut workspace = lock(&self.workspace);
            change(&mut workspace);
            workspace.config = workspace.layers.resolve();
            let problems: Vec<String> = workspace
                .config
                .problems()
                .iter()
                .map(ToString::to_string)
                .collect();
            problems
                .into_iter()
                .filter(|problem| workspace.reported.insert(problem.clone()))
                .collect()
        };
        for problem in fresh {
            tracing::warn!("configuration: {problem}");
            self.log(
                lsp::MessageType::WARNING,
                format!("configuration: {problem}"),
            )
            .await;
        }
    }

    /// (Re)builds the indexes of the current roots in the background.
    fn build_indexes(&self) {
        let (roots, max_file_size) = {
            let workspace = lock(&self.workspace);
            let max = workspace
                .config
                .get_u64("index.max_file_size")
                .unwrap_or(crate::workspace::DEFAULT_MAX_FILE_SIZE);
            (workspace.roots.clone(), max)
        };
        let progress = self
            .capabilities()
            .and_then(|caps| caps.window.as_ref())
            .and_then(|window| window.work_done_progress)
            == Some(true);
        self.indexes
            .want(roots, max_file_size, self.client.clone(), progress);
    }

    /// Removes, in the background, the temporary files a wright killed in the middle of an
    /// edit left in the roots (only those of processes that are gone).
    fn sweep_edit_temporaries(&self) {
        let roots = lock(&self.workspace).roots.clone();
        tokio::task::spawn_blocking(move || {
            for root in roots {
                crate::edit::apply::sweep_stale_temporaries(&root);
            }
        });
    }

    /// Queues a document's file for re-indexing.
    fn reindex(&self, key: &DocumentKey) {
        if let DocumentKey::File(path) = key {
            self.indexes.changed(path.clone());
        }
    }

    fn capabilities(&self) -> Option<&lsp::ClientCapabilities> {
        self.client_capabilities.get()
    }

    /// What the client takes in a `workspace/applyEdit`.
    fn edit_capabilities(&self) -> EditCapabilities {
        EditCapabilities::of_client(
            self.capabilities(),
            self.client_name.get().map(String::as_str),
        )
    }

    async fn register_dynamic_capabilities(&self) {
        let workspace = self.capabilities().and_then(|caps| caps.workspace.as_ref());
        let mut registrations = Vec::new();
        if workspace
            .and_then(|ws| ws.did_change_watched_files)
            .and_then(|caps| caps.dynamic_registration)
            == Some(true)
        {
            let options = lsp::DidChangeWatchedFilesRegistrationOptions {
                watchers: vec![lsp::FileSystemWatcher {
                    glob_pattern: lsp::GlobPattern::String("**/*".to_owned()),
                    kind: None,
                }],
            };
            registrations.push(lsp::Registration {
                id: "wright-watched-files".to_owned(),
                method: "workspace/didChangeWatchedFiles".to_owned(),
                register_options: serde_json::to_value(options).ok(),
            });
        }
        if workspace
            .and_then(|ws| ws.did_change_configuration)
            .and_then(|caps| caps.dynamic_registration)
            == Some(true)
        {
            registrations.push(lsp::Registration {
                id: "wright-configuration".to_owned(),
                method: "workspace/didChangeConfiguration".to_owned(),
                register_options: None,
            });
        }
        if registrations.is_empty() {
            return;
        }
        if let Err(err) = self.client.register_capability(registrations).await {
            self.log(
                lsp::MessageType::WARNING,
                format!("the client refused file-watching registration: {err}"),
            )
            .await;
        }
    }

    fn status(&self) -> proto::StatusResult {
        let (encoding, documents) = {
            let buffers = lock(&self.buffers);
            (buffers.encoding(), buffers.snapshot())
        };
        let workspace = lock(&self.workspace);
        proto::StatusResult {
            server: proto::ServerInfo {
                name: "wright".to_owned(),
                version: crate::VERSION.to_owned(),
            },
            position_encoding: encoding.to_string(),
            workspace_folders: workspace
                .roots
                .iter()
                .map(|root| root.display().to_string())
                .collect(),
            documents: documents
                .into_iter()
                .map(|(key, document)| proto::DocumentStatus {
                    uri: convert::document_uri(&key),
                    version: document.version(),
                    language_id: document.language_id().to_owned(),
                    saved_version: document.saved_version(),
                })
                .collect(),
            settings: workspace
                .config
                .settings()
                .map(|(spec, setting)| proto::SettingStatus {
                    key: spec.key.to_owned(),
                    value: setting.map(|s| s.display_value().to_owned()),
                    source: setting.map(|s| s.source.to_string()),
                })
                .collect(),
            problems: workspace
                .config
                .problems()
                .iter()
                .map(ToString::to_string)
                .collect(),
            log: if super::client_log::routed() {
                "window/logMessage".to_owned()
            } else {
                self.options.log.clone()
            },
        }
    }

    /// `wright/status`.
    pub async fn status_request(&self) -> RpcResult<proto::StatusResult> {
        Ok(self.status())
    }

    /// `wright/context`: retrieval over the index of the document's root, reading open
    /// buffers instead of their files.
    pub async fn context_request(
        &self,
        params: proto::ContextParams,
    ) -> RpcResult<proto::ContextResult> {
        let budget = params.budget.unwrap_or(8000);
        let document =
            match &params.text_document {
                Some(document) => Some(document.uri.parse::<lsp::Uri>().map_err(|_| {
                    RpcError::invalid_params(format!("not a URI: {}", document.uri))
                })?),
                None => None,
            };
        let path = document.as_ref().and_then(convert::file_path);
        let Some((index, current_file)) = self.indexes.for_document(path.as_deref()) else {
            return Err(RpcError {
                code: tower_lsp_server::jsonrpc::ErrorCode::ServerError(-32001),
                message: "the index is not built yet; try again when indexing has finished".into(),
                data: None,
            });
        };
        let (overlay, cursor_symbol) = {
            let buffers = lock(&self.buffers);
            let cursor_symbol = match (&document, params.position) {
                (Some(uri), Some(position)) => {
                    buffers.get(&convert::document_key(uri)).and_then(|doc| {
                        let position =
                            crate::buffers::Position::new(position.line, position.character);
                        let offset = crate::buffers::position_to_offset(
                            doc.text(),
                            position,
                            buffers.encoding(),
                        );
                        convert::identifier_at(&doc.text().to_string(), offset)
                    })
                }
                _ => None,
            };
            (convert::BufferOverlay::snapshot(&buffers), cursor_symbol)
        };
        let open_files = overlay.relative_paths(index.root());
        let query = crate::retrieval::Query {
            text: params.query,
            budget,
            current_file,
            cursor_symbol,
            open_files,
        };
        let context = tokio::task::spawn_blocking(move || {
            crate::retrieval::retrieve(&index, &overlay, &query)
        })
        .await
        .map_err(|err| RpcError {
            code: tower_lsp_server::jsonrpc::ErrorCode::InternalError,
            message: format!("retrieval failed: {err}").into(),
            data: None,
        })?;
        Ok(proto::ContextResult {
            query: context.query,
            budget: context.budget,
            tokens: context.tokens,
            snippets: context
                .snippets
                .into_iter()
                .map(|s| proto::ContextSnippet {
                    path: s.path,
                    start_line: s.start_line,
                    end_line: s.end_line,
                    kind: s.kind.as_str().to_owned(),
                    score: s.score,
                    text: s.text,
                })
                .collect(),
        })
    }

    /// The path of `uri` relative to the workspace folder holding it.
    fn relative_in_root(&self, uri: &lsp::Uri) -> Option<String> {
        let path = convert::file_path(uri)?;
        let workspace = lock(&self.workspace);
        let root = convert::root_holding(&workspace.roots, &path)?;
        Some(crate::workspace::relative_path(root, &path))
    }

    /// The `wright.agent.run` command a code action runs: `wright/agentRun`'s params, the task
    /// written for the code at hand. `None` outside the workspace folders.
    fn action_command(&self, data: &CodeActionData) -> Option<lsp::Command> {
        let relative = self.relative_in_root(&data.uri.parse().ok()?)?;
        let lines = (data.range.start.line + 1, data.range.end.line + 1);
        let task = crate::agent::prompt::code_task(data.action, &relative, lines, &data.problems);
        let arguments = serde_json::json!({
            "task": task,
            "textDocument": {"uri": data.uri},
            "range": data.range,
        });
        Some(lsp::Command {
            title: data.action.title().to_owned(),
            command: proto::commands::AGENT_RUN.to_owned(),
            arguments: Some(vec![arguments]),
        })
    }

    /// `wright/agentRun`.
    pub async fn agent_run(
        &self,
        params: proto::AgentRunParams,
    ) -> RpcResult<proto::AgentRunResult> {
        self.start_session(params, false).await
    }

    /// Starts a session; `announce`: its outcome is also shown with `window/showMessage` (for
    /// clients that start it with `wright.agent.run` and read no `wright/agentEvent`: Helix).
    async fn start_session(
        &self,
        params: proto::AgentRunParams,
        announce: bool,
    ) -> RpcResult<proto::AgentRunResult> {
        let review = match params.apply_mode.as_deref() {
            None => false,
            Some(mode) => apply_mode(mode)?,
        };
        let mode = params.mode.as_deref().map(mode_of).transpose()?;
        if params.task.trim().is_empty() && params.session_id.is_none() {
            return Err(RpcError::invalid_params("the task is empty"));
        }
        let place = self.place(params.text_document.as_ref(), params.range)?;
        let ask = Ask {
            begin: match &params.session_id {
                Some(id) => Begin::Resume(id),
                None => Begin::Task(&params.task),
            },
            model: params.model.as_deref(),
            mode,
            review,
            announce,
        };
        let joined = self
            .agents
            .start(self.editor(), place, ask)
            .map_err(session_refused)?;
        Ok(proto::AgentRunResult {
            session_id: joined.session_id,
        })
    }

    /// `wright/agentPrompt`.
    pub async fn agent_prompt(
        &self,
        params: proto::AgentPromptParams,
    ) -> RpcResult<proto::AgentPromptResult> {
        let mode = params.mode.as_deref().map(mode_of).transpose()?;
        let place = self.place(params.text_document.as_ref(), params.range)?;
        let message = UserMessage {
            text: params.message,
            focus: place.focus.clone(),
            images: params
                .images
                .unwrap_or_default()
                .into_iter()
                .map(|image| crate::agent::conversation::Image {
                    media_type: image.media_type,
                    data: image.data,
                })
                .collect(),
        };
        let joined = self
            .agents
            .prompt(
                self.editor(),
                place,
                &params.session_id,
                message,
                mode,
                params.model.as_deref(),
            )
            .map_err(session_refused)?;
        Ok(proto::AgentPromptResult {
            session_id: joined.session_id,
            turn: joined.turn,
        })
    }

    /// `wright/sessionConfigure`.
    pub async fn session_configure(
        &self,
        params: proto::SessionConfigureParams,
    ) -> RpcResult<proto::SessionConfigureResult> {
        let mode = params.mode.as_deref().map(mode_of).transpose()?;
        let review = params.apply_mode.as_deref().map(apply_mode).transpose()?;
        self.agents
            .configure(&params.session_id, mode, params.model.as_deref(), review)
            .map_err(session_refused)?;
        Ok(proto::SessionConfigureResult {})
    }

    /// What the editor offers a session.
    fn editor(&self) -> Editor {
        let capabilities = self.capabilities();
        Editor {
            client: self.client.clone(),
            buffers: Arc::clone(&self.buffers),
            edit_capabilities: self.edit_capabilities(),
            progress: capabilities
                .and_then(|caps| caps.window.as_ref())
                .and_then(|window| window.work_done_progress)
                == Some(true),
            approval_requests: capabilities
                .and_then(|caps| caps.experimental.as_ref())
                .and_then(|experimental| experimental.get("wrightRequestApproval"))
                .and_then(Value::as_bool)
                == Some(true),
        }
    }

    /// Where a session on `document` works: the workspace folder holding it (the first
    /// otherwise), its configuration and index, and the user's file and selection.
    fn place(
        &self,
        document: Option<&proto::TextDocumentIdentifier>,
        range: Option<proto::Range>,
    ) -> RpcResult<Place> {
        let uri =
            match document {
                Some(document) => Some(document.uri.parse::<lsp::Uri>().map_err(|_| {
                    RpcError::invalid_params(format!("not a URI: {}", document.uri))
                })?),
                None => None,
            };
        let path = uri.as_ref().and_then(convert::file_path);
        let (root, config) = {
            let workspace = lock(&self.workspace);
            let root = path
                .as_ref()
                .and_then(|path| convert::root_holding(&workspace.roots, path))
                .or(workspace.roots.first())
                .cloned()
                .unwrap_or_else(|| self.options.default_root.clone());
            (root, workspace.config.clone())
        };
        let index = self
            .indexes
            .for_document(path.as_deref())
            .map(|(index, _)| index)
            .filter(|index| index.root() == root);
        let selection = uri.as_ref().zip(range).and_then(|(uri, range)| {
            let text = lock(&self.buffers).text_in(
                &convert::document_key(uri),
                convert::position(range_start(range)),
                convert::position(range_end(range)),
            )?;
            Some(((range.start.line + 1, range.end.line + 1), text))
        });
        let focus = crate::agent::prompt::EditorFocus::in_root(&root, path.as_deref(), selection);
        Ok(Place {
            root,
            config,
            index,
            focus,
        })
    }

    /// `wright/agentCancel`.
    pub async fn agent_cancel(
        &self,
        params: proto::SessionParams,
    ) -> RpcResult<proto::AgentCancelResult> {
        Ok(proto::AgentCancelResult {
            cancelled: self.agents.cancel(Some(&params.session_id)),
        })
    }

    /// `wright/sessions`.
    pub async fn sessions(&self) -> RpcResult<proto::SessionsResult> {
        let roots = lock(&self.workspace).roots.clone();
        Ok(proto::SessionsResult {
            sessions: match config::data_dir(&process_env) {
                Ok(data_dir) => self.agents.list(&data_dir, &roots),
                Err(_) => Vec::new(),
            },
        })
    }

    /// `wright/stats`: the journals read on a blocking thread (they may be many).
    pub async fn stats(&self, params: proto::StatsParams) -> RpcResult<proto::StatsResult> {
        let roots = lock(&self.workspace).roots.clone();
        let data_dir = own_dir(config::data_dir(&process_env))?;
        on_blocking_thread("stats", move || {
            Ok(crate::learning::stats::for_editor(
                &data_dir,
                &roots,
                params.since_days.unwrap_or(30),
                params.all.unwrap_or(false),
            ))
        })
        .await
    }

    /// `wright/editsAccept`: through `workspace/applyEdit`, so on a blocking thread.
    pub async fn edits_accept(
        &self,
        params: proto::ReviewParams,
    ) -> RpcResult<proto::ReviewResult> {
        self.review(params, true).await
    }

    /// `wright/editsReject`.
    pub async fn edits_reject(
        &self,
        params: proto::ReviewParams,
    ) -> RpcResult<proto::ReviewResult> {
        self.review(params, false).await
    }

    async fn review(
        &self,
        params: proto::ReviewParams,
        accept: bool,
    ) -> RpcResult<proto::ReviewResult> {
        let agents = Arc::clone(&self.agents);
        on_blocking_thread("review", move || {
            agents.review(&params.session_id, accept, params.hunks.as_deref())
        })
        .await
    }

    /// `wright/undo`: through `workspace/applyEdit`, so on a blocking thread while the
    /// transport carries the editor's answer.
    pub async fn undo(&self, params: proto::UndoParams) -> RpcResult<proto::UndoResult> {
        let agents = Arc::clone(&self.agents);
        let earlier = Earlier {
            client: self.client.clone(),
            buffers: Arc::clone(&self.buffers),
            edit_capabilities: self.edit_capabilities(),
            data_dir: own_dir(config::data_dir(&process_env))?,
            roots: lock(&self.workspace).roots.clone(),
        };
        on_blocking_thread("undo", move || {
            agents.undo(params.session_id.as_deref(), params.checkpoint, earlier)
        })
        .await
    }

    /// `wright/viewFileText`.
    pub async fn view_file_text(
        &self,
        params: proto::ViewFileTextParams,
    ) -> RpcResult<proto::ViewFileTextResult> {
        let uri: lsp::Uri = params.text_document.uri.parse().map_err(|_| {
            RpcError::invalid_params(format!("not a URI: {}", params.text_document.uri))
        })?;
        let key = convert::document_key(&uri);
        let document: Document = lock(&self.buffers)
            .get(&key)
            .ok_or_else(|| RpcError::invalid_params(format!("{} is not open", uri.as_str())))?;
        Ok(proto::ViewFileTextResult {
            version: document.version(),
            text: document.text().to_string(),
        })
    }
}

impl LanguageServer for Backend {
    async fn initialize(&self, params: lsp::InitializeParams) -> RpcResult<lsp::InitializeResult> {
        let encoding = convert::negotiate_encoding(&params.capabilities);
        lock(&self.buffers).set_encoding(encoding);
        #[allow(
            deprecated,
            reason = "root_uri: the fallback for clients without workspace folders"
        )]
        let roots: Vec<PathBuf> = match (&params.workspace_folders, &params.root_uri) {
            (Some(folders), _) if !folders.is_empty() => folders
                .iter()
                .filter_map(|folder| convert::file_path(&folder.uri))
                .collect(),
            (_, Some(uri)) => convert::file_path(uri).into_iter().collect(),
            _ => Vec::new(),
        };
        let roots = if roots.is_empty() {
            vec![self.options.default_root.clone()]
        } else {
            roots
        };
        let options = params.initialization_options.clone();
        let _ = self.client_capabilities.set(params.capabilities);
        if let Some(info) = params.client_info {
            let _ = self.client_name.set(info.name);
        }
        // Problems are reported in `initialized`: a client may drop messages sent before it.
        {
            let mut workspace = lock(&self.workspace);
            workspace.layers.reload_files(&roots);
            if let Some(options) = &options {
                workspace.layers.set_initialization_options(options);
            }
            workspace.roots = roots;
            workspace.config = workspace.layers.resolve();
        }
        Ok(lsp::InitializeResult {
            capabilities: lsp::ServerCapabilities {
                position_encoding: Some(convert::encoding_kind(encoding)),
                text_document_sync: Some(lsp::TextDocumentSyncCapability::Options(
                    lsp::TextDocumentSyncOptions {
                        open_close: Some(true),
                        change: Some(lsp::TextDocumentSyncKind::INCREMENTAL),
                        save: Some(lsp::TextDocumentSyncSaveOptions::SaveOptions(
                            lsp::SaveOptions {
                                include_text: Some(false),
                            },
                        )),
                        ..Default::default()
                    },
                )),
                workspace: Some(lsp::WorkspaceServerCapabilities {
                    workspace_folders: Some(lsp::WorkspaceFoldersServerCapabilities {
                        supported: Some(true),
                        change_notifications: Some(lsp::OneOf::Left(true)),
                    }),
                    file_operations: None,
                }),
                workspace_symbol_provider: Some(lsp::OneOf::Left(true)),
                code_action_provider: Some(lsp::CodeActionProviderCapability::Options(
                    lsp::CodeActionOptions {
                        code_action_kinds: Some(vec![
                            lsp::CodeActionKind::QUICKFIX,
                            lsp::CodeActionKind::REFACTOR,
                        ]),
                        resolve_provider: Some(true),
                        ..Default::default()
                    },
                )),
                execute_command_provider: Some(lsp::ExecuteCommandOptions {
                    commands: proto::commands::ALL
                        .iter()
                        .map(|c| (*c).to_owned())
                        .collect(),
                    work_done_progress_options: Default::default(),
                }),
                ..Default::default()
            },
            server_info: Some(lsp::ServerInfo {
                name: "wright".to_owned(),
                version: Some(crate::VERSION.to_owned()),
            }),
            offset_encoding: None,
        })
    }

    async fn initialized(&self, _: lsp::InitializedParams) {
        let (roots, encoding) = (
            lock(&self.workspace).roots.len(),
            lock(&self.buffers).encoding(),
        );
        self.register_dynamic_capabilities().await;
        self.log(
            lsp::MessageType::INFO,
            format!(
                "ready (version {}): {roots} workspace folder{}, positions in {encoding}",
                crate::VERSION,
                if roots == 1 { "" } else { "s" }
            ),
        )
        .await;
        self.update_workspace(|_| {}).await;
        self.build_indexes();
        self.sweep_edit_temporaries();
    }

    async fn shutdown(&self) -> RpcResult<()> {
        Ok(())
    }

    async fn did_open(&self, params: lsp::DidOpenTextDocumentParams) {
        let item = params.text_document;
        let key = convert::document_key(&item.uri);
        let document = Document::new(&item.text, item.version, item.language_id);
        if lock(&self.buffers).open(key.clone(), document) {
            tracing::debug!("{key} was opened again; its text was replaced");
        }
        self.reindex(&key);
    }

    async fn did_change(&self, params: lsp::DidChangeTextDocumentParams) {
        let key = convert::document_key(&params.text_document.uri);
        let version = params.text_document.version;
        let changes = convert::text_changes(params.content_changes);
        let result = lock(&self.buffers).change(&key, version, &changes);
        if result.is_ok() {
            self.reindex(&key);
        }
        match result {
            Ok(VersionOrder::Increasing) => {}
            Ok(VersionOrder::NotIncreasing { previous }) => {
                tracing::warn!("{key}: version went from {previous} to {version}");
            }
            Err(err) => self.log(lsp::MessageType::ERROR, err).await,
        }
    }

    async fn did_save(&self, params: lsp::DidSaveTextDocumentParams) {
        let key = convert::document_key(&params.text_document.uri);
        let result = lock(&self.buffers).mark_saved(&key);
        self.reindex(&key);
        if let Err(err) = result {
            self.log(lsp::MessageType::WARNING, err).await;
        }
    }

    async fn did_close(&self, params: lsp::DidCloseTextDocumentParams) {
        let key = convert::document_key(&params.text_document.uri);
        let result = lock(&self.buffers).close(&key);
        // The buffer's unsaved text is gone: the disk is the truth again.
        self.reindex(&key);
        if let Err(err) = result {
            self.log(lsp::MessageType::WARNING, err).await;
        }
    }

    async fn did_change_workspace_folders(&self, params: lsp::DidChangeWorkspaceFoldersParams) {
        let removed: Vec<PathBuf> = params
            .event
            .removed
            .iter()
            .filter_map(|folder| convert::file_path(&folder.uri))
            .collect();
        let added: Vec<PathBuf> = params
            .event
            .added
            .iter()
            .filter_map(|folder| convert::file_path(&folder.uri))
            .collect();
        self.update_workspace(|workspace| {
            workspace.roots.retain(|root| !removed.contains(root));
            for root in added {
                if !workspace.roots.contains(&root) {
                    workspace.roots.push(root);
                }
            }
            let roots = workspace.roots.clone();
            workspace.layers.reload_files(&roots);
        })
        .await;
        self.build_indexes();
    }

    async fn did_change_configuration(&self, params: lsp::DidChangeConfigurationParams) {
        let mut settings = params.settings;
        let can_pull = self
            .capabilities()
            .and_then(|caps| caps.workspace.as_ref())
            .and_then(|ws| ws.configuration)
            == Some(true);
        // In the "pull" model the notification only says something changed.
        if settings.is_null() && can_pull {
            let item = lsp::ConfigurationItem {
                scope_uri: None,
                section: Some("wright".to_owned()),
            };
            settings = match self.client.configuration(vec![item]).await {
                Ok(mut values) if !values.is_empty() => values.swap_remove(0),
                Ok(_) => Value::Null,
                Err(err) => {
                    self.log(
                        lsp::MessageType::WARNING,
                        format!("could not read the client's settings: {err}"),
                    )
                    .await;
                    return;
                }
            };
        }
        self.update_workspace(|workspace| workspace.layers.set_client_settings(&settings))
            .await;
    }

    async fn did_change_watched_files(&self, params: lsp::DidChangeWatchedFilesParams) {
        let roots = lock(&self.workspace).roots.clone();
        for change in &params.changes {
            match convert::file_path(&change.uri) {
                Some(path) if convert::root_holding(&roots, &path).is_some() => {
                    self.indexes.changed(path);
                }
                // The watchers are registered for the workspace folders only: a change
                // elsewhere (`file:///ws/../../x`) is no file of theirs.
                _ => tracing::warn!(
                    "ignored a watched-file change outside the workspace folders: {}",
                    change.uri.as_str()
                ),
            }
        }
        let touches_config = {
            let workspace = lock(&self.workspace);
            params.changes.iter().any(|change| {
                convert::file_path(&change.uri)
                    .is_some_and(|path| workspace.layers.is_config_file(&path))
            })
        };
        if touches_config {
            self.update_workspace(|workspace| {
                let roots = workspace.roots.clone();
                workspace.layers.reload_files(&roots);
            })
            .await;
        }
    }

    /// The agent as code actions, for clients with no other way in (Helix). Every action
    /// carries its command (a task text and a place: small), never a lean `data` to resolve:
    /// released Helix (25.07) resolves the chosen action but then runs the command of the
    /// action as it was before, so a command filled in only by `codeAction/resolve` never ran.
    async fn code_action(
        &self,
        params: lsp::CodeActionParams,
    ) -> RpcResult<Option<lsp::CodeActionResponse>> {
        let document = params.text_document;
        if self.relative_in_root(&document.uri).is_none() {
            return Ok(None);
        }
        let problems: Vec<String> = params
            .context
            .diagnostics
            .iter()
            .take(5)
            .map(|d| format!("line {}: {}", d.range.start.line + 1, d.message.trim()))
            .collect();
        let mut kinds = Vec::new();
        if !problems.is_empty() {
            kinds.push(CodeTask::Fix);
        }
        kinds.extend([CodeTask::Explain, CodeTask::Tests, CodeTask::Document]);
        let mut actions = Vec::new();
        for action in kinds {
            let data = CodeActionData {
                action,
                uri: document.uri.as_str().to_owned(),
                range: params.range,
                problems: if action == CodeTask::Fix {
                    problems.clone()
                } else {
                    Vec::new()
                },
            };
            actions.push(lsp::CodeActionOrCommand::CodeAction(lsp::CodeAction {
                title: action.title().to_owned(),
                kind: action.kind(),
                command: self.action_command(&data),
                ..Default::default()
            }));
        }
        Ok(Some(actions))
    }

    /// `codeAction/resolve`: wright's actions are complete as sent, and come back as they are
    /// (VS Code and Helix resolve the action they run, as `resolveProvider` invites). An action
    /// with `data` is another server's, sent here by mistake.
    async fn code_action_resolve(&self, action: lsp::CodeAction) -> RpcResult<lsp::CodeAction> {
        if action.data.is_some() {
            return Err(RpcError::invalid_params(format!(
                "{:?} is not one of wright's code actions (they carry no data)",
                action.title
            )));
        }
        Ok(action)
    }

    async fn symbol(
        &self,
        params: lsp::WorkspaceSymbolParams,
    ) -> RpcResult<Option<lsp::WorkspaceSymbolResponse>> {
        let hits = self.indexes.symbols(&params.query, 200);
        let encoding = lock(&self.buffers).encoding();
        // Columns are stored in characters; the client counts in its encoding, which needs
        // each line's text: from the buffer when open, else from the disk, one read per file.
        let mut lines: HashMap<PathBuf, Vec<String>> = HashMap::new();
        let mut symbols = Vec::with_capacity(hits.len());
        for (index, hit) in hits {
            let path = index.root().join(&hit.path);
            let Some(uri) = lsp::Uri::from_file_path(&path) else {
                continue;
            };
            let file_lines = lines.entry(path.clone()).or_insert_with(|| {
                let text = lock(&self.buffers)
                    .get(&DocumentKey::File(path.clone()))
                    .map(|document| document.text().to_string())
                    .or_else(|| index.read_source(&hit.path))
                    .unwrap_or_default();
                text.lines().map(str::to_owned).collect()
            });
            let line_text = file_lines.get(hit.line as usize).map_or("", String::as_str);
            let name_chars = hit.name.chars().count() as u32;
            let start = convert::char_column(line_text, hit.column, encoding);
            let end = convert::char_column(line_text, hit.column + name_chars, encoding);
            #[allow(deprecated, reason = "`deprecated` is a required field of the type")]
            symbols.push(lsp::SymbolInformation {
                name: hit.name,
                kind: convert::symbol_kind(&hit.kind),
                tags: None,
                deprecated: None,
                location: lsp::Location::new(
                    uri,
                    lsp::Range::new(
                        lsp::Position::new(hit.line, start),
                        lsp::Position::new(hit.line, end),
                    ),
                ),
                container_name: hit.container,
            });
        }
        Ok(Some(lsp::WorkspaceSymbolResponse::Flat(symbols)))
    }

    async fn execute_command(
        &self,
        params: lsp::ExecuteCommandParams,
    ) -> RpcResult<Option<lsp::LSPAny>> {
        match params.command.as_str() {
            proto::commands::STATUS => Ok(serde_json::to_value(self.status()).ok()),
            // Helix sends string arguments only: a task, or a session id.
            proto::commands::AGENT_RUN => {
                let params = match params.arguments.first() {
                    Some(Value::String(task)) => proto::AgentRunParams {
                        task: task.clone(),
                        text_document: None,
                        range: None,
                        model: None,
                        apply_mode: None,
                        session_id: None,
                        mode: None,
                    },
                    Some(object @ Value::Object(_)) => serde_json::from_value(object.clone())
                        .map_err(|err| RpcError::invalid_params(err.to_string()))?,
                    _ => {
                        return Err(RpcError::invalid_params(
                            "wright.agent.run takes the task as its argument",
                        ));
                    }
                };
                // A client that shows `wright/agentEvent` itself says so; the others (Helix)
                // learn the outcome from a message.
                let shows_events = self
                    .capabilities()
                    .and_then(|caps| caps.experimental.as_ref())
                    .and_then(|experimental| experimental.get("wrightAgentEvents"))
                    .and_then(Value::as_bool)
                    == Some(true);
                let result = self.start_session(params, !shows_events).await?;
                Ok(serde_json::to_value(result).ok())
            }
            proto::commands::AGENT_PROMPT => {
                let Some(Value::String(message)) = params.arguments.first() else {
                    return Err(RpcError::invalid_params(
                        "wright.agent.prompt takes the message as its argument",
                    ));
                };
                let session_id = self.agents.last().ok_or_else(|| {
                    RpcError::invalid_params(
                        "no agent session to continue; start one with wright.agent.run",
                    )
                })?;
                let result = self
                    .agent_prompt(proto::AgentPromptParams {
                        session_id,
                        message: message.clone(),
                        text_document: None,
                        range: None,
                        mode: None,
                        model: None,
                        images: None,
                    })
                    .await?;
                Ok(serde_json::to_value(result).ok())
            }
            proto::commands::AGENT_CANCEL => {
                let id = params.arguments.first().and_then(Value::as_str);
                Ok(Some(
                    serde_json::json!({"cancelled": self.agents.cancel(id)}),
                ))
            }
            proto::commands::EDITS_UNDO => {
                let session_id = params
                    .arguments
                    .first()
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                let result = self
                    .undo(proto::UndoParams {
                        session_id,
                        checkpoint: None,
                    })
                    .await?;
                Ok(serde_json::to_value(result).ok())
            }
            proto::commands::INDEX_REBUILD => {
                self.indexes.forget();
                self.build_indexes();
                Ok(None)
            }
            other => Err(RpcError::invalid_params(format!(
                "unknown command {other:?}; wright offers {}",
                proto::commands::ALL.join(", ")
            ))),
        }
    }
}

/// How a code action shows in the editor's menu.
impl CodeTask {
    fn title(self) -> &'static str {
        match self {
            Self::Fix => "wright: fix this with the agent",
            Self::Explain => "wright: explain this code",
            Self::Tests => "wright: write tests for this code",
            Self::Document => "wright: document this code",
        }
    }

    fn kind(self) -> Option<lsp::CodeActionKind> {
        match self {
            Self::Fix => Some(lsp::CodeActionKind::QUICKFIX),
            // Explaining changes nothing: no kind fits, and none is required.
            Self::Explain => None,
            Self::Tests | Self::Document => Some(lsp::CodeActionKind::REFACTOR),
        }
    }
}

/// What a code action's command is written from.
#[derive(Debug)]
struct CodeActionData {
    action: CodeTask,
    uri: String,
    range: lsp::Range,
    problems: Vec<String>,
}
