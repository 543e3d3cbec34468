//! Given a query and a token budget, the code a model should see: the files most likely to
//! matter first, each with the definitions the query names or the passage that best matches
//! its words, then a map of the repository ranked toward them.
//!
//! Files are ranked by fusing several signals by reciprocal rank (`fusion`): the files the
//! query or the editor points to (named paths, the cursor's file, open buffers), the files
//! defining the identifiers it names, BM25 of its words over each file's text and over
//! passages of it (`passages`), BM25 over each file's vocabulary from the index (`vocabulary`),
//! and Aider's repository map (`graph`): a personalised PageRank over the reference graph,
//! restarting where the query points, which also picks the definitions a file's map shows.
//!
//! Invariants: deterministic for a given index and query; never over budget (tokens counted
//! with `llm::tokens`); a snippet's text is what the workspace view holds (buffers overlaid on
//! the disk) at its lines.

mod fusion;
mod graph;
mod passages;
mod paths;
mod vocabulary;

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::index::{self, FileRecord, Index, SymbolHit};
use crate::llm::tokens;
use crate::workspace::Overlay;
use fusion::Ranked;
use graph::rank;
use passages::{Occurrences, Passage, TextMatch};
use vocabulary::lexical_scores;

/// What the caller knows about the task.
#[derive(Clone, Debug, Default)]
pub struct Query {
    pub text: String,
    /// Tokens the snippets may take together.
    pub budget: usize,
    /// The file with the cursor, relative to the root.
    pub current_file: Option<String>,
    /// The symbol under the cursor.
    pub cursor_symbol: Option<String>,
    /// Files open in the editor, relative to the root.
    pub open_files: Vec<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SnippetKind {
    /// A definition the query names (or the cursor's), in full or its head.
    Definition,
    /// A ranked file's outline: the signature lines of its most relevant definitions.
    Map,
}

impl SnippetKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Definition => "definition",
            Self::Map => "map",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Snippet {
    pub path: String,
    /// One-based, inclusive.
    pub start_line: u32,
    pub end_line: u32,
    pub kind: SnippetKind,
    pub score: f64,
    pub text: String,
    pub tokens: usize,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Context {
    pub query: String,
    pub budget: usize,
    pub tokens: usize,
    pub snippets: Vec<Snippet>,
}

/// Definitions longer than this are shown by their head.
const MAX_DEFINITION_LINES: usize = 60;
/// Definitions shown per ranked file in the map.
const MAP_DEFINITIONS_PER_FILE: usize = 12;
/// How many files the lexical match may steer toward, and how hard (a named symbol's file
/// weighs up to 20, a mentioned path 5).
const LEXICAL_FILES: usize = 10;
const LEXICAL_WEIGHT: f64 = 8.0;
/// Files ranked (and given a map) in all.
const RANKED_FILES: usize = 60;
/// The first files ranked also show their best-matching passage.
const PASSAGE_FILES: usize = 5;
/// A passage is shown only when it holds this many of the query's words: one common word
/// ("request") is weak evidence, two together are a topic.
const PASSAGE_MIN_TERMS: usize = 2;
/// At most this much text is read for the text signal; in a larger workspace, the files the
/// other signals rank first are read up to it.
const TEXT_BYTES: u64 = 48 << 20;
/// Reciprocal rank fusion: its constant, how deep each list counts, and each signal's weight
/// (chosen on the retrieval bench's tuning split: `cargo xtask bench retrieval --split
/// tuning`; a file named by the query counts double, what the editor or query points at most).
const FUSION_K: f64 = 10.0;
const FUSION_DEPTH: usize = 200;
const WEIGHT_POINTED: f64 = 4.0;
const WEIGHT_NAMED: f64 = 1.0;
const WEIGHT_TEXT: f64 = 1.0;
const WEIGHT_PASSAGE: f64 = 1.0;
const WEIGHT_VOCABULARY: f64 = 1.0;
const WEIGHT_GRAPH: f64 = 1.0;
const WEIGHT_FILE_NAME: f64 = 2.0;
/// What a test file's fused score is multiplied by when the query does not mention tests.
const TEST_FACTOR: f64 = 0.5;

/// Words too common in task descriptions to mean a symbol.
const STOPWORDS: &[&str] = &[
    "the", "and", "for", "with", "that", "this", "from", "into", "when", "then", "than", "not",
    "but", "are", "was", "were", "has", "have", "add", "fix", "use", "make", "should", "would",
    "could", "can", "will", "all", "any", "each", "one", "two", "new", "old", "get", "set", "its",
    "our", "your", "how", "why", "what", "which", "where", "there", "also", "only", "some", "more",
    "most", "less", "does", "doesn", "don", "isn", "out", "via", "per", "after", "before",
    "instead", "without", "test", "tests", "code", "file", "files", "function", "method", "class",
    "bug", "error", "issue", "change", "update",
];

/// Retrieves the context for `query` from `index`, reading text through `overlay`.
pub fn retrieve(index: &Index, overlay: &dyn Overlay, query: &Query) -> Context {
    let files = index.files();
    let terms = terms(&query.text);
    let mentioned_files = mentioned_files(&query.text, &files);

    // Definitions the query names: exact names weigh most, then identifier parts.
    let mut hits: Vec<(f64, SymbolHit)> = Vec::new();
    let mut seen = HashSet::new();
    let named: Vec<&str> = terms
        .iter()
        .map(String::as_str)
        .chain(query.cursor_symbol.as_deref())
        .collect();
    for term in &named {
        for hit in index.symbols(term, None, 8) {
            let exact = hit.name == *term;
            if !looks_like_code(term) && (!exact || hit.kind == "field") {
                // A plain word only counts when it is a symbol's whole name, and not a field's:
                // prose says "body" or "name" far more often than it means such a field.
                continue;
            }
            let key = (hit.path.clone(), hit.start_line, hit.name.clone());
            if seen.insert(key) {
                let weight = if exact { 10.0 } else { 1.0 } * f64::from(hit.score.max(0.01));
                hits.push((weight, hit));
            }
        }
    }
    hits.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.path.cmp(&b.1.path)));

