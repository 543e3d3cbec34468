//! `bench sandbox`: issue 05's measurements of the sandbox against bubblewrap doing the same
//! isolation of `true` (user, mount, pid, net, ipc and uts namespaces, read-only root, the
//! workspace writable, private /tmp, /dev and /proc) in the same run: start overhead p50/p99,
//! snapshot creation for 5,000- and 50,000-file trees against `cp -r`, commands per second
//! with 32 in parallel, and memory per idle sandbox. `bench.rs` records the section.
//!
//! Runs from a release build (handed over like `bench index`), so the runner's own code is
//! optimised; the zygote is the release `wright` binary.

use std::fmt::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use wright::sandbox::pool::PoolConfig;
use wright::sandbox::{Backend, Filesystem, LocalBackend, Pool, Request, Snapshot};

const USAGE: &str = "usage: cargo xtask bench sandbox [--runs N]

  --runs N   commands timed per start-overhead series (default 300)";

const PARALLEL: usize = 32;
const PARALLEL_COMMANDS: usize = 640;
const TREE_SIZES: [usize; 2] = [5_000, 50_000];
const SNAPSHOT_RUNS: usize = 30;
const COPY_RUNS: usize = 3;
/// The pause before each timed snapshot or in-place run.
const SETTLE: Duration = Duration::from_millis(20);

