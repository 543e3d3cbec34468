//! The tantivy schema of the symbol index, and the tokenizer that splits identifiers.
//!
//! One document per definition, and one per name a file references. A definition's `name` is
//! searched through identifier parts (`parseHttpRequest` → `parsehttprequest`, `parse`,
//! `http`, `request`), `name_raw` matches exact names, `name_lower` exact names regardless of
//! case (and fuzzy terms). A reference document holds every site of one name in one file (its
//! `line`, `column` and `ref_kind` values, in step) and is found by `ref_name` alone, so a
//! symbol query meets definitions only without a filter. A definition's file is its `path`, a
//! reference document's its `ref_path`, so an outline meets definitions only too; the two
//! terms of [`Fields::file_terms`] select all of a file's documents, and every delete of a
//! file goes through [`Fields::delete_file`].
//!
//! Only what some query asks is indexed, the rest is stored: every indexed term is paid for
//! on each of the hundreds of thousands of documents a cold index writes, twice (the lexical
//! phase, then the tree-sitter pass).

use tantivy::schema::{
    Field, IndexRecordOption, STORED, STRING, Schema, TextFieldIndexing, TextOptions,
};
use tantivy::tokenizer::{Token, TokenStream, Tokenizer};
use tantivy::{IndexWriter, Term};

/// Bumped whenever the schema, the tokenizer, what extraction stores or the manifest changes
/// (4: files whose entries are still lexical are marked; 5: lexical call references, Rust
/// calls through paths, columns counted from the line's start; 6: a document per referenced
/// name and file, no role term, a path field per kind of document, start lines stored only):
/// an index of another format is rebuilt, never read.
pub const FORMAT_VERSION: u32 = 6;

pub const IDENTIFIER_TOKENIZER: &str = "wright_identifier";

/// The fields, resolved once.
#[derive(Clone, Copy, Debug)]
pub struct Fields {
    pub name: Field,
    pub name_raw: Field,
    pub name_lower: Field,
    pub kind: Field,
    /// A reference document's name, and each site's kind (in step with `line` and `column`).
    pub ref_name: Field,
    pub ref_kind: Field,
    /// A definition's file.
    pub path: Field,
    /// A reference document's file.
    pub ref_path: Field,
    /// A definition's line and column; a reference document's, one value per site.
    pub line: Field,
    pub column: Field,
    pub start_line: Field,
    pub end_line: Field,
    pub container: Field,
    pub signature: Field,
    pub doc: Field,
}

pub fn schema() -> (Schema, Fields) {
    let mut builder = Schema::builder();
    let identifier = TextOptions::default().set_indexing_options(
        TextFieldIndexing::default()
            .set_tokenizer(IDENTIFIER_TOKENIZER)
            .set_index_option(IndexRecordOption::WithFreqs),
    );
    let fields = Fields {
        name: builder.add_text_field("name", identifier),
        name_raw: builder.add_text_field("name_raw", STRING | STORED),
        name_lower: builder.add_text_field("name_lower", STRING),
        kind: builder.add_text_field("kind", STRING | STORED),
        ref_name: builder.add_text_field("ref_name", STRING | STORED),
        ref_kind: builder.add_text_field("ref_kind", STORED),
        path: builder.add_text_field("path", STRING | STORED),
        ref_path: builder.add_text_field("ref_path", STRING | STORED),
        line: builder.add_u64_field("line", STORED),
        column: builder.add_u64_field("column", STORED),
        start_line: builder.add_u64_field("start_line", STORED),
        end_line: builder.add_u64_field("end_line", STORED),
        container: builder.add_text_field("container", STORED),
        signature: builder.add_text_field("signature", STORED),
        doc: builder.add_text_field("doc", STORED),
    };
    (builder.build(), fields)
}

impl Fields {
    /// The terms that select every document of the file `relative`: its definitions' and its
    /// reference documents'.
    pub fn file_terms(&self, relative: &str) -> [Term; 2] {
        [
            Term::from_field_text(self.path, relative),
            Term::from_field_text(self.ref_path, relative),
        ]
    }

    /// Deletes every document of the file `relative` from `writer` (effective at its commit).
    pub fn delete_file(&self, writer: &IndexWriter, relative: &str) {
        for term in self.file_terms(relative) {
            writer.delete_term(term);
        }
    }
}

