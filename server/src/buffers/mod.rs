//! Open documents: their ropes, versions and languages, and position-encoding conversion.
//!
//! Invariants: no IO and no async here. A document's text changes only through
//! [`Buffers::change`], whose changes apply all-or-nothing; the encoding is fixed once, at
//! `initialize`, before any document can be opened.

mod document;
mod position;

use std::collections::HashMap;
use std::fmt;
use std::path::PathBuf;

pub use document::{ChangeError, Document, TextChange};
pub use position::{Position, PositionEncoding, offset_to_position, position_to_offset};

/// What names an open document: a path for `file:` documents, the URI itself for the others
/// (untitled buffers, virtual documents), which have no place on disk.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DocumentKey {
    File(PathBuf),
    Other(String),
}

impl fmt::Display for DocumentKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::File(path) => write!(f, "{}", path.display()),
            Self::Other(uri) => f.write_str(uri),
        }
    }
}

/// Why a buffer operation failed. Nothing was changed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BufferError {
    #[error("{0} is not open: the editor must send didOpen before changing or closing it")]
    NotOpen(DocumentKey),
    #[error("{key} (version {version}): {source}; the server kept the text as it was")]
    Change {
        key: DocumentKey,
        version: i32,
        source: ChangeError,
    },
}

/// What a change did to the version sequence, for the caller to report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VersionOrder {
    /// The new version is above the previous one, as the specification requires.
    Increasing,
    /// The client sent a version at or below the one it sent before; the change was applied
    /// anyway, because the editor's text is the truth, but it deserves a warning.
    NotIncreasing { previous: i32 },
}

/// The set of open documents.
#[derive(Debug)]
pub struct Buffers {
    encoding: PositionEncoding,
    documents: HashMap<DocumentKey, Document>,
}

impl Default for Buffers {
    fn default() -> Self {
        Self::new(PositionEncoding::Utf16)
    }
}

impl Buffers {
    pub fn new(encoding: PositionEncoding) -> Self {
        Self {
            encoding,
            documents: HashMap::new(),
        }
    }

    pub fn encoding(&self) -> PositionEncoding {
        self.encoding
    }

    /// Fixes the encoding negotiated at `initialize`; documents opened before would be
    /// misread, so there must be none.
    pub fn set_encoding(&mut self, encoding: PositionEncoding) {
        debug_assert!(
            self.documents.is_empty(),
            "encoding changed with documents open"
        );
        self.encoding = encoding;
    }

    /// Opens (or re-opens, replacing) a document. Returns whether it was already open.
    pub fn open(&mut self, key: DocumentKey, document: Document) -> bool {
        self.documents.insert(key, document).is_some()
    }

    /// Applies one `didChange` to an open document.
    pub fn change(
        &mut self,
        key: &DocumentKey,
        version: i32,
        changes: &[TextChange],
    ) -> Result<VersionOrder, BufferError> {
        let encoding = self.encoding;
        let document = self
            .documents
            .get_mut(key)
            .ok_or_else(|| BufferError::NotOpen(key.clone()))?;
        let previous = document.version();
        document
            .apply(changes, version, encoding)
            .map_err(|source| BufferError::Change {
                key: key.clone(),
                version,
                source,
            })?;
        Ok(if version > previous {
            VersionOrder::Increasing
        } else {
            VersionOrder::NotIncreasing { previous }
        })
    }

    /// Records a `didSave`: the document's current version is now what is on disk.
    pub fn mark_saved(&mut self, key: &DocumentKey) -> Result<(), BufferError> {
        self.documents
            .get_mut(key)
            .ok_or_else(|| BufferError::NotOpen(key.clone()))
            .map(Document::mark_saved)
    }

    pub fn close(&mut self, key: &DocumentKey) -> Result<Document, BufferError> {
        self.documents
            .remove(key)
            .ok_or_else(|| BufferError::NotOpen(key.clone()))
    }

    /// A snapshot of one document (cheap: the rope is shared, not copied).
    pub fn get(&self, key: &DocumentKey) -> Option<Document> {
        self.documents.get(key).cloned()
    }

    pub fn len(&self) -> usize {
        self.documents.len()
    }

    pub fn is_empty(&self) -> bool {
        self.documents.is_empty()
    }

    /// Snapshots of every open document, sorted by key so reports are stable.
    pub fn snapshot(&self) -> Vec<(DocumentKey, Document)> {
        let mut documents: Vec<_> = self
            .documents
            .iter()
            .map(|(key, document)| (key.clone(), document.clone()))
            .collect();
        documents.sort_by(|a, b| a.0.cmp(&b.0));
        documents
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changing_an_unopened_document_is_an_error_that_names_it() {
        let mut buffers = Buffers::default();
        let key = DocumentKey::File("/w/a.rs".into());
        let err = buffers.change(&key, 2, &[]).unwrap_err();
        assert_eq!(err, BufferError::NotOpen(key.clone()));
        assert!(err.to_string().contains("/w/a.rs is not open"));
        assert!(buffers.close(&key).is_err());
    }

    #[test]
    fn a_version_that_does_not_increase_is_applied_and_reported() {
        let mut buffers = Buffers::new(PositionEncoding::Utf8);
        let key = DocumentKey::Other("untitled:1".into());
        buffers.open(key.clone(), Document::new("x", 5, "plaintext"));
        let change = TextChange {
            range: None,
            text: "y".into(),
        };
        let order = buffers
            .change(&key, 5, std::slice::from_ref(&change))
            .unwrap();
        assert_eq!(order, VersionOrder::NotIncreasing { previous: 5 });
        assert_eq!(buffers.get(&key).unwrap().text().to_string(), "y");
        assert_eq!(
            buffers.change(&key, 6, &[change]).unwrap(),
            VersionOrder::Increasing
        );
    }
}
