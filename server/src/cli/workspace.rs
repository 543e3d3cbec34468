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

use super::terminal::{self, say};

/// What every workspace command needs.
pub struct Workspace {
    pub root: PathBuf,
    pub config: Config,
    /// `Err` when neither `XDG_CACHE_HOME` nor `HOME` names one: what needs it refuses.
    pub cache_dir: Result<PathBuf, config::NoPrivateDir>,
}

impl Workspace {
    /// Resolves the configuration for `root` from the files and the environment; problems are
    /// warnings on stderr.
    pub fn load(root: PathBuf) -> Self {
        let env = |var: &str| std::env::var(var).ok();
        let config =
            Layers::load(config::user_file(&env), std::slice::from_ref(&root), &env).resolve();
        for problem in config.problems() {
            say!("wright: configuration: {problem}");
        }
        Self {
            cache_dir: config::cache_dir(&env),
            root,
            config,
        }
    }

    pub fn walk_options(&self) -> WalkOptions {
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
                cache_dir: self.cache_dir.clone()?,
                walk: self.walk_options(),
            },
        )
        .context("opening the index")?;
        let bar = (!quiet && std::io::stderr().is_terminal()).then(|| {
            let bar = indicatif::ProgressBar::new(0);
            bar.set_style(
                indicatif::ProgressStyle::with_template(
                    "{msg} {bar:30} {pos}/{len} files {elapsed}",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            bar
        });
        let report = index
            .refresh(&|progress| {
                if let Some(bar) = &bar {
                    bar.set_message(match progress.phase {
                        index::Phase::Lexical => "indexing",
                        index::Phase::Refining => "refining",
                    });
                    bar.set_length(progress.total as u64);
                    bar.set_position(progress.done as u64);
                }
            })
            .context("indexing")?;
        if let Some(bar) = bar {
            bar.finish_and_clear();
        }
        if report.read_only {
            say!(
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
            "searchable_ms": (report.searchable_seconds * 1000.0).round() as u64,
            "lexical_files": report.lexical_files,
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
        "indexed {} source files ({} parsed{}), {} symbols, {} references, {} bytes in {:.2} s, searchable after {:.2} s ({})",
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
        report.searchable_seconds,
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
        say!("wright: the query {query:?} has no identifier to look for");
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
        say!("wright: no symbol matches {query:?}");
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
            say!("wright: {err}");
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
        say!(
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

/// What `wright exec` works on: a new task, a session taken up where it stopped, or a new
/// turn of one.
#[derive(Clone, Copy)]
pub enum ExecStart<'a> {
    Task(&'a str),
    Resume(&'a str),
    FollowUp(&'a str, &'a str),
}

/// `wright exec`'s options.
pub struct ExecOptions<'a> {
    pub model: Option<&'a str>,
    pub max_steps: Option<u32>,
    /// Plan mode (`--plan`).
    pub plan: bool,
    pub json: bool,
}

/// `wright exec`: the agent on the workspace, headless.
pub async fn exec(
    workspace: &Workspace,
    start: ExecStart<'_>,
    options: ExecOptions<'_>,
) -> anyhow::Result<u8> {
    let ExecOptions {
        model,
        max_steps,
        plan,
        json,
    } = options;
    use std::sync::Arc;
    use wright::agent::launch::{self, Begin, Plan, Prepared};
    use wright::agent::{self, Cancel, FinalStatus, disk::DiskTarget};

    // The session's first count (the retrieved context's budget) needs the tokenizer, a few
    // hundred milliseconds to build: built meanwhile, beside the index, not after it.
    let _ = wright::llm::tokens::warm_in_background();
    let env = |var: &str| std::env::var(var).ok();
    let data_dir = config::data_dir(&env)?;
    let prepared = Prepared::prepare(Plan {
        config: &workspace.config,
        root: &workspace.root,
        data_dir: &data_dir,
        begin: match start {
            ExecStart::Task(task) => Begin::Task(task),
            ExecStart::Resume(id) => Begin::Resume(id),
            ExecStart::FollowUp(id, message) => Begin::FollowUp(
                id,
                wright::agent::conversation::UserMessage {
                    text: message.to_owned(),
                    ..Default::default()
                },
            ),
        },
        model,
        id_prefix: "exec",
        // A new turn works in the mode the command line says; a session taken up where it
        // stopped keeps its own.
        mode: match start {
            ExecStart::Resume(_) if !plan => None,
            _ if plan => Some(wright::agent::conversation::Mode::Plan),
            _ => Some(wright::agent::conversation::Mode::Code),
        },
    });
    let mut prepared = match prepared {
        Ok(prepared) => prepared,
        Err(err) => {
            say!("wright: {err}");
            return Ok(1);
        }
    };
    // The command line's --max-steps wins over the configuration's agent.max_steps.
    if let Some(max_steps) = max_steps {
        prepared.limits.max_steps = max_steps;
    }
    // Temporaries an interrupted edit left go before the index or the agent can see them.
    wright::edit::apply::sweep_stale_temporaries(&workspace.root);
    // Without an index the agent still greps and reads; say why it has none.
    let index = match workspace.fresh_index(json) {
        Ok((index, _)) => Some(Arc::new(index)),
        Err(err) => {
            say!("wright: working without the symbol index: {err:#}");
            None
        }
    };
    let (id, model_event) = (prepared.id.clone(), prepared.model_event());
    let model_name = prepared.models.decision.model.to_string();
    let opened = prepared.open(launch::Context {
        index: index.clone(),
        overlay: Arc::new(DiskOnly),
        focus: agent::prompt::EditorFocus::default(),
    });
    if let Some(journal) = opened.journal_path() {
        say!(
            "wright: session {id} (journal {}; `wright exec --resume {id} MESSAGE` continues \
             it)",
            journal.display()
        );
    }
    let target = Arc::new(
        DiskTarget::new(
            &workspace.root,
            super::apply::configured_gate(&workspace.root, &env),
        )
        .protecting(agent::tools::Protection::from_config(&workspace.config))
        .recording(&data_dir, &id),
    );
    let cancel = Cancel::new();
    // Headless, no one can approve a call: an `approve = "ask"` server's calls are not run.
    let servers = wright::mcp::servers::Servers::open(
        &workspace.config,
        &workspace.root,
        &data_dir,
        Vec::new(),
        None,
    );
    for problem in servers.started().await {
        say!("wright: {problem}");
    }
    let tools = Arc::new(agent::tools::ToolContext {
        root: workspace.root.clone(),
        overlay: Arc::new(DiskOnly),
        index,
        walk: workspace.walk_options(),
        edits: target.clone(),
        // Headless, the workspace itself is where commands write (as edits do).
        commands: match workspace
            .cache_dir
            .as_ref()
            .map_err(ToString::to_string)
            .and_then(|dir| agent::sandboxed::pool(dir))
        {
            Ok(pool) => Some(Arc::new(
                agent::sandboxed::SandboxRunner::in_place(pool, &workspace.root)
                    .configured(&workspace.config),
            )),
            Err(err) => {
                say!("wright: commands cannot run: {err}");
                None
            }
        },
        test_command: workspace
            .config
            .get("agent.test_command")
            .map(str::to_owned),
        cancel: cancel.clone(),
        plan: Default::default(),
        plan_mode: Default::default(),
        mcp: servers.tools(),
    });
    let (events, mut received) = tokio::sync::mpsc::unbounded_channel();
    let _ = events.send(model_event);
    let mut session = opened.session(tools, events, None);
    let printer = tokio::spawn(async move {
        let mut stderr = terminal::stderr();
        while let Some(event) = received.recv().await {
            print_event(&mut stderr, &event);
        }
    });
    let interrupt = {
        let cancel = cancel.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                say!("\nwright: cancelling (Ctrl-C)");
                cancel.cancel();
            }
        })
    };
    let outcome = session.run().await;
    interrupt.abort();
    drop(session);
    servers.close().await;
    let _ = printer.await;

    if target.record().is_some() {
        say!("wright: `wright exec --undo` puts the changed files back");
    }
    if json {
        let mut value = serde_json::to_value(&outcome)?;
        value["model"] = json!(model_name);
        writeln!(terminal::stdout(true), "{value}")?;
    } else if !outcome.message.is_empty() {
        writeln!(terminal::stdout(false), "{}", outcome.message.trim_end())?;
    }
    Ok(match outcome.status {
        FinalStatus::Done => 0,
        FinalStatus::Cancelled | FinalStatus::Failed => 1,
    })
}

/// One event as a line (or a streamed fragment) on stderr.
fn print_event(out: &mut dyn Write, event: &wright::agent::AgentEvent) {
    use wright::agent::AgentEvent;
    let first_line = |text: &str| text.lines().next().unwrap_or_default().to_owned();
    let _ = match event {
        AgentEvent::Model { model, reason, .. } => writeln!(out, "model {model}: {reason}"),
        AgentEvent::StepStarted { step } => writeln!(out, "── step {step}"),
        AgentEvent::TextDelta { text } => write!(out, "{text}"),
        AgentEvent::StepRetried { step, reason } => {
            writeln!(out, "\n── step {step} again: the answer was cut ({reason})")
        }
        AgentEvent::ToolCall {
            name, arguments, ..
        } => {
            let arguments: String = arguments.chars().take(160).collect();
            writeln!(out, "\n→ {name} {arguments}")
        }
        AgentEvent::ToolResult {
            is_error, output, ..
        } => writeln!(
            out,
            "  {} {}",
            if *is_error { "✗" } else { "✓" },
            first_line(output)
        ),
        AgentEvent::FilesChanged { paths } => writeln!(out, "  changed {}", paths.join(", ")),
        // Headless runs apply their edits; nothing is held for review.
        AgentEvent::EditProposed { path, .. } => writeln!(out, "  proposed {path}"),
        AgentEvent::Approval { command, decision } => {
            writeln!(out, "  approval of `{command}`: {decision}")
        }
        AgentEvent::EditApplied { paths } => writeln!(out, "  applied {}", paths.join(", ")),
        AgentEvent::EditRejected { paths, reason } => {
            writeln!(out, "  not applied to {}: {reason}", paths.join(", "))
        }
        AgentEvent::Plan { steps } => writeln!(out, "  plan: {} steps", steps.len()),
        AgentEvent::Usage {
            total,
            context_tokens,
            context_window,
            cost_usd,
        } => writeln!(
            out,
            "\n  tokens: {} in ({} cached), {} out; context {context_tokens} of \
             {context_window}{}",
            total.input,
            total.cached_input,
            total.output,
            cost_usd.map(|c| format!("; ${c:.4}")).unwrap_or_default()
        ),
        AgentEvent::Turn { turn, .. } => writeln!(out, "── turn {turn}"),
        AgentEvent::Mode { mode } => writeln!(out, "  mode: {mode}"),
        AgentEvent::Title { title } => writeln!(out, "  title: {title}"),
        AgentEvent::Compacted {
            masked,
            tokens_before,
            tokens_after,
            summarized,
        } => writeln!(
            out,
            "  compacted: {} ({tokens_before} → {tokens_after} tokens)",
            if *summarized {
                format!("{masked} messages summarised")
            } else {
                format!("{masked} old outputs masked")
            }
        ),
        AgentEvent::Error { message } => writeln!(out, "error: {message}"),
        AgentEvent::Finished { outcome, .. } => writeln!(
            out,
            "── {:?} after {} steps{}",
            outcome.status,
            outcome.steps,
            outcome
                .reason
                .as_ref()
                .map(|r| format!(": {r}"))
                .unwrap_or_default()
        ),
    };
}

/// `wright sessions`: the sessions journaled on the workspace, newest first.
pub fn sessions(workspace: &Workspace, json: bool, out: &mut dyn Write) -> anyhow::Result<u8> {
    use wright::agent::journal::{Recorded, sessions_dir};
    let env = |var: &str| std::env::var(var).ok();
    let data_dir = config::data_dir(&env)?;
    let mut sessions = Recorded::list(&sessions_dir(&data_dir, &workspace.root));
    sessions.sort_by(|a, b| (b.updated, &b.session_id).cmp(&(a.updated, &a.session_id)));
    let state = |recorded: &Recorded| match &recorded.outcome {
        Some(outcome) => format!("{:?}", outcome.status).to_lowercase(),
        None => "interrupted".to_owned(),
    };
    let title = |recorded: &Recorded| {
        recorded
            .title
            .clone()
            .unwrap_or_else(|| recorded.task.lines().next().unwrap_or_default().to_owned())
    };
    if json {
        let listed: Vec<_> = sessions
            .iter()
            .map(|recorded| {
                json!({
                    "id": recorded.session_id,
                    "title": title(recorded),
                    "state": state(recorded),
                    "turns": recorded.turns,
                    "model": recorded.model,
                    "updated": recorded.updated,
                    "usage": recorded.spent.usage,
                    "costUsd": recorded.spent.cost_usd,
                })
            })
            .collect();
        writeln!(out, "{}", serde_json::Value::Array(listed))?;
        return Ok(0);
    }
    if sessions.is_empty() {
        writeln!(out, "no sessions on {}", workspace.root.display())?;
        return Ok(0);
    }
    for recorded in &sessions {
        let shown: String = title(recorded).chars().take(48).collect();
        writeln!(
            out,
            "{:<22} {:<11} {:>2} turns  ${:<7.4} {:<28} {}",
            recorded.session_id,
            state(recorded),
            recorded.turns,
            recorded.spent.cost_usd,
            recorded.model,
            shown
        )?;
    }
    Ok(0)
}

/// `wright exec --undo`.
pub fn exec_undo(workspace: &Workspace, json: bool) -> anyhow::Result<u8> {
    let env = |var: &str| std::env::var(var).ok();
    let data_dir = config::data_dir(&env)?;
    let protection = wright::agent::tools::Protection::from_config(&workspace.config);
    // Which session the undone edits were, read before the undo removes its record.
    let session = wright::agent::disk::UndoRecord::load(&data_dir, &workspace.root)
        .ok()
        .map(|record| record.session_id);
    let result = wright::agent::disk::UndoRecord::undo(&data_dir, &workspace.root, &protection);
    if let (Ok(files), Some(session)) = (&result, &session) {
        let paths = files
            .iter()
            .map(|file| file.to_string_lossy().replace('\\', "/"))
            .collect();
        if let Err(err) =
            wright::agent::journal::record_undo(&data_dir, &workspace.root, session, paths, 0)
        {
            tracing::warn!("{err}; `wright stats` will not know of this undo");
        }
    }
    if json {
        let value = match &result {
            Ok(files) => json!({"undone": true, "files": files}),
            Err(err) => json!({"undone": false, "error": err.to_string()}),
        };
        writeln!(std::io::stdout(), "{value}")?;
    }
    match result {
        Ok(files) => {
            if !json {
                let mut out = terminal::stdout(false);
                for file in files {
                    writeln!(out, "restored {}", file.display())?;
                }
            }
            Ok(0)
        }
        Err(err) => {
            say!("wright: {err}");
            Ok(1)
        }
    }
}
