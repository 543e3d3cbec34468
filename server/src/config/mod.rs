//! Configuration: the layers `docs/design.md` names, merged key by key, remembering where each value
//! came from.
//!
//! Layers, lowest precedence first: built-in defaults, the user file
//! (`$XDG_CONFIG_HOME/wright/config.toml`), each workspace root's `.wright/config.toml`, the
//! client's `initializationOptions`, the client's `workspace/didChangeConfiguration` settings,
//! and the environment. A workspace file is the repository's, untrusted: each key's
//! [`Merge`] rule says how it combines with the user's layers (the rest are the user's).
//! Invariants: a bad layer never stops the server (its problems are collected and reported,
//! and its valid keys still apply); a secret's value never appears in any rendering of the
//! configuration; a workspace file cannot set where credentials are sent, name a file to load
//! or run, loosen a policy key, or override the user's model unless the user allowed it.

mod mcp;
mod merge;
mod policy;
mod schema;
#[cfg(test)]
mod trust_tests;
pub mod values;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde_json::Value as Json;

use crate::files::{self, FileError, Root};

pub use mcp::{Approve, DEFAULT_TIMEOUT_SECS, McpServer, NAME_RULE, Origin, Reach, valid_name};
pub use merge::Part;
pub use policy::{ALWAYS_PROTECTED, Fallback, SandboxSettings};
pub use schema::{KEYS, KeySpec, Kind, Merge, reference};

/// Where a value came from, in the words a user would look for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    Default,
    UserFile(PathBuf),
    WorkspaceFile(PathBuf),
    InitializationOptions,
    ClientSettings,
    Environment(&'static str),
    /// Given by a protocol peer for one session (an ACP client's `mcpServers`).
    Session,
    /// A value several layers made together (a list combined from the user's and a
    /// repository's).
    Combined(Vec<Source>),
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Default => f.write_str("default"),
            Self::UserFile(path) => write!(f, "user file {}", path.display()),
            Self::WorkspaceFile(path) => write!(f, "workspace file {}", path.display()),
            Self::InitializationOptions => f.write_str("initializationOptions"),
            Self::ClientSettings => f.write_str("workspace/didChangeConfiguration"),
            Self::Environment(var) => write!(f, "environment {var}"),
            Self::Session => f.write_str("the client's session"),
            Self::Combined(sources) => {
                f.write_str("combined from ")?;
                for (i, source) in sources.iter().enumerate() {
                    if i > 0 {
                        f.write_str(" and ")?;
                    }
                    write!(f, "{source}")?;
                }
                Ok(())
            }
        }
    }
}

/// Something wrong with one layer: reported to the user, never fatal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    pub source: Source,
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.source, self.message)
    }
}

/// The state of a configuration file, for `wright doctor`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FileState {
    Missing,
    Loaded,
    Invalid,
}

impl fmt::Display for FileState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Missing => "not found",
            Self::Loaded => "loaded",
            Self::Invalid => "invalid (see problems)",
        })
    }
}

/// One layer's accepted values, and what was wrong with the rest of it.
#[derive(Clone, Debug)]
struct Layer {
    source: Source,
    values: BTreeMap<&'static str, String>,
    /// Its `[mcp.servers.NAME]` tables, each checked on its own.
    mcp: Vec<mcp::Table>,
    problems: Vec<Problem>,
}

impl Layer {
    fn empty(source: Source) -> Self {
        Self {
            source,
            values: BTreeMap::new(),
            mcp: Vec::new(),
            problems: Vec::new(),
        }
    }

    fn problem(&mut self, message: String) {
        self.problems.push(Problem {
            source: self.source.clone(),
            message,
        });
    }

    /// Takes the keys of a JSON object (TOML is converted to JSON first), nested or dotted,
    /// `snake_case` or `camelCase`, checking each against the schema.
    fn from_json(source: Source, value: &Json) -> Self {
        let mut layer = Self::empty(source);
        match value {
            Json::Null => {}
            Json::Object(_) => layer.take_object("", value),
            other => layer.problem(format!("expected a table of settings, found {other}")),
        }
        layer
    }

