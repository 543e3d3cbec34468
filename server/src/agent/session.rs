//! One agent session: the step loop.
//!
//! Each step sends the transcript (append-only, so every request extends the previous one and
//! stays cacheable) and reads the streamed answer; the tool calls it holds run — consecutive
//! read-only calls together on blocking threads, every other call alone and in order — and
//! their results are appended. The loop ends when the model answers without a tool call, when
//! a limit is reached, when the model fails, or when the session is cancelled; cancellation
//! drops the model's stream (which aborts the HTTP request) and reaches a running command
//! through the tools' [`Cancel`]. While it waits, the loop reacts to one closed set of inputs
//! ([`Input`]): the model's stream, the tools' results and what they report as it happens
//! (approvals answered, edits applied or refused: [`ToolEvent`]), cancellation and the
//! deadline.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};
use tokio::time::Instant;

use super::Cancel;
use super::events::{AgentEvent, FinalStatus, Outcome, Spent, ToolEvent};
use super::journal::{Journal, Line};
use super::tools::{self, ToolContext, ToolOutput};
use crate::compaction::{ArtifactStore, Compactor, Settings as Compaction};
use crate::llm::{
    ChatModel, Event, FinishReason, LlmError, Message, Sampling, ToolCall, Transcript, Usage,
};

/// When a session gives up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Model calls.
    pub max_steps: u32,
    /// Input plus output tokens over the session, as the provider reported them.
    pub max_tokens: u64,
    pub wall_time: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_steps: 50,
            max_tokens: 5_000_000,
            wall_time: Duration::from_secs(30 * 60),
        }
    }
}

impl Limits {
    /// The limits the configuration sets (`agent.max_steps`, `agent.max_tokens`,
    /// `agent.max_wall_secs`), the defaults for the keys it leaves unset.
    pub fn from_config(config: &crate::config::Config) -> Self {
        let defaults = Self::default();
        Self {
            max_steps: config
                .get_u64("agent.max_steps")
                .and_then(|n| u32::try_from(n).ok())
                .unwrap_or(defaults.max_steps),
            max_tokens: config
                .get_u64("agent.max_tokens")
                .unwrap_or(defaults.max_tokens),
            wall_time: config
                .get_u64("agent.max_wall_secs")
                .map_or(defaults.wall_time, Duration::from_secs),
        }
    }
}

/// What can happen while the loop waits: the closed set of inputs a step reacts to.
enum Input {
    Model(Result<Event, LlmError>),
    /// The model's stream ended.
    ModelDone,
    /// The running batch of tool calls finished: their outputs, in the calls' order.
    ToolsDone(Vec<ToolOutput>),
    /// A running tool reported what the user or the editor did.
    Tool(ToolEvent),
    Cancelled,
    /// The session's wall-time limit passed.
    Deadline,
}

/// What a session starts from.
pub struct Setup {
    /// Keys the provider's prompt cache.
    pub id: String,
    pub model: Arc<dyn ChatModel>,
    /// Writes the working-state summary when masking is not enough (the fast tier).
    pub summary_model: Arc<dyn ChatModel>,
    /// When and how tool outputs are masked; they are all kept whole in an artifact store.
    pub compaction: Compaction,
    pub tools: Arc<ToolContext>,
    pub system: String,
    /// The messages the session starts from: the task message of a new session (the task and
    /// its context), the journaled history of a resumed one.
    pub history: Vec<Message>,
    /// Where every message, rewrite and the outcome are journaled as they happen.
    pub journal: Option<Journal>,
    /// Where tool outputs are kept whole: the journal's store ([`Journal::artifacts`]) for a
    /// journaled session, so that a resumed one reads back what its placeholders name.
    pub artifacts: ArtifactStore,
    /// What the session spent before this process took it up (a resumed session's record).
    pub spent: Spent,
    pub limits: Limits,
    pub events: UnboundedSender<AgentEvent>,
    /// Where the tools report approvals and the editor's answers to edits (none headless).
    pub tool_events: Option<UnboundedReceiver<ToolEvent>>,
}

pub struct Session {
    journal: Option<Journal>,
    model: Arc<dyn ChatModel>,
    /// Writes the working-state summary when masking is not enough (the fast tier).
    summary_model: Arc<dyn ChatModel>,
    compactor: Compactor,
    tools: Arc<ToolContext>,
    transcript: Transcript,
    limits: Limits,
    events: UnboundedSender<AgentEvent>,
    tool_events: Option<UnboundedReceiver<ToolEvent>>,
    usage: Usage,
    steps: u32,
    changed: BTreeSet<String>,
}

