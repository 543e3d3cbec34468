//! Rust's tags by a walk of the tree: the patterns of tree-sitter-rust's tags query and of
//! `languages::queries`' additions to it, written out as code.
//!
//! Each pattern names a node kind and the field that holds the name, so one lookup by the
//! kind of each node visited finds the pattern; a name node has one parent, so no two
//! patterns tag the same name (the query's one ambiguity, a function inside a
//! `declaration_list` being a method, is decided by the parent here). Token trees are not
//! entered: a macro's tokens hold no node any pattern names.

use std::sync::OnceLock;

use tree_sitter::{Node, Tree};

use super::{Tag, tag};
use crate::languages::Language;

/// What a node of some kind yields.
#[derive(Clone, Copy)]
enum Pattern {
    /// A definition of `kind` named by the `name` field when it is a node of kind `name_kind`.
    Named { kind: &'static str, name_kind: u16 },
    /// `function_item`: a method inside a `declaration_list`, a function elsewhere.
    Function,
    /// `call_expression`: a call of `f`, `x.f`, `a::f`, `f::<T>` or `a::f::<T>`.
    Call,
    /// `macro_invocation`: a call of `m!` or `a::m!`.
    Macro,
    /// `impl_item`: the trait implemented, or the type when there is no trait.
    Impl,
    /// Not entered (token trees).
    Skip,
}

/// Node kinds and fields of the grammar, resolved once.
struct Grammar {
    /// By node kind id.
    patterns: Vec<Option<Pattern>>,
    declaration_list: u16,
    identifier: u16,
    type_identifier: u16,
    field_identifier: u16,
    field_expression: u16,
    scoped_identifier: u16,
    generic_function: u16,
    name: u16,
    function: u16,
    field: u16,
    macro_field: u16,
    trait_field: u16,
    type_field: u16,
}

fn grammar() -> &'static Grammar {
    static GRAMMAR: OnceLock<Grammar> = OnceLock::new();
    GRAMMAR.get_or_init(|| {
        let language = Language::Rust.grammar();
        let kind = |name: &str| {
            let id = language.id_for_node_kind(name, true);
            assert_ne!(id, 0, "tree-sitter-rust has no node kind {name}");
            id
        };
        let field = |name: &str| {
            language
                .field_id_for_name(name)
                .unwrap_or_else(|| panic!("tree-sitter-rust has no field {name}"))
                .get()
        };
        let (identifier, type_identifier, field_identifier) = (
            kind("identifier"),
            kind("type_identifier"),
            kind("field_identifier"),
        );
        let mut patterns = vec![None; language.node_kind_count()];
        let named = |kind, name_kind| Some(Pattern::Named { kind, name_kind });
        for (node, pattern) in [
            ("struct_item", named("class", type_identifier)),
            ("enum_item", named("class", type_identifier)),
            ("union_item", named("class", type_identifier)),
            ("type_item", named("class", type_identifier)),
            ("function_item", Some(Pattern::Function)),
            ("trait_item", named("interface", type_identifier)),
            ("mod_item", named("module", identifier)),
            ("macro_definition", named("macro", identifier)),
            ("call_expression", Some(Pattern::Call)),
            ("macro_invocation", Some(Pattern::Macro)),
            ("impl_item", Some(Pattern::Impl)),
            ("function_signature_item", named("function", identifier)),
            ("const_item", named("constant", identifier)),
            ("static_item", named("constant", identifier)),
            ("enum_variant", named("constant", identifier)),
            ("field_declaration", named("field", field_identifier)),
            ("associated_type", named("type", type_identifier)),
            ("token_tree", Some(Pattern::Skip)),
            ("token_tree_pattern", Some(Pattern::Skip)),
        ] {
            patterns[usize::from(kind(node))] = pattern;
        }
        Grammar {
            patterns,
            declaration_list: kind("declaration_list"),
            identifier,
            type_identifier,
            field_identifier,
            field_expression: kind("field_expression"),
            scoped_identifier: kind("scoped_identifier"),
            generic_function: kind("generic_function"),
            name: field("name"),
            function: field("function"),
            field: field("field"),
            macro_field: field("macro"),
            trait_field: field("trait"),
            type_field: field("type"),
        }
    })
}

