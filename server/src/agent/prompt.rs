//! The system prompt and the task message.
//!
//! The system prompt holds what does not change within a workspace (who the agent is, how it
//! works, the project's `AGENTS.md` instructions), so it is byte-identical across the steps of
//! a session and across sessions, and the provider's prompt cache serves it. What belongs to
//! one task (the task, the editor's file and selection, the retrieved code) opens the first
//! user message, the start of the append-only history.

use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;

use super::conversation::{Mode, UserMessage};
use super::tools::Attachment;
use crate::files::Root;
use crate::retrieval::Context;
use crate::workspace::{self, WalkOptions};

/// Bytes of `AGENTS.md` text the prompt carries at most.
const MAX_INSTRUCTIONS: usize = 16 * 1024;

const IDENTITY: &str = "\
You are wright, a coding agent working inside the user's editor on the workspace below. You \
change code by calling tools, and you finish by answering with a short summary of what you did \
(no tool call).

How to work:
- Look before you change: find_symbol, grep, outline and read_file (read only the lines you \
need). Do not guess paths or names.
- Edit with the edit tool (or multi_edit, apply_patch, write_file for new files). old_string \
must match exactly one place: copy it from a fresh read and include enough unchanged lines \
around the change. If an edit is refused, read the file again and retry with what it says.
- Keep changes small and in the style of the surrounding code.
- Verify: run the tests (run_tests) or the build (run_command) when they exist, and fix what \
fails before you finish.
- Several independent reads can be asked for at once; they run in parallel.
- For a task with several steps, keep a plan with update_plan.
";

/// The system prompt for a session on `root`.
pub fn system_prompt(root: &Path) -> String {
    let mut prompt = IDENTITY.to_owned();
    let instructions = agents_files(root);
    if !instructions.is_empty() {
        prompt.push_str("\nProject instructions (AGENTS.md):\n");
        let mut used = 0;
        for (path, text) in instructions {
            let text = text.trim();
            if used + text.len() > MAX_INSTRUCTIONS {
                let _ = writeln!(prompt, "\n[{path}: left out, over the size limit]");
                continue;
            }
            used += text.len();
            let _ = writeln!(prompt, "\n[{path}]\n{text}");
        }
    }
    prompt
}

/// The `AGENTS.md` files of the workspace, the root's first, then the nested ones by path.
/// Each is read through the workspace root within the walk's size limit; the root's may be a
/// link to another file inside (`AGENTS.md -> CLAUDE.md`), never one leading out.
fn agents_files(root: &Path) -> Vec<(String, String)> {
    let Ok(tree) = Root::open(root) else {
        return Vec::new();
    };
    let tree = Arc::new(tree);
    let options = WalkOptions::default();
    let found = std::sync::Mutex::new(Vec::new());
    let walked = workspace::walk_under(&tree, Path::new(""), &options, &|entry| {
        if entry.relative.rsplit('/').next() == Some(AGENTS_FILE)
            && let Some(text) = entry
                .read()
                .ok()
                .and_then(|bytes| String::from_utf8(bytes).ok())
        {
            found
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push((entry.relative, text));
        }
        true
    });
    let mut found = found.into_inner().unwrap_or_else(|e| e.into_inner());
    // The walk follows no link; the root's own file is looked for through one.
    if walked.is_ok() && !found.iter().any(|(path, _)| path == AGENTS_FILE) {
        match tree.read(Path::new(AGENTS_FILE), options.max_file_size) {
            Ok(bytes) => {
                if let Ok(text) = String::from_utf8(bytes) {
                    found.push((AGENTS_FILE.to_owned(), text));
                }
            }
            Err(err) if err.is_not_found() => {}
            Err(err) => tracing::warn!("{AGENTS_FILE} left out of the prompt: {err}"),
        }
    }
    found.sort_by(|a, b| (a.0.matches('/').count(), &a.0).cmp(&(b.0.matches('/').count(), &b.0)));
    found
}

const AGENTS_FILE: &str = "AGENTS.md";

/// Where the user was when they asked.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EditorFocus {
    /// Workspace-relative.
    pub path: Option<String>,
    /// 1-based lines of the selection, and its text.
    pub selection: Option<(u32, u32, String)>,
}

impl EditorFocus {
    /// The focus on `path` (kept only when it is under `root`) with the selected `text` at
    /// 1-based `lines`, when the selection is not empty.
    pub fn in_root(
        root: &Path,
        path: Option<&Path>,
        selection: Option<((u32, u32), String)>,
    ) -> Self {
        Self {
            path: path
                .filter(|path| {
                    path.starts_with(root)
                        && !path
                            .components()
                            .any(|c| c == std::path::Component::ParentDir)
                })
                .map(|path| workspace::relative_path(root, path)),
            selection: selection
                .filter(|(_, text)| !text.is_empty())
                .map(|((start, end), text)| (start, end, text)),
        }
    }

    fn describe(&self, message: &mut String) {
        if let Some(path) = &self.path {
            let _ = writeln!(message, "\nThe user's current file: {path}");
        }
        if let Some((start, end, text)) = &self.selection {
            let _ = writeln!(
                message,
                "The user selected lines {start}-{end}:\n```\n{}\n```",
                text.trim_end()
            );
        }
    }
}

/// What the model is told when the mode changes, or a turn starts in plan mode.
pub fn mode_note(mode: Mode) -> &'static str {
    match mode {
        Mode::Plan => {
            "[Plan mode: investigate with the read-only tools (commands run in a throw-away \
             copy) and change no file. End with a numbered plan of the changes: which files, \
             what in each, and how to verify them.]"
        }
        Mode::Code => "[Code mode: every tool is available again; carry out the agreed plan.]",
    }
}

