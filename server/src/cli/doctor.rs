//! `wright doctor`: what wright would use, and where each part of it came from.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use wright::config::{self, Layers};
use wright::index;
use wright::sandbox::probe::{self, Primitive};

/// The facts doctor reports, gathered once and rendered as text or JSON.
pub struct Report {
    root: PathBuf,
    log: String,
    layers: Layers,
    index_dir: PathBuf,
    index: index::State,
    sandbox: Vec<Primitive>,
    tier: probe::TierReport,
    /// The configured MCP servers: name, where defined, and whether they would start
    /// (`configured`), or not (`untrusted`, `disabled`). Doctor stays quick: it starts none
    /// (`wright mcp list` does, to ask their tools).
    mcp: Vec<(String, &'static str, &'static str)>,
}

impl Report {
    /// Gathers the configuration for `root` from the files and `env`.
    pub fn gather(root: &Path, log: String, env: &dyn Fn(&str) -> Option<String>) -> Self {
        let layers = Layers::load(config::user_file(env), &[root.to_path_buf()], env);
        let cache_dir = config::cache_dir(env);
        let (index_dir, index) = match &cache_dir {
            Ok(cache_dir) => index::state(cache_dir, root),
            Err(err) => (PathBuf::new(), index::State::Stale(err.to_string())),
        };
        let sandbox = match &cache_dir {
            Ok(cache_dir) => probe::probe_all(&cache_dir.join("sandbox")),
            // The overlay probe's layers go to a fresh folder of this process instead.
            Err(_) => match wright::files::fresh_private_dir("wright-doctor") {
                Ok(scratch) => {
                    let found = probe::probe_all(&scratch);
                    // host path: a scratch folder of the sandbox probe.
                    let _ = std::fs::remove_dir_all(&scratch);
                    found
                }
                // No folder at all: the overlay probe reports that it could not make its layers.
                Err(_) => probe::probe_all(Path::new("/nonexistent")),
            },
        };
        let fallback = layers.resolve().get("sandbox.fallback") == Some("landlock");
        let tier = probe::tier_report(fallback);
        let trust = config::data_dir(env)
            .map(|dir| wright::mcp::servers::Trust::load(&dir).0)
            .unwrap_or_default();
        let mcp = layers
            .resolve()
            .mcp_servers()
            .iter()
            .map(|server| {
                let state = if !server.enabled {
                    "disabled"
                } else if trust.allows(root, server) {
                    "configured"
                } else {
                    "untrusted"
                };
                (server.name.clone(), server.origin.name(), state)
            })
            .collect();
        Self {
            mcp,
            root: root.to_path_buf(),
            log,
            layers,
            index_dir,
            index,
            sandbox,
            tier,
        }
    }

    /// Whether something is wrong enough to fail a check (a configuration file that could not
    /// be read or parsed). Unknown keys and refused values are warnings only.
    pub fn has_errors(&self) -> bool {
        self.layers
            .files()
            .any(|(_, state)| *state == config::FileState::Invalid)
    }

