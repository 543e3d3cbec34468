//! The sandbox's promises, each tried against: `wright sandbox run` (and the library's
//! snapshot, buffer and pool API) must refuse writes outside the workspace (also through a
//! symlink planted inside), hide the host's /tmp, refuse the network (TCP and UDP to a
//! listener on the host's loopback), refuse signalling host processes, never pass
//! credentials, and bound memory, processes, wall time and output — while workspace writes,
//! /tmp, `--allow-net` and snapshots work.
//!
//! Every test is bounded in time and count and stays on loopback. A test skips (saying why)
//! only when `wright doctor` reports the primitive it needs unavailable on this machine.

use std::io::Read;
use std::net::{TcpListener, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use wright::sandbox::{
    Backend, ChangeKind, Exceeded, Filesystem, Limits, LocalBackend, Network, Permissions, Pool,
    Request, SandboxError, Snapshot, pool::PoolConfig,
};
use wright_tests::TempDir;

fn wright_bin() -> &'static str {
    env!("CARGO_BIN_EXE_wright")
}

/// A workspace, a cache folder (for snapshot layers) and room for "outside" folders, side by
/// side in a temp dir.
struct Fixture {
    dir: TempDir,
}

impl Fixture {
    /// Under Cargo's target folder: outside the sandbox's private /tmp, so the folders around
    /// the workspace stay visible (read-only) inside and escapes are really tried.
    fn new(name: &str) -> Self {
        Self::under(Path::new(env!("CARGO_TARGET_TMPDIR")), name)
    }

    /// Under the host's /tmp, which the sandbox covers with its own: the workspace must
    /// still be there inside.
    fn in_host_tmp(name: &str) -> Self {
        Self::under(&std::env::temp_dir(), name)
    }

    fn under(base: &Path, name: &str) -> Self {
        let dir = TempDir::new_in(base, &format!("sandbox-{name}"));
        std::fs::create_dir_all(dir.path().join("ws")).unwrap();
        std::fs::create_dir_all(dir.path().join("cache")).unwrap();
        Self { dir }
    }

    fn ws(&self) -> PathBuf {
        self.dir.path().join("ws")
    }

    fn write(&self, relative: &str, text: &str) -> PathBuf {
        self.dir.write(&format!("ws/{relative}"), text)
    }

    /// Runs `wright sandbox run --json FLAGS -- CMD…` with a clean environment plus `env`.
    fn run(&self, flags: &[&str], cmd: &[&str], env: &[(&str, &str)]) -> (Value, Output) {
        let mut command = Command::new(wright_bin());
        command
            .args(["sandbox", "run", "--json", "--root"])
            .arg(self.ws())
            .args(flags)
            .arg("--")
            .args(cmd)
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("XDG_CACHE_HOME", self.dir.path().join("cache"));
        for (key, value) in env {
            command.env(key, value);
        }
        let out = command.output().expect("running wright");
        let json: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "no JSON ({e}): stdout {:?} stderr {:?}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        });
        (json, out)
    }

    fn sh(&self, script: &str) -> Value {
        self.run(&[], &["sh", "-c", script], &[]).0
    }
}

/// `wright doctor`'s verdict on the primitives, once per test binary.
fn primitives() -> &'static Vec<(String, bool, String)> {
    static PRIMITIVES: std::sync::OnceLock<Vec<(String, bool, String)>> =
        std::sync::OnceLock::new();
    PRIMITIVES.get_or_init(|| {
        let cache = TempDir::new("sandbox-doctor");
        let out = Command::new(wright_bin())
            .args(["doctor", "--json"])
            .env_clear()
            .env("XDG_CACHE_HOME", cache.path())
            .output()
            .unwrap();
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        report["sandbox"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                (
                    p["name"].as_str().unwrap().to_owned(),
                    p["available"].as_bool().unwrap(),
                    p["detail"].as_str().unwrap().to_owned(),
                )
            })
            .collect()
    })
}

/// Whether every named primitive is available; prints why a test skips otherwise.
fn available(test: &str, needs: &[&str]) -> bool {
    for (name, ok, detail) in primitives() {
        if needs.contains(&name.as_str()) && !ok {
            eprintln!("SKIPPED {test}: wright doctor reports {name} unavailable: {detail}");
            return false;
        }
    }
    true
}

const ISOLATION: &[&str] = &["user namespaces", "landlock", "seccomp"];

fn text(value: &Value) -> &str {
    value.as_str().unwrap_or("")
}

