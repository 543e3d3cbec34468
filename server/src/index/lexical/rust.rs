//! Rust's definitions and references from tokens, complete: the items, kinds, containers,
//! spans and doc comments the tree-sitter walk (`tags/rust.rs`) gives, and its references
//! (calls, macro calls, the trait or type an `impl` names), so a Rust file needs no parse.
//!
//! The walk mirrors the grammar's reading of what it tags, quirks included, because the two
//! extractions are held equal on real files (`lexical::tests`): a macro's tokens (its
//! arguments, a `macro_rules!` body, an attribute's) hold nothing; a method in `impl Trait for
//! Type` has the trait as container, and an `impl` whose trait or type is not a bare name (a
//! path, generic arguments) names none, so its methods take the enclosing item's; a tuple
//! struct in a pattern (`Some(x) =>`, `let Ok(v) =`) is no call, nor is `x.f::<T>()`.

use super::lexer::{Tok, Token};
use crate::index::extract::{
    Definition, Extracted, Reference, doc_comment, line_and_column, signature,
};
use crate::index::tags::line_range;
use crate::languages::Language;

/// What a `{` opens, as far as the items inside it care.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Block {
    /// The body of an `impl`, `trait`, inline `mod` or `extern` block: the grammar's
    /// `declaration_list`, where a function with a body is a method.
    Declarations,
    Trait,
    /// An `extern` block's body: a declaration list where `type T;` is a foreign type.
    Extern,
    Struct,
    Enum,
    /// A `match` body: each arm's pattern runs until its `=>`.
    Match,
    /// Braces inside a pattern (`Point { x, .. }`): still the pattern.
    Pattern,
    Other,
}

struct Frame {
    block: Block,
    /// Parenthesis depth at the `{`: fields, variants and arms sit at exactly this depth.
    depth: usize,
    /// For a `match` body: whether the current arm is in its pattern (before `=>`, outside a
    /// guard).
    in_arm_pattern: bool,
    /// This block is an arm's body (`=> { … }`): the next arm's pattern starts after it.
    arm_body: bool,
}

/// A definition or an `impl` that encloses what follows until token `end`: a container.
struct Scope {
    end: usize,
    name: String,
}

/// Keywords: no call, no macro, no definition's name.
const KEYWORDS: &[&str] = &[
    "as", "async", "await", "break", "const", "continue", "crate", "dyn", "else", "enum", "extern",
    "false", "fn", "for", "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub",
    "ref", "return", "self", "static", "struct", "super", "trait", "true", "type", "unsafe", "use",
    "where", "while", "yield",
];

/// Traits whose parenthesized arguments are a type (`Fn(u32) -> u32`), never a call.
const FN_TRAITS: &[&str] = &[
    "Fn",
    "FnMut",
    "FnOnce",
    "AsyncFn",
    "AsyncFnMut",
    "AsyncFnOnce",
];

/// How many steps a look ahead through an item's header, type or generic arguments takes at
/// most (a bracketed group is one step): far more than any real header, and what keeps a
/// hostile file of headers that never end (`fn a fn a …`) linear.
const MAX_LOOKAHEAD: usize = 2048;

const QUALIFIERS: &[&str] = &["pub", "unsafe", "async", "default", "extern", "auto"];

pub fn scan(source: &str, tokens: &[Token]) -> Extracted {
    let mut scanner = Scanner {
        source,
        tokens,
        closes: closes(tokens),
        out: Extracted::default(),
        scopes: Vec::new(),
        frames: Vec::new(),
        depth: 0,
        let_pattern: None,
        parameters_end: 0,
        at: 0,
    };
    scanner.run();
    let mut out = scanner.out;
    // An `impl`'s reference is written at its `{`, after what its header held.
    if !out.references.is_sorted_by_key(|r| (r.line, r.column)) {
        out.references.sort_by_key(|r| (r.line, r.column));
    }
    out
}

