//! A change between two texts as line hunks (contiguous changed regions, no context), and
//! applying some of them: to the text they were computed against, or to a later version of
//! it whose own changes stay clear of them (a hunk the later changes touch is refused, never
//! forced). Review per hunk is built on these.

use std::ops::Range;

/// One changed region: lines `old` of the first text became lines `new` of the second
/// (0-based line indexes; an empty `old` is an insertion before `old.start`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LineHunk {
    pub old: Range<usize>,
    pub new: Range<usize>,
}

/// Past this many differences the diff gives up on precision: one hunk covers what lies
/// between the common start and end (the work grows with the square of it).
const MAX_DIFFERENCES: usize = 4000;

/// The lines of `text`, each with its line end.
pub fn lines(text: &str) -> Vec<&str> {
    text.split_inclusive('\n').collect()
}

/// The hunks that turn `before` into `after`, in order; consecutive hunks are separated by
/// at least one unchanged line.
pub fn line_hunks(before: &str, after: &str) -> Vec<LineHunk> {
    let (a, b) = (lines(before), lines(after));
    let prefix = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let suffix = a[prefix..]
        .iter()
        .rev()
        .zip(b[prefix..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let (a_mid, b_mid) = (&a[prefix..a.len() - suffix], &b[prefix..b.len() - suffix]);
    // Past the bound, no line is matched: one hunk covers the middle.
    let matched = common_lines(a_mid, b_mid).unwrap_or_default();
    // Hunks are the gaps between matched lines.
    let mut hunks = Vec::new();
    let (mut x, mut y) = (0, 0);
    for (mx, my) in matched
        .into_iter()
        .chain(std::iter::once((a_mid.len(), b_mid.len())))
    {
        if mx > x || my > y {
            hunks.push(LineHunk {
                old: prefix + x..prefix + mx,
                new: prefix + y..prefix + my,
            });
        }
        (x, y) = (mx + 1, my + 1);
    }
    hunks
}

/// The pairs of line indexes a shortest edit script keeps (Myers' greedy algorithm), in
/// order; `None` past [`MAX_DIFFERENCES`].
fn common_lines(a: &[&str], b: &[&str]) -> Option<Vec<(usize, usize)>> {
    let (n, m) = (a.len() as isize, b.len() as isize);
    let max = (n + m) as usize;
    let offset = max as isize + 1;
    let mut v = vec![0isize; 2 * max + 3];
    // trace[d]: v for diagonals -d..=d as it was when round d began.
    let mut trace: Vec<Vec<isize>> = Vec::new();
    let mut done = None;
    'rounds: for d in 0..=max.min(MAX_DIFFERENCES) as isize {
        trace.push(v[(offset - d) as usize..=(offset + d) as usize].to_vec());
        for k in (-d..=d).step_by(2) {
            let down =
                k == -d || (k != d && v[(offset + k - 1) as usize] < v[(offset + k + 1) as usize]);
            let mut x = if down {
                v[(offset + k + 1) as usize]
            } else {
                v[(offset + k - 1) as usize] + 1
            };
            let mut y = x - k;
            while x < n && y < m && a[x as usize] == b[y as usize] {
                x += 1;
                y += 1;
            }
            v[(offset + k) as usize] = x;
            if x >= n && y >= m {
                done = Some(d);
                break 'rounds;
            }
        }
    }
    let last = done?;
    let mut pairs = Vec::new();
    let (mut x, mut y) = (n, m);
    for d in (1..=last).rev() {
        let before = &trace[d as usize];
        let at = |k: isize| before[(k + d) as usize];
        let k = x - y;
        let prev_k = if k == -d || (k != d && at(k - 1) < at(k + 1)) {
            k + 1
        } else {
            k - 1
        };
        let prev_x = at(prev_k);
        let prev_y = prev_x - prev_k;
        while x > prev_x && y > prev_y {
            x -= 1;
            y -= 1;
            pairs.push((x as usize, y as usize));
        }
        (x, y) = (prev_x, prev_y);
    }
    while x > 0 && y > 0 {
        x -= 1;
        y -= 1;
        pairs.push((x as usize, y as usize));
    }
    pairs.reverse();
    Some(pairs)
}

/// A hunk could not be placed: the later text changed its lines (or right next to them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conflict {
    /// Index of the hunk in the list given.
    pub hunk: usize,
}

/// Applies `chosen` hunks of `before` → `after` to `current`, a later version of `before`:
/// each goes where `current`'s own changes moved its lines. `Err` names the first hunk whose
/// lines (or a line next to them) `current` changed.
pub fn apply_to(
    before: &str,
    after: &str,
    current: &str,
    chosen: &[LineHunk],
) -> Result<String, Conflict> {
    let (placed, conflicts) = place(before, current, chosen);
    if let Some(&hunk) = conflicts.first() {
        return Err(Conflict { hunk });
    }
    Ok(splice(after, current, chosen, &placed))
}

