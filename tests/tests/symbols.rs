//! The symbol index through the language server: `workspace/symbol`, progress while
//! indexing, and updates from buffers and watched files.

use serde_json::{Value, json};
use wright_tests::{Editor, Spawn, TempDir, file_uri};

fn start(dir: &TempDir, capabilities: Value) -> Editor {
    let spawn = Spawn {
        root: Some(dir.path().to_owned()),
        env: vec![(
            "XDG_CACHE_HOME".into(),
            dir.path().join(".cache").display().to_string(),
        )],
        ..Spawn::default()
    };
    let mut init = Editor::init_params(dir.path());
    init["capabilities"] = capabilities;
    Editor::start(&spawn, init).0
}

#[test]
fn workspace_symbol_finds_definitions_with_columns_in_the_client_encoding() {
    let dir = TempDir::new("wsymbol");
    dir.write("src/lib.rs", "/* 😀 */ pub fn parse_request() {}\npub struct Server;\nimpl Server { fn start(&self) {} }\n");
    dir.write("tool.py", "def parse_args():\n    pass\n");
    let mut editor = start(&dir, json!({}));
    let symbols = editor.symbols_until("parse_request", |s| !s.is_empty());
    let first = &symbols[0];
    assert_eq!(first["name"], "parse_request");
    assert_eq!(first["kind"], 12, "function");
    assert_eq!(
        first["location"]["uri"],
        file_uri(&dir.path().join("src/lib.rs"))
    );
    // "/* 😀 */ pub fn " is 16 UTF-16 units (the emoji is two).
    assert_eq!(
        first["location"]["range"],
        json!({"start": {"line": 0, "character": 16}, "end": {"line": 0, "character": 29}})
    );
    let start = editor.symbols_until("start", |s| !s.is_empty());
    assert_eq!(
        (start[0]["kind"].clone(), start[0]["containerName"].clone()),
        (json!(6), json!("Server"))
    );
    // Parts of identifiers across languages.
    let parse = editor.symbols_until("parse", |s| s.len() >= 2);
    let mut names: Vec<&str> = parse.iter().map(|s| s["name"].as_str().unwrap()).collect();
    names.sort();
    assert_eq!(names, ["parse_args", "parse_request"]);
    assert!(editor.shutdown().success());
}

#[test]
fn buffer_edits_are_searchable_without_saving_and_closing_restores_the_disk() {
    let dir = TempDir::new("wsymbol-buffer");
    let path = dir.write("app.ts", "export function original() {}\n");
    let uri = file_uri(&path);
    let mut editor = start(&dir, json!({}));
    editor.symbols_until("original", |s| s.len() == 1);

    editor.open(&uri, "typescript", 1, "export function original() {}\n");
    editor.change(&uri, 2, (0, 16), (0, 24), "renamedInBuffer");
    editor.symbols_until("renamedInBuffer", |s| s.len() == 1);
    editor.symbols_until("original", |s| s.is_empty());
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "export function original() {}\n"
    );

    editor.notify(
        "textDocument/didClose",
        json!({"textDocument": {"uri": uri}}),
    );
    editor.symbols_until("original", |s| s.len() == 1);
    editor.symbols_until("renamedInBuffer", |s| s.is_empty());
    assert!(editor.shutdown().success());
}

#[test]
fn watched_file_events_add_and_remove_symbols() {
    let dir = TempDir::new("wsymbol-watch");
    dir.write("keep.go", "package main\nfunc Keep() {}\n");
    let mut editor = start(&dir, json!({}));
    editor.symbols_until("Keep", |s| s.len() == 1);
    let created = dir.write("pkg/new.go", "package pkg\nfunc BrandNew() {}\n");
    editor.notify(
        "workspace/didChangeWatchedFiles",
        json!({"changes": [{"uri": file_uri(&created), "type": 1}]}),
    );
    editor.symbols_until("BrandNew", |s| s.len() == 1);
    std::fs::remove_file(&created).unwrap();
    editor.notify(
        "workspace/didChangeWatchedFiles",
        json!({"changes": [{"uri": file_uri(&created), "type": 3}]}),
    );
    editor.symbols_until("BrandNew", |s| s.is_empty());
    assert!(editor.shutdown().success());
}