/// Appends the tags of `tree` (parsed from `source`), ordered by name.
pub(super) fn tags(tree: &Tree, source: &[u8], out: &mut Vec<Tag>) {
    let grammar = grammar();
    let first = out.len();
    let mut cursor = tree.walk();
    // The kind of each node above the cursor's, innermost last.
    let mut parents: Vec<u16> = Vec::with_capacity(64);
    'walk: loop {
        let node = cursor.node();
        let kind = node.kind_id();
        let pattern = grammar.patterns.get(usize::from(kind)).copied().flatten();
        if let Some(pattern) = pattern {
            let parent = parents.last().copied();
            if let Some(found) = grammar.tag_of(source, node, pattern, parent) {
                out.push(found);
            }
        }
        let enter = !matches!(pattern, Some(Pattern::Skip));
        if enter && cursor.goto_first_child() {
            parents.push(kind);
            continue;
        }
        while !cursor.goto_next_sibling() {
            if !cursor.goto_parent() {
                break 'walk;
            }
            parents.pop();
        }
    }
    // The query engine gives its tags in the order of their names; a walk meets a chain
    // `a.f().g()` outer call (`g`) first.
    out[first..].sort_by_key(|tag| tag.name_range.start);
}

impl Grammar {
    fn tag_of(
        &self,
        source: &[u8],
        node: Node,
        pattern: Pattern,
        parent: Option<u16>,
    ) -> Option<Tag> {
        match pattern {
            Pattern::Named { kind, name_kind } => {
                let name = child_of_kind(node, self.name, name_kind)?;
                tag(source, node, name, kind, true)
            }
            Pattern::Function => {
                let name = child_of_kind(node, self.name, self.identifier)?;
                let kind = if parent == Some(self.declaration_list) {
                    "method"
                } else {
                    "function"
                };
                tag(source, node, name, kind, true)
            }
            Pattern::Call => {
                let function = node.child_by_field_id(self.function)?;
                let name = match function.kind_id() {
                    kind if kind == self.field_expression => {
                        child_of_kind(function, self.field, self.field_identifier)?
                    }
                    kind if kind == self.generic_function => {
                        self.path_name(function.child_by_field_id(self.function)?)?
                    }
                    _ => self.path_name(function)?,
                };
                tag(source, node, name, "call", false)
            }
            Pattern::Macro => {
                let called = node.child_by_field_id(self.macro_field)?;
                let name = self.path_name(called)?;
                tag(source, node, name, "call", false)
            }
            Pattern::Impl => {
                let name = match node.child_by_field_id(self.trait_field) {
                    Some(implemented) => {
                        Some(implemented).filter(|n| n.kind_id() == self.type_identifier)?
                    }
                    None => child_of_kind(node, self.type_field, self.type_identifier)?,
                };
                tag(source, node, name, "implementation", false)
            }
            Pattern::Skip => None,
        }
    }

    /// The name a called path ends in: `f` itself, or the last segment of `a::b::f`.
    fn path_name<'tree>(&self, path: Node<'tree>) -> Option<Node<'tree>> {
        match path.kind_id() {
            kind if kind == self.identifier => Some(path),
            kind if kind == self.scoped_identifier => {
                child_of_kind(path, self.name, self.identifier)
            }
            _ => None,
        }
    }
}

/// `node`'s child in `field` when it is of `kind`.
fn child_of_kind<'tree>(node: Node<'tree>, field: u16, kind: u16) -> Option<Node<'tree>> {
    node.child_by_field_id(field)
        .filter(|child| child.kind_id() == kind)
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_node_kind_and_field_the_walk_names_is_in_the_grammar() {
        // Resolving panics on a name the grammar does not have (a renamed node kind).
        let grammar = super::grammar();
        assert!(grammar.patterns.iter().filter(|p| p.is_some()).count() >= 19);
    }
}
