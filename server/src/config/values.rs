//! The values of configuration keys that name something: a model, prices, a mode. They are
//! `config`'s own types, so validating a file needs nothing above `config`; the modules that
//! act on them (`llm`, `edit`, `agent`) re-export them where they are used.

use std::fmt;

use serde::Serialize;

/// Which API a model is reached through.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Provider {
    /// Any OpenAI-compatible Chat Completions endpoint (OpenAI, Ollama, llama.cpp, vLLM, …).
    OpenAi,
    Anthropic,
    /// A GGUF model run in process on the CPU (`local/<path.gguf>`, or `local/smollm2` for
    /// the embedded default).
    Local,
}

impl Provider {
    pub fn name(self) -> &'static str {
        match self {
            Self::OpenAi => "openai",
            Self::Anthropic => "anthropic",
            Self::Local => "local",
        }
    }

    /// The environment variable a user sets the key with, named in errors about the key.
    pub fn key_variable(self) -> &'static str {
        match self {
            Self::OpenAi => "OPENAI_API_KEY",
            Self::Anthropic => "ANTHROPIC_API_KEY",
            // Never asked for: a local model has no key.
            Self::Local => "no variable (local models need no key)",
        }
    }
}

impl fmt::Display for Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A model as the configuration names it: `PROVIDER/MODEL` (`openai/gpt-4.1`,
/// `openai/qwen2.5-coder:7b`). Only the first `/` separates: model names may contain more.
/// Serialised as that text.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ModelId {
    pub provider: Provider,
    pub model: String,
}

impl ModelId {
    pub fn parse(text: &str) -> Result<Self, String> {
        let (provider, model) = text
            .split_once('/')
            .filter(|(_, model)| !model.is_empty())
            .ok_or_else(|| {
                format!("expected PROVIDER/MODEL such as openai/gpt-4.1, found {text:?}")
            })?;
        let provider = match provider {
            "openai" => Provider::OpenAi,
            "anthropic" => Provider::Anthropic,
            "local" => Provider::Local,
            other => {
                return Err(format!(
                    "unknown provider {other:?} in {text:?}: use openai (any OpenAI-compatible \
                     server, local ones included), anthropic, or local (a GGUF file run in \
                     process)"
                ));
            }
        };
        Ok(Self {
            provider,
            model: model.to_owned(),
        })
    }
}

impl Serialize for ModelId {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl fmt::Display for ModelId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.provider, self.model)
    }
}

/// US dollars per million tokens.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Price {
    pub input: f64,
    pub cached_input: f64,
    pub output: f64,
    /// Writing to the cache (Anthropic); the input price where a provider has none.
    pub cache_write: f64,
}

/// Parses `prices`: entries `PROVIDER/MODEL=INPUT/CACHED/OUTPUT[/CACHE_WRITE]` separated by
/// `;` or `,`, in USD per million tokens.
pub fn parse_prices(text: &str) -> Result<Vec<(String, Price)>, String> {
    let mut entries = Vec::new();
    for entry in text
        .split([';', ','])
        .map(str::trim)
        .filter(|e| !e.is_empty())
    {
        let (model, numbers) = entry
            .split_once('=')
            .ok_or_else(|| format!("expected MODEL=INPUT/CACHED/OUTPUT, found {entry:?}"))?;
        ModelId::parse(model.trim())?;
        let numbers: Vec<f64> = numbers
            .split('/')
            .map(|n| {
                n.trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|n| n.is_finite() && *n >= 0.0)
            })
            .collect::<Option<_>>()
            .ok_or_else(|| {
                format!("prices of {model} must be non-negative numbers, found {numbers:?}")
            })?;
        let price = match numbers[..] {
            [input, cached_input, output] => Price {
                input,
                cached_input,
                output,
                cache_write: input,
            },
            [input, cached_input, output, cache_write] => Price {
                input,
                cached_input,
                output,
                cache_write,
            },
            _ => {
                return Err(format!(
                    "expected INPUT/CACHED/OUTPUT[/CACHE_WRITE] for {model}, found {numbers:?}"
                ));
            }
        };
        entries.push((model.trim().to_owned(), price));
    }
    Ok(entries)
}

/// What the gate does with introduced errors.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum GateMode {
    Off,
    /// Apply, and report the errors with the result.
    #[default]
    Report,
    /// Refuse the edit.
    Refuse,
}

impl std::str::FromStr for GateMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "off" => Ok(Self::Off),
            "report" => Ok(Self::Report),
            "refuse" => Ok(Self::Refuse),
            _ => Err(format!("expected off, report or refuse, found {s:?}")),
        }
    }
}

/// The network for commands (`sandbox.network`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum NetworkPolicy {
    /// Off; a command the sandbox refused a connection may run again with it if the user
    /// allows.
    #[default]
    Ask,
    /// Off, and the user is never asked.
    Deny,
    /// On for every command.
    Allow,
}

impl std::str::FromStr for NetworkPolicy {
    type Err = String;

    fn from_str(value: &str) -> Result<Self, String> {
        match value {
            "ask" => Ok(Self::Ask),
            "deny" => Ok(Self::Deny),
            "allow" => Ok(Self::Allow),
            other => Err(format!("expected ask, deny or allow, found {other:?}")),
        }
    }
}
