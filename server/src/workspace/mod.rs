//! The files the agent sees: the workspace on disk, filtered by ignore rules, with open buffers
//! overlaid on it.
//!
//! Invariants: a walk respects `.gitignore`, `.ignore` and git's global and repository
//! excludes, never follows symbolic links (so a link loop cannot trap it, and a link out of
//! the workspace is reported, never entered), never descends into generated folders, and
//! reports every file it leaves out with the reason; every folder is listed and every file
//! read through the workspace's [`Root`] (`files`), ignore files included (`rules.rs`), so a
//! FIFO, a device or a link out cannot block or leak a read; a path the editor reports goes
//! through the same filters ([`Filter`]); a read is the buffer's text when the editor has the
//! file open, the disk's otherwise.

mod rules;

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use rustix::fs::FileType;

pub use rules::MAX_IGNORE_FILE;

use crate::files::{self, Dir, FileError, Root, Stat};
use rules::{Level, Rules};

/// Folders that hold build output or downloaded dependencies, never the user's source, even
/// in a repository that forgot to ignore them.
pub const GENERATED_DIRS: &[&str] = &[
    ".git",
    "node_modules",
    "target",
    "dist",
    "build",
    "out",
    "__pycache__",
    ".venv",
    "venv",
    ".tox",
    ".mypy_cache",
    ".pytest_cache",
    ".next",
    ".gradle",
    "bower_components",
];

/// The default size above which a file is not read (minified bundles, data dumps).
pub const DEFAULT_MAX_FILE_SIZE: u64 = 1024 * 1024;

/// A file the walk found.
#[derive(Clone, Debug)]
pub struct FileEntry {
    /// The workspace root joined with the file's path beneath it.
    pub path: PathBuf,
    /// Relative to the folder walked, with `/` separators.
    pub relative: String,
    pub size: u64,
    /// Modification time in nanoseconds since the epoch (0 when the platform has none).
    pub mtime_ns: u64,
    root: Arc<Root>,
    /// Relative to the workspace root.
    in_root: PathBuf,
    limit: u64,
}

impl FileEntry {
    /// The file's bytes, read through the workspace root (never through a link out, never a
    /// FIFO or device), at most the walk's size limit.
    pub fn read(&self) -> Result<Vec<u8>, FileError> {
        self.root.read(&self.in_root, self.limit)
    }

    /// The file's path relative to the workspace root (not to the folder walked).
    pub fn in_root(&self) -> &Path {
        &self.in_root
    }
}

/// Why a file or folder was left out.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SkipReason {
    TooLarge,
    GeneratedFolder,
    Unreadable,
    Binary,
    NotText,
    LinkOutside,
}

impl SkipReason {
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::TooLarge => "over the size limit",
            Self::GeneratedFolder => "generated folder",
            Self::Unreadable => "unreadable",
            Self::Binary => "binary",
            Self::NotText => "invalid UTF-8 (read lossily)",
            Self::LinkOutside => "a symbolic link leading outside the workspace",
        }
    }
}

/// What was left out, by reason, with a few examples each.
#[derive(Clone, Debug, Default)]
pub struct Skipped {
    pub counts: BTreeMap<SkipReason, usize>,
    pub examples: BTreeMap<SkipReason, Vec<String>>,
}

impl Skipped {
    const EXAMPLES: usize = 3;

    pub fn add(&mut self, reason: SkipReason, what: impl Into<String>) {
        *self.counts.entry(reason.clone()).or_default() += 1;
        let examples = self.examples.entry(reason).or_default();
        if examples.len() < Self::EXAMPLES {
            examples.push(what.into());
        }
    }

    pub fn merge(&mut self, other: Skipped) {
        for (reason, count) in other.counts {
            *self.counts.entry(reason).or_default() += count;
        }
        for (reason, examples) in other.examples {
            let mine = self.examples.entry(reason).or_default();
            for example in examples {
                if mine.len() < Self::EXAMPLES {
                    mine.push(example);
                }
            }
        }
    }

    pub fn total(&self) -> usize {
        self.counts.values().sum()
    }
}

/// How to walk.
#[derive(Clone, Debug)]
pub struct WalkOptions {
    pub max_file_size: u64,
    /// Worker threads; 0 lets the walker choose.
    pub threads: usize,
    /// Globs that select files (`*.rs`), or exclude them (`!*.md`), relative to the root.
    pub globs: Option<ignore::overrides::Override>,
}

