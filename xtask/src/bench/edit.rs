//! `cargo xtask bench edit`: the edit engine's accuracy on an offline corpus of real source
//! files (the cargo registry's sources, Python's standard library, the system C headers), for
//! wright and for two baselines implemented here from their published descriptions.
//!
//! Each case is a real region of a real file, a real-looking change to it (a renamed
//! identifier, an inserted line, a deleted line) written as a model would write it in one of
//! the four formats, with the drift models add: trailing whitespace, lost or added
//! indentation, typographic punctuation, elided middles, wrong udiff line numbers; plus edits
//! that must be refused: snippets that occur more than once, and old text with a hallucinated
//! or stale line. The outcome of each tool is applied-correctly (the file is exactly the
//! intended result), refused, or misapplied (anything else written). The corpus is sampled
//! deterministically, so a run is reproducible on the same machine.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context;
use wright::edit::{FileOp, Format, MemoryFiles, format, plan::plan};

/// splitmix64: a small deterministic generator (no dependency, stable across platforms).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Category {
    Exact,
    TrailingWhitespace,
    IndentationLost,
    IndentationAdded,
    Typographic,
    ElidedMiddle,
    WrongLineNumbers,
    Ambiguous,
    Hallucinated,
}

impl Category {
    const ALL: [Self; 9] = [
        Self::Exact,
        Self::TrailingWhitespace,
        Self::IndentationLost,
        Self::IndentationAdded,
        Self::Typographic,
        Self::ElidedMiddle,
        Self::WrongLineNumbers,
        Self::Ambiguous,
        Self::Hallucinated,
    ];

    fn name(self) -> &'static str {
        match self {
            Self::Exact => "exact copy",
            Self::TrailingWhitespace => "trailing whitespace",
            Self::IndentationLost => "indentation lost",
            Self::IndentationAdded => "indentation added",
            Self::Typographic => "typographic quotes and dashes",
            Self::ElidedMiddle => "elided middle",
            Self::WrongLineNumbers => "wrong udiff line numbers",
            Self::Ambiguous => "ambiguous snippet",
            Self::Hallucinated => "hallucinated or stale line",
        }
    }

    fn recoverable(self) -> bool {
        !matches!(self, Self::Ambiguous | Self::Hallucinated)
    }
}

/// One edit and what applying it should give.
struct Case {
    category: Category,
    format: Format,
    text: String,
    edit: String,
    /// The intended result: for recoverable edits, the only right outcome; for ambiguous ones,
    /// the occurrence the model meant (a tool that happens to pick it is not wrong).
    expected: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    Applied,
    Refused,
    Misapplied,
}

#[derive(Default, Clone, Copy)]
struct Tally {
    applied: usize,
    refused: usize,
    misapplied: usize,
}

impl Tally {
    fn add(&mut self, outcome: Outcome) {
        match outcome {
            Outcome::Applied => self.applied += 1,
            Outcome::Refused => self.refused += 1,
            Outcome::Misapplied => self.misapplied += 1,
        }
    }

    fn total(&self) -> usize {
        self.applied + self.refused + self.misapplied
    }
}

const TOOLS: [&str; 3] = ["wright", "first exact match", "first fuzzy match ≥ 0.8"];

