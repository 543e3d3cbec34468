//! The `*** Begin Patch` format (Codex's `apply_patch`): Add File, Delete File, Update File
//! with an optional Move to, `@@` hunks with an optional context header, `*** End of File`.
//!
//! Markers are recognised with surrounding whitespace (models pad them); anything before
//! `*** Begin Patch` (prose, a fence, `apply_patch <<'EOF'`) is ignored, and a missing
//! `*** End Patch` is an error: a truncated patch must not apply half of itself.

use super::{DiffBody, FileOp, Hunk, ParseError};

pub const BEGIN: &str = "*** Begin Patch";
const END: &str = "*** End Patch";
const ADD: &str = "*** Add File:";
const DELETE: &str = "*** Delete File:";
const UPDATE: &str = "*** Update File:";
const MOVE: &str = "*** Move to:";
const END_OF_FILE: &str = "*** End of File";

/// Whether a line is one of the envelope's markers (which end a hunk).
fn is_marker(line: &str) -> bool {
    let t = line.trim();
    t == END || t == END_OF_FILE || [ADD, DELETE, UPDATE, MOVE].iter().any(|m| t.starts_with(m))
}

fn path_after<'a>(line: &'a str, marker: &str, number: usize) -> Result<&'a str, ParseError> {
    let path = line.trim()[marker.len()..].trim();
    if path.is_empty() {
        return Err(ParseError::new(
            number,
            format!("`{marker}` needs a path after it"),
        ));
    }
    Ok(path)
}

pub fn parse(lines: &[&str]) -> Result<Vec<FileOp>, ParseError> {
    let Some(begin) = lines.iter().position(|l| l.trim() == BEGIN) else {
        return Err(ParseError::new(1, format!("expected `{BEGIN}`")));
    };
    let mut ops = Vec::new();
    let mut i = begin + 1;
    loop {
        let Some(line) = lines.get(i) else {
            return Err(ParseError::new(
                lines.len(),
                format!("expected `{END}` before the end of the input (is the patch cut short?)"),
            ));
        };
        let number = i + 1;
        let t = line.trim();
        if t == END {
            return Ok(ops);
        } else if t.starts_with(ADD) {
            let path = path_after(line, ADD, number)?.to_owned();
            i += 1;
            let mut content = String::new();
            while let Some(line) = lines.get(i).filter(|l| !is_marker(l)) {
                let Some(text) = line.strip_prefix('+') else {
                    return Err(ParseError::new(
                        i + 1,
                        format!("every line of an added file starts with `+`; found `{line}`"),
                    ));
                };
                content.push_str(text);
                content.push('\n');
                i += 1;
            }
            ops.push(FileOp::Add { path, content });
        } else if t.starts_with(DELETE) {
            let path = path_after(line, DELETE, number)?.to_owned();
            ops.push(FileOp::Delete { path });
            i += 1;
        } else if t.starts_with(UPDATE) {
            let path = path_after(line, UPDATE, number)?.to_owned();
            i += 1;
            let mut move_to = None;
            if let Some(line) = lines.get(i).filter(|l| l.trim().starts_with(MOVE)) {
                move_to = Some(path_after(line, MOVE, i + 1)?.to_owned());
                i += 1;
            }
            let hunks = parse_hunks(lines, &mut i)?;
            if hunks.is_empty() {
                return Err(ParseError::new(
                    number,
                    format!("`{UPDATE} {path}` has no hunks: add `@@` and `-`/`+` lines"),
                ));
            }
            ops.push(FileOp::Update {
                path,
                move_to,
                hunks,
            });
        } else {
            return Err(ParseError::new(
                number,
                format!(
                    "expected `{ADD}`, `{DELETE}`, `{UPDATE}` or `{END}`; found `{}`",
                    line.trim_end()
                ),
            ));
        }
    }
}

