//! `cargo xtask bench chat`: how long a follow-up's answer takes from the model's first
//! streamed byte to the text in front of the user — in Neovim's chat buffer, in VS Code's chat
//! view — against the same `textDelta` event reaching a plain LSP client, in one run.
//!
//! All three run the script of `wright_tests::first_byte` against the scripted provider, which
//! stamps the wall time at which it writes each answer's first byte. The editors stamp the
//! moment the answer's marker lands (Neovim in the chat buffer's change callback, VS Code in a
//! MutationObserver of the view's page): both are ignored tests of `wright-tests`, which this
//! bench runs with `cargo test -- --ignored` and reads back. The plain client is this process,
//! reading `wright lsp`'s stdout.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::SystemTime;

use anyhow::{Context as _, bail};
use serde_json::{Value, json};
use wright_tests::first_byte;
use wright_tests::provider::ScriptedProvider;
use wright_tests::session::{agent_spawn, start_agent_server, versioned_edits};
use wright_tests::{Editor, TempDir};

const TURNS: usize = 20;

pub fn run(args: &[String]) -> anyhow::Result<String> {
    if let Some(arg) = args.first() {
        bail!("bench chat takes no arguments, found {arg:?}");
    }
    super::shared::build_wright_debug()?;
    let lsp = plain_client()?;
    let nvim = editor_run("nvim", "first_byte_of_each_follow_up_to_the_chat_buffer")?;
    let vscode = editor_run("vscode", "first_byte_of_each_follow_up_to_the_chat_view")?;
    let (lsp_p50, lsp_p90) = (percentile(&lsp, 50), percentile(&lsp, 90));
    let row = |name: &str, values: &[f64]| {
        let (p50, p90) = (percentile(values, 50), percentile(values, 90));
        format!(
            "| {name} | {p50:.2} ms | {p90:.2} ms | {lsp_p50:.2} ms | {:.1}× |",
            p50 / lsp_p50
        )
    };
    Ok(format!(
        "A task, then {TURNS} follow-ups in one session (each answer streamed in three pieces, \
         back to back, by the scripted provider on 127.0.0.1); the time from the provider's first \
         byte of each follow-up's answer to its first words reaching the client (wall clock on \
         both sides); debug build of `wright`; Neovim 0.12 headless, VS Code 1.139 (code-server) \
         in headless Chromium.\n\n\
         | client | p50 | p90 | plain LSP client, p50 | ratio |\n|---|---|---|---|---|\n\
         | plain LSP client (the peer: `textDelta` read from `wright lsp`'s stdout) | {lsp_p50:.2} ms | {lsp_p90:.2} ms | {lsp_p50:.2} ms | 1.0× |\n\
         {}\n{}\n\n\
         What the editors add is their own path: Neovim's LSP client and the chat buffer's \
         redraw; VS Code's extension host, the webview's message channel and code-server's \
         WebSocket to the browser.\n",
        row("Neovim chat buffer (wright.nvim)", &nvim),
        row("VS Code chat view", &vscode),
    ))
}

/// The follow-ups through `wright lsp`, read by this process as a plain LSP client.
fn plain_client() -> anyhow::Result<Vec<f64>> {
    let dir = TempDir::new("bench-chat");
    let example = crate::project_root().join("tests/fixtures/example-workspace/src/lib.rs");
    dir.write("ws/src/lib.rs", &std::fs::read_to_string(example)?);
    let provider = ScriptedProvider::start();
    for reply in first_byte::replies(TURNS) {
        provider.push(reply);
    }
    let mut editor = start_agent_server(&agent_spawn(&dir, &provider), versioned_edits());
    let run = editor.request("wright/agentRun", json!({"task": "explain add"}));
    let session = run["sessionId"]
        .as_str()
        .context("no session id")?
        .to_owned();
    finished(&mut editor, &session, 1);
    let mut seen = BTreeMap::new();
    for k in 1..=TURNS {
        editor.send_request(
            "wright/agentPrompt",
            json!({"sessionId": session, "message": first_byte::follow_up(k)}),
        );
        let marker = first_byte::marker(k);
        editor.expect("the follow-up's first words", |m| {
            m["method"] == "wright/agentEvent"
                && m["params"]["kind"] == "textDelta"
                && m["params"]["text"]
                    .as_str()
                    .is_some_and(|text| text.contains(&marker))
        });
        seen.insert(k, first_byte::epoch_ms(SystemTime::now()));
        finished(&mut editor, &session, k + 1);
    }
    editor.shutdown();
    Ok(first_byte::latencies(&provider, &seen))
}

/// Waits for turn `turn`'s `finished` event and drops what came before it.
fn finished(editor: &mut Editor, session: &str, turn: usize) {
    editor.expect("the turn's end", |m| {
        m["method"] == "wright/agentEvent"
            && m["params"]["sessionId"] == session
            && m["params"]["kind"] == "finished"
            && m["params"]["turn"] == turn
    });
    editor.discard(|_| true);
}

/// One editor's run: the ignored test `test` of `wright-tests`'s `binary`.
fn editor_run(binary: &str, test: &str) -> anyhow::Result<Vec<f64>> {
    let out = std::env::temp_dir().join(format!("wright-bench-chat-{binary}.json"));
    let _ = std::fs::remove_file(&out);
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args([
            "test",
            "--quiet",
            "-p",
            "wright-tests",
            "--test",
            binary,
            "--",
        ])
        .args(["--ignored", "--exact", test, "--nocapture"])
        .env(first_byte::TURNS_VAR, TURNS.to_string())
        .env(first_byte::OUT_VAR, &out)
        .current_dir(crate::project_root())
        .status()
        .context("running cargo test")?;
    if !status.success() {
        bail!("the {binary} run failed");
    }
    read_latencies(&out).with_context(|| {
        format!(
            "the {binary} run wrote no figures (is the editor installed? \
             `cargo xtask e2e {binary} --install`)"
        )
    })
}

fn read_latencies(path: &Path) -> anyhow::Result<Vec<f64>> {
    let value: Value = serde_json::from_str(&std::fs::read_to_string(path)?)?;
    let latencies: Vec<f64> = value["latenciesMs"]
        .as_array()
        .context("no latenciesMs")?
        .iter()
        .filter_map(Value::as_f64)
        .collect();
    if latencies.len() != TURNS {
        bail!("{} figures, not {TURNS}", latencies.len());
    }
    Ok(latencies)
}

fn percentile(values: &[f64], percent: usize) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted[(sorted.len() - 1) * percent / 100]
}