impl Session {
    pub fn new(setup: Setup) -> Self {
        let mut transcript = Transcript::new(
            setup.system,
            tools::schemas(&setup.tools),
            Sampling::default(),
            Some(setup.id),
        );
        for message in setup.history {
            transcript.push(message);
        }
        Self {
            journal: setup.journal,
            compactor: Compactor::new(setup.compaction, Some(&setup.tools.root), setup.artifacts),
            model: setup.model,
            summary_model: setup.summary_model,
            tools: setup.tools,
            transcript,
            limits: setup.limits,
            events: setup.events,
            tool_events: setup.tool_events,
            usage: setup.spent.usage,
            steps: setup.spent.steps,
            changed: BTreeSet::new(),
        }
    }

    pub fn transcript(&self) -> &Transcript {
        &self.transcript
    }

    fn cancel(&self) -> &Cancel {
        &self.tools.cancel
    }

    fn emit(&self, event: AgentEvent) {
        // A caller that stopped listening does not stop the session.
        let _ = self.events.send(event);
    }

    /// Runs the session to its end.
    pub async fn run(&mut self) -> Outcome {
        let deadline = Instant::now() + self.limits.wall_time;
        loop {
            if self.steps >= self.limits.max_steps {
                return self.end(
                    FinalStatus::Failed,
                    String::new(),
                    Some(format!(
                        "reached the step limit ({}) before the model finished; raise it \
                         (--max-steps, or agent.max_steps in the configuration) or split the \
                         task",
                        self.limits.max_steps
                    )),
                );
            }
            self.steps += 1;
            self.emit(AgentEvent::StepStarted { step: self.steps });

            let (text, calls, finish) = match self.model_turn(deadline).await {
                Ok(turn) => turn,
                Err(ended) => return ended,
            };
            self.emit(AgentEvent::Usage { total: self.usage });
            self.journal(&Line::Spent {
                spent: Spent {
                    steps: self.steps,
                    usage: self.usage,
                },
            });
            self.push(Message::Assistant {
                text: text.clone(),
                tool_calls: calls.clone(),
            });
            if self.usage.input + self.usage.output > self.limits.max_tokens {
                return self.end(
                    FinalStatus::Failed,
                    text,
                    Some(format!(
                        "used {} tokens, over the session's limit of {} (agent.max_tokens in \
                         the configuration)",
                        self.usage.input + self.usage.output,
                        self.limits.max_tokens
                    )),
                );
            }
            if calls.is_empty() {
                return match finish {
                    Some(FinishReason::Length) => self.end(
                        FinalStatus::Failed,
                        text,
                        Some("the model's answer was cut at its output token limit".to_owned()),
                    ),
                    Some(FinishReason::ContentFilter) => self.end(
                        FinalStatus::Failed,
                        text,
                        Some(
                            "the provider withheld the model's answer (content filter)".to_owned(),
                        ),
                    ),
                    _ => self.end(FinalStatus::Done, text, None),
                };
            }
            if let Err(ended) = self.run_tools(&calls, deadline).await {
                return ended;
            }
            self.compact().await;
        }
    }