pub fn run(args: &[String]) -> anyhow::Result<Option<String>> {
    let mut runs = 300;
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "--runs" => runs = rest.next().context(USAGE)?.parse().context(USAGE)?,
            _ => bail!("unknown argument {arg:?}\n{USAGE}"),
        }
    }
    let bwrap_version = Command::new("bwrap")
        .arg("--version")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .context("bubblewrap is missing; install it with\n  apt-get install -y bubblewrap")?;
    if cfg!(debug_assertions) {
        return super::shared::hand_over_to_release("sandbox", args).map(|()| None);
    }
    let started = Instant::now();
    let exe = std::env::current_exe()?;
    let release = exe.parent().context("the xtask binary has a folder")?;
    let wright = release.join("wright");
    let work = release
        .parent()
        .context("target/release has a parent")?
        .join("bench-sandbox");
    let ws = work.join("ws");
    let _ = wright::sandbox::remove_tree(&work);
    std::fs::create_dir_all(ws.join("src"))?;
    std::fs::write(ws.join("src/main.rs"), "fn main() {}\n")?;
    let ws = ws.canonicalize()?;
    let backend = LocalBackend::with_helper(wright.clone());
    let runtime = tokio::runtime::Runtime::new()?;

    let request = |argv: &[&str], filesystem: Filesystem| Request {
        argv: argv.iter().map(|a| a.to_string()).collect(),
        workspace: ws.clone(),
        filesystem,
        ..Request::default()
    };
    let pool = Pool::new(
        LocalBackend::with_helper(wright.clone()),
        PoolConfig {
            concurrency: PARALLEL,
            warm_zygotes: PARALLEL,
            spare_snapshots: 2,
            snapshot_base: work.join("layers"),
        },
    );
    // The series are interleaved, one run of each in turn, so a shared machine's load falls
    // on all of them alike.
    progress(&format!("start overhead, {runs} runs of `true` each"));
    let mut times: [Vec<Duration>; 5] = Default::default();
    for _ in 0..runs {
        for (kind, series) in times.iter_mut().enumerate() {
            let t = Instant::now();
            match kind {
                0 => spawn(Command::new("true"))?,
                1 => spawn(bwrap_command(&ws, &["true"]))?,
                2 => {
                    let mut command = Command::new(&wright);
                    command
                        .args(["sandbox", "run", "--root"])
                        .arg(&ws)
                        .args(["--", "true"])
                        .env("XDG_CACHE_HOME", work.join("cache"));
                    spawn(command)?;
                }
                3 => check(
                    backend
                        .run(&request(&["true"], Filesystem::InPlace))?
                        .exit_code,
                )?,
                _ => check(
                    runtime
                        .block_on(pool.run(request(&["true"], Filesystem::InPlace)))?
                        .exit_code,
                )?,
            }
            series.push(t.elapsed());
        }
    }
    for series in &mut times {
        series.sort();
    }
    let [bare, bwrap, cli, direct, pooled] = times;

    progress("snapshot creation");
    let mut snapshot_rows = Vec::new();
    for files in TREE_SIZES {
        let tree = work.join(format!("tree-{files}"));
        make_tree(&tree, files)?;
        let tree = tree.canonicalize()?;
        let mut create = Vec::new();
        let mut first_run = Vec::new();
        // A run in a fresh snapshot and one in place, in turn, so the machine's load falls on
        // both alike; the snapshot's cost is the median of their differences. A pause before
        // each timed run lets the kernel finish the previous run's deferred teardown, which
        // the next run would otherwise pay for.
        let mut in_place = Vec::new();
        let mut extra_ms = Vec::new();
        for i in 0..SNAPSHOT_RUNS {
            let t = Instant::now();
            let snapshot = Snapshot::create(work.join(format!("snap-{files}-{i}")), &tree)?;
            create.push(t.elapsed());
            let shared = Arc::new(std::sync::Mutex::new(snapshot));
            let req = Request {
                workspace: tree.clone(),
                ..request(&["true"], Filesystem::Snapshot(Arc::clone(&shared)))
            };
            std::thread::sleep(SETTLE);
            let t = Instant::now();
            check(backend.run(&req)?.exit_code)?;
            let snapshot_run = t.elapsed();
            first_run.push(snapshot_run);
            drop(req);
            wright::sandbox::remove_tree(&work.join(format!("snap-{files}-{i}")))?;
            let req = Request {
                workspace: tree.clone(),
                ..request(&["true"], Filesystem::InPlace)
            };
            std::thread::sleep(SETTLE);
            let t = Instant::now();
            check(backend.run(&req)?.exit_code)?;
            let place_run = t.elapsed();
            in_place.push(place_run);
            extra_ms.push(ms(snapshot_run) - ms(place_run));
        }
        in_place.sort();
        extra_ms.sort_by(f64::total_cmp);
        let mut copies = Vec::new();
        for i in 0..COPY_RUNS {
            let target = work.join(format!("copy-{files}-{i}"));
            let t = Instant::now();
            let status = Command::new("cp")
                .arg("-r")
                .arg(&tree)
                .arg(&target)
                .status()?;
            copies.push(t.elapsed());
            if !status.success() {
                bail!("cp -r failed");
            }
            std::fs::remove_dir_all(&target)?;
        }
        create.sort();
        first_run.sort();
        copies.sort();
        snapshot_rows.push(SnapshotRow {
            files,
            mount_ms: extra_ms[extra_ms.len() / 2],
            create: percentile(&create, 0.5),
            first_run: percentile(&first_run, 0.5),
            in_place: percentile(&in_place, 0.5),
            copy: percentile(&copies, 0.5),
        });
        progress(&format!("  {files} files done"));
    }

    progress(&format!(
        "{PARALLEL_COMMANDS} commands, {PARALLEL} at a time"
    ));
    // Each command's own run time under the burst (the pool's queue wait excluded; bubblewrap's
    // workers have no queue), and the whole burst's rate.
    let t = Instant::now();
    let mut wright_burst = runtime.block_on(async {
        let handles: Vec<_> = (0..PARALLEL_COMMANDS)
            .map(|_| {
                let pool = Arc::clone(&pool);
                let req = request(&["true"], Filesystem::InPlace);
                tokio::spawn(async move { pool.run(req).await })
            })
            .collect();
        let mut durations = Vec::new();
        for handle in handles {
            let outcome = handle.await??;
            check(outcome.exit_code)?;
            durations.push(outcome.duration);
        }
        anyhow::Ok(durations)
    })?;
    let wright_rate = PARALLEL_COMMANDS as f64 / t.elapsed().as_secs_f64();
    let t = Instant::now();
    let mut bwrap_burst = std::thread::scope(|scope| -> anyhow::Result<Vec<Duration>> {
        let workers: Vec<_> = (0..PARALLEL)
            .map(|_| {
                scope.spawn(|| -> anyhow::Result<Vec<Duration>> {
                    (0..PARALLEL_COMMANDS / PARALLEL)
                        .map(|_| {
                            let t = Instant::now();
                            spawn(bwrap_command(&ws, &["true"]))?;
                            Ok(t.elapsed())
                        })
                        .collect()
                })
            })
            .collect();
        let mut durations = Vec::new();
        for worker in workers {
            durations.extend(
                worker
                    .join()
                    .map_err(|_| anyhow::anyhow!("a worker panicked"))??,
            );
        }
        Ok(durations)
    })?;
    let bwrap_rate = PARALLEL_COMMANDS as f64 / t.elapsed().as_secs_f64();
    wright_burst.sort();
    bwrap_burst.sort();

    progress("memory per idle sandbox");
    // The pool's idle zygotes would be counted as this process's children.
    drop(pool);
    let prepared = backend.prepare()?;
    std::thread::sleep(Duration::from_millis(200));
    let idle_zygote = pss_kb(prepared.pid());
    drop(prepared);
    let wright_idle = idle_sandbox_pss(
        || {
            let backend = LocalBackend::with_helper(wright.clone());
            let req = request(&["sleep", "3"], Filesystem::InPlace);
            std::thread::spawn(move || backend.run(&req).map(drop))
        },
        &["wright"],
    )?;
    let bwrap_idle = idle_sandbox_pss(
        || {
            let mut child = bwrap_command(&ws, &["sleep", "3"])
                .spawn()
                .expect("running bwrap");
            std::thread::spawn(move || child.wait().map(drop))
        },
        &["bwrap"],
    )?;

    let mut out = String::new();
    let _ = writeln!(
        out,
        "Peer: {bwrap_version}, `bwrap --unshare-user --unshare-pid --unshare-net --unshare-ipc \
         --unshare-uts --die-with-parent --new-session --ro-bind / / --bind WS WS --tmpfs /tmp \
         --dev /dev --proc /proc --clearenv --chdir WS true`. wright adds what bubblewrap does \
         not do here: landlock, a seccomp filter, capabilities dropped, a cgroup per zygote, \
         which serves one run at a time ({}), and rlimits. Start overhead is the wall time of a sandboxed `true` minus the \
         median of a bare `true` ({:.2} ms).\n",
        backend.cgroups().describe(),
        ms(percentile(&bare, 0.5)),
    );
    let _ = writeln!(
        out,
        "| start overhead of `true` | p50 | p99 | p50 vs bubblewrap |"
    );
    let _ = writeln!(out, "|---|---|---|---|");
    let base = percentile(&bare, 0.5);
    let overhead = |d: &[Duration], p| ms(percentile(d, p).saturating_sub(base));
    for (name, data) in [
        ("bubblewrap", &bwrap),
        (
            "wright, pool (zygotes in their cgroups, ready; the server's path)",
            &pooled,
        ),
        (
            "wright, library call without the pool (a zygote started per run)",
            &direct,
        ),
        ("`wright sandbox run` (a whole CLI process)", &cli),
    ] {
        let _ = writeln!(
            out,
            "| {name} | {:.2} ms | {:.2} ms | {:.2}× |",
            overhead(data, 0.5),
            overhead(data, 0.99),
            overhead(data, 0.5) / overhead(&bwrap, 0.5)
        );
    }
    let _ = writeln!(
        out,
        "\nTarget: below bubblewrap's. \n\n| snapshot of a tree | create the layer | first `true` in it | `true` in place | `cp -r` | `cp -r` ÷ first `true` in the snapshot |\n|---|---|---|---|---|---|"
    );
    for row in &snapshot_rows {
        let _ = writeln!(
            out,
            "| {} files | {:.3} ms | {:.2} ms | {:.2} ms | {:.0} ms | {:.0}× |",
            row.files,
            ms(row.create),
            ms(row.first_run),
            ms(row.in_place),
            ms(row.copy),
            ms(row.copy) / ms(row.first_run)
        );
    }
    let _ = writeln!(
        out,
        "\nSnapshot cost: creating the layer ({}) plus the overlay mount and its removal, \
         measured as the median difference between a run in a fresh snapshot and a run in place \
         taken in turn ({}; a negative difference is this shared machine's noise). Target: \
         flat and under 20 ms.\n",
        snapshot_rows
            .iter()
            .map(|r| format!("{:.2} ms for {} files", ms(r.create), r.files))
            .collect::<Vec<_>>()
            .join(", "),
        snapshot_rows
            .iter()
            .map(|r| format!("{:+.2} ms for {} files", r.mount_ms, r.files))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let _ = writeln!(
        out,
        "| {PARALLEL_COMMANDS} × `true`, {PARALLEL} in parallel | commands/s | each command's time p50 | p99 |\n|---|---|---|---|\n| bubblewrap | {bwrap_rate:.0} | {:.2} ms | {:.2} ms |\n| wright pool | {wright_rate:.0} ({:.2}×) | {:.2} ms | {:.2} ms |\n",
        ms(percentile(&bwrap_burst, 0.5)),
        ms(percentile(&bwrap_burst, 0.99)),
        wright_rate / bwrap_rate,
        ms(percentile(&wright_burst, 0.5)),
        ms(percentile(&wright_burst, 0.99)),
    );
    let _ = writeln!(
        out,
        "| memory per idle sandbox (PSS, the command itself excluded) | KiB |\n|---|---|\n| bubblewrap running `sleep` | {bwrap_idle} |\n| wright running `sleep` (zygote + helper + init) | {wright_idle} |\n| wright pool, an idle zygote | {idle_zygote} |"
    );
    let _ = write!(
        out,
        "\nMeasured in {:.0} s.",
        started.elapsed().as_secs_f64()
    );
    let _ = wright::sandbox::remove_tree(&work);
    Ok(Some(out))
}

