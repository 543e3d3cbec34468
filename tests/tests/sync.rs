//! Document synchronisation through the real binary: incremental edits with emoji, CJK and
//! CRLF in every encoding, random sequences against the naive model, and the error paths.

use serde_json::{Value, json};
use wright_tests::text_model::{self, Encoding};
use wright_tests::{Editor, Spawn, TempDir, file_uri};

/// Starts a server that negotiates `encoding` (by offering only it).
fn start(dir: &TempDir, encoding: Encoding) -> Editor {
    let mut init = Editor::init_params(dir.path());
    init["capabilities"]["general"] = json!({"positionEncodings": [encoding.name()]});
    let spawn = Spawn {
        root: Some(dir.path().to_owned()),
        ..Spawn::default()
    };
    let (editor, result) = Editor::start(&spawn, init);
    assert_eq!(result["capabilities"]["positionEncoding"], encoding.name());
    editor
}

/// An edit given as byte offsets into the current text, sent as positions in `encoding`.
fn edit(
    editor: &mut Editor,
    uri: &str,
    model: &mut String,
    version: i32,
    (start, end): (usize, usize),
    new_text: &str,
    encoding: Encoding,
) {
    let from = text_model::position(model, start, encoding);
    let to = text_model::position(model, end, encoding);
    editor.change(uri, version, from, to, new_text);
    *model = format!("{}{new_text}{}", &model[..start], &model[end..]);
}

#[test]
fn incremental_edits_with_emoji_cjk_and_crlf_in_every_encoding() {
    for encoding in Encoding::ALL {
        let dir = TempDir::new("edits");
        let mut editor = start(&dir, encoding);
        let uri = file_uri(&dir.path().join("main.rs"));
        let mut model =
            "fn main() {\r\n    println!(\"héllo 😀\");\r\n}\r\n// 日本語\r\n".to_owned();
        editor.open(&uri, "rust", 1, &model);

        let after_emoji = model.find("😀").unwrap() + "😀".len();
        edit(
            &mut editor,
            &uri,
            &mut model,
            2,
            (after_emoji, after_emoji),
            " 👩‍💻",
            encoding,
        );
        let cjk = model.find("本").unwrap();
        edit(
            &mut editor,
            &uri,
            &mut model,
            3,
            (cjk, cjk + "本".len()),
            "本当",
            encoding,
        );
        // Replace a whole CRLF line, terminator included, with an LF line.
        let line = model.find("    println").unwrap();
        let line_end = model[line..].find("\r\n").unwrap() + line + 2;
        edit(
            &mut editor,
            &uri,
            &mut model,
            4,
            (line, line_end),
            "    let x = '😀';\n",
            encoding,
        );
        // Insert at the very end, then delete across two lines.
        let end = model.len();
        edit(
            &mut editor,
            &uri,
            &mut model,
            5,
            (end, end),
            "é\r\nz",
            encoding,
        );
        let brace = model.find('}').unwrap();
        edit(
            &mut editor,
            &uri,
            &mut model,
            6,
            (brace - 1, brace + 3),
            "",
            encoding,
        );

        assert_eq!(editor.text_of(&uri), (6, model.clone()), "{encoding:?}");
        assert!(editor.shutdown().success());
    }
}

/// A small deterministic generator, so a failure reproduces exactly.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, below: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % below.max(1)
    }
}

#[test]
fn random_edit_sequences_equal_the_naive_model() {
    const PIECES: &[&str] = &["a", "日", "😀", "é", "\r\n", "\n", "\r", "xy", " "];
    for (seed, encoding) in [
        (1, Encoding::Utf8),
        (2, Encoding::Utf16),
        (3, Encoding::Utf32),
    ] {
        let dir = TempDir::new("random");
        let mut editor = start(&dir, encoding);
        let uri = "untitled:random";
        let mut rng = Lcg(seed);
        let mut model = "start\r\n😀 日本\n".to_owned();
        editor.open(uri, "plaintext", 0, &model);
        for version in 1..=150 {
            // Positions anywhere, out of range included; the server clamps as the model does.
            let lines = model.lines().count() as u64 + 2;
            let mut position = || (rng.next(lines) as u32, rng.next(12) as u32);
            let (a, b) = (position(), position());
            let (start, end) = if a <= b { (a, b) } else { (b, a) };
            let text: String = (0..rng.next(4))
                .map(|_| PIECES[rng.next(9) as usize])
                .collect();
            if let Ok(next) = text_model::apply(&model, Some((start, end)), &text, encoding) {
                editor.change(uri, version, start, end, &text);
                model = next;
            }
            if version % 50 == 0 {
                assert_eq!(
                    editor.text_of(uri).1,
                    model,
                    "{encoding:?} at version {version}"
                );
            }
        }
        assert!(editor.shutdown().success());
    }
}

