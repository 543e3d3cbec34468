//! One open document: its text as a rope, the version the editor gave it, and its language.

use ropey::Rope;

use super::position::{Position, PositionEncoding, position_to_offset};

/// An open document as the editor last described it.
///
/// Cloning is cheap (the rope shares its nodes), so a background task takes a clone as a
/// snapshot of `(text, version)` and never sees a later edit half-applied.
#[derive(Clone, Debug)]
pub struct Document {
    text: Rope,
    version: i32,
    language_id: String,
    saved_version: Option<i32>,
}

/// One content change of a `didChange`: a range in the negotiated encoding, or the whole text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TextChange {
    pub range: Option<(Position, Position)>,
    pub text: String,
}

/// Why a change could not be applied. The document is left exactly as it was.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ChangeError {
    #[error("change {index} has its start {start} after its end {end}")]
    InvertedRange {
        index: usize,
        start: Position,
        end: Position,
    },
}

impl Document {
    pub fn new(text: &str, version: i32, language_id: impl Into<String>) -> Self {
        Self {
            text: Rope::from_str(text),
            version,
            language_id: language_id.into(),
            saved_version: None,
        }
    }

    pub fn text(&self) -> &Rope {
        &self.text
    }

    pub fn version(&self) -> i32 {
        self.version
    }

    pub fn language_id(&self) -> &str {
        &self.language_id
    }

    /// The version the editor last saved, `None` if it has not saved since opening.
    pub fn saved_version(&self) -> Option<i32> {
        self.saved_version
    }

    pub fn mark_saved(&mut self) {
        self.saved_version = Some(self.version);
    }

    /// Applies the changes of one `didChange` in order, each against the text the previous one
    /// produced, and records `version`.
    ///
    /// All or nothing: the changes are applied to a copy that replaces the document only when
    /// every one of them succeeded, so a bad change never leaves half an edit behind.
    pub fn apply(
        &mut self,
        changes: &[TextChange],
        version: i32,
        encoding: PositionEncoding,
    ) -> Result<(), ChangeError> {
        self.apply_each(changes, version, encoding, |_| {})
    }

    /// [`Document::apply`], showing `each` the text after every one of the changes.
    pub(super) fn apply_each(
        &mut self,
        changes: &[TextChange],
        version: i32,
        encoding: PositionEncoding,
        each: impl FnMut(&Rope),
    ) -> Result<(), ChangeError> {
        self.text = apply_changes(&self.text, changes, encoding, each)?;
        self.version = version;
        Ok(())
    }
}

/// `text` with `changes` applied in order, each against the text the previous one produced;
/// `each` sees the text after every one of them. `text` itself is never changed.
pub fn apply_changes(
    text: &Rope,
    changes: &[TextChange],
    encoding: PositionEncoding,
    mut each: impl FnMut(&Rope),
) -> Result<Rope, ChangeError> {
    let mut text = text.clone();
    for (index, change) in changes.iter().enumerate() {
        match change.range {
            None => text = Rope::from_str(&change.text),
            Some((start, end)) => {
                let start_byte = position_to_offset(&text, start, encoding);
                let end_byte = position_to_offset(&text, end, encoding);
                if start_byte > end_byte {
                    return Err(ChangeError::InvertedRange { index, start, end });
                }
                let (start_char, end_char) =
                    (text.byte_to_char(start_byte), text.byte_to_char(end_byte));
                text.remove(start_char..end_char);
                text.insert(start_char, &change.text);
            }
        }
        each(&text);
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(start: (u32, u32), end: (u32, u32), text: &str) -> TextChange {
        TextChange {
            range: Some((Position::new(start.0, start.1), Position::new(end.0, end.1))),
            text: text.to_owned(),
        }
    }

    #[test]
    fn changes_apply_in_sequence_against_the_previous_result() {
        let mut doc = Document::new("hello world", 1, "plaintext");
        let changes = [
            change((0, 0), (0, 5), "goodbye"),
            change((0, 8), (0, 13), "😀"),
        ];
        doc.apply(&changes, 2, PositionEncoding::Utf16).unwrap();
        assert_eq!(doc.text().to_string(), "goodbye 😀");
        assert_eq!(doc.version(), 2);
    }

    #[test]
    fn a_full_replacement_resets_the_text() {
        let mut doc = Document::new("old", 1, "rust");
        let full = TextChange {
            range: None,
            text: "new\r\ntext".into(),
        };
        doc.apply(
            &[full, change((1, 0), (1, 4), "line")],
            5,
            PositionEncoding::Utf8,
        )
        .unwrap();
        assert_eq!(doc.text().to_string(), "new\r\nline");
    }

    #[test]
    fn an_inverted_range_changes_nothing_at_all() {
        let mut doc = Document::new("abc\ndef", 3, "plaintext");
        let changes = [change((0, 0), (0, 1), "X"), change((1, 2), (0, 1), "Y")];
        let err = doc.apply(&changes, 4, PositionEncoding::Utf16).unwrap_err();
        assert!(matches!(err, ChangeError::InvertedRange { index: 1, .. }));
        assert_eq!(doc.text().to_string(), "abc\ndef");
        assert_eq!(doc.version(), 3);
    }

    #[test]
    fn inserting_a_newline_after_a_carriage_return_joins_them_into_one_terminator() {
        let mut doc = Document::new("a\rb", 1, "plaintext");
        doc.apply(&[change((1, 0), (1, 0), "\n")], 2, PositionEncoding::Utf16)
            .unwrap();
        assert_eq!(doc.text().to_string(), "a\r\nb");
        assert_eq!(doc.text().len_lines(), 2);
    }
}
