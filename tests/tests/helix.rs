//! The Helix path: a client declaring exactly the capabilities Helix 25.x sends in
//! `initialize` (helix-lsp/src/client.rs), driving the agent the only ways Helix can:
//! `:lsp-workspace-command wright.agent.run "<task>"` (executeCommand with string arguments and
//! no document), and the code-action menu as Helix 25.07.1 runs it (`codeAction/resolve`, the
//! resolved edit applied, then the command of the action as first sent). Helix reads no `wright/agentEvent`: what it shows is `$/progress` in the
//! status line and the outcome as `window/showMessage`; edits arrive as versioned
//! `workspace/applyEdit`s. And `editors/helix/languages.toml`, the configuration a Helix user
//! copies, against the languages the server parses.

use std::collections::BTreeSet;

use serde_json::{Value, json};
use wright::languages::Language;
use wright_tests::provider::{Dialect, Reply, ScriptedProvider, Turn};
use wright_tests::{Editor, Spawn, TempDir, file_uri};

const LIB: &str = "pub fn add(a: i32, b: i32) -> i32 {\n    a - b\n}\n";

/// What Helix 25.x declares in `initialize` (helix-lsp/src/client.rs, `Client::initialize`),
/// with `enable_snippets` on, its default.
fn helix_capabilities() -> Value {
    json!({
        "workspace": {
            "configuration": true,
            "didChangeConfiguration": {"dynamicRegistration": false},
            "workspaceFolders": true,
            "applyEdit": true,
            "symbol": {"dynamicRegistration": false},
            "executeCommand": {"dynamicRegistration": false},
            "inlayHint": {"refreshSupport": false},
            "workspaceEdit": {
                "documentChanges": true,
                "resourceOperations": ["create", "rename", "delete"],
                "failureHandling": "abort",
                "normalizesLineEndings": false
            },
            "didChangeWatchedFiles": {"dynamicRegistration": true, "relativePatternSupport": false},
            "fileOperations": {"willRename": true, "didRename": true}
        },
        "textDocument": {
            "completion": {
                "completionItem": {
                    "snippetSupport": true,
                    "resolveSupport": {"properties": ["documentation", "detail", "additionalTextEdits"]},
                    "insertReplaceSupport": true,
                    "deprecatedSupport": true,
                    "tagSupport": {"valueSet": [1]}
                },
                "completionItemKind": {}
            },
            "hover": {"contentFormat": ["markdown"]},
            "signatureHelp": {
                "signatureInformation": {
                    "documentationFormat": ["markdown"],
                    "parameterInformation": {"labelOffsetSupport": true},
                    "activeParameterSupport": true
                }
            },
            "rename": {"dynamicRegistration": false, "prepareSupport": true, "honorsChangeAnnotations": false},
            "formatting": {"dynamicRegistration": false},
            "codeAction": {
                "codeActionLiteralSupport": {"codeActionKind": {"valueSet": [
                    "", "quickfix", "refactor", "refactor.extract", "refactor.inline",
                    "refactor.rewrite", "source", "source.organizeImports"
                ]}},
                "isPreferredSupport": true,
                "disabledSupport": true,
                "dataSupport": true,
                "resolveSupport": {"properties": ["edit", "command"]}
            },
            "publishDiagnostics": {"versionSupport": true, "tagSupport": {"valueSet": [1, 2]}},
            "inlayHint": {"dynamicRegistration": false}
        },
        "window": {"workDoneProgress": true},
        "general": {"positionEncodings": ["utf-8", "utf-32", "utf-16"]}
    })
}

