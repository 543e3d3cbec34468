//! The working-state summary, for when masking is not enough: the fast-tier model writes
//! the task's state (plan and status, files touched, decisions, open failures, next step)
//! and the transcript restarts from the system prompt, that summary and the most recent
//! turns.
//!
//! The summary call is the session's own request with the instruction appended as the last
//! user message, so it shares the prefix the provider has cached. The task as the user gave
//! it, the files changed and the newest test signals are added by wright itself, not left to
//! the model, so a summary can lose neither the goal nor an open failure.

use serde::Serialize;

use super::{CompactionError, Compactor, Recorded};
use crate::llm::prompt::COMPACTION_MARKER;
use crate::llm::{ChatModel, Message, Request, Transcript};

/// The instruction of the summary call.
pub const SUMMARY_INSTRUCTION: &str = "\
The conversation is about to be shortened: everything above except the most recent turns \
will be replaced by your summary. Write the working state another engineer needs to finish \
the task without the history, in these sections:
1. Plan and status: the steps, each done, in progress or not started.
2. Files touched: each file read or changed that still matters, and what was changed.
3. Decisions: what was decided and why, including approaches that failed and must not be retried.
4. Open failures: failing tests and errors not yet fixed, with names, messages and file:line.
5. Next step: the one thing to do next.
Be specific (names, paths, line numbers, exact error messages); do not restate the task. \
Answer with the summary as text; do not call tools.";

/// Headings of the summary message, so a second summary finds the task in the first.
const TASK_HEADING: &str = "## Task\n";
const STATE_HEADING: &str = "## Working state";

/// What a summary did, for the agent's event.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SummaryReport {
    pub tokens_before: usize,
    pub tokens_after: usize,
    /// Messages replaced by the summary.
    pub messages_replaced: usize,
}

impl Compactor {
    /// The summary call's request: the transcript's request unchanged (system prompt, tools,
    /// history, sampling, cache key) with [`SUMMARY_INSTRUCTION`] as the last user message.
    pub fn summary_request(&self, transcript: &Transcript) -> Request {
        let mut request = transcript.request();
        request
            .messages
            .push(Message::User(SUMMARY_INSTRUCTION.to_owned()));
        request
    }

    /// Asks `model` (the fast tier) for the working state, then restarts the transcript from
    /// the summary and the turns of the newest `keep_recent` outputs.
    pub async fn summarize(
        &mut self,
        transcript: &mut Transcript,
        model: &dyn ChatModel,
    ) -> Result<SummaryReport, CompactionError> {
        self.record_new(transcript)?;
        let keep_from = self.keep_from(transcript.messages());
        if keep_from <= 1 {
            return Err(CompactionError::NothingToSummarize);
        }
        let tokens_before = self.estimate.update(transcript, &self.outputs);
        let request = self.summary_request(transcript);
        let response = model.stream(&request).collect_response().await?;
        let written = response.text.trim();
        if written.is_empty() {
            return Err(CompactionError::EmptySummary);
        }
        let body = format!(
            "{TASK_HEADING}{}\n\n{STATE_HEADING} (summary of the earlier steps)\n{written}\n\n{}",
            task(transcript.messages()),
            self.facts()
        );
        let before_len = transcript.messages().len();
        transcript.compact(keep_from, &body);
        let messages_replaced = before_len + 1 - transcript.messages().len();
        let tokens_after = self.estimate.update(transcript, &self.outputs);
        tracing::info!(
            tokens_before,
            tokens_after,
            messages_replaced,
            model = %model.model(),
            "summarised the working state"
        );
        Ok(SummaryReport {
            tokens_before,
            tokens_after,
            messages_replaced,
        })
    }

    /// Where the kept turns start: the assistant message that made the oldest of the newest
    /// `keep_recent` tool calls (the first assistant message when there are fewer calls, so
    /// that nothing is left to summarise).
    fn keep_from(&self, messages: &[Message]) -> usize {
        let assistants: Vec<(usize, usize)> = messages
            .iter()
            .enumerate()
            .filter_map(|(index, message)| match message {
                Message::Assistant { tool_calls, .. } => Some((index, tool_calls.len())),
                _ => None,
            })
            .collect();
        let mut calls = 0;
        for (index, count) in assistants.iter().rev() {
            calls += count;
            if calls >= self.settings.keep_recent {
                return *index;
            }
        }
        assistants.first().map_or(0, |(index, _)| *index)
    }

