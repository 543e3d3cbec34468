//! A second look at C and C++ code that macros confused.
//!
//! tree-sitter parses C without its preprocessor, so a header full of calling-convention and
//! attribute macros (`GLAPI void * GLAPIENTRY gluNewQuadric (void);`, `) __THROW __nonnull
//! ((1));`, `static void _X_ATTRIBUTE_PRINTF(1, 2) ErrorF(…)`) parses with errors, and the
//! declarations around the errors are lost. [`blank_noise`] writes spaces over what looks like
//! such a macro, keeping every other byte (and so every offset and line) in place; the file is
//! tagged again from that text and the definitions only the second pass found are added.
//! Nothing the first pass found is ever replaced, so a wrong guess costs nothing.

use std::ops::Range;

/// A token of C source, as far as the heuristics need one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Token {
    Identifier(usize, usize),
    /// One punctuation byte at an offset.
    Punct(u8, usize),
    /// A number or anything else that is neither.
    Other,
}

impl Token {
    fn is(self, byte: u8) -> bool {
        matches!(self, Token::Punct(b, _) if b == byte)
    }

    fn is_identifier(self) -> bool {
        matches!(self, Token::Identifier(..))
    }
}

/// `source` with the tokens that look like attribute or calling-convention macros replaced by
/// spaces, or `None` when there are none.
pub fn blank_noise(source: &str) -> Option<String> {
    let bytes = source.as_bytes();
    let Scan {
        tokens,
        nested_directives,
        ..
    } = scan(bytes);
    // A directive inside a parameter list or a body (`#if NeedWidePrototypes` between
    // parameters, `#define` between enumerators) is an error to a parser that does not
    // preprocess; without it, both branches read as one list, which still declares the names.
    let mut blanks = nested_directives;
    // The last token not blanked: what the parser will see before the current one.
    let mut previous = Token::Other;
    let mut i = 0;
    while i < tokens.len() {
        let token = tokens[i];
        let Token::Identifier(start, end) = token else {
            previous = token;
            i += 1;
            continue;
        };
        let at = |k: usize| tokens.get(k).copied().unwrap_or(Token::Other);
        let after_parameters = previous.is(b')');
        let spelling = Spelling::of(&source[start..end]);
        // A lowercase reserved name before a declarator is a type (`__ssize_t n`); after a
        // parameter list it is an attribute (`__wur`, `__nonnull ((1))`).
        if spelling == Spelling::Plain || (spelling == Spelling::Reserved && !after_parameters) {
            previous = token;
            i += 1;
            continue;
        }
        if at(i + 1).is(b'(') {
            // `NAME(…)`: an attribute when a declaration goes on after it.
            let Some(close) = matching_paren(&tokens, i + 1) else {
                previous = token;
                i += 1;
                continue;
            };
            let (after, after2) = (at(close + 1), at(close + 2));
            let attribute = if after.is_identifier() {
                after2.is(b'(') || after2.is(b'*') || after2.is_identifier() || after_parameters
            } else {
                after_parameters && (after.is(b';') || after.is(b'{') || after.is(b','))
            };
            if attribute {
                let Token::Punct(_, close_at) = tokens[close] else {
                    unreachable!("matching_paren returns a parenthesis")
                };
                blanks.push(start..close_at + 1);
                i = close + 1;
                continue;
            }
        } else {
            let next = at(i + 1);
            let noise = next.is_identifier()
                || (after_parameters
                    && (next.is(b';') || next.is(b'{') || next.is(b',') || next.is(b'=')));
            if noise {
                blanks.push(start..end);
                i += 1;
                continue;
            }
        }
        previous = token;
        i += 1;
    }
    if blanks.is_empty() {
        return None;
    }
    let mut blanked = bytes.to_vec();
    for range in blanks {
        for byte in &mut blanked[range] {
            // Line breaks stay, so lines keep their numbers; every other byte of a UTF-8
            // sequence becomes a space, so offsets stay too.
            if *byte != b'\n' {
                *byte = b' ';
            }
        }
    }
    Some(String::from_utf8(blanked).expect("only whole tokens and parentheses are blanked"))
}

