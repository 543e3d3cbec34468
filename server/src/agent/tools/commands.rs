//! `run_command` and `run_tests`: commands through the session's [`CommandRunner`] (the
//! sandbox), output capped head and tail for the prompt, test commands detected from the
//! project's files (pytest only where the project configures it, else Python's unittest).

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use super::{Args, Failure, ToolContext, ToolOutput, ToolResult};
use crate::agent::Cancel;
use crate::files::Root;

/// Characters of a command's output the model sees: the head and the tail, the middle
/// counted. Build logs put the cause near the end and the command line near the start.
const OUTPUT_HEAD: usize = 3_000;
const OUTPUT_TAIL: usize = 7_000;
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);
const TEST_TIMEOUT: Duration = Duration::from_secs(600);

/// A finished command.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CommandOutput {
    /// `None` when the command was killed by a signal or the time limit.
    pub exit_code: Option<i32>,
    pub timed_out: bool,
    pub stdout: String,
    pub stderr: String,
    /// The runner itself dropped part of the output (its own cap).
    pub truncated: bool,
    pub duration_ms: u64,
    /// What the sandbox refused, and whether the command was run again with more.
    pub note: Option<String>,
    /// Files the command changed in the session's snapshot, each with its diff when it is
    /// text: changes the agent may turn into edits.
    pub changes: Vec<String>,
}

/// What follows the command line in a result when the command did not run at all (the
/// journals' readers look for it).
pub const COULD_NOT_RUN: &str = "could not run: ";

/// Runs shell commands for the agent: the sandbox in the product, scripted ones in tests.
pub trait CommandRunner: Send + Sync {
    /// Runs `command` with `sh -c` in the workspace, for at most `timeout`; returns early,
    /// with the command's process tree killed, once `cancel` fires. `Err` is a failure to
    /// run at all (the sandbox could not start), in words the model can act on.
    fn run(
        &self,
        command: &str,
        timeout: Duration,
        cancel: &Cancel,
    ) -> Result<CommandOutput, String>;

    /// Runs `command` as [`CommandRunner::run`] does, where its writes are thrown away after
    /// it (plan mode). A runner that cannot keep them apart refuses.
    fn run_discarding(
        &self,
        command: &str,
        timeout: Duration,
        cancel: &Cancel,
    ) -> Result<CommandOutput, String> {
        let _ = (command, timeout, cancel);
        Err(
            "this session cannot run a command apart from the workspace; plan mode runs none"
                .to_owned(),
        )
    }
}

pub(super) fn run_command(context: &ToolContext, args: &Args) -> ToolResult {
    let command = args.string("command")?;
    if command.trim().is_empty() {
        return Err(Failure::Arguments("\"command\" is empty".to_owned()));
    }
    let timeout = args
        .optional_u64("timeout_secs")?
        .map_or(DEFAULT_TIMEOUT, |secs| {
            Duration::from_secs(secs.clamp(1, 3600))
        });
    let output = run(context, command, timeout)?;
    Ok(report(command, &output))
}

pub(super) fn run_tests(context: &ToolContext, args: &Args) -> ToolResult {
    let filter = args
        .optional_string("filter")?
        .map(str::trim)
        .filter(|f| !f.is_empty());
    let Some(command) = test_command(&context.root, context.test_command.as_deref(), filter) else {
        return Err(Failure::Refused(
            "no test command found (no Cargo.toml, go.mod, package.json with a test script, \
             Python project files or test*.py modules at the root); run the tests with \
             run_command, or set agent.test_command in .wright/config.toml"
                .to_owned(),
        ));
    };
    let output = run(context, &command, TEST_TIMEOUT)?;
    let mut result = report(&command, &output);
    // The failures first, parsed (names, messages, locations): what the model acts on.
    let signals = crate::compaction::signals::extract(
        &format!("{}\n{}", output.stdout, output.stderr),
        crate::compaction::Format::of_command(&command),
        Some(&context.root),
    );
    let summary = signals.render();
    if !summary.is_empty() {
        result.content = format!("{summary}\n{}", result.content);
    }
    Ok(result)
}

fn run(context: &ToolContext, command: &str, timeout: Duration) -> Result<CommandOutput, Failure> {
    let runner = context
        .commands
        .as_ref()
        .ok_or_else(|| Failure::Refused("commands cannot run in this session".to_owned()))?;
    let ran = if context.in_plan_mode() {
        runner.run_discarding(command, timeout, &context.cancel)
    } else {
        runner.run(command, timeout, &context.cancel)
    };
    ran.map_err(|why| Failure::Refused(format!("{command}: {COULD_NOT_RUN}{why}")))
}

