//! Tools from MCP servers in a session, through `wright exec` with the scripted provider as
//! the model: server-everything's `echo` called and its answer in the next request, its
//! `get-tiny-image` seen by the model as an image; `wright
//! mcp list --json`; a workspace-defined server untrusted until `wright mcp trust`, and again
//! once its definition changes; `approve = "ask"` headless not run; a hostile Python server
//! (FastMCP) that, sandboxed, neither writes outside nor reaches a listener on the host.

use std::net::TcpListener;

use serde_json::{Value, json};
use wright_tests::provider::{Reply, ScriptedProvider};
use wright_tests::{TempDir, mcp, workspace_command};

/// server-everything over stdio, as a `[mcp.servers.NAME]` table's lines.
fn everything(extra: &str) -> String {
    let script =
        mcp::node_dir().join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    format!(
        "command = {:?}\nargs = [{:?}, \"stdio\"]\n{extra}",
        mcp::node().display().to_string(),
        script.display().to_string()
    )
}

fn hostile(extra: &str) -> String {
    let script = mcp::repository().join("tests/mcp/hostile_server.py");
    format!(
        "command = {:?}\nargs = [{:?}]\n{extra}",
        mcp::python().display().to_string(),
        script.display().to_string()
    )
}

fn user_config(dir: &TempDir, text: &str) {
    dir.write("config/wright/config.toml", text);
}

fn run(dir: &TempDir, provider: Option<&ScriptedProvider>, args: &[&str]) -> std::process::Output {
    let bin = wright_tests::wright_bin();
    workspace_command(&bin, dir, args, provider, "sk-mcp-servers-test")
        .output()
        .expect("running wright")
}