#[test]
fn doctor_reports_each_primitive() {
    let names: Vec<&str> = primitives().iter().map(|(n, _, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "user namespaces",
            "overlayfs",
            "landlock",
            "seccomp",
            "cgroups"
        ]
    );
    for (name, ok, detail) in primitives() {
        assert!(!detail.is_empty(), "{name} has no explanation");
        if !ok {
            eprintln!("note: {name} unavailable here: {detail}");
        }
    }
}

#[test]
fn workspace_writes_work_and_writes_outside_are_refused() {
    if !available("workspace_writes", ISOLATION) {
        return;
    }
    let fx = Fixture::new("writes");
    let outside = fx.dir.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let script = format!(
        "echo made > made.txt && mkdir -p sub && echo deep > sub/deep.txt; \
         echo no > {outside}/escaped.txt; echo $? > status-outside; \
         touch /etc/wright-sandbox-escape; echo $? > status-etc; \
         touch /usr/wright-sandbox-escape; echo $? >> status-etc",
        outside = outside.display()
    );
    let json = fx.sh(&script);
    assert_eq!(json["exit_code"], 0, "{json}");
    assert_eq!(json["isolation"]["filesystem"], "in-place");
    let ws = fx.ws();
    assert_eq!(
        std::fs::read_to_string(ws.join("made.txt")).unwrap(),
        "made\n"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("sub/deep.txt")).unwrap(),
        "deep\n"
    );
    assert!(!outside.join("escaped.txt").exists());
    assert!(!Path::new("/etc/wright-sandbox-escape").exists());
    assert!(!Path::new("/usr/wright-sandbox-escape").exists());
    assert_ne!(
        std::fs::read_to_string(ws.join("status-outside"))
            .unwrap()
            .trim(),
        "0"
    );
    assert!(
        !std::fs::read_to_string(ws.join("status-etc"))
            .unwrap()
            .contains('0')
    );
    assert!(
        text(&json["stderr"]).contains("Read-only file system"),
        "{json}"
    );
}

#[test]
fn a_symlink_planted_inside_does_not_lead_out() {
    if !available("symlink", ISOLATION) {
        return;
    }
    let fx = Fixture::new("symlink");
    let outside = fx.dir.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("victim.txt"), "intact\n").unwrap();
    std::os::unix::fs::symlink(&outside, fx.ws().join("escape")).unwrap();
    std::os::unix::fs::symlink(outside.join("victim.txt"), fx.ws().join("victim")).unwrap();
    let json = fx.sh(
        "echo pwned > escape/new.txt; echo pwned > victim; echo pwned >> escape/victim.txt; \
         rm -f escape/victim.txt; ln -s /etc/passwd escape/link",
    );
    assert_ne!(json["exit_code"], 0, "{json}");
    assert!(!outside.join("new.txt").exists());
    assert!(!outside.join("link").exists());
    assert_eq!(
        std::fs::read_to_string(outside.join("victim.txt")).unwrap(),
        "intact\n"
    );
}

#[test]
fn the_hosts_tmp_is_invisible_and_a_private_tmp_works() {
    if !available("tmp", ISOLATION) {
        return;
    }
    let fx = Fixture::in_host_tmp("tmp");
    let planted = std::env::temp_dir().join(format!("wright-planted-{}", std::process::id()));
    std::fs::write(&planted, "host secret\n").unwrap();
    let inside_name = format!("/tmp/wright-inside-{}", std::process::id());
    let script = format!(
        "cat {planted} && exit 10; ls /tmp > tmp-listing; \
         echo scratch > {inside} && cat {inside} && echo $TMPDIR",
        planted = planted.display(),
        inside = inside_name
    );
    let json = fx.sh(&script);
    std::fs::remove_file(&planted).unwrap();
    assert_eq!(json["exit_code"], 0, "{json}");
    assert_eq!(text(&json["stdout"]), "scratch\n/tmp\n");
    let listing = std::fs::read_to_string(fx.ws().join("tmp-listing")).unwrap();
    assert!(!listing.contains("wright-planted"), "{listing}");
    assert!(
        !Path::new(&inside_name).exists(),
        "the private /tmp leaked to the host"
    );
}

/// A TCP and a UDP listener on the host's loopback, and the script that tries both.
struct Listeners {
    tcp: TcpListener,
    udp: UdpSocket,
}

impl Listeners {
    fn new() -> Self {
        let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
        tcp.set_nonblocking(true).unwrap();
        let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
        udp.set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        Self { tcp, udp }
    }