#[test]
fn save_and_close_are_tracked() {
    let dir = TempDir::new("saveclose");
    let mut editor = start(&dir, Encoding::Utf16);
    let uri = file_uri(&dir.path().join("a b.py"));
    editor.open(&uri, "python", 3, "x = 1\n");
    editor.change(&uri, 4, (0, 4), (0, 5), "2");
    editor.notify(
        "textDocument/didSave",
        json!({"textDocument": {"uri": uri}}),
    );
    let status = editor.status();
    assert_eq!(
        status["documents"],
        json!([{"uri": uri, "version": 4, "languageId": "python", "savedVersion": 4}])
    );
    editor.notify(
        "textDocument/didClose",
        json!({"textDocument": {"uri": uri}}),
    );
    assert_eq!(editor.status()["documents"], json!([]));
    let closed =
        editor.request_response("wright/viewFileText", json!({"textDocument": {"uri": uri}}));
    assert_eq!(closed["error"]["code"], -32602);
    assert!(
        closed["error"]["message"]
            .as_str()
            .unwrap()
            .contains("is not open")
    );
    assert!(editor.shutdown().success());
}

#[test]
fn a_change_to_an_unopened_document_is_reported_and_the_server_goes_on() {
    let dir = TempDir::new("unopened");
    let mut editor = start(&dir, Encoding::Utf16);
    let uri = file_uri(&dir.path().join("never-opened.rs"));
    editor.change(&uri, 2, (0, 0), (0, 0), "x");
    let log = editor.expect_log(1, "is not open");
    assert!(log.contains("never-opened.rs"), "{log}");
    editor.notify(
        "textDocument/didClose",
        json!({"textDocument": {"uri": uri}}),
    );
    editor.expect_log(2, "is not open");
    assert_eq!(editor.status()["documents"], json!([]));
    assert!(editor.shutdown().success());
}

#[test]
fn an_inverted_range_changes_nothing_and_says_why() {
    let dir = TempDir::new("inverted");
    let mut editor = start(&dir, Encoding::Utf8);
    let uri = "untitled:inverted";
    editor.open(uri, "plaintext", 1, "abc\ndef\n");
    editor.change(uri, 2, (1, 2), (0, 1), "X");
    let log = editor.expect_log(1, "after its end");
    assert!(log.contains("kept the text as it was"), "{log}");
    assert_eq!(editor.text_of(uri), (1, "abc\ndef\n".to_owned()));
    assert!(editor.shutdown().success());
}

#[test]
fn a_did_change_with_invalid_params_is_reported_not_dropped_silently() {
    let dir = TempDir::new("badchange");
    let mut editor = start(&dir, Encoding::Utf16);
    let uri = "untitled:bad";
    editor.open(uri, "plaintext", 1, "keep me");
    editor.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": uri}, "contentChanges": "nope"}),
    );
    let log = editor.expect_log(1, "ignored textDocument/didChange");
    assert!(log.contains("close and reopen"), "{log}");
    assert_eq!(editor.text_of(uri), (1, "keep me".to_owned()));
    // A full-text change (no range) is accepted too.
    editor.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": uri, "version": 2}, "contentChanges": [{"text": "new\r\n"}]}),
    );
    assert_eq!(editor.text_of(uri), (2, "new\r\n".to_owned()));
    let _: Value = editor.status();
    assert!(editor.shutdown().success());
}
