//! Crash recovery: the server is killed with SIGKILL at seeded random points of a scripted
//! session (see `wright_tests::recovery`); after each kill nothing on disk is half-written,
//! and a restarted server removes the killed one's edit temporaries, opens its index and
//! resumes the session from its journal to the end. `WRIGHT_RECOVERY_SEED` replays a failing
//! run; the seed is printed on failure.

use wright_tests::recovery::{Rng, Scenario};
use wright_tests::session::run;

/// Trials per run: each is a server start, a kill and a restart (about a second each).
const TRIALS: u64 = 6;

#[test]
fn a_server_killed_at_random_points_loses_nothing_and_resumes() {
    let seed = std::env::var("WRIGHT_RECOVERY_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5EED_0009);
    let mut rng = Rng::new(seed);
    for trial in 0..TRIALS {
        // Kill points spread over the session: from its first event to past its end.
        let events = 1 + rng.below(28);
        eprintln!("recovery trial {trial}: seed {seed}, kill after {events} events");
        let scenario = Scenario::new("recovery");
        let mut editor = scenario.start();
        let session = run(&mut editor, "edit, run and write, then stop");
        let pid = editor.pid();
        let ended = scenario.kill_after_events(editor, &session, events);
        eprintln!("recovery trial {trial}: the session had ended: {ended}");
        scenario.check_disk(Some(pid));
        scenario.plant_edit_temporary(pid);
        let (recovered, editor) = scenario.restart_and_resume(&session);
        eprintln!("recovery trial {trial}: {recovered:?}");
        scenario.check_disk(None);
        editor.shutdown();
    }
}
