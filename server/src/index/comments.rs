//! Python comments written over with spaces before parsing, so a run of comment lines parses in
//! linear time.
//!
//! At every comment line, tree-sitter-python's indentation scanner looks ahead over all the
//! comment lines that follow it (to find the next line's indentation), so a file with thousands
//! of comment lines in a row took time quadratic in their number: 100 KB of them 0.8 s, 480 KB
//! minutes, all under the index's size limit. Blank lines it passes in linear time. Comments
//! carry no definitions, and the index reads documentation from the original text, so the
//! parser is given the file with every comment replaced by spaces: same length, same line
//! breaks, so every offset and position in the tree holds for the original.

use memchr::memchr;

/// `source` with each `#` comment replaced by spaces, or `None` when it has none.
///
/// A small lexer tells comments from `#` inside strings: single- and triple-quoted, with
/// backslash escapes (in raw strings a backslash also keeps the quote that follows from ending
/// the string, so one rule serves both). A `#` inside a nested quote of an f-string
/// (`f"{d["#"]}"`) is taken for a comment: that line parses differently, nothing else does.
pub(super) fn blank_python_comments(source: &str) -> Option<String> {
    let bytes = source.as_bytes();
    let mut blanked: Option<Vec<u8>> = None;
    let mut at = 0;
    while at < bytes.len() {
        match bytes[at] {
            b'#' => {
                let end = memchr(b'\n', &bytes[at..]).map_or(bytes.len(), |n| at + n);
                blanked.get_or_insert_with(|| bytes.to_vec())[at..end].fill(b' ');
                at = end;
            }
            quote @ (b'"' | b'\'') => at = string_end(bytes, at, quote),
            _ => at += 1,
        }
    }
    // Every byte replaced belongs to a comment, which runs from `#` to a line break (both
    // character boundaries), so whole characters were replaced by ASCII spaces.
    blanked.map(|bytes| String::from_utf8(bytes).expect("whole characters replaced by spaces"))
}

/// The offset just past the string literal that opens at `start` with `quote`.
fn string_end(bytes: &[u8], start: usize, quote: u8) -> usize {
    let triple = bytes[start..].starts_with(&[quote; 3]);
    let mut at = start + if triple { 3 } else { 1 };
    while at < bytes.len() {
        match bytes[at] {
            b'\\' => at += 2,
            b if b == quote && !triple => return at + 1,
            b if b == quote && bytes[at..].starts_with(&[quote; 3]) => return at + 3,
            // An unterminated one-line string ends at its line (as Python's tokenizer says).
            b'\n' if !triple => return at,
            _ => at += 1,
        }
    }
    bytes.len()
}

#[cfg(test)]
mod tests {
    use super::blank_python_comments;

    #[test]
    fn comments_become_spaces_and_strings_keep_their_hashes() {
        let source =
            "x = '#not' # one\ns = \"\"\"\n# in a docstring\n\"\"\"  # two é\ny = \"a\\\"#\" #\n";
        let blanked = blank_python_comments(source).unwrap();
        assert_eq!(blanked.len(), source.len());
        assert_eq!(
            blanked,
            "x = '#not'      \ns = \"\"\"\n# in a docstring\n\"\"\"          \ny = \"a\\\"#\"  \n"
        );
        assert_eq!(blank_python_comments("def f():\n    return '#'\n"), None);
    }

    #[test]
    fn an_unterminated_string_ends_at_its_line() {
        let blanked = blank_python_comments("s = 'open\n# comment\n").unwrap();
        assert_eq!(blanked, "s = 'open\n         \n");
    }
}
