//! `wright mcp list` and `trust`: the configured servers, and the user's trust in a
//! workspace's server definitions.

use std::path::Path;
use std::process::ExitCode;

pub fn list(_root: &Path, _json: bool) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`wright mcp list` is not built yet")
}

pub fn trust(_root: &Path, _name: &str) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`wright mcp trust` is not built yet")
}