    /// One model call, streamed: its text, its tool calls, and why it stopped.
    async fn model_turn(
        &mut self,
        deadline: Instant,
    ) -> Result<(String, Vec<ToolCall>, Option<FinishReason>), Outcome> {
        let cancel = self.cancel().clone();
        let mut stream = self.model.stream(&self.transcript.request());
        let mut text = String::new();
        let mut calls = Vec::new();
        let mut finish = None;
        loop {
            let input = tokio::select! {
                biased;
                () = cancel.cancelled() => Input::Cancelled,
                () = tokio::time::sleep_until(deadline) => Input::Deadline,
                event = next_tool_event(&mut self.tool_events) => Input::Tool(event),
                item = stream.next() => item.map_or(Input::ModelDone, Input::Model),
            };
            match input {
                Input::Model(Ok(Event::TextDelta(delta))) => {
                    text.push_str(&delta);
                    self.emit(AgentEvent::TextDelta { text: delta });
                }
                Input::Model(Ok(Event::ToolCallEnd { call, .. })) => calls.push(call),
                Input::Model(Ok(Event::Usage(usage))) => self.usage.add(&usage),
                Input::Model(Ok(Event::Finish(reason))) => finish = Some(reason),
                Input::Model(Ok(Event::ToolCallStart { .. } | Event::ToolCallArgs { .. })) => {}
                Input::Model(Ok(Event::Restarted { reason })) => {
                    // The stream was cut and the call is made again. Nothing of the partial
                    // answer was acted on (tools run after the answer ends): drop it, and tell
                    // the clients that showed it.
                    text.clear();
                    calls.clear();
                    finish = None;
                    self.emit(AgentEvent::StepRetried {
                        step: self.steps,
                        reason,
                    });
                }
                Input::Model(Err(err)) => {
                    let message = err.to_string();
                    self.emit(AgentEvent::Error {
                        message: message.clone(),
                    });
                    return Err(self.end(FinalStatus::Failed, text, Some(message)));
                }
                Input::ModelDone => return Ok((text, calls, finish)),
                Input::Tool(event) => self.tool_event(event),
                // Dropping the stream (on return) aborts the HTTP request.
                Input::Cancelled => return Err(self.cancelled(text)),
                Input::Deadline => return Err(self.out_of_time(text)),
                Input::ToolsDone(_) => unreachable!("no tool runs during a model turn"),
            }
        }
    }

    /// Runs `calls` in order, consecutive read-only ones together, and appends each result.
    async fn run_tools(&mut self, calls: &[ToolCall], deadline: Instant) -> Result<(), Outcome> {
        let mut start = 0;
        while start < calls.len() {
            let read_only = tools::is_read_only(&calls[start].name);
            let end = if read_only {
                start
                    + calls[start..]
                        .iter()
                        .take_while(|call| tools::is_read_only(&call.name))
                        .count()
            } else {
                start + 1
            };
            let batch = &calls[start..end];
            for call in batch {
                self.emit(AgentEvent::ToolCall {
                    id: call.id.clone(),
                    name: call.name.clone(),
                    arguments: call.arguments.clone(),
                });
            }
            let running = futures_util::future::join_all(batch.iter().map(|call| {
                let tools = Arc::clone(&self.tools);
                let call = call.clone();
                // The artifacts are the session's own: read in place, at once.
                let artifact = (call.name == "read_artifact")
                    .then(|| tools::read_artifact(self.compactor.artifacts(), &call));
                async move {
                    if let Some(output) = artifact {
                        return output;
                    }
                    tokio::task::spawn_blocking(move || tools::call(&tools, &call))
                        .await
                        .unwrap_or_else(|panic| {
                            ToolOutput::error(format!("the tool failed unexpectedly: {panic}"))
                        })
                }
            }));
            let cancel = self.cancel().clone();
            let mut running = std::pin::pin!(running);
            let outputs = loop {
                let input = tokio::select! {
                    biased;
                    () = cancel.cancelled() => Input::Cancelled,
                    () = tokio::time::sleep_until(deadline) => Input::Deadline,
                    event = next_tool_event(&mut self.tool_events) => Input::Tool(event),
                    outputs = &mut running => Input::ToolsDone(outputs),
                };
                match input {
                    Input::ToolsDone(outputs) => break outputs,
                    Input::Tool(event) => self.tool_event(event),
                    Input::Cancelled => return Err(self.cancelled(String::new())),
                    Input::Deadline => return Err(self.out_of_time(String::new())),
                    Input::Model(_) | Input::ModelDone => {
                        unreachable!("no model stream while tools run")
                    }
                }
            };
            // What the tools reported just before they returned comes before their results.
            while let Some(event) = self
                .tool_events
                .as_mut()
                .and_then(|events| events.try_recv().ok())
            {
                self.tool_event(event);
            }
            for (call, output) in batch.iter().zip(outputs) {
                self.record(call, output);
            }
            start = end;
        }
        Ok(())
    }

    /// Masks old outputs once the prompt passes the threshold, and summarises when masking
    /// is not enough. A compaction that fails leaves the transcript as it was: the session
    /// goes on, longer.
    async fn compact(&mut self) {
        let rewrites = self.transcript.rewrites();
        self.compact_transcript().await;
        if self.transcript.rewrites() != rewrites {
            let messages = self.transcript.messages().to_vec();
            self.journal(&Line::Rewrite { messages });
        }
    }