    fn take_object(&mut self, prefix: &str, value: &Json) {
        let Json::Object(map) = value else { return };
        for (name, value) in map {
            let key = if prefix.is_empty() {
                snake_case(name)
            } else {
                format!("{prefix}.{}", snake_case(name))
            };
            match (value, schema::find(&key)) {
                // Clients send null for a setting the user left unset.
                (Json::Null, _) => {}
                // Servers are named by the user, so their tables are read apart.
                (_, None) if key == "mcp" => {
                    let mut problems = Vec::new();
                    self.mcp = mcp::read_section(value, &mut problems);
                    for message in problems {
                        self.problem(message);
                    }
                }
                (_, Some(spec)) => self.take_value(spec, value),
                (Json::Object(_), None) if schema::is_section(&key) => {
                    self.take_object(&key, value)
                }
                (_, None) => self.problem(format!("unknown key `{key}` (ignored)")),
            }
        }
    }

    fn take_value(&mut self, spec: &'static KeySpec, value: &Json) {
        let workspace = matches!(self.source, Source::WorkspaceFile(_));
        if let (true, Merge::UserOnly(why)) = (workspace, spec.merge) {
            let env = spec
                .env
                .map(|var| format!(" or the environment ({var})"))
                .unwrap_or_default();
            self.problem(format!(
                "`{}` may not be set in a workspace file: {why}; set it in your user file{env}",
                spec.key
            ));
            return;
        }
        let text = match (spec.kind, value) {
            (_, Json::String(text)) => text.clone(),
            (Kind::Integer, Json::Number(n)) => n.to_string(),
            (Kind::Bool, Json::Bool(b)) => b.to_string(),
            (Kind::List, Json::Array(entries)) => {
                let mut items = Vec::with_capacity(entries.len());
                for entry in entries {
                    match entry.as_str().map(str::trim) {
                        Some(item) if item.contains(';') => {
                            return self.problem(format!(
                                "`{}`: the item {item:?} holds a `;`, which separates items \
                                 (ignored)",
                                spec.key
                            ));
                        }
                        Some(item) => items.push(item.to_owned()),
                        None => {
                            return self.problem(format!(
                                "`{}` must be a list of strings, found {entry} in it (ignored)",
                                spec.key
                            ));
                        }
                    }
                }
                items.join("; ")
            }
            (kind, other) => {
                let expected = match kind {
                    Kind::Text | Kind::Integer => "a string",
                    Kind::Bool => "true or false",
                    Kind::List => "a string or a list of strings",
                };
                return self.problem(format!(
                    "`{}` must be {expected}, found {other} (ignored)",
                    spec.key
                ));
            }
        };
        // A list is kept as its items joined by "; ", whichever way it was spelled.
        let text = match spec.kind {
            Kind::List => schema::items(&text).collect::<Vec<_>>().join("; "),
            _ => text,
        };
        if let Err(why) = (spec.validate)(&text) {
            return self.problem(format!("`{}`: {why} (ignored)", spec.key));
        }
        if let (true, Some(refuses)) = (workspace, spec.workspace_refuses)
            && let Some(why) = refuses(&text)
        {
            return self.problem(format!("`{}` = {why} (ignored)", spec.key));
        }
        self.values.insert(spec.key, text);
    }
}

/// `baseUrl` → `base_url`; already snake-case names pass through.
fn snake_case(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    for ch in name.chars() {
        if ch.is_ascii_uppercase() {
            out.push('_');
            out.push(ch.to_ascii_lowercase());
        } else {
            out.push(ch);
        }
    }
    out
}

/// The configuration files a server or command reads, and the client and environment layers.
#[derive(Clone, Debug)]
pub struct Layers {
    user_file: Option<PathBuf>,
    files: Vec<(PathBuf, FileState, Layer)>,
    initialization_options: Option<Layer>,
    client_settings: Option<Layer>,
    /// One layer per variable, so each value names the variable it came from.
    environment: Vec<Layer>,
}

