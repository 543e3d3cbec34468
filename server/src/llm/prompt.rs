//! The prompt builder: a session's transcript, append-only, so each step's request extends
//! the previous one and the provider's prompt cache keeps working (`docs/design.md`, "Latency
//! discipline").
//!
//! The system prompt, the tool schemas, the sampling settings and the cache key are fixed
//! when the transcript is made; messages are only appended. Volatile facts (time, git state)
//! belong in the newest message, never in the system prompt. The sanctioned rewrites are
//! compaction's: masking old tool results ([`Transcript::mask_tool_results`]) and replacing
//! old messages with a summary ([`Transcript::compact`]); each counts itself in
//! [`Transcript::rewrites`], so a caller (or a test) knows where the prefix was given up.

use super::types::{Message, Request, Sampling, ToolSchema};

#[derive(Clone, Debug)]
pub struct Transcript {
    base: Request,
    rewrites: u32,
}

/// What starts the summary message compaction leaves in place of older messages.
pub const COMPACTION_MARKER: &str = "[Earlier conversation, compacted]";

impl Transcript {
    pub fn new(
        system: String,
        tools: Vec<ToolSchema>,
        sampling: Sampling,
        cache_key: Option<String>,
    ) -> Self {
        Self {
            base: Request {
                system,
                tools,
                messages: Vec::new(),
                sampling,
                cache_key,
                prediction: None,
                single_attempt: false,
            },
            rewrites: 0,
        }
    }

    pub fn push(&mut self, message: Message) {
        self.base.messages.push(message);
    }

    /// The tools offered from the next request on (a mode switch); the prefix changes with
    /// them, so this is for the rare switch, not per step.
    pub fn set_tools(&mut self, tools: Vec<ToolSchema>) {
        self.base.tools = tools;
    }

    pub fn messages(&self) -> &[Message] {
        &self.base.messages
    }

    /// How many times history was rewritten. Two requests built with the same count share
    /// their prefix byte for byte.
    pub fn rewrites(&self) -> u32 {
        self.rewrites
    }

    /// The request for the next step.
    pub fn request(&self) -> Request {
        self.base.clone()
    }

    /// Replaces the content of the tool results at the given message indexes (observation
    /// masking), all in one rewrite. Indexes that are not tool results are skipped; returns
    /// how many were replaced, and counts a rewrite only when that is not zero.
    pub fn mask_tool_results(&mut self, replacements: Vec<(usize, String)>) -> usize {
        let mut replaced = 0;
        for (index, text) in replacements {
            if let Some(Message::ToolResult { content, .. }) = self.base.messages.get_mut(index) {
                *content = text;
                replaced += 1;
            }
        }
        if replaced > 0 {
            self.rewrites += 1;
        }
        replaced
    }

    /// Replaces the messages before `keep_from` with one user message holding `summary`.
    /// The cut moves forward past tool results, so no result is kept without its call.
    pub fn compact(&mut self, keep_from: usize, summary: &str) {
        let messages = &mut self.base.messages;
        let mut keep_from = keep_from.min(messages.len());
        while matches!(messages.get(keep_from), Some(Message::ToolResult { .. })) {
            keep_from += 1;
        }
        messages.splice(
            ..keep_from,
            [Message::User(format!("{COMPACTION_MARKER}\n{summary}"))],
        );
        self.rewrites += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::types::ToolCall;

    #[test]
    fn compaction_keeps_calls_with_their_results_and_counts_itself() {
        let mut transcript = Transcript::new("sys".into(), Vec::new(), Sampling::default(), None);
        transcript.push(Message::User("task".into()));
        transcript.push(Message::Assistant {
            text: String::new(),
            tool_calls: vec![ToolCall {
                id: "1".into(),
                name: "grep".into(),
                arguments: "{}".into(),
            }],
        });
        transcript.push(Message::ToolResult {
            call_id: "1".into(),
            content: "out".into(),
            is_error: false,
        });
        transcript.push(Message::User("more".into()));
        transcript.compact(2, "searched");
        assert_eq!(transcript.rewrites(), 1);
        assert_eq!(transcript.messages().len(), 2);
        assert!(
            matches!(&transcript.messages()[0], Message::User(text) if text.starts_with(COMPACTION_MARKER))
        );
        assert_eq!(transcript.messages()[1], Message::User("more".into()));
    }

    #[test]
    fn masking_replaces_only_tool_results_and_counts_one_rewrite() {
        let mut transcript = Transcript::new("sys".into(), Vec::new(), Sampling::default(), None);
        transcript.push(Message::User("task".into()));
        transcript.push(Message::ToolResult {
            call_id: "1".into(),
            content: "long output".into(),
            is_error: false,
        });
        assert_eq!(transcript.mask_tool_results(Vec::new()), 0);
        assert_eq!(transcript.rewrites(), 0);
        let replaced = transcript.mask_tool_results(vec![
            (0, "no".into()),
            (1, "[masked]".into()),
            (9, "x".into()),
        ]);
        assert_eq!(replaced, 1);
        assert_eq!(transcript.rewrites(), 1);
        assert_eq!(transcript.messages()[0], Message::User("task".into()));
        assert!(
            matches!(&transcript.messages()[1], Message::ToolResult { content, .. } if content == "[masked]")
        );
    }
}
