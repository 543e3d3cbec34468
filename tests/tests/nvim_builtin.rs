//! The server's side of Neovim's own LSP client, without wright.nvim, played by the test:
//! it declares no `documentChanges`, but its `workspace/applyEdit` handler applies them,
//! checking the version only of a request's first `TextDocumentEdit` and only when it is above
//! 0. So wright sends it versioned edits, one document per request, never at version 0; a
//! request that fails after others landed has them taken back; and an edit the client applied
//! to text the user had changed (found from the `didChange` that follows) is taken back, the
//! user told, and the model told the edit did not apply. The same client in a real Neovim is
//! `nvim.rs`'s `neovim_without_the_plugin_*` test.

use serde_json::{Value, json};
use wright_tests::provider::{Dialect, Reply, ScriptedProvider, Turn};
use wright_tests::session::{agent_spawn, apply_text_edits, finished, run};
use wright_tests::{Editor, TempDir, file_uri};

const LIB: &str = "pub fn add(a: i32, b: i32) -> i32 {\n    a - b\n}\n";
const TYPED: &str = "// typed by the user\n";

/// What Neovim 0.12 declares of its edits, and who it says it is.
fn start_as_neovim(dir: &TempDir, provider: &ScriptedProvider) -> Editor {
    let spawn = agent_spawn(dir, provider);
    let mut init = Editor::init_params(&dir.path().join("ws"));
    init["clientInfo"] = json!({"name": "Neovim", "version": "0.12.0-dev"});
    init["capabilities"] = json!({
        "workspace": {
            "applyEdit": true,
            "workspaceEdit": {"resourceOperations": ["rename", "create", "delete"]},
        },
    });
    Editor::start(&spawn, init).0
}

fn edit_turn(id: &str, old: &str, new: &str) -> Turn {
    Turn::default().tool_call(
        id,
        "edit",
        &json!({"path": "src/lib.rs", "old_string": old, "new_string": new}).to_string(),
    )
}

/// The next `workspace/applyEdit`: its id and its one text document edit (it must hold
/// exactly one, versioned).
fn one_document_edit(editor: &mut Editor) -> (Value, Value) {
    let request = editor.expect("a workspace/applyEdit request", |m| {
        m["method"] == "workspace/applyEdit" && m.get("id").is_some()
    });
    let edit = &request["params"]["edit"];
    assert!(edit.get("changes").is_none(), "{request}");
    let changes = edit["documentChanges"]
        .as_array()
        .unwrap_or_else(|| panic!("versioned documentChanges: {request}"));
    assert_eq!(changes.len(), 1, "one document per request: {request}");
    (request["id"].clone(), changes[0].clone())
}

/// Applies `edit` to `text` and tells the server as Neovim does: the ranged changes (each
/// edit against the text the one after it left: Neovim applies them last first), then the
/// answer.
fn applies(
    editor: &mut Editor,
    id: &Value,
    uri: &str,
    version: i32,
    text: &mut String,
    edit: &Value,
) {
    let mut edits: Vec<Value> = edit["edits"].as_array().unwrap().clone();
    edits.sort_by_key(|edit| {
        let start = &edit["range"]["start"];
        std::cmp::Reverse((start["line"].as_u64(), start["character"].as_u64()))
    });
    let changes: Vec<Value> = edits
        .iter()
        .map(|edit| json!({"range": edit["range"], "text": edit["newText"]}))
        .collect();
    *text = apply_text_edits(text, &edit["edits"]);
    editor.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": uri, "version": version}, "contentChanges": changes}),
    );
    editor.respond(id, json!({"applied": true}));
}

/// The contents of the tool results the model was sent in request `index`.
fn tool_results(provider: &ScriptedProvider, index: usize) -> Vec<String> {
    provider.requests()[index].tool_results()
}

