//! The matching ladder (`docs/design.md`, "Locating an edit"): where a hunk's old text is in a file,
//! and the text that results from replacing it.
//!
//! Tiers run in order and each runs only if the ones before found nothing; every tier requires
//! exactly one match in the region it searches, so two or more is a refusal, never a guess.
//! Hints only narrow the region: a patch's `@@` context line and the hunk order (a cursor
//! after the previous hunk) are tried first, then the whole file, with the same rule. Lines
//! the edit keeps (its context) are written back as the file had them, so a match found by
//! ignoring whitespace or punctuation changes only the lines the edit changes.

use std::collections::HashMap;
use std::fmt;

use super::format::Hunk;
use super::text::{Lines, ascii_chars, ascii_text, indentation, is_elision_marker, split_lines};

/// A rung of the ladder.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Tier {
    Exact = 1,
    TrailingWhitespace,
    Whitespace,
    Punctuation,
    Elision,
}

impl Tier {
    const LINE_TIERS: [Self; 4] = [
        Self::Exact,
        Self::TrailingWhitespace,
        Self::Whitespace,
        Self::Punctuation,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::Exact => "exact",
            Self::TrailingWhitespace => "ignoring trailing whitespace",
            Self::Whitespace => "ignoring indentation",
            Self::Punctuation => "normalising punctuation",
            Self::Elision => "elision",
        }
    }

    /// Whether line `file` matches edit line `old` (whose forms are precomputed) at this tier.
    fn matches(self, file: &str, old: &OldLine) -> bool {
        match self {
            Self::Exact => file == old.raw,
            Self::TrailingWhitespace => file.trim_end() == old.raw.trim_end(),
            Self::Whitespace => file.trim() == old.raw.trim(),
            Self::Punctuation | Self::Elision => file
                .trim()
                .chars()
                .flat_map(ascii_chars)
                .eq(old.punctuation.chars()),
        }
    }
}

impl fmt::Display for Tier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "tier {} ({})", *self as u8, self.name())
    }
}

struct OldLine<'a> {
    raw: &'a str,
    punctuation: String,
}

impl<'a> OldLine<'a> {
    fn new(raw: &'a str) -> Self {
        Self {
            raw,
            punctuation: ascii_text(raw.trim()),
        }
    }
}

/// Why a hunk could not be placed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LocateError {
    /// No tier found the old text; the closest lines, if any look alike.
    NotFound {
        tier: Tier,
        near_miss: Option<NearMiss>,
    },
    /// A tier found the old text more than once (1-based start lines).
    Ambiguous { tier: Tier, candidates: Vec<usize> },
    /// The old text was found, but the edit cannot be carried out as written.
    Unusable { tier: Tier, reason: String },
}

/// The file's lines that look most like the old text, with a line diff against it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NearMiss {
    /// 1-based first line.
    pub line: usize,
    /// `-` lines are the edit's, `+` lines the file's, ` ` lines agree.
    pub diff: String,
}

/// A hunk placed and carried out.
#[derive(Debug)]
pub struct Located {
    pub text: String,
    pub tier: Tier,
    /// 1-based first line of the match in the text before.
    pub line: usize,
    /// Line index (0-based) in the new text just after the replacement: where the next hunk
    /// of an ordered format (patch, udiff, search-replace) is searched first; 0 for `json`.
    pub cursor: usize,
}

/// Where the replacement of a substring match at `start` begins when the match follows only
/// indentation on its line and the new text puts nothing on that line (it is empty or starts
/// a new line): at the line's start, so the edit leaves no whitespace-only line behind (an
/// `old_string` copied without its first line's indentation, then deleted).
fn swallowed_indentation(text: &str, start: usize, new: &str) -> Option<usize> {
    let line_start = text[..start].rfind('\n').map_or(0, |i| i + 1);
    let indentation = &text[line_start..start];
    let nothing_on_the_line = new.is_empty() || new.starts_with('\n') || new.starts_with("\r\n");
    (!indentation.is_empty() && indentation.trim().is_empty() && nothing_on_the_line)
        .then_some(line_start)
}

