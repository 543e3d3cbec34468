//! The decoding loop: prefill (reusing the KV cache of the previous call's common prefix),
//! then token by token, or several tokens per forward pass with speculative decoding.
//!
//! Speculation here is lossless prompt-lookup drafting ("speculative edits"): when the output
//! is following a stretch of the source text (the file being rewritten, or the prompt) or
//! repeating a stretch of itself (a second similar function, a list, a loop), the next tokens
//! of that stretch are proposed as a draft, the model runs over the last token and
//! the whole draft in one forward pass, and every draft token the model would itself have
//! chosen at its position is kept; the first disagreement ends the round with the model's own
//! choice, and the KV cache is truncated to the kept tokens. Each kept token was chosen by
//! exactly the rule and from exactly the logits (see [`super::model`]) that plain decoding
//! would have used, so the output is byte-identical with and without speculation.
//!
//! Where the text offers nothing to copy, an optional [`DraftModel`] (a smaller model with the
//! same vocabulary) proposes the draft instead, decoding greedily on its own KV cache; the
//! verification is the same, so this too changes only speed.
//!
//! At a temperature, a [`Sampler`] draws each token instead, and verifies a draft by keeping
//! each drafted token with the model's probability for it (speculative sampling): the output
//! is then distributed exactly as without speculation.

use std::time::{Duration, Instant};

use super::LocalError;
use super::model::{KvCache, Model};
use wright_kernels::choice::{self, argmax};

/// Chooses tokens and consumes them: the chat decoder (text, tool calls, stop tokens).
pub trait Policy {
    /// The token to emit given the logits at this position, greedily.
    fn choose(&mut self, logits: &[f32]) -> Result<u32, LocalError>;
    /// Whether the next token is constrained (a tool call's JSON): then it is chosen by
    /// [`Self::choose`] even when sampling.
    fn constrained(&self) -> bool {
        false
    }
    /// Records an emitted token; `Stop` ends the generation.
    fn accept(&mut self, token: u32) -> Result<Flow, LocalError>;
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    Continue,
    Stop,
}

/// Prompt-lookup drafting settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Speculation {
    /// Longest draft verified in one pass.
    pub max_draft: usize,
    /// Longest suffix of the output looked up in the source to find where it is copying from.
    pub max_ngram: usize,
}

impl Default for Speculation {
    fn default() -> Self {
        Self {
            max_draft: 16,
            max_ngram: 4,
        }
    }
}

/// Sampling at a temperature, lossless under speculation: a drafted token is kept with the
/// probability the model gives it, and when it is not, the token is drawn from the model's
/// other tokens, renormalised. Every draft here is a deterministic proposal (copied text, or
/// a draft model decoding greedily), and for such a proposal this rule emits each token with
/// exactly the model's probability (speculative sampling), so speculation changes the speed
/// and not the distribution of what is written.
#[derive(Clone, Debug)]
pub struct Sampler {
    temperature: f32,
    /// splitmix64's state: a small generator, seeded, so a seeded run repeats itself.
    state: u64,
    weights: Vec<f32>,
}

impl Sampler {
    pub fn new(temperature: f32, seed: u64) -> Self {
        Self {
            temperature,
            state: seed,
            weights: Vec::new(),
        }
    }

    /// A uniform number in `[0, 1)`.
    fn uniform(&mut self) -> f64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }

    /// A token drawn from the softmax of `logits / temperature`; with `drafted`, that token
    /// kept with its probability, else another drawn in proportion to theirs.
    pub fn sample(&mut self, logits: &[f32], drafted: Option<u32>) -> u32 {
        self.weights.resize(logits.len(), 0.0);
        let total = choice::softmax_weights(logits, self.temperature, &mut self.weights);
        if !(total.is_finite() && total > 0.0) {
            // Logits that are not numbers have no distribution: the largest number among them.
            return argmax(logits);
        }
        let mut rest = total;
        if let Some(token) = drafted
            && let Some(&weight) = self.weights.get(token as usize)
        {
            if self.uniform() * total < f64::from(weight) {
                return token;
            }
            rest -= f64::from(weight);
            self.weights[token as usize] = 0.0;
        }
        let target = self.uniform() * rest;
        // Nothing left to draw only when the draft held all the weight: it is the choice.
        choice::draw(&self.weights, target).map_or(drafted.unwrap_or(0), |i| i as u32)
    }
}

