//! What paths say about files: which files a word of the query names (a commit subject's
//! `netrc: fix …` is about `lib/netrc.c`, "the wordwrap in text utilities" about
//! `utils/text.py`), and which files are tests.

use std::collections::HashMap;

use super::passages::Term;

/// Directories that hold tests in the supported languages' conventions.
const TEST_DIRECTORIES: &[&str] = &[
    "test",
    "tests",
    "testing",
    "testdata",
    "unittests",
    "spec",
    "specs",
    "__tests__",
];

/// A file's name without its extension, lowercase.
fn stem(path: &str) -> String {
    let name = path.rsplit('/').next().unwrap_or(path);
    let stem = name.split_once('.').map_or(name, |(stem, _)| stem);
    stem.to_ascii_lowercase()
}

/// Files whose name is one of `terms` (or an inflection of a stemmed one) or two adjacent
/// words of `query` run together ("Active Storage" names `active_storage.rb`), rarest names
/// first: `text.py` when only one file has that name, before the many `utils.py`.
pub fn named_by<'a>(
    query: &str,
    terms: &[Term],
    paths: impl Iterator<Item = &'a str>,
) -> Vec<&'a str> {
    let words: Vec<String> = crate::index::words(query)
        .map(|(_, word)| word.to_lowercase())
        .collect();
    let pairs: Vec<String> = words
        .windows(2)
        .filter(|pair| pair.iter().all(|word| word.len() >= 3))
        .map(|pair| pair.concat())
        .collect();
    let mut by_stem: HashMap<String, Vec<&'a str>> = HashMap::new();
    for path in paths {
        let stem = stem(path);
        let joined = stem.replace(['_', '-'], "");
        let named = pairs.contains(&joined)
            || terms.iter().any(|term| {
                stem == term.text
                    || (term.prefix
                        && stem.starts_with(&term.text)
                        && stem.len() <= term.text.len() + 3)
            });
        if named {
            by_stem.entry(stem).or_default().push(path);
        }
    }
    let mut named: Vec<(usize, &'a str)> = by_stem
        .into_values()
        .flat_map(|paths| {
            let count = paths.len();
            paths.into_iter().map(move |path| (count, path))
        })
        .collect();
    named.sort();
    named.into_iter().map(|(_, path)| path).collect()
}

/// Whether `path` is a test: in a test directory, or named as tests are (`test_x.py`,
/// `x_test.go`, `x_spec.rb`, `XTest.java`).
pub fn is_test(path: &str) -> bool {
    let mut components = path.split('/').collect::<Vec<_>>();
    let name = components.pop().unwrap_or(path);
    let stem = name.split_once('.').map_or(name, |(stem, _)| stem);
    components
        .iter()
        .any(|dir| TEST_DIRECTORIES.contains(&dir.to_ascii_lowercase().as_str()))
        || stem.starts_with("test_")
        || stem.ends_with("_test")
        || stem.ends_with("_spec")
        || stem.ends_with("Test")
        || stem.ends_with("Tests")
        || stem == "conftest"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_named_by_the_query_rarest_first_and_tests_recognised() {
        let terms = [
            Term {
                text: "netrc".into(),
                prefix: true,
            },
            Term {
                text: "lookup".into(),
                prefix: true,
            },
            Term {
                text: "url".into(),
                prefix: false,
            },
        ];
        let paths = [
            "lib/url.c",
            "src/url.c",
            "lib/netrc.c",
            "lib/netrc_helpers.c",
            "db/lookups.py",
            "lib/urlapi.c",
            "lib/active_storage.rb",
        ];
        assert_eq!(
            named_by("Active Storage: netrc lookups", &terms, paths.into_iter()),
            [
                "db/lookups.py",
                "lib/active_storage.rb",
                "lib/netrc.c",
                "lib/url.c",
                "src/url.c"
            ]
        );
        for test in [
            "tests/unit/unit1304.c",
            "django/test_x.py",
            "pkg/x_test.go",
            "spec/models/user_spec.rb",
            "src/main/java/FooTest.java",
        ] {
            assert!(is_test(test), "{test}");
        }
        for source in ["lib/netrc.c", "lib/contest.c", "src/latest.c"] {
            assert!(!is_test(source), "{source}");
        }
    }
}
