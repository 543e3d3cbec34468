//! Converting between byte offsets and `(line, character)` positions in the three LSP encodings.
//!
//! Everything below `lsp/` speaks byte offsets; editors speak positions whose `character` counts
//! UTF-8 bytes, UTF-16 code units or code points, whichever was negotiated at `initialize`. This
//! is the one place that converts, so the rules of the LSP specification live here:
//!
//! - a line ends at `\n`, `\r\n` or `\r` (ropey's `cr_lines`), and the terminator is not part of
//!   the line's length;
//! - a `character` past the end of its line means the end of the line;
//! - a `line` past the last line means the end of the document;
//! - a position inside a character (a UTF-16 surrogate pair, a UTF-8 continuation byte) means
//!   the start of that character, so a conversion never splits one.

use std::fmt;

use ropey::{Rope, RopeSlice};

/// How the `character` of a position is counted, as negotiated with the client.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PositionEncoding {
    /// Bytes of UTF-8. The cheapest for us: ropey stores UTF-8.
    Utf8,
    /// Code units of UTF-16: the LSP default, and all that many clients support.
    Utf16,
    /// Unicode code points.
    Utf32,
}

impl PositionEncoding {
    /// The name used in the protocol (`"utf-8"`, `"utf-16"`, `"utf-32"`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Utf8 => "utf-8",
            Self::Utf16 => "utf-16",
            Self::Utf32 => "utf-32",
        }
    }

    /// Parses a protocol name; `None` for one we do not know.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "utf-8" => Some(Self::Utf8),
            "utf-16" => Some(Self::Utf16),
            "utf-32" => Some(Self::Utf32),
            _ => None,
        }
    }

    /// The encoding to use given what the client offers, in its order of preference.
    ///
    /// UTF-8 whenever offered (no conversion at all), else UTF-32 (cheap), else the mandatory
    /// UTF-16. A client that offers nothing gets UTF-16, as the specification says.
    pub fn negotiate<'a>(offered: impl IntoIterator<Item = &'a str>) -> Self {
        let offered: Vec<Self> = offered.into_iter().filter_map(Self::from_name).collect();
        [Self::Utf8, Self::Utf32]
            .into_iter()
            .find(|preferred| offered.contains(preferred))
            .unwrap_or(Self::Utf16)
    }
}

impl fmt::Display for PositionEncoding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A zero-based line and a character offset within it, counted in some [`PositionEncoding`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Position {
    pub line: u32,
    pub character: u32,
}

impl Position {
    pub const fn new(line: u32, character: u32) -> Self {
        Self { line, character }
    }
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.character)
    }
}

/// The char indices where `line`'s content starts and ends (its terminator excluded).
fn line_content(text: &Rope, line: usize) -> (usize, usize) {
    let start = text.line_to_char(line);
    (start, start + content_len(text.line(line)))
}

/// The length in chars of a line without its `\n`, `\r\n` or `\r`.
fn content_len(line: RopeSlice<'_>) -> usize {
    let mut len = line.len_chars();
    if len > 0 && line.char(len - 1) == '\n' {
        len -= 1;
    }
    if len > 0 && line.char(len - 1) == '\r' {
        len -= 1;
    }
    len
}

/// The byte offset of `position`, clamped into the document as the specification says.
pub fn position_to_offset(text: &Rope, position: Position, encoding: PositionEncoding) -> usize {
    let line = position.line as usize;
    if line >= text.len_lines() {
        return text.len_bytes();
    }
    let (start, end) = line_content(text, line);
    let character = position.character as usize;
    let char_idx = match encoding {
        PositionEncoding::Utf32 => start + character.min(end - start),
        // `byte_to_char` and `utf16_cu_to_char` round down into the character that contains
        // the unit, which is the "never split a character" rule.
        PositionEncoding::Utf8 => {
            let (start_byte, end_byte) = (text.char_to_byte(start), text.char_to_byte(end));
            text.byte_to_char(start_byte + character.min(end_byte - start_byte))
        }
        PositionEncoding::Utf16 => {
            let (start_cu, end_cu) = (text.char_to_utf16_cu(start), text.char_to_utf16_cu(end));
            text.utf16_cu_to_char(start_cu + character.min(end_cu - start_cu))
        }
    };
    text.char_to_byte(char_idx)
}

/// The position of byte `offset`, clamped to the document and rounded down to a character
/// boundary; an offset inside a line terminator maps to the end of that line's content.
pub fn offset_to_position(text: &Rope, offset: usize, encoding: PositionEncoding) -> Position {
    let char_idx = text.byte_to_char(offset.min(text.len_bytes()));
    let line = text.char_to_line(char_idx);
    let (start, end) = line_content(text, line);
    let char_idx = char_idx.min(end);
    let character = match encoding {
        PositionEncoding::Utf32 => char_idx - start,
        PositionEncoding::Utf8 => text.char_to_byte(char_idx) - text.char_to_byte(start),
        PositionEncoding::Utf16 => text.char_to_utf16_cu(char_idx) - text.char_to_utf16_cu(start),
    };
    Position::new(to_u32(line), to_u32(character))
}

