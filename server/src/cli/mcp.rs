//! `wright mcp list` and `trust`: the configured servers, and the user's trust in a
//! workspace's server definitions.

use std::io::Write as _;
use std::path::Path;
use std::process::ExitCode;

use wright::mcp::servers::{Servers, Standing, Trust};

use super::terminal::{self, say};
use super::workspace::Workspace;

/// Starts every trusted, enabled server to ask its tools, and prints what each is.
pub fn list(root: &Path, json: bool) -> anyhow::Result<ExitCode> {
    let workspace = Workspace::load(root.to_path_buf());
    let env = |var: &str| std::env::var(var).ok();
    let data_dir = wright::config::data_dir(&env)?;
    let runtime = tokio::runtime::Runtime::new()?;
    let statuses = runtime.block_on(async {
        let servers = Servers::open(
            &workspace.config,
            &workspace.root,
            &data_dir,
            Vec::new(),
            None,
        );
        servers.started().await;
        let statuses = servers.statuses();
        servers.close().await;
        statuses
    });
    let mut out = terminal::stdout(json);
    if json {
        writeln!(out, "{}", serde_json::to_string_pretty(&statuses)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    if statuses.is_empty() {
        writeln!(
            out,
            "no MCP servers configured ([mcp.servers.NAME] in the configuration)"
        )?;
        return Ok(ExitCode::SUCCESS);
    }
    let width = statuses
        .iter()
        .map(|s| s.name.len())
        .max()
        .unwrap_or(0)
        .max(4);
    writeln!(
        out,
        "{:width$}  {:9}  {:9}  TOOLS",
        "NAME", "SOURCE", "STATE"
    )?;
    for status in &statuses {
        let state = serde_json::to_value(&status.state)?;
        let state = state.as_str().unwrap_or_default();
        let tools = match (&status.state, &status.error) {
            (Standing::Running, _) => status.tools.join(", "),
            (_, Some(error)) => error.clone(),
            _ => String::new(),
        };
        writeln!(
            out,
            "{:width$}  {:9}  {:9}  {tools}",
            status.name, status.source, state
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Trusts the workspace's definition of `name` as it is now.
pub fn trust(root: &Path, name: &str) -> anyhow::Result<ExitCode> {
    let workspace = Workspace::load(root.to_path_buf());
    let Some(server) = workspace
        .config
        .mcp_servers()
        .iter()
        .find(|server| server.name == name)
    else {
        let names: Vec<&str> = workspace
            .config
            .mcp_servers()
            .iter()
            .map(|server| server.name.as_str())
            .collect();
        say!(
            "wright: no MCP server `{name}` is configured for {} (the servers: {})",
            workspace.root.display(),
            if names.is_empty() {
                "none".to_owned()
            } else {
                names.join(", ")
            }
        );
        return Ok(ExitCode::from(1));
    };
    if server.origin != wright::config::Origin::Workspace {
        say!(
            "wright: `{name}` is defined in your own configuration ({}), which needs no trust",
            server.source
        );
        return Ok(ExitCode::SUCCESS);
    }
    let env = |var: &str| std::env::var(var).ok();
    let data_dir = wright::config::data_dir(&env)?;
    let (mut trust, problem) = Trust::load(&data_dir);
    if let Some(problem) = problem {
        anyhow::bail!("{problem}; not overwritten");
    }
    trust.trust(&data_dir, &workspace.root, server)?;
    say!(
        "wright: trusted the MCP server `{name}` as {} defines it; a change to its definition \
         needs trusting again",
        server.source
    );
    Ok(ExitCode::SUCCESS)
}
