//! `wright mcp serve` driven by real MCP clients: the TypeScript SDK's (`tests/mcp/
//! serve_client.mjs`, over stdio spawning the binary and over streamable HTTP), raw lines and
//! raw HTTP requests for what no SDK sends, and the official conformance suite's server
//! scenarios against `--http`. Skipped, saying so, where the npm packages are not installed
//! (outside CI).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use wright_tests::{TempDir, mcp, wright_bin};

const TOOLS: &[&str] = &[
    "find_symbol",
    "outline",
    "find_references",
    "grep",
    "read_file",
    "context",
    "edit",
    "multi_edit",
    "apply_patch",
    "run_command",
];

const LIB: &str = "pub fn parse_request(input: &str) -> usize {\n    input.len()\n}\n\npub fn serve() {\n    let total = 0;\n    parse_request(\"a\");\n    let total = 0;\n}\n";

/// A workspace under `dir/ws` with `src/lib.rs`, a git folder and two text files.
fn workspace(name: &str) -> TempDir {
    let dir = TempDir::new(name);
    dir.write("ws/src/lib.rs", LIB);
    dir.write("ws/a.txt", "alpha\nbeta\ngamma\n");
    dir.write("ws/b.txt", "one\ntwo\nthree\n");
    dir.write("ws/.git/HEAD", "ref: refs/heads/main\n");
    dir
}

/// The environment a server gets: a private home and XDG folders under `dir`, and PATH.
fn isolate(command: &mut Command, dir: &TempDir) {
    command
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", dir.path().join("home"))
        .env("XDG_CACHE_HOME", dir.path().join("cache"))
        .env("XDG_DATA_HOME", dir.path().join("data"))
        .env("XDG_CONFIG_HOME", dir.path().join("config"));
}

/// Waits for `child` at most `limit`, killing it past that; its stdout and stderr.
fn finish(mut child: Child, limit: Duration) -> (std::process::ExitStatus, String, String) {
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let out = std::thread::spawn(move || {
        let mut text = String::new();
        if let Some(mut stdout) = stdout {
            let _ = stdout.read_to_string(&mut text);
        }
        text
    });
    let err = std::thread::spawn(move || {
        let mut text = String::new();
        if let Some(mut stderr) = stderr {
            let _ = stderr.read_to_string(&mut text);
        }
        text
    });
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "no end within {limit:?}; stderr: {}",
                err.join().unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    (status, out.join().unwrap(), err.join().unwrap())
}

/// Runs the SDK's client with `calls` (`[{"tool", "arguments"}]`): over stdio spawning the
/// binary on `dir/ws` when `url` is `None`, else over HTTP to `url`.
fn sdk_client(dir: &TempDir, url: Option<&str>, calls: Value) -> Value {
    let mut command = Command::new(mcp::node());
    isolate(&mut command, dir);
    command
        .arg(mcp::repository().join("tests/mcp/serve_client.mjs"))
        .arg(mcp::node_dir().join("node_modules"));
    match url {
        None => command
            .arg("stdio")
            .arg(wright_bin())
            .arg(dir.path().join("ws")),
        Some(url) => command.arg("http").arg(url),
    };
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting node");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(calls.to_string().as_bytes())
        .unwrap();
    let (status, stdout, stderr) = finish(child, Duration::from_secs(180));
    assert!(status.success(), "the client failed: {stderr}");
    serde_json::from_str(stdout.trim()).unwrap_or_else(|err| panic!("{err}: {stdout}\n{stderr}"))
}

fn text(result: &Value) -> &str {
    result["content"][0]["text"].as_str().unwrap_or_default()
}

fn is_error(result: &Value) -> bool {
    result["isError"] == json!(true)
}

fn read(dir: &TempDir, relative: &str) -> String {
    std::fs::read_to_string(dir.path().join("ws").join(relative)).unwrap()
}

