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
use super::conversation::{Conversation, Mode, ModelSwitch, UserMessage};
use super::events::{AgentEvent, FinalStatus, Outcome, Spent, ToolEvent};
use super::journal::{Journal, Line};
use super::tools::{self, ToolContext, ToolOutput};
use crate::compaction::{ArtifactStore, Compactor, Settings as Compaction};
use crate::llm::{
    ChatModel, Event, FinishReason, LlmError, Message, PriceTable, Request, Sampling, ToolCall,
    Transcript, Usage,
};

/// When a turn gives up (each turn of a conversation has the whole budget).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Model calls.
    pub max_steps: u32,
    /// Input plus output tokens over the turn, as the provider reported them.
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
    /// The turn the session is in, and what had been spent when it began (the limits are
    /// per turn).
    pub turn: (u32, Spent),
    /// Where later messages and setting changes come from.
    pub conversation: Arc<Conversation>,
    pub mode: Mode,
    /// The model's name as the journal records it (`openai/gpt-4.1`).
    pub model_name: String,
    pub prices: PriceTable,
    /// After its first turn, the session asks `summary_model` for a title (one it has not).
    pub title_from: Option<String>,
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
    conversation: Arc<Conversation>,
    turn: u32,
    /// What had been spent when the turn began.
    turn_start: Spent,
    mode: Mode,
    model_name: String,
    prices: PriceTable,
    cost_usd: f64,
    /// Some call's model had no price: the cost is a lower bound, shown as unknown.
    unpriced: bool,
    /// The last request's prompt and answer, in tokens: what the next one starts from.
    context_tokens: u64,
    context_window: u64,
    title_from: Option<String>,
    /// The title's side call, while it runs.
    title: Option<tokio::task::JoinHandle<Option<String>>>,
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
        let context_window = setup.compaction.context_window as u64;
        setup
            .conversation
            .set_takes_images(setup.model.takes_images());
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
            cost_usd: setup.spent.cost_usd,
            changed: BTreeSet::new(),
            conversation: setup.conversation,
            turn: setup.turn.0,
            turn_start: setup.turn.1,
            mode: setup.mode,
            model_name: setup.model_name,
            prices: setup.prices,
            unpriced: false,
            context_tokens: 0,
            context_window,
            title_from: setup.title_from,
            title: None,
        }
    }

    /// Starts turn `turn` with the user's `messages` (a later turn of the conversation, or
    /// the first of a follow-up taken up from the journal): journaled, announced, appended
    /// with what they mention attached.
    pub fn begin_turn(&mut self, turn: u32, messages: Vec<UserMessage>) {
        self.turn = turn;
        self.turn_start = self.spent();
        self.changed.clear();
        self.tools.cancel.reset();
        let text = messages
            .iter()
            .map(|m| m.text.trim())
            .collect::<Vec<_>>()
            .join("\n\n");
        self.journal(&Line::Turn {
            turn,
            message: text.clone(),
            spent: self.turn_start,
        });
        self.emit(AgentEvent::Turn {
            turn,
            message: text,
        });
        let held = self.tools.edits.held();
        if !held.is_empty() {
            self.push(Message::User(super::prompt::held_note(&held)));
        }
        for message in messages {
            self.push_user(message);
        }
    }

    /// Turns, one after another, as the user sends them, until the front end lets go.
    pub async fn converse(&mut self) {
        loop {
            self.run().await;
            self.settle_title(TITLE_TIMEOUT).await;
            // Between turns the user still reviews: what the tools report (proposals left
            // after a hunk was accepted) reaches the listeners at once.
            let conversation = Arc::clone(&self.conversation);
            let next = loop {
                tokio::select! {
                    next = conversation.next_turn() => break next,
                    event = next_tool_event(&mut self.tool_events) => self.tool_event(event),
                }
            };
            let Some((turn, messages)) = next else {
                return;
            };
            self.begin_turn(turn, messages);
        }
    }

    /// Appends one of the user's messages: its text, the files and symbols it mentions,
    /// where the user is, and what is held for review.
    fn push_user(&mut self, message: UserMessage) {
        let attachments = super::tools::attachments(&self.tools, &message.text);
        let text = super::prompt::turn_message(&message, &attachments, self.mode);
        self.push(Message::User(text));
        for image in message.images {
            self.push(Message::Image {
                media_type: image.media_type,
                data: image.data,
            });
        }
    }

    /// What the session has spent so far.
    fn spent(&self) -> Spent {
        Spent {
            steps: self.steps,
            usage: self.usage,
            cost_usd: self.cost_usd,
        }
    }

    /// Applies what the front end changed since the last step: messages that steer the turn,
    /// the mode, the model.
    fn take_conversation(&mut self) {
        let (messages, mode, model) = self.conversation.take();
        if let Some(mode) = mode.filter(|mode| *mode != self.mode) {
            self.set_mode(mode);
        }
        if let Some(switch) = model {
            self.switch_model(switch);
        }
        for message in messages {
            self.push_user(message);
        }
        let notes = self.tools.edits.take_review_notes();
        if !notes.is_empty() {
            self.push(Message::User(super::prompt::review_note(&notes)));
        }
    }

    fn set_mode(&mut self, mode: Mode) {
        self.mode = mode;
        self.tools.set_plan_mode(mode == Mode::Plan);
        self.transcript
            .set_tools(super::tools::schemas(&self.tools));
        self.journal(&Line::Mode { mode });
        self.emit(AgentEvent::Mode {
            mode: mode.name().to_owned(),
        });
        self.push(Message::User(super::prompt::mode_note(mode).to_owned()));
    }

    /// The transcript is the providers' common shape: the next request is written in the
    /// new model's dialect, history and tool calls included.
    fn switch_model(&mut self, switch: ModelSwitch) {
        if switch.name == self.model_name {
            return;
        }
        self.conversation
            .set_takes_images(switch.task.takes_images());
        self.model = switch.task;
        self.model_name.clone_from(&switch.name);
        self.journal(&Line::Model {
            model: switch.name.clone(),
        });
        self.emit(AgentEvent::Model {
            model: switch.name,
            tier: None,
            reason: "chosen by the user".to_owned(),
        });
    }

    /// Starts the title's side call beside the turn (no tools; a failure leaves the session
    /// untitled): its answer is shown before the turn's `finished`, or after it when slower.
    fn start_title(&mut self, task: &str) {
        let request = Request {
            system: "You name coding sessions. Answer with a title of at most six words, no \
                     quotes, no final period."
                .to_owned(),
            messages: vec![Message::User(format!(
                "The session's task:\n{}",
                task.trim()
            ))],
            tools: Vec::new(),
            sampling: Sampling {
                temperature: None,
                max_tokens: 32,
            },
            cache_key: None,
            prediction: None,
            single_attempt: true,
        };
        let model = Arc::clone(&self.summary_model);
        self.title = Some(tokio::spawn(async move {
            let mut stream = model.stream(&request);
            let mut title = String::new();
            let read = async {
                while let Some(next) = stream.next().await {
                    match next {
                        Ok(Event::TextDelta(delta)) => title.push_str(&delta),
                        Ok(Event::Restarted { .. }) => title.clear(),
                        Ok(_) => {}
                        Err(err) => return Err(err.to_string()),
                    }
                }
                Ok(())
            };
            match tokio::time::timeout(TITLE_TIMEOUT, read).await {
                Ok(Ok(())) => Some(clean_title(&title)).filter(|t| !t.is_empty()),
                Ok(Err(err)) => {
                    tracing::warn!("the session's title: {err}");
                    None
                }
                Err(_) => {
                    tracing::warn!(
                        "the session's title took over {} s",
                        TITLE_TIMEOUT.as_secs()
                    );
                    None
                }
            }
        }));
    }

    /// Shows the title once its call answered, waiting at most `wait` for it.
    async fn settle_title(&mut self, wait: Duration) {
        let Some(handle) = &mut self.title else {
            return;
        };
        let Ok(answered) = tokio::time::timeout(wait, handle).await else {
            return;
        };
        self.title = None;
        if let Ok(Some(title)) = answered {
            self.journal(&Line::Title {
                title: title.clone(),
            });
            self.emit(AgentEvent::Title { title });
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

    /// Runs the current turn to its end (the model finished, a limit, a failure, the
    /// user's cancel), then says so with `finished`.
    pub async fn run(&mut self) -> Outcome {
        if let Some(task) = self.title_from.take() {
            self.start_title(&task);
        }
        let outcome = self.run_steps().await;
        // A title asked for at the turn's start usually answered long before its end; the
        // journal's `end` line stays the turn's last.
        self.settle_title(TITLE_GRACE).await;
        self.journal(&Line::End {
            outcome: outcome.clone(),
        });
        self.emit(AgentEvent::Finished {
            turn: self.turn,
            outcome: outcome.clone(),
        });
        outcome
    }

    async fn run_steps(&mut self) -> Outcome {
        let deadline = Instant::now() + self.limits.wall_time;
        self.tools.set_plan_mode(self.mode == Mode::Plan);
        self.transcript
            .set_tools(super::tools::schemas(&self.tools));
        loop {
            self.take_conversation();
            // An MCP server's tools may have changed since the last request: the next one
            // offers the list as it is now (unchanged, it is the same prefix).
            if self.tools.mcp.is_some() {
                self.transcript
                    .set_tools(super::tools::schemas(&self.tools));
            }
            if self.steps - self.turn_start.steps >= self.limits.max_steps {
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
            self.emit(AgentEvent::Usage {
                total: self.usage,
                context_tokens: self.context_tokens,
                context_window: self.context_window,
                cost_usd: (!self.unpriced).then_some(self.cost_usd),
            });
            self.journal(&Line::Spent {
                spent: self.spent(),
            });
            self.push(Message::Assistant {
                text: text.clone(),
                tool_calls: calls.clone(),
            });
            let used = self.usage.input + self.usage.output
                - (self.turn_start.usage.input + self.turn_start.usage.output);
            if used > self.limits.max_tokens {
                return self.end(
                    FinalStatus::Failed,
                    text,
                    Some(format!(
                        "used {used} tokens, over the session's limit of {} for a turn \
                         (agent.max_tokens in the configuration)",
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
                    _ => match self.conversation.end_turn() {
                        None => self.end(FinalStatus::Done, text, None),
                        // The user wrote while the model finished: the turn goes on.
                        Some(messages) => {
                            for message in messages {
                                self.push_user(message);
                            }
                            continue;
                        }
                    },
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
                Input::Model(Ok(Event::Usage(usage))) => self.account(&usage),
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

    /// Counts one call's tokens, and their cost at the model's price.
    fn account(&mut self, usage: &Usage) {
        self.usage.add(usage);
        self.context_tokens = usage.input + usage.output;
        match self.prices.lookup(self.model.model()) {
            Some(price) => self.cost_usd += price.cost(usage),
            None => self.unpriced = true,
        }
    }

    /// Runs `calls` in order, consecutive read-only ones together, and appends each result.
    async fn run_tools(&mut self, calls: &[ToolCall], deadline: Instant) -> Result<(), Outcome> {
        let mut images = Vec::new();
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
                self.record(call, output, &mut images);
            }
            start = end;
        }
        // After every result of the step: the results must follow the calls directly.
        if !images.is_empty() {
            self.push(Message::User(
                "The images the tool calls above returned, in order:".to_owned(),
            ));
            for image in images {
                self.push(Message::Image {
                    media_type: image.media_type,
                    data: image.data,
                });
            }
        }
        Ok(())
    }

    /// Keeps the images a call returned for the message after the step's results, up to a
    /// message's worth, if the model takes images; the result says what became of each.
    fn take_images(&self, output: &mut ToolOutput, images: &mut Vec<super::conversation::Image>) {
        for image in std::mem::take(&mut output.images) {
            let shown = if !self.model.takes_images() {
                Err("this session's model takes no images".to_owned())
            } else if images.len() >= super::conversation::MAX_IMAGES {
                Err(format!(
                    "a step shows at most {} images",
                    super::conversation::MAX_IMAGES
                ))
            } else {
                image.check()
            };
            match shown {
                Ok(()) => {
                    let note = format!("\n({} shown in the next message)", image.media_type);
                    output.content.push_str(&note);
                    images.push(image);
                }
                Err(why) => {
                    let note = format!("\n({} not shown: {why})", image.media_type);
                    output.content.push_str(&note);
                }
            }
        }
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

    fn record(
        &mut self,
        call: &ToolCall,
        mut output: ToolOutput,
        images: &mut Vec<super::conversation::Image>,
    ) {
        self.take_images(&mut output, images);
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
        if !output.landed.is_empty() {
            self.journal(&Line::Edit {
                call_id: call.id.clone(),
                tool: call.name.clone(),
                files: std::mem::take(&mut output.landed),
                at: super::journal::now(),
            });
        }
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
        if status != FinalStatus::Done {
            self.conversation.stop_turn();
        }
        // `run` journals it and says so, once the title had its chance.
        Outcome {
            status,
            message,
            reason,
            steps: self.steps,
            files_changed: self.changed.iter().cloned().collect(),
            usage: self.usage,
        }
    }
}

/// How long a title may take: it is a nicety, never a wait.
const TITLE_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a turn's `finished` waits for a title still on its way.
const TITLE_GRACE: Duration = Duration::from_secs(2);

/// A model's title as one short line: no quotes, no "Title:", at most 80 characters.
fn clean_title(text: &str) -> String {
    let line = text.trim().lines().next().unwrap_or_default().trim();
    let line = line
        .strip_prefix("Title:")
        .or_else(|| line.strip_prefix("title:"))
        .unwrap_or(line)
        .trim()
        .trim_matches(|c| c == '"' || c == '\'' || c == '*' || c == '`')
        .trim_end_matches('.')
        .trim();
    match line.char_indices().nth(80) {
        Some((cut, _)) => line[..cut].trim_end().to_owned(),
        None => line.to_owned(),
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
            plan_mode: Default::default(),
            mcp: None,
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
            turn: (1, Spent::default()),
            conversation: Conversation::starting(1),
            mode: Mode::Code,
            model_name: "openai/scripted".into(),
            prices: PriceTable::built_in(),
            title_from: None,
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
