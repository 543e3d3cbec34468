//! Everything about talking to models. For now, token counting: retrieval fits what it shows a
//! model into a token budget. The provider-neutral chat interface and its OpenAI-compatible and
//! Anthropic clients come with the models issue.

pub mod tokens;