    // The personalisation: where the query points.
    let mut restart: HashMap<&str, f64> = HashMap::new();
    for path in &mentioned_files {
        *restart.entry(path.as_str()).or_default() += 5.0;
    }
    for (weight, hit) in &hits {
        if let Some((path, _)) = files.get_key_value(&hit.path) {
            *restart.entry(path.as_str()).or_default() += weight.min(20.0);
        }
    }
    for path in query.current_file.iter().chain(&query.open_files) {
        if let Some((path, _)) = files.get_key_value(path) {
            let boost = if query.current_file.as_ref() == Some(path) {
                4.0
            } else {
                1.0
            };
            *restart.entry(path.as_str()).or_default() += boost;
        }
    }
    // Words of the query against each file's vocabulary (its path, the names it defines and
    // uses): task descriptions are mostly prose, and prose still names what a file is about.
    let lexical = lexical_scores(&files, &query.text);
    let best = lexical.first().map_or(1.0, |(_, score)| *score);
    for (path, score) in lexical.iter().take(LEXICAL_FILES) {
        *restart.entry(path.as_str()).or_default() += LEXICAL_WEIGHT * score / best;
    }
    let identifiers: HashSet<&str> = named.iter().copied().collect();
    let ranking = rank(&files, &restart, &identifiers);

