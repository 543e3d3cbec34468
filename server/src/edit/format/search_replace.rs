//! Search/replace blocks (Aider's format): a file path line, then `<<<<<<< SEARCH`, the old
//! lines, `=======`, the new lines, `>>>>>>> REPLACE`; several blocks, each naming its file or
//! reusing the previous block's.
//!
//! Markers are accepted with 5 to 9 marker characters and surrounding whitespace; the path is
//! the last line before the block that is not blank, a code fence or prose.

use super::{FileOp, Hunk, ParseError, is_fence, join_lines, push_update};

fn marker(line: &str, c: char, word: &str) -> bool {
    let t = line.trim();
    let count = t.chars().take_while(|&x| x == c).count();
    (5..=9).contains(&count) && t[count..].trim() == word
}

pub fn is_search(line: &str) -> bool {
    marker(line, '<', "SEARCH")
}

fn is_divider(line: &str) -> bool {
    marker(line, '=', "")
}

fn is_replace(line: &str) -> bool {
    marker(line, '>', "REPLACE")
}

/// A path from a line such as `src/main.rs`, `` `src/main.rs` ``, `**src/main.rs**:` or
/// `# src/main.rs`; `None` for prose.
fn path_in(line: &str) -> Option<&str> {
    let t = line.trim().trim_start_matches('#').trim();
    let t = t
        .trim_end_matches(':')
        .trim_matches(|c| c == '`' || c == '*')
        .trim();
    let looks_like_path = !t.is_empty()
        && !t.contains(char::is_whitespace)
        && (t.contains('.') || t.contains('/'))
        && !t.ends_with('.');
    looks_like_path.then_some(t)
}

pub fn parse(lines: &[&str]) -> Result<Vec<FileOp>, ParseError> {
    let mut ops: Vec<FileOp> = Vec::new();
    let mut previous_path: Option<String> = None;
    let mut since_last_block = 0;
    let mut i = 0;
    while i < lines.len() {
        if !is_search(lines[i]) {
            if is_divider(lines[i]) || is_replace(lines[i]) {
                return Err(ParseError::new(
                    i + 1,
                    format!(
                        "`{}` outside a block: expected `<<<<<<< SEARCH` first",
                        lines[i].trim()
                    ),
                ));
            }
            i += 1;
            continue;
        }
        let search_line = i + 1;
        let path_line = lines[since_last_block..i]
            .iter()
            .rev()
            .find(|l| !l.trim().is_empty() && !is_fence(l));
        let path = match (path_line.and_then(|l| path_in(l)), &previous_path) {
            (Some(path), _) => path.to_owned(),
            (None, Some(previous)) => previous.clone(),
            (None, None) => {
                let found = path_line
                    .map(|l| format!("; found `{}`", l.trim()))
                    .unwrap_or_default();
                return Err(ParseError::new(
                    search_line,
                    format!("expected a file path on the line before `<<<<<<< SEARCH`{found}"),
                ));
            }
        };
        i += 1;
        let old = section(
            lines,
            &mut i,
            is_divider,
            "expected `=======` between the search and the replacement",
            "expected `=======` before the end of the input",
        )?;
        let new = section(
            lines,
            &mut i,
            is_replace,
            "expected `>>>>>>> REPLACE` to end the block",
            "expected `>>>>>>> REPLACE` before the end of the input (is the block cut short?)",
        )?;
        since_last_block = i;
        previous_path = Some(path.clone());
        let hunk = Hunk {
            old: join_lines(old),
            new: join_lines(new),
            input_line: search_line,
            append: true,
            ..Hunk::default()
        };
        push_update(&mut ops, &path, hunk);
    }
    Ok(ops)
}

/// The lines from `*i` up to the one `ends` accepts; leaves `*i` past that end. Any other
/// block marker inside is `stray`; running out of input is `unterminated`.
fn section<'s, 'a>(
    lines: &'s [&'a str],
    i: &mut usize,
    ends: fn(&str) -> bool,
    stray: &str,
    unterminated: &str,
) -> Result<&'s [&'a str], ParseError> {
    let start = *i;
    while *i < lines.len() && !ends(lines[*i]) {
        let line = lines[*i];
        if is_search(line) || is_divider(line) || is_replace(line) {
            return Err(ParseError::new(*i + 1, stray));
        }
        *i += 1;
    }
    if *i == lines.len() {
        return Err(ParseError::new(lines.len(), unterminated));
    }
    let body = &lines[start..*i];
    *i += 1;
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_text(text: &str) -> Result<Vec<FileOp>, ParseError> {
        parse(&text.split('\n').collect::<Vec<_>>())
    }

    #[test]
    fn blocks_with_prose_fences_and_a_reused_path() {
        let ops = parse_text(
            "I'll change it.\n\n**src/a.rs**\n```rust\n  <<<<<<< SEARCH \nold\n=======\nnew\n>>>>>>> REPLACE\n```\n\
             ```rust\n<<<<<<< SEARCH\nx\n=======\n>>>>>>> REPLACE\n```\nb.py\n<<<<<<< SEARCH\n=======\nprint()\n>>>>>>> REPLACE\n",
        )
        .unwrap();
        assert_eq!(ops.len(), 2);
        let FileOp::Update { path, hunks, .. } = &ops[0] else {
            panic!()
        };
        assert_eq!(path, "src/a.rs");
        assert_eq!(
            (hunks[0].old.as_str(), hunks[0].new.as_str()),
            ("old\n", "new\n")
        );
        assert_eq!((hunks[1].old.as_str(), hunks[1].new.as_str()), ("x\n", ""));
        assert_eq!(ops[1].path(), "b.py");
    }

    #[test]
    fn errors_say_where_and_what_was_expected() {
        let cases = [
            (
                "Here is my change:\n<<<<<<< SEARCH\na\n=======\nb\n>>>>>>> REPLACE\n",
                2,
                "expected a file path",
            ),
            (
                "a.rs\n<<<<<<< SEARCH\na\n>>>>>>> REPLACE\n",
                4,
                "expected `=======`",
            ),
            (
                "a.rs\n<<<<<<< SEARCH\na\n=======\nb\n",
                6,
                "expected `>>>>>>> REPLACE`",
            ),
            ("a.rs\n=======\n", 2, "outside a block"),
        ];
        for (input, line, expected) in cases {
            let err = parse_text(input).unwrap_err();
            assert_eq!(err.line, line, "{input}: {err}");
            assert!(err.message.contains(expected), "{input}: {err}");
        }
    }
}
