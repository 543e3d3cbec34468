//! The subcommands of the `wright` binary that work on a workspace: each turns arguments into
//! library calls and renders the result as text for a person or JSON for a program.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;

use anyhow::Context as _;
use serde_json::json;
use wright::config::{self, Config, Layers};
use wright::index::{self, Index, Report};
use wright::retrieval;
use wright::search::{self, GrepQuery};
use wright::workspace::{DiskOnly, WalkOptions};

/// What every workspace command needs.
pub struct Workspace {
    pub root: PathBuf,
    pub config: Config,
    pub cache_dir: PathBuf,
}

impl Workspace {
    /// Resolves the configuration for `root` from the files and the environment; problems are
    /// warnings on stderr.
    pub fn load(root: PathBuf) -> Self {
        let env = |var: &str| std::env::var(var).ok();
        let config =
            Layers::load(config::user_file(&env), std::slice::from_ref(&root), &env).resolve();
        for problem in config.problems() {
            eprintln!("wright: configuration: {problem}");
        }
        Self {
            cache_dir: config::cache_dir(&env),
            root,
            config,
        }
    }

    fn walk_options(&self) -> WalkOptions {
        WalkOptions {
            max_file_size: self
                .config
                .get_u64("index.max_file_size")
                .unwrap_or(wright::workspace::DEFAULT_MAX_FILE_SIZE),
            ..WalkOptions::default()
        }
    }

