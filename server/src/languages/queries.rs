//! Tags queries: each grammar's own, plus the definitions it misses.
//!
//! The stock queries find what editors' "go to symbol" needs most, but a symbol index must also
//! find the declarations a reader looks for: Rust constants, statics, bodiless functions (trait
//! methods, `extern` blocks), enum variants, struct fields and associated types, and calls
//! through a path (`shapes::square(..)`, `parse::<T>(..)`, `log::info!`); Python class
//! attributes and module-level assignments under `if`/`try` or to several names; C macros,
//! enumerators, struct members, global variables, unions and typedefs of pointers and function
//! pointers. `cargo xtask bench index` measures what they find against universal-ctags.

use super::Language;

/// The complete tags query for `language`.
pub fn tags(language: Language) -> String {
    match language {
        Language::Rust => [tree_sitter_rust::TAGS_QUERY, RUST_EXTRA].concat(),
        Language::Python => [tree_sitter_python::TAGS_QUERY, PYTHON_EXTRA].concat(),
        Language::JavaScript => without_doc_captures(tree_sitter_javascript::TAGS_QUERY),
        // The TypeScript query alone finds only TypeScript-specific items (interfaces, type
        // aliases); JavaScript's finds functions, classes and methods, and holds for both.
        Language::TypeScript | Language::Tsx => [
            &without_doc_captures(tree_sitter_javascript::TAGS_QUERY),
            tree_sitter_typescript::TAGS_QUERY,
        ]
        .concat(),
        Language::Go => without_doc_captures(tree_sitter_go::TAGS_QUERY),
        Language::Java => tree_sitter_java::TAGS_QUERY.to_owned(),
        Language::C => [tree_sitter_c::TAGS_QUERY, &c_extra(), &c_globals()].concat(),
        Language::Cpp => [tree_sitter_cpp::TAGS_QUERY, &c_extra(), &c_globals()].concat(),
        Language::Ruby => without_doc_captures(tree_sitter_ruby::TAGS_QUERY),
    }
}

/// `query` without its `(comment)* @doc .` prefixes and their `#strip!`/`#select-adjacent!`
/// predicates. The repetition keeps one match in progress for every comment of a run until the
/// run ends, so a file with thousands of comment lines took time quadratic in their number
/// (seconds for 100 KB). The index reads documentation from the lines above a definition
/// itself (`index::extract`), bounded to a few lines.
fn without_doc_captures(query: &str) -> String {
    let mut kept = String::with_capacity(query.len());
    let mut lines = query.lines().peekable();
    while let Some(line) = lines.next() {
        let trimmed = line.trim();
        if trimmed == "(comment)* @doc" {
            // The anchor that tied the comments to the definition goes with them.
            lines.next_if(|next| next.trim() == ".");
            continue;
        }
        let is_doc_predicate = [
            "(#strip! @doc",
            "(#select-adjacent! @doc",
            "(#set-adjacent! @doc",
        ]
        .iter()
        .any(|predicate| trimmed.starts_with(predicate));
        if !is_doc_predicate {
            kept.push_str(line);
            kept.push('\n');
        }
    }
    kept
}

const RUST_EXTRA: &str = r#"
(function_signature_item name: (identifier) @name) @definition.function
(const_item name: (identifier) @name) @definition.constant
(static_item name: (identifier) @name) @definition.constant
(enum_variant name: (identifier) @name) @definition.constant
(field_declaration name: (field_identifier) @name) @definition.field
(associated_type name: (type_identifier) @name) @definition.type
(call_expression function: (scoped_identifier name: (identifier) @name)) @reference.call
(call_expression function: (generic_function function: (identifier) @name)) @reference.call
(call_expression function: (generic_function function: (scoped_identifier name: (identifier) @name))) @reference.call
(macro_invocation macro: (scoped_identifier name: (identifier) @name)) @reference.call
"#;

/// Python: the stock query finds assignments directly at module level only.
const PYTHON_EXTRA: &str = r#"
(class_definition body: (block (expression_statement
  (assignment left: (identifier) @name) @definition.constant)))
(module (expression_statement
  (assignment left: [(pattern_list (identifier) @name) (tuple_pattern (identifier) @name)]) @definition.constant))
(module (if_statement consequence: (block (expression_statement
  (assignment left: (identifier) @name) @definition.constant))))
(module (if_statement alternative: (elif_clause consequence: (block (expression_statement
  (assignment left: (identifier) @name) @definition.constant)))))
(module (if_statement alternative: (else_clause body: (block (expression_statement
  (assignment left: (identifier) @name) @definition.constant)))))
(module (try_statement body: (block (expression_statement
  (assignment left: (identifier) @name) @definition.constant))))
(module (try_statement (except_clause (block (expression_statement
  (assignment left: (identifier) @name) @definition.constant)))))
"#;

/// Macros, enumerators, unions, and the declarations whose names sit inside declarators.
fn c_extra() -> String {
    let mut query = String::from(
        r#"
(preproc_def name: (identifier) @name) @definition.macro
(preproc_function_def name: (identifier) @name) @definition.macro
(enumerator name: (identifier) @name) @definition.constant
(union_specifier name: (type_identifier) @name body: (_)) @definition.class
"#,
    );
    for (node, leaf, kind) in [
        ("field_declaration", "field_identifier", "field"),
        ("type_definition", "type_identifier", "type"),
    ] {
        for form in declarators(leaf) {
            query += &format!("({node} declarator: {form}) @definition.{kind}\n");
        }
        // A pointer to a function, `void (*name)(int)`, also one returning a pointer,
        // `char *(*name)(int)`, or with the pointer hidden in a macro, `(APIENTRYP name)`.
        for inner in [
            format!("({leaf}) @name"),
            format!("(pointer_declarator declarator: ({leaf}) @name)"),
        ] {
            let function =
                format!("(function_declarator declarator: (parenthesized_declarator {inner}))");
            query += &format!("({node} declarator: {function}) @definition.{kind}\n");
            query += &format!(
                "({node} declarator: (pointer_declarator declarator: {function})) @definition.{kind}\n"
            );
        }
    }
    query
}

/// The name `leaf` inside up to three declarators that wrap it: `name`, `*name`, `**name`,
/// `name[4]`, `*name = 0`, `f(void)`. A query cannot recurse, so each depth is a pattern of its
/// own, with a wildcard for the wrapper (alternatives that nest the same node do not match).
/// A function declarator matches too: extraction keeps a name tagged both as a function and as
/// something else a function.
fn declarators(leaf: &str) -> Vec<String> {
    let mut form = format!("({leaf}) @name");
    let mut forms = vec![form.clone()];
    for _ in 0..3 {
        form = format!("(_ declarator: {form})");
        forms.push(form.clone());
    }
    forms
}

/// Global variables: declarations at file level, which in a header usually means inside its
/// include guard (a declaration inside a function body is a local, not a definition).
fn c_globals() -> String {
    let mut query = String::new();
    for parent in [
        "translation_unit",
        "preproc_ifdef",
        "preproc_if",
        "preproc_else",
        "preproc_elif",
        "linkage_specification",
        "declaration_list",
    ] {
        for form in declarators("identifier") {
            query += &format!("({parent} (declaration declarator: {form}) @definition.constant)\n");
        }
    }
    query
}
