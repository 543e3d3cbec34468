//! The script of `cargo xtask bench chat`: a task, then follow-ups whose answers start with a
//! marker, so an editor can stamp the moment the text reaches it against the moment the
//! provider wrote the first byte of that answer. The editors' runs (a Neovim and a VS Code
//! one, ignored tests driven by the bench) and the bench's own plain LSP client share it.

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::json;

use crate::provider::{Dialect, Reply, ScriptedProvider, Turn};

/// How many follow-ups a run sends (the bench sets it; 10 otherwise).
pub const TURNS_VAR: &str = "WRIGHT_BENCH_TURNS";
/// Where an editor's run writes its latencies (`{"latenciesMs": [...]}`).
pub const OUT_VAR: &str = "WRIGHT_BENCH_OUT";

pub fn turns() -> usize {
    std::env::var(TURNS_VAR)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(10)
}

/// What follow-up `k` (from 1) is told, and the marker its answer starts with.
pub fn follow_up(k: usize) -> String {
    format!("follow-up {k}")
}

pub fn marker(k: usize) -> String {
    format!("MARK-{k}")
}

/// The first turn's answer, then each follow-up's: streamed in three pieces, back to back (a
/// pause between them would count against the client: the stream's first event carries only
/// the role, the marker comes in the second).
pub fn replies(turns: usize) -> Vec<Reply> {
    let mut replies = vec![Reply::stream(
        Dialect::OpenAi,
        &Turn::text(&["`add` returns the sum."]),
    )];
    for k in 1..=turns {
        let first = format!("{} ", marker(k));
        replies.push(Reply::stream(
            Dialect::OpenAi,
            &Turn::text(&[&first, "the answer ", "goes on."]),
        ));
    }
    replies
}

/// Milliseconds since the epoch (the clock editors can read too).
pub fn epoch_ms(time: SystemTime) -> f64 {
    time.duration_since(UNIX_EPOCH)
        .expect("the clock is past 1970")
        .as_secs_f64()
        * 1000.0
}

/// Follow-up `k`'s latency: when the editor saw its marker (`seen`, epoch ms by `k`) minus
/// when the provider began the answer (reply `k`; reply 0 is the first turn's).
pub fn latencies(provider: &ScriptedProvider, seen: &BTreeMap<usize, f64>) -> Vec<f64> {
    let began = provider.first_bytes();
    seen.iter()
        .map(|(&k, &at)| at - epoch_ms(began[k]))
        .collect()
}

/// Writes an editor run's latencies where the bench said, if it did.
pub fn write(latencies: &[f64]) {
    if let Some(path) = std::env::var_os(OUT_VAR) {
        std::fs::write(&path, json!({"latenciesMs": latencies}).to_string())
            .expect("writing the bench's output");
    }
}
