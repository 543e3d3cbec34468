//! Python definitions from tokens and indentation: classes and functions at any depth, and
//! the names assigned at module level (also under `if`/`try`/`for`) and in class bodies.

use super::Out;
use super::lexer::{Tok, Token};

const KEYWORDS: &[&str] = &[
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue",
    "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import",
    "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while",
    "with", "yield", "print", "exec",
];

struct Scope {
    indent: usize,
    class: bool,
    name: String,
    /// The definition it is the body of, whose last line is known when it closes.
    definition: usize,
}

pub fn scan(source: &str, tokens: &[Token], out: &mut Out) {
    let bytes = source.as_bytes();
    let mut scopes: Vec<Scope> = Vec::new();
    let mut depth = 0usize;
    let mut previous: Option<&Token> = None;
    for (i, token) in tokens.iter().enumerate() {
        // A statement starts a logical line: a new line outside brackets, or after `;`.
        let starts = depth == 0 && previous.is_none_or(|p| p.line < token.line || p.is(b';'));
        let last_line = previous.map_or(0, |p| p.line);
        previous = Some(token);
        match token.kind {
            Tok::Punct(b'(' | b'[' | b'{') => depth += 1,
            Tok::Punct(b')' | b']' | b'}') => depth = depth.saturating_sub(1),
            _ => {}
        }
        if !starts || token.kind != Tok::Ident {
            continue;
        }
        let line_start =
            memchr::memrchr(b'\n', &bytes[..token.start as usize]).map_or(0, |n| n + 1);
        let indent = token.start as usize - line_start;
        let first_of_line = bytes[line_start..token.start as usize]
            .iter()
            .all(|b| matches!(b, b' ' | b'\t' | b'\x0c'));
        if first_of_line {
            while scopes.last().is_some_and(|s| s.indent >= indent) {
                if let Some(scope) = scopes.pop() {
                    close(out, &scope, last_line);
                }
            }
        }
        let text = token.text(source);
        let container = scopes.last().map(|s| s.name.as_str());
        let mut keyword = i;
        if text == "async" {
            keyword += 1;
        }
        let keyword_text = tokens.get(keyword).map_or("", |t| t.text(source));
        if matches!(keyword_text, "def" | "class")
            && let Some(name) = tokens.get(keyword + 1).filter(|t| t.kind == Tok::Ident)
        {
            let class = keyword_text == "class";
            out.add(name, if class { "class" } else { "function" }, container);
            scopes.push(Scope {
                definition: out.definitions.len() - 1,
                indent: if first_of_line { indent } else { usize::MAX },
                class,
                name: name.text(source).to_owned(),
            });
            continue;
        }
        if KEYWORDS.contains(&text) {
            continue;
        }
        let names = assigned(tokens, i);
        // `name = lambda …` defines a function at any depth; other assignments are
        // definitions at module and class level only.
        let lambda = names.len() == 1
            && tokens
                .get(i + 2)
                .is_some_and(|t| t.is_word(source, "lambda"))
            && tokens[i + 1].is(b'=');
        if lambda {
            out.add(names[0], "function", container);
        } else if scopes.last().is_none_or(|s| s.class) {
            for name in names {
                out.add(name, "constant", container);
            }
        }
    }
    let last_line = tokens.last().map_or(0, |t| t.line);
    while let Some(scope) = scopes.pop() {
        close(out, &scope, last_line);
    }
}

/// Ends a class's or function's range at the last line of its body.
fn close(out: &mut Out, scope: &Scope, last_line: u32) {
    if let Some(definition) = out.definitions.get_mut(scope.definition) {
        definition.end_line = last_line.max(definition.start_line);
    }
}

/// The names a statement starting at `i` assigns: `a = …`, `a: T = …`, `a, b = …`.
fn assigned(tokens: &[Token], i: usize) -> Vec<&Token> {
    let mut names = vec![&tokens[i]];
    let mut at = i + 1;
    while tokens.get(at).is_some_and(|t| t.is(b','))
        && tokens.get(at + 1).is_some_and(|t| t.kind == Tok::Ident)
    {
        names.push(&tokens[at + 1]);
        at += 2;
    }
    let Some(next) = tokens.get(at) else {
        return Vec::new();
    };
    let line = tokens[i].line;
    let is_assignment = |at: usize| {
        tokens.get(at).is_some_and(|t| t.is(b'='))
            && !tokens
                .get(at + 1)
                .is_some_and(|t| t.is(b'=') && t.start == tokens[at].end)
    };
    if is_assignment(at) {
        return names;
    }
    if names.len() == 1 && next.is(b':') && !tokens.get(at + 1).is_some_and(|t| t.is(b'=')) {
        // An annotation: an assignment only when it has a value (ctags agrees).
        let mut depth = 0usize;
        for (j, t) in tokens.iter().enumerate().skip(at + 1) {
            match t.kind {
                Tok::Punct(b'(' | b'[' | b'{') => depth += 1,
                Tok::Punct(b')' | b']' | b'}') => depth = depth.saturating_sub(1),
                _ if depth == 0 && t.line != line => return Vec::new(),
                Tok::Punct(b'=') if depth == 0 => {
                    return if is_assignment(j) { names } else { Vec::new() };
                }
                _ => {}
            }
        }
    }
    Vec::new()
}
