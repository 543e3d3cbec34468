//! Carrying out a plan: on disk for the CLI and headless runs, in memory for tests and the
//! benchmark. (The server sends a plan to the editor as one versioned `WorkspaceEdit`
//! instead.)
//!
//! All files or none. Before anything is written, every file is checked to still be what the
//! plan was computed against. On disk, each new content is first written to a temporary file
//! beside its destination and synced (`durable`); only when all are written are they renamed
//! into place and deleted files removed, and if one of those steps fails, the steps already
//! done are undone and the temporaries and directories the plan created are removed. Then
//! the folders changed are synced, so an applied edit survives a power loss too.
//!
//! A temporary is named `.NAME.wright-PID-STEP.tmp` (NAME its destination's file name, PID
//! the writing process, STEP the file's place in the plan or `restore`), so that a process
//! killed between writing and renaming leaves a file [`sweep_stale_temporaries`] recognises
//! and removes at the next start, and only such a file.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use super::EditError;
use super::plan::{FileSource, FileState, Plan, Versioned};
use crate::durable;
use crate::workspace::{self, WalkOptions};

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

fn io_error(path: &Path) -> impl FnOnce(io::Error) -> EditError + '_ {
    move |source| EditError::Io {
        path: path.to_owned(),
        source,
    }
}

impl FileSource for DiskFiles {
    fn state(&self, path: &Path) -> Result<FileState, EditError> {
        let full = self.root.join(path);
        let metadata = match fs::metadata(&full) {
            Ok(metadata) => metadata,
            Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(FileState::Missing),
            Err(err) => return Err(io_error(path)(err)),
        };
        if metadata.is_dir() {
            return Ok(FileState::Directory);
        }
        let bytes = fs::read(&full).map_err(io_error(path))?;
        let text = String::from_utf8(bytes).map_err(|_| EditError::NotText {
            path: path.to_owned(),
        })?;
        Ok(FileState::File(Versioned {
            text,
            version: None,
        }))
    }
}

/// A file written beside its destination, waiting to be renamed into place.
struct Staged {
    temp: PathBuf,
    target: PathBuf,
}

