//! The workspace symbol index: tree-sitter tags of every supported file, in a tantivy index
//! persisted in the user's cache directory, kept current incrementally.
//!
//! A refresh runs in two phases: [`Index::refresh_lexical`] indexes the changed files'
//! definitions from a lexical scan (`lexical/`) and commits, so the workspace is searchable in
//! about the time a tags program takes; [`Index::refine`] then replaces each file's lexical
//! entries with the tree-sitter extraction (references, doc comments, ranges), a batch per
//! commit. A language whose scan is complete (Rust, `lexical::is_complete`) skips phase 2:
//! its scan gives what tree-sitter would. The manifest marks the files still lexical, so an
//! interrupted refinement resumes at the next open instead of trusting lexical entries as
//! final.
//!
//! Invariants: parse trees never outlive the extraction of one file (a whole workspace of
//! trees would not fit in memory); an index on disk is trusted only when its format version
//! and schema match and it opens cleanly, and is rebuilt otherwise; the manifest of indexed
//! files is written only after the tantivy commit it describes, so a crash between the two
//! leaves the manifest behind the index, which the next refresh repairs, never ahead of it; a
//! commit of buffer updates writes only the list of files it changed (`stale.json`), whose
//! entries the next open treats as changed, so a refresh re-reads them from the disk; a file's
//! lexical and refined documents are swapped in one commit (delete and add together), and a
//! refinement is dropped when the file was updated or removed since its lexical entry was
//! made, so a buffer change is never overwritten by an older parse of the disk.

mod build;
mod comments;
mod extract;
mod lexical;
mod live;
mod macros;
mod query;
mod recent;
mod schema;
mod store;
mod tags;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use tantivy::collector::TopDocs;
use tantivy::query::{
    BooleanQuery, BoostQuery, FuzzyTermQuery, Occur, Query, TermQuery, TermSetQuery,
};
use tantivy::schema::{IndexRecordOption, TantivyDocument, Value};
use tantivy::{IndexReader, IndexWriter, ReloadPolicy, Term};

pub use extract::{Definition, ExtractError, Extracted, Reference, extract, extract_by_query};
pub use lexical::scan as scan_lexical;
pub use schema::{identifier_parts, words};
pub use store::{FileRecord, root_key};

use crate::files::{FileError, Root};
use crate::languages::Language;
use crate::workspace::{self, FileText, SkipReason, Skipped, WalkOptions};
use schema::Fields;

#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    #[error("index at {path}: {source}")]
    Tantivy {
        path: PathBuf,
        source: tantivy::TantivyError,
    },
    #[error("index at {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// How the index was opened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Opened {
    /// No index existed: everything will be parsed.
    Created,
    /// The index on disk was valid: only changed files will be parsed.
    Existing,
    /// The index on disk could not be trusted and was thrown away.
    Rebuilt(String),
}

/// What a refresh did.
#[derive(Clone, Debug)]
pub struct Report {
    pub root: PathBuf,
    pub index_dir: PathBuf,
    pub opened: Opened,
    /// Source files in the index after the refresh.
    pub files: usize,
    /// Files parsed by this refresh (all of them unless incremental).
    pub parsed: usize,
    /// Files dropped because they disappeared.
    pub removed: usize,
    pub definitions: usize,
    pub references: usize,
    /// Bytes of source in the index.
    pub bytes: u64,
    pub seconds: f64,
    /// When the lexical phase had committed: from then on, symbols were searchable.
    pub searchable_seconds: f64,
    /// Files whose entries are still lexical (phase 2 pending): 0 after a complete refresh
    /// unless some file could not be read again.
    pub lexical_files: usize,
    /// Whether the refresh started from a valid index.
    pub incremental: bool,
    /// Another process holds the index's writer: nothing was refreshed, the index is used as
    /// that process last committed it.
    pub read_only: bool,
    /// Files of no supported language.
    pub other_files: usize,
    pub skipped: Skipped,
}

/// Progress of a refresh, for progress bars.
#[derive(Clone, Copy, Debug)]
pub struct Progress {
    pub phase: Phase,
    pub done: usize,
    pub total: usize,
}

/// The two phases of a refresh.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Changed files scanned lexically; searchable once this phase commits.
    Lexical,
    /// Lexical entries replaced by the tree-sitter extraction.
    Refining,
}

/// What [`Index::refine`] did.
#[derive(Clone, Copy, Debug, Default)]
pub struct Refined {
    /// Files whose lexical entries were replaced.
    pub refined: usize,
    /// Files still lexical afterwards (stopped, unreadable, or updated meanwhile and then
    /// indexed by that update: those are not counted).
    pub remaining: usize,
}

/// How often the refinement commits: each commit makes a batch of files complete for
/// searches, but costs a segment flush and the merges of the segments its deletes thin out
/// (committing every 2 s made a cold index half again as long); symbols are searchable all
/// along, so batches of several seconds are fine.
const REFINE_COMMIT_EVERY: Duration = Duration::from_secs(10);
/// How often it also writes the whole manifest, so a restart resumes near where it stopped.
const REFINE_MANIFEST_EVERY: Duration = Duration::from_secs(30);

