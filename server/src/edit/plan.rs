//! The edit plan: what an edit does to each file, computed against the text (and buffer
//! version) the engine was given, before anything is written.
//!
//! Operations run in the edit's order on a virtual copy of the files they touch, so a patch
//! may add a file and update it, and a list of str_replace calls applies each to the result of
//! the one before. The plan keeps, per file, the state it was computed against and the state
//! it leads to, plus the byte-range replacement between the two: the LSP layer sends that with
//! the version; the disk applier checks the text is still the same.

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Component, Path, PathBuf};

use super::EditError;
use super::format::{FileOp, Hunk};
use super::locate::{LocateError, Tier, apply_hunk};
use super::text::BOM;

/// A file's text and, for an open buffer, the version it has.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Versioned {
    pub text: String,
    pub version: Option<i32>,
}

/// What a path holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FileState {
    Missing,
    Directory,
    File(Versioned),
}

/// Where the engine reads files: disk for the CLI, open buffers over disk for the server.
pub trait FileSource {
    /// The state of `path`, relative to the workspace root.
    fn state(&self, path: &Path) -> Result<FileState, EditError>;
}

/// Replace `range` (bytes of the text the plan was computed against) with `text`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Replacement {
    pub range: Range<usize>,
    pub text: String,
}

/// One file's change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FilePlan {
    pub path: PathBuf,
    /// The state the plan was computed against; `None` if the file did not exist.
    pub before: Option<Versioned>,
    /// The state it leads to; `None` deletes the file.
    pub after: Option<String>,
    /// When the file exists before and after: the replacements that turn one into the other.
    pub edits: Vec<Replacement>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ActionKind {
    Add,
    Update,
    Delete,
    Move,
}

impl ActionKind {
    pub fn name(self) -> &'static str {
        match self {
            Self::Add => "add",
            Self::Update => "update",
            Self::Delete => "delete",
            Self::Move => "move",
        }
    }
}

/// What the edit said it does to a path, for reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Action {
    pub path: PathBuf,
    pub kind: ActionKind,
    /// The destination of a move.
    pub to: Option<PathBuf>,
}

/// Where a hunk was placed, and by which tier of the ladder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlacedHunk {
    pub path: PathBuf,
    /// 1-based first line of the match, in the file as the hunks before it left it.
    pub line: usize,
    pub tier: Tier,
}

/// Every file change of one edit, to be applied all together or not at all.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// Sorted by path; only files whose state changes.
    pub files: Vec<FilePlan>,
    /// In the edit's order, one per path.
    pub actions: Vec<Action>,
    /// Every hunk of every update, in the edit's order.
    pub hunks: Vec<PlacedHunk>,
}

/// A file as the plan is building it.
struct Entry {
    before: Option<Versioned>,
    current: Option<String>,
}

/// Plans `ops` against the files `source` gives.
pub fn plan(ops: &[FileOp], source: &dyn FileSource) -> Result<Plan, EditError> {
    let mut files: BTreeMap<PathBuf, Entry> = BTreeMap::new();
    let mut actions: Vec<Action> = Vec::new();
    let mut placed = Vec::new();
    for op in ops {
        let path = relative_path(op.path())?;
        load(&mut files, source, &path)?;
        let (kind, to) = match op {
            FileOp::Add { content, .. } => {
                entry(&mut files, &path).current = Some(content.clone());
                (ActionKind::Add, None)
            }
            FileOp::Delete { .. } => {
                let entry = entry(&mut files, &path);
                if entry.current.take().is_none() {
                    return Err(EditError::MissingFile {
                        path,
                        operation: "delete",
                    });
                }
                (ActionKind::Delete, None)
            }
            FileOp::Update { move_to, hunks, .. } => {
                let current = entry(&mut files, &path).current.clone();
                // Only empty old texts on a missing file: creating it, as search/replace
                // blocks and str_replace calls with nothing to search for mean.
                let creates = current.is_none() && hunks.iter().all(|h| h.old.is_empty());
                let Some(text) = current.or_else(|| creates.then(String::new)) else {
                    return Err(EditError::MissingFile {
                        path,
                        operation: "update",
                    });
                };
                let (bom, mut body) = match text.strip_prefix(BOM) {
                    Some(body) => (BOM, body.to_owned()),
                    None => ("", text),
                };
                let mut cursor = 0;
                for hunk in hunks {
                    let located = apply_hunk(&body, hunk, cursor)
                        .map_err(|err| locate_error(err, &path, hunk))?;
                    placed.push(PlacedHunk {
                        path: path.clone(),
                        line: located.line,
                        tier: located.tier,
                    });
                    body = located.text;
                    cursor = located.cursor;
                }
                let text = format!("{bom}{body}");
                match move_to {
                    Some(to) => {
                        let to = relative_path(to)?;
                        load(&mut files, source, &to)?;
                        entry(&mut files, &path).current = None;
                        entry(&mut files, &to).current = Some(text);
                        (ActionKind::Move, Some(to))
                    }
                    None => {
                        entry(&mut files, &path).current = Some(text);
                        let kind = if creates {
                            ActionKind::Add
                        } else {
                            ActionKind::Update
                        };
                        (kind, None)
                    }
                }
            }
        };
        if !actions.iter().any(|a| a.path == path) {
            actions.push(Action { path, kind, to });
        }
    }
    let files = files
        .into_iter()
        .filter(|(_, e)| e.before.as_ref().map(|b| &b.text) != e.current.as_ref())
        .map(|(path, entry)| {
            let edits = match (&entry.before, &entry.current) {
                (Some(before), Some(after)) => vec![replacement(&before.text, after)],
                _ => Vec::new(),
            };
            FilePlan {
                path,
                before: entry.before,
                after: entry.current,
                edits,
            }
        })
        .collect();
    Ok(Plan {
        files,
        actions,
        hunks: placed,
    })
}