/// Runs the benchmark; returns its section of `docs/benchmarks.md` (which `bench` records).
pub fn run(args: &[String]) -> anyhow::Result<String> {
    let mut per_source = 120;
    // Print each case wright does not get right, to study it.
    let show = std::env::var_os("WRIGHT_BENCH_SHOW").is_some();
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "--files" => {
                per_source = args.get(i + 1).context("--files N")?.parse()?;
                i += 1;
            }
            other => anyhow::bail!("unknown argument {other:?}; expected --files N"),
        }
        i += 1;
    }
    let home = std::env::var("HOME").unwrap_or_default();
    let python = std::fs::read_dir("/usr/lib")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let name = p
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            name.starts_with("python3.") && p.is_dir()
        })
        .max();
    let sources: Vec<(&str, PathBuf, &str)> = [
        Some((
            "cargo registry (Rust)",
            PathBuf::from(&home).join(".cargo/registry/src"),
            "rs",
        )),
        python.map(|p| ("Python standard library", p, "py")),
        Some(("system C headers", PathBuf::from("/usr/include"), "h")),
    ]
    .into_iter()
    .flatten()
    .collect();

    let mut rng = Rng(0x5EED);
    let mut cases = Vec::new();
    let mut corpus_lines = Vec::new();
    let mut corpus_note = Vec::new();
    for (name, dir, extension) in &sources {
        let files = sample_files(dir, extension, per_source);
        corpus_note.push(format!(
            "{} files from {} (`{}`)",
            files.len(),
            name,
            dir.display()
        ));
        for (_, text) in &files {
            corpus_lines.extend(
                text.lines()
                    .filter(|l| l.trim().len() > 12)
                    .take(3)
                    .map(str::to_owned),
            );
            let comment = if *extension == "py" { "#" } else { "//" };
            for category in Category::ALL {
                cases.extend(make_case(category, text, comment, &corpus_lines, &mut rng));
            }
        }
    }

    let mut tallies: BTreeMap<Category, [Tally; 3]> = BTreeMap::new();
    for case in &cases {
        let outcomes = [wright(case), first_exact(case), first_fuzzy(case)];
        let expected = if case.category.recoverable() {
            Outcome::Applied
        } else {
            Outcome::Refused
        };
        if show && outcomes[0] != expected {
            println!(
                "--- {} ({}): wright {:?}\n{}",
                case.category.name(),
                case.format,
                outcomes[0],
                case.edit
            );
        }
        let row = tallies.entry(case.category).or_default();
        for (tally, outcome) in row.iter_mut().zip(outcomes) {
            tally.add(outcome);
        }
    }
    Ok(render(&tallies, &corpus_note))
}

/// Up to `count` readable, LF-only UTF-8 files of 40 to 3,000 lines with `extension` under
/// `dir`, spread evenly over the sorted list of all of them.
fn sample_files(dir: &Path, extension: &str, count: usize) -> Vec<(PathBuf, String)> {
    let mut all = Vec::new();
    collect(dir, extension, &mut all, 0);
    all.sort();
    let step = (all.len() / (count * 2).max(1)).max(1);
    let mut chosen = Vec::new();
    for path in all.iter().step_by(step) {
        if chosen.len() == count {
            break;
        }
        let Ok(text) = std::fs::read_to_string(path) else {
            continue;
        };
        let lines = text.lines().count();
        if (40..=3000).contains(&lines)
            && !text.contains('\r')
            && text.ends_with('\n')
            && !text.starts_with('\u{feff}')
        {
            chosen.push((path.clone(), text));
        }
    }
    chosen
}

fn collect(dir: &Path, extension: &str, out: &mut Vec<PathBuf>, depth: usize) {
    if depth > 8 {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() {
            collect(&path, extension, out, depth + 1);
        } else if kind.is_file() && path.extension().is_some_and(|e| e == extension) {
            out.push(path);
        }
    }
}

/// The loosest comparison wright's ladder makes: no surrounding whitespace, ASCII punctuation.
fn loose(line: &str) -> String {
    wright::edit::text::ascii_text(line.trim())
}

fn occurrences(lines: &[&str], region: &[&str]) -> Vec<usize> {
    let region: Vec<String> = region.iter().map(|l| loose(l)).collect();
    let loose_lines: Vec<String> = lines.iter().map(|l| loose(l)).collect();
    (0..=lines.len().saturating_sub(region.len()))
        .filter(|&i| loose_lines[i..i + region.len()] == region[..])
        .collect()
}

/// A word worth renaming: an identifier of 3 or more characters.
fn rename(line: &str) -> Option<String> {
    let bytes = line.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i].is_ascii_alphabetic() || bytes[i] == b'_' {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            if i - start >= 3 {
                return Some(format!(
                    "{}{}_v2{}",
                    &line[..start],
                    &line[start..i],
                    &line[i..]
                ));
            }
        } else {
            i += 1;
        }
    }
    None
}

