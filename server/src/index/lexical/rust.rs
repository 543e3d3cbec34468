//! Rust definitions from tokens: items at any depth (functions, types, traits, modules,
//! macros, constants and statics), struct fields and enum variants, with the `impl` type,
//! trait, module or type as container.

use super::Out;
use super::lexer::{Tok, Token};
use super::skip_group;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Block {
    Impl,
    Trait,
    Mod,
    Struct,
    Enum,
    Fn,
    Other,
}

struct Frame {
    block: Block,
    name: Option<String>,
    /// Parenthesis depth at the `{`: fields and variants sit at exactly this depth.
    depth: usize,
}

const QUALIFIERS: &[&str] = &["pub", "unsafe", "async", "default", "extern", "auto"];

pub fn scan(source: &str, tokens: &[Token], out: &mut Out) {
    let mut frames: Vec<Frame> = Vec::new();
    // What the next `{` opens, and the `impl` whose header runs until it.
    let mut pending: Option<(Block, Option<String>)> = None;
    let mut impl_start: Option<usize> = None;
    let mut depth = 0usize;
    let mut item_start = true;
    let mut i = 0;
    let word = |i: usize| {
        tokens
            .get(i)
            .filter(|t| t.kind == Tok::Ident)
            .map(|t| t.text(source))
    };
    let name_at = |i: usize| tokens.get(i).filter(|t| t.is_name());
    while i < tokens.len() {
        let token = &tokens[i];
        match token.kind {
            Tok::Punct(b'#')
                if tokens.get(i + 1).is_some_and(|t| t.is(b'['))
                    || (tokens.get(i + 1).is_some_and(|t| t.is(b'!'))
                        && tokens.get(i + 2).is_some_and(|t| t.is(b'['))) =>
            {
                // An attribute: skipped whole, the item start it precedes kept.
                let open = if tokens[i + 1].is(b'[') { i + 1 } else { i + 2 };
                i = skip_group(tokens, open);
                continue;
            }
            Tok::Punct(b'{') => {
                let (block, name) = match (pending.take(), impl_start.take()) {
                    (Some((Block::Impl, _)), Some(start)) => {
                        (Block::Impl, impl_type(source, &tokens[start + 1..i]))
                    }
                    (Some(p), _) => p,
                    (None, _) => (Block::Other, None),
                };
                frames.push(Frame { block, name, depth });
                item_start = true;
            }
            Tok::Punct(b'}') => {
                frames.pop();
                pending = None;
                impl_start = None;
                item_start = true;
            }
            Tok::Punct(b';') => {
                pending = None;
                impl_start = None;
                item_start = true;
            }
            Tok::Punct(b'(' | b'[') => {
                depth += 1;
                item_start = false;
            }
            Tok::Punct(b')' | b']') => {
                depth = depth.saturating_sub(1);
                item_start = false;
            }
            Tok::Punct(b',') => {
                item_start = frames.last().is_some_and(|f| {
                    matches!(f.block, Block::Struct | Block::Enum) && f.depth == depth
                });
            }
            Tok::Ident | Tok::RawIdent if item_start => {
                let frame = frames.last();
                let block = frame.map_or(Block::Mod, |f| f.block);
                let container = frame.and_then(|f| f.name.as_deref());
                let at_member = frame.is_some_and(|f| f.depth == depth);
                let next = tokens.get(i + 1);
                let text = token.text(source);
                item_start = false;
                if block == Block::Struct && at_member && is_field(tokens, i) {
                    out.add(token, "field", container);
                } else if block == Block::Enum
                    && at_member
                    && next.is_some_and(|t| {
                        matches!(t.kind, Tok::Punct(b',' | b'{' | b'(' | b'=' | b'}'))
                    })
                    && !(token.kind == Tok::Ident && QUALIFIERS.contains(&text))
                {
                    out.add(token, "constant", container);
                    if next.is_some_and(|t| t.is(b'{')) {
                        pending = Some((Block::Struct, Some(text.to_owned())));
                    }
                } else if token.kind == Tok::RawIdent {
                    // A raw identifier starts no item.
                } else if text == "pub" {
                    item_start = true;
                    if next.is_some_and(|t| t.is(b'(')) {
                        i = skip_group(tokens, i + 1);
                        continue;
                    }
                } else if QUALIFIERS.contains(&text) {
                    item_start = true;
                    if text == "extern" && next.is_some_and(|t| t.kind == Tok::Str) {
                        i += 2;
                        continue;
                    }
                } else if text == "const"
                    && matches!(word(i + 1), Some("fn" | "unsafe" | "async" | "extern"))
                {
                    item_start = true;
                } else {
                    let nested =
                        matches!(block, Block::Impl | Block::Trait | Block::Mod) && frame.is_some();
                    match text {
                        "fn" => {
                            if let Some(name) = name_at(i + 1) {
                                let kind = match block {
                                    Block::Impl | Block::Mod if nested => "method",
                                    _ => "function",
                                };
                                out.add(name, kind, container);
                                pending = Some((Block::Fn, Some(name.text(source).to_owned())));
                                i += 2;
                                continue;
                            }
                        }
                        "struct" | "enum" | "union" => {
                            let is_item = text != "union"
                                || tokens.get(i + 2).is_some_and(|t| {
                                    t.is(b'{') || t.is(b'<') || t.is_word(source, "where")
                                });
                            if let Some(name) = name_at(i + 1).filter(|_| is_item) {
                                out.add(name, "class", container);
                                let block = if text == "enum" {
                                    Block::Enum
                                } else {
                                    Block::Struct
                                };
                                pending = Some((block, Some(name.text(source).to_owned())));
                                i += 2;
                                continue;
                            }
                        }
                        "trait" => {
                            if let Some(name) = name_at(i + 1) {
                                out.add(name, "interface", container);
                                pending = Some((Block::Trait, Some(name.text(source).to_owned())));
                                i += 2;
                                continue;
                            }
                        }
                        "mod" => {
                            if let Some(name) = name_at(i + 1) {
                                out.add(name, "module", container);
                                pending = Some((Block::Mod, Some(name.text(source).to_owned())));
                                i += 2;
                                continue;
                            }
                        }
                        "type" => {
                            if let Some(name) = name_at(i + 1) {
                                let kind = if block == Block::Trait && frame.is_some() {
                                    "type"
                                } else {
                                    "class"
                                };
                                out.add(name, kind, container);
                                i += 2;
                                continue;
                            }
                        }
                        "const" | "static" => {
                            let mut at = i + 1;
                            if word(at) == Some("mut") {
                                at += 1;
                            }
                            if let Some(name) = name_at(at).filter(|t| t.text(source) != "_")
                                && tokens.get(at + 1).is_some_and(|t| t.is(b':'))
                            {
                                out.add(name, "constant", container);
                                i = at + 1;
                                continue;
                            }
                        }
                        "macro_rules" if next.is_some_and(|t| t.is(b'!')) => {
                            if let Some(name) = name_at(i + 2) {
                                out.add(name, "macro", container);
                                i += 3;
                                continue;
                            }
                        }
                        "impl" => {
                            pending = Some((Block::Impl, None));
                            impl_start = Some(i);
                        }
                        _ => {}
                    }
                }
            }
            _ => item_start = false,
        }
        i += 1;
    }
}

