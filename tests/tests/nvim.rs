//! wright.nvim in a real Neovim: each test starts the scripted provider, copies the example
//! workspace to a temp dir, and runs one Lua test of `editors/nvim/tests/` in a headless Neovim
//! (`nvim --headless -u NONE -i NONE -n -l FILE`) that loads the plugin, which starts the real
//! `wright lsp`. The Lua side checks what the editor shows; this side checks what the model
//! was told. One test, `tests/nvim/builtin_client.lua`, runs Neovim's own client without the
//! plugin (`vim.lsp.start`).
//!
//! Neovim comes from `cargo xtask e2e nvim --install` (`target/editors/nvim-venv/bin/nvim`) or
//! `$WRIGHT_NVIM`. Without it the tests say they are skipped, except under `CI`, where a missing
//! Neovim fails them.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::json;
use wright_tests::installed::repository;
use wright_tests::provider::{Dialect, Fault, Reply, ScriptedProvider, Turn};
use wright_tests::{TempDir, wright_bin};

/// How long one Lua test may take in all (its own waits are shorter).
const NVIM_TIMEOUT: Duration = Duration::from_secs(120);

/// One Neovim at a time: each runs a server too, and the machine has few cores.
static SERIAL: Mutex<()> = Mutex::new(());

/// The Neovim to test with, or `None` (after saying so) when it is not installed outside CI.
fn nvim() -> Option<PathBuf> {
    let path = std::env::var_os("WRIGHT_NVIM").map_or_else(
        || repository().join("target/editors/nvim-venv/bin/nvim"),
        PathBuf::from,
    );
    if path.is_file() {
        return Some(path);
    }
    if std::env::var_os("CI").is_some() {
        panic!(
            "no Neovim at {}: CI must run `cargo xtask e2e nvim --install` first",
            path.display()
        );
    }
    eprintln!(
        "skipped: no Neovim at {}; run `cargo xtask e2e nvim --install`",
        path.display()
    );
    None
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

/// What a Lua test left behind.
struct Run {
    workspace: TempDir,
    stdout: String,
}

/// Runs `editors/nvim/tests/<test>.lua` against `provider`; panics with Neovim's output when
/// the test fails or overruns. `None` when Neovim is not installed (outside CI).
fn run_lua(test: &str, provider: &ScriptedProvider) -> Option<Run> {
    let script = repository().join(format!("editors/nvim/tests/{test}.lua"));
    run_lua_script(&script, test, provider)
}

/// Runs the Lua test `script` (named `test`) against `provider`, as [`run_lua`] does.
fn run_lua_script(script: &Path, test: &str, provider: &ScriptedProvider) -> Option<Run> {
    let nvim = nvim()?;
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let workspace = TempDir::new(&format!("nvim-{test}"));
    copy_dir(
        &repository().join("tests/fixtures/example-workspace"),
        workspace.path(),
    );
    let home = TempDir::new(&format!("nvim-home-{test}"));
    let plugin = repository().join("editors/nvim");
    let mut command = Command::new(&nvim);
    command
        .args(["--headless", "-u", "NONE", "-i", "NONE", "-n", "-l"])
        .arg(script)
        .current_dir(workspace.path())
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home.path())
        .env("XDG_CONFIG_HOME", home.path().join("config"))
        .env("XDG_DATA_HOME", home.path().join("data"))
        .env("XDG_STATE_HOME", home.path().join("state"))
        .env("XDG_CACHE_HOME", home.path().join("cache"))
        .env("WRIGHT_LOG", "wright=debug")
        .env("WRIGHT_NVIM_PLUGIN", &plugin)
        .env("WRIGHT_BIN", wright_bin())
        .env("WRIGHT_TEST_WORKSPACE", workspace.path())
        .env("WRIGHT_MODEL", "openai/gpt-4.1")
        .env("OPENAI_BASE_URL", provider.openai_base_url())
        .env("OPENAI_API_KEY", "sk-nvim-test")
        // The measurement's length (see `first_byte_of_each_follow_up_to_the_chat_buffer`).
        .env(
            wright_tests::first_byte::TURNS_VAR,
            wright_tests::first_byte::turns().to_string(),
        )
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().expect("starting nvim");
    let mut stdout_pipe = child.stdout.take().expect("stdout");
    let mut stderr_pipe = child.stderr.take().expect("stderr");
    let stdout_reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout_pipe.read_to_string(&mut text);
        text
    });
    let stderr_reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr_pipe.read_to_string(&mut text);
        text
    });
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("waiting for nvim") {
            break Some(status);
        }
        if started.elapsed() > NVIM_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stdout = stdout_reader.join().unwrap_or_default();
    let stderr = stderr_reader.join().unwrap_or_default();
    match status {
        // Neovim prints its deprecation warnings straight to stderr.
        Some(status) if status.success() && stderr.contains("deprecated") => {
            panic!("{test}.lua passed but used an API this Neovim deprecates:\n{stderr}")
        }
        Some(status) if status.success() => {}
        Some(status) => {
            panic!("{test}.lua failed ({status})\n--- stdout\n{stdout}\n--- stderr\n{stderr}")
        }
        None => panic!(
            "{test}.lua did not finish within {NVIM_TIMEOUT:?}\n--- stdout\n{stdout}\n--- stderr\n{stderr}"
        ),
    }
    Some(Run { workspace, stdout })
}

