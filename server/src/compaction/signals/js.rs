//! jest, vitest and tsc: failing tests from `●` blocks (jest) or `FAIL file > suite > test`
//! blocks (vitest), with the `✕`/`×` listing as a fallback; the assertion that failed and the
//! first workspace frame; the runner's counts; and TypeScript diagnostics in both the plain
//! `file(line,col): error TS…` and the `--pretty` `file:line:col - error TS…` forms.

use std::sync::LazyLock;

use regex::Regex;

use super::{Diagnostic, Failure, Format, Severity, Signals, Workspace, clip, re};

/// jest's failure block header: `  ● suite › test`.
static JEST_BLOCK: LazyLock<Regex> = LazyLock::new(|| re(r"^\s*● (.+)$"));
/// vitest's failure block header: ` FAIL  src/x.test.ts > suite > test`.
static VITEST_BLOCK: LazyLock<Regex> = LazyLock::new(|| re(r"^\s*FAIL\s+(\S+ > .+?)\s*$"));
/// jest's `FAIL src/x.test.ts` file line.
static FAIL_FILE: LazyLock<Regex> = LazyLock::new(|| re(r"^\s*FAIL\s+(\S+)\s*$"));
/// The listing's failed entries: jest `✕ adds (3 ms)`, vitest `× suite > adds 3ms`.
static CROSS: LazyLock<Regex> =
    LazyLock::new(|| re(r"^\s*[✕×]\s+(.+?)(?:\s+\(?\d+(?:\.\d+)?\s?m?s\)?)?\s*$"));
/// Stack frames: `at fn (src/x.ts:3:5)`, `at src/x.ts:3:5`, vitest's `❯ src/x.ts:3:5`.
static FRAME: LazyLock<Regex> = LazyLock::new(|| {
    re(r"^\s*(?:at (?:.*? \()?|❯ (?:.*? )?)((?:file://)?[^\s()]+?):(\d+):(\d+)\)?\s*$")
});
static EXPECTED: LazyLock<Regex> = LazyLock::new(|| re(r"^\s*(Expected|Received)[^:]*:\s+(.+)$"));
/// jest `Tests:       2 failed, 5 passed, 7 total`; vitest `      Tests  2 failed | 5 passed (7)`.
static TOTALS: LazyLock<Regex> = LazyLock::new(|| re(r"^\s*Tests:?\s+(\d+ .*)$"));
static COUNT: LazyLock<Regex> = LazyLock::new(|| re(r"(\d+) (passed|failed)"));
/// Where a failure block ends: the next block, a vitest rule, jest's closing summary.
static BLOCK_END: LazyLock<Regex> =
    LazyLock::new(|| re(r"^\s*(●|FAIL\s|PASS\s|⎯|Test Suites:|Test Files|Tests:?\s+\d)"));

pub(super) fn parse_tests(text: &str, format: Format, workspace: &Workspace) -> Signals {
    let mut signals = Signals::new(format);
    let lines: Vec<&str> = text.lines().collect();
    let mut listed: Vec<Failure> = Vec::new();
    let mut blocks: Vec<Failure> = Vec::new();
    let mut last_file: Option<String> = None;
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        i += 1;
        let header = VITEST_BLOCK
            .captures(line)
            .or_else(|| JEST_BLOCK.captures(line))
            .map(|caps| caps[1].trim().to_owned());
        if let Some(mut name) = header {
            if name == "Test suite failed to run"
                && let Some(file) = &last_file
            {
                name = format!("{file}: {name}");
            }
            let mut failure = Failure {
                name,
                message: None,
                location: None,
            };
            let mut details = Vec::new();
            while i < lines.len() && !BLOCK_END.is_match(lines[i]) {
                let body = lines[i];
                i += 1;
                if let Some(caps) = FRAME.captures(body) {
                    if let Some(location) = workspace.location(&caps[1], &caps[2], Some(&caps[3])) {
                        signals.push_frame(location.clone());
                        failure.location.get_or_insert(location);
                    }
                } else if let Some(caps) = EXPECTED.captures(body) {
                    details.push(format!("{}: {}", &caps[1], caps[2].trim()));
                } else if failure.message.is_none() && is_message(body) {
                    failure.message = Some(body.trim().to_owned());
                }
            }
            if let Some(message) = &mut failure.message {
                for detail in details {
                    message.push_str(&format!(" {detail}"));
                }
                *message = clip(message);
            }
            blocks.push(failure);
            continue;
        }
        if let Some(caps) = FAIL_FILE.captures(line) {
            last_file = Some(caps[1].to_owned());
        } else if let Some(caps) = CROSS.captures(line) {
            let mut failure = Failure {
                name: caps[1].to_owned(),
                message: None,
                location: None,
            };
            // vitest puts the error under the entry: `→ expected 4 to be 3`.
            if let Some(next) = lines.get(i).and_then(|l| l.trim().strip_prefix("→ ")) {
                failure.message = Some(clip(next));
            }
            listed.push(failure);
        } else if let Some(caps) = TOTALS.captures(line) {
            for count in COUNT.captures_iter(&caps[1]) {
                let n = count[1].parse().ok();
                match &count[2] {
                    "passed" => signals.passed = n,
                    _ => signals.failed = n,
                }
            }
            if signals.passed.is_some() && signals.failed.is_none() {
                signals.failed = Some(0);
            }
        }
    }
    // The blocks are the complete record; the listing names failures whose block was cut
    // (or a run with a reporter that prints none).
    for failure in listed {
        let covered = blocks.iter().any(|block| {
            block.name == failure.name
                || block.name.ends_with(&format!(" > {}", failure.name))
                || block.name.replace(" › ", " ").ends_with(&failure.name)
        });
        if !covered {
            blocks.push(failure);
        }
    }
    signals.failures = blocks;
    signals
}

