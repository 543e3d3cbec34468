//! The model clients against the scripted provider of `wright-tests`: both dialects through
//! every fault it can produce (rate limits with `Retry-After`, server errors, a wrong key, an
//! unknown model, a prompt too long, streams cut or stalled before and after output, slow
//! tokens, a late first byte, invalid tool-call JSON, a refused connection), cancellation by
//! dropping the stream, what goes over the wire (headers, cache keys, cache breakpoints), and
//! the prompt-prefix discipline over a scripted multi-step session.
//!
//! Timeouts are short and every test is bounded; the only timing checks are generous lower
//! bounds ("waited at least most of the Retry-After").

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde_json::json;
use wright::config::Layers;
use wright::llm::{
    self, AnthropicClient, ChatModel, ErrorKind, Event, EventStream, FinishReason, HttpSettings,
    LlmError, Message, ModelId, OpenAiClient, PriceTable, Request, Sampling, SessionUsage,
    ToolCall, ToolSchema, Transcript, Usage,
};
use wright_tests::provider::{Dialect, Fault, Outcome, Reply, ScriptedProvider, Turn};

const KEY: &str = "sk-test-0123456789";
const LIMIT: Duration = Duration::from_secs(30);

fn settings() -> HttpSettings {
    HttpSettings {
        connect_timeout: Duration::from_secs(2),
        first_byte_timeout: Duration::from_secs(3),
        idle_timeout: Duration::from_secs(2),
        max_attempts: 3,
        backoff_base: Duration::from_millis(10),
        backoff_max: Duration::from_millis(40),
        max_retry_wait: Duration::from_secs(5),
        max_response_bytes: HttpSettings::default().max_response_bytes,
    }
}

fn client(
    dialect: Dialect,
    provider: &ScriptedProvider,
    settings: HttpSettings,
) -> Box<dyn ChatModel> {
    match dialect {
        Dialect::OpenAi => Box::new(
            OpenAiClient::new(
                ModelId::parse("openai/gpt-4.1").unwrap(),
                &provider.openai_base_url(),
                Some(llm::ApiKey::new(KEY)),
                settings,
            )
            .unwrap(),
        ),
        Dialect::Anthropic => Box::new(
            AnthropicClient::new(
                ModelId::parse("anthropic/claude-sonnet-4-5").unwrap(),
                &provider.anthropic_base_url(),
                llm::ApiKey::new(KEY),
                settings,
            )
            .unwrap(),
        ),
    }
}

fn tools() -> Vec<ToolSchema> {
    vec![
        ToolSchema {
            name: "read_file".into(),
            description: "Read a file with line numbers.".into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
        },
        ToolSchema {
            name: "grep".into(),
            description: "Regex search over the workspace.".into(),
            parameters: json!({"type": "object", "properties": {"pattern": {"type": "string"}}, "required": ["pattern"]}),
        },
    ]
}

fn request() -> Request {
    Request {
        system: "You are wright's coding agent.".into(),
        tools: tools(),
        messages: vec![Message::User("Where is the config parsed?".into())],
        sampling: Sampling {
            temperature: Some(0.0),
            max_tokens: 1024,
        },
        cache_key: Some("session-42".into()),
        prediction: None,
        single_attempt: false,
    }
}

/// Every event until the end of the stream, and the error that ended it, if any.
async fn drain(mut stream: EventStream) -> (Vec<Event>, Option<LlmError>) {
    let mut events = Vec::new();
    while let Some(item) = stream.next().await {
        match item {
            Ok(event) => events.push(event),
            Err(error) => return (events, Some(error)),
        }
    }
    (events, None)
}

async fn run(model: &dyn ChatModel, request: &Request) -> (Vec<Event>, Option<LlmError>) {
    tokio::time::timeout(LIMIT, drain(model.stream(request)))
        .await
        .expect("the call ends in bounded time")
}

