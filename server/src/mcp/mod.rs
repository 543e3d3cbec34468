//! MCP (modelcontextprotocol.io), both halves: `client` talks to the servers whose tools the
//! agent offers the model, `servers` is which servers a session has (configuration, trust,
//! the `mcp__NAME__TOOL` tools), `serve` offers wright's own engines as an MCP server.

pub mod client;
pub mod serve;
pub mod servers;
