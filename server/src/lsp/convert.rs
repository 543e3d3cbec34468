//! Conversions between LSP types and the byte-offset, path-based types below `lsp/`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use tower_lsp_server::ls_types as lsp;

use crate::buffers::{DocumentKey, Position, PositionEncoding, TextChange};

/// The key of a document: its file's path (as [`file_path`] reads it), else its URI.
pub fn document_key(uri: &lsp::Uri) -> DocumentKey {
    match file_path(uri) {
        Some(path) => DocumentKey::File(path),
        None => DocumentKey::Other(uri.as_str().to_owned()),
    }
}

/// The URI a client would use for a document key.
pub fn document_uri(key: &DocumentKey) -> String {
    match key {
        DocumentKey::File(path) => lsp::Uri::from_file_path(path)
            .map(|uri| uri.as_str().to_owned())
            .unwrap_or_else(|| path.display().to_string()),
        DocumentKey::Other(uri) => uri.clone(),
    }
}

/// The `file:` URI of a path.
pub fn path_uri(path: &std::path::Path) -> Option<lsp::Uri> {
    lsp::Uri::from_file_path(path)
}

/// The path of a `file:` URI, percent-decoded and then normalised lexically (`.` dropped,
/// `..` applied), so that `file:///ws/../../elsewhere/x` and its `%2E%2E` spelling name the
/// file they lead to and are judged by that; `None` for other schemes, which name no
/// workspace root, and for a path that is not absolute.
pub fn file_path(uri: &lsp::Uri) -> Option<PathBuf> {
    let is_file = uri
        .as_str()
        .get(..5)
        .is_some_and(|scheme| scheme.eq_ignore_ascii_case("file:"));
    if !is_file {
        return None;
    }
    let decoded = uri.to_file_path()?;
    if !decoded.is_absolute() {
        return None;
    }
    let normal = crate::files::normalize(&decoded);
    if normal.as_path() != decoded.as_ref() {
        tracing::debug!("{} names {}", uri.as_str(), normal.display());
    }
    Some(normal)
}

/// The root of `roots` that holds `path` (the deepest, for nested roots), compared after the
/// lexical normalisation [`file_path`] did: a path with `..` left in it is in no root.
pub fn root_holding<'a>(roots: &'a [PathBuf], path: &Path) -> Option<&'a PathBuf> {
    roots
        .iter()
        .filter(|root| is_in(root, path))
        .max_by_key(|root| root.as_os_str().len())
}

/// Whether `path` lies in `root`, lexically (see [`root_holding`]).
pub fn is_in(root: &Path, path: &Path) -> bool {
    !path
        .components()
        .any(|c| c == std::path::Component::ParentDir)
        && path.starts_with(root)
}

pub fn position(position: lsp::Position) -> Position {
    Position::new(position.line, position.character)
}

pub fn text_changes(changes: Vec<lsp::TextDocumentContentChangeEvent>) -> Vec<TextChange> {
    changes
        .into_iter()
        .map(|change| TextChange {
            range: change
                .range
                .map(|range| (position(range.start), position(range.end))),
            text: change.text,
        })
        .collect()
}

/// The encoding to use, from the client's `general.positionEncodings`.
pub fn negotiate_encoding(capabilities: &lsp::ClientCapabilities) -> PositionEncoding {
    let offered = capabilities
        .general
        .as_ref()
        .and_then(|general| general.position_encodings.as_deref())
        .unwrap_or_default();
    PositionEncoding::negotiate(offered.iter().map(|kind| kind.as_str()))
}

/// The identifier around byte `offset` of `text`, if the cursor is on one.
pub fn identifier_at(text: &str, offset: usize) -> Option<String> {
    let is_word = |c: char| c.is_alphanumeric() || c == '_' || c == '$';
    let offset = offset.min(text.len());
    let start = text[..offset]
        .char_indices()
        .rev()
        .take_while(|(_, c)| is_word(*c))
        .last()
        .map_or(offset, |(i, _)| i);
    let end = text[offset..]
        .char_indices()
        .find(|(_, c)| !is_word(*c))
        .map_or(text.len(), |(i, _)| offset + i);
    (start < end).then(|| text[start..end].to_owned())
}

/// The open buffers at one moment, as the workspace view reads them.
pub struct BufferOverlay(HashMap<PathBuf, ropey::Rope>);