/// Carries out `hunk` on `text` (no BOM), searching from line `cursor` first.
pub fn apply_hunk(text: &str, hunk: &Hunk, cursor: usize) -> Result<Located, LocateError> {
    let lines = Lines::new(text);
    let eol = lines.eol();
    if hunk.old.is_empty() {
        return insert(text, &lines, hunk);
    }
    if hunk.substring {
        let old = with_eol(&hunk.old, eol);
        let starts: Vec<usize> = text.match_indices(old.as_str()).map(|(i, _)| i).collect();
        let new = with_eol(&hunk.new, eol);
        if let [start] = starts[..]
            && let Some(from) = swallowed_indentation(text, start, &new)
        {
            return Ok(Located {
                text: [&text[..from], &new, &text[start + old.len()..]].concat(),
                tier: Tier::Exact,
                line: lines.line_of(start),
                cursor: 0,
            });
        }
        if starts.len() == 1 || (hunk.replace_all && !starts.is_empty()) {
            // A str_replace call has no order among its siblings: no cursor.
            return Ok(Located {
                text: text.replacen(old.as_str(), &new, starts.len()),
                tier: Tier::Exact,
                line: lines.line_of(starts[0]),
                cursor: 0,
            });
        }
        if starts.len() > 1 {
            return Err(LocateError::Ambiguous {
                tier: Tier::Exact,
                candidates: starts.iter().map(|&s| lines.line_of(s)).collect(),
            });
        }
    }
    let old_raw = split_lines(&hunk.old);
    let new_raw = split_lines(&hunk.new);
    let old: Vec<OldLine> = old_raw.iter().map(|l| OldLine::new(l)).collect();
    let mut regions = Vec::new();
    if let Some(context) = &hunk.context {
        let context = OldLine::new(context);
        let found = Tier::LINE_TIERS
            .iter()
            .find_map(|tier| (cursor..lines.len()).find(|&i| tier.matches(lines.get(i), &context)));
        regions.extend(found);
    }
    regions.extend([cursor.min(lines.len()), 0]);
    regions.dedup();
    let elided = old_raw.iter().any(|l| is_elision_marker(l));
    let mut last_tier = Tier::Punctuation;
    for &lo in &regions {
        let span = lo..lines.len();
        for tier in Tier::LINE_TIERS {
            if tier == Tier::Exact && hunk.substring {
                continue; // the substring search above was a superset
            }
            let mut starts = find(&lines, &old, tier, span.clone());
            if hunk.at_end {
                starts.retain(|&s| s + old.len() == lines.len());
            }
            if starts.len() > 1 && hunk.replace_all {
                starts = non_overlapping(starts, old.len());
            }
            match starts.len() {
                0 => continue,
                1 => {}
                _ if hunk.replace_all => {}
                _ => {
                    return Err(LocateError::Ambiguous {
                        tier,
                        candidates: starts.iter().map(|s| s + 1).collect(),
                    });
                }
            }
            let matches: Vec<Match> = starts
                .iter()
                .map(|&s| Match::contiguous(s, old.len(), tier))
                .collect();
            return replace(text, &lines, hunk, &old_raw, &new_raw, &matches);
        }
        if elided {
            last_tier = Tier::Elision;
            if let Some(found) = locate_elided(&lines, &old, &old_raw, hunk.at_end, span)? {
                return replace(text, &lines, hunk, &old_raw, &new_raw, &[found]);
            }
        }
    }
    // Blank lines at the edges that both texts share are often padding the model added: the
    // hunk without them changes the same lines (and must still match exactly once).
    if let Some(trimmed) = without_blank_edges(&old_raw, &new_raw, hunk) {
        match apply_hunk(text, &trimmed, cursor) {
            Err(LocateError::NotFound { .. }) => {}
            other => return other,
        }
    }
    let plain: Vec<&OldLine> = old.iter().filter(|l| !is_elision_marker(l.raw)).collect();
    Err(LocateError::NotFound {
        tier: last_tier,
        near_miss: near_miss(&lines, &plain),
    })
}

/// The hunk without the blank lines that both its old and new text start or end with.
fn without_blank_edges(old: &[&str], new: &[&str], hunk: &Hunk) -> Option<Hunk> {
    let blank =
        |lines: &mut dyn Iterator<Item = &&str>| lines.take_while(|l| l.trim().is_empty()).count();
    let lead = blank(&mut old.iter()).min(blank(&mut new.iter()));
    let trail = blank(&mut old[lead..].iter().rev())
        .min(blank(&mut new[lead.min(new.len())..].iter().rev()));
    if lead + trail == 0 || lead + trail >= old.len() {
        return None;
    }
    let join = |lines: &[&str]| lines.iter().map(|l| format!("{l}\n")).collect::<String>();
    Some(Hunk {
        old: join(&old[lead..old.len() - trail]),
        new: join(&new[lead..new.len() - trail]),
        ..hunk.clone()
    })
}

/// Text from an edit with its line terminators converted to the file's.
fn with_eol(text: &str, eol: &str) -> String {
    if eol == "\n" {
        text.to_owned()
    } else {
        text.replace("\r\n", "\n").replace('\n', eol)
    }
}

