//! C and C++ definitions from tokens, read the way a tags program reads them: macros from
//! `#define`, then declarations statement by statement — functions (prototypes and bodies),
//! structs, unions, classes and enums with their members and enumerators, typedefs and
//! global variables — with function bodies and initializers skipped whole.

use super::Out;
use super::lexer::{Tok, Token};

/// An item of a statement: a token, or the `{…}` body of a struct, union or enum it holds.
#[derive(Clone, Copy)]
enum Item {
    Token(usize),
    Body,
}

enum Kind {
    /// The file, a namespace or an `extern "C"` block: declarations.
    Scope,
    Record(Option<String>),
    Enum(Option<String>),
    /// A function body or an initializer: nothing in it is a definition.
    Body,
}

struct Frame {
    kind: Kind,
    /// The statement the `{` interrupted, resumed at the `}`.
    saved: Vec<Item>,
    saved_depth: usize,
}

/// Names that a `(` follows without being a function's name.
const NOT_NAMES: &[&str] = &[
    "__attribute__",
    "__attribute",
    "__declspec",
    "__asm__",
    "__asm",
    "asm",
    "alignas",
    "_Alignas",
    "__typeof__",
    "typeof",
    "__typeof",
    "sizeof",
    "decltype",
    "if",
    "while",
    "for",
    "switch",
    "return",
    "static_assert",
    "_Static_assert",
    "operator",
    "noexcept",
    "throw",
    "__THROW",
    "__nonnull",
    "__wur",
    "defined",
];

/// Groups to drop before reading a declaration: `__attribute__((…))` and the like.
const ATTRIBUTES: &[&str] = &[
    "__attribute__",
    "__attribute",
    "__declspec",
    "__asm__",
    "__asm",
    "asm",
    "alignas",
    "_Alignas",
    "__nonnull",
    "__attr_access",
    "__attr_dealloc",
    "__attribute_alloc_size__",
];

const RECORDS: &[&str] = &["struct", "union", "enum", "class"];

/// Words before a `(` that do not make it a function's name.
const NOT_TYPES: &[&str] = &[
    "return", "else", "case", "goto", "sizeof", "new", "delete", "throw", "struct", "union",
    "enum", "class", "typedef",
];

const ACCESS: &[&str] = &["public", "private", "protected", "signals", "slots"];

pub fn scan(source: &str, tokens: &[Token], out: &mut Out) {
    let mut scanner = Scanner {
        source,
        tokens,
        frames: vec![Frame {
            kind: Kind::Scope,
            saved: Vec::new(),
            saved_depth: 0,
        }],
    };
    let mut statement: Vec<Item> = Vec::new();
    let mut depth = 0usize;
    for (i, token) in tokens.iter().enumerate() {
        if token.kind == Tok::Define {
            out.add(token, "macro", None);
            continue;
        }
        let in_body = matches!(scanner.top(), Kind::Body);
        match token.kind {
            Tok::Punct(b'{') => {
                let kind = if in_body || depth > 0 {
                    Kind::Body
                } else {
                    scanner.open(&statement, out)
                };
                let keep = match kind {
                    Kind::Record(_) | Kind::Enum(_) => true,
                    Kind::Body => depth > 0 || has_initializer(&scanner, &statement),
                    Kind::Scope => false,
                };
                let saved = if keep {
                    std::mem::take(&mut statement)
                } else {
                    statement.clear();
                    Vec::new()
                };
                scanner.frames.push(Frame {
                    kind,
                    saved,
                    saved_depth: depth,
                });
                depth = 0;
            }
            Tok::Punct(b'}') => {
                if scanner.frames.len() == 1 {
                    statement.clear();
                    continue;
                }
                if let Kind::Enum(name) = scanner.top() {
                    let name = name.clone();
                    scanner.enumerator(&statement, name.as_deref(), out);
                }
                let frame = scanner.frames.pop().expect("more than the file's frame");
                statement = frame.saved;
                depth = frame.saved_depth;
                if matches!(frame.kind, Kind::Record(_) | Kind::Enum(_)) {
                    statement.push(Item::Body);
                }
            }
            _ if in_body => {}
            Tok::Punct(b'(' | b'[') => {
                depth += 1;
                statement.push(Item::Token(i));
            }
            Tok::Punct(b')' | b']') => {
                depth = depth.saturating_sub(1);
                statement.push(Item::Token(i));
            }
            Tok::Punct(b';') if depth == 0 => {
                scanner.declaration(&statement, out);
                statement.clear();
            }
            Tok::Punct(b',') if depth == 0 && matches!(scanner.top(), Kind::Enum(_)) => {
                if let Kind::Enum(name) = scanner.top() {
                    let name = name.clone();
                    scanner.enumerator(&statement, name.as_deref(), out);
                }
                statement.clear();
            }
            _ => statement.push(Item::Token(i)),
        }
    }
}

