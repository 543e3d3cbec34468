//! Open documents: their ropes, versions and languages, and position-encoding conversion.
//!
//! Invariants: no IO and no async here. A document's text changes only through
//! [`Buffers::change`], whose changes apply all-or-nothing; the encoding is fixed once, at
//! `initialize`, before any document can be opened. While someone follows a document
//! ([`Buffers::follow`]), every text it goes through is kept — one per content change, not
//! only one per `didChange` — so that whoever sent the editor an edit can tell from what
//! follows whether it landed on the text it was computed against.

mod document;
mod position;

use std::collections::HashMap;
use std::fmt;
use std::path::PathBuf;

use ropey::Rope;

pub use document::{ChangeError, Document, TextChange, apply_changes};
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
    trails: HashMap<DocumentKey, Trail>,
}

/// The texts a followed document went through since its first follower arrived.
#[derive(Debug, Default)]
struct Trail {
    followers: usize,
    /// After each content change: the `didChange`'s version and the text.
    texts: Vec<(i32, Rope)>,
    /// The document was closed or opened again: what follows is not a continuation.
    broken: bool,
}

/// One follower of a document: where it started in the document's trail. Hand it back to
/// [`Buffers::unfollow`].
#[derive(Debug)]
pub struct Following {
    key: DocumentKey,
    from: usize,
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
            trails: HashMap::new(),
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
        if let Some(trail) = self.trails.get_mut(&key) {
            trail.broken = true;
        }
        self.documents.insert(key, document).is_some()
    }

    /// Starts keeping every text the open document `key` goes through; the document as it is
    /// now (the start of what [`Buffers::followed`] returns). `None` when it is not open.
    pub fn follow(&mut self, key: &DocumentKey) -> Option<(Following, Document)> {
        let document = self.documents.get(key)?.clone();
        let trail = self.trails.entry(key.clone()).or_default();
        trail.followers += 1;
        let following = Following {
            key: key.clone(),
            from: trail.texts.len(),
        };
        Some((following, document))
    }

    /// The texts the document went through since `following` started, one per content change
    /// with the version of its `didChange`; `None` when it was closed or opened again since.
    pub fn followed(&self, following: &Following) -> Option<Vec<(i32, Rope)>> {
        let trail = self.trails.get(&following.key)?;
        (!trail.broken).then(|| trail.texts[following.from..].to_vec())
    }

    /// Stops one follower; the trail goes when its last follower does.
    pub fn unfollow(&mut self, following: Following) {
        if let Some(trail) = self.trails.get_mut(&following.key) {
            trail.followers -= 1;
            if trail.followers == 0 {
                self.trails.remove(&following.key);
            }
        }
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
        let trail = self.trails.get_mut(key).filter(|trail| !trail.broken);
        let recording = trail.is_some();
        let mut texts = Vec::new();
        let record = |text: &Rope| {
            if recording {
                texts.push((version, text.clone()));
            }
        };
        document
            .apply_each(changes, version, encoding, record)
            .map_err(|source| BufferError::Change {
                key: key.clone(),
                version,
                source,
            })?;
        if let Some(trail) = trail {
            trail.texts.extend(texts);
        }
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
        if let Some(trail) = self.trails.get_mut(key) {
            trail.broken = true;
        }
        self.documents
            .remove(key)
            .ok_or_else(|| BufferError::NotOpen(key.clone()))
    }

    /// A snapshot of one document (cheap: the rope is shared, not copied).
    pub fn get(&self, key: &DocumentKey) -> Option<Document> {
        self.documents.get(key).cloned()
    }

    /// The text of document `key` between two positions (in the negotiated encoding);
    /// `None` when it is not open or the range is empty.
    pub fn text_in(&self, key: &DocumentKey, start: Position, end: Position) -> Option<String> {
        let document = self.documents.get(key)?;
        let offset = |p| position_to_offset(document.text(), p, self.encoding());
        let (start, end) = (offset(start), offset(end));
        (start < end).then(|| document.text().byte_slice(start..end).to_string())
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
    fn a_follower_sees_every_text_after_each_content_change_until_the_document_reopens() {
        let mut buffers = Buffers::new(PositionEncoding::Utf8);
        let key = DocumentKey::File("/w/a.txt".into());
        buffers.open(key.clone(), Document::new("ab", 1, "plaintext"));
        let insert = |at: u32, text: &str| TextChange {
            range: Some((Position::new(0, at), Position::new(0, at))),
            text: text.into(),
        };
        buffers.change(&key, 2, &[insert(0, "x")]).unwrap();
        let (following, start) = buffers.follow(&key).unwrap();
        assert_eq!(
            (start.version(), start.text().to_string()),
            (2, "xab".into())
        );
        let (late, _) = buffers.follow(&key).unwrap();
        buffers
            .change(&key, 3, &[insert(3, "y"), insert(0, "z")])
            .unwrap();
        let texts = |f: &Following, buffers: &Buffers| -> Vec<(i32, String)> {
            let followed = buffers.followed(f).unwrap();
            followed.iter().map(|(v, t)| (*v, t.to_string())).collect()
        };
        assert_eq!(
            texts(&following, &buffers),
            [(3, "xaby".to_owned()), (3, "zxaby".to_owned())]
        );
        buffers.unfollow(late);
        assert!(
            buffers
                .change(
                    &key,
                    4,
                    &[TextChange {
                        range: None,
                        text: "q".into()
                    }]
                )
                .is_ok()
        );
        assert_eq!(
            texts(&following, &buffers).last().unwrap(),
            &(4, "q".to_owned())
        );
        buffers.open(key.clone(), Document::new("new", 1, "plaintext"));
        assert!(
            buffers.followed(&following).is_none(),
            "reopened: no continuation"
        );
        buffers.unfollow(following);
        assert!(buffers.trails.is_empty(), "nobody follows: nothing kept");
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
