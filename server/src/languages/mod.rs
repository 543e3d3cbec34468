//! The languages wright parses: which language a file is, its tree-sitter grammar, and the
//! tags query that finds its definitions and references.
//!
//! Shared by `index/` (symbols) and `edit/` (the syntax gate). Invariant: a language's grammar
//! and query are built once per process and shared across threads; a query that does not
//! compile against its grammar is a bug caught by this module's tests, never at run time.

mod queries;

use std::path::Path;
use std::sync::OnceLock;

/// A language with a grammar and a tags query.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Language {
    Rust,
    Python,
    JavaScript,
    TypeScript,
    Tsx,
    Go,
    Java,
    C,
    Cpp,
    Ruby,
}

impl Language {
    pub const ALL: [Self; 10] = [
        Self::Rust,
        Self::Python,
        Self::JavaScript,
        Self::TypeScript,
        Self::Tsx,
        Self::Go,
        Self::Java,
        Self::C,
        Self::Cpp,
        Self::Ruby,
    ];

    /// The language of a file, from its extension (or name, for a few conventional files).
    pub fn from_path(path: &Path) -> Option<Self> {
        let extension = path.extension()?.to_str()?;
        Some(match extension {
            "rs" => Self::Rust,
            "py" | "pyi" | "pyw" => Self::Python,
            "js" | "mjs" | "cjs" | "jsx" => Self::JavaScript,
            "ts" | "mts" | "cts" => Self::TypeScript,
            "tsx" => Self::Tsx,
            "go" => Self::Go,
            "java" => Self::Java,
            // Headers are parsed as C: the C grammar reads C headers exactly, and most C++
            // headers use a C++ extension.
            "c" | "h" => Self::C,
            "cc" | "cpp" | "cxx" | "c++" | "hh" | "hpp" | "hxx" | "h++" | "ipp" | "tcc" => {
                Self::Cpp
            }
            "rb" | "rake" | "gemspec" => Self::Ruby,
            _ => return None,
        })
    }

    /// The language of an LSP `languageId`.
    pub fn from_language_id(id: &str) -> Option<Self> {
        Some(match id {
            "rust" => Self::Rust,
            "python" => Self::Python,
            "javascript" | "javascriptreact" => Self::JavaScript,
            "typescript" => Self::TypeScript,
            "typescriptreact" => Self::Tsx,
            "go" => Self::Go,
            "java" => Self::Java,
            "c" => Self::C,
            "cpp" => Self::Cpp,
            "ruby" => Self::Ruby,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Rust => "rust",
            Self::Python => "python",
            Self::JavaScript => "javascript",
            Self::TypeScript => "typescript",
            Self::Tsx => "tsx",
            Self::Go => "go",
            Self::Java => "java",
            Self::C => "c",
            Self::Cpp => "cpp",
            Self::Ruby => "ruby",
        }
    }

    /// The tree-sitter grammar.
    pub fn grammar(self) -> tree_sitter::Language {
        let function = match self {
            Self::Rust => tree_sitter_rust::LANGUAGE,
            Self::Python => tree_sitter_python::LANGUAGE,
            Self::JavaScript => tree_sitter_javascript::LANGUAGE,
            Self::TypeScript => tree_sitter_typescript::LANGUAGE_TYPESCRIPT,
            Self::Tsx => tree_sitter_typescript::LANGUAGE_TSX,
            Self::Go => tree_sitter_go::LANGUAGE,
            Self::Java => tree_sitter_java::LANGUAGE,
            Self::C => tree_sitter_c::LANGUAGE,
            Self::Cpp => tree_sitter_cpp::LANGUAGE,
            Self::Ruby => tree_sitter_ruby::LANGUAGE,
        };
        function.into()
    }

    /// The tags query: the grammar's own, extended where it misses common definitions.
    pub fn tags_query(self) -> &'static str {
        static QUERIES: OnceLock<Vec<String>> = OnceLock::new();
        let queries = QUERIES.get_or_init(|| Self::ALL.iter().map(|l| queries::tags(*l)).collect());
        &queries[self as usize]
    }

    /// A parser for this language. Parsers are cheap; each thread makes its own.
    pub fn parser(self) -> tree_sitter::Parser {
        let mut parser = tree_sitter::Parser::new();
        parser
            .set_language(&self.grammar())
            .expect("every bundled grammar is ABI-compatible with tree-sitter (tested)");
        parser
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_language_loads_and_its_tags_query_compiles() {
        for language in Language::ALL {
            let query = tree_sitter::Query::new(&language.grammar(), language.tags_query());
            assert!(query.is_ok(), "{language:?}: {:?}", query.err());
            assert_eq!(Language::ALL[language as usize], language);
        }
    }

    #[test]
    fn no_tags_query_repeats_over_comments() {
        // `(comment)* @doc .` keeps a match in progress per comment of a run: quadratic.
        for language in Language::ALL {
            let query = language.tags_query();
            assert!(!query.contains("@doc"), "{language:?}");
            assert!(
                !query.contains(")* ") && !query.contains(")+ "),
                "{language:?}"
            );
        }
    }

    #[test]
    fn languages_are_recognised_by_extension_and_language_id() {
        assert_eq!(
            Language::from_path(Path::new("a/b.rs")),
            Some(Language::Rust)
        );
        assert_eq!(Language::from_path(Path::new("x.tsx")), Some(Language::Tsx));
        assert_eq!(Language::from_path(Path::new("x.h")), Some(Language::C));
        assert_eq!(Language::from_path(Path::new("x.hpp")), Some(Language::Cpp));
        assert_eq!(Language::from_path(Path::new("Makefile")), None);
        assert_eq!(
            Language::from_language_id("typescriptreact"),
            Some(Language::Tsx)
        );
        assert_eq!(Language::from_language_id("markdown"), None);
    }

    #[test]
    fn a_parse_finds_errors_where_there_are_some() {
        let mut parser = Language::Rust.parser();
        let good = parser.parse("fn main() {}", None).unwrap();
        assert!(!good.root_node().has_error());
        let bad = parser.parse("fn main( {", None).unwrap();
        assert!(bad.root_node().has_error());
    }
}
