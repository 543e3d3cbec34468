//! What the server itself writes, through the real binary: `wright apply` and `wright exec`
//! on a repository that ships links at the old temporary names, links out of the workspace
//! and `.git`; a planted `wright exec --undo` record; no shared fallback folder without
//! `HOME`; and the modes of the journals, artifacts, undo record and index (0600 files in
//! 0700 folders, under the most permissive umask).

use std::os::unix::fs::{PermissionsExt, symlink};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};
use wright_tests::TempDir;
use wright_tests::provider::{Dialect, Reply, ScriptedProvider, Turn};

const OUTSIDE_TEXT: &str = "export SECRET_OUTSIDE_TEXT=1\n";

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `<dir>/ws` with `src/lib.rs` and `.git/config`, and `<dir>/outside/bashrc` beside it.
fn setup(name: &str) -> TempDir {
    let dir = TempDir::new(name);
    dir.write(
        "ws/src/lib.rs",
        "pub fn add(a: i32, b: i32) -> i32 {\n    a - b\n}\n",
    );
    dir.write("ws/.git/config", "[core]\n\tbare = false\n");
    dir.write("outside/bashrc", OUTSIDE_TEXT);
    dir
}

fn ws(dir: &TempDir) -> PathBuf {
    std::fs::canonicalize(dir.path().join("ws")).unwrap()
}

fn outside(dir: &TempDir) -> String {
    std::fs::read_to_string(dir.path().join("outside/bashrc")).unwrap()
}

fn apply(root: &Path, args: &[&str], input: &str) -> Output {
    wright_tests::wright_apply(Path::new(env!("CARGO_BIN_EXE_wright")), root, args, input)
}

fn apply_json(root: &Path, input: &str) -> Value {
    let out = apply(root, &["--json"], input);
    serde_json::from_str(text(&out.stdout).trim())
        .unwrap_or_else(|_| panic!("a JSON report: {}", text(&out.stderr)))
}

/// `wright exec ARGS --root <ws>` with private XDG folders, the provider as its model, and
/// umask 0, so that every mode wright's files get is its own choice.
fn exec(dir: &TempDir, provider: Option<&ScriptedProvider>, args: &[&str]) -> Output {
    let mut command = wright_tests::workspace_command(
        Path::new(env!("CARGO_BIN_EXE_wright")),
        dir,
        &[&["exec"], args].concat(),
        provider,
        "sk-writes-test-key",
    );
    // SAFETY: umask(2) is async-signal-safe and touches no memory.
    unsafe {
        command.pre_exec(|| {
            libc::umask(0);
            Ok(())
        });
    }
    command.output().expect("running wright exec")
}

fn tool_call(id: &str, name: &str, arguments: Value) -> Turn {
    Turn::default().tool_call(id, name, &arguments.to_string())
}

/// The tool results the model was sent in its last request, by call id.
fn tool_results(provider: &ScriptedProvider) -> Vec<(String, String)> {
    provider.requests().last().unwrap().tool_results_by_id()
}

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .unwrap_or_else(|err| panic!("{}: {err}", path.display()))
        .permissions()
        .mode()
        & 0o777
}

/// Every folder (0700 expected) and file (0600 expected) under `dir`, with its mode.
fn modes_under(dir: &Path, out: &mut Vec<(PathBuf, bool, u32)>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        let kind = entry.file_type().unwrap();
        out.push((path.clone(), kind.is_dir(), mode(&path)));
        if kind.is_dir() {
            modes_under(&path, out);
        }
    }
}

