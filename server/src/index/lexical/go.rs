//! Go definitions from tokens: functions, methods (with their receiver's type as container)
//! and types, grouped `type ( … )` declarations included.

use super::Out;
use super::lexer::{Tok, Token};
use super::skip_group;

pub fn scan(source: &str, tokens: &[Token], out: &mut Out) {
    let mut i = 0;
    while i < tokens.len() {
        let token = &tokens[i];
        let after_dot = i > 0 && tokens[i - 1].is(b'.');
        if token.kind != Tok::Ident || after_dot {
            i += 1;
            continue;
        }
        match token.text(source) {
            "func" => {
                if let Some(name) = tokens.get(i + 1).filter(|t| t.kind == Tok::Ident) {
                    out.add(name, "function", None);
                    i += 2;
                    continue;
                }
                if tokens.get(i + 1).is_some_and(|t| t.is(b'(')) {
                    // A method: `func (r *Type[T]) Name(`; not a function literal `func(`.
                    let close = skip_group(tokens, i + 1);
                    let receiver = tokens[i + 2..close.saturating_sub(1).max(i + 2)]
                        .iter()
                        .take_while(|t| !t.is(b'['))
                        .filter(|t| t.kind == Tok::Ident)
                        .last();
                    if let Some(name) = tokens.get(close).filter(|t| t.kind == Tok::Ident)
                        && tokens
                            .get(close + 1)
                            .is_some_and(|t| t.is(b'(') || t.is(b'['))
                    {
                        out.add(name, "method", receiver.map(|r| r.text(source)));
                        i = close + 1;
                        continue;
                    }
                }
            }
            "type" => {
                if let Some(name) = tokens.get(i + 1).filter(|t| t.kind == Tok::Ident) {
                    out.add(name, "type", None);
                    i += 2;
                    continue;
                }
                if tokens.get(i + 1).is_some_and(|t| t.is(b'(')) {
                    // `type ( A int; B struct{…} )`: the first name of each line in the group.
                    let close = skip_group(tokens, i + 1);
                    let mut depth = 0usize;
                    let mut line = tokens[i + 1].line;
                    for t in &tokens[i + 1..close] {
                        match t.kind {
                            Tok::Punct(b'(' | b'[' | b'{') => depth += 1,
                            Tok::Punct(b')' | b']' | b'}') => depth = depth.saturating_sub(1),
                            Tok::Ident if depth == 1 && t.line != line => {
                                out.add(t, "type", None);
                            }
                            _ => {}
                        }
                        line = t.line;
                    }
                    i = close;
                    continue;
                }
            }
            _ => {}
        }
        i += 1;
    }
}
