//! The tools on a small workspace on disk: outputs, refusals, argument errors.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::*;
use crate::agent::disk::DiskTarget;
use crate::edit::GateMode;
use crate::workspace::DiskOnly;

struct Workspace(PathBuf);

impl Workspace {
    fn new(name: &str, files: &[(&str, &str)]) -> Self {
        let dir = std::env::temp_dir().join(format!("wright-tools-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for (path, text) in files {
            let path = dir.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        Self(dir)
    }

    fn read(&self, path: &str) -> String {
        std::fs::read_to_string(self.0.join(path)).unwrap()
    }
}

impl Drop for Workspace {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn context(root: &Path, commands: Option<Arc<dyn CommandRunner>>) -> ToolContext {
    ToolContext {
        root: root.to_path_buf(),
        overlay: Arc::new(DiskOnly),
        index: None,
        walk: WalkOptions::default(),
        edits: Arc::new(DiskTarget::new(root, GateMode::Report)),
        commands,
        test_command: None,
        cancel: Cancel::new(),
        plan: Mutex::new(Vec::new()),
        plan_mode: Default::default(),
        mcp: None,
    }
}

fn run(context: &ToolContext, name: &str, arguments: Json) -> ToolOutput {
    call(
        context,
        &ToolCall {
            id: "call_1".into(),
            name: name.into(),
            arguments: arguments.to_string(),
        },
    )
}

const LIB: &str = "fn one() -> i32 {\n    1\n}\n\nfn two() -> i32 {\n    1\n}\n";

#[test]
fn read_file_numbers_lines_and_reads_ranges() {
    let ws = Workspace::new("read", &[("src/lib.rs", LIB)]);
    let cx = context(&ws.0, None);
    let all = run(&cx, "read_file", json!({"path": "src/lib.rs"}));
    assert!(!all.is_error, "{}", all.content);
    assert!(all.content.starts_with("src/lib.rs (lines 1-7 of 7)\n"));
    assert!(all.content.contains("5\tfn two() -> i32 {\n"));
    let part = run(
        &cx,
        "read_file",
        json!({"path": "./src/lib.rs", "start_line": 5, "end_line": "6"}),
    );
    assert_eq!(
        part.content,
        "src/lib.rs (lines 5-6 of 7)\n5\tfn two() -> i32 {\n6\t    1\n"
    );
    let past = run(
        &cx,
        "read_file",
        json!({"path": "src/lib.rs", "start_line": 40}),
    );
    assert!(
        past.is_error && past.content.contains("has 7 lines"),
        "{}",
        past.content
    );
    let missing = run(&cx, "read_file", json!({"path": "src/nope.rs"}));
    assert!(missing.is_error && missing.content.contains("no such file"));
    let outside = run(&cx, "read_file", json!({"path": "../etc/passwd"}));
    assert!(outside.is_error && outside.content.contains("leaves the workspace"));
    let absolute = run(&cx, "read_file", json!({"path": "/etc/passwd"}));
    assert!(absolute.is_error && absolute.content.contains("outside the workspace"));
}

#[test]
fn list_dir_shows_a_tree_to_the_depth_asked() {
    let ws = Workspace::new(
        "list",
        &[
            ("src/lib.rs", LIB),
            ("src/deep/er/x.rs", ""),
            ("README.md", "hi"),
            ("target/debug/junk", "x"),
        ],
    );
    let cx = context(&ws.0, None);
    let out = run(&cx, "list_dir", json!({})).content;
    assert!(out.starts_with("./ (3 files)\n"), "{out}");
    assert!(
        out.contains("  README.md\n") && out.contains("  src/\n"),
        "{out}"
    );
    assert!(out.contains("    deep/ (1 files)\n"), "{out}");
    assert!(
        !out.contains("junk"),
        "generated folders are left out: {out}"
    );
    let deeper = run(&cx, "list_dir", json!({"path": "src", "depth": 5})).content;
    assert!(deeper.contains("x.rs"), "{deeper}");
}

#[test]
fn grep_groups_matches_by_file() {
    let ws = Workspace::new(
        "grep",
        &[("src/lib.rs", LIB), ("src/main.rs", "fn main() {}\n")],
    );
    let cx = context(&ws.0, None);
    let out = run(&cx, "grep", json!({"pattern": "fn \\w+\\(\\)"})).content;
    assert_eq!(
        out,
        "src/lib.rs\n  1: fn one() -> i32 {\n  5: fn two() -> i32 {\nsrc/main.rs\n  1: fn main() {}\n"
    );
    let globbed = run(&cx, "grep", json!({"pattern": "fn", "glob": "*main*"})).content;
    assert!(!globbed.contains("lib.rs"), "{globbed}");
    let bad = run(&cx, "grep", json!({"pattern": "("}));
    assert!(bad.is_error, "{}", bad.content);
}

#[test]
fn edits_land_once_or_are_refused_with_the_candidates() {
    let ws = Workspace::new("edit", &[("src/lib.rs", LIB)]);
    let cx = context(&ws.0, None);
    let ambiguous = run(
        &cx,
        "edit",
        json!({"path": "src/lib.rs", "old_string": "    1\n", "new_string": "    2\n"}),
    );
    assert!(ambiguous.is_error, "{}", ambiguous.content);
    assert!(
        ambiguous.content.contains("lines 2, 6"),
        "{}",
        ambiguous.content
    );
    assert_eq!(ws.read("src/lib.rs"), LIB, "a refused edit writes nothing");

    let landed = run(
        &cx,
        "edit",
        json!({"path": "src/lib.rs", "old_string": "fn two() -> i32 {\n    1", "new_string": "fn two() -> i32 {\n    2"}),
    );
    assert!(!landed.is_error, "{}", landed.content);
    assert_eq!(landed.changed, ["src/lib.rs"]);
    assert!(ws.read("src/lib.rs").contains("    2\n}\n"));

    let multi = run(
        &cx,
        "multi_edit",
        json!({"path": "src/lib.rs", "edits": [
            {"old_string": "fn one", "new_string": "fn first"},
            {"old_string": "fn missing", "new_string": "fn x"},
        ]}),
    );
    assert!(multi.is_error, "{}", multi.content);
    assert!(ws.read("src/lib.rs").contains("fn one"), "all or none");

    let written = run(
        &cx,
        "write_file",
        json!({"path": "src/new.rs", "content": "pub fn new() {}\n"}),
    );
    assert!(!written.is_error, "{}", written.content);
    assert_eq!(ws.read("src/new.rs"), "pub fn new() {}\n");

    let patch = "*** Begin Patch\n*** Update File: src/new.rs\n@@\n-pub fn new() {}\n+pub fn renamed() {}\n*** End Patch\n";
    let patched = run(&cx, "apply_patch", json!({"patch": patch}));
    assert!(!patched.is_error, "{}", patched.content);
    assert_eq!(ws.read("src/new.rs"), "pub fn renamed() {}\n");
}

const SHAPES: &str = "pub struct Circle {\n    pub radius: f64,\n}\n\nimpl Circle {\n    pub fn area(&self) -> f64 {\n        square(self.radius) * 3.14\n    }\n}\n\npub fn square(x: f64) -> f64 {\n    x * x\n}\n";
const MAIN: &str = "mod shapes;\n\nfn main() {\n    let c = shapes::Circle { radius: 2.0 };\n    let a = c.area();\n    std::process::exit(a as i32);\n}\n";

#[test]
fn symbol_tools_answer_from_a_real_index() {
    let ws = Workspace::new("index", &[("src/shapes.rs", SHAPES), ("src/main.rs", MAIN)]);
    let cache = ws.0.with_extension("cache");
    let index = crate::index::Index::open(
        &ws.0,
        crate::index::Options {
            cache_dir: cache.clone(),
            walk: WalkOptions::default(),
        },
    )
    .unwrap();
    index.refresh(&|_| {}).unwrap();
    let mut cx = context(&ws.0, None);
    cx.index = Some(Arc::new(index));

    let found = run(&cx, "find_symbol", json!({"query": "area"}));
    assert_eq!(
        found.content,
        "method area src/shapes.rs:6 in Circle\n    pub fn area(&self) -> f64 {\n"
    );
    let by_kind = run(
        &cx,
        "find_symbol",
        json!({"query": "square", "kind": "function"}),
    );
    assert!(
        by_kind
            .content
            .starts_with("function square src/shapes.rs:11\n    pub fn square(x: f64) -> f64 {\n"),
        "{}",
        by_kind.content
    );
    let none = run(&cx, "find_symbol", json!({"query": "hexagon"}));
    assert_eq!(none.content, "no definitions match \"hexagon\"; try grep");

    // Nested by line ranges: the field inside its struct.
    let outline = run(&cx, "outline", json!({"path": "./src/shapes.rs"}));
    assert_eq!(
        outline.content,
        "src/shapes.rs\n  class Circle (lines 1-3)\n    field radius (lines 2-2)\n  method area (lines 6-8)\n  function square (lines 11-13)\n"
    );
    let outside = run(&cx, "outline", json!({"path": "../x.rs"}));
    assert!(outside.is_error, "{}", outside.content);

    // Line and column of each use (the column counts the indentation).
    let references = run(&cx, "find_references", json!({"name": "area"}));
    assert_eq!(references.content, "src/main.rs\n  5:15 call\n");
    let references = run(&cx, "find_references", json!({"name": "square"}));
    assert_eq!(references.content, "src/shapes.rs\n  7:9 call\n");
    let unused = run(&cx, "find_references", json!({"name": "hexagon"}));
    assert_eq!(
        unused.content,
        "no references to \"hexagon\" indexed; try grep"
    );
    let _ = std::fs::remove_dir_all(&cache);
}

#[test]
fn wrong_arguments_and_unknown_tools_are_told_to_the_model() {
    let ws = Workspace::new("args", &[("a.txt", "x\n")]);
    let cx = context(&ws.0, None);
    let missing = run(&cx, "read_file", json!({}));
    assert!(missing.is_error);
    assert!(
        missing.content.contains("\"path\" is required"),
        "{}",
        missing.content
    );
    assert!(
        missing.content.contains("\"required\":[\"path\"]"),
        "the schema comes back"
    );
    let wrong_type = run(
        &cx,
        "edit",
        json!({"path": "a.txt", "old_string": 3, "new_string": ""}),
    );
    assert!(
        wrong_type.content.contains("must be a string"),
        "{}",
        wrong_type.content
    );
    let not_json = call(
        &cx,
        &ToolCall {
            id: "c".into(),
            name: "read_file".into(),
            arguments: "{\"path\": \"a.txt\"".into(),
        },
    );
    assert!(not_json.is_error && not_json.content.contains("not valid JSON"));
    let unknown = run(&cx, "delete_everything", json!({}));
    assert!(unknown.is_error && unknown.content.contains("unknown tool"));
    // Without a command runner, the command tools are neither offered nor callable.
    assert!(!schemas(&cx).iter().any(|s| s.name == "run_command"));
    assert!(
        run(&cx, "run_command", json!({"command": "ls"}))
            .content
            .contains("unknown tool")
    );
}

#[test]
fn argument_keys_the_schema_does_not_declare_are_refused_with_the_schema() {
    let ws = Workspace::new("undeclared", &[("a.txt", "one\ntwo\nthree\n")]);
    let cx = context(&ws.0, None);
    // A misspelt range must not read the whole file as if no range had been asked for.
    let misspelt = run(&cx, "read_file", json!({"path": "a.txt", "startLine": 2}));
    assert!(misspelt.is_error, "{}", misspelt.content);
    assert!(
        misspelt.content.starts_with(
            "invalid arguments for read_file: unknown argument \"startLine\" (the arguments are: "
        ) && misspelt.content.contains("start_line"),
        "{}",
        misspelt.content
    );
    assert!(
        misspelt.content.contains("The schema is: {"),
        "{}",
        misspelt.content
    );
    // In the items of an array too; nothing is applied.
    let nested = run(
        &cx,
        "multi_edit",
        json!({"path": "a.txt", "edits": [
            {"old_string": "one", "new_string": "1"},
            {"old_text": "two", "new_string": "2"},
        ]}),
    );
    assert!(
        nested.is_error
            && nested
                .content
                .contains("unknown argument \"old_text\" in \"edits\", item 2"),
        "{}",
        nested.content
    );
    assert_eq!(ws.read("a.txt"), "one\ntwo\nthree\n");
    let plan = run(
        &cx,
        "update_plan",
        json!({"steps": [{"title": "x", "status": "done", "note": "n"}]}),
    );
    assert!(
        plan.is_error && plan.content.contains("unknown argument \"note\""),
        "{}",
        plan.content
    );
    let mut store = crate::compaction::ArtifactStore::in_memory();
    store.put("grep", "x\n").unwrap();
    let artifact = read_artifact(
        &store,
        &ToolCall {
            id: "c".into(),
            name: "read_artifact".into(),
            arguments: json!({"id": "a1", "lines": "1-2"}).to_string(),
        },
    );
    assert!(
        artifact.is_error && artifact.content.contains("unknown argument \"lines\""),
        "{}",
        artifact.content
    );
    // Every key a schema declares is accepted, at every depth the schemas have.
    for spec in SPECS {
        let schema = (spec.parameters)();
        let mut arguments = Map::new();
        for (key, property) in schema["properties"].as_object().unwrap() {
            let value = match property.get("items") {
                Some(items) => json!([items["properties"]
                    .as_object()
                    .unwrap()
                    .keys()
                    .map(|key| (key.clone(), Json::Null))
                    .collect::<Map<_, _>>()]),
                None => Json::Null,
            };
            arguments.insert(key.clone(), value);
        }
        assert!(
            declared(spec, arguments).is_ok(),
            "{} refuses its own keys",
            spec.name
        );
    }
}

#[test]
fn the_plan_is_kept() {
    let ws = Workspace::new("plan", &[]);
    let cx = context(&ws.0, None);
    let out = run(
        &cx,
        "update_plan",
        json!({"steps": [{"title": "read", "status": "done"}, {"title": "fix", "status": "in_progress"}]}),
    );
    assert_eq!(out.content, "plan updated:\n[x] read\n[~] fix\n");
    assert_eq!(cx.plan.lock().unwrap().len(), 2);
    let bad = run(
        &cx,
        "update_plan",
        json!({"steps": [{"title": "x", "status": "maybe"}]}),
    );
    assert!(bad.is_error && bad.content.contains("pending, in_progress or done"));
}

/// A runner that answers from a script and remembers what it was asked.
struct Scripted {
    asked: Mutex<Vec<(String, Duration)>>,
    output: CommandOutput,
}

impl CommandRunner for Scripted {
    fn run(&self, command: &str, timeout: Duration, _: &Cancel) -> Result<CommandOutput, String> {
        self.asked
            .lock()
            .unwrap()
            .push((command.to_owned(), timeout));
        Ok(self.output.clone())
    }
}

#[test]
fn commands_report_status_and_cap_their_output() {
    let ws = Workspace::new("commands", &[("Cargo.toml", "[package]\n")]);
    let runner = Arc::new(Scripted {
        asked: Mutex::new(Vec::new()),
        output: CommandOutput {
            exit_code: Some(101),
            stdout: format!("{}\nthe end\n", "line\n".repeat(5000)),
            stderr: "error: failed\n".into(),
            duration_ms: 12,
            ..CommandOutput::default()
        },
    });
    let cx = context(&ws.0, Some(runner.clone()));
    assert!(schemas(&cx).iter().any(|s| s.name == "run_tests"));
    let out = run(&cx, "run_tests", json!({"filter": "parser's"}));
    assert!(out.is_error, "a failing command is an error result");
    assert!(
        out.content
            .starts_with("errors: failed\n$ cargo test 'parser'\\''s'\nexit code 101, 12 ms\n"),
        "{}",
        out.content
    );
    assert!(
        out.content.contains("lines (") && out.content.contains("the end\n"),
        "head and tail"
    );
    assert!(out.content.len() < 12_000, "{}", out.content.len());
    assert!(out.content.contains("--- stderr\nerror: failed\n"));
    let whole = out.whole.as_deref().expect("the cut output is kept whole");
    assert!(whole.contains("the end") && whole.matches("line\n").count() == 5000);
    let ok = run(
        &cx,
        "run_command",
        json!({"command": "ls", "timeout_secs": 5}),
    );
    assert!(ok.content.starts_with("$ ls\n"));
    assert_eq!(
        runner.asked.lock().unwrap()[1],
        ("ls".to_owned(), Duration::from_secs(5))
    );
}

#[test]
fn test_commands_are_detected_from_project_files() {
    let ws = Workspace::new(
        "detect",
        &[("package.json", "{\"scripts\": {\"test\": \"vitest run\"}}")],
    );
    assert_eq!(
        commands::test_command(&ws.0, None, None).as_deref(),
        Some("npm test --silent --")
    );
    assert_eq!(
        commands::test_command(&ws.0, Some("make check"), Some("x")).as_deref(),
        Some("make check 'x'")
    );
    let none = Workspace::new("detect-none", &[("README.md", "")]);
    assert_eq!(commands::test_command(&none.0, None, None), None);
    let go = Workspace::new("detect-go", &[("go.mod", "module x\n")]);
    assert_eq!(
        commands::test_command(&go.0, None, Some("TestX")).as_deref(),
        Some("go test ./... -run 'TestX'")
    );
}

#[test]
fn python_projects_run_pytest_only_where_they_configure_it() {
    let detect = |name: &str, files: &[(&str, &str)]| {
        let ws = Workspace::new(name, files);
        commands::test_command(&ws.0, None, Some("add")).unwrap_or_default()
    };
    let unittest = "python3 -m unittest -k 'add'";
    let pytest = "python3 -m pytest -q -k 'add'";
    // Projects that never set pytest up: the standard library's runner.
    assert_eq!(
        detect(
            "py-unittest",
            &[("calc.py", ""), ("test_calc.py", "import unittest\n")]
        ),
        unittest
    );
    assert_eq!(
        detect("py-tests-dir", &[("tests/test_calc.py", "")]),
        unittest
    );
    assert_eq!(
        detect(
            "py-pyproject",
            &[("pyproject.toml", "[project]\nname = \"calc\"\n")]
        ),
        unittest
    );
    assert_eq!(
        detect(
            "py-setup-cfg",
            &[("setup.cfg", "[metadata]\nname = calc\n")]
        ),
        unittest
    );
    // Projects that configure pytest, each way pytest reads its configuration.
    for (name, files) in [
        ("py-pytest-ini", &[("pytest.ini", "[pytest]\n")][..]),
        (
            "py-pyproject-pytest",
            &[(
                "pyproject.toml",
                "[project]\nname = \"calc\"\n\n[tool.pytest.ini_options]\naddopts = \"-q\"\n",
            )],
        ),
        (
            "py-setup-cfg-pytest",
            &[("setup.cfg", "[metadata]\nname = calc\n[tool:pytest]\n")],
        ),
        ("py-tox-pytest", &[("tox.ini", "[tox]\n[pytest]\n")]),
        ("py-conftest", &[("conftest.py", ""), ("test_calc.py", "")]),
    ] {
        assert_eq!(detect(name, files), pytest, "{name}");
    }
    // Not a Python project at all.
    assert_eq!(detect("py-none", &[("notes.py", "")]), "");
}

/// `read_file`, `list_dir` and `grep` never read through a link leading out of the
/// workspace, not even when the editor holds the outside file's text in a buffer; a link that
/// stays inside reads as its target.
#[test]
fn reading_tools_refuse_links_out_even_when_the_editor_holds_the_file() {
    const SECRET: &str = "OUTSIDE-SECRET-93";
    let ws = Workspace::new("links-out", &[("src/lib.rs", LIB)]);
    let outside = Workspace::new(
        "links-out-outside",
        &[
            ("secret.txt", "OUTSIDE-SECRET-93\n"),
            ("dir/mod.rs", "fn outside() {} // OUTSIDE-SECRET-93\n"),
        ],
    );
    std::os::unix::fs::symlink(outside.0.join("secret.txt"), ws.0.join("key.txt")).unwrap();
    std::os::unix::fs::symlink(outside.0.join("dir"), ws.0.join("linked")).unwrap();
    std::os::unix::fs::symlink("src/lib.rs", ws.0.join("alias.rs")).unwrap();
    struct Held(PathBuf);
    impl Overlay for Held {
        fn buffer_text(&self, path: &Path) -> Option<String> {
            (path == self.0).then(|| format!("{SECRET} as the editor shows it"))
        }
    }
    let mut cx = context(&ws.0, None);
    cx.overlay = Arc::new(Held(ws.0.join("key.txt")));
    for (name, arguments, link) in [
        ("read_file", json!({"path": "key.txt"}), "key.txt"),
        ("read_file", json!({"path": "linked/mod.rs"}), "linked"),
        ("list_dir", json!({"path": "linked"}), "linked"),
    ] {
        let out = run(&cx, name, arguments);
        assert!(out.is_error, "{name}: {}", out.content);
        assert!(
            out.content.contains(link) && out.content.contains("leads outside the workspace"),
            "{name}: {}",
            out.content
        );
        assert!(!out.content.contains(SECRET), "{name}: {}", out.content);
    }
    let listed = run(&cx, "list_dir", json!({}));
    assert!(!listed.content.contains("mod.rs"), "{}", listed.content);
    let grepped = run(&cx, "grep", json!({"pattern": "OUTSIDE-SECRET"}));
    assert!(
        grepped.content.starts_with("no matches"),
        "{}",
        grepped.content
    );
    let alias = run(&cx, "read_file", json!({"path": "alias.rs"}));
    assert!(
        alias.content.contains("fn one() -> i32"),
        "{}",
        alias.content
    );
}

/// Detecting the test command reads project files through the workspace root, bounded: a
/// `package.json` that is a FIFO does not block it, a `pyproject.toml` linked out is not read.
#[test]
fn test_command_detection_is_not_blocked_or_led_out_by_project_files() {
    let ws = Workspace::new("detect-hostile", &[("tests/test_calc.py", "")]);
    let outside = Workspace::new(
        "detect-hostile-outside",
        &[("pyproject.toml", "[tool.pytest.ini_options]\n")],
    );
    let fifo =
        std::ffi::CString::new(ws.0.join("package.json").as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid path.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
    std::os::unix::fs::symlink(
        outside.0.join("pyproject.toml"),
        ws.0.join("pyproject.toml"),
    )
    .unwrap();
    let root = ws.0.clone();
    let (send, receive) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = send.send(commands::test_command(&root, None, Some("add")));
    });
    let detected = receive
        .recv_timeout(Duration::from_secs(20))
        .expect("detecting the test command hangs");
    assert_eq!(detected.as_deref(), Some("python3 -m unittest -k 'add'"));
}