    async fn compact_transcript(&mut self) {
        let report = match self.compactor.after_step(&mut self.transcript) {
            Ok(Some(report)) => report,
            Ok(None) => return,
            Err(err) => {
                tracing::warn!("compaction: {err}");
                return;
            }
        };
        self.emit(AgentEvent::Compacted {
            masked: report.masked,
            tokens_before: report.tokens_before,
            tokens_after: report.tokens_after,
            summarized: false,
        });
        if !report.needs_summary {
            return;
        }
        let model = Arc::clone(&self.summary_model);
        match self
            .compactor
            .summarize(&mut self.transcript, model.as_ref())
            .await
        {
            Ok(summary) => self.emit(AgentEvent::Compacted {
                masked: summary.messages_replaced,
                tokens_before: summary.tokens_before,
                tokens_after: summary.tokens_after,
                summarized: true,
            }),
            Err(err) => tracing::warn!("compaction summary: {err}"),
        }
    }

    fn record(&mut self, call: &ToolCall, mut output: ToolOutput) {
        // Output the cap cut stays whole in the artifact store, and the model is told where.
        if let Some(whole) = output.whole.take() {
            match self.compactor.record(call, &whole, output.is_error) {
                Ok(recorded) => output.content.push_str(&format!(
                    "(the whole output: read_artifact {}, {} lines)\n",
                    recorded.artifact, recorded.lines
                )),
                Err(err) => tracing::warn!("keeping a command's whole output: {err}"),
            }
        }
        self.emit(AgentEvent::ToolResult {
            id: call.id.clone(),
            name: call.name.clone(),
            is_error: output.is_error,
            output: output.content.clone(),
        });
        if !output.changed.is_empty() {
            self.emit(AgentEvent::FilesChanged {
                paths: output.changed.clone(),
            });
            self.changed.extend(output.changed);
        }
        if call.name == "update_plan" && !output.is_error {
            let steps = self
                .tools
                .plan
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone();
            self.emit(AgentEvent::Plan { steps });
        }
        self.push(Message::ToolResult {
            call_id: call.id.clone(),
            content: output.content,
            is_error: output.is_error,
        });
    }

    /// Forwards what a tool reported to the session's listeners, and journals it.
    fn tool_event(&mut self, event: ToolEvent) {
        self.journal(&Line::Tool {
            event: event.clone(),
        });
        self.emit(event.into());
    }

    /// Appends to the transcript and the journal.
    fn push(&mut self, message: Message) {
        self.journal(&Line::Message {
            message: message.clone(),
        });
        self.transcript.push(message);
    }

    /// A journal that cannot be written does not stop the session; the log says so.
    fn journal(&mut self, line: &Line) {
        if let Some(journal) = &mut self.journal
            && let Err(err) = journal.append(line)
        {
            tracing::warn!("{err}; the session goes on without its journal");
            self.journal = None;
        }
    }

    fn cancelled(&mut self, text: String) -> Outcome {
        self.end(
            FinalStatus::Cancelled,
            text,
            Some("cancelled by the user".to_owned()),
        )
    }

    fn out_of_time(&mut self, text: String) -> Outcome {
        self.tools.cancel.cancel();
        self.end(
            FinalStatus::Failed,
            text,
            Some(format!(
                "ran past the session's time limit of {} s (agent.max_wall_secs in the \
                 configuration)",
                self.limits.wall_time.as_secs()
            )),
        )
    }

    fn end(&mut self, status: FinalStatus, message: String, reason: Option<String>) -> Outcome {
        let outcome = Outcome {
            status,
            message,
            reason,
            steps: self.steps,
            files_changed: self.changed.iter().cloned().collect(),
            usage: self.usage,
        };
        self.journal(&Line::End {
            outcome: outcome.clone(),
        });
        self.emit(AgentEvent::Finished {
            outcome: outcome.clone(),
        });
        outcome
    }
}

