//! `wright stats`: what happened to the agent's work in the journaled sessions, counted in
//! all and per model.

use std::collections::BTreeMap;

use serde::Serialize;

use super::{EDIT_TOOLS, Session};
use crate::agent::events::ToolEvent;
use crate::agent::journal::Line;
use crate::agent::sandboxed::NOT_RUN;
use crate::agent::tools::{COMMAND_TOOLS, COULD_NOT_RUN};
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
    /// Command tool calls that ran (in the sandbox, whatever their exit status).
    pub run: u64,
    /// Command tool calls that did not run: `agent.approve_commands` names them, and the
    /// user denied them (or, headless, there was no one to ask).
    pub refused: u64,
    /// Times a command asked the user (an approval: a configured command, or more than the
    /// sandbox allows), whatever the answer.
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
        // A command the configuration's approval list held back (headless, with no one to
        // ask, or denied by the user) did not run: `run_command` says "could not run: not
        // run: …" then (`agent::sandboxed`).
        let commands: Vec<&str> = session
            .calls
            .iter()
            .filter(|call| COMMAND_TOOLS.contains(&call.name.as_str()))
            .map(|call| call.id.as_str())
            .collect();
        let refused = commands
            .iter()
            .filter(|id| {
                session.results.get(**id).is_some_and(|(is_error, text)| {
                    *is_error && text.contains(&format!("{COULD_NOT_RUN}{NOT_RUN}"))
                })
            })
            .count() as u64;
        self.commands.run += commands.len() as u64 - refused;
        self.commands.refused += refused;
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
                    event: ToolEvent::Approval { .. },
                } => self.commands.escalated += 1,
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

/// `wright/stats`: the sessions of the workspace folders `roots` (or, `all`, every
/// workspace's) of the last `since_days` days, in the protocol's types, with the days.
pub fn for_editor(
    data_dir: &std::path::Path,
    roots: &[std::path::PathBuf],
    since_days: u64,
    all: bool,
) -> wright_protocol::StatsResult {
    let sessions: Vec<Session> = if all {
        super::sessions(data_dir, std::path::Path::new(""), true, Some(since_days))
    } else {
        roots
            .iter()
            .flat_map(|root| super::sessions(data_dir, root, false, Some(since_days)))
            .collect()
    };
    let stats = compute(&sessions, Some(since_days));
    // The same fields, camelCase in both: the library's counts read as the protocol's.
    let counts = |counts: &Counts| {
        serde_json::to_value(counts)
            .and_then(serde_json::from_value)
            .expect("the library's counts are the protocol's")
    };
    wright_protocol::StatsResult {
        since_days,
        all: counts(&stats.all),
        models: stats
            .models
            .iter()
            .map(|(model, c)| (model.clone(), counts(c)))
            .collect(),
        days: per_day(&sessions)
            .into_iter()
            .map(|(day, kept, undone)| wright_protocol::StatsDay { day, kept, undone })
            .collect(),
    }
}

/// The landed edits of `sessions` per day (UTC) they landed on, oldest first: `(YYYY-MM-DD,
/// kept, undone)`, for a chart.
pub fn per_day(sessions: &[Session]) -> Vec<(String, u64, u64)> {
    let mut days: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
    for session in sessions {
        for edit in session.landed().iter().filter(|edit| edit.applied) {
            let day = days.entry(edit.at / 86_400).or_default();
            day.0 += u64::from(edit.kept);
            day.1 += u64::from(edit.undone);
        }
    }
    days.into_iter()
        .map(|(day, (kept, undone))| (civil_date(day), kept, undone))
        .collect()
}

/// `YYYY-MM-DD` of the day `days` after 1970-01-01 (Howard Hinnant's `civil_from_days`).
fn civil_date(days: u64) -> String {
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

#[cfg(test)]
mod tests {
    #[test]
    fn days_since_the_epoch_are_dated() {
        assert_eq!(super::civil_date(0), "1970-01-01");
        assert_eq!(super::civil_date(11_016), "2000-02-29");
        assert_eq!(super::civil_date(20_454), "2026-01-01");
    }
}
