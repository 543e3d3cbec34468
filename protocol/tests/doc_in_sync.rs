//! Fails when `docs/protocol.md` and this crate drift: the document records a hash of the
//! crate's source, must name every method and command, and its table of `wright/agentEvent`
//! kinds must be `AgentEventKind`'s.

use std::path::Path;

/// FNV-1a, 64 bits, over the source with line endings normalised: stable across platforms and
/// checkouts, and no dependency for a check that needs no cryptography.
fn fnv1a(text: &str) -> u64 {
    text.replace("\r\n", "\n")
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
            (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
        })
}

#[test]
fn protocol_md_matches_the_crate() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let source = std::fs::read_to_string(root.join("src/lib.rs")).unwrap();
    let doc = std::fs::read_to_string(root.join("../docs/protocol.md")).unwrap();
    let expected = format!("{:016x}", fnv1a(&source));
    let recorded = doc
        .lines()
        .find_map(|line| line.trim().strip_prefix("<!-- protocol-hash: "))
        .and_then(|rest| rest.strip_suffix(" -->"))
        .expect("docs/protocol.md must carry a `<!-- protocol-hash: … -->` line");
    for name in wright_protocol::METHODS
        .iter()
        .chain(wright_protocol::commands::ALL)
    {
        assert!(
            doc.contains(&format!("`{name}`")),
            "docs/protocol.md does not document `{name}`"
        );
    }
    assert_eq!(
        recorded, expected,
        "protocol/src/lib.rs changed since docs/protocol.md was last updated: bring the \
         document up to date, then record `<!-- protocol-hash: {expected} -->` in it"
    );
}

/// One sample of every kind of `wright/agentEvent`, as the server writes it.
const EVENT_SAMPLES: &[&str] = &[
    r#"{"sessionId": "s1", "seq": 1, "kind": "model", "model": "openai/gpt-4.1", "tier": null, "reason": "configured"}"#,
    r#"{"sessionId": "s1", "seq": 2, "kind": "turn", "turn": 1, "message": "add a test"}"#,
    r#"{"sessionId": "s1", "seq": 2, "kind": "mode", "mode": "plan"}"#,
    r#"{"sessionId": "s1", "seq": 2, "kind": "stepStarted", "step": 1}"#,
    r#"{"sessionId": "s1", "seq": 3, "kind": "textDelta", "text": "Reading"}"#,
    r#"{"sessionId": "s1", "seq": 3, "kind": "stepRetried", "step": 1, "reason": "connection reset"}"#,
    r#"{"sessionId": "s1", "seq": 4, "kind": "toolCall", "id": "call_1", "name": "read_file", "arguments": "{}"}"#,
    r#"{"sessionId": "s1", "seq": 5, "kind": "toolResult", "id": "call_1", "name": "read_file", "isError": false, "output": "1 fn main() {}"}"#,
    r#"{"sessionId": "s1", "seq": 6, "kind": "approval", "command": "cargo fetch", "decision": "allow"}"#,
    r#"{"sessionId": "s1", "seq": 6, "kind": "editApplied", "paths": ["src/lib.rs"]}"#,
    r#"{"sessionId": "s1", "seq": 6, "kind": "editRejected", "paths": ["src/lib.rs"], "reason": "src/lib.rs: changed since the edit was planned"}"#,
    r#"{"sessionId": "s1", "seq": 6, "kind": "filesChanged", "paths": ["src/lib.rs"]}"#,
    r#"{"sessionId": "s1", "seq": 6, "kind": "editProposed", "path": "src/lib.rs", "before": "a - b\n", "after": null, "hunks": [{"id": "h1", "startLine": 1, "endLine": 1, "oldText": "a - b\n", "newText": ""}]}"#,
    r#"{"sessionId": "s1", "seq": 7, "kind": "plan", "steps": [{"title": "edit", "status": "in_progress"}]}"#,
    r#"{"sessionId": "s1", "seq": 8, "kind": "usage", "input": 1200, "cachedInput": 1000, "output": 30, "cacheWrite": 0, "contextTokens": 1230, "contextWindow": 128000, "costUsd": 0.0011}"#,
    r#"{"sessionId": "s1", "seq": 9, "kind": "compacted", "masked": 2, "tokensBefore": 9000, "tokensAfter": 4000, "summarized": false}"#,
    r#"{"sessionId": "s1", "seq": 10, "kind": "error", "message": "rate limited"}"#,
    r#"{"sessionId": "s1", "seq": 11, "kind": "title", "title": "Test the parser"}"#,
    r#"{"sessionId": "s1", "seq": 11, "kind": "finished", "turn": 1, "outcome": {"status": "done", "message": "done", "reason": null, "steps": 3, "filesChanged": ["src/lib.rs"], "usage": {"input": 1200, "cachedInput": 1000, "output": 30, "cacheWrite": 0}}}"#,
];