/// The token at this position: sampled when there is a sampler and the policy leaves the
/// choice free, else the policy's own choice.
fn pick(
    policy: &mut dyn Policy,
    sampler: &mut Option<Sampler>,
    logits: &[f32],
    drafted: Option<u32>,
) -> Result<u32, LocalError> {
    match sampler {
        Some(sampler) if !policy.constrained() => Ok(sampler.sample(logits, drafted)),
        _ => policy.choose(logits),
    }
}

/// How one generation went.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Stats {
    pub prompt_tokens: usize,
    /// Prompt tokens whose keys and values were reused from the previous call.
    pub reused_tokens: usize,
    pub generated: usize,
    pub forward_passes: usize,
    pub drafted: usize,
    /// Of the drafted tokens, those the draft model proposed.
    pub model_drafted: usize,
    pub accepted: usize,
    pub prefill: Duration,
    pub decode: Duration,
    /// The token budget ran out before the policy stopped.
    pub truncated: bool,
}

/// A KV cache and the tokens it holds, kept between calls so a prompt that extends the last
/// one (an agent's transcript) only runs its new part.
pub struct Session {
    pub cache: KvCache,
    pub tokens: Vec<u32>,
}

impl Session {
    /// The session kept in `slot` from the last answer, or a new one with room for
    /// `capacity` positions.
    pub fn kept_or_new<'a>(
        slot: &'a mut Option<Session>,
        model: &Model,
        capacity: usize,
    ) -> Result<&'a mut Session, LocalError> {
        Ok(match slot {
            Some(session) => session,
            None => slot.insert(Session {
                cache: model.new_cache(capacity)?,
                tokens: Vec::new(),
            }),
        })
    }

    /// Brings the cache to hold exactly `tokens` (non-empty): keeps the prefix it shares with
    /// them, but always runs the last token, whose logits it returns, with how many tokens
    /// were reused and how many forward passes ran.
    fn catch_up(
        &mut self,
        model: &Model,
        tokens: &[u32],
        cancelled: &dyn Fn() -> bool,
    ) -> Result<(Vec<f32>, usize, usize), LocalError> {
        let common = self
            .tokens
            .iter()
            .zip(tokens)
            .take_while(|(a, b)| a == b)
            .count()
            .min(tokens.len() - 1)
            .min(self.cache.len());
        self.cache.truncate(common);
        self.tokens.truncate(common);
        let (mut logits, mut passes) = (Vec::new(), 0);
        for chunk in tokens[common..].chunks(PREFILL_CHUNK) {
            if cancelled() {
                return Err(LocalError::Cancelled);
            }
            logits = model.forward_prefill(&mut self.cache, chunk)?;
            self.tokens.extend_from_slice(chunk);
            passes += 1;
        }
        Ok((logits, common, passes))
    }
}

/// A smaller model with the main model's vocabulary, and its own KV cache.
pub struct DraftModel<'a> {
    pub model: &'a Model,
    pub session: &'a mut Session,
}

impl DraftModel<'_> {
    /// `count` tokens the draft model would write after `history`, greedily; none when
    /// `history` does not fit its context window.
    fn propose(&mut self, history: &[u32], count: usize) -> Result<Vec<u32>, LocalError> {
        if count == 0 || history.len() + count >= self.model.config.context_length {
            return Ok(Vec::new());
        }
        // From where the cache agrees with `history` (its own rejected drafts go).
        let (mut logits, _, _) = self.session.catch_up(self.model, history, &|| false)?;
        let mut draft = Vec::with_capacity(count);
        loop {
            let token = argmax(&logits);
            draft.push(token);
            if draft.len() == count {
                return Ok(draft);
            }
            logits = self
                .model
                .forward_rows(&mut self.session.cache, &[token])?
                .into_row(0);
            self.session.tokens.push(token);
        }
    }
}

