//! Definitions and references of one file, from its tree-sitter tags.
//!
//! The parse tree lives only inside [`extract`]: what comes out is plain data, so indexing a
//! workspace never holds more than one tree per thread.

use std::borrow::Cow;
use std::collections::HashSet;
use std::ops::Range;

use super::tags;
use super::{comments, macros};
use crate::languages::Language;

/// A definition: a named thing a reader may look for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Definition {
    pub name: String,
    /// The tags query's kind: `function`, `method`, `class`, `interface`, `module`, `macro`,
    /// `constant`, `type`, …
    pub kind: String,
    /// The name of the enclosing definition (a method's class or `impl` type), if any.
    pub container: Option<String>,
    /// Zero-based line of the name, and its column in characters.
    pub line: u32,
    pub column: u32,
    /// Zero-based lines the whole definition spans.
    pub start_line: u32,
    pub end_line: u32,
    /// The line that holds the name, trimmed (and capped).
    pub signature: String,
    /// The documentation comment right above it (or a Python docstring), if any.
    pub doc: Option<String>,
}

/// A use of a name: a call, a type implemented.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reference {
    pub name: String,
    pub kind: String,
    pub line: u32,
    pub column: u32,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Extracted {
    pub definitions: Vec<Definition>,
    pub references: Vec<Reference>,
}

#[derive(Debug, thiserror::Error)]
pub enum ExtractError {
    #[error("tree-sitter could not tag this file: {0}")]
    Tags(String),
}

/// Signatures longer than this are cut (a minified file's single line is not a signature).
const MAX_SIGNATURE: usize = 200;
const MAX_DOC_LINES: usize = 12;

/// How far into a Python definition its docstring is looked for, in bytes.
const MAX_DOCSTRING_SEARCH: usize = 8 * 1024;

/// Extracts the definitions and references of `source`.
pub fn extract(language: Language, source: &str) -> Result<Extracted, ExtractError> {
    extract_with(language, source, tags::of)
}

/// [`extract`] with every language's tags from its tags query, the walks of `tags/` aside:
/// the engine they replace, for `cargo xtask bench index` to measure them against.
pub fn extract_by_query(language: Language, source: &str) -> Result<Extracted, ExtractError> {
    extract_with(language, source, tags::of_query)
}

fn extract_with(
    language: Language,
    source: &str,
    tags_of: fn(Language, &str) -> tags::Found,
) -> Result<Extracted, ExtractError> {
    let parsed = parser_text(language, source);
    let (mut tags, has_error) = tags_of(language, &parsed)?;
    if has_error
        && matches!(language, Language::C | Language::Cpp)
        && let Some(blanked) = macros::blank_noise(source)
    {
        // Only what the second pass adds: the first pass saw the file as it is.
        let (second, _) = tags_of(language, &blanked)?;
        let known: HashSet<Range<usize>> = tags
            .iter()
            .filter(|tag| tag.is_definition)
            .map(|tag| tag.name_range.clone())
            .collect();
        tags.extend(second.into_iter().filter(|tag| {
            tag.is_definition
                && !known.contains(&tag.name_range)
                && source.get(tag.name_range.clone()) == blanked.get(tag.name_range.clone())
        }));
        tags.sort_by_key(|tag| tag.range.start);
    }

    // The generic declarator patterns also match a function's name; a function it is.
    let functions: HashSet<Range<usize>> = tags
        .iter()
        .filter(|tag| tag.is_definition && tag.kind == "function")
        .map(|tag| tag.name_range.clone())
        .collect();
    tags.retain(|tag| {
        !tag.is_definition || tag.kind == "function" || !functions.contains(&tag.name_range)
    });

    // Scopes that give definitions their container: other definitions, and implementation
    // references (a Rust `impl Type` block names the type its methods belong to).
    let scopes = Scopes::new(
        tags.iter()
            .filter(|tag| tag.is_definition || tag.kind == "implementation")
            .map(|tag| (tag.range.clone(), &source[tag.name_range.clone()]))
            .collect(),
    );
    let lines = Lines::new(source);

    let mut extracted = Extracted::default();
    for tag in &tags {
        let name = source[tag.name_range.clone()].to_owned();
        let kind = tag.kind.to_owned();
        let line = tag.row as u32;
        // Not `tag.line_range`: it starts after the line's indentation, which
        // put every indented name's column that many characters too far left.
        let (_, column) = line_and_column(source, tag.name_range.start);
        if tag.is_definition {
            extracted.definitions.push(Definition {
                container: scopes.container_of(&tag.range),
                line,
                column,
                start_line: lines.line_of(tag.range.start),
                end_line: lines.line_of(tag.range.end.saturating_sub(1).max(tag.range.start)),
                signature: signature(&source[tag.line_range.clone()]),
                doc: tag
                    .docs
                    .clone()
                    .filter(|doc| !doc.trim().is_empty())
                    .or_else(|| doc_comment(language, source, tag.range.start, tag.range.end)),
                name,
                kind,
            });
        } else {
            extracted.references.push(Reference {
                name,
                kind,
                line,
                column,
            });
        }
    }
    if matches!(language, Language::C | Language::Cpp) {
        add_missed_defines(source, &lines, &mut extracted.definitions);
    }
    Ok(extracted)
}

