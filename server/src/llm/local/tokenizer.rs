//! The tokenizer of a GGUF model, rebuilt from its metadata (`tokenizer.ggml.*`: tokens,
//! merges, token types, special ids) with no `tokenizer.json`: GPT-2 byte-level BPE, as
//! SmolLM2 and most llama-family exports of the last years use.
//!
//! Encoding goes through the `tokenizers` crate (BPE model, pre-tokenizer and special tokens
//! built by hand here). Decoding is done here, byte by byte: every token maps to the bytes it
//! stands for, which the streaming text decoder and the JSON constraint both need (a token can
//! end in the middle of a UTF-8 character).

use std::collections::HashMap;

use candle_core::quantized::gguf_file;
use tokenizers::models::bpe::BPE;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::digits::Digits;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::{AddedToken, Tokenizer as HfTokenizer};

use super::LocalError;

/// GGUF token types (`tokenizer.ggml.token_type`).
const TYPE_CONTROL: i32 = 3;
const TYPE_USER_DEFINED: i32 = 4;

pub struct Tokenizer {
    inner: HfTokenizer,
    /// The bytes each token stands for; `None` for control tokens, which stand for no text.
    bytes: Vec<Option<Vec<u8>>>,
    ids: HashMap<String, u32>,
    pub eos: u32,
}

/// GPT-2's reversible map from bytes to printable characters, inverted: which byte each
/// character of a token's text stands for.
fn unicode_to_byte() -> HashMap<char, u8> {
    let printable = |b: u32| (33..=126).contains(&b) || (161..=172).contains(&b) || b >= 174;
    let mut map = HashMap::with_capacity(256);
    let mut next = 256u32;
    for b in 0u32..=255 {
        let c = if printable(b) {
            b
        } else {
            next += 1;
            next - 1
        };
        map.insert(
            char::from_u32(c).expect("GPT-2 byte characters are valid"),
            b as u8,
        );
    }
    map
}

fn strings(content: &gguf_file::Content, key: &str) -> Result<Vec<String>, LocalError> {
    let value = content
        .metadata
        .get(key)
        .ok_or_else(|| LocalError::Format(format!("the GGUF metadata has no {key}")))?;
    let array = value.to_vec().map_err(|source| LocalError::Candle {
        context: key.to_owned(),
        source,
    })?;
    array
        .iter()
        .map(|v| {
            v.to_string().cloned().map_err(|source| LocalError::Candle {
                context: key.to_owned(),
                source,
            })
        })
        .collect()
}

