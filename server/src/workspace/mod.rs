//! The files the agent sees: the workspace on disk, filtered by ignore rules, with open buffers
//! overlaid on it.
//!
//! Invariants: a walk respects `.gitignore`, `.ignore` and git's global and repository
//! excludes, never follows symbolic links (so a link loop cannot trap it), never descends into
//! generated folders, and reports every file it leaves out with the reason; a read is the
//! buffer's text when the editor has the file open, the disk's otherwise.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::UNIX_EPOCH;

use ignore::{WalkBuilder, WalkState};

/// Folders that hold build output or downloaded dependencies, never the user's source, even
/// in a repository that forgot to ignore them.
pub const GENERATED_DIRS: &[&str] = &[
    ".git",
    "node_modules",
    "target",
    "dist",
    "build",
    "out",
    "__pycache__",
    ".venv",
    "venv",
    ".tox",
    ".mypy_cache",
    ".pytest_cache",
    ".next",
    ".gradle",
    "bower_components",
];

/// The default size above which a file is not read (minified bundles, data dumps).
pub const DEFAULT_MAX_FILE_SIZE: u64 = 1024 * 1024;

/// A file the walk found.
#[derive(Clone, Debug)]
pub struct FileEntry {
    pub path: PathBuf,
    /// Relative to the walk's root, with `/` separators.
    pub relative: String,
    pub size: u64,
    /// Modification time in nanoseconds since the epoch (0 when the platform has none).
    pub mtime_ns: u64,
}

/// Why a file or folder was left out.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SkipReason {
    TooLarge,
    GeneratedFolder,
    Unreadable,
    Binary,
    NotText,
}

impl SkipReason {
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::TooLarge => "over the size limit",
            Self::GeneratedFolder => "generated folder",
            Self::Unreadable => "unreadable",
            Self::Binary => "binary",
            Self::NotText => "invalid UTF-8 (read lossily)",
        }
    }
}

/// What was left out, by reason, with a few examples each.
#[derive(Clone, Debug, Default)]
pub struct Skipped {
    pub counts: BTreeMap<SkipReason, usize>,
    pub examples: BTreeMap<SkipReason, Vec<String>>,
}

impl Skipped {
    const EXAMPLES: usize = 3;

    pub fn add(&mut self, reason: SkipReason, what: impl Into<String>) {
        *self.counts.entry(reason.clone()).or_default() += 1;
        let examples = self.examples.entry(reason).or_default();
        if examples.len() < Self::EXAMPLES {
            examples.push(what.into());
        }
    }

    pub fn merge(&mut self, other: Skipped) {
        for (reason, count) in other.counts {
            *self.counts.entry(reason).or_default() += count;
        }
        for (reason, examples) in other.examples {
            let mine = self.examples.entry(reason).or_default();
            for example in examples {
                if mine.len() < Self::EXAMPLES {
                    mine.push(example);
                }
            }
        }
    }

    pub fn total(&self) -> usize {
        self.counts.values().sum()
    }
}

/// How to walk.
#[derive(Clone, Debug)]
pub struct WalkOptions {
    pub max_file_size: u64,
    /// Worker threads; 0 lets the walker choose.
    pub threads: usize,
    /// Globs that select files (`*.rs`), or exclude them (`!*.md`), relative to the root.
    pub globs: Option<ignore::overrides::Override>,
}

impl Default for WalkOptions {
    fn default() -> Self {
        Self {
            max_file_size: DEFAULT_MAX_FILE_SIZE,
            threads: 0,
            globs: None,
        }
    }
}

/// A glob that does not parse.
#[derive(Debug, thiserror::Error)]
#[error("invalid glob {glob:?}: {message}")]
pub struct GlobError {
    pub glob: String,
    pub message: String,
}

impl WalkOptions {
    /// Restricts the walk to files matching `globs` (gitignore syntax; `!` excludes).
    pub fn with_globs(mut self, root: &Path, globs: &[String]) -> Result<Self, GlobError> {
        if globs.is_empty() {
            return Ok(self);
        }
        let mut builder = ignore::overrides::OverrideBuilder::new(root);
        for glob in globs {
            builder.add(glob).map_err(|err| GlobError {
                glob: glob.clone(),
                message: err.to_string(),
            })?;
        }
        self.globs = Some(builder.build().map_err(|err| GlobError {
            glob: globs.join(" "),
            message: err.to_string(),
        })?);
        Ok(self)
    }
}

fn is_generated(name: &str) -> bool {
    GENERATED_DIRS.contains(&name)
}

/// A configured walker over `root`, with wright's filters.
fn builder(root: &Path, options: &WalkOptions) -> WalkBuilder {
    let mut builder = WalkBuilder::new(root);
    builder
        .hidden(false)
        .follow_links(false)
        .git_ignore(true)
        .git_global(true)
        .git_exclude(true)
        // A workspace need not be a git repository for its .gitignore to count.
        .require_git(false)
        .threads(options.threads);
    if let Some(globs) = &options.globs {
        builder.overrides(globs.clone());
    }
    builder.filter_entry(|entry| {
        !(entry.depth() > 0
            && entry.file_type().is_some_and(|t| t.is_dir())
            && entry.file_name().to_str().is_some_and(is_generated))
    });
    builder
}