/// Every tool of the table is offered, and nothing else, each with its schema; the index is
/// built on a fresh workspace, so find_symbol finds a definition at once; a tool error and an
/// unknown tool come back as tool results with `isError: true`.
#[test]
fn every_tool_is_listed_with_its_schema_and_the_index_is_built() {
    if !mcp::npm_available() {
        return;
    }
    let dir = workspace("mcp-serve-list");
    let answer = sdk_client(
        &dir,
        None,
        json!([
            {"tool": "find_symbol", "arguments": {"query": "parse_request"}},
            {"tool": "find_references", "arguments": {"name": "parse_request"}},
            {"tool": "outline", "arguments": {"path": "src/lib.rs"}},
            {"tool": "read_file", "arguments": {"path": "a.txt", "start_line": 2, "end_line": 2}},
            {"tool": "grep", "arguments": {"pattern": "gam+a"}},
            {"tool": "context", "arguments": {"query": "how is parse_request called", "budget": 500}},
            {"tool": "read_file", "arguments": {"path": "missing.txt"}},
            {"tool": "write_file", "arguments": {"path": "x", "content": "y"}},
            {"tool": "read_file", "arguments": {"path": "a.txt", "startLine": 1}},
        ]),
    );
    assert_eq!(answer["server"]["name"], "wright");
    let tools = answer["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, TOOLS);
    for tool in tools {
        let schema = &tool["inputSchema"];
        assert_eq!(schema["type"], "object", "{tool}");
        assert!(schema["properties"].is_object(), "{tool}");
        assert!(!tool["description"].as_str().unwrap().is_empty(), "{tool}");
    }
    let schema = |name: &str| {
        tools
            .iter()
            .find(|t| t["name"] == name)
            .map(|t| t["inputSchema"].clone())
            .unwrap()
    };
    assert_eq!(
        schema("edit")["required"],
        json!(["path", "old_string", "new_string"])
    );
    assert_eq!(schema("apply_patch")["required"], json!(["patch"]));
    assert_eq!(schema("context")["required"], json!(["query"]));
    assert_eq!(
        schema("run_command")["properties"]["in_place"]["type"],
        "boolean"
    );
    assert_eq!(schema("run_command")["additionalProperties"], false);

    let results = answer["results"].as_array().unwrap();
    let [
        symbol,
        references,
        outline,
        lines,
        grep,
        context,
        missing,
        offered_no,
        misspelt,
    ] = &results[..]
    else {
        panic!("{results:?}")
    };
    assert!(
        !is_error(symbol) && text(symbol).contains("src/lib.rs:1"),
        "{symbol}"
    );
    assert!(
        !is_error(references) && text(references).contains("src/lib.rs\n  7:"),
        "{references}"
    );
    assert!(text(outline).contains("serve"), "{outline}");
    assert!(
        text(lines).contains("beta") && !text(lines).contains("alpha"),
        "{lines}"
    );
    assert!(
        text(grep).contains("a.txt") && text(grep).contains("3"),
        "{grep}"
    );
    assert!(
        !is_error(context) && text(context).contains("parse_request"),
        "{context}"
    );
    assert!(
        is_error(missing) && text(missing).contains("missing.txt"),
        "{missing}"
    );
    // Not one of the server's tools, though the agent has it.
    assert!(
        is_error(offered_no) && text(offered_no).contains("unknown tool"),
        "{offered_no}"
    );
    assert!(!dir.path().join("ws/x").exists());
    // The agent's argument check, schema and all.
    assert!(
        is_error(misspelt) && text(misspelt).contains("startLine"),
        "{misspelt}"
    );
}

/// An edit whose old text matches two places is refused with both line numbers and nothing
/// written; one that matches once lands on disk; a protected path and a link leading out are
/// refused.
#[test]
fn an_ambiguous_edit_is_refused_with_both_lines_and_a_unique_one_lands() {
    if !mcp::npm_available() {
        return;
    }
    let dir = workspace("mcp-serve-edit");
    let outside = dir.write("outside.txt", "secret\n");
    std::os::unix::fs::symlink(&outside, dir.path().join("ws/link.txt")).unwrap();
    let answer = sdk_client(
        &dir,
        None,
        json!([
            {"tool": "edit", "arguments": {"path": "src/lib.rs", "old_string": "    let total = 0;\n", "new_string": "    let total = 1;\n"}},
            {"tool": "edit", "arguments": {"path": "src/lib.rs", "old_string": "input.len()", "new_string": "input.len() + 1"}},
            {"tool": "edit", "arguments": {"path": ".git/HEAD", "old_string": "main", "new_string": "evil"}},
            {"tool": "edit", "arguments": {"path": "link.txt", "old_string": "secret", "new_string": "changed"}},
            {"tool": "multi_edit", "arguments": {"path": "a.txt", "edits": [
                {"old_string": "alpha", "new_string": "ALPHA"},
                {"old_string": "not there", "new_string": "x"},
            ]}},
        ]),
    );
    let results = answer["results"].as_array().unwrap();
    let [ambiguous, unique, protected, link, multi] = &results[..] else {
        panic!("{results:?}")
    };
    assert!(is_error(ambiguous), "{ambiguous}");
    assert!(
        text(ambiguous).contains("lines 6, 8"),
        "both candidates named: {ambiguous}"
    );
    assert!(!is_error(unique), "{unique}");
    assert!(read(&dir, "src/lib.rs").contains("input.len() + 1"));
    assert!(read(&dir, "src/lib.rs").contains("let total = 0;\n    parse_request"));
    assert!(
        is_error(protected) && text(protected).contains(".git"),
        "{protected}"
    );
    assert_eq!(read(&dir, ".git/HEAD"), "ref: refs/heads/main\n");
    assert!(is_error(link) && text(link).contains("outside"), "{link}");
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "secret\n");
    assert!(is_error(multi), "{multi}");
    assert_eq!(read(&dir, "a.txt"), "alpha\nbeta\ngamma\n");
}

