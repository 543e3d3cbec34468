//! The symbol index as the language server keeps it: one index per workspace root, built in
//! the background with `$/progress`, then kept current from the editor's buffers and from
//! watched-file events.
//!
//! Indexing is two-phase (see `index/`): `workspace/symbol` is served once the lexical phase
//! has committed, and `$/progress` goes on through the refinement ("refining N/M files"),
//! ending when it does; retrieval reads whatever the index holds meanwhile.
//!
//! Invariants: indexing never blocks a handler (it runs on blocking threads); an open
//! document is indexed from its buffer, never from the disk; updates are debounced briefly
//! and read the buffer's text when applied, so a burst of keystrokes costs one re-index.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use tokio::sync::mpsc;
use tower_lsp_server::Client;
use tower_lsp_server::ls_types as lsp;

use super::convert;
use crate::buffers::{Buffers, DocumentKey};
use crate::index::{self, Index, SymbolHit};
use crate::workspace::{self, FileText, Filter, WalkOptions};

/// How long updates gather before they are applied: a burst of keystrokes is one update,
/// and a changed file is searchable again well within the tens of milliseconds an editor's
/// next request takes.
const DEBOUNCE: Duration = Duration::from_millis(25);

/// How long the server waits for another process to release an index's writer.
const WRITER_RETRIES: usize = 30;
const WRITER_RETRY_DELAY: Duration = Duration::from_secs(1);

pub struct Indexes {
    indexes: RwLock<Vec<Arc<Index>>>,
    updates: mpsc::UnboundedSender<PathBuf>,
    buffers: Arc<Mutex<Buffers>>,
    cache_dir: PathBuf,
    /// The roots the editor has now; one task builds toward the latest, so two builds of
    /// one root never race over its folder and a stale list never wins.
    wanted: tokio::sync::watch::Sender<Wanted>,
}

/// What the indexes should be.
#[derive(Clone, Debug, Default)]
struct Wanted {
    roots: Vec<PathBuf>,
    max_file_size: u64,
    client: Option<Client>,
    progress: bool,
}

impl Indexes {
    /// Creates the set (empty until [`Indexes::want`]) and starts its build and update tasks.
    pub fn start(buffers: Arc<Mutex<Buffers>>, cache_dir: PathBuf) -> Arc<Self> {
        let (updates, receiver) = mpsc::unbounded_channel();
        let (wanted, mut wanted_changes) = tokio::sync::watch::channel(Wanted::default());
        let indexes = Arc::new(Self {
            indexes: RwLock::new(Vec::new()),
            updates,
            buffers,
            cache_dir,
            wanted,
        });
        tokio::spawn(apply_updates(Arc::downgrade(&indexes), receiver));
        let weak = Arc::downgrade(&indexes);
        tokio::spawn(async move {
            while wanted_changes.changed().await.is_ok() {
                let wanted = wanted_changes.borrow_and_update().clone();
                let Some(indexes) = weak.upgrade() else {
                    return;
                };
                indexes.build(wanted).await;
            }
        });
        indexes
    }

    /// Asks for the indexes of `roots` (built in the background, with progress when the
    /// client supports it); indexes of other roots are dropped.
    pub fn want(&self, roots: Vec<PathBuf>, max_file_size: u64, client: Client, progress: bool) {
        self.wanted.send_replace(Wanted {
            roots,
            max_file_size,
            client: Some(client),
            progress,
        });
    }

    /// Drops every index held, so the next [`Indexes::want`] opens and refreshes each root
    /// again: a rebuild that re-reads the workspace (files changed outside the editor
    /// included) while unchanged files keep their entries.
    pub fn forget(&self) {
        self.indexes
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }

    /// Opens (or creates) and refreshes the index of each wanted root not indexed yet.
    async fn build(self: &Arc<Self>, wanted: Wanted) {
        let Wanted {
            roots,
            max_file_size,
            client: Some(client),
            progress,
        } = wanted
        else {
            return;
        };
        self.indexes
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|index| roots.iter().any(|root| root == index.root()));
        for root in roots {
            if self.index_of_root(&root).is_some() {
                continue;
            }
            let reporter = Reporter::begin(&client, progress, &root).await;
            let (sender, mut receiver) = mpsc::unbounded_channel::<index::Progress>();
            let options = index::Options {
                cache_dir: self.cache_dir.clone(),
                walk: WalkOptions {
                    max_file_size,
                    ..WalkOptions::default()
                },
            };
            let job_root = root.clone();
            let job = tokio::task::spawn_blocking(move || {
                // Another process (`wright index` in a terminal) may hold the writer for a
                // while; wait for it rather than serve an index that cannot follow the buffers.
                let mut index = Index::open(&job_root, options.clone())?;
                for _ in 0..WRITER_RETRIES {
                    if !index.read_only() {
                        break;
                    }
                    drop(index);
                    std::thread::sleep(WRITER_RETRY_DELAY);
                    index = Index::open(&job_root, options.clone())?;
                }
                // Phase 1 only: symbols are served as soon as it has committed.
                let report = index.refresh_lexical(&|p| {
                    let _ = sender.send(p);
                })?;
                Ok::<_, index::IndexError>((index, report))
            });
            while let Some(p) = receiver.recv().await {
                reporter.report(p).await;
            }
            match job.await {
                Ok(Ok((index, report))) => {
                    tracing::info!(
                        "{}: {} files, {} symbols searchable in {:.1} s{}; {} files to refine",
                        root.display(),
                        report.files,
                        report.definitions,
                        report.searchable_seconds,
                        if report.incremental {
                            " (incremental)"
                        } else {
                            ""
                        },
                        report.lexical_files
                    );
                    if report.read_only {
                        client
                            .log_message(
                                lsp::MessageType::WARNING,
                                format!(
                                    "wright: another process holds the index of {}; symbols are served as it last wrote them and edits are not indexed until wright restarts",
                                    root.display()
                                ),
                            )
                            .await;
                    }
                    let index = Arc::new(index);
                    self.indexes
                        .write()
                        .unwrap_or_else(|e| e.into_inner())
                        .push(Arc::clone(&index));
                    // The refresh read the disk; open buffers may say otherwise.
                    let open: Vec<PathBuf> = self
                        .lock_buffers()
                        .snapshot()
                        .into_iter()
                        .filter_map(|(key, _)| match key {
                            DocumentKey::File(path) if convert::is_in(&root, &path) => Some(path),
                            _ => None,
                        })
                        .collect();
                    for path in open {
                        self.changed(path);
                    }
                    // Phase 2 in the background: the progress ends when it does.
                    tokio::spawn(refine(Arc::downgrade(self), index, report, reporter));
                }
                Ok(Err(err)) => {
                    reporter.end("indexing failed").await;
                    client
                        .log_message(
                            lsp::MessageType::ERROR,
                            format!("wright: indexing {} failed: {err}", root.display()),
                        )
                        .await;
                }
                Err(err) => {
                    tracing::error!("the indexing task of {} failed: {err}", root.display())
                }
            }
        }
    }

    /// Queues `path` for re-indexing: from its buffer when it is open, else from the disk
    /// (or out of the index, when it is gone).
    pub fn changed(&self, path: PathBuf) {
        let _ = self.updates.send(path);
    }

    fn lock_buffers(&self) -> std::sync::MutexGuard<'_, Buffers> {
        self.buffers.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn index_of_root(&self, root: &Path) -> Option<Arc<Index>> {
        self.indexes
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .find(|index| index.root() == root)
            .cloned()
    }

    /// The index whose root holds `path` (the deepest, for nested roots), and the path
    /// relative to it.
    fn index_for(&self, path: &Path) -> Option<(Arc<Index>, String)> {
        let indexes = self.indexes.read().unwrap_or_else(|e| e.into_inner());
        let index = indexes
            .iter()
            .filter(|index| convert::is_in(index.root(), path))
            .max_by_key(|index| index.root().as_os_str().len())?;
        Some((
            Arc::clone(index),
            workspace::relative_path(index.root(), path),
        ))
    }

    /// The index for a document (the root holding it), else the first root's.
    pub fn for_document(&self, path: Option<&Path>) -> Option<(Arc<Index>, Option<String>)> {
        if let Some((index, relative)) = path.and_then(|path| self.index_for(path)) {
            return Some((index, Some(relative)));
        }
        let indexes = self.indexes.read().unwrap_or_else(|e| e.into_inner());
        indexes.first().map(|index| (Arc::clone(index), None))
    }

    /// Definitions matching `query` across every root, best first, with their indexes.
    pub fn symbols(&self, query: &str, limit: usize) -> Vec<(Arc<Index>, SymbolHit)> {
        let indexes = self
            .indexes
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let mut hits: Vec<(Arc<Index>, SymbolHit)> = indexes
            .iter()
            .flat_map(|index| {
                index
                    .symbols(query, None, limit)
                    .into_iter()
                    .map(|hit| (Arc::clone(index), hit))
            })
            .collect();
        hits.sort_by(|a, b| b.1.score.total_cmp(&a.1.score));
        hits.truncate(limit);
        hits
    }

    /// Applies a batch of changes on a blocking thread, then commits the indexes touched.
    /// Each path goes through the walk's filters first (ignore rules, generated folders, the
    /// size limit, no link followed and none out of the workspace): a file the walk would not
    /// index is not indexed from an editor's event either, and leaves the index if it was in.
    fn apply(&self, batch: BTreeSet<PathBuf>) {
        let mut touched: Vec<Arc<Index>> = Vec::new();
        let mut filters: Vec<(Arc<Index>, Filter)> = Vec::new();
        for path in batch {
            let Some((index, relative)) = self.index_for(&path) else {
                tracing::debug!("{}: in no workspace folder, not indexed", path.display());
                continue;
            };
            let position = match filters.iter().position(|(i, _)| Arc::ptr_eq(i, &index)) {
                Some(position) => position,
                None => {
                    let filter = Filter::new(Arc::clone(index.tree()), index.walk_options());
                    filters.push((Arc::clone(&index), filter));
                    filters.len() - 1
                }
            };
            let filter = &filters[position].1;
            let text = match filter.check(Path::new(&relative)) {
                Ok(on_disk) => {
                    let buffer = self.lock_buffers().get(&DocumentKey::File(path.clone()));
                    match (buffer, on_disk) {
                        (Some(document), _) => {
                            let text = document.text().to_string();
                            if text.len() as u64 > filter.max_file_size() {
                                Err((
                                    format!(
                                        "{relative}: the buffer is {} bytes, over the size limit of {}",
                                        text.len(),
                                        filter.max_file_size()
                                    ),
                                    false,
                                ))
                            } else {
                                Ok(Some(text))
                            }
                        }
                        (None, None) => Ok(None),
                        (None, Some(_)) => match index
                            .tree()
                            .read(Path::new(&relative), filter.max_file_size())
                        {
                            Ok(bytes) => match workspace::decode(bytes) {
                                FileText::Text(text) | FileText::Lossy(text) => Ok(Some(text)),
                                FileText::Binary => Ok(None),
                            },
                            Err(err) if err.is_not_found() => Ok(None),
                            Err(err) => Err((err.to_string(), err.kind() == "outside")),
                        },
                    }
                }
                Err(excluded) => {
                    let outside = matches!(excluded, workspace::Excluded::Outside(_));
                    Err((excluded.to_string(), outside))
                }
            };
            match text {
                Ok(Some(text)) => index.update_text(&relative, &text),
                // Gone, or binary: out of the index.
                Ok(None) => index.remove(&relative),
                Err((why, outside)) => {
                    if index.has_file(&relative) {
                        tracing::info!("dropped from the index: {why}");
                        index.remove(&relative);
                    } else if outside {
                        // What an editor should never report: said where people look.
                        tracing::warn!("not indexed: {why}");
                        continue;
                    } else {
                        tracing::debug!("not indexed: {why}");
                        continue;
                    }
                }
            }
            if !touched.iter().any(|t| Arc::ptr_eq(t, &index)) {
                touched.push(index);
            }
        }
        for index in touched {
            if let Err(err) = index.commit() {
                tracing::error!("committing the index of {}: {err}", index.root().display());
            }
        }
    }
}

