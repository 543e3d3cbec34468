//! Recall of the symbol index against universal-ctags: every definition ctags finds, of the
//! kinds that correspond to what wright indexes, must be in the index at the same place (same
//! file, same line, same name).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;

use wright::index::Index;

/// ctags's options for every run: no user options, line numbers as addresses, long kind names
/// and the language, unsorted, C prototypes included (a header is mostly prototypes), `.h`
/// read as C (as wright reads it).
pub const CTAGS_OPTIONS: &[&str] = &[
    "--options=NONE",
    "--excmd=number",
    "--fields=-k+Kl",
    "--sort=no",
    "--kinds-C=+p",
    "--langmap=C:+.h",
];

/// ctags's definition kinds measured, per language. Left out: Rust `implementation` (an
/// `impl` block defines no name; wright records it as a reference to its type), Python
/// `namespace`/`module`/`unknown` (imports), C `header` (`#include`).
const MEASURED_KINDS: &[(&str, &[&str])] = &[
    (
        "Rust",
        &[
            "function",
            "method",
            "struct",
            "enum",
            "typedef",
            "interface",
            "module",
            "macro",
            "variable",
            "enumerator",
            "field",
        ],
    ),
    ("Python", &["class", "function", "member", "variable"]),
    (
        "C",
        &[
            "function",
            "prototype",
            "struct",
            "union",
            "enum",
            "typedef",
            "macro",
            "enumerator",
            "variable",
            "member",
        ],
    ),
];

/// The documented mapping, for the report: ctags kind → wright kind.
const KIND_MAPPING: &str = "Rust: function → `function`, method → `method` (or `function` \
    inside a trait), struct/enum → `class`, typedef → `class` (a type alias) or `type` (an \
    associated type), interface (trait) → `interface`, module → `module`, macro → `macro`, variable (`const`/`static`) → `constant`, \
    enumerator (enum variant) → `constant`, field → `field`. Python: class → `class`, function \
    and member (method) → `function`, variable (module and class level) → `constant`. C: \
    function and prototype → `function`, struct/union → `class`, enum/typedef → `type`, macro → \
    `macro`, enumerator → `constant`, variable → `constant`, member → `field`. Not measured: \
    Rust `implementation` (an `impl` block defines no name; wright records it as a reference), \
    Python imports (`namespace`, `module`, `unknown`), C `header`, and names ctags makes up \
    for anonymous types (`__anon…`).";

const TARGET_PERCENT: f64 = 99.0;
const EXAMPLES: usize = 4;

/// One ctags tag.
#[derive(Clone, Debug)]
pub struct Tag {
    pub name: String,
    pub file: String,
    /// One-based.
    pub line: u32,
    pub kind: String,
    pub language: String,
}

/// Parses ctags's output written with [`CTAGS_OPTIONS`].
pub fn parse_tags(text: &str) -> Vec<Tag> {
    text.lines()
        .filter(|line| !line.starts_with("!_"))
        .filter_map(|line| {
            let mut fields = line.split('\t');
            let name = fields.next()?;
            let file = fields.next()?;
            let line_number = fields.next()?.strip_suffix(";\"")?.parse().ok()?;
            let mut kind = "";
            let mut language = "";
            for field in fields {
                match field.split_once(':') {
                    Some(("language", value)) => language = value,
                    None => kind = field,
                    Some(_) => {}
                }
            }
            Some(Tag {
                name: name.to_owned(),
                file: file.trim_start_matches("./").to_owned(),
                line: line_number,
                kind: kind.to_owned(),
                language: language.to_owned(),
            })
        })
        .collect()
}

/// Folders of `/usr/include` that hold C++ headers with a `.h` name (wright reads them as C,
/// as does ctags told that `.h` is C; neither can judge C++ that way).
const CPP_HEADER_FOLDERS: &[&str] = &["c++", "llvm-14", "node", "unicode"];

/// Whether a file the index holds takes part in `language`'s recall: C leaves out the C++
/// header folders, Python the third-party packages installed inside the standard library's
/// folder.
pub fn in_recall_set(language: &str, file: &str) -> bool {
    let top = file.split('/').next().unwrap_or_default();
    match language {
        "C" => (file.ends_with(".h") || file.ends_with(".c")) && !CPP_HEADER_FOLDERS.contains(&top),
        "Python" => file.ends_with(".py") && top != "site-packages",
        _ => file.ends_with(".rs"),
    }
}

/// Per-kind counts: how many ctags found, how many wright missed, and a few misses.
#[derive(Default)]
pub struct KindRecall {
    pub total: usize,
    pub missed: usize,
    pub examples: Vec<String>,
}

pub struct Recall {
    pub language: String,
    pub corpus: String,
    pub total: usize,
    pub found: usize,
    pub kinds: BTreeMap<String, KindRecall>,
}

/// Of the lexical phase's definitions, how many the final (tree-sitter) index also holds at
/// the same name and line: an informal precision, the final index standing for the truth.
pub struct Precision {
    pub language: String,
    pub lexical: usize,
    pub confirmed: usize,
}

