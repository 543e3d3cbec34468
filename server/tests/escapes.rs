//! The escapes found when the sandbox was attacked, each tried again: host Unix sockets
//! (under `$HOME`, beside the workspace, in the runtime folder, abstract), writes to `.git`
//! and `.wright` in place, nested namespaces, netfilter and datagram sockets, a FIFO left
//! in a snapshot, huge changed files, the disk and /tmp bounds, per-user kernel resources,
//! and the user's secrets. Each runs as the current user and, when that is root, as an
//! unprivileged one too (real users are not root).

use std::io::Read;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;
use wright::sandbox::{Backend, Exceeded, Filesystem, Limits, LocalBackend, Request, Snapshot};
use wright_tests::TempDir;

const PYTHON: &str = "/usr/bin/python3";
const NOBODY: u32 = 65534;

/// Who runs wright: the current user, or (when that is root) `nobody` through setpriv.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum User {
    Current,
    Nobody,
}

fn users() -> Vec<User> {
    // SAFETY: getuid cannot fail.
    let root = unsafe { libc::getuid() } == 0;
    if root && Path::new("/usr/bin/setpriv").exists() {
        vec![User::Current, User::Nobody]
    } else {
        vec![User::Current]
    }
}

/// Whether this machine has what the sandbox needs (else the test says so and passes: a
/// machine without user namespaces cannot show an escape closed).
fn sandbox_available(test: &str) -> bool {
    let out = Command::new(env!("CARGO_BIN_EXE_wright"))
        .args(["doctor", "--json"])
        .env_clear()
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    for primitive in report["sandbox"].as_array().unwrap() {
        let name = primitive["name"].as_str().unwrap();
        if ["user namespaces", "landlock", "seccomp"].contains(&name)
            && primitive["available"] != true
        {
            eprintln!(
                "SKIPPED {test}: {name} unavailable: {}",
                primitive["detail"]
            );
            return false;
        }
    }
    Path::new(PYTHON).exists()
}

/// A workspace, a home folder, a runtime folder and an outside folder, owned by the user the
/// test runs wright as.
struct Scene {
    dir: TempDir,
    user: User,
}

/// Where scenes live: the target's scratch folder, unless that is under /tmp or /dev/shm (a
/// clone under /tmp), which every run's private /tmp hides: then /var/tmp, so what a scene
/// puts beside the workspace or in its home is really there for the command to find or not.
fn scene_base() -> PathBuf {
    let target = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let hidden = |path: &Path| path.starts_with("/tmp") || path.starts_with("/dev/shm");
    let target_real = target.canonicalize().unwrap_or_else(|_| target.to_owned());
    if !hidden(&target_real) {
        return target.to_owned();
    }
    let var_tmp = Path::new("/var/tmp");
    match var_tmp.canonicalize() {
        Ok(real) if !hidden(&real) => var_tmp.to_owned(),
        _ => target.to_owned(),
    }
}

impl Scene {
    fn new(name: &str, user: User) -> Self {
        let dir = TempDir::new_in(&scene_base(), &format!("escape-{name}"));
        for folder in ["ws", "home", "run", "outside", "cache"] {
            std::fs::create_dir_all(dir.path().join(folder)).unwrap();
        }
        Self { dir, user }
    }

    fn path(&self, relative: &str) -> PathBuf {
        self.dir.path().join(relative)
    }

    fn write(&self, relative: &str, text: &str) -> PathBuf {
        self.dir.write(relative, text)
    }

    /// Hands every file made so far to the user wright runs as.
    fn hand_over(&self) {
        if self.user == User::Nobody {
            let status = Command::new("chown")
                .args(["-R", &format!("{NOBODY}:{NOBODY}")])
                .arg(self.dir.path())
                .status()
                .unwrap();
            assert!(status.success());
        }
    }