fn list(dir: &TempDir) -> Value {
    let output = run(dir, None, &["mcp", "list", "--json"]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("mcp list --json prints JSON")
}

fn exec(dir: &TempDir, provider: &ScriptedProvider) -> std::process::Output {
    let output = run(dir, Some(provider), &["exec", "--json", "use the tools"]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// The tool results the model saw in the request after its call.
fn results(provider: &ScriptedProvider) -> Vec<String> {
    provider
        .requests()
        .last()
        .expect("a request")
        .tool_results()
}

#[test]
fn the_model_calls_everythings_echo_and_sees_its_answer() {
    if !mcp::npm_available() {
        return;
    }
    let dir = TempDir::new("mcp-everything");
    dir.write("ws/README.md", "a workspace\n");
    user_config(
        &dir,
        &format!(
            "[mcp.servers.everything]\n{}",
            everything("approve = \"auto\"\n")
        ),
    );

    let listed = list(&dir);
    assert_eq!(listed[0]["name"], "everything", "{listed}");
    assert_eq!(listed[0]["source"], "user", "{listed}");
    assert_eq!(listed[0]["state"], "running", "{listed}");
    assert!(
        listed[0]["tools"]
            .as_array()
            .unwrap()
            .contains(&json!("echo")),
        "{listed}"
    );

    let provider = ScriptedProvider::start();
    provider.push(Reply::call(
        "c1",
        "mcp__everything__echo",
        &json!({"message": "a marker 7f3a"}),
    ));
    provider.push(Reply::call(
        "c2",
        "mcp__everything__get-tiny-image",
        &json!({}),
    ));
    provider.push(Reply::text("Done."));
    exec(&dir, &provider);
    let requests = provider.requests();
    assert!(
        requests[0]
            .tool_names()
            .contains(&"mcp__everything__echo".to_owned()),
        "{:?}",
        requests[0].tool_names()
    );
    let seen = results(&provider);
    assert!(seen.iter().any(|r| r.contains("a marker 7f3a")), "{seen:?}");
    // The image comes back to the model in a user message after the results (a tool
    // result carries text only), and the result says so.
    assert!(
        seen.last()
            .is_some_and(|r| r.contains("(image/png shown in the next message)")),
        "{seen:?}"
    );
    let last = requests.last().unwrap().json();
    let messages = last["messages"].as_array().unwrap();
    let after = messages.last().unwrap();
    assert_eq!(after["role"], "user", "{after}");
    assert!(
        after["content"][1]["image_url"]["url"]
            .as_str()
            .is_some_and(|url| url.starts_with("data:image/png;base64,iVBOR")),
        "{after}"
    );
}

#[test]
fn a_workspace_server_starts_only_as_trusted() {
    if !mcp::npm_available() {
        return;
    }
    let dir = TempDir::new("mcp-trust");
    let table = |extra: &str| format!("[mcp.servers.theirs]\n{}", everything(extra));
    dir.write("ws/.wright/config.toml", &table("approve = \"auto\"\n"));

    let listed = list(&dir);
    assert_eq!(listed[0]["source"], "workspace", "{listed}");
    assert_eq!(listed[0]["state"], "untrusted", "{listed}");
    let provider = ScriptedProvider::start();
    provider.push(Reply::text("Nothing to do."));
    exec(&dir, &provider);
    let offered = provider.requests()[0].tool_names();
    assert!(
        !offered.iter().any(|name| name.starts_with("mcp__")),
        "{offered:?}"
    );

    let trusted = run(&dir, None, &["mcp", "trust", "theirs"]);
    assert!(
        trusted.status.success(),
        "{}",
        String::from_utf8_lossy(&trusted.stderr)
    );
    // The trust is the user's, not the workspace's.
    assert!(!dir.path().join("ws/.wright/mcp-trust.json").exists());
    let listed = list(&dir);
    assert_eq!(listed[0]["state"], "running", "{listed}");

    dir.write(
        "ws/.wright/config.toml",
        &table("approve = \"auto\"\ntools = [\"echo\"]\n"),
    );
    let listed = list(&dir);
    assert_eq!(
        listed[0]["state"], "untrusted",
        "a changed definition: {listed}"
    );
}

#[test]
fn a_workspace_may_not_run_a_server_unconfined() {
    let dir = TempDir::new("mcp-unconfined");
    dir.write(
        "ws/.wright/config.toml",
        "[mcp.servers.loose]\ncommand = \"/bin/true\"\nsandbox = false\n",
    );
    let output = run(&dir, None, &["mcp", "list", "--json"]);
    let listed: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(listed, json!([]));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("`sandbox = false` may not come from a workspace file"),
        "{stderr}"
    );
}

#[test]
fn an_ask_server_is_not_run_headless() {
    if !mcp::python_available() {
        return;
    }
    let dir = TempDir::new("mcp-ask");
    dir.write("ws/README.md", "a workspace\n");
    let marker = dir.path().join("called");
    // Unconfined (the user's own choice), so that a call that ran would leave its marker.
    user_config(
        &dir,
        &format!("[mcp.servers.hostile]\n{}", hostile("sandbox = false\n")),
    );
    let provider = ScriptedProvider::start();
    provider.push(Reply::call(
        "c1",
        "mcp__hostile__touch",
        &json!({"path": marker.display().to_string()}),
    ));
    provider.push(Reply::text("Done."));
    exec(&dir, &provider);
    assert_eq!(
        results(&provider),
        ["not run: approval needed (approve = \"ask\")"]
    );
    assert!(!marker.exists(), "the server saw the call");
}

#[test]
fn a_sandboxed_server_neither_writes_outside_nor_reaches_the_host() {
    if !mcp::python_available() {
        return;
    }
    let dir = TempDir::new("mcp-hostile");
    dir.write("ws/README.md", "a workspace\n");
    // Outside the workspace and outside /tmp (the sandbox's /tmp is its own, so a write
    // there would land in it, not on the host): the repository's target folder.
    let outside = mcp::repository().join(format!("target/mcp-hostile-{}.txt", std::process::id()));
    let _ = std::fs::remove_file(&outside);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    user_config(
        &dir,
        &format!("[mcp.servers.hostile]\n{}", hostile("approve = \"auto\"\n")),
    );
    let provider = ScriptedProvider::start();
    provider.push(Reply::call(
        "c1",
        "mcp__hostile__write_outside",
        &json!({"path": outside.display().to_string()}),
    ));
    provider.push(Reply::call(
        "c2",
        "mcp__hostile__connect",
        &json!({"port": port}),
    ));
    provider.push(Reply::text("Done."));
    exec(&dir, &provider);

    assert!(
        !outside.exists(),
        "the sandboxed server wrote outside the workspace"
    );
    assert!(
        listener.accept().is_err(),
        "the sandboxed server reached a listener on the host"
    );
    let requests = provider.requests();
    let wrote = requests[1].tool_results();
    let connected = requests[2].tool_results();
    assert!(!wrote[0].contains("wrote "), "{wrote:?}");
    assert!(
        wrote[0].to_lowercase().contains("error") || wrote[0].contains("Errno"),
        "{wrote:?}"
    );
    assert!(
        !connected.last().unwrap().contains("connected to"),
        "{connected:?}"
    );
}

/// Over `wright lsp`: a call of an `approve = "ask"` server is asked through
/// `wright/requestApproval` (kind `mcp`, naming the server, the tool and the arguments).
/// Denied, the model is told and the server never echoes; allowed, the echo reaches the model;
/// allowed for the session, the next call is not asked about.
#[test]
fn an_ask_server_is_asked_through_the_editor() {
    if !mcp::npm_available() {
        return;
    }
    let dir = TempDir::new("mcp-lsp-ask");
    dir.write("ws/README.md", "a workspace\n");
    user_config(
        &dir,
        &format!("[mcp.servers.everything]\n{}", everything("")),
    );
    let provider = ScriptedProvider::start();
    let messages = ["denied 1f2e", "allowed 2d3c", "always 3b4a", "again 4a5b"];
    for (n, message) in messages.iter().enumerate() {
        provider.push(Reply::call(
            &format!("c{n}"),
            "mcp__everything__echo",
            &json!({"message": message}),
        ));
    }
    provider.push(Reply::text("Done."));
    let mut spawn = wright_tests::session::agent_spawn(&dir, &provider);
    spawn.env.push((
        "XDG_CONFIG_HOME".into(),
        dir.path().join("config").display().to_string(),
    ));
    let mut editor = wright_tests::session::start_agent_server(
        &spawn,
        json!({"experimental": {"wrightRequestApproval": true}}),
    );
    let session = wright_tests::session::run(&mut editor, "echo things");
    for (message, decision) in messages[..3].iter().zip(["deny", "allow", "allowAlways"]) {
        let ask = editor.expect("a wright/requestApproval request", |m| {
            m["method"] == "wright/requestApproval" && m.get("id").is_some()
        });
        let params = &ask["params"];
        assert_eq!(params["kind"], "mcp", "{ask}");
        assert_eq!(params["sessionId"], session.as_str(), "{ask}");
        let command = params["command"].as_str().unwrap();
        assert!(
            command.starts_with("mcp__everything__echo ") && command.contains(message),
            "the tool and its arguments: {ask}"
        );
        let reason = params["reason"].as_str().unwrap();
        assert!(
            reason.contains("`everything`") && reason.contains("approve = \"ask\""),
            "the server and why: {ask}"
        );
        editor.respond(&ask["id"], json!({"decision": decision}));
    }
    let finished = wright_tests::session::finished(&mut editor, &session);
    assert_eq!(finished["status"], "done", "{finished}");
    assert!(
        editor
            .try_take(|m| m["method"] == "wright/requestApproval")
            .is_none(),
        "allowed for the session, the fourth call is not asked about"
    );
    let requests = provider.requests();
    assert_eq!(requests.len(), 5);
    assert!(
        requests[0]
            .tool_names()
            .contains(&"mcp__everything__echo".to_owned()),
        "{:?}",
        requests[0].tool_names()
    );
    let seen = results(&provider);
    assert_eq!(seen.len(), 4, "{seen:?}");
    assert_eq!(
        seen[0], "not run: the user declined the call of mcp__everything__echo",
        "{seen:?}"
    );
    assert!(!seen[0].contains(messages[0]), "{seen:?}");
    for (result, message) in seen[1..].iter().zip(&messages[1..]) {
        assert!(result.contains(message), "{seen:?}");
    }
    editor.shutdown();
}