/// The next event the tools report; never, for a session whose tools report none.
async fn next_tool_event(events: &mut Option<UnboundedReceiver<ToolEvent>>) -> ToolEvent {
    match events {
        Some(receiver) => match receiver.recv().await {
            Some(event) => event,
            None => {
                // Every sender is gone: nothing more will come.
                *events = None;
                std::future::pending().await
            }
        },
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::{Condvar, Mutex};

    use super::*;
    use crate::agent::disk::DiskTarget;
    use crate::edit::GateMode;
    use crate::llm::{EventStream, ModelId, Request};
    use crate::workspace::{Overlay, WalkOptions};

    /// Answers with the given turns, one per request.
    struct Scripted {
        id: ModelId,
        turns: Mutex<Vec<Vec<Event>>>,
    }

    impl ChatModel for Scripted {
        fn model(&self) -> &ModelId {
            &self.id
        }

        fn stream(&self, _: &Request) -> EventStream {
            let mut turns = self.turns.lock().unwrap();
            let turn = if turns.is_empty() {
                vec![Event::Finish(FinishReason::Stop)]
            } else {
                turns.remove(0)
            };
            EventStream::from_items(turn.into_iter().map(Ok).collect())
        }
    }

    /// A buffer read that waits (up to a bound) until `expected` reads are in it at once: with
    /// parallel reads every one of them sees them all; run one after another, none does.
    struct Rendezvous {
        inside: Mutex<usize>,
        all_in: Condvar,
        expected: usize,
        met: Mutex<Vec<bool>>,
    }

    impl Overlay for Rendezvous {
        fn buffer_text(&self, _: &Path) -> Option<String> {
            let mut inside = self.inside.lock().unwrap();
            *inside += 1;
            self.all_in.notify_all();
            let (inside, _) = self
                .all_in
                .wait_timeout_while(inside, Duration::from_secs(5), |n| *n < self.expected)
                .unwrap();
            self.met.lock().unwrap().push(*inside >= self.expected);
            Some("text\n".to_owned())
        }
    }

    #[test]
    fn limits_come_from_the_agent_keys_as_an_editor_sets_them() {
        let mut layers = crate::config::Layers::load(None, &[], &|_| None);
        assert_eq!(Limits::from_config(&layers.resolve()), Limits::default());
        layers.set_initialization_options(&serde_json::json!({
            "agent": {"maxSteps": 7, "maxTokens": 1000, "maxWallSecs": 60}
        }));
        let config = layers.resolve();
        assert!(config.problems().is_empty(), "{:?}", config.problems());
        assert_eq!(
            Limits::from_config(&config),
            Limits {
                max_steps: 7,
                max_tokens: 1000,
                wall_time: Duration::from_secs(60),
            }
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn read_only_calls_of_one_answer_run_together_and_results_keep_their_order() {
        let root = std::env::temp_dir().join(format!("wright-session-{}", std::process::id()));
        std::fs::create_dir_all(&root).unwrap();
        let overlay = Arc::new(Rendezvous {
            inside: Mutex::new(0),
            all_in: Condvar::new(),
            expected: 3,
            met: Mutex::new(Vec::new()),
        });
        let tools = Arc::new(ToolContext {
            root: root.clone(),
            overlay: overlay.clone(),
            index: None,
            walk: WalkOptions::default(),
            edits: Arc::new(DiskTarget::new(&root, GateMode::Report)),
            commands: None,
            test_command: None,
            cancel: Cancel::new(),
            plan: Mutex::default(),
        });
        let read = |n: usize| Event::ToolCallEnd {
            index: n,
            call: ToolCall {
                id: format!("r{n}"),
                name: "read_file".into(),
                arguments: format!(r#"{{"path": "f{n}.txt"}}"#),
            },
        };
        let model = Arc::new(Scripted {
            id: ModelId::parse("openai/scripted").unwrap(),
            turns: Mutex::new(vec![vec![
                read(0),
                read(1),
                read(2),
                Event::Finish(FinishReason::ToolCalls),
            ]]),
        });
        let (events, _received) = tokio::sync::mpsc::unbounded_channel();
        let mut session = Session::new(Setup {
            id: "t".into(),
            model: model.clone(),
            summary_model: model,
            compaction: Compaction::default(),
            tools,
            system: "system".into(),
            history: vec![Message::User("task".into())],
            journal: None,
            artifacts: ArtifactStore::in_memory(),
            spent: Spent::default(),
            limits: Limits::default(),
            events,
            tool_events: None,
        });
        let outcome = session.run().await;
        assert_eq!(outcome.status, FinalStatus::Done);
        assert_eq!(*overlay.met.lock().unwrap(), [true, true, true]);
        let ids: Vec<&str> = session
            .transcript()
            .messages()
            .iter()
            .filter_map(|m| match m {
                Message::ToolResult { call_id, .. } => Some(call_id.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(ids, ["r0", "r1", "r2"]);
        let _ = std::fs::remove_dir_all(&root);
    }
}
