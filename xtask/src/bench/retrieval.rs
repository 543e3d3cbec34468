//! `bench retrieval`: how often retrieval shows the model a file the real fix touched,
//! against plain BM25 over whole files, on real history available offline.
//!
//! The history: Debian source packages carry upstream fixes as patches (`debian/patches`),
//! most of them cherry-picked commits whose message says what was wrong. Each patch is a task:
//! the query is its subject and description, the answer is the set of source files it
//! changes (tests excluded), the corpus is the upstream tree before any patch. A task counts
//! as found when at least one answer file appears: among the first five files (recall@5), or
//! within a token budget (4k, 8k) of what each method would show.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};
use wright::index::{self, Index};
use wright::llm::tokens;
use wright::retrieval::{self, Query};
use wright::workspace::{DiskOnly, WalkOptions};

/// C projects with many upstream fixes backported as patches, of moderate size.
const DEFAULT_PACKAGES: &[&str] = &[
    "jq",
    "libxml2",
    "curl",
    "expat",
    "tiff",
    "openjpeg2",
    "libssh",
    "nghttp2",
];
const BUDGETS: [usize; 2] = [4000, 8000];

struct Task {
    query: String,
    answer: BTreeSet<String>,
}

#[derive(Default, Clone, Copy)]
struct Tally {
    at5: usize,
    within: [usize; 2],
}

pub fn run(args: &[String]) -> anyhow::Result<String> {
    let packages: Vec<String> = match args.iter().position(|a| a == "--packages") {
        Some(i) => args
            .get(i + 1)
            .context("--packages needs a comma-separated list")?
            .split(',')
            .map(str::to_owned)
            .collect(),
        None => DEFAULT_PACKAGES.iter().map(|p| (*p).to_owned()).collect(),
    };
    let work = crate::project_root().join("target/bench/retrieval");
    std::fs::create_dir_all(&work)?;
    let mut wright_tally = Tally::default();
    let mut bm25_tally = Tally::default();
    let mut tasks_total = 0;
    let mut per_package = Vec::new();
    for package in &packages {
        let source = fetch(&work, package)?;
        let tasks = tasks(&source)?;
        if tasks.is_empty() {
            println!("{package}: no usable patches");
            continue;
        }
        let index = Index::open(
            &source.upstream,
            index::Options {
                cache_dir: work.join("cache"),
                walk: WalkOptions::default(),
            },
        )?;
        let report = index.refresh(&|_| {})?;
        let bm25 = Bm25::build(&source.upstream, index.files().keys());
        let mut mine = Tally::default();
        let mut theirs = Tally::default();
        for task in &tasks {
            score_wright(&index, task, &mut mine);
            score_bm25(&bm25, task, &mut theirs);
        }
        println!(
            "{package}: {} tasks over {} files; wright recall@5 {}/{n}, BM25 {}/{n}",
            tasks.len(),
            report.files,
            mine.at5,
            theirs.at5,
            n = tasks.len()
        );
        per_package.push((package.clone(), tasks.len(), report.files, mine, theirs));
        tasks_total += tasks.len();
        add(&mut wright_tally, mine);
        add(&mut bm25_tally, theirs);
    }
    if tasks_total == 0 {
        bail!("no tasks: check that the packages' sources could be fetched");
    }
    let percent = |n: usize| format!("{:.0}%", 100.0 * n as f64 / tasks_total as f64);
    let mut out = String::new();
    out += &format!(
        "{tasks_total} tasks from the upstream fixes in the Debian patches of {} ({} packages).\n\n",
        packages.join(", "),
        per_package.len()
    );
    out += "| method | recall@5 files | found within 4k tokens | found within 8k tokens |\n|---|---|---|---|\n";
    for (name, tally) in [
        ("wright retrieval", wright_tally),
        ("BM25 over whole files", bm25_tally),
    ] {
        out += &format!(
            "| {name} | {} | {} | {} |\n",
            percent(tally.at5),
            percent(tally.within[0]),
            percent(tally.within[1])
        );
    }
    out += &format!(
        "\nRatio wright/BM25: recall@5 {:.2}×, within 4k {:.2}×, within 8k {:.2}×.\n\n| package | tasks | files | wright @5 | BM25 @5 |\n|---|---|---|---|---|\n",
        ratio(wright_tally.at5, bm25_tally.at5),
        ratio(wright_tally.within[0], bm25_tally.within[0]),
        ratio(wright_tally.within[1], bm25_tally.within[1]),
    );
    for (package, tasks, files, mine, theirs) in per_package {
        out += &format!(
            "| {package} | {tasks} | {files} | {} | {} |\n",
            mine.at5, theirs.at5
        );
    }
    Ok(out)
}

fn ratio(a: usize, b: usize) -> f64 {
    a as f64 / b.max(1) as f64
}

