//! JavaScript and TypeScript definitions from tokens: functions (declared, or arrow functions
//! and function expressions bound to a name), classes and their methods, TypeScript
//! interfaces and namespaces.

use super::Out;
use super::lexer::{Tok, Token};
use super::skip_group;

const MODIFIERS: &[&str] = &[
    "static",
    "async",
    "get",
    "set",
    "public",
    "private",
    "protected",
    "readonly",
    "abstract",
    "override",
    "declare",
    "accessor",
];

const NOT_METHODS: &[&str] = &[
    "if",
    "for",
    "while",
    "switch",
    "catch",
    "function",
    "return",
    "constructor",
    "super",
];

pub fn scan(source: &str, tokens: &[Token], out: &mut Out) {
    // Each open brace: the class whose body it is (`Some`), or anything else (`None`).
    let mut frames: Vec<Option<String>> = Vec::new();
    let mut pending: Option<String> = None;
    let mut depth = 0usize;
    let ident = |i: usize| tokens.get(i).filter(|t| t.kind == Tok::Ident);
    let mut i = 0;
    while i < tokens.len() {
        let token = &tokens[i];
        let class_body = frames.last().and_then(Option::as_deref);
        match token.kind {
            Tok::Punct(b'{') => {
                frames.push(pending.take());
                depth = 0;
            }
            Tok::Punct(b'}') => {
                frames.pop();
            }
            Tok::Punct(b'(' | b'[') => depth += 1,
            Tok::Punct(b')' | b']') => depth = depth.saturating_sub(1),
            Tok::Ident if !(i > 0 && tokens[i - 1].is(b'.')) => {
                let text = token.text(source);
                if let Some(class) = class_body
                    && depth == 0
                    && member_start(source, tokens, i)
                    && !MODIFIERS.contains(&text)
                    && !NOT_METHODS.contains(&text)
                    && tokens.get(i + 1).is_some_and(|t| t.is(b'(') || t.is(b'<'))
                {
                    out.add(token, "method", Some(class));
                    i += 1;
                    continue;
                }
                match text {
                    "function" => {
                        let at = if tokens.get(i + 1).is_some_and(|t| t.is(b'*')) {
                            i + 2
                        } else {
                            i + 1
                        };
                        if let Some(name) = ident(at) {
                            out.add(name, "function", None);
                            i = at + 1;
                            continue;
                        }
                    }
                    "class" => {
                        if let Some(name) = ident(i + 1).filter(|t| t.text(source) != "extends") {
                            out.add(name, "class", None);
                            pending = Some(name.text(source).to_owned());
                            i += 2;
                            continue;
                        }
                    }
                    "interface" => {
                        if let Some(name) = ident(i + 1) {
                            out.add(name, "interface", None);
                            i += 2;
                            continue;
                        }
                    }
                    "namespace" | "module"
                        if ident(i + 1).is_some()
                            && tokens.get(i + 2).is_some_and(|t| t.is(b'{') || t.is(b'.')) =>
                    {
                        if let Some(name) = ident(i + 1) {
                            out.add(name, "module", None);
                            i += 2;
                            continue;
                        }
                    }
                    "const" | "let" | "var" => {
                        if let Some(name) = ident(i + 1)
                            && bound_function(source, tokens, i + 2)
                        {
                            out.add(name, "function", None);
                            i += 2;
                            continue;
                        }
                    }
                    _ => {}
                }
            }
            _ => {}
        }
        i += 1;
    }
}

/// Whether the name at `i` starts a class member: after the body's `{`, a `;`, a member's
/// closing `}`, a modifier, a generator's `*`, or on a line of its own.
fn member_start(source: &str, tokens: &[Token], i: usize) -> bool {
    let Some(previous) = i.checked_sub(1).map(|p| &tokens[p]) else {
        return false;
    };
    match previous.kind {
        Tok::Punct(b'{' | b'}' | b';' | b'*' | b'#') => true,
        Tok::Ident => MODIFIERS.contains(&previous.text(source)) || previous.line < tokens[i].line,
        _ => previous.line < tokens[i].line && !previous.is(b'.') && !previous.is(b'='),
    }
}

/// Whether what follows a bound name (from `at`, its optional type annotation skipped) is a
/// function: `= function`, `= async …`, `= (…) =>`, `= x =>`.
fn bound_function(source: &str, tokens: &[Token], at: usize) -> bool {
    let mut at = at;
    if tokens.get(at).is_some_and(|t| t.is(b':')) {
        // A type annotation: up to the `=` outside brackets.
        let mut depth = 0usize;
        while let Some(t) = tokens.get(at) {
            match t.kind {
                Tok::Punct(b'(' | b'[' | b'{' | b'<') => depth += 1,
                Tok::Punct(b')' | b']' | b'}' | b'>') => depth = depth.saturating_sub(1),
                Tok::Punct(b'=') if depth == 0 => break,
                Tok::Punct(b';') => return false,
                _ => {}
            }
            at += 1;
        }
    }
    if !tokens.get(at).is_some_and(|t| t.is(b'=')) {
        return false;
    }
    let mut at = at + 1;
    if tokens.get(at).is_some_and(|t| t.is_word(source, "async")) {
        at += 1;
    }
    let arrow = |k: usize| {
        tokens.get(k).is_some_and(|t| t.is(b'=')) && tokens.get(k + 1).is_some_and(|t| t.is(b'>'))
    };
    match tokens.get(at) {
        Some(t) if t.is_word(source, "function") => true,
        Some(t) if t.is(b'(') => {
            let close = skip_group(tokens, at);
            arrow(close) || tokens.get(close).is_some_and(|t| t.is(b':'))
        }
        Some(t) if t.kind == Tok::Ident => arrow(at + 1),
        _ => false,
    }
}