async fn apply_updates(
    indexes: std::sync::Weak<Indexes>,
    mut receiver: mpsc::UnboundedReceiver<PathBuf>,
) {
    while let Some(path) = receiver.recv().await {
        let mut batch = BTreeSet::from([path]);
        while let Ok(Some(path)) = tokio::time::timeout(DEBOUNCE, receiver.recv()).await {
            batch.insert(path);
        }
        let Some(indexes) = indexes.upgrade() else {
            return;
        };
        let _ = tokio::task::spawn_blocking(move || indexes.apply(batch)).await;
    }
}

/// Phase 2 of a root's indexing: replaces the lexical entries with the tree-sitter
/// extraction while symbols are already served, reporting "refining N/M files"; stops when
/// the index is no longer wanted (roots changed, rebuild).
async fn refine(
    indexes: std::sync::Weak<Indexes>,
    index: Arc<Index>,
    report: index::Report,
    reporter: Reporter,
) {
    let (sender, mut receiver) = mpsc::unbounded_channel::<index::Progress>();
    let job_index = Arc::clone(&index);
    let job = tokio::task::spawn_blocking(move || {
        let wanted = || {
            indexes.upgrade().is_some_and(|indexes| {
                indexes
                    .indexes
                    .read()
                    .unwrap_or_else(|e| e.into_inner())
                    .iter()
                    .any(|held| Arc::ptr_eq(held, &job_index))
            })
        };
        job_index.refine(
            &|p| {
                let _ = sender.send(p);
            },
            &|| !wanted(),
        )
    });
    while let Some(p) = receiver.recv().await {
        reporter.report(p).await;
    }
    let root = index.root().display().to_string();
    match job.await {
        Ok(Ok(refined)) => {
            let files = index.files();
            let definitions: usize = files.values().map(|r| r.definition_count as usize).sum();
            let summary = format!(
                "indexed {root}: {} files, {definitions} symbols in {:.1} s (searchable after {:.1} s){}{}",
                files.len(),
                report.seconds,
                report.searchable_seconds,
                if report.incremental {
                    " (incremental)"
                } else {
                    ""
                },
                if refined.remaining > 0 {
                    format!("; {} files not refined yet", refined.remaining)
                } else {
                    String::new()
                }
            );
            tracing::info!("{summary}");
            reporter.end(&summary).await;
        }
        Ok(Err(err)) => {
            tracing::error!("refining the index of {root} failed: {err}");
            reporter.end("refining the index failed").await;
        }
        Err(err) => tracing::error!("the refining task of {root} failed: {err}"),
    }
}