/// `wright.index.rebuild` (VS Code's "Wright: Rebuild Index") re-reads the workspace: a file
/// written behind the editor's back, which no watched-file event announced, becomes searchable.
#[test]
fn the_rebuild_command_picks_up_files_changed_outside_the_editor() {
    let dir = TempDir::new("wsymbol-rebuild");
    dir.write("keep.go", "package main\nfunc Keep() {}\n");
    let mut editor = start(&dir, json!({}));
    editor.symbols_until("Keep", |s| s.len() == 1);
    dir.write("pkg/outside.go", "package pkg\nfunc WrittenOutside() {}\n");
    let unseen = editor.request("workspace/symbol", json!({"query": "WrittenOutside"}));
    assert_eq!(unseen, json!([]), "nothing announced the file yet");
    let result = editor.request(
        "workspace/executeCommand",
        json!({"command": "wright.index.rebuild", "arguments": []}),
    );
    assert_eq!(result, Value::Null);
    editor.symbols_until("WrittenOutside", |s| s.len() == 1);
    editor.symbols_until("Keep", |s| s.len() == 1);
    editor.discard(|m| m["method"] == "window/logMessage");
    assert!(editor.shutdown().success());
}

#[test]
fn indexing_reports_progress_when_the_client_supports_it() {
    let dir = TempDir::new("wsymbol-progress");
    dir.write("a.c", "int alpha(void) { return 1; }\n");
    let mut editor = start(&dir, json!({"window": {"workDoneProgress": true}}));
    let create = editor.expect_server_request("window/workDoneProgress/create");
    let token = create["token"].clone();
    let begin = editor.expect_notification("$/progress");
    assert_eq!(
        (begin["token"].clone(), begin["value"]["kind"].clone()),
        (token.clone(), json!("begin"))
    );
    assert_eq!(begin["value"]["title"], "Indexing");
    let end = editor.expect("the end of indexing progress", |m| {
        m["method"] == "$/progress" && m["params"]["value"]["kind"] == "end"
    });
    assert!(
        end["params"]["value"]["message"]
            .as_str()
            .unwrap()
            .contains("1 files"),
        "{end}"
    );
    // Reports in between: the lexical phase's, then the tree-sitter refinement's, which the
    // progress outlasts (symbols are served before it).
    let mut reports = Vec::new();
    while let Some(report) = editor.try_take(|m| m["method"] == "$/progress") {
        reports.push(
            report["params"]["value"]["message"]
                .as_str()
                .unwrap_or("")
                .to_owned(),
        );
    }
    assert!(
        reports.iter().any(|m| m == "refining 1/1 files"),
        "{reports:?}"
    );
    editor.symbols_until("alpha", |s| s.len() == 1);
    assert!(editor.shutdown().success());
}

#[test]
fn context_ranks_the_symbol_under_the_cursor_and_reads_unsaved_buffers() {
    let dir = TempDir::new("context");
    dir.write("src/lexer.rs", "pub fn tokenize(input: &str) -> Vec<String> {\n    input.split(' ').map(String::from).collect()\n}\n");
    let main = dir.write(
        "src/main.rs",
        "fn main() {\n    let t = tokenize(\"a b\");\n}\n",
    );
    let mut editor = start(&dir, json!({}));
    editor.symbols_until("tokenize", |s| s.len() == 1);

    // The editor has an unsaved edit in the lexer: context shows the buffer, not the disk.
    let lexer_uri = file_uri(&dir.path().join("src/lexer.rs"));
    editor.open(&lexer_uri, "rust", 1, "pub fn tokenize(input: &str) -> Vec<String> {\n    input.split(' ').map(String::from).collect()\n}\n");
    editor.change(&lexer_uri, 2, (1, 4), (1, 4), "// unsaved note\n    ");
    editor.open(
        &file_uri(&main),
        "rust",
        1,
        "fn main() {\n    let t = tokenize(\"a b\");\n}\n",
    );
    // The cursor sits on `tokenize` in main.rs; the query itself names nothing.
    let context = editor.request(
        "wright/context",
        json!({"query": "make this faster", "budget": 2000, "textDocument": {"uri": file_uri(&main)}, "position": {"line": 1, "character": 14}}),
    );
    let first = &context["snippets"][0];
    assert_eq!(
        (
            first["path"].clone(),
            first["kind"].clone(),
            first["startLine"].clone()
        ),
        (json!("src/lexer.rs"), json!("definition"), json!(1))
    );
    assert!(
        first["text"].as_str().unwrap().contains("// unsaved note"),
        "{first}"
    );
    assert!(context["tokens"].as_u64().unwrap() <= 2000);
    assert_eq!(context["budget"], 2000);
    let small = editor.request("wright/context", json!({"query": "tokenize", "budget": 5}));
    assert_eq!(small["snippets"], json!([]));
    assert!(editor.shutdown().success());
}
