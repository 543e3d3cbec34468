//! Keeping the index current: a file re-indexed from the editor's text or removed, and the
//! commits that make those changes durable.

use super::*;

impl Index {
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
        self.fields.delete_file(writer, relative);
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
    pub(super) fn update_recent(&self, relative: &str, documents: Vec<TantivyDocument>) {
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

    pub(super) fn mark_stale(&self, relative: &str) {
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
    pub(super) fn commit_locked(
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
    pub(super) fn commit_tantivy(&self, writer: &mut IndexWriter) -> Result<(), IndexError> {
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

    pub(super) fn lock_writer(&self) -> std::sync::MutexGuard<'_, Option<IndexWriter>> {
        self.writer.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn read_manifest(&self) -> std::sync::RwLockReadGuard<'_, store::Manifest> {
        self.manifest.read().unwrap_or_else(|e| e.into_inner())
    }
}
