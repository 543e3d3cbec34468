//! BM25 of the query's words over the text of files and over passages of them (windows of
//! lines about a definition long): what finds the file whose bodies, comments and strings use
//! a task's words, which the names a file defines and uses alone miss.
//!
//! Words are matched as the index splits identifiers (`parseHttpRequest` holds `parse`,
//! `http`, `request`), case-insensitively, and a query word of four letters or more also
//! matches the words it starts once its inflection is dropped (`overflows` finds
//! `overflow_check`), because task descriptions conjugate what code names.

use std::collections::HashMap;

use crate::index;

/// Lines in a passage, and how far apart passages start (they overlap by half).
pub const PASSAGE_LINES: usize = 40;
const PASSAGE_STRIDE: usize = PASSAGE_LINES / 2;
const K1: f64 = 1.2;
const B: f64 = 0.75;

/// One word of the query as it is looked for in text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Term {
    /// Lowercase.
    pub text: String,
    /// Whether it also matches the longer words it starts (its stem).
    pub prefix: bool,
}

/// The query's words worth matching in text: identifier parts of its words, lowercase,
/// stopwords and short or numeric words left out, inflections reduced to a stem.
pub fn query_terms(query: &str, stopwords: &[&str]) -> Vec<Term> {
    let mut terms: Vec<Term> = index::words(query)
        .filter(|(_, word)| !stopwords.contains(&word.to_lowercase().as_str()))
        .flat_map(|(_, word)| index::identifier_parts(word))
        .filter(|part| part.chars().count() >= 3 && !part.chars().all(|c| c.is_ascii_digit()))
        .filter(|part| !stopwords.contains(&part.as_str()) && part.is_ascii())
        .map(|part| stem(&part))
        .collect();
    terms.sort_by(|a, b| a.text.cmp(&b.text));
    terms.dedup_by(|a, b| a.text == b.text);
    terms
}

/// `parsing` → `pars` (a prefix), `headers` → `header`; words shorter than four letters are
/// matched whole (`ssl` must not find `sslv3_method`'s neighbours by accident).
fn stem(word: &str) -> Term {
    if word.len() < 4 {
        return Term {
            text: word.to_owned(),
            prefix: false,
        };
    }
    let mut text = word;
    for suffix in [
        "ations", "ation", "ings", "ing", "ies", "ied", "ed", "es", "s",
    ] {
        if let Some(rest) = word.strip_suffix(suffix) {
            let sibilant = rest.ends_with(['s', 'x', 'h', 'z']);
            if rest.len() >= 4
                && (suffix != "es" || sibilant)
                && (suffix != "s" || !rest.ends_with('s'))
            {
                text = rest;
                break;
            }
        }
    }
    Term {
        text: text.to_owned(),
        prefix: true,
    }
}

/// How often each term occurs somewhere, indexed like the terms.
type TermCounts = Vec<f64>;

/// Where the terms occur in one file: `(line, term)` pairs in line order.
#[derive(Clone, Debug, Default)]
pub struct Occurrences {
    pub hits: Vec<(u32, usize)>,
    /// Its length in bytes (for BM25's length normalisation).
    pub bytes: usize,
    pub lines: usize,
}

/// The best passage of a file.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Passage {
    /// Zero-based, inclusive.
    pub start_line: u32,
    pub end_line: u32,
    pub score: f64,
    /// How many of the query's terms it holds.
    pub distinct_terms: usize,
}

/// What the text says about each file.
#[derive(Clone, Debug, Default)]
pub struct TextMatch {
    /// Files by BM25 over their whole text, best first, zero scores left out.
    pub files: Vec<(String, f64)>,
    /// Files by their best passage's BM25, best first.
    pub passages: Vec<(String, Passage)>,
    /// Per matched file, where the terms occur.
    pub occurrences: HashMap<String, Occurrences>,
}