/// Walks `root` in parallel, calling `visit` for each regular file within the size limit,
/// until a visit returns `false`. Returns what was left out.
pub fn walk(
    root: &Path,
    options: &WalkOptions,
    visit: &(dyn Fn(FileEntry) -> bool + Sync),
) -> Skipped {
    let skipped = Mutex::new(Skipped::default());
    let note = |reason: SkipReason, what: &Path| {
        let relative = relative_path(root, what);
        skipped
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .add(reason, relative);
    };
    // Generated folders are pruned by filter_entry, which cannot report; count them here.
    for name in GENERATED_DIRS {
        if *name != ".git" && root.join(name).is_dir() {
            note(SkipReason::GeneratedFolder, &root.join(name));
        }
    }
    builder(root, options).build_parallel().run(|| {
        Box::new(|result| {
            let entry = match result {
                Ok(entry) => entry,
                Err(err) => {
                    let path = match &err {
                        ignore::Error::WithPath { path, .. } => path.clone(),
                        _ => root.to_path_buf(),
                    };
                    note(SkipReason::Unreadable, &path);
                    return WalkState::Continue;
                }
            };
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                return WalkState::Continue;
            }
            let metadata = match entry.metadata() {
                Ok(metadata) => metadata,
                Err(_) => {
                    note(SkipReason::Unreadable, entry.path());
                    return WalkState::Continue;
                }
            };
            if metadata.len() > options.max_file_size {
                note(SkipReason::TooLarge, entry.path());
                return WalkState::Continue;
            }
            let mtime_ns = mtime_ns(&metadata);
            let keep_going = visit(FileEntry {
                relative: relative_path(root, entry.path()),
                path: entry.into_path(),
                size: metadata.len(),
                mtime_ns,
            });
            if keep_going {
                WalkState::Continue
            } else {
                WalkState::Quit
            }
        })
    });
    skipped
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// `path` relative to `root` with `/` separators (the path itself when outside `root`).
/// A file's modification time in nanoseconds since the epoch (0 when unknown), as the walk
/// reports it.
pub fn mtime_ns(metadata: &std::fs::Metadata) -> u64 {
    metadata
        .modified()
        .ok()
        .and_then(|time| time.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |since| since.as_nanos() as u64)
}

pub fn relative_path(root: &Path, path: &Path) -> String {
    let relative = path.strip_prefix(root).unwrap_or(path);
    let text = relative.to_string_lossy();
    if std::path::MAIN_SEPARATOR == '/' {
        text.into_owned()
    } else {
        text.replace(std::path::MAIN_SEPARATOR, "/")
    }
}

/// The text of a file as read from disk, classified: binary files (a NUL byte in the first
/// 8 KiB, as git and ripgrep decide) are refused; invalid UTF-8 is decoded lossily and said so.
pub enum FileText {
    Text(String),
    Lossy(String),
    Binary,
}

pub fn decode(bytes: Vec<u8>) -> FileText {
    let head = &bytes[..bytes.len().min(8192)];
    if head.contains(&0) {
        return FileText::Binary;
    }
    match String::from_utf8(bytes) {
        Ok(text) => FileText::Text(text),
        Err(err) => FileText::Lossy(String::from_utf8_lossy(err.as_bytes()).into_owned()),
    }
}

/// The workspace as the agent sees it: open buffers first, then the disk.
pub trait Overlay: Sync {
    /// The buffer text of an open file, if it is open.
    fn buffer_text(&self, path: &Path) -> Option<String>;
}

/// No open buffers: the disk alone (the command line).
pub struct DiskOnly;

impl Overlay for DiskOnly {
    fn buffer_text(&self, _: &Path) -> Option<String> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("wright-walk-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn walked(root: &Path, options: &WalkOptions) -> (Vec<String>, Skipped) {
        let found = Mutex::new(Vec::new());
        let skipped = walk(root, options, &|entry| {
            found.lock().unwrap().push(entry.relative);
            true
        });
        let mut found = found.into_inner().unwrap();
        found.sort();
        (found, skipped)
    }

    #[test]
    fn ignore_rules_generated_folders_and_size_are_respected_and_reported() {
        let root = temp("rules");
        for (path, text) in [
            ("src/a.rs", "fn a() {}"),
            ("src/gen.rs", "x"),
            ("node_modules/m/index.js", "x"),
            ("big.txt", &"x".repeat(2000)),
            (".gitignore", "src/gen.rs\n"),
            (".hidden/keep.py", "x = 1"),
        ] {
            let path = root.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        let options = WalkOptions {
            max_file_size: 1000,
            threads: 2,
            globs: None,
        };
        let (found, skipped) = walked(&root, &options);
        assert_eq!(found, [".gitignore", ".hidden/keep.py", "src/a.rs"]);
        assert_eq!(skipped.counts[&SkipReason::TooLarge], 1);
        assert_eq!(
            skipped.examples[&SkipReason::GeneratedFolder],
            ["node_modules"]
        );
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn a_symlink_loop_does_not_trap_the_walk() {
        let root = temp("loop");
        std::fs::create_dir_all(root.join("a")).unwrap();
        std::fs::write(root.join("a/f.rs"), "fn f() {}").unwrap();
        std::os::unix::fs::symlink(&root, root.join("a/loop")).unwrap();
        let (found, _) = walked(&root, &WalkOptions::default());
        assert_eq!(found, ["a/f.rs"]);
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn decoding_refuses_binary_and_reads_invalid_utf8_lossily() {
        assert!(matches!(decode(b"ab\0cd".to_vec()), FileText::Binary));
        assert!(matches!(
            decode(b"fn main() {}".to_vec()),
            FileText::Text(_)
        ));
        let FileText::Lossy(text) = decode(b"caf\xe9".to_vec()) else {
            panic!()
        };
        assert_eq!(text, "caf\u{fffd}");
    }
}
