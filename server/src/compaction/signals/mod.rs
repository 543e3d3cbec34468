//! Stable signals: what a command's or a test run's output says that must survive masking —
//! failing test names with their messages and locations, compiler diagnostics with
//! file:line:col, error kinds and messages, and the stack frames in workspace files.
//!
//! Extraction is deterministic (regular expressions over lines, no model call), so the same
//! output always gives the same signals and the same placeholder text, which keeps a masked
//! prompt byte-stable. One parser per format (`rust.rs`: cargo test and rustc; `python.rs`:
//! pytest and unittest; `js.rs`: jest, vitest and tsc; `go.rs`: go test and go build), a
//! detector that picks one, and a generic fallback for everything else. The `run_tests` tool
//! reports failures through [`extract`] too.

mod go;
mod js;
mod python;
mod rust;

use std::borrow::Cow;
use std::fmt;
use std::path::Path;
use std::sync::LazyLock;

use regex::Regex;
use serde::Serialize;

/// The output formats with a parser of their own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Format {
    /// `cargo test`, `cargo build`/`check`/`clippy` and rustc diagnostics.
    Cargo,
    Pytest,
    /// Python's `unittest` runner.
    Unittest,
    Jest,
    Vitest,
    /// `go test` and `go build`/`go vet` diagnostics.
    GoTest,
    /// The TypeScript compiler, plain and `--pretty`.
    Tsc,
    /// Any other output: error lines and workspace locations.
    Generic,
}

impl Format {
    pub fn name(self) -> &'static str {
        match self {
            Self::Cargo => "cargo",
            Self::Pytest => "pytest",
            Self::Unittest => "unittest",
            Self::Jest => "jest",
            Self::Vitest => "vitest",
            Self::GoTest => "go test",
            Self::Tsc => "tsc",
            Self::Generic => "output",
        }
    }

    /// The format a test command runs in, from its program name (`cargo`, `pytest`,
    /// `python -m unittest`, `npx vitest`, `go`, `tsc`), when one is recognised.
    pub fn of_command(command: &str) -> Option<Self> {
        let words: Vec<&str> = command.split_whitespace().collect();
        let has = |word: &str| {
            words
                .iter()
                .any(|w| *w == word || w.rsplit('/').next() == Some(word))
        };
        if has("cargo") || has("rustc") {
            Some(Self::Cargo)
        } else if has("pytest") || has("py.test") {
            Some(Self::Pytest)
        } else if has("unittest") {
            Some(Self::Unittest)
        } else if has("vitest") {
            Some(Self::Vitest)
        } else if has("jest") {
            Some(Self::Jest)
        } else if has("go") {
            Some(Self::GoTest)
        } else if has("tsc") {
            Some(Self::Tsc)
        } else {
            None
        }
    }
}

/// A place in a file: `path:line[:column]`, the path relative to the workspace root.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct Location {
    pub path: String,
    pub line: u32,
    pub column: Option<u32>,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.path, self.line)?;
        if let Some(column) = self.column {
            write!(f, ":{column}")?;
        }
        Ok(())
    }
}

/// One failing test.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Failure {
    /// As the runner names it (`tests::parse_empty`, `tests/test_x.py::test_y`,
    /// `calc › adds`, `TestAdd/negative`), so the model can rerun it by that name.
    pub name: String,
    /// The first line(s) of the assertion or error, whitespace collapsed.
    pub message: Option<String>,
    /// Where it failed: the deepest frame in the workspace.
    pub location: Option<Location>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
}

/// A compiler or type checker diagnostic.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Diagnostic {
    pub severity: Severity,
    /// `E0308`, `TS2322`, when the tool gives one.
    pub code: Option<String>,
    pub message: String,
    pub location: Option<Location>,
}

/// What an output says, in the few facts worth keeping.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Signals {
    pub format: Format,
    /// Counts as the runner reported them, when it did.
    pub passed: Option<u32>,
    pub failed: Option<u32>,
    pub failures: Vec<Failure>,
    pub diagnostics: Vec<Diagnostic>,
    /// Stack frames in workspace files, in the order they appeared, without repeats.
    pub frames: Vec<Location>,
    /// Error lines that are neither a failure nor a diagnostic (a panic outside any test,
    /// an uncaught exception, a generic `error:` line).
    pub errors: Vec<String>,
}