/// Prefill chunk: bounds the attention scores' memory and how long a cancellation waits.
const PREFILL_CHUNK: usize = 256;

/// A model stuck in a loop: the last [`LOOP_SPAN`] tokens repeat with a period of at most
/// [`LOOP_PERIOD`]. Real text (even a table of zeros) almost never does over that length.
const LOOP_PERIOD: usize = 32;
const LOOP_SPAN: usize = 320;

#[allow(
    clippy::too_many_arguments,
    reason = "the decoding loop's inputs are independent; a struct would only rename them"
)]
pub fn generate(
    model: &Model,
    session: &mut Session,
    prompt: &[u32],
    source: &[u32],
    max_new: usize,
    speculation: Option<Speculation>,
    mut draft_model: Option<DraftModel<'_>>,
    mut sampler: Option<Sampler>,
    policy: &mut dyn Policy,
    cancelled: &dyn Fn() -> bool,
) -> Result<Stats, LocalError> {
    let context = model.config.context_length;
    if prompt.is_empty() {
        return Err(LocalError::Format("empty prompt".into()));
    }
    if prompt.len() >= context {
        return Err(LocalError::ContextFull {
            needed: prompt.len() + 1,
            context,
        });
    }
    let mut stats = Stats {
        prompt_tokens: prompt.len(),
        ..Stats::default()
    };
    let started = Instant::now();
    let (mut logits, reused, passes) = session.catch_up(model, prompt, cancelled)?;
    stats.reused_tokens = reused;
    stats.forward_passes += passes;
    stats.prefill = started.elapsed();
    let decoding = Instant::now();

    let mut drafter = Drafter::new(source);
    let mut pacing = Pacing::new(speculation.map_or(0, |s| s.max_draft));
    let mut history: Vec<u32> = prompt.to_vec();
    let mut next: Option<u32> = None;
    loop {
        if cancelled() {
            return Err(LocalError::Cancelled);
        }
        if stats.generated >= max_new || session.cache.len() >= context {
            stats.truncated = true;
            break;
        }
        let token = match next.take() {
            Some(token) => token,
            None => pick(policy, &mut sampler, &logits, None)?,
        };
        if emit(
            policy,
            &mut drafter,
            &mut history,
            &mut stats,
            prompt.len(),
            token,
        )? == Flow::Stop
        {
            break;
        }
        if stats.generated >= max_new || session.cache.len() + 1 >= context {
            stats.truncated = true;
            break;
        }
        // The draft never runs past the token budget nor the context window.
        let room = (max_new - stats.generated).min(context - session.cache.len() - 1);
        let draft = match speculation {
            Some(settings) => {
                let length = room.min(pacing.length());
                let copied = drafter.draft(&history, settings, length);
                match &mut draft_model {
                    Some(draft_model) if copied.is_empty() && length > 0 => {
                        let proposed = draft_model.propose(&history, length)?;
                        stats.model_drafted += proposed.len();
                        proposed
                    }
                    _ => copied,
                }
            }
            None => Vec::new(),
        };
        let base = session.cache.len();
        let mut batch = Vec::with_capacity(1 + draft.len());
        batch.push(token);
        batch.extend_from_slice(&draft);
        let rows = model.forward_rows(&mut session.cache, &batch)?;
        stats.forward_passes += 1;
        stats.drafted += draft.len();
        let mut kept = 0;
        let mut stop = false;
        for (i, drafted) in draft.iter().enumerate() {
            let choice = pick(policy, &mut sampler, rows.row(i), Some(*drafted))?;
            if choice != *drafted {
                next = Some(choice);
                break;
            }
            kept += 1;
            if emit(
                policy,
                &mut drafter,
                &mut history,
                &mut stats,
                prompt.len(),
                choice,
            )? == Flow::Stop
            {
                stop = true;
                break;
            }
        }
        stats.accepted += kept;
        pacing.update(draft.len(), kept);
        session.cache.truncate(base + 1 + kept);
        session.tokens.truncate(base);
        session.tokens.extend_from_slice(&batch[..1 + kept]);
        if stop {
            break;
        }
        if next.is_none() {
            logits = rows.into_row(kept);
        }
    }
    stats.decode = decoding.elapsed();
    Ok(stats)
}

