//! `[mcp.servers.NAME]`: the MCP servers the configuration defines, read and checked per
//! layer, then combined — the user's layers define servers (the later wins by name), a
//! workspace file may define new ones (which start only once the user trusted that exact
//! definition) and may tighten the user's (tools intersected, `approve` stricter), never
//! loosen them, and never runs a server unconfined.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;
use serde_json::Value as Json;

use super::Source;

/// How the model's calls to a server's tools are approved.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Approve {
    /// Asked before each call (headless: not run).
    #[default]
    Ask,
    /// Run without asking.
    Auto,
}

/// How a server is reached.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Reach {
    /// A program wright starts, talking on its stdin and stdout.
    Stdio {
        command: String,
        args: Vec<String>,
        /// Set for the server; nothing else of wright's environment reaches it but PATH,
        /// HOME and LANG.
        env: BTreeMap<String, String>,
        cwd: Option<PathBuf>,
        /// Inside wright's sandbox (the default).
        sandbox: bool,
        /// A sandboxed server's network (default none).
        network: bool,
        /// More paths a sandboxed server may write.
        writable: Vec<PathBuf>,
    },
    /// Streamable HTTP.
    Http {
        url: String,
        /// The environment variable holding the bearer token.
        bearer_token_env: Option<String>,
        /// Headers sent with every request (an ACP client's `headers`; never from a file).
        #[serde(skip_serializing_if = "Vec::is_empty")]
        headers: Vec<(String, String)>,
    },
}

/// Where a server was defined, in `wright mcp list`'s words.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Origin {
    User,
    Workspace,
    /// Given by a protocol peer for one session (ACP's `mcpServers`).
    Session,
}

impl Origin {
    pub fn name(self) -> &'static str {
        match self {
            Self::User => "user",
            Self::Workspace => "workspace",
            Self::Session => "session",
        }
    }
}

/// One configured server.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct McpServer {
    pub name: String,
    #[serde(skip)]
    pub origin: Origin,
    /// The layer that defined it (for messages).
    #[serde(skip)]
    pub source: Source,
    pub reach: Reach,
    pub approve: Approve,
    /// The tools offered to the model; `None` offers them all.
    pub tools: Option<Vec<String>>,
    /// Per call.
    pub timeout_secs: u64,
    pub enabled: bool,
}

/// The default per-call timeout.
pub const DEFAULT_TIMEOUT_SECS: u64 = 60;

impl McpServer {
    /// The definition as trust compares it: every field that decides what runs and how,
    /// keys in a fixed order, so the same definition always gives the same text and any
    /// change gives another.
    pub fn normalised(&self) -> String {
        serde_json::to_string(self).expect("a definition serialises")
    }

    /// Whether `tool` is offered (the allow-list, when there is one).
    pub fn allows(&self, tool: &str) -> bool {
        self.tools
            .as_ref()
            .is_none_or(|tools| tools.iter().any(|t| t == tool))
    }
}

/// Whether `name` may name a server: it goes into tool names (`mcp__NAME__TOOL`), which
/// model providers restrict to these characters. No `__` in it and no `_` at its end, or
/// two servers' tools could share a name (`a` with `b__c`, `a__b` with `c`).
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 32
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        && !name.contains("__")
        && !name.ends_with('_')
}

/// What [`valid_name`] asks, in words.
pub const NAME_RULE: &str = "a server's name may hold only letters, digits, `_` and `-` (at \
                             most 32; no `__`, no `_` at the end), since it goes into the \
                             names of its tools (`mcp__NAME__TOOL`)";

const KNOWN: &[&str] = &[
    "command",
    "args",
    "env",
    "cwd",
    "sandbox",
    "network",
    "writable",
    "approve",
    "tools",
    "timeout_secs",
    "enabled",
    "url",
    "bearer_token_env",
];

/// What a workspace file may say of a server the user defined: only what tightens it.
const TIGHTENING: &[&str] = &["approve", "tools", "enabled"];

