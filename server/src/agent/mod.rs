//! The agent: a session's step loop (model output in, tool calls out, results back, until the
//! model finishes or a limit or the user stops it), the tools it calls, the system prompt it
//! keeps byte-stable, and the headless `wright exec` around it.
//!
//! The loop knows nothing of LSP or of the terminal: it reports [`AgentEvent`]s through a
//! channel, and edits and commands go through the [`tools::EditTarget`] and
//! [`tools::CommandRunner`] the caller gives it.

pub mod events;
pub mod exec;
pub mod prompt;
pub mod session;
pub mod tools;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::Notify;

pub use events::{AgentEvent, FinalStatus, Outcome};
pub use session::{Limits, Session};

/// A session's cancellation: cheap to clone, checked by blocking code, awaited by async code.
#[derive(Clone, Debug, Default)]
pub struct Cancel(Arc<CancelState>);

#[derive(Debug, Default)]
struct CancelState {
    cancelled: AtomicBool,
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

    pub fn is_cancelled(&self) -> bool {
        self.0.cancelled.load(Ordering::SeqCst)
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
