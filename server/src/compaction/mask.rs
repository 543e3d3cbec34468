//! Observation masking: old tool outputs replaced by one-line placeholders, in batches.
//!
//! A batch starts when the estimated prompt passes the threshold and masks down to the
//! low-water mark, so most steps change nothing before the prompt's end and the provider's
//! prefix cache keeps working. Within a batch, reads made stale (the same file read again
//! later over the same lines, or edited since) go first, then the oldest outputs; the newest
//! `keep_recent` outputs are never masked, nor is an output whose placeholder would not be
//! smaller. A placeholder's text depends only on the output and what followed it, so it
//! never changes once written.

use std::collections::HashMap;

use serde::Serialize;

use super::{CompactionError, Compactor, Recorded};
use crate::llm::tokens::{estimate_fixed, estimate_message};
use crate::llm::{Message, ToolCall, Transcript};

/// What every placeholder starts with; outputs that already start so are not recorded
/// again (a transcript resumed from a journal holds them).
pub const MASK_PREFIX: &str = "[masked tool output";

/// What one batch did, for the agent's event.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MaskReport {
    /// Outputs replaced by placeholders in this batch.
    pub masked: usize,
    /// Of those, reads made stale by a newer read or an edit.
    pub stale: usize,
    pub tokens_before: usize,
    pub tokens_after: usize,
    /// The prompt is still over the threshold with nothing left to mask: time for
    /// [`Compactor::summarize`].
    pub needs_summary: bool,
}

/// The running token estimate of a transcript: the fixed part once, each message once.
/// Reset whenever the transcript was rewritten by someone else.
#[derive(Debug, Default)]
pub(super) struct Estimate {
    fixed: Option<usize>,
    rewrites: u32,
    per_message: Vec<usize>,
}

impl Estimate {
    /// The estimate of `transcript`'s request. Outputs already recorded are not counted
    /// again: their tokens are known.
    pub(super) fn update(
        &mut self,
        transcript: &Transcript,
        outputs: &HashMap<String, Recorded>,
    ) -> usize {
        let messages = transcript.messages();
        if transcript.rewrites() != self.rewrites || self.per_message.len() > messages.len() {
            self.per_message.clear();
            self.rewrites = transcript.rewrites();
        }
        let fixed = *self.fixed.get_or_insert_with(|| {
            let mut request = transcript.request();
            request.messages.clear();
            estimate_fixed(&request)
        });
        let start = self.per_message.len();
        self.per_message
            .extend(messages[start..].iter().map(|message| match message {
                Message::ToolResult {
                    call_id, content, ..
                } => match outputs.get(call_id) {
                    Some(output) if output.bytes == content.len() && !output.masked => {
                        // The framing of a result, plus its known content.
                        estimate_message(&Message::User(String::new())) + output.tokens
                    }
                    _ => estimate_message(message),
                },
                _ => estimate_message(message),
            }));
        fixed + self.per_message.iter().sum::<usize>()
    }
}

/// Why a read is stale.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stale {
    ReadAgain,
    Edited,
}

impl Compactor {
    /// Called after each step (once the step's tool results are in the transcript): records
    /// new outputs, and when the prompt has passed the threshold, masks a batch. `None` when
    /// nothing was done.
    pub fn after_step(
        &mut self,
        transcript: &mut Transcript,
    ) -> Result<Option<MaskReport>, CompactionError> {
        self.record_new(transcript)?;
        let before = self.estimate.update(transcript, &self.outputs);
        if before <= self.settings.threshold {
            return Ok(None);
        }
        let (replacements, stale) = self.plan(transcript, before);
        let masked = replacements.len();
        for (index, _) in &replacements {
            if let Message::ToolResult { call_id, .. } = &transcript.messages()[*index]
                && let Some(output) = self.outputs.get_mut(call_id)
            {
                output.masked = true;
            }
        }
        transcript.mask_tool_results(replacements);
        let tokens_after = self.estimate.update(transcript, &self.outputs);
        let report = MaskReport {
            masked,
            stale,
            tokens_before: before,
            tokens_after,
            needs_summary: tokens_after > self.settings.threshold,
        };
        if masked > 0 {
            tracing::info!(
                masked,
                stale,
                before,
                after = tokens_after,
                needs_summary = report.needs_summary,
                "masked tool outputs"
            );
        } else {
            tracing::debug!(before, "over the threshold with nothing left to mask");
        }
        Ok(Some(report))
    }