impl Default for WalkOptions {
    fn default() -> Self {
        Self {
            max_file_size: DEFAULT_MAX_FILE_SIZE,
            threads: 0,
            globs: None,
        }
    }
}

/// A glob that does not parse.
#[derive(Debug, thiserror::Error)]
#[error("invalid glob {glob:?}: {message}")]
pub struct GlobError {
    pub glob: String,
    pub message: String,
}

impl WalkOptions {
    /// Restricts the walk to files matching `globs` (gitignore syntax; `!` excludes).
    pub fn with_globs(mut self, root: &Path, globs: &[String]) -> Result<Self, GlobError> {
        if globs.is_empty() {
            return Ok(self);
        }
        let mut builder = ignore::overrides::OverrideBuilder::new(root);
        for glob in globs {
            builder.add(glob).map_err(|err| GlobError {
                glob: glob.clone(),
                message: err.to_string(),
            })?;
        }
        self.globs = Some(builder.build().map_err(|err| GlobError {
            glob: globs.join(" "),
            message: err.to_string(),
        })?);
        Ok(self)
    }
}

fn is_generated(name: &OsStr) -> bool {
    name.to_str()
        .is_some_and(|name| GENERATED_DIRS.contains(&name))
}

/// Walks `root` in parallel, calling `visit` for each regular file within the size limit,
/// until a visit returns `false`. Returns what was left out.
pub fn walk(
    root: &Path,
    options: &WalkOptions,
    visit: &(dyn Fn(FileEntry) -> bool + Sync),
) -> Skipped {
    let unreadable = |err: FileError| {
        tracing::warn!("{}: cannot walk: {err}", root.display());
        let mut skipped = Skipped::default();
        skipped.add(SkipReason::Unreadable, root.display().to_string());
        skipped
    };
    match Root::open(root) {
        Ok(files) => {
            walk_under(&Arc::new(files), Path::new(""), options, visit).unwrap_or_else(unreadable)
        }
        Err(err) => unreadable(err),
    }
}

/// Walks the folder `under` of the workspace `root` (relative to it; the root itself when
/// empty): what [`walk`] does, with entries' `relative` paths relative to `under`. The
/// ignore rules of the folders above `under` apply; `under` itself is walked even when they
/// ignore it. An error when `under` leads outside (a link) or is not a folder.
pub fn walk_under(
    root: &Arc<Root>,
    under: &Path,
    options: &WalkOptions,
    visit: &(dyn Fn(FileEntry) -> bool + Sync),
) -> Result<Skipped, FileError> {
    let start = root.resolved(under)?;
    let dir = root.open_dir(&start)?;
    let rules = Rules::new(Arc::clone(root));
    let walker = Walker {
        rules: &rules,
        options,
        visit,
        start: &start,
        skipped: Mutex::new(Skipped::default()),
        quit: AtomicBool::new(false),
        queue: Mutex::new(Queue {
            jobs: vec![Job::Dir {
                open: Open::Opened(dir),
                relative: start.clone(),
                parent: start.parent().map(|parent| rules.level_of(parent)),
            }],
            busy: 0,
        }),
        ready: Condvar::new(),
    };
    let threads = match options.threads {
        0 => std::thread::available_parallelism()
            .map_or(2, usize::from)
            .min(8),
        n => n,
    };
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| walker.work());
        }
    });
    let mut skipped = walker
        .skipped
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    skipped.merge(rules.take_problems());
    Ok(skipped)
}

/// One walk's shared state: a stack of folders to list and files to visit, taken by a few
/// threads until none is left and none is busy.
struct Walker<'a> {
    rules: &'a Rules,
    options: &'a WalkOptions,
    visit: &'a (dyn Fn(FileEntry) -> bool + Sync),
    /// The folder walked, relative to the root.
    start: &'a Path,
    skipped: Mutex<Skipped>,
    quit: AtomicBool,
    queue: Mutex<Queue>,
    ready: Condvar,
}

struct Queue {
    jobs: Vec<Job>,
    /// Threads working on a job (which may add more).
    busy: usize,
}

enum Job {
    /// A folder to list; `parent`: its parent's rules (`None` for the root).
    Dir {
        open: Open,
        relative: PathBuf,
        parent: Option<Arc<Level>>,
    },
    File(FileEntry),
}