/// A patch to two files lands on both; one whose second hunk does not match leaves both as
/// they were.
#[test]
fn a_two_file_patch_applies_and_a_bad_second_hunk_changes_neither_file() {
    if !mcp::npm_available() {
        return;
    }
    let dir = workspace("mcp-serve-patch");
    let good = "*** Begin Patch\n*** Update File: a.txt\n@@\n alpha\n-beta\n+BETA\n gamma\n*** Update File: b.txt\n@@\n one\n-two\n+TWO\n three\n*** End Patch\n";
    let bad = "*** Begin Patch\n*** Update File: a.txt\n@@\n alpha\n-BETA\n+beta again\n gamma\n*** Update File: b.txt\n@@\n one\n-no such line\n+x\n three\n*** End Patch\n";
    let answer = sdk_client(
        &dir,
        None,
        json!([
            {"tool": "apply_patch", "arguments": {"patch": good}},
            {"tool": "apply_patch", "arguments": {"patch": bad}},
        ]),
    );
    let results = answer["results"].as_array().unwrap();
    assert!(!is_error(&results[0]), "{}", results[0]);
    assert_eq!(read(&dir, "a.txt"), "alpha\nBETA\ngamma\n");
    assert_eq!(read(&dir, "b.txt"), "one\nTWO\nthree\n");
    assert!(is_error(&results[1]), "{}", results[1]);
    assert!(text(&results[1]).contains("b.txt"), "{}", results[1]);
    assert_eq!(read(&dir, "a.txt"), "alpha\nBETA\ngamma\n");
    assert_eq!(read(&dir, "b.txt"), "one\nTWO\nthree\n");
}

/// A command reaches no listener on the host, runs in a throw-away snapshot by default (the
/// workspace file unchanged, the change reported) and in the workspace with `in_place`.
#[test]
fn run_command_has_no_network_and_writes_in_place_only_when_asked() {
    if !mcp::npm_available() {
        return;
    }
    let dir = workspace("mcp-serve-run");
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let connect = format!(
        "bash -c 'echo hello > /dev/tcp/127.0.0.1/{port}' && echo CONNECTED || echo REFUSED"
    );
    let answer = sdk_client(
        &dir,
        None,
        json!([
            {"tool": "run_command", "arguments": {"command": connect, "timeout_secs": 20}},
            {"tool": "run_command", "arguments": {"command": "echo snapshot > a.txt && cat a.txt"}},
            {"tool": "run_command", "arguments": {"command": "echo in-place > b.txt", "in_place": true}},
            {"tool": "run_command", "arguments": {"command": "echo x > .git/HEAD", "in_place": true}},
            {"tool": "run_command", "arguments": {"command": "true", "in_place": "yes"}},
        ]),
    );
    let results = answer["results"].as_array().unwrap();
    let [network, snapshot, in_place, protected, bad] = &results[..] else {
        panic!("{results:?}")
    };
    assert!(text(network).contains("REFUSED"), "{network}");
    assert!(
        matches!(listener.accept(), Err(err) if err.kind() == std::io::ErrorKind::WouldBlock),
        "the host's listener was reached"
    );
    assert!(
        !is_error(snapshot) && text(snapshot).contains("snapshot"),
        "{snapshot}"
    );
    assert!(text(snapshot).contains("modified a.txt"), "{snapshot}");
    assert_eq!(read(&dir, "a.txt"), "alpha\nbeta\ngamma\n");
    assert!(!is_error(in_place), "{in_place}");
    assert_eq!(read(&dir, "b.txt"), "in-place\n");
    assert!(is_error(protected), "{protected}");
    assert_eq!(read(&dir, ".git/HEAD"), "ref: refs/heads/main\n");
    assert!(is_error(bad) && text(bad).contains("in_place"), "{bad}");
}