/// At most this many of each kind of signal is kept: an output with thousands of failures
/// says "and N more" instead (the whole output stays in its artifact).
const MAX_FAILURES: usize = 30;
const MAX_DIAGNOSTICS: usize = 30;
const MAX_FRAMES: usize = 8;
const MAX_ERRORS: usize = 8;
/// Messages are cut to this many characters.
const MAX_MESSAGE: usize = 160;

impl Signals {
    fn new(format: Format) -> Self {
        Self {
            format,
            passed: None,
            failed: None,
            failures: Vec::new(),
            diagnostics: Vec::new(),
            frames: Vec::new(),
            errors: Vec::new(),
        }
    }

    /// Whether nothing was found: no counts, failures, diagnostics, frames or errors.
    pub fn is_empty(&self) -> bool {
        self.passed.is_none()
            && self.failed.is_none()
            && self.failures.is_empty()
            && self.diagnostics.is_empty()
            && self.frames.is_empty()
            && self.errors.is_empty()
    }

    /// The facts a placeholder must never lose: every failing test's name and every error
    /// diagnostic's location (its message when it has none). [`Signals::render`] contains
    /// each of them verbatim, up to the caps.
    pub fn keys(&self) -> Vec<String> {
        let failures = self
            .failures
            .iter()
            .take(MAX_FAILURES)
            .map(|f| f.name.clone());
        let errors = self
            .diagnostics
            .iter()
            .filter(|d| d.severity == Severity::Error)
            .take(MAX_DIAGNOSTICS)
            .map(|d| match &d.location {
                Some(location) => location.to_string(),
                None => clip(&d.message),
            });
        failures.chain(errors).collect()
    }

    /// A compact rendering for placeholders and tool results: counts, then failures,
    /// errors, warnings (counted), frames and other error lines, `; `-separated. Empty when
    /// there is nothing to say.
    pub fn render(&self) -> String {
        let mut parts = Vec::new();
        let counts = match (self.failed, self.passed) {
            (Some(failed), Some(passed)) => Some(format!("{failed} failed, {passed} passed")),
            (Some(failed), None) => Some(format!("{failed} failed")),
            (None, Some(passed)) => Some(format!("{passed} passed")),
            (None, None) => None,
        };
        if let Some(counts) = counts {
            parts.push(format!("{}: {counts}", self.format.name()));
        }
        if !self.failures.is_empty() {
            let mut items: Vec<String> = self
                .failures
                .iter()
                .take(MAX_FAILURES)
                .map(|failure| {
                    let mut item = failure.name.clone();
                    if let Some(location) = &failure.location {
                        item.push_str(&format!(" at {location}"));
                    }
                    if let Some(message) = &failure.message {
                        item.push_str(&format!(" ({})", clip(message)));
                    }
                    item
                })
                .collect();
            more(&mut items, self.failures.len(), MAX_FAILURES);
            parts.push(format!("failed: {}", items.join(", ")));
        }
        let errors: Vec<&Diagnostic> = self
            .diagnostics
            .iter()
            .filter(|d| d.severity == Severity::Error)
            .collect();
        if !errors.is_empty() {
            let mut items: Vec<String> = errors
                .iter()
                .take(MAX_DIAGNOSTICS)
                .map(|d| render_diagnostic(d))
                .collect();
            more(&mut items, errors.len(), MAX_DIAGNOSTICS);
            parts.push(format!("errors: {}", items.join(", ")));
        }
        let warnings = self.diagnostics.len() - errors.len();
        if warnings > 0 {
            parts.push(format!("{warnings} warning(s)"));
        }
        if !self.frames.is_empty() {
            let mut items: Vec<String> = self
                .frames
                .iter()
                .take(MAX_FRAMES)
                .map(Location::to_string)
                .collect();
            more(&mut items, self.frames.len(), MAX_FRAMES);
            parts.push(format!("frames: {}", items.join(", ")));
        }
        if !self.errors.is_empty() {
            let mut items: Vec<String> = self
                .errors
                .iter()
                .take(MAX_ERRORS)
                .map(|e| clip(e))
                .collect();
            more(&mut items, self.errors.len(), MAX_ERRORS);
            parts.push(items.join(" | "));
        }
        parts.join("; ")
    }