/// A symbol found by a query.
#[derive(Clone, Debug, PartialEq)]
pub struct SymbolHit {
    pub name: String,
    pub kind: String,
    /// Relative to the root, `/`-separated.
    pub path: String,
    /// Zero-based.
    pub line: u32,
    pub column: u32,
    pub start_line: u32,
    pub end_line: u32,
    pub container: Option<String>,
    pub signature: String,
    pub doc: Option<String>,
    pub score: f32,
}

/// Options for opening an index.
#[derive(Clone, Debug)]
pub struct Options {
    /// Where indexes live (one folder per workspace root inside it).
    pub cache_dir: PathBuf,
    pub walk: WalkOptions,
}

pub struct Index {
    root: PathBuf,
    /// The workspace, through which every file is read (never through a link out).
    tree: Arc<Root>,
    dir: PathBuf,
    fields: Fields,
    /// `None` when another process (a language server, another `wright index`) holds the
    /// index's writer lock: the index is then read as that process last committed it.
    writer: Mutex<Option<IndexWriter>>,
    reader: IndexReader,
    manifest: RwLock<store::Manifest>,
    /// Files updated or removed since the manifest was last written (guarded by the writer).
    stale: Mutex<BTreeSet<String>>,
    /// The files updated since the last commit, searchable before it (`None`: read-only, or
    /// the in-memory index could not be made; updates are then searchable after the commit).
    recent: Mutex<Option<recent::Recent>>,
    options: Options,
    opened: Opened,
}

impl Index {
    /// Opens the index of `root`, creating it or rebuilding it when the one on disk cannot be
    /// trusted.
    pub fn open(root: &Path, options: Options) -> Result<Self, IndexError> {
        let tree = Root::open(root).map_err(|err| IndexError::Io {
            path: root.to_path_buf(),
            source: err.into_io(),
        })?;
        let dir = store::index_dir(&options.cache_dir, root);
        let (index, manifest, opened) = store::open_or_create(&dir, root)?;
        let fields = schema::schema().1;
        let tantivy_err = |source| IndexError::Tantivy {
            path: dir.clone(),
            source,
        };
        let writer = match index.writer_with_num_threads(2, 64 * 1024 * 1024) {
            Ok(writer) => Some(writer),
            Err(tantivy::TantivyError::LockFailure(
                tantivy::directory::error::LockError::LockBusy,
                _,
            )) => None,
            Err(err) => return Err(tantivy_err(err)),
        };
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()
            .map_err(tantivy_err)?;
        let recent = match &writer {
            Some(_) => recent::Recent::new(&fields)
                .inspect_err(|err| {
                    tracing::warn!("buffer updates will be searchable only once committed: {err}")
                })
                .ok(),
            None => None,
        };
        Ok(Self {
            root: root.to_path_buf(),
            tree: Arc::new(tree),
            dir,
            fields,
            recent: Mutex::new(recent),
            writer: Mutex::new(writer),
            reader,
            manifest: RwLock::new(manifest),
            stale: Mutex::new(BTreeSet::new()),
            options,
            opened,
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The workspace as a [`Root`]: what every read of its files goes through.
    pub fn tree(&self) -> &Arc<Root> {
        &self.tree
    }

    /// The walk options the index was opened with (its size limit).
    pub fn walk_options(&self) -> &WalkOptions {
        &self.options.walk
    }

    /// The text of the indexed file `relative` as the disk holds it, read through the root
    /// within the size limit; `None` when it cannot be read (gone, binary, a link out).
    pub fn read_source(&self, relative: &str) -> Option<String> {
        let bytes = self
            .tree
            .read(Path::new(relative), self.options.walk.max_file_size)
            .ok()?;
        match workspace::decode(bytes) {
            FileText::Text(text) | FileText::Lossy(text) => Some(text),
            FileText::Binary => None,
        }
    }

    /// Whether the index holds `relative`.
    pub fn has_file(&self, relative: &str) -> bool {
        self.read_manifest().files.contains_key(relative)
    }

    /// Whether another process holds the writer: queries work, refresh and updates do not.
    pub fn read_only(&self) -> bool {
        self.lock_writer().is_none()
    }
}

/// What `wright doctor` says of a root's index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum State {
    Missing,
    Ready {
        files: usize,
        definitions: usize,
    },
    /// It will be rebuilt when next opened, for this reason.
    Stale(String),
}

/// The state of `root`'s index in `cache_dir`, from its metadata alone (cheap; nothing locked).
pub fn state(cache_dir: &Path, root: &Path) -> (PathBuf, State) {
    let dir = store::index_dir(cache_dir, root);
    let state = if !dir.exists() {
        State::Missing
    } else {
        match store::peek(&dir, root) {
            Ok(manifest) => State::Ready {
                files: manifest.files.len(),
                definitions: manifest
                    .files
                    .values()
                    .map(|r| r.definition_count as usize)
                    .sum(),
            },
            Err(reason) => State::Stale(reason),
        }
    };
    (dir, state)
}

enum Update {
    Parsed(String, FileRecord),
    /// Content unchanged, only its metadata.
    Touch(String, u64, u64),
    /// Not indexable any more.
    Drop(String),
}

#[cfg(test)]
mod tests;