/// Lines no SDK sends: one that is not JSON gets a parse error (-32700, id null), a request
/// of the wrong shape an invalid request carrying its id, a notification before `initialize`
/// nothing; the server answers the requests after each.
#[test]
fn malformed_lines_get_json_rpc_errors_and_serving_goes_on() {
    let dir = workspace("mcp-serve-raw");
    let mut command = Command::new(wright_bin());
    isolate(&mut command, &dir);
    let mut child = command
        .args(["mcp", "serve", "--root"])
        .arg(dir.path().join("ws"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let lines = [
        "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}".to_owned(),
        "this is not json".to_owned(),
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}).to_string(),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string(),
        "{\"jsonrpc\":\"2.0\",\"id\":".to_owned(),
        json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": "not an object"}).to_string(),
        json!({"jsonrpc": "2.0", "id": 8, "method": "no/such/method"}).to_string(),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "read_file", "arguments": {"path": "a.txt"}}}).to_string(),
    ];
    for line in &lines {
        writeln!(stdin, "{line}").unwrap();
    }
    stdin.flush().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (sender, received) = std::sync::mpsc::channel::<Value>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let value = serde_json::from_str(&line)
                .unwrap_or_else(|err| panic!("stdout carries only JSON-RPC: {err}: {line}"));
            if sender.send(value).is_err() {
                break;
            }
        }
    });
    let mut answers = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while answers.len() < 6 {
        let left = deadline.saturating_duration_since(Instant::now());
        match received.recv_timeout(left) {
            Ok(value) => answers.push(value),
            Err(_) => panic!("answers so far: {answers:?}"),
        }
    }
    drop(stdin);
    let (status, _, _) = finish(child, Duration::from_secs(30));
    assert!(status.success(), "{status}");
    let parse_errors: Vec<&Value> = answers
        .iter()
        .filter(|a| a["error"]["code"] == -32700)
        .collect();
    assert_eq!(parse_errors.len(), 2, "{answers:?}");
    assert!(parse_errors.iter().all(|a| a["id"].is_null()));
    let by_id = |id: i64| answers.iter().find(|a| a["id"] == id);
    assert_eq!(by_id(1).unwrap()["result"]["serverInfo"]["name"], "wright");
    assert_eq!(by_id(7).unwrap()["error"]["code"], -32600, "{answers:?}");
    assert!(by_id(8).unwrap()["error"].is_object(), "{answers:?}");
    let read = &by_id(2).unwrap()["result"];
    assert!(text(read).contains("beta"), "{read}");
}

/// A server started with `--http 127.0.0.1:0`, and its URL from stderr.
fn start_http(dir: &TempDir) -> (Child, String) {
    let mut command = Command::new(wright_bin());
    isolate(&mut command, dir);
    let mut child = command
        .args(["mcp", "serve", "--http", "127.0.0.1:0", "--root"])
        .arg(dir.path().join("ws"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (sender, received) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if let Some(at) = line.find("http://") {
                let _ = sender.send(line[at..].trim().to_owned());
            }
        }
    });
    let url = received
        .recv_timeout(Duration::from_secs(30))
        .expect("the server names its URL on stderr");
    (child, url)
}

struct Stop(Child);

impl Drop for Stop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One raw `initialize` POST with these `Host` and `Origin` headers; the status code.
fn post_initialize(url: &str, host: &str, origin: Option<&str>) -> u16 {
    let authority = url.trim_start_matches("http://").split('/').next().unwrap();
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}).to_string();
    let mut stream = TcpStream::connect(authority).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let origin = origin.map_or(String::new(), |origin| format!("Origin: {origin}\r\n"));
    write!(
        stream,
        "POST /mcp HTTP/1.1\r\nHost: {host}\r\n{origin}Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut status = String::new();
    BufReader::new(stream).read_line(&mut status).unwrap();
    status
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP status line: {status:?}"))
}

