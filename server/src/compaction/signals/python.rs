//! pytest and unittest: failing tests by node id or dotted name, the exception each ended
//! with, the traceback frames in the workspace, and the run's counts.

use std::sync::LazyLock;

use regex::Regex;

use super::{Failure, Format, Location, PY_FRAME, Signals, Workspace, clip, re};

/// The closing line: `==== 2 failed, 5 passed, 1 error in 0.12s ====`.
static PYTEST_TOTALS: LazyLock<Regex> =
    LazyLock::new(|| re(r"^=+ (.*\d+ (?:passed|failed|errors?).*) in [\d.]+s(?: \(.*\))? =+$"));
static PYTEST_SUMMARY: LazyLock<Regex> =
    LazyLock::new(|| re(r"^(FAILED|ERROR) (\S+)(?: - (.+))?$"));
/// `-v` progress lines: `tests/test_x.py::test_y FAILED  [ 50%]`.
static PYTEST_VERBOSE: LazyLock<Regex> = LazyLock::new(|| re(r"^(\S+::\S+) (FAILED|ERROR)\b"));
static PYTEST_SECTION: LazyLock<Regex> = LazyLock::new(|| re(r"^_{3,} (.+?) _{3,}$"));
/// The end of each traceback entry in pytest's long format: `tests/test_x.py:9: AssertionError`.
static PYTEST_ENTRY: LazyLock<Regex> = LazyLock::new(|| re(r"^(\S+\.py):(\d+)(?:: ?(\S*))?$"));
/// A `====` banner closes the failure sections (warnings and summaries follow).
static PYTEST_BANNER: LazyLock<Regex> = LazyLock::new(|| re(r"^=+ .+ =+$"));
static PYTEST_E: LazyLock<Regex> = LazyLock::new(|| re(r"^E\s+(.+)$"));
static COUNT: LazyLock<Regex> = LazyLock::new(|| re(r"(\d+) (\w+)"));

/// What one failure section of pytest's report says.
#[derive(Default)]
struct Section {
    title: String,
    message: Option<String>,
    location: Option<Location>,
}

pub(super) fn parse_pytest(text: &str, workspace: &Workspace) -> Signals {
    let mut signals = Signals::new(Format::Pytest);
    let mut sections: Vec<Section> = Vec::new();
    let mut summary: Vec<Failure> = Vec::new();
    let mut verbose: Vec<String> = Vec::new();
    // Whether the lines read belong to the last section.
    let mut in_section = false;
    for line in text.lines() {
        if PYTEST_BANNER.is_match(line) {
            in_section = false;
        }
        let section = if in_section {
            sections.last_mut()
        } else {
            None
        };
        if let Some(caps) = PYTEST_TOTALS.captures(line) {
            let (mut passed, mut failed) = (0, 0);
            for count in COUNT.captures_iter(&caps[1]) {
                let n: u32 = count[1].parse().unwrap_or(0);
                match &count[2] {
                    "passed" => passed += n,
                    "failed" | "error" | "errors" => failed += n,
                    _ => {}
                }
            }
            signals.passed = Some(passed);
            signals.failed = Some(failed);
        } else if let Some(caps) = PYTEST_SUMMARY.captures(line) {
            summary.push(Failure {
                name: caps[2].to_owned(),
                message: caps.get(3).map(|m| clip(m.as_str())),
                location: None,
            });
        } else if let Some(caps) = PYTEST_VERBOSE.captures(line) {
            verbose.push(caps[1].to_owned());
        } else if let Some(caps) = PYTEST_SECTION.captures(line) {
            sections.push(Section {
                title: caps[1].to_owned(),
                ..Section::default()
            });
            in_section = true;
        } else if let Some(caps) = PYTEST_ENTRY.captures(line) {
            // The last entry of a section is where the exception was raised. Outside the
            // sections (the warnings summary), locations are not failures.
            if let Some(section) = section
                && let Some(location) = workspace.location(&caps[1], &caps[2], None)
            {
                signals.push_frame(location.clone());
                section.location = Some(location);
            }
        } else if let Some(caps) = PYTEST_E.captures(line) {
            if let Some(section) = section {
                section.message.get_or_insert_with(|| clip(&caps[1]));
            }
        } else if let Some(caps) = PY_FRAME.captures(line) {
            // `--tb=native` tracebacks.
            if let Some(section) = section
                && let Some(location) = workspace.location(&caps[1], &caps[2], None)
            {
                signals.push_frame(location.clone());
                section.location = Some(location);
            }
        }
    }
    // The short summary names every failure by node id; without it (`-rN`), the verbose
    // lines do, and without those the section titles.
    let mut failures = if !summary.is_empty() {
        summary
    } else if !verbose.is_empty() {
        verbose
            .into_iter()
            .map(|name| Failure {
                name,
                message: None,
                location: None,
            })
            .collect()
    } else {
        sections
            .iter()
            .filter(|s| !s.title.starts_with("warning") && !s.title.contains("summary"))
            .map(|s| Failure {
                name: s.title.clone(),
                message: None,
                location: None,
            })
            .collect()
    };
    for failure in &mut failures {
        if let Some(section) = sections
            .iter()
            .find(|s| section_matches(&s.title, &failure.name))
        {
            if section.message.is_some() {
                failure.message.clone_from(&section.message);
            }
            failure.location.clone_from(&section.location);
        }
    }
    signals.failures = failures;
    signals
}

