//! Regex search over the workspace view — open buffers overlaid on the disk — with ripgrep's
//! own crates.
//!
//! Invariants: the files searched are exactly those the workspace walk yields (ignore rules,
//! generated folders, size limit); an open buffer is searched instead of its file on disk;
//! binary files are skipped as ripgrep skips them; results are ordered by path and line.

use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use grep_regex::RegexMatcherBuilder;
use grep_searcher::{
    BinaryDetection, MmapChoice, Searcher, SearcherBuilder, Sink, SinkContext, SinkContextKind,
    SinkMatch,
};

use crate::workspace::{self, Overlay, WalkOptions};

/// Lines longer than this are cut in results: a minified bundle's one line is not a result.
const MAX_LINE_CHARS: usize = 400;

#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    #[error("invalid regular expression: {0}")]
    Pattern(String),
    #[error(transparent)]
    Glob(#[from] workspace::GlobError),
}

/// What to search for.
#[derive(Clone, Debug)]
pub struct GrepQuery {
    pub pattern: String,
    pub globs: Vec<String>,
    pub limit: usize,
    /// Lines of context before and after each match.
    pub context: usize,
    pub case_insensitive: bool,
}

impl GrepQuery {
    pub fn new(pattern: impl Into<String>) -> Self {
        Self {
            pattern: pattern.into(),
            globs: Vec::new(),
            limit: 200,
            context: 0,
            case_insensitive: false,
        }
    }
}

/// One matching line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GrepMatch {
    /// Relative to the root, `/`-separated.
    pub path: String,
    /// One-based.
    pub line: u64,
    pub text: String,
    pub before: Vec<String>,
    pub after: Vec<String>,
}

#[derive(Clone, Debug, Default)]
pub struct GrepResult {
    pub matches: Vec<GrepMatch>,
    /// More matches exist than `limit` allowed.
    pub truncated: bool,
    pub files_searched: usize,
}

/// Searches the workspace under `root`.
pub fn grep(
    root: &Path,
    overlay: &dyn Overlay,
    query: &GrepQuery,
    walk: WalkOptions,
) -> Result<GrepResult, SearchError> {
    let matcher = RegexMatcherBuilder::new()
        .case_insensitive(query.case_insensitive)
        .line_terminator(Some(b'\n'))
        .build(&query.pattern)
        .map_err(|err| SearchError::Pattern(err.to_string()))?;
    let walk = walk.with_globs(root, &query.globs)?;
    let limit = query.limit.max(1);
    let found = AtomicUsize::new(0);
    let files = AtomicUsize::new(0);
    let results = Mutex::new(Vec::new());
    let searchers = Mutex::new(Vec::<Searcher>::new());
    let build_searcher = || {
        SearcherBuilder::new()
            .line_number(true)
            .before_context(query.context)
            .after_context(query.context)
            .binary_detection(BinaryDetection::quit(0))
            // Files are read whole through the workspace root and searched as slices; never
            // mapped (a file truncated while mapped could raise SIGBUS).
            .memory_map(MmapChoice::never())
            .build()
    };
    workspace::walk(root, &walk, &|entry| {
        if found.load(Ordering::Relaxed) > limit {
            return false;
        }
        let mut searcher = searchers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop()
            .unwrap_or_else(build_searcher);
        let mut sink = Collect {
            path: &entry.relative,
            matches: Vec::new(),
            pending_before: Vec::new(),
        };
        // The disk's bytes through the workspace root, never by path: the file the walk saw
        // may have been replaced by a link out since.
        let searched = match overlay.held_text(&entry.path) {
            Some(text) => searcher.search_slice(&matcher, text.as_bytes(), &mut sink),
            None => match entry.read() {
                Ok(bytes) => searcher.search_slice(&matcher, &bytes, &mut sink),
                Err(err) => Err(err.into_io()),
            },
        };
        searchers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(searcher);
        files.fetch_add(1, Ordering::Relaxed);
        if searched.is_ok() && !sink.matches.is_empty() {
            found.fetch_add(sink.matches.len(), Ordering::Relaxed);
            results
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .extend(sink.matches);
        }
        true
    });
    let mut matches = results.into_inner().unwrap_or_else(|e| e.into_inner());
    matches.sort_by(|a, b| (&a.path, a.line).cmp(&(&b.path, b.line)));
    let truncated = matches.len() > limit;
    matches.truncate(limit);
    Ok(GrepResult {
        matches,
        truncated,
        files_searched: files.into_inner(),
    })
}

/// Collects matches with their context lines.
struct Collect<'a> {
    path: &'a str,
    matches: Vec<GrepMatch>,
    pending_before: Vec<String>,
}