impl Tokenizer {
    pub fn from_gguf(content: &gguf_file::Content) -> Result<Self, LocalError> {
        let model = content
            .metadata
            .get("tokenizer.ggml.model")
            .and_then(|v| v.to_string().ok())
            .cloned()
            .unwrap_or_default();
        if model != "gpt2" {
            return Err(LocalError::Format(format!(
                "tokenizer.ggml.model is {model:?}; only GPT-2 byte-level BPE (\"gpt2\") is \
                 supported"
            )));
        }
        let tokens = strings(content, "tokenizer.ggml.tokens")?;
        let merges = strings(content, "tokenizer.ggml.merges")?;
        let types: Vec<i32> = match content.metadata.get("tokenizer.ggml.token_type") {
            Some(value) => value
                .to_vec()
                .map_err(|source| LocalError::Candle {
                    context: "tokenizer.ggml.token_type".to_owned(),
                    source,
                })?
                .iter()
                .map(|v| v.to_i32().unwrap_or(1))
                .collect(),
            None => vec![1; tokens.len()],
        };
        let eos = content
            .metadata
            .get("tokenizer.ggml.eos_token_id")
            .and_then(|v| v.to_u32().ok())
            .ok_or_else(|| {
                LocalError::Format("the GGUF metadata has no tokenizer.ggml.eos_token_id".into())
            })?;

        let ids: HashMap<String, u32> = tokens
            .iter()
            .enumerate()
            .map(|(id, token)| (token.clone(), id as u32))
            .collect();
        let merges = merges
            .iter()
            .map(|line| {
                line.split_once(' ')
                    .map(|(a, b)| (a.to_owned(), b.to_owned()))
                    .ok_or_else(|| {
                        LocalError::Format(format!("a BPE merge without a space: {line:?}"))
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let bpe = BPE::builder()
            .vocab_and_merges(
                ids.iter()
                    .map(|(token, id)| (token.clone(), *id))
                    .collect::<tokenizers::models::bpe::Vocab>(),
                merges,
            )
            .build()
            .map_err(|e| LocalError::Format(format!("cannot build the BPE model: {e}")))?;
        let mut inner = HfTokenizer::new(bpe);
        // SmolLM2's pre-tokenizer (and llama.cpp's "smollm"): digits split one by one, then
        // GPT-2's byte-level split (no prefix space).
        inner.with_pre_tokenizer(Some(Sequence::new(vec![
            Digits::new(true).into(),
            ByteLevel::new(false, true, true).into(),
        ])));
        let special: Vec<AddedToken> = tokens
            .iter()
            .zip(&types)
            .filter(|(_, kind)| matches!(**kind, TYPE_CONTROL | TYPE_USER_DEFINED))
            .map(|(token, _)| AddedToken::from(token.clone(), true))
            .collect();
        inner
            .add_special_tokens(special)
            .map_err(|e| LocalError::Format(format!("cannot add the special tokens: {e}")))?;

        let table = unicode_to_byte();
        let bytes = tokens
            .iter()
            .zip(&types)
            .map(|(token, kind)| {
                if *kind == TYPE_CONTROL {
                    return None;
                }
                if *kind == TYPE_USER_DEFINED {
                    return Some(token.as_bytes().to_vec());
                }
                token.chars().map(|c| table.get(&c).copied()).collect()
            })
            .collect();
        Ok(Self {
            inner,
            bytes,
            ids,
            eos,
        })
    }

    /// Token ids of `text`; special tokens written in it (`<|im_start|>`) become their ids.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, LocalError> {
        self.inner
            .encode_fast(text, false)
            .map(|e| e.get_ids().to_vec())
            .map_err(|e| LocalError::Format(format!("cannot tokenize: {e}")))
    }

    /// The bytes of one token; `None` for a control token.
    pub fn token_bytes(&self, id: u32) -> Option<&[u8]> {
        self.bytes.get(id as usize).and_then(|b| b.as_deref())
    }

    /// The id of a token written exactly so (`<|im_end|>`).
    pub fn id(&self, token: &str) -> Option<u32> {
        self.ids.get(token).copied()
    }

    pub fn vocab_size(&self) -> usize {
        self.bytes.len()
    }

    /// Whether `other` gives every token the same id and text (a draft model must: its tokens
    /// are verified by id).
    pub fn same_vocabulary(&self, other: &Tokenizer) -> bool {
        self.eos == other.eos && self.bytes == other.bytes && self.ids.len() == other.ids.len()
    }

    /// The text of `ids`, control tokens left out; bytes that are not UTF-8 are replaced.
    pub fn decode(&self, ids: &[u32]) -> String {
        let bytes: Vec<u8> = ids
            .iter()
            .filter_map(|id| self.token_bytes(*id))
            .flatten()
            .copied()
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

/// Turns a stream of token bytes into text pieces, holding back the bytes of an unfinished
/// UTF-8 character until the token that completes it.
#[derive(Default)]
pub struct Utf8Stream {
    pending: Vec<u8>,
}

impl Utf8Stream {
    pub fn push(&mut self, bytes: &[u8]) -> String {
        self.pending.extend_from_slice(bytes);
        let valid = match std::str::from_utf8(&self.pending) {
            Ok(_) => self.pending.len(),
            Err(e) if e.error_len().is_none() => e.valid_up_to(),
            // Invalid (not merely unfinished) bytes: replace them rather than wait forever.
            Err(_) => {
                let text = String::from_utf8_lossy(&self.pending).into_owned();
                self.pending.clear();
                return text;
            }
        };
        let rest = self.pending.split_off(valid);
        String::from_utf8(std::mem::replace(&mut self.pending, rest))
            .expect("checked to be UTF-8 above")
    }

    /// What is left at the end of the stream.
    pub fn finish(&mut self) -> String {
        let text = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_byte_table_covers_every_byte_once() {
        let table = unicode_to_byte();
        assert_eq!(table.len(), 256);
        assert_eq!(table[&'Ġ'], b' ');
        assert_eq!(table[&'Ċ'], b'\n');
        assert_eq!(table[&'a'], b'a');
        let mut seen: Vec<u8> = table.values().copied().collect();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), 256);
    }

    #[test]
    fn a_character_split_across_tokens_is_held_back_until_complete() {
        let mut stream = Utf8Stream::default();
        let e_acute = "é".as_bytes();
        assert_eq!(stream.push(b"caf"), "caf");
        assert_eq!(stream.push(&e_acute[..1]), "");
        assert_eq!(stream.push(&e_acute[1..]), "é");
        assert_eq!(stream.push(&[0xff, b'x']), "\u{fffd}x");
        assert_eq!(stream.push(&e_acute[..1]), "");
        assert_eq!(stream.finish(), "\u{fffd}");
    }
}
