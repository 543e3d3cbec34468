//! The pool: a concurrency limit with a first-come queue in front of the backend, and the
//! parts of a run that can be prepared ahead — zygotes already started in their cgroups
//! (each serves one run at a time, then the next) and empty snapshot layers — refilled in the
//! background, so a burst of commands or sessions finds them ready and start latency stays
//! flat. Used snapshot layers are deleted in the background, never on a command's path. An
//! attached run (`attached.rs`) takes a prepared zygote too, for good.

// host paths: the sandbox's own folders in the user's cache.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::Semaphore;

use super::local::fresh_snapshot_dir;
use super::snapshot::remove_tree;
use super::{LocalBackend, Outcome, Prepared, Request, SandboxError, Snapshot};

/// How much the pool prepares and allows.
#[derive(Debug, Clone)]
pub struct PoolConfig {
    /// Commands running at once; more wait in order.
    pub concurrency: usize,
    /// Zygotes kept started, in their cgroups, idle.
    pub warm_zygotes: usize,
    /// Empty snapshot layers kept ready.
    pub spare_snapshots: usize,
    /// Where snapshot layers live.
    pub snapshot_base: PathBuf,
}

/// Schedules runs on a local backend.
pub struct Pool {
    backend: Arc<LocalBackend>,
    permits: Arc<Semaphore>,
    config: PoolConfig,
    zygotes: Mutex<Vec<Prepared>>,
    snapshots: Mutex<Vec<PathBuf>>,
    refilling: AtomicBool,
}

impl Pool {
    /// Creates the pool and prepares its first zygotes and layers (synchronously, so the
    /// first commands already find them).
    pub fn new(backend: LocalBackend, config: PoolConfig) -> Arc<Self> {
        let pool = Arc::new(Self {
            backend: Arc::new(backend),
            permits: Arc::new(Semaphore::new(config.concurrency.max(1))),
            config,
            zygotes: Mutex::new(Vec::new()),
            snapshots: Mutex::new(Vec::new()),
            refilling: AtomicBool::new(false),
        });
        pool.refill();
        pool
    }

    pub fn backend(&self) -> &LocalBackend {
        &self.backend
    }

    /// Helpers idle right now.
    pub fn idle_zygotes(&self) -> usize {
        self.zygotes.lock().map_or(0, |h| h.len())
    }

    /// Runs one command when a slot is free (in arrival order).
    pub async fn run(self: &Arc<Self>, request: Request) -> Result<Outcome, SandboxError> {
        let permit = Arc::clone(&self.permits)
            .acquire_owned()
            .await
            .map_err(|_| SandboxError::Protocol("the pool is closed".to_owned()))?;
        let pool = Arc::clone(self);
        let result = tokio::task::spawn_blocking(move || {
            // A burst larger than the prepared zygotes prepares the rest on the spot.
            let mut prepared = match pool.take_zygote() {
                Some(prepared) => prepared,
                None => pool.backend.prepare()?,
            };
            let outcome = pool.backend.run_prepared(&mut prepared, &request);
            // The zygote serves the next run too, unless it died with this one.
            if prepared.is_alive()
                && let Ok(mut zygotes) = pool.zygotes.lock()
            {
                zygotes.push(prepared);
            }
            drop(permit);
            outcome
        })
        .await
        .map_err(|e| SandboxError::Protocol(format!("the run's task failed: {e}")))?;
        self.refill_in_background();
        result
    }

    /// Tops the prepared zygotes and layers up off the caller's path; one refill at a time.
    pub(super) fn refill_in_background(self: &Arc<Self>) {
        if self.refilling.swap(true, Ordering::AcqRel) {
            return;
        }
        let pool = Arc::clone(self);
        let task = move || {
            pool.refill();
            pool.refilling.store(false, Ordering::Release);
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => drop(runtime.spawn_blocking(task)),
            Err(_) => drop(std::thread::spawn(task)),
        }
    }

    /// A snapshot layer for a new session over `workspace`, from the prepared ones when any.
    pub fn new_snapshot(self: &Arc<Self>, workspace: &Path) -> io::Result<Snapshot> {
        let prepared = self.snapshots.lock().ok().and_then(|mut s| s.pop());
        let dir = match prepared {
            Some(dir) => dir,
            None => {
                let dir = fresh_snapshot_dir(&self.config.snapshot_base);
                std::fs::create_dir_all(&dir)?;
                dir
            }
        };
        self.refill_in_background();
        self.backend.snapshot(dir, workspace)
    }

    /// Gives a session's layer back: it is deleted in the background.
    pub fn recycle(&self, snapshot: Snapshot) {
        let dir = snapshot.dir().to_path_buf();
        std::thread::spawn(move || {
            if let Err(err) = remove_tree(&dir) {
                tracing::warn!("removing the snapshot {}: {err}", dir.display());
            }
        });
    }

    pub(super) fn take_zygote(&self) -> Option<Prepared> {
        self.zygotes.lock().ok()?.pop()
    }

    /// Tops up the idle zygotes and spare layers.
    fn refill(&self) {
        loop {
            let missing = self
                .zygotes
                .lock()
                .map_or(0, |h| self.config.warm_zygotes.saturating_sub(h.len()));
            if missing == 0 {
                break;
            }
            match self.backend.prepare() {
                Ok(prepared) => {
                    if let Ok(mut zygotes) = self.zygotes.lock() {
                        zygotes.push(prepared);
                    }
                }
                Err(err) => {
                    tracing::warn!("starting a sandbox zygote ahead: {err}");
                    break;
                }
            }
        }
        loop {
            let missing = self
                .snapshots
                .lock()
                .map_or(0, |s| self.config.spare_snapshots.saturating_sub(s.len()));
            if missing == 0 {
                break;
            }
            let dir = fresh_snapshot_dir(&self.config.snapshot_base);
            if let Err(err) = std::fs::create_dir_all(&dir) {
                tracing::warn!("preparing a snapshot layer in {}: {err}", dir.display());
                break;
            }
            if let Ok(mut snapshots) = self.snapshots.lock() {
                snapshots.push(dir);
            }
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        if let Ok(dirs) = self.snapshots.get_mut() {
            for dir in dirs.drain(..) {
                let _ = remove_tree(&dir);
            }
        }
    }
}