    /// Opens the index and brings it up to date, with a progress bar on a terminal.
    pub fn fresh_index(&self, quiet: bool) -> anyhow::Result<(Index, Report)> {
        let index = Index::open(
            &self.root,
            index::Options {
                cache_dir: self.cache_dir.clone(),
                walk: self.walk_options(),
            },
        )
        .context("opening the index")?;
        let bar = (!quiet && std::io::stderr().is_terminal()).then(|| {
            let bar = indicatif::ProgressBar::new(0);
            bar.set_style(
                indicatif::ProgressStyle::with_template(
                    "indexing {bar:30} {pos}/{len} files {elapsed}",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            bar
        });
        let report = index
            .refresh(&|progress| {
                if let Some(bar) = &bar {
                    bar.set_length(progress.total as u64);
                    bar.set_position(progress.done as u64);
                }
            })
            .context("indexing")?;
        if let Some(bar) = bar {
            bar.finish_and_clear();
        }
        if report.read_only {
            eprintln!(
                "wright: another wright process (a language server?) is updating this index; \
                 it is used as that process last wrote it, without a refresh"
            );
        }
        Ok((index, report))
    }
}

/// `wright index`.
pub fn index(workspace: &Workspace, json: bool, out: &mut dyn Write) -> anyhow::Result<u8> {
    let (_, report) = workspace.fresh_index(json)?;
    let skipped: serde_json::Map<String, serde_json::Value> = report
        .skipped
        .counts
        .iter()
        .map(|(reason, count)| {
            let examples = report
                .skipped
                .examples
                .get(reason)
                .cloned()
                .unwrap_or_default();
            (
                reason.as_str().to_owned(),
                json!({"count": count, "examples": examples}),
            )
        })
        .collect();
    if json {
        let rebuilt = match &report.opened {
            index::Opened::Rebuilt(reason) => Some(reason.clone()),
            _ => None,
        };
        let value = json!({
            "root": report.root,
            "index_dir": report.index_dir,
            "files": report.files,
            "symbols": report.definitions,
            "references": report.references,
            "bytes": report.bytes,
            "seconds": report.seconds,
            "incremental": report.incremental,
            "read_only": report.read_only,
            "parsed": report.parsed,
            "removed": report.removed,
            "other_files": report.other_files,
            "rebuilt": rebuilt,
            "skipped": skipped,
        });
        writeln!(out, "{value}")?;
        return Ok(0);
    }
    writeln!(
        out,
        "indexed {} source files ({} parsed{}), {} symbols, {} references, {} bytes in {:.2} s ({})",
        report.files,
        report.parsed,
        if report.removed > 0 {
            format!(", {} removed", report.removed)
        } else {
            String::new()
        },
        report.definitions,
        report.references,
        report.bytes,
        report.seconds,
        if report.incremental {
            "incremental"
        } else {
            "full"
        },
    )?;
    if let index::Opened::Rebuilt(reason) = &report.opened {
        writeln!(out, "the previous index was rebuilt: {reason}")?;
    }
    if report.other_files > 0 {
        writeln!(
            out,
            "{} other files are in no supported language",
            report.other_files
        )?;
    }
    for (reason, count) in &report.skipped.counts {
        let examples = report
            .skipped
            .examples
            .get(reason)
            .map(|e| e.join(", "))
            .unwrap_or_default();
        writeln!(out, "skipped {count} ({}): {examples}", reason.as_str())?;
    }
    writeln!(out, "index: {}", report.index_dir.display())?;
    Ok(0)
}

/// `wright symbols`.
pub fn symbols(
    workspace: &Workspace,
    query: &str,
    limit: usize,
    kind: Option<&str>,
    json: bool,
    out: &mut dyn Write,
) -> anyhow::Result<u8> {
    if index::words(query).next().is_none() {
        eprintln!("wright: the query {query:?} has no identifier to look for");
    }
    let (index, _) = workspace.fresh_index(true)?;
    let hits = index.symbols(query, kind, limit);
    if json {
        let value: Vec<_> = hits
            .iter()
            .map(|hit| {
                json!({
                    "name": hit.name,
                    "kind": hit.kind,
                    "path": hit.path,
                    "line": hit.line + 1,
                    "column": hit.column + 1,
                    "container": hit.container,
                })
            })
            .collect();
        writeln!(out, "{}", serde_json::Value::Array(value))?;
        return Ok(0);
    }
    for hit in &hits {
        let name = match &hit.container {
            Some(container) => format!("{container}::{}", hit.name),
            None => hit.name.clone(),
        };
        writeln!(
            out,
            "{}:{}:{}  {} {name}  {}",
            hit.path,
            hit.line + 1,
            hit.column + 1,
            hit.kind,
            hit.signature
        )?;
    }
    if hits.is_empty() && !json {
        eprintln!("wright: no symbol matches {query:?}");
    }
    Ok(0)
}

/// `wright grep`.
pub fn grep(
    workspace: &Workspace,
    mut query: GrepQuery,
    json: bool,
    out: &mut dyn Write,
) -> anyhow::Result<u8> {
    query.limit = query.limit.max(1);
    let result = match search::grep(&workspace.root, &DiskOnly, &query, workspace.walk_options()) {
        Ok(result) => result,
        Err(err) => {
            eprintln!("wright: {err}");
            return Ok(2);
        }
    };
    for found in &result.matches {
        if json {
            writeln!(
                out,
                "{}",
                json!({"path": found.path, "line": found.line, "text": found.text})
            )?;
        } else {
            for (i, line) in found.before.iter().enumerate() {
                let number = found.line as usize - found.before.len() + i;
                writeln!(out, "{}-{number}-{line}", found.path)?;
            }
            writeln!(out, "{}:{}:{}", found.path, found.line, found.text)?;
            for (i, line) in found.after.iter().enumerate() {
                writeln!(out, "{}-{}-{line}", found.path, found.line as usize + 1 + i)?;
            }
        }
    }
    if result.truncated {
        eprintln!(
            "wright: stopped at {} matches (--limit)",
            result.matches.len()
        );
    }
    Ok(0)
}

/// `wright context`.
pub fn context(
    workspace: &Workspace,
    query: &str,
    budget: usize,
    json: bool,
    out: &mut dyn Write,
) -> anyhow::Result<u8> {
    let (index, _) = workspace.fresh_index(json)?;
    let context = retrieval::retrieve(
        &index,
        &DiskOnly,
        &retrieval::Query {
            text: query.to_owned(),
            budget,
            ..retrieval::Query::default()
        },
    );
    if json {
        let snippets: Vec<_> = context
            .snippets
            .iter()
            .map(|s| {
                json!({
                    "path": s.path,
                    "start_line": s.start_line,
                    "end_line": s.end_line,
                    "kind": s.kind.as_str(),
                    "score": s.score,
                    "text": s.text,
                })
            })
            .collect();
        let value = json!({"query": context.query, "budget": context.budget, "tokens": context.tokens, "snippets": snippets});
        writeln!(out, "{value}")?;
        return Ok(0);
    }
    for snippet in &context.snippets {
        writeln!(
            out,
            "── {}:{}-{} ({}, score {:.3}, {} tokens)",
            snippet.path,
            snippet.start_line,
            snippet.end_line,
            snippet.kind.as_str(),
            snippet.score,
            snippet.tokens
        )?;
        // The text starts with its own header line for the model; people see ours instead.
        let body = snippet.text.split_once('\n').map_or("", |(_, rest)| rest);
        write!(out, "{body}")?;
    }
    writeln!(out, "── {} of {} tokens", context.tokens, context.budget)?;
    Ok(0)
}
