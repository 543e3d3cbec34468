//! The session journal: one JSON-lines file per session, appended and flushed as the session
//! goes, from which an interrupted session (a crash, a kill, a restart) resumes with nothing
//! lost.
//!
//! Lines, in order: `start` (id, task, root, model), then one `message` per message appended
//! to the transcript, a `spent` after each model call (the steps and tokens so far, so that a
//! resumed session goes on with its budget), a `rewrite` with the whole history when
//! compaction rewrote it, a `resumed` when a process took the session up again, and `end`
//! with the outcome; for `wright stats` and `wright trajectories`, an `edit` per landed edit
//! tool call (the files before and after), and `review` and `undo` when the user accepted,
//! rejected or undid edits. Next to the journal, `<id>.artifacts/` holds the session's tool outputs
//! whole, so the placeholders of a resumed history still read back. A line cut
//! by a crash in the middle of its writing is ignored on reading: every line before it is
//! whole, because each is written with a single `write` and flushed before the next.
//!
//! Journals hold the prompts and the code the agent read: they are created 0600 in 0700
//! folders, and opened (to append or to read back) never through a link and only when they
//! are this user's (`files::private`).

// host path: journals are wright's own files in its data folder.
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::conversation::Mode;
use super::events::Spent;
use super::events::{FinalStatus, Outcome, ToolEvent};
use crate::compaction::ArtifactStore;
use crate::llm::Message;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "kind",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum Line {
    Start {
        session_id: String,
        task: String,
        root: PathBuf,
        model: String,
        /// Seconds since the Unix epoch.
        started_at: u64,
    },
    Message {
        message: Message,
    },
    Rewrite {
        messages: Vec<Message>,
    },
    Resumed {
        at: u64,
    },
    /// The steps and tokens spent so far, after each model call.
    Spent {
        spent: Spent,
    },
    /// What a tool reported as it ran: an approval answered, an edit applied or refused.
    Tool {
        event: ToolEvent,
    },
    /// A turn ended.
    End {
        outcome: Outcome,
    },
    /// A later turn of the conversation begins with the user's message; `spent` is what the
    /// session had spent then (the limits are per turn).
    Turn {
        turn: u32,
        message: String,
        spent: Spent,
    },
    /// The session's short title.
    Title {
        title: String,
    },
    /// The mode from here on.
    Mode {
        mode: Mode,
    },
    /// The model the user switched to, from here on.
    Model {
        model: String,
    },
    /// An edit tool call landed (or, in review mode, was held as a proposal): each file's
    /// text before and after (`None`: missing), for `wright stats` and `wright trajectories`.
    /// `call_id` links it to the tool call (its arguments are in the journaled messages).
    Edit {
        call_id: String,
        tool: String,
        files: Vec<EditedFile>,
        at: u64,
    },
    /// Review mode: the user accepted or rejected held proposals of these paths (all of a
    /// file's hunks, or `hunks` of them).
    Review {
        accepted: bool,
        paths: Vec<String>,
        #[serde(default)]
        hunks: Option<Vec<String>>,
        at: u64,
    },
    /// An undo put these workspace-relative paths back: every edit the session landed and had
    /// not undone yet, but its first `keep` (`wright exec --undo`: 0, all of them; the
    /// editor's `wright/undo` to a checkpoint: that checkpoint).
    Undo {
        paths: Vec<String>,
        #[serde(default)]
        keep: u32,
        at: u64,
    },
}

/// One file an edit changed, as journaled by [`Line::Edit`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EditedFile {
    /// Relative to the session's root, `/`-separated.
    pub path: String,
    pub before: Option<String>,
    pub after: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("session journal {}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("no session {id:?} in {}", dir.display())]
    Unknown { id: String, dir: PathBuf },
    #[error("session journal {} does not start with a session: {reason}", path.display())]
    Damaged { path: PathBuf, reason: String },
}

/// The most a journal is read back whole (to cut a half-written last line off). Answers are
/// capped (`llm.max_response_mib`) and tool outputs too, so a session's journal stays far
/// below this.
const MAX_JOURNAL: u64 = 1 << 30;

/// An open journal, appending.
pub struct Journal {
    path: PathBuf,
    file: File,
}

/// Where the journals of sessions on `root` live.
pub fn sessions_dir(data_dir: &Path, root: &Path) -> PathBuf {
    data_dir.join("sessions").join(crate::index::root_key(root))
}

