//! The system prompt and the task message.
//!
//! The system prompt holds what does not change within a workspace (who the agent is, how it
//! works, the project's `AGENTS.md` instructions), so it is byte-identical across the steps of
//! a session and across sessions, and the provider's prompt cache serves it. What belongs to
//! one task (the task, the editor's file and selection, the retrieved code) opens the first
//! user message, the start of the append-only history.

use std::fmt::Write as _;
use std::path::Path;

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
fn agents_files(root: &Path) -> Vec<(String, String)> {
    let found = std::sync::Mutex::new(Vec::new());
    workspace::walk(root, &WalkOptions::default(), &|entry| {
        if entry.relative.rsplit('/').next() == Some("AGENTS.md")
            && let Ok(text) = std::fs::read_to_string(&entry.path)
        {
            found
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push((entry.relative, text));
        }
        true
    });
    let mut found = found.into_inner().unwrap_or_else(|e| e.into_inner());
    found.sort_by(|a, b| (a.0.matches('/').count(), &a.0).cmp(&(b.0.matches('/').count(), &b.0)));
    found
}

/// Where the user was when they asked.
#[derive(Clone, Debug, Default)]
pub struct EditorFocus {
    /// Workspace-relative.
    pub path: Option<String>,
    /// 1-based lines of the selection, and its text.
    pub selection: Option<(u32, u32, String)>,
}

/// The first user message: the task, where the user is, and the code retrieval picked.
pub fn task_message(task: &str, focus: &EditorFocus, context: Option<&Context>) -> String {
    let mut message = format!("Task: {}\n", task.trim());
    if let Some(path) = &focus.path {
        let _ = writeln!(message, "\nThe user's current file: {path}");
    }
    if let Some((start, end, text)) = &focus.selection {
        let _ = writeln!(
            message,
            "The user selected lines {start}-{end}:\n```\n{}\n```",
            text.trim_end()
        );
    }
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