/// Start lines in `span` where `old` matches at `tier`.
fn find(lines: &Lines, old: &[OldLine], tier: Tier, span: std::ops::Range<usize>) -> Vec<usize> {
    if old.is_empty() || span.end < old.len() {
        return Vec::new();
    }
    (span.start..=span.end - old.len())
        .filter(|&i| {
            old.iter()
                .enumerate()
                .all(|(j, o)| tier.matches(lines.get(i + j), o))
        })
        .collect()
}

fn non_overlapping(starts: Vec<usize>, len: usize) -> Vec<usize> {
    let mut kept: Vec<usize> = Vec::new();
    for s in starts {
        if kept.last().is_none_or(|&k| s >= k + len) {
            kept.push(s);
        }
    }
    kept
}

/// Where each line of the edit's old text (markers excluded) is in the file.
#[derive(Debug)]
struct Match {
    /// For each old line: the file line it matched, `None` for an elision marker.
    lines: Vec<Option<usize>>,
    start: usize,
    /// One past the last matched file line.
    end: usize,
    tier: Tier,
}

impl Match {
    fn contiguous(start: usize, len: usize, tier: Tier) -> Self {
        Self {
            lines: (start..start + len).map(Some).collect(),
            start,
            end: start + len,
            tier,
        }
    }
}

/// Tier 5: the old text's elision markers match any run of lines; each piece between them
/// must match exactly once (the first piece in the region, later ones after the piece before).
fn locate_elided(
    lines: &Lines,
    old: &[OldLine],
    old_raw: &[&str],
    at_end: bool,
    span: std::ops::Range<usize>,
) -> Result<Option<Match>, LocateError> {
    let mut matched = vec![None; old.len()];
    let mut from = span.start;
    let mut first = None;
    let pieces: Vec<std::ops::Range<usize>> = pieces(old_raw);
    for (k, piece) in pieces.iter().enumerate() {
        let last = k + 1 == pieces.len();
        let mut found = None;
        for tier in Tier::LINE_TIERS {
            let mut starts = find(lines, &old[piece.clone()], tier, from..span.end);
            if last && at_end {
                starts.retain(|&s| s + piece.len() == lines.len());
            }
            match starts[..] {
                [] => continue,
                [start] => {
                    found = Some(start);
                    break;
                }
                _ => {
                    return Err(LocateError::Ambiguous {
                        tier: Tier::Elision,
                        candidates: starts.iter().map(|s| s + 1).collect(),
                    });
                }
            }
        }
        let Some(start) = found else {
            return Ok(None);
        };
        first.get_or_insert(start);
        for (j, old_index) in piece.clone().enumerate() {
            matched[old_index] = Some(start + j);
        }
        from = start + piece.len();
    }
    Ok(first.map(|start| Match {
        lines: matched,
        start,
        end: from,
        tier: Tier::Elision,
    }))
}

/// The runs of non-marker lines, as index ranges.
fn pieces(raw: &[&str]) -> Vec<std::ops::Range<usize>> {
    let mut pieces = Vec::new();
    let mut start = 0;
    for (i, line) in raw.iter().enumerate() {
        if is_elision_marker(line) {
            if i > start {
                pieces.push(start..i);
            }
            start = i + 1;
        }
    }
    if raw.len() > start {
        pieces.push(start..raw.len());
    }
    pieces
}

/// How the edit's indentation maps to the file's, found from the lines that matched.
#[derive(Debug, PartialEq, Eq)]
enum Reindent {
    /// The file has this much more.
    Add(String),
    /// The file has this much less.
    Remove(String),
}

impl Reindent {
    fn found(pairs: &[(&str, &str)]) -> Option<Self> {
        let &(old, file) = pairs.first()?;
        if let Some(extra) = file.strip_suffix(old)
            && pairs.iter().all(|(o, f)| f.strip_suffix(o) == Some(extra))
        {
            return Some(Self::Add(extra.to_owned()));
        }
        let extra = old.strip_suffix(file)?;
        pairs
            .iter()
            .all(|(o, f)| o.strip_suffix(f) == Some(extra))
            .then(|| Self::Remove(extra.to_owned()))
    }

    fn apply(&self, line: &str) -> String {
        if line.trim().is_empty() {
            return String::new();
        }
        match self {
            Self::Add(extra) => format!("{extra}{line}"),
            Self::Remove(extra) => line
                .strip_prefix(extra.as_str())
                .unwrap_or_else(|| line.trim_start())
                .to_owned(),
        }
    }
}

