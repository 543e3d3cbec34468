//! `list_dir` and `read_file`: the workspace as the editor shows it, numbered and bounded.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;

use super::{Args, Failure, ToolContext, ToolOutput, ToolResult, workspace_path};
use crate::files::{FileError, Root};
use crate::workspace::{self, FileText};

/// Lines one read returns at most: a model that wants more asks for the next range.
const MAX_READ_LINES: usize = 800;
/// Characters of one line shown at most (minified files have lines of megabytes).
const MAX_LINE_CHARS: usize = 500;
const MAX_LIST_ENTRIES: usize = 400;
/// The largest file `read_file` reads (a regular file's size is known before; this bounds
/// what a model can make the server hold for one call).
const MAX_READ_BYTES: u64 = 32 * 1024 * 1024;

pub(super) fn list_dir(context: &ToolContext, args: &Args) -> ToolResult {
    let depth = args.optional_u64("depth")?.unwrap_or(2).clamp(1, 6) as usize;
    let base = match args.optional_string("path")?.map(str::trim) {
        None | Some("" | "." | "./") => String::new(),
        Some(path) => workspace_path(context, path)?
            .to_string_lossy()
            .replace('\\', "/"),
    };
    let tree = Arc::new(open_tree(context)?);
    let shown = if base.is_empty() { "." } else { &base };
    match tree.stat(Path::new(&base)) {
        Ok(Some(stat)) if stat.is_dir() => {}
        Ok(_) => {
            return Err(Failure::Refused(format!(
                "{shown}: not a directory of the workspace"
            )));
        }
        Err(err) => return Err(refused(shown, &err)),
    }
    // The walk respects the ignore rules and skips generated folders, as the index does.
    let entries = std::sync::Mutex::new(Vec::new());
    let skipped = workspace::walk_under(&tree, Path::new(&base), &context.walk, &|entry| {
        entries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(entry.relative);
        true
    })
    .map_err(|err| refused(shown, &err))?;
    let mut files = entries.into_inner().unwrap_or_else(|e| e.into_inner());
    files.sort();

    // Folders deeper than `depth` are summarised by their file count.
    let mut tree: BTreeMap<String, usize> = BTreeMap::new();
    for file in &files {
        let parts: Vec<&str> = file.split('/').collect();
        for level in 1..parts.len().min(depth) {
            tree.entry(format!("{}/", parts[..level].join("/")))
                .or_insert(0);
        }
        if parts.len() <= depth {
            tree.insert(file.clone(), 0);
        } else {
            *tree
                .entry(format!("{}/", parts[..depth].join("/")))
                .or_insert(0) += 1;
        }
    }
    let mut out = format!(
        "{}/ ({} files)\n",
        if base.is_empty() { "." } else { &base },
        files.len()
    );
    for (shown, (path, hidden)) in tree.iter().enumerate() {
        if shown == MAX_LIST_ENTRIES {
            let _ = writeln!(
                out,
                "… {} more entries; list a subdirectory",
                tree.len() - shown
            );
            break;
        }
        let level = path.trim_end_matches('/').matches('/').count();
        let name = path
            .trim_end_matches('/')
            .rsplit('/')
            .next()
            .unwrap_or(path);
        let slash = if path.ends_with('/') { "/" } else { "" };
        let _ = write!(out, "{}{name}{slash}", "  ".repeat(level + 1));
        if *hidden > 0 {
            let _ = write!(out, " ({hidden} files)");
        }
        out.push('\n');
    }
    if skipped.total() > 0 {
        let _ = writeln!(
            out,
            "({} files left out: binary, too large or generated)",
            skipped.total()
        );
    }
    Ok(ToolOutput::ok(out))
}

pub(super) fn read_file(context: &ToolContext, args: &Args) -> ToolResult {
    let path = workspace_path(context, args.string("path")?)?;
    let shown = path.to_string_lossy().replace('\\', "/");
    let text = read_text(context, &path)?;
    let lines: Vec<&str> = text.lines().collect();
    let total = lines.len();
    let start = args.optional_u64("start_line")?.unwrap_or(1).max(1) as usize;
    if total == 0 {
        return Ok(ToolOutput::ok(format!("{shown}: empty file\n")));
    }
    if start > total {
        return Err(Failure::Refused(format!(
            "{shown} has {total} lines; start_line {start} is past the end"
        )));
    }
    let wanted_end = args.optional_u64("end_line")?.map(|end| end as usize);
    if let Some(end) = wanted_end
        && end < start
    {
        return Err(Failure::Arguments(format!(
            "end_line {end} is before start_line {start}"
        )));
    }
    let end = wanted_end
        .unwrap_or(total)
        .min(total)
        .min(start + MAX_READ_LINES - 1);
    let mut out = format!("{shown} (lines {start}-{end} of {total})\n");
    let width = end.to_string().len();
    for (number, line) in lines[start - 1..end].iter().enumerate() {
        let number = start + number;
        match line.char_indices().nth(MAX_LINE_CHARS) {
            Some((cut, _)) => {
                let _ = writeln!(out, "{number:>width$}\t{}… (line cut)", &line[..cut]);
            }
            None => {
                let _ = writeln!(out, "{number:>width$}\t{line}");
            }
        }
    }
    if end < wanted_end.unwrap_or(total).min(total) {
        let _ = writeln!(
            out,
            "… {} more lines; read from start_line {}",
            wanted_end.unwrap_or(total).min(total) - end,
            end + 1
        );
    }
    Ok(ToolOutput::ok(out))
}

/// The workspace as the tools read it: every read resolved beneath the root, never through a
/// link that leads out.
pub(super) fn open_tree(context: &ToolContext) -> Result<Root, Failure> {
    Root::open(&context.root).map_err(|err| Failure::Refused(format!("the workspace: {err}")))
}

/// A read refused or failed, said for the model.
fn refused(shown: &str, err: &FileError) -> Failure {
    match err {
        FileError::Outside { .. } | FileError::Escapes { .. } => Failure::Refused(format!("{err}")),
        FileError::NotRegular {
            kind: "a folder", ..
        } => Failure::Refused(format!("{shown}: a directory; use list_dir")),
        err if err.is_not_found() => Failure::Refused(format!(
            "{shown}: no such file; list_dir or grep to find the right path"
        )),
        err => Failure::Refused(format!("{shown}: cannot read: {err}")),
    }
}

/// The text of `path`: its open buffer, else the disk; binary files refused. Where the path
/// leads is checked first, so not even an editor's buffer of a link out is read.
pub(super) fn read_text(context: &ToolContext, path: &Path) -> Result<String, Failure> {
    let shown = path.to_string_lossy();
    let tree = open_tree(context)?;
    match tree.stat(path) {
        Ok(Some(stat)) if stat.is_dir() => {
            return Err(Failure::Refused(format!(
                "{shown}: a directory; use list_dir"
            )));
        }
        Ok(_) => {}
        Err(err) => return Err(refused(&shown, &err)),
    }
    if let Some(text) = context.overlay.buffer_text(&context.root.join(path)) {
        return Ok(text);
    }
    let bytes = tree
        .read(path, MAX_READ_BYTES.max(context.walk.max_file_size))
        .map_err(|err| refused(&shown, &err))?;
    match workspace::decode(bytes) {
        FileText::Text(text) | FileText::Lossy(text) => Ok(text),
        FileText::Binary => Err(Failure::Refused(format!(
            "{shown}: a binary file; it cannot be read as text"
        ))),
    }
}
