//! The server's log for a client that asks for it (`experimental.wrightLogMessages`, what the
//! VS Code extension declares): each record arrives as `window/logMessage` with its level as
//! the type (error 1, warning 2, info 3, debug 4) and nothing of it on stderr, which VS Code's
//! language client shows as errors. A client that does not ask keeps the log on stderr.

use serde_json::{Value, json};
use wright_tests::{Editor, Spawn, TempDir};

fn start(dir: &TempDir, asks: bool) -> Editor {
    let spawn = Spawn {
        root: Some(dir.path().to_owned()),
        env: vec![("WRIGHT_LOG".into(), "wright=debug".into())],
        ..Spawn::default()
    };
    let mut init = Editor::init_params(dir.path());
    if asks {
        init["capabilities"] = json!({"experimental": {"wrightLogMessages": true}});
    }
    Editor::start(&spawn, init).0
}

fn is_log(message: &Value) -> bool {
    message["method"] == "window/logMessage"
}

#[test]
fn a_client_that_asks_for_the_log_gets_every_record_with_its_level_and_none_on_stderr() {
    let dir = TempDir::new("log-messages");
    dir.write(
        "src/lib.rs",
        "pub fn add(a: i32, b: i32) -> i32 { a + b }\n",
    );
    let mut editor = start(&dir, true);
    // The index's INFO record, as info, named by its module.
    let indexed = editor.expect_log(3, "symbols searchable");
    assert!(indexed.starts_with("wright::lsp::indexing: "), "{indexed}");
    // A DEBUG record, as a log message.
    let debug = editor.expect_log(4, "the client asked for the log");
    assert!(debug.starts_with("wright::lsp::transport: "), "{debug}");
    // An ERROR record, as an error, once (not also as the transport's own note).
    editor.notify("textDocument/didChange", json!({"textDocument": 7}));
    let error = editor.expect_log(1, "ignored textDocument/didChange");
    assert!(error.starts_with("wright::lsp::transport: "), "{error}");
    assert_eq!(editor.status()["log"], "window/logMessage");
    let repeated = editor.discard(|m| {
        is_log(m)
            && m["params"]["message"]
                .as_str()
                .unwrap_or("")
                .contains("ignored")
    });
    assert_eq!(repeated, 0, "the error was told once");
    editor.discard(is_log);
    let stderr = editor.stderr_handle();
    assert!(editor.shutdown().success());
    let stderr = stderr.text();
    assert!(
        stderr.is_empty(),
        "the records went to the client, not to stderr:\n{stderr}"
    );
}

#[test]
fn a_client_that_does_not_ask_keeps_the_log_on_stderr() {
    let dir = TempDir::new("log-stderr");
    dir.write(
        "src/lib.rs",
        "pub fn add(a: i32, b: i32) -> i32 { a + b }\n",
    );
    let mut editor = start(&dir, false);
    let stderr = editor.stderr_handle();
    wright_tests::session::wait_until(
        "the index's INFO record on stderr",
        wright_tests::TIMEOUT,
        || stderr.text().contains("symbols searchable"),
    );
    assert!(
        editor
            .try_take(|m| {
                is_log(m)
                    && m["params"]["message"]
                        .as_str()
                        .is_some_and(|text| text.contains("searchable"))
            })
            .is_none(),
        "records are not sent to a client that did not ask"
    );
    editor.discard(is_log);
    assert!(editor.shutdown().success());
    let text = stderr.text();
    assert!(text.contains(" INFO wright::lsp::indexing: "), "{text}");
}