/// Over HTTP the SDK's client lists and calls the tools; a request whose `Host` or `Origin`
/// is not loopback is refused with 403 (DNS rebinding), loopback ones are served.
#[test]
fn http_serves_the_sdk_client_and_refuses_foreign_hosts_and_origins() {
    if !mcp::npm_available() {
        return;
    }
    let dir = workspace("mcp-serve-http");
    let (child, url) = start_http(&dir);
    let _stop = Stop(child);
    let answer = sdk_client(
        &dir,
        Some(&url),
        json!([
            {"tool": "grep", "arguments": {"pattern": "gamma"}},
            {"tool": "edit", "arguments": {"path": "a.txt", "old_string": "beta", "new_string": "BETA"}},
        ]),
    );
    let names: Vec<&str> = answer["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, TOOLS);
    assert!(text(&answer["results"][0]).contains("a.txt"));
    assert_eq!(read(&dir, "a.txt"), "alpha\nBETA\ngamma\n");

    let authority = url.trim_start_matches("http://").split('/').next().unwrap();
    let port = authority.rsplit(':').next().unwrap();
    assert_eq!(post_initialize(&url, "evil.example.com", None), 403);
    assert_eq!(
        post_initialize(&url, &format!("evil.example.com:{port}"), None),
        403
    );
    // The right name on another port is not this server either.
    assert_eq!(post_initialize(&url, "127.0.0.1:1", None), 403);
    assert_eq!(
        post_initialize(&url, authority, Some("http://evil.example.com")),
        403
    );
    assert_eq!(
        post_initialize(
            &url,
            authority,
            Some(&format!("http://evil.example.com:{port}"))
        ),
        403
    );
    assert_eq!(post_initialize(&url, authority, None), 200);
    assert_eq!(
        post_initialize(&url, &format!("localhost:{port}"), None),
        200
    );
    assert_eq!(
        post_initialize(&url, authority, Some("http://localhost:3000")),
        200
    );
}

/// `--http` on an address that is not loopback is refused before anything listens.
#[test]
fn a_non_loopback_http_address_is_refused() {
    let dir = workspace("mcp-serve-public");
    for address in ["0.0.0.0:0", "[::]:0", "192.168.1.10:8765", "example.com:80"] {
        let mut command = Command::new(wright_bin());
        isolate(&mut command, &dir);
        let child = command
            .args(["mcp", "serve", "--http", address, "--root"])
            .arg(dir.path().join("ws"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (status, stdout, stderr) = finish(child, Duration::from_secs(30));
        assert_eq!(status.code(), Some(2), "{address}: {stderr}");
        assert!(
            stderr.contains("not a loopback address"),
            "{address}: {stderr}"
        );
        assert!(stdout.is_empty());
    }
}

/// The conformance suite's server scenarios that apply to a server of tools without prompts,
/// resources, logging or completions (the others, and why, are in docs/guide/mcp.md).
const CONFORMANCE: &[&str] = &[
    "server-initialize",
    "ping",
    "tools-list",
    "tools-call-error",
    "server-sse-multiple-streams",
    "dns-rebinding-protection",
];

/// Each applicable scenario of `@modelcontextprotocol/conformance` passes against
/// `wright mcp serve --http`.
#[test]
fn the_conformance_suites_server_scenarios_pass() {
    if !mcp::npm_available() {
        return;
    }
    let dir = workspace("mcp-serve-conformance");
    let (child, url) = start_http(&dir);
    let _stop = Stop(child);
    let mut failed = Vec::new();
    for scenario in CONFORMANCE {
        let output_dir: PathBuf = dir.path().join("results").join(scenario);
        let mut command = Command::new(mcp::node());
        isolate(&mut command, &dir);
        let child = command
            .arg(mcp::bin("conformance"))
            .args(["server", "--url", &url, "--scenario", scenario, "-o"])
            .arg(&output_dir)
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (status, stdout, stderr) = finish(child, Duration::from_secs(120));
        let passed =
            status.success() && stdout.contains("0 failed") && !stdout.contains("Passed: 0/");
        eprintln!("{scenario}: {}", if passed { "passed" } else { "FAILED" });
        if !passed {
            failed.push(format!("{scenario}:\n{stdout}\n{stderr}"));
        }
        assert!(has_checks(&output_dir), "{scenario} wrote no results");
    }
    assert!(failed.is_empty(), "{}", failed.join("\n\n"));
}

/// Whether the suite wrote a checks file for the scenario under `dir`.
fn has_checks(dir: &Path) -> bool {
    fn walk(dir: &Path) -> bool {
        std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .any(|entry| {
                let path = entry.path();
                if path.is_dir() {
                    walk(&path)
                } else {
                    path.file_name().is_some_and(|name| name == "checks.json")
                }
            })
    }
    walk(dir)
}