fn edit_turn(id: &str, old: &str, new: &str) -> Turn {
    Turn::default().tool_call(
        id,
        "edit",
        &json!({"path": "src/lib.rs", "old_string": old, "new_string": new}).to_string(),
    )
}

/// The tool results the model saw in request `index` (0-based) of the provider.
fn tool_results(provider: &ScriptedProvider, index: usize) -> Vec<String> {
    provider.requests()[index].tool_results()
}

#[test]
fn an_agent_task_edits_the_buffer_unsaved_and_undo_restores_it() {
    let provider = ScriptedProvider::start();
    provider.push(Reply::stream(
        Dialect::OpenAi,
        &edit_turn("e1", "    a + b\n", "    b + a\n"),
    ));
    provider.push(Reply::stream(Dialect::OpenAi, &Turn::text(&["Done."])));
    let Some(run) = run_lua("edit_and_undo", &provider) else {
        return;
    };
    assert!(run.stdout.contains("ok"), "{}", run.stdout);
    let results = tool_results(&provider, 1);
    assert!(results[0].contains("update src/lib.rs"), "{results:?}");
    let body = provider.requests()[0].json();
    let task = body["messages"].to_string();
    assert!(task.contains("make add commutative"), "{task}");
    assert!(
        task.contains("src/lib.rs"),
        "the current file goes with the task: {task}"
    );
    assert!(
        std::fs::read_to_string(run.workspace.path().join("src/lib.rs"))
            .unwrap()
            .contains("a + b"),
        "nothing was saved"
    );
}

#[test]
fn an_edit_to_a_file_no_buffer_shows_lands_in_a_buffer_loaded_for_it() {
    let provider = ScriptedProvider::start();
    let patch = "*** Begin Patch\n*** Update File: Cargo.toml\n@@\n-version = \"0.1.0\"\n\
                 +version = \"0.2.0\"\n*** Add File: src/extra.rs\n+pub fn extra() {}\n\
                 *** End Patch\n";
    provider.push(Reply::stream(
        Dialect::OpenAi,
        &Turn::default().tool_call("p1", "apply_patch", &json!({"patch": patch}).to_string()),
    ));
    provider.push(Reply::stream(Dialect::OpenAi, &Turn::text(&["Done."])));
    let Some(run) = run_lua("unopened_file", &provider) else {
        return;
    };
    assert!(run.stdout.contains("ok"), "{}", run.stdout);
    let results = tool_results(&provider, 1);
    assert!(
        results[0].contains("update Cargo.toml") && results[0].contains("add src/extra.rs"),
        "the edit counted as applied: {results:?}"
    );
}

#[test]
fn typing_during_a_run_is_never_overwritten() {
    let provider = ScriptedProvider::start();
    provider.push(Reply::stream(
        Dialect::OpenAi,
        &edit_turn("e1", "    a + b\n", "    b + a\n"),
    ));
    // The retry comes a second later, after the keystroke's debounced didChange.
    provider.push(
        Reply::stream(
            Dialect::OpenAi,
            &edit_turn("e2", "    a + b\n", "    b + a\n"),
        )
        .header_delay(Duration::from_secs(1)),
    );
    provider.push(Reply::stream(Dialect::OpenAi, &Turn::text(&["Done."])));
    let Some(_run) = run_lua("typing_during_run", &provider) else {
        return;
    };
    let first = tool_results(&provider, 1);
    assert!(
        first[0].contains("changed since the edit was planned"),
        "the model is told the file changed: {first:?}"
    );
    let second = tool_results(&provider, 2);
    assert!(second[1].contains("update src/lib.rs"), "{second:?}");
}