#[test]
fn apply_never_follows_links_planted_at_the_old_temporary_names() {
    let dir = setup("writes-planted");
    let root = ws(&dir);
    let victim = dir.path().join("outside/bashrc");
    // Earlier versions named the temporary `.NAME.wright-PID-STEP.tmp`: a repository with
    // links at those names for the pids the next processes get turned an edit into a write
    // of any file of the user's, and the edited file into a link to it.
    let own = std::process::id();
    for pid in own.saturating_sub(50)..own + 2000 {
        for step in ["0", "restore"] {
            symlink(
                &victim,
                root.join(format!("src/.lib.rs.wright-{pid}-{step}.tmp")),
            )
            .unwrap();
        }
    }
    let out = apply(
        &root,
        &[],
        "src/lib.rs\n<<<<<<< SEARCH\n    a - b\n=======\n    a + b\n>>>>>>> REPLACE\n",
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(outside(&dir), OUTSIDE_TEXT);
    let meta = std::fs::symlink_metadata(root.join("src/lib.rs")).unwrap();
    assert!(
        meta.file_type().is_file(),
        "the edited file stays a regular file"
    );
    assert!(
        std::fs::read_to_string(root.join("src/lib.rs"))
            .unwrap()
            .contains("a + b")
    );
}

#[test]
fn apply_refuses_links_out_of_the_workspace_with_kind_outside() {
    let dir = setup("writes-apply-links");
    let root = ws(&dir);
    symlink(dir.path().join("outside/bashrc"), root.join("notes.md")).unwrap();
    symlink(dir.path().join("outside"), root.join("linked")).unwrap();
    symlink("src/lib.rs", root.join("alias.rs")).unwrap();
    for input in [
        "notes.md\n<<<<<<< SEARCH\nexport\n=======\npwned\n>>>>>>> REPLACE\n",
        "*** Begin Patch\n*** Add File: notes.md\n+pwned\n*** End Patch\n",
        "*** Begin Patch\n*** Delete File: notes.md\n*** End Patch\n",
        "*** Begin Patch\n*** Add File: linked/new.txt\n+pwned\n*** End Patch\n",
    ] {
        let report = apply_json(&root, input);
        assert_eq!(report["applied"], false, "{report}");
        assert_eq!(report["error"]["kind"], "outside", "{input}: {report}");
        let message = report["error"]["message"].as_str().unwrap();
        assert!(message.contains("leads outside"), "{message}");
        assert!(
            message.contains("notes.md") || message.contains("linked"),
            "{message}"
        );
        assert!(!message.contains("SECRET_OUTSIDE_TEXT"), "{message}");
    }
    // The human report says it too, with exit code 1 (refused, nothing written).
    let out = apply(
        &root,
        &[],
        "*** Begin Patch\n*** Add File: notes.md\n+x\n*** End Patch\n",
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("leads outside"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(outside(&dir), OUTSIDE_TEXT);
    assert_eq!(
        std::fs::read_dir(dir.path().join("outside"))
            .unwrap()
            .count(),
        1
    );
    // A link inside writes its target and stays a link.
    let report = apply_json(
        &root,
        "alias.rs\n<<<<<<< SEARCH\n    a - b\n=======\n    a + b\n>>>>>>> REPLACE\n",
    );
    assert_eq!(report["applied"], true, "{report}");
    assert!(
        std::fs::symlink_metadata(root.join("alias.rs"))
            .unwrap()
            .is_symlink()
    );
    assert!(
        std::fs::read_to_string(root.join("src/lib.rs"))
            .unwrap()
            .contains("a + b")
    );
}

#[test]
fn exec_edits_refuse_links_out_and_git_and_keep_their_files_private() {
    let dir = setup("writes-exec");
    let root = ws(&dir);
    symlink(dir.path().join("outside/bashrc"), root.join("notes.md")).unwrap();
    symlink(dir.path().join("outside"), root.join("linked")).unwrap();
    let provider = ScriptedProvider::start();
    let turns = [
        tool_call(
            "w1",
            "write_file",
            json!({"path": "notes.md", "content": "pwned\n"}),
        ),
        tool_call(
            "e1",
            "edit",
            json!({"path": "notes.md", "old_string": "export", "new_string": "pwned"}),
        ),
        tool_call(
            "p1",
            "apply_patch",
            json!({"patch": "*** Begin Patch\n*** Delete File: notes.md\n*** End Patch\n"}),
        ),
        tool_call(
            "w2",
            "write_file",
            json!({"path": "linked/new.txt", "content": "x"}),
        ),
        tool_call(
            "g1",
            "edit",
            json!({"path": ".git/config", "old_string": "bare = false", "new_string": "fsmonitor = \"touch pwned\""}),
        ),
        tool_call(
            "ok",
            "edit",
            json!({"path": "src/lib.rs", "old_string": "a - b", "new_string": "a + b"}),
        ),
        Turn::text(&["Done."]),
    ];
    for turn in &turns {
        provider.push(Reply::stream(Dialect::OpenAi, turn));
    }
    let out = exec(&dir, Some(&provider), &["edit the notes", "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let results = tool_results(&provider);
    let result = |id: &str| {
        results
            .iter()
            .find(|(call, _)| call == id)
            .unwrap()
            .1
            .clone()
    };
    for id in ["w1", "e1", "p1", "w2"] {
        let content = result(id);
        assert!(
            content.contains("leads outside the workspace"),
            "{id}: {content}"
        );
        assert!(
            content.contains("notes.md") || content.contains("linked"),
            "{id}: {content}"
        );
    }
    assert!(result("g1").contains("is protected"), "{}", result("g1"));
    assert!(
        result("ok").contains("update src/lib.rs"),
        "{}",
        result("ok")
    );
    assert_eq!(outside(&dir), OUTSIDE_TEXT);
    assert_eq!(
        std::fs::read_dir(dir.path().join("outside"))
            .unwrap()
            .count(),
        1
    );
    assert_eq!(
        std::fs::read_to_string(root.join(".git/config")).unwrap(),
        "[core]\n\tbare = false\n"
    );
    for request in provider.requests() {
        assert!(
            !request.json().to_string().contains("SECRET_OUTSIDE_TEXT"),
            "the outside file's text reached the provider"
        );
    }

    // The journal, artifacts, undo record and index: 0600 files in 0700 folders, though the
    // process ran with umask 0.
    let mut modes = Vec::new();
    for base in ["data/wright", "cache/wright/index"] {
        let base = dir.path().join(base);
        assert!(base.is_dir(), "{}", base.display());
        modes.push((base.clone(), true, mode(&base)));
        modes_under(&base, &mut modes);
    }
    let names: Vec<String> = modes
        .iter()
        .map(|(path, _, _)| path.display().to_string())
        .collect();
    assert!(
        names.iter().any(|n| n.ends_with(".jsonl")),
        "a journal: {names:?}"
    );
    assert!(
        names.iter().any(|n| n.contains("/exec/")),
        "an undo record: {names:?}"
    );
    assert!(
        names.iter().any(|n| n.ends_with("/tantivy")),
        "the index: {names:?}"
    );
    for (path, is_dir, mode) in &modes {
        let tantivy_file = !is_dir && path.parent().is_some_and(|p| p.ends_with("tantivy"));
        if *is_dir {
            assert_eq!(*mode, 0o700, "{}", path.display());
        } else if !tantivy_file {
            assert_eq!(*mode, 0o600, "{}", path.display());
        }
    }

    // The undo record restores the one edit that landed.
    let undo = exec(&dir, None, &["--undo"]);
    assert!(undo.status.success(), "{}", text(&undo.stderr));
    assert!(
        std::fs::read_to_string(root.join("src/lib.rs"))
            .unwrap()
            .contains("a - b")
    );
}

/// Where `wright exec --undo` looks for the record of `root`.
fn record_path(dir: &TempDir, root: &Path) -> PathBuf {
    dir.path()
        .join("data/wright/exec")
        .join(format!("{}.json", wright::index::root_key(root)))
}

fn plant(dir: &TempDir, root: &Path, record: &Value) -> PathBuf {
    let path = record_path(dir, root);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::set_permissions(
        path.parent().unwrap(),
        std::fs::Permissions::from_mode(0o700),
    )
    .unwrap();
    let _ = std::fs::remove_file(&path);
    std::fs::write(&path, record.to_string()).unwrap();
    path
}

#[test]
fn a_planted_undo_record_is_refused_and_nothing_is_written() {
    let dir = setup("writes-undo");
    let root = ws(&dir);
    symlink(dir.path().join("outside"), root.join("linked")).unwrap();
    let record = |path: &str, before: Option<&str>, after: Option<&str>, root: &Path| {
        json!({
            "root": root,
            "session_id": "s-planted",
            "files": [{"path": path, "before": before, "after": after}],
        })
    };
    let outside_text = Some(OUTSIDE_TEXT);
    let cases = [
        (
            record("../outside/bashrc", Some("pwned\n"), outside_text, &root),
            "leaves the workspace",
        ),
        (
            record("/etc/hostname", Some("pwned\n"), None, &root),
            "absolute",
        ),
        (
            record("linked/bashrc", Some("pwned\n"), outside_text, &root),
            "leads outside",
        ),
        (
            record(
                ".git/config",
                Some("[core]\n\tfsmonitor = x\n"),
                Some("[core]\n\tbare = false\n"),
                &root,
            ),
            "is protected",
        ),
        (
            record("src/lib.rs", Some("pwned\n"), None, Path::new("/elsewhere")),
            "names the workspace /elsewhere",
        ),
        (
            json!({"root": root, "session_id": "s", "files": [
                {"path": "src/lib.rs", "before": "a", "after": null},
                {"path": "./src/lib.rs", "before": "b", "after": null},
            ]}),
            "not a path an edit records",
        ),
    ];
    for (planted, expected) in cases {
        plant(&dir, &root, &planted);
        let out = exec(&dir, None, &["--undo", "--json"]);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{planted}: {stderr}");
        assert!(
            stderr.contains(expected),
            "{expected:?} for {planted}: {stderr}"
        );
        let report: Value = serde_json::from_str(text(&out.stdout).trim()).unwrap();
        assert_eq!(report["undone"], false, "{report}");
        assert_eq!(outside(&dir), OUTSIDE_TEXT);
        assert_eq!(
            std::fs::read_to_string(root.join(".git/config")).unwrap(),
            "[core]\n\tbare = false\n"
        );
        assert!(
            std::fs::read_to_string(root.join("src/lib.rs"))
                .unwrap()
                .contains("a - b")
        );
    }
    // Not JSON, or a link in the record's place: refused as unreadable.
    let path = plant(&dir, &root, &json!({}));
    std::fs::write(&path, "{\"root\": ").unwrap();
    let out = exec(&dir, None, &["--undo"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("cannot be read"),
        "{}",
        text(&out.stderr)
    );
    std::fs::remove_file(&path).unwrap();
    let elsewhere = dir.write(
        "elsewhere.json",
        &record(
            "src/lib.rs",
            Some("pwned\n"),
            Some("pub fn add(a: i32, b: i32) -> i32 {\n    a - b\n}\n"),
            &root,
        )
        .to_string(),
    );
    symlink(&elsewhere, &path).unwrap();
    let out = exec(&dir, None, &["--undo"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("cannot be read"),
        "{}",
        text(&out.stderr)
    );
    assert!(
        std::fs::read_to_string(root.join("src/lib.rs"))
            .unwrap()
            .contains("a - b")
    );
}

#[test]
fn without_home_there_is_no_shared_fallback_folder() {
    let dir = setup("writes-no-home");
    let out = Command::new(env!("CARGO_BIN_EXE_wright"))
        .args(["exec", "--undo", "--root"])
        .arg(dir.path().join("ws"))
        .env_clear()
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(0));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("neither XDG_DATA_HOME nor HOME is set"),
        "{stderr}"
    );
    assert!(stderr.contains("set HOME"), "{stderr}");
}

/// The same attacks with wright run by an ordinary user (`nobody`, through setpriv, when the
/// test runs as root): the outside file is theirs to write, so only wright's own care stops it.
#[test]
fn a_non_root_user_gets_the_same_refusals() {
    const NOBODY: u32 = 65534;
    // SAFETY: getuid cannot fail.
    if unsafe { libc::getuid() } != 0 || !Path::new("/usr/bin/setpriv").exists() {
        eprintln!(
            "skipped: needs root (to become nobody) and setpriv; the other tests run as this user"
        );
        return;
    }
    let dir = setup("writes-nobody");
    let root = ws(&dir);
    let victim = dir.path().join("outside/bashrc");
    let own = std::process::id();
    for pid in own.saturating_sub(20)..own + 500 {
        symlink(
            &victim,
            root.join(format!("src/.lib.rs.wright-{pid}-0.tmp")),
        )
        .unwrap();
    }
    symlink(&victim, root.join("notes.md")).unwrap();
    let chown = Command::new("chown")
        .args(["-R", "-h", &format!("{NOBODY}:{NOBODY}")])
        .arg(dir.path())
        .status()
        .unwrap();
    assert!(chown.success());
    let as_nobody = |args: &[&str], input: &str| -> Output {
        let mut child = Command::new("/usr/bin/setpriv")
            .args([
                &format!("--reuid={NOBODY}"),
                &format!("--regid={NOBODY}"),
                "--clear-groups",
                env!("CARGO_BIN_EXE_wright"),
                "apply",
                "--root",
            ])
            .arg(&root)
            .args(args)
            .env_clear()
            .env("HOME", dir.path())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("running wright as nobody");
        use std::io::Write as _;
        let _ = child.stdin.take().unwrap().write_all(input.as_bytes());
        child.wait_with_output().unwrap()
    };
    let out = as_nobody(
        &[],
        "src/lib.rs\n<<<<<<< SEARCH\n    a - b\n=======\n    a + b\n>>>>>>> REPLACE\n",
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(outside(&dir), OUTSIDE_TEXT);
    assert!(
        std::fs::symlink_metadata(root.join("src/lib.rs"))
            .unwrap()
            .is_file()
    );
    let out = as_nobody(
        &["--json"],
        "*** Begin Patch\n*** Update File: notes.md\n@@\n-export SECRET_OUTSIDE_TEXT=1\n+pwned\n*** End Patch\n",
    );
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("a JSON report: {}", text(&out.stderr)));
    assert_eq!(report["error"]["kind"], "outside", "{report}");
    assert_eq!(outside(&dir), OUTSIDE_TEXT);
    assert!(
        std::fs::symlink_metadata(root.join("notes.md"))
            .unwrap()
            .is_symlink()
    );
}