    // The files the query or the editor points at, then those defining what it names.
    let pointed: Vec<&str> = distinct(
        mentioned_files
            .iter()
            .map(String::as_str)
            .chain(query.current_file.as_deref())
            .chain(query.open_files.iter().map(String::as_str))
            .filter(|path| files.contains_key(*path)),
    );
    let named_files: Vec<&str> = distinct(hits.iter().map(|(_, hit)| hit.path.as_str()));
    let words = passages::query_terms(&query.text, STOPWORDS);
    let named_by_file_name = paths::named_by(&query.text, &words, files.keys().map(String::as_str));
    let text = text_match(
        index,
        overlay,
        &files,
        &words,
        pointed
            .iter()
            .chain(&named_files)
            .copied()
            .chain(lexical.iter().map(|(p, _)| p.as_str()))
            .chain(ranking.files.iter().map(|(p, _)| p.as_str())),
    );
    let mut fused = fusion::fuse(
        &[
            Ranked {
                weight: WEIGHT_POINTED,
                paths: pointed.clone(),
            },
            Ranked {
                weight: WEIGHT_NAMED,
                paths: named_files,
            },
            Ranked {
                weight: WEIGHT_TEXT,
                paths: text.files.iter().map(|(p, _)| p.as_str()).collect(),
            },
            Ranked {
                weight: WEIGHT_PASSAGE,
                paths: text.passages.iter().map(|(p, _)| p.as_str()).collect(),
            },
            Ranked {
                weight: WEIGHT_VOCABULARY,
                paths: lexical.iter().map(|(p, _)| p.as_str()).collect(),
            },
            Ranked {
                weight: WEIGHT_GRAPH,
                paths: ranking.files.iter().map(|(p, _)| p.as_str()).collect(),
            },
            Ranked {
                weight: WEIGHT_FILE_NAME,
                paths: named_by_file_name,
            },
        ],
        FUSION_K,
        FUSION_DEPTH,
    );
    // A fix lands in the code; its tests follow from there. Unless the query speaks of
    // tests, they rank below the code that matches as well.
    if !words.iter().any(|word| word.text.starts_with("test")) {
        for (path, score) in &mut fused {
            if paths::is_test(path) {
                *score *= TEST_FACTOR;
            }
        }
        fused.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(b.0)));
    }
    let passages: HashMap<&str, &Passage> = text
        .passages
        .iter()
        .map(|(p, passage)| (p.as_str(), passage))
        .collect();

    // Snippets file by file in the fused order, each file's below the one before.
    let top = fused.first().map_or(1.0, |(_, score)| *score);
    let mut candidates: Vec<Snippet> = Vec::new();
    let mut shown: HashSet<(String, u32)> = HashSet::new();
    for (position, (path, fused_score)) in fused.iter().enumerate().take(RANKED_FILES) {
        let file_score = 100.0 * fused_score / top;
        let mut covered: Vec<(u32, u32)> = Vec::new();
        let of_file: Vec<&(f64, SymbolHit)> =
            hits.iter().filter(|(_, hit)| hit.path == *path).collect();
        for (order, (_, hit)) in of_file.iter().enumerate() {
            if let Some(snippet) = definition_snippet(
                index,
                overlay,
                hit,
                file_score * (1.0 - order as f64 * 1e-4),
            ) {
                shown.insert((hit.path.clone(), hit.start_line));
                covered.push((snippet.start_line, snippet.end_line));
                candidates.push(snippet);
            }
        }
        if position < PASSAGE_FILES
            && let Some(passage) = passages.get(path)
            && passage.distinct_terms >= PASSAGE_MIN_TERMS
            && let Some(snippet) = passage_snippet(
                index,
                overlay,
                path,
                passage,
                text.occurrences.get(*path),
                &covered,
                file_score * 0.999,
            )
        {
            candidates.push(snippet);
        }
        let definitions = ranking.definitions.get(*path);
        if let Some(snippet) = map_snippet(index, path, definitions, &shown) {
            candidates.push(Snippet {
                score: file_score * 0.998,
                ..snippet
            });
        }
    }
    // Never above the snippet before: the file order is the ranking.
    let mut ceiling = f64::INFINITY;
    for snippet in &mut candidates {
        snippet.score = snippet.score.min(ceiling);
        ceiling = snippet.score;
    }
    fit(&query.text, query.budget, candidates)
}

fn distinct<'a>(paths: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let mut seen = HashSet::new();
    paths.filter(|path| seen.insert(*path)).collect()
}

/// The text signal: every indexed file's text when the workspace is small enough, else the
/// files in `priority` order (the other signals' best first) up to [`TEXT_BYTES`].
fn text_match<'a>(
    index: &Index,
    overlay: &dyn Overlay,
    files: &'a BTreeMap<String, FileRecord>,
    terms: &[passages::Term],
    priority: impl Iterator<Item = &'a str>,
) -> TextMatch {
    if terms.is_empty() {
        return TextMatch::default();
    }
    let total: u64 = files.values().map(|record| record.size).sum();
    let chosen: Vec<&str> = if total <= TEXT_BYTES {
        files.keys().map(String::as_str).collect()
    } else {
        let mut used = 0;
        distinct(priority.chain(files.keys().map(String::as_str)))
            .into_iter()
            .filter(|path| {
                let size = files.get(*path).map_or(0, |record| record.size);
                let fits = used + size <= TEXT_BYTES;
                used += if fits { size } else { 0 };
                fits
            })
            .collect()
    };
    let read: Vec<(String, Occurrences)> = chosen
        .into_iter()
        .filter_map(|path| {
            let text = overlay
                .buffer_text(&index.root().join(path))
                .or_else(|| index.read_source(path))?;
            Some((path.to_owned(), passages::occurrences(&text, terms)))
        })
        .collect();
    passages::score(read, terms)
}