fn add(total: &mut Tally, more: Tally) {
    total.at5 += more.at5;
    for (t, m) in total.within.iter_mut().zip(more.within) {
        *t += m;
    }
}

fn score_wright(index: &Index, task: &Task, tally: &mut Tally) {
    let mut ranked_files = Vec::new();
    for (i, budget) in BUDGETS.into_iter().enumerate() {
        let context = retrieval::retrieve(
            index,
            &DiskOnly,
            &Query {
                text: task.query.clone(),
                budget,
                ..Query::default()
            },
        );
        let files: Vec<String> = distinct(context.snippets.iter().map(|s| s.path.clone()));
        if files.iter().any(|f| task.answer.contains(f)) {
            tally.within[i] += 1;
        }
        ranked_files = files;
    }
    if ranked_files.iter().take(5).any(|f| task.answer.contains(f)) {
        tally.at5 += 1;
    }
}

fn score_bm25(bm25: &Bm25, task: &Task, tally: &mut Tally) {
    let ranked = bm25.rank(&task.query);
    if ranked.iter().take(5).any(|f| task.answer.contains(*f)) {
        tally.at5 += 1;
    }
    for (i, budget) in BUDGETS.into_iter().enumerate() {
        let mut used = 0;
        let mut found = false;
        for file in &ranked {
            let cost = bm25.tokens[*file];
            if used + cost > budget {
                continue;
            }
            used += cost;
            found |= task.answer.contains(*file);
        }
        if found {
            tally.within[i] += 1;
        }
    }
}

fn distinct(paths: impl Iterator<Item = String>) -> Vec<String> {
    let mut seen = BTreeSet::new();
    paths.filter(|p| seen.insert(p.clone())).collect()
}

/// Okapi BM25 (k1 1.2, b 0.75) over whole files, with identifiers split into their parts as
/// wright's index splits them, so the baseline is not handicapped by tokenisation.
struct Bm25 {
    documents: Vec<(String, HashMap<String, u32>, usize)>,
    document_frequency: HashMap<String, usize>,
    average_length: f64,
    tokens: HashMap<String, usize>,
}

fn terms(text: &str) -> Vec<String> {
    index::words(text)
        .flat_map(|(_, word)| index::identifier_parts(word))
        .collect()
}

impl Bm25 {
    fn build<'a>(root: &Path, files: impl Iterator<Item = &'a String>) -> Self {
        let mut documents = Vec::new();
        let mut document_frequency: HashMap<String, usize> = HashMap::new();
        let mut tokens = HashMap::new();
        for file in files {
            let Ok(text) = std::fs::read_to_string(root.join(file)) else {
                continue;
            };
            let mut counts: HashMap<String, u32> = HashMap::new();
            let words = terms(&text);
            for word in &words {
                *counts.entry(word.clone()).or_default() += 1;
            }
            for word in counts.keys() {
                *document_frequency.entry(word.clone()).or_default() += 1;
            }
            tokens.insert(file.clone(), tokens::count(&text));
            documents.push((file.clone(), counts, words.len()));
        }
        let average_length =
            documents.iter().map(|d| d.2 as f64).sum::<f64>() / documents.len().max(1) as f64;
        Self {
            documents,
            document_frequency,
            average_length,
            tokens,
        }
    }

    fn rank(&self, query: &str) -> Vec<&String> {
        let n = self.documents.len() as f64;
        let query_terms: BTreeSet<String> = terms(query).into_iter().collect();
        let mut scored: Vec<(f64, &String)> = self
            .documents
            .iter()
            .map(|(path, counts, length)| {
                let score = query_terms
                    .iter()
                    .filter_map(|term| {
                        let tf = f64::from(*counts.get(term)?);
                        let df = *self.document_frequency.get(term)? as f64;
                        let idf = ((n - df + 0.5) / (df + 0.5) + 1.0).ln();
                        Some(
                            idf * tf * 2.2
                                / (tf + 1.2 * (0.25 + 0.75 * *length as f64 / self.average_length)),
                        )
                    })
                    .sum();
                (score, path)
            })
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(b.1)));
        scored
            .into_iter()
            .filter(|(s, _)| *s > 0.0)
            .map(|(_, p)| p)
            .collect()
    }
}

struct Source {
    upstream: PathBuf,
    patches: PathBuf,
}