    /// Records every tool result the compactor has not seen, with the call that made it.
    pub(super) fn record_new(&mut self, transcript: &Transcript) -> Result<(), CompactionError> {
        let messages = transcript.messages();
        for (index, message) in messages.iter().enumerate() {
            let Message::ToolResult {
                call_id,
                content,
                is_error,
            } = message
            else {
                continue;
            };
            if self.outputs.contains_key(call_id) || content.starts_with(MASK_PREFIX) {
                continue;
            }
            let call = find_call(&messages[..index], call_id)
                .cloned()
                .unwrap_or(ToolCall {
                    id: call_id.clone(),
                    name: "unknown_tool".to_owned(),
                    arguments: "{}".to_owned(),
                });
            self.record(&call, content, *is_error)?;
        }
        Ok(())
    }

    /// The batch: (message index, placeholder) pairs in message order, and how many of them
    /// are stale reads.
    fn plan(&self, transcript: &Transcript, before: usize) -> (Vec<(usize, String)>, usize) {
        let messages = transcript.messages();
        let results: Vec<(usize, &Recorded)> = messages
            .iter()
            .enumerate()
            .filter_map(|(index, message)| match message {
                Message::ToolResult { call_id, .. } => {
                    self.outputs.get(call_id).map(|output| (index, output))
                }
                _ => None,
            })
            .collect();
        let recent = results.len().saturating_sub(self.settings.keep_recent);
        let stale = stale_reads(&results);
        let mut candidates: Vec<(usize, &Recorded, Option<Stale>)> = results[..recent]
            .iter()
            .enumerate()
            .filter(|(_, (_, output))| !output.masked)
            .map(|(position, (index, output))| (*index, *output, stale[position]))
            .collect();
        // Stale reads first, then oldest first (the sort is stable).
        candidates.sort_by_key(|(_, _, stale)| stale.is_none());
        let mut total = before;
        let mut replacements = Vec::new();
        let mut stale_count = 0;
        for (index, output, stale) in candidates {
            if total <= self.settings.low_water && stale.is_none() {
                break;
            }
            let text = placeholder(output, stale);
            let Message::ToolResult {
                call_id, is_error, ..
            } = &messages[index]
            else {
                continue;
            };
            let new_tokens = estimate_message(&Message::ToolResult {
                call_id: call_id.clone(),
                content: text.clone(),
                is_error: *is_error,
            });
            let old_tokens = self.estimate.per_message[index];
            if new_tokens >= old_tokens {
                continue;
            }
            total -= old_tokens - new_tokens;
            stale_count += usize::from(stale.is_some());
            replacements.push((index, text));
        }
        replacements.sort_by_key(|(index, _)| *index);
        (replacements, stale_count)
    }
}

/// The call with id `call_id`, searching from the newest assistant message back.
fn find_call<'a>(messages: &'a [Message], call_id: &str) -> Option<&'a ToolCall> {
    messages.iter().rev().find_map(|message| match message {
        Message::Assistant { tool_calls, .. } => tool_calls.iter().find(|c| c.id == call_id),
        _ => None,
    })
}

/// For each output in order, whether it is a read that a later output made stale: a read of
/// the same file covering the same lines, or an edit of it.
fn stale_reads(results: &[(usize, &Recorded)]) -> Vec<Option<Stale>> {
    results
        .iter()
        .enumerate()
        .map(|(position, (_, output))| {
            let (path, range) = output.read.as_ref()?;
            results[position + 1..].iter().find_map(|(_, later)| {
                if later.edited.iter().any(|edited| edited == path) {
                    return Some(Stale::Edited);
                }
                let (later_path, later_range) = later.read.as_ref()?;
                let covers = match (later_range, range) {
                    (None, _) => true,
                    (Some(_), None) => false,
                    (Some((start, end)), Some((from, to))) => start <= from && end >= to,
                };
                (later_path == path && covers).then_some(Stale::ReadAgain)
            })
        })
        .collect()
}