/// How an identifier is spelled, as far as telling attribute macros apart goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Spelling {
    /// All capitals, at least three characters: `GLAPIENTRY`, `_X_NORETURN`, `__THROW`. A type
    /// spelled so is blanked too, but then only the second pass loses it.
    Capitals,
    /// Reserved for the implementation: `__wur`, `__nonnull`, `__ssize_t`.
    Reserved,
    Plain,
}

impl Spelling {
    fn of(name: &str) -> Self {
        if name.len() >= 3
            && name.bytes().any(|b| b.is_ascii_uppercase())
            && name
                .bytes()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
        {
            Spelling::Capitals
        } else if name.len() > 2 && name.starts_with("__") {
            Spelling::Reserved
        } else {
            Spelling::Plain
        }
    }
}

/// The index of the `)` closing the `(` at `open`, if the file has one.
fn matching_paren(tokens: &[Token], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (k, token) in tokens.iter().enumerate().skip(open) {
        if token.is(b'(') {
            depth += 1;
        } else if token.is(b')') {
            depth -= 1;
            if depth == 0 {
                return Some(k);
            }
        } else if token.is(b';') || token.is(b'{') || token.is(b'}') {
            // A statement ended first: not an attribute's argument list.
            return None;
        }
    }
    None
}

/// The names of the macros `source` defines (`#define NAME`), with the range of each
/// directive (continued lines included). Every one is a definition, wherever it sits: a
/// parser that does not preprocess loses some of them in the errors around it.
pub fn defines(source: &str) -> Vec<(Range<usize>, Range<usize>)> {
    scan(source.as_bytes()).defines
}

/// What one pass over C source finds.
struct Scan {
    /// Identifiers and punctuation, outside comments, literals and preprocessor lines (which
    /// the heuristics must leave alone: a `#define` of the very macro would lose its name).
    tokens: Vec<Token>,
    /// Preprocessor lines inside parentheses or braces.
    nested_directives: Vec<Range<usize>>,
    /// `#define`s: the name, and the whole directive.
    defines: Vec<(Range<usize>, Range<usize>)>,
}

