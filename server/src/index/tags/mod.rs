//! The tags of one file — its definitions and references, with their ranges — found by a walk
//! of the parse tree written for the language where one exists (`rust.rs`: the corpus a cold
//! index spends its time on), by the grammar's tags query (`query.rs`) otherwise.
//!
//! Both yield the same [`Tag`]s for the same source: the walk is the query's patterns written
//! out as code, because the generic query engine's cursor cost more than the extraction
//! around it (a sixth of a cold index). `extract::tests` holds them equal on real files.

mod query;
mod rust;

use std::cell::RefCell;
use std::ops::Range;

use super::extract::ExtractError;
use crate::languages::Language;

pub(super) use query::of as of_query;

/// tree-sitter-tags cuts the line of a tag at this many bytes; the walk cuts it the same way.
const MAX_LINE_LEN: usize = 180;

/// A definition or reference found in a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Tag {
    /// The tagged node's bytes, its name's included.
    pub range: Range<usize>,
    pub name_range: Range<usize>,
    /// The line holding the name, trimmed, cut at [`MAX_LINE_LEN`] bytes.
    pub line_range: Range<usize>,
    /// Zero-based row of the name.
    pub row: usize,
    /// The tags query's kind: `function`, `class`, `call`, `implementation`, …
    pub kind: &'static str,
    pub is_definition: bool,
    /// What the query's `@doc` captures held, if it has any.
    pub docs: Option<String>,
}

/// A file's tags, and whether its parse had errors.
pub(super) type Found = Result<(Vec<Tag>, bool), ExtractError>;

/// The tags of `source`, and whether its parse had errors.
pub(super) fn of(language: Language, source: &str) -> Found {
    match language {
        Language::Rust => {
            let tree = parse(language, source)?;
            let mut tags = Vec::new();
            rust::tags(&tree, source.as_bytes(), &mut tags);
            Ok((tags, tree.root_node().has_error()))
        }
        _ => of_query(language, source),
    }
}

thread_local! {
    /// One parser per language and thread, kept: making one is an allocation or two and a
    /// language switch, for every file otherwise.
    static PARSERS: RefCell<[Option<tree_sitter::Parser>; Language::ALL.len()]> =
        const { RefCell::new([const { None }; Language::ALL.len()]) };
}

fn parse(language: Language, source: &str) -> Result<tree_sitter::Tree, ExtractError> {
    PARSERS.with(|parsers| {
        let mut parsers = parsers.borrow_mut();
        let parser = parsers[language as usize].get_or_insert_with(|| language.parser());
        parser
            .parse(source, None)
            .ok_or_else(|| ExtractError::Tags("the parse was cancelled".into()))
    })
}

/// The line of the name starting at `name_start`, `column` bytes into its line, as
/// tree-sitter-tags gives it: leading and trailing whitespace trimmed, at most
/// [`MAX_LINE_LEN`] bytes and never a broken character.
pub(in crate::index) fn line_range(text: &[u8], name_start: usize, column: usize) -> Range<usize> {
    let mut start = name_start - column;
    while start < text.len() && text[start].is_ascii_whitespace() {
        start += 1;
    }
    let max_len = MAX_LINE_LEN.min(text.len() - start);
    let after = &text[start..start + max_len];
    let len = if let Some(len) = memchr::memchr(b'\n', after) {
        len
    } else if let Err(err) = std::str::from_utf8(after) {
        err.valid_up_to()
    } else {
        max_len
    };
    let mut end = start + len;
    while end > start && text[end - 1].is_ascii_whitespace() {
        end -= 1;
    }
    start..end
}

/// The tag of the node `tagged` named by `name`, unless the name is an error or missing (the
/// query engine skips those too).
fn tag(
    source: &[u8],
    tagged: tree_sitter::Node,
    name: tree_sitter::Node,
    kind: &'static str,
    is_definition: bool,
) -> Option<Tag> {
    if name.has_error() {
        return None;
    }
    let name_range = name.byte_range();
    let node_range = tagged.byte_range();
    let position = name.start_position();
    Some(Tag {
        range: node_range.start.min(name_range.start)..node_range.end.max(name_range.end),
        line_range: line_range(source, name_range.start, position.column),
        name_range,
        row: position.row,
        kind,
        is_definition,
        docs: None,
    })
}

#[cfg(test)]
pub(super) mod tests {
    use std::path::{Path, PathBuf};

