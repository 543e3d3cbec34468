//! Carrying out a plan: on disk for the CLI and headless runs, in memory for tests and the
//! benchmark. (The server sends a plan to the editor as one versioned `WorkspaceEdit`
//! instead.)
//!
//! All files or none. Before anything is written, every file is checked to still be what the
//! plan was computed against. On disk, everything goes through a [`files::Root`]: a path
//! whose symbolic links lead out of the workspace is refused (`outside`), one whose links
//! stay inside writes their target and keeps the link, and deleting a link removes the link,
//! never its target. Each new content is first written to a temporary beside its
//! destination, created exclusively under a random name and synced; only when all are
//! written are they renamed into place and deleted files removed, and if one of those steps
//! fails, the steps already done are undone and the temporaries and directories the plan
//! created are removed. Then the folders changed are synced, so an applied edit survives a
//! power loss too.
//!
//! A temporary is named `.NAME.wright-PID-RANDOM.tmp` (NAME its destination's file name, PID
//! the writing process, RANDOM 16 hex digits: a name a repository cannot plant a link at in
//! advance), so that a process killed between writing and renaming leaves a file
//! [`sweep_stale_temporaries`] recognises and removes at the next start, and only such a file.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use super::EditError;
use super::plan::{FileSource, FileState, Plan, Versioned};
use crate::files::{self, Root};
use crate::workspace::{self, WalkOptions};

/// The largest file an edit reads (and so plans against): past it, the edit is refused
/// (`too_large`) rather than the file read whole into memory.
pub const MAX_EDITED_FILE: u64 = 64 << 20;

/// Checks that every file the plan touches is still in the state it was planned against.
fn verify(source: &dyn FileSource, plan: &Plan) -> Result<(), EditError> {
    for file in &plan.files {
        let now = source.state(&file.path)?;
        let same = match (&file.before, &now) {
            (None, FileState::Missing) => true,
            (Some(before), FileState::File(now)) => before.text == now.text,
            _ => false,
        };
        if !same {
            return Err(EditError::Stale {
                path: file.path.clone(),
            });
        }
    }
    Ok(())
}

/// The files under a root directory.
#[derive(Clone, Debug)]
pub struct DiskFiles {
    root: PathBuf,
    /// Tests make the commit step with this index fail, to exercise the roll-back.
    #[cfg(test)]
    fail_step: Option<usize>,
}

impl FileSource for DiskFiles {
    fn state(&self, path: &Path) -> Result<FileState, EditError> {
        let root = self.open()?;
        state_in(&root, path)
    }
}

/// What `path` holds beneath `root`, read through it.
fn state_in(root: &Root, path: &Path) -> Result<FileState, EditError> {
    let stat = match root.stat(path)? {
        None => return Ok(FileState::Missing),
        Some(stat) => stat,
    };
    if stat.is_dir() {
        return Ok(FileState::Directory);
    }
    let bytes = root.read(path, MAX_EDITED_FILE)?;
    let text = String::from_utf8(bytes).map_err(|_| EditError::NotText {
        path: path.to_owned(),
    })?;
    Ok(FileState::File(Versioned {
        text,
        version: None,
    }))
}

