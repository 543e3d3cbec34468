//! Learning from use: what the session journals tell of the agent's work (`wright stats`),
//! and the edit trajectories they hold (`wright trajectories export`). Everything is read
//! from this machine's journals and written only where the caller says: nothing is sent.

pub mod redact;
pub mod stats;
pub mod trajectories;

use std::path::{Path, PathBuf};

use crate::agent::journal::{self, EditedFile, Line, Recorded};
use crate::llm::{Message, ToolCall};

/// The tools whose calls are edits.
pub const EDIT_TOOLS: &[&str] = &["edit", "multi_edit", "apply_patch", "write_file"];

/// A session as read back for measuring: its record, and the lines that are not history.
pub struct Session {
    pub recorded: Recorded,
    /// Every message ever journaled, rewrites included, in order: a compacted history loses
    /// nothing a tool call id links to.
    pub calls: Vec<ToolCall>,
    /// Each tool call's result as first journaled (before compaction masked it): whether
    /// it is an error, and its text.
    pub results: std::collections::HashMap<String, (bool, String)>,
    pub lines: Vec<Line>,
}

/// One landed edit of one file, and what became of it.
#[derive(Clone, Debug, PartialEq)]
pub struct LandedEdit {
    pub tool: String,
    /// The tool call's arguments as the model wrote them (empty when not journaled).
    pub arguments: String,
    pub file: EditedFile,
    pub at: u64,
    /// Whether it reached the file: always, but in review mode, where it is held until the
    /// user accepts it (a rejected or never decided proposal did not).
    pub applied: bool,
    pub undone: bool,
    pub kept: bool,
}

impl Session {
    pub fn read(path: &Path) -> Result<Self, journal::JournalError> {
        let (lines, updated) = journal::read_journal_lines(path, true)?;
        let recorded = Recorded::from_lines(path, lines.clone(), updated)?;
        let mut calls: Vec<ToolCall> = Vec::new();
        let mut results = std::collections::HashMap::new();
        let mut note = |message: &Message| match message {
            Message::Assistant { tool_calls, .. } => {
                for call in tool_calls {
                    if !calls.iter().any(|known| known.id == call.id) {
                        calls.push(call.clone());
                    }
                }
            }
            Message::ToolResult {
                call_id,
                content,
                is_error,
            } => {
                results
                    .entry(call_id.clone())
                    .or_insert_with(|| (*is_error, content.clone()));
            }
            _ => {}
        };
        for line in &lines {
            match line {
                Line::Message { message } => note(message),
                Line::Rewrite { messages } => messages.iter().for_each(&mut note),
                _ => {}
            }
        }
        let lines = lines
            .into_iter()
            .filter(|line| !matches!(line, Line::Message { .. } | Line::Rewrite { .. }))
            .collect();
        Ok(Self {
            recorded,
            calls,
            results,
            lines,
        })
    }

    /// Whether the session held its edits for review.
    pub fn reviews(&self) -> bool {
        self.lines.iter().any(|line| {
            matches!(
                line,
                Line::Tool {
                    event: crate::agent::events::ToolEvent::EditProposed { .. }
                }
            )
        })
    }

    /// Every file an edit landed, in order, with whether it was undone and kept
    /// ([`kept`]).
    pub fn landed(&self) -> Vec<LandedEdit> {
        let mut landed: Vec<LandedEdit> = Vec::new();
        // The edits not undone yet, as indices into `landed` per tool call, in order: an
        // undo to checkpoint `keep` takes back every one after the first `keep` (each
        // editor checkpoint is one landed call).
        let mut live: Vec<Vec<usize>> = Vec::new();
        // A review-mode session holds its edits as proposals (its journal has the
        // `editProposed` events); they land when the user accepts them.
        let review = self.reviews();
        let mut held: Vec<usize> = Vec::new();
        for line in &self.lines {
            match line {
                Line::Edit {
                    call_id,
                    tool,
                    files,
                    at,
                } => {
                    let arguments = self
                        .calls
                        .iter()
                        .find(|call| call.id == *call_id)
                        .map(|call| call.arguments.clone())
                        .unwrap_or_default();
                    let first = landed.len();
                    landed.extend(files.iter().map(|file| LandedEdit {
                        tool: tool.clone(),
                        arguments: arguments.clone(),
                        file: file.clone(),
                        at: *at,
                        applied: !review,
                        undone: false,
                        kept: false,
                    }));
                    if review {
                        held.extend(first..landed.len());
                    } else {
                        live.push((first..landed.len()).collect());
                    }
                }
                Line::Review {
                    accepted,
                    paths,
                    hunks,
                    ..
                } => {
                    let (decided, still): (Vec<usize>, Vec<usize>) = held
                        .iter()
                        .partition(|&&at| paths.contains(&landed[at].file.path));
                    if *accepted {
                        // Accepted, the file's proposals landed as one checkpoint.
                        for &at in &decided {
                            landed[at].applied = true;
                        }
                        live.push(decided);
                        held = still;
                    } else if hunks.is_none() {
                        // Rejected whole: dropped. Some hunks rejected: the rest stays held.
                        held = still;
                    }
                }
                Line::Undo { keep, .. } => {
                    let keep = (*keep as usize).min(live.len());
                    for undone in live.drain(keep..).flatten() {
                        landed[undone].undone = true;
                    }
                }
                _ => {}
            }
        }
        // The file as the session left it: the last edit of it not undone (undone ones put
        // the file back to before them).
        for at in 0..landed.len() {
            let path = landed[at].file.path.clone();
            let last = landed
                .iter()
                .rev()
                .filter(|edit| edit.file.path == path)
                .find(|edit| edit.applied && !edit.undone)
                .map(|edit| edit.file.after.clone())
                .unwrap_or_else(|| {
                    let first = landed.iter().find(|edit| edit.file.path == path);
                    first.and_then(|edit| edit.file.before.clone())
                });
            let edit = &landed[at];
            let kept = kept(
                edit.file.before.as_deref(),
                edit.file.after.as_deref(),
                last.as_deref(),
                edit.undone || !edit.applied,
            );
            landed[at].kept = kept;
        }
        landed
    }
}

