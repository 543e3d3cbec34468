//! `wright mcp serve`: the agent's own tools (symbols, grep, reads, context, edits, patches,
//! sandboxed commands) offered to any MCP client.