fn has_initializer(scanner: &Scanner, statement: &[Item]) -> bool {
    let mut depth = 0usize;
    statement.iter().any(|item| match scanner.token(*item) {
        Some(t) if t.is(b'(') || t.is(b'[') => {
            depth += 1;
            false
        }
        Some(t) if t.is(b')') || t.is(b']') => {
            depth = depth.saturating_sub(1);
            false
        }
        Some(t) => depth == 0 && t.is(b'='),
        None => false,
    })
}

struct Scanner<'a> {
    source: &'a str,
    tokens: &'a [Token],
    frames: Vec<Frame>,
}

impl<'a> Scanner<'a> {
    fn top(&self) -> &Kind {
        &self.frames.last().expect("the file's frame stays").kind
    }

    fn token(&self, item: Item) -> Option<&'a Token> {
        match item {
            Item::Token(i) => self.tokens.get(i),
            Item::Body => None,
        }
    }

    fn text(&self, item: Item) -> &'a str {
        self.token(item).map_or("", |t| t.text(self.source))
    }

    fn is(&self, item: Option<&Item>, byte: u8) -> bool {
        item.and_then(|i| self.token(*i))
            .is_some_and(|t| t.is(byte))
    }

    fn is_ident(&self, item: Option<&Item>) -> bool {
        item.and_then(|i| self.token(*i))
            .is_some_and(|t| t.kind == Tok::Ident)
    }

    /// The statement without attribute groups, `template<…>` prefixes and access labels.
    fn clean(&self, statement: &[Item]) -> Vec<Item> {
        let mut items = Vec::with_capacity(statement.len());
        let mut i = 0;
        while i < statement.len() {
            let item = statement[i];
            let text = self.text(item);
            if ATTRIBUTES.contains(&text) && self.is(statement.get(i + 1), b'(') {
                i = self.skip(statement, i + 1);
                continue;
            }
            if text == "template" && self.is(statement.get(i + 1), b'<') {
                i = self.skip(statement, i + 1);
                continue;
            }
            if ACCESS.contains(&text)
                && self.is(statement.get(i + 1), b':')
                && !self.is(statement.get(i + 2), b':')
            {
                i += 2;
                continue;
            }
            if text == "__extension__" {
                i += 1;
                continue;
            }
            items.push(item);
            i += 1;
        }
        items
    }

    /// Past the group opening at `open` in `items`.
    fn skip(&self, items: &[Item], open: usize) -> usize {
        let (opening, closing) = match self.text(items[open]) {
            "(" => (b'(', b')'),
            "[" => (b'[', b']'),
            _ => (b'<', b'>'),
        };
        let mut depth = 0usize;
        for (i, item) in items.iter().enumerate().skip(open) {
            if self.is(Some(item), opening) {
                depth += 1;
            } else if self.is(Some(item), closing) {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
        }
        items.len()
    }

    fn container(&self) -> Option<String> {
        self.frames
            .iter()
            .rev()
            .find_map(|frame| match &frame.kind {
                Kind::Record(name) | Kind::Enum(name) => name.clone(),
                _ => None,
            })
    }

    /// What a `{` at statement level opens, tagging the definition it starts.
    fn open(&self, statement: &[Item], out: &mut Out) -> Kind {
        if matches!(self.top(), Kind::Enum(_)) {
            return Kind::Body;
        }
        let items = self.clean(statement);
        let first = items.first().map_or("", |i| self.text(*i));
        if first == "namespace"
            || (first == "inline" && items.get(1).is_some_and(|i| self.text(*i) == "namespace"))
            || (first == "extern"
                && items
                    .get(1)
                    .and_then(|i| self.token(*i))
                    .is_some_and(|t| t.kind == Tok::Str)
                && items.len() == 2)
        {
            return Kind::Scope;
        }
        if has_initializer(self, &items) {
            return Kind::Body;
        }
        // A record: the last struct/union/enum/class outside parentheses, with no `(` after.
        let mut depth = 0usize;
        let mut record = None;
        let mut paren_after = false;
        for (k, item) in items.iter().enumerate() {
            let text = self.text(*item);
            match text {
                "(" | "[" => {
                    depth += 1;
                    if record.is_some() {
                        paren_after = true;
                    }
                }
                ")" | "]" => depth = depth.saturating_sub(1),
                _ if depth == 0
                    && RECORDS.contains(&text)
                    && !(text != "enum" && k > 0 && self.text(items[k - 1]) == "enum") =>
                {
                    record = Some(k);
                    paren_after = false;
                }
                _ => {}
            }
        }
        if let Some(k) = record.filter(|_| !paren_after) {
            let keyword = self.text(items[k]);
            let mut name = None;
            for item in &items[k + 1..] {
                let Some(token) = self.token(*item) else {
                    break;
                };
                if token.is(b':') {
                    break;
                }
                if token.is_name()
                    && !matches!(token.text(self.source), "class" | "struct" | "final")
                {
                    name = Some(token);
                }
            }
            let container = self.container();
            if let Some(name) = name {
                let kind = if keyword == "enum" { "type" } else { "class" };
                out.add(name, kind, container.as_deref());
            }
            let name = name.map(|t| t.text(self.source).to_owned());
            return if keyword == "enum" {
                Kind::Enum(name)
            } else {
                Kind::Record(name)
            };
        }
        if let Some((name, qualifier)) = self.function(&items) {
            let kind = if qualifier.is_some() {
                "method"
            } else {
                "function"
            };
            let container = qualifier.or_else(|| self.container());
            out.add(name, kind, container.as_deref());
        }
        Kind::Body
    }

    /// The function a declaration declares or defines: the first name before a `(` at depth 0
    /// that follows a type, whose parentheses are a parameter list (not `(*name)`).
    fn function(&self, items: &[Item]) -> Option<(&'a Token, Option<String>)> {
        let mut depth = 0usize;
        for (k, item) in items.iter().enumerate() {
            let Some(token) = self.token(*item) else {
                continue;
            };
            if token.is(b'(') || token.is(b'[') {
                if depth == 0
                    && token.is(b'(')
                    && k > 0
                    && let Some(found) = self.function_name(items, k)
                {
                    return Some(found);
                }
                depth += 1;
            } else if token.is(b')') || token.is(b']') {
                depth = depth.saturating_sub(1);
            } else if depth == 0 && token.is(b'=') {
                return None;
            }
        }
        None
    }

    /// The name of a call that opens a statement at file scope (`NAME(…) …`).
    fn leading_call(&self, items: &[Item]) -> Option<&'a Token> {
        let name = self
            .token(*items.first()?)
            .filter(|t| t.kind == Tok::Ident)?;
        (self.is(items.get(1), b'(')
            && !NOT_NAMES.contains(&name.text(self.source))
            && !self.is(items.get(self.skip(items, 1)), b'('))
        .then_some(name)
    }

    /// The name before the `(` at `open`, if it is a function's.
    fn function_name(&self, items: &[Item], open: usize) -> Option<(&'a Token, Option<String>)> {
        let name = self
            .token(items[open - 1])
            .filter(|t| t.kind == Tok::Ident)?;
        if NOT_NAMES.contains(&name.text(self.source)) {
            return None;
        }
        if self.is(items.get(open + 1), b'*')
            || self.is(items.get(open + 1), b'^')
            || self.is(items.get(open + 1), b'&')
        {
            return None;
        }
        let close = self.skip(items, open);
        // `int (CALL *name)(int)`: a declarator group, not a parameter list.
        if self.is(items.get(close), b'(') {
            return None;
        }
        // `EXPORT(int) name (…)`: a macro that makes the return type.
        if self.is_ident(items.get(close)) && self.is(items.get(close + 1), b'(') {
            return None;
        }
        // `name OF((int x))`: a macro that makes the parameter list.
        if self.is(items.get(open + 1), b'(') && self.skip(items, open + 1) + 1 == close {
            let real = self.token(*items.get(open.checked_sub(2)?)?)?;
            return (real.kind == Tok::Ident).then_some((real, None));
        }
        let before = open.checked_sub(2).map(|k| items[k]);
        match before.and_then(|b| self.token(b)) {
            Some(t) if t.is(b':') && open >= 4 && self.is(items.get(open - 3), b':') => {
                let scope = self.token(items[open - 4]).filter(|t| t.is_name())?;
                Some((name, Some(scope.text(self.source).to_owned())))
            }
            Some(t) if t.kind == Tok::Ident => {
                (!NOT_TYPES.contains(&t.text(self.source))).then_some((name, None))
            }
            // `*`, `&`, a template's `>`, or a macro's `)`: `EXPORT(char *) name (…)`.
            Some(t) if t.is(b'*') || t.is(b'&') || t.is(b'>') || t.is(b')') => Some((name, None)),
            _ => None,
        }
    }

    /// A declaration ended by `;`: a prototype, or typedefs, variables or members.
    fn declaration(&self, statement: &[Item], out: &mut Out) {
        let items = self.clean(statement);
        if items.is_empty() {
            return;
        }
        let depth0 = |word: &str| {
            let mut depth = 0usize;
            items.iter().any(|item| match self.text(*item) {
                "(" | "[" => {
                    depth += 1;
                    false
                }
                ")" | "]" => {
                    depth = depth.saturating_sub(1);
                    false
                }
                text => depth == 0 && text == word,
            })
        };
        let typedef = depth0("typedef");
        let in_record = matches!(self.top(), Kind::Record(_));
        let container = self.container();
        if !typedef
            && !in_record
            && let Some(name) = self.leading_call(&items)
        {
            // `STACK_OF(X509) *f(void);`, `DEFINE_HANDLE(t);`: a macro making a declaration,
            // which is what a tags program records (it cannot expand the macro either).
            out.add(name, "function", container.as_deref());
        }
        if !typedef && let Some((name, qualifier)) = self.function(&items) {
            let container = qualifier.or(container);
            let kind = if container.is_some() {
                "method"
            } else {
                "function"
            };
            out.add(name, kind, container.as_deref());
            return;
        }
        let first = self.text(items[0]);
        if !typedef
            && !in_record
            && (depth0("extern")
                || matches!(
                    first,
                    "using" | "namespace" | "friend" | "return" | "template"
                ))
        {
            return;
        }
        let kind = if typedef {
            "type"
        } else if in_record {
            "field"
        } else {
            "constant"
        };
        let mut depth = 0usize;
        let mut segment_start = 0;
        for k in 0..=items.len() {
            let item = items.get(k);
            let end = match item.and_then(|i| self.token(*i)) {
                None if k == items.len() => true,
                Some(t) if t.is(b'(') || t.is(b'[') => {
                    depth += 1;
                    false
                }
                Some(t) if t.is(b')') || t.is(b']') => {
                    depth = depth.saturating_sub(1);
                    false
                }
                Some(t) => depth == 0 && t.is(b','),
                None => false,
            };
            if end {
                let segment = &items[segment_start..k];
                if let Some(name) = self.declarator(segment, segment_start == 0) {
                    out.add(name, kind, container.as_deref());
                }
                segment_start = k + 1;
            }
        }
    }

    /// The name a declarator declares: `name`, `*name[3]`, `(*name)(int)`, `name : 3`,
    /// `name = value`; in the first one, after its type.
    fn declarator(&self, segment: &[Item], first: bool) -> Option<&'a Token> {
        // Up to an initializer or a bit width.
        let mut depth = 0usize;
        let mut end = segment.len();
        for (k, item) in segment.iter().enumerate() {
            match self.text(*item) {
                "(" | "[" => depth += 1,
                ")" | "]" => depth = depth.saturating_sub(1),
                "=" if depth == 0 => {
                    end = k;
                    break;
                }
                ":" if depth == 0
                    && !self.is(segment.get(k + 1), b':')
                    && !(k > 0 && self.is(segment.get(k - 1), b':')) =>
                {
                    end = k;
                    break;
                }
                _ => {}
            }
        }
        let segment = &segment[..end];
        // The first group: `(*name)(int)` or `(CALL *name)[3]` (a declarator group, followed
        // by parameters or dimensions: the name is inside), or `name(int)` (parameters: the
        // name is before it).
        if let Some(open) = segment.iter().position(|item| self.is(Some(item), b'(')) {
            let close = self.skip(segment, open);
            let declarator_group = self.is(segment.get(close), b'(')
                || self.is(segment.get(close), b'[')
                || self.is(segment.get(open + 1), b'*')
                || self.is(segment.get(open + 1), b'^');
            if declarator_group {
                return segment[open + 1..close.saturating_sub(1).max(open + 1)]
                    .iter()
                    .filter_map(|i| self.token(*i))
                    .take_while(|t| !t.is(b'(') && !t.is(b'['))
                    .filter(|t| t.kind == Tok::Ident)
                    .filter(|t| {
                        !matches!(
                            t.text(self.source),
                            "const" | "volatile" | "__restrict" | "restrict"
                        )
                    })
                    .last();
            }
            if open > 0 {
                return self
                    .token(segment[open - 1])
                    .filter(|t| t.kind == Tok::Ident && (!first || open > 1));
            }
            return None;
        }
        // Otherwise the last name outside brackets.
        let mut depth = 0usize;
        let mut found = None;
        for (k, item) in segment.iter().enumerate() {
            match self.text(*item) {
                "(" | "[" => depth += 1,
                ")" | "]" => depth = depth.saturating_sub(1),
                _ if depth == 0 && self.is_ident(Some(item)) => found = Some(k),
                _ => {}
            }
        }
        let k = found?;
        let token = self.token(segment[k])?;
        let text = token.text(self.source);
        if first && k == 0 {
            return None;
        }
        if k > 0 && RECORDS.contains(&self.text(segment[k - 1])) {
            return None;
        }
        if matches!(
            text,
            "int"
                | "char"
                | "short"
                | "long"
                | "unsigned"
                | "signed"
                | "float"
                | "double"
                | "void"
                | "const"
                | "volatile"
                | "bool"
                | "_Bool"
                | "auto"
                | "typedef"
        ) {
            return None;
        }
        Some(token)
    }

    /// One enumerator: its name first, then nothing or `= value`.
    fn enumerator(&self, statement: &[Item], enumeration: Option<&str>, out: &mut Out) {
        let items = self.clean(statement);
        let Some(name) = items.first().and_then(|i| self.token(*i)) else {
            return;
        };
        // `NAME`, `NAME = value`, or a macro making one: `FROM_FORMAT(FIXED)`.
        let whole_call = self.is(items.get(1), b'(') && self.skip(&items, 1) == items.len();
        if name.kind == Tok::Ident
            && (items.len() == 1 || self.is(items.get(1), b'=') || whole_call)
        {
            out.add(name, "constant", enumeration);
        }
    }
}
