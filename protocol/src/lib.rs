//! The custom LSP methods of wright: one empty enum per method, with its serde types.
//!
//! This crate is the API boundary with editors: clients depend on exactly what is here, and
//! `docs/protocol.md` documents every method (a test fails when the two drift). Field names are
//! camelCase on the wire, as in LSP itself. Standard LSP is not repeated here.
//!
//! With the `ts` feature every wire type also derives `ts_rs::TS`, from which
//! `cargo xtask codegen` writes the VS Code extension's TypeScript declarations; a params
//! struct whose `Option` fields are `#[serde(default)]` says so to TypeScript with
//! `ts(optional_fields = nullable)` (absent or `null`).

use serde::{Deserialize, Serialize};

/// A client → server request.
pub trait Request {
    const METHOD: &'static str;
    type Params: Serialize + for<'de> Deserialize<'de>;
    type Result: Serialize + for<'de> Deserialize<'de>;
}

/// `workspace/executeCommand` names, for clients that have no other way to send a custom
/// request (Helix). Each runs the request of the same meaning and returns its result.
pub mod commands {
    /// Runs [`super::Status`].
    pub const STATUS: &str = "wright.status";
    /// Runs [`super::AgentRun`]; the argument is the task (a string), or the request's params.
    pub const AGENT_RUN: &str = "wright.agent.run";
    /// `[message]`: a new turn of the last session (`wright/agentPrompt`).
    pub const AGENT_PROMPT: &str = "wright.agent.prompt";
    /// Runs [`super::AgentCancel`] on the given session, or on every running one.
    pub const AGENT_CANCEL: &str = "wright.agent.cancel";
    /// Runs [`super::Undo`]; with no argument, on the last session.
    pub const EDITS_UNDO: &str = "wright.edits.undo";
    /// Re-reads every workspace folder into its symbol index (with `$/progress`), picking up
    /// files changed outside the editor; returns `null` once the rebuild has started.
    pub const INDEX_REBUILD: &str = "wright.index.rebuild";

    /// Every command, as advertised in `executeCommandProvider`.
    pub const ALL: &[&str] = &[
        STATUS,
        AGENT_RUN,
        AGENT_PROMPT,
        AGENT_CANCEL,
        EDITS_UNDO,
        INDEX_REBUILD,
    ];
}

/// A document, named as LSP names it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct TextDocumentIdentifier {
    pub uri: String,
}

/// `wright/status`: what the server holds and how it is configured.
pub enum Status {}