impl Layers {
    /// Reads the user file (when a path is known), each root's workspace file, and the
    /// environment through `env` (the process environment in production, a map in tests).
    pub fn load(
        user_file: Option<PathBuf>,
        roots: &[PathBuf],
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Self {
        let mut layers = Self {
            user_file,
            files: Vec::new(),
            initialization_options: None,
            client_settings: None,
            environment: environment_layers(env),
        };
        layers.reload_files(roots);
        layers
    }

    /// Re-reads every file, for example after a watched file changed or the workspace folders
    /// did.
    pub fn reload_files(&mut self, roots: &[PathBuf]) {
        self.files.clear();
        if let Some(path) = self.user_file.clone() {
            let bytes = files::read_bounded(&path, MAX_CONFIG_FILE);
            let layer = read_file(bytes, Source::UserFile(path.clone()));
            self.files.push((path, layer.0, layer.1));
        }
        for root in roots {
            let path = workspace_file(root);
            // Through the workspace root: a repository's `.wright` may be a link out, its
            // file a FIFO or a link to /dev/zero.
            let bytes = Root::open(root).and_then(|tree| {
                tree.read(
                    &Path::new(WORKSPACE_DIR).join(WORKSPACE_FILE),
                    MAX_CONFIG_FILE,
                )
            });
            let layer = read_file(bytes, Source::WorkspaceFile(path.clone()));
            self.files.push((path, layer.0, layer.1));
        }
    }

    pub fn set_initialization_options(&mut self, options: &Json) {
        self.initialization_options = Some(Layer::from_json(
            Source::InitializationOptions,
            client_section(options),
        ));
    }

    pub fn set_client_settings(&mut self, settings: &Json) {
        self.client_settings = Some(Layer::from_json(
            Source::ClientSettings,
            client_section(settings),
        ));
    }

    /// Whether `path` is one of the configuration files, so a change to it means a reload.
    pub fn is_config_file(&self, path: &Path) -> bool {
        self.files.iter().any(|(file, _, _)| file == path)
    }

    /// The files considered, in precedence order, with what became of each.
    pub fn files(&self) -> impl Iterator<Item = (&Path, &FileState)> {
        self.files
            .iter()
            .map(|(path, state, _)| (path.as_path(), state))
    }

    fn layers(&self) -> impl Iterator<Item = &Layer> {
        self.files
            .iter()
            .map(|(_, _, layer)| layer)
            .chain(&self.initialization_options)
            .chain(&self.client_settings)
            .chain(&self.environment)
    }

    /// Merges the layers, key by key, by each key's [`Merge`] rule: among the user's layers
    /// the later wins; a workspace file's value combines with theirs as the rule says.
    pub fn resolve(&self) -> Config {
        let layers: Vec<&Layer> = self.layers().collect();
        let given = |key: &str| -> Vec<merge::Given<'_>> {
            layers
                .iter()
                .filter_map(|layer| {
                    Some(merge::Given {
                        value: layer.values.get(key)?,
                        source: &layer.source,
                        user: !matches!(layer.source, Source::WorkspaceFile(_)),
                    })
                })
                .collect()
        };
        let mut config = Config {
            problems: layers
                .iter()
                .flat_map(|layer| layer.problems.iter().cloned())
                .collect(),
            ..Config::default()
        };
        let tables: Vec<_> = layers
            .iter()
            .map(|layer| {
                let user = !matches!(layer.source, Source::WorkspaceFile(_));
                (&layer.source, user, layer.mcp.as_slice())
            })
            .collect();
        config.mcp_servers = mcp::combine(&tables, &mut config.problems);
        for spec in KEYS {
            let choice = match spec.merge {
                Merge::UserChoice { group, allowed_by } => merge::Choice {
                    allowed: user_value(allowed_by, &given(allowed_by)) == Some("true"),
                    user_chose: KEYS
                        .iter()
                        .filter(|other| {
                            matches!(other.merge, Merge::UserChoice { group: g, .. } if g == group)
                        })
                        .any(|other| given(other.key).iter().any(|g| g.user)),
                },
                _ => merge::Choice {
                    allowed: false,
                    user_chose: false,
                },
            };
            let combined = merge::combine(spec, &given(spec.key), &choice);
            if let Some((value, source)) = combined.value {
                config
                    .values
                    .insert(spec.key, Setting::new(spec, value, source));
            }
            if !combined.parts.is_empty() {
                config.parts.insert(spec.key, combined.parts);
            }
        }
        config
    }
}

