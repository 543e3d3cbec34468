//! Building the index: a refresh's lexical phase (every changed file scanned, searchable at
//! once) and its refinement (tree-sitter over each file, committed in batches), and the
//! documents a file's definitions and references become.

use std::collections::HashMap;

use super::*;

impl Index {
    /// What the index holds, as a report of a refresh that changed nothing (for a read-only
    /// index, all there is to say).
    pub(super) fn report_as_is(&self, started: Instant) -> Report {
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
            self.fields.delete_file(writer, path);
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
    pub(super) fn refine_file(&self, relative: &str, lexical_hash: u64) -> bool {
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

    /// Scans one file lexically and adds its documents (after deleting its old ones); its
    /// record is marked lexical, for [`Index::refine`], unless the scan is complete (Rust).
    /// A language without a lexical scanner has no documents until then.
    pub(super) fn index_lexical(
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
        let scanned =
            std::panic::catch_unwind(|| lexical::scan(language, text)).unwrap_or_else(|_| {
                tracing::error!(
                    path = relative,
                    "the lexical scan failed; tree-sitter will index the file"
                );
                None
            });
        // A complete scan is the file's final entry: the refinement passes it by.
        let complete = scanned.is_some() && lexical::is_complete(language);
        let extracted = scanned.unwrap_or_default();
        self.add(writer, relative, self.documents(relative, &extracted));
        FileRecord {
            lexical: !complete,
            ..FileRecord::new(text.len() as u64, mtime_ns, hash, &extracted)
        }
    }

    /// Replaces a file's documents in the writer (effective at the commit).
    pub(super) fn add(
        &self,
        writer: &IndexWriter,
        relative: &str,
        documents: Vec<TantivyDocument>,
    ) {
        self.fields.delete_file(writer, relative);
        for document in documents {
            // The writer only fails once it is already broken; the commit reports that.
            let _ = writer.add_document(document);
        }
    }

    /// The documents of one file: one per definition, and one per referenced name holding all
    /// of that name's sites (a file names the same callee many times: a document per site was
    /// most of the index's documents, and of the cost of writing them).
    pub(super) fn documents(&self, relative: &str, extracted: &Extracted) -> Vec<TantivyDocument> {
        let f = self.fields;
        let mut documents = Vec::with_capacity(extracted.definitions.len() + 16);
        for definition in &extracted.definitions {
            let mut doc = TantivyDocument::new();
            doc.add_text(f.name, &definition.name);
            doc.add_text(f.name_raw, &definition.name);
            doc.add_text(f.name_lower, definition.name.to_lowercase());
            doc.add_text(f.kind, &definition.kind);
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
        // In the order names are first referenced, each name's sites in the file's order.
        let mut by_name: HashMap<&str, usize> = HashMap::new();
        for reference in &extracted.references {
            let at = *by_name.entry(&reference.name).or_insert_with(|| {
                let mut doc = TantivyDocument::new();
                doc.add_text(f.ref_name, &reference.name);
                doc.add_text(f.ref_path, relative);
                documents.push(doc);
                documents.len() - 1
            });
            let doc = &mut documents[at];
            doc.add_u64(f.line, reference.line.into());
            doc.add_u64(f.column, reference.column.into());
            doc.add_text(f.ref_kind, &reference.kind);
        }
        documents
    }
}