/// Writes the replacement for each match into the text.
fn replace(
    text: &str,
    lines: &Lines,
    hunk: &Hunk,
    old_raw: &[&str],
    new_raw: &[&str],
    matches: &[Match],
) -> Result<Located, LocateError> {
    let eol = lines.eol();
    let tier = matches[0].tier;
    let new_markers = new_raw.iter().filter(|l| is_elision_marker(l)).count();
    let old_markers = old_raw.iter().filter(|l| is_elision_marker(l)).count();
    if tier == Tier::Elision && new_markers != old_markers {
        return Err(LocateError::Unusable {
            tier,
            reason: format!(
                "the old text elides {old_markers} run(s) of lines with `...` markers but the \
                 new text has {new_markers}; repeat each marker in the new text where the elided \
                 lines belong, or spell the lines out"
            ),
        });
    }
    let kept = kept_lines(old_raw, new_raw);
    let marker_gaps = marker_gaps(old_raw);
    let mut result = String::with_capacity(text.len() + hunk.new.len());
    let mut done = 0;
    let mut line = 0;
    let mut cursor = 0;
    for m in matches {
        let mut pairs = Vec::new();
        let mut punctuation = HashMap::new();
        for (j, file) in m.lines.iter().enumerate() {
            let (Some(file), false) = (file, old_raw[j].trim().is_empty()) else {
                continue;
            };
            let file = lines.get(*file);
            pairs.push((indentation(old_raw[j]), indentation(file)));
            if m.tier >= Tier::Punctuation {
                witness_punctuation(old_raw[j].trim(), file.trim(), &mut punctuation);
            }
        }
        let reindent = if m.tier >= Tier::Whitespace {
            match Reindent::found(&pairs) {
                Some(reindent) => Some(reindent),
                None => {
                    return Err(LocateError::Unusable {
                        tier: m.tier,
                        reason: "the old text's lines are indented inconsistently with the \
                                 file's (not by one common amount), so the new text cannot be \
                                 re-indented safely; copy the lines with their indentation"
                            .to_owned(),
                    });
                }
            }
        } else {
            None
        };
        let mut replacement = String::new();
        let mut marker = 0;
        let gaps = gaps(m);
        for (k, new) in new_raw.iter().enumerate() {
            if m.tier == Tier::Elision && is_elision_marker(new) {
                // The new text's n-th marker stands for what the old text's n-th marker
                // elided: nothing for a marker before the first or after the last piece.
                if let Some(gap) = marker_gaps.get(marker).copied().flatten().map(|g| &gaps[g]) {
                    replacement.push_str(&text[lines.start(gap.start)..lines.start(gap.end)]);
                }
                marker += 1;
                continue;
            }
            let out = match kept[k].and_then(|j| m.lines[j]) {
                Some(file) if m.tier > Tier::Exact => lines.get(file).to_owned(),
                _ => {
                    let mut out = match &reindent {
                        Some(reindent) => reindent.apply(new),
                        None => (*new).to_owned(),
                    };
                    if m.tier >= Tier::Punctuation {
                        out = out
                            .chars()
                            .map(|c| punctuation.get(&c).cloned().unwrap_or_else(|| c.into()))
                            .collect();
                    }
                    out
                }
            };
            replacement.push_str(&out);
            replacement.push_str(eol);
        }
        let mut start = lines.start(m.start);
        let end = lines.end_with_terminator(m.end - 1);
        if m.end == lines.len() && !lines.ends_with_newline() && !hunk.terminate_last {
            // The file has no final newline; neither does the result.
            if replacement.is_empty() && m.start > 0 {
                start = lines.start(m.start) - eol_before(text, lines.start(m.start));
            } else if let Some(stripped) = replacement.strip_suffix(eol) {
                replacement.truncate(stripped.len());
            }
        }
        result.push_str(&text[done..start]);
        if line == 0 {
            line = m.start + 1;
        }
        result.push_str(&replacement);
        cursor = Lines::new(&result).len();
        done = end;
    }
    result.push_str(&text[done..]);
    Ok(Located {
        text: result,
        tier,
        line,
        cursor: if hunk.substring { 0 } else { cursor },
    })
}

/// For each of the old text's markers, which gap between pieces it stands for: `None` for
/// markers before the first piece or after the last, which elide nothing.
fn marker_gaps(old_raw: &[&str]) -> Vec<Option<usize>> {
    let mut result = Vec::new();
    let mut pending = 0;
    let mut seen_piece = false;
    let mut gap = 0;
    for line in old_raw {
        if is_elision_marker(line) {
            pending += 1;
        } else {
            if pending > 0 {
                result.push(seen_piece.then_some(gap));
                result.extend(std::iter::repeat_n(None, pending - 1));
                gap += usize::from(seen_piece);
                pending = 0;
            }
            seen_piece = true;
        }
    }
    result.extend(std::iter::repeat_n(None, pending));
    result
}