impl DiskFiles {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self {
            root: root.into(),
            #[cfg(test)]
            fail_step: None,
        }
    }

    /// The root, opened (each operation opens it again: a handle kept across a session
    /// would go on naming a folder the user replaced).
    fn open(&self) -> Result<Root, EditError> {
        Ok(Root::open(&self.root)?)
    }

    /// Applies `plan`: every file or none.
    pub fn apply(&self, plan: &Plan) -> Result<(), EditError> {
        verify(self, plan)?;
        let root = self.open()?;
        let mut created_dirs = Vec::new();
        let mut staged: Vec<Option<files::Staged<'_>>> = Vec::new();
        for file in &plan.files {
            let Some(after) = &file.after else {
                staged.push(None);
                continue;
            };
            match root.stage_creating(&file.path, after.as_bytes(), None, &mut created_dirs) {
                Ok(file) => staged.push(Some(file)),
                Err(err) => {
                    // Dropping a staged file removes its temporary.
                    drop(staged);
                    remove_created(&root, &created_dirs);
                    return Err(err.into());
                }
            }
        }
        let mut done = Vec::new();
        let mut removed_from = Vec::new();
        let mut steps = plan.files.iter().zip(staged);
        while let Some((file, step_staged)) = steps.next() {
            let step = if self.injected_failure(done.len()) {
                drop(step_staged);
                Err(EditError::Io {
                    path: file.path.clone(),
                    source: io::Error::other("injected failure"),
                })
            } else {
                match step_staged {
                    Some(staged) => staged.commit(),
                    None => root.remove_file(&file.path).inspect(|_| {
                        removed_from.push(parent(&file.path).to_owned());
                    }),
                }
                .map_err(EditError::from)
            };
            if let Err(err) = step {
                drop(steps);
                self.roll_back(&root, plan, &done);
                remove_created(&root, &created_dirs);
                return Err(err);
            }
            done.push(file.path.clone());
        }
        // A rename syncs its folder as it commits; the removals and the folders created
        // become durable here. The edit is already in place whatever happens, so a failure is
        // logged, not returned: the caller must not take an applied edit for one that was not.
        let mut to_sync: Vec<PathBuf> = removed_from;
        to_sync.extend(created_dirs.iter().map(|dir| parent(dir).to_owned()));
        to_sync.sort();
        to_sync.dedup();
        for dir in to_sync {
            if let Err(err) = root.sync_dir(&dir) {
                tracing::error!(
                    "the edit is applied but {} could not be synced, so it may not survive a \
                     power loss: {err}",
                    root.join(&dir).display()
                );
            }
        }
        Ok(())
    }

    fn injected_failure(&self, step: usize) -> bool {
        #[cfg(test)]
        return self.fail_step == Some(step);
        #[cfg(not(test))]
        {
            let _ = step;
            false
        }
    }

    /// Puts back the files already changed, newest first, through a temporary and a rename
    /// as the edit itself was written: a crash during a rollback leaves the edited file or
    /// the original, never half of one.
    fn roll_back(&self, root: &Root, plan: &Plan, done: &[PathBuf]) {
        for path in done.iter().rev() {
            let Some(file) = plan.files.iter().find(|f| &f.path == path) else {
                continue;
            };
            let restored = match &file.before {
                Some(before) => root.write(path, before.text.as_bytes(), None),
                None => root.remove_file(path),
            };
            if let Err(err) = restored {
                tracing::error!("could not restore {}: {err}", root.join(path).display());
            }
        }
    }
}

/// The folder holding the workspace-relative `path` (the root for a bare name).
fn parent(path: &Path) -> &Path {
    path.parent().unwrap_or(Path::new(""))
}

/// Removes the folders a failed plan created, innermost first (each only if empty again).
fn remove_created(root: &Root, created_dirs: &[PathBuf]) {
    for dir in created_dirs.iter().rev() {
        let _ = root.remove_dir(dir);
    }
}

/// The process that wrote `name`, when `name` has exactly the shape of an edit temporary's
/// name: `.NAME.wright-PID-STEP.tmp`, a pid with no sign or leading zero, a step of 16
/// lowercase hex digits (or, from earlier versions, a number or `restore`); `None` for any
/// other name, so that no file wright did not write is ever taken for one of its own.
fn temporary_owner(name: &str) -> Option<u32> {
    let inner = name.strip_prefix('.')?.strip_suffix(".tmp")?;
    let (destination, tail) = inner.rsplit_once(files::TEMPORARY_MARK)?;
    let (digits, step) = tail.split_once('-')?;
    let number = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let random =
        |s: &str| s.len() == 16 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    if destination.is_empty()
        || !number(digits)
        || !(random(step) || number(step) || step == "restore")
    {
        return None;
    }
    let pid: u32 = digits.parse().ok()?;
    // Only the spelling `std::process::id()` gives; 0 and values past `pid_t` are no process.
    (pid.to_string() == digits && pid > 0 && libc::pid_t::try_from(pid).is_ok()).then_some(pid)
}

/// Whether process `pid` exists. `kill` with signal 0 sends nothing: it fails with `ESRCH`
/// only when there is no such process (`EPERM` means it exists and belongs to another user).
/// A reused pid counts as alive, which keeps a stale temporary rather than risk a live one.
fn process_alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return true;
    };
    // SAFETY: kill(2) with signal 0 only checks that the process exists; it touches no memory.
    if unsafe { libc::kill(pid, 0) } == 0 {
        return true;
    }
    io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// Removes the edit temporaries under `root` whose writer is no longer running: what a
