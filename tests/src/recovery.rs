//! The crash-recovery scenario, shared by `tests/tests/recovery.rs` (kill -9 at seeded random
//! points, check what is left) and `cargo xtask bench recovery` (time the way back).
//!
//! A scripted session on a small workspace lists it, edits a file no editor has open (so the
//! edit is written on disk), runs a command, writes a new file and reads it back. The server
//! is killed with SIGKILL after a chosen number of the session's events. What must hold after
//! the kill: each file on disk is wholly its old or its new text, no temporary file is left
//! in the workspace but an edit's own (`.NAME.wright-PID-N.tmp` of the killed server, if the
//! kill fell between writing it and renaming it), every JSON file of the index parses, and
//! the journal parses to its last whole line. On restart the index opens (or rebuilds), the
//! killed server's temporaries are removed, and the session, unless it had finished, resumes
//! from its journal and finishes.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::provider::{Dialect, Reply, ScriptedProvider, Turn};
use crate::session::{
    agent_spawn, finished, parse_journal, server_writes_unopened_files, start_agent_server,
};
use crate::{Editor, TempDir};

pub const A_BEFORE: &str = "pub fn alpha() -> i32 {\n    1\n}\n";
pub const A_AFTER: &str = "pub fn alpha() -> i32 {\n    2\n}\n";

/// The new file the session writes: large enough that its write is not one instant.
pub fn new_file() -> String {
    (0..4000)
        .map(|n| format!("pub const C{n}: u32 = {n};\n"))
        .collect()
}

/// A small deterministic generator (xorshift64*), so a failing trial reproduces from its seed.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
}

pub struct Scenario {
    pub dir: TempDir,
    pub provider: ScriptedProvider,
}

/// What the way back took, from the restart.
#[derive(Clone, Debug)]
pub struct Recovered {
    /// To the answer of the first request (`wright/status`).
    pub first_answer: Duration,
    /// To a `workspace/symbol` that finds a workspace definition.
    pub index_ready: Duration,
    /// To the answer of the `wright/agentRun` that resumed the session (`None` when the
    /// session had finished before the kill).
    pub resumed: Option<Duration>,
    /// To the resumed session's end.
    pub finished: Option<Duration>,
}

impl Scenario {
    /// A fresh workspace, and a provider holding the session's script.
    pub fn new(name: &str) -> Self {
        let dir = TempDir::new(name);
        dir.write("ws/src/a.rs", A_BEFORE);
        for n in 0..40 {
            dir.write(
                &format!("ws/src/m{n}.rs"),
                &format!(
                    "pub struct Thing{n};\nimpl Thing{n} {{ pub fn get(&self) -> u32 {{ {n} }} }}\n"
                ),
            );
        }
        let provider = ScriptedProvider::start();
        let call = |name: &str, arguments: Value| {
            Reply::stream(
                Dialect::OpenAi,
                &Turn::default().tool_call("c", name, &arguments.to_string()),
            )
        };
        provider.push(call("list_dir", json!({})));
        provider.push(call(
            "edit",
            json!({"path": "src/a.rs", "old_string": "    1\n", "new_string": "    2\n"}),
        ));
        provider.push(call("run_command", json!({"command": "cat src/a.rs"})));
        provider.push(call(
            "write_file",
            json!({"path": "src/new.rs", "content": new_file()}),
        ));
        provider.push(call(
            "read_file",
            json!({"path": "src/new.rs", "end_line": 3}),
        ));
        provider.push(Reply::stream(Dialect::OpenAi, &Turn::text(&["Done."])));
        Self { dir, provider }
    }

    pub fn start(&self) -> Editor {
        start_agent_server(
            &agent_spawn(&self.dir, &self.provider),
            server_writes_unopened_files(),
        )
    }

    /// Waits for `events` of the session's events (or its end, if sooner), then kills the
    /// server with SIGKILL. Whether the session had finished.
    pub fn kill_after_events(&self, mut editor: Editor, session: &str, events: u64) -> bool {
        let mut seen = 0;
        let mut ended = false;
        while seen < events && !ended {
            let event = editor.expect("a session event", |m| {
                m["method"] == "wright/agentEvent" && m["params"]["sessionId"] == session
            });
            ended = event["params"]["kind"] == "finished";
            seen += 1;
        }
        editor.kill();
        ended
    }

