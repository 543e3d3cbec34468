//! The `wright` command line: `--version`, `doctor`, exit codes, a reader that goes away.
//!
//! These live in the `wright` package so that `cargo test --workspace` always builds the
//! binary (Cargo builds a package's binaries for its integration tests) before the end-to-end
//! tests of `wright-tests` drive it.

use std::process::{Command, Output};

use serde_json::Value;
use wright_tests::TempDir;

fn wright_bin() -> &'static str {
    env!("CARGO_BIN_EXE_wright")
}

/// Runs wright with a clean environment plus `env`.
fn wright(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(wright_bin());
    command.args(args).env_clear();
    for (key, value) in env {
        command.env(key, value);
    }
    command.output().expect("running wright")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).unwrap()
}

#[test]
fn version_names_the_build() {
    let out = wright(&["--version"], &[]);
    assert!(out.status.success());
    assert_eq!(
        text(&out.stdout).trim(),
        format!("wright {}", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn doctor_shows_each_value_with_its_source_and_hides_secrets() {
    let dir = TempDir::new("doctor");
    let config_home = dir.path().join("cfg");
    let user_file = dir.write(
        "cfg/wright/config.toml",
        "[providers.anthropic]\nbase_url = \"http://127.0.0.1:4000\"\n",
    );
    dir.write(
        "ws/.wright/config.toml",
        "model = \"anthropic/claude-sonnet-4-5\"\n",
    );
    let root = dir.path().join("ws");
    let env = [
        ("XDG_CONFIG_HOME", config_home.to_str().unwrap()),
        ("ANTHROPIC_API_KEY", "sk-ant-very-secret"),
    ];

    let out = wright(
        &["doctor", "--json", "--root", root.to_str().unwrap()],
        &env,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let find = |key: &str| {
        report["settings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["key"] == key)
            .unwrap()
            .clone()
    };
    assert_eq!(
        find("model")["source"],
        format!(
            "workspace file {}",
            root.join(".wright/config.toml").display()
        )
    );
    assert_eq!(
        find("providers.anthropic.base_url")["source"],
        format!("user file {}", user_file.display())
    );
    assert_eq!(find("providers.anthropic.api_key")["value"], "<set>");
    assert_eq!(
        find("providers.anthropic.api_key")["source"],
        "environment ANTHROPIC_API_KEY"
    );
    assert_eq!(find("providers.openai.api_key")["value"], Value::Null);
    assert_eq!(report["log"], "stderr");
    assert_eq!(report["root"], root.display().to_string());

    let out = wright(&["--root", root.to_str().unwrap(), "doctor"], &env);
    let human = text(&out.stdout);
    assert!(out.status.success());
    assert!(
        human.contains("model = anthropic/claude-sonnet-4-5   (workspace file"),
        "{human}"
    );
    assert!(
        human.contains("providers.openai.api_key is not set"),
        "{human}"
    );
    assert!(human.contains("set OPENAI_API_KEY"), "{human}");
    for output in [&out.stdout, &out.stderr] {
        assert!(!text(output).contains("sk-ant-very-secret"));
    }
}

#[test]
fn doctor_shows_what_a_workspace_file_combined_with_the_users_settings_part_by_part() {
    let dir = TempDir::new("doctorparts");
    let config_home = dir.path().join("cfg");
    let user_file = dir.write(
        "cfg/wright/config.toml",
        "model = \"openai/gpt-4.1\"\n[agent]\napprove_commands = \"git push*\"\n",
    );
    let workspace_file = dir.write(
        "ws/.wright/config.toml",
        "model = \"anthropic/claude-opus-4\"\n[agent]\napprove_commands = [\"rm -rf *\"]\n[sandbox]\nnetwork = \"allow\"\ndisk_mb = 512\n",
    );
    let root = dir.path().join("ws");
    let env = [("XDG_CONFIG_HOME", config_home.to_str().unwrap())];
    let (user, workspace) = (
        format!("user file {}", user_file.display()),
        format!("workspace file {}", workspace_file.display()),
    );

    let out = wright(
        &["doctor", "--json", "--root", root.to_str().unwrap()],
        &env,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["problems"], serde_json::json!([]), "{report}");
    let find = |key: &str| {
        report["settings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["key"] == key)
            .unwrap()
            .clone()
    };
    let approvals = find("agent.approve_commands");
    assert_eq!(approvals["value"], "git push*; rm -rf *");
    assert_eq!(
        approvals["source"],
        format!("combined from {user} and {workspace}")
    );
    assert_eq!(approvals["merge"], "union");
    assert_eq!(
        approvals["parts"],
        serde_json::json!([
            {"value": "git push*", "source": user, "applied": true, "why_not": null},
            {"value": "rm -rf *", "source": workspace, "applied": true, "why_not": null},
        ])
    );
    let network = find("sandbox.network");
    assert_eq!(
        (&network["value"], &network["source"]),
        (&"ask".into(), &"default".into())
    );
    assert_eq!(network["merge"], "stricter");
    assert_eq!(network["parts"][1]["value"], "allow");
    assert_eq!(network["parts"][1]["source"], workspace.as_str());
    assert_eq!(network["parts"][1]["applied"], false);
    let disk = find("sandbox.disk_mb");
    assert_eq!(
        (&disk["value"], &disk["source"]),
        (&"512".into(), &workspace.clone().into())
    );
    let model = find("model");
    assert_eq!(
        (&model["value"], &model["source"]),
        (&"openai/gpt-4.1".into(), &user.clone().into())
    );
    assert_eq!(model["parts"][1]["applied"], false);

    let out = wright(&["doctor", "--root", root.to_str().unwrap()], &env);
    let human = text(&out.stdout);
    for line in [
        format!(
            "  agent.approve_commands = git push*; rm -rf *   (combined from {user} and {workspace})"
        ),
        "    parts (union):".to_owned(),
        format!("      git push*   ({user})"),
        format!("      rm -rf *   ({workspace})"),
        "  sandbox.network = ask   (default)".to_owned(),
        format!(
            "      allow   ({workspace}; not applied: not stricter than the value that applies)"
        ),
        format!("  sandbox.disk_mb = 512   ({workspace})"),
        "      4096   (default; not applied: a workspace file's value is smaller)".to_owned(),
        format!(
            "      anthropic/claude-opus-4   ({workspace}; not applied: your own model choice wins"
        ),
    ] {
        assert!(
            human.lines().any(|l| l.starts_with(&line)),
            "{line:?} in\n{human}"
        );
    }
}

#[test]
fn doctor_reports_the_log_file_and_fails_on_a_broken_config_file() {
    let dir = TempDir::new("doctorbroken");
    dir.write(".wright/config.toml", "model = \n");
    let log = dir.path().join("wright.log");
    let out = wright(
        &[
            "doctor",
            "--json",
            "--root",
            dir.path().to_str().unwrap(),
            "--log-file",
            log.to_str().unwrap(),
        ],
        &[("HOME", dir.path().to_str().unwrap())],
    );
    assert_eq!(out.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["log"], log.display().to_string());
    let problem = report["problems"][0].as_str().unwrap();
    assert!(
        problem.contains("not valid TOML") && problem.contains("line 1"),
        "{problem}"
    );
}

#[test]
fn usage_and_io_errors_exit_with_2() {
    let out = wright(&[], &[]);
    assert_eq!(out.status.code(), Some(2));
    let out = wright(&["frobnicate"], &[]);
    assert_eq!(out.status.code(), Some(2));
    let out = wright(&["doctor", "--root", "/no/such/dir/anywhere"], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("--root /no/such/dir/anywhere"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn an_invalid_log_filter_is_a_warning_not_a_failure() {
    let dir = TempDir::new("badfilter");
    let out = wright(
        &["doctor", "--root", dir.path().to_str().unwrap()],
        &[("WRIGHT_LOG", "wright=loud[")],
    );
    assert!(out.status.success());
    assert!(
        text(&out.stderr).contains("not a valid filter"),
        "{}",
        text(&out.stderr)
    );
}

/// A small workspace with its own cache, and the environment that points wright at it.
fn indexed_workspace(name: &str) -> (TempDir, Vec<(&'static str, String)>) {
    let dir = TempDir::new(name);
    dir.write("ws/src/lib.rs", "/// Parses.\npub fn parse_request() {}\npub struct HttpServer;\nimpl HttpServer { pub fn start(&self) { parse_request() } }\n");
    dir.write("ws/util.py", "def parse_args():\n    return 1\n");
    dir.write("ws/notes.md", "parse everything\n");
    dir.write(
        "ws/node_modules/dep/index.js",
        "function parse_dependency() {}\n",
    );
    let env = vec![
        (
            "XDG_CACHE_HOME",
            dir.path().join("cache").display().to_string(),
        ),
        ("HOME", dir.path().display().to_string()),
    ];
    (dir, env)
}

fn run(args: &[&str], env: &[(&'static str, String)]) -> Output {
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    wright(args, &env)
}

#[test]
fn index_reports_a_cold_then_an_incremental_build() {
    let (dir, env) = indexed_workspace("cli-index");
    let root = dir.path().join("ws");
    let root = root.to_str().unwrap();
    let doctor = text(&run(&["doctor", "--root", root], &env).stdout);
    assert!(doctor.contains("(not built yet"), "{doctor}");
    let out = run(&["index", "--json", "--root", root], &env);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let cold: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(cold["files"], 2);
    assert_eq!(cold["symbols"], 4);
    assert_eq!(cold["incremental"], false);
    assert_eq!(cold["other_files"], 1);
    assert_eq!(
        cold["skipped"]["generated folder"]["examples"],
        serde_json::json!(["node_modules"])
    );
    assert!(cold["bytes"].as_u64().unwrap() > 0 && cold["seconds"].as_f64().is_some());
    // Searchable after the lexical phase; complete (nothing left lexical) when it returns.
    assert!(cold["searchable_ms"].as_u64().is_some(), "{cold}");
    assert_eq!(cold["lexical_files"], 0);

    let doctor: Value =
        serde_json::from_slice(&run(&["doctor", "--json", "--root", root], &env).stdout).unwrap();
    assert_eq!(
        (
            doctor["index"]["state"].clone(),
            doctor["index"]["files"].clone()
        ),
        (Value::from("ready"), Value::from(2))
    );

    let warm: Value =
        serde_json::from_slice(&run(&["index", "--json", "--root", root], &env).stdout).unwrap();
    assert_eq!(
        (warm["incremental"].clone(), warm["parsed"].clone()),
        (Value::Bool(true), Value::from(0))
    );

    let human = text(&run(&["index", "--root", root], &env).stdout);
    assert!(
        human.starts_with("indexed 2 source files (0 parsed), 4 symbols"),
        "{human}"
    );
    assert!(
        human.contains("skipped 1 (generated folder): node_modules"),
        "{human}"
    );
}

#[test]
fn symbols_prints_the_documented_json_with_one_based_positions() {
    let (dir, env) = indexed_workspace("cli-symbols");
    let root = dir.path().join("ws");
    let out = run(
        &[
            "symbols",
            "parse",
            "--json",
            "--root",
            root.to_str().unwrap(),
        ],
        &env,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let hits: Value = serde_json::from_slice(&out.stdout).unwrap();
    let hits = hits.as_array().unwrap();
    let request = hits.iter().find(|h| h["name"] == "parse_request").unwrap();
    assert_eq!(
        request,
        &serde_json::json!({"name": "parse_request", "kind": "function", "path": "src/lib.rs", "line": 2, "column": 8, "container": null})
    );
    assert!(hits.iter().any(|h| h["name"] == "parse_args"));
    assert!(
        !hits.iter().any(|h| h["name"] == "parse_dependency"),
        "node_modules is not indexed"
    );

    let methods = run(
        &[
            "symbols",
            "start",
            "--kind",
            "method",
            "--json",
            "--root",
            root.to_str().unwrap(),
        ],
        &env,
    );
    let methods: Value = serde_json::from_slice(&methods.stdout).unwrap();
    assert_eq!(methods[0]["container"], "HttpServer");

    let human = text(
        &run(
            &["symbols", "HttpServr", "--root", root.to_str().unwrap()],
            &env,
        )
        .stdout,
    );
    assert!(
        human.starts_with("src/lib.rs:3:12  class HttpServer"),
        "{human}"
    );

    let out = run(
        &["symbols", "...", "--json", "--root", root.to_str().unwrap()],
        &env,
    );
    assert!(out.status.success());
    assert_eq!(text(&out.stdout).trim(), "[]");
    assert!(text(&out.stderr).contains("no identifier"));
}

#[test]
fn grep_prints_json_lines_filters_by_glob_and_refuses_a_bad_pattern() {
    let (dir, env) = indexed_workspace("cli-grep");
    let root = dir.path().join("ws");
    let root = root.to_str().unwrap();
    let out = run(&["grep", "parse_\\w+", "--json", "--root", root], &env);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let lines: Vec<Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3);
    assert_eq!(
        lines[0],
        serde_json::json!({"path": "src/lib.rs", "line": 2, "text": "pub fn parse_request() {}"})
    );

    let only_py = run(
        &["grep", "parse", "--glob", "*.py", "--json", "--root", root],
        &env,
    );
    assert_eq!(text(&only_py.stdout).lines().count(), 1);
    let limited = run(&["grep", "parse", "--limit", "1", "--root", root], &env);
    assert_eq!(text(&limited.stdout).lines().count(), 1);
    assert!(text(&limited.stderr).contains("--limit"));

    let bad = run(&["grep", "(unclosed", "--root", root], &env);
    assert_eq!(bad.status.code(), Some(2));
    assert!(text(&bad.stderr).contains("invalid regular expression"));
}

#[test]
fn context_prints_ranked_snippets_within_the_budget() {
    let (dir, env) = indexed_workspace("cli-context");
    let root = dir.path().join("ws");
    let out = run(
        &[
            "context",
            "Why does HttpServer start twice?",
            "--budget",
            "500",
            "--json",
            "--root",
            root.to_str().unwrap(),
        ],
        &env,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let context: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(context["query"], "Why does HttpServer start twice?");
    assert_eq!(context["budget"], 500);
    assert!(context["tokens"].as_u64().unwrap() <= 500);
    let first = &context["snippets"][0];
    let keys: Vec<&str> = first
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        ["end_line", "kind", "path", "score", "start_line", "text"]
    );
    assert_eq!(
        (first["path"].clone(), first["kind"].clone()),
        (Value::from("src/lib.rs"), Value::from("definition"))
    );
    // Both names the question mentions are shown in full, before any map.
    let texts: Vec<&str> = context["snippets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["text"].as_str().unwrap())
        .collect();
    assert!(
        texts[..2]
            .iter()
            .any(|t| t.contains("pub struct HttpServer;")),
        "{texts:?}"
    );
    assert!(
        texts[..2].iter().any(|t| t.contains("pub fn start(&self)")),
        "{texts:?}"
    );

    let human = text(
        &run(
            &["context", "parse_request", "--root", root.to_str().unwrap()],
            &env,
        )
        .stdout,
    );
    assert!(
        human.starts_with("── src/lib.rs:1-2 (definition"),
        "{human}"
    );
    assert!(human.contains("    1  /// Parses."), "{human}");
}

/// A reader that goes away (`wright grep … | head -1`) ends wright quietly, exit 0, as a
/// pipeline expects: no "Broken pipe" complaint.
#[test]
fn a_closed_pipe_ends_the_output_quietly() {
    use std::io::Read;
    let dir = TempDir::new("cli-pipe");
    // Far more than a pipe holds, so a write fails once the reader has gone.
    dir.write("many.txt", &"needle in a line\n".repeat(50_000));
    let home = dir.path().join("home");
    let mut child = Command::new(wright_bin())
        .args(["--root", dir.path().to_str().unwrap(), "grep", "needle"])
        .env_clear()
        .env("HOME", &home)
        .env("XDG_CACHE_HOME", home.join("cache"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("running wright");
    let mut first = [0u8; 16];
    child.stdout.take().unwrap().read_exact(&mut first).unwrap();
    // The read end is closed here, with most of the output unwritten.
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{:?}: {}",
        out.status,
        text(&out.stderr)
    );
    assert!(
        !text(&out.stderr).contains("Broken pipe"),
        "{}",
        text(&out.stderr)
    );
}
