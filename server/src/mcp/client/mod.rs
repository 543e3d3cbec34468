//! One connection to one MCP server (stdio pipes or streamable HTTP), through `rmcp`: the
//! handshake, the server's tools (listed again on `notifications/tools/list_changed`), calls
//! with a timeout, results rendered as tool output; a server that dies is started again
//! once, then reported.
//!
//! The process of a stdio server is not started here: a `Launch` does it (the sandbox by
//! default, unconfined only when the configuration says so), so that this module knows the
//! protocol and nothing of isolation.

mod connection;
mod render;
mod stdio;
#[cfg(test)]
mod tests;
mod unconfined;
mod unrouted;

use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::time::Duration;

pub use unconfined::Unconfined;

/// The pipes of a started stdio server, and what keeps it alive.
pub struct Pipes {
    /// The server's stdin (we write).
    pub stdin: OwnedFd,
    /// The server's stdout (we read): the protocol.
    pub stdout: OwnedFd,
    /// The server's stderr (we read): its log, kept (capped) for error messages.
    pub stderr: Option<OwnedFd>,
    /// Dropping it ends the server and every process it started.
    pub guard: Box<dyn Send + Sync>,
}

/// Starts a stdio server's process; called again when the server died and is restarted.
pub trait Launch: Send + Sync {
    fn launch(&self) -> std::io::Result<Pipes>;
    /// How the server is started, for messages (`mcp-server-everything stdio`, sandboxed).
    fn describe(&self) -> String;
}

/// How to reach a server.
#[derive(Clone)]
pub enum Transport {
    Stdio(Arc<dyn Launch>),
    /// Streamable HTTP; `bearer_token` goes in the `Authorization` header.
    Http {
        url: String,
        bearer_token: Option<String>,
    },
}

/// How a connection behaves.
#[derive(Clone, Debug)]
pub struct Options {
    /// Per call; past it the call is cancelled and reported as a tool error.
    pub call_timeout: Duration,
    /// For starting (or reaching) the server, the handshake and the first list of tools.
    pub connect_timeout: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            call_timeout: Duration::from_secs(60),
            connect_timeout: Duration::from_secs(30),
        }
    }
}

/// A tool as the server describes it.
#[derive(Clone, Debug, PartialEq)]
pub struct Tool {
    pub name: String,
    pub description: Option<String>,
    /// The server's own JSON schema of the arguments.
    pub input_schema: serde_json::Value,
}

/// What a call gave, as the model will see it.
#[derive(Clone, Debug, Default)]
pub struct CallOutput {
    /// Every content item rendered as text in order (text as is; structured content as JSON;
    /// a resource link as its URI and name; an image or audio as a line saying what it is).
    pub text: String,
    /// The server said the call failed (`isError`).
    pub is_error: bool,
    /// Images the call returned, for a model that accepts them.
    pub images: Vec<Image>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Image {
    pub mime_type: String,
    /// Base64, as the protocol carries it.
    pub data: String,
}

/// Whether a connection can still be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum State {
    Running,
    /// The server died after it had been restarted once (or its restart failed).
    Failed {
        error: String,
    },
}

/// Why a server could not be reached or a call did not give a result. Each message names the
/// server and says what happened, with the end of the server's stderr when it has one.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    #[error("MCP server `{server}`: cannot start {command}: {error}")]
    Start {
        server: String,
        command: String,
        error: std::io::Error,
    },
    #[error("MCP server `{server}`: cannot reach {url}: {reason}")]
    Unreachable {
        server: String,
        url: String,
        reason: String,
    },
    #[error(
        "MCP server `{server}` wrote something that is not JSON-RPC on its stdout: {line:?} \
         (is this an MCP server? a stdio server must write only protocol messages to stdout \
         and its logs to stderr){stderr}"
    )]
    NotJsonRpc {
        server: String,
        line: String,
        stderr: Tail,
    },
    #[error("MCP server `{server}` did not answer `initialize` within {} s{stderr}", .timeout.as_secs_f64())]
    InitializeTimeout {
        server: String,
        timeout: Duration,
        stderr: Tail,
    },
    #[error("MCP server `{server}`: the handshake failed: {reason}{stderr}")]
    Handshake {
        server: String,
        reason: String,
        stderr: Tail,
    },
    #[error("MCP server `{server}` closed the connection ({reason}){stderr}")]
    Closed {
        server: String,
        reason: String,
        stderr: Tail,
    },
    #[error("MCP server `{server}`: `{tool}` gave no result within {} s; the call was cancelled", .timeout.as_secs_f64())]
    CallTimeout {
        server: String,
        tool: String,
        timeout: Duration,
    },
    #[error("MCP server `{server}` refused the call of `{tool}`: {reason}")]
    Refused {
        server: String,
        tool: String,
        reason: String,
    },
    #[error("MCP server `{server}` failed and is not started again: {reason}")]
    Failed { server: String, reason: String },
}

/// The end of a server's stderr, as a message's last lines (empty when it wrote nothing).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tail(pub String);

impl std::fmt::Display for Tail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let tail = self.0.trim_end();
        if tail.is_empty() {
            Ok(())
        } else {
            write!(f, "; its stderr ends with:\n{tail}")
        }
    }
}

pub use connection::Client;