/// Finds `terms` in `text` (one file): the line of every occurrence that starts a word part
/// and, for whole-word terms, also ends one.
pub fn occurrences(text: &str, terms: &[Term]) -> Occurrences {
    let bytes = text.as_bytes();
    let lower = bytes.to_ascii_lowercase();
    let mut found: Vec<(usize, usize)> = Vec::new();
    for (i, term) in terms.iter().enumerate() {
        let needle = term.text.as_bytes();
        for at in memchr::memmem::find_iter(&lower, needle) {
            let end = at + needle.len();
            if starts_part(bytes, at) && (term.prefix || ends_part(bytes, end)) {
                found.push((at, i));
            }
        }
    }
    found.sort_unstable();
    let mut hits = Vec::with_capacity(found.len());
    let mut line = 0u32;
    let mut scanned = 0;
    for (at, term) in found {
        line += memchr::memchr_iter(b'\n', &bytes[scanned..at]).count() as u32;
        scanned = at;
        hits.push((line, term));
    }
    let lines = memchr::memchr_iter(b'\n', &bytes[scanned..]).count() + line as usize + 1;
    Occurrences {
        hits,
        bytes: bytes.len(),
        lines,
    }
}

/// Whether a word part starts at `at`: after a non-letter, at a lower-to-upper change
/// (`parseHttp`), or at the last capital of a run followed by a lowercase (`HTTPServer`).
fn starts_part(bytes: &[u8], at: usize) -> bool {
    let Some(&previous) = at.checked_sub(1).and_then(|i| bytes.get(i)) else {
        return true;
    };
    let current = bytes[at];
    if !previous.is_ascii_alphanumeric() {
        return true;
    }
    if previous.is_ascii_digit() {
        return false;
    }
    current.is_ascii_uppercase()
        && (previous.is_ascii_lowercase() || bytes.get(at + 1).is_some_and(u8::is_ascii_lowercase))
}

/// Whether a word part ends just before `end`: at a non-letter, a lower-to-upper change, or
/// where a run of capitals hands over to a capitalised word (`HTTP|Server`).
fn ends_part(bytes: &[u8], end: usize) -> bool {
    let Some(&next) = bytes.get(end) else {
        return true;
    };
    if !next.is_ascii_alphanumeric() {
        return true;
    }
    let last = bytes[end - 1];
    next.is_ascii_uppercase()
        && (last.is_ascii_lowercase()
            || (last.is_ascii_uppercase()
                && bytes.get(end + 1).is_some_and(u8::is_ascii_lowercase)))
}