/// The index of the bracket closing each `(`, `[` and `{` (`usize::MAX` where none does).
fn closes(tokens: &[Token]) -> Vec<usize> {
    let mut closes = vec![usize::MAX; tokens.len()];
    let mut open: Vec<usize> = Vec::new();
    for (i, token) in tokens.iter().enumerate() {
        match token.kind {
            Tok::Punct(b'(' | b'[' | b'{') => open.push(i),
            Tok::Punct(close @ (b')' | b']' | b'}')) => {
                let opening = match close {
                    b')' => b'(',
                    b']' => b'[',
                    _ => b'{',
                };
                // A closer of another kind (broken code) closes nothing. Only the innermost
                // opener is tried: a search down the stack would make a hostile file of
                // openers and mismatched closers quadratic.
                if open.last().is_some_and(|&o| tokens[o].is(opening)) {
                    closes[open.pop().unwrap_or_default()] = i;
                }
            }
            _ => {}
        }
    }
    closes
}

struct Scanner<'a> {
    source: &'a str,
    tokens: &'a [Token],
    closes: Vec<usize>,
    out: Extracted,
    /// Enclosing definitions and `impl`s, innermost last.
    scopes: Vec<Scope>,
    frames: Vec<Frame>,
    /// Depth of `(` and `[`.
    depth: usize,
    /// A `let` or `for` pattern in progress: the depth and frame count it started at.
    let_pattern: Option<(usize, usize)>,
    /// The `)` of the last function's parameters.
    parameters_end: usize,
    /// The token being read.
    at: usize,
}

