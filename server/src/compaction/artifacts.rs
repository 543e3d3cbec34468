//! The artifact store of one session: every tool output kept whole, out of the prompt,
//! under a short stable id (`a1`, `a2`, …), so a masked output stays one `read_artifact`
//! call away.
//!
//! Outputs live in memory; with a session directory they are also written there (a synced
//! temporary file renamed into place, so a crash never leaves half an artifact; 0600 in a
//! 0700 folder, since they hold the workspace's code: `files::private`), and a store
//! reopened on that directory finds them again (its own files only, never through a link)
//! and numbers new ones after them.
//! Ids are never reused within a session.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// An artifact's id as the model sees it: `a` and a number.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ArtifactId(u32);

impl ArtifactId {
    /// `a17` → 17; anything else is not an id.
    pub fn parse(text: &str) -> Option<Self> {
        let digits = text.trim().strip_prefix('a')?;
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        digits.parse().ok().filter(|n| *n > 0).map(Self)
    }
}

impl std::fmt::Display for ArtifactId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "a{}", self.0)
    }
}

/// One stored output.
#[derive(Clone, Debug)]
pub struct Artifact {
    pub id: ArtifactId,
    /// The tool that produced it.
    pub tool: String,
    pub text: Arc<str>,
}

#[derive(Debug, thiserror::Error)]
pub enum ArtifactError {
    #[error("no artifact {id:?} in this session{}", known_ids(*.count))]
    Unknown { id: String, count: u32 },
    #[error(
        "artifact {id} has {lines} line(s); lines {start}-{end} are out of range: ask for lines 1-{lines} or a part of them"
    )]
    OutOfRange {
        id: ArtifactId,
        start: usize,
        end: usize,
        lines: usize,
    },
    #[error("cannot {what} {}: {source}", path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
}

fn known_ids(count: u32) -> String {
    match count {
        0 => " (none stored yet)".to_owned(),
        1 => " (the only one is a1)".to_owned(),
        n => format!(" (ids run from a1 to a{n})"),
    }
}

/// How many lines a read without an end returns at most, so that reading an artifact back
/// does not undo what masking saved.
pub const DEFAULT_READ_LINES: usize = 400;

/// The most an artifact is read back: outputs are capped well below it when they are made.
const MAX_ARTIFACT: u64 = 256 << 20;

/// The artifacts of one session.
#[derive(Debug, Default)]
pub struct ArtifactStore {
    artifacts: Vec<Artifact>,
    dir: Option<PathBuf>,
}

impl ArtifactStore {
    /// A store that keeps artifacts in memory only.
    pub fn in_memory() -> Self {
        Self::default()
    }

    /// A store backed by `dir` (created when missing), holding the artifacts already there.
    pub fn open(dir: &Path) -> Result<Self, ArtifactError> {
        let io = |what, path: &Path| {
            let path = path.to_owned();
            move |source| ArtifactError::Io { what, path, source }
        };
        crate::files::ensure_private_dir(dir).map_err(io("create", dir))?;
        let mut found = Vec::new();
        // host path: the artifact store, wright's own folder in its data folder.
        for entry in std::fs::read_dir(dir).map_err(io("list", dir))? {
            let entry = entry.map_err(io("list", dir))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            // `a17.run_tests.txt`; temporaries (`.a17.…tmp`) and other files are skipped.
            let Some((id, tool)) = name
                .strip_suffix(".txt")
                .and_then(|stem| stem.split_once('.'))
            else {
                continue;
            };
            let Some(id) = ArtifactId::parse(id) else {
                continue;
            };
            let path = entry.path();
            let bytes =
                crate::files::read_private(&path, MAX_ARTIFACT).map_err(io("read", &path))?;
            let text = String::from_utf8_lossy(&bytes).into_owned();
            found.push(Artifact {
                id,
                tool: tool.to_owned(),
                text: text.into(),
            });
        }
        found.sort_by(|a, b| a.id.cmp(&b.id));
        // Ids are positions: a gap (a file deleted by hand) ends what can be addressed.
        let artifacts = found
            .into_iter()
            .enumerate()
            .take_while(|(i, artifact)| artifact.id.0 as usize == i + 1)
            .map(|(_, artifact)| artifact)
            .collect();
        Ok(Self {
            artifacts,
            dir: Some(dir.to_owned()),
        })
    }