fn scan(source: &[u8]) -> Scan {
    let mut tokens = Vec::new();
    let mut nested_directives = Vec::new();
    let mut defines = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    let mut line_start = true;
    while i < source.len() {
        let byte = source[i];
        match byte {
            b'\n' => {
                line_start = true;
                i += 1;
                continue;
            }
            b' ' | b'\t' | b'\r' | b'\x0c' => {
                i += 1;
                continue;
            }
            b'#' if line_start => {
                let start = i;
                // To the end of the line, and of every line a backslash continues.
                while i < source.len() && source[i] != b'\n' {
                    if source[i] == b'\\' && source.get(i + 1) == Some(&b'\n') {
                        i += 1;
                    }
                    i += 1;
                }
                if depth > 0 {
                    nested_directives.push(start..i);
                }
                if let Some(name) = defined_name(source, start, i) {
                    defines.push((name, start..i));
                }
                continue;
            }
            b'/' if source.get(i + 1) == Some(&b'/') => {
                while i < source.len() && source[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b'/' if source.get(i + 1) == Some(&b'*') => {
                i += 2;
                while i < source.len() && !(source[i] == b'*' && source.get(i + 1) == Some(&b'/')) {
                    i += 1;
                }
                i += 2;
                line_start = false;
                continue;
            }
            b'"' | b'\'' => {
                i += 1;
                while i < source.len() && source[i] != byte && source[i] != b'\n' {
                    i += if source[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
                tokens.push(Token::Other);
            }
            b'a'..=b'z' | b'A'..=b'Z' | b'_' => {
                let start = i;
                while i < source.len() && (source[i].is_ascii_alphanumeric() || source[i] == b'_') {
                    i += 1;
                }
                tokens.push(Token::Identifier(start, i));
            }
            b'0'..=b'9' => {
                while i < source.len() && (source[i].is_ascii_alphanumeric() || source[i] == b'.') {
                    i += 1;
                }
                tokens.push(Token::Other);
            }
            _ if byte.is_ascii_punctuation() => {
                match byte {
                    b'(' | b'{' | b'[' => depth += 1,
                    b')' | b'}' | b']' => depth = depth.saturating_sub(1),
                    _ => {}
                }
                tokens.push(Token::Punct(byte, i));
                i += 1;
            }
            _ => {
                tokens.push(Token::Other);
                i += 1;
            }
        }
        line_start = false;
    }
    Scan {
        tokens,
        nested_directives,
        defines,
    }
}

/// The name a `#define` directive spanning `start..end` defines.
fn defined_name(source: &[u8], start: usize, end: usize) -> Option<Range<usize>> {
    let skip_blanks = |mut i: usize| {
        while i < end && matches!(source[i], b' ' | b'\t') {
            i += 1;
        }
        i
    };
    let keyword = skip_blanks(start + 1);
    let rest = source[keyword..end].strip_prefix(b"define")?;
    if !rest.first().is_some_and(|b| matches!(b, b' ' | b'\t')) {
        return None;
    }
    let name_start = skip_blanks(keyword + "define".len());
    let mut name_end = name_start;
    while name_end < end && (source[name_end].is_ascii_alphanumeric() || source[name_end] == b'_') {
        name_end += 1;
    }
    (name_end > name_start && !source[name_start].is_ascii_digit()).then_some(name_start..name_end)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blanked(source: &str) -> String {
        let out = blank_noise(source).unwrap_or_else(|| source.to_owned());
        assert_eq!(out.len(), source.len());
        out.split_whitespace().collect::<Vec<_>>().join(" ")
    }

    #[test]
    fn calling_conventions_and_attributes_are_blanked() {
        assert_eq!(
            blanked("GLAPI GLUnurbs* GLAPIENTRY gluNewNurbsRenderer (void);"),
            "GLUnurbs* gluNewNurbsRenderer (void);"
        );
        assert_eq!(
            blanked("typedef EGLBoolean (EGLAPIENTRYP PFNEGLCHOOSECONFIGPROC) (EGLDisplay dpy);"),
            "typedef EGLBoolean ( PFNEGLCHOOSECONFIGPROC) (EGLDisplay dpy);"
        );
        assert_eq!(
            blanked("extern int aio_read (struct aiocb *__aiocbp) __THROW __nonnull ((1)) __wur;"),
            "extern int aio_read (struct aiocb *__aiocbp) ;"
        );
        assert_eq!(
            blanked("static inline void _X_ATTRIBUTE_PRINTF(1, 2)\nErrorF(const char *f, ...)\n{}"),
            "static inline void ErrorF(const char *f, ...) {}"
        );
        assert_eq!(
            blanked("extern void _XtAllocError(String) _X_NORETURN;"),
            "extern void _XtAllocError(String) ;"
        );
    }

    #[test]
    fn names_definitions_and_directives_stay() {
        for source in [
            "int FOO(void) { return 0; }",
            "#define GLAPIENTRY __stdcall\n#define MAX(a, b) ((a) > (b) ? (a) : (b))\n",
            "enum { RED, GREEN = BLUE };",
            "char *s = \"GLAPI void\"; /* FGAPI int */",
            "x = MAX(a, b);",
        ] {
            assert_eq!(blank_noise(source), None, "{source}");
        }
    }

    #[test]
    fn directives_inside_lists_are_blanked_and_defines_found() {
        assert_eq!(
            blanked(
                "Xauth *XauGetAuthByAddr(\n#if Wide\nunsigned int,\n#else\nunsigned short,\n#endif\nchar*);"
            ),
            "Xauth *XauGetAuthByAddr( unsigned int, unsigned short, char*);"
        );
        assert_eq!(
            blanked("extern __ssize_t aio_return64 (int) __THROW __nonnull ((1));"),
            "extern __ssize_t aio_return64 (int) ;"
        );
        let source =
            "#define A 1\n  #  define B(x) \\\n  (x)\n#undef A\n/* #define C */\n#define\n";
        let names: Vec<&str> = defines(source)
            .into_iter()
            .map(|(name, _)| &source[name])
            .collect();
        assert_eq!(names, ["A", "B"]);
        let (_, directive) = &defines(source)[1];
        assert!(source[directive.clone()].ends_with("(x)"));
    }

    #[test]
    fn lines_and_offsets_are_kept() {
        let source = "GLAPI\nvoid\tGLAPIENTRY f(int);\n/* é */ int g;\n";
        let out = blank_noise(source).unwrap();
        assert_eq!(out.len(), source.len());
        assert_eq!(out.find('f'), source.find('f'));
        assert_eq!(out.lines().count(), source.lines().count());
    }
}