/// Fills the budget greedily by score (ties in the order given); a snippet that does not fit
/// is skipped, not cut, and smaller ones after it may still fit.
fn fit(query: &str, budget: usize, mut candidates: Vec<Snippet>) -> Context {
    candidates.sort_by(|a, b| b.score.total_cmp(&a.score));
    let mut used = 0;
    let mut snippets = Vec::new();
    for snippet in candidates {
        if used + snippet.tokens <= budget {
            used += snippet.tokens;
            snippets.push(snippet);
        }
    }
    Context {
        query: query.to_owned(),
        budget,
        tokens: used,
        snippets,
    }
}

/// Identifier-like words of the query worth looking up.
fn terms(text: &str) -> Vec<String> {
    let mut seen = HashSet::new();
    index::words(text)
        .map(|(_, word)| word)
        .filter(|word| word.chars().count() >= 3 && !word.chars().all(|c| c.is_ascii_digit()))
        .filter(|word| !STOPWORDS.contains(&word.to_lowercase().as_str()))
        .filter(|word| seen.insert(word.to_string()))
        .map(str::to_owned)
        .collect()
}

/// `snake_case`, `camelCase`, `PascalCase` (with an inner capital) or `SCREAMING`: a word
/// that names code rather than meaning English.
fn looks_like_code(word: &str) -> bool {
    word.contains('_')
        || word.chars().skip(1).any(char::is_uppercase)
        || (word.len() > 1 && word.chars().all(|c| c.is_uppercase() || c.is_ascii_digit()))
}

/// Indexed files the query names by path or file name (`src/lib.rs`, `lib.rs`).
fn mentioned_files(text: &str, files: &BTreeMap<String, FileRecord>) -> Vec<String> {
    let tokens: Vec<&str> = text
        .split(|c: char| c.is_whitespace() || "`'\"(),;:".contains(c))
        .filter(|t| t.contains('.') || t.contains('/'))
        .map(|t| t.trim_matches(|c: char| c == '.' || c == '/'))
        .filter(|t| t.contains('.') && t.len() > 2)
        .collect();
    files
        .keys()
        .filter(|path| {
            tokens
                .iter()
                .any(|t| *path == t || path.ends_with(&format!("/{t}")))
        })
        .cloned()
        .collect()
}

/// The lines of a file as the workspace view holds it (the disk read through the index's
/// root, within its size limit).
fn file_lines(index: &Index, overlay: &dyn Overlay, relative: &str) -> Option<Vec<String>> {
    let path = index.root().join(relative);
    let text = overlay
        .buffer_text(&path)
        .or_else(|| index.read_source(relative))?;
    Some(text.lines().map(str::to_owned).collect())
}

fn definition_snippet(
    index: &Index,
    overlay: &dyn Overlay,
    hit: &SymbolHit,
    score: f64,
) -> Option<Snippet> {
    let lines = file_lines(index, overlay, &hit.path)?;
    lines_snippet(&hit.path, &lines, hit.start_line, hit.end_line, score)
}

/// Lines `start_line..=end_line` (zero-based) of `path` with the doc comment and attributes
/// above them, the first [`MAX_DEFINITION_LINES`] of them when longer.
fn lines_snippet(
    path: &str,
    lines: &[String],
    start_line: u32,
    end_line: u32,
    score: f64,
) -> Option<Snippet> {
    let end = (end_line as usize).min(lines.len().saturating_sub(1));
    // The doc comment and attributes above a definition belong with it.
    let mut start = (start_line as usize).min(end);
    while start > 0 && start + 12 > start_line as usize && is_preamble(&lines[start - 1]) {
        start -= 1;
    }
    if start > end {
        return None;
    }
    let shown_end = end.min(start + MAX_DEFINITION_LINES - 1);
    let mut text: Vec<String> = lines[start..=shown_end]
        .iter()
        .enumerate()
        .map(|(i, line)| format!("{:>5}  {line}", start + i + 1))
        .collect();
    if shown_end < end {
        text.push(format!("       … {} more lines", end - shown_end));
    }
    let body = format!("{path}:{}-{}\n{}\n", start + 1, end + 1, text.join("\n"));
    Some(Snippet {
        path: path.to_owned(),
        start_line: start as u32 + 1,
        end_line: end as u32 + 1,
        kind: SnippetKind::Definition,
        score,
        tokens: tokens::count(&body),
        text: body,
    })
}