/// Whether the name at `i` starts a field: `name: Type` (one colon, not a path's `::`).
fn is_field(tokens: &[Token], i: usize) -> bool {
    tokens.get(i + 1).is_some_and(|t| t.is(b':'))
        && !tokens
            .get(i + 2)
            .is_some_and(|t| t.is(b':') && t.start == tokens[i + 1].end)
}

/// The type an `impl` header implements for: after `for` when there is one, its last name
/// outside generic arguments (`impl<T> fmt::Display for Wrapper<T>` → `Wrapper`).
fn impl_type(source: &str, header: &[Token]) -> Option<String> {
    let mut start = 0;
    if header.first().is_some_and(|t| t.is(b'<')) {
        start = skip_group(header, 0);
    }
    let header = &header[start.min(header.len())..];
    let mut angle = 0usize;
    let mut from = 0;
    let mut end = header.len();
    for (i, token) in header.iter().enumerate() {
        match token.kind {
            Tok::Punct(b'<') => angle += 1,
            Tok::Punct(b'>') => angle = angle.saturating_sub(1),
            Tok::Ident if angle == 0 && token.text(source) == "for" => from = i + 1,
            Tok::Ident if angle == 0 && token.text(source) == "where" => {
                end = i;
                break;
            }
            _ => {}
        }
    }
    let mut angle = 0usize;
    let mut name = None;
    for (i, token) in header[from.min(end)..end].iter().enumerate() {
        match token.kind {
            Tok::Punct(b'<') => angle += 1,
            Tok::Punct(b'>') => angle = angle.saturating_sub(1),
            Tok::Ident | Tok::RawIdent if angle == 0 => {
                let text = token.text(source);
                let lifetime = i > 0 && header[from + i - 1].is(b'\'');
                if !lifetime && !matches!(text, "mut" | "dyn" | "const") {
                    name = Some(text.to_owned());
                }
            }
            _ => {}
        }
    }
    name
}
