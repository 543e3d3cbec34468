//! The repository map's ranking: a personalised PageRank over the graph whose nodes are files
//! and whose edges go from a file referencing a name to each file defining it (Aider's map).

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::index::FileRecord;

const DAMPING: f64 = 0.85;
const ITERATIONS: usize = 30;

pub struct Ranking {
    /// Files by descending rank.
    pub files: Vec<(String, f64)>,
    /// Per file, its definitions by how much rank flowed to them.
    pub definitions: HashMap<String, Vec<(String, f64)>>,
}

/// Personalised PageRank over the reference graph.
pub fn rank(
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
