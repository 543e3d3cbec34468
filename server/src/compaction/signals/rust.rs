//! `cargo test` and rustc diagnostics (`cargo build`, `check`, `clippy`): test results and
//! counts summed over every test binary, panics (old and new formats, with or without the
//! thread id) with their messages, `RUST_BACKTRACE` frames in the workspace, and
//! `error[E…]`/`warning` diagnostics with the location of their `-->` line.

use std::collections::HashMap;
use std::sync::LazyLock;

use regex::Regex;

use super::{Diagnostic, Failure, Format, Location, Severity, Signals, Workspace, clip, re};

static TEST_LINE: LazyLock<Regex> = LazyLock::new(|| re(r"^test (.+?) \.\.\. (ok|FAILED|ignored)"));
static RESULT: LazyLock<Regex> =
    LazyLock::new(|| re(r"^test result: \w+\. (\d+) passed; (\d+) failed;"));
static STDOUT_HEADER: LazyLock<Regex> = LazyLock::new(|| re(r"^---- (.+) std(out|err) ----$"));
/// Rust 1.73 and later: the message follows on the next lines; 1.88 adds the thread id.
static PANIC: LazyLock<Regex> =
    LazyLock::new(|| re(r"^thread '([^']*)'(?: \(\d+\))? panicked at (.+?):(\d+):(\d+):$"));
/// Before 1.73: `panicked at 'message', src/x.rs:3:5`.
static PANIC_OLD: LazyLock<Regex> =
    LazyLock::new(|| re(r"^thread '([^']*)'(?: \(\d+\))? panicked at '(.*)', (.+?):(\d+):(\d+)$"));
static FRAME: LazyLock<Regex> = LazyLock::new(|| re(r"^\s+at (.+?):(\d+):(\d+)$"));
static DIAGNOSTIC: LazyLock<Regex> = LazyLock::new(|| re(r"^(error|warning)(?:\[(\w+)\])?: (.+)$"));
static ARROW: LazyLock<Regex> = LazyLock::new(|| re(r"^\s*--> (.+?):(\d+):(\d+)$"));
/// cargo's closing lines, which repeat what the diagnostics already said.
static SUMMARY: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"^(aborting due to|could not compile|test failed, to rerun|build failed|\d+ warnings? emitted|`[^`]+` \(.+\) generated \d+ warnings?|\d+ target(s)? failed)",
    )
});
static FAILURES_ITEM: LazyLock<Regex> = LazyLock::new(|| re(r"^    (\S.*)$"));

pub(super) fn parse(text: &str, workspace: &Workspace) -> Signals {
    let mut signals = Signals::new(Format::Cargo);
    let lines: Vec<&str> = text.lines().collect();
    // Failing tests in the order they were reported, and what their panics said.
    let mut failed: Vec<String> = Vec::new();
    let mut panics: HashMap<String, (Option<String>, Option<Location>)> = HashMap::new();
    let mut current: Option<String> = None;
    let mut in_failures_list = false;
    let (mut passed, mut failed_count, mut saw_result) = (0u32, 0u32, false);
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        i += 1;
        if line == "failures:" {
            in_failures_list = true;
            continue;
        }
        if in_failures_list {
            if let Some(caps) = FAILURES_ITEM.captures(line) {
                failed.push(caps[1].to_owned());
                continue;
            }
            if !line.is_empty() {
                in_failures_list = false;
            }
        }
        if let Some(caps) = TEST_LINE.captures(line) {
            if &caps[2] == "FAILED" {
                failed.push(caps[1].to_owned());
            }
        } else if let Some(caps) = RESULT.captures(line) {
            saw_result = true;
            passed += caps[1].parse::<u32>().unwrap_or(0);
            failed_count += caps[2].parse::<u32>().unwrap_or(0);
        } else if let Some(caps) = STDOUT_HEADER.captures(line) {
            current = Some(caps[1].to_owned());
        } else if let Some(caps) = PANIC.captures(line) {
            // The message runs until a blank line, a note or the backtrace.
            let mut message = Vec::new();
            while i < lines.len() {
                let next = lines[i];
                if next.trim().is_empty()
                    || next.starts_with("note:")
                    || next.starts_with("stack backtrace:")
                {
                    break;
                }
                message.push(next.trim());
                i += 1;
            }
            let location = workspace.location(&caps[2], &caps[3], Some(&caps[4]));
            record_panic(
                &mut signals,
                &mut panics,
                &caps[1],
                current.as_deref(),
                Some(message.join(" ")),
                location,
            );
        } else if let Some(caps) = PANIC_OLD.captures(line) {
            let location = workspace.location(&caps[3], &caps[4], Some(&caps[5]));
            record_panic(
                &mut signals,
                &mut panics,
                &caps[1],
                current.as_deref(),
                Some(caps[2].to_owned()),
                location,
            );
        } else if let Some(caps) = FRAME.captures(line) {
            if let Some(location) = workspace.location(&caps[1], &caps[2], Some(&caps[3])) {
                signals.push_frame(location);
            }
        } else if let Some(caps) = DIAGNOSTIC.captures(line) {
            let message = &caps[3];
            if SUMMARY.is_match(message) {
                continue;
            }
            // The primary location is the first `-->` line, right below the header.
            let location = lines[i..]
                .iter()
                .take(3)
                .find_map(|next| ARROW.captures(next))
                .and_then(|arrow| workspace.location(&arrow[1], &arrow[2], Some(&arrow[3])));
            signals.diagnostics.push(Diagnostic {
                severity: if &caps[1] == "error" {
                    Severity::Error
                } else {
                    Severity::Warning
                },
                code: caps.get(2).map(|m| m.as_str().to_owned()),
                message: clip(message),
                location,
            });
        }
    }
    for name in failed {
        let (message, location) = panics.remove(&name).unwrap_or_default();
        signals.failures.push(Failure {
            name,
            message,
            location,
        });
    }
    if saw_result {
        signals.passed = Some(passed);
        signals.failed = Some(failed_count);
    }
    signals
}

