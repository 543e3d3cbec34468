//! A session as a conversation: the user's messages after the first (follow-ups and steering)
//! and the settings that change between steps (mode, model), handed from a front end to the
//! running session through one shared handle.
//!
//! The handle decides, under one lock, which turn a message joins: while a turn runs it is
//! queued and reaches the model at the next step boundary ("steering", the running turn's
//! number); once the turn has ended it starts the next one. A turn ends only when the queue is
//! empty at that moment, so a message is never both promised to a turn and left behind by it.

use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use tokio::sync::Notify;

use crate::llm::ChatModel;

/// What the model may do in a turn.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Mode {
    /// Every tool.
    #[default]
    Code,
    /// Read-only tools, commands in a throw-away snapshot; the turn ends with a plan.
    Plan,
}

impl Mode {
    pub fn parse(text: &str) -> Result<Self, String> {
        match text {
            "code" => Ok(Self::Code),
            "plan" => Ok(Self::Plan),
            other => Err(format!("mode {other:?}: expected \"code\" or \"plan\"")),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Code => "code",
            Self::Plan => "plan",
        }
    }
}

/// An image the user attached to a message.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Image {
    /// `image/png`, `image/jpeg`, `image/gif` or `image/webp`.
    pub media_type: String,
    /// The image's bytes, base64.
    pub data: String,
}

impl Image {
    /// Whether providers take it: of a kind they read, not too large, base64.
    pub fn check(&self) -> Result<(), String> {
        if !IMAGE_TYPES.contains(&self.media_type.as_str()) {
            return Err(format!(
                "an image of type {:?}: expected one of {}",
                self.media_type,
                IMAGE_TYPES.join(", ")
            ));
        }
        if self.data.len() > MAX_IMAGE_BASE64 {
            return Err(format!(
                "an image of {} KiB (base64): at most {} KiB",
                self.data.len() / 1024,
                MAX_IMAGE_BASE64 / 1024
            ));
        }
        let base64 = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=');
        if self.data.is_empty() || !self.data.bytes().all(base64) {
            return Err("an image whose data is not base64".to_owned());
        }
        Ok(())
    }
}

/// One message of the user's, as a front end hands it over.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct UserMessage {
    pub text: String,
    /// Where the user is in the editor (the file and the selection), when the front end knows.
    pub focus: super::prompt::EditorFocus,
    pub images: Vec<Image>,
}

/// The images one message may carry, and the most bytes (base64) of each.
pub(crate) const MAX_IMAGES: usize = 4;
const MAX_IMAGE_BASE64: usize = 7 * 1024 * 1024;
const IMAGE_TYPES: &[&str] = &["image/png", "image/jpeg", "image/gif", "image/webp"];

impl UserMessage {
    /// Whether the message can go to a model that takes images (`takes_images`) or not:
    /// not empty, and its images of a kind and size providers take. A refusal says why;
    /// nothing is dropped in silence.
    pub fn check(&self, takes_images: bool) -> Result<(), String> {
        if self.text.trim().is_empty() && self.images.is_empty() {
            return Err("the message is empty".to_owned());
        }
        if self.images.is_empty() {
            return Ok(());
        }
        if !takes_images {
            return Err(
                "this session's model takes no images (the local model reads text \
                        only): switch to an OpenAI or Anthropic model, or describe the image"
                    .to_owned(),
            );
        }
        if self.images.len() > MAX_IMAGES {
            return Err(format!(
                "{} images: a message takes at most {MAX_IMAGES}",
                self.images.len()
            ));
        }
        for image in &self.images {
            image.check()?;
        }
        Ok(())
    }
}

/// A model to switch to at the next step: its name, connected.
#[derive(Clone)]
pub struct ModelSwitch {
    pub name: String,
    pub task: Arc<dyn ChatModel>,
}

/// The front end's handle on a session's conversation; the session holds the same one.
#[derive(Default)]
pub struct Conversation {
    state: Mutex<State>,
    wake: Notify,
    /// The model in use takes images (set by the session, and by a switch at once).
    takes_images: std::sync::atomic::AtomicBool,
}

#[derive(Default)]
struct State {
    /// The running turn, or the last one.
    turn: u32,
    running: bool,
    queued: Vec<UserMessage>,
    mode: Option<Mode>,
    model: Option<ModelSwitch>,
    /// The front end let go of the session: it waits for no more turns.
    closed: bool,
}

/// Which turn a message joined.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Joined {
    pub turn: u32,
    /// It steers the running turn (else it starts the next).
    pub steering: bool,
}

