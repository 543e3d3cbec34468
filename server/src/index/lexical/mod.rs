//! Phase 1 of a cold index: definitions found by a lexical scan, no parse tree, so that a
//! workspace is searchable in the time a tags program takes; the tree-sitter pass (phase 2)
//! then replaces each file's entries with the full extraction — except where the scan is
//! complete already.
//!
//! One scanner per language reads the tokens of [`lexer`] (comments skipped, strings hidden)
//! and yields definitions with the tree-sitter extractor's kind names, line, column, signature
//! line, the lines of its body where a block or indentation shows them, and, where the
//! scanner tracks blocks anyway, the container; and the call sites (a name, not a keyword,
//! followed by `(`), the references the grammars' tags queries mostly find, so the
//! definition→reference graph exists from the start. No doc comments, and no type
//! references: those come with phase 2.
//!
//! Rust's scanner ([`rust`]) is the exception: it gives everything the tree-sitter walk gives
//! (doc comments, spans, containers, calls and `impl` references, macro tokens left alone),
//! and `tests` holds the two equal on every Rust file of this repository, so a Rust file is
//! complete after phase 1 ([`is_complete`]): Rust is most of what a cold index of a Rust
//! workspace spends its time on, and the parse was most of that. Every supported language
//! has a scanner; one added without a scanner gets `None` here, and its files have no
//! entries until phase 2.

mod c;
mod go;
mod java;
mod js;
mod lexer;
mod python;
mod ruby;
mod rust;

use super::extract::{Definition, Extracted, Reference, line_and_column, signature};
use crate::languages::Language;
use lexer::Token;

/// Whether the scan of `language` is complete: the same entries as the tree-sitter extraction
/// (held equal on real files by `tests`), so its files need no tree-sitter pass.
pub fn is_complete(language: Language) -> bool {
    language == Language::Rust
}

/// The definitions of `source` found lexically (`None` would mean `language` has no scanner).
pub fn scan(language: Language, source: &str) -> Option<Extracted> {
    let tokens = lexer::tokens(language, source);
    let mut out = Out::new(source);
    let blocks = match language {
        Language::Python | Language::Ruby => None,
        Language::Go => Some(true),
        _ => Some(false),
    };
    match language {
        Language::Rust => return Some(rust::scan(source, &tokens)),
        Language::Python => python::scan(source, &tokens, &mut out),
        // A `.h` file may be C++: C is read with C++'s few extra forms, as ctags reads both.
        Language::C | Language::Cpp => c::scan(source, &tokens, &mut out),
        Language::Go => go::scan(source, &tokens, &mut out),
        Language::Java => java::scan(source, &tokens, &mut out),
        Language::JavaScript | Language::TypeScript | Language::Tsx => {
            js::scan(source, &tokens, &mut out)
        }
        Language::Ruby => ruby::scan(source, &tokens, &mut out),
    }
    if let Some(line_ends_statements) = blocks {
        block_ends(&tokens, &mut out, line_ends_statements);
    }
    let references = calls(language, source, &tokens, &out.name_starts);
    Some(Extracted {
        definitions: out.definitions,
        references,
    })
}

/// Words that a `(` follows without making a call (`if (`, `sizeof(`, `def f(` is a
/// definition and is excluded by position instead), in any supported language.
const NOT_CALLS: &[&str] = &[
    "alignof",
    "and",
    "assert",
    "await",
    "case",
    "catch",
    "decltype",
    "defined",
    "del",
    "do",
    "elif",
    "else",
    "except",
    "fn",
    "for",
    "foreach",
    "func",
    "function",
    "if",
    "in",
    "is",
    "lambda",
    "match",
    "new",
    "noexcept",
    "not",
    "or",
    "return",
    "sizeof",
    "static_assert",
    "switch",
    "synchronized",
    "throw",
    "typeof",
    "typeid",
    "until",
    "unless",
    "when",
    "while",
    "with",
    "yield",
];

/// The call sites of `tokens`: a name followed by `(` (for Rust also `name!`), that is no
/// definition's name and no keyword. Kind `call`, as the tags queries name them.
fn calls(
    language: Language,
    source: &str,
    tokens: &[Token],
    definitions: &[u32],
) -> Vec<Reference> {
    let mut defined = definitions.to_vec();
    defined.sort_unstable();
    let mut references = Vec::new();
    for pair in tokens.windows(2) {
        let (token, next) = (&pair[0], &pair[1]);
        let called = next.is(b'(')
            || (language == Language::Rust && next.is(b'!') && next.start == token.end);
        if !called || !token.is_name() {
            continue;
        }
        let name = token.text(source);
        if token.kind == lexer::Tok::Ident && NOT_CALLS.contains(&name) {
            continue;
        }
        if defined.binary_search(&token.start).is_ok() {
            continue;
        }
        references.push(Reference {
            name: name.to_owned(),
            kind: "call".to_owned(),
            line: token.line,
            column: line_and_column(source, token.start as usize).1,
        });
    }
    references
}

