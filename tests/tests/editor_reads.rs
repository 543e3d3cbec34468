//! What the language server reads on an editor's word stays in the workspace: URIs that climb
//! out (`..`, `%2E%2E`), links that lead out, and files the walk leaves out (gitignored,
//! generated, too large) reach neither `workspace/symbol` nor `wright/context`, whatever the
//! editor's watched-file, open, save and close notifications say; hostile ignore and
//! configuration files (a FIFO, a link to /dev/zero) stall nothing.

use std::path::Path;

use serde_json::{Value, json};
use wright_tests::{Editor, Spawn, TempDir, file_uri};

/// What the outside files hold; it must reach no answer.
const MARKER: &str = "ZQX-OUTSIDE-4711";

/// A server on `dir/ws`, its index in `dir/cache`, with `options` as initializationOptions.
fn start(dir: &TempDir, options: Value) -> Editor {
    let ws = dir.path().join("ws");
    let spawn = Spawn {
        root: Some(ws.clone()),
        env: vec![(
            "XDG_CACHE_HOME".into(),
            dir.path().join("cache").display().to_string(),
        )],
        ..Spawn::default()
    };
    let mut init = Editor::init_params(&ws);
    init["initializationOptions"] = options;
    Editor::start(&spawn, init).0
}

/// How many of `symbols` are named `name` (a query also finds names sharing its parts).
fn named(symbols: &[Value], name: &str) -> usize {
    symbols.iter().filter(|s| s["name"] == name).count()
}

fn watched(editor: &mut Editor, uris: &[String]) {
    let changes: Vec<Value> = uris
        .iter()
        .flat_map(|uri| {
            [
                json!({"uri": uri, "type": 1}),
                json!({"uri": uri, "type": 2}),
            ]
        })
        .collect();
    editor.notify(
        "workspace/didChangeWatchedFiles",
        json!({ "changes": changes }),
    );
}

/// Announces a new inside file and waits until it is searchable: every event sent before
/// it has been applied by then.
fn barrier(editor: &mut Editor, dir: &TempDir, name: &str) {
    let path = dir.write(
        &format!("ws/{name}.py"),
        &format!("def {name}():\n    pass\n"),
    );
    watched(editor, &[file_uri(&path)]);
    editor.symbols_until(name, |s| named(s, name) == 1);
}

/// Asserts that no symbol named like `query` is served and that `wright/context` on `query`
/// (from `document`, when given) carries nothing of the outside files.
fn assert_unseen(editor: &mut Editor, query: &str, document: Option<&str>) {
    let symbols = editor.request("workspace/symbol", json!({ "query": query }));
    let found: Vec<&Value> = symbols
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s.to_string().contains("leaked") || s.to_string().contains(query))
        .collect();
    assert!(found.is_empty(), "{query}: {found:?}");
    let mut params = json!({"query": format!("{query} {MARKER}"), "budget": 4000});
    if let Some(uri) = document {
        params["textDocument"] = json!({ "uri": uri });
        params["position"] = json!({"line": 0, "character": 6});
    }
    let context = editor.request("wright/context", params);
    // The answer repeats the query; what it found is in the snippets.
    let text = context["snippets"].to_string();
    assert!(!text.contains(MARKER), "{text}");
    assert!(!text.contains(query), "{text}");
}

#[test]
fn uris_that_climb_out_of_the_workspace_are_not_indexed() {
    let dir = TempDir::new("uri-climb");
    dir.write("ws/src/lib.py", "def inside_function():\n    pass\n");
    let secret_text = format!("def leaked_outside_fn():\n    return '{MARKER}'\n");
    dir.write("elsewhere/secret.py", &secret_text);
    let mut editor = start(&dir, json!({}));
    editor.symbols_until("inside_function", |s| named(s, "inside_function") == 1);

    let ws = file_uri(&dir.path().join("ws"));
    let climbing = [
        format!("{ws}/../elsewhere/secret.py"),
        format!("{ws}/%2E%2E/elsewhere/secret.py"),
        format!("{ws}/src/%2e%2e/%2E%2E/elsewhere/secret.py"),
        format!("{ws}/src/..%2F..%2Felsewhere/secret.py"),
        format!("{ws}/./../elsewhere/./secret.py"),
    ];
    watched(&mut editor, &climbing);
    for uri in &climbing {
        // Saved and closed without having been opened: the server reads the disk for them.
        editor.notify(
            "textDocument/didSave",
            json!({"textDocument": {"uri": uri}}),
        );
        editor.notify(
            "textDocument/didClose",
            json!({"textDocument": {"uri": uri}}),
        );
    }
    // Opened, changed, saved and closed: the editor's own text of the outside file.
    let opened = &climbing[1];
    editor.open(opened, "python", 1, &secret_text);
    editor.change(opened, 2, (0, 0), (0, 0), "# edited\n");
    editor.notify(
        "textDocument/didSave",
        json!({"textDocument": {"uri": opened}}),
    );
    barrier(&mut editor, &dir, "after_climbing");
    assert_unseen(&mut editor, "leaked_outside_fn", Some(opened));
    editor.notify(
        "textDocument/didClose",
        json!({"textDocument": {"uri": opened}}),
    );
    barrier(&mut editor, &dir, "after_closing");
    assert_unseen(&mut editor, "leaked_outside_fn", None);
    editor.discard(|m| m["method"] == "window/logMessage");
    assert!(editor.shutdown().success());
}

