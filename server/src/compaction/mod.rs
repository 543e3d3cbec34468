//! Compaction: keeps a session's prompt within budget without losing what matters.
//!
//! Every tool output is stored whole in the session's [`ArtifactStore`] as soon as the
//! [`Compactor`] sees it. Once the estimated prompt passes a threshold (a share of the
//! model's context window), old outputs are masked in one batch, down to a low-water mark:
//! each becomes a one-line placeholder naming the tool, the artifact id, the size and the
//! stable [`signals`] of the output (failing tests, diagnostics, key frames), while the newest
//! outputs stay verbatim and reads made stale by a newer read or an edit of the same file go
//! first. Between batches the prompt only grows at its end, so the provider's cache keeps
//! serving its prefix. When masking cannot bring the prompt under the threshold, a
//! working-state summary written by the fast-tier model replaces the older turns
//! ([`Compactor::summarize`]).
//!
//! The agent calls [`Compactor::record`] (or lets [`Compactor::after_step`] find new
//! outputs itself), [`Compactor::after_step`] after each step, [`Compactor::summarize`] when
//! a report says masking is not enough, and serves `read_artifact` from
//! [`Compactor::artifacts`].

pub mod artifacts;
mod mask;
pub mod signals;
mod summary;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

pub use artifacts::{Artifact, ArtifactError, ArtifactId, ArtifactStore};
pub use mask::{MASK_PREFIX, MaskReport};
pub use signals::{Format, Signals};
pub use summary::{SUMMARY_INSTRUCTION, SummaryReport};

use crate::config::Config;
use crate::llm::{LlmError, ToolCall};

/// How much of the prompt compaction allows, in tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Settings {
    /// The context window of the model the session runs on.
    pub context_window: usize,
    /// A batch of masking starts when the estimated prompt passes this.
    pub threshold: usize,
    /// A batch masks until the estimate is at or below this. Half the threshold: each batch
    /// buys many steps of unchanged prefix.
    pub low_water: usize,
    /// The newest tool outputs kept verbatim.
    pub keep_recent: usize,
}

/// The defaults of `compaction.*`, also in `config/schema.rs`.
const DEFAULT_CONTEXT_WINDOW: usize = 128_000;
const DEFAULT_THRESHOLD_PERCENT: usize = 50;
const DEFAULT_KEEP_RECENT: usize = 3;

impl Settings {
    pub fn new(context_window: usize, threshold_percent: usize, keep_recent: usize) -> Self {
        let threshold = context_window * threshold_percent.clamp(1, 100) / 100;
        Self {
            context_window,
            threshold,
            low_water: threshold / 2,
            keep_recent,
        }
    }

    /// From `compaction.context_window`, `compaction.threshold_percent` and
    /// `compaction.keep_recent`.
    pub fn from_config(config: &Config) -> Self {
        let get = |key: &str, default: usize| {
            config
                .get_u64(key)
                .map_or(default, |n| usize::try_from(n).unwrap_or(default))
        };
        Self::new(
            get("compaction.context_window", DEFAULT_CONTEXT_WINDOW),
            get("compaction.threshold_percent", DEFAULT_THRESHOLD_PERCENT),
            get("compaction.keep_recent", DEFAULT_KEEP_RECENT),
        )
    }
}