/// The value the user's own layers give `key` (the last of them), else its default.
fn user_value<'a>(key: &str, given: &[merge::Given<'a>]) -> Option<&'a str> {
    given
        .iter()
        .rev()
        .find(|g| g.user)
        .map(|g| g.value)
        .or_else(|| schema::find(key).and_then(|spec| spec.default))
}

/// VS Code and others send settings under the extension's section (`{"wright": {...}}`); other
/// clients send the table itself. Both mean the same.
fn client_section(value: &Json) -> &Json {
    match value.get("wright") {
        Some(section @ Json::Object(_)) => section,
        _ => value,
    }
}

fn environment_layers(env: &dyn Fn(&str) -> Option<String>) -> Vec<Layer> {
    KEYS.iter()
        .filter_map(|spec| {
            let var = spec.env?;
            let value = env(var).filter(|value| !value.is_empty())?;
            let mut layer = Layer::empty(Source::Environment(var));
            layer.take_value(spec, &Json::String(value));
            Some(layer)
        })
        .collect()
}

/// The largest configuration file read: a bigger one (or a FIFO, a device, a link out of the
/// workspace) is refused and its problem says why.
pub const MAX_CONFIG_FILE: u64 = 1024 * 1024;

fn read_file(bytes: Result<Vec<u8>, FileError>, source: Source) -> (FileState, Layer) {
    let bytes = match bytes {
        Ok(bytes) => bytes,
        Err(err) if err.is_not_found() => {
            return (FileState::Missing, Layer::empty(source));
        }
        Err(err) => {
            let mut layer = Layer::empty(source);
            layer.problem(format!("not read, file ignored: {err}"));
            return (FileState::Invalid, layer);
        }
    };
    let Ok(text) = String::from_utf8(bytes) else {
        let mut layer = Layer::empty(source);
        layer.problem("not UTF-8 text, file ignored".to_owned());
        return (FileState::Invalid, layer);
    };
    match toml::from_str::<toml::Table>(&text) {
        Ok(table) => {
            let json = serde_json::to_value(table).unwrap_or(Json::Null);
            (FileState::Loaded, Layer::from_json(source, &json))
        }
        Err(err) => {
            let mut layer = Layer::empty(source);
            layer.problem(format!("not valid TOML, file ignored: {}", err.message()));
            if let Some(span) = err.span() {
                let line = text[..span.start].lines().count().max(1);
                layer.problems.last_mut().expect("just pushed").message +=
                    &format!(" (line {line})");
            }
            (FileState::Invalid, layer)
        }
    }
}

/// `$XDG_CONFIG_HOME/wright/config.toml`, falling back to `~/.config`.
pub fn user_file(env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let base = env("XDG_CONFIG_HOME")
        .filter(|dir| Path::new(dir).is_absolute())
        .map(PathBuf::from)
        .or_else(|| env("HOME").map(|home| Path::new(&home).join(".config")))?;
    Some(base.join("wright").join("config.toml"))
}

/// Why wright has no folder of its own for its data or cache: neither the XDG variable nor
/// `HOME` names one. There is no shared fallback (a folder in /tmp): another local user could
/// make it first, plant an undo record or a journal there, and read what wright writes.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "neither {variable} nor HOME is set to an absolute path, so wright has no folder of its own \
     for its {what}; set HOME (or {variable}). wright does not fall back to a shared folder \
     such as /tmp, where another user could read what it keeps or plant what it reads back"
)]
pub struct NoPrivateDir {
    pub variable: &'static str,
    pub what: &'static str,
}

fn own_dir(
    env: &dyn Fn(&str) -> Option<String>,
    variable: &'static str,
    under_home: &[&str],
    what: &'static str,
) -> Result<PathBuf, NoPrivateDir> {
    let absolute = |name: &str| env(name).filter(|dir| Path::new(dir).is_absolute());
    absolute(variable)
        .map(PathBuf::from)
        .or_else(|| {
            absolute("HOME").map(|home| {
                under_home
                    .iter()
                    .fold(PathBuf::from(home), |p, c| p.join(c))
            })
        })
        .map(|base| base.join("wright"))
        .ok_or(NoPrivateDir { variable, what })
}