#[test]
fn an_edit_neovim_applied_to_text_the_user_had_changed_is_taken_back_and_redone() {
    let dir = TempDir::new("nvim-builtin-misplaced");
    dir.write("ws/src/lib.rs", LIB);
    let provider = ScriptedProvider::start();
    provider.push(Reply::stream(
        Dialect::OpenAi,
        &edit_turn("e1", "    a - b\n", "    a + b\n"),
    ));
    provider.push(Reply::stream(
        Dialect::OpenAi,
        &edit_turn("e2", "    a - b\n", "    a + b\n"),
    ));
    provider.push(Reply::stream(Dialect::OpenAi, &Turn::text(&["Fixed."])));
    let mut editor = start_as_neovim(&dir, &provider);
    let uri = file_uri(&dir.path().join("ws/src/lib.rs"));
    // Neovim opens every buffer at version 0, and then counts its changedtick.
    editor.open(&uri, "rust", 0, LIB);
    let session = run(&mut editor, "fix add");

    let (id, edit) = one_document_edit(&mut editor);
    assert_eq!(
        edit["textDocument"]["version"], 1,
        "never 0, which Neovim does not check: {edit}"
    );
    // The user typed a line above just before Neovim applied the edit, and this Neovim
    // applied it anyway, at its positions: on the wrong line.
    let mut text = LIB.to_owned();
    editor.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": uri, "version": 4}, "contentChanges": [{
            "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}},
            "text": TYPED,
        }]}),
    );
    text.insert_str(0, TYPED);
    applies(&mut editor, &id, &uri, 5, &mut text, &edit);
    assert_ne!(text, format!("{TYPED}{}", LIB.replace("a - b", "a + b")));

    // wright takes it back, on the version it sees now.
    let (id, back) = one_document_edit(&mut editor);
    assert_eq!(back["textDocument"]["version"], 5, "{back}");
    applies(&mut editor, &id, &uri, 6, &mut text, &back);
    assert_eq!(text, format!("{TYPED}{LIB}"), "the user's text, as it was");
    let told = editor.expect_notification("window/showMessage");
    assert_eq!(told["type"], 2, "{told}");
    let message = told["message"].as_str().unwrap();
    assert!(
        message.contains("src/lib.rs") && message.contains("taken back"),
        "{message}"
    );

    // The model was told the edit did not apply, re-read, and its retry landed.
    let (id, retry) = one_document_edit(&mut editor);
    assert_eq!(retry["textDocument"]["version"], 6, "{retry}");
    applies(&mut editor, &id, &uri, 7, &mut text, &retry);
    let outcome = finished(&mut editor, &session);
    assert_eq!(outcome["status"], "done", "{outcome}");
    assert_eq!(outcome["filesChanged"], json!(["src/lib.rs"]), "{outcome}");
    let first = tool_results(&provider, 1);
    assert!(
        first[0].contains("changed since the edit was planned"),
        "{first:?}"
    );
    let second = tool_results(&provider, 2);
    assert!(second[1].contains("update src/lib.rs"), "{second:?}");
    let (version, held) = editor.text_of(&uri);
    assert_eq!(
        (version, held.as_str()),
        (
            7,
            format!("{TYPED}{}", LIB.replace("a - b", "a + b")).as_str()
        )
    );
    editor.shutdown();
}

#[test]
fn a_two_file_edit_goes_one_document_per_request_and_a_refusal_takes_back_the_first() {
    let dir = TempDir::new("nvim-builtin-two-files");
    dir.write("ws/src/a.rs", "pub fn a() {}\n");
    dir.write("ws/src/b.rs", "pub fn b() {}\n");
    let patch = "*** Begin Patch\n*** Update File: src/a.rs\n@@\n-pub fn a() {}\n+pub fn a2() {}\n\
                 *** Update File: src/b.rs\n@@\n-pub fn b() {}\n+pub fn b2() {}\n*** End Patch\n";
    let provider = ScriptedProvider::start();
    provider.push(Reply::stream(
        Dialect::OpenAi,
        &Turn::default().tool_call("p1", "apply_patch", &json!({"patch": patch}).to_string()),
    ));
    provider.push(Reply::stream(Dialect::OpenAi, &Turn::text(&["Stopped."])));
    let mut editor = start_as_neovim(&dir, &provider);
    let a = file_uri(&dir.path().join("ws/src/a.rs"));
    let b = file_uri(&dir.path().join("ws/src/b.rs"));
    editor.open(&a, "rust", 0, "pub fn a() {}\n");
    editor.open(&b, "rust", 3, "pub fn b() {}\n");
    let session = run(&mut editor, "rename both");

    let (id, first) = one_document_edit(&mut editor);
    assert_eq!(first["textDocument"]["uri"], a);
    assert_eq!(first["textDocument"]["version"], 1, "{first}");
    let mut a_text = "pub fn a() {}\n".to_owned();
    applies(&mut editor, &id, &a, 2, &mut a_text, &first);
    assert_eq!(a_text, "pub fn a2() {}\n");
    // Only once the first landed does the second go, on its own.
    let (id, second) = one_document_edit(&mut editor);
    assert_eq!(second["textDocument"]["uri"], b);
    assert_eq!(second["textDocument"]["version"], 3, "{second}");
    editor.respond(
        &id,
        json!({"applied": false, "failureReason": "b.rs changed"}),
    );
    // The plan is all or nothing: a.rs is taken back.
    let (id, back) = one_document_edit(&mut editor);
    assert_eq!(back["textDocument"]["uri"], a);
    assert_eq!(back["textDocument"]["version"], 2, "{back}");
    applies(&mut editor, &id, &a, 3, &mut a_text, &back);
    assert_eq!(a_text, "pub fn a() {}\n");

    let outcome = finished(&mut editor, &session);
    assert_eq!(outcome["filesChanged"], json!([]), "{outcome}");
    let results = tool_results(&provider, 1);
    assert!(
        results[0].contains("changed since the edit was planned"),
        "{results:?}"
    );
    assert_eq!(editor.text_of(&a), (3, "pub fn a() {}\n".to_owned()));
    editor.shutdown();
}
