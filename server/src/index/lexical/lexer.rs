//! The tokens a lexical scanner reads: identifiers, punctuation and literals, with comments
//! skipped and string contents hidden, per language's syntax.
//!
//! Hiding what is inside comments and strings is what keeps a keyword scanner precise: a
//! `fn foo` in a doc comment or a `def bar` in a docstring is not a definition. Each literal
//! form a language has is lexed as a whole (Rust raw strings and lifetimes, Python triple
//! quotes, C++ raw strings, Go and JavaScript backticks, JavaScript regular expressions), since
//! one quote misread would turn the rest of the file inside out.

use crate::languages::Language;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tok {
    Ident,
    /// `r#type`: an identifier that is never a keyword (the token spans `type`).
    RawIdent,
    Punct(u8),
    /// A string or character literal (or a regular expression), contents hidden.
    Str,
    Number,
    /// The name of a C preprocessor `#define` (the rest of the directive is skipped, as are
    /// all other directives).
    Define,
}

#[derive(Clone, Copy, Debug)]
pub struct Token {
    pub kind: Tok,
    pub start: u32,
    pub end: u32,
    /// Zero-based line of the token's start.
    pub line: u32,
}

impl Token {
    pub fn text<'a>(&self, source: &'a str) -> &'a str {
        source
            .get(self.start as usize..self.end as usize)
            .unwrap_or("")
    }

    pub fn is(&self, byte: u8) -> bool {
        self.kind == Tok::Punct(byte)
    }

    pub fn is_name(&self) -> bool {
        matches!(self.kind, Tok::Ident | Tok::RawIdent)
    }

    /// Whether this is the identifier `word` (a keyword: raw identifiers never are).
    pub fn is_word(&self, source: &str, word: &str) -> bool {
        self.kind == Tok::Ident && self.text(source) == word
    }
}

/// Which literal and comment forms a language has.
#[derive(Clone, Copy, Default)]
struct Syntax {
    slash_comments: bool,
    nested_block_comments: bool,
    hash_comments: bool,
    rust_literals: bool,
    triple_quotes: bool,
    python_prefixes: bool,
    backticks: bool,
    preprocessor: bool,
    cpp_raw_strings: bool,
    regex_literals: bool,
    /// `$` is a name's character (JavaScript, Java, Ruby), not a macro's metavariable.
    dollar_names: bool,
    ruby_block_comments: bool,
    single_quote_strings: bool,
}

fn syntax(language: Language) -> Syntax {
    let c_like = Syntax {
        slash_comments: true,
        ..Syntax::default()
    };
    match language {
        Language::Rust => Syntax {
            nested_block_comments: true,
            rust_literals: true,
            ..c_like
        },
        Language::C | Language::Cpp => Syntax {
            preprocessor: true,
            cpp_raw_strings: language == Language::Cpp,
            ..c_like
        },
        Language::Go => Syntax {
            backticks: true,
            ..c_like
        },
        Language::Java => Syntax {
            triple_quotes: true,
            dollar_names: true,
            ..c_like
        },
        Language::JavaScript | Language::TypeScript | Language::Tsx => Syntax {
            backticks: true,
            regex_literals: true,
            single_quote_strings: true,
            dollar_names: true,
            ..c_like
        },
        Language::Python => Syntax {
            hash_comments: true,
            triple_quotes: true,
            python_prefixes: true,
            single_quote_strings: true,
            ..Syntax::default()
        },
        Language::Ruby => Syntax {
            hash_comments: true,
            ruby_block_comments: true,
            single_quote_strings: true,
            dollar_names: true,
            ..Syntax::default()
        },
    }
}

fn is_ident_start(byte: u8) -> bool {
    byte.is_ascii_alphabetic() || byte == b'_' || byte >= 0x80
}

fn is_ident_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'_' || byte >= 0x80
}

/// JavaScript words after which a `/` starts a regular expression, not a division.
const REGEX_AFTER: &[&str] = &[
    "return",
    "typeof",
    "case",
    "do",
    "else",
    "in",
    "of",
    "new",
    "delete",
    "void",
    "throw",
    "yield",
    "await",
    "instanceof",
];

/// The tokens of `source` in `language`'s syntax.
pub fn tokens(language: Language, source: &str) -> Vec<Token> {
    Lexer {
        syntax: syntax(language),
        source,
        bytes: source.as_bytes(),
        at: 0,
        line: 0,
        line_start: true,
        out: Vec::with_capacity(source.len() / 6),
    }
    .run()
}