/// The provider's outcomes once there are `count`, waiting without blocking the runtime (the
/// client's connection tasks must keep running to hang up).
async fn outcomes(provider: &ScriptedProvider, count: usize) -> Vec<Outcome> {
    let deadline = Instant::now() + LIMIT;
    loop {
        let outcomes = provider.outcomes();
        if outcomes.len() >= count {
            return outcomes;
        }
        assert!(
            Instant::now() < deadline,
            "waited {LIMIT:?} for {count} outcomes: {outcomes:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn text_of(events: &[Event]) -> String {
    events
        .iter()
        .filter_map(|event| match event {
            Event::TextDelta(text) => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

fn calls_of(events: &[Event]) -> Vec<ToolCall> {
    events
        .iter()
        .filter_map(|event| match event {
            Event::ToolCallEnd { call, .. } => Some(call.clone()),
            _ => None,
        })
        .collect()
}

const BOTH: [Dialect; 2] = [Dialect::OpenAi, Dialect::Anthropic];

fn two_calls() -> Turn {
    Turn::text(&["Looking ", "at both."])
        .tool_call(
            "call_1",
            "read_file",
            r#"{"path": "server/src/config/mod.rs"}"#,
        )
        .tool_call(
            "call_2",
            "grep",
            r#"{"pattern": "fn resolve\\(", "glob": "*.rs"}"#,
        )
        .usage(5000, 4096, 60)
}

#[tokio::test]
async fn text_and_parallel_tool_calls_arrive_whole_across_split_writes() {
    for dialect in BOTH {
        let provider = ScriptedProvider::start();
        let turn = two_calls().cache_write(512);
        provider.push(Reply::stream(dialect, &turn).split_writes(7));
        let model = client(dialect, &provider, settings());
        let (events, error) = run(model.as_ref(), &request()).await;
        assert!(error.is_none(), "{dialect:?}: {error:?}");
        assert_eq!(text_of(&events), "Looking at both.");
        let calls = calls_of(&events);
        assert_eq!(calls.len(), 2, "{events:?}");
        assert_eq!(
            (calls[0].id.as_str(), calls[0].name.as_str()),
            ("call_1", "read_file")
        );
        assert_eq!(
            calls[0].parsed_arguments().unwrap()["path"],
            "server/src/config/mod.rs"
        );
        assert_eq!(
            calls[1].parsed_arguments().unwrap()["pattern"],
            "fn resolve\\("
        );
        // The argument fragments, concatenated, are the arguments.
        let fragments: String = events
            .iter()
            .filter_map(|event| match event {
                Event::ToolCallArgs { index: 1, fragment } => Some(fragment.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(fragments, calls[1].arguments);
        let usage = events.iter().find_map(|event| match event {
            Event::Usage(usage) => Some(*usage),
            _ => None,
        });
        let expected_write = if dialect == Dialect::Anthropic {
            512
        } else {
            0
        };
        assert_eq!(
            usage,
            Some(Usage {
                input: 5000,
                cached_input: 4096,
                output: 60,
                cache_write: expected_write,
            })
        );
        assert_eq!(events.last(), Some(&Event::Finish(FinishReason::ToolCalls)));
        assert_eq!(outcomes(&provider, 1).await, vec![Outcome::Completed]);
    }
}

#[tokio::test]
async fn openai_requests_carry_the_key_as_a_bearer_header_and_the_cache_key() {
    let provider = ScriptedProvider::start();
    provider.push(Reply::stream(Dialect::OpenAi, &Turn::text(&["ok"])));
    let model = client(Dialect::OpenAi, &provider, settings());
    let (_, error) = run(model.as_ref(), &request()).await;
    assert!(error.is_none(), "{error:?}");
    let sent = &provider.requests()[0];
    assert_eq!(
        (sent.method.as_str(), sent.path.as_str()),
        ("POST", "/v1/chat/completions")
    );
    assert_eq!(
        sent.header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert_eq!(sent.header("content-type"), Some("application/json"));
    let body = sent.json();
    assert_eq!(body["prompt_cache_key"], "session-42");
    assert_eq!(body["stream_options"]["include_usage"], true);
    assert_eq!(body["parallel_tool_calls"], true);
    assert_eq!(body["messages"][0]["role"], "system");
    assert!(
        !sent.body_text().contains(KEY),
        "the key travels in a header only"
    );
}

#[tokio::test]
async fn anthropic_requests_carry_the_key_header_version_and_cache_breakpoints() {
    let provider = ScriptedProvider::start();
    provider.push(Reply::stream(Dialect::Anthropic, &Turn::text(&["ok"])));
    let model = client(Dialect::Anthropic, &provider, settings());
    let (events, error) = run(model.as_ref(), &request()).await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(events.last(), Some(&Event::Finish(FinishReason::Stop)));
    let sent = &provider.requests()[0];
    assert_eq!(sent.path, "/v1/messages");
    assert_eq!(sent.header("x-api-key"), Some(KEY));
    assert_eq!(sent.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(sent.header("authorization"), None);
    let body = sent.json();
    let ephemeral = json!({"type": "ephemeral"});
    assert_eq!(body["tools"][1]["cache_control"], ephemeral);
    assert!(body["tools"][0].get("cache_control").is_none());
    assert_eq!(body["system"][0]["cache_control"], ephemeral);
    assert_eq!(
        body["messages"][0]["content"][0]["cache_control"],
        ephemeral
    );
    assert_eq!(body["max_tokens"], 1024);
}

#[tokio::test]
async fn a_rate_limit_is_retried_after_the_wait_the_provider_asks_for() {
    for dialect in BOTH {
        let provider = ScriptedProvider::start();
        provider.push(Reply::fault(
            dialect,
            Fault::RateLimited {
                retry_after: Some("1".into()),
            },
        ));
        provider.push(Reply::stream(dialect, &Turn::text(&["after ", "the wait"])));
        let model = client(dialect, &provider, settings());
        let (events, error) = run(model.as_ref(), &request()).await;
        assert!(error.is_none(), "{error:?}");
        assert_eq!(text_of(&events), "after the wait");
        let requests = provider.requests();
        assert_eq!(requests.len(), 2);
        let waited = requests[1].received - requests[0].received;
        assert!(
            waited >= Duration::from_millis(900),
            "{dialect:?}: waited {waited:?}"
        );
    }
}

#[tokio::test]
async fn retry_after_is_capped_and_an_http_date_is_understood() {
    let provider = ScriptedProvider::start();
    provider.push(Reply::fault(
        Dialect::OpenAi,
        Fault::RateLimited {
            retry_after: Some("Fri, 31 Dec 2100 23:59:59 GMT".into()),
        },
    ));
    provider.push(Reply::stream(Dialect::OpenAi, &Turn::text(&["ok"])));
    let capped = HttpSettings {
        max_retry_wait: Duration::from_millis(300),
        ..settings()
    };
    let model = client(Dialect::OpenAi, &provider, capped);
    let started = Instant::now();
    let (_, error) = run(model.as_ref(), &request()).await;
    assert!(error.is_none(), "{error:?}");
    let requests = provider.requests();
    assert!(requests[1].received - requests[0].received >= Duration::from_millis(250));
    assert!(started.elapsed() < LIMIT);
}

#[tokio::test]
async fn a_rate_limit_that_outlasts_the_attempts_says_so() {
    let provider = ScriptedProvider::start();
    for _ in 0..3 {
        provider.push(Reply::fault(
            Dialect::OpenAi,
            Fault::RateLimited {
                retry_after: Some("0".into()),
            },
        ));
    }
    let model = client(Dialect::OpenAi, &provider, settings());
    let (events, error) = run(model.as_ref(), &request()).await;
    assert!(events.is_empty());
    let error = error.expect("an error");
    assert!(
        matches!(error.kind, ErrorKind::RateLimited { attempts: 3, .. }),
        "{error:?}"
    );
    let text = error.to_string();
    assert!(
        text.starts_with("openai/gpt-4.1: rate limited (HTTP 429) after 3 attempt(s)"),
        "{text}"
    );
    assert_eq!(provider.requests().len(), 3);
}

#[tokio::test]
async fn server_errors_and_overload_are_retried() {
    for dialect in BOTH {
        let provider = ScriptedProvider::start();
        provider.push(Reply::fault(dialect, Fault::ServerError));
        provider.push(Reply::fault(dialect, Fault::Overloaded));
        provider.push(Reply::stream(dialect, &Turn::text(&["third time"])));
        let model = client(dialect, &provider, settings());
        let (events, error) = run(model.as_ref(), &request()).await;
        assert!(error.is_none(), "{dialect:?}: {error:?}");
        assert_eq!(text_of(&events), "third time");
        assert_eq!(provider.requests().len(), 3);
    }
    let provider = ScriptedProvider::start();
    for _ in 0..3 {
        provider.push(Reply::fault(Dialect::OpenAi, Fault::ServerError));
    }
    let model = client(Dialect::OpenAi, &provider, settings());
    let error = run(model.as_ref(), &request()).await.1.expect("an error");
    assert!(
        matches!(
            error.kind,
            ErrorKind::Server {
                status: 500,
                attempts: 3,
                ..
            }
        ),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_wrong_key_is_not_retried_and_the_error_names_the_variable_not_the_key() {
    for (dialect, variable) in [
        (Dialect::OpenAi, "OPENAI_API_KEY"),
        (Dialect::Anthropic, "ANTHROPIC_API_KEY"),
    ] {
        let provider = ScriptedProvider::start();
        // Some providers echo the rejected key: it must not reach the user's screen or logs.
        provider.push(Reply::json(
            401,
            &json!({"error": {"message": format!("Incorrect API key provided: {KEY}"), "type": "authentication_error"}}),
        ));
        provider.push(Reply::fault(dialect, Fault::Unauthorized));
        let model = client(dialect, &provider, settings());
        let error = run(model.as_ref(), &request()).await.1.expect("an error");
        assert_eq!(error.kind.status(), Some(401));
        let text = error.to_string();
        assert!(
            text.contains(variable) && text.contains("HTTP 401"),
            "{text}"
        );
        assert!(
            !text.contains(KEY) && !format!("{error:?}").contains(KEY),
            "{text}"
        );
        assert_eq!(provider.requests().len(), 1, "not retried");
    }
}

#[tokio::test]
async fn an_unknown_model_and_a_prompt_too_long_say_what_to_do() {
    for dialect in BOTH {
        let provider = ScriptedProvider::start();
        provider.push(Reply::fault(dialect, Fault::UnknownModel));
        provider.push(Reply::fault(dialect, Fault::ContextTooLong));
        let model = client(dialect, &provider, settings());
        let error = run(model.as_ref(), &request()).await.1.expect("an error");
        assert!(
            matches!(error.kind, ErrorKind::UnknownModel { status: 404, .. }),
            "{error:?}"
        );
        assert!(
            error.to_string().contains("check the model name"),
            "{error}"
        );
        let error = run(model.as_ref(), &request()).await.1.expect("an error");
        assert!(
            matches!(error.kind, ErrorKind::ContextTooLong { status: 400, .. }),
            "{error:?}"
        );
        assert!(error.to_string().contains("compaction"), "{error}");
        assert_eq!(provider.requests().len(), 2, "neither is retried");
    }
}

#[tokio::test]
async fn a_stream_cut_before_any_output_is_retried_transparently() {
    for dialect in BOTH {
        let provider = ScriptedProvider::start();
        // The first event of each dialect carries no output (role chunk, message_start).
        provider.push(Reply::stream(dialect, &Turn::text(&["never seen"])).cut_after(1));
        provider.push(Reply::stream(dialect, &Turn::text(&["whole ", "answer"])));
        let model = client(dialect, &provider, settings());
        let (events, error) = run(model.as_ref(), &request()).await;
        assert!(error.is_none(), "{dialect:?}: {error:?}");
        assert_eq!(text_of(&events), "whole answer");
        assert_eq!(provider.requests().len(), 2);
    }
}

#[tokio::test]
async fn a_stream_cut_after_output_restarts_the_answer_until_the_attempts_are_spent() {
    for dialect in BOTH {
        let provider = ScriptedProvider::start();
        let turn = Turn::text(&["one ", "two ", "three ", "four"]);
        let cut_at = if dialect == Dialect::OpenAi { 3 } else { 5 };
        provider.push(Reply::stream(dialect, &turn).cut_after(cut_at));
        provider.push(Reply::stream(dialect, &turn));
        let model = client(dialect, &provider, settings());
        let (events, error) = run(model.as_ref(), &request()).await;
        assert!(error.is_none(), "{dialect:?}: {error:?}");
        // What came before `Restarted` is void; the answer after it is whole.
        let restart = events
            .iter()
            .position(|event| matches!(event, Event::Restarted { .. }))
            .expect("the consumer is told the answer restarts");
        assert_eq!(text_of(&events[..restart]), "one two ", "{dialect:?}");
        assert_eq!(text_of(&events[restart + 1..]), "one two three four");
        assert_eq!(provider.requests().len(), 2);

        // Cut every time: an error once the attempts (3) are spent, saying how many.
        let provider = ScriptedProvider::start();
        for _ in 0..3 {
            provider.push(Reply::stream(dialect, &turn).cut_after(cut_at));
        }
        let model = client(dialect, &provider, settings());
        let (events, error) = run(model.as_ref(), &request()).await;
        let restarts = events
            .iter()
            .filter(|event| matches!(event, Event::Restarted { .. }))
            .count();
        assert_eq!(restarts, 2, "{dialect:?}");
        let error = error.expect("an error");
        assert!(
            matches!(error.kind, ErrorKind::StreamCut { attempts: 3, .. }),
            "{error:?}"
        );
        assert_eq!(provider.requests().len(), 3);
    }
}

#[tokio::test]
async fn a_stall_after_output_times_out_and_hangs_up() {
    let provider = ScriptedProvider::start();
    provider.push(Reply::stream(Dialect::OpenAi, &Turn::text(&["a", "b", "c"])).stall_after(3));
    let quick = HttpSettings {
        idle_timeout: Duration::from_secs(1),
        // One attempt: a stall after output is otherwise restarted like a cut.
        max_attempts: 1,
        ..settings()
    };
    let model = client(Dialect::OpenAi, &provider, quick);
    let (events, error) = run(model.as_ref(), &request()).await;
    assert_eq!(text_of(&events), "ab");
    let error = error.expect("an error");
    assert!(matches!(error.kind, ErrorKind::Stalled { .. }), "{error:?}");
    assert_eq!(
        outcomes(&provider, 1).await,
        vec![Outcome::ClientClosed { after_events: 3 }]
    );
}

#[tokio::test]
async fn an_answer_past_the_size_cap_ends_in_an_error_and_hangs_up() {
    let capped = || HttpSettings {
        max_response_bytes: 64 * 1024,
        ..settings()
    };
    let piece = "y".repeat(16 * 1024);
    for dialect in BOTH {
        // Text: what arrived within the cap is delivered, then the error; the provider, still
        // writing, finds the connection closed. Not retried: the model would say it all again.
        let provider = ScriptedProvider::start();
        let turn = Turn::text(&vec![piece.as_str(); 100]);
        provider.push(Reply::stream(dialect, &turn).token_delay(Duration::from_millis(5)));
        provider.push(Reply::stream(dialect, &Turn::text(&["never asked"])));
        let model = client(dialect, &provider, capped());
        let (events, error) = run(model.as_ref(), &request()).await;
        assert!(text_of(&events).len() <= 64 * 1024, "{dialect:?}");
        let error = error.expect("an error");
        assert!(
            matches!(error.kind, ErrorKind::TooLarge { limit: 65536 }),
            "{error:?}"
        );
        assert!(
            error
                .to_string()
                .contains("the model's response exceeded 64 KiB"),
            "{error}"
        );
        assert!(
            error.to_string().contains("llm.max_response_mib"),
            "{error}"
        );
        assert!(matches!(
            outcomes(&provider, 1).await[..],
            [Outcome::ClientClosed { .. }]
        ));
        assert_eq!(provider.requests().len(), 1);

        // Tool-call arguments count the same: the call never completes.
        let provider = ScriptedProvider::start();
        let mut turn = Turn::default().tool_call(
            "c1",
            "write_file",
            &json!({"path": "big.txt", "content": "z".repeat(100 * 1024)}).to_string(),
        );
        turn.argument_fragment = 4096;
        provider.push(Reply::stream(dialect, &turn));
        let model = client(dialect, &provider, capped());
        let (events, error) = run(model.as_ref(), &request()).await;
        assert!(calls_of(&events).is_empty(), "{dialect:?}");
        assert!(
            matches!(error.map(|e| e.kind), Some(ErrorKind::TooLarge { .. })),
            "{dialect:?}"
        );
    }
}

#[tokio::test]
async fn a_stall_before_output_and_a_late_first_byte_are_retried() {
    let provider = ScriptedProvider::start();
    provider.push(Reply::stream(Dialect::Anthropic, &Turn::text(&["x"])).stall_after(1));
    provider.push(
        Reply::stream(Dialect::Anthropic, &Turn::text(&["x"])).header_delay(Duration::from_secs(4)),
    );
    provider.push(Reply::stream(Dialect::Anthropic, &Turn::text(&["finally"])));
    let quick = HttpSettings {
        idle_timeout: Duration::from_secs(1),
        first_byte_timeout: Duration::from_millis(1500),
        ..settings()
    };
    let model = client(Dialect::Anthropic, &provider, quick);
    let (events, error) = run(model.as_ref(), &request()).await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(text_of(&events), "finally");
    assert_eq!(provider.requests().len(), 3);
}

#[tokio::test]
async fn a_provider_that_never_answers_is_reported_after_the_attempts() {
    let provider = ScriptedProvider::start();
    for _ in 0..2 {
        provider.push(
            Reply::stream(Dialect::OpenAi, &Turn::text(&["x"]))
                .header_delay(Duration::from_secs(2)),
        );
    }
    let quick = HttpSettings {
        first_byte_timeout: Duration::from_millis(300),
        max_attempts: 2,
        ..settings()
    };
    let model = client(Dialect::OpenAi, &provider, quick);
    let error = run(model.as_ref(), &request()).await.1.expect("an error");
    assert!(
        matches!(error.kind, ErrorKind::FirstByteTimeout { attempts: 2, .. }),
        "{error:?}"
    );
    assert!(
        error.to_string().contains("llm.first_byte_timeout_secs"),
        "{error}"
    );
}

#[tokio::test]
async fn an_error_event_is_retried_before_output_and_restarts_the_answer_after() {
    let start = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n";
    let overloaded = "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n";
    let text = "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"partial\"}}\n\n";
    let partial_then_overloaded = || Reply::sse(vec![start.into(), text.into(), overloaded.into()]);
    let provider = ScriptedProvider::start();
    provider.push(Reply::sse(vec![start.into(), overloaded.into()]));
    provider.push(Reply::stream(Dialect::Anthropic, &Turn::text(&["fine"])));
    let model = client(Dialect::Anthropic, &provider, settings());
    let (events, error) = run(model.as_ref(), &request()).await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(text_of(&events), "fine");
    assert!(!events.iter().any(|e| matches!(e, Event::Restarted { .. })));

    // After part of the answer: the answer restarts, and the next attempt is whole.
    provider.push(partial_then_overloaded());
    provider.push(Reply::stream(Dialect::Anthropic, &Turn::text(&["whole"])));
    let (events, error) = run(model.as_ref(), &request()).await;
    assert!(error.is_none(), "{error:?}");
    let restart = events
        .iter()
        .position(|e| matches!(e, Event::Restarted { .. }))
        .expect("restarted");
    assert_eq!(text_of(&events[..restart]), "partial");
    assert_eq!(text_of(&events[restart + 1..]), "whole");

    // Overloaded on every attempt: the provider's error, once the attempts are spent.
    for _ in 0..3 {
        provider.push(partial_then_overloaded());
    }
    let (_, error) = run(model.as_ref(), &request()).await;
    let error = error.expect("an error");
    assert!(
        matches!(error.kind, ErrorKind::InStream { .. }),
        "{error:?}"
    );
    assert!(
        error.to_string().contains("overloaded_error: Overloaded"),
        "{error}"
    );
}

#[tokio::test]
async fn a_server_that_does_not_stream_is_reported_not_retried() {
    let provider = ScriptedProvider::start();
    provider.push(Reply::json(
        200,
        &json!({"choices": [{"message": {"role": "assistant", "content": "whole"}}]}),
    ));
    let model = client(Dialect::OpenAi, &provider, settings());
    let error = run(model.as_ref(), &request()).await.1.expect("an error");
    assert!(
        matches!(error.kind, ErrorKind::Protocol { .. }),
        "{error:?}"
    );
    assert!(
        error
            .to_string()
            .contains("expected an event stream, got application/json"),
        "{error}"
    );
    assert_eq!(provider.requests().len(), 1);
}

#[tokio::test]
async fn an_answer_cut_by_max_tokens_finishes_with_length() {
    for dialect in BOTH {
        let provider = ScriptedProvider::start();
        let reason = if dialect == Dialect::OpenAi {
            "length"
        } else {
            "max_tokens"
        };
        provider.push(Reply::stream(
            dialect,
            &Turn::text(&["trunc"]).finish(reason),
        ));
        let model = client(dialect, &provider, settings());
        let (events, error) = run(model.as_ref(), &request()).await;
        assert!(error.is_none(), "{error:?}");
        assert_eq!(events.last(), Some(&Event::Finish(FinishReason::Length)));
    }
}

#[tokio::test]
async fn slow_tokens_are_delivered_as_they_come() {
    let provider = ScriptedProvider::start();
    let pieces: Vec<String> = (0..20).map(|i| format!("t{i} ")).collect();
    let pieces: Vec<&str> = pieces.iter().map(String::as_str).collect();
    provider.push(
        Reply::stream(Dialect::OpenAi, &Turn::text(&pieces)).token_delay(Duration::from_millis(50)),
    );
    let model = client(Dialect::OpenAi, &provider, settings());
    let mut stream = model.stream(&request());
    let first = tokio::time::timeout(LIMIT, stream.next()).await.unwrap();
    assert_eq!(first.unwrap().unwrap(), Event::TextDelta("t0 ".into()));
    // The server is still sending: the first token was not held back until the end.
    assert!(provider.outcomes().is_empty());
    let (rest, error) = tokio::time::timeout(LIMIT, drain(stream)).await.unwrap();
    assert!(error.is_none(), "{error:?}");
    assert!(text_of(&rest).ends_with("t19 "));
}

#[tokio::test]
async fn dropping_the_stream_hangs_up_at_once() {
    for dialect in BOTH {
        let provider = ScriptedProvider::start();
        let pieces = vec!["tok "; 200];
        provider.push(
            Reply::stream(dialect, &Turn::text(&pieces)).token_delay(Duration::from_millis(20)),
        );
        let model = client(dialect, &provider, settings());
        let mut stream = model.stream(&request());
        let first = tokio::time::timeout(LIMIT, stream.next()).await.unwrap();
        assert!(matches!(first, Some(Ok(Event::TextDelta(_)))), "{first:?}");
        drop(stream);
        let outcomes = outcomes(&provider, 1).await;
        match outcomes[0] {
            Outcome::ClientClosed { after_events } => assert!(after_events < 150, "{after_events}"),
            ref other => panic!("{dialect:?}: expected a hang-up, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn invalid_tool_call_json_is_delivered_as_written() {
    for dialect in BOTH {
        let provider = ScriptedProvider::start();
        let turn =
            Turn::default().tool_call("call_9", "edit", r#"{"path": "a.rs", "old_string": "x"#);
        provider.push(Reply::stream(dialect, &turn));
        let model = client(dialect, &provider, settings());
        let (events, error) = run(model.as_ref(), &request()).await;
        assert!(error.is_none(), "{error:?}");
        let calls = calls_of(&events);
        assert_eq!(calls[0].arguments, r#"{"path": "a.rs", "old_string": "x"#);
        let why = calls[0].parsed_arguments().unwrap_err();
        assert!(why.contains("not valid JSON"), "{why}");
        assert_eq!(events.last(), Some(&Event::Finish(FinishReason::ToolCalls)));
    }
}

#[tokio::test]
async fn a_refused_connection_is_reported_with_the_attempts() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let model = OpenAiClient::new(
        ModelId::parse("openai/qwen2.5-coder:7b").unwrap(),
        &format!("http://127.0.0.1:{port}/v1"),
        None,
        HttpSettings {
            max_attempts: 2,
            ..settings()
        },
    )
    .unwrap();
    let error = run(&model, &request()).await.1.expect("an error");
    assert!(
        matches!(error.kind, ErrorKind::Connect { attempts: 2, .. }),
        "{error:?}"
    );
    assert!(error.to_string().contains("check the base URL"), "{error}");
}

#[tokio::test]
async fn clients_come_from_the_configuration_and_local_servers_need_no_key() {
    let provider = ScriptedProvider::start();
    provider.push(Reply::stream(
        Dialect::OpenAi,
        &Turn::text(&["local"]).usage(100, 0, 5),
    ));
    let base_url = provider.openai_base_url();
    let env = move |var: &str| match var {
        "OPENAI_BASE_URL" => Some(base_url.clone()),
        "WRIGHT_MODEL" => Some("openai/qwen2.5-coder:7b".to_owned()),
        _ => None,
    };
    let mut layers = Layers::load(None, &[], &env);
    layers.set_initialization_options(&json!({"llm": {"maxAttempts": 2, "idleTimeoutSecs": 5, "maxResponseMib": 8}, "prices": "openai/qwen2.5-coder:7b=0.1/0/0.2"}));
    let config = layers.resolve();
    assert!(config.problems().is_empty(), "{:?}", config.problems());
    let settings = HttpSettings::from_config(&config);
    assert_eq!(
        (
            settings.max_attempts,
            settings.idle_timeout,
            settings.max_response_bytes
        ),
        (2, Duration::from_secs(5), 8 << 20)
    );
    let router = wright::router::Router::from_config(&config, None).unwrap();
    let decision = router.route_task("explain the config layers");
    let model = llm::connect(&config, &decision.model).unwrap();
    let response = tokio::time::timeout(LIMIT, model.stream(&request()).collect_response())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(response.text, "local");
    assert_eq!(provider.requests()[0].header("authorization"), None);

    let mut session = SessionUsage::default();
    session.record(
        model.model(),
        &response.usage.unwrap(),
        &PriceTable::from_config(&config),
    );
    assert!((session.cost_usd - (100.0 * 0.1 + 5.0 * 0.2) / 1e6).abs() < 1e-12);

    let anthropic = ModelId::parse("anthropic/claude-sonnet-4-5").unwrap();
    let error = llm::connect(&config, &anthropic).err().expect("no key");
    assert!(
        error.to_string().contains("set ANTHROPIC_API_KEY"),
        "{error}"
    );
}

/// The bytes of a request, with Anthropic's history breakpoint removed: it moves forward each
/// step by design (the cache key is the content, not the marker).
fn comparable(dialect: Dialect, body: &[u8]) -> String {
    let text = String::from_utf8(body.to_vec()).unwrap();
    match dialect {
        Dialect::OpenAi => text,
        Dialect::Anthropic => text.replace(r#","cache_control":{"type":"ephemeral"}"#, ""),
    }
}

/// Whether `next` starts with all of `previous` but the brackets that close it.
fn extends(previous: &str, next: &str) -> bool {
    next.starts_with(previous.trim_end_matches([']', '}']))
}

#[tokio::test]
async fn each_step_of_a_session_extends_the_previous_request_byte_for_byte() {
    const STEPS: usize = 12;
    const COMPACT_BEFORE: usize = 8;
    for dialect in BOTH {
        let provider = ScriptedProvider::start();
        for step in 0..STEPS {
            let turn = if step + 1 == STEPS {
                Turn::text(&["Done."])
            } else {
                Turn::text(&["Step ", "on."])
                    .tool_call(
                        &format!("c{step}a"),
                        "grep",
                        &format!(r#"{{"pattern": "p{step}"}}"#),
                    )
                    .tool_call(
                        &format!("c{step}b"),
                        "read_file",
                        &format!(r#"{{"path": "f{step}.rs"}}"#),
                    )
            };
            provider.push(Reply::stream(dialect, &turn).split_writes(11));
        }
        let model = client(dialect, &provider, settings());
        let mut transcript = Transcript::new(
            "You are wright's coding agent.".into(),
            tools(),
            Sampling::default(),
            Some("session-7".into()),
        );
        transcript.push(Message::User("Find where prices are parsed.".into()));
        let mut rewrites = Vec::new();
        for step in 0..STEPS {
            if step == COMPACT_BEFORE {
                transcript.compact(transcript.messages().len() - 3, "Searched p0..p6.");
            }
            rewrites.push(transcript.rewrites());
            let response = tokio::time::timeout(
                LIMIT,
                model.stream(&transcript.request()).collect_response(),
            )
            .await
            .unwrap()
            .unwrap();
            transcript.push(Message::Assistant {
                text: response.text.clone(),
                tool_calls: response.tool_calls.clone(),
            });
            for call in &response.tool_calls {
                transcript.push(Message::ToolResult {
                    call_id: call.id.clone(),
                    content: format!("output of {} {}", call.name, call.arguments),
                    is_error: false,
                });
            }
            // Volatile facts go in the newest message, never in the system prompt.
            if !response.tool_calls.is_empty() {
                transcript.push(Message::User(format!("(step {step} of the session)")));
            }
        }
        let bodies: Vec<String> = provider
            .requests()
            .iter()
            .map(|request| comparable(dialect, &request.body))
            .collect();
        assert_eq!(bodies.len(), STEPS);
        for step in 1..STEPS {
            let same_generation = rewrites[step] == rewrites[step - 1];
            assert_eq!(
                extends(&bodies[step - 1], &bodies[step]),
                same_generation,
                "{dialect:?} step {step}: prefix kept only where compaction did not rewrite"
            );
        }
        assert_eq!(
            rewrites.iter().filter(|&&r| r == 1).count(),
            STEPS - COMPACT_BEFORE
        );
    }
}