/// Records what each typographic character of the edit's line stands for in the file's line
/// (which it matched once normalised): `“` for `"`, `—` for `--`. Only the edit's non-ASCII
/// characters are recorded, so an ASCII `-` is never turned into a dash.
fn witness_punctuation(old: &str, file: &str, map: &mut HashMap<char, String>) {
    let (old, file): (Vec<char>, Vec<char>) = (old.chars().collect(), file.chars().collect());
    let (mut i, mut j) = (0, 0);
    while i < old.len() && j < file.len() {
        let stands_for: String = ascii_chars(old[i]).collect();
        let width = stands_for.chars().count();
        if old[i] == file[j] {
            j += 1;
        } else if file[j..].iter().take(width).copied().eq(stands_for.chars()) {
            if !old[i].is_ascii() {
                map.insert(old[i], stands_for);
            }
            j += width;
        } else {
            // The file has the typographic character where the edit has ASCII (`—` for `--`).
            let file_stands_for: String = ascii_chars(file[j]).collect();
            i += file_stands_for.chars().count() - 1;
            j += 1;
        }
        i += 1;
    }
}

/// The runs of file lines an elision match skipped, in order.
fn gaps(m: &Match) -> Vec<std::ops::Range<usize>> {
    let mut gaps = Vec::new();
    let mut previous: Option<usize> = None;
    let mut in_gap = false;
    for line in &m.lines {
        match line {
            None => in_gap = true,
            Some(l) => {
                if in_gap && let Some(p) = previous {
                    gaps.push(p + 1..*l);
                }
                in_gap = false;
                previous = Some(*l);
            }
        }
    }
    gaps
}

fn eol_before(text: &str, offset: usize) -> usize {
    if text[..offset].ends_with("\r\n") {
        2
    } else {
        usize::from(text[..offset].ends_with('\n'))
    }
}

