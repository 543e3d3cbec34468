//! The MCP servers a session has: from the configuration (user, workspace — trusted only as
//! defined when the user allowed it —, and a protocol peer's session), started as the
//! configuration says (sandboxed by default), their tools offered as `mcp__NAME__TOOL`.