#[test]
fn neovim_without_the_plugin_never_gets_an_edit_applied_to_text_it_was_not_computed_for() {
    let provider = ScriptedProvider::start();
    provider.push(Reply::stream(
        Dialect::OpenAi,
        &edit_turn("e1", "    a + b\n", "    b + a\n"),
    ));
    // The retry comes a second later, after the keystroke's debounced didChange.
    provider.push(
        Reply::stream(
            Dialect::OpenAi,
            &edit_turn("e2", "    a + b\n", "    b + a\n"),
        )
        .header_delay(Duration::from_secs(1)),
    );
    provider.push(Reply::stream(Dialect::OpenAi, &Turn::text(&["Done."])));
    let script = repository().join("tests/nvim/builtin_client.lua");
    let Some(run) = run_lua_script(&script, "builtin_client", &provider) else {
        return;
    };
    assert!(run.stdout.contains("ok"), "{}", run.stdout);
    let first = tool_results(&provider, 1);
    assert!(
        first[0].contains("changed since the edit was planned"),
        "the model is told the edit did not apply: {first:?}"
    );
    let second = tool_results(&provider, 2);
    assert!(second[1].contains("update src/lib.rs"), "{second:?}");
}

#[test]
fn approvals_are_asked_through_vim_ui_select() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let provider = ScriptedProvider::start();
    provider.push(Reply::stream(
        Dialect::OpenAi,
        &Turn::default().tool_call(
            "c1",
            "run_command",
            &json!({"command": format!("bash -c 'echo hi > /dev/tcp/127.0.0.1/{port}'")})
                .to_string(),
        ),
    ));
    provider.push(Reply::stream(Dialect::OpenAi, &Turn::text(&["Done."])));
    let Some(_run) = run_lua("approval", &provider) else {
        return;
    };
    let results = tool_results(&provider, 1);
    assert!(results[0].contains("as the user allowed"), "{results:?}");
    assert!(results[0].contains("exit code 0"), "{results:?}");
    listener.set_nonblocking(true).unwrap();
    assert!(
        listener.accept().is_ok(),
        "the allowed command reached the host listener"
    );
}

#[test]
fn checkhealth_reports_binary_version_sandbox_and_model() {
    let provider = ScriptedProvider::start();
    let Some(_run) = run_lua("checkhealth", &provider) else {
        return;
    };
    assert!(provider.requests().is_empty(), "no model call");
}

#[test]
fn review_mode_holds_the_edit_until_accepted() {
    let provider = ScriptedProvider::start();
    provider.push(Reply::stream(
        Dialect::OpenAi,
        &edit_turn("e1", "    a + b\n", "    b + a\n"),
    ));
    provider.push(Reply::stream(Dialect::OpenAi, &Turn::text(&["Done."])));
    let Some(_run) = run_lua("review", &provider) else {
        return;
    };
    assert_eq!(provider.requests().len(), 2);
}