/// For each new line, the old line it keeps unchanged (a longest common subsequence of
/// lines, after the common prefix and suffix).
fn kept_lines(old: &[&str], new: &[&str]) -> Vec<Option<usize>> {
    let mut kept = vec![None; new.len()];
    let prefix = old.iter().zip(new).take_while(|(a, b)| a == b).count();
    let suffix = old[prefix..]
        .iter()
        .rev()
        .zip(new[prefix..].iter().rev())
        .take_while(|(a, b)| a == b)
        .count();
    for (i, slot) in kept.iter_mut().enumerate().take(prefix) {
        *slot = Some(i);
    }
    for k in 0..suffix {
        kept[new.len() - 1 - k] = Some(old.len() - 1 - k);
    }
    let (a, b) = (
        &old[prefix..old.len() - suffix],
        &new[prefix..new.len() - suffix],
    );
    // A quadratic table; beyond this size only the prefix and suffix count as kept.
    if a.is_empty() || b.is_empty() || a.len() * b.len() > 250_000 {
        return kept;
    }
    let mut table = vec![vec![0u32; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            table[i][j] = if a[i] == b[j] {
                table[i + 1][j + 1] + 1
            } else {
                table[i + 1][j].max(table[i][j + 1])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        if a[i] == b[j] {
            kept[prefix + j] = Some(prefix + i);
            i += 1;
            j += 1;
        } else if table[i + 1][j] >= table[i][j + 1] {
            i += 1;
        } else {
            j += 1;
        }
    }
    kept
}

/// An empty old text: append (patch, search-replace), fill an empty file, or refuse.
fn insert(text: &str, lines: &Lines, hunk: &Hunk) -> Result<Located, LocateError> {
    let eol = lines.eol();
    let new = with_eol(&hunk.new, eol);
    if text.is_empty() {
        return Ok(Located {
            text: new,
            tier: Tier::Exact,
            line: 1,
            cursor: 0,
        });
    }
    if !hunk.append {
        return Err(LocateError::Unusable {
            tier: Tier::Exact,
            reason: "the old text is empty, so there is nowhere to put the new text; include \
                     the lines around the change in the old text (or write the whole file)"
                .to_owned(),
        });
    }
    let mut result = text.to_owned();
    let terminated = lines.ends_with_newline();
    if !terminated {
        result.push_str(eol);
    }
    result.push_str(&new);
    if !terminated
        && !hunk.terminate_last
        && let Some(stripped) = result.strip_suffix(eol)
    {
        result.truncate(stripped.len());
    }
    let cursor = Lines::new(&result).len();
    Ok(Located {
        text: result,
        tier: Tier::Exact,
        line: lines.len() + 1,
        cursor,
    })
}

/// The window of the file most like `old`, if at least one line in it looks alike.
fn near_miss(lines: &Lines, old: &[&OldLine]) -> Option<NearMiss> {
    if old.is_empty() || lines.is_empty() {
        return None;
    }
    let window = old.len().min(lines.len());
    let cheap = lines.len() * old.len() > 400_000;
    let mut best: Option<(f64, usize)> = None;
    for start in 0..=lines.len() - window {
        let score: f64 = (0..window)
            .map(|j| similarity(lines.get(start + j), old[j], cheap))
            .sum();
        if best.is_none_or(|(b, _)| score > b) {
            best = Some((score, start));
        }
    }
    let (score, start) = best?;
    if score < 0.5 {
        return None;
    }
    let mut diff = String::new();
    for (j, o) in old.iter().enumerate() {
        let file = (j < window).then(|| lines.get(start + j));
        if file == Some(o.raw) {
            diff.push_str(&format!("  {}\n", o.raw));
        } else {
            diff.push_str(&format!("- {}\n", o.raw));
            if let Some(file) = file {
                diff.push_str(&format!("+ {file}\n"));
            }
        }
    }
    Some(NearMiss {
        line: start + 1,
        diff,
    })
}

/// How alike two lines are, from 0 to 1 (Dice coefficient of character bigrams).
fn similarity(file: &str, old: &OldLine, cheap: bool) -> f64 {
    let a = file.trim();
    let b = old.raw.trim();
    if a == b {
        return 1.0;
    }
    if cheap || a.len() < 2 || b.len() < 2 {
        return 0.0;
    }
    let bigrams = |s: &str| {
        let chars: Vec<char> = s.chars().collect();
        let mut pairs: Vec<(char, char)> = chars.windows(2).map(|w| (w[0], w[1])).collect();
        pairs.sort_unstable();
        pairs
    };
    let (x, y) = (bigrams(a), bigrams(b));
    let (mut i, mut j, mut common) = (0, 0, 0);
    while i < x.len() && j < y.len() {
        match x[i].cmp(&y[j]) {
            std::cmp::Ordering::Equal => {
                common += 1;
                i += 1;
                j += 1;
            }
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
        }
    }
    2.0 * common as f64 / (x.len() + y.len()) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines_hunk(old: &str, new: &str) -> Hunk {
        Hunk {
            old: old.into(),
            new: new.into(),
            ..Hunk::default()
        }
    }

    fn apply(text: &str, hunk: &Hunk) -> Result<(String, Tier), LocateError> {
        apply_hunk(text, hunk, 0).map(|l| (l.text, l.tier))
    }

    #[test]
    fn tier_1_exact() {
        let got = apply("a\nb\nc\n", &lines_hunk("b\n", "B\n")).unwrap();
        assert_eq!(got, ("a\nB\nc\n".into(), Tier::Exact));
    }

    #[test]
    fn tier_2_ignores_trailing_whitespace_and_keeps_the_files_context_lines() {
        let file = "fn f() {\n    let x = 1;   \n    x\n}\n";
        let hunk = lines_hunk("    let x = 1;\n    x\n", "    let x = 1;\n    x + 1\n");
        let got = apply(file, &hunk).unwrap();
        assert_eq!(
            got,
            (
                "fn f() {\n    let x = 1;   \n    x + 1\n}\n".into(),
                Tier::TrailingWhitespace
            )
        );
    }

    #[test]
    fn tier_3_reindents_the_replacement_by_the_difference_found() {
        let file = "impl A {\n        fn f() {\n            one();\n        }\n}\n";
        // The model lost the common indentation; its new text is re-indented by 8 spaces.
        let hunk = lines_hunk(
            "fn f() {\n    one();\n}\n",
            "fn f() {\n    one();\n    two();\n}\n",
        );
        let got = apply(file, &hunk).unwrap();
        assert_eq!(
            got,
            (
                "impl A {\n        fn f() {\n            one();\n            two();\n        }\n}\n".into(),
                Tier::Whitespace
            )
        );
        // The model added indentation; the file has tabs: both are undone.
        let file = "\tif x {\n\t\ty();\n\t}\n";
        let hunk = lines_hunk(
            "    \tif x {\n    \t\ty();\n",
            "    \tif x {\n    \t\tz();\n",
        );
        assert_eq!(apply(file, &hunk).unwrap().0, "\tif x {\n\t\tz();\n\t}\n");
    }

    #[test]
    fn tier_3_refuses_indentation_that_differs_unevenly() {
        let file = "a {\n    b\n        c\n}\n";
        let hunk = lines_hunk("a {\nb\nc\n", "a {\nb\nd\n");
        let err = apply(file, &hunk).unwrap_err();
        assert!(
            matches!(&err, LocateError::Unusable { tier: Tier::Whitespace, reason } if reason.contains("indented inconsistently")),
            "{err:?}"
        );
    }

    #[test]
    fn tier_4_normalises_punctuation_and_maps_it_back_in_changed_lines() {
        let file = "say(\"it's\") -- done\nnext\n";
        let hunk = lines_hunk(
            "say(\u{201C}it\u{2019}s\u{201D}) \u{2014} done\n",
            "say(\u{201C}it\u{2019}s here\u{201D}) \u{2014} done!\n",
        );
        let got = apply(file, &hunk).unwrap();
        assert_eq!(
            got,
            (
                "say(\"it's here\") -- done!\nnext\n".into(),
                Tier::Punctuation
            )
        );
        // An ASCII `-` in the edit never becomes a dash.
        let file = "a \u{2014} b\nx - y\n";
        let hunk = lines_hunk("a -- b\nx - y\n", "a -- c\nx - z\n");
        assert_eq!(apply(file, &hunk).unwrap().0, "a -- c\nx - z\n");
    }

    #[test]
    fn tier_5_elision_keeps_the_elided_lines() {
        let file = "fn a() {\n    one();\n    two();\n    three();\n    done()\n}\nfn b() {}\n";
        let hunk = lines_hunk(
            "fn a() {\n    // ... existing code ...\n    done()\n}\n",
            "fn a() {\n    start();\n    // ... existing code ...\n    finish()\n}\n",
        );
        let got = apply(file, &hunk).unwrap();
        assert_eq!(
            got,
            (
                "fn a() {\n    start();\n    one();\n    two();\n    three();\n    finish()\n}\nfn b() {}\n".into(),
                Tier::Elision
            )
        );
    }

    #[test]
    fn tier_5_refuses_a_piece_that_is_not_unique_and_markers_that_do_not_correspond() {
        let file = "fn a() {\n    x();\n}\nfn b() {\n    y();\n}\n";
        let hunk = lines_hunk("fn a() {\n...\n}\n", "fn a() {\n...\n    z();\n}\n");
        let err = apply(file, &hunk).unwrap_err();
        assert_eq!(
            err,
            LocateError::Ambiguous {
                tier: Tier::Elision,
                candidates: vec![3, 6]
            }
        );
        let hunk = lines_hunk("fn a() {\n...\n    x();\n", "fn a() {\n    x();\n");
        let err = apply(file, &hunk).unwrap_err();
        assert!(
            matches!(
                err,
                LocateError::Unusable {
                    tier: Tier::Elision,
                    ..
                }
            ),
            "{err:?}"
        );
    }

    #[test]
    fn two_matches_in_a_tier_are_refused_with_their_lines() {
        let err = apply("x\ny\nx\n", &lines_hunk("x\n", "z\n")).unwrap_err();
        assert_eq!(
            err,
            LocateError::Ambiguous {
                tier: Tier::Exact,
                candidates: vec![1, 3]
            }
        );
        let err = apply("x \ny\nx  \n", &lines_hunk("x\n", "z\n")).unwrap_err();
        assert_eq!(
            err,
            LocateError::Ambiguous {
                tier: Tier::TrailingWhitespace,
                candidates: vec![1, 3]
            }
        );
        // An exact match ends the ladder even if a looser tier would find more.
        let got = apply("x\ny\nx  \n", &lines_hunk("x\n", "z\n")).unwrap();
        assert_eq!(got, ("z\ny\nx  \n".into(), Tier::Exact));
    }

    #[test]
    fn not_found_names_the_closest_lines_with_a_diff() {
        let file = "fn main() {\n    let total = 10;\n    println!(\"{total}\");\n}\n";
        let hunk = lines_hunk("    let totl = 10;\n    println!(\"{total}\");\n", "x\n");
        let err = apply(file, &hunk).unwrap_err();
        let LocateError::NotFound {
            tier: Tier::Punctuation,
            near_miss: Some(miss),
        } = err
        else {
            panic!("{err:?}")
        };
        assert_eq!(miss.line, 2);
        assert_eq!(
            miss.diff,
            "-     let totl = 10;\n+     let total = 10;\n      println!(\"{total}\");\n"
        );
        let err = apply(file, &lines_hunk("zzzz qqqq\n", "x\n")).unwrap_err();
        assert_eq!(
            err,
            LocateError::NotFound {
                tier: Tier::Punctuation,
                near_miss: None
            }
        );
    }

    #[test]
    fn hints_narrow_the_region_but_never_choose_between_matches() {
        let file = "fn a() {\n    v = 1;\n}\nfn b() {\n    v = 1;\n}\n";
        let mut hunk = lines_hunk("    v = 1;\n", "    v = 2;\n");
        hunk.context = Some("fn b() {".into());
        assert_eq!(
            apply(file, &hunk).unwrap().0,
            "fn a() {\n    v = 1;\n}\nfn b() {\n    v = 2;\n}\n"
        );
        hunk.context = Some("fn a() {".into());
        assert!(matches!(
            apply(file, &hunk),
            Err(LocateError::Ambiguous { .. })
        ));
        // The hunk order: searching after the previous hunk's lines first.
        let located = apply_hunk(file, &lines_hunk("    v = 1;\n", "    v = 3;\n"), 3).unwrap();
        assert!(
            located.text.ends_with("fn b() {\n    v = 3;\n}\n"),
            "{}",
            located.text
        );
        // `*** End of File`: the old text must end the file.
        let mut hunk = lines_hunk("    v = 1;\n}\n", "    v = 4;\n}\n");
        hunk.at_end = true;
        assert!(apply(file, &hunk).unwrap().0.ends_with("v = 4;\n}\n"));
        // A udiff line number is never used to choose.
        let mut hunk = lines_hunk("    v = 1;\n", "    v = 5;\n");
        hunk.line_hint = Some(5);
        assert!(matches!(
            apply(file, &hunk),
            Err(LocateError::Ambiguous { .. })
        ));
    }

    #[test]
    fn line_endings_final_newline_and_substrings_are_preserved() {
        let got = apply("a\r\nb\r\nc", &lines_hunk("b\nc\n", "B\nC\n"))
            .unwrap()
            .0;
        assert_eq!(got, "a\r\nB\r\nC");
        let got = apply("a\nb", &lines_hunk("b\n", "")).unwrap().0;
        assert_eq!(got, "a");
        let mut hunk = lines_hunk("b\n", "B\n");
        hunk.terminate_last = true;
        assert_eq!(apply("a\nb", &hunk).unwrap().0, "a\nB\n");
        let substring = Hunk {
            old: "(1)".into(),
            new: "(2)".into(),
            substring: true,
            ..Hunk::default()
        };
        assert_eq!(
            apply("f(1);\ng(3);\n", &substring).unwrap().0,
            "f(2);\ng(3);\n"
        );
        let all = Hunk {
            old: "x".into(),
            new: "y".into(),
            substring: true,
            replace_all: true,
            ..Hunk::default()
        };
        assert_eq!(apply("x+x\nx\n", &all).unwrap().0, "y+y\ny\n");
        let crlf = Hunk {
            old: "a\nb".into(),
            new: "c\nd".into(),
            substring: true,
            ..Hunk::default()
        };
        assert_eq!(apply("a\r\nb\r\n", &crlf).unwrap().0, "c\r\nd\r\n");
        // A deleted line's content, copied without its indentation, takes the indentation
        // with it; a replacement on the same line keeps it.
        let delete = |old: &str, new: &str| Hunk {
            old: old.into(),
            new: new.into(),
            substring: true,
            ..Hunk::default()
        };
        let file = "if x:\n    raise E(\"on '%s'\" % n)\n\n\nnext()\n";
        assert_eq!(
            apply(file, &delete("raise E(\"on '%s'\" % n)\n\n\n", "\n\n"))
                .unwrap()
                .0,
            "if x:\n\n\nnext()\n"
        );
        assert_eq!(
            apply(file, &delete("raise E(\"on '%s'\" % n)\n", ""))
                .unwrap()
                .0,
            "if x:\n\n\nnext()\n"
        );
        assert_eq!(
            apply(file, &delete("raise E(\"on '%s'\" % n)", "pass"))
                .unwrap()
                .0,
            "if x:\n    pass\n\n\nnext()\n"
        );
    }

    #[test]
    fn blank_lines_padding_both_texts_are_not_required() {
        let file = "a\nb\nc\n";
        let got = apply(file, &lines_hunk("\nb\n\n", "\nB\n\n")).unwrap().0;
        assert_eq!(got, "a\nB\nc\n");
        // The hunk without them must still match exactly once.
        let err = apply("b\nx\nb\n", &lines_hunk("\nb\n", "\nB\n")).unwrap_err();
        assert!(matches!(err, LocateError::Ambiguous { .. }), "{err:?}");
    }

    #[test]
    fn an_empty_old_text_appends_fills_or_is_refused() {
        let mut hunk = lines_hunk("", "z\n");
        assert!(matches!(
            apply("a\n", &hunk),
            Err(LocateError::Unusable { .. })
        ));
        assert_eq!(apply("", &hunk).unwrap().0, "z\n");
        hunk.append = true;
        assert_eq!(apply("a\n", &hunk).unwrap().0, "a\nz\n");
        assert_eq!(apply("a", &hunk).unwrap().0, "a\nz");
    }
}
