//! Approvals through the editor, for a command that needs more than the sandbox allows, an
//! edit of a protected path (`.git`, `.wright`, `sandbox.protected`: kind `protected`), or a
//! call of an MCP server's tool (`approve = "ask"`: kind `mcp`).

use std::collections::HashMap;

use tower_lsp_server::Client;
use tower_lsp_server::ls_types as lsp;
use wright_protocol as proto;

use crate::agent::sandboxed::{Approver, Decision};
use crate::agent::{ToolEvent, ToolEvents};

/// Approvals through the editor: `wright/requestApproval` for a client that declared it,
/// `window/showMessageRequest` otherwise; no answer (Helix) is a denial.
pub(super) struct EditorApprover {
    pub(super) client: Client,
    pub(super) runtime: tokio::runtime::Handle,
    pub(super) session: String,
    /// The client declared `experimental.wrightRequestApproval`.
    pub(super) custom_request: bool,
    /// Where the session hears of the answer.
    pub(super) tool_events: ToolEvents,
}

impl Approver for EditorApprover {
    fn ask(&self, kind: &str, command: &str, reason: &str) -> Decision {
        let client = self.client.clone();
        let params = proto::RequestApprovalParams {
            session_id: self.session.clone(),
            kind: kind.to_owned(),
            command: Some(command.to_owned()),
            reason: reason.to_owned(),
        };
        let custom = self.custom_request;
        let answer = self.runtime.block_on(async move {
            if custom {
                let result = client
                    .send_request::<RequestApprovalRequest>(params)
                    .await
                    .ok()?;
                return Some(match result.decision.as_str() {
                    "allow" => Decision::Allow,
                    "allowAlways" => Decision::AllowAlways,
                    _ => Decision::Deny,
                });
            }
            let actions = ["Allow", "Allow always", "Deny"]
                .map(|title| lsp::MessageActionItem {
                    title: title.to_owned(),
                    properties: HashMap::new(),
                })
                .to_vec();
            let message = if params.kind == "mcp" {
                format!(
                    "wright: the agent asks to call {}: {}. Allow it?",
                    params.command.unwrap_or_default(),
                    params.reason
                )
            } else if params.kind == "protected" {
                format!(
                    "wright: the agent asks to {}: {}. Allow it?",
                    params.command.unwrap_or_default(),
                    params.reason
                )
            } else {
                format!(
                    "wright: `{}` needs more than the sandbox allows: {}. Allow it?",
                    params.command.unwrap_or_default(),
                    params.reason
                )
            };
            let chosen = client
                .show_message_request(lsp::MessageType::WARNING, message, Some(actions))
                .await
                .ok()??;
            Some(match chosen.title.as_str() {
                "Allow" => Decision::Allow,
                "Allow always" => Decision::AllowAlways,
                _ => Decision::Deny,
            })
        });
        let decision = answer.unwrap_or(Decision::Deny);
        let _ = self.tool_events.send(ToolEvent::Approval {
            command: command.to_owned(),
            decision: match decision {
                Decision::Allow => "allow",
                Decision::AllowAlways => "allowAlways",
                Decision::Deny => "deny",
            }
            .to_owned(),
        });
        decision
    }
}

/// `wright/requestApproval`, as tower-lsp-server sends a request.
enum RequestApprovalRequest {}

impl lsp::request::Request for RequestApprovalRequest {
    type Params = proto::RequestApprovalParams;
    type Result = proto::RequestApprovalResult;
    const METHOD: &'static str = proto::RequestApproval::METHOD;
}