/// What the user rejected of the proposals, for the model.
pub fn review_note(rejected: &[String]) -> String {
    let mut text = "[Review: the user rejected these proposed changes; they are not in the \
                    files. Do not propose them again unless asked.]\n"
        .to_owned();
    for line in rejected {
        let _ = writeln!(text, "- {line}");
    }
    text
}

/// The proposals still held when a turn starts.
pub fn held_note(held: &[String]) -> String {
    let mut text = "[Review: these proposed changes are still waiting for the user's decision; \
                    reads see them, the user's files do not have them yet.]\n"
        .to_owned();
    for line in held {
        let _ = writeln!(text, "- {line}");
    }
    text
}

/// A later message of the user's: its text, where they are, and what it mentions.
pub fn turn_message(message: &UserMessage, attachments: &[Attachment], mode: Mode) -> String {
    let mut text = message.text.trim().to_owned();
    text.push('\n');
    message.focus.describe(&mut text);
    if !attachments.is_empty() {
        text.push_str("\nWhat the message mentions:\n");
        for attachment in attachments {
            let _ = write!(text, "\n@{}: {}", attachment.mention, attachment.text);
        }
    }
    if mode == Mode::Plan {
        let _ = write!(text, "\n{}\n", mode_note(mode));
    }
    text
}

/// The first user message: the task, where the user is, and the code retrieval picked.
pub fn task_message(task: &str, focus: &EditorFocus, context: Option<&Context>) -> String {
    let mut message = format!("Task: {}\n", task.trim());
    focus.describe(&mut message);
    if let Some(context) = context.filter(|c| !c.snippets.is_empty()) {
        message.push_str("\nCode that may be relevant (from the workspace index):\n");
        for snippet in &context.snippets {
            let _ = writeln!(
                message,
                "\n{}:{}-{}\n{}",
                snippet.path,
                snippet.start_line,
                snippet.end_line,
                snippet.text.trim_end()
            );
        }
    }
    message
}

/// What one of the editor's code actions asks the agent for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CodeTask {
    Fix,
    Explain,
    Tests,
    Document,
}

/// The task a code action starts: for the code at 1-based `lines` (first, last) of the
/// workspace file `relative`, with the editor's `problems` there for a fix.
pub fn code_task(
    action: CodeTask,
    relative: &str,
    lines: (u32, u32),
    problems: &[String],
) -> String {
    let (line, end) = lines;
    let place = if end > line {
        format!("lines {line}-{end} of {relative}")
    } else {
        format!("line {line} of {relative}")
    };
    match action {
        CodeTask::Fix => format!(
            "Fix the problems the editor reports in {relative}: {}",
            problems.join("; ")
        ),
        CodeTask::Explain => format!(
            "Explain the code at {place}: what it does, how, and anything surprising. \
             Read what you need, but change no file; your last message is the explanation."
        ),
        CodeTask::Tests => format!(
            "Write tests for the code at {place}, in the style of the project's tests, and run them."
        ),
        CodeTask::Document => format!(
            "Write documentation comments for the definitions at {place}, in the project's style."
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `AGENTS.md` as a link inside works as its target; as a FIFO, a link to /dev/zero (out
    /// of the workspace) or a link to an outside file, it is left out without blocking, and
    /// the outside text never reaches the prompt.
    #[test]
    fn agents_files_are_read_through_the_root_links_inside_followed_links_out_refused() {
        let dir = std::env::temp_dir().join(format!("wright-prompt-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("outside")).unwrap();
        std::fs::write(dir.join("outside/AGENTS.md"), "OUTSIDE-INSTRUCTIONS\n").unwrap();
        let workspace = |name: &str| {
            let root = dir.join(name);
            std::fs::create_dir_all(root.join("sub")).unwrap();
            std::fs::write(root.join("CLAUDE.md"), "Use tabs.\n").unwrap();
            std::fs::write(root.join("sub/AGENTS.md"), "Nested rule.\n").unwrap();
            root
        };
        let linked = workspace("linked");
        std::os::unix::fs::symlink("CLAUDE.md", linked.join("AGENTS.md")).unwrap();
        let prompt = system_prompt(&linked);
        assert!(prompt.contains("[AGENTS.md]\nUse tabs."), "{prompt}");
        assert!(prompt.contains("[sub/AGENTS.md]\nNested rule."), "{prompt}");

        let out = workspace("out");
        std::os::unix::fs::symlink(dir.join("outside/AGENTS.md"), out.join("AGENTS.md")).unwrap();
        std::os::unix::fs::symlink(dir.join("outside/AGENTS.md"), out.join("sub/other.md"))
            .unwrap();
        let zero = workspace("zero");
        std::os::unix::fs::symlink("/dev/zero", zero.join("AGENTS.md")).unwrap();
        let fifo = workspace("fifo");
        let c =
            std::ffi::CString::new(fifo.join("AGENTS.md").as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        for root in [out, zero, fifo] {
            let (send, receive) = std::sync::mpsc::channel();
            let walked = root.clone();
            std::thread::spawn(move || {
                let _ = send.send(system_prompt(&walked));
            });
            let prompt = receive
                .recv_timeout(std::time::Duration::from_secs(20))
                .unwrap_or_else(|_| panic!("{}: the prompt hangs", root.display()));
            assert!(!prompt.contains("OUTSIDE"), "{prompt}");
            assert!(!prompt.contains("[AGENTS.md]"), "{prompt}");
            assert!(prompt.contains("[sub/AGENTS.md]\nNested rule."), "{prompt}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