/// [`apply_to`], leaving out the hunks that conflict: the text, and the indexes left out.
pub fn apply_what_fits(
    before: &str,
    after: &str,
    current: &str,
    chosen: &[LineHunk],
) -> (String, Vec<usize>) {
    let (placed, conflicts) = place(before, current, chosen);
    (splice(after, current, chosen, &placed), conflicts)
}

/// Where each hunk's old lines are in `current` (`None`: they changed), and the conflicts.
fn place(
    before: &str,
    current: &str,
    chosen: &[LineHunk],
) -> (Vec<Option<Range<usize>>>, Vec<usize>) {
    let theirs = if before == current {
        Vec::new()
    } else {
        line_hunks(before, current)
    };
    let mut conflicts = Vec::new();
    let placed = chosen
        .iter()
        .enumerate()
        .map(|(index, hunk)| {
            // Touching counts: a change right next to a hunk may be part of the same edit.
            let touched = theirs
                .iter()
                .any(|t| t.old.start <= hunk.old.end && hunk.old.start <= t.old.end);
            if touched {
                conflicts.push(index);
                return None;
            }
            let shift: isize = theirs
                .iter()
                .filter(|t| t.old.end <= hunk.old.start)
                .map(|t| t.new.len() as isize - t.old.len() as isize)
                .sum();
            let start = (hunk.old.start as isize + shift) as usize;
            Some(start..start + hunk.old.len())
        })
        .collect();
    (placed, conflicts)
}

fn splice(
    after: &str,
    current: &str,
    chosen: &[LineHunk],
    placed: &[Option<Range<usize>>],
) -> String {
    let new_lines = lines(after);
    let mut out = lines(current)
        .into_iter()
        .map(str::to_owned)
        .collect::<Vec<_>>();
    let mut order: Vec<usize> = (0..chosen.len()).filter(|&i| placed[i].is_some()).collect();
    // From the end, so earlier positions hold.
    order.sort_by_key(|&i| std::cmp::Reverse(placed[i].as_ref().map_or(0, |r| r.start)));
    for i in order {
        let range = placed[i].clone().unwrap_or_default();
        let replacement = new_lines[chosen[i].new.clone()]
            .iter()
            .map(|line| (*line).to_owned());
        out.splice(range, replacement);
    }
    out.concat()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn apply_all(before: &str, after: &str) -> String {
        apply_to(before, after, before, &line_hunks(before, after)).unwrap()
    }

    #[test]
    fn hunks_are_the_changed_regions_and_applying_them_all_gives_the_after_text() {
        let before = "a\nb\nc\nd\ne\nf\n";
        let after = "a\nB\nc\nd\ne\nf\ng\n";
        let hunks = line_hunks(before, after);
        assert_eq!(
            hunks,
            [
                LineHunk {
                    old: 1..2,
                    new: 1..2
                },
                LineHunk {
                    old: 6..6,
                    new: 6..7
                }
            ]
        );
        assert_eq!(apply_all(before, after), after);
        for (before, after) in [
            ("", "x\n"),
            ("x\n", ""),
            ("a\nb", "a\nc"),
            ("1\n2\n3\n", "3\n2\n1\n"),
            ("a\nb\nc\n", "x\na\ny\nc\nz\n"),
        ] {
            assert_eq!(apply_all(before, after), after, "{before:?} -> {after:?}");
        }
    }

    #[test]
    fn one_hunk_of_two_applies_alone_and_moves_with_the_users_lines() {
        let before = "a\nb\nc\nd\ne\nf\n";
        let after = "a\nB\nc\nd\ne\nF\n";
        let hunks = line_hunks(before, after);
        assert_eq!(
            apply_to(before, after, before, &hunks[1..]).unwrap(),
            "a\nb\nc\nd\ne\nF\n"
        );
        // The user added two lines at the top since: the hunk still lands on `f`.
        let current = "0\n00\na\nb\nc\nd\ne\nf\n";
        assert_eq!(
            apply_to(before, after, current, &hunks[1..]).unwrap(),
            "0\n00\na\nb\nc\nd\ne\nF\n"
        );
        // The user changed the line the first hunk replaces: refused, not forced.
        let current = "a\nbee\nc\nd\ne\nf\n";
        assert_eq!(
            apply_to(before, after, current, &hunks[..1]),
            Err(Conflict { hunk: 0 })
        );
        let (text, left_out) = apply_what_fits(before, after, current, &hunks);
        assert_eq!((text.as_str(), left_out), ("a\nbee\nc\nd\ne\nF\n", vec![0]));
    }
}