impl BufferOverlay {
    pub fn snapshot(buffers: &crate::buffers::Buffers) -> Self {
        Self(
            buffers
                .snapshot()
                .into_iter()
                .filter_map(|(key, document)| match key {
                    DocumentKey::File(path) => Some((path, document.text().clone())),
                    DocumentKey::Other(_) => None,
                })
                .collect(),
        )
    }

    /// The open files under `root`, relative to it, sorted.
    pub fn relative_paths(&self, root: &std::path::Path) -> Vec<String> {
        let mut paths: Vec<String> = self
            .0
            .keys()
            .filter(|path| is_in(root, path))
            .map(|path| crate::workspace::relative_path(root, path))
            .collect();
        paths.sort();
        paths
    }
}

impl crate::workspace::Overlay for BufferOverlay {
    fn buffer_text(&self, path: &std::path::Path) -> Option<String> {
        self.0.get(path).map(ToString::to_string)
    }
}

/// The column, in `encoding`'s units, of the character at index `chars` of `line` (clamped
/// to the line's end).
pub fn char_column(line: &str, chars: u32, encoding: PositionEncoding) -> u32 {
    let prefix = line.chars().take(chars as usize);
    let units: usize = match encoding {
        PositionEncoding::Utf8 => prefix.map(char::len_utf8).sum(),
        PositionEncoding::Utf16 => prefix.map(char::len_utf16).sum(),
        PositionEncoding::Utf32 => prefix.count(),
    };
    units as u32
}

/// The LSP kind of an index kind (the tags queries' names).
pub fn symbol_kind(kind: &str) -> lsp::SymbolKind {
    match kind {
        "function" | "macro" => lsp::SymbolKind::FUNCTION,
        "method" => lsp::SymbolKind::METHOD,
        "class" => lsp::SymbolKind::CLASS,
        "interface" => lsp::SymbolKind::INTERFACE,
        "module" => lsp::SymbolKind::MODULE,
        "constant" => lsp::SymbolKind::CONSTANT,
        "type" => lsp::SymbolKind::STRUCT,
        "field" => lsp::SymbolKind::FIELD,
        _ => lsp::SymbolKind::VARIABLE,
    }
}

pub fn encoding_kind(encoding: PositionEncoding) -> lsp::PositionEncodingKind {
    match encoding {
        PositionEncoding::Utf8 => lsp::PositionEncodingKind::UTF8,
        PositionEncoding::Utf16 => lsp::PositionEncodingKind::UTF16,
        PositionEncoding::Utf32 => lsp::PositionEncodingKind::UTF32,
    }
}

#[cfg(test)]
mod tests {
    //! Random edit sequences, sent as LSP change events through the same conversion the
    //! `didChange` handler uses, must leave the buffer equal to a naive string model, in every
    //! encoding, including positions out of range and inside surrogate pairs and CRLFs.

    use proptest::prelude::*;
    use wright_tests::text_model::{self, Encoding, LineRange};

    use super::*;
    use crate::buffers::{Buffers, Document, DocumentKey};

    /// Pieces chosen to hit every rule: multi-byte, astral (surrogate pairs), all three
    /// terminators, and a lone `\r` that an insertion may join with a `\n`.
    const PIECES: &[&str] = &[
        "a",
        "xyz",
        "é",
        "日本",
        "😀",
        "👩‍💻",
        "\n",
        "\r\n",
        "\r",
        " ",
        "\t",
    ];

    fn text() -> impl Strategy<Value = String> {
        prop::collection::vec(prop::sample::select(PIECES), 0..12).prop_map(|p| p.concat())
    }

    fn position() -> impl Strategy<Value = (u32, u32)> {
        (0u32..8, 0u32..14)
    }

    fn change() -> impl Strategy<Value = (Option<LineRange>, String)> {
        (
            prop::option::weighted(0.9, (position(), position())),
            text(),
        )
    }

    fn encoding_of(encoding: Encoding) -> PositionEncoding {
        match encoding {
            Encoding::Utf8 => PositionEncoding::Utf8,
            Encoding::Utf16 => PositionEncoding::Utf16,
            Encoding::Utf32 => PositionEncoding::Utf32,
        }
    }

