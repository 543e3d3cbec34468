//! Resource limits through cgroups: v2 where a delegated subtree with the memory and pids
//! controllers is ours, v1 where that is what the host has (memory and pids hierarchies we can
//! write), none otherwise (the runner then falls back to rlimits alone). Every run gets its
//! own group nested under the server's current one, so the host's own limits still apply.

// host paths: cgroupfs and /proc, never a workspace path.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// What this machine offers, found once.
#[derive(Debug, Clone)]
pub enum Support {
    V2 {
        parent: PathBuf,
    },
    V1 {
        memory: Option<PathBuf>,
        pids: Option<PathBuf>,
    },
    Unavailable {
        reason: String,
    },
}

impl Support {
    /// Probes by creating (and removing) the folder runs will live in.
    pub fn detect() -> Self {
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        let membership = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        let mounts = cgroup_mounts(&mountinfo);
        // v2: a unified mount that has the controllers enabled for our own group's children.
        if let Some((mount, _)) = mounts.iter().find(|(_, kind)| kind.is_empty())
            && let Some(own) = own_group(&membership, "")
        {
            let group = mount.join(own.trim_start_matches('/'));
            let control =
                std::fs::read_to_string(group.join("cgroup.subtree_control")).unwrap_or_default();
            let enabled: Vec<&str> = control.split_whitespace().collect();
            let parent = group.join("wright-sandbox");
            if enabled.contains(&"memory") && enabled.contains(&"pids") && usable(&parent) {
                return Self::V2 { parent };
            }
        }
        let v1 = |controller: &str| -> Option<PathBuf> {
            let (mount, _) = mounts
                .iter()
                .find(|(_, kind)| kind.split(',').any(|k| k == controller))?;
            let own = own_group(&membership, controller)?;
            let parent = mount
                .join(own.trim_start_matches('/'))
                .join("wright-sandbox");
            usable(&parent).then_some(parent)
        };
        let (memory, pids) = (v1("memory"), v1("pids"));
        if memory.is_some() || pids.is_some() {
            return Self::V1 { memory, pids };
        }
        let reason = if mounts.is_empty() {
            "no cgroup file system is mounted".to_owned()
        } else {
            "no cgroup hierarchy with the memory or pids controller is writable by this user \
             (not delegated)"
                .to_owned()
        };
        Self::Unavailable { reason }
    }

    /// A short description for reports: version and controllers.
    pub fn describe(&self) -> String {
        match self {
            Self::V2 { .. } => "cgroup v2 (memory, pids)".to_owned(),
            Self::V1 { memory, pids } => {
                let names: Vec<&str> = [("memory", memory), ("pids", pids)]
                    .iter()
                    .filter(|(_, dir)| dir.is_some())
                    .map(|(name, _)| *name)
                    .collect();
                format!("cgroup v1 ({})", names.join(", "))
            }
            Self::Unavailable { reason } => reason.clone(),
        }
    }

    pub fn limits_memory(&self) -> bool {
        matches!(
            self,
            Self::V2 { .. }
                | Self::V1 {
                    memory: Some(_),
                    ..
                }
        )
    }

    /// Makes a fresh group for one run with these limits.
    pub fn create(&self, memory_bytes: u64, processes: u64) -> io::Result<Option<RunGroup>> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let name = format!(
            "run-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let mut group = RunGroup {
            dirs: Vec::new(),
            memory: None,
            pids: None,
            v2: matches!(self, Self::V2 { .. }),
            limits: None,
        };
        let (memory, pids) = match self {
            Self::Unavailable { .. } => return Ok(None),
            Self::V2 { parent } => (Some(parent), Some(parent)),
            Self::V1 { memory, pids } => (memory.as_ref(), pids.as_ref()),
        };
        for parent in [memory, pids].into_iter().flatten() {
            let dir = parent.join(&name);
            if !group.dirs.contains(&dir) {
                create_fresh(&dir)?;
                group.dirs.push(dir);
            }
        }
        group.memory = memory.map(|parent| parent.join(&name));
        group.pids = pids.map(|parent| parent.join(&name));
        if group.v2 {
            // No swap: a memory limit that spills into swap is no limit.
            let _ = std::fs::write(group.dirs[0].join("memory.swap.max"), "0");
        }
        group.set_limits(memory_bytes, processes)?;
        Ok(Some(group))
    }
}