    /// What wright knows for sure: files changed, the newest test or command signals, and
    /// where the raw outputs are.
    fn facts(&self) -> String {
        let mut outputs: Vec<&Recorded> = self.outputs.values().collect();
        outputs.sort_by(|a, b| a.artifact.cmp(&b.artifact));
        let mut changed: Vec<&str> = Vec::new();
        for path in outputs.iter().flat_map(|o| &o.edited) {
            if !changed.contains(&path.as_str()) {
                changed.push(path);
            }
        }
        let mut facts = String::from("## Facts recorded by wright\n");
        facts.push_str(&match changed.as_slice() {
            [] => "Files changed: none.\n".to_owned(),
            files => format!("Files changed: {}.\n", files.join(", ")),
        });
        let newest_signals = outputs.iter().rev().find_map(|output| {
            let signals = output.signals.as_ref()?;
            (!signals.is_empty()).then(|| (output, signals.render()))
        });
        if let Some((output, rendered)) = newest_signals {
            facts.push_str(&format!(
                "Newest {} output ({}): {rendered}\n",
                output.tool, output.artifact
            ));
        }
        if !self.artifacts.is_empty() {
            facts.push_str(&format!(
                "Raw outputs of every step: artifacts a1 to a{}, readable with read_artifact.\n",
                self.artifacts.len()
            ));
        }
        facts
    }
}