#[test]
fn watched_files_the_walk_leaves_out_are_not_indexed_and_links_out_never_read() {
    let dir = TempDir::new("watched-filters");
    dir.write("ws/src/lib.py", "def inside_function():\n    pass\n");
    dir.write("ws/.gitignore", "secrets/\n");
    dir.write(
        "elsewhere/secret.py",
        &format!("def leaked_outside_fn():\n    return '{MARKER}'\n"),
    );
    dir.write(
        "elsewhere/linked.py",
        &format!("def leaked_linked_fn():\n    return '{MARKER}'\n"),
    );
    let ws = dir.path().join("ws");
    std::os::unix::fs::symlink(dir.path().join("elsewhere/secret.py"), ws.join("key.py")).unwrap();
    std::os::unix::fs::symlink(dir.path().join("elsewhere"), ws.join("linked")).unwrap();
    // A link that stays inside: its target is indexed where it is, the link not again.
    std::os::unix::fs::symlink("src", ws.join("alias")).unwrap();
    let mut editor = start(&dir, json!({"index": {"maxFileSize": 4096}}));
    editor.symbols_until("inside_function", |s| named(s, "inside_function") == 1);

    // Written after the walk, then reported by the editor (VS Code reports ignored files too).
    let ignored = dir.write(
        "ws/secrets/keys.py",
        &format!("def leaked_key_fn():\n    return '{MARKER}'\n"),
    );
    let generated = dir.write(
        "ws/node_modules/x.js",
        &format!("function leakedModuleFn() {{ return '{MARKER}'; }}\n"),
    );
    let big = dir.write(
        "ws/big.py",
        &format!(
            "def leaked_big_fn():\n    return '{MARKER}'\n{}",
            "#\n".repeat(4096)
        ),
    );
    watched(
        &mut editor,
        &[
            file_uri(&ignored),
            file_uri(&generated),
            file_uri(&big),
            file_uri(&ws.join("key.py")),
            file_uri(&ws.join("linked/linked.py")),
            file_uri(&ws.join("alias/lib.py")),
        ],
    );
    barrier(&mut editor, &dir, "after_events");
    for query in [
        "leaked_key_fn",
        "leakedModuleFn",
        "leaked_big_fn",
        "leaked_outside_fn",
        "leaked_linked_fn",
    ] {
        assert_unseen(&mut editor, query, None);
    }
    let inside = editor.symbols_until("inside_function", |s| named(s, "inside_function") == 1);
    assert_eq!(
        inside[0]["location"]["uri"],
        file_uri(&ws.join("src/lib.py"))
    );

    // A file that was indexed and then grows over the limit leaves the index.
    let grown = dir.write("ws/grown.py", "def grown_function():\n    pass\n");
    watched(&mut editor, &[file_uri(&grown)]);
    editor.symbols_until("grown_function", |s| named(s, "grown_function") == 1);
    dir.write(
        "ws/grown.py",
        &format!("def grown_function():\n    pass\n{}", "#\n".repeat(4096)),
    );
    watched(&mut editor, &[file_uri(&grown)]);
    editor.symbols_until("grown_function", |s| named(s, "grown_function") == 0);
    assert!(editor.shutdown().success());
}

fn mkfifo(path: &Path) {
    let status = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .expect("running mkfifo");
    assert!(status.success());
}

#[test]
fn hostile_ignore_and_configuration_files_stall_nothing_and_are_reported() {
    let dir = TempDir::new("hostile-files");
    dir.write("ws/src/lib.py", "def inside_function():\n    pass\n");
    dir.write("ws/sub/mod.py", "def sub_function():\n    pass\n");
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(ws.join(".wright")).unwrap();
    mkfifo(&ws.join(".gitignore"));
    mkfifo(&ws.join(".wright/config.toml"));
    std::os::unix::fs::symlink("/dev/zero", ws.join("sub/.ignore")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", ws.join("src/.gitignore")).unwrap();
    let mut editor = start(&dir, json!({}));
    editor.symbols_until("inside_function", |s| named(s, "inside_function") == 1);
    editor.symbols_until("sub_function", |s| named(s, "sub_function") == 1);
    let status = editor.status();
    let problems = status.to_string();
    assert!(problems.contains("a FIFO"), "{status}");
    // A change to them is followed as safely.
    watched(
        &mut editor,
        &[
            file_uri(&ws.join(".gitignore")),
            file_uri(&ws.join(".wright/config.toml")),
            file_uri(&ws.join("sub/.ignore")),
        ],
    );
    barrier(&mut editor, &dir, "after_hostile");
    editor.discard(|m| m["method"] == "window/logMessage");
    assert!(editor.shutdown().success());
}
