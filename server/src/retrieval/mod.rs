//! Given a query and a token budget, the code a model should see: definitions of the symbols
//! the query names, and a map of the repository ranked toward them.
//!
//! The ranking follows Aider's repository map: files are nodes, an edge goes from a file that
//! references a name to each file that defines it, and a personalised PageRank, restarting at
//! the files the query points to (named paths, files defining named identifiers, the cursor's
//! file, open buffers), ranks files and the definitions those edges land on.
//!
//! Invariants: deterministic for a given index and query; never over budget (tokens counted
//! with `llm::tokens`); a snippet's text is what the workspace view holds (buffers overlaid on
//! the disk) at its lines.

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::index::{self, FileRecord, Index, SymbolHit};
use crate::llm::tokens;
use crate::workspace::Overlay;

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
const DAMPING: f64 = 0.85;
/// How many files the lexical match may steer toward, and how hard (a named symbol's file
/// weighs up to 20, a mentioned path 5).
const LEXICAL_FILES: usize = 10;
const LEXICAL_WEIGHT: f64 = 8.0;
const ITERATIONS: usize = 30;

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

    let mut candidates: Vec<Snippet> = Vec::new();
    let mut shown: HashSet<(String, u32)> = HashSet::new();
    for (rank_in_hits, (weight, hit)) in hits.iter().enumerate() {
        if let Some(snippet) = definition_snippet(index, overlay, hit, *weight, rank_in_hits) {
            shown.insert((hit.path.clone(), hit.start_line));
            candidates.push(snippet);
        }
    }
    let top_score = candidates.iter().map(|s| s.score).fold(1.0, f64::max);
    for (position, (path, file_rank)) in ranking.files.iter().enumerate().take(60) {
        let definitions = ranking.definitions.get(path.as_str());
        if let Some(snippet) = map_snippet(index, path, definitions, &shown) {
            // Below every named definition, in PageRank order.
            let score =
                top_score * 0.5 * file_rank / (1.0 + position as f64 * 0.01) / ranking.max_rank;
            candidates.push(Snippet { score, ..snippet });
        }
    }
    fit(&query.text, query.budget, candidates)
}

/// Fills the budget greedily by score; a snippet that does not fit is skipped, not cut, and
/// smaller ones after it may still fit.
fn fit(query: &str, budget: usize, mut candidates: Vec<Snippet>) -> Context {
    candidates.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then_with(|| (&a.path, a.start_line).cmp(&(&b.path, b.start_line)))
    });
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

/// BM25 of the query's words against each file's vocabulary: the parts of its path, of the
/// names it defines (counted thrice: a file is about what it defines) and of the names it
/// uses. Computed from the index alone, without reading files. Best first, zero scores left out.
fn lexical_scores(files: &BTreeMap<String, FileRecord>, query: &str) -> Vec<(String, f64)> {
    let mut terms: Vec<String> = index::words(query)
        .filter(|(_, word)| !STOPWORDS.contains(&word.to_lowercase().as_str()))
        .flat_map(|(_, word)| index::identifier_parts(word))
        .filter(|part| part.chars().count() >= 3)
        .collect();
    terms.sort();
    terms.dedup();
    if terms.is_empty() {
        return Vec::new();
    }
    let position: HashMap<&str, usize> = terms
        .iter()
        .enumerate()
        .map(|(i, t)| (t.as_str(), i))
        .collect();
    // Per file: how often each query term occurs (dense: queries have few terms), and length.
    let mut documents: Vec<(&String, Vec<f64>, f64)> = Vec::with_capacity(files.len());
    let mut document_frequency = vec![0usize; terms.len()];
    for (path, record) in files {
        let mut counts = vec![0.0; terms.len()];
        let mut length = 0.0;
        let mut add = |word: &str, weight: f64| {
            for part in index::identifier_parts(word) {
                length += weight;
                if let Some(&i) = position.get(part.as_str()) {
                    counts[i] += weight;
                }
            }
        };
        for (_, word) in index::words(path) {
            add(word, 3.0);
        }
        for name in &record.defines {
            add(name, 3.0);
        }
        for (name, count) in &record.references {
            add(name, f64::from(*count));
        }
        for (i, count) in counts.iter().enumerate() {
            if *count > 0.0 {
                document_frequency[i] += 1;
            }
        }
        documents.push((path, counts, length));
    }
    let n = documents.len() as f64;
    let average = documents.iter().map(|d| d.2).sum::<f64>() / n.max(1.0);
    let mut scores: Vec<(String, f64)> = documents
        .into_iter()
        .filter_map(|(path, counts, length)| {
            let score: f64 = counts
                .iter()
                .enumerate()
                .filter(|(_, tf)| **tf > 0.0)
                .map(|(i, tf)| {
                    let df = document_frequency[i] as f64;
                    let idf = ((n - df + 0.5) / (df + 0.5) + 1.0).ln();
                    idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * length / average.max(1.0)))
                })
                .sum();
            (score > 0.0).then(|| (path.clone(), score))
        })
        .collect();
    scores.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    scores
}

