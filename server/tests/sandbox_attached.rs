//! Attached runs (a server on pipes inside the sandbox): a round trip over stdin and stdout,
//! no wall time, a read-only workspace with writable paths, the exact environment, a program
//! installed under the host's /tmp, and nothing left once the handle is dropped or the server
//! exits by itself.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use wright::sandbox::{Environment, Filesystem, Limits, LocalBackend, Permissions, Request};
use wright_tests::TempDir;

fn backend() -> LocalBackend {
    LocalBackend::with_helper(PathBuf::from(env!("CARGO_BIN_EXE_wright")))
}

/// Every descendant of `pid` (through /proc's children lists).
fn descendants(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let mut todo = vec![pid];
    while let Some(p) = todo.pop() {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{p}/task")) else {
            continue;
        };
        for task in tasks.flatten() {
            if let Ok(list) = std::fs::read_to_string(task.path().join("children")) {
                for child in list.split_whitespace().filter_map(|c| c.parse().ok()) {
                    out.push(child);
                    todo.push(child);
                }
            }
        }
    }
    out
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok()
}

#[test]
fn a_line_server_round_trips_outlives_the_timeout_and_dies_with_its_handle() {
    let dir = TempDir::new_in(
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR")),
        "attached",
    );
    let ws = dir.path().join("ws");
    let writable = dir.path().join("ws/out");
    std::fs::create_dir_all(&writable).unwrap();
    let script = format!(
        "sleep 1000 & while read l; do case $l in \
         env) echo \"env ${{OPENAI_API_KEY:-none}} $CONFIGURED ${{PATH:+path}} ${{HOME:+home}} ${{LANG:+lang}}\";; \
         write) echo x > {ws}/f 2>/dev/null && echo ws-written || echo ws-refused; \
                echo x > {w}/f && echo out-written; echo x > /tmp/t && echo tmp-written;; \
         *) echo \"got $l\";; esac; done",
        ws = ws.display(),
        w = writable.display()
    );
    let request = Request {
        argv: vec!["sh".into(), "-c".into(), script],
        workspace: ws.clone(),
        filesystem: Filesystem::ReadOnly,
        permissions: Permissions {
            extra_writable: vec![writable.clone()],
            ..Permissions::default()
        },
        environment: Environment::Exact,
        env: vec![("CONFIGURED".into(), "yes".into())],
        limits: Limits {
            timeout: Duration::from_secs(1),
            ..Limits::default()
        },
        ..Request::default()
    };
    // SAFETY: set before the backend reads the environment; no other thread reads it here.
    unsafe {
        std::env::set_var("OPENAI_API_KEY", "sk-test");
        std::env::set_var("LANG", "C.UTF-8");
    }
    let attached = backend().spawn_attached(&request).unwrap();
    let mut handle = attached.handle;
    let mut stdin = std::fs::File::from(attached.stdin);
    let mut stdout = BufReader::new(std::fs::File::from(attached.stdout));
    let mut line = String::new();
    let mut ask = |what: &str, lines: usize| -> Vec<String> {
        writeln!(stdin, "{what}").unwrap();
        (0..lines)
            .map(|_| {
                line.clear();
                stdout.read_line(&mut line).unwrap();
                line.trim_end().to_owned()
            })
            .collect()
    };
    assert_eq!(ask("hello", 1), ["got hello"]);
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(handle.try_exit(), None, "the timeout was applied");
    assert_eq!(ask("again", 1), ["got again"]);
    assert_eq!(ask("env", 1), ["env none yes path home lang"]);
    assert_eq!(
        ask("write", 3),
        ["ws-refused", "out-written", "tmp-written"]
    );
    assert!(!ws.join("f").exists());
    assert!(writable.join("f").exists());
    let pids = descendants(handle.pid());
    assert!(pids.len() >= 3, "{pids:?}");
    let helper = handle.pid();
    drop(handle);
    let deadline = Instant::now() + Duration::from_secs(5);
    while pids.iter().any(|p| alive(*p)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!alive(helper));
    assert!(pids.iter().all(|p| !alive(*p)), "left: {pids:?}");
}

