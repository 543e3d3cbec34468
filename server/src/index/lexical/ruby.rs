//! Ruby definitions from tokens: methods (`def name`, `def self.name`, with `?`, `!` and `=`
//! endings), classes and modules (the last name of a `A::B` path).

use super::Out;
use super::lexer::{Tok, Token};

pub fn scan(source: &str, tokens: &[Token], out: &mut Out) {
    let bytes = source.as_bytes();
    for (i, token) in tokens.iter().enumerate() {
        if token.kind != Tok::Ident || (i > 0 && (tokens[i - 1].is(b'.') || tokens[i - 1].is(b':')))
        {
            continue;
        }
        // A keyword, not a symbol key (`def: 1`).
        if tokens
            .get(i + 1)
            .is_some_and(|t| t.is(b':') && t.start == token.end)
        {
            continue;
        }
        match token.text(source) {
            "def" => {
                let mut at = i + 1;
                // `def self.name`, `def obj.name`.
                if tokens.get(at + 1).is_some_and(|t| t.is(b'.')) {
                    at += 2;
                }
                let Some(name) = tokens.get(at).filter(|t| t.kind == Tok::Ident) else {
                    continue;
                };
                let mut name = *name;
                let end = name.end as usize;
                match (bytes.get(end), bytes.get(end + 1)) {
                    (Some(b'?' | b'!'), next) if next != Some(&b'=') => name.end += 1,
                    (Some(b'='), Some(b'(' | b' ' | b'\t')) => name.end += 1,
                    _ => {}
                }
                out.add(&name, "method", None);
            }
            keyword @ ("class" | "module") => {
                let mut at = i + 1;
                let mut name = None;
                while let Some(t) = tokens.get(at).filter(|t| t.kind == Tok::Ident) {
                    name = Some(t);
                    if tokens.get(at + 1).is_some_and(|t| t.is(b':'))
                        && tokens.get(at + 2).is_some_and(|t| t.is(b':'))
                    {
                        at += 3;
                    } else {
                        break;
                    }
                }
                if let Some(name) =
                    name.filter(|n| n.text(source).starts_with(|c: char| c.is_ascii_uppercase()))
                {
                    out.add(
                        name,
                        if keyword == "class" {
                            "class"
                        } else {
                            "module"
                        },
                        None,
                    );
                }
            }
            _ => {}
        }
    }
}