    /// Removes repeats (a failure named twice, a frame seen in two traces), keeping the
    /// first, which is the most complete for the parsers that fill it in order.
    fn dedup(&mut self) {
        let mut seen = std::collections::HashSet::new();
        self.failures.retain(|f| seen.insert(f.name.clone()));
        let mut seen = std::collections::HashSet::new();
        self.frames.retain(|l| seen.insert(l.clone()));
        let mut seen = std::collections::HashSet::new();
        self.diagnostics.retain(|d| {
            seen.insert((
                d.code.clone(),
                d.message.clone(),
                d.location.clone(),
                d.severity,
            ))
        });
        let mut seen = std::collections::HashSet::new();
        self.errors.retain(|e| seen.insert(e.clone()));
    }

    fn push_frame(&mut self, location: Location) {
        if !self.frames.contains(&location) {
            self.frames.push(location);
        }
    }
}

fn render_diagnostic(d: &Diagnostic) -> String {
    let mut item = String::new();
    if let Some(code) = &d.code {
        item.push_str(code);
        item.push(' ');
    }
    if let Some(location) = &d.location {
        item.push_str(&location.to_string());
        item.push(' ');
    }
    item.push_str(&clip(&d.message));
    item
}

fn more(items: &mut Vec<String>, total: usize, cap: usize) {
    if total > cap {
        items.push(format!("and {} more", total - cap));
    }
}

/// `text` with whitespace runs collapsed to one space and cut to [`MAX_MESSAGE`] characters.
fn clip(text: &str) -> String {
    let collapsed = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if collapsed.chars().count() <= MAX_MESSAGE {
        return collapsed;
    }
    let mut cut: String = collapsed.chars().take(MAX_MESSAGE - 1).collect();
    cut.push('…');
    cut
}

/// Decides which paths are the workspace's: frames in the standard library, in
/// dependencies or outside the root are noise for the model.
#[derive(Clone, Copy, Debug)]
pub struct Workspace<'a> {
    root: Option<&'a Path>,
}

impl<'a> Workspace<'a> {
    /// With a root, absolute paths under it count (and are shown relative to it); without
    /// one, only relative paths do.
    pub fn new(root: Option<&'a Path>) -> Self {
        Self { root }
    }

    /// `path` relative to the root when it is a workspace file, `None` otherwise.
    pub fn relative(&self, path: &str) -> Option<String> {
        let path = path.strip_prefix("file://").unwrap_or(path);
        let path = path.trim_start_matches("./");
        if path.is_empty() || path.starts_with('<') {
            return None;
        }
        const FOREIGN: &[&str] = &[
            "node_modules/",
            "site-packages/",
            "dist-packages/",
            ".cargo/registry/",
            ".cargo/git/",
            ".rustup/",
            "/rustc/",
            "/usr/lib/",
            "/usr/local/go/",
            "node:internal",
        ];
        if FOREIGN.iter().any(|marker| path.contains(marker)) {
            return None;
        }
        if Path::new(path).is_absolute() {
            let root = self.root?;
            return Path::new(path)
                .strip_prefix(root)
                .ok()
                .map(|rel| rel.to_string_lossy().replace('\\', "/"))
                .filter(|rel| !rel.is_empty());
        }
        Some(path.to_owned())
    }

    fn location(&self, path: &str, line: &str, column: Option<&str>) -> Option<Location> {
        Some(Location {
            path: self.relative(path)?,
            line: line.parse().ok()?,
            column: column.and_then(|c| c.parse().ok()),
        })
    }
}

/// The signals of `output`. `hint` names the format when the caller knows it (the
/// `run_tests` tool knows which runner it started); otherwise it is detected. `root` is the
/// workspace root, for frames printed with absolute paths. A format's parser that finds
/// nothing (a hint that was wrong, a linker failure in a test run) falls back to the generic
/// one.
pub fn extract(output: &str, hint: Option<Format>, root: Option<&Path>) -> Signals {
    let text = strip_ansi(output);
    let workspace = Workspace::new(root);
    let format = hint.unwrap_or_else(|| detect(&text));
    let mut signals = parse(&text, format, &workspace);
    if signals.is_empty() && format != Format::Generic {
        signals = generic(&text, &workspace);
    }
    signals.dedup();
    signals
}