impl Request for Status {
    const METHOD: &'static str = "wright/status";
    type Params = ();
    type Result = StatusResult;
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct StatusResult {
    pub server: ServerInfo,
    /// The encoding negotiated at `initialize`: `utf-8`, `utf-16` or `utf-32`.
    pub position_encoding: String,
    /// The workspace roots, as file-system paths.
    pub workspace_folders: Vec<String>,
    /// Open documents, sorted by URI.
    pub documents: Vec<DocumentStatus>,
    /// Every configuration key, in schema order; secrets show as `<set>`.
    pub settings: Vec<SettingStatus>,
    /// Configuration problems (unknown keys, wrong types), each prefixed with its source.
    pub problems: Vec<String>,
    /// Where the server's log goes: `stderr`, a file path, or `window/logMessage` (the client
    /// asked for it with `experimental.wrightLogMessages`).
    pub log: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct ServerInfo {
    pub name: String,
    pub version: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct DocumentStatus {
    pub uri: String,
    pub version: i32,
    pub language_id: String,
    /// The version at the last `didSave`, `null` if not saved since it was opened.
    pub saved_version: Option<i32>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct SettingStatus {
    pub key: String,
    /// `null` when unset.
    pub value: Option<String>,
    /// Where the value came from (`default`, `environment OPENAI_API_KEY`, `user file …`).
    pub source: Option<String>,
}

/// `wright/viewFileText`: the text and version the server holds for an open document, to check
/// that editor and server agree (the same idea as rust-analyzer's request of that name).
pub enum ViewFileText {}

impl Request for ViewFileText {
    const METHOD: &'static str = "wright/viewFileText";
    type Params = ViewFileTextParams;
    type Result = ViewFileTextResult;
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct ViewFileTextParams {
    pub text_document: TextDocumentIdentifier,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct ViewFileTextResult {
    pub version: i32,
    pub text: String,
}

/// A position in a document, in the encoding negotiated at `initialize`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct Position {
    pub line: u32,
    pub character: u32,
}

/// `wright/context`: the code retrieval would show a model for a query, ranked and fitted to a
/// token budget (what `wright context` prints).
pub enum Context {}

impl Request for Context {
    const METHOD: &'static str = "wright/context";
    type Params = ContextParams;
    type Result = ContextResult;
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "ts", ts(optional_fields = nullable))]
pub struct ContextParams {
    pub query: String,
    /// Tokens the snippets may take; 8000 when absent.
    #[serde(default)]
    pub budget: Option<usize>,
    /// The document with the cursor: its file is favoured, and the identifier at `position`
    /// is looked up as if the query named it.
    #[serde(default)]
    pub text_document: Option<TextDocumentIdentifier>,
    #[serde(default)]
    pub position: Option<Position>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct ContextResult {
    pub query: String,
    pub budget: usize,
    /// Tokens the snippets take together (o200k).
    pub tokens: usize,
    /// Best first.
    pub snippets: Vec<ContextSnippet>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct ContextSnippet {
    /// Relative to its workspace folder.
    pub path: String,
    /// One-based, inclusive.
    pub start_line: u32,
    pub end_line: u32,
    /// `definition` (a definition the query names, in full or its head) or `map` (the
    /// signature lines of a file ranked relevant).
    pub kind: String,
    pub score: f64,
    /// What the model would see: a header line with path and lines, then numbered lines.
    pub text: String,
}

/// A range in a document, in the encoding negotiated at `initialize`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct Range {
    pub start: Position,
    pub end: Position,
}

/// `wright/agentRun`: starts an agent session on a task. The answer comes at once, with the
/// session's id; what the session does arrives as [`AgentEvent`] notifications and `$/progress`,
/// and its edits as `workspace/applyEdit` requests.
pub enum AgentRun {}

impl Request for AgentRun {
    const METHOD: &'static str = "wright/agentRun";
    type Params = AgentRunParams;
    type Result = AgentRunResult;
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "ts", ts(optional_fields = nullable))]
pub struct AgentRunParams {
    pub task: String,
    /// The user's document: the session works in its workspace folder and the task names it.
    #[serde(default)]
    pub text_document: Option<TextDocumentIdentifier>,
    /// The user's selection in that document, passed to the model with the task.
    #[serde(default)]
    pub range: Option<Range>,
    /// `PROVIDER/MODEL` or `auto`, over the configuration.
    #[serde(default)]
    pub model: Option<String>,
    /// `auto` (the default): edits are applied as the agent makes them. `review`: they are
    /// held (the session sees them; the editor gets `editProposed` events) until
    /// `wright/editsAccept` applies them all or `wright/editsReject` drops them.
    #[serde(default)]
    pub apply_mode: Option<String>,
    /// Resume this interrupted session (see `wright/sessions`) from its journal, with its
    /// own task and model; `task` is then ignored.
    #[serde(default)]
    pub session_id: Option<String>,
    /// `code` (the default: every tool) or `plan` (read-only tools; the turn ends with a
    /// plan). Sticky: it holds for the session's later turns until changed.
    #[serde(default)]
    pub mode: Option<String>,
}

/// `wright/agentPrompt`: the user's next message to a session. While a turn runs it steers
/// that turn (it reaches the model at the next step boundary); once the turn ended it starts
/// the next one, with the whole history, also for a session of an earlier server.
pub enum AgentPrompt {}

impl Request for AgentPrompt {
    const METHOD: &'static str = "wright/agentPrompt";
    type Params = AgentPromptParams;
    type Result = AgentPromptResult;
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "ts", ts(optional_fields = nullable))]
pub struct AgentPromptParams {
    pub session_id: String,
    /// `@PATH` attaches a workspace file, `@NAME` a symbol the index knows.
    pub message: String,
    #[serde(default)]
    pub text_document: Option<TextDocumentIdentifier>,
    #[serde(default)]
    pub range: Option<Range>,
    /// `code` or `plan`, from this turn on.
    #[serde(default)]
    pub mode: Option<String>,
    /// `PROVIDER/MODEL`, from this turn on (the history is kept).
    #[serde(default)]
    pub model: Option<String>,
    /// Images for providers that take them; the others refuse the message.
    #[serde(default)]
    pub images: Option<Vec<ImageAttachment>>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct ImageAttachment {
    /// `image/png`, `image/jpeg`, `image/gif` or `image/webp`.
    pub media_type: String,
    /// The image, base64.
    pub data: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct AgentPromptResult {
    pub session_id: String,
    /// The turn the message joined (the running one when it steers), counted from 1.
    pub turn: u32,
}

/// `wright/sessionConfigure`: the model, the mode and the apply mode of a session, from its
/// next step on (an ended session's next turn). Sticky.
pub enum SessionConfigure {}

impl Request for SessionConfigure {
    const METHOD: &'static str = "wright/sessionConfigure";
    type Params = SessionConfigureParams;
    type Result = SessionConfigureResult;
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "ts", ts(optional_fields = nullable))]
pub struct SessionConfigureParams {
    pub session_id: String,
    #[serde(default)]
    pub model: Option<String>,
    /// `code` or `plan`.
    #[serde(default)]
    pub mode: Option<String>,
    /// `auto` or `review`.
    #[serde(default)]
    pub apply_mode: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct SessionConfigureResult {}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct AgentRunResult {
    pub session_id: String,
}

/// `wright/agentCancel`: stops a running session at once (its model call and command).
pub enum AgentCancel {}

impl Request for AgentCancel {
    const METHOD: &'static str = "wright/agentCancel";
    type Params = SessionParams;
    type Result = AgentCancelResult;
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct SessionParams {
    pub session_id: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct AgentCancelResult {
    /// `false` when the session had already ended.
    pub cancelled: bool,
}

/// `wright/sessions`: the sessions journaled on the workspace folders by earlier servers, then
/// this server's, oldest first.
pub enum Sessions {}

impl Request for Sessions {
    const METHOD: &'static str = "wright/sessions";
    type Params = ();
    type Result = SessionsResult;
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct SessionsResult {
    pub sessions: Vec<SessionInfo>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct SessionInfo {
    pub session_id: String,
    pub task: String,
    /// `running`, `done`, `cancelled`, `failed`, or `interrupted` (a session of an earlier
    /// server that never ended: `wright/agentRun` with its `sessionId` resumes it).
    pub status: String,
    pub steps: u32,
    /// Workspace-relative paths of the files its edits changed.
    pub files_changed: Vec<String>,
    /// Edits of the session still applied, whichever server applied them: the checkpoints
    /// `wright/undo` can go back to are 0 to this.
    pub checkpoints: u32,
    /// The short title made after the first turn (`null` until then).
    pub title: Option<String>,
    /// Its turns so far.
    pub turns: u32,
    /// The model it works on now.
    pub model: String,
    /// The estimated cost so far, in US dollars.
    pub cost_usd: f64,
}

/// `wright/editsAccept`: applies every edit a review session (`applyMode: "review"`) holds,
/// all files or none, through `workspace/applyEdit`.
pub enum EditsAccept {}

impl Request for EditsAccept {
    const METHOD: &'static str = "wright/editsAccept";
    type Params = ReviewParams;
    type Result = ReviewResult;
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "ts", ts(optional_fields = nullable))]
pub struct ReviewParams {
    pub session_id: String,
    /// The hunks (their `id`s from `editProposed`) to accept or reject together; without it,
    /// everything held. Hunks not named stay proposed.
    #[serde(default)]
    pub hunks: Option<Vec<String>>,
}

/// `wright/editsReject`: drops every edit a review session holds.
pub enum EditsReject {}

impl Request for EditsReject {
    const METHOD: &'static str = "wright/editsReject";
    type Params = ReviewParams;
    type Result = ReviewResult;
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct ReviewResult {
    pub session_id: String,
    /// Workspace-relative paths of the files accepted (or rejected).
    pub files: Vec<String>,
}

/// `wright/undo`: reverts every edit of a session (the last session when none is named), all
/// files or none, through `workspace/applyEdit` like the edits themselves.
pub enum Undo {}

impl Request for Undo {
    const METHOD: &'static str = "wright/undo";
    type Params = UndoParams;
    type Result = UndoResult;
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "ts", ts(optional_fields = nullable))]
pub struct UndoParams {
    #[serde(default)]
    pub session_id: Option<String>,
    /// Undo back to this checkpoint: the number of the session's edits to keep, counted from
    /// its first (`wright/sessions` gives the count). All of them are undone when absent.
    #[serde(default)]
    pub checkpoint: Option<u32>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct UndoResult {
    pub session_id: String,
    /// Workspace-relative paths of the files restored.
    pub files: Vec<String>,
}

/// `wright/agentEvent` (server → client notification): one thing a session did, as
/// [`AgentEventParams`]; its `kind` and other fields are those of an [`AgentEventKind`].
pub enum AgentEvent {}

impl AgentEvent {
    pub const METHOD: &'static str = "wright/agentEvent";
}

/// The params of `wright/agentEvent`: the session, the event's number, and the event's own
/// fields, `kind` first.
// `E` is the event. The server forwards its own events' serialization, hence the map by
// default; a client reads them as `AgentEventKind` (xtask's codegen tests check that every
// event of the server parses as one).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS), ts(concrete(E = AgentEventKind)))]
#[serde(rename_all = "camelCase")]
pub struct AgentEventParams<E = serde_json::Map<String, serde_json::Value>> {
    pub session_id: String,
    /// 1, 2, 3… within the session, so a client can tell a lost notification.
    pub seq: u64,
    #[serde(flatten)]
    pub event: E,
}

/// The event of an [`AgentEventParams`], told apart by `kind`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(
    tag = "kind",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum AgentEventKind {
    /// The model chosen for the task, and why.
    Model {
        model: String,
        tier: Option<String>,
        reason: String,
    },
    /// A model call starts.
    StepStarted { step: u32 },
    /// Text the model wrote, as it streams.
    TextDelta { text: String },
    /// The step's answer stream was cut and the model is asked again: drop the text shown for
    /// this step since its `stepStarted`; the answer streams again from the start.
    StepRetried { step: u32, reason: String },
    /// A tool call the model made, about to run; `arguments` is the JSON text the model wrote.
    ToolCall {
        id: String,
        name: String,
        arguments: String,
    },
    /// The user answered an approval a command asked for: `allow`, `allowAlways` (for the rest
    /// of the session) or `deny`.
    Approval { command: String, decision: String },
    /// The editor applied an edit to these files, and its buffers (or the disk) show it.
    EditApplied { paths: Vec<String> },
    /// The editor refused an edit or never showed it; `reason` is what the model is told.
    EditRejected { paths: Vec<String>, reason: String },
    /// Its result (`output` is what the model sees).
    ToolResult {
        id: String,
        name: String,
        is_error: bool,
        output: String,
    },
    /// Workspace-relative paths an edit changed (held for review, in review mode).
    FilesChanged { paths: Vec<String> },
    /// Review mode: the agent proposes this file's new text (`after`; `null` deletes it) over
    /// `before` (`null`: a new file); `wright/editsAccept` applies every proposal.
    /// `hunks`: the changed regions, each accepted or rejected on its own by its `id`.
    EditProposed {
        path: String,
        before: Option<String>,
        after: Option<String>,
        hunks: Vec<Hunk>,
    },
    /// The agent's plan, whole, each time it changes.
    Plan { steps: Vec<PlanStep> },
    /// The session's token use so far; `contextTokens` of the model's `contextWindow` the
    /// last request filled; `costUsd`, estimated (`null`: a model without a price).
    Usage {
        #[serde(flatten)]
        total: Usage,
        context_tokens: u64,
        context_window: u64,
        cost_usd: Option<f64>,
    },
    /// A turn begins with the user's message (turn 1: the task).
    Turn { turn: u32, message: String },
    /// The mode (`code`, `plan`) from this step on.
    Mode { mode: String },
    /// The session's short title, made after its first turn.
    Title { title: String },
    /// Compaction shortened the prompt: `masked` old outputs replaced by placeholders (readable
    /// again with `read_artifact`), or, `summarized`, older turns replaced by a summary.
    Compacted {
        masked: usize,
        tokens_before: usize,
        tokens_after: usize,
        summarized: bool,
    },
    /// A model call failed; the session goes on or stops (see the outcome).
    Error { message: String },
    /// A turn ended; the session takes a next one (`wright/agentPrompt`).
    Finished { turn: u32, outcome: Outcome },
}

/// One contiguous changed region of a proposal, in 1-based lines of the text the proposal
/// was computed against (`endLine` < `startLine`: an insertion before `startLine`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct Hunk {
    pub id: String,
    pub start_line: u32,
    pub end_line: u32,
    pub old_text: String,
    pub new_text: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct PlanStep {
    pub title: String,
    pub status: PlanStepStatus,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum PlanStepStatus {
    Pending,
    InProgress,
    Done,
}

/// `wright/stats`: what happened to the agent's work in the sessions journaled on the
/// workspace folders (or every workspace), as `wright stats --json` counts it; with the kept
/// and undone edits per day, for a chart. Read from this machine's journals only.
pub enum Stats {}

impl Request for Stats {
    const METHOD: &'static str = "wright/stats";
    type Params = StatsParams;
    type Result = StatsResult;
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "ts", ts(optional_fields = nullable))]
pub struct StatsParams {
    /// The last this many days (default 30).
    #[serde(default)]
    pub since_days: Option<u64>,
    /// Every workspace's sessions, not only these folders'.
    #[serde(default)]
    pub all: Option<bool>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct StatsResult {
    pub since_days: u64,
    #[serde(flatten)]
    pub all: StatsCounts,
    pub models: std::collections::BTreeMap<String, StatsCounts>,
    /// Oldest first, one per day (UTC) with a landed edit.
    pub days: Vec<StatsDay>,
}

/// The counts of a set of sessions (see `docs/guide/stats.md`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct StatsCounts {
    pub sessions: u64,
    pub turns: u64,
    pub edits: StatsEdits,
    pub commands: StatsCommands,
    pub usage: Usage,
    pub cost_usd: f64,
    /// The median seconds from a session's start to its first landed edit.
    pub first_edit_secs: Option<u64>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct StatsEdits {
    pub proposed: u64,
    pub applied: u64,
    pub rejected: u64,
    pub undone: u64,
    pub kept: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct StatsCommands {
    pub run: u64,
    pub refused: u64,
    pub escalated: u64,
}

/// The edits that landed on one day (UTC): kept, and undone.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct StatsDay {
    /// `YYYY-MM-DD`.
    pub day: String,
    pub kept: u64,
    pub undone: u64,
}

/// Token counts: `input` is the whole prompt, of which `cachedInput` was read from the
/// provider's cache and `cacheWrite` written to it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    pub input: u64,
    pub cached_input: u64,
    pub output: u64,
    pub cache_write: u64,
}

/// How a session ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct Outcome {
    pub status: FinalStatus,
    /// The model's last words (its summary of the work).
    pub message: String,
    /// Why it failed or stopped early, in words the user can act on.
    pub reason: Option<String>,
    pub steps: u32,
    pub files_changed: Vec<String>,
    pub usage: Usage,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub enum FinalStatus {
    Done,
    Cancelled,
    Failed,
}

/// `wright/requestApproval` (server → client request): a command needs more than the sandbox
/// allows (the network, a write outside the workspace, more time or memory), or the
/// configuration asks for approval of it. Sent only to a client that declared
/// `experimental.wrightRequestApproval: true` in its capabilities; others get a
/// `window/showMessageRequest` with the actions "Allow", "Allow always" and "Deny".
pub enum RequestApproval {}

impl RequestApproval {
    pub const METHOD: &'static str = "wright/requestApproval";
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct RequestApprovalParams {
    pub session_id: String,
    /// `network`, `write`, `time`, `memory`, `processes` or `command`.
    pub kind: String,
    /// The command line, when a command asks.
    pub command: Option<String>,
    /// Why, in a sentence for the user.
    pub reason: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct RequestApprovalResult {
    /// `allow` (this once), `allowAlways` (for the rest of the session) or `deny`.
    pub decision: String,
}

/// Every method of this crate, for documentation checks and code generation.
pub const METHODS: &[&str] = &[
    Status::METHOD,
    ViewFileText::METHOD,
    Context::METHOD,
    AgentRun::METHOD,
    AgentPrompt::METHOD,
    SessionConfigure::METHOD,
    AgentCancel::METHOD,
    Sessions::METHOD,
    Undo::METHOD,
    EditsAccept::METHOD,
    EditsReject::METHOD,
    Stats::METHOD,
    AgentEvent::METHOD,
    RequestApproval::METHOD,
];