/// process killed between writing a file's new content and renaming it into place left in
/// the user's workspace. Run when the server or `wright exec` starts. Returns the files
/// removed.
///
/// Looks through the workspace walk (ignored and generated folders are not entered, so a
/// huge `node_modules` costs nothing) with a glob that selects the temporaries' names: a
/// `.gitignore` listing `*.tmp` does not hide them, and no other file is even looked at.
/// Temporaries of live processes (this one, another wright on the same folder) are kept.
/// Removal goes through the root: an entry that is a link is removed itself, never its
/// target, and nothing is removed through a linked folder.
pub fn sweep_stale_temporaries(root: &Path) -> Vec<PathBuf> {
    let handle = match Root::open(root) {
        Ok(handle) => handle,
        Err(err) => {
            tracing::error!("sweeping edit temporaries: {err}");
            return Vec::new();
        }
    };
    let options = WalkOptions {
        max_file_size: u64::MAX,
        ..WalkOptions::default()
    };
    let options = match options.with_globs(root, &[".*.wright-*.tmp".to_owned()]) {
        Ok(options) => options,
        Err(err) => {
            tracing::error!("sweeping edit temporaries: {err}");
            return Vec::new();
        }
    };
    let removed = std::sync::Mutex::new(Vec::new());
    workspace::walk(root, &options, &|entry| {
        let stale = entry
            .path
            .file_name()
            .and_then(|name| temporary_owner(name.to_str()?))
            .is_some_and(|pid| !process_alive(pid));
        let relative = entry.path.strip_prefix(root).unwrap_or(&entry.path);
        if stale {
            match handle.remove_file(relative) {
                Ok(()) => {
                    tracing::info!(
                        "removed {}, an edit's temporary file left by a process that was stopped",
                        entry.path.display()
                    );
                    removed
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push(entry.path);
                }
                Err(err) => tracing::warn!(
                    "could not remove the stale edit temporary {}: {err}",
                    entry.path.display()
                ),
            }
        }
        true
    });
    let mut removed = removed.into_inner().unwrap_or_else(|e| e.into_inner());
    removed.sort();
    removed
}

/// Files held in memory, by relative path: what tests and the benchmark apply plans to.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemoryFiles {
    pub files: BTreeMap<PathBuf, String>,
}

impl MemoryFiles {
    pub fn new<P: Into<PathBuf>, T: Into<String>>(files: impl IntoIterator<Item = (P, T)>) -> Self {
        Self {
            files: files
                .into_iter()
                .map(|(p, t)| (p.into(), t.into()))
                .collect(),
        }
    }

    pub fn get(&self, path: impl AsRef<Path>) -> Option<&str> {
        self.files.get(path.as_ref()).map(String::as_str)
    }

    /// Applies `plan`: every file or none.
    pub fn apply(&mut self, plan: &Plan) -> Result<(), EditError> {
        verify(self, plan)?;
        for file in &plan.files {
            match &file.after {
                Some(after) => self.files.insert(file.path.clone(), after.clone()),
                None => self.files.remove(&file.path),
            };
        }
        Ok(())
    }
}

impl FileSource for MemoryFiles {
    fn state(&self, path: &Path) -> Result<FileState, EditError> {
        if let Some(text) = self.files.get(path) {
            return Ok(FileState::File(Versioned {
                text: text.clone(),
                version: None,
            }));
        }
        if self.files.keys().any(|p| p.starts_with(path)) {
            return Ok(FileState::Directory);
        }
        Ok(FileState::Missing)
    }
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;
    use crate::edit::{Checkpoints, Format, format, plan::plan};