#[test]
fn a_selection_goes_with_the_task_characterwise_or_linewise() {
    let provider = ScriptedProvider::start();
    provider.push(Reply::stream(Dialect::OpenAi, &Turn::text(&["It adds."])));
    provider.push(Reply::stream(Dialect::OpenAi, &Turn::text(&["It adds."])));
    let Some(_run) = run_lua("selection", &provider) else {
        return;
    };
    let task = |index: usize| {
        provider.requests()[index].json()["messages"][1]["content"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    let first = task(0);
    assert!(
        first.starts_with("Task: explain the signature\n"),
        "{first}"
    );
    assert!(
        first.contains("The user selected lines 4-4:\n```\nadd(a: i64, b: i64)\n```"),
        "exactly the selected characters: {first}"
    );
    let second = task(1);
    assert!(
        second.contains(
            "The user selected lines 3-5:\n```\n/// Adds two numbers.\npub fn add(a: i64, b: i64) -> i64 {\n    a + b\n```"
        ),
        "whole lines: {second}"
    );
}

#[test]
fn the_strict_apply_edit_handler_checks_every_version_and_applies_all_or_nothing() {
    let provider = ScriptedProvider::start();
    let Some(_run) = run_lua("strict_apply", &provider) else {
        return;
    };
    assert!(provider.requests().is_empty(), "no model call");
}

#[test]
fn a_failed_session_is_listed_and_resumed_from_the_sessions_picker() {
    let provider = ScriptedProvider::start();
    provider.push(Reply::fault(Dialect::OpenAi, Fault::Unauthorized));
    provider.push(Reply::stream(Dialect::OpenAi, &Turn::text(&["Resumed."])));
    let Some(_run) = run_lua("sessions_resume", &provider) else {
        return;
    };
    let resumed = provider.requests()[1].json()["messages"].to_string();
    assert!(
        resumed.contains("fix add"),
        "the resume carries the task: {resumed}"
    );
}

#[test]
fn cancel_stops_a_running_session() {
    let provider = ScriptedProvider::start();
    provider.push(
        Reply::stream(
            Dialect::OpenAi,
            &Turn::text(&["Thinking", " about", " it", " at", " length"]),
        )
        .stall_after(2),
    );
    let Some(_run) = run_lua("cancel", &provider) else {
        return;
    };
    assert_eq!(provider.requests().len(), 1);
}

#[test]
fn the_chat_buffer_shows_the_conversation_and_sends_follow_ups() {
    let provider = ScriptedProvider::start();
    provider.push(Reply::stream(
        Dialect::OpenAi,
        &Turn::text(&["The plan: make add ", "wrap."]),
    ));
    provider.push(Reply::stream(
        Dialect::OpenAi,
        &edit_turn("e1", "    a + b\n", "    a.wrapping_add(b)\n"),
    ));
    provider.push(Reply::stream(Dialect::OpenAi, &Turn::text(&["Done."])));
    provider.push(Reply::stream(Dialect::OpenAi, &Turn::text(&["It wraps."])));
    let Some(_run) = run_lua("chat", &provider) else {
        return;
    };
    let requests = provider.requests();
    assert_eq!(requests.len(), 4);
    assert!(
        !requests[0].tool_names().contains(&"edit".to_owned()),
        "the plan turn"
    );
    assert!(
        requests[1].tool_names().contains(&"edit".to_owned()),
        "code mode again"
    );
    let second = requests[1].body_text();
    assert!(second.contains("The plan: make add wrap."), "the history");
    assert!(second.contains("now make add wrap around"), "the follow-up");
    assert!(requests[3].body_text().contains("explain it"));
}

#[test]
fn review_per_hunk_accepts_one_in_diff_mode_and_the_model_hears_of_the_other() {
    let provider = ScriptedProvider::start();
    provider.push(Reply::stream(
        Dialect::OpenAi,
        &Turn::default().tool_call(
            "m1",
            "multi_edit",
            &json!({"path": "src/lib.rs", "edits": [
                {"old_string": "    a + b\n", "new_string": "    a.wrapping_add(b)\n"},
                {"old_string": "    if b == 0 { None } else { Some(a / b) }\n", "new_string": "    a.checked_div(b)\n"}
            ]})
            .to_string(),
        ),
    ));
    provider.push(Reply::stream(
        Dialect::OpenAi,
        &Turn::text(&["Proposed both."]),
    ));
    provider.push(Reply::stream(
        Dialect::OpenAi,
        &Turn::text(&["Understood."]),
    ));
    let Some(_run) = run_lua("review_hunks", &provider) else {
        return;
    };
    let requests = provider.requests();
    assert_eq!(requests.len(), 3);
    let last = requests[2].body_text();
    assert!(
        last.contains("the user rejected these proposed changes") && last.contains("checked_div"),
        "{last}"
    );
}

/// `cargo xtask bench chat` runs this: follow-ups sent from the chat buffer, each answer's
/// marker stamped when the buffer first holds it (no timing is judged here).
#[test]
#[ignore = "a measurement: `cargo xtask bench chat` runs it"]
fn first_byte_of_each_follow_up_to_the_chat_buffer() {
    use wright_tests::first_byte;
    let provider = ScriptedProvider::start();
    let turns = first_byte::turns();
    for reply in first_byte::replies(turns) {
        provider.push(reply);
    }
    let Some(run) = run_lua("first_byte", &provider) else {
        return;
    };
    let stamps = run
        .stdout
        .lines()
        .find_map(|line| line.strip_prefix("STAMPS "))
        .expect("the script prints its stamps");
    let stamps: std::collections::BTreeMap<String, f64> =
        serde_json::from_str(stamps).expect("stamps are JSON");
    let seen = stamps
        .into_iter()
        .map(|(k, at)| (k.parse().expect("a turn number"), at))
        .collect();
    assert_eq!(provider.requests().len(), turns + 1);
    first_byte::write(&first_byte::latencies(&provider, &seen));
}
