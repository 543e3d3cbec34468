//! Opening a session, the same for every front end (the editor, `wright exec`, the agent
//! bench; ACP next): a resumed session's record or a new id, the models connected, the limits
//! read, then the system prompt, the first message with its retrieved context and the journal.
//! A front end supplies only what differs: its edit target, file overlay, command runner and
//! where the events go, built around [`Prepared::id`] between the two steps.
//!
//! The steps are split by cost: [`Prepared::prepare`] is quick (a front end answers with the
//! session's id after it); [`Prepared::open`] reads `AGENTS.md` files, retrieves context and
//! writes the journal's first lines, from milliseconds to seconds, so the editor runs it on a
//! blocking thread.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};

use super::conversation::{Conversation, Mode, UserMessage};
use super::journal::{self, Journal, Line, Recorded};
use super::prompt::{self, EditorFocus};
use super::tools::ToolContext;
use super::{AgentEvent, Limits, Models, Session, Setup, Spent, ToolEvent};
use crate::compaction::{self, ArtifactStore};
use crate::config::Config;
use crate::index::Index;
use crate::llm::Message;
use crate::workspace::Overlay;

/// How many tokens of retrieved code go with a new session's task.
const CONTEXT_BUDGET: usize = 4000;

/// A new session's task, the id of one to take up from its journal where it stopped, or of
/// one to continue with a new turn (finished sessions too).
#[derive(Clone, Debug)]
pub enum Begin<'a> {
    Task(&'a str),
    Resume(&'a str),
    FollowUp(&'a str, UserMessage),
}

/// What a front end asks for.
pub struct Plan<'a> {
    pub config: &'a Config,
    pub root: &'a Path,
    /// Where the journals are (`config::data_dir`).
    pub data_dir: &'a Path,
    pub begin: Begin<'a>,
    /// The model the caller names (`--model`, `agentRun`'s `model`); a resumed session keeps
    /// its own otherwise (a switch would lose the provider's prompt cache).
    pub model: Option<&'a str>,
    /// A new session's id starts with this (`s` in the editor, `exec` headless).
    pub id_prefix: &'a str,
    /// The mode to work in; a resumed session keeps its own when `None`.
    pub mode: Option<Mode>,
}

/// A session whose id, task, models and limits are known; nothing written yet.
pub struct Prepared {
    pub id: String,
    pub task: String,
    pub models: Models,
    pub limits: Limits,
    pub compaction: compaction::Settings,
    resumed: Option<(Vec<Message>, Journal)>,
    spent: Spent,
    root: PathBuf,
    data_dir: PathBuf,
    conversation: Arc<Conversation>,
    /// The turn to run and what had been spent when it began.
    turn: (u32, Spent),
    mode: Mode,
    /// A follow-up's message, which begins its turn.
    follow_up: Option<UserMessage>,
    /// Whether the session still needs a title.
    untitled: bool,
    prices: crate::llm::PriceTable,
}

/// What the first message is written from: the index and the files as the front end sees them
/// (the editor's buffers, or the disk), and where the user is.
pub struct Context {
    pub index: Option<Arc<Index>>,
    pub overlay: Arc<dyn Overlay + Send + Sync>,
    pub focus: EditorFocus,
}

/// A session ready to run once the front end gives it its tools and event channels.
pub struct Opened {
    prepared: Prepared,
    system: String,
    history: Vec<Message>,
    journal: Option<Journal>,
    artifacts: ArtifactStore,
    /// A new session (not one taken up from its journal).
    fresh: bool,
}

impl Prepared {
    /// Resumes or names the session and connects its models. The error says what to do (an
    /// unknown or finished session, a model not configured).
    pub fn prepare(plan: Plan<'_>) -> Result<Self, String> {
        Self::prepare_with(plan, |config, model, task| {
            Models::connect(config, model, task)
        })
    }

    /// [`Prepared::prepare`] with the models made by `connect` (a bench's scripted model).
    pub fn prepare_with(
        plan: Plan<'_>,
        connect: impl FnOnce(&Config, Option<&str>, &str) -> Result<Models, String>,
    ) -> Result<Self, String> {
        let new_task = match &plan.begin {
            Begin::Task(task) => Some((*task).to_owned()),
            _ => None,
        };
        let (recorded, resumed, follow_up): (Option<Recorded>, _, _) = match plan.begin {
            Begin::Task(_) => (None, None, None),
            Begin::Resume(id) => {
                let (recorded, history, journal) =
                    journal::resume(plan.data_dir, plan.root, id, false)?;
                (Some(recorded), Some((history, journal)), None)
            }
            Begin::FollowUp(id, message) => {
                message.check(true)?;
                let (recorded, history, journal) =
                    journal::resume(plan.data_dir, plan.root, id, true)?;
                (Some(recorded), Some((history, journal)), Some(message))
            }
        };
        let task = match (&recorded, new_task) {
            (Some(recorded), _) => recorded.task.clone(),
            (None, Some(task)) => task,
            (None, None) => unreachable!("a resumed session has its record"),
        };
        let model = plan
            .model
            .or(recorded.as_ref().map(|recorded| recorded.model.as_str()));
        let models = connect(plan.config, model, &task)?;
        if let Some(message) = &follow_up {
            message.check(models.task.takes_images())?;
        }
        let id = match &recorded {
            Some(recorded) => recorded.session_id.clone(),
            None => journal::new_session_id(plan.id_prefix),
        };
        let turn = match (&recorded, &follow_up) {
            (None, _) => (1, Spent::default()),
            (Some(recorded), None) => (recorded.turns, recorded.turn_start),
            (Some(recorded), Some(_)) => (recorded.turns + 1, recorded.spent),
        };
        let mode = plan
            .mode
            .or(recorded.as_ref().map(|recorded| recorded.mode))
            .unwrap_or_default();
        Ok(Self {
            conversation: Conversation::starting(turn.0),
            turn,
            mode,
            follow_up,
            untitled: recorded.as_ref().is_none_or(|r| r.title.is_none()),
            id,
            task,
            models,
            limits: Limits::from_config(plan.config),
            compaction: compaction::Settings::from_config(plan.config),
            resumed,
            spent: recorded.map(|recorded| recorded.spent).unwrap_or_default(),
            root: plan.root.to_owned(),
            data_dir: plan.data_dir.to_owned(),
            prices: crate::llm::PriceTable::from_config(plan.config),
        })
    }

    /// Names a new session `id` (a front end that gave the client an id before the session
    /// opened: ACP's `session/new`); a session taken up from its journal keeps its own.
    pub fn name(&mut self, id: &str) {
        if self.resumed.is_none() {
            self.id = id.to_owned();
        }
    }

    /// The handle a front end keeps to add turns and change settings.
    pub fn conversation(&self) -> Arc<Conversation> {
        Arc::clone(&self.conversation)
    }

    /// The turn about to run.
    pub fn turn(&self) -> u32 {
        self.turn.0
    }

    /// The event that tells which model works on the task, and why: a session's first.
    pub fn model_event(&self) -> AgentEvent {
        self.models.event()
    }

    /// The system prompt (the workspace's `AGENTS.md` files), and the history to start from: a
    /// resumed session's own, or a new one's task message with the code retrieved for it,
    /// whose journal begins here. Blocking.
    pub fn open(self, context: Context) -> Opened {
        let system = prompt::system_prompt(&self.root);
        let fresh = self.resumed.is_none();
        let (history, journal, artifacts, prepared) = match self.resumed {
            Some((history, journal)) => {
                let artifacts = journal.artifacts();
                let prepared = Prepared {
                    resumed: None,
                    ..self
                };
                (history, Some(journal), artifacts, prepared)
            }
            None => {
                let retrieved = context.index.as_deref().map(|index| {
                    crate::retrieval::retrieve(
                        index,
                        context.overlay.as_ref(),
                        &crate::retrieval::Query {
                            text: self.task.clone(),
                            budget: CONTEXT_BUDGET,
                            current_file: context.focus.path.clone(),
                            ..crate::retrieval::Query::default()
                        },
                    )
                });
                let mut message =
                    prompt::task_message(&self.task, &context.focus, retrieved.as_ref());
                if self.mode == Mode::Plan {
                    message.push_str(prompt::mode_note(Mode::Plan));
                    message.push('\n');
                }
                let (history, mut journal) = journal::begin(
                    &self.data_dir,
                    &self.root,
                    &self.id,
                    &self.task,
                    &self.models.decision.model.to_string(),
                    message,
                );
                if self.mode == Mode::Plan
                    && let Some(written) = &mut journal
                    && let Err(err) = written.append(&Line::Mode { mode: self.mode })
                {
                    tracing::warn!("{err}; the session runs without a journal");
                    journal = None;
                }
                let artifacts = journal
                    .as_ref()
                    .map_or_else(ArtifactStore::in_memory, Journal::artifacts);
                (history, journal, artifacts, self)
            }
        };
        Opened {
            prepared,
            system,
            history,
            journal,
            artifacts,
            fresh,
        }
    }
}

impl Opened {
    /// The journal's file, for a front end to name (`--resume` continues from it).
    pub fn journal_path(&self) -> Option<&Path> {
        self.journal.as_ref().map(Journal::path)
    }

    /// The session, with the front end's tools, where its events go and where its tools
    /// report (none headless).
    pub fn session(
        self,
        tools: Arc<ToolContext>,
        events: UnboundedSender<AgentEvent>,
        tool_events: Option<UnboundedReceiver<ToolEvent>>,
    ) -> Session {
        let prepared = self.prepared;
        if self.fresh {
            let _ = events.send(AgentEvent::Turn {
                turn: 1,
                message: prepared.task.clone(),
            });
        }
        // Code is the default a client assumes; plan mode is said from the start.
        if prepared.mode == Mode::Plan {
            let _ = events.send(AgentEvent::Mode {
                mode: Mode::Plan.name().to_owned(),
            });
        }
        let mut session = Session::new(Setup {
            id: prepared.id,
            model_name: prepared.models.decision.model.to_string(),
            model: prepared.models.task,
            summary_model: prepared.models.summary,
            compaction: prepared.compaction,
            tools,
            system: self.system,
            history: self.history,
            journal: self.journal,
            artifacts: self.artifacts,
            spent: prepared.spent,
            limits: prepared.limits,
            events,
            tool_events,
            turn: if prepared.follow_up.is_some() {
                (prepared.turn.0 - 1, prepared.turn.1)
            } else {
                prepared.turn
            },
            conversation: prepared.conversation,
            mode: prepared.mode,
            prices: prepared.prices,
            title_from: prepared.untitled.then_some(prepared.task),
        });
        if let Some(message) = prepared.follow_up {
            session.begin_turn(prepared.turn.0, vec![message]);
        }
        session
    }
}