    use super::*;

    /// The `.rs` files under `dir`, sorted (a deterministic sample).
    fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        let mut paths: Vec<PathBuf> = entries.filter_map(|e| Some(e.ok()?.path())).collect();
        paths.sort();
        for path in paths {
            if path.is_dir() {
                rust_files(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }

    /// This repository's Rust sources, sorted by folder and path.
    pub(in crate::index) fn repository_rust_files() -> Vec<PathBuf> {
        let repository = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut files = Vec::new();
        for folder in ["server", "protocol", "xtask", "tests"] {
            rust_files(&repository.join(folder), &mut files);
        }
        files
    }

    /// Real Rust: this repository's sources, and those of a few crates it is built from in
    /// the cargo registry (present wherever it was built). `WRIGHT_TAGS_CORPUS` adds a
    /// folder (the whole registry, say, for a longer check).
    fn real_rust_files() -> Vec<PathBuf> {
        let mut files = repository_rust_files();
        let cargo_home = std::env::var_os("CARGO_HOME")
            .map(PathBuf::from)
            .or_else(|| Some(PathBuf::from(std::env::var_os("HOME")?).join(".cargo")));
        let registry = cargo_home.map(|home| home.join("registry/src"));
        for index in registry
            .iter()
            .flat_map(|r| std::fs::read_dir(r).into_iter().flatten())
        {
            let Ok(index) = index else { continue };
            let mut crates: Vec<PathBuf> = std::fs::read_dir(index.path())
                .into_iter()
                .flatten()
                .filter_map(|e| Some(e.ok()?.path()))
                .filter(|path| {
                    let name = path.file_name().unwrap_or_default().to_string_lossy();
                    [
                        "tantivy-0",
                        "tree-sitter-0",
                        "regex-syntax-",
                        "serde_json-",
                        "syn-2",
                    ]
                    .iter()
                    .any(|prefix| name.starts_with(prefix))
                })
                .collect();
            crates.sort();
            for folder in crates {
                rust_files(&folder, &mut files);
            }
        }
        if let Some(extra) = std::env::var_os("WRIGHT_TAGS_CORPUS") {
            rust_files(Path::new(&extra), &mut files);
        }
        files
    }

    #[test]
    fn the_rust_walk_finds_what_the_tags_query_finds_in_real_files() {
        let files = real_rust_files();
        let mut compared = 0;
        let mut tags = 0;
        for path in &files {
            let Ok(source) = std::fs::read_to_string(path) else {
                continue;
            };
            let (walked, walk_error) = of(Language::Rust, &source).unwrap();
            let (queried, query_error) = of_query(Language::Rust, &source).unwrap();
            assert_eq!(walk_error, query_error, "{}", path.display());
            if walked != queried {
                let first = walked
                    .iter()
                    .zip(&queried)
                    .position(|(a, b)| a != b)
                    .unwrap_or(walked.len().min(queried.len()));
                panic!(
                    "{}: {} tags walked, {} queried; first difference at {first}: walked {:?}, \
                     queried {:?}",
                    path.display(),
                    walked.len(),
                    queried.len(),
                    walked.get(first),
                    queried.get(first),
                );
            }
            compared += 1;
            tags += walked.len();
        }
        // The repository's own sources alone are hundreds of files.
        assert!(compared >= 200, "only {compared} files compared");
        assert!(tags >= 20_000, "only {tags} tags compared");
    }

    #[test]
    fn a_tag_line_is_trimmed_and_cut_as_tree_sitter_tags_cuts_it() {
        let text = "abc\ndefg❤hij\nklmno".as_bytes();
        assert_eq!(line_range(text, 5, 1), 4..14);
        let text = b"\t func foo \nbar\n";
        assert_eq!(line_range(text, 0, 0), 2..10);
        assert_eq!(line_range(text, 12, 0), 12..15);
        let long = format!("  fn {}() {{}}\n", "x".repeat(300));
        let range = line_range(long.as_bytes(), 5, 5);
        assert_eq!(range, 2..2 + MAX_LINE_LEN);
        // A cut inside a character ends before it.
        let wide = format!("{}é and more", "a".repeat(MAX_LINE_LEN - 1));
        assert_eq!(line_range(wide.as_bytes(), 0, 0), 0..MAX_LINE_LEN - 1);
    }
}
