//! `wright mcp list`, `check` and `trust`: the configured servers, one server's tools, and
//! the user's trust in a workspace's server definitions.

use std::path::Path;
use std::process::ExitCode;

pub fn list(_root: &Path, _json: bool) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`wright mcp list` is not built yet")
}

pub fn check(
    _root: &Path,
    _server: &[String],
    _call: Option<&str>,
    _args: Option<&str>,
    _json: bool,
) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`wright mcp check` is not built yet")
}

pub fn trust(_root: &Path, _name: &str) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`wright mcp trust` is not built yet")
}
