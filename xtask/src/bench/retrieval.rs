//! `bench retrieval`: how often retrieval shows the model a file the real fix touched,
//! against plain BM25 over whole files, on real history available offline.
//!
//! The history: Debian source packages carry upstream fixes as patches (`debian/patches`),
//! most of them cherry-picked commits whose message says what was wrong. Each patch is a task:
//! the query is its subject and description, the answer is the set of source files it
//! changes (tests excluded), the corpus is the upstream tree before any patch; Debian's own
//! patches (DEP-3 `Forwarded: not-needed`) are not fixes and are left out. A task counts as
//! found when at least one answer file appears: among the first five files (recall@5), or
//! within a token budget (4k, 8k) of what each method would show. Tasks are split in two by a
//! hash of their package and patch name: a tuning half, and a held-out half that the ranking
//! was never tuned on (`--split tuning` runs only the first); results are grouped by split and
//! by the language of the files each fix changes.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, bail};
use wright::index::{self, Index};
use wright::llm::tokens;
use wright::retrieval::{self, Query};
use wright::workspace::{DiskOnly, WalkOptions};

/// Packages with many upstream fixes backported as patches, of moderate size: C (the first
/// corpus), then Python, Go, Ruby and Java, each with at least five usable fixes in
/// bookworm's sources.
const DEFAULT_PACKAGES: &[&str] = &[
    "jq",
    "libxml2",
    "curl",
    "expat",
    "tiff",
    "openjpeg2",
    "libssh",
    "nghttp2",
    "python-django",
    "jinja2",
    "pillow",
    "python-pip",
    "runc",
    "containerd",
    "docker.io",
    "rails",
    "redmine",
    "netty",
];
const BUDGETS: [usize; 2] = [4000, 8000];

struct Task {
    /// `package/patch`: what the split is decided on.
    id: String,
    query: String,
    answer: BTreeSet<String>,
    language: &'static str,
}

/// Half of the tasks tune the ranking, the other half is held out: judged on, never tuned on.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Split {
    Tuning,
    HeldOut,
}