/// How long the next draft may be. A verification pass shares its weight loads among its
/// rows, but each row still costs its own arithmetic and attention (about an eighth of a
/// single-token pass, `docs/benchmarks.md`), so drafts grow while they are accepted and shrink
/// when they are not, down to one token: at that price even a draft accepted one time in
/// five pays for itself. This changes only speed, never the output.
struct Pacing {
    max: usize,
    length: usize,
}

impl Pacing {
    fn new(max: usize) -> Self {
        Self {
            max,
            length: max.min(4),
        }
    }

    fn length(&self) -> usize {
        self.length
    }

    fn update(&mut self, drafted: usize, kept: usize) {
        if drafted == 0 {
            return;
        }
        self.length = if kept == drafted {
            (self.length * 2).min(self.max)
        } else if kept == 0 {
            (self.length / 2).max(1)
        } else {
            kept.clamp(1, self.max)
        };
    }
}

/// Hands one token to the policy and the drafter, and watches for a model stuck in a loop.
fn emit(
    policy: &mut dyn Policy,
    drafter: &mut Drafter<'_>,
    history: &mut Vec<u32>,
    stats: &mut Stats,
    prompt_len: usize,
    token: u32,
) -> Result<Flow, LocalError> {
    history.push(token);
    drafter.observe(history);
    stats.generated += 1;
    if let Some(period) = looping(&history[prompt_len..]) {
        return Err(LocalError::Degenerate(format!(
            "the model is repeating the same {period} token(s) over and over ({} tokens so far); \
             its output is not usable: a larger model may do this task",
            stats.generated
        )));
    }
    policy.accept(token)
}

/// The period of the loop the output ends in, if it has been repeating for [`LOOP_SPAN`]
/// tokens.
fn looping(output: &[u32]) -> Option<usize> {
    if output.len() < LOOP_SPAN + 1 {
        return None;
    }
    let tail = &output[output.len() - LOOP_SPAN - LOOP_PERIOD.min(output.len() - LOOP_SPAN)..];
    (1..=LOOP_PERIOD).find(|&period| {
        tail.len() >= LOOP_SPAN + period
            && (tail.len() - LOOP_SPAN..tail.len()).all(|i| tail[i] == tail[i - period])
    })
}

/// Shortest suffix of the text so far that is looked up in the text itself. A single token
/// (a newline, an indent) recurs everywhere and drafts noise; two already find the repeats
/// of a model writing the same line again, and a wrong draft costs little (see [`Pacing`]).
const MIN_SELF_NGRAM: usize = 2;

/// Where the output is expected to continue from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cursor {
    /// This position of the source.
    Source(usize),
    /// This position of the text so far (prompt and output): the output repeats itself.
    History(usize),
}

/// Finds where the output is copying from, in the source or else in the text so far, and
/// proposes what comes next there.
struct Drafter<'s> {
    source: &'s [u32],
    cursor: Option<Cursor>,
    /// Where the last alignment in the source ended: a new one is searched after it first,
    /// since a rewrite follows its original in order.
    last: usize,
}

impl<'s> Drafter<'s> {
    fn new(source: &'s [u32]) -> Self {
        Self {
            source,
            cursor: None,
            last: 0,
        }
    }

    /// Follows the token just appended to `history`.
    fn observe(&mut self, history: &[u32]) {
        let token = history.last().copied();
        self.cursor = match self.cursor {
            Some(Cursor::Source(at)) if self.source.get(at).copied() == token => {
                self.last = at + 1;
                Some(Cursor::Source(at + 1))
            }
            // `at` is before the appended token, so it is always in range.
            Some(Cursor::History(at)) if history.get(at).copied() == token => {
                Some(Cursor::History(at + 1))
            }
            _ => None,
        };
    }

