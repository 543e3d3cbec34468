//! Fuzz target: converting between byte offsets and LSP positions in every encoding.
//!
//! The text is built from the characters that make conversion hard (CRLF, lone CR, emoji
//! outside the BMP, CJK, combining marks, U+2028), positions are arbitrary. Converting never
//! panics, always lands on a character boundary inside the text, and round-trips: every
//! offset that is not inside a `\r\n` maps to a position that maps back to it, in all three
//! encodings, and a position maps to an offset that is a fixed point of the round trip.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ropey::Rope;
use wright::buffers::{Position, PositionEncoding, offset_to_position, position_to_offset};

const PIECES: [&str; 12] = [
    "a", "\n", "\r\n", "\r", "😀", "日", "é", "e\u{301}", "\u{2028}", "\t", " ", "𝔸",
];
const ENCODINGS: [PositionEncoding; 3] = [
    PositionEncoding::Utf8,
    PositionEncoding::Utf16,
    PositionEncoding::Utf32,
];

fuzz_target!(|data: &[u8]| {
    // Texts of a few hundred characters hold every case; longer ones only slow the search.
    let (text_bytes, positions) = data.split_at((data.len() / 2).min(256));
    let text: String = text_bytes
        .iter()
        .map(|&b| PIECES[usize::from(b) % PIECES.len()])
        .collect();
    let rope = Rope::from_str(&text);

    for offset in 0..=text.len() + 2 {
        let inside_crlf = offset > 0
            && text.as_bytes().get(offset - 1) == Some(&b'\r')
            && text.as_bytes().get(offset) == Some(&b'\n');
        for encoding in ENCODINGS {
            let position = offset_to_position(&rope, offset, encoding);
            let back = position_to_offset(&rope, position, encoding);
            assert!(back <= text.len() && text.is_char_boundary(back));
            if offset <= text.len() && text.is_char_boundary(offset) && !inside_crlf {
                assert_eq!(back, offset, "{encoding} {position} of {text:?}");
            }
        }
    }

    for pair in positions.chunks(2) {
        let line = u32::from(pair[0] % 16);
        let character = u32::from(*pair.get(1).unwrap_or(&0) % 32);
        for encoding in ENCODINGS {
            let offset = position_to_offset(&rope, Position::new(line, character), encoding);
            assert!(offset <= text.len() && text.is_char_boundary(offset));
            let again =
                position_to_offset(&rope, offset_to_position(&rope, offset, encoding), encoding);
            assert_eq!(again, offset, "{encoding} {line}:{character} of {text:?}");
        }
    }
});
