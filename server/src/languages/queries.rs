//! Tags queries: each grammar's own, plus the definitions it misses.
//!
//! The stock queries find what editors' "go to symbol" needs most, but a symbol index must also
//! find the declarations a reader looks for: Rust constants, statics and bodiless functions
//! (trait methods, `extern` blocks), C macros and enumerators, and the like.

use super::Language;

/// The complete tags query for `language`.
pub fn tags(language: Language) -> String {
    match language {
        Language::Rust => [tree_sitter_rust::TAGS_QUERY, RUST_EXTRA].concat(),
        Language::Python => tree_sitter_python::TAGS_QUERY.to_owned(),
        Language::JavaScript => tree_sitter_javascript::TAGS_QUERY.to_owned(),
        // The TypeScript query alone finds only TypeScript-specific items (interfaces, type
        // aliases); JavaScript's finds functions, classes and methods, and holds for both.
        Language::TypeScript | Language::Tsx => [
            tree_sitter_javascript::TAGS_QUERY,
            tree_sitter_typescript::TAGS_QUERY,
        ]
        .concat(),
        Language::Go => tree_sitter_go::TAGS_QUERY.to_owned(),
        Language::Java => tree_sitter_java::TAGS_QUERY.to_owned(),
        Language::C => [tree_sitter_c::TAGS_QUERY, C_EXTRA].concat(),
        Language::Cpp => [tree_sitter_cpp::TAGS_QUERY, C_EXTRA].concat(),
        Language::Ruby => tree_sitter_ruby::TAGS_QUERY.to_owned(),
    }
}

const RUST_EXTRA: &str = r#"
(function_signature_item name: (identifier) @name) @definition.function
(const_item name: (identifier) @name) @definition.constant
(static_item name: (identifier) @name) @definition.constant
"#;

const C_EXTRA: &str = r#"
(preproc_def name: (identifier) @name) @definition.macro
(preproc_function_def name: (identifier) @name) @definition.macro
(enumerator name: (identifier) @name) @definition.constant
"#;