impl Conversation {
    /// A conversation whose turn `turn` is about to run (1 for a new session; a resumed one
    /// goes on with its count).
    pub fn starting(turn: u32) -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(State {
                turn: turn.max(1),
                running: true,
                ..State::default()
            }),
            wake: Notify::new(),
            takes_images: Default::default(),
        })
    }

    /// Whether messages may carry images: the model in use takes them.
    pub fn set_takes_images(&self, takes: bool) {
        self.takes_images
            .store(takes, std::sync::atomic::Ordering::SeqCst);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds the user's message: queued for the running turn, or the start of the next.
    /// Refused (with why) when it cannot go to the model in use.
    pub fn prompt(&self, message: UserMessage) -> Result<Joined, String> {
        message.check(self.takes_images.load(std::sync::atomic::Ordering::SeqCst))?;
        let mut state = self.lock();
        let steering = state.running;
        if !steering {
            state.turn += 1;
            state.running = true;
        }
        state.queued.push(message);
        let joined = Joined {
            turn: state.turn,
            steering,
        };
        drop(state);
        self.wake.notify_one();
        Ok(joined)
    }

    /// Sets the mode and the model from the next step on (kept when `None`).
    pub fn configure(&self, mode: Option<Mode>, model: Option<ModelSwitch>) {
        let mut state = self.lock();
        if mode.is_some() {
            state.mode = mode;
        }
        if let Some(switch) = &model {
            self.set_takes_images(switch.task.takes_images());
        }
        if model.is_some() {
            state.model = model;
        }
    }

    /// The running turn, or the last one, and whether one runs.
    pub fn turn(&self) -> (u32, bool) {
        let state = self.lock();
        (state.turn, state.running)
    }

    /// Lets go of the session: once its turn ends it waits for no more.
    pub fn close(&self) {
        self.lock().closed = true;
        self.wake.notify_one();
    }

    /// The session's side, at a step boundary: the messages queued since, and the settings
    /// changed since (taken, so each applies once).
    pub(super) fn take(&self) -> (Vec<UserMessage>, Option<Mode>, Option<ModelSwitch>) {
        let mut state = self.lock();
        (
            std::mem::take(&mut state.queued),
            state.mode.take(),
            state.model.take(),
        )
    }

    /// The session's side, when the model finished its turn: `Some` with the messages
    /// queued meanwhile (the turn goes on with them), or `None`: the turn is over.
    pub(super) fn end_turn(&self) -> Option<Vec<UserMessage>> {
        let mut state = self.lock();
        if state.queued.is_empty() {
            state.running = false;
            None
        } else {
            Some(std::mem::take(&mut state.queued))
        }
    }

    /// The session's side, when its turn stopped short (failed, cancelled): messages queued
    /// meanwhile start the next turn instead of being lost.
    pub(super) fn stop_turn(&self) {
        let mut state = self.lock();
        if state.queued.is_empty() {
            state.running = false;
        } else {
            state.turn += 1;
        }
    }

    /// The session's side, between turns: waits for the next turn (its number and first
    /// messages), `None` once the front end let go.
    pub(super) async fn next_turn(&self) -> Option<(u32, Vec<UserMessage>)> {
        loop {
            let woken = self.wake.notified();
            {
                let mut state = self.lock();
                if !state.queued.is_empty() {
                    state.running = true;
                    return Some((state.turn, std::mem::take(&mut state.queued)));
                }
                if state.closed {
                    return None;
                }
            }
            woken.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_go_only_to_a_model_that_takes_them_and_of_a_kind_and_size_it_takes() {
        let with = |media_type: &str, data: &str| UserMessage {
            text: "see".into(),
            images: vec![Image {
                media_type: media_type.into(),
                data: data.into(),
            }],
            ..UserMessage::default()
        };
        assert!(with("image/png", "iVBORw0KGgo=").check(true).is_ok());
        let refused = with("image/png", "iVBORw0KGgo=").check(false).unwrap_err();
        assert!(refused.contains("takes no images"), "{refused}");
        let refused = with("image/tiff", "AAAA").check(true).unwrap_err();
        assert!(refused.contains("image/png"), "{refused}");
        let refused = with("image/png", "not base64!").check(true).unwrap_err();
        assert!(refused.contains("base64"), "{refused}");
        let conversation = Conversation::starting(1);
        assert!(
            conversation
                .prompt(with("image/png", "iVBORw0KGgo="))
                .is_err()
        );
        conversation.set_takes_images(true);
        assert!(
            conversation
                .prompt(with("image/png", "iVBORw0KGgo="))
                .is_ok()
        );
    }

    fn message(text: &str) -> UserMessage {
        UserMessage {
            text: text.to_owned(),
            ..UserMessage::default()
        }
    }

    #[test]
    fn a_message_while_a_turn_runs_steers_it_and_one_after_starts_the_next() {
        let conversation = Conversation::starting(1);
        let joined = conversation.prompt(message("also the empty list")).unwrap();
        assert_eq!(
            joined,
            Joined {
                turn: 1,
                steering: true
            }
        );
        // The model finished, but a message was queued meanwhile: the turn goes on with it.
        let queued = conversation.end_turn().expect("the queued message");
        assert_eq!(queued[0].text, "also the empty list");
        assert_eq!(conversation.end_turn(), None);
        assert_eq!(conversation.turn(), (1, false));
        let joined = conversation.prompt(message("now the docs")).unwrap();
        assert_eq!(
            joined,
            Joined {
                turn: 2,
                steering: false
            }
        );
    }

    #[test]
    fn a_turn_stopped_short_hands_its_queued_messages_to_the_next() {
        let conversation = Conversation::starting(3);
        conversation.prompt(message("wait")).unwrap();
        conversation.stop_turn();
        assert_eq!(conversation.turn(), (4, true));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let (turn, messages) = runtime.block_on(conversation.next_turn()).unwrap();
        assert_eq!((turn, messages.len()), (4, 1));
        conversation.close();
        conversation.end_turn();
        assert!(runtime.block_on(conversation.next_turn()).is_none());
    }

    #[test]
    fn settings_apply_once_at_the_next_step() {
        let conversation = Conversation::starting(1);
        conversation.configure(Some(Mode::Plan), None);
        let (_, mode, _) = conversation.take();
        assert_eq!(mode, Some(Mode::Plan));
        let (_, mode, _) = conversation.take();
        assert_eq!(mode, None);
        assert!(
            Mode::parse("draft")
                .unwrap_err()
                .contains("\"code\" or \"plan\"")
        );
    }
}