/// Downloads and unpacks `package`'s source once (Debian's archive, through apt).
fn fetch(work: &Path, package: &str) -> anyhow::Result<Source> {
    let dir = work.join(package);
    let done = dir.join(".unpacked");
    if !done.exists() {
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        let status = Command::new("apt-get")
            .args(["source", "--download-only", "-qq", package])
            .current_dir(&dir)
            .status()
            .context("running apt-get")?;
        if !status.success() {
            bail!(
                "apt-get source {package} failed: this bench needs Debian source packages; add a \
                 `deb-src` entry for your suite to /etc/apt/sources.list.d and run apt-get update"
            );
        }
        for entry in std::fs::read_dir(&dir)?.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let target = if name.contains(".orig.tar") && !name.ends_with(".asc") {
                "upstream"
            } else if name.contains(".debian.tar") {
                "packaging"
            } else {
                continue;
            };
            std::fs::create_dir_all(dir.join(target))?;
            let status = Command::new("tar")
                .arg("xf")
                .arg(entry.path())
                .arg("-C")
                .arg(dir.join(target))
                .status()?;
            if !status.success() {
                bail!("could not unpack {name}");
            }
        }
        std::fs::write(&done, "")?;
    }
    // The upstream tarball has one top folder.
    let upstream = std::fs::read_dir(dir.join("upstream"))
        .with_context(|| format!("{package} has no .orig tarball (a native package?)"))?
        .flatten()
        .map(|e| e.path())
        .find(|p| p.is_dir())
        .context("empty upstream tarball")?;
    Ok(Source {
        upstream,
        patches: dir.join("packaging/debian/patches"),
    })
}

/// The patches that change source files, as tasks.
fn tasks(source: &Source) -> anyhow::Result<Vec<Task>> {
    let Ok(series) = std::fs::read_to_string(source.patches.join("series")) else {
        return Ok(Vec::new());
    };
    let mut tasks = Vec::new();
    for name in series
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        let name = name.split_whitespace().next().unwrap_or(name);
        let Ok(patch) = std::fs::read(source.patches.join(name)) else {
            continue;
        };
        let patch = String::from_utf8_lossy(&patch);
        let query = description(&patch);
        let answer: BTreeSet<String> = patch
            .lines()
            .filter_map(|l| l.strip_prefix("+++ "))
            .map(|p| p.split_whitespace().next().unwrap_or(p))
            .map(|p| p.split_once('/').map_or(p, |(_, rest)| rest).to_owned())
            .filter(|p| wright::languages::Language::from_path(Path::new(p)).is_some())
            .filter(|p| !p.to_lowercase().contains("test") && !p.to_lowercase().contains("fuzz"))
            .filter(|p| source.upstream.join(p).is_file())
            .collect();
        if query.split_whitespace().count() >= 4 && !answer.is_empty() {
            tasks.push(Task { query, answer });
        }
    }
    Ok(tasks)
}

/// The commit message of a patch: `Subject:`/`Description:` and the body up to the diff, minus
/// trailers and the diffstat (which name the answer).
fn description(patch: &str) -> String {
    let head = patch.split("\n---\n").next().unwrap_or(patch);
    let head = head.split("\ndiff ").next().unwrap_or(head);
    let head = head.split("\nIndex: ").next().unwrap_or(head);
    let mut lines = Vec::new();
    let mut in_message = false;
    for line in head.lines() {
        if let Some(subject) = line
            .strip_prefix("Subject:")
            .or_else(|| line.strip_prefix("Description:"))
        {
            lines.push(
                subject
                    .trim()
                    .trim_start_matches("[PATCH]")
                    .trim()
                    .to_owned(),
            );
            in_message = true;
            continue;
        }
        let is_trailer = line
            .split_once(':')
            .is_some_and(|(key, _)| !key.contains(' ') && key.len() < 30 && !key.is_empty());
        if line.starts_with("From ")
            || line.starts_with("(cherry picked")
            || line.starts_with("---")
            || line.starts_with("+++")
            || line.starts_with("===")
        {
            continue;
        }
        if in_message && !is_trailer {
            lines.push(line.trim().to_owned());
        }
    }
    lines
        .join(" ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_description_is_the_message_without_headers_trailers_or_diffstat() {
        let patch = "From: A <a@b>\nDate: Thu\nSubject: Fix overflow in\n `jv_append`\n\nThe size could wrap.\n\nBug: https://x/1\n(cherry picked from commit e47e)\n---\n src/jv.c | 11 ++++\n\ndiff --git a/src/jv.c b/src/jv.c\n";
        assert_eq!(
            description(patch),
            "Fix overflow in `jv_append` The size could wrap."
        );
    }

    #[test]
    fn bm25_ranks_the_file_with_the_rare_terms_first() {
        let dir = std::env::temp_dir().join(format!("wright-bm25-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("a.c"),
            "int parse_number(void) { return 0; } int x;",
        )
        .unwrap();
        std::fs::write(
            dir.join("b.c"),
            "int render(void) { return 1; } int x; int x;",
        )
        .unwrap();
        let files = ["a.c".to_owned(), "b.c".to_owned()];
        let bm25 = Bm25::build(&dir, files.iter());
        assert_eq!(bm25.rank("the number parser is wrong"), [&files[0]]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
