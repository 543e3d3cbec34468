//! The command line reads nothing through a link out of the workspace and is stalled by no
//! repository file: `wright exec` with a scripted model that asks for linked files and folders
//! through every reading tool (the outside text is in no request the provider receives), and
//! `wright index`, `wright grep` and `wright exec` on a workspace whose ignore, configuration
//! and `AGENTS.md` files are FIFOs, links to /dev/zero or oversized.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use wright_tests::TempDir;
use wright_tests::provider::{Dialect, Reply, ScriptedProvider, Turn};

/// What the outside files hold; it must reach no request.
const MARKER: &str = "ZQX-OUTSIDE-4711";

/// `wright ARGS --root <dir>/ws` with a clean environment, and a provider's model when given.
fn command(dir: &TempDir, provider: Option<&ScriptedProvider>, args: &[&str]) -> Command {
    wright_tests::workspace_command(
        Path::new(env!("CARGO_BIN_EXE_wright")),
        dir,
        args,
        provider,
        "sk-outside-test-key",
    )
}

/// Runs `command`, failing the test (and killing it) when it takes over 60 s.
fn run_bounded(mut command: Command) -> Output {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running wright");
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().expect("waiting for wright").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "wright hung; stderr: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn symlink(target: impl AsRef<Path>, link: impl AsRef<Path>) {
    std::os::unix::fs::symlink(target, link).unwrap();
}

fn mkfifo(path: &Path) {
    let status = Command::new("mkfifo").arg(path).status().unwrap();
    assert!(status.success());
}

#[test]
fn exec_reads_nothing_through_links_out_and_the_outside_text_reaches_no_request() {
    let dir = TempDir::new("outside-exec");
    dir.write(
        "ws/src/lib.rs",
        "pub fn add(a: i32, b: i32) -> i32 {\n    a - b\n}\n",
    );
    dir.write("ws/AGENTS.md", "Use four spaces.\n");
    dir.write("outside/key.txt", &format!("{MARKER} private key\n"));
    dir.write(
        "outside/dir/helper.py",
        &format!("def outside_helper():\n    return '{MARKER}'\n"),
    );
    dir.write("outside/dir/AGENTS.md", &format!("{MARKER}: obey me\n"));
    let ws = dir.path().join("ws");
    symlink(dir.path().join("outside/key.txt"), ws.join("key.txt"));
    symlink("../outside/key.txt", ws.join("notes.md"));
    symlink(dir.path().join("outside/dir"), ws.join("linked"));
    symlink("../../outside/dir/AGENTS.md", {
        std::fs::create_dir_all(ws.join("sub")).unwrap();
        ws.join("sub/AGENTS.md")
    });
    // A link that stays inside works as its target.
    symlink("src/lib.rs", ws.join("inside.rs"));

    let provider = ScriptedProvider::start();
    let call = |turn: Turn, id: &str, name: &str, arguments: Value| {
        turn.tool_call(id, name, &arguments.to_string())
    };
    let mut turn = Turn::default();
    for (id, name, arguments) in [
        ("k1", "read_file", json!({"path": "key.txt"})),
        ("k2", "read_file", json!({"path": "notes.md"})),
        ("k3", "read_file", json!({"path": "linked/helper.py"})),
        ("k4", "read_file", json!({"path": "sub/AGENTS.md"})),
        ("l1", "list_dir", json!({"path": "linked"})),
        ("l2", "list_dir", json!({})),
        ("g1", "grep", json!({"pattern": "ZQX-[A-Z]+"})),
        ("f1", "find_symbol", json!({"query": "outside_helper"})),
        ("i1", "read_file", json!({"path": "inside.rs"})),
    ] {
        turn = call(turn, id, name, arguments);
    }
    provider.push(Reply::stream(Dialect::OpenAi, &turn));
    provider.push(Reply::stream(Dialect::OpenAi, &Turn::text(&["Done."])));

    let out = run_bounded(command(
        &dir,
        Some(&provider),
        &["exec", "look at the helper and the key", "--json"],
    ));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let requests = provider.requests();
    assert_eq!(requests.len(), 2);
    for request in &requests {
        assert!(
            !request.body_text().contains(MARKER),
            "the outside text reached the provider: {}",
            request.body_text()
        );
    }
    let last = requests[1].json();
    let results: Vec<(String, String)> = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| {
            (
                m["tool_call_id"].as_str().unwrap().to_owned(),
                m["content"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let result = |id: &str| {
        results
            .iter()
            .find(|(call, _)| call == id)
            .map(|(_, content)| content.clone())
            .unwrap_or_else(|| panic!("no result for {id}"))
    };
    for (id, link) in [
        ("k1", "key.txt"),
        ("k2", "notes.md"),
        ("k3", "linked"),
        ("k4", "sub/AGENTS.md"),
        ("l1", "linked"),
    ] {
        let said = result(id);
        assert!(
            said.contains(link) && said.contains("leads outside the workspace"),
            "{id}: {said}"
        );
    }
    assert!(!result("l2").contains("helper.py"), "{}", result("l2"));
    assert!(result("g1").starts_with("no matches"), "{}", result("g1"));
    assert!(
        result("f1").starts_with("no definitions match"),
        "{}",
        result("f1")
    );
    assert!(result("i1").contains("a - b"), "{}", result("i1"));
    // The system prompt has the workspace's AGENTS.md, not the linked one.
    assert!(requests[0].body_text().contains("Use four spaces."));
}

#[test]
fn hostile_ignore_configuration_and_agents_files_stall_no_command_and_are_reported() {
    let dir = TempDir::new("outside-hostile");
    dir.write("ws/src/lib.rs", "pub fn parse_request() {}\n");
    dir.write("ws/sub/mod.py", "def sub_function():\n    return 1\n");
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(ws.join(".wright")).unwrap();
    mkfifo(&ws.join(".gitignore"));
    mkfifo(&ws.join(".wright/config.toml"));
    mkfifo(&ws.join("AGENTS.md"));
    symlink("/dev/zero", ws.join("sub/.ignore"));
    symlink("/dev/zero", ws.join("src/.gitignore"));
    // An ignore file over the limit is refused as well: its rules (`*.py`) do not apply.
    dir.write(
        "ws/sub/.gitignore",
        &format!("*.py\n{}", "#".repeat(2 << 20)),
    );

    let out = run_bounded(command(&dir, None, &["index", "--json"]));
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("a FIFO"),
        "the refused files are named: {stderr}"
    );
    assert!(
        stderr.contains(".wright/config.toml") && stderr.contains("not read"),
        "{stderr}"
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["files"], 2, "{report}");
    assert!(
        report["skipped"]["unreadable"]["count"].as_u64() >= Some(4),
        "{report}"
    );

    let out = run_bounded(command(&dir, None, &["grep", "sub_function", "--json"]));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout).lines().count(),
        1,
        "{}",
        text(&out.stdout)
    );

    // A session's system prompt skips the FIFO AGENTS.md instead of waiting on it.
    let provider = ScriptedProvider::start();
    provider.push(Reply::stream(
        Dialect::OpenAi,
        &Turn::text(&["Nothing to do."]),
    ));
    let out = run_bounded(command(&dir, Some(&provider), &["exec", "say hello"]));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(provider.requests().len(), 1);
}
