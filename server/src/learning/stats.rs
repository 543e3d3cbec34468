//! `wright stats`: what happened to the agent's work in the journaled sessions, counted in
//! all and per model.

use std::collections::BTreeMap;

use serde::Serialize;

use super::{COMMAND_TOOLS, EDIT_TOOLS, Session};
use crate::agent::events::ToolEvent;
use crate::agent::journal::Line;
use crate::llm::Usage;

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Edits {
    /// Edit tool calls the model made.
    pub proposed: u64,
    /// Files an edit landed in (or, in review mode, was held for).
    pub applied: u64,
    /// Edits the editor refused, or the user rejected in review.
    pub rejected: u64,
    /// Landed files put back by an undo.
    pub undone: u64,
    /// Landed files whose change was still there when the session ended, not undone.
    pub kept: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Commands {
    /// Command tool calls the model made.
    pub run: u64,
    /// Commands the user denied when asked.
    pub refused: u64,
    /// Commands that asked the user.
    pub escalated: u64,
}

/// The counts of a set of sessions.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Counts {
    pub sessions: u64,
    pub turns: u64,
    pub edits: Edits,
    pub commands: Commands,
    pub usage: Usage,
    pub cost_usd: f64,
    /// The median time from a session's start to its first landed edit, in seconds (`None`
    /// when no session landed one).
    pub first_edit_secs: Option<u64>,
    #[serde(skip)]
    first_edits: Vec<u64>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Stats {
    #[serde(rename = "since_days")]
    pub since_days: Option<u64>,
    #[serde(flatten)]
    pub all: Counts,
    pub models: BTreeMap<String, Counts>,
}

impl Counts {
    fn add(&mut self, session: &Session) {
        let recorded = &session.recorded;
        self.sessions += 1;
        self.turns += u64::from(recorded.turns);
        let landed = session.landed();
        let calls = |names: &[&str]| {
            session
                .calls
                .iter()
                .filter(|call| names.contains(&call.name.as_str()))
                .count() as u64
        };
        self.edits.proposed += calls(EDIT_TOOLS);
        self.edits.applied += landed.iter().filter(|edit| edit.applied).count() as u64;
        self.edits.undone += landed.iter().filter(|edit| edit.undone).count() as u64;
        self.edits.kept += landed.iter().filter(|edit| edit.kept).count() as u64;
        self.commands.run += calls(COMMAND_TOOLS);
        for line in &session.lines {
            match line {
                Line::Tool {
                    event: ToolEvent::EditRejected { .. },
                } => self.edits.rejected += 1,
                Line::Review {
                    accepted: false,
                    paths,
                    ..
                } => self.edits.rejected += paths.len() as u64,
                Line::Tool {
                    event: ToolEvent::Approval { decision, .. },
                } => {
                    self.commands.escalated += 1;
                    if decision == "deny" {
                        self.commands.refused += 1;
                    }
                }
                _ => {}
            }
        }
        self.usage.add(&recorded.spent.usage);
        self.cost_usd += recorded.spent.cost_usd;
        if let Some(first) = landed.iter().find(|edit| edit.applied) {
            self.first_edits
                .push(first.at.saturating_sub(recorded.started_at));
            self.first_edits.sort_unstable();
            self.first_edit_secs = Some(self.first_edits[self.first_edits.len() / 2]);
        }
    }
}

/// The stats of `sessions` (read over the last `since_days` days).
pub fn compute(sessions: &[Session], since_days: Option<u64>) -> Stats {
    let mut stats = Stats {
        since_days,
        all: Counts::default(),
        models: BTreeMap::new(),
    };
    for session in sessions {
        stats.all.add(session);
        stats
            .models
            .entry(session.recorded.model.clone())
            .or_default()
            .add(session);
    }
    stats
}
