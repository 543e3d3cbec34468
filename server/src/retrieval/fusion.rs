//! Reciprocal rank fusion: files ranked by several signals, merged by summing
//! `weight / (k + rank)` over the lists each file appears in. Ranks, not scores, are fused, so
//! signals on unrelated scales (BM25, PageRank) combine without calibration, and a file near
//! the top of one list outranks a file in the middle of all of them.

use std::collections::HashMap;

/// One ranked list and how much it counts.
pub struct Ranked<'a> {
    pub weight: f64,
    /// Best first; only the first `depth` entries count.
    pub paths: Vec<&'a str>,
}

/// The fused ranking, best first, with each file's fused score (ties by path).
pub fn fuse<'a>(lists: &[Ranked<'a>], k: f64, depth: usize) -> Vec<(&'a str, f64)> {
    let mut scores: HashMap<&'a str, f64> = HashMap::new();
    for list in lists {
        for (rank, path) in list.paths.iter().take(depth).enumerate() {
            *scores.entry(path).or_default() += list.weight / (k + rank as f64 + 1.0);
        }
    }
    let mut fused: Vec<(&str, f64)> = scores.into_iter().collect();
    fused.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(b.0)));
    fused
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agreement_outranks_one_strong_signal_and_weights_count() {
        let lists = [
            Ranked {
                weight: 1.0,
                paths: vec!["a", "b", "c"],
            },
            Ranked {
                weight: 1.0,
                paths: vec!["b", "c", "a"],
            },
            Ranked {
                weight: 1.0,
                paths: vec!["d", "b"],
            },
        ];
        let fused = fuse(&lists, 10.0, 100);
        let order: Vec<&str> = fused.iter().map(|(p, _)| *p).collect();
        assert_eq!(order, ["b", "a", "c", "d"]);
        // Weighting the third list enough puts its first file on top; depth cuts lists short.
        let heavy = [
            Ranked {
                weight: 5.0,
                paths: vec!["d"],
            },
            Ranked {
                weight: 1.0,
                paths: vec!["a", "b"],
            },
        ];
        assert_eq!(fuse(&heavy, 10.0, 1)[0].0, "d");
        assert_eq!(fuse(&heavy, 10.0, 1).len(), 2);
    }
}
