//! Files updated since the last durable commit, searchable at once: a small tantivy index in
//! memory holds their current documents and is searched beside the one on disk, whose
//! documents for those files are excluded. A durable commit (segment files written and synced)
//! costs tens of milliseconds; committing this one costs about one.
//!
//! Invariant: a path is in [`Recent::paths`] exactly while its documents in the disk index may
//! be outdated (updated or removed since the last durable commit); the disk index's hits for
//! it are then dropped and this index's (none, for a removed file) stand instead.

use std::collections::BTreeSet;

use tantivy::schema::TantivyDocument;
use tantivy::{Index, IndexReader, IndexWriter, ReloadPolicy, Searcher, TantivyError};

use super::schema::{self, Fields};

pub(super) struct Recent {
    writer: IndexWriter,
    reader: IndexReader,
    fields: Fields,
    paths: BTreeSet<String>,
}

/// tantivy's smallest indexing budget for one thread.
const WRITER_MEMORY: usize = 15_000_000;

impl Recent {
    pub(super) fn new(fields: &Fields) -> Result<Self, TantivyError> {
        let index = Index::create_in_ram(schema::schema().0);
        super::store::register_tokenizer(&index);
        let writer = index.writer_with_num_threads(1, WRITER_MEMORY)?;
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()?;
        Ok(Self {
            writer,
            reader,
            fields: *fields,
            paths: BTreeSet::new(),
        })
    }

    /// Makes `documents` the file's whole content here (none: the file is gone), searchable
    /// when this returns.
    pub(super) fn replace(
        &mut self,
        relative: &str,
        documents: Vec<TantivyDocument>,
    ) -> Result<(), TantivyError> {
        self.paths.insert(relative.to_owned());
        self.fields.delete_file(&self.writer, relative);
        for document in documents {
            self.writer.add_document(document)?;
        }
        self.writer.commit()?;
        self.reader.reload()
    }

    /// Forgets every file: the disk index holds them all now.
    pub(super) fn clear(&mut self) -> Result<(), TantivyError> {
        if self.paths.is_empty() {
            return Ok(());
        }
        self.paths.clear();
        self.writer.delete_all_documents()?;
        self.writer.commit()?;
        self.reader.reload()
    }

    /// The files whose disk documents are outdated.
    pub(super) fn paths(&self) -> &BTreeSet<String> {
        &self.paths
    }

    pub(super) fn searcher(&self) -> Searcher {
        self.reader.searcher()
    }
}