/// Where caches live (the symbol index, sandbox snapshots): `$XDG_CACHE_HOME/wright`, falling
/// back to `~/.cache/wright`; with neither set, none ([`NoPrivateDir`]).
pub fn cache_dir(env: &dyn Fn(&str) -> Option<String>) -> Result<PathBuf, NoPrivateDir> {
    own_dir(env, "XDG_CACHE_HOME", &[".cache"], "cache")
}

/// Where state worth keeping lives (sessions, the undo record of `wright exec`):
/// `$XDG_DATA_HOME/wright`, falling back to `~/.local/share/wright`; with neither set, none
/// ([`NoPrivateDir`]).
pub fn data_dir(env: &dyn Fn(&str) -> Option<String>) -> Result<PathBuf, NoPrivateDir> {
    own_dir(
        env,
        "XDG_DATA_HOME",
        &[".local", "share"],
        "sessions and undo records",
    )
}

/// `<root>/.wright/config.toml`.
pub fn workspace_file(root: &Path) -> PathBuf {
    root.join(WORKSPACE_DIR).join(WORKSPACE_FILE)
}

const WORKSPACE_DIR: &str = ".wright";
const WORKSPACE_FILE: &str = "config.toml";

/// One resolved setting.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Setting {
    value: String,
    secret: bool,
    pub source: Source,
}

impl Setting {
    fn new(spec: &KeySpec, value: String, source: Source) -> Self {
        Self {
            value,
            secret: spec.secret,
            source,
        }
    }

    /// The value as it may be shown: secrets become `<set>`.
    pub fn display_value(&self) -> &str {
        if self.secret { "<set>" } else { &self.value }
    }
}

/// The merged configuration.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Config {
    values: BTreeMap<&'static str, Setting>,
    /// Every layer's part in each key's value, those that did not count included.
    parts: BTreeMap<&'static str, Vec<Part>>,
    /// `[mcp.servers.NAME]`, combined from the layers.
    mcp_servers: Vec<McpServer>,
    problems: Vec<Problem>,
}

impl Config {
    /// Every key of the schema, set or not, in schema order, for reports.
    pub fn settings(&self) -> impl Iterator<Item = (&'static KeySpec, Option<&Setting>)> {
        KEYS.iter().map(|spec| (spec, self.values.get(spec.key)))
    }

    pub fn problems(&self) -> &[Problem] {
        &self.problems
    }

    /// The MCP servers the layers define, in definition order (the user's first).
    pub fn mcp_servers(&self) -> &[McpServer] {
        &self.mcp_servers
    }

    /// The layers' parts in `key`'s value, in layer order (the default when it took part),
    /// each saying why it did not count when it did not.
    pub fn parts(&self, key: &str) -> &[Part] {
        self.parts.get(key).map_or(&[], Vec::as_slice)
    }

    /// A whole-number setting (validated when it was read, so it parses).
    pub fn get_u64(&self, key: &str) -> Option<u64> {
        self.get(key).and_then(|value| value.parse().ok())
    }

    /// The raw value of a key. Secrets too: the caller that asks for a key's value is the one
    /// that sends it to its provider, and must not log it.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.values.get(key).map(|setting| setting.value.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("wright-config-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn later_layers_win_and_each_value_names_its_source() {
        let dir = temp_dir("layers");
        let user = dir.join("user.toml");
        std::fs::write(&user, "model = \"openai/from-user\"\n[llm]\nmax_attempts = 2\n[providers.openai]\nbase_url = \"http://127.0.0.1:1/v1\"\n").unwrap();
        let root = dir.join("ws");
        std::fs::create_dir_all(root.join(".wright")).unwrap();
        std::fs::write(workspace_file(&root), "[llm]\nmax_attempts = 3\n").unwrap();