struct Ranking {
    /// Files by descending rank.
    files: Vec<(String, f64)>,
    max_rank: f64,
    /// Per file, its definitions by how much rank flowed to them.
    definitions: HashMap<String, Vec<(String, f64)>>,
}

/// Personalised PageRank over the reference graph.
fn rank(
    files: &BTreeMap<String, FileRecord>,
    restart: &HashMap<&str, f64>,
    identifiers: &HashSet<&str>,
) -> Ranking {
    let paths: Vec<&str> = files.keys().map(String::as_str).collect();
    let position: HashMap<&str, usize> = paths.iter().enumerate().map(|(i, p)| (*p, i)).collect();
    let mut definers: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, record) in files.values().enumerate() {
        for name in &record.defines {
            definers.entry(name.as_str()).or_default().push(i);
        }
    }
    // Edges: (from, to, weight, name).
    let mut edges: Vec<(usize, usize, f64, &str)> = Vec::new();
    for (from, record) in files.values().enumerate() {
        for (name, count) in &record.references {
            let Some(targets) = definers.get(name.as_str()) else {
                continue;
            };
            // A name defined everywhere (`new`, `default`) says little about any one file.
            let mut weight = f64::from(*count).sqrt() / targets.len() as f64;
            if identifiers.contains(name.as_str()) {
                weight *= 10.0;
            }
            if name.starts_with('_') {
                weight *= 0.1;
            }
            for &to in targets {
                if to != from {
                    edges.push((from, to, weight, name));
                }
            }
        }
    }
    let n = paths.len().max(1);
    let mut personal = vec![0.0; paths.len()];
    let total: f64 = restart.values().sum();
    if total > 0.0 {
        for (path, weight) in restart {
            if let Some(&i) = position.get(path) {
                personal[i] = weight / total;
            }
        }
    } else {
        personal.iter_mut().for_each(|p| *p = 1.0 / n as f64);
    }
    let mut out_weight = vec![0.0; paths.len()];
    for &(from, _, weight, _) in &edges {
        out_weight[from] += weight;
    }
    let mut rank = personal.clone();
    for _ in 0..ITERATIONS {
        let mut next: Vec<f64> = personal.iter().map(|p| (1.0 - DAMPING) * p).collect();
        let dangling: f64 = rank
            .iter()
            .zip(&out_weight)
            .filter(|(_, out)| **out == 0.0)
            .map(|(r, _)| r)
            .sum();
        for (i, p) in personal.iter().enumerate() {
            next[i] += DAMPING * dangling * p;
        }
        for &(from, to, weight, _) in &edges {
            next[to] += DAMPING * rank[from] * weight / out_weight[from];
        }
        rank = next;
    }
    let mut definitions: HashMap<String, HashMap<&str, f64>> = HashMap::new();
    for &(from, to, weight, name) in &edges {
        *definitions
            .entry(paths[to].to_owned())
            .or_default()
            .entry(name)
            .or_default() += rank[from] * weight / out_weight[from];
    }
    let mut ranked: Vec<(String, f64)> = paths
        .iter()
        .zip(&rank)
        .map(|(p, r)| ((*p).to_owned(), *r))
        .collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    Ranking {
        max_rank: ranked
            .first()
            .map_or(1.0, |(_, r)| r.max(f64::MIN_POSITIVE)),
        files: ranked,
        definitions: definitions
            .into_iter()
            .map(|(path, names)| {
                let mut names: Vec<(String, f64)> =
                    names.into_iter().map(|(n, r)| (n.to_owned(), r)).collect();
                names.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
                (path, names)
            })
            .collect(),
    }
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
    weight: f64,
    order: usize,
) -> Option<Snippet> {
    let lines = file_lines(index, overlay, &hit.path)?;
    let end = (hit.end_line as usize).min(lines.len().saturating_sub(1));
    // The doc comment and attributes above a definition belong with it.
    let mut start = (hit.start_line as usize).min(end);
    while start > 0 && start + 12 > hit.start_line as usize && is_preamble(&lines[start - 1]) {
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
    let body = format!(
        "{}:{}-{}\n{}\n",
        hit.path,
        start + 1,
        end + 1,
        text.join("\n")
    );
    Some(Snippet {
        path: hit.path.clone(),
        start_line: start as u32 + 1,
        end_line: end as u32 + 1,
        kind: SnippetKind::Definition,
        score: weight / (1.0 + order as f64 * 0.05),
        tokens: tokens::count(&body),
        text: body,
    })
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
