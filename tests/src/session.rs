//! Agent sessions over LSP, as the end-to-end tests drive them: a server whose model is the
//! scripted provider, the session's `finished` event, an edit applied as an editor applies it,
//! and the session journals read back (every line must parse: a journal is the record a
//! resumed session starts from).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::provider::ScriptedProvider;
use crate::{Editor, Spawn, TempDir};

/// The API key every agent test gives the server: tests grep logs and journals for it.
pub const TEST_KEY: &str = "sk-lsp-test-0123456789abcdef";

/// The capabilities of an editor that applies versioned edits.
pub fn versioned_edits() -> Value {
    json!({"workspace": {"workspaceEdit": {"documentChanges": true}}})
}

/// The capabilities of a client that takes no `documentChanges`: the server writes the files
/// it has not opened on disk itself, atomically — what the crash and load tests watch.
pub fn server_writes_unopened_files() -> Value {
    json!({})
}

/// How to start the server on `<dir>/ws` with the scripted provider as its model and its
/// cache and data under `dir` (so a restarted server finds the same journals and index).
pub fn agent_spawn(dir: &TempDir, provider: &ScriptedProvider) -> Spawn {
    Spawn {
        root: Some(dir.path().join("ws")),
        env: vec![
            ("WRIGHT_MODEL".into(), "openai/gpt-4.1".into()),
            ("OPENAI_BASE_URL".into(), provider.openai_base_url()),
            ("OPENAI_API_KEY".into(), TEST_KEY.into()),
            (
                "XDG_CACHE_HOME".into(),
                dir.path().join("cache").display().to_string(),
            ),
            (
                "XDG_DATA_HOME".into(),
                dir.path().join("data").display().to_string(),
            ),
        ],
        ..Spawn::default()
    }
}

/// Starts `spawn` on its root with `capabilities`.
pub fn start_agent_server(spawn: &Spawn, capabilities: Value) -> Editor {
    let root = spawn.root.clone().expect("an agent server has a root");
    let mut init = Editor::init_params(&root);
    init["capabilities"] = capabilities;
    Editor::start(spawn, init).0
}

/// Starts a session on `task`; returns its id.
pub fn run(editor: &mut Editor, task: &str) -> String {
    let run = editor.request("wright/agentRun", json!({"task": task}));
    run["sessionId"].as_str().expect("a session id").to_owned()
}

/// Waits for the session's `finished` event; returns its outcome. Other sessions' events and
/// log messages stay queued.
pub fn finished_event(editor: &mut Editor, session: &str) -> Value {
    let event = editor.expect("the session's finished event", |m| {
        m["method"] == "wright/agentEvent"
            && m["params"]["sessionId"] == session
            && m["params"]["kind"] == "finished"
    });
    event["params"]["outcome"].clone()
}

/// Waits for the session's `finished` event, then drops every agent event and log message
/// read so far; returns the outcome.
pub fn finished(editor: &mut Editor, session: &str) -> Value {
    let outcome = finished_event(editor, session);
    editor.discard(|m| m["method"] == "wright/agentEvent" || m["method"] == "window/logMessage");
    outcome
}

/// What an editor does with an edit it applies: the change notification, then the answer.
pub fn applies(editor: &mut Editor, id: &Value, uri: &str, version: i32, text: &str) {
    editor.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": uri, "version": version}, "contentChanges": [{"text": text}]}),
    );
    editor.respond(id, json!({"applied": true}));
}

/// Takes the next `workspace/applyEdit`; returns its id and its one text document edit.
pub fn apply_edit_request(editor: &mut Editor) -> (Value, Value) {
    let request = editor.expect("a workspace/applyEdit request", |m| {
        m["method"] == "workspace/applyEdit" && m.get("id").is_some()
    });
    let changes = request["params"]["edit"]["documentChanges"]
        .as_array()
        .expect("versioned documentChanges")
        .clone();
    assert_eq!(changes.len(), 1, "{request}");
    (request["id"].clone(), changes[0].clone())
}

/// Every session journal under `dir`'s data folder.
pub fn journal_paths(dir: &TempDir) -> Vec<PathBuf> {
    let sessions = dir.path().join("data/wright/sessions");
    let mut paths = Vec::new();
    for root in std::fs::read_dir(&sessions).into_iter().flatten().flatten() {
        for entry in std::fs::read_dir(root.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            if entry.path().extension().is_some_and(|e| e == "jsonl") {
                paths.push(entry.path());
            }
        }
    }
    paths.sort();
    paths
}

/// The lines of the journal of `session`, each parsed; fails the test on a line that is not
/// JSON or a journal that does not start with its `start` line. A journal a killed server was
/// writing may end in one cut line when `allow_cut_tail`.
pub fn journal(dir: &TempDir, session: &str, allow_cut_tail: bool) -> Vec<Value> {
    let path = journal_paths(dir)
        .into_iter()
        .find(|p| p.file_stem().is_some_and(|s| s == session))
        .unwrap_or_else(|| panic!("no journal for session {session}"));
    parse_journal(&path, allow_cut_tail)
}

/// The lines of the journal at `path`, each parsed (see [`journal`]).
pub fn parse_journal(path: &Path, allow_cut_tail: bool) -> Vec<Value> {
    let bytes = std::fs::read(path).expect("reading a journal");
    let text = String::from_utf8_lossy(&bytes);
    let mut lines: Vec<&str> = text.split_terminator('\n').collect();
    if allow_cut_tail && !text.ends_with('\n') {
        lines.pop();
    } else {
        assert!(
            text.is_empty() || text.ends_with('\n'),
            "{}: the last line is cut",
            path.display()
        );
    }
    let parsed: Vec<Value> = lines
        .iter()
        .enumerate()
        .map(|(n, line)| {
            serde_json::from_str(line)
                .unwrap_or_else(|err| panic!("{} line {}: {err}: {line}", path.display(), n + 1))
        })
        .collect();
    assert_eq!(
        parsed.first().map(|l| l["kind"].clone()),
        Some(json!("start")),
        "{}",
        path.display()
    );
    parsed
}

/// Polls `done` every 20 ms for up to `limit`; fails with `what` if it never holds.
pub fn wait_until(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `text` with LSP text edits applied by position (ASCII text: characters are bytes), as an
/// editor applies them whatever their version.
pub fn apply_text_edits(text: &str, edits: &Value) -> String {
    let offset = |position: &Value| {
        let line = position["line"].as_u64().unwrap() as usize;
        let start: usize = text.split_inclusive('\n').take(line).map(str::len).sum();
        start + position["character"].as_u64().unwrap() as usize
    };
    let mut edits: Vec<(usize, usize, &str)> = edits
        .as_array()
        .unwrap()
        .iter()
        .map(|edit| {
            let range = &edit["range"];
            (
                offset(&range["start"]),
                offset(&range["end"]),
                edit["newText"].as_str().unwrap(),
            )
        })
        .collect();
    edits.sort_by_key(|edit| std::cmp::Reverse(edit.0));
    let mut text = text.to_owned();
    for (start, end, new) in edits {
        text.replace_range(start..end, new);
    }
    text
}
