//! Tags from a language's tags query, through tree-sitter-tags: the engine for every language
//! without a walk of its own, and the reference the walks are tested against.

use std::cell::RefCell;
use std::sync::OnceLock;

use tree_sitter_tags::{TagsConfiguration, TagsContext};

use super::Tag;
use crate::index::extract::ExtractError;
use crate::languages::Language;

/// The tags configuration of one language, compiled on first use (compiling a query is not
/// free, and most workspaces use two or three languages).
fn configuration(language: Language) -> &'static TagsConfiguration {
    static CONFIGS: [OnceLock<TagsConfiguration>; Language::ALL.len()] =
        [const { OnceLock::new() }; Language::ALL.len()];
    CONFIGS[language as usize].get_or_init(|| {
        TagsConfiguration::new(language.grammar(), language.tags_query(), "")
            .expect("every tags query compiles (tested in languages/)")
    })
}

thread_local! {
    static CONTEXT: RefCell<TagsContext> = RefCell::new(TagsContext::new());
}

/// The tags of `source` by the query of `language`, and whether its parse had errors.
pub(in crate::index) fn of(language: Language, source: &str) -> super::Found {
    let config = configuration(language);
    CONTEXT.with(|context| {
        let mut context = context.borrow_mut();
        let (tags, has_error) = context
            .generate_tags(config, source.as_bytes(), None)
            .map_err(|err| ExtractError::Tags(err.to_string()))?;
        // A tag that fails is dropped, not the file: one odd construct must not hide the rest.
        let tags = tags
            .filter_map(Result::ok)
            .map(|tag| Tag {
                kind: config.syntax_type_name(tag.syntax_type_id),
                row: tag.span.start.row,
                range: tag.range,
                name_range: tag.name_range,
                line_range: tag.line_range,
                is_definition: tag.is_definition,
                docs: tag.docs,
            })
            .collect();
        Ok((tags, has_error))
    })
}