/// One layer's `[mcp.servers.NAME]` table, checked: every key known and of its type.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Table {
    pub name: String,
    keys: Vec<String>,
    command: Option<String>,
    args: Vec<String>,
    env: BTreeMap<String, String>,
    cwd: Option<PathBuf>,
    sandbox: Option<bool>,
    network: Option<bool>,
    writable: Vec<PathBuf>,
    approve: Option<Approve>,
    tools: Option<Vec<String>>,
    timeout_secs: Option<u64>,
    enabled: Option<bool>,
    url: Option<String>,
    bearer_token_env: Option<String>,
}

/// Reads one layer's `mcp` section (`{"servers": {NAME: {...}}}`): the tables it defines,
/// and a problem for each thing wrong (that server, or that key, is ignored).
pub(super) fn read_section(value: &Json, problems: &mut Vec<String>) -> Vec<Table> {
    let Json::Object(section) = value else {
        problems.push(format!("`mcp` must be a table, found {value} (ignored)"));
        return Vec::new();
    };
    let mut tables = Vec::new();
    for (key, value) in section {
        if key != "servers" {
            problems.push(format!("unknown key `mcp.{key}` (ignored)"));
            continue;
        }
        let Json::Object(servers) = value else {
            problems.push(format!(
                "`mcp.servers` must be a table of servers, found {value} (ignored)"
            ));
            continue;
        };
        for (name, value) in servers {
            match read_table(name, value) {
                Ok(table) => tables.push(table),
                Err(why) => problems.push(format!("`mcp.servers.{name}`: {why} (ignored)")),
            }
        }
    }
    tables
}

fn read_table(name: &str, value: &Json) -> Result<Table, String> {
    if !valid_name(name) {
        return Err(NAME_RULE.to_owned());
    }
    let Json::Object(map) = value else {
        return Err(format!("expected a table, found {value}"));
    };
    let mut table = Table {
        name: name.to_owned(),
        ..Table::default()
    };
    let text = |key: &str, value: &Json| -> Result<String, String> {
        value
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| format!("`{key}` must be a string, found {value}"))
    };
    let boolean = |key: &str, value: &Json| -> Result<bool, String> {
        value
            .as_bool()
            .ok_or_else(|| format!("`{key}` must be true or false, found {value}"))
    };
    let strings = |key: &str, value: &Json| -> Result<Vec<String>, String> {
        let items = value
            .as_array()
            .ok_or_else(|| format!("`{key}` must be a list of strings, found {value}"))?;
        items
            .iter()
            .map(|item| {
                item.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| format!("`{key}` must be a list of strings, found {item} in it"))
            })
            .collect()
    };
    for (key, value) in map {
        let key = key.as_str();
        if !KNOWN.contains(&key) {
            return Err(format!(
                "unknown key `{key}` (the keys are: {})",
                KNOWN.join(", ")
            ));
        }
        table.keys.push(key.to_owned());
        match key {
            "command" => {
                let command = text(key, value)?;
                if command.trim().is_empty() {
                    return Err("`command` is empty".to_owned());
                }
                table.command = Some(command);
            }
            "args" => table.args = strings(key, value)?,
            "env" => {
                let Json::Object(env) = value else {
                    return Err(format!("`env` must be a table of strings, found {value}"));
                };
                for (var, value) in env {
                    if var.is_empty() || var.contains('=') || var.contains('\0') {
                        return Err(format!("`env`: {var:?} is not a variable name"));
                    }
                    table
                        .env
                        .insert(var.clone(), text(&format!("env.{var}"), value)?);
                }
            }
            "cwd" => table.cwd = Some(PathBuf::from(text(key, value)?)),
            "sandbox" => table.sandbox = Some(boolean(key, value)?),
            "network" => table.network = Some(boolean(key, value)?),
            "writable" => {
                table.writable = strings(key, value)?
                    .into_iter()
                    .map(PathBuf::from)
                    .collect()
            }
            "approve" => {
                table.approve = Some(match text(key, value)?.as_str() {
                    "ask" => Approve::Ask,
                    "auto" => Approve::Auto,
                    other => {
                        return Err(format!(
                            "`approve` must be \"ask\" or \"auto\", found {other:?}"
                        ));
                    }
                })
            }
            "tools" => table.tools = Some(strings(key, value)?),
            "timeout_secs" => match value.as_u64() {
                Some(secs) if secs > 0 => table.timeout_secs = Some(secs),
                _ => {
                    return Err(format!(
                        "`timeout_secs` must be a positive number, found {value}"
                    ));
                }
            },
            "enabled" => table.enabled = Some(boolean(key, value)?),
            "url" => {
                let url = text(key, value)?;
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(format!(
                        "`url` must start with http:// or https://, found {url:?}"
                    ));
                }
                table.url = Some(url);
            }
            "bearer_token_env" => table.bearer_token_env = Some(text(key, value)?),
            _ => unreachable!("every known key is read"),
        }
    }
    Ok(table)
}