        let env = |var: &str| (var == "OPENAI_API_KEY").then(|| "sk-secret".to_owned());
        let mut layers = Layers::load(Some(user.clone()), std::slice::from_ref(&root), &env);
        let config = layers.resolve();
        assert_eq!(config.get("model"), Some("openai/from-user"));
        // A plain key: the workspace file comes after the user file.
        assert_eq!(config.get("llm.max_attempts"), Some("3"));
        assert_eq!(
            config.values["llm.max_attempts"].source,
            Source::WorkspaceFile(workspace_file(&root))
        );
        assert_eq!(
            config.get("providers.openai.base_url"),
            Some("http://127.0.0.1:1/v1")
        );
        let key = config.values.get("providers.openai.api_key").unwrap();
        assert_eq!(key.display_value(), "<set>");
        assert_eq!(key.source, Source::Environment("OPENAI_API_KEY"));

        layers.set_initialization_options(&json!({"model": "openai/from-init"}));
        assert_eq!(layers.resolve().get("model"), Some("openai/from-init"));
        layers.set_client_settings(&json!({"wright": {"model": "anthropic/from-settings"}}));
        let config = layers.resolve();
        assert_eq!(config.get("model"), Some("anthropic/from-settings"));
        assert_eq!(config.values["model"].source, Source::ClientSettings);
        assert!(config.problems().is_empty(), "{:?}", config.problems());
    }

    #[test]
    fn unknown_keys_and_wrong_types_are_reported_and_the_rest_still_applies() {
        let mut layers = Layers::load(None, &[], &no_env);
        layers.set_initialization_options(&json!({
            "model": "openai/gpt-4.1",
            "modle": "typo",
            "providers": {"openai": {"baseUrl": 42, "colour": "red"}},
            "log": null,
        }));
        let config = layers.resolve();
        assert_eq!(config.get("model"), Some("openai/gpt-4.1"));
        let messages: Vec<String> = config.problems().iter().map(ToString::to_string).collect();
        assert_eq!(messages.len(), 3, "{messages:?}");
        assert!(messages.iter().any(|m| m.contains("unknown key `modle`")));
        assert!(
            messages
                .iter()
                .any(|m| m.contains("unknown key `providers.openai.colour`"))
        );
        assert!(
            messages
                .iter()
                .any(|m| m.contains("`providers.openai.base_url` must be a string"))
        );
    }

    #[test]
    fn a_workspace_file_cannot_redirect_credentials() {
        let dir = temp_dir("redirect");
        std::fs::create_dir_all(dir.join(".wright")).unwrap();
        std::fs::write(
            workspace_file(&dir),
            "[providers.openai]\nbase_url = \"http://attacker.example/v1\"\napi_key = \"x\"\n",
        )
        .unwrap();
        let config = Layers::load(None, std::slice::from_ref(&dir), &no_env).resolve();
        assert_eq!(
            config.get("providers.openai.base_url"),
            Some("https://api.openai.com/v1")
        );
        assert_eq!(
            config.values["providers.openai.base_url"].source,
            Source::Default
        );
        assert_eq!(config.get("providers.openai.api_key"), None);
        assert_eq!(config.problems().len(), 2);
    }

    #[test]
    fn a_broken_file_is_reported_with_its_line_and_ignored() {
        let dir = temp_dir("broken");
        let user = dir.join("config.toml");
        std::fs::write(&user, "model = \"openai/x\"\nthis is not toml\n").unwrap();
        let layers = Layers::load(Some(user.clone()), &[], &no_env);
        assert_eq!(layers.files().next().unwrap().1, &FileState::Invalid);
        let config = layers.resolve();
        assert_eq!(config.get("model"), None);
        let problem = config.problems()[0].to_string();
        assert!(
            problem.contains("not valid TOML") && problem.contains("line 2"),
            "{problem}"
        );
    }

    /// A workspace's configuration file that is a FIFO, a link to /dev/zero (outside the
    /// workspace), a link out or too big is refused at once with a problem saying why; the
    /// user's file is bounded the same way, links followed.
    #[test]
    fn configuration_files_that_are_not_small_regular_files_are_refused_without_blocking() {
        let dir = temp_dir("kinds");
        let outside = dir.join("outside.toml");
        std::fs::write(&outside, "model = \"openai/from-outside\"\n").unwrap();
        let fifo = |path: &Path| {
            let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
            // SAFETY: a valid path.
            assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        };
        type Make<'a> = &'a dyn Fn(&Path);
        let cases: [(&str, Make); 4] = [
            ("fifo", &|path| fifo(path)),
            ("zero", &|path| {
                std::os::unix::fs::symlink("/dev/zero", path).unwrap()
            }),
            ("link-out", &|path| {
                std::os::unix::fs::symlink(&outside, path).unwrap()
            }),
            ("huge", &|path| {
                let mut text = "model = \"openai/huge\"\n".to_owned();
                text.push_str(&"#".repeat(MAX_CONFIG_FILE as usize));
                std::fs::write(path, text).unwrap();
            }),
        ];
        for (name, make) in cases {
            let root = dir.join(name);
            std::fs::create_dir_all(root.join(".wright")).unwrap();
            make(&workspace_file(&root));
            let (send, receive) = std::sync::mpsc::channel();
            let roots = vec![root.clone()];
            std::thread::spawn(move || {
                let _ = send.send(Layers::load(None, &roots, &no_env).resolve());
            });
            let config = receive
                .recv_timeout(std::time::Duration::from_secs(20))
                .unwrap_or_else(|_| panic!("{name}: loading the configuration hangs"));
            assert_eq!(config.get("model"), None, "{name}");
            let problems: Vec<String> = config.problems().iter().map(ToString::to_string).collect();
            assert_eq!(problems.len(), 1, "{name}: {problems:?}");
            let why = match name {
                "fifo" => "a FIFO",
                "huge" => "over the limit",
                _ => "leads outside the workspace",
            };
            assert!(
                problems[0].contains("not read") && problems[0].contains(why),
                "{name}: {problems:?}"
            );
        }
        // The user's own file: a FIFO is refused too; a link is the user's and is followed.
        let user = dir.join("user-fifo.toml");
        fifo(&user);
        let config = Layers::load(Some(user), &[], &no_env).resolve();
        assert!(config.problems()[0].to_string().contains("a FIFO"));
        let user = dir.join("user-link.toml");
        std::os::unix::fs::symlink(&outside, &user).unwrap();
        let config = Layers::load(Some(user), &[], &no_env).resolve();
        assert_eq!(config.get("model"), Some("openai/from-outside"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn invalid_values_are_refused_with_the_reason() {
        let env = |var: &str| match var {
            "WRIGHT_MODEL" => Some("gpt-4.1".to_owned()),
            "OPENAI_BASE_URL" => Some("localhost:11434".to_owned()),
            _ => None,
        };
        let config = Layers::load(None, &[], &env).resolve();
        assert_eq!(config.get("model"), None);
        let messages: Vec<String> = config.problems().iter().map(ToString::to_string).collect();
        assert!(
            messages[0].starts_with("environment WRIGHT_MODEL: `model`: expected PROVIDER/MODEL"),
            "{messages:?}"
        );
        assert!(messages[1].contains("http:// or https://"), "{messages:?}");
    }

    #[test]
    fn numbers_are_accepted_for_integer_keys_and_checked() {
        let mut layers = Layers::load(None, &[], &no_env);
        layers.set_initialization_options(&json!({"index": {"maxFileSize": 2048}}));
        assert_eq!(layers.resolve().get_u64("index.max_file_size"), Some(2048));
        layers.set_initialization_options(&json!({"index": {"max_file_size": -1}}));
        let config = layers.resolve();
        assert_eq!(config.get_u64("index.max_file_size"), Some(1024 * 1024));
        assert!(config.problems()[0].message.contains("positive number"));
    }

    #[test]
    fn user_file_follows_xdg_then_home() {
        let xdg = |var: &str| (var == "XDG_CONFIG_HOME").then(|| "/x/cfg".to_owned());
        assert_eq!(
            user_file(&xdg),
            Some(PathBuf::from("/x/cfg/wright/config.toml"))
        );
        let home = |var: &str| (var == "HOME").then(|| "/home/u".to_owned());
        assert_eq!(
            user_file(&home),
            Some(PathBuf::from("/home/u/.config/wright/config.toml"))
        );
        assert_eq!(user_file(&no_env), None);
    }
}
