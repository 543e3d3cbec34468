//! The agent: a session's step loop (model output in, tool calls out, results back, until the
//! model finishes or a limit or the user stops it), the tools it calls, the system prompt it
//! keeps byte-stable, and the headless `wright exec` around it.
//!
//! The loop knows nothing of LSP or of the terminal: it reports [`AgentEvent`]s through a
//! channel, and edits and commands go through the [`tools::EditTarget`] and
//! [`tools::CommandRunner`] the caller gives it.

pub mod conversation;
pub mod disk;
pub mod events;
pub mod journal;
pub mod launch;
pub mod prompt;
pub mod sandboxed;
pub mod session;
pub mod tools;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::Notify;

pub use events::{AgentEvent, FinalStatus, Outcome, Spent, ToolEvent, ToolEvents};
pub use session::{Limits, Session, Setup};

/// A session's cancellation: cheap to clone, checked by blocking code, awaited by async code.
#[derive(Clone, Debug, Default)]
pub struct Cancel(Arc<CancelState>);

#[derive(Debug, Default)]
struct CancelState {
    /// Shared as is with the sandbox, which polls it while a command runs.
    cancelled: Arc<AtomicBool>,
    notify: Notify,
}

impl Cancel {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn cancel(&self) {
        self.0.cancelled.store(true, Ordering::SeqCst);
        self.0.notify.notify_waiters();
    }

    /// Clears a cancel that ended the last turn, for the next (the same flag, still shared).
    pub fn reset(&self) {
        self.0.cancelled.store(false, Ordering::SeqCst);
    }

    pub fn is_cancelled(&self) -> bool {
        self.0.cancelled.load(Ordering::SeqCst)
    }

    /// The flag itself, for code that polls rather than awaits (a running command).
    pub fn flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.0.cancelled)
    }

    /// Resolves once [`Cancel::cancel`] was called (at once if it already was).
    pub async fn cancelled(&self) {
        loop {
            let notified = self.0.notify.notified();
            if self.is_cancelled() {
                return;
            }
            notified.await;
        }
    }
}

/// The models of one task: the one the router picked for it, and the one that writes
/// compaction's summaries (the fast tier when one is configured).
pub struct Models {
    pub decision: crate::router::Decision,
    pub task: Arc<dyn crate::llm::ChatModel>,
    pub summary: Arc<dyn crate::llm::ChatModel>,
}

impl Models {
    /// Routes `task` (once, for the whole session) and connects its models. The error says
    /// what to configure.
    pub fn connect(
        config: &crate::config::Config,
        model: Option<&str>,
        task: &str,
    ) -> Result<Self, String> {
        let router = crate::router::Router::from_config_or_embedded(config, model)
            .map_err(|err| err.to_string())?;
        let decision = router.route_task(task);
        let task_model =
            crate::llm::connect(config, &decision.model).map_err(|err| err.to_string())?;
        let side = router.route_side(crate::router::SideCall::Summary);
        let summary = if side.model == decision.model {
            Arc::clone(&task_model)
        } else {
            // A fast tier that cannot be reached leaves the summaries to the task's model.
            crate::llm::connect(config, &side.model).unwrap_or_else(|err| {
                tracing::warn!("summaries use the task's model: {err}");
                Arc::clone(&task_model)
            })
        };
        Ok(Self {
            decision,
            task: task_model,
            summary,
        })
    }

    /// The event that tells which model works on the task, and why.
    pub fn event(&self) -> AgentEvent {
        AgentEvent::Model {
            model: self.decision.model.to_string(),
            tier: Some(format!("{:?}", self.decision.tier).to_lowercase()),
            reason: self.decision.reason.clone(),
        }
    }
}
