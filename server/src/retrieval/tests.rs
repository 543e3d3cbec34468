//! Retrieval on a small workspace whose reference graph is known.

use std::path::{Path, PathBuf};

use super::*;
use crate::index::Options;
use crate::workspace::{DiskOnly, WalkOptions};

struct Fixture {
    dir: PathBuf,
    index: Index,
}

fn fixture(name: &str) -> Fixture {
    fixture_of(
        name,
        &[
            (
                "src/http.rs",
                "use crate::lexer::tokenize;\n\n/// A parsed request.\npub struct Request { pub body: String }\n\n/// Parses a request.\npub fn parse_http_request(input: &str) -> Request {\n    let tokens = tokenize(input);\n    Request { body: tokens.join(\" \") }\n}\n",
            ),
            (
                "src/lexer.rs",
                "pub struct Token;\n\npub fn tokenize(input: &str) -> Vec<String> {\n    input.split(' ').map(String::from).collect()\n}\n",
            ),
            (
                "src/main.rs",
                "fn main() {\n    let r = parse_http_request(\"GET /\");\n    println!(\"{}\", r.body);\n}\n",
            ),
            (
                "src/unrelated.rs",
                "pub fn colour_wheel() -> u32 {\n    7\n}\n",
            ),
        ],
    )
}

