//! A unified diff of two texts, for the changes a command made to tracked files (the agent
//! turns them into edits). Line-based: common ends trimmed, then a longest common subsequence
//! over the middle (bounded; a middle too large to compare is shown as replaced whole).

use std::fmt::Write as _;

/// Cells of the comparison table beyond which the middle is shown as replaced.
const MAX_CELLS: usize = 4_000_000;
const CONTEXT: usize = 3;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Keep,
    Remove,
    Add,
}

/// The diff of `old` to `new` with `---`/`+++` headers naming `path`; `None` when either is
/// not UTF-8 text or they are equal.
pub fn unified(path: &str, old: &[u8], new: &[u8]) -> Option<String> {
    let old = std::str::from_utf8(old).ok()?;
    let new = std::str::from_utf8(new).ok()?;
    if old == new || old.contains('\0') || new.contains('\0') {
        return None;
    }
    let a: Vec<&str> = old.split_inclusive('\n').collect();
    let b: Vec<&str> = new.split_inclusive('\n').collect();
    let script = edit_script(&a, &b);
    let mut out = format!("--- a/{path}\n+++ b/{path}\n");
    // Group the script into hunks: changes with up to CONTEXT kept lines around them.
    let changed: Vec<usize> = (0..script.len())
        .filter(|&i| script[i] != Op::Keep)
        .collect();
    let mut i = 0;
    while i < changed.len() {
        let start = changed[i].saturating_sub(CONTEXT);
        let mut end = changed[i];
        while i < changed.len() && changed[i] <= end + 2 * CONTEXT + 1 {
            end = changed[i];
            i += 1;
        }
        let end = (end + CONTEXT + 1).min(script.len());
        let (mut ai, mut bi) = (0, 0);
        for op in &script[..start] {
            match op {
                Op::Keep => {
                    ai += 1;
                    bi += 1;
                }
                Op::Remove => ai += 1,
                Op::Add => bi += 1,
            }
        }
        let count = |skip| script[start..end].iter().filter(|&&op| op != skip).count();
        let (a_len, b_len) = (count(Op::Add), count(Op::Remove));
        let _ = writeln!(
            out,
            "@@ -{},{a_len} +{},{b_len} @@",
            ai + usize::from(a_len > 0),
            bi + usize::from(b_len > 0)
        );
        for op in &script[start..end] {
            let (mark, line) = match op {
                Op::Keep => {
                    ai += 1;
                    bi += 1;
                    (' ', a[ai - 1])
                }
                Op::Remove => {
                    ai += 1;
                    ('-', a[ai - 1])
                }
                Op::Add => {
                    bi += 1;
                    ('+', b[bi - 1])
                }
            };
            out.push(mark);
            out.push_str(line);
            if !line.ends_with('\n') {
                out.push_str("\n\\ No newline at end of file\n");
            }
        }
    }
    Some(out)
}

fn edit_script(a: &[&str], b: &[&str]) -> Vec<Op> {
    let prefix = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let suffix = a[prefix..]
        .iter()
        .rev()
        .zip(b[prefix..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let (ma, mb) = (&a[prefix..a.len() - suffix], &b[prefix..b.len() - suffix]);
    let mut script = vec![Op::Keep; prefix];
    if ma.len() * mb.len() > MAX_CELLS {
        script.extend(std::iter::repeat_n(Op::Remove, ma.len()));
        script.extend(std::iter::repeat_n(Op::Add, mb.len()));
    } else {
        // lcs[i][j]: the longest common subsequence of ma[i..] and mb[j..].
        let width = mb.len() + 1;
        let mut lcs = vec![0u32; (ma.len() + 1) * width];
        for i in (0..ma.len()).rev() {
            for j in (0..mb.len()).rev() {
                lcs[i * width + j] = if ma[i] == mb[j] {
                    lcs[(i + 1) * width + j + 1] + 1
                } else {
                    lcs[(i + 1) * width + j].max(lcs[i * width + j + 1])
                };
            }
        }
        let (mut i, mut j) = (0, 0);
        while i < ma.len() || j < mb.len() {
            if i < ma.len() && j < mb.len() && ma[i] == mb[j] {
                script.push(Op::Keep);
                i += 1;
                j += 1;
            } else if i < ma.len()
                && (j == mb.len() || lcs[(i + 1) * width + j] >= lcs[i * width + j + 1])
            {
                script.push(Op::Remove);
                i += 1;
            } else {
                script.push(Op::Add);
                j += 1;
            }
        }
    }
    script.extend(std::iter::repeat_n(Op::Keep, suffix));
    script
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_changed_line_makes_one_hunk_with_context() {
        let old = "a\nb\nc\nd\ne\nf\ng\nh\n";
        let new = "a\nb\nc\nd\nE\nf\ng\nh\n";
        let diff = unified("x.txt", old.as_bytes(), new.as_bytes()).unwrap();
        assert_eq!(
            diff,
            "--- a/x.txt\n+++ b/x.txt\n@@ -2,7 +2,7 @@\n b\n c\n d\n-e\n+E\n f\n g\n h\n"
        );
    }

    #[test]
    fn additions_at_the_end_and_missing_newlines_are_marked() {
        let diff = unified("y", b"a", b"a\nb").unwrap();
        assert_eq!(
            diff,
            "--- a/y\n+++ b/y\n@@ -1,1 +1,2 @@\n-a\n\\ No newline at end of file\n+a\n+b\n\\ No newline at end of file\n"
        );
        assert_eq!(unified("z", b"same", b"same"), None);
        assert_eq!(unified("bin", b"\xff", b"x"), None);
    }
}