    fn temp_root(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("wright-apply-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn disk_plan(files: &DiskFiles, input: &str) -> Plan {
        plan(&format::parse(input, Format::Auto).unwrap(), files).unwrap()
    }

    #[test]
    fn a_failing_step_restores_everything_already_done() {
        let root = temp_root("rollback");
        fs::write(root.join("a.txt"), "a\n").unwrap();
        fs::write(root.join("b.txt"), "b\n").unwrap();
        let files = DiskFiles::new(&root);
        let plan = disk_plan(
            &files,
            "*** Begin Patch\n*** Update File: a.txt\n@@\n-a\n+A\n*** Add File: new/c.txt\n+c\n\
             *** Delete File: b.txt\n*** End Patch\n",
        );
        // Plans are sorted by path: a.txt, b.txt, new/c.txt; each step in turn fails.
        for fail in 0..3 {
            let failing = DiskFiles {
                fail_step: Some(fail),
                ..files.clone()
            };
            let err = failing.apply(&plan).unwrap_err();
            assert_eq!(err.kind(), "io", "{err}");
            assert_eq!(fs::read_to_string(root.join("a.txt")).unwrap(), "a\n");
            assert_eq!(fs::read_to_string(root.join("b.txt")).unwrap(), "b\n");
            let left: Vec<_> = fs::read_dir(&root)
                .unwrap()
                .flatten()
                .map(|e| e.file_name())
                .collect();
            assert_eq!(left.len(), 2, "step {fail}: {left:?}");
        }
        files.apply(&plan).unwrap();
        assert_eq!(fs::read_to_string(root.join("new/c.txt")).unwrap(), "c\n");
        assert!(!root.join("b.txt").exists());
        fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_file_changed_after_planning_is_not_overwritten() {
        let root = temp_root("stale");
        fs::write(root.join("a.txt"), "a\n").unwrap();
        let files = DiskFiles::new(&root);
        let plan = disk_plan(
            &files,
            "a.txt\n<<<<<<< SEARCH\na\n=======\nA\n>>>>>>> REPLACE\n",
        );
        fs::write(root.join("a.txt"), "a\nuser typed\n").unwrap();
        assert_eq!(files.apply(&plan).unwrap_err().kind(), "stale");
        assert_eq!(
            fs::read_to_string(root.join("a.txt")).unwrap(),
            "a\nuser typed\n"
        );
        fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn undo_restores_exactly_after_several_edits_to_one_file() {
        let root = temp_root("undo");
        let original = "\u{feff}one\r\ntwo\r\nthree";
        fs::write(root.join("f.txt"), original).unwrap();
        let files = DiskFiles::new(&root);
        let mut checkpoints = Checkpoints::default();
        let edits = [
            "f.txt\n<<<<<<< SEARCH\none\n=======\n1\n>>>>>>> REPLACE\n",
            "{\"path\": \"f.txt\", \"old_string\": \"two\", \"new_string\": \"2\\n2.5\"}",
            "*** Begin Patch\n*** Update File: f.txt\n*** Move to: g.txt\n@@\n-three\n+3\n*** End Patch\n",
        ];
        let mut states = vec![tree(&root)];
        for edit in edits {
            let plan = disk_plan(&files, edit);
            files.apply(&plan).unwrap();
            checkpoints.record(&plan);
            states.push(tree(&root));
        }
        assert_eq!(
            fs::read_to_string(root.join("g.txt")).unwrap(),
            "\u{feff}1\r\n2\r\n2.5\r\n3\r\n"
        );
        while checkpoints.undo_last(|plan| files.apply(plan)).unwrap() {
            states.pop();
            assert_eq!(&tree(&root), states.last().unwrap());
        }
        assert_eq!(fs::read(root.join("f.txt")).unwrap(), original.as_bytes());
        assert_eq!(states.len(), 1);

        // Undo refuses to overwrite a change made since.
        let plan = disk_plan(&files, edits[0]);
        files.apply(&plan).unwrap();
        checkpoints.record(&plan);
        fs::write(root.join("f.txt"), "changed").unwrap();
        assert_eq!(
            checkpoints
                .undo_last(|plan| files.apply(plan))
                .unwrap_err()
                .kind(),
            "stale"
        );
        assert_eq!(checkpoints.len(), 1);
        fs::remove_dir_all(&root).unwrap();
    }

    fn tree(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
        fs::read_dir(root)
            .unwrap()
            .flatten()
            .filter(|e| e.path().is_file())
            .map(|e| (e.path(), fs::read(e.path()).unwrap()))
            .collect()
    }

    /// A pid no process can have: pids stay below the kernel's `pid_max`.
    fn dead_pid() -> u32 {
        fs::read_to_string("/proc/sys/kernel/pid_max")
            .ok()
            .and_then(|max| max.trim().parse().ok())
            .unwrap_or(4_194_304)
    }

    #[test]
    fn temporaries_are_named_in_the_one_shape_the_sweep_recognises() {
        let own = std::process::id();
        let dir = temp_root("names");
        fs::create_dir_all(dir.join("src")).unwrap();
        let root = Root::open(&dir).unwrap();
        let staged = root.stage(Path::new("src/lib.rs"), b"x", None).unwrap();
        let names: Vec<String> = fs::read_dir(dir.join("src"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
        let prefix = format!(".lib.rs.wright-{own}-");
        assert!(names[0].starts_with(&prefix), "{names:?}");
        assert_eq!(temporary_owner(&names[0]), Some(own));
        drop(staged);
        // Earlier versions' names are still recognised, so their leftovers are swept.
        for old in [
            format!(".lib.rs.wright-{own}-3.tmp"),
            format!(".a.wright-1-2.tmp.wright-{own}-restore.tmp"),
        ] {
            assert_eq!(temporary_owner(&old), Some(own), "{old}");
        }
        for other in [
            ".lib.rs.wright-12-3.tmp.bak",
            "lib.rs.wright-12-3.tmp",
            ".wright-12-3.tmp",
            ".lib.rs.wright-012-3.tmp",
            ".lib.rs.wright-+12-3.tmp",
            ".lib.rs.wright-12-.tmp",
            ".lib.rs.wright-12-3x.tmp",
            ".lib.rs.wright-12.tmp",
            ".lib.rs.wright-12-0123456789abcdeg.tmp",
            ".lib.rs.wright-12-0123456789ABCDEF.tmp",
            ".lib.rs.wright-12-0123456789abcde.tmp",
            ".lib.rs.wright-0-3.tmp",
            ".lib.rs.wright-4294967295-3.tmp",
            ".lib.rs.wright-99999999999-3.tmp",
            ".lib.rs.other-12-3.tmp",
            ".a3.999.tmp",
            ".undo-12.tmp",
        ] {
            assert_eq!(temporary_owner(other), None, "{other}");
        }
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_sweep_removes_only_temporaries_whose_writer_is_gone() {
        let root = temp_root("sweep");
        let (dead, live) = (dead_pid(), std::process::id());
        assert!(!process_alive(dead) && process_alive(live) && process_alive(1));
        // A repository that ignores `*.tmp` must not hide them from the sweep.
        fs::write(root.join(".gitignore"), "*.tmp\nignored/\n").unwrap();
        let plant = |relative: &str| {
            let path = root.join(relative);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(&path, "half a file").unwrap();
            path
        };
        let stale = [
            plant(&format!(".lib.rs.wright-{dead}-0.tmp")),
            plant(&format!("src/deep/.main.rs.wright-{dead}-12.tmp")),
            plant(&format!("src/.main.rs.wright-{dead}-restore.tmp")),
            plant(&format!("src/.main.rs.wright-{dead}-0123456789abcdef.tmp")),
        ];
        let kept = [
            plant(&format!("src/.main.rs.wright-{live}-0.tmp")),
            plant("src/.main.rs.wright-1-0.tmp"),
            plant(&format!("src/.main.rs.wright-{dead}-0.tmp.orig")),
            plant(&format!("src/main.rs.wright-{dead}-0.tmp")),
            plant(&format!("src/.main.rs.wright-0{dead}-0.tmp")),
            plant(&format!("src/.main.rs.wright-{dead}-x.tmp")),
            plant(&format!(".{dead}.tmp")),
            // Ignored and generated folders are not entered.
            plant(&format!("ignored/.a.rs.wright-{dead}-0.tmp")),
            plant(&format!("node_modules/.a.js.wright-{dead}-0.tmp")),
        ];
        let mut expected = stale.to_vec();
        expected.sort();
        assert_eq!(sweep_stale_temporaries(&root), expected);
        for path in &stale {
            assert!(!path.exists(), "{} is still there", path.display());
        }
        for path in &kept {
            assert!(path.exists(), "{} was removed", path.display());
        }
        assert_eq!(sweep_stale_temporaries(&root), Vec::<PathBuf>::new());
        fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn links_planted_at_earlier_temporary_names_are_never_followed() {
        let root = temp_root("planted");
        let victim = root.with_extension("victim");
        fs::write(&victim, "the user's file\n").unwrap();
        fs::write(root.join("f.txt"), "a\n").unwrap();
        // Earlier versions named an edit's temporaries `.NAME.wright-PID-STEP.tmp`: a
        // repository shipping links at those names for the likely pids had every edit write
        // through them.
        let own = std::process::id();
        for pid in own.saturating_sub(20)..own + 200 {
            for step in ["0", "1", "restore"] {
                let name = format!(".f.txt.wright-{pid}-{step}.tmp");
                std::os::unix::fs::symlink(&victim, root.join(name)).unwrap();
            }
        }
        let files = DiskFiles::new(&root);
        let plan = disk_plan(
            &files,
            "f.txt\n<<<<<<< SEARCH\na\n=======\nA\n>>>>>>> REPLACE\n",
        );
        files.apply(&plan).unwrap();
        assert_eq!(fs::read_to_string(&victim).unwrap(), "the user's file\n");
        let meta = fs::symlink_metadata(root.join("f.txt")).unwrap();
        assert!(
            meta.file_type().is_file(),
            "the edited file stays a regular file"
        );
        assert_eq!(fs::read_to_string(root.join("f.txt")).unwrap(), "A\n");
        // A rollback restores through a fresh temporary too.
        let failing = DiskFiles {
            fail_step: Some(1),
            ..files.clone()
        };
        let plan = disk_plan(
            &failing,
            "*** Begin Patch\n*** Update File: f.txt\n@@\n-A\n+B\n*** Add File: g.txt\n+g\n*** End Patch\n",
        );
        assert!(failing.apply(&plan).is_err());
        assert_eq!(fs::read_to_string(root.join("f.txt")).unwrap(), "A\n");
        assert!(fs::symlink_metadata(root.join("f.txt")).unwrap().is_file());
        assert_eq!(fs::read_to_string(&victim).unwrap(), "the user's file\n");
        fs::remove_dir_all(&root).unwrap();
        fs::remove_file(&victim).unwrap();
    }

    #[test]
    fn links_out_of_the_root_are_refused_and_links_inside_write_their_target() {
        let root = temp_root("links");
        let outside = root.with_extension("outside");
        let _ = fs::remove_dir_all(&outside);
        fs::create_dir_all(&outside).unwrap();
        fs::write(outside.join("bashrc"), "outside\n").unwrap();
        fs::write(root.join("real.md"), "real\n").unwrap();
        std::os::unix::fs::symlink(outside.join("bashrc"), root.join("notes.md")).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("linked")).unwrap();
        std::os::unix::fs::symlink("real.md", root.join("alias.md")).unwrap();
        let files = DiskFiles::new(&root);
        let parse = |input: &str| format::parse(input, Format::Auto).unwrap();
        for input in [
            "notes.md\n<<<<<<< SEARCH\noutside\n=======\npwned\n>>>>>>> REPLACE\n",
            "*** Begin Patch\n*** Add File: notes.md\n+pwned\n*** End Patch\n",
            "*** Begin Patch\n*** Delete File: notes.md\n*** End Patch\n",
            "*** Begin Patch\n*** Add File: linked/new.txt\n+pwned\n*** End Patch\n",
        ] {
            let err = plan(&parse(input), &files).unwrap_err();
            assert_eq!(err.kind(), "outside", "{input}: {err}");
            let message = err.to_string();
            assert!(message.contains("leads outside"), "{message}");
            assert!(
                message.contains("notes.md") || message.contains("linked"),
                "{message}"
            );
        }
        assert_eq!(
            fs::read_to_string(outside.join("bashrc")).unwrap(),
            "outside\n"
        );
        assert_eq!(fs::read_dir(&outside).unwrap().count(), 1);
        // A link inside: the edit writes its target and keeps the link.
        let update = disk_plan(
            &files,
            "alias.md\n<<<<<<< SEARCH\nreal\n=======\nedited\n>>>>>>> REPLACE\n",
        );
        files.apply(&update).unwrap();
        assert!(
            fs::symlink_metadata(root.join("alias.md"))
                .unwrap()
                .is_symlink()
        );
        assert_eq!(
            fs::read_to_string(root.join("real.md")).unwrap(),
            "edited\n"
        );
        // Deleting the link deletes the link, never its target.
        let delete = disk_plan(
            &files,
            "*** Begin Patch\n*** Delete File: alias.md\n*** End Patch\n",
        );
        files.apply(&delete).unwrap();
        assert!(fs::symlink_metadata(root.join("alias.md")).is_err());
        assert_eq!(
            fs::read_to_string(root.join("real.md")).unwrap(),
            "edited\n"
        );
        fs::remove_dir_all(&root).unwrap();
        fs::remove_dir_all(&outside).unwrap();
    }

    #[test]
    fn memory_files_apply_all_or_nothing() {
        let mut files = MemoryFiles::new([("a", "1\n"), ("d/b", "2\n")]);
        assert_eq!(files.state(Path::new("d")).unwrap(), FileState::Directory);
        let ops = format::parse(
            "*** Begin Patch\n*** Delete File: a\n*** Add File: c\n+3\n*** End Patch",
            Format::Patch,
        )
        .unwrap();
        let planned = plan(&ops, &files).unwrap();
        let mut changed = files.clone();
        changed.files.insert("c".into(), "other".into());
        assert_eq!(changed.apply(&planned).unwrap_err().kind(), "stale");
        assert_eq!(changed.get("a"), Some("1\n"));
        files.apply(&planned).unwrap();
        assert_eq!((files.get("a"), files.get("c")), (None, Some("3\n")));
    }
}