fn line_text(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let text = text.trim_end_matches(['\n', '\r']);
    match text.char_indices().nth(MAX_LINE_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

impl Sink for Collect<'_> {
    type Error = std::io::Error;

    fn matched(&mut self, _: &Searcher, found: &SinkMatch<'_>) -> Result<bool, Self::Error> {
        // With multi-line off, a match is exactly one line.
        self.matches.push(GrepMatch {
            path: self.path.to_owned(),
            line: found.line_number().unwrap_or(0),
            text: line_text(found.bytes()),
            before: std::mem::take(&mut self.pending_before),
            after: Vec::new(),
        });
        Ok(true)
    }

    fn context(&mut self, _: &Searcher, context: &SinkContext<'_>) -> Result<bool, Self::Error> {
        let text = line_text(context.bytes());
        match context.kind() {
            SinkContextKind::Before => self.pending_before.push(text),
            SinkContextKind::After => {
                if let Some(last) = self.matches.last_mut() {
                    last.after.push(text);
                }
            }
            SinkContextKind::Other => {}
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::workspace::DiskOnly;

    fn workspace(name: &str, files: &[(&str, &[u8])]) -> PathBuf {
        let root = std::env::temp_dir().join(format!("wright-grep-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        for (path, text) in files {
            let path = root.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        root
    }

    fn search(root: &Path, overlay: &dyn Overlay, query: &GrepQuery) -> GrepResult {
        grep(root, overlay, query, WalkOptions::default()).unwrap()
    }

    #[test]
    fn matches_come_sorted_with_context_and_globs_filter() {
        let root = workspace(
            "basic",
            &[
                ("b.rs", b"fn one() {}\nfn two() {}\nfn three() {}\n"),
                ("a.py", b"def two():\n    pass\n"),
                ("bin.dat", b"two\0two"),
                ("target/x.rs", b"fn two() {}"),
            ],
        );
        let mut query = GrepQuery::new(r"\btwo\b");
        query.context = 1;
        let result = search(&root, &DiskOnly, &query);
        let found: Vec<_> = result
            .matches
            .iter()
            .map(|m| (m.path.as_str(), m.line))
            .collect();
        assert_eq!(found, [("a.py", 1), ("b.rs", 2)]);
        assert_eq!(result.matches[1].before, ["fn one() {}"]);
        assert_eq!(result.matches[1].after, ["fn three() {}"]);
        assert_eq!(result.matches[0].after, ["    pass"]);

        query.globs = vec!["*.rs".into()];
        let result = search(&root, &DiskOnly, &query);
        assert_eq!(result.matches.len(), 1);
        assert_eq!(result.matches[0].path, "b.rs");
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn open_buffers_are_searched_instead_of_the_disk() {
        struct One(PathBuf);
        impl Overlay for One {
            fn buffer_text(&self, path: &Path) -> Option<String> {
                (path == self.0).then(|| "unsaved_name = 1\n".to_owned())
            }
        }
        let root = workspace("overlay", &[("m.py", b"saved_name = 1\n")]);
        let overlay = One(root.join("m.py"));
        assert_eq!(
            search(&root, &overlay, &GrepQuery::new("unsaved_name"))
                .matches
                .len(),
            1
        );
        assert!(
            search(&root, &overlay, &GrepQuery::new("saved_name = ")).matches[0]
                .text
                .starts_with("unsaved")
        );
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn limits_bad_patterns_and_long_lines() {
        let many: String = (0..50).map(|i| format!("hit {i}\n")).collect();
        let long = format!("hit {}\n", "x".repeat(5000));
        let root = workspace(
            "limits",
            &[("many.txt", many.as_bytes()), ("long.txt", long.as_bytes())],
        );
        let mut query = GrepQuery::new("hit");
        query.limit = 10;
        let result = search(&root, &DiskOnly, &query);
        assert_eq!(result.matches.len(), 10);
        assert!(result.truncated);
        query.limit = 100;
        let result = search(&root, &DiskOnly, &query);
        let long_match = result
            .matches
            .iter()
            .find(|m| m.path == "long.txt")
            .unwrap();
        assert!(
            long_match.text.ends_with('…') && long_match.text.chars().count() == MAX_LINE_CHARS + 1
        );
        assert!(matches!(
            grep(
                &root,
                &DiskOnly,
                &GrepQuery::new("(unclosed"),
                WalkOptions::default()
            ),
            Err(SearchError::Pattern(_))
        ));
        let mut bad_glob = GrepQuery::new("x");
        bad_glob.globs = vec!["{a".into()];
        assert!(matches!(
            grep(&root, &DiskOnly, &bad_glob, WalkOptions::default()),
            Err(SearchError::Glob(_))
        ));
        std::fs::remove_dir_all(root).unwrap();
    }
}
