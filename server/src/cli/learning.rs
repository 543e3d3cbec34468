//! `wright stats` and `wright trajectories export`: the journals' measures and training data,
//! rendered for the terminal or as JSON. The library computes; this renders and writes.

use std::io::Write;
use std::path::Path;

use anyhow::Context as _;
use wright::config;
use wright::learning::{self, redact::Redactor, stats, trajectories};

use super::workspace::Workspace;

pub struct StatsOptions {
    pub since_days: u64,
    pub all: bool,
    pub json: bool,
}

pub fn stats(
    workspace: &Workspace,
    options: &StatsOptions,
    out: &mut dyn Write,
) -> anyhow::Result<u8> {
    let env = |var: &str| std::env::var(var).ok();
    let data_dir = config::data_dir(&env)?;
    let sessions = learning::sessions(
        &data_dir,
        &workspace.root,
        options.all,
        Some(options.since_days),
    );
    let stats = stats::compute(&sessions, Some(options.since_days));
    if options.json {
        writeln!(out, "{}", serde_json::to_value(&stats)?)?;
        return Ok(0);
    }
    let scope = if options.all {
        "every workspace".to_owned()
    } else {
        workspace.root.display().to_string()
    };
    writeln!(out, "last {} days, {scope}", options.since_days)?;
    writeln!(
        out,
        "{:<28} {:>5} {:>5} {:>6} {:>5} {:>5} {:>5} {:>5} {:>5} {:>5} {:>9} {:>9} {:>6}",
        "model",
        "sess",
        "turns",
        "edits",
        "appl",
        "rej",
        "undo",
        "kept",
        "cmds",
        "deny",
        "tokens",
        "cost",
        "1st"
    )?;
    let mut rows: Vec<(&str, &stats::Counts)> = stats
        .models
        .iter()
        .map(|(model, counts)| (model.as_str(), counts))
        .collect();
    rows.push(("all", &stats.all));
    for (model, c) in rows {
        let model: String = model.chars().take(28).collect();
        let tokens = c.usage.input + c.usage.output;
        let first = c
            .first_edit_secs
            .map_or_else(|| "-".to_owned(), |secs| format!("{secs}s"));
        writeln!(
            out,
            "{model:<28} {:>5} {:>5} {:>6} {:>5} {:>5} {:>5} {:>5} {:>5} {:>5} {:>9} {:>9} {:>6}",
            c.sessions,
            c.turns,
            c.edits.proposed,
            c.edits.applied,
            c.edits.rejected,
            c.edits.undone,
            c.edits.kept,
            c.commands.run,
            c.commands.refused,
            tokens,
            format!("${:.4}", c.cost_usd),
            first
        )?;
    }
    Ok(0)
}

pub struct ExportOptions {
    pub since_days: Option<u64>,
    pub chat: bool,
    pub kept_only: bool,
    pub out: Option<std::path::PathBuf>,
    pub redact: bool,
}

pub fn export(workspace: &Workspace, options: &ExportOptions) -> anyhow::Result<u8> {
    let env = |var: &str| std::env::var(var).ok();
    let data_dir = config::data_dir(&env)?;
    let sessions = learning::sessions(&data_dir, &workspace.root, false, options.since_days);
    let redactor = options.redact.then(|| {
        let configured = workspace
            .config
            .settings()
            .filter(|(spec, _)| spec.secret)
            .filter_map(|(spec, _)| workspace.config.get(spec.key).map(str::to_owned));
        let environment = std::env::vars()
            .filter(|(name, _)| learning::redact::secret_name(name))
            .map(|(_, value)| value);
        Redactor::new(
            &workspace.root,
            configured.chain(environment).collect::<Vec<_>>(),
        )
    });
    let mut text = String::new();
    let system = options
        .chat
        .then(|| wright::agent::prompt::system_prompt(&workspace.root));
    for session in &sessions {
        if let Some(system) = &system {
            let line = trajectories::chat(session, system, redactor.as_ref());
            text.push_str(&line.to_string());
            text.push('\n');
            continue;
        }
        for landed in session.landed() {
            if !landed.applied || (options.kept_only && !landed.kept) {
                continue;
            }
            if let Some(line) = trajectories::triple(session, &landed, redactor.as_ref()) {
                text.push_str(&line.to_string());
                text.push('\n');
            }
        }
    }
    match &options.out {
        Some(path) => write_private(path, &text)?,
        None => std::io::stdout().write_all(text.as_bytes())?,
    }
    Ok(0)
}

/// The export holds code and prompts: a new file is the user's alone (0600).
fn write_private(path: &Path, text: &str) -> anyhow::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    // host path: the file the user named with --out.
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("writing {}", path.display()))?;
    file.write_all(text.as_bytes())
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}
