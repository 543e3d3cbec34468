//! The workspace symbol index: tree-sitter tags of every supported file, in a tantivy index
//! persisted in the user's cache directory, kept current incrementally.
//!
//! A refresh runs in two phases: [`Index::refresh_lexical`] indexes the changed files'
//! definitions from a lexical scan (`lexical/`) and commits, so the workspace is searchable in
//! about the time a tags program takes; [`Index::refine`] then replaces each file's lexical
//! entries with the tree-sitter extraction (references, doc comments, ranges), a batch per
//! commit. The manifest marks the files still lexical, so an interrupted refinement resumes at
//! the next open instead of trusting lexical entries as final.
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

mod comments;
mod extract;
mod lexical;
mod macros;
mod recent;
mod schema;
mod store;

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

pub use extract::{Definition, Extracted, Reference, extract};
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

    /// What the index holds, as a report of a refresh that changed nothing (for a read-only
    /// index, all there is to say).
    fn report_as_is(&self, started: Instant) -> Report {
        let manifest = self.read_manifest();
        Report {
            root: self.root.clone(),
            index_dir: self.dir.clone(),
            opened: self.opened.clone(),
            files: manifest.files.len(),
            parsed: 0,
            removed: 0,
            definitions: manifest
                .files
                .values()
                .map(|r| r.definition_count as usize)
                .sum(),
            references: manifest
                .files
                .values()
                .map(|r| r.reference_count as usize)
                .sum(),
            bytes: manifest.files.values().map(|r| r.size).sum(),
            seconds: started.elapsed().as_secs_f64(),
            searchable_seconds: 0.0,
            lexical_files: manifest.files.values().filter(|r| r.lexical).count(),
            incremental: true,
            read_only: true,
            other_files: 0,
            skipped: Skipped::default(),
        }
    }

    /// Brings the index up to date with the disk, both phases: returns once every file's
    /// entries are the tree-sitter extraction's.
    pub fn refresh(&self, progress: &(dyn Fn(Progress) + Sync)) -> Result<Report, IndexError> {
        let started = Instant::now();
        let report = self.refresh_lexical(progress)?;
        if report.read_only {
            return Ok(report);
        }
        let refined = self.refine(progress, &|| false)?;
        let complete = self.report_as_is(started);
        Ok(Report {
            files: complete.files,
            definitions: complete.definitions,
            references: complete.references,
            bytes: complete.bytes,
            lexical_files: refined.remaining,
            seconds: started.elapsed().as_secs_f64(),
            ..report
        })
    }

    /// Phase 1: brings the index's file list up to date with the disk — scans new and changed
    /// files (size, mtime, then content hash) lexically, drops files that are gone — and
    /// commits, so that symbols are searchable when this returns; the files scanned are marked
    /// lexical for [`Index::refine`].
    pub fn refresh_lexical(
        &self,
        progress: &(dyn Fn(Progress) + Sync),
    ) -> Result<Report, IndexError> {
        let started = Instant::now();
        if self.read_only() {
            return Ok(self.report_as_is(started));
        }
        let found = Mutex::new(Vec::new());
        let mut skipped =
            workspace::walk_under(&self.tree, Path::new(""), &self.options.walk, &|entry| {
                found.lock().unwrap_or_else(|e| e.into_inner()).push(entry);
                true
            })
            .map_err(|err| IndexError::Io {
                path: self.root.clone(),
                source: err.into_io(),
            })?;
        let found = found.into_inner().unwrap_or_else(|e| e.into_inner());
        let other_files = found
            .iter()
            .filter(|entry| Language::from_path(&entry.path).is_none())
            .count();
        let sources: Vec<_> = found
            .into_iter()
            .filter_map(|entry| Some((Language::from_path(&entry.path)?, entry)))
            .collect();

        // Unchanged by size and mtime: nothing to read.
        let candidates: Vec<_> = {
            let manifest = self.read_manifest();
            sources
                .iter()
                .filter(|(_, entry)| {
                    manifest.files.get(&entry.relative).is_none_or(|record| {
                        record.size != entry.size || record.mtime_ns != entry.mtime_ns
                    })
                })
                .collect()
        };
        let present: std::collections::HashSet<&str> = sources
            .iter()
            .map(|(_, entry)| entry.relative.as_str())
            .collect();

        let total = candidates.len();
        let done = AtomicUsize::new(0);
        let next = AtomicUsize::new(0);
        let updates = Mutex::new(Vec::new());
        let worker_skips = Mutex::new(Skipped::default());
        let guard = self.lock_writer();
        let Some(writer) = guard.as_ref() else {
            return Ok(self.report_as_is(started));
        };
        let threads = std::thread::available_parallelism()
            .map_or(2, usize::from)
            .min(8);
        std::thread::scope(|scope| {
            for _ in 0..threads {
                scope.spawn(|| {
                    let mut local = Vec::new();
                    let mut local_skips = Skipped::default();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some((language, entry)) = candidates.get(i) else {
                            break;
                        };
                        match entry.read() {
                            Err(err) => {
                                let reason = match err {
                                    FileError::TooLarge { .. } => SkipReason::TooLarge,
                                    _ => SkipReason::Unreadable,
                                };
                                local_skips.add(reason, &entry.relative);
                                local.push(Update::Drop(entry.relative.clone()));
                            }
                            Ok(bytes) => {
                                let hash = store::hash(&bytes);
                                let unchanged = self
                                    .read_manifest()
                                    .files
                                    .get(&entry.relative)
                                    .is_some_and(|record| record.hash == hash);
                                if unchanged {
                                    local.push(Update::Touch(
                                        entry.relative.clone(),
                                        entry.size,
                                        entry.mtime_ns,
                                    ));
                                } else {
                                    let text = match workspace::decode(bytes) {
                                        FileText::Binary => {
                                            local_skips.add(SkipReason::Binary, &entry.relative);
                                            local.push(Update::Drop(entry.relative.clone()));
                                            None
                                        }
                                        FileText::Lossy(text) => {
                                            local_skips.add(SkipReason::NotText, &entry.relative);
                                            Some(text)
                                        }
                                        FileText::Text(text) => Some(text),
                                    };
                                    if let Some(text) = text {
                                        let record = self.index_lexical(
                                            writer,
                                            *language,
                                            &entry.relative,
                                            &text,
                                            hash,
                                            entry.mtime_ns,
                                        );
                                        local.push(Update::Parsed(entry.relative.clone(), record));
                                    }
                                }
                            }
                        }
                        let finished = done.fetch_add(1, Ordering::Relaxed) + 1;
                        if finished.is_multiple_of(64) || finished == total {
                            progress(Progress {
                                phase: Phase::Lexical,
                                done: finished,
                                total,
                            });
                        }
                    }
                    updates
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .extend(local);
                    worker_skips
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .merge(local_skips);
                });
            }
        });
        skipped.merge(worker_skips.into_inner().unwrap_or_else(|e| e.into_inner()));

        let mut removed: Vec<String> = self
            .read_manifest()
            .files
            .keys()
            .filter(|path| !present.contains(String::as_str(path)))
            .cloned()
            .collect();
        let updates = updates.into_inner().unwrap_or_else(|e| e.into_inner());
        let parsed = updates
            .iter()
            .filter(|u| matches!(u, Update::Parsed(..)))
            .count();
        let mut manifest = self.read_manifest().clone();
        for update in updates {
            match update {
                Update::Parsed(path, record) => {
                    manifest.files.insert(path, record);
                }
                Update::Touch(path, size, mtime_ns) => {
                    if let Some(record) = manifest.files.get_mut(&path) {
                        record.size = size;
                        record.mtime_ns = mtime_ns;
                    }
                }
                // Became binary or unreadable: no longer indexed.
                Update::Drop(path) => {
                    if manifest.files.contains_key(&path) {
                        removed.push(path);
                    }
                }
            }
        }
        for path in &removed {
            writer.delete_term(Term::from_field_text(self.fields.path, path));
            manifest.files.remove(path);
        }
        self.commit_locked(guard, manifest)?;
        Ok(Report {
            parsed,
            removed: removed.len(),
            incremental: self.opened == Opened::Existing,
            read_only: false,
            other_files,
            skipped,
            searchable_seconds: started.elapsed().as_secs_f64(),
            ..self.report_as_is(started)
        })
    }

    /// Phase 2: replaces the entries of every file still lexical with the tree-sitter
    /// extraction, in parallel, committing a batch every [`REFINE_COMMIT_EVERY`]. A file
    /// updated (from a buffer or the disk) or removed since its lexical scan keeps what that
    /// change put there. `stop` is asked between files; what is left stays lexical, in the
    /// manifest too, for the next refinement.
    pub fn refine(
        &self,
        progress: &(dyn Fn(Progress) + Sync),
        stop: &(dyn Fn() -> bool + Sync),
    ) -> Result<Refined, IndexError> {
        let pending: Vec<(String, u64)> = self
            .read_manifest()
            .files
            .iter()
            .filter(|(_, record)| record.lexical)
            .map(|(path, record)| (path.clone(), record.hash))
            .collect();
        if self.read_only() || pending.is_empty() {
            return Ok(Refined {
                refined: 0,
                remaining: pending.len(),
            });
        }
        let total = pending.len();
        let next = AtomicUsize::new(0);
        let done = AtomicUsize::new(0);
        let refined = AtomicUsize::new(0);
        let last_commit = Mutex::new(Instant::now());
        let last_manifest = Mutex::new(Instant::now());
        let failure: Mutex<Option<IndexError>> = Mutex::new(None);
        let threads = std::thread::available_parallelism()
            .map_or(2, usize::from)
            .min(8);
        std::thread::scope(|scope| {
            for _ in 0..threads {
                scope.spawn(|| {
                    loop {
                        if stop() {
                            break;
                        }
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some((relative, lexical_hash)) = pending.get(i) else {
                            break;
                        };
                        if self.refine_file(relative, *lexical_hash) {
                            refined.fetch_add(1, Ordering::Relaxed);
                        }
                        let finished = done.fetch_add(1, Ordering::Relaxed) + 1;
                        if finished.is_multiple_of(64) || finished == total {
                            progress(Progress {
                                phase: Phase::Refining,
                                done: finished,
                                total,
                            });
                        }
                        let due = {
                            let mut last = last_commit.lock().unwrap_or_else(|e| e.into_inner());
                            let due = last.elapsed() >= REFINE_COMMIT_EVERY;
                            if due {
                                *last = Instant::now();
                            }
                            due
                        };
                        if due {
                            let manifest_due = {
                                let mut last =
                                    last_manifest.lock().unwrap_or_else(|e| e.into_inner());
                                let due = last.elapsed() >= REFINE_MANIFEST_EVERY;
                                if due {
                                    *last = Instant::now();
                                }
                                due
                            };
                            let result = if manifest_due {
                                let guard = self.lock_writer();
                                let manifest = self.read_manifest().clone();
                                self.commit_locked(guard, manifest)
                            } else {
                                self.commit()
                            };
                            if let Err(err) = result {
                                *failure.lock().unwrap_or_else(|e| e.into_inner()) = Some(err);
                                break;
                            }
                        }
                    }
                });
            }
        });
        if let Some(err) = failure.into_inner().unwrap_or_else(|e| e.into_inner()) {
            return Err(err);
        }
        let guard = self.lock_writer();
        let manifest = self.read_manifest().clone();
        let remaining = manifest.files.values().filter(|r| r.lexical).count();
        self.commit_locked(guard, manifest)?;
        Ok(Refined {
            refined: refined.into_inner(),
            remaining,
        })
    }

    /// Extracts one lexical file with tree-sitter and swaps its documents, unless the file was
    /// updated or removed since its lexical entry (whose content hash was `lexical_hash`).
    /// Whether it was swapped.
    fn refine_file(&self, relative: &str, lexical_hash: u64) -> bool {
        let Some(language) = Language::from_path(Path::new(relative)) else {
            return false;
        };
        let path = Path::new(relative);
        let Ok(Some(stat)) = self.tree.stat(path) else {
            return false;
        };
        let Ok(bytes) = self.tree.read(path, self.options.walk.max_file_size) else {
            return false;
        };
        let hash = store::hash(&bytes);
        let text = match workspace::decode(bytes) {
            FileText::Binary => return false,
            FileText::Lossy(text) | FileText::Text(text) => text,
        };
        // The parse runs without the writer: updates go on meanwhile, and are checked for below.
        let extracted = extract(language, &text).unwrap_or_default();
        let documents = self.documents(relative, &extracted);
        let record = FileRecord::new(text.len() as u64, stat.mtime_ns, hash, &extracted);
        let guard = self.lock_writer();
        let Some(writer) = guard.as_ref() else {
            return false;
        };
        let mut manifest = self.manifest.write().unwrap_or_else(|e| e.into_inner());
        let current = manifest.files.get_mut(relative);
        let Some(current) = current.filter(|r| r.lexical && r.hash == lexical_hash) else {
            return false;
        };
        self.add(writer, relative, documents);
        *current = record;
        true
    }

    /// Re-indexes one file from text the editor holds (not the disk): searchable when this
    /// returns, durable after [`Index::commit`]. A file of no supported language is ignored.
    pub fn update_text(&self, relative: &str, text: &str) {
        let Some(language) = Language::from_path(Path::new(relative)) else {
            return;
        };
        let guard = self.lock_writer();
        let Some(writer) = guard.as_ref() else { return };
        let extracted = extract(language, text).unwrap_or_default();
        let documents = self.documents(relative, &extracted);
        self.add(writer, relative, documents.clone());
        self.update_recent(relative, documents);
        // mtime 0: the next refresh compares the disk's content hash, so an unsaved buffer's
        // symbols give way to the file's once the editor is gone.
        let record = FileRecord::new(
            text.len() as u64,
            0,
            store::hash(text.as_bytes()),
            &extracted,
        );
        self.manifest
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .files
            .insert(relative.to_owned(), record);
        self.mark_stale(relative);
    }

    /// Drops a file from the index: from searches when this returns, durably after
    /// [`Index::commit`].
    pub fn remove(&self, relative: &str) {
        let guard = self.lock_writer();
        let Some(writer) = guard.as_ref() else { return };
        writer.delete_term(Term::from_field_text(self.fields.path, relative));
        self.update_recent(relative, Vec::new());
        self.manifest
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .files
            .remove(relative);
        self.mark_stale(relative);
    }

    /// Puts a file's new documents in the in-memory index (called with the writer held, so
    /// that a commit cannot come between the update and this).
    fn update_recent(&self, relative: &str, documents: Vec<TantivyDocument>) {
        let mut recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(index) = recent.as_mut()
            && let Err(err) = index.replace(relative, documents)
        {
            tracing::warn!(
                "buffer updates will be searchable only once committed: the in-memory index \
                 failed: {err}"
            );
            *recent = None;
        }
    }

    fn mark_stale(&self, relative: &str) {
        self.stale
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(relative.to_owned());
    }

    /// Makes pending updates searchable and durable.
    pub fn commit(&self) -> Result<(), IndexError> {
        let mut guard = self.lock_writer();
        let Some(writer) = guard.as_mut() else {
            return Ok(());
        };
        self.commit_tantivy(writer)?;
        // Not the whole manifest: the list of the files whose entries it lacks.
        store::write_stale(
            &self.dir,
            &self.stale.lock().unwrap_or_else(|e| e.into_inner()),
        )
    }

    /// Commits and writes `manifest`, holding the writer so that no update slips between the
    /// manifest and the commit it describes.
    fn commit_locked(
        &self,
        mut guard: std::sync::MutexGuard<'_, Option<IndexWriter>>,
        manifest: store::Manifest,
    ) -> Result<(), IndexError> {
        let Some(writer) = guard.as_mut() else {
            return Ok(());
        };
        self.commit_tantivy(writer)?;
        store::write_manifest(&self.dir, &manifest)?;
        *self.manifest.write().unwrap_or_else(|e| e.into_inner()) = manifest;
        self.stale.lock().unwrap_or_else(|e| e.into_inner()).clear();
        Ok(())
    }

    /// Commits the writer's pending documents and makes them searchable from the disk index;
    /// the in-memory index of recent updates then has nothing the disk lacks.
    fn commit_tantivy(&self, writer: &mut IndexWriter) -> Result<(), IndexError> {
        let tantivy_err = |source| IndexError::Tantivy {
            path: self.dir.clone(),
            source,
        };
        writer.commit().map_err(tantivy_err)?;
        self.reader.reload().map_err(tantivy_err)?;
        let mut recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(index) = recent.as_mut()
            && let Err(err) = index.clear()
        {
            tracing::warn!("the in-memory index of buffer updates failed: {err}");
            *recent = None;
        }
        Ok(())
    }

    fn lock_writer(&self) -> std::sync::MutexGuard<'_, Option<IndexWriter>> {
        self.writer.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn read_manifest(&self) -> std::sync::RwLockReadGuard<'_, store::Manifest> {
        self.manifest.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Scans one file lexically and adds its documents (after deleting its old ones); its
    /// record is marked lexical, for [`Index::refine`]. A language without a lexical scanner
    /// has no documents until then.
    fn index_lexical(
        &self,
        writer: &IndexWriter,
        language: Language,
        relative: &str,
        text: &str,
        hash: u64,
        mtime_ns: u64,
    ) -> FileRecord {
        // A scanner bug on one file must not take the whole index down: that file waits for
        // the tree-sitter pass instead.
        let scanned = std::panic::catch_unwind(|| lexical::scan(language, text));
        let extracted = scanned
            .unwrap_or_else(|_| {
                tracing::error!(
                    path = relative,
                    "the lexical scan failed; tree-sitter will index the file"
                );
                None
            })
            .unwrap_or_default();
        self.add(writer, relative, self.documents(relative, &extracted));
        FileRecord {
            lexical: true,
            ..FileRecord::new(text.len() as u64, mtime_ns, hash, &extracted)
        }
    }

    /// Replaces a file's documents in the writer (effective at the commit).
    fn add(&self, writer: &IndexWriter, relative: &str, documents: Vec<TantivyDocument>) {
        writer.delete_term(Term::from_field_text(self.fields.path, relative));
        for document in documents {
            // The writer only fails once it is already broken; the commit reports that.
            let _ = writer.add_document(document);
        }
    }

    /// The documents of one file: a definition or a reference each.
    fn documents(&self, relative: &str, extracted: &Extracted) -> Vec<TantivyDocument> {
        let f = self.fields;
        let mut documents = Vec::new();
        for definition in &extracted.definitions {
            let mut doc = TantivyDocument::new();
            doc.add_text(f.name, &definition.name);
            doc.add_text(f.name_raw, &definition.name);
            doc.add_text(f.name_lower, definition.name.to_lowercase());
            doc.add_text(f.kind, &definition.kind);
            doc.add_text(f.role, "def");
            doc.add_text(f.path, relative);
            doc.add_u64(f.line, definition.line.into());
            doc.add_u64(f.column, definition.column.into());
            doc.add_u64(f.start_line, definition.start_line.into());
            doc.add_u64(f.end_line, definition.end_line.into());
            if let Some(container) = &definition.container {
                doc.add_text(f.container, container);
            }
            doc.add_text(f.signature, &definition.signature);
            if let Some(text) = &definition.doc {
                doc.add_text(f.doc, text);
            }
            documents.push(doc);
        }
        for reference in &extracted.references {
            let mut doc = TantivyDocument::new();
            doc.add_text(f.name_raw, &reference.name);
            doc.add_text(f.name_lower, reference.name.to_lowercase());
            doc.add_text(f.kind, &reference.kind);
            doc.add_text(f.role, "ref");
            doc.add_text(f.path, relative);
            doc.add_u64(f.line, reference.line.into());
            doc.add_u64(f.column, reference.column.into());
            documents.push(doc);
        }
        documents
    }

    /// Definitions matching `query`: exact names first, then names sharing identifier parts,
    /// then near misses (one edit away).
    pub fn symbols(&self, query: &str, kind: Option<&str>, limit: usize) -> Vec<SymbolHit> {
        let f = self.fields;
        let mut should: Vec<(Occur, Box<dyn Query>)> = Vec::new();
        for (_, word) in words(query) {
            let lower = word.to_lowercase();
            let term = |field, text: &str| Term::from_field_text(field, text);
            let boosted = |q: Box<dyn Query>, boost: f32| -> (Occur, Box<dyn Query>) {
                (Occur::Should, Box::new(BoostQuery::new(q, boost)))
            };
            should.push(boosted(
                Box::new(TermQuery::new(
                    term(f.name_raw, word),
                    IndexRecordOption::Basic,
                )),
                8.0,
            ));
            should.push(boosted(
                Box::new(TermQuery::new(
                    term(f.name_lower, &lower),
                    IndexRecordOption::Basic,
                )),
                4.0,
            ));
            for part in identifier_parts(word) {
                should.push((
                    Occur::Should,
                    Box::new(TermQuery::new(
                        term(f.name, &part),
                        IndexRecordOption::WithFreqs,
                    )),
                ));
            }
            if lower.chars().count() >= 4 {
                should.push(boosted(
                    Box::new(FuzzyTermQuery::new(term(f.name_lower, &lower), 1, true)),
                    0.5,
                ));
            }
        }
        if should.is_empty() {
            return Vec::new();
        }
        let mut must: Vec<(Occur, Box<dyn Query>)> = vec![
            (Occur::Must, Box::new(BooleanQuery::new(should))),
            (Occur::Must, role_query(f, "def")),
        ];
        if let Some(kind) = kind {
            must.push((
                Occur::Must,
                Box::new(TermQuery::new(
                    Term::from_field_text(f.kind, kind),
                    IndexRecordOption::Basic,
                )),
            ));
        }
        self.search(&BooleanQuery::new(must), limit)
    }

    /// Where `name` is used (calls, implementations), by path and line.
    pub fn references(&self, name: &str, limit: usize) -> Vec<SymbolHit> {
        let f = self.fields;
        let query = BooleanQuery::new(vec![
            (
                Occur::Must,
                Box::new(TermQuery::new(
                    Term::from_field_text(f.name_raw, name),
                    IndexRecordOption::Basic,
                )) as Box<dyn Query>,
            ),
            (Occur::Must, role_query(f, "ref")),
        ]);
        let mut hits = self.search(&query, limit.max(1) * 4);
        hits.sort_by(|a, b| (&a.path, a.line, a.column).cmp(&(&b.path, b.line, b.column)));
        hits.truncate(limit);
        hits
    }

    /// The definitions of one file, in order.
    pub fn outline(&self, relative: &str) -> Vec<SymbolHit> {
        let f = self.fields;
        let query = BooleanQuery::new(vec![
            (
                Occur::Must,
                Box::new(TermQuery::new(
                    Term::from_field_text(f.path, relative),
                    IndexRecordOption::Basic,
                )) as Box<dyn Query>,
            ),
            (Occur::Must, role_query(f, "def")),
        ]);
        let mut hits = self.search(&query, 100_000);
        hits.sort_by_key(|hit| (hit.start_line, hit.line, hit.column));
        hits
    }

    /// Every indexed file with the names it defines and references, for the repository map.
    pub fn files(&self) -> BTreeMap<String, FileRecord> {
        self.read_manifest().files.clone()
    }

    /// The best `limit` hits of `query`: from the disk index, except for the files updated
    /// since its last commit, whose hits come from the in-memory index — scored with the disk
    /// index's statistics, so that the two rank together.
    fn search(&self, query: &dyn Query, limit: usize) -> Vec<SymbolHit> {
        let searcher = self.reader.searcher();
        let top = TopDocs::with_limit(limit.max(1)).order_by_score();
        let recent = self
            .recent
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .filter(|recent| !recent.paths().is_empty())
            .map(|recent| {
                let paths = recent
                    .paths()
                    .iter()
                    .map(|path| Term::from_field_text(self.fields.path, path));
                (recent.searcher(), TermSetQuery::new(paths))
            });
        let Some((recent_searcher, outdated)) = recent else {
            let Ok(found) = searcher.search(query, &top) else {
                return Vec::new();
            };
            return self.hits(&searcher, found);
        };
        let current = BooleanQuery::new(vec![
            (Occur::Must, query.box_clone()),
            (Occur::MustNot, Box::new(outdated)),
        ]);
        let (Ok(on_disk), Ok(updated)) = (
            searcher.search(&current, &top),
            recent_searcher.search_with_statistics_provider(query, &top, &searcher),
        ) else {
            return Vec::new();
        };
        let mut hits = self.hits(&searcher, on_disk);
        hits.extend(self.hits(&recent_searcher, updated));
        hits.sort_by(|a, b| b.score.total_cmp(&a.score));
        hits.truncate(limit.max(1));
        hits
    }

    fn hits(
        &self,
        searcher: &tantivy::Searcher,
        top: Vec<(f32, tantivy::DocAddress)>,
    ) -> Vec<SymbolHit> {
        let f = self.fields;
        top.into_iter()
            .filter_map(|(score, address)| {
                let doc: TantivyDocument = searcher.doc(address).ok()?;
                let text = |field| {
                    doc.get_first(field)
                        .and_then(|v| v.as_str())
                        .map(str::to_owned)
                };
                let number =
                    |field| doc.get_first(field).and_then(|v| v.as_u64()).unwrap_or(0) as u32;
                let line = number(f.line);
                Some(SymbolHit {
                    name: text(f.name_raw)?,
                    kind: text(f.kind).unwrap_or_default(),
                    path: text(f.path)?,
                    line,
                    column: number(f.column),
                    start_line: doc
                        .get_first(f.start_line)
                        .and_then(|v| v.as_u64())
                        .map_or(line, |n| n as u32),
                    end_line: doc
                        .get_first(f.end_line)
                        .and_then(|v| v.as_u64())
                        .map_or(line, |n| n as u32),
                    container: text(f.container),
                    signature: text(f.signature).unwrap_or_default(),
                    doc: text(f.doc),
                    score,
                })
            })
            .collect()
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

fn role_query(f: Fields, role: &str) -> Box<dyn Query> {
    Box::new(TermQuery::new(
        Term::from_field_text(f.role, role),
        IndexRecordOption::Basic,
    ))
}

#[cfg(test)]
mod tests;