/// Reads a file into the plan the first time an operation touches it.
fn load(
    files: &mut BTreeMap<PathBuf, Entry>,
    source: &dyn FileSource,
    path: &Path,
) -> Result<(), EditError> {
    if !files.contains_key(path) {
        let before = match source.state(path)? {
            FileState::Missing => None,
            FileState::Directory => {
                return Err(EditError::NotAFile {
                    path: path.to_owned(),
                });
            }
            FileState::File(versioned) => Some(versioned),
        };
        let current = before.as_ref().map(|b| b.text.clone());
        files.insert(path.to_owned(), Entry { before, current });
    }
    Ok(())
}

fn entry<'a>(files: &'a mut BTreeMap<PathBuf, Entry>, path: &Path) -> &'a mut Entry {
    files.get_mut(path).expect("loaded before use")
}

fn locate_error(err: LocateError, path: &Path, hunk: &Hunk) -> EditError {
    let path = path.to_owned();
    let hunk_line = hunk.input_line;
    match err {
        LocateError::NotFound { tier, near_miss } => EditError::NotFound {
            path,
            hunk_line,
            tier,
            near_miss,
        },
        LocateError::Ambiguous { tier, candidates } => EditError::Ambiguous {
            path,
            hunk_line,
            tier,
            candidates,
            line_hint: hunk.line_hint,
        },
        LocateError::Unusable { tier, reason } => EditError::Unusable {
            path,
            hunk_line,
            tier,
            reason,
        },
    }
}

/// The smallest single replacement turning `before` into `after`.
pub fn replacement(before: &str, after: &str) -> Replacement {
    let mut prefix = before
        .bytes()
        .zip(after.bytes())
        .take_while(|(a, b)| a == b)
        .count();
    while !before.is_char_boundary(prefix) || !after.is_char_boundary(prefix) {
        prefix -= 1;
    }
    let max_suffix = before.len().min(after.len()) - prefix;
    let mut suffix = before
        .bytes()
        .rev()
        .zip(after.bytes().rev())
        .take(max_suffix)
        .take_while(|(a, b)| a == b)
        .count();
    while !before.is_char_boundary(before.len() - suffix)
        || !after.is_char_boundary(after.len() - suffix)
    {
        suffix -= 1;
    }
    Replacement {
        range: prefix..before.len() - suffix,
        text: after[prefix..after.len() - suffix].to_owned(),
    }
}

