//! Property tests of the whole engine: random files, a random region that occurs once, an edit
//! of it written in each format (with the whitespace drift models add), planned and applied in
//! memory; and the same region made ambiguous by a copy, which must be refused.

use proptest::prelude::*;

use super::{EditError, Format, MemoryFiles, format, plan::plan};

/// A line: some indentation, then words from a small vocabulary, so that files repeat lines
/// (as code does) and uniqueness is not a given.
fn line() -> impl Strategy<Value = String> {
    (
        prop_oneof![Just(""), Just("    "), Just("        "), Just("\t")],
        prop::collection::vec(
            prop_oneof![
                Just("let"),
                Just("x"),
                Just("y"),
                Just("= 1;"),
                Just("f(x)"),
                Just("}")
            ],
            0..4,
        ),
    )
        .prop_map(|(indent, words)| {
            let words = words.join(" ");
            if words.is_empty() {
                String::new()
            } else {
                format!("{indent}{words}")
            }
        })
}

#[derive(Clone, Copy, Debug)]
enum Drift {
    None,
    TrailingSpaces,
    ExtraIndentation,
}

fn render(format: Format, old: &[String], new: &[String], start: usize) -> String {
    let block = |prefix: &str, lines: &[String]| -> String {
        lines.iter().map(|l| format!("{prefix}{l}\n")).collect()
    };
    match format {
        Format::Patch => format!(
            "*** Begin Patch\n*** Update File: f.txt\n@@\n{}{}*** End Patch\n",
            block("-", old),
            block("+", new)
        ),
        Format::SearchReplace => format!(
            "f.txt\n<<<<<<< SEARCH\n{}=======\n{}>>>>>>> REPLACE\n",
            block("", old),
            block("", new)
        ),
        Format::Udiff => format!(
            "--- a/f.txt\n+++ b/f.txt\n@@ -{},{} +{},{} @@\n{}{}",
            start + 1,
            old.len(),
            start + 1,
            new.len(),
            block("-", old),
            block("+", new)
        ),
        Format::Json | Format::Auto => serde_json::json!({
            "path": "f.txt",
            "old_string": block("", old),
            "new_string": block("", new),
        })
        .to_string(),
    }
}

/// Whether `region` occurs exactly once in `lines`, comparing lines without any whitespace
/// around them (the loosest comparison the ladder makes for these lines).
fn unique(lines: &[String], region: &[String]) -> bool {
    let same = |a: &String, b: &String| a.trim() == b.trim();
    lines
        .windows(region.len())
        .filter(|w| w.iter().zip(region).all(|(a, b)| same(a, b)))
        .count()
        == 1
}

fn apply_edit(text: &str, edit: &str, format: Format) -> Result<String, EditError> {
    let mut files = MemoryFiles::new([("f.txt", text)]);
    let planned = plan(&format::parse(edit, format)?, &files)?;
    files.apply(&planned)?;
    Ok(files.get("f.txt").unwrap_or_default().to_owned())
}

fn formats() -> impl Strategy<Value = Format> {
    prop_oneof![
        Just(Format::Patch),
        Just(Format::SearchReplace),
        Just(Format::Udiff),
        Just(Format::Json)
    ]
}

fn drifts() -> impl Strategy<Value = Drift> {
    prop_oneof![
        Just(Drift::None),
        Just(Drift::TrailingSpaces),
        Just(Drift::ExtraIndentation)
    ]
}

proptest! {
    #[test]
    fn an_edit_of_a_unique_region_gives_the_expected_text(
        lines in prop::collection::vec(line(), 1..40),
        start in any::<prop::sample::Index>(),
        len in 1usize..6,
        new in prop::collection::vec(line(), 0..6),
        format in formats(),
        drift in drifts(),
        crlf in any::<bool>(),
    ) {
        let start = start.index(lines.len());
        let end = (start + len).min(lines.len());
        let region = &lines[start..end];
        prop_assume!(region.iter().any(|l| !l.trim().is_empty()) && unique(&lines, region));
        let eol = if crlf { "\r\n" } else { "\n" };
        let text: String = lines.iter().map(|l| format!("{l}{eol}")).collect();
        let mut expected_lines = lines[..start].to_vec();
        expected_lines.extend(new.iter().cloned());
        expected_lines.extend(lines[end..].iter().cloned());
        let expected: String = expected_lines.iter().map(|l| format!("{l}{eol}")).collect();

        let (mut old, mut new) = (region.to_vec(), new.clone());
        match drift {
            Drift::None => {}
            Drift::TrailingSpaces => old.iter_mut().for_each(|l| l.push_str("  ")),
            Drift::ExtraIndentation => {
                // Blank new lines stay blank: the ladder keeps them so.
                for l in old.iter_mut().chain(new.iter_mut()).filter(|l| !l.is_empty()) {
                    l.insert_str(0, "  ");
                }
            }
        }
        // `json`'s old_string may also match inside a line.
        let old_text: String = old.iter().map(|l| format!("{l}{eol}")).collect();
        prop_assume!(!matches!(format, Format::Json) || text.matches(&old_text).count() <= 1);
        let edit = render(format, &old, &new, start);
        let got = apply_edit(&text, &edit, format);
        prop_assert_eq!(got.map_err(|e| e.to_string()), Ok(expected), "{}", edit);
    }

    #[test]
    fn a_region_that_occurs_twice_is_refused(
        lines in prop::collection::vec(line(), 1..30),
        start in any::<prop::sample::Index>(),
        len in 1usize..5,
        at in any::<prop::sample::Index>(),
        new in prop::collection::vec(line(), 0..4),
        format in formats(),
        drift in drifts(),
    ) {
        let start = start.index(lines.len());
        let end = (start + len).min(lines.len());
        let region = lines[start..end].to_vec();
        prop_assume!(region.iter().any(|l| !l.trim().is_empty()) && unique(&lines, &region));
        // A copy of the region at a line boundary outside it.
        let at = at.index(lines.len() + 1);
        prop_assume!(at <= start || at >= end);
        let mut copied = lines[..at].to_vec();
        copied.extend(region.iter().cloned());
        copied.extend(lines[at..].iter().cloned());
        let text: String = copied.iter().map(|l| format!("{l}\n")).collect();
        let mut old = region.clone();
        if let Drift::TrailingSpaces = drift {
            old.iter_mut().for_each(|l| l.push(' '));
        }
        let edit = render(format, &old, &new, start);
        let err = apply_edit(&text, &edit, format).expect_err("an ambiguous edit must be refused");
        prop_assert_eq!(err.kind(), "ambiguous", "{}", err);
    }
}
