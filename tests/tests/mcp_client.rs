//! wright as an MCP client, through `wright mcp check` (the real binary): the reference servers
//! (`@modelcontextprotocol/server-everything` over stdio and streamable HTTP,
//! `@modelcontextprotocol/server-filesystem`), what a broken server gets (garbage on stdout,
//! an exit before the handshake, a call that never answers, nothing listening), and the
//! conformance suite's client scenarios (`@modelcontextprotocol/conformance`).
//!
//! The peers come from `cargo xtask e2e mcp --install` (see `wright_tests::mcp`); without them
//! the tests say they are skipped, except under `CI`.

use std::io::Read;
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use wright_tests::{TempDir, mcp, wright_bin};

/// How long one `wright mcp check` may take before the test calls it hung.
const CHECK_LIMIT: Duration = Duration::from_secs(60);

struct Checked {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    took: Duration,
}

impl Checked {
    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}\nstderr: {}", self.stdout, self.stderr))
    }
}

/// Runs `wright mcp check ARGS`, bounded.
fn check(args: &[&str]) -> Checked {
    let root = TempDir::new("mcp-check");
    let started = Instant::now();
    let mut child = Command::new(wright_bin())
        .arg("--root")
        .arg(root.path())
        .args(["mcp", "check"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn wright");
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        text
    });
    let err = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > CHECK_LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "wright mcp check {args:?} did not finish within {CHECK_LIMIT:?}; stderr: {}",
                err.join().unwrap()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Checked {
        code: status.code(),
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
        took: started.elapsed(),
    }
}

fn node() -> String {
    mcp::node().display().to_string()
}

fn script(name: &str) -> String {
    mcp::bin(name).display().to_string()
}

