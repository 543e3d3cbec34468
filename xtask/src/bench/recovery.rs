//! `cargo xtask bench recovery [--trials N]`: how long the way back from a kill -9 takes.
//!
//! The crash scenario of `wright_tests::recovery`: a scripted session (list, edit on disk,
//! command, write, read) on a 41-file workspace; the server (debug build) is killed with
//! SIGKILL after a seeded random number of the session's events, then restarted. Timed from
//! the restart: the first answered request (`wright/status`), the index answering
//! `workspace/symbol`, the `wright/agentRun` that resumes the session from its journal, and
//! the resumed session's end. Each trial also checks what the recovery test checks (whole
//! files, an index and a journal that parse). The peer is a clean start of the same
//! workspace in the same invocation: to the first answer, to the index (built from scratch),
//! and to a new session's `agentRun` answer.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use wright_tests::recovery::{Rng, Scenario};
use wright_tests::session::{finished, run as start_session};

const SEED: u64 = 0x5EED_0009;

#[derive(Default)]
struct Times {
    first_answer: Vec<Duration>,
    index_ready: Vec<Duration>,
    session: Vec<Duration>,
}

pub fn run(args: &[String]) -> anyhow::Result<String> {
    let mut trials = 5;
    match args {
        [] => {}
        [flag, n] if flag == "--trials" => trials = n.parse().context("--trials N")?,
        other => bail!("bench recovery takes [--trials N], found {other:?}"),
    }
    super::shared::build_wright_debug()?;
    let mut clean = Times::default();
    let mut recovered = Times::default();
    let mut finished_after = Vec::new();
    let mut rng = Rng::new(SEED);
    for trial in 0..trials {
        eprintln!("bench recovery: trial {trial}");
        // The peer: a clean start.
        let scenario = Scenario::new("bench-recovery-clean");
        let start = Instant::now();
        let mut editor = scenario.start();
        editor.status();
        clean.first_answer.push(start.elapsed());
        editor.symbols_until("alpha", |symbols| !symbols.is_empty());
        clean.index_ready.push(start.elapsed());
        let session = start_session(&mut editor, "edit, run and write, then stop");
        clean.session.push(start.elapsed());
        finished(&mut editor, &session);
        editor.shutdown();

        // A crash mid-session and the way back.
        let scenario = Scenario::new("bench-recovery");
        let mut editor = scenario.start();
        let session = start_session(&mut editor, "edit, run and write, then stop");
        let events = 1 + rng.below(20);
        let pid = editor.pid();
        let ended = scenario.kill_after_events(editor, &session, events);
        scenario.check_disk(Some(pid));
        let (times, editor) = scenario.restart_and_resume(&session);
        editor.shutdown();
        recovered.first_answer.push(times.first_answer);
        recovered.index_ready.push(times.index_ready);
        if let (Some(resumed), Some(done)) = (times.resumed, times.finished) {
            recovered.session.push(resumed);
            finished_after.push(done);
        } else {
            eprintln!("bench recovery: trial {trial} killed after the session ended ({ended})");
        }
    }
    Ok(report(trials, &clean, &recovered, &finished_after))
}

fn median(samples: &[Duration]) -> Option<Duration> {
    let mut sorted = samples.to_vec();
    sorted.sort();
    sorted.get(sorted.len().saturating_sub(1) / 2).copied()
}

fn cell(samples: &[Duration]) -> String {
    match (median(samples), samples.iter().max()) {
        (Some(median), Some(max)) => format!(
            "{:.0} ms (max {:.0})",
            median.as_secs_f64() * 1000.0,
            max.as_secs_f64() * 1000.0
        ),
        _ => "–".to_owned(),
    }
}

fn ratio(recovered: &[Duration], clean: &[Duration]) -> String {
    match (median(recovered), median(clean)) {
        (Some(r), Some(c)) if !c.is_zero() => format!("{:.2}×", r.as_secs_f64() / c.as_secs_f64()),
        _ => "–".to_owned(),
    }
}

fn report(trials: usize, clean: &Times, recovered: &Times, finished_after: &[Duration]) -> String {
    let mut out = format!(
        "{trials} trials, seed {SEED:#x}: a scripted session on a 41-file workspace, the \
         server (debug build) killed with SIGKILL after a random number of the session's \
         events, then restarted; times from the restart (median, max). Peer: a clean start \
         of the same workspace in the same run (its index built from scratch; its session a \
         new one).\n\n\
         | from the start to | after kill -9 | clean start | ratio |\n|---|---:|---:|---:|\n"
    );
    let rows = [
        (
            "first answered request",
            &recovered.first_answer,
            &clean.first_answer,
        ),
        (
            "index answering workspace/symbol",
            &recovered.index_ready,
            &clean.index_ready,
        ),
        (
            "session resumed (agentRun answered)",
            &recovered.session,
            &clean.session,
        ),
    ];
    for (what, after, peer) in rows {
        let _ = writeln!(
            out,
            "| {what} | {} | {} | {} |",
            cell(after),
            cell(peer),
            ratio(after, peer)
        );
    }
    let _ = writeln!(
        out,
        "\nThe resumed sessions ran to their end {} after the restart ({} of {trials} trials \
         were killed mid-session; the others after the session's end, with nothing to resume).",
        cell(finished_after),
        finished_after.len(),
    );
    out
}