    /// bash's /dev/tcp and /dev/udp: a connect and a datagram, each reporting its status.
    fn script(&self) -> String {
        format!(
            "echo tcp > /dev/tcp/127.0.0.1/{}; echo tcp=$?; echo udp > /dev/udp/127.0.0.1/{}; echo udp=$?",
            self.tcp.local_addr().unwrap().port(),
            self.udp.local_addr().unwrap().port()
        )
    }

    fn tcp_connected(&self) -> bool {
        let deadline = Instant::now() + Duration::from_millis(500);
        while Instant::now() < deadline {
            if self.tcp.accept().is_ok() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    fn udp_received(&self) -> bool {
        let mut buf = [0u8; 16];
        self.udp.recv(&mut buf).is_ok()
    }
}

#[test]
fn the_network_is_off_even_for_the_hosts_loopback() {
    if !available("network_off", ISOLATION) {
        return;
    }
    let fx = Fixture::new("net-off");
    let listeners = Listeners::new();
    let (json, _) = fx.run(&[], &["bash", "-c", &listeners.script()], &[]);
    let stdout = text(&json["stdout"]);
    assert!(
        stdout.contains("tcp=1") && stdout.contains("udp=1"),
        "{json}"
    );
    assert!(
        !listeners.tcp_connected(),
        "a TCP connection reached the host"
    );
    assert!(!listeners.udp_received(), "a UDP datagram reached the host");
    assert_eq!(json["isolation"]["network"], "none");
}

#[test]
fn allow_net_reaches_the_hosts_listener() {
    if !available("allow_net", ISOLATION) {
        return;
    }
    let fx = Fixture::new("net-on");
    let listeners = Listeners::new();
    let (json, _) = fx.run(&["--allow-net"], &["bash", "-c", &listeners.script()], &[]);
    let stdout = text(&json["stdout"]);
    assert!(
        stdout.contains("tcp=0") && stdout.contains("udp=0"),
        "{json}"
    );
    assert!(listeners.tcp_connected());
    assert!(listeners.udp_received());
    assert_eq!(json["isolation"]["network"], "host");
}

#[test]
fn calls_that_reach_past_the_namespaces_are_refused() {
    if !available("seccomp", ISOLATION) {
        return;
    }
    let fx = Fixture::new("seccomp");
    // util-linux's unshare and mount: a nested namespace and a mount, both refused.
    let json = fx.sh("unshare --user --map-root-user true; echo unshare=$?; \
         mount -t tmpfs none /mnt 2>&1; echo mount=$?; \
         umount /proc 2>&1; echo umount=$?");
    let stdout = text(&json["stdout"]);
    assert!(stdout.contains("unshare=1"), "{json}");
    assert!(!stdout.contains("mount=0"), "{json}");
    assert!(!stdout.contains("umount=0"), "{json}");
    assert!(
        text(&json["stderr"]).contains("Operation not permitted"),
        "{json}"
    );
}

#[test]
fn ip_sockets_are_refused_by_default_and_loopback_permission_stays_inside() {
    if !available("loopback", ISOLATION) {
        return;
    }
    let Some(python) = ["/usr/bin/python3", "/usr/local/bin/python3"]
        .into_iter()
        .find(|p| Path::new(p).exists())
    else {
        eprintln!("SKIPPED loopback: no system python3 to run a server inside");
        return;
    };
    let fx = Fixture::new("loopback");
    let listeners = Listeners::new();
    let script = format!(
        "import socket\n\
        s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()\n\
        c = socket.create_connection(s.getsockname()); a, _ = s.accept()\n\
        c.sendall(b'ping'); print(a.recv(4).decode())\n\
        try:\n  socket.create_connection(('127.0.0.1', {}), timeout=2); print('host reached')\n\
        except OSError as e: print('host unreachable')\n",
        listeners.tcp.local_addr().unwrap().port()
    );
    let (json, _) = fx.run(&[], &[python, "-c", &script], &[]);
    assert_ne!(json["exit_code"], 0);
    assert!(
        text(&json["stderr"]).contains("Operation not permitted"),
        "{json}"
    );
    let outcome = backend()
        .run(&Request {
            argv: vec![python.into(), "-c".into(), script],
            workspace: fx.ws(),
            permissions: Permissions {
                network: Network::Loopback,
                extra_writable: Vec::new(),
            },
            ..Request::default()
        })
        .unwrap();
    assert_eq!(
        outcome.stdout.text(),
        "ping\nhost unreachable\n",
        "{}",
        outcome.stderr.text()
    );
    assert_eq!(outcome.isolation.network, "loopback");
    assert!(!listeners.tcp_connected());
}

#[test]
fn a_host_process_cannot_be_signalled() {
    if !available("signal", ISOLATION) {
        return;
    }
    let fx = Fixture::new("signal");
    let mut sleeper = Command::new("sleep")
        .arg("30")
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let pid = sleeper.id();
    let json = fx.sh(&format!(
        "kill -9 {pid}; echo kill=$?; kill -9 -1; echo all=$?"
    ));
    let alive = sleeper.try_wait().unwrap().is_none();
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
    assert!(alive, "the sandbox killed a host process: {json}");
    assert!(text(&json["stdout"]).contains("kill=1"), "{json}");
}

#[test]
fn credentials_never_reach_the_command() {
    if !available("credentials", ISOLATION) {
        return;
    }
    let fx = Fixture::new("env");
    let secrets = [
        ("OPENAI_API_KEY", "sk-test-openai"),
        ("ANTHROPIC_API_KEY", "sk-ant-test"),
        ("GITHUB_TOKEN", "ghp_test"),
        ("AWS_SECRET_ACCESS_KEY", "aws-test"),
        ("LANG", "C.UTF-8"),
    ];
    let (json, _) = fx.run(&[], &["sh", "-c", "env; cat /proc/1/environ"], &secrets);
    let stdout = text(&json["stdout"]);
    for (name, value) in &secrets[..4] {
        assert!(
            !stdout.contains(name) && !stdout.contains(value),
            "{name} leaked: {stdout}"
        );
    }
    assert!(stdout.contains("LANG=C.UTF-8"), "{stdout}");
    assert!(stdout.contains("PATH="), "{stdout}");
}

#[test]
fn memory_beyond_the_limit_kills_the_command() {
    if !available("memory", ISOLATION) {
        return;
    }
    let fx = Fixture::new("memory");
    // `tail -n 1` keeps the whole newline-free line in memory: 400 MB against a 64 MB limit.
    let (json, _) = fx.run(
        &["--memory", "64", "--timeout", "60"],
        &[
            "bash",
            "-c",
            "set -o pipefail; head -c 400000000 /dev/zero | tail -n 1 | wc -c",
        ],
        &[],
    );
    assert_ne!(json["exit_code"], 0, "{json}");
    assert_ne!(text(&json["stdout"]).trim(), "400000000", "{json}");
    let exceeded = json["isolation"]["limits"]["exceeded"].to_string();
    let by_cgroup = text(&json["isolation"]["limits"]["enforced_by"]).contains("cgroup");
    if by_cgroup {
        assert!(exceeded.contains("memory"), "{json}");
    }
}

#[test]
fn cpu_time_and_file_size_are_bounded() {
    if !available("cpu_and_file_size", ISOLATION) {
        return;
    }
    let fx = Fixture::new("cpu-fsize");
    let backend = backend();
    let limited = |script: &str| Request {
        argv: vec!["sh".into(), "-c".into(), script.into()],
        workspace: fx.ws(),
        limits: Limits {
            timeout: Duration::from_secs(20),
            cpu_seconds: Some(1),
            file_size_bytes: 1 << 20,
            ..Limits::default()
        },
        ..Request::default()
    };
    let started = Instant::now();
    let spin = backend.run(&limited("while :; do :; done")).unwrap();
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(spin.exceeded.contains(&Exceeded::CpuTime), "{spin:?}");
    assert!(!spin.timed_out);
    let big = backend
        .run(&limited("head -c 3000000 /dev/zero > big"))
        .unwrap();
    assert!(big.exceeded.contains(&Exceeded::FileSize), "{big:?}");
    assert_eq!(
        std::fs::metadata(fx.ws().join("big")).unwrap().len(),
        1 << 20
    );
}

#[test]
fn a_process_flood_is_bounded() {
    if !available("processes", ISOLATION) {
        return;
    }
    let fx = Fixture::new("flood");
    // A subshell forks up to 1000 sleepers (dash gives up at the first refused fork); then the
    // parent counts, with builtins only, the processes alive in the sandbox's pid namespace.
    let script = "(i=0; while [ $i -lt 1000 ]; do sleep 30 & i=$((i+1)); done); \
                  n=0; for p in /proc/[0-9]*; do n=$((n+1)); done; echo alive=$n";
    let (json, _) = fx.run(&["--timeout", "60"], &["sh", "-c", script], &[]);
    let alive: usize = text(&json["stdout"])
        .trim()
        .strip_prefix("alive=")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{json}"));
    // The limit is 512 processes (the default); the flood got close to it and no further.
    assert!(
        (400..=512).contains(&alive),
        "{alive} processes alive: {json}"
    );
    assert!(text(&json["stderr"]).contains("fork"), "{json}");
    if text(&json["isolation"]["limits"]["enforced_by"]).contains("pids") {
        assert_eq!(
            json["isolation"]["limits"]["exceeded"][0], "processes",
            "{json}"
        );
    }
}

#[test]
fn past_the_timeout_the_whole_tree_is_killed_with_124() {
    if !available("timeout", ISOLATION) {
        return;
    }
    let fx = Fixture::new("timeout");
    // A unique duration marks this run's processes in the host's process table.
    let marker = format!("987.{}", std::process::id());
    let started = Instant::now();
    let (json, out) = fx.run(
        &["--timeout", "1"],
        &[
            "sh",
            "-c",
            &format!("sleep {marker} & (sleep {marker} &) ; sleep {marker}"),
        ],
        &[],
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(out.status.code(), Some(124));
    assert_eq!(json["exit_code"], 124);
    assert_eq!(json["timed_out"], true);
    let survivors: Vec<String> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains(&marker))
        .collect();
    assert!(survivors.is_empty(), "left running: {survivors:?}");
}

#[test]
fn an_output_flood_is_capped_keeping_head_and_tail() {
    if !available("output", ISOLATION) {
        return;
    }
    let fx = Fixture::new("output");
    let json = fx.sh("echo START; head -c 1000000 /dev/zero | tr '\\0' a; echo; echo END");
    assert_eq!(json["exit_code"], 0);
    assert_eq!(json["truncated"], true);
    let stdout = text(&json["stdout"]);
    assert!(stdout.starts_with("START\naaa"), "{}", &stdout[..20]);
    assert!(stdout.ends_with("aaa\nEND\n"));
    assert!(stdout.contains("bytes omitted"));
    assert!(
        stdout.len() < 64 * 1024 + 200,
        "{} bytes kept",
        stdout.len()
    );
}

#[test]
fn pipelines_and_working_folders_behave_as_in_a_shell() {
    if !available("pipelines", ISOLATION) {
        return;
    }
    let fx = Fixture::new("pipes");
    fx.write("sub/here.txt", "x\n");
    // `yes` must die of SIGPIPE quietly, not complain about a broken pipe.
    let json = fx.sh("yes | head -n 2");
    assert_eq!(text(&json["stdout"]), "y\ny\n");
    assert_eq!(text(&json["stderr"]), "", "{json}");
    let backend = backend();
    let request = |cwd: &str| Request {
        argv: vec!["ls".into()],
        workspace: fx.ws(),
        cwd: Some(cwd.into()),
        ..Request::default()
    };
    assert_eq!(
        backend.run(&request("sub")).unwrap().stdout.text(),
        "here.txt\n"
    );
    assert!(backend.run(&request("../..")).is_err());
    assert!(backend.run(&request("/etc")).is_err());
}

#[test]
fn snapshot_mode_leaves_the_workspace_untouched_and_lists_the_changes() {
    if !available("snapshot", &["user namespaces", "overlayfs"]) {
        return;
    }
    let fx = Fixture::in_host_tmp("snapshot");
    fx.write("a.txt", "old\n");
    fx.write("c.txt", "doomed\n");
    fx.write("src/lib.rs", "fn f() {}\n");
    let (json, _) = fx.run(
        &["--snapshot"],
        &[
            "sh",
            "-c",
            "echo new > a.txt && echo b > b.txt && rm c.txt && mkdir -p target && echo o > target/out && cat a.txt src/lib.rs",
        ],
        &[],
    );
    assert_eq!(json["exit_code"], 0, "{json}");
    assert_eq!(json["isolation"]["filesystem"], "overlay");
    assert_eq!(text(&json["stdout"]), "new\nfn f() {}\n");
    let ws = fx.ws();
    assert_eq!(std::fs::read_to_string(ws.join("a.txt")).unwrap(), "old\n");
    assert!(!ws.join("b.txt").exists());
    assert!(ws.join("c.txt").exists());
    assert!(!ws.join("target").exists());
    let changed: Vec<&str> = json["changed_files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(changed, ["a.txt", "b.txt", "c.txt", "target/out"]);
    // The throw-away layer is gone.
    let layers = std::fs::read_dir(fx.dir.path().join("cache/wright/sandbox"))
        .map(|d| d.count())
        .unwrap_or(0);
    assert_eq!(layers, 0);
}

fn backend() -> LocalBackend {
    LocalBackend::with_helper(PathBuf::from(wright_bin()))
}

#[test]
fn buffers_written_into_the_snapshot_are_what_commands_see_and_changes_come_back_as_diffs() {
    if !available("buffers", &["user namespaces", "overlayfs"]) {
        return;
    }
    let fx = Fixture::new("buffers");
    fx.write("notes.txt", "saved on disk\n");
    fx.write("keep.txt", "one\ntwo\nthree\n");
    let snapshot = Snapshot::create(fx.dir.path().join("cache/layer"), &fx.ws()).unwrap();
    let shared = Arc::new(Mutex::new(snapshot));
    shared
        .lock()
        .unwrap()
        .write_buffers(&[("notes.txt".into(), b"typed in the editor\n".to_vec())])
        .unwrap();
    let request = |script: &str| Request {
        argv: vec!["sh".into(), "-c".into(), script.into()],
        workspace: fx.ws(),
        filesystem: Filesystem::Snapshot(Arc::clone(&shared)),
        ..Request::default()
    };
    let backend = backend();
    let first = backend
        .run(&request(
            "cat notes.txt; sed -i s/editor/formatter/ notes.txt; sed -i s/two/2/ keep.txt; \
             mkdir -p build && echo artifact > build/out",
        ))
        .unwrap();
    assert_eq!(first.exit_code, 0, "{}", first.stderr.text());
    assert_eq!(first.stdout.text(), "typed in the editor\n");
    let by_path = |path: &str| {
        first
            .changes
            .iter()
            .find(|c| c.path == Path::new(path))
            .unwrap_or_else(|| panic!("{path} not in {:?}", first.changes))
            .clone()
    };
    let notes = by_path("notes.txt");
    assert_eq!(notes.kind, ChangeKind::Modified);
    let diff = notes.diff.unwrap();
    assert!(
        diff.contains("-typed in the editor\n+typed in the formatter\n"),
        "{diff}"
    );
    let keep = by_path("keep.txt");
    assert!(keep.diff.unwrap().contains(" one\n-two\n+2\n three\n"));
    assert_eq!(by_path("build/out").kind, ChangeKind::Added);
    // The disk never changed; the build output stays in the session for the next command.
    assert_eq!(
        std::fs::read_to_string(fx.ws().join("notes.txt")).unwrap(),
        "saved on disk\n"
    );
    let second = backend.run(&request("cat build/out; rm keep.txt")).unwrap();
    assert_eq!(second.stdout.text(), "artifact\n");
    assert_eq!(second.changes.len(), 1);
    assert_eq!(second.changes[0].kind, ChangeKind::Deleted);
    assert!(fx.ws().join("keep.txt").exists());
    Arc::try_unwrap(shared)
        .unwrap()
        .into_inner()
        .unwrap()
        .discard()
        .unwrap();
}

#[test]
fn without_overlays_snapshots_are_reflink_copies_or_refused_with_the_reason() {
    if !available("reflink", ISOLATION) {
        return;
    }
    let fx = Fixture::new("reflink");
    fx.write("a.txt", "on disk\n");
    let backend = backend();
    // An overlay that cannot mount (its work folder replaced by a file) is reported as such,
    // and the backend's next snapshot is a copy.
    let bad_dir = fx.dir.path().join("bad-layer");
    let bad = Snapshot::create(bad_dir.clone(), &fx.ws()).unwrap();
    std::fs::remove_dir(bad_dir.join("work")).unwrap();
    std::fs::write(bad_dir.join("work"), "not a folder").unwrap();
    let failed = backend.run(&Request {
        argv: vec!["true".into()],
        workspace: fx.ws(),
        filesystem: Filesystem::Snapshot(Arc::new(Mutex::new(bad))),
        ..Request::default()
    });
    assert!(
        matches!(failed, Err(SandboxError::OverlayUnavailable(_))),
        "{failed:?}"
    );
    let mut copies = self::backend();
    copies.prefer_copies();
    for (backend, why) in [
        (&backend, "Invalid argument"),
        (&copies, "copies were asked for"),
    ] {
        let layer = fx.dir.path().join("layer");
        match backend.snapshot(layer.clone(), &fx.ws()) {
            Ok(snapshot) => {
                assert_eq!(snapshot.kind().name(), "reflink-copy");
                snapshot.discard().unwrap();
            }
            Err(err) => {
                // This file system cannot share extents (ext4, tmpfs): the refusal says why
                // both ways failed, and nothing is left behind.
                let message = err.to_string();
                assert_eq!(err.kind(), std::io::ErrorKind::Unsupported, "{message}");
                assert!(message.contains(why), "{message}");
                assert!(message.contains("reflink"), "{message}");
                assert!(!layer.exists());
                eprintln!("note: reflink copies are unsupported here: {message}");
                return;
            }
        }
    }
    let snapshot = backend
        .snapshot(fx.dir.path().join("layer"), &fx.ws())
        .unwrap();
    assert_eq!(snapshot.kind().name(), "reflink-copy");
    let shared = Arc::new(Mutex::new(snapshot));
    let outcome = backend
        .run(&Request {
            argv: vec![
                "sh".into(),
                "-c".into(),
                "cat a.txt; echo changed > a.txt".into(),
            ],
            workspace: fx.ws(),
            filesystem: Filesystem::Snapshot(Arc::clone(&shared)),
            ..Request::default()
        })
        .unwrap();
    assert_eq!(outcome.stdout.text(), "on disk\n");
    assert_eq!(outcome.isolation.filesystem, "reflink-copy");
    assert_eq!(outcome.changes.len(), 1);
    assert!(
        outcome.changes[0]
            .diff
            .as_deref()
            .unwrap()
            .contains("+changed")
    );
    assert_eq!(
        std::fs::read_to_string(fx.ws().join("a.txt")).unwrap(),
        "on disk\n"
    );
}

#[test]
fn an_unprivileged_user_gets_the_same_walls() {
    if !available("unprivileged", ISOLATION) {
        return;
    }
    // SAFETY: getuid cannot fail.
    let root = unsafe { libc::getuid() } == 0;
    let setpriv = ["/usr/bin/setpriv", "/bin/setpriv"]
        .into_iter()
        .find(|p| Path::new(p).exists());
    let (true, Some(setpriv)) = (root, setpriv) else {
        eprintln!(
            "SKIPPED unprivileged: needs root and setpriv to become another user (the other tests already run unprivileged)"
        );
        return;
    };
    let fx = Fixture::new("unprivileged");
    fx.write("a.txt", "mine\n");
    let outside = fx.dir.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let nobody = "65534";
    let chown = Command::new("chown")
        .args(["-R", &format!("{nobody}:{nobody}")])
        .arg(fx.dir.path())
        .status()
        .unwrap();
    assert!(chown.success());
    let out = Command::new(setpriv)
        .args([
            &format!("--reuid={nobody}"),
            &format!("--regid={nobody}"),
            "--clear-groups",
        ])
        .arg(wright_bin())
        .args(["sandbox", "run", "--json", "--snapshot", "--root"])
        .arg(fx.ws())
        .args(["--", "sh", "-c"])
        .arg(format!(
            "id -u; echo changed > a.txt; echo no > {}/escaped; echo /etc > /etc/wright-escape",
            outside.display()
        ))
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("XDG_CACHE_HOME", fx.dir.path().join("cache"))
        .output()
        .unwrap();
    let json: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(text(&json["stdout"]), "65534\n", "{json}");
    assert_eq!(json["isolation"]["filesystem"], "overlay");
    assert_eq!(json["isolation"]["landlock"], "enforced");
    assert_eq!(json["changed_files"][0], "a.txt");
    assert_eq!(
        std::fs::read_to_string(fx.ws().join("a.txt")).unwrap(),
        "mine\n"
    );
    assert!(!outside.join("escaped").exists());
    assert!(!Path::new("/etc/wright-escape").exists());
}

#[test]
fn a_cancelled_run_ends_at_once_with_its_tree() {
    if !available("cancel", ISOLATION) {
        return;
    }
    let fx = Fixture::new("cancel");
    let cancel = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&cancel);
    let setter = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        flag.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    let started = Instant::now();
    let outcome = backend()
        .run(&Request {
            argv: vec!["sleep".into(), "60".into()],
            workspace: fx.ws(),
            cancel: Some(cancel),
            ..Request::default()
        })
        .unwrap();
    setter.join().unwrap();
    assert!(outcome.cancelled);
    assert!(!outcome.timed_out);
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(outcome.exit_code, 137);
}

#[test]
fn extra_writable_paths_are_granted_only_when_asked() {
    if !available("extra_writable", ISOLATION) {
        return;
    }
    let fx = Fixture::new("widen");
    let extra = fx.dir.path().join("extra");
    std::fs::create_dir_all(&extra).unwrap();
    let mut request = Request {
        argv: vec![
            "sh".into(),
            "-c".into(),
            format!("echo ok > {}/f", extra.display()),
        ],
        workspace: fx.ws(),
        ..Request::default()
    };
    let refused = backend().run(&request).unwrap();
    assert_ne!(refused.exit_code, 0);
    let refusal = wright::sandbox::escalation::classify(&request, &refused).unwrap();
    wright::sandbox::escalation::widen(&mut request, &refusal.widening().unwrap());
    assert_eq!(
        request.permissions,
        Permissions {
            network: Network::Off,
            extra_writable: vec![extra.clone()],
        }
    );
    let granted = backend().run(&request).unwrap();
    assert_eq!(granted.exit_code, 0, "{}", granted.stderr.text());
    assert_eq!(std::fs::read_to_string(extra.join("f")).unwrap(), "ok\n");
}

#[test]
fn a_zygote_serves_runs_in_turn_and_limits_are_counted_per_run() {
    if !available("zygote", ISOLATION) {
        return;
    }
    let fx = Fixture::new("zygote");
    let backend = backend();
    let mut prepared = backend.prepare().unwrap();
    let request = |script: &str, memory_mb: u64| Request {
        argv: vec!["bash".into(), "-c".into(), script.into()],
        workspace: fx.ws(),
        limits: Limits {
            memory_bytes: memory_mb << 20,
            ..Limits::default()
        },
        ..Request::default()
    };
    let greedy = "set -o pipefail; head -c 300000000 /dev/zero | tail -n 1 | wc -c";
    let oom = backend
        .run_prepared(&mut prepared, &request(greedy, 64))
        .unwrap();
    assert_ne!(oom.exit_code, 0);
    if oom.isolation.limits_enforced_by.contains("memory") {
        assert_eq!(oom.exceeded, [Exceeded::Memory]);
    }
    assert!(prepared.is_alive(), "the memory limit killed the zygote");
    for i in 0..3 {
        let next = backend
            .run_prepared(&mut prepared, &request(&format!("echo {i}"), 4096))
            .unwrap();
        assert_eq!(next.stdout.text(), format!("{i}\n"));
        assert!(next.exceeded.is_empty(), "{:?}", next.exceeded);
    }
}

#[test]
fn a_burst_through_the_pool_runs_every_command_within_the_concurrency_limit() {
    if !available("pool", ISOLATION) {
        return;
    }
    let fx = Fixture::new("pool");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let pool = Pool::new(
        backend(),
        PoolConfig {
            concurrency: 3,
            warm_zygotes: 2,
            spare_snapshots: 1,
            snapshot_base: fx.dir.path().join("cache/pool"),
        },
    );
    assert_eq!(pool.idle_zygotes(), 2);
    let ws = fx.ws();
    let outcomes = runtime.block_on(async {
        let runs = (0..12).map(|i| {
            let pool = Arc::clone(&pool);
            let request = Request {
                argv: vec!["sh".into(), "-c".into(), format!("echo {i}")],
                workspace: ws.clone(),
                ..Request::default()
            };
            tokio::spawn(async move { pool.run(request).await })
        });
        let mut outcomes = Vec::new();
        for run in runs.collect::<Vec<_>>() {
            outcomes.push(run.await.unwrap().unwrap());
        }
        outcomes
    });
    for (i, outcome) in outcomes.iter().enumerate() {
        assert_eq!(outcome.exit_code, 0);
        assert_eq!(outcome.stdout.text(), format!("{i}\n"));
    }
    let snapshot = pool.new_snapshot(&ws).unwrap();
    pool.recycle(snapshot);
    drop(pool);
}

#[test]
fn a_refused_command_says_so_on_stderr_without_json() {
    if !available("refusal_message", ISOLATION) {
        return;
    }
    let fx = Fixture::new("refusal");
    let mut child = Command::new(wright_bin())
        .args(["sandbox", "run", "--root"])
        .arg(fx.ws())
        .args(["--", "touch", "/etc/wright-refused"])
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("XDG_CACHE_HOME", fx.dir.path().join("cache"))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(1));
    assert!(stderr.contains("Read-only file system"), "{stderr}");
    assert!(
        stderr.contains("the sandbox refused access to /etc/wright-refused"),
        "{stderr}"
    );
}
