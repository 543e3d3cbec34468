//! The language server: the only module that knows LSP types and JSON-RPC.
//!
//! Invariants: LSP positions are converted to byte offsets (and URIs to paths) here and nowhere
//! else, with the encoding negotiated once at `initialize`; stdout carries protocol frames and
//! nothing else.

mod agent;
pub mod client_log;
mod convert;
pub mod framing;
mod indexing;
mod server;
mod transport;

use tower_lsp_server::LspService;
use wright_protocol::{
    AgentCancel, AgentPrompt, AgentRun, Context, EditsAccept, EditsReject, Request,
    SessionConfigure, Sessions, Stats, Status, Undo, ViewFileText,
};

pub use server::ServerOptions;
pub use transport::Outcome;

/// Serves LSP on stdin/stdout until `exit` or end of input; returns the process exit code.
pub async fn run_stdio(options: ServerOptions) -> i32 {
    let (service, socket) = LspService::build(|client| server::Backend::new(client, options))
        .custom_method(Status::METHOD, server::Backend::status_request)
        .custom_method(ViewFileText::METHOD, server::Backend::view_file_text)
        .custom_method(Context::METHOD, server::Backend::context_request)
        .custom_method(AgentRun::METHOD, server::Backend::agent_run)
        .custom_method(AgentPrompt::METHOD, server::Backend::agent_prompt)
        .custom_method(SessionConfigure::METHOD, server::Backend::session_configure)
        .custom_method(AgentCancel::METHOD, server::Backend::agent_cancel)
        .custom_method(Sessions::METHOD, server::Backend::sessions)
        .custom_method(Undo::METHOD, server::Backend::undo)
        .custom_method(Stats::METHOD, server::Backend::stats)
        .custom_method(EditsAccept::METHOD, server::Backend::edits_accept)
        .custom_method(EditsReject::METHOD, server::Backend::edits_reject)
        .finish();
    let outcome = transport::serve(tokio::io::stdin(), tokio::io::stdout(), service, socket).await;
    tracing::info!("language server stopped: {outcome:?}");
    outcome.exit_code()
}
