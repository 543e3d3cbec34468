//! The four edit formats models write (`docs/design.md`, "Command line"), parsed into one shape: file
//! operations whose updates are hunks of old and new text.
//!
//! Parsers are tolerant of what models really emit around an edit (prose, code fences, a BOM,
//! CRLF, whitespace-padded markers, a heredoc wrapper) and strict about the edit itself: a
//! truncated or malformed edit is a [`ParseError`] naming the input line and what was expected,
//! never a partial result. Locating hunks in files is `locate`'s job, not theirs.

mod json;
mod patch;
mod search_replace;
mod udiff;

use std::fmt;
use std::str::FromStr;

/// An edit format, as named by `wright apply --format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Auto,
    Patch,
    SearchReplace,
    Udiff,
    Json,
}

impl Format {
    pub const NAMES: &str = "auto, patch, search-replace, udiff, json";

    pub fn name(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Patch => "patch",
            Self::SearchReplace => "search-replace",
            Self::Udiff => "udiff",
            Self::Json => "json",
        }
    }
}

impl FromStr for Format {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "auto" => Self::Auto,
            "patch" => Self::Patch,
            "search-replace" => Self::SearchReplace,
            "udiff" => Self::Udiff,
            "json" => Self::Json,
            _ => {
                return Err(format!(
                    "unknown format {s:?}; expected one of {}",
                    Self::NAMES
                ));
            }
        })
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One operation on one file, in the order the edit lists them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FileOp {
    /// Create (or overwrite) a file with this content.
    Add {
        path: String,
        content: String,
    },
    Delete {
        path: String,
    },
    Update {
        path: String,
        move_to: Option<String>,
        hunks: Vec<Hunk>,
    },
}

impl FileOp {
    pub fn path(&self) -> &str {
        match self {
            Self::Add { path, .. } | Self::Delete { path } | Self::Update { path, .. } => path,
        }
    }
}

/// Old text to find and the new text to put in its place, with the hints that narrow where.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Hunk {
    /// Whole lines (each ending in `\n`) for `patch`, `udiff` and `search-replace`; any text
    /// for `json`, where an exact match may be part of a line.
    pub old: String,
    pub new: String,
    /// `old` may match inside a line (`json`'s `old_string`).
    pub substring: bool,
    /// Replace every match instead of requiring exactly one (`json`'s `replace_all`).
    pub replace_all: bool,
    /// A patch's `@@ header`: a line expected before the hunk.
    pub context: Option<String>,
    /// A udiff's old start line (1-based): quoted in refusals, never used to choose between
    /// matches (models get line numbers wrong).
    pub line_hint: Option<usize>,
    /// A patch's `*** End of File`: the old text must end the file.
    pub at_end: bool,
    /// An empty old text appends at the end of the file (patch, search-replace) instead of
    /// being refused as unlocatable.
    pub append: bool,
    /// The patch format's lines are whole lines: replacing a file's unterminated last line
    /// yields a terminated one (as Codex does).
    pub terminate_last: bool,
    /// The input line the hunk starts on, for messages.
    pub input_line: usize,
}

/// Where the input stopped making sense, and what was expected there.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct ParseError {
    /// 1-based line of the input (after a BOM was removed).
    pub line: usize,
    pub message: String,
}

impl ParseError {
    fn new(line: usize, message: impl Into<String>) -> Self {
        Self {
            line,
            message: message.into(),
        }
    }
}

/// Parses an edit. `Format::Auto` detects the format first.
pub fn parse(input: &str, format: Format) -> Result<Vec<FileOp>, ParseError> {
    let input = prepare(input);
    let format = match format {
        Format::Auto => detect(&input)?,
        other => other,
    };
    let lines: Vec<&str> = input
        .strip_suffix('\n')
        .unwrap_or(&input)
        .split('\n')
        .collect();
    let ops = match format {
        Format::Patch => patch::parse(&lines)?,
        Format::SearchReplace => search_replace::parse(&lines)?,
        Format::Udiff => udiff::parse(&lines)?,
        Format::Json => json::parse(&input)?,
        Format::Auto => unreachable!("detected above"),
    };
    if ops.is_empty() {
        return Err(ParseError::new(
            1,
            format!("the {format} edit changes no file"),
        ));
    }
    Ok(ops)
}

/// Which format an edit is in, from its markers.
pub fn detect(input: &str) -> Result<Format, ParseError> {
    let lines: Vec<&str> = input.lines().collect();
    if lines.iter().any(|l| l.trim() == patch::BEGIN) {
        return Ok(Format::Patch);
    }
    if lines.iter().any(|l| search_replace::is_search(l)) {
        return Ok(Format::SearchReplace);
    }
    let unfenced = input
        .lines()
        .filter(|l| !is_fence(l))
        .collect::<Vec<_>>()
        .join("\n");
    let start = unfenced.trim_start();
    if start.starts_with('{') || start.starts_with('[') || input.contains("\"old_string\"") {
        return Ok(Format::Json);
    }
    let udiff_header = lines
        .windows(2)
        .any(|w| w[0].starts_with("--- ") && w[1].starts_with("+++ "));
    if udiff_header || lines.iter().any(|l| l.starts_with("@@ -")) {
        return Ok(Format::Udiff);
    }
    Err(ParseError::new(
        1,
        "not an edit in a known format: expected `*** Begin Patch` (patch), a path line then \
         `<<<<<<< SEARCH` (search-replace), `---`/`+++`/`@@` lines (udiff), or a JSON object \
         with \"path\", \"old_string\", \"new_string\" (json)",
    ))
}

