//! `go test` (plain and `-v`) and `go build`/`go vet` diagnostics: `--- FAIL` tests and
//! subtests with the first `file_test.go:N:` line logged for each, panics with the goroutine
//! frames in the workspace, `file.go:line:col: message` compile errors, and pass/fail counts
//! when the run printed them.

use std::collections::HashMap;
use std::sync::LazyLock;

use regex::Regex;

use super::{Diagnostic, Failure, Format, Location, Severity, Signals, Workspace, clip, re};

static RUN: LazyLock<Regex> = LazyLock::new(|| re(r"^=== (?:RUN|CONT|PAUSE|NAME)\s+(\S+)"));
static RESULT: LazyLock<Regex> =
    LazyLock::new(|| re(r"^\s*--- (FAIL|PASS|SKIP): (\S+) \([\d.]+s\)"));
/// What `t.Error`/`t.Fatal` log: `    calc_test.go:12: message`.
static LOG: LazyLock<Regex> = LazyLock::new(|| re(r"^\s+(\S+\.go):(\d+): (.+)$"));
static PANIC: LazyLock<Regex> = LazyLock::new(|| re(r"^panic: (.+?)(?: \[recovered\])?$"));
static GOROUTINE_FRAME: LazyLock<Regex> =
    LazyLock::new(|| re(r"^\t(\S+\.go):(\d+)(?: \+0x[0-9a-f]+)?$"));
static COMPILE: LazyLock<Regex> = LazyLock::new(|| re(r"^(\S+\.go):(\d+):(\d+): (.+)$"));

pub(super) fn parse(text: &str, workspace: &Workspace) -> Signals {
    let mut signals = Signals::new(Format::GoTest);
    // The first line each test logged, by test name.
    let mut logs: HashMap<String, (String, Option<Location>)> = HashMap::new();
    let mut current: Option<String> = None;
    let mut failed: Vec<String> = Vec::new();
    let (mut passes, mut saw_run) = (0u32, false);
    let mut panic: Option<String> = None;
    for line in text.lines() {
        if let Some(caps) = RUN.captures(line) {
            saw_run = true;
            current = Some(caps[1].to_owned());
        } else if let Some(caps) = RESULT.captures(line) {
            match &caps[1] {
                "FAIL" => failed.push(caps[2].to_owned()),
                "PASS" => passes += 1,
                _ => {}
            }
            // Without -v, a test's log lines follow its result line.
            current = Some(caps[2].to_owned());
        } else if let Some(caps) = LOG.captures(line) {
            if let Some(test) = &current {
                let location = workspace.location(&caps[1], &caps[2], None);
                logs.entry(test.clone())
                    .or_insert_with(|| (clip(&caps[3]), location));
            }
        } else if let Some(caps) = PANIC.captures(line) {
            panic.get_or_insert_with(|| clip(&caps[1]));
        } else if let Some(caps) = GOROUTINE_FRAME.captures(line) {
            if let Some(location) = workspace.location(&caps[1], &caps[2], None) {
                signals.push_frame(location);
            }
        } else if let Some(caps) = COMPILE.captures(line) {
            signals.diagnostics.push(Diagnostic {
                severity: Severity::Error,
                code: None,
                message: clip(&caps[4]),
                location: workspace.location(&caps[1], &caps[2], Some(&caps[3])),
            });
        }
    }
    for name in failed {
        let (message, location) = match logs.remove(&name) {
            Some((message, location)) => (Some(message), location),
            None => (None, None),
        };
        signals.failures.push(Failure {
            name,
            message,
            location,
        });
    }
    // A panic kills the test binary: it belongs to the last test that failed without saying
    // why, and it is where the first workspace frame points.
    if let Some(message) = panic {
        let frame = signals.frames.first().cloned();
        match signals
            .failures
            .iter_mut()
            .rev()
            .find(|f| f.message.is_none())
        {
            Some(failure) => {
                failure.message = Some(format!("panic: {message}"));
                failure.location = frame;
            }
            None => signals.errors.push(format!("panic: {message}")),
        }
    }
    if saw_run || passes > 0 {
        signals.passed = Some(passes);
        signals.failed = Some(signals.failures.len() as u32);
    }
    signals
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::super::{extract, failure_summary};
    use super::*;

    #[test]
    fn go_test_failures_subtests_and_panics() {
        let text = include_str!("../fixtures/go_test.txt");
        let signals = extract(text, None, Some(Path::new("/home/dev/calc")));
        assert_eq!(signals.format, Format::GoTest);
        assert_eq!((signals.passed, signals.failed), (Some(3), Some(4)));
        assert_eq!(
            failure_summary(&signals),
            [
                (
                    "TestAdd".into(),
                    "Add(11, 2) = 14, want 13".into(),
                    "calc_test.go:12".into()
                ),
                ("TestTable".into(), String::new(), String::new()),
                (
                    "TestTable/negative".into(),
                    "Abs(-3) = -3, want 3".into(),
                    "calc_test.go:31".into()
                ),
                (
                    "TestIndex".into(),
                    "panic: runtime error: index out of range [5] with length 3".into(),
                    "calc.go:20".into()
                ),
            ]
        );
        let frames: Vec<String> = signals.frames.iter().map(Location::to_string).collect();
        assert_eq!(frames, ["calc.go:20", "calc_test.go:40"]);
    }

    #[test]
    fn go_build_errors_are_diagnostics() {
        let text = include_str!("../fixtures/go_build.txt");
        let signals = extract(text, None, None);
        assert_eq!(signals.format, Format::GoTest);
        assert_eq!(
            signals.keys(),
            ["calc.go:12:9", "calc_test.go:5:2"],
            "{:?}",
            signals.diagnostics
        );
        assert_eq!(signals.diagnostics[0].message, "undefined: roundHalfUp");
        assert!(signals.failures.is_empty());
    }
}