impl Split {
    /// Decided by a hash of the task's package and patch name, so a task keeps its side
    /// whatever else the corpus holds.
    fn of(id: &str) -> Self {
        if fnv1a(id.as_bytes()).is_multiple_of(2) {
            Self::Tuning
        } else {
            Self::HeldOut
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::Tuning => "tuning",
            Self::HeldOut => "held-out",
        }
    }
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[derive(Default, Clone, Copy)]
struct Tally {
    tasks: usize,
    at5: usize,
    within: [usize; 2],
}

/// What one task scored, by method.
struct Outcome {
    package: String,
    language: &'static str,
    split: Split,
    wright: Tally,
    bm25: Tally,
    /// How long wright's retrieval took (both budgets).
    seconds: f64,
    /// How long BM25's ranking took (its index built beforehand, in memory).
    bm25_seconds: f64,
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
    // `--split tuning` while tuning, so that the held-out half is never looked at.
    let only: Option<Split> = match args.iter().position(|a| a == "--split") {
        Some(i) => match args.get(i + 1).map(String::as_str) {
            Some("tuning") => Some(Split::Tuning),
            Some("held-out") => Some(Split::HeldOut),
            _ => bail!("--split takes `tuning` or `held-out`"),
        },
        None => None,
    };
    // `--misses`: print the tasks wright missed at five, for looking into (tuning split only).
    let show_misses = args.iter().any(|a| a == "--misses");
    if show_misses && only != Some(Split::Tuning) {
        bail!("--misses shows tuning tasks only: add `--split tuning`");
    }
    let work = crate::project_root().join("target/bench/retrieval");
    std::fs::create_dir_all(&work)?;
    let mut outcomes: Vec<Outcome> = Vec::new();
    let mut corpus = Vec::new();
    for package in &packages {
        let source = fetch(&work, package)?;
        let tasks: Vec<Task> = tasks(package, &source)?
            .into_iter()
            .filter(|task| only.is_none_or(|split| Split::of(&task.id) == split))
            .collect();
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
        let (mut mine, mut theirs) = (0, 0);
        for task in &tasks {
            let started = Instant::now();
            let (wright, first_files) = score_wright(&index, task);
            let seconds = started.elapsed().as_secs_f64();
            if show_misses && wright.at5 == 0 {
                let query: String = task.query.chars().take(160).collect();
                println!(
                    "miss {}: {query}\n  answer {:?}\n  wright {first_files:?}\n  BM25 {:?}",
                    task.id,
                    task.answer,
                    bm25.rank(&task.query)
                        .into_iter()
                        .take(5)
                        .collect::<Vec<_>>()
                );
            }
            let started = Instant::now();
            let bm25 = score_bm25(&bm25, task);
            let bm25_seconds = started.elapsed().as_secs_f64();
            mine += wright.at5;
            theirs += bm25.at5;
            outcomes.push(Outcome {
                package: package.clone(),
                language: task.language,
                split: Split::of(&task.id),
                wright,
                bm25,
                seconds,
                bm25_seconds,
            });
        }
        println!(
            "{package}: {} tasks over {} files; wright recall@5 {mine}/{n}, BM25 {theirs}/{n}",
            tasks.len(),
            report.files,
            n = tasks.len()
        );
        corpus.push((package.clone(), report.files));
    }
    if outcomes.is_empty() {
        bail!("no tasks: check that the packages' sources could be fetched");
    }
    Ok(report(&packages, &corpus, &outcomes))
}

/// The section: per split, wright against BM25 overall and per language, then per package.
fn report(packages: &[String], corpus: &[(String, usize)], outcomes: &[Outcome]) -> String {
    let languages: BTreeSet<&str> = outcomes.iter().map(|o| o.language).collect();
    let mut out = format!(
        "{} tasks from the upstream fixes in the Debian patches of {} ({} packages with \
         usable fixes). A task is one patch: the query is its subject and description, the \
         answer the source files it changes (tests excluded), the corpus the upstream tree \
         before any patch; Debian's own patches (`Forwarded: not-needed`) are left out. Tasks \
         are split by a hash of package and patch name: the tuning half was used to choose the \
         ranking, the held-out half never was, and the goals are judged on it.\n\n",
        outcomes.len(),
        packages.join(", "),
        corpus.len(),
    );
    let splits: BTreeSet<Split> = outcomes.iter().map(|o| o.split).collect();
    for split in splits {
        let of_split: Vec<&Outcome> = outcomes.iter().filter(|o| o.split == split).collect();
        let (wright, bm25) = totals(of_split.iter().copied());
        out += &format!(
            "### {} split ({} tasks)\n\n| method | recall@5 files | found within 4k tokens | \
             found within 8k tokens |\n|---|---|---|---|\n",
            split.name(),
            wright.tasks
        );
        for (name, tally) in [
            ("wright retrieval", wright),
            ("BM25 over whole files", bm25),
        ] {
            out += &format!(
                "| {name} | {} | {} | {} |\n",
                percent(tally.at5, tally.tasks),
                percent(tally.within[0], tally.tasks),
                percent(tally.within[1], tally.tasks)
            );
        }
        out += &format!(
            "\nwright − BM25: recall@5 {:+.0} points, within 4k {:+.0}, within 8k {:+.0}. \
             Ratio wright/BM25: recall@5 {:.2}×, within 8k {:.2}×.\n\n| language | tasks | \
             wright @5 | BM25 @5 | wright 4k | BM25 4k | wright 8k | BM25 8k |\n\
             |---|---|---|---|---|---|---|---|\n",
            points(wright.at5, bm25.at5, wright.tasks),
            points(wright.within[0], bm25.within[0], wright.tasks),
            points(wright.within[1], bm25.within[1], wright.tasks),
            ratio(wright.at5, bm25.at5),
            ratio(wright.within[1], bm25.within[1]),
        );
        for language in &languages {
            let (w, b) = totals(of_split.iter().copied().filter(|o| o.language == *language));
            if w.tasks == 0 {
                continue;
            }
            let n = w.tasks;
            out += &format!(
                "| {language} | {n} | {} | {} | {} | {} | {} | {} |\n",
                percent(w.at5, n),
                percent(b.at5, n),
                percent(w.within[0], n),
                percent(b.within[0], n),
                percent(w.within[1], n),
                percent(b.within[1], n),
            );
        }
        out += "\n";
    }
    let median = |mut seconds: Vec<f64>| {
        seconds.sort_by(f64::total_cmp);
        1000.0 * seconds[seconds.len() / 2]
    };
    let wright_ms = median(outcomes.iter().map(|o| o.seconds / 2.0).collect());
    let bm25_ms = median(outcomes.iter().map(|o| o.bm25_seconds).collect());
    out += &format!(
        "Time per query (this debug build, index open): wright's retrieval (reading the files' \
         text) median {wright_ms:.0} ms, BM25's ranking over its prebuilt in-memory index \
         {bm25_ms:.0} ms ({:.1}×).\n\n| package | files | tasks (tuning + held-out) | \
         wright @5 | BM25 @5 |\n|---|---|---|---|---|\n",
        wright_ms / bm25_ms.max(1e-3),
    );
    for (package, files) in corpus {
        let of_package = || outcomes.iter().filter(|o| &o.package == package);
        let (w, b) = totals(of_package());
        let tuning = of_package().filter(|o| o.split == Split::Tuning).count();
        out += &format!(
            "| {package} | {files} | {} ({tuning} + {}) | {} | {} |\n",
            w.tasks,
            w.tasks - tuning,
            w.at5,
            b.at5
        );
    }
    out
}

fn totals<'a>(outcomes: impl Iterator<Item = &'a Outcome>) -> (Tally, Tally) {
    let mut wright = Tally::default();
    let mut bm25 = Tally::default();
    for outcome in outcomes {
        add(&mut wright, outcome.wright);
        add(&mut bm25, outcome.bm25);
    }
    (wright, bm25)
}

