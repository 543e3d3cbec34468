//! `grep`, `find_symbol`, `outline` and `find_references`: search results grouped and
//! numbered so the model can go straight to `read_file` or `edit`.

use std::fmt::Write as _;
use std::sync::Arc;

use super::{Args, Failure, ToolContext, ToolOutput, ToolResult, workspace_path};
use crate::index::{Index, SymbolHit};
use crate::search::{self, GrepQuery};

const MAX_MATCH_CHARS: usize = 300;

pub(super) fn grep(context: &ToolContext, args: &Args) -> ToolResult {
    let mut query = GrepQuery::new(args.string("pattern")?);
    query.limit = args.optional_u64("limit")?.unwrap_or(100).clamp(1, 1000) as usize;
    if let Some(glob) = args.optional_string("glob")? {
        query.globs.push(glob.to_owned());
    }
    let result = search::grep(
        &context.root,
        context.overlay.as_ref(),
        &query,
        context.walk.clone(),
    )
    .map_err(|err| Failure::Refused(err.to_string()))?;
    if result.matches.is_empty() {
        return Ok(ToolOutput::ok(format!(
            "no matches in {} files",
            result.files_searched
        )));
    }
    let mut out = String::new();
    let mut current = "";
    for found in &result.matches {
        if found.path != current {
            current = &found.path;
            let _ = writeln!(out, "{current}");
        }
        let text = found.text.trim_end();
        let text = match text.char_indices().nth(MAX_MATCH_CHARS) {
            Some((cut, _)) => format!("{}…", &text[..cut]),
            None => text.to_owned(),
        };
        let _ = writeln!(out, "  {}: {text}", found.line);
    }
    if result.truncated {
        let _ = writeln!(
            out,
            "(stopped at {} matches; narrow the pattern or add a glob)",
            query.limit
        );
    }
    Ok(ToolOutput::ok(out))
}

pub(super) fn find_symbol(context: &ToolContext, args: &Args) -> ToolResult {
    let index = index(context)?;
    let query = args.string("query")?;
    let limit = args.optional_u64("limit")?.unwrap_or(20).clamp(1, 200) as usize;
    let hits = index.symbols(query, args.optional_string("kind")?, limit);
    if hits.is_empty() {
        return Ok(ToolOutput::ok(format!(
            "no definitions match {query:?}; try grep"
        )));
    }
    let mut out = String::new();
    for hit in &hits {
        let _ = write!(
            out,
            "{} {} {}:{}",
            hit.kind,
            hit.name,
            hit.path,
            hit.line + 1
        );
        if let Some(container) = &hit.container {
            let _ = write!(out, " in {container}");
        }
        let _ = writeln!(out, "\n    {}", hit.signature);
    }
    Ok(ToolOutput::ok(out))
}

pub(super) fn outline(context: &ToolContext, args: &Args) -> ToolResult {
    let index = index(context)?;
    let path = workspace_path(context, args.string("path")?)?;
    let relative = path.to_string_lossy().replace('\\', "/");
    let mut hits = index.outline(&relative);
    if hits.is_empty() {
        return Ok(ToolOutput::ok(format!(
            "{relative}: no definitions indexed (not a supported language, not indexed yet, or none)"
        )));
    }
    hits.sort_by_key(|hit| (hit.start_line, std::cmp::Reverse(hit.end_line)));
    // Nesting from the line ranges: a definition inside another's lines is its child.
    let mut open: Vec<&SymbolHit> = Vec::new();
    let mut out = format!("{relative}\n");
    for hit in &hits {
        while open
            .last()
            .is_some_and(|parent| hit.start_line > parent.end_line)
        {
            open.pop();
        }
        let _ = writeln!(
            out,
            "{}{} {} (lines {}-{})",
            "  ".repeat(open.len() + 1),
            hit.kind,
            hit.name,
            hit.start_line + 1,
            hit.end_line + 1
        );
        open.push(hit);
    }
    Ok(ToolOutput::ok(out))
}

pub(super) fn find_references(context: &ToolContext, args: &Args) -> ToolResult {
    let index = index(context)?;
    let name = args.string("name")?;
    let limit = args.optional_u64("limit")?.unwrap_or(50).clamp(1, 500) as usize;
    let hits = index.references(name, limit);
    if hits.is_empty() {
        return Ok(ToolOutput::ok(format!(
            "no references to {name:?} indexed; try grep"
        )));
    }
    let mut out = String::new();
    let mut current = "";
    for hit in &hits {
        if hit.path != current {
            current = &hit.path;
            let _ = writeln!(out, "{current}");
        }
        let _ = writeln!(out, "  {}:{} {}", hit.line + 1, hit.column + 1, hit.kind);
    }
    Ok(ToolOutput::ok(out))
}

fn index(context: &ToolContext) -> Result<&Arc<Index>, Failure> {
    context.index.as_ref().ok_or_else(|| {
        Failure::Refused(
            "the workspace has no symbol index in this session; use grep instead".to_owned(),
        )
    })
}