/// The task as the user gave it: the first user message, or the task section of an
/// earlier summary that replaced it.
fn task(messages: &[Message]) -> String {
    let first = messages.iter().find_map(|message| match message {
        Message::User(text) => Some(text.as_str()),
        _ => None,
    });
    let Some(first) = first else {
        return String::new();
    };
    match first.strip_prefix(COMPACTION_MARKER) {
        Some(summary) => summary
            .split_once(TASK_HEADING)
            .and_then(|(_, rest)| rest.split_once(&format!("\n\n{STATE_HEADING}")))
            .map_or(summary.trim(), |(task, _)| task)
            .to_owned(),
        None => first.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use serde_json::json;

    use super::super::{ArtifactStore, MASK_PREFIX, Settings};
    use super::*;
    use crate::llm::{Event, EventStream, FinishReason, ModelId, Sampling, ToolCall};

    /// A fast-tier model that answers from a script and keeps the requests it got.
    struct FakeModel {
        id: ModelId,
        answer: String,
        requests: Mutex<Vec<Request>>,
    }

    impl FakeModel {
        fn new(answer: &str) -> Self {
            Self {
                id: ModelId::parse("openai/fast-fake").unwrap(),
                answer: answer.into(),
                requests: Mutex::new(Vec::new()),
            }
        }
    }

    impl ChatModel for FakeModel {
        fn model(&self) -> &ModelId {
            &self.id
        }

        fn stream(&self, request: &Request) -> EventStream {
            self.requests.lock().unwrap().push(request.clone());
            EventStream::from_items(vec![
                Ok(Event::TextDelta(self.answer.clone())),
                Ok(Event::Finish(FinishReason::Stop)),
            ])
        }
    }

    fn step(transcript: &mut Transcript, n: usize, tool: &str, args: serde_json::Value, out: &str) {
        let id = format!("call_{n}");
        transcript.push(Message::Assistant {
            text: format!("step {n}"),
            tool_calls: vec![ToolCall {
                id: id.clone(),
                name: tool.into(),
                arguments: args.to_string(),
            }],
        });
        transcript.push(Message::ToolResult {
            call_id: id,
            content: out.into(),
            is_error: false,
        });
    }

    fn session() -> Transcript {
        let mut transcript = Transcript::new(
            "You are a coding agent.".into(),
            Vec::new(),
            Sampling::default(),
            Some("session-1".into()),
        );
        transcript.push(Message::User("Make `cargo test` pass in tinyconf.".into()));
        let big: String = (0..300)
            .map(|i| format!("line {i} of the parser\n"))
            .collect();
        step(
            &mut transcript,
            1,
            "read_file",
            json!({"path": "src/config.rs"}),
            &big,
        );
        step(
            &mut transcript,
            2,
            "edit",
            json!({"path": "src/config.rs", "old_string": "a", "new_string": "b"}),
            "applied",
        );
        step(
            &mut transcript,
            3,
            "run_tests",
            json!({}),
            include_str!("fixtures/cargo_workspace.txt"),
        );
        step(
            &mut transcript,
            4,
            "read_file",
            json!({"path": "tests/roundtrip.rs"}),
            &big,
        );
        step(
            &mut transcript,
            5,
            "grep",
            json!({"pattern": "reparsed"}),
            "tests/roundtrip.rs:20: let reparsed = parse(&text);",
        );
        transcript
    }

    #[tokio::test]
    async fn the_summary_rides_the_cached_prefix_and_keeps_task_facts_and_recent_turns() {
        let mut transcript = session();
        let mut compactor = Compactor::new(
            Settings::new(128_000, 50, 2),
            None,
            ArtifactStore::in_memory(),
        );
        let model = FakeModel::new("1. Plan: fix defaults (done), roundtrip (in progress).");
        let before = transcript.request();
        let report = compactor.summarize(&mut transcript, &model).await.unwrap();

        let requests = model.requests.lock().unwrap();
        let sent = &requests[0];
        assert_eq!(sent.system, before.system);
        assert_eq!(sent.cache_key, before.cache_key);
        assert_eq!(
            &sent.messages[..before.messages.len()],
            before.messages.as_slice()
        );
        assert_eq!(
            sent.messages.last(),
            Some(&Message::User(SUMMARY_INSTRUCTION.into()))
        );

        // Summary + the turns of the two newest outputs (assistant, result, assistant, result).
        let messages = transcript.messages();
        assert_eq!(messages.len(), 5);
        assert_eq!(report.messages_replaced, 7);
        assert!(report.tokens_after < report.tokens_before);
        assert_eq!(transcript.rewrites(), 1);
        let Message::User(summary) = &messages[0] else {
            panic!("{:?}", messages[0])
        };
        assert!(summary.starts_with(COMPACTION_MARKER));
        assert!(summary.contains("## Task\nMake `cargo test` pass in tinyconf.\n"));
        assert!(summary.contains("1. Plan: fix defaults (done)"));
        assert!(summary.contains("Files changed: src/config.rs."));
        for name in [
            "config::tests::defaults_apply",
            "parse_roundtrip",
            "src/lib.rs:17:21",
        ] {
            assert!(summary.contains(name), "{name} missing from {summary}");
        }
        assert!(summary.contains("artifacts a1 to a5"));
        assert!(matches!(&messages[1], Message::Assistant { text, .. } if text == "step 4"));
    }

    #[tokio::test]
    async fn a_session_goes_on_after_a_summary_and_a_second_one_keeps_the_task() {
        let mut transcript = session();
        let mut compactor = Compactor::new(
            Settings::new(6_000, 50, 2),
            None,
            ArtifactStore::in_memory(),
        );
        let model = FakeModel::new("State: roundtrip still failing.");
        compactor.summarize(&mut transcript, &model).await.unwrap();
        // Masking and estimates keep working on the restarted transcript.
        let big: String = (0..200).map(|i| format!("let x{i} = y{i};\n")).collect();
        for n in 6..12 {
            step(
                &mut transcript,
                n,
                "read_file",
                json!({"path": format!("src/f{n}.rs")}),
                &big,
            );
            compactor.after_step(&mut transcript).unwrap();
        }
        assert!(transcript.messages().iter().any(
            |m| matches!(m, Message::ToolResult { content, .. } if content.starts_with(MASK_PREFIX))
        ));
        compactor.summarize(&mut transcript, &model).await.unwrap();
        let Message::User(summary) = &transcript.messages()[0] else {
            panic!()
        };
        assert_eq!(summary.matches("## Task\n").count(), 1, "{summary}");
        assert!(
            summary.contains("## Task\nMake `cargo test` pass in tinyconf.\n\n## Working state")
        );
    }

    #[tokio::test]
    async fn an_empty_answer_or_nothing_to_drop_changes_nothing() {
        let mut transcript = session();
        let mut compactor = Compactor::new(Settings::default(), None, ArtifactStore::in_memory());
        let error = compactor
            .summarize(&mut transcript, &FakeModel::new("  "))
            .await
            .unwrap_err();
        assert!(matches!(error, CompactionError::EmptySummary));
        assert_eq!(transcript.rewrites(), 0);
        let mut short = Transcript::new("s".into(), Vec::new(), Sampling::default(), None);
        short.push(Message::User("task".into()));
        step(&mut short, 1, "grep", json!({"pattern": "x"}), "none");
        let error = compactor
            .summarize(&mut short, &FakeModel::new("x"))
            .await
            .unwrap_err();
        assert!(matches!(error, CompactionError::NothingToSummarize));
    }
}
