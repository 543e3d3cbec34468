//! The `wright` command line: `--version`, `doctor`, exit codes.
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