/// A path from an edit as a clean relative path inside the root.
pub fn relative_path(path: &str) -> Result<PathBuf, EditError> {
    let bad = |reason| EditError::BadPath {
        path: path.to_owned(),
        reason,
    };
    let mut clean = PathBuf::new();
    for component in Path::new(path.trim()).components() {
        match component {
            Component::Normal(part) => clean.push(part),
            Component::CurDir => {}
            Component::ParentDir => {
                if !clean.pop() {
                    return Err(bad("leaves the workspace root; use a path inside it"));
                }
            }
            Component::RootDir | Component::Prefix(_) => {
                return Err(bad(
                    "is absolute; use a path relative to the workspace root",
                ));
            }
        }
    }
    if clean.as_os_str().is_empty() {
        return Err(bad("names no file"));
    }
    Ok(clean)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::edit::{Format, MemoryFiles, format};

    fn plan_text(input: &str, files: &MemoryFiles) -> Result<Plan, EditError> {
        plan(&format::parse(input, Format::Auto)?, files)
    }

    #[test]
    fn a_plan_is_byte_ranges_against_the_text_it_saw() {
        let files = MemoryFiles::new([("a.rs", "\u{feff}fn a() {}\nfn b() {}\n")]);
        let plan = plan_text(
            "a.rs\n<<<<<<< SEARCH\nfn b() {}\n=======\nfn c() {}\n>>>>>>> REPLACE\n",
            &files,
        )
        .unwrap();
        let file = &plan.files[0];
        assert_eq!(file.before.as_ref().unwrap().version, None);
        assert_eq!(
            file.edits,
            [Replacement {
                range: 16..17,
                text: "c".into()
            }]
        );
        assert_eq!(
            file.after.as_deref(),
            Some("\u{feff}fn a() {}\nfn c() {}\n")
        );
    }

    #[test]
    fn operations_compose_in_order_and_moves_delete_the_source() {
        let files = MemoryFiles::new([("old.txt", "x\n")]);
        let plan = plan_text(
            "*** Begin Patch\n*** Add File: n.txt\n+1\n*** Update File: n.txt\n@@\n-1\n+2\n\
             *** Update File: old.txt\n*** Move to: sub/new.txt\n@@\n-x\n+y\n*** End Patch\n",
            &files,
        )
        .unwrap();
        let states: Vec<_> = plan
            .files
            .iter()
            .map(|f| (f.path.to_str().unwrap(), f.after.as_deref()))
            .collect();
        assert_eq!(
            states,
            [
                ("n.txt", Some("2\n")),
                ("old.txt", None),
                ("sub/new.txt", Some("y\n"))
            ]
        );
        let kinds: Vec<_> = plan.actions.iter().map(|a| a.kind).collect();
        assert_eq!(kinds, [ActionKind::Add, ActionKind::Move]);
    }

    #[test]
    fn an_empty_search_creates_a_missing_file() {
        let files = MemoryFiles::new([("a.txt", "x\n")]);
        let plan = plan_text(
            "new.py\n<<<<<<< SEARCH\n=======\nprint()\n>>>>>>> REPLACE\n",
            &files,
        )
        .unwrap();
        assert_eq!(plan.files[0].after.as_deref(), Some("print()\n"));
        assert_eq!(plan.actions[0].kind, ActionKind::Add);
        let plan = plan_text(
            r#"{"path": "n.txt", "old_string": "", "new_string": "hi"}"#,
            &files,
        )
        .unwrap();
        assert_eq!(plan.files[0].after.as_deref(), Some("hi"));
    }

    #[test]
    fn each_refusal_names_the_file() {
        let files = MemoryFiles::new([("d/a.txt", "x\n")]);
        let cases = [
            (
                "*** Begin Patch\n*** Delete File: gone.txt\n*** End Patch\n",
                "missing_file",
            ),
            (
                "*** Begin Patch\n*** Update File: d\n@@\n-x\n*** End Patch\n",
                "not_a_file",
            ),
            (
                "*** Begin Patch\n*** Delete File: ../etc/passwd\n*** End Patch\n",
                "bad_path",
            ),
            (
                "*** Begin Patch\n*** Delete File: /etc/passwd\n*** End Patch\n",
                "bad_path",
            ),
            (
                "*** Begin Patch\n*** Update File: d/a.txt\n@@\n-q\n*** End Patch\n",
                "not_found",
            ),
        ];
        for (input, kind) in cases {
            let err = plan_text(input, &files).unwrap_err();
            assert_eq!(err.kind(), kind, "{input}: {err}");
            assert!(err.path().is_some(), "{err}");
        }
    }

    #[test]
    fn replacement_is_minimal_and_respects_characters() {
        assert_eq!(
            replacement("abc", "abc"),
            Replacement {
                range: 3..3,
                text: String::new()
            }
        );
        assert_eq!(
            replacement("aéb", "aèb"),
            Replacement {
                range: 1..3,
                text: "è".into()
            }
        );
        assert_eq!(
            replacement("aa", "aaa"),
            Replacement {
                range: 2..2,
                text: "a".into()
            }
        );
    }
}
