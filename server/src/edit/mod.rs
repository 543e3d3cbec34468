//! The edit engine: turns an edit a model wrote into a plan that lands exactly where it
//! unambiguously belongs, or into a refusal the model can act on in one step.
//!
//! Pipeline: `format` parses one of the four formats into file operations; `locate` places each
//! hunk by the matching ladder; `plan` gathers the result as byte-range replacements per file,
//! tied to the text (and buffer version) they were computed against; `gate` re-parses touched
//! files for syntax errors the edit introduced; `apply` carries a plan out on disk or in memory,
//! all files or none; `checkpoint` keeps each applied plan's inverse for undo; `command` is
//! `wright apply`. Pure: no LSP types, no processes, no async; disk IO only in `apply` (and
//! `command`, which reads the root through it).

pub mod apply;
pub mod checkpoint;
pub mod format;
pub mod gate;
pub mod hunks;
pub mod locate;
pub mod plan;
#[cfg(test)]
mod properties;
pub mod text;

use std::path::PathBuf;

pub use apply::{DiskFiles, MemoryFiles};
pub use checkpoint::{Checkpoint, CheckpointLog, Checkpoints};
pub use format::{FileOp, Format, Hunk, ParseError};
pub use gate::{GateMode, SyntaxError};
pub use locate::{NearMiss, Tier};
pub use plan::{
    Action, ActionKind, FilePlan, FileSource, FileState, PlacedHunk, Plan, Replacement, Versioned,
};

/// Why an edit was not applied. Every message names what to change in the next attempt.
#[derive(Debug, thiserror::Error)]
pub enum EditError {
    #[error("cannot parse the edit: {0}")]
    Parse(#[from] ParseError),
    #[error(
        "{}: the hunk at edit line {hunk_line} was not found (ladder tried up to {tier}). {}",
        path.display(),
        near_miss_text(near_miss)
    )]
    NotFound {
        path: PathBuf,
        hunk_line: usize,
        tier: Tier,
        near_miss: Option<NearMiss>,
    },
    #[error(
        "{}: the hunk at edit line {hunk_line} matches {} places ({tier}), at lines {}{}; add \
         unchanged lines around the change so that it matches exactly one",
        path.display(),
        candidates.len(),
        candidates.iter().map(usize::to_string).collect::<Vec<_>>().join(", "),
        line_hint.map(|l| format!(" (its header says line {l}; line numbers never choose)")).unwrap_or_default()
    )]
    Ambiguous {
        path: PathBuf,
        hunk_line: usize,
        tier: Tier,
        candidates: Vec<usize>,
        /// A udiff hunk's start line, quoted back so the model sees why it was not used.
        line_hint: Option<usize>,
    },
    #[error("{}: the hunk at edit line {hunk_line} was found ({tier}) but {reason}", path.display())]
    Unusable {
        path: PathBuf,
        hunk_line: usize,
        tier: Tier,
        reason: String,
    },
    #[error("{}: cannot {operation} a file that does not exist; check the path (or add the file)", path.display())]
    MissingFile {
        path: PathBuf,
        operation: &'static str,
    },
    #[error("{}: is a directory, not a file; name a file", path.display())]
    NotAFile { path: PathBuf },
    #[error("{path:?}: {reason}")]
    BadPath { path: String, reason: &'static str },
    #[error("{}: is not UTF-8 text; wright edits text files only", path.display())]
    NotText { path: PathBuf },
    #[error(
        "{}: the edit introduces syntax errors at {}; fix the new text",
        path.display(),
        errors.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
    )]
    Syntax {
        path: PathBuf,
        errors: Vec<SyntaxError>,
    },
    #[error("{}: changed since the edit was planned; read it again and redo the edit", path.display())]
    Stale { path: PathBuf },
    #[error(
        "{}: the editor said it applied the edit, but neither its buffers nor the disk show \
         it; it may be waiting unsaved in a buffer wright cannot see. Do not redo it: tell the \
         user, who can save or undo it",
        path.display()
    )]
    Unconfirmed { path: PathBuf },
    #[error(
        "{}: the editor applied the edit to text the user had changed meanwhile (or only part \
         of it), and it could not be taken back; the user was told. Read the file again before \
         changing it: the edit may be in it, misplaced",
        path.display()
    )]
    Misapplied { path: PathBuf },
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The path leads where wright does not read or write: a symbolic link out of the
    /// workspace, a FIFO or device, a file over the size limit.
    #[error("{0}")]
    Files(crate::files::FileError),
    #[error(
        "{}: is protected ({reason}); the agent's edits do not change .git, .wright or the \
         paths in sandbox.protected unless the user allows it in the editor",
        path.display()
    )]
    Protected { path: PathBuf, reason: String },
}

impl From<crate::files::FileError> for EditError {
    fn from(err: crate::files::FileError) -> Self {
        match err {
            crate::files::FileError::Io { path, source } => Self::Io { path, source },
            other => Self::Files(other),
        }
    }
}

fn near_miss_text(near_miss: &Option<NearMiss>) -> String {
    match near_miss {
        Some(miss) => format!(
            "The closest text starts at line {} (- the edit's old text, + the file):\n{}\
             Copy the old text exactly from the file.",
            miss.line, miss.diff
        ),
        None => "Nothing in the file resembles it; read the file again.".to_owned(),
    }
}

impl EditError {
    /// The `kind` of `wright apply --json`'s error object.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Parse(_) => "parse",
            Self::NotFound { .. } => "not_found",
            Self::Ambiguous { .. } => "ambiguous",
            Self::Unusable { .. } => "unusable",
            Self::MissingFile { .. } => "missing_file",
            Self::NotAFile { .. } => "not_a_file",
            Self::BadPath { .. } => "bad_path",
            Self::NotText { .. } => "not_text",
            Self::Syntax { .. } => "syntax",
            Self::Stale { .. } => "stale",
            Self::Unconfirmed { .. } => "unconfirmed",
            Self::Misapplied { .. } => "misapplied",
            Self::Io { .. } => "io",
            Self::Files(err) => err.kind(),
            Self::Protected { .. } => "protected",
        }
    }

    /// The file the error is about, if it is about one.
    pub fn path(&self) -> Option<PathBuf> {
        match self {
            Self::Parse(_) => None,
            Self::BadPath { path, .. } => Some(PathBuf::from(path)),
            Self::Files(err) => Some(err.path().to_owned()),
            Self::NotFound { path, .. }
            | Self::Ambiguous { path, .. }
            | Self::Unusable { path, .. }
            | Self::MissingFile { path, .. }
            | Self::NotAFile { path }
            | Self::NotText { path }
            | Self::Syntax { path, .. }
            | Self::Stale { path }
            | Self::Unconfirmed { path }
            | Self::Protected { path, .. }
            | Self::Misapplied { path }
            | Self::Io { path, .. } => Some(path.clone()),
        }
    }

    /// Whether nothing is wrong with the edit itself: the files could not be read or written.
    pub fn is_io(&self) -> bool {
        matches!(self, Self::Io { .. })
    }
}
