//! Initialize, capabilities, encoding negotiation, dynamic registration, shutdown and exit.

use serde_json::{Value, json};
use wright_tests::{Editor, Spawn, TempDir, file_uri};

fn spawn_in(dir: &TempDir) -> Spawn {
    Spawn {
        root: Some(dir.path().to_owned()),
        ..Spawn::default()
    }
}

#[test]
fn initialize_reports_capabilities_and_server_info() {
    let dir = TempDir::new("caps");
    let mut init = Editor::init_params(dir.path());
    init["capabilities"]["general"] = json!({"positionEncodings": ["utf-16", "utf-8"]});
    let (editor, result) = Editor::start(&spawn_in(&dir), init);
    let caps = &result["capabilities"];
    assert_eq!(caps["positionEncoding"], "utf-8");
    assert_eq!(caps["textDocumentSync"]["change"], 2, "incremental sync");
    assert_eq!(caps["textDocumentSync"]["openClose"], true);
    assert_eq!(
        caps["textDocumentSync"]["save"],
        json!({"includeText": false})
    );
    assert_eq!(
        caps["workspace"]["workspaceFolders"],
        json!({"supported": true, "changeNotifications": true})
    );
    assert!(
        caps["executeCommandProvider"]["commands"]
            .as_array()
            .unwrap()
            .contains(&json!("wright.status"))
    );
    assert_eq!(result["serverInfo"]["name"], "wright");
    assert_eq!(result["serverInfo"]["version"], env!("CARGO_PKG_VERSION"));
    assert!(editor.shutdown().success());
}

#[test]
fn the_encoding_is_negotiated_from_what_the_client_offers() {
    let dir = TempDir::new("encodings");
    let cases: [(Value, &str); 5] = [
        (Value::Null, "utf-16"),
        (json!(["utf-16"]), "utf-16"),
        (json!(["utf-32", "utf-16"]), "utf-32"),
        (json!(["utf-16", "utf-32", "utf-8"]), "utf-8"),
        (json!(["latin-1"]), "utf-16"),
    ];
    for (offered, expected) in cases {
        let mut init = Editor::init_params(dir.path());
        if !offered.is_null() {
            init["capabilities"]["general"] = json!({"positionEncodings": offered});
        }
        let (mut editor, result) = Editor::start(&spawn_in(&dir), init);
        assert_eq!(
            result["capabilities"]["positionEncoding"], expected,
            "offered {offered}"
        );
        assert_eq!(editor.status()["positionEncoding"], expected);
        assert!(editor.shutdown().success());
    }
}

#[test]
fn requests_before_initialize_are_refused_then_initialize_works() {
    let dir = TempDir::new("early");
    let mut editor = Editor::spawn(&spawn_in(&dir));
    let early = editor.request_response("wright/status", Value::Null);
    assert_eq!(early["error"]["code"], -32002, "{early}");
    editor.request("initialize", Editor::init_params(dir.path()));
    editor.notify("initialized", json!({}));
    editor.expect_log(3, "ready");
    let again = editor.request_response("initialize", Editor::init_params(dir.path()));
    assert_eq!(
        again["error"]["code"], -32600,
        "a second initialize: {again}"
    );
    assert!(editor.shutdown().success());
}

#[test]
fn file_watching_and_configuration_are_registered_when_the_client_can() {
    let dir = TempDir::new("register");
    let mut init = Editor::init_params(dir.path());
    init["capabilities"]["workspace"] = json!({
        "didChangeWatchedFiles": {"dynamicRegistration": true},
        "didChangeConfiguration": {"dynamicRegistration": true},
    });
    let mut editor = Editor::spawn(&spawn_in(&dir));
    editor.request("initialize", init);
    editor.notify("initialized", json!({}));
    let params = editor.expect_server_request("client/registerCapability");
    let methods: Vec<&str> = params["registrations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["method"].as_str().unwrap())
        .collect();
    assert_eq!(
        methods,
        [
            "workspace/didChangeWatchedFiles",
            "workspace/didChangeConfiguration"
        ]
    );
    assert_eq!(
        params["registrations"][0]["registerOptions"]["watchers"][0]["globPattern"],
        "**/*"
    );
    editor.expect_log(3, "ready");
    assert!(editor.shutdown().success());
}

#[test]
fn nothing_is_registered_for_a_client_without_dynamic_registration() {
    let dir = TempDir::new("noregister");
    let (editor, _) = Editor::start(&spawn_in(&dir), Editor::init_params(dir.path()));
    // `shutdown` fails the test if a registerCapability request arrived unread.
    assert!(editor.shutdown().success());
}

#[test]
fn exit_without_shutdown_exits_with_code_1() {
    let dir = TempDir::new("exit1");
    let (mut editor, _) = Editor::start(&spawn_in(&dir), Editor::init_params(dir.path()));
    editor.notify("exit", Value::Null);
    assert_eq!(editor.wait().code(), Some(1));
    editor.assert_all_read();
    std::mem::forget(editor);
}

#[test]
fn requests_after_shutdown_are_refused() {
    let dir = TempDir::new("aftershutdown");
    let (mut editor, _) = Editor::start(&spawn_in(&dir), Editor::init_params(dir.path()));
    editor.request("shutdown", Value::Null);
    let late = editor.request_response("wright/status", Value::Null);
    assert_eq!(late["error"]["code"], -32600, "{late}");
    editor.notify("exit", Value::Null);
    assert_eq!(editor.wait().code(), Some(0));
    editor.assert_all_read();
    std::mem::forget(editor);
}

#[test]
fn a_client_that_disappears_ends_the_server() {
    let dir = TempDir::new("eof");
    let (editor, _) = Editor::start(&spawn_in(&dir), Editor::init_params(dir.path()));
    // No shutdown: the editor crashed. The server must not linger.
    assert_eq!(editor.close_stdin().code(), Some(1));
}

#[test]
fn logs_go_to_stderr_or_the_log_file_never_stdout() {
    let dir = TempDir::new("logging");
    let uri = file_uri(&dir.path().join("a.txt"));
    let mut spawn = spawn_in(&dir);
    spawn.env.push(("WRIGHT_LOG".into(), "trace".into()));
    let (mut editor, _) = Editor::start(&spawn, Editor::init_params(dir.path()));
    editor.open(&uri, "plaintext", 1, "x");
    editor.change(&uri, 2, (0, 0), (0, 0), "y");
    assert_eq!(editor.text_of(&uri).1, "yx");
    let stderr = editor.stderr_handle();
    assert!(editor.shutdown().success());
    let stderr = stderr.text();
    // The harness failed the test had any byte of stdout not been a frame; and trace logging
    // did happen, on stderr.
    assert!(
        stderr.contains("TRACE") && stderr.contains("textDocument/didChange"),
        "{stderr}"
    );

    let log = dir.path().join("wright.log");
    spawn.args = vec!["--log-file".into(), log.display().to_string()];
    let (mut editor, _) = Editor::start(&spawn, Editor::init_params(dir.path()));
    let status = editor.status();
    assert_eq!(status["log"], log.display().to_string());
    let stderr = editor.stderr_handle();
    assert!(editor.shutdown().success());
    let stderr = stderr.text();
    assert!(
        stderr.is_empty(),
        "with --log-file, stderr stays empty: {stderr}"
    );
    let written = std::fs::read_to_string(&log).unwrap();
    assert!(written.contains("language server stopped"), "{written}");
}
