//! `wright mcp serve`: wright's engines to an MCP client, on stdio or loopback HTTP.
//!
//! The workspace is set up as `wright exec` sets up its headless session: edits land on disk
//! atomically (protected paths refused, the configured syntax gate), commands run in the
//! configured sandbox, and the symbol index is built in the background at start and brought
//! up to date before each tool that reads it.

use std::path::Path;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use anyhow::Context as _;
use wright::agent::{self, disk::DiskTarget};
use wright::index::Index;
use wright::mcp::serve::{self, Commands, InSnapshot, Server};

use super::terminal::say;
use super::workspace::Workspace;

pub fn run(root: &Path, http: Option<&str>) -> anyhow::Result<ExitCode> {
    // Checked before anything starts, so a refused address costs nothing.
    let address = http.map(serve::loopback_address).transpose()?;
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    let workspace = Workspace::load(root.to_path_buf());
    let outcome = runtime.block_on(async move {
        let server = Server::new(setup(workspace));
        match address {
            None => serve::serve_stdio(server)
                .await
                .context("serving MCP on stdio"),
            Some(address) => {
                let listener = serve::bind(address).await?;
                let bound = listener.local_addr().context("the listener's address")?;
                say!("wright: serving MCP (streamable HTTP) on http://{bound}/mcp");
                serve::serve_http(listener, server)
                    .await
                    .context("serving MCP over HTTP")
            }
        }
    });
    // The blocking threads (a command still running for a client that left) end with the
    // process, not with the runtime's drop.
    runtime.shutdown_background();
    outcome.map(|()| ExitCode::SUCCESS)
}

fn setup(workspace: Workspace) -> serve::Workspace {
    let env = |var: &str| std::env::var(var).ok();
    // Temporaries an interrupted edit left go before the index or a client can see them.
    wright::edit::apply::sweep_stale_temporaries(&workspace.root);
    let edits = Arc::new(
        DiskTarget::new(
            &workspace.root,
            super::apply::configured_gate(&workspace.root, &env),
        )
        .protecting(agent::tools::Protection::from_config(&workspace.config)),
    );
    let commands = workspace
        .cache_dir
        .as_ref()
        .map_err(ToString::to_string)
        .and_then(|dir| agent::sandboxed::pool(dir))
        .map(|pool| {
            let runner: Arc<dyn agent::tools::CommandRunner> = Arc::new(
                agent::sandboxed::SandboxRunner::in_place(pool, &workspace.root)
                    .configured(&workspace.config),
            );
            Commands {
                in_snapshot: Arc::new(InSnapshot(Arc::clone(&runner))),
                in_place: runner,
            }
        })
        .inspect_err(|err| say!("wright: commands cannot run: {err}"));
    let root = workspace.root.clone();
    let walk = workspace.walk_options();
    let index = fresh_index(workspace);
    // Built at start, so the first find_symbol on a large workspace waits less.
    {
        let index = Arc::clone(&index);
        std::thread::spawn(move || {
            if let Err(err) = index() {
                say!("wright: working without the symbol index: {err}");
            }
        });
    }
    serve::Workspace {
        root,
        walk,
        edits,
        commands,
        index,
    }
}

/// The index, opened and built on first use and refreshed (only the files changed since
/// are read again) at every later one; callers wait for a build under way.
fn fresh_index(workspace: Workspace) -> serve::IndexSource {
    let opened: Mutex<Option<Arc<Index>>> = Mutex::new(None);
    Arc::new(move || {
        let mut opened = opened.lock().unwrap_or_else(|e| e.into_inner());
        match opened.as_ref() {
            Some(index) => {
                if let Err(err) = index.refresh(&|_| {}) {
                    tracing::warn!("refreshing the index: {err}");
                }
            }
            None => {
                let (index, _) = workspace
                    .fresh_index(true)
                    .map_err(|err| format!("{err:#}"))?;
                *opened = Some(Arc::new(index));
            }
        }
        Ok(Arc::clone(opened.as_ref().expect("set above")))
    })
}
