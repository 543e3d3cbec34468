//! The ignore rules a walk obeys, read by wright itself through the workspace's [`Root`]
//! (never by the `ignore` crate, which opens them by path and reads them without bound): each
//! folder's `.ignore` and `.gitignore`, `.git/info/exclude` where a repository starts, those
//! of the folders above the root, and git's global excludes file.
//!
//! Precedence is ripgrep's: a `.ignore` file's verdict wins over a `.gitignore`'s, which wins
//! over `.git/info/exclude`, then the global excludes; within each kind the deepest folder's
//! file decides, and git's files of folders above the start of a repository (a folder holding
//! `.git`) are not that repository's rules.
//!
//! An ignore file that is a FIFO, a device, a link out of the workspace or over
//! [`MAX_IGNORE_FILE`] is not read: its rules are not applied, and the walk reports it
//! (unreadable) with a warning on stderr.

use super::lock;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use ignore::Match;
use ignore::gitignore::{Gitignore, GitignoreBuilder};

use super::{SkipReason, Skipped};
use crate::files::{self, FileError, Root};

/// The largest ignore file read (git's own are a few KiB; a larger one is not a list of
/// rules anyone wrote).
pub const MAX_IGNORE_FILE: u64 = 1024 * 1024;

/// The largest `.git` file (a worktree's or submodule's pointer) or `commondir` read.
const MAX_POINTER_FILE: u64 = 64 * 1024;

/// The rules of one folder, and through `parent` those of the folders above it.
pub(crate) struct Level {
    parent: Option<Arc<Level>>,
    dot_ignore: Gitignore,
    git_ignore: Gitignore,
    git_exclude: Gitignore,
    /// The folder holds `.git`: git's files of the folders above are not its rules.
    has_git: bool,
}

impl Level {
    fn empty(parent: Option<Arc<Level>>, has_git: bool) -> Self {
        Self {
            parent,
            dot_ignore: Gitignore::empty(),
            git_ignore: Gitignore::empty(),
            git_exclude: Gitignore::empty(),
            has_git,
        }
    }

    /// Whether `path` (absolute), in the folder of this level, is ignored.
    pub(crate) fn ignored(&self, path: &Path, is_dir: bool, global: &Gitignore) -> bool {
        let (mut dot, mut git, mut exclude) = (Match::None, Match::None, Match::None);
        let mut saw_git = false;
        let mut level = Some(self);
        while let Some(current) = level {
            if dot.is_none() {
                dot = current.dot_ignore.matched(path, is_dir);
            }
            if !saw_git {
                if git.is_none() {
                    git = current.git_ignore.matched(path, is_dir);
                }
                if exclude.is_none() {
                    exclude = current.git_exclude.matched(path, is_dir);
                }
            }
            saw_git |= current.has_git;
            level = current.parent.as_deref();
        }
        dot.or(git)
            .or(exclude)
            .or(global.matched(path, is_dir))
            .is_ignore()
    }
}

/// The rules of one workspace, loaded as a walk (or a check of one path) reaches each folder.
pub(crate) struct Rules {
    root: Arc<Root>,
    global: Gitignore,
    /// The folders above the root, nearest last in the chain (`None`: no rules there).
    above: Option<Arc<Level>>,
    /// Ignore files that could not be read.
    problems: Mutex<Skipped>,
    /// Levels loaded by [`Rules::level_of`], by folder.
    levels: Mutex<HashMap<PathBuf, Arc<Level>>>,
}

impl Rules {
    pub(crate) fn new(root: Arc<Root>) -> Self {
        let (global, error) = GitignoreBuilder::new(root.path()).build_global();
        if let Some(error) = error {
            tracing::debug!("git's global excludes: {error}");
        }
        let problems = Mutex::new(Skipped::default());
        let root_has_git = root.lstat(Path::new(".git")).ok().flatten().is_some();
        let above = levels_above(root.path(), root_has_git, &problems);
        Self {
            root,
            global,
            above,
            problems,
            levels: Mutex::new(HashMap::new()),
        }
    }