    /// What must hold on disk after a crash at any point: whole files, no leftovers, an index
    /// and a journal that parse. Panics with what broke. `killed`: the pid of a server just
    /// killed, whose edit temporaries may be left; `None` once a server has started again,
    /// which removes them (in the background: waited for, up to a bound).
    pub fn check_disk(&self, killed: Option<u32>) {
        let ws = self.dir.path().join("ws");
        let a = std::fs::read_to_string(ws.join("src/a.rs")).expect("src/a.rs is there");
        assert!(
            a == A_BEFORE || a == A_AFTER,
            "src/a.rs is half-written: {a:?}"
        );
        if let Ok(new) = std::fs::read_to_string(ws.join("src/new.rs")) {
            assert!(
                new == new_file(),
                "src/new.rs is half-written ({} bytes)",
                new.len()
            );
        }
        let leftovers = || {
            let mut leftovers = Vec::new();
            walk(&ws, &mut |path| {
                let name = path.file_name().unwrap_or_default().to_string_lossy();
                let the_killed_servers_edit = killed.is_some_and(|pid| {
                    name.starts_with('.')
                        && name.ends_with(".tmp")
                        && name.contains(&format!(".wright-{pid}-"))
                });
                if path.extension().is_some_and(|e| e == "tmp") && !the_killed_servers_edit {
                    leftovers.push(path.display().to_string());
                }
            });
            leftovers
        };
        if killed.is_none() {
            let deadline = Instant::now() + Duration::from_secs(10);
            while !leftovers().is_empty() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let left = leftovers();
        assert!(
            left.is_empty(),
            "temporary files left in the workspace: {left:?}"
        );
        walk(&self.dir.path().join("cache"), &mut |path| {
            if path.extension().is_some_and(|e| e == "json") {
                let bytes = std::fs::read(path).unwrap();
                assert!(
                    serde_json::from_slice::<Value>(&bytes).is_ok(),
                    "{} does not parse",
                    path.display()
                );
            }
        });
        for journal in crate::session::journal_paths(&self.dir) {
            parse_journal(&journal, true);
        }
    }

    /// Leaves in the workspace what a server killed between writing an edit's new content and
    /// renaming it into place leaves: half a file in a temporary named for the killed `pid`.
    /// (The real window is microseconds wide; this puts every trial in it.)
    pub fn plant_edit_temporary(&self, pid: u32) {
        let half = &A_AFTER[..A_AFTER.len() / 2];
        self.dir
            .write(&format!("ws/src/.a.rs.wright-{pid}-0.tmp"), half);
    }

    /// Restarts the server, waits for its index, and resumes `session` unless it had
    /// finished; checks the session ends `done` and its journal is whole. Returns the
    /// timings and the server (still running).
    pub fn restart_and_resume(&self, session: &str) -> (Recovered, Editor) {
        // The resumed session's next request may find the script spent: one more answer.
        self.provider
            .push(Reply::stream(Dialect::OpenAi, &Turn::text(&["Done."])));
        let restart = Instant::now();
        let mut editor = self.start();
        editor.status();
        let first_answer = restart.elapsed();
        editor.symbols_until("alpha", |symbols| !symbols.is_empty());
        let index_ready = restart.elapsed();
        let sessions = editor.request("wright/sessions", Value::Null);
        let listed = sessions["sessions"]
            .as_array()
            .and_then(|all| all.iter().find(|s| s["sessionId"] == session).cloned())
            .unwrap_or_else(|| panic!("session {session} is not listed: {sessions}"));
        let (mut resumed, mut ended) = (None, None);
        if listed["status"] != "done" {
            let run = editor.request("wright/agentRun", json!({"task": "", "sessionId": session}));
            assert_eq!(run["sessionId"], session, "{run}");
            resumed = Some(restart.elapsed());
            let outcome = finished(&mut editor, session);
            assert_eq!(outcome["status"], "done", "the resumed session: {outcome}");
            ended = Some(restart.elapsed());
        }
        let journal = crate::session::journal(&self.dir, session, false);
        assert_eq!(
            journal.last().unwrap()["kind"],
            "end",
            "{:?}",
            journal.last()
        );
        (
            Recovered {
                first_answer,
                index_ready,
                resumed,
                finished: ended,
            },
            editor,
        )
    }
}

fn walk(dir: &Path, visit: &mut dyn FnMut(&Path)) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            walk(&path, visit);
        } else {
            visit(&path);
        }
    }
}