    /// `wright ARGS` as the scene's user, with the scene's home, runtime and cache folders.
    fn wright(&self, args: &[&str]) -> Output {
        self.hand_over();
        let mut command = match self.user {
            User::Current => Command::new(env!("CARGO_BIN_EXE_wright")),
            User::Nobody => {
                let mut c = Command::new("/usr/bin/setpriv");
                c.args([
                    &format!("--reuid={NOBODY}"),
                    &format!("--regid={NOBODY}"),
                    "--clear-groups",
                    env!("CARGO_BIN_EXE_wright"),
                ]);
                c
            }
        };
        command
            .args(args)
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", self.path("home"))
            .env("XDG_RUNTIME_DIR", self.path("run"))
            .env("XDG_CACHE_HOME", self.path("cache"))
            .stdin(Stdio::null());
        command.output().expect("running wright")
    }

    /// `wright sandbox run --json FLAGS -- CMD…` over the workspace.
    fn run(&self, flags: &[&str], cmd: &[&str]) -> Value {
        let root = self.path("ws");
        let mut args = vec!["sandbox", "run", "--json", "--root", root.to_str().unwrap()];
        args.extend(flags);
        args.push("--");
        args.extend(cmd);
        let out = self.wright(&args);
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "no JSON ({e}) as {:?}: {} {}",
                self.user,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        })
    }

    fn python(&self, flags: &[&str], script: &str) -> Value {
        self.run(flags, &[PYTHON, "-c", script])
    }
}

fn text(value: &Value) -> &str {
    value.as_str().unwrap_or("")
}

/// A listener on a Unix socket that counts the connections it accepted.
struct Listener {
    accepted: Arc<AtomicUsize>,
}