/// `$/progress` for one root's indexing, when the client supports work-done progress.
struct Reporter {
    progress: Option<
        tower_lsp_server::OngoingProgress<
            tower_lsp_server::Bounded,
            tower_lsp_server::NotCancellable,
        >,
    >,
}

impl Reporter {
    async fn begin(client: &Client, supported: bool, root: &Path) -> Self {
        if !supported {
            return Self { progress: None };
        }
        let token = lsp::ProgressToken::String(format!("wright/index/{}", root.display()));
        // The server creates the token: some clients (Helix) never send one.
        if client
            .create_work_done_progress(token.clone())
            .await
            .is_err()
        {
            return Self { progress: None };
        }
        let progress = client
            .progress(token, "Indexing")
            .with_message(root.display().to_string())
            .with_percentage(0)
            .begin()
            .await;
        Self {
            progress: Some(progress),
        }
    }

    async fn report(&self, progress: index::Progress) {
        if let Some(ongoing) = &self.progress {
            let percent = (progress.done * 100 / progress.total.max(1)) as u32;
            let message = match progress.phase {
                index::Phase::Lexical => format!("{}/{} files", progress.done, progress.total),
                index::Phase::Refining => {
                    format!("refining {}/{} files", progress.done, progress.total)
                }
            };
            ongoing.report_with_message(message, percent).await;
        }
    }

    async fn end(self, message: &str) {
        if let Some(ongoing) = self.progress {
            ongoing.finish_with_message(message.to_owned()).await;
        }
    }
}