/// Removes what never belongs to an edit: a BOM and carriage returns before newlines.
fn prepare(input: &str) -> String {
    let input = input.strip_prefix(crate::edit::text::BOM).unwrap_or(input);
    input.replace("\r\n", "\n")
}

/// Whether a line opens or closes a Markdown code fence.
fn is_fence(line: &str) -> bool {
    let t = line.trim();
    t.starts_with("```") || t.starts_with("~~~")
}

/// The body of a diff hunk (patch or udiff) as it is read: the old and new lines, and how many
/// blank context lines end it so far.
#[derive(Default)]
struct DiffBody<'a> {
    old: Vec<&'a str>,
    new: Vec<&'a str>,
    blank_tail: usize,
}

impl<'a> DiffBody<'a> {
    /// Takes one hunk line; `false` when it is not one (it starts with none of ' ', '-', '+').
    fn push(&mut self, line: &'a str) -> bool {
        match line.chars().next() {
            Some('+') => {
                self.new.push(&line[1..]);
                self.blank_tail = 0;
            }
            Some('-') => {
                self.old.push(&line[1..]);
                self.blank_tail = 0;
            }
            Some(' ') => {
                self.old.push(&line[1..]);
                self.new.push(&line[1..]);
                self.blank_tail = if line[1..].is_empty() {
                    self.blank_tail + 1
                } else {
                    0
                };
            }
            // An empty line is an empty context line whose space was lost.
            None => {
                self.old.push("");
                self.new.push("");
                self.blank_tail += 1;
            }
            Some(_) => return false,
        }
        true
    }

    /// The old and new text. Trailing blank context lines are dropped: they are usually
    /// padding before the next marker, and without them the hunk matches the same place and
    /// changes the same lines.
    fn finish(mut self) -> (String, String) {
        self.old.truncate(self.old.len() - self.blank_tail);
        self.new.truncate(self.new.len() - self.blank_tail);
        (join_lines(&self.old), join_lines(&self.new))
    }
}

/// Adds `hunk` to the update of `path` when that is the last operation (consecutive edits of one
/// file are one update, applied together), else starts a new update.
fn push_update(ops: &mut Vec<FileOp>, path: &str, hunk: Hunk) {
    match ops.last_mut() {
        Some(FileOp::Update {
            path: last, hunks, ..
        }) if last == path => hunks.push(hunk),
        _ => ops.push(FileOp::Update {
            path: path.to_owned(),
            move_to: None,
            hunks: vec![hunk],
        }),
    }
}

/// Joins lines into whole-line text: each ends with `\n`.
fn join_lines(lines: &[&str]) -> String {
    let mut text = String::new();
    for line in lines {
        text.push_str(line);
        text.push('\n');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_detects_each_format_through_prose_and_fences() {
        let cases = [
            (
                "Here:\n```\n*** Begin Patch\n*** End Patch\n```\n",
                Format::Patch,
            ),
            (
                "src/a.rs\n```rust\n<<<<<<< SEARCH\na\n=======\nb\n>>>>>>> REPLACE\n```\n",
                Format::SearchReplace,
            ),
            ("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n", Format::Udiff),
            (
                "```json\n{\"path\": \"x\", \"old_string\": \"a\", \"new_string\": \"b\"}\n```",
                Format::Json,
            ),
        ];
        for (input, format) in cases {
            assert_eq!(detect(&prepare(input)), Ok(format), "{input}");
        }
        let err = detect("just some words").unwrap_err();
        assert!(err.message.contains("*** Begin Patch"), "{err}");
    }

    #[test]
    fn a_bom_and_crlf_are_invisible_to_parsers() {
        let input = "\u{feff}*** Begin Patch\r\n*** Delete File: a.txt\r\n*** End Patch\r\n";
        assert_eq!(
            parse(input, Format::Auto).unwrap(),
            [FileOp::Delete {
                path: "a.txt".into()
            }]
        );
    }

    #[test]
    fn format_names_round_trip() {
        for format in [
            Format::Auto,
            Format::Patch,
            Format::SearchReplace,
            Format::Udiff,
            Format::Json,
        ] {
            assert_eq!(format.name().parse::<Format>(), Ok(format));
        }
        assert!(
            "diff"
                .parse::<Format>()
                .unwrap_err()
                .contains("search-replace")
        );
    }
}