/// How a folder of the walk is opened: through its parent's handle, never by path, so a
/// folder swapped for a link meanwhile is not followed. (The parent's handle is shared by
/// its pending children; a handle per pending folder could exhaust the descriptors.)
enum Open {
    Opened(Dir),
    Child(Arc<Dir>, OsString),
}

impl Walker<'_> {
    fn work(&self) {
        loop {
            let job = {
                let mut queue = lock(&self.queue);
                loop {
                    if self.quit.load(Ordering::Relaxed) {
                        return;
                    }
                    if let Some(job) = queue.jobs.pop() {
                        queue.busy += 1;
                        break job;
                    }
                    if queue.busy == 0 {
                        self.ready.notify_all();
                        return;
                    }
                    queue = self
                        .ready
                        .wait(queue)
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                }
            };
            let more = match job {
                Job::Dir {
                    open,
                    relative,
                    parent,
                } => self.list(open, relative, parent),
                Job::File(entry) => {
                    if !(self.visit)(entry) {
                        self.quit.store(true, Ordering::Relaxed);
                    }
                    Vec::new()
                }
            };
            let mut queue = lock(&self.queue);
            queue.jobs.extend(more);
            queue.busy -= 1;
            self.ready.notify_all();
        }
    }

    fn note(&self, reason: SkipReason, relative: &Path) {
        let shown = relative.strip_prefix(self.start).unwrap_or(relative);
        lock(&self.skipped).add(reason, slashed(shown));
    }

    /// Lists one folder: its files to visit and its folders to list, filtered.
    fn list(&self, open: Open, relative: PathBuf, parent: Option<Arc<Level>>) -> Vec<Job> {
        let dir = match open {
            Open::Opened(dir) => Ok(dir),
            Open::Child(parent, name) => parent.open_dir(&name),
        };
        let (dir, entries) = match dir.and_then(|dir| Ok((dir.entries()?, dir))) {
            Ok((entries, dir)) => (Arc::new(dir), entries),
            Err(_) => {
                self.note(SkipReason::Unreadable, &relative);
                return Vec::new();
            }
        };
        let has_git = entries.iter().any(|entry| entry.name == ".git");
        let level = Arc::new(self.rules.load(&relative, has_git, parent));
        let mut jobs = Vec::new();
        for entry in entries {
            let child = relative.join(&entry.name);
            match entry.kind {
                FileType::Directory => {
                    if is_generated(&entry.name) {
                        if entry.name != ".git" {
                            self.note(SkipReason::GeneratedFolder, &child);
                        }
                        continue;
                    }
                    if !self.included(&level, &child, true) {
                        continue;
                    }
                    jobs.push(Job::Dir {
                        open: Open::Child(Arc::clone(&dir), entry.name),
                        relative: child,
                        parent: Some(Arc::clone(&level)),
                    });
                }
                FileType::RegularFile => {
                    if !self.included(&level, &child, false) {
                        continue;
                    }
                    let stat = match dir.lstat(&entry.name) {
                        Ok(stat) if stat.is_file() => stat,
                        // Replaced meanwhile by something else than a file.
                        Ok(_) => continue,
                        Err(_) => {
                            self.note(SkipReason::Unreadable, &child);
                            continue;
                        }
                    };
                    if stat.size > self.options.max_file_size {
                        self.note(SkipReason::TooLarge, &child);
                        continue;
                    }
                    let shown = child.strip_prefix(self.start).unwrap_or(&child);
                    jobs.push(Job::File(FileEntry {
                        path: self.rules.absolute(&child),
                        relative: slashed(shown),
                        size: stat.size,
                        mtime_ns: stat.mtime_ns,
                        root: Arc::clone(self.rules.root()),
                        limit: self.options.max_file_size,
                        in_root: child,
                    }));
                }
                // Links are not followed (the file or folder inside that a link names is
                // walked where it is); one leading out is reported.
                FileType::Symlink
                    if self.included(&level, &child, false)
                        && self
                            .rules
                            .root()
                            .stat(&child)
                            .is_err_and(|err| matches!(err, FileError::Outside { .. })) =>
                {
                    self.note(SkipReason::LinkOutside, &child);
                }
                // FIFOs, sockets and devices hold no source; other links are not followed.
                _ => {}
            }
        }
        jobs
    }

    /// Whether `relative` (in the folder whose rules are `level`) is walked: the walk's globs
    /// decide first, as ripgrep's do (a file a glob selects is walked even when ignored: the
    /// sweep of edit temporaries relies on it), then the ignore rules.
    fn included(&self, level: &Level, relative: &Path, is_dir: bool) -> bool {
        if let Some(globs) = &self.options.globs {
            match globs.matched(self.rules.absolute(relative), is_dir) {
                ignore::Match::Whitelist(_) => return true,
                ignore::Match::Ignore(_) => return false,
                ignore::Match::None => {}
            }
        }
        !self.rules.ignored(level, relative, is_dir)
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A relative path as the index and the tools show it (`/` separators: wright runs on Linux).
fn slashed(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

/// Why a path the editor names is not one a walk would yield.
#[derive(Debug, thiserror::Error)]
pub enum Excluded {
    /// It leads out of the workspace (a link), or is not beneath it.
    #[error(transparent)]
    Outside(FileError),
    /// A symbolic link on the way: the walk follows none (it finds the target where it is).
    #[error("{} goes through a symbolic link (to {})", .path.display(), .target.display())]
    Link { path: PathBuf, target: PathBuf },
    #[error("{} is in a generated folder ({folder})", .path.display())]
    Generated { path: PathBuf, folder: String },
    #[error("{} is ignored by the ignore rules", .path.display())]
    Ignored { path: PathBuf },
    #[error("{} is {size} bytes, over the size limit of {limit}", .path.display())]
    TooLarge {
        path: PathBuf,
        size: u64,
        limit: u64,
    },
    #[error("{} is not a regular file but {kind}", .path.display())]
    NotRegular { path: PathBuf, kind: &'static str },
    #[error(transparent)]
    Unreadable(FileError),
}

/// The walk's filters for one path at a time (a file the editor reports changed): the ignore
/// rules, generated folders and size limit of [`walk`], links neither followed nor left
/// through. The rules are read once per filter: make one per batch of paths.
pub struct Filter {
    rules: Rules,
    max_file_size: u64,
}

impl Filter {
    pub fn new(root: Arc<Root>, options: &WalkOptions) -> Self {
        Self {
            rules: Rules::new(root),
            max_file_size: options.max_file_size,
        }
    }

    pub fn max_file_size(&self) -> u64 {
        self.max_file_size
    }

    /// Whether the walk would yield `relative` (relative to the root): the file as it is
    /// when it would, `None` when there is no such file (an unsaved buffer's text may still
    /// be indexed), why not otherwise.
    pub fn check(&self, relative: &Path) -> Result<Option<Stat>, Excluded> {
        let root = self.rules.root();
        let relative = root.relative(relative).map_err(Excluded::Outside)?;
        if relative.as_os_str().is_empty() {
            return Err(Excluded::NotRegular {
                path: relative,
                kind: "a folder",
            });
        }
        let mut missing = false;
        match root.resolved(&relative) {
            Ok(resolved) if resolved == relative => {}
            Ok(target) => {
                return Err(Excluded::Link {
                    path: relative,
                    target,
                });
            }
            Err(err) if err.is_not_found() => missing = true,
            Err(err) if err.kind() == "outside" => return Err(Excluded::Outside(err)),
            Err(err) => return Err(Excluded::Unreadable(err)),
        }
        // Each folder on the way, as the walk would have pruned it, then the file.
        let mut dir = PathBuf::new();
        let names: Vec<&OsStr> = relative.iter().collect();
        for name in &names[..names.len() - 1] {
            let parent = self.rules.level_of(&dir);
            dir.push(name);
            if is_generated(name) {
                return Err(Excluded::Generated {
                    path: relative.clone(),
                    folder: slashed(&dir),
                });
            }
            if self.rules.ignored(&parent, &dir, true) {
                return Err(Excluded::Ignored { path: relative });
            }
        }
        if self
            .rules
            .ignored(&self.rules.level_of(&dir), &relative, false)
        {
            return Err(Excluded::Ignored { path: relative });
        }
        if missing {
            return Ok(None);
        }
        match root.lstat(&relative) {
            Ok(None) => Ok(None),
            Ok(Some(stat)) if !stat.is_file() => Err(Excluded::NotRegular {
                path: relative,
                kind: files::kind_name(stat.kind),
            }),
            Ok(Some(stat)) if stat.size > self.max_file_size => Err(Excluded::TooLarge {
                path: relative,
                size: stat.size,
                limit: self.max_file_size,
            }),
            Ok(Some(stat)) => Ok(Some(stat)),
            Err(err) => Err(Excluded::Unreadable(err)),
        }
    }
}

/// `path` relative to `root` with `/` separators (the path itself when outside `root`).
pub fn relative_path(root: &Path, path: &Path) -> String {
    let relative = path.strip_prefix(root).unwrap_or(path);
    let text = relative.to_string_lossy();
    if std::path::MAIN_SEPARATOR == '/' {
        text.into_owned()
    } else {
        text.replace(std::path::MAIN_SEPARATOR, "/")
    }
}

/// The text of a file as read from disk, classified: binary files (a NUL byte in the first
/// 8 KiB, as git and ripgrep decide) are refused; invalid UTF-8 is decoded lossily and said so.
pub enum FileText {
    Text(String),
    Lossy(String),
    Binary,
}

pub fn decode(bytes: Vec<u8>) -> FileText {
    let head = &bytes[..bytes.len().min(8192)];
    if head.contains(&0) {
        return FileText::Binary;
    }
    match String::from_utf8(bytes) {
        Ok(text) => FileText::Text(text),
        Err(err) => FileText::Lossy(String::from_utf8_lossy(err.as_bytes()).into_owned()),
    }
}

/// The workspace as the agent sees it: open buffers first, then the disk.
pub trait Overlay: Sync {
    /// The buffer text of an open file, if it is open.
    fn buffer_text(&self, path: &Path) -> Option<String>;

    /// The buffer text of `path` if the overlay holds it already, without asking anyone: what
    /// a walk over every file (grep) reads, since an overlay that asks its editor per file (an
    /// ACP client's `fs/read_text_file`) would make a walk one round trip per file.
    fn held_text(&self, path: &Path) -> Option<String> {
        self.buffer_text(path)
    }
}

/// No open buffers: the disk alone (the command line).
pub struct DiskOnly;

impl Overlay for DiskOnly {
    fn buffer_text(&self, _: &Path) -> Option<String> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("wright-walk-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn walked(root: &Path, options: &WalkOptions) -> (Vec<String>, Skipped) {
        let found = Mutex::new(Vec::new());
        let skipped = walk(root, options, &|entry| {
            found.lock().unwrap().push(entry.relative);
            true
        });
        let mut found = found.into_inner().unwrap();
        found.sort();
        (found, skipped)
    }

    #[test]
    fn ignore_rules_generated_folders_and_size_are_respected_and_reported() {
        let root = temp("rules");
        for (path, text) in [
            ("src/a.rs", "fn a() {}"),
            ("src/gen.rs", "x"),
            ("node_modules/m/index.js", "x"),
            ("big.txt", &"x".repeat(2000)),
            (".gitignore", "src/gen.rs\n"),
            (".hidden/keep.py", "x = 1"),
        ] {
            let path = root.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        let options = WalkOptions {
            max_file_size: 1000,
            threads: 2,
            globs: None,
        };
        let (found, skipped) = walked(&root, &options);
        assert_eq!(found, [".gitignore", ".hidden/keep.py", "src/a.rs"]);
        assert_eq!(skipped.counts[&SkipReason::TooLarge], 1);
        assert_eq!(
            skipped.examples[&SkipReason::GeneratedFolder],
            ["node_modules"]
        );
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn a_symlink_loop_does_not_trap_the_walk() {
        let root = temp("loop");
        std::fs::create_dir_all(root.join("a")).unwrap();
        std::fs::write(root.join("a/f.rs"), "fn f() {}").unwrap();
        std::os::unix::fs::symlink(&root, root.join("a/loop")).unwrap();
        let (found, _) = walked(&root, &WalkOptions::default());
        assert_eq!(found, ["a/f.rs"]);
        std::fs::remove_dir_all(&root).unwrap();
    }

    fn write(root: &Path, path: &str, text: &str) {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    fn mkfifo(path: &Path) {
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    }

    /// `work` on another thread, failed (not hung) when it takes over 20 s.
    fn within<T: Send + 'static>(what: &str, work: impl FnOnce() -> T + Send + 'static) -> T {
        let (send, receive) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = send.send(work());
        });
        receive
            .recv_timeout(std::time::Duration::from_secs(20))
            .unwrap_or_else(|_| panic!("{what} did not finish in 20 s"))
    }

    #[test]
    fn links_out_of_the_workspace_are_reported_never_entered_and_links_inside_not_followed() {
        let root = temp("links");
        let outside = temp("links-outside");
        write(&outside, "secret.txt", "outside secret");
        write(&outside, "dir/mod.rs", "fn outside() {}");
        write(&root, "src/main.rs", "fn main() {}");
        std::os::unix::fs::symlink(outside.join("secret.txt"), root.join("key.txt")).unwrap();
        std::os::unix::fs::symlink(outside.join("dir"), root.join("linked")).unwrap();
        std::os::unix::fs::symlink("src/main.rs", root.join("alias.rs")).unwrap();
        let (found, skipped) = walked(&root, &WalkOptions::default());
        assert_eq!(found, ["src/main.rs"]);
        let mut outside_links = skipped.examples[&SkipReason::LinkOutside].clone();
        outside_links.sort();
        assert_eq!(outside_links, ["key.txt", "linked"]);
        // Walking the linked folder itself is refused, naming the link.
        let tree = Arc::new(Root::open(&root).unwrap());
        let err = walk_under(&tree, Path::new("linked"), &WalkOptions::default(), &|_| {
            true
        })
        .unwrap_err();
        assert_eq!(err.kind(), "outside");
        assert!(err.to_string().contains("linked"), "{err}");
        // An entry reads through the root: swapped for a link out after the walk saw it, its
        // read is refused.
        let entries = Mutex::new(Vec::new());
        walk(&root, &WalkOptions::default(), &|entry| {
            entries.lock().unwrap().push(entry);
            true
        });
        let entry = entries.into_inner().unwrap().pop().unwrap();
        assert_eq!(entry.read().unwrap(), b"fn main() {}");
        std::fs::remove_file(root.join("src/main.rs")).unwrap();
        std::os::unix::fs::symlink(outside.join("secret.txt"), root.join("src/main.rs")).unwrap();
        assert_eq!(entry.read().unwrap_err().kind(), "outside");
        std::fs::remove_dir_all(&root).unwrap();
        std::fs::remove_dir_all(&outside).unwrap();
    }

    #[test]
    fn ignore_files_that_are_fifos_devices_links_out_or_huge_are_not_read() {
        let root = temp("ignore-kinds");
        let outside = temp("ignore-kinds-outside");
        // Rules a link out would bring in: they must not apply.
        write(&outside, "rules", "*.rs\n");
        write(&root, "a/keep.rs", "fn a() {}");
        write(&root, "b/keep.rs", "fn b() {}");
        write(&root, "c/keep.rs", "fn c() {}");
        write(&root, "d/keep.rs", "fn d() {}");
        write(
            &root,
            "d/.ignore",
            &format!("*.rs\n{}", "#".repeat(MAX_IGNORE_FILE as usize)),
        );
        std::os::unix::fs::symlink("/dev/zero", root.join(".gitignore")).unwrap();
        mkfifo(&root.join("a/.gitignore"));
        mkfifo(&root.join("b/.ignore"));
        std::os::unix::fs::symlink(outside.join("rules"), root.join("c/.gitignore")).unwrap();
        let walked_root = root.clone();
        let (found, skipped) = within("the walk", move || {
            walked(&walked_root, &WalkOptions::default())
        });
        assert_eq!(found, ["a/keep.rs", "b/keep.rs", "c/keep.rs", "d/keep.rs"]);
        let mut unreadable = skipped.examples[&SkipReason::Unreadable].clone();
        unreadable.sort();
        assert_eq!(skipped.counts[&SkipReason::Unreadable], 5, "{unreadable:?}");
        assert!(
            unreadable.contains(&".gitignore".to_owned()),
            "{unreadable:?}"
        );
        std::fs::remove_dir_all(&root).unwrap();
        std::fs::remove_dir_all(&outside).unwrap();
    }

    #[test]
    fn ignore_rules_keep_their_precedence_and_globs_choose_as_ripgreps_do() {
        let root = temp("precedence");
        let outside = temp("precedence-outside");
        write(&outside, "rules", "*.py\n");
        for (path, text) in [
            (".gitignore", "*.log\nsecrets/\n"),
            (".ignore", "!keep.log\n"),
            ("keep.log", "x"),
            ("drop.log", "x"),
            ("secrets/keys.py", "x"),
            ("sub/.gitignore", "!again.log\n"),
            ("sub/again.log", "x"),
            ("sub/code.py", "x"),
            // A repository of its own: the outer .gitignore is not its rules.
            ("nested/.git/info/exclude", "excluded.txt\n"),
            ("nested/inner.log", "x"),
            ("nested/excluded.txt", "x"),
        ] {
            write(&root, path, text);
        }
        // A subfolder's rules brought in through a link out would ignore sub/code.py.
        std::os::unix::fs::symlink(outside.join("rules"), root.join("sub/.ignore")).unwrap();
        let (found, _) = walked(&root, &WalkOptions::default());
        assert_eq!(
            found,
            [
                ".gitignore",
                ".ignore",
                "keep.log",
                "nested/inner.log",
                "sub/.gitignore",
                "sub/again.log",
                "sub/code.py",
            ]
        );
        // Globs choose as ripgrep's do: a file they select is walked even when ignored (not in
        // an ignored folder), the others are not.
        let options = WalkOptions::default()
            .with_globs(&root, &["*.py".to_owned(), "*.log".to_owned()])
            .unwrap();
        let (found, _) = walked(&root, &options);
        assert_eq!(
            found,
            [
                "drop.log",
                "keep.log",
                "nested/inner.log",
                "sub/again.log",
                "sub/code.py"
            ]
        );
        std::fs::remove_dir_all(&root).unwrap();
        std::fs::remove_dir_all(&outside).unwrap();
    }

    #[test]
    fn the_filter_judges_one_path_as_the_walk_would() {
        let root = temp("filter");
        let outside = temp("filter-outside");
        write(&outside, "secret.py", "SECRET = 1");
        for (path, text) in [
            (".gitignore", "secrets/\n*.tmp\n"),
            ("src/a.py", "a = 1"),
            ("secrets/keys.py", "KEY = 1"),
            ("node_modules/x.js", "x"),
            ("notes.tmp", "x"),
            ("big.py", &"x".repeat(2000)),
        ] {
            write(&root, path, text);
        }
        std::os::unix::fs::symlink(outside.join("secret.py"), root.join("key.py")).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("linked")).unwrap();
        std::os::unix::fs::symlink("src", root.join("srcdir")).unwrap();
        let options = WalkOptions {
            max_file_size: 1000,
            ..WalkOptions::default()
        };
        let filter = Filter::new(Arc::new(Root::open(&root).unwrap()), &options);
        let check = |path: &str| filter.check(Path::new(path));
        assert!(
            check("src/a.py")
                .unwrap()
                .is_some_and(|stat| stat.size == 5)
        );
        assert!(check("src/new.py").unwrap().is_none());
        assert!(check("gone/new.py").unwrap().is_none());
        assert!(matches!(
            check("secrets/keys.py"),
            Err(Excluded::Ignored { .. })
        ));
        assert!(matches!(
            check("secrets/new.py"),
            Err(Excluded::Ignored { .. })
        ));
        assert!(matches!(check("notes.tmp"), Err(Excluded::Ignored { .. })));
        assert!(matches!(
            check("node_modules/x.js"),
            Err(Excluded::Generated { .. })
        ));
        assert!(matches!(
            check("big.py"),
            Err(Excluded::TooLarge { size: 2000, .. })
        ));
        for out in ["key.py", "linked/secret.py", "../filter-outside/secret.py"] {
            let err = check(out).unwrap_err();
            assert!(matches!(err, Excluded::Outside(_)), "{out}: {err}");
        }
        assert!(
            check("key.py")
                .unwrap_err()
                .to_string()
                .contains("leads outside")
        );
        assert!(matches!(check("srcdir/a.py"), Err(Excluded::Link { .. })));
        assert!(matches!(check("src"), Err(Excluded::NotRegular { .. })));
        std::fs::remove_dir_all(&root).unwrap();
        std::fs::remove_dir_all(&outside).unwrap();
    }

    #[test]
    fn decoding_refuses_binary_and_reads_invalid_utf8_lossily() {
        assert!(matches!(decode(b"ab\0cd".to_vec()), FileText::Binary));
        assert!(matches!(
            decode(b"fn main() {}".to_vec()),
            FileText::Text(_)
        ));
        let FileText::Lossy(text) = decode(b"caf\xe9".to_vec()) else {
            panic!()
        };
        assert_eq!(text, "caf\u{fffd}");
    }
}