    pub(crate) fn root(&self) -> &Arc<Root> {
        &self.root
    }

    /// The absolute path of `relative` (beneath the root), as the matchers see it.
    pub(crate) fn absolute(&self, relative: &Path) -> PathBuf {
        if relative.as_os_str().is_empty() {
            self.root.path().to_owned()
        } else {
            self.root.join(relative)
        }
    }

    /// Whether `relative`, in the folder whose rules are `level`, is ignored.
    pub(crate) fn ignored(&self, level: &Level, relative: &Path, is_dir: bool) -> bool {
        level.ignored(&self.absolute(relative), is_dir, &self.global)
    }

    /// The rules of the folder `dir` (relative to the root; already known to resolve to
    /// itself), whose parent's are `parent` (`None` for the root, whose parent is what lies
    /// above it).
    pub(crate) fn load(&self, dir: &Path, has_git: bool, parent: Option<Arc<Level>>) -> Level {
        let parent = if dir.as_os_str().is_empty() {
            self.above.clone()
        } else {
            parent
        };
        let mut level = Level::empty(parent, has_git);
        let absolute = self.absolute(dir);
        level.dot_ignore = self.matcher(&absolute, &dir.join(".ignore"));
        level.git_ignore = self.matcher(&absolute, &dir.join(".gitignore"));
        if has_git {
            let exclude = self.git_exclude(dir);
            level.git_exclude = match exclude {
                Some(Ok(bytes)) => build(&absolute, &self.absolute(&dir.join(".git")), &bytes),
                Some(Err(err)) => {
                    self.problem(&dir.join(".git/info/exclude"), &err);
                    Gitignore::empty()
                }
                None => Gitignore::empty(),
            };
        }
        level
    }

    /// The rules of the folder `dir` and all above it, loaded once per [`Rules`] (for checks
    /// of single paths; a walk loads each folder's as it enters it).
    pub(crate) fn level_of(&self, dir: &Path) -> Arc<Level> {
        if let Some(level) = lock(&self.levels).get(dir) {
            return Arc::clone(level);
        }
        let parent = dir.parent().map(|parent| self.level_of(parent));
        let has_git = self.root.lstat(&dir.join(".git")).ok().flatten().is_some();
        let level = Arc::new(self.load(dir, has_git, parent));
        lock(&self.levels).insert(dir.to_owned(), Arc::clone(&level));
        level
    }

    /// What could not be read, for the walk's report.
    pub(crate) fn take_problems(&self) -> Skipped {
        std::mem::take(&mut *lock(&self.problems))
    }

    fn problem(&self, relative: &Path, err: &FileError) {
        note_problem(&self.problems, &relative.to_string_lossy(), err);
    }

    /// The matcher of the ignore file `file` (relative to the root) of the folder `dir`
    /// (absolute); empty when there is none or it cannot be read.
    fn matcher(&self, dir: &Path, file: &Path) -> Gitignore {
        match self.root.read(file, MAX_IGNORE_FILE) {
            Ok(bytes) => build(dir, &self.absolute(file), &bytes),
            Err(err) if err.is_not_found() => Gitignore::empty(),
            Err(err) => {
                self.problem(file, &err);
                Gitignore::empty()
            }
        }
    }

    /// The repository's `info/exclude` for the folder `dir`, which holds `.git`: in `.git`
    /// itself, or where a worktree's or submodule's `.git` file points (its common folder).
    fn git_exclude(&self, dir: &Path) -> Option<Result<Vec<u8>, FileError>> {
        let dot_git = dir.join(".git");
        let stat = self.root.lstat(&dot_git).ok().flatten()?;
        if stat.is_dir() {
            return present(
                self.root
                    .read(&dot_git.join("info/exclude"), MAX_IGNORE_FILE),
            );
        }
        // `gitdir: PATH`, relative to the folder holding the file; the common folder is
        // named by `PATH/commondir` (relative to PATH), else PATH itself.
        let pointer = self.root.read(&dot_git, MAX_POINTER_FILE).ok()?;
        let pointer = String::from_utf8(pointer).ok()?;
        let git_dir = pointer
            .lines()
            .find_map(|line| line.strip_prefix("gitdir:"))?;
        let git_dir = files::normalize(&self.absolute(dir).join(git_dir.trim()));
        let common = match self.read_anywhere(&git_dir.join("commondir"), MAX_POINTER_FILE) {
            Ok(bytes) => String::from_utf8(bytes)
                .ok()
                .map(|text| files::normalize(&git_dir.join(text.trim())))
                .unwrap_or(git_dir),
            Err(_) => git_dir,
        };
        present(self.read_anywhere(&common.join("info/exclude"), MAX_IGNORE_FILE))
    }