impl Listener {
    fn path(path: &Path) -> Self {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let listener = UnixListener::bind(path).unwrap();
        // Anyone may connect as far as permissions go: only the sandbox may refuse.
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o777)).unwrap();
        Self::serve(listener)
    }

    fn abstract_name(name: &str) -> Self {
        let address = std::os::unix::net::SocketAddr::from_abstract_name(name).unwrap();
        Self::serve(UnixListener::bind_addr(&address).unwrap())
    }

    fn serve(listener: UnixListener) -> Self {
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = Arc::clone(&accepted);
        listener.set_nonblocking(true).unwrap();
        std::thread::spawn(move || {
            let until = Instant::now() + Duration::from_secs(120);
            while Instant::now() < until {
                if listener.accept().is_ok() {
                    count.fetch_add(1, Ordering::Relaxed);
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        Self { accepted }
    }

    fn connections(&self) -> usize {
        // Connections still queued count too: give the acceptor a moment.
        std::thread::sleep(Duration::from_millis(50));
        self.accepted.load(Ordering::Relaxed)
    }
}

/// The Docker socket, the session bus, ssh-agent, anything: a host socket at a random path
/// under `$HOME`, beside the workspace, in the runtime folder, and an abstract one, none
/// reachable in place, in a snapshot, or with the host's network; the command's own sockets
/// under /tmp and the workspace work.
#[test]
fn host_unix_sockets_are_unreachable_and_the_commands_own_work() {
    if !sandbox_available("sockets") {
        return;
    }
    for user in users() {
        let scene = Scene::new("sockets", user);
        let tag = format!("{}-{}", std::process::id(), user as u8);
        let host = [
            scene.path(&format!("home/.cache/agent-{tag}/socket")),
            scene.path(&format!("outside/daemon-{tag}.sock")),
            scene.path("run/bus"),
        ];
        let listeners: Vec<Listener> = host.iter().map(|p| Listener::path(p)).collect();
        let abstract_name = format!("wright-escape-{tag}");
        let abstract_listener = Listener::abstract_name(&abstract_name);
        let script = format!(
            r#"
import socket, os
def reach(address):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(address); return "reached"
    except OSError as e:
        return "refused " + e.strerror
for path in {host:?}:
    print(reach(path))
print(reach("\0{abstract_name}"))
for folder in ["/tmp", os.getcwd()]:
    path = os.path.join(folder, "own.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); server.bind(path); server.listen()
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); client.connect("own.sock" if folder != "/tmp" else path)
    peer, _ = server.accept(); client.sendall(b"ping"); print("own", peer.recv(4).decode())
    os.unlink(path)
"#,
            host = host
                .iter()
                .map(|p| p.to_str().unwrap().to_owned())
                .collect::<Vec<_>>()
        );
        for flags in [&[][..], &["--snapshot"][..], &["--allow-net"][..]] {
            let json = scene.python(flags, &script);
            let out = text(&json["stdout"]);
            let lines: Vec<&str> = out.lines().collect();
            assert_eq!(lines.len(), 6, "{user:?} {flags:?}: {json}");
            for line in &lines[..4] {
                assert!(line.starts_with("refused"), "{user:?} {flags:?}: {json}");
            }
            assert_eq!(
                &lines[4..],
                ["own ping", "own ping"],
                "{user:?} {flags:?}: {json}"
            );
        }
        for (listener, path) in listeners.iter().zip(&host) {
            assert_eq!(
                listener.connections(),
                0,
                "{user:?} reached {}",
                path.display()
            );
        }
        assert_eq!(
            abstract_listener.connections(),
            0,
            "{user:?} reached the abstract one"
        );
    }
}

/// In place, a command cannot plant what the user's next `git status` or `git commit` runs
/// (hooks, `core.fsmonitor`), nor rewrite wright's own configuration, nor create a `.git`
/// where there was none; the rest of the workspace stays writable.
#[test]
fn git_and_wright_folders_are_read_only_in_place() {
    if !sandbox_available("git") {
        return;
    }
    for user in users() {
        let scene = Scene::new("git", user);
        scene.write("ws/.git/config", "[core]\n\tbare = false\n");
        scene.write("ws/.git/hooks/README", "hooks\n");
        scene.write(
            "ws/.wright/config.toml",
            "[agent]\napprove_commands = \"git push*\"\n",
        );
        let json = scene.run(
            &[],
            &[
                "sh",
                "-c",
                "printf '[core]\\n\\tfsmonitor = touch /tmp/pwned\\n' >> .git/config; \
                 echo '#!/bin/sh' > .git/hooks/pre-commit; \
                 echo 'x = 1' > .wright/config.toml; rm -rf .git/hooks; \
                 echo fine > allowed.txt; echo done",
            ],
        );
        assert_eq!(text(&json["stdout"]), "done\n", "{json}");
        assert!(
            text(&json["stderr"]).contains("Read-only file system"),
            "{json}"
        );
        let ws = scene.path("ws");
        assert_eq!(
            std::fs::read_to_string(ws.join(".git/config")).unwrap(),
            "[core]\n\tbare = false\n"
        );
        assert!(!ws.join(".git/hooks/pre-commit").exists());
        assert!(ws.join(".git/hooks/README").exists());
        assert!(
            std::fs::read_to_string(ws.join(".wright/config.toml"))
                .unwrap()
                .contains("git push")
        );
        assert_eq!(
            std::fs::read_to_string(ws.join("allowed.txt")).unwrap(),
            "fine\n"
        );

        // Where there is no .git, none can be made, and none is left behind.
        let bare = Scene::new("nogit", user);
        let json = bare.run(
            &[],
            &[
                "sh",
                "-c",
                "mkdir -p .git/hooks && echo evil > .git/config; ls -a",
            ],
        );
        assert!(
            text(&json["stderr"]).contains("Read-only file system"),
            "{json}"
        );
        assert!(!bare.path("ws/.git").exists() && !bare.path("ws/.wright").exists());
        // In a snapshot the writes stay in the layer, as every write there does.
        let json = scene.run(
            &["--snapshot"],
            &["sh", "-c", "echo x >> .git/config && echo ok"],
        );
        assert_eq!(text(&json["stdout"]), "ok\n", "{json}");
        assert_eq!(
            std::fs::read_to_string(ws.join(".git/config")).unwrap(),
            "[core]\n\tbare = false\n"
        );
    }
}

/// `clone` with a namespace flag, `clone3`, netfilter netlink and Unix datagram sockets are
/// refused; interface listing over `NETLINK_ROUTE` works.
#[test]
fn nested_namespaces_netfilter_and_datagram_sockets_are_refused() {
    if !sandbox_available("nested") {
        return;
    }
    let script = r#"
import ctypes, os, socket
libc = ctypes.CDLL(None, use_errno=True)
clone = {"x86_64": 56, "aarch64": 220}[os.uname().machine]
for name, flag in [("user", 0x10000000), ("net", 0x40000000), ("mount", 0x00020000), ("pid", 0x20000000)]:
    r = libc.syscall(clone, flag | 17, 0, 0, 0, 0)
    if r == 0:
        os._exit(0)
    print("clone", name, r, ctypes.get_errno())
print("clone3", libc.syscall(435, 0, 0), ctypes.get_errno())
for proto, name in [(12, "netfilter"), (0, "route")]:
    try:
        socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, proto); print(name, "opened")
    except OSError as e:
        print(name, "refused", e.errno)
try:
    socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); print("dgram opened")
except OSError as e:
    print("dgram refused", e.errno)
"#;
    for user in users() {
        let scene = Scene::new("nested", user);
        for flags in [&[][..], &["--allow-net"][..]] {
            let json = scene.python(flags, script);
            assert_eq!(
                text(&json["stdout"]),
                "clone user -1 1\nclone net -1 1\nclone mount -1 1\nclone pid -1 1\n\
                 clone3 -1 38\nnetfilter refused 1\nroute opened\ndgram refused 1\n",
                "{user:?} {flags:?}: {json}"
            );
        }
    }
}

/// Runs wright and waits at most `limit`, returning its output and its peak memory (its own
/// and its waited-for descendants', from `wait4`); kills it past the limit.
fn run_bounded(mut command: Command, limit: Duration) -> (Output, u64) {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id() as libc::pid_t;
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let readers = (
        std::thread::spawn(move || {
            let mut b = Vec::new();
            let _ = stdout.read_to_end(&mut b);
            b
        }),
        std::thread::spawn(move || {
            let mut b = Vec::new();
            let _ = stderr.read_to_end(&mut b);
            b
        }),
    );
    let started = Instant::now();
    let mut status = 0;
    // SAFETY: a zeroed rusage is a valid out-parameter.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: waiting for our own child without blocking.
        let done = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        if done == pid {
            break;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("wright did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // Reaped by wait4 above; the handle has nothing left to wait for.
    drop(child);
    let output = Output {
        status: std::os::unix::process::ExitStatusExt::from_raw(status),
        stdout: readers.0.join().unwrap(),
        stderr: readers.1.join().unwrap(),
    };
    (output, usage.ru_maxrss as u64 * 1024)
}

/// A tracked file replaced by a FIFO, and three huge files changed, in a snapshot: wright
/// reports them without blocking on the FIFO or reading the big files whole.
#[test]
fn a_fifo_and_huge_changed_files_are_reported_without_reading_them() {
    if !sandbox_available("fifo") {
        return;
    }
    let scene = Scene::new("fifo", User::Current);
    scene.write("ws/tracked.txt", "text\n");
    for i in 0..3 {
        let file = std::fs::File::create(scene.path(&format!("ws/big{i}.bin"))).unwrap();
        // Sparse: the test writes nothing, wright would still read 64 MB of zeros.
        file.set_len(64 << 20).unwrap();
    }
    let mut command = Command::new(env!("CARGO_BIN_EXE_wright"));
    command
        .args(["sandbox", "run", "--json", "--snapshot", "--root"])
        .arg(scene.path("ws"))
        .args([
            "--",
            "sh",
            "-c",
            "rm tracked.txt && mkfifo tracked.txt && truncate -s 65M big0.bin big1.bin big2.bin",
        ])
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", scene.path("home"))
        .env("XDG_CACHE_HOME", scene.path("cache"));
    let (out, peak) = run_bounded(command, Duration::from_secs(60));
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["exit_code"], 0, "{json}");
    let changed: Vec<&str> = json["changed_files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(changed, ["big0.bin", "big1.bin", "big2.bin", "tracked.txt"]);
    // Reading one of them whole would be 64 MB twice; the whole run stays far below.
    assert!(peak < 60 << 20, "wright peaked at {} MB", peak >> 20);
}

fn backend() -> LocalBackend {
    LocalBackend::with_helper(PathBuf::from(env!("CARGO_BIN_EXE_wright")))
}

/// `sandbox.disk_mb`: what a snapshot run writes to its layer, /tmp and /dev/shm together is
/// bounded (each file under the per-file bound, together over it); /tmp has a size.
#[test]
fn a_snapshot_runs_writes_are_bounded_and_tmp_has_a_size() {
    if !sandbox_available("disk") {
        return;
    }
    let scene = Scene::new("disk", User::Current);
    let backend = backend();
    let snapshot = backend
        .snapshot(scene.path("cache/layer"), &scene.path("ws"))
        .unwrap();
    let shared = Arc::new(std::sync::Mutex::new(snapshot));
    let request = Request {
        argv: vec![
            "sh".into(),
            "-c".into(),
            "for i in 1 2 3 4 5; do dd if=/dev/zero of=f$i bs=1M count=30 status=none; \
             sleep 0.5; done; echo survived"
                .into(),
        ],
        workspace: scene.path("ws"),
        filesystem: Filesystem::Snapshot(Arc::clone(&shared)),
        limits: Limits {
            disk_bytes: 64 << 20,
            timeout: Duration::from_secs(60),
            ..Limits::default()
        },
        ..Request::default()
    };
    let outcome = backend.run(&request).unwrap();
    assert!(outcome.exceeded.contains(&Exceeded::Disk), "{outcome:?}");
    assert!(!outcome.stdout.text().contains("survived"));
    assert_ne!(outcome.exit_code, 0);
    drop(request);

    let outcome = backend
        .run(&Request {
            argv: vec![
                "sh".into(),
                "-c".into(),
                "dd if=/dev/zero of=/tmp/big bs=1M count=32 status=none; df -m /tmp | tail -1"
                    .into(),
            ],
            workspace: scene.path("ws"),
            limits: Limits {
                tmp_bytes: 16 << 20,
                ..Limits::default()
            },
            ..Request::default()
        })
        .unwrap();
    assert!(
        outcome.stderr.text().contains("No space left on device"),
        "{outcome:?}"
    );
    Snapshot::discard(
        Arc::try_unwrap(shared)
            .map_err(|_| ())
            .unwrap()
            .into_inner()
            .unwrap(),
    )
    .unwrap();
}

/// A command holding every inotify instance it can get leaves the host's programs theirs.
#[test]
fn a_command_cannot_take_all_of_the_users_inotify_instances() {
    if !sandbox_available("inotify") {
        return;
    }
    let scene = Scene::new("inotify", User::Current);
    let script = r#"
import ctypes, time, sys
libc = ctypes.CDLL(None, use_errno=True)
held = []
while True:
    fd = libc.inotify_init1(0)
    if fd < 0: break
    held.append(fd)
print(len(held)); sys.stdout.flush()
open("ready", "w").close()
time.sleep(3)
"#;
    let started = Instant::now();
    let runner = {
        let ws = scene.path("ws");
        let cache = scene.path("cache");
        std::thread::spawn(move || {
            Command::new(env!("CARGO_BIN_EXE_wright"))
                .args(["sandbox", "run", "--json", "--root"])
                .arg(ws)
                .args(["--", PYTHON, "-c", script])
                .env_clear()
                .env("PATH", "/usr/bin:/bin")
                .env("XDG_CACHE_HOME", cache)
                .output()
                .unwrap()
        })
    };
    // While the command holds its instances (it says so in the workspace), this process (the
    // same user) still gets one.
    let ready = scene.path("ws/ready");
    while !ready.exists() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the command never got ready"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: inotify_init1 and close on our own descriptor.
    let fd = unsafe { libc::inotify_init1(libc::IN_CLOEXEC) };
    assert!(
        fd >= 0,
        "the host got no inotify instance while the command ran"
    );
    // SAFETY: closing our own descriptor.
    unsafe { libc::close(fd) };
    let out = runner.join().unwrap();
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    let held: usize = text(&json["stdout"])
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("{json}"));
    let host: usize = std::fs::read_to_string("/proc/sys/user/max_inotify_instances")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(held > 0 && held <= host / 4, "held {held} of {host}");
    assert!(started.elapsed() < Duration::from_secs(60));
}

/// The user's credential stores, wright's own configuration (with its keys), data and cache,
/// and what `sandbox.deny_read` names are unreadable to a command.
#[test]
fn the_users_secrets_are_unreadable() {
    if !sandbox_available("secrets") {
        return;
    }
    for user in users() {
        let scene = Scene::new("secrets", user);
        let secrets = [
            "home/.ssh/id_ed25519",
            "home/.aws/credentials",
            "home/.netrc",
            "home/.git-credentials",
            "home/.cargo/credentials.toml",
            "home/.config/wright/config.toml",
            "home/.local/share/wright/sessions/s1.jsonl",
            "cache/wright/index/meta.json",
        ];
        for (i, secret) in secrets.iter().enumerate() {
            scene.write(secret, &format!("SECRET-{i}\n"));
        }
        scene.write("home/.bashrc", "readable\n");
        scene.write("home/private/notes.txt", "SECRET-notes\n");
        let paths: Vec<String> = secrets
            .iter()
            .chain(["home/.bashrc"].iter())
            .map(|s| scene.path(s).to_str().unwrap().to_owned())
            .collect();
        let command = format!(
            "for f in {}; do cat \"$f\" 2>/dev/null; done; echo end",
            paths.join(" ")
        );
        let json = scene.run(&[], &["sh", "-c", &command]);
        assert_eq!(text(&json["stdout"]), "readable\nend\n", "{user:?}: {json}");

        // sandbox.deny_read adds paths (the library's request carries the list).
        let outcome = backend()
            .run(&Request {
                argv: vec![
                    "cat".into(),
                    scene
                        .path("home/private/notes.txt")
                        .to_str()
                        .unwrap()
                        .into(),
                ],
                workspace: scene.path("ws"),
                deny_read: vec![scene.path("home/private")],
                ..Request::default()
            })
            .unwrap();
        assert!(!outcome.stdout.text().contains("SECRET"), "{outcome:?}");
    }
}

/// Installs, in a child about to exec wright, a seccomp filter that refuses what makes a
/// user namespace (`unshare` and `clone` with `CLONE_NEWUSER`): what a container or a
/// hardened kernel does, so wright finds its namespaces refused.
fn refuse_user_namespaces(command: &mut Command) {
    use std::os::unix::process::CommandExt;
    const LD_W_ABS: u16 = 0x20;
    const JEQ_K: u16 = 0x15;
    const JSET_K: u16 = 0x45;
    const RET_K: u16 = 0x06;
    let op = |code, jt, jf, k| libc::sock_filter { code, jt, jf, k };
    let eperm = 0x0005_0000 | libc::EPERM as u32;
    let filter = [
        op(LD_W_ABS, 0, 0, 0), // nr
        op(JEQ_K, 0, 1, libc::SYS_unshare as u32),
        op(RET_K, 0, 0, eperm),
        op(JEQ_K, 0, 3, libc::SYS_clone as u32),
        op(LD_W_ABS, 0, 0, 16), // args[0], low half
        op(JSET_K, 0, 1, libc::CLONE_NEWUSER as u32),
        op(RET_K, 0, 0, eperm),
        op(RET_K, 0, 0, 0x7fff_0000),
    ];
    // SAFETY: between fork and exec: prctl and seccomp on a filter owned by the closure.
    unsafe {
        command.pre_exec(move || {
            let prog = libc::sock_fprog {
                len: filter.len() as u16,
                filter: filter.as_ptr().cast_mut(),
            };
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
                || libc::syscall(libc::SYS_seccomp, libc::SECCOMP_SET_MODE_FILTER, 0, &prog) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Where user namespaces are refused: without the user's consent no command runs and the
/// error names the cause; with `sandbox.fallback = "landlock"` the landlock tier holds the
/// same escapes closed that it promises to (writes outside, the network, host sockets, the
/// secrets), and says what it does not promise.
#[test]
fn where_namespaces_are_refused_the_landlock_tier_holds_what_it_promises() {
    if !sandbox_available("landlock tier") {
        return;
    }
    for user in users() {
        let scene = Scene::new("landlock-tier", user);
        scene.write("home/.ssh/id_ed25519", "SECRET-key\n");
        scene.write("ws/a.txt", "mine\n");
        let socket = scene.path(&format!("home/agent-{}.sock", user as u8));
        let listener = Listener::path(&socket);
        let wright = |flags: &[&str], script: &str| -> Output {
            scene.hand_over();
            let mut command = match user {
                User::Current => Command::new(env!("CARGO_BIN_EXE_wright")),
                User::Nobody => {
                    let mut c = Command::new("/usr/bin/setpriv");
                    c.args([
                        &format!("--reuid={NOBODY}"),
                        &format!("--regid={NOBODY}"),
                        "--clear-groups",
                        env!("CARGO_BIN_EXE_wright"),
                    ]);
                    c
                }
            };
            command
                .args(["sandbox", "run", "--json", "--root"])
                .arg(scene.path("ws"))
                .args(flags)
                .args(["--", PYTHON, "-c", script])
                .env_clear()
                .env("PATH", "/usr/local/bin:/usr/bin:/bin")
                .env("HOME", scene.path("home"))
                .env("XDG_CONFIG_HOME", scene.path("home/.config"))
                .env("XDG_CACHE_HOME", scene.path("cache"))
                .env("TMPDIR", scene.path("outside"));
            refuse_user_namespaces(&mut command);
            command.output().unwrap()
        };
        let script = format!(
            r#"
import os, socket
def attempt(what, action):
    try:
        action(); print(what, "done")
    except OSError as e:
        print(what, "refused")
def write_outside(): open({outside:?}, "w").write("escaped")
def connect_host():
    s = socket.socket(socket.AF_UNIX); s.connect({socket:?})
def network():
    socket.create_connection(("127.0.0.1", 9), timeout=2)
def secret(): print(open({secret:?}).read())
attempt("outside", write_outside)
attempt("host socket", connect_host)
attempt("network", network)
attempt("secret", secret)
attempt("workspace", lambda: open("b.txt", "w").write("ok"))
attempt("tmp", lambda: open(os.path.join(os.environ["TMPDIR"], "t"), "w").write("ok"))
a, b = socket.socketpair(); a.sendall(b"x"); print("pair", b.recv(1).decode())
"#,
            outside = scene.path("outside/escaped").to_str().unwrap(),
            socket = socket.to_str().unwrap(),
            secret = scene.path("home/.ssh/id_ed25519").to_str().unwrap(),
        );
        // Without consent: refused, the cause named.
        let out = wright(&[], &script);
        assert_eq!(out.status.code(), Some(1), "{user:?}: {out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("cannot isolate commands here"), "{stderr}");
        assert!(stderr.contains("sandbox.fallback"), "{stderr}");
        // With the user's consent, in their own configuration.
        scene.write(
            "home/.config/wright/config.toml",
            "[sandbox]\nfallback = \"landlock\"\n",
        );
        let out = wright(&[], &script);
        let json: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
        assert_eq!(
            text(&json["stdout"]),
            "outside refused\nhost socket refused\nnetwork refused\nsecret refused\n\
             workspace done\ntmp done\npair x\n",
            "{user:?}: {json}"
        );
        assert_eq!(json["isolation"]["pid"], "shared");
        assert_eq!(json["isolation"]["filesystem"], "landlock");
        assert!(!scene.path("outside/escaped").exists());
        assert_eq!(listener.connections(), 0);
        // A snapshot needs namespaces: refused, saying so.
        let out = wright(&["--snapshot"], "print(1)");
        assert_eq!(out.status.code(), Some(1));
        assert!(String::from_utf8_lossy(&out.stderr).contains("landlock tier cannot"));
    }
}