fn tool_names(document: &Value) -> Vec<String> {
    document["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|tool| tool["name"].as_str().expect("a tool's name").to_owned())
        .collect()
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// server-everything over streamable HTTP on a free port; killed when dropped.
struct HttpServer {
    child: Child,
    url: String,
}

impl HttpServer {
    fn start() -> HttpServer {
        let port = free_port();
        let mut child = Command::new(mcp::node())
            .arg(mcp::bin("mcp-server-everything"))
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start server-everything");
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Some(status) = child.try_wait().unwrap() {
                panic!("server-everything exited: {status}");
            }
            assert!(
                Instant::now() < deadline,
                "server-everything never listened on {port}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        HttpServer {
            child,
            url: format!("http://127.0.0.1:{port}/mcp"),
        }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Lists, calls `echo` and `get-sum`, and renders `get-tiny-image`, on `server`.
fn exercise_everything(server: &[&str]) {
    let with = |extra: &[&str]| {
        let mut args = extra.to_vec();
        args.extend_from_slice(server);
        check(&args)
    };
    let listed = with(&["--json"]);
    assert_eq!(listed.code, Some(0), "{}", listed.stderr);
    let document = listed.json();
    let names = tool_names(&document);
    for wanted in ["echo", "get-sum", "get-tiny-image"] {
        assert!(names.iter().any(|n| n == wanted), "{wanted} in {names:?}");
    }
    assert_eq!(document["server"], "mcp-servers/everything");
    assert!(
        document["protocolVersion"]
            .as_str()
            .is_some_and(|v| v.starts_with("20")),
        "{document}"
    );
    let echo = &document["tools"][names.iter().position(|n| n == "echo").unwrap()];
    assert!(
        echo["inputSchema"]["properties"]["message"].is_object(),
        "{echo}"
    );
    assert!(document.get("result").is_none());

    let echoed = with(&[
        "--json",
        "--call",
        "echo",
        "--args",
        r#"{"message":"hello from wright"}"#,
    ]);
    assert_eq!(echoed.code, Some(0), "{}", echoed.stderr);
    let result = &echoed.json()["result"];
    assert_eq!(result["content"], "Echo: hello from wright");
    assert_eq!(result["isError"], false);

    let sum = with(&["--call", "get-sum", "--args", r#"{"a":19,"b":23}"#]);
    assert_eq!(sum.code, Some(0), "{}", sum.stderr);
    assert!(sum.stdout.contains("42"), "{}", sum.stdout);

    let image = with(&["--call", "get-tiny-image"]);
    assert_eq!(image.code, Some(0), "{}", image.stderr);
    assert!(
        image.stdout.contains("[image: image/png, "),
        "{}",
        image.stdout
    );

    // Arguments the tool's schema refuses: the server says so as a tool error, exit 1.
    let refused = with(&["--json", "--call", "get-sum", "--args", r#"{"a":"x"}"#]);
    assert_eq!(refused.code, Some(1), "{}", refused.stderr);
    assert_eq!(refused.json()["result"]["isError"], true);
}

#[test]
fn everything_over_stdio() {
    if !mcp::npm_available() {
        return;
    }
    let (node, everything) = (node(), script("mcp-server-everything"));
    exercise_everything(&["--", &node, &everything, "stdio"]);
}

#[test]
fn everything_over_streamable_http() {
    if !mcp::npm_available() {
        return;
    }
    let server = HttpServer::start();
    exercise_everything(&[&server.url]);
}

#[test]
fn filesystem_over_stdio_lists_a_folder() {
    if !mcp::npm_available() {
        return;
    }
    let folder = TempDir::new("mcp-fs");
    folder.write("notes.txt", "hello\n");
    folder.write("src/lib.rs", "fn main() {}\n");
    // host path: the server reports the folder as it resolves it.
    let path = std::fs::canonicalize(folder.path()).unwrap();
    let path = path.to_str().unwrap();
    let args = format!(r#"{{"path":{}}}"#, Value::from(path));
    let (node, filesystem) = (node(), script("mcp-server-filesystem"));
    let listed = check(&[
        "--call",
        "list_directory",
        "--args",
        &args,
        "--",
        &node,
        &filesystem,
        path,
    ]);
    assert_eq!(listed.code, Some(0), "{}", listed.stderr);
    assert!(
        listed.stdout.contains("[FILE] notes.txt"),
        "{}",
        listed.stdout
    );
    assert!(listed.stdout.contains("[DIR] src"), "{}", listed.stdout);
    assert!(
        listed.stdout.contains("list_allowed_directories"),
        "{}",
        listed.stdout
    );
}

#[test]
fn a_program_that_is_no_mcp_server_fails_fast_and_says_why() {
    let garbage = check(&["--", "sh", "-c", "echo 'Welcome to my tool!'; sleep 30"]);
    assert_eq!(garbage.code, Some(2), "{}", garbage.stderr);
    assert!(garbage.took < Duration::from_secs(10), "{:?}", garbage.took);
    assert!(
        garbage.stderr.contains("not JSON-RPC"),
        "{}",
        garbage.stderr
    );
    assert!(
        garbage.stderr.contains("Welcome to my tool!"),
        "{}",
        garbage.stderr
    );

    let exits = check(&["--", "sh", "-c", "echo 'missing API key' >&2; exit 3"]);
    assert_eq!(exits.code, Some(2), "{}", exits.stderr);
    assert!(
        exits.stderr.contains("exited before answering"),
        "{}",
        exits.stderr
    );
    assert!(exits.stderr.contains("missing API key"), "{}", exits.stderr);

    let missing = check(&["--", "/nonexistent/mcp-server"]);
    assert_eq!(missing.code, Some(2), "{}", missing.stderr);
    assert!(
        missing.stderr.contains("cannot start"),
        "{}",
        missing.stderr
    );
}

#[test]
fn a_call_that_never_answers_times_out() {
    if !mcp::npm_available() {
        return;
    }
    let (node, everything) = (node(), script("mcp-server-everything"));
    let hung = check(&[
        "--timeout",
        "2",
        "--call",
        "trigger-long-running-operation",
        "--args",
        r#"{"duration":60,"steps":2}"#,
        "--",
        &node,
        &everything,
        "stdio",
    ]);
    assert_eq!(hung.code, Some(1), "{}", hung.stderr);
    assert!(
        hung.stderr.contains("no result within 2 s"),
        "{}",
        hung.stderr
    );
    assert!(hung.took < Duration::from_secs(30), "{:?}", hung.took);
}

#[test]
fn nothing_listening_is_connection_refused() {
    let url = format!("http://127.0.0.1:{}/mcp", free_port());
    let refused = check(&[&url]);
    assert_eq!(refused.code, Some(2), "{}", refused.stderr);
    assert!(
        refused.stderr.contains("connection refused"),
        "{}",
        refused.stderr
    );
    assert!(refused.stderr.contains(&url), "{}", refused.stderr);
}

#[test]
fn bad_usage_is_exit_2() {
    let not_json = check(&["--call", "echo", "--args", "{nope", "--", "true"]);
    assert_eq!(not_json.code, Some(2));
    assert!(not_json.stderr.contains("--args"), "{}", not_json.stderr);
    let no_command = check(&["--"]);
    assert_eq!(no_command.code, Some(2));
}

/// The conformance suite's client scenarios wright takes part in; `elicitation-*` and `auth/*`
/// need elicitation and OAuth, which wright does not implement.
const SCENARIOS: &[(&str, &str)] = &[
    ("initialize", ""),
    (
        "tools_call",
        r#" --call add_numbers --args '{"a":2,"b":3}'"#,
    ),
    ("sse-retry", " --call test_reconnection"),
];

#[test]
fn conformance_client_scenarios_pass() {
    if !mcp::npm_available() {
        return;
    }
    let wright = wright_bin();
    let wright = wright.to_str().unwrap();
    assert!(
        !wright.contains(' '),
        "the suite splits its --command on spaces"
    );
    let results = TempDir::new("mcp-conformance");
    for (scenario, extra) in SCENARIOS {
        // The suite appends the server's URL to the command and runs it with a shell.
        let command = format!("{wright} mcp check{extra}");
        let started = Instant::now();
        let mut child = Command::new(mcp::node())
            .arg(mcp::bin("conformance"))
            .args(["client", "--command", &command, "--scenario", scenario])
            .current_dir(results.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run the conformance suite");
        let mut stderr = child.stderr.take().unwrap();
        let err = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = stderr.read_to_string(&mut text);
            text
        });
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if started.elapsed() > Duration::from_secs(120) {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "scenario {scenario} did not finish: {}",
                    err.join().unwrap()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let report = err.join().unwrap();
        assert!(
            status.success() && report.contains("OVERALL: PASSED") && !report.contains("FAILURE"),
            "scenario {scenario} ({status}):\n{report}"
        );
    }
}

#[test]
fn the_bearer_token_goes_in_the_header_and_nowhere_else() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let server = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let mut request = Vec::new();
        let mut byte = [0u8; 1];
        while !request.ends_with(b"\r\n\r\n") && stream.read(&mut byte).unwrap_or(0) == 1 {
            request.push(byte[0]);
        }
        use std::io::Write as _;
        let _ = stream.write_all(
            b"HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Bearer\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        );
        String::from_utf8_lossy(&request).to_lowercase()
    });
    let root = TempDir::new("mcp-token");
    let output = Command::new(wright_bin())
        .arg("--root")
        .arg(root.path())
        .args([
            "mcp",
            "check",
            "--bearer-token-env",
            "WRIGHT_TEST_TOKEN",
            &url,
        ])
        .env("WRIGHT_TEST_TOKEN", "sekrit-token-42")
        .env("RUST_LOG", "trace")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let request = server.join().unwrap();
    assert!(
        request.contains("authorization: bearer sekrit-token-42"),
        "{request}"
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("401"), "{stderr}");
    assert!(
        !stderr.contains("sekrit"),
        "the token was printed: {stderr}"
    );
    assert!(!String::from_utf8_lossy(&output.stdout).contains("sekrit"));
}
