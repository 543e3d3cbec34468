//! The text of one file as the locator sees it: a BOM set aside, lines split with their
//! terminators remembered, and the normalisations the matching ladder compares lines under.
//!
//! Everything here is byte-exact on the way back: a file's line endings, final newline (or lack
//! of it), indentation characters and BOM are recorded so that only the lines an edit replaces
//! change.

use std::ops::Range;

pub const BOM: &str = "\u{feff}";

/// A file's text split into lines. Line contents exclude their terminator (`\n` or `\r\n`).
#[derive(Debug)]
pub struct Lines<'a> {
    text: &'a str,
    /// Byte range of each line's content, and of the content plus terminator.
    spans: Vec<(Range<usize>, usize)>,
}

impl<'a> Lines<'a> {
    pub fn new(text: &'a str) -> Self {
        let mut spans = Vec::new();
        let mut start = 0;
        while start < text.len() {
            let (end, next) = match text[start..].find('\n') {
                Some(i) => {
                    let newline = start + i;
                    let end = if newline > start && text.as_bytes()[newline - 1] == b'\r' {
                        newline - 1
                    } else {
                        newline
                    };
                    (end, newline + 1)
                }
                None => (text.len(), text.len()),
            };
            spans.push((start..end, next));
            start = next;
        }
        Self { text, spans }
    }

    pub fn len(&self) -> usize {
        self.spans.len()
    }

    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// Line `i`'s content, without its terminator.
    pub fn get(&self, i: usize) -> &'a str {
        &self.text[self.spans[i].0.clone()]
    }

    /// Byte offset where line `i` starts (the text's length for `i == len()`).
    pub fn start(&self, i: usize) -> usize {
        self.spans.get(i).map_or(self.text.len(), |s| s.0.start)
    }

    /// Byte offset after line `i`'s terminator.
    pub fn end_with_terminator(&self, i: usize) -> usize {
        self.spans[i].1
    }

    /// Whether the last line ends with a terminator (an empty text counts as terminated).
    pub fn ends_with_newline(&self) -> bool {
        self.text.is_empty() || self.text.ends_with('\n')
    }

    /// The terminator new lines get: the file's first one, `\n` for a file without any.
    pub fn eol(&self) -> &'static str {
        match self.spans.first() {
            Some((content, _)) if self.text[content.end..].starts_with("\r\n") => "\r\n",
            _ => "\n",
        }
    }

    /// 1-based line number of a byte offset.
    pub fn line_of(&self, offset: usize) -> usize {
        self.spans.partition_point(|s| s.1 <= offset) + 1
    }
}

/// Splits an edit's old or new text into lines: `\n`-separated, a final newline ends the last
/// line rather than starting an empty one.
pub fn split_lines(text: &str) -> Vec<&str> {
    if text.is_empty() {
        return Vec::new();
    }
    let text = text.strip_suffix('\n').unwrap_or(text);
    text.split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .collect()
}

/// The ASCII that a character of typographic punctuation stands for, as models substitute it
/// (quotes, dashes, unusual spaces): one or two characters, since models write an em dash for
/// `--`.
pub fn ascii_chars(c: char) -> impl Iterator<Item = char> {
    let (first, second) = match c {
        '\u{2014}' => ('-', Some('-')),
        other => (ascii_punctuation(other), None),
    };
    std::iter::once(first).chain(second)
}

/// A line with its typographic punctuation replaced by the ASCII it stands for.
pub fn ascii_text(line: &str) -> String {
    line.chars().flat_map(ascii_chars).collect()
}

/// Maps the punctuation models substitute for ASCII (typographic quotes, dashes, unusual
/// spaces) to one ASCII character.
pub fn ascii_punctuation(c: char) -> char {
    match c {
        '\u{2018}' | '\u{2019}' | '\u{201A}' | '\u{201B}' | '\u{2032}' => '\'',
        '\u{201C}' | '\u{201D}' | '\u{201E}' | '\u{201F}' | '\u{2033}' => '"',
        '\u{2010}' | '\u{2011}' | '\u{2012}' | '\u{2013}' | '\u{2014}' | '\u{2015}'
        | '\u{2212}' => '-',
        '\u{00A0}' | '\u{2002}'..='\u{200A}' | '\u{202F}' | '\u{205F}' | '\u{3000}' => ' ',
        other => other,
    }
}

/// The leading whitespace of a line.
pub fn indentation(line: &str) -> &str {
    &line[..line.len() - line.trim_start().len()]
}

/// Whether a line of an edit's old or new text is an elision marker: `...`, `…`, or a comment
/// whose text starts with one (`// ... existing code ...`, `# ...`, `/* ... */`, `<!-- ... -->`,
/// `-- ...`), in any language's comment form.
pub fn is_elision_marker(line: &str) -> bool {
    let mut body = line.trim();
    let mut commented = false;
    for (open, close) in [("/*", "*/"), ("<!--", "-->"), ("{/*", "*/}")] {
        if let Some(inner) = body.strip_prefix(open).and_then(|b| b.strip_suffix(close)) {
            body = inner.trim();
            commented = true;
        }
    }
    for open in ["//", "#", "--", ";", "%"] {
        if let Some(inner) = body.strip_prefix(open) {
            body = inner.trim();
            commented = true;
            break;
        }
    }
    let Some(rest) = body.strip_prefix("...").or_else(|| body.strip_prefix('…')) else {
        return false;
    };
    // Anything after the dots must be words (`existing code`, `rest unchanged ...`), not code:
    // `...args)` or `...rest,` are JavaScript spreads, not elisions; a bare `...name` is one
    // too unless it is in a comment.
    rest.chars()
        .all(|c| c.is_alphanumeric() || matches!(c, ' ' | '.' | '…' | '-' | '\''))
        && (commented || rest.is_empty() || rest.starts_with([' ', '.', '…']))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_remember_terminators_and_the_missing_final_newline() {
        let lines = Lines::new("a\r\nb\r\nc");
        assert_eq!(lines.len(), 3);
        assert_eq!((lines.get(0), lines.get(1), lines.get(2)), ("a", "b", "c"));
        assert_eq!(lines.eol(), "\r\n");
        assert!(!lines.ends_with_newline());
        assert_eq!(lines.end_with_terminator(0), 3);
        assert_eq!(lines.start(3), 7);
        assert_eq!(lines.line_of(4), 2);
        assert_eq!(Lines::new("x\n").eol(), "\n");
        assert_eq!(Lines::new("").len(), 0);
        assert_eq!(split_lines("a\nb\n"), ["a", "b"]);
        assert_eq!(split_lines("a\r\n\n"), ["a", ""]);
    }

    #[test]
    fn elision_markers_are_recognised_in_every_comment_form_but_spreads_are_not() {
        for marker in [
            "...",
            "    // ... existing code ...",
            "# ...",
            "/* ... */",
            "<!-- ... -->",
            "-- ... rest unchanged",
            "…",
            "// ...existing code...",
        ] {
            assert!(is_elision_marker(marker), "{marker}");
        }
        for code in [
            "...args)",
            "  ...rest,",
            "...args",
            "return ...;",
            "foo(...)",
            "x = 1",
        ] {
            assert!(!is_elision_marker(code), "{code}");
        }
    }

    #[test]
    fn punctuation_normalises_to_the_ascii_it_stands_for() {
        assert_eq!(
            ascii_text("\u{201C}a\u{201D} \u{2013} \u{2014} \u{2018}b\u{2019}\u{00A0}c"),
            "\"a\" - -- 'b' c"
        );
    }
}