/// The server on `<dir>/ws` as Helix starts it (rootUri and one workspace folder), its model
/// the scripted provider; with `src/lib.rs` open at version 0, as Helix opens a document.
fn start(dir: &TempDir, provider: &ScriptedProvider) -> (Editor, String, Value) {
    let root = dir.path().join("ws");
    dir.write("ws/src/lib.rs", LIB);
    let spawn = Spawn {
        env: vec![
            ("WRIGHT_MODEL".into(), "openai/gpt-4.1".into()),
            ("OPENAI_BASE_URL".into(), provider.openai_base_url()),
            ("OPENAI_API_KEY".into(), "sk-helix-test".into()),
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
    };
    let init = json!({
        "processId": std::process::id(),
        "rootPath": root.display().to_string(),
        "rootUri": file_uri(&root),
        "workspaceFolders": [{"uri": file_uri(&root), "name": "ws"}],
        "capabilities": helix_capabilities(),
        "clientInfo": {"name": "helix", "version": "25.07.1"},
    });
    let (mut editor, result) = Editor::start(&spawn, init);
    let uri = file_uri(&root.join("src/lib.rs"));
    editor.open(&uri, "rust", 0, LIB);
    (editor, uri, result)
}

/// Waits for the end of session `session`'s `$/progress` (what Helix's status line shows);
/// returns the end's message. Drops the events Helix ignores.
fn progress_end(editor: &mut Editor, session: &str) -> String {
    let token = format!("wright/agent/{session}");
    let end = editor.expect("the session's progress end", |m| {
        m["method"] == "$/progress"
            && m["params"]["token"] == token.as_str()
            && m["params"]["value"]["kind"] == "end"
    });
    end["params"]["value"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// Waits for the workspace's indexing to end (its progress runs beside everything else),
/// then drops what a Helix user never sees, or sees elsewhere, before the server shuts down.
fn drop_the_rest(editor: &mut Editor) {
    editor.expect("the end of indexing", |m| {
        m["method"] == "$/progress"
            && m["params"]["token"]
                .as_str()
                .is_some_and(|token| token.starts_with("wright/index/"))
            && m["params"]["value"]["kind"] == "end"
    });
    editor.discard(|m| {
        matches!(
            m["method"].as_str(),
            Some(
                "wright/agentEvent"
                    | "$/progress"
                    | "window/logMessage"
                    | "window/workDoneProgress/create"
                    | "client/registerCapability"
            )
        )
    });
}

#[test]
fn helix_capabilities_get_utf8_commands_and_resolvable_code_actions() {
    let dir = TempDir::new("helix-init");
    let provider = ScriptedProvider::start();
    let (mut editor, _, result) = start(&dir, &provider);
    let caps = &result["capabilities"];
    assert_eq!(
        caps["positionEncoding"], "utf-8",
        "Helix offers UTF-8 first"
    );
    assert_eq!(
        caps["codeActionProvider"]["resolveProvider"], true,
        "{caps}"
    );
    let commands = caps["executeCommandProvider"]["commands"].to_string();
    for command in [
        "wright.agent.run",
        "wright.agent.cancel",
        "wright.edits.undo",
        "wright.status",
    ] {
        assert!(commands.contains(command), "{commands}");
    }
    // `:lsp-workspace-command wright.status`: no arguments at all.
    let status = editor.request(
        "workspace/executeCommand",
        json!({"command": "wright.status"}),
    );
    assert_eq!(status["server"]["name"], "wright");
    drop_the_rest(&mut editor);
    editor.shutdown();
}

#[test]
fn a_workspace_command_with_a_string_task_edits_the_open_document_and_undo_takes_it_back() {
    let dir = TempDir::new("helix-command");
    let provider = ScriptedProvider::start();
    provider.push(Reply::stream(
        Dialect::OpenAi,
        &Turn::default().tool_call(
            "e1",
            "edit",
            &json!({"path": "src/lib.rs", "old_string": "    a - b\n", "new_string": "    a + b\n"})
                .to_string(),
        ),
    ));
    provider.push(Reply::stream(
        Dialect::OpenAi,
        &Turn::text(&["add now adds."]),
    ));
    let (mut editor, uri, _) = start(&dir, &provider);

    // `:lsp-workspace-command wright.agent.run "make add return the sum"`
    let run = editor.request(
        "workspace/executeCommand",
        json!({"command": "wright.agent.run", "arguments": ["make add return the sum"]}),
    );
    let session = run["sessionId"].as_str().expect("a session id").to_owned();

    let request = editor.expect("a workspace/applyEdit", |m| {
        m["method"] == "workspace/applyEdit" && m.get("id").is_some()
    });
    let change = &request["params"]["edit"]["documentChanges"][0];
    assert_eq!(
        change["textDocument"],
        json!({"uri": uri, "version": 0}),
        "versioned, 0 included"
    );
    // Helix applies it, sends the change, answers.
    let fixed = LIB.replace("a - b", "a + b");
    editor.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": uri, "version": 1}, "contentChanges": [{"text": fixed}]}),
    );
    editor.respond(&request["id"], json!({"applied": true}));

    assert_eq!(progress_end(&mut editor, &session), "wright: done");
    let shown = editor.expect_notification("window/showMessage");
    assert_eq!(shown["type"], 3);
    assert_eq!(
        shown["message"],
        format!("wright {session} done (src/lib.rs): add now adds.")
    );
    let begin = editor.try_take(|m| {
        m["method"] == "$/progress"
            && m["params"]["value"]["kind"] == "begin"
            && m["params"]["token"] == format!("wright/agent/{session}").as_str()
    });
    assert_eq!(
        begin.expect("a progress begin")["params"]["value"]["title"],
        "wright"
    );

    // `:lsp-workspace-command wright.edits.undo`: no arguments, the last session.
    let undo = editor.send_request(
        "workspace/executeCommand",
        json!({"command": "wright.edits.undo"}),
    );
    let request = editor.expect("the undo's workspace/applyEdit", |m| {
        m["method"] == "workspace/applyEdit" && m.get("id").is_some()
    });
    assert_eq!(
        request["params"]["edit"]["documentChanges"][0]["textDocument"]["version"],
        1
    );
    editor.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": uri, "version": 2}, "contentChanges": [{"text": LIB}]}),
    );
    editor.respond(&request["id"], json!({"applied": true}));
    let undone = editor.expect_response(&json!(undo));
    assert_eq!(undone["result"]["files"], json!(["src/lib.rs"]), "{undone}");
    assert_eq!(editor.text_of(&uri), (2, LIB.to_owned()));

    // `:lsp-workspace-command wright.agent.cancel` with nothing running.
    let cancel = editor.request(
        "workspace/executeCommand",
        json!({"command": "wright.agent.cancel"}),
    );
    assert_eq!(cancel["cancelled"], false);
    drop_the_rest(&mut editor);
    editor.shutdown();
}

#[test]
fn code_actions_resolve_to_their_command_and_explain_answers_in_a_message() {
    let dir = TempDir::new("helix-actions");
    let provider = ScriptedProvider::start();
    provider.push(Reply::stream(
        Dialect::OpenAi,
        &Turn::text(&["`add` subtracts: ", "it returns a - b, not the sum."]),
    ));
    let (mut editor, uri, _) = start(&dir, &provider);
    let range = json!({"start": {"line": 1, "character": 4}, "end": {"line": 1, "character": 9}});
    let actions = editor.request(
        "textDocument/codeAction",
        json!({
            "textDocument": {"uri": uri},
            "range": range,
            "context": {"diagnostics": [{"range": range, "message": "expected sum"}], "triggerKind": 1},
        }),
    );
    let actions = actions.as_array().expect("actions").clone();
    let titles: Vec<&str> = actions
        .iter()
        .map(|a| a["title"].as_str().unwrap())
        .collect();
    assert_eq!(
        titles,
        [
            "wright: fix this with the agent",
            "wright: explain this code",
            "wright: write tests for this code",
            "wright: document this code"
        ]
    );
    // What Helix 25.07.1 does with the chosen action (helix-term's code action menu): resolve
    // it, apply the resolved `edit` if any, then execute the command of the action as it was
    // *before* resolving. So the action must carry its command as first sent.
    let explain = editor.request("codeAction/resolve", actions[1].clone());
    assert_eq!(explain, actions[1], "resolving changes nothing");
    assert!(explain.get("edit").is_none());
    let command = &actions[1]["command"];
    assert_eq!(command["command"], "wright.agent.run");
    let arguments = &command["arguments"][0];
    assert_eq!(arguments["textDocument"]["uri"], uri.as_str());
    assert_eq!(arguments["range"], range);
    let task = arguments["task"].as_str().unwrap();
    assert!(
        task.starts_with("Explain the code at line 2 of src/lib.rs"),
        "{task}"
    );
    let fix_task = actions[0]["command"]["arguments"][0]["task"]
        .as_str()
        .unwrap();
    assert!(fix_task.contains("line 2: expected sum"), "{fix_task}");

    let run = editor.request(
        "workspace/executeCommand",
        json!({"command": command["command"], "arguments": command["arguments"]}),
    );
    let session = run["sessionId"].as_str().unwrap().to_owned();
    assert_eq!(progress_end(&mut editor, &session), "wright: done");
    let shown = editor.expect_notification("window/showMessage");
    assert_eq!(
        shown["message"],
        format!("wright {session} done: `add` subtracts: it returns a - b, not the sum.")
    );
    let prompt = provider.requests()[0].json()["messages"].to_string();
    assert!(prompt.contains("The user selected lines 2-2"), "{prompt}");
    assert!(
        prompt.contains("a - b"),
        "the selected code goes with the task: {prompt}"
    );

    // Something that is not one of wright's actions is refused with a reason.
    let foreign = editor.request_response(
        "codeAction/resolve",
        json!({"title": "rust-analyzer: inline", "data": {"id": 7}}),
    );
    assert_eq!(foreign["error"]["code"], -32602, "{foreign}");
    drop_the_rest(&mut editor);
    editor.shutdown();
}

/// Every Helix language whose files wright parses, with the `language-id` Helix sends for it
/// (Helix 25.07's languages.toml: the name, unless it sets another).
const HELIX_LANGUAGES: &[(&str, &str)] = &[
    ("rust", "rust"),
    ("python", "python"),
    ("typescript", "typescript"),
    ("tsx", "typescriptreact"),
    ("javascript", "javascript"),
    ("jsx", "javascriptreact"),
    ("go", "go"),
    ("java", "java"),
    ("c", "c"),
    ("cpp", "cpp"),
    ("ruby", "ruby"),
];

#[test]
fn the_helix_configuration_adds_wright_last_to_exactly_the_languages_wright_parses() {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../editors/helix/languages.toml");
    let text = std::fs::read_to_string(&path).expect("reading editors/helix/languages.toml");
    let config: toml::Table = toml::from_str(&text).expect("languages.toml is valid TOML");

    let server = &config["language-server"]["wright"];
    assert_eq!(server["command"].as_str(), Some("wright"));
    assert_eq!(
        server["args"].as_array().map(Vec::as_slice),
        Some(&["lsp".into()][..])
    );

    let mut names = Vec::new();
    for language in config["language"].as_array().expect("[[language]] entries") {
        let name = language["name"].as_str().expect("a language's name");
        names.push(name);
        let servers: Vec<&str> = language["language-servers"]
            .as_array()
            .unwrap_or_else(|| panic!("{name} has no language-servers"))
            .iter()
            .map(|server| server.as_str().expect("a server's name"))
            .collect();
        // The list replaces Helix's own: the language's servers must still be there, first,
        // so that they answer hover and completion; wright once, last.
        assert_eq!(servers.last(), Some(&"wright"), "{name}: {servers:?}");
        assert_eq!(
            servers.iter().filter(|server| **server == "wright").count(),
            1,
            "{name}: {servers:?}"
        );
        assert!(
            servers.len() >= 2,
            "{name} lists wright alone, dropping its own server: {servers:?}"
        );
    }
    let expected: Vec<&str> = HELIX_LANGUAGES.iter().map(|(name, _)| *name).collect();
    assert_eq!(
        names, expected,
        "one entry per Helix language wright parses, in order"
    );

    // Those languages are exactly the server's: each is one wright parses (by the id Helix
    // sends), and every language wright parses has an entry.
    let covered: BTreeSet<Language> = HELIX_LANGUAGES
        .iter()
        .map(|(name, id)| {
            Language::from_language_id(id)
                .unwrap_or_else(|| panic!("wright does not parse {name} (language-id {id})"))
        })
        .collect();
    let parsed: BTreeSet<Language> = Language::ALL.into_iter().collect();
    assert_eq!(
        covered, parsed,
        "languages wright parses without a Helix entry, or the reverse"
    );
}
