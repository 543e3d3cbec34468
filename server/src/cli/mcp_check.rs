//! `wright mcp check URL|-- COMMAND…`: connect to one MCP server, initialize, list its tools and
//! optionally call one — what a user runs to see whether a server works, and why not.

use std::io::Write as _;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use serde_json::{Value, json};
use wright::mcp::client::{CallOutput, Client, Options, Transport, Unconfined};
use wright::sandbox::host::HostCommand;

use crate::cli::terminal;

/// What `check` was asked.
pub struct Check<'a> {
    pub root: &'a Path,
    pub server: &'a [String],
    pub call: Option<&'a str>,
    pub args: Option<&'a str>,
    pub json: bool,
    pub timeout: Option<u64>,
    pub bearer_token_env: Option<&'a str>,
}

/// Exit 0: connected (and the call, if any, succeeded); 1: the call failed or returned
/// `isError`; 2: bad usage, or the server could not be reached or initialized.
pub fn run(check: Check<'_>) -> anyhow::Result<ExitCode> {
    // No configuration names the server: messages name it by its URL or command line.
    let (transport, name) = transport(&check)?;
    let arguments = match check.args {
        None => serde_json::Map::new(),
        Some(text) => match serde_json::from_str::<Value>(text)
            .with_context(|| format!("--args is not JSON: {text}"))?
        {
            Value::Object(map) => map,
            _ => anyhow::bail!("--args must be a JSON object, like '{{\"message\":\"hi\"}}'"),
        },
    };
    let mut options = Options::default();
    if let Some(secs) = check.timeout {
        options.call_timeout = Duration::from_secs(secs);
    }
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    runtime.block_on(async move {
        let client = Client::connect(&name, transport, options)
            .await
            .map_err(anyhow::Error::new)?;
        let result = match check.call {
            Some(tool) => Some(client.call(tool, arguments).await),
            None => None,
        };
        client.close().await;
        report(&client, &name, check.json, result)
    })
}

/// How to reach the server, and its name for messages.
fn transport(check: &Check<'_>) -> anyhow::Result<(Transport, String)> {
    let server = check.server;
    let first = server.first().map(String::as_str).unwrap_or_default();
    if first == "--" || !(first.starts_with("http://") || first.starts_with("https://")) {
        let command = if first == "--" { &server[1..] } else { server };
        let Some((program, args)) = command.split_first() else {
            anyhow::bail!(
                "no command after `--`: `wright mcp check -- mcp-server-everything stdio`"
            );
        };
        if check.bearer_token_env.is_some() {
            anyhow::bail!("--bearer-token-env is for an HTTP server (a URL)");
        }
        let stdio = Transport::Stdio(Arc::new(Unconfined(HostCommand {
            program: program.clone(),
            args: args.to_vec(),
            cwd: check.root.to_path_buf(),
            env: Vec::new(),
        })));
        return Ok((stdio, command.join(" ")));
    }
    if server.len() > 1 {
        anyhow::bail!(
            "one URL, or `--` and a command: `{}` follows the URL",
            server[1..].join(" ")
        );
    }
    let bearer_token = match check.bearer_token_env {
        None => None,
        Some(variable) => Some(
            std::env::var(variable)
                .with_context(|| format!("--bearer-token-env: ${variable} is not set"))?,
        ),
    };
    let http = Transport::Http {
        url: first.to_owned(),
        bearer_token,
    };
    Ok((http, first.to_owned()))
}

fn report(
    client: &Client,
    server: &str,
    json: bool,
    result: Option<Result<CallOutput, wright::mcp::client::McpError>>,
) -> anyhow::Result<ExitCode> {
    let tools = client.tools();
    let failed = match &result {
        Some(Ok(output)) => output.is_error,
        Some(Err(_)) => true,
        None => false,
    };
    if json {
        let mut document = json!({
            "server": client.server_name().unwrap_or_else(|| server.to_owned()),
            "protocolVersion": client.protocol_version(),
            "tools": tools.iter().map(|tool| json!({
                "name": tool.name,
                "description": tool.description,
                "inputSchema": tool.input_schema,
            })).collect::<Vec<_>>(),
        });
        if let Some(result) = &result {
            document["result"] = match result {
                Ok(output) => json!({
                    "content": output.text,
                    "isError": output.is_error,
                    "images": output.images.len(),
                }),
                Err(error) => json!({"content": error.to_string(), "isError": true}),
            };
        }
        let mut out = terminal::stdout(true);
        writeln!(out, "{document}")?;
        out.flush()?;
    } else {
        let mut out = terminal::stdout(false);
        writeln!(
            out,
            "{} (protocol {}): {} tool{}",
            client.server_name().unwrap_or_else(|| server.to_owned()),
            client.protocol_version(),
            tools.len(),
            if tools.len() == 1 { "" } else { "s" }
        )?;
        for tool in &tools {
            let first_line = tool
                .description
                .as_deref()
                .and_then(|d| d.lines().find(|l| !l.trim().is_empty()))
                .unwrap_or("")
                .trim();
            writeln!(out, "  {}  {first_line}", tool.name)?;
        }
        match &result {
            Some(Ok(output)) => {
                writeln!(
                    out,
                    "{}",
                    if output.is_error {
                        "result (isError):"
                    } else {
                        "result:"
                    }
                )?;
                writeln!(out, "{}", output.text)?;
            }
            Some(Err(error)) => {
                out.flush()?;
                terminal::say!("wright: {error}");
            }
            None => {}
        }
        out.flush()?;
    }
    Ok(ExitCode::from(if failed { 1 } else { 0 }))
}
