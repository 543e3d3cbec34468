//! `@path` and `@symbol` in a user's message: each resolved through the workspace (a file that
//! exists, read as the tools read it) or the index (a definition it knows), and attached to
//! the turn's message, so the model starts from what the user pointed at.

use std::fmt::Write as _;
use std::path::Path;

use super::ToolContext;
use super::read::read_text;

/// The most of one attached file's text, in bytes; a longer file is cut at a line end and
/// the model told to read the rest.
const MAX_ATTACHED_FILE: usize = 24 * 1024;
/// The most lines of one attached definition.
const MAX_DEFINITION_LINES: usize = 120;
/// The most mentions resolved in one message (a pasted log full of `@` is not a request).
const MAX_MENTIONS: usize = 8;

/// What one mention resolved to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attachment {
    /// The mention as written, without its `@`.
    pub mention: String,
    /// The text attached for it: a file's or a definition's, with where it is from.
    pub text: String,
}

/// The mentions of `message` that name a workspace file or an indexed symbol, in order, each
/// once. A mention that names neither is left as text (an e-mail address, a decorator).
pub fn attachments(context: &ToolContext, message: &str) -> Vec<Attachment> {
    let mut seen = Vec::new();
    let mut attached = Vec::new();
    for mention in mentions(message) {
        if seen.contains(&mention) || seen.len() >= MAX_MENTIONS {
            continue;
        }
        seen.push(mention.clone());
        if let Some(text) = file(context, &mention).or_else(|| symbol(context, &mention)) {
            attached.push(Attachment { mention, text });
        }
    }
    attached
}

/// The words after an `@` that starts a word, without trailing punctuation.
fn mentions(message: &str) -> Vec<String> {
    message
        .split_whitespace()
        .filter_map(|word| word.strip_prefix('@'))
        .map(|word| {
            word.trim_end_matches([',', '.', ';', ':', ')', '?', '!'])
                .trim_matches(|c| c == '`' || c == '"' || c == '\'')
                .to_owned()
        })
        .filter(|word| !word.is_empty())
        .collect()
}

fn file(context: &ToolContext, mention: &str) -> Option<String> {
    let path = Path::new(mention);
    if path.is_absolute() || mention.contains("..") {
        return None;
    }
    let text = read_text(context, path).ok()?;
    let mut shown = text.as_str();
    let mut note = String::new();
    if shown.len() > MAX_ATTACHED_FILE {
        let cut = shown[..MAX_ATTACHED_FILE]
            .rfind('\n')
            .map_or(0, |at| at + 1);
        shown = &shown[..cut];
        let lines = shown.lines().count();
        note = format!("[cut after line {lines}; read_file {mention} for the rest]\n");
    }
    Some(format!(
        "{mention}:\n```\n{}\n```\n{note}",
        shown.trim_end()
    ))
}

fn symbol(context: &ToolContext, mention: &str) -> Option<String> {
    let name = mention.trim_end_matches("()");
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_alphanumeric() || "_:.$".contains(c))
    {
        return None;
    }
    let index = context.index.as_ref()?;
    let short = name.rsplit([':', '.']).next().unwrap_or(name);
    let hit = index
        .symbols(short, None, 20)
        .into_iter()
        .find(|hit| hit.name == short)?;
    let text = read_text(context, Path::new(&hit.path)).ok()?;
    let first = hit.start_line as usize;
    let last = (hit.end_line as usize).min(first + MAX_DEFINITION_LINES - 1);
    let mut out = format!(
        "{} `{}` at {}:{}-{}:\n```\n",
        hit.kind,
        hit.name,
        hit.path,
        first + 1,
        last + 1
    );
    for line in text.lines().skip(first).take(last - first + 1) {
        let _ = writeln!(out, "{line}");
    }
    out.push_str("```\n");
    if (hit.end_line as usize) > last {
        let _ = writeln!(out, "[cut; read_file {} for the rest]", hit.path);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mentions_are_the_words_after_an_at_without_their_punctuation() {
        assert_eq!(
            mentions("see @src/lib.rs, and @parse_config. mail me@example.com @ x `@Foo`"),
            ["src/lib.rs", "parse_config"]
        );
    }
}