/// The kinds of `wright/agentEvent` in the document's table, each with the fields it names
/// (the backquoted identifiers of its second column).
fn documented_event_kinds(doc: &str) -> Vec<(String, Vec<String>)> {
    let section = doc
        .split("### `wright/agentEvent`")
        .nth(1)
        .expect("docs/protocol.md documents `wright/agentEvent`");
    let section = section.split("\n## ").next().unwrap_or(section);
    let quoted = |cell: &str| -> Vec<String> {
        cell.split('`')
            .skip(1)
            .step_by(2)
            .filter(|word| !word.is_empty() && word.chars().all(|c| c.is_ascii_alphanumeric()))
            .map(str::to_owned)
            .collect()
    };
    section
        .lines()
        .filter_map(|line| {
            let cells: Vec<&str> = line.split(" | ").collect();
            let kind = quoted(cells.first()?).into_iter().next()?;
            Some((kind, quoted(cells.get(1)?)))
        })
        .collect()
}

/// `AgentEventKind`, which the VS Code extension's union is generated from, has exactly the
/// kinds and fields the document's table lists, and reads the server's JSON unchanged.
#[test]
fn agent_event_kinds_match_the_doc() {
    use wright_protocol::{AgentEventKind, AgentEventParams};

    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("../docs/protocol.md")).unwrap();
    let documented = documented_event_kinds(&doc);
    assert_eq!(documented.len(), EVENT_SAMPLES.len(), "{documented:?}");
    for ((kind, fields), sample) in documented.iter().zip(EVENT_SAMPLES) {
        let json: serde_json::Value = serde_json::from_str(sample).unwrap();
        let event: AgentEventParams<AgentEventKind> = serde_json::from_value(json.clone())
            .unwrap_or_else(|err| panic!("{sample} is not an AgentEventKind: {err}"));
        assert_eq!(serde_json::to_value(&event).unwrap(), json);
        assert_eq!(json["kind"], kind.as_str(), "the table's order");
        let mut own: Vec<&str> = json
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        own.retain(|key| !matches!(*key, "sessionId" | "seq" | "kind"));
        let mut fields: Vec<&str> = fields.iter().map(String::as_str).collect();
        own.sort_unstable();
        fields.sort_unstable();
        assert_eq!(own, fields, "the fields of `{kind}` in docs/protocol.md");
        // A new variant fails to compile here until it has a sample and a row in the doc.
        match event.event {
            AgentEventKind::Model { .. }
            | AgentEventKind::Turn { .. }
            | AgentEventKind::Mode { .. }
            | AgentEventKind::Title { .. }
            | AgentEventKind::StepStarted { .. }
            | AgentEventKind::TextDelta { .. }
            | AgentEventKind::StepRetried { .. }
            | AgentEventKind::ToolCall { .. }
            | AgentEventKind::ToolResult { .. }
            | AgentEventKind::Approval { .. }
            | AgentEventKind::EditApplied { .. }
            | AgentEventKind::EditRejected { .. }
            | AgentEventKind::FilesChanged { .. }
            | AgentEventKind::EditProposed { .. }
            | AgentEventKind::Plan { .. }
            | AgentEventKind::Usage { .. }
            | AgentEventKind::Compacted { .. }
            | AgentEventKind::Error { .. }
            | AgentEventKind::Finished { .. } => {}
        }
    }
}