    fn draft(&mut self, history: &[u32], settings: Speculation, room: usize) -> Vec<u32> {
        let limit = settings.max_draft.min(room);
        if limit == 0 {
            return Vec::new();
        }
        if self.cursor.is_none() {
            self.cursor = self
                .align(history, settings.max_ngram)
                .map(Cursor::Source)
                .or_else(|| align_in_itself(history, settings.max_ngram).map(Cursor::History));
        }
        match self.cursor {
            Some(Cursor::Source(at)) => {
                self.source[at..(at + limit).min(self.source.len())].to_vec()
            }
            Some(Cursor::History(at)) => {
                // A repetition closer than the draft is long (a loop of a few tokens) goes
                // on into the draft itself: position `i` of `history + draft` copies `at + i`.
                let mut draft = Vec::with_capacity(limit);
                for i in at..at + limit {
                    let token = match history.get(i) {
                        Some(&token) => token,
                        None => draft[i - history.len()],
                    };
                    draft.push(token);
                }
                draft
            }
            None => Vec::new(),
        }
    }

    /// The position after the longest suffix of `history` (up to `max_ngram` tokens, at least
    /// two unless the source is the only hint) found in the source; the first occurrence
    /// after the last alignment wins, else the first anywhere.
    fn align(&self, history: &[u32], max_ngram: usize) -> Option<usize> {
        for n in (1..=max_ngram.min(history.len())).rev() {
            let suffix = &history[history.len() - n..];
            let found = |from: usize| {
                self.source
                    .get(from..)?
                    .windows(n)
                    .position(|w| w == suffix)
                    .map(|p| from + p + n)
            };
            if let Some(end) = found(self.last).or_else(|| found(0))
                && end < self.source.len()
            {
                return Some(end);
            }
        }
        None
    }
}