/// [`Precision`] over `files` (relative to `root`, the files of the recall set): each scanned
/// lexically in-process, against its outline in `index` (complete).
pub fn lexical_precision(
    index: &Index,
    root: &std::path::Path,
    language: &str,
    files: &[String],
) -> Precision {
    let mut precision = Precision {
        language: language.to_owned(),
        lexical: 0,
        confirmed: 0,
    };
    for file in files {
        let path = root.join(file);
        let (Some(lang), Ok(text)) = (
            wright::languages::Language::from_path(&path),
            std::fs::read_to_string(&path),
        ) else {
            continue;
        };
        let Some(scanned) = wright::index::scan_lexical(lang, &text) else {
            continue;
        };
        let defined: HashSet<(String, u32)> = index
            .outline(file)
            .into_iter()
            .map(|hit| (hit.name, hit.line))
            .collect();
        precision.lexical += scanned.definitions.len();
        precision.confirmed += scanned
            .definitions
            .into_iter()
            .filter(|d| defined.contains(&(d.name.clone(), d.line)))
            .count();
    }
    precision
}

impl Recall {
    pub fn percent(&self) -> f64 {
        100.0 * self.found as f64 / self.total.max(1) as f64
    }
}

/// Looks up each of `language`'s measured tags in the outline of its file.
pub fn measure(index: &Index, language: &str, corpus: &str, tags: &[Tag]) -> Recall {
    let kinds: &[&str] = MEASURED_KINDS
        .iter()
        .find(|(l, _)| *l == language)
        .map_or(&[], |(_, k)| k);
    let mut by_file: HashMap<&str, Vec<&Tag>> = HashMap::new();
    for tag in tags {
        if tag.language == language
            && kinds.contains(&tag.kind.as_str())
            && !tag.name.starts_with("__anon")
        {
            by_file.entry(tag.file.as_str()).or_default().push(tag);
        }
    }
    let mut files: Vec<_> = by_file.into_iter().collect();
    files.sort_by_key(|(file, _)| *file);
    let mut recall = Recall {
        language: language.to_owned(),
        corpus: corpus.to_owned(),
        total: 0,
        found: 0,
        kinds: BTreeMap::new(),
    };
    for (file, tags) in files {
        let defined: HashSet<(String, u32)> = index
            .outline(file)
            .into_iter()
            .map(|hit| (hit.name, hit.line + 1))
            .collect();
        for tag in tags {
            let kind = recall.kinds.entry(tag.kind.clone()).or_default();
            kind.total += 1;
            recall.total += 1;
            if defined.contains(&(tag.name.clone(), tag.line)) {
                recall.found += 1;
            } else {
                kind.missed += 1;
                if kind.examples.len() < EXAMPLES {
                    kind.examples
                        .push(format!("`{}` {}:{}", tag.name, tag.file, tag.line));
                }
            }
        }
    }
    recall
}

pub fn render(out: &mut String, recalls: &[Recall], lexical: &[Recall], precisions: &[Precision]) {
    let _ = writeln!(
        out,
        "### Recall against ctags\n\nA definition counts as found when `wright symbols` \
         would return it: the index holds a definition of that name in that file on that \
         line. Kinds compared (ctags → wright): {KIND_MAPPING}\n\nTwice per language: after \
         the lexical phase alone (what is searchable first; a scan per language, no parse \
         tree), and final (after the tree-sitter refinement).\n\n| language | phase | corpus | \
         ctags definitions | found by wright | recall | target ≥ {TARGET_PERCENT}% |\n\
         |---|---|---|---|---|---|---|"
    );
    let phases = lexical
        .iter()
        .map(|r| ("lexical (phase 1)", r))
        .chain(recalls.iter().map(|r| ("final", r)));
    for (phase, recall) in phases.clone() {
        let _ = writeln!(
            out,
            "| {} | {phase} | {} | {} | {} | {:.2}% | {} |",
            recall.language,
            recall.corpus,
            recall.total,
            recall.found,
            recall.percent(),
            if recall.percent() >= TARGET_PERCENT {
                "met"
            } else {
                "**not met**"
            }
        );
    }
    let _ = writeln!(
        out,
        "\nPrecision of the lexical phase (informal): of its definitions, the share the final \
         index also holds at the same name and line (the tree-sitter extraction standing for \
         the truth; the rest are entries phase 2 drops).\n\n| language | lexical definitions \
         | also final | precision |\n|---|---|---|---|"
    );
    for p in precisions {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {:.2}% |",
            p.language,
            p.lexical,
            p.confirmed,
            100.0 * p.confirmed as f64 / p.lexical.max(1) as f64
        );
    }
    let _ = writeln!(
        out,
        "\nBy ctags kind:\n\n| language | phase | kind | ctags | missed | recall | examples of misses |\n|---|---|---|---|---|---|---|"
    );
    for (phase, recall) in phases {
        for (kind, counts) in &recall.kinds {
            let _ = writeln!(
                out,
                "| {} | {phase} | {kind} | {} | {} | {:.2}% | {} |",
                recall.language,
                counts.total,
                counts.missed,
                100.0 * (counts.total - counts.missed) as f64 / counts.total.max(1) as f64,
                counts.examples.join(", ").replace('|', "\\|")
            );
        }
    }
}