/// The intended change to a region: rename an identifier in a line, insert a line, or
/// delete one. Returns the new lines.
fn change(region: &[&str], comment: &str, rng: &mut Rng) -> Option<Vec<String>> {
    let mut new: Vec<String> = region.iter().map(|l| l.to_string()).collect();
    let candidates: Vec<usize> = (0..region.len())
        .filter(|&i| !region[i].trim().is_empty())
        .collect();
    let at = *candidates.get(rng.below(candidates.len()))?;
    match rng.below(3) {
        0 => new[at] = rename(region[at])?,
        1 => {
            let indent = &region[at][..region[at].len() - region[at].trim_start().len()];
            new.insert(at + 1, format!("{indent}{comment} checked by the caller"));
        }
        _ if region.len() > 2 => {
            new.remove(at);
        }
        _ => new[at] = rename(region[at])?,
    }
    Some(new)
}

/// Text with the lines `start..end` replaced.
fn splice(lines: &[&str], start: usize, end: usize, new: &[String]) -> String {
    let mut out = String::new();
    for l in &lines[..start] {
        out.push_str(l);
        out.push('\n');
    }
    for l in new {
        out.push_str(l);
        out.push('\n');
    }
    for l in &lines[end..] {
        out.push_str(l);
        out.push('\n');
    }
    out
}

fn render_edit(format: Format, old: &[String], new: &[String], line: usize) -> String {
    let block = |prefix: &str, lines: &[String]| -> String {
        lines.iter().map(|l| format!("{prefix}{l}\n")).collect()
    };
    match format {
        Format::Patch => format!("*** Begin Patch\n*** Update File: f.src\n@@\n{}{}*** End Patch\n", block("-", old), block("+", new)),
        Format::SearchReplace => {
            format!("f.src\n```\n<<<<<<< SEARCH\n{}=======\n{}>>>>>>> REPLACE\n```\n", block("", old), block("", new))
        }
        Format::Udiff => format!(
            "--- a/f.src\n+++ b/f.src\n@@ -{line},{} +{line},{} @@\n{}{}",
            old.len(),
            new.len(),
            block("-", old),
            block("+", new)
        ),
        Format::Json | Format::Auto => serde_json::json!({"path": "f.src", "old_string": block("", old), "new_string": block("", new)}).to_string(),
    }
}

const FORMATS: [Format; 4] = [
    Format::Patch,
    Format::SearchReplace,
    Format::Udiff,
    Format::Json,
];

fn typographic(line: &str) -> String {
    let mut open = true;
    line.chars()
        .map(|c| match c {
            '"' => {
                open = !open;
                if open { '\u{201D}' } else { '\u{201C}' }
            }
            '\'' => '\u{2019}',
            other => other,
        })
        .collect::<String>()
        .replace(" - ", " \u{2013} ")
        .replace(" -- ", " \u{2014} ")
}