/// The text the parser is given for `source`: the same length and lines, so the tree's offsets
/// hold for `source` (see [`comments`]).
pub(super) fn parser_text(language: Language, source: &str) -> Cow<'_, str> {
    match language {
        Language::Python => {
            comments::blank_python_comments(source).map_or(Cow::Borrowed(source), Cow::Owned)
        }
        _ => Cow::Borrowed(source),
    }
}

/// The `#define`s the tags missed (those the errors of a parse without a preprocessor hid).
fn add_missed_defines(source: &str, lines: &Lines, definitions: &mut Vec<Definition>) {
    let tagged: HashSet<(u32, &str)> = definitions
        .iter()
        .filter(|definition| definition.kind == "macro")
        .map(|definition| (definition.line, definition.name.as_str()))
        .collect();
    let missed: Vec<Definition> = macros::defines(source)
        .into_iter()
        .map(|(name, directive)| {
            let line = lines.line_of(name.start);
            (name, directive, line)
        })
        .filter(|(name, _, line)| !tagged.contains(&(*line, &source[name.clone()])))
        .map(|(name, directive, line)| {
            let (line_start, column) = line_and_column(source, name.start);
            let line_end = source[name.end..]
                .find('\n')
                .map_or(source.len(), |i| name.end + i);
            Definition {
                name: source[name.clone()].to_owned(),
                kind: "macro".to_owned(),
                container: None,
                line,
                column,
                start_line: lines.line_of(directive.start),
                end_line: lines.line_of(directive.end.saturating_sub(1).max(directive.start)),
                signature: signature(&source[line_start..line_end]),
                doc: doc_comment(Language::C, source, directive.start, directive.end),
            }
        })
        .collect();
    definitions.extend(missed);
}

/// The ranges of a file's scopes, with their names, sorted by start (outer first), and the
/// innermost scope enclosing each: tags come properly nested (they are syntax nodes), so a
/// container is found by climbing parents, not by scanning every scope (a generated file has
/// tens of thousands).
struct Scopes<'a> {
    scopes: Vec<(Range<usize>, &'a str)>,
    parents: Vec<Option<usize>>,
}