/// The model's view of a finished command: its status first, then capped output; the whole
/// output goes with it, for the session to keep as an artifact when the cap cut it.
fn report(command: &str, output: &CommandOutput) -> ToolOutput {
    let status = match (output.timed_out, output.exit_code) {
        (true, _) => format!("timed out after {} ms (killed)", output.duration_ms),
        (false, Some(code)) => format!("exit code {code}"),
        (false, None) => "killed by a signal".to_owned(),
    };
    let mut out = format!("$ {command}\n{status}, {} ms\n", output.duration_ms);
    for (name, text) in [("stdout", &output.stdout), ("stderr", &output.stderr)] {
        if text.is_empty() {
            continue;
        }
        let _ = writeln!(out, "--- {name}");
        out.push_str(&cap(text));
        if !out.ends_with('\n') {
            out.push('\n');
        }
    }
    if output.truncated {
        out.push_str("(the sandbox kept only the head and tail of the output)\n");
    }
    if let Some(note) = &output.note {
        let _ = writeln!(out, "sandbox: {note}");
    }
    if !output.changes.is_empty() {
        out.push_str("--- files the command changed (in the session's snapshot, not the editor)\n");
        out.push_str(&cap(&output.changes.join("\n")));
        if !out.ends_with('\n') {
            out.push('\n');
        }
    }
    let failed = output.timed_out || output.exit_code != Some(0);
    let whole = [&output.stdout, &output.stderr]
        .iter()
        .any(|text| text.chars().count() > OUTPUT_HEAD + OUTPUT_TAIL)
        .then(|| {
            format!(
                "$ {command}\n--- stdout\n{}\n--- stderr\n{}",
                output.stdout, output.stderr
            )
        });
    ToolOutput {
        content: out,
        is_error: failed,
        whole,
        ..ToolOutput::default()
    }
}

/// `text` with its middle replaced by a count when it is longer than the head and tail.
pub(crate) fn cap(text: &str) -> String {
    let chars = text.chars().count();
    if chars <= OUTPUT_HEAD + OUTPUT_TAIL {
        return text.to_owned();
    }
    let head: String = text.chars().take(OUTPUT_HEAD).collect();
    let tail: String = text.chars().skip(chars - OUTPUT_TAIL).collect();
    let middle = &text[head.len()..text.len() - tail.len()];
    format!(
        "{head}\n… {} lines ({} characters) left out …\n{tail}",
        middle.lines().count(),
        chars - OUTPUT_HEAD - OUTPUT_TAIL
    )
}

/// The project's test command, from its files (or the configured one), with `filter`.
pub(crate) fn test_command(
    root: &Path,
    configured: Option<&str>,
    filter: Option<&str>,
) -> Option<String> {
    let quoted = filter.map(shell_quote);
    if let Some(command) = configured {
        return Some(match quoted {
            Some(filter) => format!("{command} {filter}"),
            None => command.to_owned(),
        });
    }
    // Read through the workspace root, bounded: a repository's `package.json` may be a FIFO
    // or a link out.
    let tree = Root::open(root).ok()?;
    let has = |name: &str| tree.stat(Path::new(name)).is_ok_and(|stat| stat.is_some());
    let with = |base: &str, flag: &str| match &quoted {
        Some(filter) => format!("{base} {flag}{filter}"),
        None => base.to_owned(),
    };
    if has("Cargo.toml") {
        return Some(with("cargo test", ""));
    }
    if has("go.mod") {
        return Some(with("go test ./...", "-run "));
    }
    if has("package.json")
        && read_small(&tree, "package.json")
            .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
            .is_some_and(|package| package["scripts"]["test"].is_string())
    {
        return Some(with("npm test --silent --", "-t "));
    }
    if uses_pytest(&tree) {
        return Some(with("python3 -m pytest -q", "-k "));
    }
    if is_python_project(&tree) {
        // The standard library's runner: a project that never set pytest up may not have it.
        return Some(with("python3 -m unittest", "-k "));
    }
    None
}

/// The largest project file read to detect its test command.
const MAX_PROJECT_FILE: u64 = 1024 * 1024;

/// The text of a project file at the root, if it is a regular file of a sane size.
fn read_small(tree: &Root, name: &str) -> Option<String> {
    String::from_utf8(tree.read(Path::new(name), MAX_PROJECT_FILE).ok()?).ok()
}

fn is_file(tree: &Root, name: &str) -> bool {
    tree.stat(Path::new(name))
        .is_ok_and(|stat| stat.is_some_and(|stat| stat.is_file()))
}

/// Whether the project configures pytest (its own file, a section of a shared one, or a
/// `conftest.py`): only then is pytest the project's runner.
fn uses_pytest(tree: &Root) -> bool {
    let mentions = |name: &str, section: &str| {
        read_small(tree, name).is_some_and(|text| {
            text.lines()
                .any(|line| line.trim_start().starts_with(section))
        })
    };
    is_file(tree, "pytest.ini")
        || is_file(tree, "conftest.py")
        || is_file(tree, "tests/conftest.py")
        || mentions("pyproject.toml", "[tool.pytest")
        || mentions("setup.cfg", "[tool:pytest]")
        || mentions("tox.ini", "[pytest]")
}

/// Whether the root is a Python project: its packaging files, or test modules as unittest
/// discovers them (`test*.py` at the root or in `tests/`).
fn is_python_project(tree: &Root) -> bool {
    let packaged = ["pyproject.toml", "setup.py", "setup.cfg", "tox.ini"]
        .iter()
        .any(|name| is_file(tree, name));
    let has_tests = |dir: &str| {
        tree.read_dir(Path::new(dir)).is_ok_and(|entries| {
            entries.iter().any(|entry| {
                let name = entry.name.to_string_lossy();
                name.starts_with("test") && name.ends_with(".py")
            })
        })
    };
    packaged || has_tests("") || has_tests("tests")
}

fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}