/// Counters of limit events in a group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Events {
    /// Processes the kernel killed for exceeding the memory limit.
    pub oom_kills: u64,
    /// Forks refused for exceeding the process limit.
    pub forks_refused: u64,
}

/// A zygote's group (one folder per v1 controller, one for v2).
#[derive(Debug)]
pub struct RunGroup {
    dirs: Vec<PathBuf>,
    memory: Option<PathBuf>,
    pids: Option<PathBuf>,
    v2: bool,
    /// The (memory, processes) limits last written.
    limits: Option<(u64, u64)>,
}

impl RunGroup {
    /// Moves a process (and its future children) into the group.
    pub fn add(&self, pid: u32) -> io::Result<()> {
        for dir in &self.dirs {
            std::fs::write(dir.join("cgroup.procs"), pid.to_string())?;
        }
        Ok(())
    }

    /// Sets the limits (again, when they changed): cheap, unlike moving a process.
    pub fn set_limits(&mut self, memory_bytes: u64, processes: u64) -> io::Result<()> {
        if self.limits == Some((memory_bytes, processes)) {
            return Ok(());
        }
        if let Some(dir) = &self.memory {
            if self.v2 {
                std::fs::write(dir.join("memory.max"), memory_bytes.to_string())?;
            } else {
                // memsw must stay at or above the memory limit: lower it after, raise it first.
                let memsw = dir.join("memory.memsw.limit_in_bytes");
                let _ = std::fs::write(&memsw, memory_bytes.to_string());
                std::fs::write(dir.join("memory.limit_in_bytes"), memory_bytes.to_string())?;
                let _ = std::fs::write(&memsw, memory_bytes.to_string());
            }
        }
        if let Some(dir) = &self.pids {
            // The zygote and the run's helper live in the group too, outside the command's
            // pid namespace.
            std::fs::write(dir.join("pids.max"), (processes + 2).to_string())?;
        }
        self.limits = Some((memory_bytes, processes));
        Ok(())
    }

    /// The group's event counters; a run compares them before and after (a zygote's group
    /// serves many runs).
    pub fn events(&self) -> Events {
        let oom_kills = self.memory.as_ref().map_or(0, |dir| {
            let file = if self.v2 {
                "memory.events"
            } else {
                "memory.oom_control"
            };
            counter(&dir.join(file), "oom_kill")
        });
        let forks_refused = self
            .pids
            .as_ref()
            .map_or(0, |dir| counter(&dir.join("pids.events"), "max"));
        Events {
            oom_kills,
            forks_refused,
        }
    }
}