impl Default for Settings {
    fn default() -> Self {
        Self::new(
            DEFAULT_CONTEXT_WINDOW,
            DEFAULT_THRESHOLD_PERCENT,
            DEFAULT_KEEP_RECENT,
        )
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CompactionError {
    #[error(transparent)]
    Artifact(#[from] ArtifactError),
    #[error("the summary call failed: {0}")]
    Model(#[from] LlmError),
    #[error("the summary model answered with no text")]
    EmptySummary,
    #[error("nothing to summarise: the transcript holds only its most recent turns")]
    NothingToSummarize,
}

/// What the compactor knows about one tool output.
#[derive(Clone, Debug)]
pub struct Recorded {
    pub artifact: ArtifactId,
    pub tool: String,
    /// What the call was about, for the placeholder: a path, a pattern, a command.
    pub subject: Option<String>,
    /// Signals of command and test outputs; `None` for other tools.
    pub signals: Option<Signals>,
    pub lines: usize,
    pub bytes: usize,
    pub tokens: usize,
    /// For `read_file`: the path and the line range read (`None` = whole file).
    read: Option<(String, Option<(u64, u64)>)>,
    /// The files a successful edit call changed.
    edited: Vec<String>,
    masked: bool,
}

/// A session's compaction state: its artifacts, what it knows about each output, and its
/// token estimates.
#[derive(Debug)]
pub struct Compactor {
    settings: Settings,
    root: Option<PathBuf>,
    artifacts: ArtifactStore,
    outputs: HashMap<String, Recorded>,
    estimate: mask::Estimate,
}

/// Tools whose outputs are command or test output, and so have signals (the agent's
/// `tools::COMMAND_TOOLS`; compaction sits below the agent and cannot import it).
const COMMAND_TOOLS: &[&str] = &["run_command", "run_tests"];
/// Tools that change the file their `path` argument names (`apply_patch` names its files in
/// the patch).
const EDIT_TOOLS: &[&str] = &["edit", "multi_edit", "write_file"];

impl Compactor {
    /// `root` is the workspace root (frames under it are the workspace's); `artifacts` is
    /// the session's store, in memory or on disk.
    pub fn new(settings: Settings, root: Option<&Path>, artifacts: ArtifactStore) -> Self {
        Self {
            settings,
            root: root.map(Path::to_owned),
            artifacts,
            outputs: HashMap::new(),
            estimate: mask::Estimate::default(),
        }
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The store `read_artifact` reads from.
    pub fn artifacts(&self) -> &ArtifactStore {
        &self.artifacts
    }

    /// Stores the output of `call` as an artifact and extracts its signals. Idempotent per
    /// call id. The agent may call it when a tool returns (to show the artifact id or the
    /// signals in its events); [`Compactor::after_step`] does it for any output not recorded.
    pub fn record(
        &mut self,
        call: &ToolCall,
        content: &str,
        is_error: bool,
    ) -> Result<&Recorded, CompactionError> {
        if !self.outputs.contains_key(&call.id) {
            let recorded = self.describe(call, content, is_error)?;
            self.outputs.insert(call.id.clone(), recorded);
        }
        Ok(&self.outputs[&call.id])
    }

    fn describe(
        &mut self,
        call: &ToolCall,
        content: &str,
        is_error: bool,
    ) -> Result<Recorded, CompactionError> {
        let artifact = self.artifacts.put(&call.name, content)?;
        let args = call.parsed_arguments().unwrap_or_default();
        let text = |key: &str| args.get(key).and_then(|v| v.as_str()).map(str::to_owned);
        let number = |key: &str| args.get(key).and_then(serde_json::Value::as_u64);
        let tool = call.name.as_str();
        let signals = COMMAND_TOOLS.contains(&tool).then(|| {
            let hint = text("command").and_then(|command| Format::of_command(&command));
            signals::extract(content, hint, self.root.as_deref())
        });
        let path = text("path").map(|p| p.trim_start_matches("./").to_owned());
        let read = match (tool, &path) {
            ("read_file", Some(path)) => {
                let range = match (number("start_line"), number("end_line")) {
                    (None, None) => None,
                    (start, end) => Some((start.unwrap_or(1), end.unwrap_or(u64::MAX))),
                };
                Some((path.clone(), range))
            }
            _ => None,
        };
        let edited = match (tool, &path) {
            _ if is_error => Vec::new(),
            ("apply_patch", _) => text("patch").map(|p| patch_paths(&p)).unwrap_or_default(),
            (tool, Some(path)) if EDIT_TOOLS.contains(&tool) => vec![path.clone()],
            _ => Vec::new(),
        };
        let subject = match tool {
            "read_file" => read.as_ref().map(|(path, range)| match range {
                Some((start, u64::MAX)) => format!("{path} from line {start}"),
                Some((start, end)) => format!("{path} lines {start}-{end}"),
                None => path.clone(),
            }),
            "grep" => text("pattern").map(|p| format!("{p:?}")),
            "run_command" => text("command"),
            "run_tests" => text("filter"),
            "find_symbol" => text("query"),
            "find_references" => text("name"),
            "read_artifact" => text("id"),
            _ => path.clone(),
        }
        .map(|subject| clip_subject(&subject));
        Ok(Recorded {
            artifact,
            tool: call.name.clone(),
            subject,
            signals,
            lines: content.lines().count(),
            bytes: content.len(),
            tokens: crate::llm::tokens::count(content),
            read,
            edited,
            masked: false,
        })
    }
}

/// Subjects are cut to this many characters (a long command or pattern says enough early).
const MAX_SUBJECT: usize = 80;

fn clip_subject(text: &str) -> String {
    let line = text.lines().next().unwrap_or("");
    if line.chars().count() <= MAX_SUBJECT && !text.contains('\n') {
        return line.to_owned();
    }
    let mut cut: String = line.chars().take(MAX_SUBJECT - 1).collect();
    cut.push('…');
    cut
}

/// The files a `*** Begin Patch` patch adds, updates, deletes or moves to.
fn patch_paths(patch: &str) -> Vec<String> {
    patch
        .lines()
        .filter_map(|line| {
            [
                "*** Update File: ",
                "*** Add File: ",
                "*** Delete File: ",
                "*** Move to: ",
            ]
            .iter()
            .find_map(|prefix| line.strip_prefix(prefix))
        })
        .map(|path| path.trim().trim_start_matches("./").to_owned())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_derive_threshold_and_low_water_from_the_window() {
        let settings = Settings::new(100_000, 60, 2);
        assert_eq!(
            (settings.threshold, settings.low_water, settings.keep_recent),
            (60_000, 30_000, 2)
        );
        assert_eq!(Settings::default().threshold, 64_000);
    }

    #[test]
    fn settings_come_from_the_compaction_keys() {
        let mut layers = crate::config::Layers::load(None, &[], &|_| None);
        assert_eq!(
            Settings::from_config(&layers.resolve()),
            Settings::default()
        );
        layers.set_initialization_options(&serde_json::json!({
            "compaction": {"contextWindow": 32000, "thresholdPercent": 40, "keepRecent": 5}
        }));
        let config = layers.resolve();
        assert!(config.problems().is_empty(), "{:?}", config.problems());
        assert_eq!(Settings::from_config(&config), Settings::new(32_000, 40, 5));
        layers.set_initialization_options(&serde_json::json!({
            "compaction": {"thresholdPercent": 140}
        }));
        assert_eq!(layers.resolve().problems().len(), 1);
    }

    #[test]
    fn patches_name_every_file_they_touch() {
        let patch = "*** Begin Patch\n*** Update File: src/a.rs\n*** Move to: src/b.rs\n@@\n-x\n+y\n*** Add File: ./src/c.rs\n+new\n*** Delete File: src/d.rs\n*** End Patch\n";
        assert_eq!(
            patch_paths(patch),
            ["src/a.rs", "src/b.rs", "src/c.rs", "src/d.rs"]
        );
    }

    #[test]
    fn recording_stores_the_artifact_and_the_signals_once() {
        let mut compactor = Compactor::new(Settings::default(), None, ArtifactStore::in_memory());
        let call = ToolCall {
            id: "c1".into(),
            name: "run_tests".into(),
            arguments: r#"{"filter":"parse"}"#.into(),
        };
        let output = include_str!("fixtures/cargo_test.txt");
        let recorded = compactor.record(&call, output, false).unwrap().clone();
        assert_eq!(recorded.artifact.to_string(), "a1");
        assert_eq!(recorded.subject.as_deref(), Some("parse"));
        let signals = recorded.signals.unwrap();
        assert_eq!(signals.failures.len(), 2);
        assert_eq!(recorded.lines, output.lines().count());
        compactor.record(&call, output, false).unwrap();
        assert_eq!(compactor.artifacts().len(), 1);
    }
}