/// The position after the most recent earlier occurrence of the longest suffix of `history`
/// (from `max_ngram` down to [`MIN_SELF_NGRAM`] tokens) in `history` itself.
fn align_in_itself(history: &[u32], max_ngram: usize) -> Option<usize> {
    for n in (MIN_SELF_NGRAM..=max_ngram.min(history.len().saturating_sub(1))).rev() {
        let suffix = &history[history.len() - n..];
        // Windows ending before the suffix's own last token, so the draft starts at a token
        // that exists.
        let earlier = &history[..history.len() - 1];
        if let Some(start) = earlier.windows(n).rposition(|w| w == suffix) {
            return Some(start + n);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drafts_grow_while_accepted_and_shrink_to_one_token_when_rejected() {
        let mut pacing = Pacing::new(16);
        assert_eq!(pacing.length(), 4);
        pacing.update(4, 4);
        assert_eq!(pacing.length(), 8);
        pacing.update(8, 8);
        pacing.update(16, 16);
        assert_eq!(pacing.length(), 16);
        pacing.update(16, 3);
        assert_eq!(pacing.length(), 3);
        pacing.update(3, 0);
        assert_eq!(pacing.length(), 1);
        pacing.update(1, 0);
        assert_eq!(pacing.length(), 1);
        pacing.update(1, 1);
        assert_eq!(pacing.length(), 2);
        let off = Pacing::new(0);
        assert_eq!(off.length(), 0);
    }

    #[test]
    fn sampling_with_a_draft_keeps_the_models_distribution() {
        let logits = [2.0f32, 1.0, 0.5, -1.0];
        let temperature = 0.8;
        let weights: Vec<f64> = logits
            .iter()
            .map(|&l| ((f64::from(l) - 2.0) / temperature).exp())
            .collect();
        let total: f64 = weights.iter().sum();
        let draws = 200_000;
        // Whatever was drafted (nothing, the likeliest token, an unlikely one), each token
        // comes out with the model's probability.
        for drafted in [None, Some(0), Some(2), Some(3)] {
            let mut sampler = Sampler::new(temperature as f32, 7);
            let mut counts = [0usize; 4];
            for _ in 0..draws {
                counts[sampler.sample(&logits, drafted) as usize] += 1;
            }
            for (token, count) in counts.iter().enumerate() {
                let (got, want) = (*count as f64 / draws as f64, weights[token] / total);
                assert!(
                    (got - want).abs() < 0.005,
                    "drafted {drafted:?}: token {token} drawn {got:.4}, probability {want:.4}"
                );
            }
        }
        // The same seed draws the same tokens.
        let run = |seed| {
            let mut sampler = Sampler::new(1.0, seed);
            (0..50)
                .map(|_| sampler.sample(&logits, Some(1)))
                .collect::<Vec<_>>()
        };
        assert_eq!(run(3), run(3));
        assert_ne!(run(3), run(4));
        // Logits that are not numbers (a broken model file) give the largest number's token.
        let mut sampler = Sampler::new(1.0, 1);
        assert_eq!(sampler.sample(&[0.0, f32::NAN, 3.0, 1.0], None), 2);
    }

    #[test]
    fn a_long_cycle_is_a_loop_but_varied_text_is_not() {
        let cycle: Vec<u32> = (0..LOOP_SPAN + 40).map(|i| (i % 7) as u32).collect();
        assert_eq!(looping(&cycle), Some(7));
        let varied: Vec<u32> = (0..1000).map(|i| (i * 31 % 977) as u32).collect();
        assert_eq!(looping(&varied), None);
        assert_eq!(looping(&cycle[..LOOP_SPAN - 1]), None);
    }

    #[test]
    fn the_drafter_follows_the_source_and_realigns_after_an_edit() {
        let source: Vec<u32> = (100..140).collect();
        let mut drafter = Drafter::new(&source);
        let settings = Speculation {
            max_draft: 4,
            max_ngram: 3,
        };
        let mut history = vec![1, 2, 100, 101];
        assert_eq!(
            drafter.draft(&history, settings, 10),
            vec![102, 103, 104, 105]
        );
        for t in [102, 103] {
            history.push(t);
            drafter.observe(&history);
        }
        assert_eq!(drafter.draft(&history, settings, 2), vec![104, 105]);
        // The output diverges (an edit), then comes back to the source further on.
        for t in [7, 8, 110, 111] {
            history.push(t);
            drafter.observe(&history);
        }
        assert_eq!(
            drafter.draft(&history, settings, 10),
            vec![112, 113, 114, 115]
        );
        assert_eq!(
            Drafter::new(&source).draft(&[5, 6], settings, 10),
            Vec::<u32>::new()
        );
    }

    #[test]
    fn output_that_repeats_itself_is_drafted_from_itself() {
        let settings = Speculation {
            max_draft: 6,
            max_ngram: 4,
        };
        let mut drafter = Drafter::new(&[]);
        // `1 2 3 4 9` seen before; the output now ends in `2 3 4` again.
        let mut history = vec![1, 2, 3, 4, 9, 8, 2, 3, 4];
        assert_eq!(
            drafter.draft(&history, settings, 10),
            vec![9, 8, 2, 3, 4, 9]
        );
        history.push(9);
        drafter.observe(&history);
        assert_eq!(drafter.draft(&history, settings, 2), vec![8, 2]);
        // A different token drops the cursor; a suffix seen nowhere before drafts nothing.
        for t in [5, 6, 7] {
            history.push(t);
            drafter.observe(&history);
        }
        assert_eq!(drafter.draft(&history, settings, 10), Vec::<u32>::new());
        // A short loop runs on into the draft; a single token is noise.
        let mut looping = Drafter::new(&[]);
        assert_eq!(
            looping.draft(&[0, 5, 6, 5, 6, 5], settings, 10),
            vec![6, 5, 6, 5, 6, 5]
        );
        assert_eq!(
            Drafter::new(&[]).draft(&[1, 2, 7, 1], settings, 10),
            Vec::<u32>::new()
        );
        assert_eq!(
            Drafter::new(&[]).draft(&[1, 2, 7, 1, 2], settings, 3),
            vec![7, 1, 2]
        );
        // The source is followed first.
        let source = [2, 3, 4, 70, 71];
        assert_eq!(
            Drafter::new(&source).draft(&history[..9], settings, 2),
            vec![70, 71]
        );
    }
}