/// The lowercase parts of an identifier: the whole word, then its words when it has several
/// (`HTTPServer2` → `httpserver2`, `http`, `server2`; `snake_case` → `snake_case`, `snake`,
/// `case`).
pub fn identifier_parts(word: &str) -> Vec<String> {
    let mut parts = vec![word.to_lowercase()];
    let chars: Vec<char> = word.chars().collect();
    let mut pieces = Vec::new();
    let mut current = String::new();
    for (i, &ch) in chars.iter().enumerate() {
        if ch == '_' || ch == '-' || ch == '$' {
            if !current.is_empty() {
                pieces.push(std::mem::take(&mut current));
            }
            continue;
        }
        let prev = i.checked_sub(1).map(|j| chars[j]);
        let next = chars.get(i + 1).copied();
        let boundary = match prev {
            // fooBar: lower → upper.
            Some(p) if p.is_lowercase() && ch.is_uppercase() => true,
            // HTTPServer: the last capital of a run starts a word when a lowercase follows.
            Some(p)
                if p.is_uppercase()
                    && ch.is_uppercase()
                    && next.is_some_and(char::is_lowercase) =>
            {
                true
            }
            // parse2d stays together, but 2D after letters? keep digits with the preceding word.
            _ => false,
        };
        if boundary && !current.is_empty() {
            pieces.push(std::mem::take(&mut current));
        }
        current.extend(ch.to_lowercase());
    }
    if !current.is_empty() {
        pieces.push(current);
    }
    parts.extend(pieces);
    parts.dedup();
    parts
}

/// Splits text into identifier-like words and each word into its [`identifier_parts`].
#[derive(Clone, Default)]
pub struct IdentifierTokenizer;

pub struct PartsStream {
    tokens: Vec<Token>,
    index: usize,
}

impl Tokenizer for IdentifierTokenizer {
    type TokenStream<'a> = PartsStream;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> PartsStream {
        let mut tokens = Vec::new();
        for (position, (start, word)) in words(text).enumerate() {
            for part in identifier_parts(word) {
                tokens.push(Token {
                    offset_from: start,
                    offset_to: start + word.len(),
                    position,
                    text: part,
                    position_length: 1,
                });
            }
        }
        PartsStream { tokens, index: 0 }
    }
}

impl TokenStream for PartsStream {
    fn advance(&mut self) -> bool {
        self.index += 1;
        self.index <= self.tokens.len()
    }

    fn token(&self) -> &Token {
        &self.tokens[self.index - 1]
    }

    fn token_mut(&mut self) -> &mut Token {
        &mut self.tokens[self.index - 1]
    }
}

/// Maximal runs of letters, digits, `_` and `$`, with their byte offsets.
pub fn words(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let is_word = |c: char| c.is_alphanumeric() || c == '_' || c == '$';
    let mut rest = text;
    let mut offset = 0;
    std::iter::from_fn(move || {
        let start = rest.find(is_word)?;
        let len = rest[start..]
            .find(|c: char| !is_word(c))
            .unwrap_or(rest.len() - start);
        let word = &rest[start..start + len];
        let at = offset + start;
        offset += start + len;
        rest = &rest[start + len..];
        Some((at, word))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_split_at_case_underscores_and_acronyms() {
        assert_eq!(
            identifier_parts("parseHttpRequest"),
            ["parsehttprequest", "parse", "http", "request"]
        );
        assert_eq!(
            identifier_parts("HTTPServer2"),
            ["httpserver2", "http", "server2"]
        );
        assert_eq!(
            identifier_parts("snake_case_name"),
            ["snake_case_name", "snake", "case", "name"]
        );
        assert_eq!(identifier_parts("plain"), ["plain"]);
        assert_eq!(identifier_parts("__init__"), ["__init__", "init"]);
    }

    #[test]
    fn the_tokenizer_emits_every_part_of_every_word() {
        let mut tokenizer = IdentifierTokenizer;
        let mut stream = tokenizer.token_stream("fooBar, baz!");
        let mut texts = Vec::new();
        while stream.advance() {
            texts.push(stream.token().text.clone());
        }
        assert_eq!(texts, ["foobar", "foo", "bar", "baz"]);
        assert_eq!(words("  ...  ").count(), 0);
    }
}