/// Positions are `u32` in the protocol; a document with more than 4 G lines is not a text file
/// any editor opens, so saturating is the honest clamp.
fn to_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::PositionEncoding::{Utf8, Utf16, Utf32};
    use super::*;

    fn offset(text: &str, line: u32, character: u32, encoding: PositionEncoding) -> usize {
        position_to_offset(
            &Rope::from_str(text),
            Position::new(line, character),
            encoding,
        )
    }

    #[test]
    fn negotiation_prefers_utf8_then_utf32_then_falls_back_to_utf16() {
        assert_eq!(PositionEncoding::negotiate(["utf-16", "utf-8"]), Utf8);
        assert_eq!(PositionEncoding::negotiate(["utf-16", "utf-32"]), Utf32);
        assert_eq!(PositionEncoding::negotiate(["utf-16"]), Utf16);
        assert_eq!(PositionEncoding::negotiate(["latin-1"]), Utf16);
        assert_eq!(PositionEncoding::negotiate([]), Utf16);
    }

    /// Each row: text, (line, character), encoding, expected byte offset.
    #[test]
    fn table_of_positions_to_offsets() {
        let rows: &[(&str, (u32, u32), PositionEncoding, usize)] = &[
            // "a😀b": 😀 is 4 bytes, 2 UTF-16 units, 1 code point.
            ("a😀b", (0, 1), Utf16, 1),
            ("a😀b", (0, 3), Utf16, 5),
            ("a😀b", (0, 2), Utf16, 1), // inside the surrogate pair: start of the emoji
            ("a😀b", (0, 2), Utf32, 5),
            ("a😀b", (0, 5), Utf8, 5),
            ("a😀b", (0, 3), Utf8, 1), // inside the UTF-8 sequence
            // CJK: 3 bytes, 1 UTF-16 unit each.
            ("日本語", (0, 2), Utf16, 6),
            ("日本語", (0, 6), Utf8, 6),
            ("日本語", (0, 2), Utf32, 6),
            // Past the end of a line: the end of its content, before the terminator.
            ("ab\r\ncd", (0, 99), Utf16, 2),
            ("ab\ncd", (0, 99), Utf8, 2),
            ("ab\rcd", (0, 99), Utf32, 2),
            ("ab\r\ncd", (1, 1), Utf16, 5),
            ("ab\rcd", (1, 0), Utf16, 3),
            // Past the last line: the end of the document.
            ("ab\ncd", (7, 0), Utf16, 5),
            ("ab\n", (1, 0), Utf16, 3),
            ("ab\n", (1, 5), Utf16, 3),
            ("", (0, 0), Utf8, 0),
            ("", (3, 3), Utf32, 0),
            // U+2028 and form feed are not line breaks in LSP.
            ("a\u{2028}b\nc", (1, 0), Utf16, 6),
            ("a\u{c}b\nc", (0, 3), Utf16, 3),
        ];
        for &(text, (line, character), encoding, expected) in rows {
            assert_eq!(
                offset(text, line, character, encoding),
                expected,
                "{text:?} at {line}:{character} in {encoding}"
            );
        }
    }

    #[test]
    fn table_of_offsets_to_positions() {
        let rows: &[(&str, usize, PositionEncoding, (u32, u32))] = &[
            ("a😀b", 5, Utf16, (0, 3)),
            ("a😀b", 5, Utf8, (0, 5)),
            ("a😀b", 5, Utf32, (0, 2)),
            ("a😀b", 3, Utf16, (0, 1)),     // inside the emoji: its start
            ("ab\r\ncd", 3, Utf16, (0, 2)), // between \r and \n: end of the line's content
            ("ab\r\ncd", 4, Utf16, (1, 0)),
            ("ab\rcd", 3, Utf8, (1, 0)),
            ("ab\n", 3, Utf16, (1, 0)),
            ("ab", 99, Utf16, (0, 2)),
            ("日本\n語x", 10, Utf16, (1, 1)),
        ];
        for &(text, offset, encoding, (line, character)) in rows {
            assert_eq!(
                offset_to_position(&Rope::from_str(text), offset, encoding),
                Position::new(line, character),
                "{text:?} at byte {offset} in {encoding}"
            );
        }
    }

    #[test]
    fn every_char_boundary_round_trips_in_every_encoding() {
        let text = "fn main() {\r\n    let s = \"😀 日本語\";\r\n}\rλ\n\n";
        let rope = Rope::from_str(text);
        for encoding in [Utf8, Utf16, Utf32] {
            for (offset, ch) in text.char_indices() {
                // An offset inside "\r\n" is not a position of its own.
                if ch == '\n' && text[..offset].ends_with('\r') {
                    continue;
                }
                let position = offset_to_position(&rope, offset, encoding);
                assert_eq!(
                    position_to_offset(&rope, position, encoding),
                    offset,
                    "{encoding} at byte {offset} ({position})"
                );
            }
        }
    }
}