#[test]
fn a_server_that_exits_by_itself_is_reported() {
    let dir = TempDir::new_in(
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR")),
        "attached-exit",
    );
    let request = Request {
        argv: vec!["sh".into(), "-c".into(), "read l; exit 7".into()],
        workspace: dir.path().to_owned(),
        filesystem: Filesystem::ReadOnly,
        environment: Environment::Exact,
        ..Request::default()
    };
    let attached = backend().spawn_attached(&request).unwrap();
    let mut handle = attached.handle;
    let mut stdin = std::fs::File::from(attached.stdin);
    assert_eq!(handle.try_exit(), None);
    writeln!(stdin, "bye").unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let ended = loop {
        if let Some(ended) = handle.try_exit() {
            break ended;
        }
        assert!(Instant::now() < deadline, "no exit reported");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(ended, "exited with status 7");
}

#[test]
fn a_program_under_the_hosts_tmp_runs_read_only_and_its_neighbours_stay_hidden() {
    // The namespace tier, as everywhere here (the landlock tier shares the host's /tmp).
    let ws = TempDir::new_in(
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR")),
        "attached-tmp-ws",
    );
    let installed = TempDir::new_in(std::path::Path::new("/tmp"), "attached-installed");
    let neighbour = TempDir::new_in(std::path::Path::new("/tmp"), "attached-neighbour");
    neighbour.write("secret", "no");
    let program = installed.path().join("bin/server");
    installed.write(
        "bin/server",
        &format!(
            "#!/bin/sh\nread l\necho \"got $l\"\n\
             echo x > {dir}/planted 2>/dev/null && echo written || echo refused\n\
             cat {secret} 2>/dev/null || echo hidden\n",
            dir = installed.path().display(),
            secret = neighbour.path().join("secret").display()
        ),
    );
    std::fs::set_permissions(
        &program,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let request = Request {
        argv: vec![program.display().to_string()],
        workspace: ws.path().to_owned(),
        filesystem: Filesystem::ReadOnly,
        environment: Environment::Exact,
        readable: wright::sandbox::host_tmp_tree(&program)
            .into_iter()
            .collect(),
        ..Request::default()
    };
    assert_eq!(request.readable, [installed.path()]);
    let attached = backend().spawn_attached(&request).unwrap();
    let _handle = attached.handle;
    let mut stdin = std::fs::File::from(attached.stdin);
    writeln!(stdin, "hello").unwrap();
    let mut out = String::new();
    std::io::Read::read_to_string(&mut std::fs::File::from(attached.stdout), &mut out).unwrap();
    assert_eq!(out, "got hello\nrefused\nhidden\n");
    assert!(!installed.path().join("planted").exists());
}

#[test]
fn a_link_planted_in_the_hosts_tmp_is_not_followed_into_a_readable_tree() {
    let outside = TempDir::new_in(
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR")),
        "attached-link-target",
    );
    outside.write("secret", "the link's target");
    let links = TempDir::new_in(std::path::Path::new("/tmp"), "attached-links");
    let link = links.path().join("planted");
    std::os::unix::fs::symlink(outside.path(), &link).unwrap();
    let request = Request {
        argv: vec![
            "sh".into(),
            "-c".into(),
            format!(
                "read l; cat {}/secret 2>/dev/null || echo absent",
                link.display()
            ),
        ],
        workspace: outside.path().join("ws"),
        filesystem: Filesystem::ReadOnly,
        environment: Environment::Exact,
        // The link itself named as the tree (as if it were the program's folder).
        readable: vec![link.clone()],
        ..Request::default()
    };
    std::fs::create_dir_all(outside.path().join("ws")).unwrap();
    let attached = backend().spawn_attached(&request).unwrap();
    let _handle = attached.handle;
    writeln!(std::fs::File::from(attached.stdin), "go").unwrap();
    let mut out = String::new();
    std::io::Read::read_to_string(&mut std::fs::File::from(attached.stdout), &mut out).unwrap();
    assert_eq!(out, "absent\n");
}