fn fixture_of(name: &str, files: &[(&str, &str)]) -> Fixture {
    let dir = std::env::temp_dir().join(format!("wright-retrieval-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let root = dir.join("ws");
    for (path, text) in files {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    let index = Index::open(
        &root,
        Options {
            cache_dir: dir.join("cache"),
            walk: WalkOptions::default(),
        },
    )
    .unwrap();
    index.refresh(&|_| {}).unwrap();
    Fixture { dir, index }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn query(text: &str, budget: usize) -> Query {
    Query {
        text: text.to_owned(),
        budget,
        ..Query::default()
    }
}

fn paths(context: &Context) -> Vec<(&str, SnippetKind)> {
    context
        .snippets
        .iter()
        .map(|s| (s.path.as_str(), s.kind))
        .collect()
}

#[test]
fn a_named_symbol_comes_first_then_what_it_depends_on() {
    let f = fixture("named");
    let context = retrieve(
        &f.index,
        &DiskOnly,
        &query("Fix parse_http_request when the body is empty", 4000),
    );
    let first = &context.snippets[0];
    // Lines 6-10: the doc comment, then the function.
    assert_eq!(
        (
            first.path.as_str(),
            first.kind,
            first.start_line,
            first.end_line
        ),
        ("src/http.rs", SnippetKind::Definition, 6, 10)
    );
    assert!(
        first.text.contains("    6  /// Parses a request."),
        "{}",
        first.text
    );
    assert!(
        first.text.contains("    7  pub fn parse_http_request"),
        "{}",
        first.text
    );
    assert!(first.text.contains("   10  }"), "{}", first.text);
    // The lexer, which the named function calls, ranks above the unrelated file.
    let order = paths(&context);
    let lexer = order
        .iter()
        .position(|p| p.0 == "src/lexer.rs")
        .expect("lexer in the map");
    let unrelated = order
        .iter()
        .position(|p| p.0 == "src/unrelated.rs")
        .unwrap_or(usize::MAX);
    assert!(lexer < unrelated, "{order:?}");
    assert!(context.tokens <= context.budget);
    assert_eq!(
        context.tokens,
        context.snippets.iter().map(|s| s.tokens).sum::<usize>()
    );
}

#[test]
fn the_budget_is_never_exceeded_and_smaller_budgets_keep_the_best() {
    let f = fixture("budget");
    let full = retrieve(
        &f.index,
        &DiskOnly,
        &query("parse_http_request tokenize", 10_000),
    );
    for budget in [0, 10, 40, 80, 200] {
        let context = retrieve(
            &f.index,
            &DiskOnly,
            &query("parse_http_request tokenize", budget),
        );
        assert!(context.tokens <= budget, "{budget}: {}", context.tokens);
        for snippet in &context.snippets {
            assert!(full.snippets.contains(snippet));
        }
    }
    assert!(
        retrieve(&f.index, &DiskOnly, &query("parse_http_request", 0))
            .snippets
            .is_empty()
    );
}

#[test]
fn mentioned_files_and_the_cursor_steer_the_map() {
    let f = fixture("steer");
    let context = retrieve(
        &f.index,
        &DiskOnly,
        &query("something is off in unrelated.rs", 4000),
    );
    assert_eq!(paths(&context)[0], ("src/unrelated.rs", SnippetKind::Map));
    let mut q = query("make it faster", 4000);
    q.current_file = Some("src/lexer.rs".into());
    q.cursor_symbol = Some("tokenize".into());
    let context = retrieve(&f.index, &DiskOnly, &q);
    assert_eq!(
        paths(&context)[0],
        ("src/lexer.rs", SnippetKind::Definition)
    );
}

#[test]
fn plain_words_and_punctuation_do_not_invent_matches() {
    let f = fixture("plain");
    // "request" is part of a name, but a plain English word: no definition from it alone.
    let context = retrieve(&f.index, &DiskOnly, &query("the request is slow", 4000));
    assert!(
        context.snippets.iter().all(|s| s.kind == SnippetKind::Map),
        "{:?}",
        paths(&context)
    );
    let context = retrieve(&f.index, &DiskOnly, &query("?!... ---", 4000));
    assert!(context.snippets.iter().all(|s| s.kind == SnippetKind::Map));
    assert_eq!(
        terms("Fix the parse_http_request bug in src/http.rs"),
        ["parse_http_request", "src", "http"]
    );
}

#[test]
fn open_buffers_are_read_instead_of_the_disk() {
    struct Edited(PathBuf);
    impl Overlay for Edited {
        fn buffer_text(&self, path: &Path) -> Option<String> {
            (path == self.0).then(|| "pub struct Token;\n\npub fn tokenize(input: &str) -> Vec<String> {\n    todo_in_buffer()\n}\n".to_owned())
        }
    }
    let f = fixture("overlay");
    let overlay = Edited(f.index.root().join("src/lexer.rs"));
    let context = retrieve(&f.index, &overlay, &query("tokenize", 4000));
    assert!(
        context.snippets[0].text.contains("todo_in_buffer"),
        "{}",
        context.snippets[0].text
    );
}

#[test]
fn prose_steers_toward_files_whose_vocabulary_matches() {
    let f = fixture("prose");
    // No identifier in the query, but "lexer" is a path word and "tokenize" shares nothing:
    // the lexer file's vocabulary matches, the colour wheel's does not.
    let context = retrieve(
        &f.index,
        &DiskOnly,
        &query("the lexer splits words wrongly", 4000),
    );
    assert_eq!(
        paths(&context)[0].0,
        "src/lexer.rs",
        "{:?}",
        paths(&context)
    );
    let scores = lexical_scores(&f.index.files(), "colour of the wheel");
    assert_eq!(scores[0].0, "src/unrelated.rs");
    assert!(lexical_scores(&f.index.files(), "the and for").is_empty());
}

#[test]
fn the_file_whose_text_matches_the_task_comes_first_with_its_passage() {
    // Only a comment in `save` speaks of the task; by names and references, `util.rs` is
    // the hub (everything calls `helper`), and no name shares a word with the query.
    let f = fixture_of(
        "text",
        &[
            (
                "src/store.rs",
                "pub fn save(x: u32) -> u32 {\n    // Timestamps are written in UTC: a local offset\n    // would shift every expiry date.\n    x + 1\n}\n\npub fn load() -> u32 {\n    0\n}\n",
            ),
            ("src/util.rs", "pub fn helper() -> u32 {\n    1\n}\n"),
            ("src/a.rs", "fn a() {\n    helper();\n    helper();\n}\n"),
            ("src/b.rs", "fn b() {\n    helper();\n}\n"),
        ],
    );
    let context = retrieve(
        &f.index,
        &DiskOnly,
        &query("expiry dates shift by the local timezone offset", 4000),
    );
    let first = &context.snippets[0];
    assert_eq!(
        (
            first.path.as_str(),
            first.kind,
            first.start_line,
            first.end_line
        ),
        ("src/store.rs", SnippetKind::Definition, 1, 5),
        "{:?}",
        paths(&context)
    );
    assert!(first.text.contains("expiry date"), "{}", first.text);
    // The passage is the definition holding the words, not the file's other one.
    assert!(!first.text.contains("pub fn load"), "{}", first.text);
}