/// The hunks of one Update File, up to the next marker. `i` is left on that marker.
fn parse_hunks(lines: &[&str], i: &mut usize) -> Result<Vec<Hunk>, ParseError> {
    let mut hunks = Vec::new();
    loop {
        let Some(line) = lines.get(*i) else {
            return Ok(hunks);
        };
        if is_marker(line) {
            return Ok(hunks);
        }
        let t = line.trim();
        let mut hunk = Hunk {
            terminate_last: true,
            append: true,
            input_line: *i + 1,
            ..Hunk::default()
        };
        if t == "@@" || t.starts_with("@@ ") {
            let header = t[2..].trim();
            hunk.context = (!header.is_empty()).then(|| header.to_owned());
            *i += 1;
        } else if !hunks.is_empty() {
            return Err(ParseError::new(
                *i + 1,
                format!("expected `@@` to start the next hunk; found `{line}`"),
            ));
        }
        let mut body = DiffBody::default();
        while let Some(line) = lines.get(*i) {
            if line.trim() == END_OF_FILE {
                hunk.at_end = true;
                *i += 1;
                break;
            }
            if is_marker(line) || line.trim_start().starts_with("@@") {
                break;
            }
            if !body.push(line) {
                return Err(ParseError::new(
                    *i + 1,
                    format!(
                        "expected a hunk line starting with ' ' (context), '-' (remove) or \
                         '+' (add); found `{line}`"
                    ),
                ));
            }
            *i += 1;
        }
        let (old, new) = body.finish();
        if old.is_empty() && new.is_empty() {
            return Err(ParseError::new(
                hunk.input_line,
                "empty hunk: expected lines starting with ' ', '-' or '+'",
            ));
        }
        hunk.old = old;
        hunk.new = new;
        hunks.push(hunk);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_text(text: &str) -> Result<Vec<FileOp>, ParseError> {
        parse(&text.split('\n').collect::<Vec<_>>())
    }

    #[test]
    fn every_operation_parses() {
        let ops = parse_text(
            "apply_patch <<'EOF'\n*** Begin Patch\n*** Add File: a.txt\n+hi\n\
             *** Delete File: b.txt\n  *** Update File: c.txt \n*** Move to: d/c.txt\n\
             @@ fn main()\n ctx\n-old\n+new\n@@\n-x\n*** End of File\n *** End Patch \nEOF\n",
        )
        .unwrap();
        assert_eq!(ops.len(), 3);
        assert_eq!(
            ops[0],
            FileOp::Add {
                path: "a.txt".into(),
                content: "hi\n".into()
            }
        );
        let FileOp::Update {
            path,
            move_to,
            hunks,
        } = &ops[2]
        else {
            panic!("{ops:?}")
        };
        assert_eq!(
            (path.as_str(), move_to.as_deref()),
            ("c.txt", Some("d/c.txt"))
        );
        assert_eq!(hunks[0].context.as_deref(), Some("fn main()"));
        assert_eq!(
            (hunks[0].old.as_str(), hunks[0].new.as_str()),
            ("ctx\nold\n", "ctx\nnew\n")
        );
        assert!(!hunks[0].at_end && hunks[1].at_end);
        assert_eq!((hunks[1].old.as_str(), hunks[1].new.as_str()), ("x\n", ""));
    }

    #[test]
    fn errors_say_where_and_what_was_expected() {
        let cases = [
            (
                "*** Begin Patch\n*** Frobnicate File: foo\n*** End Patch\n",
                2,
                "expected `*** Add File:`",
            ),
            (
                "*** Begin Patch\n*** Update File: a\n@@\n-x\n",
                5,
                "expected `*** End Patch`",
            ),
            (
                "*** Begin Patch\n*** Update File: a\n*** End Patch\n",
                2,
                "has no hunks",
            ),
            (
                "*** Begin Patch\n*** Update File: a\n@@\nbad\n*** End Patch\n",
                4,
                "' ' (context)",
            ),
            (
                "*** Begin Patch\n*** Add File: a\nno plus\n*** End Patch\n",
                3,
                "starts with `+`",
            ),
            (
                "*** Begin Patch\n*** Delete File:\n*** End Patch\n",
                2,
                "needs a path",
            ),
            ("no patch here", 1, "expected `*** Begin Patch`"),
        ];
        for (input, line, expected) in cases {
            let err = parse_text(input).unwrap_err();
            assert_eq!(err.line, line, "{input}: {err}");
            assert!(err.message.contains(expected), "{input}: {err}");
        }
    }
}