fn parse(text: &str, format: Format, workspace: &Workspace) -> Signals {
    match format {
        Format::Cargo => rust::parse(text, workspace),
        Format::Pytest => python::parse_pytest(text, workspace),
        Format::Unittest => python::parse_unittest(text, workspace),
        Format::Jest | Format::Vitest => js::parse_tests(text, format, workspace),
        Format::GoTest => go::parse(text, workspace),
        Format::Tsc => js::parse_tsc(text, workspace),
        Format::Generic => generic(text, workspace),
    }
}

fn re(pattern: &str) -> Regex {
    Regex::new(pattern).expect("a constant pattern compiles")
}

/// Which format `text` is, from markers each runner prints. Test runners are tried before
/// compilers, since a test run may hold compiler output.
pub fn detect(text: &str) -> Format {
    static MARKERS: LazyLock<Vec<(Format, Regex)>> = LazyLock::new(|| {
        vec![
            (
                Format::Cargo,
                re(
                    r"(?m)^(test result: |running \d+ tests?$|---- .+ stdout ----$|thread '.*' (\(\d+\) )?panicked at |\s+Running (unittests|tests/))",
                ),
            ),
            (
                Format::GoTest,
                re(
                    r"(?m)^([ \t]*--- (FAIL|PASS): \S+ \(|=== RUN[ \t]|(ok|FAIL)[ \t]+\S+[ \t]+(\d+\.\d+s|\(cached\)|\[build failed\])|goroutine \d+ \[)",
                ),
            ),
            (
                Format::Pytest,
                re(
                    r"(?m)^(=+ test session starts =+$|=+ short test summary info =+$|(FAILED|ERROR) \S+::|\S+::\S+ (PASSED|FAILED|ERROR))",
                ),
            ),
            (
                Format::Unittest,
                re(r"(?m)^(Ran \d+ tests? in |(FAIL|ERROR): \S+ \(\S+\)$)"),
            ),
            (
                Format::Vitest,
                re(r"(?m)^(\s*Test Files\s+\d|\s*FAIL\s+\S+ > |\s*❯ \S+ \(\d+ tests?)"),
            ),
            (
                Format::Jest,
                re(r"(?m)^(Tests:\s+\d|Test Suites:\s+\d|(FAIL|PASS) \S|\s*● )"),
            ),
            (
                Format::Tsc,
                re(r"(?m)(\(\d+,\d+\): error TS\d+|:\d+:\d+ - error TS\d+|^error TS\d+:)"),
            ),
            (
                Format::Cargo,
                re(r"(?m)^(error|warning)(\[\w+\])?: .*\n\s*--> \S+\.rs:\d+"),
            ),
            (Format::GoTest, re(r"(?m)^(# \S+|\S+\.go:\d+:\d+: )")),
        ]
    });
    MARKERS
        .iter()
        .find(|(_, marker)| marker.is_match(text))
        .map_or(Format::Generic, |(format, _)| *format)
}

