//! Carrying out a plan: on disk for the CLI and headless runs, in memory for tests and the
//! benchmark. (The server sends a plan to the editor as one versioned `WorkspaceEdit`
//! instead.)
//!
//! All files or none. Before anything is written, every file is checked to still be what the
//! plan was computed against. On disk, each new content is first written to a temporary file
//! beside its destination; only when all are written are they renamed into place and deleted
//! files removed, and if one of those steps fails, the steps already done are undone and the
//! temporaries and directories the plan created are removed.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use super::EditError;
use super::plan::{FileSource, FileState, Plan, Versioned};

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
                let name = target.file_name().unwrap_or_default().to_string_lossy();
                let temp = dir.join(format!(".{name}.wright-{}-{n}.tmp", std::process::id()));
                fs::write(&temp, after).map_err(io_error(&file.path))?;
                if let Ok(metadata) = fs::metadata(&target) {
                    fs::set_permissions(&temp, metadata.permissions())
                        .map_err(io_error(&file.path))?;
                }
                staged.push(Some(Staged { temp, target }));
            }
            Ok(())
        })();
        if let Err(err) = staging {
            cleanup(&staged, &created_dirs);
            return Err(err);
        }
        let mut done = Vec::new();
        for (file, step_staged) in plan.files.iter().zip(&staged) {
            let step = match step_staged {
                _ if self.injected_failure(done.len()) => Err(io::Error::other("injected failure")),
                Some(staged) => fs::rename(&staged.temp, &staged.target),
                None => fs::remove_file(self.target(&file.path)),
            };
            if let Err(err) = step {
                self.roll_back(plan, &done);
                cleanup(&staged, &created_dirs);
                return Err(io_error(&file.path)(err));
            }
            done.push(file.path.clone());
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
    let name = target.file_name().unwrap_or_default().to_string_lossy();
    let temp = target.with_file_name(format!(".{name}.wright-{}-restore.tmp", std::process::id()));
    fs::write(&temp, text)?;
    if let Ok(metadata) = fs::metadata(target) {
        fs::set_permissions(&temp, metadata.permissions())?;
    }
    fs::rename(&temp, target).inspect_err(|_| {
        let _ = fs::remove_file(&temp);
    })
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
