//! `wright apply` through the real binary: the Codex peer suite, the `--json` report, exit
//! codes, dry runs, and all-or-nothing writes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;
use wright_tests::TempDir;

fn apply(root: &Path, args: &[&str], input: &str) -> Output {
    wright_tests::wright_apply(Path::new(env!("CARGO_BIN_EXE_wright")), root, args, input)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Every file (with its bytes) and directory (`None`) under `dir`, by relative path.
fn tree(dir: &Path) -> BTreeMap<PathBuf, Option<Vec<u8>>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, Option<Vec<u8>>>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let relative = path.strip_prefix(root).unwrap().to_owned();
            if path.is_dir() {
                out.insert(relative, None);
                walk(root, &path, out);
            } else {
                out.insert(relative, Some(std::fs::read(&path).unwrap()));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

fn copy_tree(from: &Path, to: &Path) {
    for (relative, contents) in tree(from) {
        match contents {
            None => std::fs::create_dir_all(to.join(relative)).unwrap(),
            Some(bytes) => {
                std::fs::create_dir_all(to.join(&relative).parent().unwrap()).unwrap();
                std::fs::write(to.join(relative), bytes).unwrap();
            }
        }
    }
}

#[test]
fn every_codex_scenario_passes_with_015_atomic() {
    let suite =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/codex-apply-patch/scenarios");
    let mut scenarios: Vec<PathBuf> = std::fs::read_dir(&suite)
        .expect("the vendored Codex scenarios")
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    scenarios.sort();
    assert!(scenarios.len() >= 23, "{scenarios:?}");
    let mut failures = Vec::new();
    for scenario in &scenarios {
        let name = scenario.file_name().unwrap().to_string_lossy().into_owned();
        let dir = TempDir::new("codex");
        copy_tree(&scenario.join("input"), dir.path());
        let input = tree(dir.path());
        let patch = std::fs::read_to_string(scenario.join("patch.txt")).unwrap();
        let out = apply(dir.path(), &["--format", "patch"], &patch);
        // wright's one deliberate difference: all files or none, so 015 leaves the input.
        let atomic = name.starts_with("015_");
        let expected = if atomic {
            input.clone()
        } else {
            tree(&scenario.join("expected"))
        };
        let expected_code = if expected == input { 1 } else { 0 };
        let after = tree(dir.path());
        if after != expected || out.status.code() != Some(expected_code) {
            failures.push(format!(
                "{name}: exit {:?} (expected {expected_code}), tree {}\nstderr: {}",
                out.status.code(),
                if after == expected {
                    "as expected"
                } else {
                    "differs"
                },
                text(&out.stderr)
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn json_report_of_an_applied_edit_and_of_each_refusal() {
    let dir = TempDir::new("applyjson");
    dir.write("a.txt", "one\ntwo\none\n");
    dir.write("b.txt", "keep\n");
    let out = apply(
        dir.path(),
        &["--json"],
        "*** Begin Patch\n*** Update File: a.txt\n@@\n-two\n+2\n*** Add File: c/d.txt\n+new\n\
         *** Update File: b.txt\n*** Move to: e.txt\n@@\n-keep\n+kept\n*** End Patch\n",
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["applied"], true);
    assert_eq!(report["error"], Value::Null);
    assert_eq!(
        report["files"],
        serde_json::json!([
            {"path": "a.txt", "action": "update"},
            {"path": "c/d.txt", "action": "add"},
            {"path": "b.txt", "action": "move", "to": "e.txt"},
        ])
    );
    assert_eq!(
        report["hunks"][0],
        serde_json::json!({"path": "a.txt", "line": 2, "tier": 1})
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("a.txt")).unwrap(),
        "one\n2\none\n"
    );
    assert!(!dir.path().join("b.txt").exists());

    dir.write("n.txt", "alpha\nbeta\n");
    let before = tree(dir.path());
    let out = apply(
        dir.path(),
        &["--json", "--format", "search-replace"],
        "a.txt\n<<<<<<< SEARCH\none\n=======\n1\n>>>>>>> REPLACE\n",
    );
    assert_eq!(out.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["applied"], false);
    assert_eq!(report["error"]["kind"], "ambiguous");
    assert_eq!(report["error"]["path"], "a.txt");
    assert_eq!(report["error"]["candidates"], serde_json::json!([1, 3]));
    let message = report["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("at lines 1, 3") && message.contains("tier 1 (exact)"),
        "{message}"
    );

    let out = apply(
        dir.path(),
        &["--json"],
        r#"{"path": "n.txt", "old_string": "betta", "new_string": "x"}"#,
    );
    assert_eq!(out.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["error"]["kind"], "not_found");
    let message = report["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("closest text starts at line 2") && message.contains("- betta\n+ beta"),
        "{message}"
    );

    let out = apply(
        dir.path(),
        &["--json"],
        "*** Begin Patch\n*** Update File: a.txt\n",
    );
    assert_eq!(out.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["error"]["kind"], "parse");
    assert!(
        report["error"]["message"]
            .as_str()
            .unwrap()
            .contains("line 2"),
        "{report}"
    );
    assert_eq!(tree(dir.path()), before);
}

#[test]
fn a_refused_hunk_in_one_file_leaves_every_file_untouched() {
    let dir = TempDir::new("applyatomic");
    dir.write("a.txt", "alpha\n");
    dir.write("b.txt", "beta\n");
    let before = tree(dir.path());
    let out = apply(
        dir.path(),
        &[],
        "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-alpha\n+ALPHA\n--- a/b.txt\n+++ b/b.txt\n@@ -1 +1 @@\n-gamma\n+GAMMA\n",
    );
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("nothing written") && stderr.contains("b.txt"),
        "{stderr}"
    );
    assert_eq!(tree(dir.path()), before);
}

#[test]
fn dry_run_reports_without_writing_and_io_errors_exit_2() {
    let dir = TempDir::new("applydry");
    dir.write("a.py", "def f():\n    return 1\n");
    let before = tree(dir.path());
    let edit = "a.py\n<<<<<<< SEARCH\n    return 1\n=======\n    return (\n>>>>>>> REPLACE\n";
    let out = apply(dir.path(), &["--dry-run"], edit);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "would update a.py\n");
    assert!(
        text(&out.stderr).contains("syntax error: a.py:"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(tree(dir.path()), before);

    let out = apply(dir.path(), &["--format", "diff"], edit);
    assert_eq!(out.status.code(), Some(2));
    let missing = dir.path().join("nope");
    let out = apply(&missing, &[], edit);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn crlf_bom_and_missing_final_newline_survive_an_edit() {
    let dir = TempDir::new("applyendings");
    std::fs::write(dir.path().join("w.txt"), "\u{feff}one\r\ntwo\r\nthree").unwrap();
    let out = apply(
        dir.path(),
        &[],
        "```diff\n--- a/w.txt\n+++ b/w.txt\n@@ -2,2 +2,2 @@\n two\n-three\n+THREE\n\\ No newline at end of file\n```\n",
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        std::fs::read(dir.path().join("w.txt")).unwrap(),
        "\u{feff}one\r\ntwo\r\nTHREE".as_bytes()
    );
}

#[test]
fn the_syntax_gate_refuses_when_the_workspace_configuration_says_so() {
    let dir = TempDir::new("applygate");
    dir.write("a.rs", "fn a() {}\n");
    let edit = "a.rs\n<<<<<<< SEARCH\nfn a() {}\n=======\nfn a( {}\n>>>>>>> REPLACE\n";
    let out = apply(dir.path(), &["--dry-run", "--json"], edit);
    assert_eq!(out.status.code(), Some(0));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["syntax_errors"][0]["path"], "a.rs", "{report}");
    assert_eq!(report["syntax_errors"][0]["line"], 1, "{report}");

    dir.write(".wright/config.toml", "[edit]\nsyntax_gate = \"refuse\"\n");
    let out = apply(dir.path(), &["--json"], edit);
    assert_eq!(out.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["error"]["kind"], "syntax", "{report}");
    assert!(
        report["error"]["message"]
            .as_str()
            .unwrap()
            .contains("a.rs:1:"),
        "{report}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("a.rs")).unwrap(),
        "fn a() {}\n"
    );
}

#[test]
fn a_loosely_located_hunk_says_which_tier_placed_it() {
    let dir = TempDir::new("applytier");
    dir.write("a.py", "def f():\n    return 1\n");
    let edit = "a.py\n<<<<<<< SEARCH\nreturn 1\n=======\nreturn 2\n>>>>>>> REPLACE\n";
    let out = apply(dir.path(), &[], edit);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "update a.py\n  a.py:2: located by tier 3 (ignoring indentation)\n"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("a.py")).unwrap(),
        "def f():\n    return 2\n"
    );
}

#[test]
fn udiff_line_numbers_never_choose_between_matches() {
    let dir = TempDir::new("applyhint");
    dir.write("a.txt", "x = 1\ny\nx = 1\n");
    let out = apply(
        dir.path(),
        &[],
        "--- a/a.txt\n+++ b/a.txt\n@@ -3,1 +3,1 @@\n-x = 1\n+x = 2\n",
    );
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("at lines 1, 3 (its header says line 3; line numbers never choose)"),
        "{stderr}"
    );
}