impl<'a> Scopes<'a> {
    fn new(mut scopes: Vec<(Range<usize>, &'a str)>) -> Self {
        scopes.sort_by(|a, b| a.0.start.cmp(&b.0.start).then(b.0.end.cmp(&a.0.end)));
        let mut parents = Vec::with_capacity(scopes.len());
        let mut open: Vec<usize> = Vec::new();
        for (i, (range, _)) in scopes.iter().enumerate() {
            while open
                .last()
                .is_some_and(|&top| !contains(&scopes[top].0, range))
            {
                open.pop();
            }
            parents.push(open.last().copied());
            open.push(i);
        }
        Self { scopes, parents }
    }

    /// The name of the innermost scope enclosing `range`, other than `range` itself.
    fn container_of(&self, range: &Range<usize>) -> Option<String> {
        // The last scope starting at or before `range`: it encloses `range`, or it ended
        // before it and every enclosing scope is among its ancestors.
        let mut at = self
            .scopes
            .partition_point(|(scope, _)| scope.start <= range.start)
            .checked_sub(1);
        while let Some(i) = at {
            let (scope, name) = &self.scopes[i];
            if contains(scope, range) && scope != range {
                return Some((*name).to_owned());
            }
            at = self.parents[i];
        }
        None
    }
}

fn contains(outer: &Range<usize>, inner: &Range<usize>) -> bool {
    outer.start <= inner.start && inner.end <= outer.end
}

/// Line numbers of byte offsets, from the offsets of the line breaks.
struct Lines(Vec<usize>);

impl Lines {
    fn new(source: &str) -> Self {
        Self(
            source
                .bytes()
                .enumerate()
                .filter(|&(_, b)| b == b'\n')
                .map(|(i, _)| i)
                .collect(),
        )
    }

    /// Zero-based line of `byte`.
    fn line_of(&self, byte: usize) -> u32 {
        self.0.partition_point(|&newline| newline < byte) as u32
    }
}

/// Where the line holding byte `offset` starts, and `offset`'s column on it in characters (the
/// index's unit; counted only when the line so far is not plain ASCII).
pub(super) fn line_and_column(source: &str, offset: usize) -> (usize, u32) {
    let line_start = memchr::memrchr(b'\n', &source.as_bytes()[..offset]).map_or(0, |i| i + 1);
    let prefix = &source[line_start..offset];
    let column = if prefix.is_ascii() {
        prefix.len()
    } else {
        prefix.chars().count()
    };
    (line_start, column as u32)
}

pub(super) fn signature(line: &str) -> String {
    let line = line.trim();
    match line.char_indices().nth(MAX_SIGNATURE) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line.to_owned(),
    }
}

/// Comment lines directly above a definition (no blank line between), markers stripped; for
/// Python, the docstring that opens the body.
pub(super) fn doc_comment(
    language: Language,
    source: &str,
    start: usize,
    end: usize,
) -> Option<String> {
    if language == Language::Python
        && let Some(doc) = python_docstring(&source[start..end.min(source.len())])
    {
        return Some(doc);
    }
    let before = &source[..start];
    let before = &before[..before.rfind('\n').map_or(0, |i| i + 1)];
    let mut lines: Vec<&str> = Vec::new();
    for line in before.lines().rev() {
        let trimmed = line.trim();
        let is_comment = ["///", "//!", "//", "#", "/*", "*", "--"]
            .iter()
            .any(|marker| trimmed.starts_with(marker))
            && !trimmed.starts_with("#[")
            && !trimmed.starts_with("#include")
            && !trimmed.starts_with("#define");
        // Rust attributes and Java annotations sit between a doc and its item.
        let is_attribute = trimmed.starts_with("#[") || trimmed.starts_with('@');
        if is_attribute && lines.is_empty() {
            continue;
        }
        if !is_comment || lines.len() == MAX_DOC_LINES {
            break;
        }
        lines.push(trimmed);
    }
    if lines.is_empty() {
        return None;
    }
    lines.reverse();
    let text: Vec<&str> = lines
        .iter()
        .map(|line| {
            line.trim_start_matches(['/', '*', '#', '!', '-'])
                .trim_end_matches("*/")
                .trim()
        })
        .filter(|line| !line.is_empty())
        .collect();
    (!text.is_empty()).then(|| text.join("\n"))
}