struct Lexer<'a> {
    syntax: Syntax,
    source: &'a str,
    bytes: &'a [u8],
    at: usize,
    line: u32,
    /// Only blanks since the last line break (where `#` starts a C directive).
    line_start: bool,
    out: Vec<Token>,
}

impl Lexer<'_> {
    fn peek(&self, ahead: usize) -> u8 {
        self.bytes.get(self.at + ahead).copied().unwrap_or(0)
    }

    fn push(&mut self, kind: Tok, start: usize, line: u32) {
        self.out.push(Token {
            kind,
            start: start as u32,
            end: self.at as u32,
            line,
        });
    }

    /// Advances to `to`, counting line breaks on the way.
    fn advance_to(&mut self, to: usize) {
        let to = to.min(self.bytes.len());
        self.line += memchr::memchr_iter(b'\n', &self.bytes[self.at..to]).count() as u32;
        self.at = to;
    }

    fn run(mut self) -> Vec<Token> {
        let s = self.syntax;
        while self.at < self.bytes.len() {
            let byte = self.bytes[self.at];
            if byte == b'\n' {
                self.line += 1;
                self.at += 1;
                self.line_start = true;
                continue;
            }
            if byte.is_ascii_whitespace() {
                self.at += 1;
                continue;
            }
            let line_start = std::mem::replace(&mut self.line_start, false);
            let start = self.at;
            let line = self.line;
            if s.slash_comments && byte == b'/' && self.peek(1) == b'/' {
                self.skip_line();
            } else if s.slash_comments && byte == b'/' && self.peek(1) == b'*' {
                self.skip_block_comment();
            } else if s.hash_comments && byte == b'#' {
                self.skip_line();
            } else if s.ruby_block_comments && line_start && self.starts_with(b"=begin") {
                self.skip_ruby_block_comment();
            } else if s.preprocessor && line_start && byte == b'#' {
                self.directive();
            } else if is_ident_start(byte) || (s.dollar_names && byte == b'$') {
                self.identifier();
            } else if byte.is_ascii_digit() {
                while self.at < self.bytes.len()
                    && (is_ident_byte(self.bytes[self.at])
                        || (self.bytes[self.at] == b'.' && self.peek(1).is_ascii_digit()))
                {
                    self.at += 1;
                }
                self.push(Tok::Number, start, line);
            } else if byte == b'"' {
                if s.triple_quotes && self.starts_with(b"\"\"\"") {
                    self.triple_quoted(b'"');
                } else {
                    self.quoted(b'"');
                }
                self.push(Tok::Str, start, line);
            } else if byte == b'\'' {
                if s.triple_quotes && s.python_prefixes && self.starts_with(b"'''") {
                    self.triple_quoted(b'\'');
                    self.push(Tok::Str, start, line);
                } else if s.rust_literals {
                    self.rust_quote(start, line);
                } else if s.single_quote_strings {
                    self.quoted(b'\'');
                    self.push(Tok::Str, start, line);
                } else {
                    // A C, Go or Java character: short, on one line.
                    self.char_literal();
                    self.push(Tok::Str, start, line);
                }
            } else if s.backticks && byte == b'`' {
                self.quoted_multiline(b'`');
                self.push(Tok::Str, start, line);
            } else if s.regex_literals && byte == b'/' && self.regex_allowed() {
                if !self.regex() {
                    self.at = start + 1;
                    self.push(Tok::Punct(b'/'), start, line);
                } else {
                    self.push(Tok::Str, start, line);
                }
            } else if byte == b'\\' && matches!(self.peek(1), b'\n' | b'\r') {
                // A line continuation joins two lines into one.
                self.at += 1;
            } else {
                self.at += 1;
                self.push(Tok::Punct(byte), start, line);
            }
        }
        self.out
    }

    fn starts_with(&self, prefix: &[u8]) -> bool {
        self.bytes[self.at..].starts_with(prefix)
    }

    fn skip_line(&mut self) {
        self.at =
            memchr::memchr(b'\n', &self.bytes[self.at..]).map_or(self.bytes.len(), |i| self.at + i);
    }

    fn skip_block_comment(&mut self) {
        let mut depth = 0usize;
        while self.at < self.bytes.len() {
            if self.starts_with(b"/*") {
                depth += 1;
                self.at += 2;
                if !self.syntax.nested_block_comments {
                    depth = 1;
                }
            } else if self.starts_with(b"*/") {
                self.at += 2;
                depth -= 1;
                if depth == 0 {
                    return;
                }
            } else {
                if self.bytes[self.at] == b'\n' {
                    self.line += 1;
                }
                self.at += 1;
            }
        }
    }

    fn skip_ruby_block_comment(&mut self) {
        loop {
            self.skip_line();
            if self.at >= self.bytes.len() {
                return;
            }
            self.at += 1;
            self.line += 1;
            if self.starts_with(b"=end") {
                self.skip_line();
                return;
            }
        }
    }

    /// A C directive: `#define NAME` yields the name; every directive is skipped to its end
    /// (continuations and comments included).
    fn directive(&mut self) {
        self.at += 1;
        while matches!(self.peek(0), b' ' | b'\t') {
            self.at += 1;
        }
        if self.starts_with(b"define") && !is_ident_byte(self.peek(6)) {
            self.at += 6;
            while matches!(self.peek(0), b' ' | b'\t') {
                self.at += 1;
            }
            let start = self.at;
            while self.at < self.bytes.len() && is_ident_byte(self.bytes[self.at]) {
                self.at += 1;
            }
            if self.at > start {
                self.push(Tok::Define, start, self.line);
            }
        }
        while self.at < self.bytes.len() {
            match self.bytes[self.at] {
                b'\n' => return,
                b'\\' if matches!(self.peek(1), b'\n' | b'\r') => {
                    let skip = if self.peek(1) == b'\r' && self.peek(2) == b'\n' {
                        3
                    } else {
                        2
                    };
                    self.advance_to(self.at + skip);
                }
                b'/' if self.peek(1) == b'*' => self.skip_block_comment(),
                b'/' if self.peek(1) == b'/' => return self.skip_line(),
                _ => self.at += 1,
            }
        }
    }

    fn identifier(&mut self) {
        let start = self.at;
        let line = self.line;
        self.at += 1;
        while self.at < self.bytes.len()
            && (is_ident_byte(self.bytes[self.at])
                || (self.syntax.dollar_names && self.bytes[self.at] == b'$'))
        {
            self.at += 1;
        }
        let word = &self.bytes[start..self.at];
        let next = self.peek(0);
        let s = self.syntax;
        if s.rust_literals {
            if word == b"r" && next == b'#' && is_ident_start(self.peek(1)) {
                // A raw identifier: the token is the name without `r#`.
                self.at += 1;
                let name = self.at;
                while self.at < self.bytes.len() && is_ident_byte(self.bytes[self.at]) {
                    self.at += 1;
                }
                return self.push(Tok::RawIdent, name, line);
            }
            if matches!(word, b"r" | b"br" | b"cr") && matches!(next, b'"' | b'#') {
                if self.rust_raw_string() {
                    return self.push(Tok::Str, start, line);
                }
            } else if matches!(word, b"b" | b"c") && next == b'"' {
                self.quoted_multiline(b'"');
                return self.push(Tok::Str, start, line);
            } else if word == b"b" && next == b'\'' {
                self.char_literal();
                return self.push(Tok::Str, start, line);
            }
        }
        if s.python_prefixes
            && word.len() <= 2
            && word
                .iter()
                .all(|b| matches!(b.to_ascii_lowercase(), b'r' | b'b' | b'f' | b'u'))
            && matches!(next, b'"' | b'\'')
        {
            if self.starts_with(b"\"\"\"") || self.starts_with(b"'''") {
                self.triple_quoted(next);
            } else {
                self.quoted(next);
            }
            return self.push(Tok::Str, start, line);
        }
        if s.cpp_raw_strings && word.ends_with(b"R") && word.len() <= 3 && next == b'"' {
            self.cpp_raw_string();
            return self.push(Tok::Str, start, line);
        }
        self.push(Tok::Ident, start, line);
    }

    /// A string on one line (`"` or `'`, with escapes): an unterminated one ends at the line.
    /// Only Rust's strings span lines; elsewhere an unterminated quote ends at the line, so
    /// that a stray one cannot swallow the rest of the file.
    fn quoted(&mut self, quote: u8) {
        self.at += 1;
        self.string_rest(quote, self.syntax.rust_literals);
    }

    /// A string that may span lines (Rust byte strings, backticks), with escapes; `at` is on
    /// its quote or on a one-byte prefix before it.
    fn quoted_multiline(&mut self, quote: u8) {
        if self.bytes[self.at] != quote {
            self.at += 1;
        }
        self.at += 1;
        self.string_rest(quote, true);
    }

    /// The rest of a string after its opening quote, through the closing one.
    fn string_rest(&mut self, quote: u8, spans_lines: bool) {
        while self.at < self.bytes.len() {
            match self.bytes[self.at] {
                b'\\' => {
                    if self.peek(1) == b'\n' {
                        self.line += 1;
                    }
                    self.at += 2;
                }
                b'\n' if !spans_lines => return,
                b'\n' => {
                    self.line += 1;
                    self.at += 1;
                }
                byte if byte == quote => {
                    self.at += 1;
                    return;
                }
                _ => self.at += 1,
            }
        }
        self.at = self.at.min(self.bytes.len());
    }

    fn triple_quoted(&mut self, quote: u8) {
        self.at += 3;
        let close = [quote; 3];
        while self.at < self.bytes.len() {
            match self.bytes[self.at] {
                b'\\' => {
                    if self.peek(1) == b'\n' {
                        self.line += 1;
                    }
                    self.at += 2;
                }
                b'\n' => {
                    self.line += 1;
                    self.at += 1;
                }
                _ if self.starts_with(&close) => {
                    self.at += 3;
                    return;
                }
                _ => self.at += 1,
            }
        }
        self.at = self.at.min(self.bytes.len());
    }

    /// A character literal: up to the closing quote on the same line, at most a few bytes.
    fn char_literal(&mut self) {
        let open = self.bytes[self.at..].iter().position(|&b| b == b'\'');
        let Some(open) = open else {
            self.at += 1;
            return;
        };
        let from = self.at + open + 1;
        let mut i = from;
        while i < self.bytes.len() && i < from + 16 {
            match self.bytes[i] {
                b'\\' => i += 2,
                b'\'' => {
                    self.at = i + 1;
                    return;
                }
                b'\n' => break,
                _ => i += 1,
            }
        }
        // Not a character after all: only the quote is skipped.
        self.at = from;
    }

    /// Rust's `'`: a character literal, or a lifetime (then the quote is punctuation and the
    /// name follows as an identifier).
    fn rust_quote(&mut self, start: usize, line: u32) {
        let next = self.peek(1);
        if next == b'\\' {
            self.char_literal();
            return self.push(Tok::Str, start, line);
        }
        let width = match next {
            0..=0x7f => 1,
            0xc0..=0xdf => 2,
            0xe0..=0xef => 3,
            _ => 4,
        };
        if self.peek(1 + width) == b'\'' {
            self.at += 2 + width;
            return self.push(Tok::Str, start, line);
        }
        self.at += 1;
        self.push(Tok::Punct(b'\''), start, line);
    }

    /// `r"…"`, `r#"…"#`, `br##"…"##`; `false` (nothing consumed) when it is not one.
    fn rust_raw_string(&mut self) -> bool {
        let mut i = self.at;
        while self.bytes.get(i) == Some(&b'#') {
            i += 1;
        }
        if self.bytes.get(i) != Some(&b'"') {
            return false;
        }
        let hashes = i - self.at;
        let mut close = vec![b'"'];
        close.extend(std::iter::repeat_n(b'#', hashes));
        let body = i + 1;
        let end = memchr::memmem::find(&self.bytes[body..], &close)
            .map_or(self.bytes.len(), |j| body + j + close.len());
        self.advance_to(end);
        true
    }

    /// `R"delim(…)delim"`.
    fn cpp_raw_string(&mut self) {
        let body = self.at + 1;
        let Some(open) = self.bytes[body..].iter().take(17).position(|&b| b == b'(') else {
            return self.quoted(b'"');
        };
        let mut close = vec![b')'];
        close.extend_from_slice(&self.bytes[body..body + open]);
        close.push(b'"');
        let from = body + open + 1;
        let end = memchr::memmem::find(&self.bytes[from..], &close)
            .map_or(self.bytes.len(), |j| from + j + close.len());
        self.advance_to(end);
    }

    /// Whether a `/` here starts a JavaScript regular expression: where a value is expected.
    fn regex_allowed(&self) -> bool {
        if matches!(self.peek(1), b'/' | b'*') {
            return false;
        }
        match self.out.last() {
            None => true,
            Some(last) => match last.kind {
                Tok::Punct(b')' | b']' | b'}') => false,
                Tok::Punct(_) => true,
                Tok::Ident => REGEX_AFTER.contains(&last.text(self.source)),
                _ => false,
            },
        }
    }

    /// A regular expression literal on one line; `false` (nothing consumed) if it has no end.
    fn regex(&mut self) -> bool {
        let mut i = self.at + 1;
        let mut class = false;
        while i < self.bytes.len() {
            match self.bytes[i] {
                b'\\' => i += 2,
                b'\n' => return false,
                b'[' => {
                    class = true;
                    i += 1;
                }
                b']' => {
                    class = false;
                    i += 1;
                }
                b'/' if !class => {
                    i += 1;
                    while i < self.bytes.len() && self.bytes[i].is_ascii_alphabetic() {
                        i += 1;
                    }
                    self.at = i;
                    return true;
                }
                _ => i += 1,
            }
        }
        false
    }
}
