//! wright: a language server that hosts a coding agent.
//!
//! The binary (`main.rs`) is a thin command line over these modules; `docs/architecture.md`
//! is the map of what each owns and the invariants it keeps.

pub mod acp;
pub mod agent;
pub mod buffers;
pub mod compaction;
pub mod config;
pub mod edit;
pub mod files;
pub mod index;
pub mod languages;
pub mod learning;
pub mod llm;
pub mod lsp;
pub mod mcp;
pub mod retrieval;
pub mod router;
pub mod sandbox;
pub mod search;
pub mod workspace;

/// The version of this build, as reported by `--version`, `serverInfo` and `wright/status`.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