fn make_case(
    category: Category,
    text: &str,
    comment: &str,
    corpus: &[String],
    rng: &mut Rng,
) -> Option<Case> {
    let lines: Vec<&str> = text.lines().collect();
    let format = match category {
        Category::WrongLineNumbers => Format::Udiff,
        _ => FORMATS[rng.below(4)],
    };
    for _attempt in 0..40 {
        let len = match category {
            Category::ElidedMiddle => 10 + rng.below(10),
            Category::Ambiguous => 1 + rng.below(2),
            _ => 3 + rng.below(5),
        };
        if lines.len() < len + 2 {
            return None;
        }
        let start = rng.below(lines.len() - len - 1);
        let end = start + len;
        let region = &lines[start..end];
        if region.iter().all(|l| l.trim().is_empty())
            || region
                .iter()
                .any(|l| wright::edit::text::is_elision_marker(l))
        {
            continue;
        }
        let found = occurrences(&lines, region);
        if category == Category::Ambiguous {
            // Ambiguous as written: the snippet occurs byte for byte more than once.
            let exact: Vec<usize> = (0..=lines.len() - len)
                .filter(|&i| lines[i..i + len] == *region)
                .collect();
            if exact.len() < 2 || region.iter().all(|l| l.trim().len() < 4) {
                continue;
            }
        } else if category != Category::ElidedMiddle && found.len() != 1 {
            continue;
        }
        let Some(new) = change(region, comment, rng) else {
            continue;
        };
        let old: Vec<String> = region.iter().map(|l| l.to_string()).collect();
        let (edit_old, edit_new, expected) = match category {
            Category::Exact | Category::WrongLineNumbers => (
                old.clone(),
                new.clone(),
                Some(splice(&lines, start, end, &new)),
            ),
            Category::TrailingWhitespace => {
                let pad = |l: &String| {
                    if l.is_empty() {
                        l.clone()
                    } else {
                        format!("{l}  ")
                    }
                };
                // Lines copied from the file drift; the changed line is the model's own.
                let copied: Vec<String> = new
                    .iter()
                    .map(|l| if old.contains(l) { pad(l) } else { l.clone() })
                    .collect();
                (
                    old.iter().map(pad).collect(),
                    copied,
                    Some(splice(&lines, start, end, &new)),
                )
            }
            Category::IndentationLost | Category::IndentationAdded => {
                let shift = |l: &String, lost: usize| -> String {
                    if l.trim().is_empty() {
                        String::new()
                    } else if category == Category::IndentationLost {
                        l[lost.min(l.len() - l.trim_start().len())..].to_owned()
                    } else {
                        format!("    {l}")
                    }
                };
                let common = old
                    .iter()
                    .chain(&new)
                    .filter(|l| !l.trim().is_empty())
                    .map(|l| l.len() - l.trim_start().len())
                    .min()
                    .unwrap_or(0);
                if category == Category::IndentationLost && common == 0 {
                    continue;
                }
                let o = old.iter().map(|l| shift(l, common)).collect();
                let n = new.iter().map(|l| shift(l, common)).collect();
                (o, n, Some(splice(&lines, start, end, &new)))
            }
            Category::Typographic => {
                if !region
                    .iter()
                    .any(|l| l.contains(['"', '\'']) || l.contains(" - "))
                {
                    continue;
                }
                let o = old.iter().map(|l| typographic(l)).collect();
                let n = new.iter().map(|l| typographic(l)).collect();
                (o, n, Some(splice(&lines, start, end, &new)))
            }
            Category::ElidedMiddle => {
                // The change is in the first two lines; the middle is elided in both texts.
                let head: Vec<&str> = region[..2].to_vec();
                let tail: Vec<&str> = region[len - 2..].to_vec();
                if occurrences(&lines, &head).len() != 1
                    || occurrences(&lines[start + 2..], &tail).len() != 1
                {
                    continue;
                }
                if head.iter().chain(&tail).all(|l| l.trim().is_empty()) {
                    continue;
                }
                let Some(changed_head) = change(&head, comment, rng) else {
                    continue;
                };
                let indent = &region[2][..region[2].len() - region[2].trim_start().len()];
                let marker = format!("{indent}{comment} ... existing code ...");
                let mut o: Vec<String> = head.iter().map(|l| l.to_string()).collect();
                o.push(marker.clone());
                o.extend(tail.iter().map(|l| l.to_string()));
                let mut n = changed_head.clone();
                n.push(marker);
                n.extend(tail.iter().map(|l| l.to_string()));
                let mut intended = changed_head;
                intended.extend(region[2..].iter().map(|l| l.to_string()));
                (o, n, Some(splice(&lines, start, end, &intended)))
            }
            Category::Ambiguous => {
                let exact: Vec<usize> = (0..=lines.len() - len)
                    .filter(|&i| lines[i..i + len] == *region)
                    .collect();
                let meant = exact[rng.below(exact.len())];
                let meant_end = meant + len;
                (
                    old.clone(),
                    new.clone(),
                    Some(splice(&lines, meant, meant_end, &new)),
                )
            }
            Category::Hallucinated => {
                let mut o = old.clone();
                let at = 1 + rng.below(len - 1);
                let indent = &region[at][..region[at].len() - region[at].trim_start().len()];
                if rng.below(2) == 0 && !corpus.is_empty() {
                    // A line invented from elsewhere.
                    o.insert(
                        at,
                        format!("{indent}{}", corpus[rng.below(corpus.len())].trim()),
                    );
                } else {
                    // A stale line: the file no longer says this.
                    let Some(stale) = rename(region[at]) else {
                        continue;
                    };
                    o[at] = stale;
                }
                if !occurrences(&lines, &o.iter().map(String::as_str).collect::<Vec<_>>())
                    .is_empty()
                {
                    continue;
                }
                let n = o.clone();
                let Some(n) = change(
                    &n.iter().map(String::as_str).collect::<Vec<_>>(),
                    comment,
                    rng,
                ) else {
                    continue;
                };
                (o, n, None)
            }
        };
        let line = if category == Category::WrongLineNumbers {
            let offset = 5 + rng.below(200);
            if rng.below(2) == 0 {
                start + 1 + offset
            } else {
                (start + 1).saturating_sub(offset).max(1)
            }
        } else {
            start + 1
        };
        return Some(Case {
            category,
            format,
            text: text.to_owned(),
            edit: render_edit(format, &edit_old, &edit_new, line),
            expected,
        });
    }
    None
}