impl Drop for RunGroup {
    /// Removes the folders. The helper returns only once its namespace is empty, so this
    /// normally succeeds at once; a process still being torn down gets a short grace.
    fn drop(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(2);
        for dir in &self.dirs {
            while let Err(err) = std::fs::remove_dir(dir) {
                if err.kind() == io::ErrorKind::NotFound || Instant::now() > deadline {
                    if err.kind() != io::ErrorKind::NotFound {
                        tracing::warn!("could not remove cgroup {}: {err}", dir.display());
                    }
                    break;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    }
}

/// Makes the group folder `dir`. One of the same name left behind by an earlier process with
/// this pid (a process that exited without dropping its groups) is removed first: `rmdir` of
/// a cgroup succeeds only when no process is in it, so a group in use is never taken over.
fn create_fresh(dir: &Path) -> io::Result<()> {
    match std::fs::create_dir(dir) {
        Err(err) if err.kind() == io::ErrorKind::AlreadyExists => {
            std::fs::remove_dir(dir)?;
            std::fs::create_dir(dir)
        }
        other => other,
    }
}

/// Whether runs' groups can be made under `parent` (made on first use). Checked with
/// `access`, not by making a group: cgroup folders are slow to create and remove.
fn usable(parent: &Path) -> bool {
    if !parent.is_dir() {
        return std::fs::create_dir(parent).is_ok();
    }
    let Ok(path) = std::ffi::CString::new(parent.as_os_str().as_encoded_bytes()) else {
        return false;
    };
    // SAFETY: a valid path; AT_EACCESS checks with the effective ids, as mkdir will.
    unsafe { libc::faccessat(libc::AT_FDCWD, path.as_ptr(), libc::W_OK, libc::AT_EACCESS) == 0 }
}

/// `(mount point, controllers)` of every cgroup mount; v2's controllers are empty.
fn cgroup_mounts(mountinfo: &str) -> Vec<(PathBuf, String)> {
    mountinfo
        .lines()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let mount = PathBuf::from(left.split(' ').nth(4)?);
            let mut fields = right.split(' ');
            let fstype = fields.next()?;
            let options = fields.nth(1).unwrap_or("");
            match fstype {
                "cgroup2" => Some((mount, String::new())),
                "cgroup" => {
                    let controllers: Vec<&str> = options
                        .split(',')
                        .filter(|o| !matches!(*o, "rw" | "ro") && !o.contains('='))
                        .collect();
                    Some((mount, controllers.join(",")))
                }
                _ => None,
            }
        })
        .collect()
}

/// Our group in a hierarchy from /proc/self/cgroup (`""` is v2's `0::` line).
fn own_group(membership: &str, controller: &str) -> Option<String> {
    membership.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let matches = if controller.is_empty() {
            controllers.is_empty()
        } else {
            controllers.split(',').any(|c| c == controller)
        };
        matches.then(|| path.to_owned())
    })
}

fn counter(file: &Path, name: &str) -> u64 {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .find_map(|line| {
            let (key, value) = line.split_once(' ')?;
            (key == name).then(|| value.trim().parse().ok())?
        })
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stale_group_folder_is_replaced_and_one_in_use_is_not() {
        let base = std::env::temp_dir().join(format!("wright-cgroup-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir_all(&base).unwrap();
        let stale = base.join("run-1-0");
        std::fs::create_dir(&stale).unwrap();
        create_fresh(&stale).expect("an empty leftover is replaced");
        assert!(stale.is_dir());
        // A folder that cannot be removed (here: not empty; for a cgroup: a process in it).
        std::fs::write(stale.join("member"), "").unwrap();
        assert!(create_fresh(&stale).is_err());
        create_fresh(&base.join("run-1-1")).expect("a new name is created");
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn mounts_and_groups_are_read_from_the_proc_files() {
        let mountinfo = "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n\
            35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n\
            36 31 0:33 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n\
            41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
        let mounts = cgroup_mounts(mountinfo);
        assert_eq!(
            mounts,
            [
                (PathBuf::from("/sys/fs/cgroup/memory"), "memory".to_owned()),
                (
                    PathBuf::from("/sys/fs/cgroup/cpu,cpuacct"),
                    "cpu,cpuacct".to_owned()
                ),
                (PathBuf::from("/sys/fs/cgroup/unified"), String::new()),
            ]
        );
        let membership = "8:pids:/\n4:memory:/a/b\n2:cpu,cpuacct:/\n0::/\n";
        assert_eq!(own_group(membership, "memory").as_deref(), Some("/a/b"));
        assert_eq!(own_group(membership, "cpuacct").as_deref(), Some("/"));
        assert_eq!(own_group(membership, "").as_deref(), Some("/"));
    }
}