/// BM25 of `terms` over each of `files` (`(path, occurrences)`, every file read, matched or
/// not, so that frequencies are over the whole collection) and over their passages.
pub fn score(files: Vec<(String, Occurrences)>, terms: &[Term]) -> TextMatch {
    let n_terms = terms.len();
    if n_terms == 0 || files.is_empty() {
        return TextMatch::default();
    }
    let n_files = files.len() as f64;
    let average_bytes = files.iter().map(|(_, o)| o.bytes as f64).sum::<f64>() / n_files;
    let mut file_df = vec![0usize; n_terms];
    let mut passage_df = vec![0usize; n_terms];
    let mut n_passages = 0usize;
    // Per file: term frequencies, and per passage start its term frequencies.
    let mut counted: Vec<(TermCounts, HashMap<usize, TermCounts>)> =
        Vec::with_capacity(files.len());
    for (_, occurrences) in &files {
        n_passages += occurrences.lines.div_ceil(PASSAGE_STRIDE).max(1);
        let mut tf = vec![0.0; n_terms];
        let mut windows: HashMap<usize, Vec<f64>> = HashMap::new();
        for &(line, term) in &occurrences.hits {
            tf[term] += 1.0;
            let window = line as usize / PASSAGE_STRIDE;
            for start in [window.saturating_sub(1), window] {
                windows.entry(start).or_insert_with(|| vec![0.0; n_terms])[term] += 1.0;
                if start == 0 {
                    // The first passage is counted once, however it was reached.
                    break;
                }
            }
        }
        for (i, count) in tf.iter().enumerate() {
            if *count > 0.0 {
                file_df[i] += 1;
            }
        }
        for counts in windows.values() {
            for (i, count) in counts.iter().enumerate() {
                if *count > 0.0 {
                    passage_df[i] += 1;
                }
            }
        }
        counted.push((tf, windows));
    }
    let idf = |df: usize, n: f64| ((n - df as f64 + 0.5) / (df as f64 + 0.5) + 1.0).ln();
    let file_idf: Vec<f64> = file_df.iter().map(|&df| idf(df, n_files)).collect();
    let passage_idf: Vec<f64> = passage_df
        .iter()
        .map(|&df| idf(df, n_passages as f64))
        .collect();
    let mut ranked_files = Vec::new();
    let mut ranked_passages = Vec::new();
    let mut matched = HashMap::new();
    for ((path, occurrences), (tf, windows)) in files.into_iter().zip(counted) {
        if occurrences.hits.is_empty() {
            continue;
        }
        let norm = 1.0 - B + B * occurrences.bytes as f64 / average_bytes.max(1.0);
        let file_score: f64 = tf
            .iter()
            .zip(&file_idf)
            .filter(|(tf, _)| **tf > 0.0)
            .map(|(tf, idf)| idf * tf * (K1 + 1.0) / (tf + K1 * norm))
            .sum();
        // Passages all have one length: no length normalisation among them.
        let best = windows
            .iter()
            .map(|(start, counts)| {
                let score: f64 = counts
                    .iter()
                    .zip(&passage_idf)
                    .filter(|(tf, _)| **tf > 0.0)
                    .map(|(tf, idf)| idf * tf * (K1 + 1.0) / (tf + K1))
                    .sum();
                let start_line = (start * PASSAGE_STRIDE) as u32;
                Passage {
                    start_line,
                    end_line: start_line + PASSAGE_LINES as u32 - 1,
                    score,
                    distinct_terms: counts.iter().filter(|c| **c > 0.0).count(),
                }
            })
            .max_by(|a, b| {
                a.score
                    .total_cmp(&b.score)
                    .then_with(|| b.start_line.cmp(&a.start_line))
            });
        ranked_files.push((path.clone(), file_score));
        if let Some(best) = best {
            ranked_passages.push((path.clone(), best));
        }
        matched.insert(path, occurrences);
    }
    ranked_files.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    ranked_passages.sort_by(|a, b| b.1.score.total_cmp(&a.1.score).then_with(|| a.0.cmp(&b.0)));
    TextMatch {
        files: ranked_files,
        passages: ranked_passages,
        occurrences: matched,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn term(text: &str, prefix: bool) -> Term {
        Term {
            text: text.to_owned(),
            prefix,
        }
    }

    #[test]
    fn words_are_stemmed_and_matched_as_identifier_parts() {
        assert_eq!(
            query_terms("Parsing headers of the HTTP request", &["the", "of"]),
            [
                term("header", true),
                term("http", true),
                term("pars", true),
                term("request", true)
            ]
        );
        let terms = [term("request", true), term("http", false)];
        let text = "fn parseHttpRequest()\n// HTTPServer requests\nlet unrequested = 1;\nhttp2\n";
        let found = occurrences(text, &terms);
        // `Request` in the camel-case name, `requests`, the `HTTP` of `HTTPServer` and the
        // `Http` of the name; never inside `unrequested`, nor `http` as the head of `http2`.
        assert_eq!(found.hits, [(0, 1), (0, 0), (1, 1), (1, 0)]);
        assert_eq!(found.lines, 5);
    }

    #[test]
    fn the_file_and_passage_with_the_rare_words_win() {
        let terms = [term("cookie", true), term("expir", true)];
        let filler = "let x = 1;\n".repeat(100);
        let files = vec![
            (
                "a.rs".to_owned(),
                occurrences(
                    &format!("{filler}// a cookie's expiry date\nfn cookie() {{}}\n"),
                    &terms,
                ),
            ),
            (
                "b.rs".to_owned(),
                occurrences("// cookie\nfn x() {}\n", &terms),
            ),
            ("c.rs".to_owned(), occurrences(&filler, &terms)),
        ];
        let found = score(files, &terms);
        assert_eq!(found.files[0].0, "a.rs");
        assert_eq!(found.files.len(), 2);
        let (path, passage) = &found.passages[0];
        assert_eq!(path, "a.rs");
        assert!(
            passage.start_line <= 100 && passage.end_line >= 101,
            "{passage:?}"
        );
        assert_eq!(passage.distinct_terms, 2);
    }
}