/// Whether a section title (`TestCalc.test_add`, `test_div[0-1]`, `ERROR at setup of
/// test_db`) is about the test with node id `name` (`tests/test_calc.py::TestCalc::test_add`).
fn section_matches(title: &str, name: &str) -> bool {
    let title = title
        .strip_prefix("ERROR at setup of ")
        .or_else(|| title.strip_prefix("ERROR at teardown of "))
        .unwrap_or(title);
    let dotted = name.replace("::", ".");
    dotted == title || dotted.ends_with(&format!(".{title}"))
}

static UNITTEST_HEADER: LazyLock<Regex> =
    LazyLock::new(|| re(r"^(FAIL|ERROR|UNEXPECTED SUCCESS): (\S+) \(([^)]+)\)"));
static UNITTEST_RAN: LazyLock<Regex> = LazyLock::new(|| re(r"^Ran (\d+) tests? in "));
static UNITTEST_RESULT: LazyLock<Regex> = LazyLock::new(|| re(r"^(FAILED|OK)(?: \((.*)\))?$"));
static UNITTEST_RULE: LazyLock<Regex> = LazyLock::new(|| re(r"^(-{20,}|={20,})$"));
static PARAMETER: LazyLock<Regex> = LazyLock::new(|| re(r"(\w+)=(\d+)"));

