//! Unified diffs (`---`/`+++` file headers, `@@ -l,s +l,s @@` hunks), as `diff -u`, `git diff`
//! and models write them.
//!
//! Line numbers and counts are hints only: models get them wrong, so a hunk ends where its
//! lines stop looking like hunk lines, not where its counts say, and its start line is kept
//! for messages. `/dev/null` on either side adds or deletes a file; different paths move it.

use super::{DiffBody, FileOp, Hunk, ParseError};

/// The path of a `---`/`+++` header, without a trailing timestamp; `None` for `/dev/null`.
fn header_path(rest: &str) -> Option<&str> {
    let path = rest.split('\t').next().unwrap_or(rest).trim();
    (path != "/dev/null").then_some(path)
}

fn is_file_header(lines: &[&str], i: usize) -> bool {
    lines[i].starts_with("--- ") && lines.get(i + 1).is_some_and(|l| l.starts_with("+++ "))
}

/// The old start line of `@@ -l,s +l,s @@`, if the header has numbers.
fn old_start(header: &str) -> Option<usize> {
    let rest = header
        .trim_start_matches('@')
        .trim_start()
        .strip_prefix('-')?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

pub fn parse(lines: &[&str]) -> Result<Vec<FileOp>, ParseError> {
    let mut ops = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if lines[i].starts_with("@@") {
            return Err(ParseError::new(
                i + 1,
                "expected `--- PATH` and `+++ PATH` lines before the first `@@` hunk",
            ));
        }
        if !is_file_header(lines, i) {
            i += 1;
            continue;
        }
        let header_line = i + 1;
        let mut old = header_path(&lines[i][4..]);
        let mut new = header_path(&lines[i + 1][4..]);
        // git's `a/` and `b/` prefixes, stripped only when both sides carry them.
        if let (Some(a), Some(b)) = (old, new)
            && let (Some(a), Some(b)) = (a.strip_prefix("a/"), b.strip_prefix("b/"))
        {
            (old, new) = (Some(a), Some(b));
        } else {
            old = old.map(|a| a.strip_prefix("a/").unwrap_or(a));
            new = new.map(|b| b.strip_prefix("b/").unwrap_or(b));
        }
        i += 2;
        let hunks = parse_hunks(lines, &mut i)?;
        let op = match (old, new) {
            (None, Some(path)) => FileOp::Add {
                path: path.to_owned(),
                content: hunks.into_iter().map(|h| h.new).collect(),
            },
            (Some(path), None) => FileOp::Delete {
                path: path.to_owned(),
            },
            (Some(from), Some(to)) => {
                if hunks.is_empty() && from == to {
                    return Err(ParseError::new(
                        header_line,
                        format!("`--- {from}` has no hunks: expected `@@` lines after `+++`"),
                    ));
                }
                FileOp::Update {
                    path: from.to_owned(),
                    move_to: (from != to).then(|| to.to_owned()),
                    hunks,
                }
            }
            (None, None) => {
                return Err(ParseError::new(
                    header_line,
                    "both sides are /dev/null: expected a file path on `---` or `+++`",
                ));
            }
        };
        ops.push(op);
    }
    Ok(ops)
}

fn parse_hunks(lines: &[&str], i: &mut usize) -> Result<Vec<Hunk>, ParseError> {
    let mut hunks = Vec::new();
    while let Some(header) = lines.get(*i).filter(|l| l.starts_with("@@")) {
        let mut hunk = Hunk {
            line_hint: old_start(header),
            input_line: *i + 1,
            ..Hunk::default()
        };
        *i += 1;
        let mut body = DiffBody::default();
        while let Some(line) = lines.get(*i) {
            if line.starts_with("@@") || line.starts_with("diff ") || is_file_header(lines, *i) {
                break;
            }
            // `\ No newline at end of file`: the file's own ending is kept either way.
            if !line.starts_with('\\') && !body.push(line) {
                break;
            }
            *i += 1;
        }
        (hunk.old, hunk.new) = body.finish();
        hunks.push(hunk);
    }
    Ok(hunks)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_text(text: &str) -> Result<Vec<FileOp>, ParseError> {
        parse(&text.split('\n').collect::<Vec<_>>())
    }

    #[test]
    fn git_diffs_with_several_files_adds_deletes_and_moves() {
        let ops = parse_text(
            "diff --git a/x.rs b/x.rs\nindex 1..2 100644\n--- a/x.rs\t2024-01-01\n+++ b/x.rs\n\
             @@ -10,3 +10,3 @@ fn f()\n ctx\n--- not a header\n+new\n\n ctx2\n@@ ... @@\n-y\n\
             --- /dev/null\n+++ b/new.txt\n@@ -0,0 +1 @@\n+hello\n--- a/gone.txt\n+++ /dev/null\n\
             @@ -1 +0,0 @@\n-bye\n--- a/m.txt\n+++ b/n.txt\nThat's all.\n",
        )
        .unwrap();
        assert_eq!(ops.len(), 4);
        let FileOp::Update { path, hunks, .. } = &ops[0] else {
            panic!("{ops:?}")
        };
        assert_eq!(path, "x.rs");
        assert_eq!(hunks[0].line_hint, Some(10));
        assert_eq!(hunks[0].old, "ctx\n-- not a header\n\nctx2\n");
        assert_eq!(hunks[0].new, "ctx\nnew\n\nctx2\n");
        assert_eq!((hunks[1].line_hint, hunks[1].old.as_str()), (None, "y\n"));
        assert_eq!(
            ops[1],
            FileOp::Add {
                path: "new.txt".into(),
                content: "hello\n".into()
            }
        );
        assert_eq!(
            ops[2],
            FileOp::Delete {
                path: "gone.txt".into()
            }
        );
        assert_eq!(
            ops[3],
            FileOp::Update {
                path: "m.txt".into(),
                move_to: Some("n.txt".into()),
                hunks: vec![]
            }
        );
    }

    #[test]
    fn errors_say_where_and_what_was_expected() {
        let err = parse_text("@@ -1 +1 @@\n-a\n+b\n").unwrap_err();
        assert_eq!(err.line, 1);
        assert!(err.message.contains("`--- PATH`"), "{err}");
        let err = parse_text("x\n--- a/x\n+++ b/x\nno hunks\n").unwrap_err();
        assert_eq!(err.line, 2);
        assert!(err.message.contains("no hunks"), "{err}");
    }
}