fn python_docstring(definition: &str) -> Option<String> {
    // The header ends within its first few lines; a class's whole body is no place to look
    // (that made every class cost its size again).
    let mut cut = definition.len().min(MAX_DOCSTRING_SEARCH);
    while !definition.is_char_boundary(cut) {
        cut -= 1;
    }
    let definition = &definition[..cut];
    let body = &definition[definition.find(":\n").or_else(|| definition.find(':'))? + 1..];
    let body = body.trim_start();
    let quote = ["\"\"\"", "'''"]
        .into_iter()
        .find(|q| body.starts_with(q))?;
    let rest = &body[3..];
    let doc = &rest[..rest.find(quote)?];
    let doc = doc.trim();
    (!doc.is_empty()).then(|| doc.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn definitions(language: Language, source: &str) -> Vec<(String, String, Option<String>, u32)> {
        extract(language, source)
            .unwrap()
            .definitions
            .into_iter()
            .map(|d| (d.name, d.kind, d.container, d.line))
            .collect()
    }

    /// The work parsing `source` takes: the events of tree-sitter's log (each character the
    /// lexer examines, each parse action). `None` when it passed `budget` (the parse is stopped
    /// there: the old quadratic one ran for minutes). The tags query's side is held by
    /// `languages::tests::no_tags_query_repeats_a_pattern` (its engine exposes no count).
    fn parsing_work(language: Language, source: &str, budget: u64) -> Option<u64> {
        use std::ops::ControlFlow;
        use std::sync::Arc;
        use std::sync::atomic::{AtomicU64, Ordering};

        let events = Arc::new(AtomicU64::new(0));
        let mut parser = language.parser();
        let counter = Arc::clone(&events);
        parser.set_logger(Some(Box::new(move |_, _| {
            counter.fetch_add(1, Ordering::Relaxed);
        })));
        let text = parser_text(language, source);
        let bytes = text.as_bytes();
        let mut stop_over_budget = |_: &tree_sitter::ParseState| {
            if events.load(Ordering::Relaxed) > budget {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        };
        let options = tree_sitter::ParseOptions::new().progress_callback(&mut stop_over_budget);
        parser.parse_with_options(
            &mut |offset, _| &bytes[offset.min(bytes.len())..],
            None,
            Some(options),
        )?;
        Some(events.load(Ordering::Relaxed))
    }

    /// `unit` repeated to about `size` bytes after `head`.
    fn file_of(head: &str, unit: &str, size: usize) -> String {
        let mut file = head.to_owned();
        while file.len() < size {
            file.push_str(unit);
        }
        file
    }

    #[test]
    fn parsing_a_run_of_comment_lines_costs_what_ordinary_code_of_that_size_costs() {
        const COMMENT: &str = "a comment line of an ordinary length, some fifty bytes";
        // (language, a definition, an ordinary unit of code, comment markers, bytes)
        let cases: [(Language, &str, &str, &[&str], usize); 10] = [
            (
                Language::Python,
                "def f():\n    pass\n",
                "def add(a):\n    \"\"\"Adds.\"\"\"\n    b = a + 1  # one\n    return b * 2\n\n",
                &["# ", "    # "],
                480 * 1024,
            ),
            (
                Language::JavaScript,
                "function f() {}\n",
                "/** Adds. */\nfunction add(a) {\n  const b = a + 1; // one\n  return b * 2;\n}\n",
                &["// ", "  // ", "/* "],
                480 * 1024,
            ),
            (
                Language::TypeScript,
                "function f(): void {}\n",
                "/** Adds. */\nfunction add(a: number): number {\n  return a + 1; // one\n}\n",
                &["// "],
                96 * 1024,
            ),
            (
                Language::Tsx,
                "function f() {}\n",
                "/** Adds. */\nfunction add(a) {\n  return a + 1; // one\n}\n",
                &["// "],
                96 * 1024,
            ),
            (
                Language::Go,
                "package p\n\nfunc f() {}\n",
                "// add adds.\nfunc add(a int) int {\n\tb := a + 1 // one\n\treturn b * 2\n}\n",
                &["// "],
                96 * 1024,
            ),
            (
                Language::Ruby,
                "def f\nend\n",
                "# Adds.\ndef add(a)\n  b = a + 1 # one\n  b * 2\nend\n",
                &["# ", "  # "],
                96 * 1024,
            ),
            (
                Language::Rust,
                "fn f() {}\n",
                "/// Adds.\nfn add(a: i32) -> i32 {\n    let b = a + 1; // one\n    b * 2\n}\n",
                &["// ", "/// "],
                96 * 1024,
            ),
            (
                Language::Java,
                "class f {}\n",
                "/** Adds. */\nclass B { int add(int a) { int b = a + 1; // one\n return b * 2; } }\n",
                &["// "],
                96 * 1024,
            ),
            (
                Language::C,
                "int f(void) { return 0; }\n",
                "/* Adds. */\nint add(int a) {\n  int b = a + 1; // one\n  return b * 2;\n}\n",
                &["// "],
                96 * 1024,
            ),
            (
                Language::Cpp,
                "int f() { return 0; }\n",
                "// Adds.\nint add(int a) {\n  int b = a + 1; // one\n  return b * 2;\n}\n",
                &["// "],
                96 * 1024,
            ),
        ];
        for (language, head, unit, markers, size) in cases {
            let ordinary = file_of(head, unit, size);
            let ordinary_work =
                parsing_work(language, &ordinary, u64::MAX).expect("an unbounded parse finishes");
            for marker in markers {
                let close = if marker.starts_with("/*") { " */" } else { "" };
                let comments = file_of(head, &format!("{marker}{COMMENT}{close}\n"), size);
                let budget = 3 * ordinary_work;
                let work = parsing_work(language, &comments, budget);
                let Some(work) = work else {
                    panic!(
                        "{language:?}, comments {marker:?}: parsing {} KB took over {budget} \
                         events, 3× ordinary code of that size ({ordinary_work})",
                        comments.len() / 1024
                    )
                };
                assert!(
                    work <= budget,
                    "{language:?}, comments {marker:?}: {work} events (ordinary {ordinary_work})"
                );
                let found = extract(language, &comments).unwrap();
                assert!(
                    found.definitions.iter().any(|d| d.name == "f"),
                    "{language:?}: {:?}",
                    found.definitions
                );
            }
        }
    }

    fn has(
        defs: &[(String, String, Option<String>, u32)],
        name: &str,
        kind: &str,
        container: Option<&str>,
    ) -> bool {
        defs.iter()
            .any(|(n, k, c, _)| n == name && k == kind && c.as_deref() == container)
    }

    #[test]
    fn rust_definitions_with_containers_docs_and_the_extended_query() {
        let source = r#"
/// Adds.
#[inline]
pub fn add(a: i32) -> i32 { a }

pub struct Point { x: i32 }

impl Point {
    /// Length.
    pub fn len(&self) -> i32 { helper(self.x) }
}

pub trait Shape {
    fn area(&self) -> f64;
}

pub const LIMIT: usize = 10;
static mut COUNTER: u32 = 0;
extern "C" { fn abs(x: i32) -> i32; }
"#;
        let extracted = extract(Language::Rust, source).unwrap();
        let defs: Vec<_> = extracted
            .definitions
            .iter()
            .map(|d| (d.name.clone(), d.kind.clone(), d.container.clone(), d.line))
            .collect();
        assert!(has(&defs, "add", "function", None), "{defs:?}");
        assert!(has(&defs, "Point", "class", None), "{defs:?}");
        assert!(has(&defs, "len", "method", Some("Point")), "{defs:?}");
        assert!(has(&defs, "area", "function", Some("Shape")), "{defs:?}");
        assert!(has(&defs, "LIMIT", "constant", None), "{defs:?}");
        assert!(has(&defs, "COUNTER", "constant", None), "{defs:?}");
        assert!(has(&defs, "abs", "function", None), "{defs:?}");
        let add = extracted
            .definitions
            .iter()
            .find(|d| d.name == "add")
            .unwrap();
        assert_eq!(add.doc.as_deref(), Some("Adds."));
        assert_eq!(add.signature, "pub fn add(a: i32) -> i32 { a }");
        assert_eq!((add.line, add.column), (3, 7));
        let len = extracted
            .definitions
            .iter()
            .find(|d| d.name == "len")
            .unwrap();
        assert_eq!((len.start_line, len.end_line), (9, 9));
        assert_eq!(len.doc.as_deref(), Some("Length."));
        assert!(
            extracted
                .references
                .iter()
                .any(|r| r.name == "helper" && r.kind == "call")
        );
    }

    #[test]
    fn rust_calls_through_a_path_or_with_turbofish_are_references() {
        let source = "fn f() {
    shapes::square(2);
    parse::<u8>(\"1\");
    a::b::<T>(x);
    log::info!(\"x\");
}
";
        let extracted = extract(Language::Rust, source).unwrap();
        let calls: Vec<(&str, u32)> = extracted
            .references
            .iter()
            .filter(|r| r.kind == "call")
            .map(|r| (r.name.as_str(), r.line))
            .collect();
        for expected in [("square", 1), ("parse", 2), ("b", 3), ("info", 4)] {
            assert!(calls.contains(&expected), "{expected:?} in {calls:?}");
        }
    }

    #[test]
    fn python_typescript_c_go_definitions() {
        let python = definitions(
            Language::Python,
            "class Greeter:\n    def hello(self):\n        \"\"\"Say hi.\"\"\"\n        print('hi')\n",
        );
        assert!(has(&python, "Greeter", "class", None), "{python:?}");
        assert!(
            has(&python, "hello", "function", Some("Greeter")),
            "{python:?}"
        );
        let doc = extract(Language::Python, "def f():\n    '''Docs here.'''\n")
            .unwrap()
            .definitions[0]
            .doc
            .clone();
        assert_eq!(doc.as_deref(), Some("Docs here."));

        let ts = definitions(
            Language::TypeScript,
            "interface Shape { area(): number }\nexport function make(): Shape { return null as any }\nclass Box { size() { return 1 } }\n",
        );
        assert!(has(&ts, "Shape", "interface", None), "{ts:?}");
        assert!(has(&ts, "make", "function", None), "{ts:?}");
        assert!(has(&ts, "size", "method", Some("Box")), "{ts:?}");

        let c = definitions(
            Language::C,
            "#define MAX 3\nenum color { RED, GREEN };\nstruct point { int x; };\nint add(int a, int b) { return a + b; }\n",
        );
        for (name, kind) in [("MAX", "macro"), ("point", "class"), ("add", "function")] {
            assert!(has(&c, name, kind, None), "{name}: {c:?}");
        }
        assert!(has(&c, "RED", "constant", Some("color")), "{c:?}");

        let go = definitions(
            Language::Go,
            "package main\nfunc Run() {}\ntype T struct{}\nfunc (t T) M() {}\n",
        );
        assert!(has(&go, "Run", "function", None), "{go:?}");
        assert!(
            go.iter().any(|(n, k, _, _)| n == "M" && k == "method"),
            "{go:?}"
        );
    }

    #[test]
    fn rust_variants_fields_associated_types_and_trait_consts() {
        let rust = definitions(
            Language::Rust,
            "enum Shape { Circle(f64), Square { side: f64 } }\nstruct P { x: i32, pub y: i32 }\ntrait T {\n    type Item;\n    const NAME: &'static str;\n}\n",
        );
        assert!(has(&rust, "Circle", "constant", Some("Shape")), "{rust:?}");
        assert!(has(&rust, "Square", "constant", Some("Shape")), "{rust:?}");
        assert!(has(&rust, "side", "field", Some("Square")), "{rust:?}");
        assert!(has(&rust, "x", "field", Some("P")), "{rust:?}");
        assert!(has(&rust, "y", "field", Some("P")), "{rust:?}");
        assert!(has(&rust, "Item", "type", Some("T")), "{rust:?}");
        assert!(has(&rust, "NAME", "constant", Some("T")), "{rust:?}");
    }

    #[test]
    fn python_class_attributes_and_guarded_or_multiple_assignments() {
        let python = definitions(
            Language::Python,
            "class A:\n    __slots__ = ()\n    limit: int = 3\nX, Y = 1, 2\n(P, Q) = 3, 4\nif True:\n    IF = 1\nelif False:\n    ELIF = 2\nelse:\n    ELSE = 3\ntry:\n    TRY = 1\nexcept ImportError:\n    EXCEPT = 2\ndef f():\n    local = 1\n",
        );
        assert!(
            has(&python, "__slots__", "constant", Some("A")),
            "{python:?}"
        );
        assert!(has(&python, "limit", "constant", Some("A")), "{python:?}");
        for name in ["X", "Y", "P", "Q", "IF", "ELIF", "ELSE", "TRY", "EXCEPT"] {
            assert!(has(&python, name, "constant", None), "{name}: {python:?}");
        }
        assert!(!python.iter().any(|(n, ..)| n == "local"), "{python:?}");
    }

    #[test]
    fn c_members_globals_unions_and_typedefs() {
        let source = "#ifndef H\n#define H\nstruct s { int a; char *b; int c[4]; void (*d)(int); };\ntypedef union u { int i; } u_t;\ntypedef void *handle;\ntypedef int (*callback)(int);\ntypedef int table[8];\ntypedef void (APIENTRYP PFNGLCULLFACEPROC) (GLenum mode);\nextern int counter;\nconst char *name = \"x\";\nint values[3];\n#endif\nint f(void) { int local = 0; return local; }\n";
        let c = definitions(Language::C, source);
        for member in ["a", "b", "c", "d"] {
            assert!(has(&c, member, "field", Some("s")), "{member}: {c:?}");
        }
        // The typedef that declares the union encloses it.
        assert!(has(&c, "u", "class", Some("u_t")), "{c:?}");
        assert!(has(&c, "i", "field", Some("u")), "{c:?}");
        for name in ["u_t", "handle", "callback", "table", "PFNGLCULLFACEPROC"] {
            assert!(has(&c, name, "type", None), "{name}: {c:?}");
        }
        for name in ["counter", "name", "values"] {
            assert!(has(&c, name, "constant", None), "{name}: {c:?}");
        }
        assert!(!c.iter().any(|(n, ..)| n == "local"), "{c:?}");
        let cpp = definitions(Language::Cpp, source);
        assert!(has(&cpp, "a", "field", Some("s")), "{cpp:?}");
        assert!(has(&cpp, "counter", "constant", None), "{cpp:?}");
    }

    #[test]
    fn c_declarations_that_macros_and_nested_declarators_hide() {
        let source = "#define GLAPI extern\nGLAPI void * GLAPIENTRY gluNewQuadric (void);\n\
            extern int aio_read (int fd) __THROW __nonnull ((1));\n\
            enum { A, B\n#define B B\n};\n\
            struct s { char **names; int *rows[4]; };\n\
            typedef const char *(APIENTRYP PFNQUERYPROC) (int name);\n\
            typedef int **matrix;\n\
            char ***globals;\n\
            int f(void) { int **local = 0; return 0; }\n";
        let c = definitions(Language::C, source);
        for (name, kind) in [
            ("GLAPI", "macro"),
            ("B", "macro"),
            ("gluNewQuadric", "function"),
            ("aio_read", "function"),
            ("PFNQUERYPROC", "type"),
            ("matrix", "type"),
            ("globals", "constant"),
            ("f", "function"),
        ] {
            assert!(has(&c, name, kind, None), "{name}: {c:?}");
        }
        assert!(has(&c, "names", "field", Some("s")), "{c:?}");
        assert!(has(&c, "rows", "field", Some("s")), "{c:?}");
        assert!(!c.iter().any(|(n, ..)| n == "local"), "{c:?}");
        // A prototype is a function, not also a variable.
        assert_eq!(
            c.iter().filter(|(n, ..)| n == "aio_read").count(),
            1,
            "{c:?}"
        );
        assert_eq!(c.iter().filter(|(n, ..)| n == "B").count(), 2, "{c:?}");
    }

    #[test]
    fn broken_or_odd_input_yields_what_can_be_found() {
        let defs = definitions(Language::Rust, "fn ok() {}\nfn broken( {\n");
        assert!(has(&defs, "ok", "function", None), "{defs:?}");
        assert!(extract(Language::Ruby, "").unwrap().definitions.is_empty());
        let long = format!("function f() {{ return '{}' }}", "x".repeat(5000));
        let defs = extract(Language::JavaScript, &long).unwrap().definitions;
        assert!(defs[0].signature.chars().count() <= MAX_SIGNATURE + 1);
    }
}