/// The one line that replaces an output.
fn placeholder(output: &Recorded, stale: Option<Stale>) -> String {
    let subject = output
        .subject
        .as_deref()
        .map(|s| format!(" {s}"))
        .unwrap_or_default();
    let mut text = format!(
        "{MASK_PREFIX}: {}{subject} → artifact {} ({} lines, {} bytes, ~{} tokens)",
        output.tool, output.artifact, output.lines, output.bytes, output.tokens
    );
    match stale {
        Some(Stale::ReadAgain) => text.push_str("; superseded by a later read of this file"),
        Some(Stale::Edited) => {
            text.push_str("; stale: the file was edited after this read, read it again")
        }
        None => text.push_str("; read_artifact for the text"),
    }
    if let Some(signals) = &output.signals {
        let rendered = signals.render();
        if !rendered.is_empty() {
            text.push_str(". ");
            text.push_str(&rendered);
        }
    }
    text.push(']');
    text
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::{ArtifactStore, Settings};
    use super::*;
    use crate::llm::Sampling;

    struct Session {
        transcript: Transcript,
        step: usize,
    }

    impl Session {
        fn new() -> Self {
            let mut transcript = Transcript::new(
                "You are a coding agent.".into(),
                Vec::new(),
                Sampling::default(),
                None,
            );
            transcript.push(Message::User("fix the failing tests".into()));
            Self {
                transcript,
                step: 0,
            }
        }

        fn call(&mut self, tool: &str, arguments: serde_json::Value, output: &str) {
            self.step += 1;
            let id = format!("call_{}", self.step);
            self.transcript.push(Message::Assistant {
                text: String::new(),
                tool_calls: vec![ToolCall {
                    id: id.clone(),
                    name: tool.into(),
                    arguments: arguments.to_string(),
                }],
            });
            self.transcript.push(Message::ToolResult {
                call_id: id,
                content: output.into(),
                is_error: false,
            });
        }

        fn contents(&self) -> Vec<&str> {
            self.transcript
                .messages()
                .iter()
                .filter_map(|m| match m {
                    Message::ToolResult { content, .. } => Some(content.as_str()),
                    _ => None,
                })
                .collect()
        }
    }

    fn file(lines: usize, seed: &str) -> String {
        (1..=lines)
            .map(|i| format!("    let {seed}_{i} = compute_{seed}(input, {i}); // step {i}\n"))
            .collect()
    }

    fn compactor(window: usize, keep_recent: usize) -> Compactor {
        Compactor::new(
            Settings::new(window, 50, keep_recent),
            None,
            ArtifactStore::in_memory(),
        )
    }

    #[test]
    fn nothing_happens_under_the_threshold() {
        let mut session = Session::new();
        session.call(
            "grep",
            json!({"pattern": "fn main"}),
            "src/main.rs:1:fn main() {}",
        );
        let mut compactor = compactor(128_000, 3);
        assert_eq!(compactor.after_step(&mut session.transcript).unwrap(), None);
        assert_eq!(session.transcript.rewrites(), 0);
        assert_eq!(compactor.artifacts().len(), 1);
    }

    #[test]
    fn a_batch_keeps_the_newest_outputs_and_every_signal() {
        let mut session = Session::new();
        let tests = include_str!("fixtures/cargo_workspace.txt");
        session.call("run_tests", json!({}), tests);
        for i in 0..6 {
            session.call(
                "read_file",
                json!({"path": format!("src/m{i}.rs")}),
                &file(120, "a"),
            );
        }
        let mut compactor = compactor(16_000, 3);
        let report = compactor
            .after_step(&mut session.transcript)
            .unwrap()
            .unwrap();
        // Everything but the newest three goes, since even that stays above the low-water mark.
        assert_eq!(report.masked, 4, "{report:?}");
        assert!(report.tokens_after < report.tokens_before / 2, "{report:?}");
        assert!(!report.needs_summary);
        assert_eq!(session.transcript.rewrites(), 1);
        let contents = session.contents();
        // The test run is masked, and its placeholder still names every failure.
        assert!(contents[0].starts_with(MASK_PREFIX), "{}", contents[0]);
        assert!(
            contents[0].contains("run_tests → artifact a1 (123 lines"),
            "{}",
            contents[0]
        );
        let signals = compactor.outputs["call_1"].signals.clone().unwrap();
        for key in signals.keys() {
            assert!(
                contents[0].contains(&key),
                "{key} missing from {}",
                contents[0]
            );
        }
        // The last three outputs are verbatim.
        for content in &contents[4..] {
            assert!(!content.starts_with(MASK_PREFIX));
        }
        assert!(!contents[0].contains('\n'));
    }

    #[test]
    fn batches_leave_the_prefix_alone_between_them() {
        let mut session = Session::new();
        let mut compactor = compactor(20_000, 2);
        let mut batches = 0;
        let mut previous: Option<Vec<Message>> = None;
        for i in 0..60 {
            session.call(
                "read_file",
                json!({"path": format!("src/f{i}.rs")}),
                &file(40, "b"),
            );
            let report = compactor.after_step(&mut session.transcript).unwrap();
            let messages = session.transcript.messages().to_vec();
            match report {
                Some(report) => {
                    batches += 1;
                    assert!(
                        report.masked > 1,
                        "a batch masks several outputs: {report:?}"
                    );
                }
                None => {
                    // No batch: the previous request's messages are an exact prefix.
                    if let Some(previous) = &previous {
                        assert_eq!(&messages[..previous.len()], previous.as_slice());
                    }
                }
            }
            previous = Some(messages);
        }
        assert!((2..=12).contains(&batches), "{batches}");
        assert_eq!(session.transcript.rewrites(), batches);
    }

    #[test]
    fn stale_reads_go_first_and_say_why() {
        let mut session = Session::new();
        session.call(
            "read_file",
            json!({"path": "src/lib.rs"}),
            &file(100, "old"),
        );
        session.call(
            "read_file",
            json!({"path": "src/other.rs", "start_line": 1, "end_line": 50}),
            &file(50, "o"),
        );
        session.call(
            "edit",
            json!({"path": "./src/other.rs", "old_string": "a", "new_string": "b"}),
            "applied 1 replacement to src/other.rs",
        );
        session.call("grep", json!({"pattern": "compute"}), &file(60, "g"));
        session.call(
            "read_file",
            json!({"path": "src/lib.rs"}),
            &file(100, "new"),
        );
        for i in 0..3 {
            session.call(
                "read_file",
                json!({"path": format!("src/x{i}.rs")}),
                &file(20, "x"),
            );
        }
        // A window where the threshold is passed but the low-water mark is near: only the
        // stale reads must go, whatever their age.
        let mut compactor = compactor(14_000, 3);
        let before = compactor
            .estimate
            .update(&session.transcript, &compactor.outputs);
        compactor.settings.threshold = before - 1;
        compactor.settings.low_water = before - 1;
        let report = compactor
            .after_step(&mut session.transcript)
            .unwrap()
            .unwrap();
        assert_eq!((report.masked, report.stale), (2, 2), "{report:?}");
        let contents = session.contents();
        assert!(
            contents[0].ends_with("; superseded by a later read of this file]"),
            "{}",
            contents[0]
        );
        assert!(contents[0].contains("read_file src/lib.rs → artifact a1"));
        assert!(contents[1].contains("read_file src/other.rs lines 1-50 → artifact a2"));
        assert!(contents[1].contains("stale: the file was edited after this read"));
        assert!(!contents[3].starts_with(MASK_PREFIX));
    }

    #[test]
    fn when_masking_is_not_enough_the_report_asks_for_a_summary() {
        let mut session = Session::new();
        for i in 0..3 {
            session.call(
                "read_file",
                json!({"path": format!("src/big{i}.rs")}),
                &file(400, "c"),
            );
        }
        let mut compactor = compactor(8_000, 3);
        let report = compactor
            .after_step(&mut session.transcript)
            .unwrap()
            .unwrap();
        assert_eq!(report.masked, 0);
        assert!(report.needs_summary);
        assert_eq!(session.transcript.rewrites(), 0);
    }

    #[test]
    fn placeholders_of_a_resumed_transcript_are_not_recorded_again() {
        let mut session = Session::new();
        session.call(
            "grep",
            json!({"pattern": "x"}),
            &format!("{MASK_PREFIX}: grep → artifact a1 (3 lines, 20 bytes, ~9 tokens)]"),
        );
        let mut compactor = compactor(128_000, 3);
        compactor.after_step(&mut session.transcript).unwrap();
        assert!(compactor.artifacts().is_empty());
    }
}
