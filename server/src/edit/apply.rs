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
        Self { root: root.into() }
    }

    pub fn root(&self) -> &Path {
        &self.root
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

    /// Puts back the files already changed, newest first.
    fn roll_back(&self, plan: &Plan, done: &[PathBuf]) {
        for path in done.iter().rev() {
            let Some(file) = plan.files.iter().find(|f| &f.path == path) else {
                continue;
            };
            let target = self.target(path);
            let restored = match &file.before {
                Some(before) => fs::write(&target, &before.text),
                None => fs::remove_file(&target),
            };
            if let Err(err) = restored {
                tracing::error!("could not restore {}: {err}", target.display());
            }
        }
    }
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
