//! Counting tokens offline with `tiktoken-rs` (its encodings are compiled in).
//!
//! `o200k_base` is the estimate for every provider: exact for current OpenAI models, within a
//! few percent for the others, which publish no tokenizer. Building the encoder costs a few
//! hundred milliseconds once per process, so it is built on first use and shared.

/// The number of tokens `text` takes.
pub fn count(text: &str) -> usize {
    tiktoken_rs::o200k_base_singleton()
        .encode_ordinary(text)
        .len()
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
}