    pub fn to_json(&self) -> Value {
        let config = self.layers.resolve();
        json!({
            "version": wright::VERSION,
            "root": self.root,
            "log": self.log,
            "config_files": self.layers.files().map(|(path, state)| json!({
                "path": path,
                "state": state.to_string(),
            })).collect::<Vec<_>>(),
            "settings": config.settings().map(|(spec, setting)| json!({
                "key": spec.key,
                "value": setting.map(|s| s.display_value()),
                "source": setting.map(|s| s.source.to_string()),
                "env": spec.env,
                "merge": spec.merge.name(),
                "parts": config.parts(spec.key).iter().map(|part| json!({
                    "value": part.display_value(),
                    "source": part.source.to_string(),
                    "applied": part.ignored.is_none(),
                    "why_not": part.ignored,
                })).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
            "problems": config.problems().iter().map(ToString::to_string).collect::<Vec<_>>(),
            "index": match &self.index {
                index::State::Missing => json!({"dir": self.index_dir, "state": "missing"}),
                index::State::Ready { files, definitions } => {
                    json!({"dir": self.index_dir, "state": "ready", "files": files, "symbols": definitions})
                }
                index::State::Stale(reason) => json!({"dir": self.index_dir, "state": "stale", "reason": reason}),
            },
            "sandbox": self.sandbox.iter().map(|p| json!({
                "name": p.name,
                "available": p.available,
                "detail": p.detail,
            })).collect::<Vec<_>>(),
            "mcp_servers": self.mcp.iter().map(|(name, source, state)| json!({
                "name": name,
                "source": source,
                "state": state,
            })).collect::<Vec<_>>(),
            "sandbox_tier": {
                "tier": self.tier.tier,
                "detail": self.tier.detail,
                "not_promised": self.tier.not_promised,
            },
        })
    }

    pub fn to_text(&self) -> String {
        let config = self.layers.resolve();
        let mut out = String::new();
        let _ = writeln!(out, "wright {}", wright::VERSION);
        let _ = writeln!(out, "root: {}", self.root.display());
        let _ = writeln!(out, "log: {}", self.log);
        let index = match &self.index {
            index::State::Missing => {
                "not built yet (`wright index` builds it; the language server does too)".to_owned()
            }
            index::State::Ready { files, definitions } => {
                format!("{files} files, {definitions} symbols")
            }
            index::State::Stale(reason) => format!("will be rebuilt: {reason}"),
        };
        let _ = writeln!(out, "index: {} ({index})", self.index_dir.display());
        let _ = writeln!(out, "\nsandbox primitives:");
        for primitive in &self.sandbox {
            let state = if primitive.available {
                "available"
            } else {
                "unavailable"
            };
            let _ = writeln!(out, "  {}: {state} ({})", primitive.name, primitive.detail);
        }
        let _ = writeln!(
            out,
            "sandbox tier: {} ({})",
            self.tier.tier, self.tier.detail
        );
        for gap in &self.tier.not_promised {
            let _ = writeln!(out, "  not promised in this tier: {gap}");
        }
        if !self.mcp.is_empty() {
            let _ = writeln!(
                out,
                "\nMCP servers (not started here; `wright mcp list` starts them):"
            );
            for (name, source, state) in &self.mcp {
                let _ = writeln!(out, "  {name} ({source}): {state}");
            }
        }
        let _ = writeln!(out, "\nconfiguration files (later ones win):");
        let files: Vec<_> = self.layers.files().collect();
        if files.is_empty() {
            let _ = writeln!(out, "  none: neither XDG_CONFIG_HOME nor HOME is set");
        }
        for (path, state) in files {
            let _ = writeln!(out, "  {}: {state}", path.display());
        }
        let _ = writeln!(
            out,
            "\nsettings (then initializationOptions and client settings from an editor):"
        );
        for (spec, setting) in config.settings() {
            match setting {
                Some(setting) => {
                    let _ = writeln!(
                        out,
                        "  {} = {}   ({})",
                        spec.key,
                        setting.display_value(),
                        setting.source
                    );
                }
                None => {
                    let env = spec
                        .env
                        .map(|var| format!("; set {var}"))
                        .unwrap_or_default();
                    let _ = writeln!(out, "  {} is not set   ({}{env})", spec.key, spec.doc);
                }
            }
            write_parts(&mut out, spec, config.parts(spec.key));
        }
        if !config.problems().is_empty() {
            let _ = writeln!(out, "\nproblems:");
            for problem in config.problems() {
                let _ = writeln!(out, "  {problem}");
            }
        }
        out
    }
}

/// Under a setting several layers took part in (or one whose part did not count), each part
/// with its source, and why it did not count when it did not.
fn write_parts(out: &mut String, spec: &config::KeySpec, parts: &[config::Part]) {
    if parts.len() < 2 && parts.iter().all(|part| part.ignored.is_none()) {
        return;
    }
    let _ = writeln!(out, "    parts ({}):", spec.merge.name());
    for part in parts {
        let why = part
            .ignored
            .map(|why| format!("; not applied: {why}"))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "      {}   ({}{why})",
            part.display_value(),
            part.source
        );
    }
}