impl Scanner<'_> {
    fn run(&mut self) {
        let tokens = self.tokens;
        let source = self.source;
        // What the next `{` opens, and the `impl` whose header runs until it.
        // What a `{` to come opens, and which `{` (the body after a header).
        let mut pending: Option<(Block, usize)> = None;
        let mut impl_start: Option<usize> = None;
        // Each `match` waiting for its body's `{` (its scrutinee may hold another `match`):
        // the depth and frame count of the `match`.
        let mut pending_matches: Vec<(usize, usize)> = Vec::new();
        let mut item_start = true;
        // The first token of the item being read (its visibility or qualifier).
        let mut item_first: Option<usize> = None;
        let mut i = 0;
        while i < tokens.len() {
            while self.scopes.last().is_some_and(|s| s.end < i) {
                self.scopes.pop();
            }
            self.at = i;
            let token = &tokens[i];
            if item_start && item_first.is_none() {
                item_first = Some(i);
            }
            match token.kind {
                Tok::Punct(b'#')
                    if tokens.get(i + 1).is_some_and(|t| t.is(b'['))
                        || (tokens.get(i + 1).is_some_and(|t| t.is(b'!'))
                            && tokens.get(i + 2).is_some_and(|t| t.is(b'['))) =>
                {
                    // An attribute: its own node, skipped whole; the item it precedes
                    // starts after it.
                    let open = if tokens[i + 1].is(b'[') { i + 1 } else { i + 2 };
                    i = self.past(open);
                    self.attribute_value(open, i);
                    item_first = None;
                    continue;
                }
                Tok::Punct(b'{') => {
                    let in_pattern = self.in_pattern();
                    let block = if let Some((block, _)) = pending.take_if(|(_, at)| *at == i) {
                        if block == Block::Declarations
                            && let Some(start) = impl_start.take()
                        {
                            self.impl_reference(start, i);
                        }
                        block
                    } else if pending_matches.last() == Some(&(self.depth, self.frames.len()))
                        && !(i > 0 && tokens[i - 1].is_word(source, "unsafe"))
                    {
                        pending_matches.pop();
                        Block::Match
                    } else if in_pattern {
                        Block::Pattern
                    } else {
                        Block::Other
                    };
                    let arm_body = self.frames.last().is_some_and(|f| {
                        f.block == Block::Match && f.depth == self.depth && !f.in_arm_pattern
                    }) && i > 0
                        && self.is_arrow_end(i - 1);
                    self.frames.push(Frame {
                        block,
                        depth: self.depth,
                        in_arm_pattern: block == Block::Match,
                        arm_body,
                    });
                    item_start = true;
                    item_first = None;
                }
                Tok::Punct(b'}') => {
                    if let Some(frame) = self.frames.pop()
                        && frame.arm_body
                        && let Some(arm) = self.frames.last_mut()
                    {
                        arm.in_arm_pattern = true;
                    }
                    if self
                        .let_pattern
                        .is_some_and(|(_, frames)| frames > self.frames.len())
                    {
                        self.let_pattern = None;
                    }
                    item_start = true;
                    item_first = None;
                }
                // In brackets (`[u8; 4]`) a `;` ends no statement.
                Tok::Punct(b';') if self.depth > self.frames.last().map_or(0, |f| f.depth) => {}
                Tok::Punct(b';') => {
                    self.let_pattern = None;
                    item_start = true;
                    item_first = None;
                }
                Tok::Punct(b'(' | b'[') => {
                    self.depth += 1;
                    item_start = false;
                }
                Tok::Punct(b')' | b']') => {
                    self.depth = self.depth.saturating_sub(1);
                    item_start = false;
                }
                Tok::Punct(b',') => {
                    let depth = self.depth;
                    let frame = self.frames.last_mut();
                    item_start = frame.as_ref().is_some_and(|f| {
                        matches!(f.block, Block::Struct | Block::Enum) && f.depth == depth
                    });
                    if let Some(f) = frame
                        && f.block == Block::Match
                        && f.depth == depth
                    {
                        f.in_arm_pattern = true;
                    }
                    item_first = None;
                }
                Tok::Punct(b'=') => {
                    let depth = self.depth;
                    if self.is_arrow(i) {
                        if let Some(f) = self.frames.last_mut()
                            && f.block == Block::Match
                            && f.depth == depth
                        {
                            f.in_arm_pattern = false;
                        }
                    } else if self.let_pattern == Some((depth, self.frames.len())) {
                        self.let_pattern = None;
                    }
                    item_start = false;
                }
                Tok::Ident | Tok::RawIdent if self.is_lifetime(i) => item_start = false,
                Tok::Ident | Tok::RawIdent => {
                    let at_item = item_start;
                    item_start = false;
                    if at_item
                        && let Some(next) =
                            self.item(i, item_first.unwrap_or(i), &mut pending, &mut impl_start)
                    {
                        match next {
                            Next::Qualifier(next) => {
                                item_start = true;
                                i = next;
                            }
                            Next::Past(next) => {
                                item_first = None;
                                i = next;
                            }
                            Next::Over(next) => {
                                item_start = true;
                                item_first = None;
                                i = next;
                            }
                        }
                        continue;
                    }
                    let text = token.text(source);
                    if token.kind == Tok::Ident && KEYWORDS.contains(&text) {
                        let frames = self.frames.len();
                        match text {
                            "let" => self.let_pattern = Some((self.depth, frames)),
                            "for"
                                if impl_start.is_none()
                                    && !tokens.get(i + 1).is_some_and(|t| t.is(b'<')) =>
                            {
                                self.let_pattern = Some((self.depth, frames));
                            }
                            "in" if self.let_pattern == Some((self.depth, frames)) => {
                                self.let_pattern = None;
                            }
                            "match" => pending_matches.push((self.depth, frames)),
                            "if" => {
                                let depth = self.depth;
                                if let Some(f) = self.frames.last_mut()
                                    && f.block == Block::Match
                                    && f.depth == depth
                                {
                                    // A guard: an expression, up to the arm's `=>`.
                                    f.in_arm_pattern = false;
                                }
                            }
                            _ => {}
                        }
                        i += 1;
                        continue;
                    }
                    // A macro called with braces at a statement's place ends the statement.
                    let braced_macro = tokens.get(i + 1).is_some_and(|t| t.is(b'!'))
                        && tokens.get(i + 2).is_some_and(|t| t.is(b'{'));
                    let at_statement = braced_macro && self.path_at_statement(i);
                    i = self.expression_name(i);
                    if at_statement {
                        item_start = true;
                        item_first = None;
                    }
                    continue;
                }
                _ => item_start = false,
            }
            i += 1;
        }
    }

    /// A name outside an item header: a call (`f(`, `f::<T>(`), a macro call whose tokens
    /// are skipped, or nothing. The index to go on from.
    fn expression_name(&mut self, i: usize) -> usize {
        let tokens = self.tokens;
        let text = tokens[i].text(self.source);
        let next = tokens.get(i + 1);
        if text == "try" && tokens[i].kind == Tok::Ident {
            // `try!(e)`: the grammar reads `try` as a keyword, and `e` as an expression.
            return i + 2;
        }
        if self.is_macro_call(i) {
            self.reference(i, "call");
            return self.past(i + 2);
        }
        if next.is_some_and(|t| t.is(b'(')) {
            // `Fn(u32)` is a type; `ast::Fn(f)` is a variant's constructor.
            let path = i > 1 && tokens[i - 1].is(b':') && tokens[i - 2].is(b':');
            if !self.in_pattern() && (path || !FN_TRAITS.contains(&text)) {
                self.reference(i, "call");
            }
        } else if next.is_some_and(|t| t.is(b':'))
            && tokens.get(i + 2).is_some_and(|t| t.is(b':'))
            && tokens.get(i + 3).is_some_and(|t| t.is(b'<'))
        {
            // `f::<T>(…)`: a call, unless it is a method's (`x.f::<T>()`: the grammar's
            // generic function there is no path it takes a name from).
            let after = self.past_angles(i + 3);
            // (`..size_of::<T>()` is a range's end, not a method.)
            let method = i > 0
                && tokens[i - 1].is(b'.')
                && !(i > 1 && tokens[i - 2].is(b'.') && tokens[i - 2].end == tokens[i - 1].start);
            // The arguments are types, but a type may be a macro's (`Token![,]`).
            self.macro_calls(i + 4, after);
            if tokens.get(after).is_some_and(|t| t.is(b'(')) && !method && !self.in_pattern() {
                self.reference(i, "call");
            }
            // Past the arguments: their commas are no match arm's.
            return after;
        }
        i + 1
    }

    /// Reads the item a token at an item's start begins: `Some` with where to go on when it
    /// was a qualifier or a definition, `None` when it is neither.
    fn item(
        &mut self,
        i: usize,
        first: usize,
        pending: &mut Option<(Block, usize)>,
        impl_start: &mut Option<usize>,
    ) -> Option<Next> {
        let tokens = self.tokens;
        let source = self.source;
        let token = &tokens[i];
        let text = token.text(source);
        let next = tokens.get(i + 1);
        let block = self.frames.last().map(|f| f.block);
        let at_member = self.frames.last().is_some_and(|f| f.depth == self.depth);
        let word = |at: usize| {
            tokens
                .get(at)
                .filter(|t| t.kind == Tok::Ident)
                .map(|t| t.text(source))
        };
        if block == Some(Block::Struct) && at_member && is_field(tokens, i) {
            let end = self.member_end(i + 1, true);
            self.define(i, "field", first, end);
            return Some(Next::Past(i + 1));
        }
        if block == Some(Block::Enum)
            && at_member
            && next.is_some_and(|t| matches!(t.kind, Tok::Punct(b',' | b'{' | b'(' | b'=' | b'}')))
            && !(token.kind == Tok::Ident && QUALIFIERS.contains(&text))
        {
            let end = self.member_end(i + 1, false);
            self.define(i, "constant", first, end);
            if next.is_some_and(|t| t.is(b'{')) {
                *pending = Some((Block::Struct, i + 1));
            }
            return Some(Next::Past(i + 1));
        }
        if token.kind == Tok::RawIdent {
            return None;
        }
        let name_at = |at: usize| tokens.get(at).filter(|t| t.is_name()).map(|_| at);
        match text {
            "pub" => {
                if next.is_some_and(|t| t.is(b'(')) {
                    return Some(Next::Qualifier(self.past(i + 1)));
                }
                Some(Next::Qualifier(i + 1))
            }
            "extern" if next.is_some_and(|t| t.kind == Tok::Str) => {
                if tokens.get(i + 2).is_some_and(|t| t.is(b'{')) {
                    *pending = Some((Block::Extern, i + 2));
                    return Some(Next::Past(i + 2));
                }
                Some(Next::Qualifier(i + 2))
            }
            "extern" if next.is_some_and(|t| t.is(b'{')) => {
                *pending = Some((Block::Extern, i + 1));
                Some(Next::Past(i + 1))
            }
            _ if QUALIFIERS.contains(&text) => Some(Next::Qualifier(i + 1)),
            // In an `unsafe extern` block.
            "safe" if matches!(word(i + 1), Some("fn" | "static")) => Some(Next::Qualifier(i + 1)),
            "const" if matches!(word(i + 1), Some("fn" | "unsafe" | "async" | "extern")) => {
                Some(Next::Qualifier(i + 1))
            }
            "fn" => {
                let name = name_at(i + 1)?;
                let (end, body) = self.item_end(i + 2);
                let kind = if body.is_some()
                    && matches!(
                        block,
                        Some(Block::Declarations | Block::Trait | Block::Extern)
                    ) {
                    "method"
                } else {
                    "function"
                };
                self.define(name, kind, first, end);
                *pending = body.map(|open| (Block::Other, open));
                // Parameters are patterns (`fn f(Wrapper(x): Wrapper)`), never calls.
                let mut open = name + 1;
                if tokens.get(open).is_some_and(|t| t.is(b'<')) {
                    open = self.past_angles(open);
                }
                if tokens.get(open).is_some_and(|t| t.is(b'(')) {
                    self.parameters_end = self.close(open);
                }
                Some(Next::Past(name + 1))
            }
            "struct" | "enum" | "union" => {
                let is_item = text != "union"
                    || tokens
                        .get(i + 2)
                        .is_some_and(|t| t.is(b'{') || t.is(b'<') || t.is_word(source, "where"));
                let name = name_at(i + 1).filter(|_| is_item)?;
                let (end, body) = self.item_end(i + 2);
                self.define(name, "class", first, end);
                let block = if text == "enum" {
                    Block::Enum
                } else {
                    Block::Struct
                };
                *pending = body.map(|open| (block, open));
                Some(Next::Past(name + 1))
            }
            "trait" => {
                let name = name_at(i + 1)?;
                let (end, body) = self.item_end(i + 2);
                self.define(name, "interface", first, end);
                *pending = body.map(|open| (Block::Trait, open));
                Some(Next::Past(name + 1))
            }
            "mod" => {
                let name = name_at(i + 1)?;
                let (end, body) = self.item_end(i + 2);
                self.define(name, "module", first, end);
                *pending = body.map(|open| (Block::Declarations, open));
                Some(Next::Past(name + 1))
            }
            "type" => {
                let name = name_at(i + 1)?;
                let kind = if matches!(block, Some(Block::Trait | Block::Extern)) {
                    "type"
                } else {
                    "class"
                };
                let end = self.semicolon(i + 2);
                self.define(name, kind, first, end);
                Some(Next::Past(name + 1))
            }
            "const" | "static" => {
                let mut at = i + 1;
                if word(at) == Some("mut") {
                    at += 1;
                }
                let name =
                    name_at(at).filter(|&n| tokens.get(n + 1).is_some_and(|t| t.is(b':')))?;
                let end = self.semicolon(name + 1);
                self.define(name, "constant", first, end);
                Some(Next::Past(name + 1))
            }
            "macro_rules" if next.is_some_and(|t| t.is(b'!')) => {
                let name = name_at(i + 2)?;
                let body = name + 1;
                let mut end = self.close(body).min(tokens.len() - 1);
                if !tokens[body].is(b'{') && tokens.get(end + 1).is_some_and(|t| t.is(b';')) {
                    end += 1;
                }
                self.define(name, "macro", first, end);
                Some(Next::Over(end + 1))
            }
            "impl" => {
                if let (_, Some(open)) = self.item_end(i + 1) {
                    *pending = Some((Block::Declarations, open));
                    *impl_start = Some(i);
                }
                None
            }
            _ => None,
        }
    }

    /// Records the definition named by the token at `name`, its item spanning tokens `first`
    /// to `end`, and makes it the container of what it holds.
    fn define(&mut self, name: usize, kind: &str, first: usize, end: usize) {
        let (name_text, name_start) = self.name(name);
        let token = &self.tokens[name];
        let first_token = &self.tokens[first.min(name)];
        let end = end.max(name).min(self.tokens.len() - 1);
        let (line_start, column) = line_and_column(self.source, name_start);
        let line = line_range(self.source.as_bytes(), name_start, name_start - line_start);
        let start = first_token.start as usize;
        let container = self.scopes.last().map(|s| s.name.clone());
        self.out.definitions.push(Definition {
            container,
            line: token.line,
            column,
            start_line: first_token.line,
            end_line: self.last_line(end),
            signature: signature(&self.source[line]),
            doc: doc_comment(
                Language::Rust,
                self.source,
                start,
                self.tokens[end].end as usize,
            ),
            kind: kind.to_owned(),
            name: name_text.clone(),
        });
        self.scopes.push(Scope {
            end,
            name: name_text,
        });
    }

    fn reference(&mut self, at: usize, kind: &str) {
        let (name, start) = self.name(at);
        self.out.references.push(Reference {
            name,
            kind: kind.to_owned(),
            line: self.tokens[at].line,
            column: line_and_column(self.source, start).1,
        });
    }

    /// The text of the name at `at` and where it starts: a raw identifier with its `r#`, as
    /// the grammar's identifier has it.
    fn name(&self, at: usize) -> (String, usize) {
        let token = &self.tokens[at];
        let start = token.start as usize;
        if token.kind == Tok::RawIdent {
            let start = start - 2;
            (self.source[start..token.end as usize].to_owned(), start)
        } else {
            (token.text(self.source).to_owned(), start)
        }
    }

    /// The `impl` whose header is `tokens[start..open]` names its trait, or with no trait its
    /// type, when that is a bare name; the methods inside have it as container.
    fn impl_reference(&mut self, start: usize, open: usize) {
        let tokens = self.tokens;
        let source = self.source;
        let mut from = start + 1;
        if tokens.get(from).is_some_and(|t| t.is(b'<')) {
            from = self.past_angles(from);
        }
        let header = &tokens[from.min(open)..open];
        let mut angle = 0usize;
        let mut split = None;
        let mut end = header.len();
        for (at, token) in header.iter().enumerate() {
            match token.kind {
                Tok::Punct(b'<') => angle += 1,
                Tok::Punct(b'>') if !(at > 0 && header[at - 1].is(b'-')) => {
                    angle = angle.saturating_sub(1)
                }
                Tok::Ident if angle == 0 && split.is_none() && token.text(source) == "for" => {
                    split = Some(at)
                }
                Tok::Ident if angle == 0 && token.text(source) == "where" => {
                    end = at;
                    break;
                }
                _ => {}
            }
        }
        let named = match split {
            Some(split) => {
                let trait_part = &header[..split];
                match trait_part {
                    [t]
                    | [
                        Token {
                            kind: Tok::Punct(b'!'),
                            ..
                        },
                        t,
                    ] => Some(t),
                    _ => None,
                }
            }
            None => match &header[..end] {
                [t] => Some(t),
                _ => None,
            },
        };
        let Some(named) = named.filter(|t| {
            t.is_name() && !(t.kind == Tok::Ident && KEYWORDS.contains(&t.text(source)))
        }) else {
            return;
        };
        let at = from + header_offset(header, named);
        self.reference(at, "implementation");
        let (name, _) = self.name(at);
        self.scopes.push(Scope {
            end: self.close(open),
            name,
        });
    }

    /// The macro calls in the value of an attribute `#[name = value]` (tokens `open..end`):
    /// an expression (`#[doc = include_str!("README.md")]`), where the rest of an attribute is
    /// a macro's tokens.
    fn attribute_value(&mut self, open: usize, end: usize) {
        let tokens = self.tokens;
        if !(tokens.get(open + 1).is_some_and(Token::is_name)
            && tokens.get(open + 2).is_some_and(|t| t.is(b'=')))
        {
            return;
        }
        self.macro_calls(open + 3, end);
    }

    /// Whether the name at `i` calls a macro: `name!` and a group.
    fn is_macro_call(&self, i: usize) -> bool {
        let tokens = self.tokens;
        tokens[i].is_name()
            && tokens.get(i + 1).is_some_and(|t| t.is(b'!'))
            && tokens
                .get(i + 2)
                .is_some_and(|t| matches!(t.kind, Tok::Punct(b'(' | b'[' | b'{')))
    }

    /// The macro calls among tokens `from..end`, each macro's own tokens skipped.
    fn macro_calls(&mut self, from: usize, end: usize) {
        let mut j = from;
        while j < end {
            if self.is_macro_call(j) {
                self.reference(j, "call");
                j = self.past(j + 2);
            } else {
                j += 1;
            }
        }
    }

    /// Whether the path ending in the name at `i` (`a::b::m`) starts a statement: after a
    /// `;`, a brace or an attribute, or at the file's start.
    fn path_at_statement(&self, mut i: usize) -> bool {
        let tokens = self.tokens;
        while i >= 3 && tokens[i - 1].is(b':') && tokens[i - 2].is(b':') && tokens[i - 3].is_name()
        {
            i -= 3;
        }
        i == 0 || matches!(tokens[i - 1].kind, Tok::Punct(b';' | b'{' | b'}' | b']'))
    }

    /// Whether the scanner is inside a pattern (a `let` or `for` pattern, a match arm's).
    fn in_pattern(&self) -> bool {
        if self.at < self.parameters_end {
            return true;
        }
        if self
            .let_pattern
            .is_some_and(|(_, frames)| frames <= self.frames.len())
        {
            return true;
        }
        self.frames.last().is_some_and(|f| {
            f.block == Block::Pattern || (f.block == Block::Match && f.in_arm_pattern)
        })
    }

    /// Whether `tokens[i]` is the `=` of a `=>`.
    fn is_arrow(&self, i: usize) -> bool {
        self.tokens
            .get(i + 1)
            .is_some_and(|t| t.is(b'>') && t.start == self.tokens[i].end)
    }

    /// Whether `tokens[i]` is the `>` of a `=>`.
    fn is_arrow_end(&self, i: usize) -> bool {
        i > 0 && self.tokens[i].is(b'>') && self.is_arrow(i - 1)
    }

    /// Whether the name at `i` is a lifetime's or a label's (`'a`, `'static`).
    fn is_lifetime(&self, i: usize) -> bool {
        i > 0 && self.tokens[i - 1].is(b'\'') && self.tokens[i - 1].end == self.tokens[i].start
    }

    /// The closing bracket of the group opening at `open`, or the last token.
    fn close(&self, open: usize) -> usize {
        self.closes
            .get(open)
            .copied()
            .filter(|&c| c != usize::MAX)
            .unwrap_or(self.tokens.len().saturating_sub(1))
    }

    /// The index just past the group opening at `open`.
    fn past(&self, open: usize) -> usize {
        if matches!(
            self.tokens.get(open).map(|t| t.kind),
            Some(Tok::Punct(b'(' | b'[' | b'{'))
        ) {
            self.close(open) + 1
        } else {
            open + 1
        }
    }

    /// The last token of an item whose header continues at `from`: its body's `}` (and the
    /// body's `{`), or the `;` that ends it.
    fn item_end(&self, from: usize) -> (usize, Option<usize>) {
        let mut j = from;
        for _ in 0..MAX_LOOKAHEAD {
            let Some(token) = self.tokens.get(j) else {
                break;
            };
            match token.kind {
                Tok::Punct(b'(' | b'[') => j = self.close(j),
                // Generic arguments hold `{ N }` constants, not the body.
                Tok::Punct(b'<') => j = self.past_angles(j) - 1,
                Tok::Punct(b'{') => return (self.close(j), Some(j)),
                Tok::Punct(b';') => return (j, None),
                Tok::Punct(b'}') => return (j.saturating_sub(1), None),
                _ => {}
            }
            j += 1;
        }
        (j.min(self.tokens.len()).saturating_sub(1), None)
    }

    /// The index just past the `<…>` opening at `open`: brackets inside skipped whole, and
    /// the `>` of an `->` no closer.
    fn past_angles(&self, open: usize) -> usize {
        let mut angle = 0usize;
        let mut j = open;
        for _ in 0..MAX_LOOKAHEAD {
            let Some(token) = self.tokens.get(j) else {
                break;
            };
            match token.kind {
                Tok::Punct(b'(' | b'[' | b'{') => j = self.close(j),
                Tok::Punct(b'<') => angle += 1,
                Tok::Punct(b'>') if !self.tokens[j - 1].is(b'-') => {
                    angle -= 1;
                    if angle == 0 {
                        return j + 1;
                    }
                }
                Tok::Punct(b';' | b')' | b']' | b'}') => return j,
                _ => {}
            }
            j += 1;
        }
        j.min(self.tokens.len())
    }

    /// The `;` ending an item whose rest starts at `from` (groups on the way skipped).
    fn semicolon(&self, from: usize) -> usize {
        let mut j = from;
        for _ in 0..MAX_LOOKAHEAD {
            let Some(token) = self.tokens.get(j) else {
                break;
            };
            match token.kind {
                Tok::Punct(b'(' | b'[' | b'{') => j = self.close(j),
                Tok::Punct(b';') => return j,
                Tok::Punct(b'}' | b')' | b']') => return j.saturating_sub(1),
                _ => {}
            }
            j += 1;
        }
        j.min(self.tokens.len()).saturating_sub(1)
    }

    /// The last token of a field's type or a variant (`typed`: `<…>` group, as in a type),
    /// from `from` to before the `,` or `}` ending it.
    fn member_end(&self, from: usize, typed: bool) -> usize {
        let mut angle = 0usize;
        let mut j = from;
        for _ in 0..MAX_LOOKAHEAD {
            let Some(token) = self.tokens.get(j) else {
                break;
            };
            match token.kind {
                Tok::Punct(b'(' | b'[' | b'{') => j = self.close(j),
                Tok::Punct(b'<') if typed => angle += 1,
                Tok::Punct(b'>') if typed && !self.tokens[j - 1].is(b'-') => {
                    angle = angle.saturating_sub(1)
                }
                Tok::Punct(b',') if angle == 0 => return j - 1,
                Tok::Punct(b'}' | b')' | b']') => return j - 1,
                _ => {}
            }
            j += 1;
        }
        j.min(self.tokens.len()).saturating_sub(1)
    }

    /// The line of the last byte of the token at `at` (a string may span lines).
    fn last_line(&self, at: usize) -> u32 {
        let token = &self.tokens[at];
        if token.kind == Tok::Str {
            let text = &self.source.as_bytes()[token.start as usize..token.end as usize];
            token.line + memchr::memchr_iter(b'\n', text).count() as u32
        } else {
            token.line
        }
    }
}

/// Where [`Scanner::item`] goes on: past a qualifier (the item continues), past a
/// definition's name, or past the whole item.
enum Next {
    Qualifier(usize),
    Past(usize),
    /// Past the whole item: the next one may start there.
    Over(usize),
}

/// The offset of `token` (an element of `header`) in `header`.
fn header_offset(header: &[Token], token: &Token) -> usize {
    header
        .iter()
        .position(|t| t.start == token.start)
        .unwrap_or(0)
}

/// Whether the name at `i` starts a field: `name: Type` (one colon, not a path's `::`).
fn is_field(tokens: &[Token], i: usize) -> bool {
    tokens.get(i + 1).is_some_and(|t| t.is(b':'))
        && !tokens
            .get(i + 2)
            .is_some_and(|t| t.is(b':') && t.start == tokens[i + 1].end)
}