fn percent(n: usize, of: usize) -> String {
    format!("{:.0}%", 100.0 * n as f64 / of.max(1) as f64)
}

/// Percentage points by which `a` is above `b`, out of `of`.
fn points(a: usize, b: usize, of: usize) -> f64 {
    100.0 * (a as f64 - b as f64) / of.max(1) as f64
}

fn ratio(a: usize, b: usize) -> f64 {
    a as f64 / b.max(1) as f64
}

fn add(total: &mut Tally, more: Tally) {
    total.tasks += more.tasks;
    total.at5 += more.at5;
    for (t, m) in total.within.iter_mut().zip(more.within) {
        *t += m;
    }
}

/// How wright did on `task`, and the first five files it showed.
fn score_wright(index: &Index, task: &Task) -> (Tally, Vec<String>) {
    let mut tally = Tally {
        tasks: 1,
        ..Tally::default()
    };
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
    ranked_files.truncate(5);
    if ranked_files.iter().any(|f| task.answer.contains(f)) {
        tally.at5 += 1;
    }
    (tally, ranked_files)
}

fn score_bm25(bm25: &Bm25, task: &Task) -> Tally {
    let mut tally = Tally {
        tasks: 1,
        ..Tally::default()
    };
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
    tally
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

/// The upstream patches that change source files, as tasks.
fn tasks(package: &str, source: &Source) -> anyhow::Result<Vec<Task>> {
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
        if is_debian_only(&patch) {
            continue;
        }
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
        if query.split_whitespace().count() >= 4
            && let Some(language) = language_of(&answer)
        {
            tasks.push(Task {
                id: format!("{package}/{name}"),
                query,
                answer,
                language,
            });
        }
    }
    Ok(tasks)
}

/// A patch DEP-3 marks as Debian's own (`Forwarded: not-needed`): packaging, not a fix.
fn is_debian_only(patch: &str) -> bool {
    patch
        .lines()
        .take_while(|line| !line.starts_with("--- ") && !line.starts_with("diff "))
        .any(|line| {
            line.strip_prefix("Forwarded:")
                .is_some_and(|value| value.trim().eq_ignore_ascii_case("not-needed"))
        })
}

/// The language most of the answer's files are in (`None` for an empty answer).
fn language_of(answer: &BTreeSet<String>) -> Option<&'static str> {
    let mut counts: BTreeMap<&'static str, usize> = BTreeMap::new();
    for path in answer {
        if let Some(language) = wright::languages::Language::from_path(Path::new(path)) {
            *counts.entry(language.name()).or_default() += 1;
        }
    }
    counts
        .into_iter()
        .max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.cmp(a.0)))
        .map(|(language, _)| language)
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
    fn debian_only_patches_are_recognised_and_tasks_split_stably() {
        let debian =
            "Description: Use production environment\nForwarded: not-needed\n---\n--- a/x.rb\n";
        let upstream =
            "Subject: Fix a leak\nOrigin: upstream\n---\n--- a/x.rb\n+Forwarded: not-needed\n";
        assert!(is_debian_only(debian));
        assert!(!is_debian_only(upstream));
        let splits: Vec<Split> = (0..100)
            .map(|i| Split::of(&format!("pkg/{i}.patch")))
            .collect();
        let tuning = splits.iter().filter(|s| **s == Split::Tuning).count();
        assert!((30..=70).contains(&tuning), "{tuning}");
        assert!(
            splits
                .iter()
                .zip(0..)
                .all(|(s, i)| Split::of(&format!("pkg/{i}.patch")) == *s)
        );
        let answer: BTreeSet<String> = ["a.py", "b.py", "c.c"].map(String::from).into();
        assert_eq!(language_of(&answer), Some("python"));
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
