//! What a session reports as it goes, and how it ended: the values behind `wright exec`'s
//! stderr and `--json`, and (with the agent protocol) the editor's `wright/agentEvent`s; and
//! what its tools report to its loop while they run.

use serde::{Deserialize, Serialize};

use super::tools::PlanStep;
use crate::llm::Usage;

/// One thing that happened in a session, in order.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(
    tag = "kind",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum AgentEvent {
    /// The model chosen for the task, and why.
    Model {
        model: String,
        tier: Option<String>,
        reason: String,
    },
    /// A model call starts.
    StepStarted {
        step: u32,
    },
    /// Text the model wrote, as it streams.
    TextDelta {
        text: String,
    },
    /// The step's answer stream was cut and the model is asked again: what was shown of this
    /// step's answer is void (its text deltas since `stepStarted`).
    StepRetried {
        step: u32,
        reason: String,
    },
    /// A tool call the model made, about to run.
    ToolCall {
        id: String,
        name: String,
        arguments: String,
    },
    /// The user answered an approval a command asked for: `allow`, `allowAlways` (for the
    /// rest of the session) or `deny`.
    Approval {
        command: String,
        decision: String,
    },
    /// The editor applied an edit to these files, and its buffers (or the disk) show it.
    EditApplied {
        paths: Vec<String>,
    },
    /// The editor refused an edit, or never showed it; the model is told why.
    EditRejected {
        paths: Vec<String>,
        reason: String,
    },
    /// Its result (`output` is what the model sees).
    ToolResult {
        id: String,
        name: String,
        is_error: bool,
        output: String,
    },
    /// Files an edit changed (held for review, in review mode).
    FilesChanged {
        paths: Vec<String>,
    },
    /// Review mode: the agent proposes this file's new text (`after`; `null` deletes it) over
    /// `before` (`null`: a new file); `wright/editsAccept` applies every proposal.
    EditProposed {
        path: String,
        before: Option<String>,
        after: Option<String>,
        hunks: Vec<Hunk>,
    },
    Plan {
        steps: Vec<PlanStep>,
    },
    /// The session's token use so far; the last request's prompt against the model's
    /// context window; the estimated cost so far (`null` when the model has no price).
    Usage {
        #[serde(flatten)]
        total: Usage,
        context_tokens: u64,
        context_window: u64,
        cost_usd: Option<f64>,
    },
    /// A turn begins: the user's message (the first turn's is the task).
    Turn {
        turn: u32,
        message: String,
    },
    /// The mode changed (`code` or `plan`), from this step on.
    Mode {
        mode: String,
    },
    /// A short title for the session, made after its first turn.
    Title {
        title: String,
    },
    /// Compaction shortened the prompt: `masked` old outputs replaced by placeholders (their
    /// text stays readable with `read_artifact`), or, `summarized`, older turns replaced by a
    /// working-state summary.
    Compacted {
        masked: usize,
        tokens_before: usize,
        tokens_after: usize,
        summarized: bool,
    },
    /// A model call failed and the session goes on or stops (see the outcome).
    Error {
        message: String,
    },
    /// A turn ended (the session waits for the user's next message).
    Finished {
        turn: u32,
        outcome: Outcome,
    },
}

/// What happens inside a running tool that its session hears of at once, as an input of its
/// loop beside the model's stream, cancellation and the deadline: the user's answer to an
/// approval, an edit the editor applied, refused or (review mode) holds. The loop forwards
/// each to the session's listeners and journals it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "kind",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum ToolEvent {
    Approval {
        command: String,
        decision: String,
    },
    EditApplied {
        paths: Vec<String>,
    },
    EditRejected {
        paths: Vec<String>,
        reason: String,
    },
    EditProposed {
        path: String,
        before: Option<String>,
        after: Option<String>,
        hunks: Vec<Hunk>,
    },
}

/// One contiguous changed region of a proposal: 1-based lines of the text it was computed
/// against (`end_line` < `start_line` for an insertion before `start_line`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Hunk {
    /// Unique in the session.
    pub id: String,
    pub start_line: u32,
    pub end_line: u32,
    pub old_text: String,
    pub new_text: String,
}

/// Where tools report [`ToolEvent`]s.
pub type ToolEvents = tokio::sync::mpsc::UnboundedSender<ToolEvent>;

impl From<ToolEvent> for AgentEvent {
    fn from(event: ToolEvent) -> Self {
        match event {
            ToolEvent::Approval { command, decision } => Self::Approval { command, decision },
            ToolEvent::EditApplied { paths } => Self::EditApplied { paths },
            ToolEvent::EditRejected { paths, reason } => Self::EditRejected { paths, reason },
            ToolEvent::EditProposed {
                path,
                before,
                after,
                hunks,
            } => Self::EditProposed {
                path,
                before,
                after,
                hunks,
            },
        }
    }
}

/// How a session ended.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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
#[serde(rename_all = "camelCase")]
pub enum FinalStatus {
    /// The model finished.
    Done,
    Cancelled,
    /// A model error, or a limit (steps, tokens, time) reached before the model finished.
    Failed,
}

/// What a session has spent so far: nothing for a new session, what its journal recorded for
/// a resumed one (a resumed session goes on with its budget, not a fresh one).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Spent {
    /// Model calls answered.
    pub steps: u32,
    pub usage: Usage,
    /// Estimated from the prices of the models that answered (unpriced calls count nothing).
    #[serde(default, rename = "costUsd")]
    pub cost_usd: f64,
}