impl DiskFiles {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self {
            root: root.into(),
            #[cfg(test)]
            fail_step: None,
        }
    }

    /// Where a file's content lives: a symbolic link's target, so the link stays a link.
    fn target(&self, path: &Path) -> PathBuf {
        let full = self.root.join(path);
        match fs::symlink_metadata(&full) {
            Ok(m) if m.file_type().is_symlink() => fs::canonicalize(&full).unwrap_or(full),
            _ => full,
        }
    }

    /// Applies `plan`: every file or none.
    pub fn apply(&self, plan: &Plan) -> Result<(), EditError> {
        verify(self, plan)?;
        let mut created_dirs = Vec::new();
        let mut staged: Vec<Option<Staged>> = Vec::new();
        let staging = (|| {
            for (n, file) in plan.files.iter().enumerate() {
                let Some(after) = &file.after else {
                    staged.push(None);
                    continue;
                };
                let target = self.target(&file.path);
                let dir = target
                    .parent()
                    .expect("a file path has a parent")
                    .to_owned();
                create_dirs(&dir, &mut created_dirs).map_err(io_error(&file.path))?;
                let temp = temporary(&target, &n.to_string());
                // Pushed first, so a failed write's temporary is cleaned up with the others.
                staged.push(Some(Staged {
                    temp: temp.clone(),
                    target: target.clone(),
                }));
                let permissions = fs::metadata(&target).ok().map(|m| m.permissions());
                durable::write_synced(&temp, after.as_bytes(), permissions)
                    .map_err(io_error(&file.path))?;
            }
            Ok(())
        })();
        if let Err(err) = staging {
            cleanup(&staged, &created_dirs);
            return Err(err);
        }
        let mut done = Vec::new();
        let mut changed_dirs = BTreeSet::new();
        for (file, step_staged) in plan.files.iter().zip(&staged) {
            let target = match step_staged {
                Some(staged) => staged.target.clone(),
                None => self.target(&file.path),
            };
            let step = match step_staged {
                _ if self.injected_failure(done.len()) => Err(io::Error::other("injected failure")),
                Some(staged) => fs::rename(&staged.temp, &target),
                None => fs::remove_file(&target),
            };
            if let Err(err) = step {
                self.roll_back(plan, &done);
                cleanup(&staged, &created_dirs);
                return Err(io_error(&file.path)(err));
            }
            changed_dirs.insert(durable::parent(&target).to_owned());
            done.push(file.path.clone());
        }
        // The renames and removals (and the folders created) become durable. The edit is
        // already in place whatever happens here, so a failure is logged, not returned: the
        // caller must not take an applied edit for one that was not.
        changed_dirs.extend(
            created_dirs
                .iter()
                .map(|dir| durable::parent(dir).to_owned()),
        );
        for dir in changed_dirs {
            if let Err(err) = durable::sync_dir(&dir) {
                tracing::error!(
                    "the edit is applied but {} could not be synced, so it may not survive a \
                     power loss: {err}",
                    dir.display()
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

    /// Puts back the files already changed, newest first.
    fn roll_back(&self, plan: &Plan, done: &[PathBuf]) {
        for path in done.iter().rev() {
            let Some(file) = plan.files.iter().find(|f| &f.path == path) else {
                continue;
            };
            let target = self.target(path);
            let restored = match &file.before {
                Some(before) => restore(&target, before.text.as_bytes()),
                None => fs::remove_file(&target),
            };
            if let Err(err) = restored {
                tracing::error!("could not restore {}: {err}", target.display());
            }
        }
    }
}

/// Puts `text` back at `target` through a temporary file and a rename, as the edit itself
/// was written: a crash during a rollback leaves the edited file or the original, never half
/// of one.
fn restore(target: &Path, text: &[u8]) -> io::Result<()> {
    let permissions = fs::metadata(target).ok().map(|m| m.permissions());
    durable::replace(target, &temporary(target, "restore"), text, permissions)
}

/// The temporary this process writes beside `target` for `step` (a plan's file index, or
/// `restore`): `.NAME.wright-PID-STEP.tmp`, the one shape [`temporary_owner`] accepts.
fn temporary(target: &Path, step: &str) -> PathBuf {
    let name = target.file_name().unwrap_or_default().to_string_lossy();
    target.with_file_name(format!(".{name}.wright-{}-{step}.tmp", std::process::id()))
}

/// The process that wrote `name`, when `name` has exactly the shape of [`temporary`]'s names
/// (a pid with no sign or leading zero, a step that is a number or `restore`); `None` for any
/// other name, so that no file wright did not write is ever taken for one of its own.
fn temporary_owner(name: &str) -> Option<u32> {
    let inner = name.strip_prefix('.')?.strip_suffix(".tmp")?;
    let (destination, tail) = inner.rsplit_once(".wright-")?;
    let (digits, step) = tail.split_once('-')?;
    let number = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if destination.is_empty() || !number(digits) || !(number(step) || step == "restore") {
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
pub fn sweep_stale_temporaries(root: &Path) -> Vec<PathBuf> {
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
        if stale {
            match fs::remove_file(&entry.path) {
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

/// Removes temporaries left behind and the directories the plan created (if empty again).
fn cleanup(staged: &[Option<Staged>], created_dirs: &[PathBuf]) {
    for staged in staged.iter().flatten() {
        let _ = fs::remove_file(&staged.temp);
    }
    for dir in created_dirs.iter().rev() {
        let _ = fs::remove_dir(dir);
    }
}

/// Creates `dir` and its missing ancestors, recording each one created (outermost first).
fn create_dirs(dir: &Path, created: &mut Vec<PathBuf>) -> io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    if let Some(parent) = dir.parent() {
        create_dirs(parent, created)?;
    }
    fs::create_dir(dir)?;
    created.push(dir.to_owned());
    Ok(())
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
        let staged = temporary(Path::new("/ws/src/lib.rs"), "3");
        assert_eq!(
            staged,
            PathBuf::from(format!("/ws/src/.lib.rs.wright-{own}-3.tmp"))
        );
        let name = |path: PathBuf| path.file_name().unwrap().to_str().unwrap().to_owned();
        assert_eq!(temporary_owner(&name(staged)), Some(own));
        let restore = temporary(Path::new("/ws/.a.wright-1-2.tmp"), "restore");
        assert_eq!(temporary_owner(&name(restore)), Some(own));
        for other in [
            ".lib.rs.wright-12-3.tmp.bak",
            "lib.rs.wright-12-3.tmp",
            ".wright-12-3.tmp",
            ".lib.rs.wright-012-3.tmp",
            ".lib.rs.wright-+12-3.tmp",
            ".lib.rs.wright-12-.tmp",
            ".lib.rs.wright-12-3x.tmp",
            ".lib.rs.wright-12.tmp",
            ".lib.rs.wright-0-3.tmp",
            ".lib.rs.wright-4294967295-3.tmp",
            ".lib.rs.wright-99999999999-3.tmp",
            ".lib.rs.other-12-3.tmp",
            ".a3.999.tmp",
            ".undo-12.tmp",
        ] {
            assert_eq!(temporary_owner(other), None, "{other}");
        }
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