    /// Reads `path` (absolute) through the root when it lies beneath it, else as a file of
    /// no workspace (a worktree's repository lives elsewhere).
    fn read_anywhere(&self, path: &Path, limit: u64) -> Result<Vec<u8>, FileError> {
        match self.root.relative(path) {
            Ok(relative) => self.root.read(&relative, limit),
            Err(_) => files::read_bounded(path, limit),
        }
    }
}

/// A read's result, with a missing file as no file.
fn present(read: Result<Vec<u8>, FileError>) -> Option<Result<Vec<u8>, FileError>> {
    match read {
        Err(err) if err.is_not_found() => None,
        other => Some(other),
    }
}

/// The levels of the folders above `root` (absolute), the nearest last: their `.ignore`
/// files, and their git files up to the start of the repository the root is in (none when
/// the root itself holds `.git`).
fn levels_above(root: &Path, root_has_git: bool, problems: &Mutex<Skipped>) -> Option<Arc<Level>> {
    let mut ancestors: Vec<(PathBuf, Level)> = Vec::new();
    let mut saw_git = root_has_git;
    for dir in root.ancestors().skip(1) {
        let has_git = files::lstat_outside(&dir.join(".git")).is_ok();
        let mut level = Level::empty(None, has_git);
        level.dot_ignore = outside_matcher(dir, ".ignore", problems);
        if !saw_git {
            level.git_ignore = outside_matcher(dir, ".gitignore", problems);
        }
        saw_git |= has_git;
        ancestors.push((dir.to_owned(), level));
    }
    let mut chain: Option<Arc<Level>> = None;
    for (_, mut level) in ancestors.into_iter().rev() {
        level.parent = chain;
        chain = Some(Arc::new(level));
    }
    chain
}

/// The matcher of the ignore file `name` of `dir`, a folder above the workspace.
fn outside_matcher(dir: &Path, name: &str, problems: &Mutex<Skipped>) -> Gitignore {
    let file = dir.join(name);
    match files::read_bounded(&file, MAX_IGNORE_FILE) {
        Ok(bytes) => build(dir, &file, &bytes),
        Err(err) if err.is_not_found() => Gitignore::empty(),
        Err(err) => {
            note_problem(problems, &file.to_string_lossy(), &err);
            Gitignore::empty()
        }
    }
}

fn note_problem(problems: &Mutex<Skipped>, what: &str, err: &FileError) {
    tracing::warn!("{what}: not read, so its ignore rules do not apply: {err}");
    lock(problems).add(SkipReason::Unreadable, what);
}

/// The matcher of an ignore file's text, as the `ignore` crate reads one: lines that are not
/// UTF-8 are skipped, a byte-order mark is dropped, a pattern that does not parse is left out.
fn build(dir: &Path, file: &Path, bytes: &[u8]) -> Gitignore {
    let mut builder = GitignoreBuilder::new(dir);
    for (number, line) in bytes.split(|&b| b == b'\n').enumerate() {
        let Ok(line) = std::str::from_utf8(line) else {
            continue;
        };
        let line = if number == 0 {
            line.trim_start_matches('\u{feff}')
        } else {
            line
        };
        if let Err(err) = builder.add_line(Some(file.to_owned()), line) {
            tracing::debug!("{}:{}: {err}", file.display(), number + 1);
        }
    }
    builder.build().unwrap_or_else(|err| {
        tracing::debug!("{}: {err}", file.display());
        Gitignore::empty()
    })
}