    fn event(range: Option<LineRange>, text: &str) -> lsp::TextDocumentContentChangeEvent {
        lsp::TextDocumentContentChangeEvent {
            range: range.map(|((sl, sc), (el, ec))| lsp::Range {
                start: lsp::Position::new(sl, sc),
                end: lsp::Position::new(el, ec),
            }),
            range_length: None,
            text: text.to_owned(),
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(600))]

        #[test]
        fn random_edits_match_the_naive_model(
            initial in text(),
            batches in prop::collection::vec(prop::collection::vec(change(), 1..4), 1..8),
            encoding in prop::sample::select(&Encoding::ALL[..]),
        ) {
            let key = DocumentKey::Other("untitled:prop".into());
            let mut buffers = Buffers::new(encoding_of(encoding));
            buffers.open(key.clone(), Document::new(&initial, 0, "plaintext"));
            let mut model = initial.clone();
            for (version, batch) in (1..).zip(&batches) {
                // One didChange: all its changes apply, or none do.
                let mut expected = Ok(model.clone());
                for (range, text) in batch {
                    expected = expected.and_then(|t| text_model::apply(&t, *range, text, encoding));
                }
                let events = batch.iter().map(|(range, text)| event(*range, text)).collect();
                let result = buffers.change(&key, version, &text_changes(events));
                match expected {
                    Ok(text) => {
                        prop_assert!(result.is_ok(), "{result:?}");
                        model = text;
                    }
                    Err(_) => prop_assert!(result.is_err(), "the model refused, the server did not"),
                }
                let actual = buffers.get(&key).unwrap().text().to_string();
                prop_assert_eq!(&actual, &model, "after {} in {:?}", version, encoding);
            }
        }
    }
}

#[cfg(test)]
mod identifier_tests {
    use super::identifier_at;

    #[test]
    fn the_identifier_under_the_cursor() {
        let text = "let total = parse_http(x);";
        assert_eq!(identifier_at(text, 14).as_deref(), Some("parse_http"));
        assert_eq!(identifier_at(text, 12).as_deref(), Some("parse_http"));
        assert_eq!(identifier_at(text, 22).as_deref(), Some("parse_http"));
        assert_eq!(identifier_at(text, 3).as_deref(), Some("let"));
        assert_eq!(identifier_at(text, 25), None);
        assert_eq!(identifier_at("日本 語", 7).as_deref(), Some("語"));
    }
}

#[cfg(test)]
mod uri_tests {
    use super::*;

    fn path(uri: &str) -> Option<PathBuf> {
        file_path(&uri.parse::<lsp::Uri>().unwrap())
    }

    #[test]
    fn file_uris_are_decoded_then_normalised_before_they_are_compared_with_the_roots() {
        let roots = [PathBuf::from("/ws"), PathBuf::from("/ws/nested")];
        for (uri, expected) in [
            ("file:///ws/src/a.rs", "/ws/src/a.rs"),
            (
                "file:///ws/../../elsewhere/secret.py",
                "/elsewhere/secret.py",
            ),
            (
                "file:///ws/%2E%2E/elsewhere/secret.py",
                "/elsewhere/secret.py",
            ),
            ("file:///ws/src/%2e%2e/%2E%2E/etc/passwd", "/etc/passwd"),
            ("file:///ws/src/..%2F..%2Fetc/passwd", "/etc/passwd"),
            ("file:///ws/./src/../a.rs", "/ws/a.rs"),
            ("FILE:///ws/nested/b.rs", "/ws/nested/b.rs"),
        ] {
            assert_eq!(path(uri), Some(PathBuf::from(expected)), "{uri}");
        }
        let holder = |uri: &str| root_holding(&roots, &path(uri).unwrap()).cloned();
        assert_eq!(holder("file:///ws/src/a.rs"), Some(PathBuf::from("/ws")));
        assert_eq!(
            holder("file:///ws/nested/b.rs"),
            Some(PathBuf::from("/ws/nested"))
        );
        assert_eq!(holder("file:///ws/../../elsewhere/secret.py"), None);
        assert_eq!(holder("file:///ws/%2E%2E/ws-other/x.py"), None);
        // A path that still climbs is in no root, lexically.
        assert!(!is_in(Path::new("/ws"), Path::new("/ws/../x")));
        // Other schemes name no file.
        assert_eq!(path("untitled:Untitled-1"), None);
        assert_eq!(
            document_key(&"file:///ws/%2E%2E/x".parse().unwrap()),
            DocumentKey::File(PathBuf::from("/x"))
        );
    }
}