pub(super) fn parse_unittest(text: &str, workspace: &Workspace) -> Signals {
    let mut signals = Signals::new(Format::Unittest);
    let lines: Vec<&str> = text.lines().collect();
    let mut ran = None;
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        i += 1;
        if let Some(caps) = UNITTEST_HEADER.captures(line) {
            // 3.11+ prints `test_x (pkg.mod.Class.test_x)`, earlier `test_x (pkg.mod.Class)`.
            let (method, owner) = (&caps[2], &caps[3]);
            let name = if owner.ends_with(&format!(".{method}")) {
                owner.to_owned()
            } else {
                format!("{owner}.{method}")
            };
            let mut failure = Failure {
                name,
                message: None,
                location: None,
            };
            // Skip the rule under the header, then read the traceback up to the next rule.
            if lines.get(i).is_some_and(|l| UNITTEST_RULE.is_match(l)) {
                i += 1;
            }
            while i < lines.len() && !UNITTEST_RULE.is_match(lines[i]) {
                let body = lines[i];
                i += 1;
                if let Some(frame) = PY_FRAME.captures(body) {
                    if let Some(location) = workspace.location(&frame[1], &frame[2], None) {
                        signals.push_frame(location.clone());
                        failure.location = Some(location);
                    }
                } else if failure.message.is_none()
                    && !body.is_empty()
                    && !body.starts_with(' ')
                    && !body.starts_with("Traceback")
                    && !body.starts_with("During handling")
                    && !body.starts_with("The above exception")
                {
                    failure.message = Some(clip(body));
                }
            }
            signals.failures.push(failure);
        } else if let Some(caps) = UNITTEST_RAN.captures(line) {
            ran = caps[1].parse::<u32>().ok();
        } else if let Some(caps) = UNITTEST_RESULT.captures(line)
            && let Some(ran) = ran
        {
            let mut failed = 0;
            let mut other = 0;
            for parameter in PARAMETER.captures_iter(caps.get(2).map_or("", |m| m.as_str())) {
                let n: u32 = parameter[2].parse().unwrap_or(0);
                match &parameter[1] {
                    "failures" | "errors" | "unexpected_successes" => failed += n,
                    _ => other += n,
                }
            }
            signals.failed = Some(failed);
            signals.passed = Some(ran.saturating_sub(failed + other));
        }
    }
    signals
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::super::{extract, failure_summary as summary};
    use super::*;

    #[test]
    fn unittest_failures_take_the_exception_line_and_the_deepest_frame() {
        let text = include_str!("../fixtures/unittest.txt");
        let signals = extract(text, None, Some(Path::new("/tmp/cmpx/py")));
        assert_eq!(signals.format, Format::Unittest);
        assert_eq!((signals.passed, signals.failed), (Some(1), Some(3)));
        assert_eq!(
            summary(&signals),
            [
                (
                    "tests.test_calc.TestCalc.test_div_zero".into(),
                    "ZeroDivisionError: division by zero".into(),
                    "calc.py:5".into()
                ),
                (
                    "tests.test_calc.TestCalc.test_add_large".into(),
                    "AssertionError: 14 != 13".into(),
                    "tests/test_calc.py:9".into()
                ),
                (
                    "tests.test_calc.TestMore.test_list".into(),
                    "AssertionError: 4 not found in [1, 2, 3]".into(),
                    "tests/test_calc.py:20".into()
                ),
            ]
        );
        assert_eq!(signals.frames.len(), 4);
    }

    #[test]
    fn old_unittest_headers_name_the_class_only() {
        let text = "F\n======================================================================\nFAIL: test_add (test_calc.TestCalc)\n----------------------------------------------------------------------\nTraceback (most recent call last):\n  File \"test_calc.py\", line 6, in test_add\n    self.assertEqual(add(1, 2), 4)\nAssertionError: 3 != 4\n\n----------------------------------------------------------------------\nRan 1 test in 0.000s\n\nFAILED (failures=1)\n";
        let signals = extract(text, None, None);
        assert_eq!(
            summary(&signals),
            [(
                "test_calc.TestCalc.test_add".into(),
                "AssertionError: 3 != 4".into(),
                "test_calc.py:6".into()
            )]
        );
        assert_eq!((signals.passed, signals.failed), (Some(0), Some(1)));
    }

    #[test]
    fn pytest_without_a_short_summary_names_failures_from_verbose_lines() {
        let text = "============================= test session starts ==============================\ncollected 3 items\n\ntests/test_a.py::test_one PASSED                                         [ 33%]\ntests/test_a.py::test_two FAILED                                         [ 66%]\ntests/test_a.py::test_three PASSED                                       [100%]\n\n=================================== FAILURES ===================================\n___________________________________ test_two ___________________________________\n\n    def test_two():\n>       assert parse('') == []\nE       assert None == []\n\ntests/test_a.py:9: AssertionError\n========================= 1 failed, 2 passed in 0.05s ==========================\n";
        let signals = extract(text, None, None);
        assert_eq!(signals.format, Format::Pytest);
        assert_eq!((signals.passed, signals.failed), (Some(2), Some(1)));
        assert_eq!(
            summary(&signals),
            [(
                "tests/test_a.py::test_two".into(),
                "assert None == []".into(),
                "tests/test_a.py:9".into()
            )]
        );
    }

    #[test]
    fn pytest_failures_join_the_short_summary_with_their_sections() {
        let text = include_str!("../fixtures/pytest.txt");
        let signals = extract(text, None, Some(Path::new("/home/dev/shop")));
        assert_eq!(signals.format, Format::Pytest);
        assert_eq!((signals.passed, signals.failed), (Some(14), Some(4)));
        assert_eq!(
            summary(&signals),
            [
                (
                    "tests/test_cart.py::TestCart::test_total_with_discount".into(),
                    "AssertionError: assert 90.0 == 85.0".into(),
                    "tests/test_cart.py:41".into()
                ),
                (
                    "tests/test_cart.py::test_empty_cart_total".into(),
                    "ZeroDivisionError: division by zero".into(),
                    "shop/cart.py:27".into()
                ),
                (
                    "tests/test_prices.py::test_parse_price[1,50-1.5]".into(),
                    "ValueError: could not convert string to float: '1,50'".into(),
                    "shop/prices.py:12".into()
                ),
                (
                    "tests/test_db.py::test_checkout".into(),
                    "fixture 'db_session' not found".into(),
                    "tests/test_db.py:8".into()
                ),
            ]
        );
        assert!(
            signals
                .frames
                .iter()
                .all(|f| !f.path.contains("site-packages")),
            "{:?}",
            signals.frames
        );
    }
}
