//! Java definitions from tokens: classes, interfaces, enums and records, and the methods
//! declared in their bodies (function bodies and initializers skipped).

use super::Out;
use super::lexer::{Tok, Token};
use super::skip_group;

const NOT_TYPES: &[&str] = &["new", "return", "throw", "else", "case", "assert", "yield"];

pub fn scan(source: &str, tokens: &[Token], out: &mut Out) {
    // Each open brace: the class it opens (`Some`), or a body (`None`).
    let mut frames: Vec<Option<String>> = Vec::new();
    let mut pending: Option<String> = None;
    let mut method_seen = false;
    let mut statement_start = 0;
    let mut depth = 0usize;
    let mut i = 0;
    while i < tokens.len() {
        let token = &tokens[i];
        let in_class = frames.last().is_some_and(Option::is_some);
        let in_body = frames.last().is_some_and(Option::is_none);
        match token.kind {
            Tok::Punct(b'{') => {
                frames.push(if in_body { None } else { pending.take() });
                method_seen = false;
                statement_start = i + 1;
                depth = 0;
            }
            Tok::Punct(b'}') => {
                frames.pop();
                pending = None;
                method_seen = false;
                statement_start = i + 1;
            }
            Tok::Punct(b';') if depth == 0 => {
                pending = None;
                method_seen = false;
                statement_start = i + 1;
            }
            Tok::Punct(b'@') if !in_body => {
                // An annotation, with its arguments.
                let mut at = i + 2;
                while tokens.get(at).is_some_and(|t| t.is(b'.'))
                    && tokens.get(at + 1).is_some_and(|t| t.kind == Tok::Ident)
                {
                    at += 2;
                }
                if tokens.get(at).is_some_and(|t| t.is(b'(')) {
                    at = skip_group(tokens, at);
                }
                if statement_start == i {
                    statement_start = at;
                }
                i = at;
                continue;
            }
            Tok::Punct(b'(') if !in_body => {
                if in_class
                    && depth == 0
                    && !method_seen
                    && i > statement_start + 1
                    && let Some(name) = tokens.get(i - 1).filter(|t| t.kind == Tok::Ident)
                    && is_type_end(source, &tokens[i - 2])
                    && !tokens[statement_start..i].iter().any(|t| t.is(b'='))
                {
                    out.add(name, "method", frames.last().cloned().flatten().as_deref());
                    method_seen = true;
                }
                depth += 1;
            }
            Tok::Punct(b')') if !in_body => depth = depth.saturating_sub(1),
            Tok::Ident if !(in_body || (i > 0 && tokens[i - 1].is(b'.'))) => {
                let text = token.text(source);
                if matches!(text, "class" | "interface" | "enum" | "record")
                    && let Some(name) = tokens.get(i + 1).filter(|t| t.kind == Tok::Ident)
                {
                    let kind = if text == "interface" {
                        "interface"
                    } else {
                        "class"
                    };
                    out.add(name, kind, frames.last().cloned().flatten().as_deref());
                    pending = Some(name.text(source).to_owned());
                    i += 2;
                    continue;
                }
            }
            _ => {}
        }
        i += 1;
    }
}

/// Whether `token` can end the return type before a method's name.
fn is_type_end(source: &str, token: &Token) -> bool {
    match token.kind {
        Tok::Ident => !NOT_TYPES.contains(&token.text(source)),
        Tok::Punct(b'>' | b']') => true,
        _ => false,
    }
}
