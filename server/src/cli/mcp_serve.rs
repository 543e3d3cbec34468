//! `wright mcp serve`: wright's engines to an MCP client, on stdio or loopback HTTP.

use std::path::Path;
use std::process::ExitCode;

pub fn run(_root: &Path, _http: Option<&str>) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`wright mcp serve` is not built yet")
}