/// Whether an edit that turned `before` into `after` is kept, given the file's text when the
/// session ended (`end`): not undone, and what it changed is still there. An edit's change is
/// the lines it added (in `after`, not in `before`, counted as a multiset), or, if it only
/// removed lines, the lines it removed. It is still there when every added line is in `end`
/// as often as the edit left it, or every removed line is in `end` no more often than in
/// `after`. A deletion is kept when the file is still missing, a creation when the file is
/// there with its added lines.
pub fn kept(before: Option<&str>, after: Option<&str>, end: Option<&str>, undone: bool) -> bool {
    if undone {
        return false;
    }
    let (Some(after), Some(end)) = (after, end) else {
        // A deleted file is kept while it stays deleted; a file the session deleted later
        // lost what this edit put in it.
        return after.is_none() && end.is_none();
    };
    if after == end {
        return true;
    }
    let before = before.unwrap_or("");
    fn count(text: &str) -> std::collections::HashMap<&str, usize> {
        let mut counts = std::collections::HashMap::new();
        for line in text.lines() {
            *counts.entry(line).or_default() += 1;
        }
        counts
    }
    let (was, now, left) = (count(before), count(after), count(end));
    let added: Vec<(&str, usize)> = now
        .iter()
        .filter(|(line, n)| **n > was.get(*line).copied().unwrap_or(0))
        .map(|(line, n)| (*line, *n))
        .collect();
    if !added.is_empty() {
        return added
            .iter()
            .all(|(line, n)| left.get(line).copied().unwrap_or(0) >= *n);
    }
    was.iter()
        .filter(|(line, n)| **n > now.get(*line).copied().unwrap_or(0))
        .all(|(line, _)| {
            left.get(line).copied().unwrap_or(0) <= now.get(line).copied().unwrap_or(0)
        })
}

/// The journals to read: the workspace's at `root`, or (`all`) every workspace's, started in
/// the last `since_days` days (`None`: whenever), oldest first. Unreadable ones are skipped.
pub fn sessions(data_dir: &Path, root: &Path, all: bool, since_days: Option<u64>) -> Vec<Session> {
    let dirs: Vec<PathBuf> = if all {
        // host path: the sessions folder of wright's data folder.
        std::fs::read_dir(data_dir.join("sessions"))
            .map(|entries| entries.flatten().map(|entry| entry.path()).collect())
            .unwrap_or_default()
    } else {
        vec![journal::sessions_dir(data_dir, root)]
    };
    let from = since_days.map(|days| journal::now().saturating_sub(days.saturating_mul(86_400)));
    let mut sessions: Vec<Session> = dirs
        .iter()
        // host path: the sessions folders of wright's data folder.
        .filter_map(|dir| std::fs::read_dir(dir).ok())
        .flat_map(|entries| entries.flatten().map(|entry| entry.path()))
        .filter(|path| path.extension().is_some_and(|e| e == "jsonl"))
        .filter_map(|path| Session::read(&path).ok())
        .filter(|session| from.is_none_or(|from| session.recorded.started_at >= from))
        .collect();
    sessions.sort_by(|a, b| {
        (a.recorded.started_at, &a.recorded.session_id)
            .cmp(&(b.recorded.started_at, &b.recorded.session_id))
    });
    sessions
}

#[cfg(test)]
mod tests {
    use super::kept;

    #[test]
    fn an_edit_is_kept_while_its_change_is_in_the_file_and_it_was_not_undone() {
        let (before, after) = ("a\nb\n", "a\nB\n");
        assert!(kept(Some(before), Some(after), Some(after), false));
        assert!(!kept(Some(before), Some(after), Some(after), true));
        // A later edit elsewhere in the file keeps it; one that rewrites its line does not.
        assert!(kept(Some(before), Some(after), Some("a\nB\nc\n"), false));
        assert!(!kept(Some(before), Some(after), Some("a\nb2\n"), false));
        // Put back by hand (or by a later edit): not kept.
        assert!(!kept(Some(before), Some(after), Some(before), false));
        // A removal is kept while the line stays out.
        assert!(kept(Some("a\nb\n"), Some("a\n"), Some("a\nc\n"), false));
        assert!(!kept(Some("a\nb\n"), Some("a\n"), Some("a\nb\n"), false));
        // Created, deleted.
        assert!(kept(None, Some("x\n"), Some("x\ny\n"), false));
        assert!(kept(Some("x\n"), None, None, false));
        assert!(!kept(Some("x\n"), None, Some("x\n"), false));
        assert!(!kept(None, Some("x\n"), None, false));
    }
}