struct SnapshotRow {
    files: usize,
    /// Median extra time of a run in a fresh snapshot over one in place (the overlay mount).
    mount_ms: f64,
    create: Duration,
    first_run: Duration,
    in_place: Duration,
    copy: Duration,
}

fn progress(message: &str) {
    eprintln!("bench sandbox: {message}");
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn check(code: i32) -> anyhow::Result<()> {
    if code != 0 {
        bail!("a sandboxed `true` exited with {code}");
    }
    Ok(())
}

fn spawn(mut command: Command) -> anyhow::Result<()> {
    let status = command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()?;
    if !status.success() {
        bail!("{command:?} failed: {status}");
    }
    Ok(())
}

fn bwrap_command(ws: &Path, argv: &[&str]) -> Command {
    let mut command = Command::new("bwrap");
    command
        .args([
            "--unshare-user",
            "--unshare-pid",
            "--unshare-net",
            "--unshare-ipc",
            "--unshare-uts",
            "--die-with-parent",
            "--new-session",
            "--ro-bind",
            "/",
            "/",
        ])
        .arg("--bind")
        .arg(ws)
        .arg(ws)
        .args([
            "--tmpfs",
            "/tmp",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "--clearenv",
        ])
        .args(["--setenv", "PATH", "/usr/bin:/bin", "--chdir"])
        .arg(ws)
        .args(argv);
    command
}

/// A tree of `files` small files, 100 per folder (kept between runs).
fn make_tree(dir: &Path, files: usize) -> anyhow::Result<()> {
    for i in 0..files {
        let folder = dir.join(format!("d{:04}", i / 100));
        if i % 100 == 0 {
            std::fs::create_dir_all(&folder)?;
        }
        std::fs::write(
            folder.join(format!("f{i}.rs")),
            format!("pub fn f{i}() -> u32 {{ {i} }}\n"),
        )?;
    }
    Ok(())
}

/// Proportional set size of a process, in KiB.
fn pss_kb(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup"))
        .unwrap_or_default()
        .lines()
        .find_map(|line| line.strip_prefix("Pss:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Starts a sandbox running `sleep`, then sums the PSS of its own processes (by command name;
/// the `sleep` excluded) once they are all up.
fn idle_sandbox_pss<E: std::fmt::Debug + Send>(
    start: impl FnOnce() -> std::thread::JoinHandle<Result<(), E>>,
    names: &[&str],
) -> anyhow::Result<u64> {
    let me = std::process::id();
    let handle = start();
    std::thread::sleep(Duration::from_millis(1000));
    let mut total = 0;
    // Processes descending from this one whose name is the sandbox's.
    let processes: Vec<(u32, u32, String)> = std::fs::read_dir("/proc")?
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let (comm, rest) = stat.split_once(") ")?;
            let comm = comm.split_once(" (")?.1.to_owned();
            let ppid = rest.split(' ').nth(1)?.parse().ok()?;
            Some((pid, ppid, comm))
        })
        .collect();
    let mut ours = vec![me];
    let mut changed = true;
    while changed {
        changed = false;
        for (pid, ppid, _) in &processes {
            if ours.contains(ppid) && !ours.contains(pid) {
                ours.push(*pid);
                changed = true;
            }
        }
    }
    let mut counted = Vec::new();
    for (pid, _, comm) in &processes {
        if *pid != me && ours.contains(pid) && names.iter().any(|n| comm.starts_with(n)) {
            total += pss_kb(*pid);
            counted.push(format!("{comm} {pid}: {} KiB", pss_kb(*pid)));
        }
    }
    progress(&format!("  counted {}", counted.join(", ")));
    handle
        .join()
        .map_err(|_| anyhow::anyhow!("the sandbox thread panicked"))?
        .map_err(|e| anyhow::anyhow!("the idle sandbox failed: {e:?}"))?;
    Ok(total)
}
