//! Counting tokens offline with `tiktoken-rs` (its encodings are compiled in).
//!
//! `o200k_base` is the estimate for every provider: exact for current OpenAI models, within a
//! few percent for the others, which publish no tokenizer. Building the encoder costs a few
//! hundred milliseconds once per process, so it is built on first use and shared. Providers
//! report the real counts with each answer ([`super::Usage`]); estimates are for deciding
//! before a call (what fits, when to compact).

use super::types::{Message, Request};

/// The number of tokens `text` takes.
pub fn count(text: &str) -> usize {
    tiktoken_rs::o200k_base_singleton()
        .encode_ordinary(text)
        .len()
}

/// Builds the encoder on a thread of its own, for a front end that will count soon but has
/// other work first: `wright exec` builds its index meanwhile, where the session's first
/// count (the retrieved context's budget) would otherwise wait for the build after it.
pub fn warm_in_background() -> std::thread::JoinHandle<()> {
    std::thread::spawn(|| {
        tiktoken_rs::o200k_base_singleton();
    })
}

/// Framing each message adds beyond its text (role, separators), as OpenAI documents it.
const PER_MESSAGE: usize = 4;

/// An estimate of the prompt tokens `request` takes: system prompt, tool schemas, messages.
pub fn estimate_request(request: &Request) -> usize {
    estimate_fixed(request) + request.messages.iter().map(estimate_message).sum::<usize>()
}

/// The part of [`estimate_request`] that does not change within a session: the system prompt
/// and the tool schemas.
pub fn estimate_fixed(request: &Request) -> usize {
    let tools: usize = request
        .tools
        .iter()
        .map(|tool| {
            count(&tool.name) + count(&tool.description) + count(&tool.parameters.to_string())
        })
        .sum();
    count(&request.system) + PER_MESSAGE + tools
}

/// The tokens an attached image is counted as.
const IMAGE_TOKENS: usize = 1_000;

/// The tokens one message adds to a request, its framing included.
pub fn estimate_message(message: &Message) -> usize {
    PER_MESSAGE
        + match message {
            Message::User(text) => count(text),
            // What providers bill a typical screenshot at; its base64 is not text.
            Message::Image { .. } => IMAGE_TOKENS,
            Message::Assistant { text, tool_calls } => {
                count(text)
                    + tool_calls
                        .iter()
                        .map(|call| count(&call.name) + count(&call.arguments))
                        .sum::<usize>()
            }
            Message::ToolResult { content, .. } => count(content),
        }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_plausible_and_deterministic() {
        assert_eq!(count(""), 0);
        let code = "pub fn parse_http_request(buf: &[u8]) -> Request {}";
        let n = count(code);
        assert!((8..=30).contains(&n), "{n}");
        assert_eq!(count(code), n);
    }

    #[test]
    fn a_warmed_encoder_counts_as_a_cold_one() {
        let code = "fn main() { println!(\"hello\"); }";
        warm_in_background().join().expect("the warm-up thread");
        assert_eq!(
            count(code),
            tiktoken_rs::o200k_base()
                .unwrap()
                .encode_ordinary(code)
                .len()
        );
    }

    #[test]
    fn a_request_estimate_grows_with_its_history() {
        let mut request = Request {
            system: "You are a coding agent.".into(),
            ..Request::default()
        };
        let empty = estimate_request(&request);
        request.messages.push(Message::User(
            "rename parse to parse_all in src/lib.rs".into(),
        ));
        let one = estimate_request(&request);
        assert!(one > empty + PER_MESSAGE, "{empty} {one}");
    }
}
