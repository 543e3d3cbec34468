//! The custom LSP methods of wright: one empty enum per method, with its serde types.
//!
//! This crate is the API boundary with editors: clients depend on exactly what is here, and
//! `docs/protocol.md` documents every method (a test fails when the two drift). Field names are
//! camelCase on the wire, as in LSP itself. Standard LSP is not repeated here.

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

    /// Every command, as advertised in `executeCommandProvider`.
    pub const ALL: &[&str] = &[STATUS];
}

/// A document, named as LSP names it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
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
    /// Where the server's log goes: `stderr` or a file path.
    pub log: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerInfo {
    pub name: String,
    pub version: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DocumentStatus {
    pub uri: String,
    pub version: i32,
    pub language_id: String,
    /// The version at the last `didSave`, `null` if not saved since it was opened.
    pub saved_version: Option<i32>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
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
#[serde(rename_all = "camelCase")]
pub struct ViewFileTextParams {
    pub text_document: TextDocumentIdentifier,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ViewFileTextResult {
    pub version: i32,
    pub text: String,
}

/// A position in a document, in the encoding negotiated at `initialize`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
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
#[serde(rename_all = "camelCase")]
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

/// Every method of this crate, for documentation checks and code generation.
pub const METHODS: &[&str] = &[Status::METHOD, ViewFileText::METHOD, Context::METHOD];