fn judge(case: &Case, result: Option<String>) -> Outcome {
    match result {
        None => Outcome::Refused,
        Some(text) if Some(&text) == case.expected.as_ref() => Outcome::Applied,
        Some(_) => Outcome::Misapplied,
    }
}

fn wright(case: &Case) -> Outcome {
    let mut files = MemoryFiles::new([("f.src", case.text.as_str())]);
    let result = format::parse(&case.edit, case.format)
        .map_err(wright::edit::EditError::from)
        .and_then(|ops| plan(&ops, &files))
        .and_then(|planned| files.apply(&planned));
    let text = result
        .ok()
        .map(|()| files.get("f.src").unwrap_or_default().to_owned());
    judge(case, text)
}

/// The hunks of a case, as wright's parser reads them: the baselines differ only in where
/// they put the edit.
fn hunks(case: &Case) -> Vec<(String, String)> {
    match format::parse(&case.edit, case.format) {
        Ok(ops) => ops
            .into_iter()
            .flat_map(|op| match op {
                FileOp::Update { hunks, .. } => hunks.into_iter().map(|h| (h.old, h.new)).collect(),
                _ => Vec::new(),
            })
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// Baseline 1: the first exact occurrence of the old text is replaced (as Codex, Cline and
/// Aider's exact path do).
fn first_exact(case: &Case) -> Outcome {
    let mut text = case.text.clone();
    let hunks = hunks(case);
    if hunks.is_empty() {
        return Outcome::Refused;
    }
    for (old, new) in hunks {
        let Some(at) = text.find(&old) else {
            return judge(case, None);
        };
        text.replace_range(at..at + old.len(), &new);
    }
    judge(case, Some(text))
}

/// Baseline 2: the exact match if there is one, else the first window of as many lines whose
/// similarity to the old text (Dice coefficient of character bigrams) is at least 0.8; the
/// new text is written as given.
fn first_fuzzy(case: &Case) -> Outcome {
    let mut text = case.text.clone();
    let hunks = hunks(case);
    if hunks.is_empty() {
        return Outcome::Refused;
    }
    for (old, new) in hunks {
        if let Some(at) = text.find(&old) {
            text.replace_range(at..at + old.len(), &new);
            continue;
        }
        let lines: Vec<&str> = text.split_inclusive('\n').collect();
        let count = old.split_inclusive('\n').count().max(1);
        // Bigram counts of each line (with its newline); a window's are their sum, which
        // leaves out only the bigrams spanning two lines, for the window and the target alike.
        let line_bigrams: Vec<HashMap<(char, char), usize>> =
            lines.iter().map(|l| counts(l)).collect();
        let target: HashMap<(char, char), usize> = old
            .split_inclusive('\n')
            .map(counts)
            .fold(HashMap::new(), merge);
        let target_total: usize = target.values().sum();
        let mut found = None;
        for start in 0..=lines.len().saturating_sub(count) {
            let window = &line_bigrams[start..(start + count).min(lines.len())];
            let total: usize = window.iter().flat_map(|m| m.values()).sum();
            let common: usize = target
                .iter()
                .map(|(b, n)| (*n).min(window.iter().map(|m| m.get(b).copied().unwrap_or(0)).sum()))
                .sum();
            if total + target_total > 0
                && 2.0 * common as f64 / (total + target_total) as f64 >= 0.8
            {
                let len: usize = lines[start..(start + count).min(lines.len())]
                    .iter()
                    .map(|l| l.len())
                    .sum();
                found = Some((start, len));
                break;
            }
        }
        let Some((start, len)) = found else {
            return judge(case, None);
        };
        let offset: usize = lines[..start].iter().map(|l| l.len()).sum();
        text.replace_range(offset..offset + len, &new);
    }
    judge(case, Some(text))
}

fn counts(text: &str) -> HashMap<(char, char), usize> {
    let chars: Vec<char> = text.chars().collect();
    let mut counts = HashMap::new();
    for w in chars.windows(2) {
        *counts.entry((w[0], w[1])).or_insert(0) += 1;
    }
    counts
}

fn merge(
    mut a: HashMap<(char, char), usize>,
    b: HashMap<(char, char), usize>,
) -> HashMap<(char, char), usize> {
    for (k, v) in b {
        *a.entry(k).or_insert(0) += v;
    }
    a
}

fn percent(part: usize, whole: usize) -> String {
    if whole == 0 {
        return "–".to_owned();
    }
    format!("{:.1}%", 100.0 * part as f64 / whole as f64)
}

fn render(tallies: &BTreeMap<Category, [Tally; 3]>, corpus: &[String]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Deterministic sample (the same files and cases on the same machine). Corpus: {}.\n",
        corpus.join("; ")
    );
    let _ = writeln!(
        out,
        "Each cell: applied correctly / refused / misapplied. \"first exact match\" replaces the first \
         exact occurrence of the old text; \"first fuzzy match ≥ 0.8\" falls back to the first window \
         of lines whose character-bigram Dice similarity to the old text is at least 0.8. All three \
         read the edit with wright's parsers, so they differ only in locating and writing. The baselines \
         write the new text as the model gave it, so a right location with the model's drift \
         (its whitespace, indentation or quotes in lines it did not mean to change) counts as \
         misapplied: the file is not what was intended.\n"
    );
    let _ = writeln!(out, "| category | cases | {} |", TOOLS.join(" | "));
    let _ = writeln!(out, "|---|---:|---:|---:|---:|");
    let mut recoverable = [Tally::default(); 3];
    let mut refusable = [Tally::default(); 3];
    for (category, row) in tallies {
        let cells: Vec<String> = row
            .iter()
            .map(|t| format!("{} / {} / {}", t.applied, t.refused, t.misapplied))
            .collect();
        let _ = writeln!(
            out,
            "| {} | {} | {} |",
            category.name(),
            row[0].total(),
            cells.join(" | ")
        );
        let sum = if category.recoverable() {
            &mut recoverable
        } else {
            &mut refusable
        };
        for (s, t) in sum.iter_mut().zip(row) {
            s.applied += t.applied;
            s.refused += t.refused;
            s.misapplied += t.misapplied;
        }
    }
    let _ = writeln!(out);
    let _ = writeln!(out, "| summary | {} |", TOOLS.join(" | "));
    let _ = writeln!(out, "|---|---:|---:|---:|");
    let row = |f: &dyn Fn(&Tally) -> String| {
        recoverable
            .iter()
            .zip(&refusable)
            .map(|(r, x)| {
                f(&Tally {
                    applied: r.applied + x.applied,
                    refused: r.refused + x.refused,
                    misapplied: r.misapplied + x.misapplied,
                })
            })
            .collect::<Vec<_>>()
            .join(" | ")
    };
    let _ = writeln!(
        out,
        "| misapplied (all {} cases; target 0) | {} |",
        recoverable[0].total() + refusable[0].total(),
        row(&|t| t.misapplied.to_string())
    );
    let _ = writeln!(
        out,
        "| recoverable edits applied ({} cases; target ≥ 97%) | {} |",
        recoverable[0].total(),
        recoverable
            .iter()
            .map(|t| percent(t.applied, t.total()))
            .collect::<Vec<_>>()
            .join(" | ")
    );
    let _ = writeln!(
        out,
        "| ambiguous or not-found edits refused ({} cases; target 100%) | {} |",
        refusable[0].total(),
        refusable
            .iter()
            .map(|t| percent(t.refused, t.total()))
            .collect::<Vec<_>>()
            .join(" | ")
    );
    let w_rec = &recoverable[0];
    let w_ref = &refusable[0];
    let met = |ok: bool| if ok { "met" } else { "NOT met" };
    let _ = writeln!(
        out,
        "\nTargets for wright: zero misapplies {}; ≥ 97% of recoverable edits applied {}; 100% of \
         ambiguous or not-found edits refused {}.",
        met(w_rec.misapplied + w_ref.misapplied == 0),
        met(w_rec.applied as f64 >= 0.97 * w_rec.total() as f64),
        met(w_ref.refused == w_ref.total())
    );
    out
}
