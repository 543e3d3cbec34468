//! A deliberately naive model of LSP text synchronisation, written from the specification and
//! sharing no code with the server: a `String`, a scan for line terminators, and a walk over
//! characters. Tests apply the same edits to it and to the server and compare.

/// How `character` is counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    Utf8,
    Utf16,
    Utf32,
}

impl Encoding {
    pub const ALL: [Self; 3] = [Self::Utf8, Self::Utf16, Self::Utf32];

    pub fn name(self) -> &'static str {
        match self {
            Self::Utf8 => "utf-8",
            Self::Utf16 => "utf-16",
            Self::Utf32 => "utf-32",
        }
    }

    fn units(self, ch: char) -> usize {
        match self {
            Self::Utf8 => ch.len_utf8(),
            Self::Utf16 => ch.len_utf16(),
            Self::Utf32 => 1,
        }
    }
}

/// A range as `((start line, start character), (end line, end character))`.
pub type LineRange = ((u32, u32), (u32, u32));

/// Each line's content as a byte range, terminators (`\r\n`, `\n`, `\r`) excluded.
fn lines(text: &str) -> Vec<(usize, usize)> {
    let bytes = text.as_bytes();
    let mut lines = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\r' if bytes.get(i + 1) == Some(&b'\n') => {
                lines.push((start, i));
                i += 2;
                start = i;
            }
            b'\r' | b'\n' => {
                lines.push((start, i));
                i += 1;
                start = i;
            }
            _ => i += 1,
        }
    }
    lines.push((start, bytes.len()));
    lines
}

/// The byte offset of `(line, character)`: past the end of a line means its end, past the last
/// line means the end of the text, inside a character means its start.
pub fn offset(text: &str, line: u32, character: u32, encoding: Encoding) -> usize {
    let lines = lines(text);
    let Some(&(start, end)) = lines.get(line as usize) else {
        return text.len();
    };
    let mut units = 0;
    for (at, ch) in text[start..end].char_indices() {
        let next = units + encoding.units(ch);
        if next > character as usize {
            return start + at;
        }
        units = next;
    }
    end
}

/// `(line, character)` of a byte offset that is a character boundary outside a `\r\n`.
pub fn position(text: &str, offset: usize, encoding: Encoding) -> (u32, u32) {
    for (line, (start, end)) in lines(text).into_iter().enumerate() {
        if offset <= end {
            let character: usize = text[start..offset].chars().map(|c| encoding.units(c)).sum();
            return (line as u32, character as u32);
        }
    }
    unreachable!("offset {offset} past the end")
}

/// Applies one change. `Err` when the range's start lies after its end.
pub fn apply(
    text: &str,
    range: Option<LineRange>,
    new_text: &str,
    encoding: Encoding,
) -> Result<String, String> {
    let Some(((start_line, start_char), (end_line, end_char))) = range else {
        return Ok(new_text.to_owned());
    };
    let start = offset(text, start_line, start_char, encoding);
    let end = offset(text, end_line, end_char, encoding);
    if start > end {
        return Err(format!("start {start} after end {end}"));
    }
    Ok(format!("{}{new_text}{}", &text[..start], &text[end..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_follows_the_specification_on_the_classic_cases() {
        assert_eq!(offset("a😀b", 0, 3, Encoding::Utf16), 5);
        assert_eq!(offset("a😀b", 0, 2, Encoding::Utf16), 1);
        assert_eq!(offset("ab\r\ncd", 0, 9, Encoding::Utf8), 2);
        assert_eq!(offset("ab\r\ncd", 1, 1, Encoding::Utf32), 5);
        assert_eq!(offset("ab\rcd", 5, 0, Encoding::Utf32), 5);
        assert_eq!(position("日本\r\n語x", 11, Encoding::Utf16), (1, 1));
        assert_eq!(
            apply("hello", Some(((0, 1), (0, 4))), "ipp", Encoding::Utf8).unwrap(),
            "hippo"
        );
        assert!(apply("hello", Some(((0, 4), (0, 1))), "", Encoding::Utf8).is_err());
    }
}