/// The code around a file's best passage: the largest definition holding the passage's
/// focus (the line amid its matches) that is short enough to show whole, else the passage's
/// lines themselves. `None` when it overlaps a snippet of the file already shown (`covered`,
/// one-based ranges).
fn passage_snippet(
    index: &Index,
    overlay: &dyn Overlay,
    path: &str,
    passage: &Passage,
    occurrences: Option<&Occurrences>,
    covered: &[(u32, u32)],
    score: f64,
) -> Option<Snippet> {
    let inside: Vec<u32> = occurrences?
        .hits
        .iter()
        .map(|(line, _)| *line)
        .filter(|line| (passage.start_line..=passage.end_line).contains(line))
        .collect();
    let focus = *inside.get(inside.len() / 2)?;
    let enclosing = index
        .outline(path)
        .into_iter()
        .filter(|hit| hit.start_line <= focus && focus <= hit.end_line)
        .filter(|hit| ((hit.end_line - hit.start_line) as usize) < MAX_DEFINITION_LINES)
        .max_by_key(|hit| {
            (
                hit.end_line - hit.start_line,
                std::cmp::Reverse(hit.start_line),
            )
        });
    let (start, end) = match enclosing {
        Some(hit) => (hit.start_line, hit.end_line),
        None => {
            let first = inside.first().copied().unwrap_or(focus);
            let last = inside.last().copied().unwrap_or(focus);
            (first.saturating_sub(3), last + 3)
        }
    };
    if covered
        .iter()
        .any(|&(from, to)| start < to && from <= end + 1)
    {
        return None;
    }
    let lines = file_lines(index, overlay, path)?;
    lines_snippet(path, &lines, start, end, score)
}

/// A comment or attribute line, as they sit above definitions in the supported languages.
fn is_preamble(line: &str) -> bool {
    let line = line.trim_start();
    ["//", "#", "/*", "*", "@"]
        .iter()
        .any(|marker| line.starts_with(marker))
        && !line.starts_with("#include")
        && !line.starts_with("#define")
}

/// A file's outline: its most relevant definitions' signature lines, in file order.
fn map_snippet(
    index: &Index,
    path: &str,
    ranked: Option<&Vec<(String, f64)>>,
    shown: &HashSet<(String, u32)>,
) -> Option<Snippet> {
    let outline = index.outline(path);
    let wanted: Vec<&str> = match ranked {
        Some(names) => names
            .iter()
            .take(MAP_DEFINITIONS_PER_FILE)
            .map(|(n, _)| n.as_str())
            .collect(),
        None => Vec::new(),
    };
    let mut chosen: Vec<&SymbolHit> = outline
        .iter()
        .filter(|hit| wanted.contains(&hit.name.as_str()))
        .filter(|hit| !shown.contains(&(hit.path.clone(), hit.start_line)))
        .collect();
    if chosen.is_empty() {
        // Nothing points into the file: its first definitions stand for it.
        chosen = outline
            .iter()
            .filter(|hit| !shown.contains(&(hit.path.clone(), hit.start_line)))
            .take(MAP_DEFINITIONS_PER_FILE / 2)
            .collect();
    }
    chosen.truncate(MAP_DEFINITIONS_PER_FILE);
    chosen.sort_by_key(|hit| (hit.line, hit.column));
    let first = chosen.first()?;
    let last = chosen.last()?;
    let lines: Vec<String> = chosen
        .iter()
        .map(|hit| format!("{:>5}  {}", hit.line + 1, hit.signature))
        .collect();
    let body = format!("{path}\n{}\n", lines.join("\n"));
    Some(Snippet {
        path: path.to_owned(),
        start_line: first.line + 1,
        end_line: last.line + 1,
        kind: SnippetKind::Map,
        score: 0.0,
        tokens: tokens::count(&body),
        text: body,
    })
}

#[cfg(test)]
mod tests;