/// Whether a line of a failure block can be its message: not blank, not a code frame
/// (`> 11 |`, `  12|`), not a diff marker header.
fn is_message(line: &str) -> bool {
    let trimmed = line.trim();
    !trimmed.is_empty()
        && !trimmed.starts_with('>')
        && !trimmed.starts_with('|')
        && !trimmed.starts_with("- Expected")
        && !trimmed.starts_with("+ Received")
        && !trimmed
            .split('|')
            .next()
            .is_some_and(|gutter| trimmed.contains('|') && gutter.trim().parse::<u32>().is_ok())
}

static TSC_PLAIN: LazyLock<Regex> =
    LazyLock::new(|| re(r"^(.+?)\((\d+),(\d+)\): (error|warning) (TS\d+): (.+)$"));
static TSC_PRETTY: LazyLock<Regex> =
    LazyLock::new(|| re(r"^(.+?):(\d+):(\d+) - (error|warning) (TS\d+): (.+)$"));
static TSC_GLOBAL: LazyLock<Regex> = LazyLock::new(|| re(r"^(error|warning) (TS\d+): (.+)$"));

pub(super) fn parse_tsc(text: &str, workspace: &Workspace) -> Signals {
    let mut signals = Signals::new(Format::Tsc);
    for line in text.lines() {
        let (severity, code, message, location) = if let Some(caps) = TSC_PLAIN
            .captures(line)
            .or_else(|| TSC_PRETTY.captures(line))
        {
            (
                caps[4].to_owned(),
                caps[5].to_owned(),
                caps[6].to_owned(),
                workspace.location(&caps[1], &caps[2], Some(&caps[3])),
            )
        } else if let Some(caps) = TSC_GLOBAL.captures(line) {
            (
                caps[1].to_owned(),
                caps[2].to_owned(),
                caps[3].to_owned(),
                None,
            )
        } else {
            continue;
        };
        signals.diagnostics.push(Diagnostic {
            severity: if severity == "error" {
                Severity::Error
            } else {
                Severity::Warning
            },
            code: Some(code),
            message: clip(&message),
            location,
        });
    }
    signals
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::super::{extract, failure_summary as summary};
    use super::*;

    #[test]
    fn jest_blocks_give_name_assertion_and_workspace_frame() {
        let text = include_str!("../fixtures/jest.txt");
        let signals = extract(text, None, Some(Path::new("/home/dev/web")));
        assert_eq!(signals.format, Format::Jest);
        assert_eq!((signals.passed, signals.failed), (Some(9), Some(2)));
        assert_eq!(
            summary(&signals),
            [
                (
                    "cart › total › applies the discount once".into(),
                    "expect(received).toBe(expected) // Object.is equality Expected: 85 Received: 72.25".into(),
                    "src/cart.test.ts:24:34".into()
                ),
                (
                    "cart › total › is zero for an empty cart".into(),
                    "TypeError: Cannot read properties of undefined (reading 'price')".into(),
                    "src/cart.ts:31:22".into()
                ),
                (
                    "src/api.test.ts: Test suite failed to run".into(),
                    "src/api.test.ts:3:25 - error TS2307: Cannot find module './client' or its corresponding type declarations.".into(),
                    String::new()
                ),
            ]
        );
        assert!(
            signals
                .frames
                .iter()
                .all(|f| !f.path.contains("node_modules"))
        );
    }

    #[test]
    fn vitest_blocks_and_listing_agree() {
        let text = include_str!("../fixtures/vitest.txt");
        let signals = extract(text, None, Some(Path::new("/home/dev/web")));
        assert_eq!(signals.format, Format::Vitest);
        assert_eq!((signals.passed, signals.failed), (Some(6), Some(2)));
        assert_eq!(
            summary(&signals),
            [
                (
                    "src/format.test.ts > formatPrice > rounds half up".into(),
                    "AssertionError: expected '1.24' to be '1.25' // Object.is equality".into(),
                    "src/format.test.ts:14:30".into()
                ),
                (
                    "src/format.test.ts > formatPrice > handles negatives".into(),
                    "Error: negative prices are not supported".into(),
                    "src/format.ts:9:11".into()
                ),
            ]
        );
    }

    #[test]
    fn a_listing_alone_still_names_the_failures() {
        let text = "FAIL src/a.test.js\n  sum\n    ✓ adds (2 ms)\n    ✕ subtracts (4 ms)\n\nTests:       1 failed, 1 passed, 2 total\n";
        let signals = extract(text, None, None);
        assert_eq!(signals.format, Format::Jest);
        assert_eq!(
            summary(&signals),
            [("subtracts".into(), String::new(), String::new())]
        );
    }

    #[test]
    fn tsc_diagnostics_in_both_forms() {
        for fixture in [
            include_str!("../fixtures/tsc.txt"),
            include_str!("../fixtures/tsc_pretty.txt"),
        ] {
            let signals = extract(fixture, None, None);
            assert_eq!(signals.format, Format::Tsc);
            let rendered: Vec<String> = signals
                .diagnostics
                .iter()
                .map(super::super::render_diagnostic)
                .collect();
            assert_eq!(
                rendered,
                [
                    "TS2322 src/cart.ts:12:5 Type 'string' is not assignable to type 'number'.",
                    "TS2339 src/cart.ts:31:22 Property 'prise' does not exist on type 'Item'. Did you mean 'price'?",
                    "TS7006 src/api/client.ts:8:24 Parameter 'body' implicitly has an 'any' type.",
                ],
                "{fixture}"
            );
            assert_eq!(
                signals.keys(),
                [
                    "src/cart.ts:12:5",
                    "src/cart.ts:31:22",
                    "src/api/client.ts:8:24"
                ]
            );
        }
    }
}