pub fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl Journal {
    /// Creates the journal of a new session, with its `start` line.
    pub fn create(dir: &Path, start: &Line) -> Result<Self, JournalError> {
        let Line::Start { session_id, .. } = start else {
            unreachable!("a journal starts with a start line")
        };
        let path = dir.join(format!("{session_id}.jsonl"));
        let io = |source| JournalError::Io {
            path: path.clone(),
            source,
        };
        let file = crate::files::create_private(&path).map_err(io)?;
        let mut journal = Self { path, file };
        journal.append(start)?;
        Ok(journal)
    }

    /// Opens an existing journal to append to it. A line a killed process left cut is
    /// dropped first (or, whole but for its newline, ended): appended after it, the next line
    /// would be glued to it and lost with it, since reading stops at the first line that does
    /// not parse.
    pub fn reopen(path: &Path) -> Result<Self, JournalError> {
        let io = |source| JournalError::Io {
            path: path.to_owned(),
            source,
        };
        let bytes = crate::files::read_private(path, MAX_JOURNAL).map_err(io)?;
        let whole = whole_lines_len(&bytes);
        let mut file = crate::files::append_private(path).map_err(io)?;
        let tail = &bytes[whole as usize..];
        if serde_json::from_slice::<Line>(tail).is_ok() {
            file.write_all(b"\n").map_err(io)?;
        } else if !tail.is_empty() {
            file.set_len(whole).map_err(io)?;
        }
        Ok(Self {
            path: path.to_owned(),
            file,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The session's artifact store, next to the journal (`<id>.artifacts/`): a resumed
    /// session finds the outputs its masked placeholders name, and numbers new ones after
    /// them. A folder that cannot be made leaves the outputs in memory (logged).
    pub fn artifacts(&self) -> ArtifactStore {
        let dir = self.path.with_extension("artifacts");
        ArtifactStore::open(&dir).unwrap_or_else(|err| {
            tracing::warn!("{err}; this session's tool outputs are kept in memory only");
            ArtifactStore::in_memory()
        })
    }

    /// Appends `line` and hands it to the operating system at once: a killed process loses
    /// nothing it journaled.
    pub fn append(&mut self, line: &Line) -> Result<(), JournalError> {
        let mut text = serde_json::to_string(line).expect("journal lines serialise");
        text.push('\n');
        self.file
            .write_all(text.as_bytes())
            .and_then(|()| self.file.flush())
            .map_err(|source| JournalError::Io {
                path: self.path.clone(),
                source,
            })
    }
}

/// A session read back from its journal.
#[derive(Clone, Debug, PartialEq)]
pub struct Recorded {
    pub path: PathBuf,
    pub session_id: String,
    pub task: String,
    pub root: PathBuf,
    pub model: String,
    pub started_at: u64,
    /// The transcript's messages, as the session last had them.
    pub messages: Vec<Message>,
    /// `None` when the session never ended: it was interrupted, and can resume.
    pub outcome: Option<Outcome>,
    /// The steps and tokens the session spent, over all the processes that ran it.
    pub spent: Spent,
    /// The number of its last turn (1 until a follow-up), and what had been spent when it
    /// began.
    pub turns: u32,
    pub turn_start: Spent,
    pub title: Option<String>,
    pub mode: Mode,
    /// When a line was last written (seconds since the epoch): the journal's modification.
    pub updated: u64,
}

impl Recorded {
    /// The whole session, history included.
    pub fn read(path: &Path) -> Result<Self, JournalError> {
        Self::read_lines(path, true)
    }

    /// The session without its history (`messages` empty): what a list needs, without
    /// decoding megabytes of tool output per session.
    fn summary(path: &Path) -> Result<Self, JournalError> {
        Self::read_lines(path, false)
    }

    fn read_lines(path: &Path, history: bool) -> Result<Self, JournalError> {
        let (lines, updated) = read_journal_lines(path, history)?;
        Self::from_lines(path, lines, updated)
    }

    /// The record the journal's `lines` make (the first must be its start).
    pub fn from_lines(path: &Path, lines: Vec<Line>, updated: u64) -> Result<Self, JournalError> {
        let mut lines = lines.into_iter();
        let Some(Line::Start {
            session_id,
            task,
            root,
            model,
            started_at,
        }) = lines.next()
        else {
            return Err(JournalError::Damaged {
                path: path.to_owned(),
                reason: "the first line is not a start line".to_owned(),
            });
        };
        let mut recorded = Self {
            path: path.to_owned(),
            session_id,
            task,
            root,
            model,
            started_at,
            messages: Vec::new(),
            outcome: None,
            spent: Spent::default(),
            turns: 1,
            turn_start: Spent::default(),
            title: None,
            mode: Mode::Code,
            updated,
        };
        for line in lines {
            match line {
                Line::Message { message } => recorded.messages.push(message),
                Line::Rewrite { messages } => recorded.messages = messages,
                Line::Spent { spent } => recorded.spent = spent,
                Line::End { outcome } => {
                    // A step whose model call failed counts too: the outcome has the last word.
                    recorded.spent = Spent {
                        steps: outcome.steps,
                        usage: outcome.usage,
                        cost_usd: recorded.spent.cost_usd,
                    };
                    recorded.outcome = Some(outcome);
                }
                Line::Resumed { .. } => recorded.outcome = None,
                Line::Turn { turn, spent, .. } => {
                    recorded.turns = turn;
                    recorded.turn_start = spent;
                    recorded.outcome = None;
                }
                Line::Title { title } => recorded.title = Some(title),
                Line::Mode { mode } => recorded.mode = mode,
                Line::Model { model } => recorded.model = model,
                Line::Start { .. }
                | Line::Tool { .. }
                | Line::Edit { .. }
                | Line::Review { .. }
                | Line::Undo { .. } => {}
            }
        }
        Ok(recorded)
    }

    /// The session `id` among the journals in `dir`.
    pub fn find(dir: &Path, id: &str) -> Result<Self, JournalError> {
        let path = dir.join(format!("{id}.jsonl"));
        if !path.is_file() || id.contains(['/', '\\']) {
            return Err(JournalError::Unknown {
                id: id.to_owned(),
                dir: dir.to_owned(),
            });
        }
        Self::read(&path)
    }

    /// Every session journaled in `dir`, oldest first (unreadable journals are skipped).
    pub fn list(dir: &Path) -> Vec<Self> {
        // host path: the sessions folder of wright's data folder.
        let Ok(entries) = std::fs::read_dir(dir) else {
            return Vec::new();
        };
        let mut sessions: Vec<Self> = entries
            .flatten()
            .map(|entry| entry.path())
            .filter(|path| path.extension().is_some_and(|e| e == "jsonl"))
            .filter_map(|path| Self::summary(&path).ok())
            .collect();
        sessions.sort_by(|a, b| (a.started_at, &a.session_id).cmp(&(b.started_at, &b.session_id)));
        sessions
    }

    /// The history to resume from: tool calls the interruption left without a result get one
    /// that says so, since the model must not assume they ran (or did not).
    pub fn resumable_messages(&self) -> Vec<Message> {
        let mut messages = self.messages.clone();
        let Some(last_calls) = messages
            .iter()
            .rposition(|m| matches!(m, Message::Assistant { .. }))
        else {
            return messages;
        };
        let Message::Assistant { tool_calls, .. } = messages[last_calls].clone() else {
            unreachable!("found as an assistant message")
        };
        for call in tool_calls {
            let answered = messages[last_calls..]
                .iter()
                .any(|m| matches!(m, Message::ToolResult { call_id, .. } if *call_id == call.id));
            if !answered {
                messages.push(Message::ToolResult {
                    call_id: call.id.clone(),
                    content: format!(
                        "the session was interrupted before the result of this {} call was \
                         recorded: it may or may not have run; check the files it touches \
                         before going on",
                        call.name
                    ),
                    is_error: true,
                });
            }
        }
        messages
    }
}

/// Every whole line of the journal at `path` (without its history lines unless `history`),
/// and when it was last written (seconds since the epoch).
pub fn read_journal_lines(path: &Path, history: bool) -> Result<(Vec<Line>, u64), JournalError> {
    let io = |source| JournalError::Io {
        path: path.to_owned(),
        source,
    };
    let file = crate::files::open_private(path).map_err(io)?;
    let updated = file
        .metadata()
        .ok()
        .and_then(|meta| meta.modified().ok())
        .and_then(|at| at.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_secs());
    let reader = BufReader::new(file);
    let mut lines = Vec::new();
    // Bytes, not `lines()`: a line cut inside a multi-byte character is not UTF-8, and
    // must end the reading like any other cut line rather than fail it.
    for line in reader.split(b'\n') {
        let line = line.map_err(io)?;
        // Lines are written by serde with the tag first, so a prefix tells their kind.
        if !history
            && (line.starts_with(br#"{"kind":"message""#)
                || line.starts_with(br#"{"kind":"rewrite""#))
        {
            continue;
        }
        match serde_json::from_slice::<Line>(&line) {
            Ok(parsed) => lines.push(parsed),
            // The last line of a killed process may be cut; nothing after it was written.
            Err(_) => break,
        }
    }
    Ok((lines, updated))
}

/// The length of `bytes` up to the end of its last whole (newline-terminated) line.
fn whole_lines_len(bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |at| at as u64 + 1)
}

/// A new session's starting history (its task message) and its journal, begun with the
/// `start` line and that message. A journal that cannot be created leaves the session without
/// one (logged), not without its work.
pub fn begin(
    data_dir: &Path,
    root: &Path,
    session_id: &str,
    task: &str,
    model: &str,
    task_message: String,
) -> (Vec<Message>, Option<Journal>) {
    let message = Message::User(task_message);
    let start = Line::Start {
        session_id: session_id.to_owned(),
        task: task.to_owned(),
        root: root.to_owned(),
        model: model.to_owned(),
        started_at: now(),
    };
    let journal = Journal::create(&sessions_dir(data_dir, root), &start).and_then(|mut journal| {
        journal.append(&Line::Message {
            message: message.clone(),
        })?;
        Ok(journal)
    });
    let journal = journal
        .inspect_err(|err| tracing::warn!("{err}; the session runs without a journal"))
        .ok();
    (vec![message], journal)
}

/// An interrupted, failed or cancelled session taken up again: its record, the history to
/// continue from, and its journal, marked `resumed` with that history. A session the model
/// finished is not resumed.
pub fn resume(
    data_dir: &Path,
    root: &Path,
    session_id: &str,
    follow_up: bool,
) -> Result<(Recorded, Vec<Message>, Journal), String> {
    let recorded =
        Recorded::find(&sessions_dir(data_dir, root), session_id).map_err(|e| e.to_string())?;
    // A session that failed (a provider outage, the step limit) or was cancelled goes on from
    // where it stopped; one the model finished takes only a new message (a follow-up turn).
    if !follow_up
        && let Some(outcome) = &recorded.outcome
        && outcome.status == FinalStatus::Done
    {
        return Err(format!(
            "session {session_id} already ended: the model finished it; give a message to \
             continue it with a new turn (`wright exec --resume {session_id} MESSAGE`)"
        ));
    }
    let history = recorded.resumable_messages();
    let mut journal = Journal::reopen(&recorded.path).map_err(|e| e.to_string())?;
    journal
        .append(&Line::Resumed { at: now() })
        .and_then(|()| {
            journal.append(&Line::Rewrite {
                messages: history.clone(),
            })
        })
        .map_err(|e| e.to_string())?;
    Ok((recorded, history, journal))
}

/// Journals an undo of session `session_id`'s edits after its first `keep` (see
/// [`Line::Undo`]) in the journal of that session on `root` (a session without a journal has
/// nothing to mark).
pub fn record_undo(
    data_dir: &Path,
    root: &Path,
    session_id: &str,
    paths: Vec<String>,
    keep: u32,
) -> Result<(), JournalError> {
    append_to(
        data_dir,
        root,
        session_id,
        &Line::Undo {
            paths,
            keep,
            at: now(),
        },
    )
}

/// Appends `line` to the journal of session `session_id` on `root`, from outside its loop
/// (a session without a journal has nothing to mark).
pub fn append_to(
    data_dir: &Path,
    root: &Path,
    session_id: &str,
    line: &Line,
) -> Result<(), JournalError> {
    let path = sessions_dir(data_dir, root).join(format!("{session_id}.jsonl"));
    if session_id.is_empty() || session_id.contains(['/', '\\']) || !path.is_file() {
        return Ok(());
    }
    Journal::reopen(&path)?.append(line)
}

/// A session id unique on this machine: the time in microseconds, in hexadecimal.
pub fn new_session_id(prefix: &str) -> String {
    let micros = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros());
    format!("{prefix}-{micros:x}")
}

#[cfg(test)]
mod tests {
    use std::fs::OpenOptions;

    use super::*;
    use crate::llm::ToolCall;

    #[test]
    fn a_journal_reads_back_to_the_last_whole_line_and_fills_interrupted_calls() {
        let dir = std::env::temp_dir().join(format!("wright-journal-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut journal = Journal::create(
            &dir,
            &Line::Start {
                session_id: "t-1".into(),
                task: "fix it".into(),
                root: "/ws".into(),
                model: "openai/x".into(),
                started_at: 7,
            },
        )
        .unwrap();
        let call = |id: &str| ToolCall {
            id: id.into(),
            name: "read_file".into(),
            arguments: "{}".into(),
        };
        // The transcript is the user's: 0600 in a 0700 folder.
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(journal.path()), 0o600);
        assert_eq!(mode(&dir), 0o700);
        for message in [
            Message::User("Task: fix it".into()),
            Message::Assistant {
                text: String::new(),
                tool_calls: vec![call("a"), call("b")],
            },
            Message::ToolResult {
                call_id: "a".into(),
                content: "text".into(),
                is_error: false,
            },
        ] {
            journal.append(&Line::Message { message }).unwrap();
        }
        // A crash in the middle of a line.
        let path = journal.path().to_owned();
        let mut file = OpenOptions::new().append(true).open(&path).unwrap();
        file.write_all(b"{\"kind\":\"message\",\"mess").unwrap();

        let recorded = Recorded::find(&dir, "t-1").unwrap();
        assert_eq!(recorded.task, "fix it");
        assert_eq!(recorded.messages.len(), 3);
        assert_eq!(recorded.outcome, None);
        let resumed = recorded.resumable_messages();
        assert_eq!(resumed.len(), 4);
        assert!(
            matches!(&resumed[3], Message::ToolResult { call_id, is_error: true, content } if call_id == "b" && content.contains("interrupted"))
        );
        let listed = Recorded::list(&dir);
        assert_eq!(listed.len(), 1);
        assert_eq!(
            (listed[0].task.as_str(), listed[0].messages.len()),
            ("fix it", 0)
        );
        assert!(matches!(
            Recorded::find(&dir, "../t-1"),
            Err(JournalError::Unknown { .. })
        ));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Whatever byte a crash cut the journal at, it reads back to its last whole line, and a
    /// resumed session's lines appended after the cut read back too.
    #[test]
    fn a_journal_cut_at_any_byte_reads_back_and_resumes_with_its_new_lines() {
        let dir = std::env::temp_dir().join(format!("wright-journal-cut-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let start = Line::Start {
            session_id: "t-2".into(),
            task: "naïve ünïcode 日本".into(),
            root: "/ws".into(),
            model: "openai/x".into(),
            started_at: 7,
        };
        let mut journal = Journal::create(&dir, &start).unwrap();
        for text in ["Task: ☃ first", "second 😀", "third"] {
            journal
                .append(&Line::Message {
                    message: Message::User(text.into()),
                })
                .unwrap();
        }
        let path = journal.path().to_owned();
        drop(journal);
        let full = std::fs::read(&path).unwrap();
        let ends: Vec<usize> = full
            .iter()
            .enumerate()
            .filter(|(_, b)| **b == b'\n')
            .map(|(at, _)| at + 1)
            .collect();
        for cut in 0..full.len() {
            std::fs::write(&path, &full[..cut]).unwrap();
            // A line whose newline alone is missing is whole.
            let whole = ends.iter().filter(|&&end| end - 1 <= cut).count();
            let read = Recorded::read(&path);
            if whole == 0 {
                assert!(
                    matches!(read, Err(JournalError::Damaged { .. })),
                    "cut at {cut}"
                );
                continue;
            }
            let recorded = read.unwrap_or_else(|e| panic!("cut at {cut}: {e}"));
            assert_eq!(recorded.messages.len(), whole - 1, "cut at {cut}");
            let mut journal = Journal::reopen(&path).unwrap();
            journal.append(&Line::Resumed { at: 8 }).unwrap();
            journal
                .append(&Line::Message {
                    message: Message::User("after the crash".into()),
                })
                .unwrap();
            let recorded = Recorded::read(&path).unwrap();
            assert_eq!(recorded.messages.len(), whole, "cut at {cut}");
            assert_eq!(
                recorded.messages.last(),
                Some(&Message::User("after the crash".into())),
                "cut at {cut}"
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