impl Table {
    /// The server this table defines on its own (a user's, or a workspace's new one).
    fn define(&self, origin: Origin, source: Source) -> Result<McpServer, String> {
        let reach = match (&self.command, &self.url) {
            (Some(_), Some(_)) => {
                return Err("give either `command` (stdio) or `url` (HTTP), not both".to_owned());
            }
            (None, None) => {
                return Err("give `command` (a stdio server) or `url` (an HTTP server)".to_owned());
            }
            (Some(command), None) => {
                let http_only = ["bearer_token_env"];
                if let Some(key) = self.keys.iter().find(|k| http_only.contains(&k.as_str())) {
                    return Err(format!("`{key}` is for HTTP servers (with `url`)"));
                }
                Reach::Stdio {
                    command: command.clone(),
                    args: self.args.clone(),
                    env: self.env.clone(),
                    cwd: self.cwd.clone(),
                    sandbox: self.sandbox.unwrap_or(true),
                    network: self.network.unwrap_or(false),
                    writable: self.writable.clone(),
                }
            }
            (None, Some(url)) => {
                let stdio_only = ["args", "env", "cwd", "sandbox", "network", "writable"];
                if let Some(key) = self.keys.iter().find(|k| stdio_only.contains(&k.as_str())) {
                    return Err(format!("`{key}` is for stdio servers (with `command`)"));
                }
                Reach::Http {
                    url: url.clone(),
                    bearer_token_env: self.bearer_token_env.clone(),
                    headers: Vec::new(),
                }
            }
        };
        if origin == Origin::Workspace
            && let Reach::Stdio { sandbox: false, .. } = reach
        {
            return Err(
                "`sandbox = false` may not come from a workspace file: a repository must not \
                 choose a program wright runs on your machine outside the sandbox; define the \
                 server in your user file if you trust it"
                    .to_owned(),
            );
        }
        Ok(McpServer {
            name: self.name.clone(),
            origin,
            source,
            reach,
            approve: self.approve.unwrap_or_default(),
            tools: self.tools.clone(),
            timeout_secs: self.timeout_secs.unwrap_or(DEFAULT_TIMEOUT_SECS),
            enabled: self.enabled.unwrap_or(true),
        })
    }

    /// A workspace file's table for a server the user defined: it may only tighten it.
    fn tighten(&self, server: &mut McpServer) -> Result<(), String> {
        if let Some(key) = self.keys.iter().find(|k| !TIGHTENING.contains(&k.as_str())) {
            return Err(format!(
                "`{key}`: a workspace file may only tighten a server you defined ({}); it \
                 may not change how it runs",
                TIGHTENING.join(", ")
            ));
        }
        if self.approve == Some(Approve::Ask) {
            server.approve = Approve::Ask;
        }
        if let Some(tools) = &self.tools {
            server.tools = Some(match &server.tools {
                Some(mine) => mine.iter().filter(|t| tools.contains(t)).cloned().collect(),
                None => tools.clone(),
            });
        }
        if self.enabled == Some(false) {
            server.enabled = false;
        }
        Ok(())
    }
}

