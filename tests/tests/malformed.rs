//! Malformed input never stops the server: after each kind of bad message it still answers.

use serde_json::{Value, json};
use wright_tests::{Editor, Spawn, TempDir};

fn start(dir: &TempDir) -> Editor {
    let spawn = Spawn {
        root: Some(dir.path().to_owned()),
        ..Spawn::default()
    };
    Editor::start(&spawn, Editor::init_params(dir.path())).0
}

/// The server still answers a request after whatever came before.
fn still_answers(editor: &mut Editor) {
    assert_eq!(editor.status()["server"]["name"], "wright");
}

#[test]
fn garbage_bytes_are_skipped_and_reported() {
    let dir = TempDir::new("garbage");
    let mut editor = start(&dir);
    editor.send_raw(b"\x00\xff\xfe this is not LSP \r\n\r\n");
    let log = editor.expect_log(1, "skipped");
    assert!(log.contains("expected a Content-Length header"), "{log}");
    still_answers(&mut editor);
    assert!(editor.shutdown().success());
}

#[test]
fn a_content_length_too_long_is_recovered_at_the_next_header() {
    let dir = TempDir::new("toolong");
    let mut editor = start(&dir);
    let body = br#"{"jsonrpc":"2.0","id":900,"method":"wright/status"}"#;
    let mut bytes = format!("Content-Length: {}\r\n\r\n", body.len() + 500).into_bytes();
    bytes.extend_from_slice(body);
    editor.send_raw(&bytes);
    // The next message's header shows where the first really ended.
    still_answers(&mut editor);
    let first = editor.expect_response(&json!(900));
    assert_eq!(first["result"]["server"]["name"], "wright");
    editor.expect_log(2, "declared Content-Length");
    assert!(editor.shutdown().success());
}

#[test]
fn a_content_length_too_short_is_a_parse_error_then_the_rest_is_skipped() {
    let dir = TempDir::new("tooshort");
    let mut editor = start(&dir);
    let body = br#"{"jsonrpc":"2.0","id":901,"method":"wright/status"}"#;
    let mut bytes = format!("Content-Length: {}\r\n\r\n", body.len() - 10).into_bytes();
    bytes.extend_from_slice(body);
    editor.send_raw(&bytes);
    still_answers(&mut editor);
    let error = editor.expect_response(&Value::Null);
    assert_eq!(error["error"]["code"], -32700, "{error}");
    editor.expect_log(1, "skipped 10 bytes");
    assert!(editor.shutdown().success());
}

#[test]
fn a_header_without_a_number_is_skipped() {
    let dir = TempDir::new("badheader");
    let mut editor = start(&dir);
    editor.send_raw(b"Content-Length: lots\r\n\r\n");
    editor.expect_log(1, "is not a number");
    still_answers(&mut editor);
    assert!(editor.shutdown().success());
}

#[test]
fn invalid_json_is_a_parse_error_with_a_null_id() {
    let dir = TempDir::new("badjson");
    let mut editor = start(&dir);
    let body = b"{\"jsonrpc\": \"2.0\", \"id\": 5, \"method\": ";
    let mut bytes = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
    bytes.extend_from_slice(body);
    editor.send_raw(&bytes);
    let error = editor.expect_response(&Value::Null);
    assert_eq!(error["error"]["code"], -32700);
    // Invalid UTF-8 inside a frame is the same kind of error.
    editor.send_raw(b"Content-Length: 4\r\n\r\n\"\xff\xfe\"");
    let error = editor.expect_response(&Value::Null);
    assert_eq!(error["error"]["code"], -32700);
    still_answers(&mut editor);
    assert!(editor.shutdown().success());
}

#[test]
fn structurally_invalid_messages_are_invalid_requests() {
    let dir = TempDir::new("invalid");
    let mut editor = start(&dir);
    editor.send(&json!([{"jsonrpc": "2.0", "id": 1, "method": "wright/status"}]));
    assert_eq!(
        editor.expect_response(&Value::Null)["error"]["code"],
        -32600
    );
    editor.send(&json!({"jsonrpc": "2.0", "id": 77}));
    assert_eq!(editor.expect_response(&json!(77))["error"]["code"], -32600);
    editor.send(&json!({"jsonrpc": "1.0", "id": 78, "method": "wright/status"}));
    assert_eq!(editor.expect_response(&json!(78))["error"]["code"], -32600);
    still_answers(&mut editor);
    assert!(editor.shutdown().success());
}

#[test]
fn an_unknown_method_is_method_not_found_and_an_unknown_notification_is_ignored() {
    let dir = TempDir::new("unknown");
    let mut editor = start(&dir);
    let response = editor.request_response("wright/noSuchThing", json!({}));
    assert_eq!(response["error"]["code"], -32601);
    editor.notify("$/noSuchNotification", json!({}));
    editor.notify("custom/whatever", json!({"a": 1}));
    still_answers(&mut editor);
    assert!(editor.shutdown().success());
}

#[test]
fn invalid_params_are_invalid_params() {
    let dir = TempDir::new("params");
    let mut editor = start(&dir);
    let response = editor.request_response("wright/viewFileText", json!({"textDocument": 3}));
    assert_eq!(response["error"]["code"], -32602, "{response}");
    let response = editor.request_response(
        "workspace/executeCommand",
        json!({"command": "wright.nope"}),
    );
    assert_eq!(response["error"]["code"], -32602, "{response}");
    assert!(
        response["error"]["message"]
            .as_str()
            .unwrap()
            .contains("wright.status")
    );
    still_answers(&mut editor);
    assert!(editor.shutdown().success());
}

#[test]
fn cancelling_an_unknown_or_finished_request_is_harmless() {
    let dir = TempDir::new("cancel");
    let mut editor = start(&dir);
    let id = editor.send_request("wright/status", Value::Null);
    let response = editor.expect_response(&json!(id));
    assert!(response.get("result").is_some());
    editor.notify("$/cancelRequest", json!({"id": id}));
    editor.notify("$/cancelRequest", json!({"id": "never-sent"}));
    still_answers(&mut editor);
    assert!(editor.shutdown().success());
}

#[test]
fn the_status_command_answers_like_the_status_request() {
    let dir = TempDir::new("command");
    let mut editor = start(&dir);
    let by_command = editor.request(
        "workspace/executeCommand",
        json!({"command": "wright.status"}),
    );
    assert_eq!(by_command, editor.status());
    assert!(editor.shutdown().success());
}