/// A panic belongs to the test its thread is named after (the harness names each test's
/// thread so), or to the test whose output section it is in; a panic of `main` outside any
/// test is an error of its own.
fn record_panic(
    signals: &mut Signals,
    panics: &mut HashMap<String, (Option<String>, Option<Location>)>,
    thread: &str,
    section: Option<&str>,
    message: Option<String>,
    location: Option<Location>,
) {
    if let Some(location) = &location {
        signals.push_frame(location.clone());
    }
    let test = if thread == "main" || thread == "<unnamed>" {
        section
    } else {
        Some(thread)
    };
    match test {
        Some(test) => {
            panics
                .entry(test.to_owned())
                .or_insert((message.map(|m| clip(&m)), location));
        }
        None => {
            let at = location.map(|l| format!(" at {l}")).unwrap_or_default();
            signals.errors.push(format!(
                "panic{at}: {}",
                clip(message.as_deref().unwrap_or(""))
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::super::extract;
    use super::*;

    #[test]
    fn cargo_test_failures_carry_their_panic_message_and_location() {
        let text = include_str!("../fixtures/cargo_test.txt");
        let signals = extract(text, None, Some(Path::new("/tmp/cmpx/rs")));
        assert_eq!(signals.format, Format::Cargo);
        assert_eq!((signals.passed, signals.failed), (Some(2), Some(2)));
        let names: Vec<&str> = signals.failures.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["tests::parse_empty", "tests::add_large"]);
        let parse = &signals.failures[0];
        assert_eq!(
            parse.message.as_deref(),
            Some("called `Result::unwrap()` on an `Err` value: ParseIntError { kind: Empty }")
        );
        assert_eq!(
            parse.location.as_ref().unwrap().to_string(),
            "src/lib.rs:2:49"
        );
        assert_eq!(
            signals.failures[1].message.as_deref(),
            Some("assertion `left == right` failed left: 14 right: 13")
        );
        // Frames in the standard library (/rustc/…) are dropped; the crate's are kept.
        let frames: Vec<String> = signals.frames.iter().map(Location::to_string).collect();
        assert_eq!(
            frames,
            [
                "src/lib.rs:2:49",
                "src/lib.rs:12:35",
                "src/lib.rs:12:21",
                "src/lib.rs:10:22",
                "src/lib.rs:10:19"
            ]
        );
        assert!(signals.diagnostics.is_empty(), "{:?}", signals.diagnostics);
        let rendered = signals.render();
        assert!(
            rendered.starts_with(
                "cargo: 2 failed, 2 passed; failed: tests::parse_empty at src/lib.rs:2:49 (called"
            ),
            "{rendered}"
        );
    }

    #[test]
    fn rustc_diagnostics_take_their_primary_location() {
        let text = include_str!("../fixtures/cargo_build.txt");
        let signals = extract(text, None, Some(Path::new("/tmp/cmpx/rs")));
        assert_eq!(signals.format, Format::Cargo);
        assert_eq!(signals.diagnostics.len(), 2, "{:?}", signals.diagnostics);
        let error = &signals.diagnostics[0];
        assert_eq!(error.severity, Severity::Error);
        assert_eq!(error.code.as_deref(), Some("E0277"));
        assert_eq!(error.message, "cannot add `&str` to `i32`");
        assert_eq!(
            error.location.as_ref().unwrap().to_string(),
            "src/lib.rs:1:43"
        );
        let warning = &signals.diagnostics[1];
        assert_eq!(warning.severity, Severity::Warning);
        assert_eq!(
            warning.location.as_ref().unwrap().to_string(),
            "src/lib.rs:16:23"
        );
        assert_eq!(signals.keys(), ["src/lib.rs:1:43"]);
        assert_eq!(
            signals.render(),
            "errors: E0277 src/lib.rs:1:43 cannot add `&str` to `i32`; 1 warning(s)"
        );
    }

    #[test]
    fn workspace_runs_sum_every_binary_and_read_old_panics() {
        let text = include_str!("../fixtures/cargo_workspace.txt");
        let signals = extract(text, None, None);
        assert_eq!((signals.passed, signals.failed), (Some(57), Some(3)));
        let names: Vec<&str> = signals.failures.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "config::tests::defaults_apply",
                "parse_roundtrip",
                "src/lib.rs - Parser::new (line 14)"
            ]
        );
        assert_eq!(
            signals.failures[0].message.as_deref(),
            Some("missing key: timeout")
        );
        assert_eq!(
            signals.failures[0].location.as_ref().unwrap().to_string(),
            "src/config.rs:88:9"
        );
        assert_eq!(
            signals.failures[1].location.as_ref().unwrap().to_string(),
            "tests/roundtrip.rs:21:5"
        );
        assert!(signals.errors.is_empty(), "{:?}", signals.errors);
    }
}