/// Combines the layers' tables, in layer order: `(source, is the user's, tables)`.
pub(super) fn combine(
    layers: &[(&Source, bool, &[Table])],
    problems: &mut Vec<super::Problem>,
) -> Vec<McpServer> {
    let mut servers: Vec<McpServer> = Vec::new();
    let mut problem = |source: &Source, message: String| {
        problems.push(super::Problem {
            source: source.clone(),
            message,
        })
    };
    // The user's layers first, the later winning, so that a workspace table is measured
    // against what the user decided whatever the order of the layers.
    for (source, _, tables) in layers.iter().filter(|(_, user, _)| *user) {
        for table in *tables {
            match table.define(Origin::User, (*source).clone()) {
                Ok(server) => match servers.iter_mut().find(|s| s.name == server.name) {
                    Some(earlier) => *earlier = server,
                    None => servers.push(server),
                },
                Err(why) => problem(
                    source,
                    format!("`mcp.servers.{}`: {why} (ignored)", table.name),
                ),
            }
        }
    }
    let users = servers.len();
    for (source, _, tables) in layers.iter().filter(|(_, user, _)| !*user) {
        for table in *tables {
            let result = match servers.iter().position(|s| s.name == table.name) {
                Some(at) if at < users => table.tighten(&mut servers[at]),
                Some(_) => Err("defined by another workspace file already".to_owned()),
                None => table
                    .define(Origin::Workspace, (*source).clone())
                    .map(|server| servers.push(server)),
            };
            if let Err(why) = result {
                problem(
                    source,
                    format!("`mcp.servers.{}`: {why} (ignored)", table.name),
                );
            }
        }
    }
    servers
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_name_that_could_make_two_servers_tools_collide_is_refused() {
        for good in ["everything", "my-db", "a_b", "x1"] {
            assert!(valid_name(good), "{good}");
        }
        // `a__b` with tool `c` and `a` with tool `b__c` would both be `mcp__a__b__c`.
        for bad in ["a__b", "a_", "", "a b", "é", &"x".repeat(33)] {
            assert!(!valid_name(bad), "{bad}");
        }
    }

    fn tables(value: Json) -> (Vec<Table>, Vec<String>) {
        let mut problems = Vec::new();
        let tables = read_section(&value, &mut problems);
        (tables, problems)
    }

    fn servers(user: Json, workspace: Json) -> (Vec<McpServer>, Vec<String>) {
        let (user, mut messages) = tables(user);
        let (workspace, more) = tables(workspace);
        messages.extend(more);
        let (u, w) = (
            Source::UserFile("user.toml".into()),
            Source::WorkspaceFile("ws.toml".into()),
        );
        let mut problems = Vec::new();
        let servers = combine(&[(&u, true, &user), (&w, false, &workspace)], &mut problems);
        messages.extend(problems.iter().map(|p| p.message.clone()));
        (servers, messages)
    }

    #[test]
    fn a_stdio_server_takes_its_defaults() {
        let (servers, problems) = servers(
            json!({"servers": {"everything": {"command": "node", "args": ["a.js", "stdio"]}}}),
            json!({}),
        );
        assert!(problems.is_empty(), "{problems:?}");
        let server = &servers[0];
        assert_eq!(server.approve, Approve::Ask);
        assert_eq!(server.timeout_secs, 60);
        assert!(server.enabled);
        let Reach::Stdio {
            sandbox, network, ..
        } = &server.reach
        else {
            panic!("{server:?}")
        };
        assert!(*sandbox && !*network);
    }

    #[test]
    fn bad_tables_say_what_is_wrong_and_are_ignored() {
        let cases = [
            (
                json!({"x": {"command": "a", "colour": 1}}),
                "unknown key `colour`",
            ),
            (json!({"x": {"command": 3}}), "`command` must be a string"),
            (
                json!({"x": {"command": "a", "approve": "never"}}),
                "\"ask\" or \"auto\"",
            ),
            (
                json!({"x": {"command": "a", "timeout_secs": 0}}),
                "positive number",
            ),
            (
                json!({"x": {"command": "a", "url": "http://h"}}),
                "not both",
            ),
            (json!({"x": {"args": []}}), "give `command`"),
            (json!({"x": {"url": "ftp://h"}}), "http://"),
            (
                json!({"x": {"url": "http://h", "sandbox": true}}),
                "for stdio servers",
            ),
            (json!({"a.b": {"command": "a"}}), "letters, digits"),
            (
                json!({"x": {"command": "a", "tools": "echo"}}),
                "list of strings",
            ),
        ];
        for (value, expected) in cases {
            let (servers, problems) = servers(json!({"servers": value}), json!({}));
            assert!(servers.is_empty(), "{value}: {servers:?}");
            assert_eq!(problems.len(), 1, "{value}: {problems:?}");
            assert!(problems[0].contains(expected), "{value}: {problems:?}");
        }
        let (_, problems) = tables(json!({"server": {}}));
        assert!(
            problems[0].contains("unknown key `mcp.server`"),
            "{problems:?}"
        );
    }

    #[test]
    fn a_workspace_defines_new_servers_sandboxed_only_and_tightens_the_users() {
        let (servers, problems) = servers(
            json!({"servers": {"mine": {"command": "m", "approve": "auto", "tools": ["a", "b"]}}}),
            json!({"servers": {
                "mine": {"tools": ["b", "c"], "approve": "ask"},
                "theirs": {"command": "t"},
                "loose": {"command": "l", "sandbox": false},
            }}),
        );
        assert_eq!(servers.len(), 2, "{servers:?}");
        assert_eq!(servers[0].tools, Some(vec!["b".to_owned()]));
        assert_eq!(servers[0].approve, Approve::Ask);
        assert_eq!(servers[0].origin, Origin::User);
        assert_eq!(servers[1].name, "theirs");
        assert_eq!(servers[1].origin, Origin::Workspace);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("`sandbox = false` may not come from a workspace"));
        // Loosening: an approve = auto or a new command for the user's server is refused.
        let (servers, problems) = servers_pair(
            json!({"servers": {"mine": {"command": "m"}}}),
            json!({"servers": {"mine": {"command": "evil"}}}),
        );
        assert_eq!(
            servers[0].reach,
            Reach::Stdio {
                command: "m".into(),
                args: vec![],
                env: BTreeMap::new(),
                cwd: None,
                sandbox: true,
                network: false,
                writable: vec![],
            }
        );
        assert!(problems[0].contains("may only tighten"), "{problems:?}");
        let (servers, _) = servers_pair(
            json!({"servers": {"mine": {"command": "m"}}}),
            json!({"servers": {"mine": {"approve": "auto"}}}),
        );
        assert_eq!(servers[0].approve, Approve::Ask);
    }

    fn servers_pair(user: Json, workspace: Json) -> (Vec<McpServer>, Vec<String>) {
        servers(user, workspace)
    }

    #[test]
    fn the_normalised_definition_changes_with_anything_that_decides_what_runs() {
        let (a, _) = servers(
            json!({}),
            json!({"servers": {"s": {"command": "x", "args": ["1"]}}}),
        );
        let (b, _) = servers(
            json!({}),
            json!({"servers": {"s": {"args": ["1"], "command": "x"}}}),
        );
        let (c, _) = servers(
            json!({}),
            json!({"servers": {"s": {"command": "x", "args": ["2"]}}}),
        );
        assert_eq!(a[0].normalised(), b[0].normalised());
        assert_ne!(a[0].normalised(), c[0].normalised());
    }
}
