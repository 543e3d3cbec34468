//! BM25 of the query's words against each file's vocabulary as the index's manifest records
//! it (path words, the names a file defines and uses): cheap, no file read.

use std::collections::{BTreeMap, HashMap};

use super::STOPWORDS;
use crate::index::{self, FileRecord};

/// BM25 of the query's words against each file's vocabulary: the parts of its path, of the
/// names it defines (counted thrice: a file is about what it defines) and of the names it
/// uses. Computed from the index alone, without reading files. Best first, zero scores left out.
pub fn lexical_scores(files: &BTreeMap<String, FileRecord>, query: &str) -> Vec<(String, f64)> {
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