    /// Stores `text`, the output of `tool`, and returns its id.
    pub fn put(&mut self, tool: &str, text: &str) -> Result<ArtifactId, ArtifactError> {
        let id = ArtifactId(self.artifacts.len() as u32 + 1);
        if let Some(dir) = &self.dir {
            // Tool names are identifiers; anything else is kept out of the file name.
            let tool_part: String = tool
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '_' {
                        c
                    } else {
                        '_'
                    }
                })
                .collect();
            let path = dir.join(format!("{id}.{tool_part}.txt"));
            crate::files::write_private(&path, text.as_bytes()).map_err(|source| {
                ArtifactError::Io {
                    what: "write",
                    path,
                    source,
                }
            })?;
        }
        self.artifacts.push(Artifact {
            id: id.clone(),
            tool: tool.to_owned(),
            text: text.into(),
        });
        Ok(id)
    }

    pub fn get(&self, id: &ArtifactId) -> Option<&Artifact> {
        self.artifacts.get((id.0 as usize).checked_sub(1)?)
    }

    pub fn len(&self) -> usize {
        self.artifacts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.artifacts.is_empty()
    }

    /// What `read_artifact` returns: lines `start_line..=end_line` (1-based, inclusive) of
    /// artifact `id`, numbered as `read_file` numbers them, under a header naming the
    /// artifact, its tool and its size. Without a start, from line 1; without an end, up to
    /// [`DEFAULT_READ_LINES`] lines, with a note saying how to read on. An end past the last
    /// line is clamped to it; a start past it, or a start after the end, is an error.
    pub fn read(
        &self,
        id: &str,
        start_line: Option<usize>,
        end_line: Option<usize>,
    ) -> Result<String, ArtifactError> {
        let count = self.artifacts.len() as u32;
        let artifact = ArtifactId::parse(id)
            .and_then(|parsed| self.get(&parsed))
            .ok_or_else(|| ArtifactError::Unknown {
                id: id.to_owned(),
                count,
            })?;
        let lines: Vec<&str> = artifact.text.lines().collect();
        let total = lines.len();
        let start = start_line.unwrap_or(1).max(1);
        let wanted_end = end_line.unwrap_or(start + DEFAULT_READ_LINES - 1);
        let out_of_range = || ArtifactError::OutOfRange {
            id: artifact.id.clone(),
            start,
            end: wanted_end,
            lines: total,
        };
        if wanted_end < start || (start > total && total > 0) || (total == 0 && start > 1) {
            return Err(out_of_range());
        }
        let end = wanted_end.min(total);
        let mut out = format!(
            "[artifact {} from {}: lines {start}-{end} of {total}]\n",
            artifact.id, artifact.tool
        );
        let width = end.to_string().len();
        for (index, line) in lines.iter().enumerate().take(end).skip(start - 1) {
            let _ = writeln!(out, "{:>width$}\t{line}", index + 1);
        }
        if end_line.is_none() && end < total {
            let _ = writeln!(
                out,
                "[{} more line(s): read_artifact with start_line {}]",
                total - end,
                end + 1
            );
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("wright-artifacts-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn ids_are_short_stable_and_parse_back() {
        let mut store = ArtifactStore::in_memory();
        let first = store.put("run_tests", "one\ntwo\n").unwrap();
        let second = store.put("grep", "x").unwrap();
        assert_eq!(
            (first.to_string(), second.to_string()),
            ("a1".into(), "a2".into())
        );
        assert_eq!(ArtifactId::parse("a2"), Some(second.clone()));
        for bad in ["", "a", "a0", "b2", "a-1", "a1x", "17"] {
            assert_eq!(ArtifactId::parse(bad), None, "{bad}");
        }
        assert_eq!(&*store.get(&second).unwrap().text, "x");
        assert_eq!(store.len(), 2);
    }

    #[test]
    fn reads_number_lines_and_refuse_what_is_not_there() {
        let mut store = ArtifactStore::in_memory();
        let text: String = (1..=12).map(|i| format!("line {i}\n")).collect();
        store.put("run_command", &text).unwrap();
        let part = store.read("a1", Some(9), Some(11)).unwrap();
        assert_eq!(
            part,
            "[artifact a1 from run_command: lines 9-11 of 12]\n 9\tline 9\n10\tline 10\n11\tline 11\n"
        );
        // An end past the last line is clamped; the header says what was returned.
        assert!(
            store
                .read("a1", Some(12), Some(99))
                .unwrap()
                .contains("lines 12-12 of 12")
        );
        let unknown = store.read("a9", None, None).unwrap_err().to_string();
        assert_eq!(
            unknown,
            "no artifact \"a9\" in this session (the only one is a1)"
        );
        let past = store
            .read("a1", Some(13), Some(20))
            .unwrap_err()
            .to_string();
        assert_eq!(
            past,
            "artifact a1 has 12 line(s); lines 13-20 are out of range: ask for lines 1-12 or a part of them"
        );
        assert!(store.read("a1", Some(5), Some(4)).is_err());
    }

    #[test]
    fn a_read_without_an_end_is_capped_and_says_how_to_go_on() {
        let mut store = ArtifactStore::in_memory();
        let text: String = (1..=1000).map(|i| format!("{i}\n")).collect();
        store.put("run_tests", &text).unwrap();
        let first = store.read("a1", None, None).unwrap();
        assert_eq!(first.lines().count(), DEFAULT_READ_LINES + 2);
        assert!(first.ends_with("[600 more line(s): read_artifact with start_line 401]\n"));
        let last = store.read("a1", Some(801), None).unwrap();
        assert!(last.contains("lines 801-1000 of 1000") && !last.contains("more line(s)"));
    }

    #[test]
    fn a_directory_store_writes_atomically_and_reopens_with_its_ids() {
        let dir = temp_dir("reopen");
        let mut store = ArtifactStore::open(&dir).unwrap();
        store.put("run_tests", "failures: 2\n").unwrap();
        store.put("read/file", "fn main() {}\n").unwrap();
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["a1.run_tests.txt", "a2.read_file.txt"]);
        // They hold the workspace's code: 0600 in a 0700 folder.
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&dir.join("a1.run_tests.txt")), 0o600);
        // A temporary left by a crash is not an artifact.
        std::fs::write(dir.join(".a3.grep.txt.999.tmp"), "half").unwrap();
        let mut reopened = ArtifactStore::open(&dir).unwrap();
        assert_eq!(reopened.len(), 2);
        assert!(
            reopened
                .read("a1", None, None)
                .unwrap()
                .contains("failures: 2")
        );
        assert_eq!(reopened.put("grep", "hit").unwrap().to_string(), "a3");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