/// The definitions found so far, with what turns a token into one.
pub(super) struct Out<'a> {
    source: &'a str,
    pub definitions: Vec<Definition>,
    /// Where each definition's name starts (to find its token again).
    name_starts: Vec<u32>,
}

impl<'a> Out<'a> {
    fn new(source: &'a str) -> Self {
        Self {
            source,
            definitions: Vec::new(),
            name_starts: Vec::new(),
        }
    }

    /// Records the definition named by `name`.
    pub fn add(&mut self, name: &Token, kind: &str, container: Option<&str>) {
        let text = name.text(self.source);
        if text.is_empty() {
            return;
        }
        let start = name.start as usize;
        let (line_start, column) = line_and_column(self.source, start);
        let line_end = memchr::memchr(b'\n', &self.source.as_bytes()[start..])
            .map_or(self.source.len(), |i| start + i);
        self.name_starts.push(name.start);
        self.definitions.push(Definition {
            name: text.to_owned(),
            kind: kind.to_owned(),
            container: container.map(str::to_owned),
            line: name.line,
            column,
            start_line: name.line,
            end_line: name.line,
            signature: signature(&self.source[line_start..line_end]),
            doc: None,
        });
    }
}

/// How far past a name the block that makes a definition's body may start.
const MAX_HEADER_TOKENS: usize = 512;

/// Gives each definition of a brace language the lines its body spans: the block that opens
/// after its name, before its statement ends (`;`, `,`, a closing bracket, or for Go the end
/// of the line outside brackets). Retrieval shows a definition by its range, so even a
/// lexical entry should cover the body.
fn block_ends(tokens: &[Token], out: &mut Out, line_ends_statements: bool) {
    // The matching `}` of every `{`.
    let mut closes = vec![u32::MAX; tokens.len()];
    let mut open = Vec::new();
    for (i, token) in tokens.iter().enumerate() {
        if token.is(b'{') {
            open.push(i);
        } else if token.is(b'}')
            && let Some(start) = open.pop()
        {
            closes[start] = i as u32;
        }
    }
    for (definition, start) in out.definitions.iter_mut().zip(&out.name_starts) {
        let Ok(name) = tokens.binary_search_by_key(start, |t| t.start) else {
            continue;
        };
        let mut depth = 0usize;
        let mut line = tokens[name].line;
        for i in name + 1..tokens.len().min(name + MAX_HEADER_TOKENS) {
            let token = &tokens[i];
            if line_ends_statements && depth == 0 && token.line != line {
                break;
            }
            line = token.line;
            match token.kind {
                lexer::Tok::Punct(b'(' | b'[') => depth += 1,
                lexer::Tok::Punct(b')' | b']') if depth == 0 => break,
                lexer::Tok::Punct(b')' | b']') => depth -= 1,
                lexer::Tok::Punct(b';' | b',' | b'}') if depth == 0 => break,
                lexer::Tok::Punct(b'{') => {
                    if let Some(close) = tokens.get(closes[i] as usize) {
                        definition.end_line = close.line;
                    }
                    break;
                }
                _ => {}
            }
        }
    }
}

/// The index just past the group that opens at `open` (a `(`, `[`, `{` or `<`), or the end.
fn skip_group(tokens: &[Token], open: usize) -> usize {
    let Some(first) = tokens.get(open) else {
        return tokens.len();
    };
    let (opening, closing) = match first.kind {
        lexer::Tok::Punct(b'(') => (b'(', b')'),
        lexer::Tok::Punct(b'[') => (b'[', b']'),
        lexer::Tok::Punct(b'{') => (b'{', b'}'),
        lexer::Tok::Punct(b'<') => (b'<', b'>'),
        _ => return open + 1,
    };
    let mut depth = 0usize;
    for (i, token) in tokens.iter().enumerate().skip(open) {
        if token.is(opening) {
            depth += 1;
        } else if token.is(closing) {
            depth -= 1;
            if depth == 0 {
                return i + 1;
            }
        }
    }
    tokens.len()
}

#[cfg(test)]
mod tests;