/// Colour and cursor escapes removed: runners colour their output on a terminal, and the
/// sandbox may present one.
fn strip_ansi(text: &str) -> Cow<'_, str> {
    static ANSI: LazyLock<Regex> =
        LazyLock::new(|| re(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07"));
    if text.contains('\x1b') {
        ANSI.replace_all(text, "")
    } else {
        Cow::Borrowed(text)
    }
}

/// Python's traceback frame line, shared by the Python parsers and the generic one.
static PY_FRAME: LazyLock<Regex> =
    LazyLock::new(|| re(r#"^\s*File "([^"]+)", line (\d+)(?:, in (.+))?$"#));

/// The generic parser: `path:line:col: error: message` diagnostics (gcc, clang, many
/// linters), lines that say error/failed/panic/exception, and every `path:line[:col]` and
/// Python frame in the workspace.
fn generic(text: &str, workspace: &Workspace) -> Signals {
    static DIAGNOSTIC: LazyLock<Regex> = LazyLock::new(|| {
        re(r"^(\S+?):(\d+):(?:(\d+):)? (?:fatal )?(error|warning)(?:\[([\w-]+)\])?: (.+)$")
    });
    static ERROR_LINE: LazyLock<Regex> = LazyLock::new(|| {
        re(
            r"(?i)\b(error|errors|failed|failure|panic|panicked|exception|fatal|traceback|segmentation fault|abort(ed)?)\b|^[\w.]+(Error|Exception)\b",
        )
    });
    static NOTHING_WRONG: LazyLock<Regex> =
        LazyLock::new(|| re(r"(?i)\b(0|no) (errors?|failed|failures?)\b"));
    static PATH_LINE: LazyLock<Regex> = LazyLock::new(|| {
        re(r"((?:[\w.@~-]+/)*[\w.@-]+\.[A-Za-z][A-Za-z0-9]{0,5}):(\d+)(?::(\d+))?\b")
    });
    let mut signals = Signals::new(Format::Generic);
    for line in text.lines() {
        if let Some(caps) = DIAGNOSTIC.captures(line) {
            signals.diagnostics.push(Diagnostic {
                severity: if &caps[4] == "error" {
                    Severity::Error
                } else {
                    Severity::Warning
                },
                code: caps.get(5).map(|m| m.as_str().to_owned()),
                message: clip(&caps[6]),
                location: workspace.location(&caps[1], &caps[2], caps.get(3).map(|m| m.as_str())),
            });
        } else if ERROR_LINE.is_match(line) && !NOTHING_WRONG.is_match(line) {
            signals.errors.push(clip(line));
        }
        if let Some(caps) = PY_FRAME.captures(line)
            && let Some(location) = workspace.location(&caps[1], &caps[2], None)
        {
            signals.push_frame(location);
        }
        for caps in PATH_LINE.captures_iter(line) {
            if let Some(location) =
                workspace.location(&caps[1], &caps[2], caps.get(3).map(|m| m.as_str()))
            {
                signals.push_frame(location);
            }
        }
    }
    signals
}

/// Each failure as (name, message, location), empty strings for what is missing: what the
/// parsers' tests compare against.
#[cfg(test)]
fn failure_summary(signals: &Signals) -> Vec<(String, String, String)> {
    signals
        .failures
        .iter()
        .map(|f| {
            (
                f.name.clone(),
                f.message.clone().unwrap_or_default(),
                f.location
                    .as_ref()
                    .map(Location::to_string)
                    .unwrap_or_default(),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_are_detected_from_their_markers() {
        let cases = [
            (include_str!("../fixtures/cargo_test.txt"), Format::Cargo),
            (include_str!("../fixtures/cargo_build.txt"), Format::Cargo),
            (include_str!("../fixtures/unittest.txt"), Format::Unittest),
            (include_str!("../fixtures/pytest.txt"), Format::Pytest),
            (include_str!("../fixtures/jest.txt"), Format::Jest),
            (include_str!("../fixtures/vitest.txt"), Format::Vitest),
            (include_str!("../fixtures/go_test.txt"), Format::GoTest),
            (include_str!("../fixtures/go_build.txt"), Format::GoTest),
            (include_str!("../fixtures/tsc.txt"), Format::Tsc),
            (include_str!("../fixtures/tsc_pretty.txt"), Format::Tsc),
            (include_str!("../fixtures/make_gcc.txt"), Format::Generic),
        ];
        for (text, format) in cases {
            assert_eq!(detect(&strip_ansi(text)), format, "{text}");
        }
    }

    #[test]
    fn commands_name_their_format() {
        assert_eq!(Format::of_command("cargo test --lib"), Some(Format::Cargo));
        assert_eq!(
            Format::of_command("python -m pytest -x"),
            Some(Format::Pytest)
        );
        assert_eq!(
            Format::of_command("python3 -m unittest discover"),
            Some(Format::Unittest)
        );
        assert_eq!(Format::of_command("npx vitest run"), Some(Format::Vitest));
        assert_eq!(
            Format::of_command("./node_modules/.bin/jest"),
            Some(Format::Jest)
        );
        assert_eq!(Format::of_command("go test ./..."), Some(Format::GoTest));
        assert_eq!(Format::of_command("make check"), None);
    }

    #[test]
    fn workspace_paths_are_relative_and_foreign_ones_dropped() {
        let root = Path::new("/home/dev/proj");
        let ws = Workspace::new(Some(root));
        assert_eq!(
            ws.relative("/home/dev/proj/src/a.rs").as_deref(),
            Some("src/a.rs")
        );
        assert_eq!(ws.relative("./src/a.rs").as_deref(), Some("src/a.rs"));
        assert_eq!(ws.relative("/home/dev/other/a.rs"), None);
        assert_eq!(
            ws.relative("/rustc/abc/library/core/src/panicking.rs"),
            None
        );
        assert_eq!(ws.relative("node_modules/jest/build/index.js"), None);
        assert_eq!(ws.relative("<frozen importlib._bootstrap>"), None);
        assert_eq!(ws.relative("node:internal/process/task_queues:95:5"), None);
        // Go's `internal/` packages are the workspace's own.
        assert_eq!(
            ws.relative("internal/store/db.go").as_deref(),
            Some("internal/store/db.go")
        );
        assert_eq!(Workspace::new(None).relative("/home/dev/proj/a.rs"), None);
    }

    #[test]
    fn ansi_colours_do_not_hide_signals() {
        let coloured = "\x1b[31merror[E0308]\x1b[0m\x1b[1m: mismatched types\x1b[0m\n  \x1b[34m-->\x1b[0m src/main.rs:3:5\n";
        let signals = extract(coloured, None, None);
        assert_eq!(signals.format, Format::Cargo);
        assert_eq!(signals.keys(), vec!["src/main.rs:3:5".to_owned()]);
    }

    #[test]
    fn the_generic_parser_keeps_compiler_errors_error_lines_and_workspace_locations() {
        let text = include_str!("../fixtures/make_gcc.txt");
        let signals = extract(text, None, Some(Path::new("/home/dev/proj")));
        assert_eq!(signals.format, Format::Generic);
        let errors: Vec<String> = signals
            .diagnostics
            .iter()
            .filter(|d| d.severity == Severity::Error)
            .map(render_diagnostic)
            .collect();
        assert_eq!(
            errors,
            vec![
                "src/parse.c:42:17 'struct token' has no member named 'len'",
                "src/parse.c:57:5 implicit declaration of function 'emit_token' [-Wimplicit-function-declaration]",
            ]
        );
        assert_eq!(signals.diagnostics.len(), 4);
        assert!(
            signals
                .errors
                .iter()
                .any(|e| e.contains("make: *** [Makefile:12: build/parse.o] Error 1")),
            "{:?}",
            signals.errors
        );
        assert!(
            signals
                .frames
                .iter()
                .any(|f| f.to_string() == "src/parse.c:42:17")
        );
        assert!(!signals.frames.iter().any(|f| f.path.starts_with("/usr")));
    }

    #[test]
    fn a_wrong_hint_falls_back_to_the_generic_parser() {
        let text = "Traceback (most recent call last):\n  File \"app/main.py\", line 3, in <module>\n    run()\nRuntimeError: boom\n";
        let signals = extract(text, Some(Format::Cargo), None);
        assert_eq!(signals.format, Format::Generic);
        assert_eq!(signals.frames[0].to_string(), "app/main.py:3");
        assert!(
            signals
                .errors
                .iter()
                .any(|e| e.contains("RuntimeError: boom"))
        );
        assert!(
            signals.render().contains("frames: app/main.py:3"),
            "{}",
            signals.render()
        );
    }

    #[test]
    fn renderings_cap_long_lists_and_keep_every_key_below_the_cap() {
        let mut signals = Signals::new(Format::Cargo);
        for i in 0..40 {
            signals.failures.push(Failure {
                name: format!("tests::case_{i}"),
                message: Some("x".repeat(500)),
                location: None,
            });
        }
        let text = signals.render();
        assert!(text.contains("and 10 more"));
        for key in signals.keys() {
            assert!(text.contains(&key), "{key}");
        }
        assert_eq!(signals.keys().len(), MAX_FAILURES);
        assert!(text.len() < 30 * (MAX_MESSAGE * 4 + 40), "{}", text.len());
    }
}
