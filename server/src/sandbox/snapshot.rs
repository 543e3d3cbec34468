//! Snapshots of the workspace, one per agent session: what commands see instead of the
//! workspace on disk, and where their writes land. Preferably an overlay whose lower layer is
//! the workspace and whose upper layer is this folder's `upper/` (creating one is two `mkdir`s,
//! whatever the workspace's size); where overlayfs is unavailable, a reflink copy of the
//! workspace in `tree/` (cheap on file systems that share extents, refused on others: a real
//! copy would not start in milliseconds).
//!
//! The server writes the editor's modified buffers into the layer before a command, so the
//! command sees what the editor shows; what commands write stays there for the session (build
//! outputs keep builds incremental); the difference between two scans of the layer is what a
//! command changed, with a diff for modified text files.

use std::collections::{BTreeMap, HashMap};
use std::ffi::OsStr;
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Component, Path, PathBuf};

use super::spec::Layer;
use crate::files::{self, Dir, Root};

/// The largest file a change is diffed for (each side): a bigger one is reported with its
/// sizes, never read whole (three 200 MB files must not cost the host gigabytes).
pub const DIFF_LIMIT: u64 = 1 << 20;

/// How a snapshot holds its writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SnapshotKind {
    Overlay,
    ReflinkCopy,
}

impl SnapshotKind {
    /// The name reported in `isolation.filesystem`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Overlay => "overlay",
            Self::ReflinkCopy => "reflink-copy",
        }
    }
}

/// One session's writable view of a workspace.
#[derive(Debug)]
pub struct Snapshot {
    dir: PathBuf,
    workspace: PathBuf,
    kind: SnapshotKind,
    /// The texts last written from buffers, the "before" of the diffs of files a command
    /// then changed.
    buffers: HashMap<PathBuf, Vec<u8>>,
    /// A copy's state when it was made: an entry still in this state has the disk's text.
    initial: Scan,
}

/// How a command changed a file of the workspace's view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChangeKind {
    Added,
    Modified,
    Deleted,
}

/// A file a command changed, relative to the workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub path: PathBuf,
    pub kind: ChangeKind,
    /// A unified diff, for a modified text file whose previous text is known.
    pub diff: Option<String>,
    /// Why there is no diff, when that is worth saying (a FIFO or link left by the command,
    /// a file too large to compare).
    pub note: Option<String>,
}

/// The state of a layer at one moment: what each entry is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scan(BTreeMap<PathBuf, Entry>);

#[derive(Debug, Clone, PartialEq, Eq)]
enum Entry {
    File {
        size: u64,
        mtime_ns: u64,
        inode: u64,
    },
    Symlink(PathBuf),
    Dir,
    /// overlayfs records a deletion as a 0/0 character device.
    Whiteout,
    /// A FIFO, socket or device node a command made: reported, never opened.
    Special(&'static str),
}

/// `FICLONE`: share the source file's extents with the destination.
const FICLONE: libc::c_ulong = 0x4004_9409;

impl Snapshot {
    /// An overlay layer under `dir`, on a file system that can hold overlay upper layers (not
    /// another overlay).
    pub fn create(dir: PathBuf, workspace: &Path) -> io::Result<Self> {
        files::ensure_private_dir(&dir.join("upper"))?;
        files::ensure_private_dir(&dir.join("work"))?;
        Ok(Self {
            dir,
            workspace: workspace.to_path_buf(),
            kind: SnapshotKind::Overlay,
            buffers: HashMap::new(),
            initial: Scan::default(),
        })
    }

    /// A reflink copy of the workspace under `dir` (on the workspace's file system). Fails
    /// with `Unsupported` where the file system cannot share extents.
    pub fn create_copy(dir: PathBuf, workspace: &Path) -> io::Result<Self> {
        let tree = dir.join("tree");
        files::ensure_private_dir(&tree)?;
        let copied = (|| {
            let from = Root::open_layer(workspace).map_err(files::FileError::into_io)?;
            let to = Root::open_layer(&tree).map_err(files::FileError::into_io)?;
            reflink_tree(
                &from.open_root_dir().map_err(files::FileError::into_io)?,
                &to.open_root_dir().map_err(files::FileError::into_io)?,
                workspace,
            )
        })();
        if let Err(err) = copied {
            let _ = remove_tree(&dir);
            return Err(err);
        }
        let mut snapshot = Self {
            dir,
            workspace: workspace.to_path_buf(),
            kind: SnapshotKind::ReflinkCopy,
            buffers: HashMap::new(),
            initial: Scan::default(),
        };
        snapshot.initial = snapshot.scan();
        Ok(snapshot)
    }

    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    pub fn kind(&self) -> SnapshotKind {
        self.kind
    }

    /// The snapshot's own folder (its layer and work folders), for its owner to remove.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// What the helper mounts.
    pub(crate) fn layer(&self) -> Layer {
        match self.kind {
            SnapshotKind::Overlay => Layer::Overlay {
                upper: self.dir.join("upper"),
                work: self.dir.join("work"),
            },
            SnapshotKind::ReflinkCopy => Layer::Copy {
                tree: self.dir.join("tree"),
            },
        }
    }

    /// Where writes land: the upper layer, or the copy.
    fn root(&self) -> PathBuf {
        match self.kind {
            SnapshotKind::Overlay => self.dir.join("upper"),
            SnapshotKind::ReflinkCopy => self.dir.join("tree"),
        }
    }

    /// The layer, opened so that no link a command left is ever followed.
    fn layer_root(&self) -> io::Result<Root> {
        Root::open_layer(self.root()).map_err(files::FileError::into_io)
    }

    /// Writes modified buffers into the layer (while no command runs), so the next command
    /// sees their text instead of the disk's. Paths are relative to the workspace.
    ///
    /// The layer is the commands' to write, so nothing in it is trusted: every step goes
    /// through folder handles and no link is followed. Whatever an earlier command left where
    /// a buffer's folders or file should be (a link to elsewhere, a whiteout, a file, a FIFO)
    /// gives way to the buffer: it is removed (a link itself, never its target) and a real
    /// folder or file takes its place.
    pub fn write_buffers(&mut self, texts: &[(PathBuf, Vec<u8>)]) -> io::Result<()> {
        let layer = self.layer_root()?;
        for (relative, text) in texts {
            let names: Vec<&OsStr> = relative
                .components()
                .map(|c| match c {
                    Component::Normal(name) => Ok(name),
                    _ => Err(()),
                })
                .collect::<Result<_, _>>()
                .ok()
                .filter(|names: &Vec<&OsStr>| !names.is_empty())
                .ok_or_else(|| {
                    io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!("{} is not a path inside the workspace", relative.display()),
                    )
                })?;
            let (file, folders) = names.split_last().expect("not empty");
            let mut dir = layer.open_root_dir().map_err(files::FileError::into_io)?;
            for name in folders {
                match dir.lstat(name) {
                    Ok(stat) if stat.is_dir() => {}
                    Ok(_) => {
                        dir.remove_entry(name)?;
                        dir.create_dir(name, 0o755)?;
                    }
                    Err(err) if err.kind() == io::ErrorKind::NotFound => {
                        dir.create_dir(name, 0o755)?;
                    }
                    Err(err) => return Err(err),
                }
                dir = dir.open_dir(name)?;
            }
            match dir.lstat(file) {
                Ok(_) => dir.remove_entry(file)?,
                Err(err) if err.kind() == io::ErrorKind::NotFound => {}
                Err(err) => return Err(err),
            }
            std::io::Write::write_all(&mut dir.create_new(file, 0o644)?, text)?;
            self.buffers.insert(relative.clone(), text.clone());
        }
        Ok(())
    }

    /// The layer's current state.
    pub fn scan(&self) -> Scan {
        let mut entries = BTreeMap::new();
        if let Ok(layer) = self.layer_root()
            && let Ok(dir) = layer.open_root_dir()
        {
            scan_dir(&dir, Path::new(""), &mut entries);
        }
        Scan(entries)
    }

    /// What changed between two scans, as files of the workspace's view.
    pub fn changes(&self, before: &Scan, after: &Scan) -> Vec<Change> {
        // The lower layer, for what was visible before: no link in it is followed either.
        let lower = Root::open_layer(&self.workspace).ok();
        let mut changes = Vec::new();
        for (path, entry) in &after.0 {
            if before.0.get(path) == Some(entry) || *entry == Entry::Dir {
                continue;
            }
            let was_visible = match (self.kind, before.0.get(path)) {
                (_, Some(Entry::Whiteout)) => false,
                (_, Some(_)) => true,
                // Absent from the upper layer: visible if the lower layer has it.
                (SnapshotKind::Overlay, None) => lower
                    .as_ref()
                    .is_some_and(|lower| matches!(lower.lstat(path), Ok(Some(_)))),
                (SnapshotKind::ReflinkCopy, None) => false,
            };
            let kind = match (entry, was_visible) {
                (Entry::Whiteout, false) => continue,
                (Entry::Whiteout, true) => ChangeKind::Deleted,
                (_, false) => ChangeKind::Added,
                (_, true) => ChangeKind::Modified,
            };
            let (diff, note) = match entry {
                Entry::Special(what) => (None, Some(format!("{what}, not read"))),
                Entry::Symlink(target) => (
                    None,
                    Some(format!("a symbolic link to {}", target.display())),
                ),
                Entry::File { .. } if kind == ChangeKind::Modified => {
                    self.diff(lower.as_ref(), path, before.0.get(path))
                }
                _ => (None, None),
            };
            changes.push(Change {
                path: path.clone(),
                kind,
                diff,
                note,
            });
        }
        // Gone from the layer altogether: removed with a folder only the layer had (overlay),
        // or removed (copy).
        for (path, entry) in &before.0 {
            if !after.0.contains_key(path) && *entry != Entry::Dir && *entry != Entry::Whiteout {
                changes.push(Change {
                    path: path.clone(),
                    kind: ChangeKind::Deleted,
                    diff: None,
                    note: None,
                });
            }
        }
        changes.sort_by(|a, b| a.path.cmp(&b.path));
        changes
    }

    /// The diff of a modified file, when its text before the command is known (the buffer
    /// written for it, or the disk's: the layer did not have it yet, or the copy still had
    /// the disk's version) and both sides are small enough; else a note with the sizes.
    fn diff(
        &self,
        lower: Option<&Root>,
        path: &Path,
        before: Option<&Entry>,
    ) -> (Option<String>, Option<String>) {
        let from_disk = match self.kind {
            SnapshotKind::Overlay => before.is_none(),
            SnapshotKind::ReflinkCopy => before == self.initial.0.get(path),
        };
        let old = match self.buffers.get(path) {
            Some(text) if !from_disk => Ok(text.clone()),
            _ if from_disk => match lower {
                Some(lower) => lower.read(path, DIFF_LIMIT).map_err(|err| match err {
                    files::FileError::TooLarge { size, .. } => Some(size),
                    _ => None,
                }),
                None => Err(None),
            },
            _ => Err(None),
        };
        let new = self.layer_root().map_err(|_| None).and_then(|layer| {
            layer.read(path, DIFF_LIMIT).map_err(|err| match err {
                files::FileError::TooLarge { size, .. } => Some(size),
                _ => None,
            })
        });
        match (old, new) {
            (Ok(old), Ok(new)) => (
                super::diff::unified(&path.to_string_lossy(), &old, &new),
                None,
            ),
            (old, new) if matches!(old, Err(Some(_))) || matches!(new, Err(Some(_))) => {
                let size = |side: &Result<Vec<u8>, Option<u64>>| match side {
                    Ok(bytes) => format!("{} bytes", bytes.len()),
                    Err(Some(size)) => format!("{size} bytes"),
                    Err(None) => "unknown size".to_owned(),
                };
                (
                    None,
                    Some(format!(
                        "not compared: {} before, {} after, over the {} MiB a diff reads",
                        size(&old),
                        size(&new),
                        DIFF_LIMIT >> 20
                    )),
                )
            }
            _ => (None, None),
        }
    }

    /// Removes the layer for good.
    pub fn discard(self) -> io::Result<()> {
        remove_tree(&self.dir)
    }
}

/// Copies the folder `from` into the existing folder `to`, sharing every file's extents,
/// through folder handles: links are copied as links (never followed), sockets, pipes and
/// devices are skipped.
fn reflink_tree(from: &Dir, to: &Dir, display: &Path) -> io::Result<()> {
    for entry in from.entries()? {
        let name = entry.name.as_os_str();
        let stat = from.lstat(name)?;
        if stat.is_dir() {
            to.create_dir(name, 0o700)?;
            reflink_tree(
                &from.open_dir(name)?,
                &to.open_dir(name)?,
                &display.join(name),
            )?;
            to.set_mode(name, stat.mode)?;
        } else if stat.is_symlink() {
            to.symlink(&from.read_link(name)?, name)?;
        } else if stat.is_file() {
            let input = from.open_regular(name)?;
            let output = to.create_new(name, 0o600)?;
            // SAFETY: FICLONE takes the source descriptor as its argument.
            if unsafe { libc::ioctl(output.as_raw_fd(), FICLONE, input.as_raw_fd()) } < 0 {
                let err = io::Error::last_os_error();
                return Err(match err.raw_os_error() {
                    Some(libc::EOPNOTSUPP | libc::EXDEV | libc::EINVAL | libc::ENOTTY) => {
                        io::Error::new(
                            io::ErrorKind::Unsupported,
                            format!(
                                "{} cannot be reflink-copied ({err}): the file system does \
                                 not share extents, or the layer is on another file system",
                                display.join(name).display(),
                            ),
                        )
                    }
                    _ => err,
                });
            }
            to.set_mode(name, stat.mode)?;
        }
    }
    Ok(())
}

/// Removes a folder tree that may hold snapshot layers: overlayfs's work folder keeps a
/// `work/` entry without search permission, so folders are made searchable on the way
/// (through handles; the standard library's removal never follows a link either).
pub fn remove_tree(dir: &Path) -> io::Result<()> {
    // host path: a snapshot layer in the user's cache; the removal never follows a link.
    match std::fs::remove_dir_all(dir) {
        Err(err) if err.kind() == io::ErrorKind::PermissionDenied => {
            if let Ok(root) = Root::open_layer(dir)
                && let Ok(top) = root.open_root_dir()
            {
                searchable(&top);
            }
            // host path: likewise, once its folders are searchable.
            std::fs::remove_dir_all(dir)
        }
        other => other,
    }
}

fn searchable(dir: &Dir) {
    if let Ok(entries) = dir.entries() {
        for entry in entries {
            if entry.kind == rustix::fs::FileType::Directory {
                let _ = dir.set_mode(&entry.name, 0o700);
                if let Ok(child) = dir.open_dir(&entry.name) {
                    searchable(&child);
                }
            }
        }
    }
}

/// Records every entry under `dir` (through handles, so no depth is too deep and no link is
/// followed).
fn scan_dir(dir: &Dir, relative: &Path, out: &mut BTreeMap<PathBuf, Entry>) {
    let Ok(entries) = dir.entries() else {
        return;
    };
    for entry in entries {
        let Ok(stat) = dir.lstat(&entry.name) else {
            continue;
        };
        let path = relative.join(&entry.name);
        use rustix::fs::FileType;
        let state = match stat.kind {
            FileType::Directory => {
                if let Ok(child) = dir.open_dir(&entry.name) {
                    scan_dir(&child, &path, out);
                }
                Entry::Dir
            }
            FileType::Symlink => Entry::Symlink(dir.read_link(&entry.name).unwrap_or_default()),
            FileType::CharacterDevice if stat.rdev == 0 => Entry::Whiteout,
            FileType::RegularFile => Entry::File {
                size: stat.size,
                mtime_ns: stat.mtime_ns,
                inode: stat.ino,
            },
            other => Entry::Special(files::kind_name(other)),
        };
        out.insert(path, state);
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    fn temp(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("wright-snapshot-{name}-{}", std::process::id()));
        let _ = remove_tree(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn buffers_must_stay_inside_the_workspace() {
        let dir = temp("inside");
        let mut snapshot = Snapshot::create(dir.join("layer"), &dir.join("ws")).unwrap();
        for bad in ["../escape", "/etc/passwd", "", "a/../../b"] {
            let err = snapshot
                .write_buffers(&[(PathBuf::from(bad), b"x".to_vec())])
                .unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{bad}");
        }
        snapshot.discard().unwrap();
        remove_tree(&dir).unwrap();
    }

    /// What a command can leave in its layer before the server copies the buffers in: a
    /// folder replaced by a link to a folder outside (`rm -rf src && ln -s /elsewhere src`),
    /// a file replaced by a link, a folder where a buffer's file goes. None of it may make the
    /// server write, create or delete anything outside.
    #[test]
    fn links_a_command_left_in_the_layer_are_replaced_never_followed() {
        let dir = temp("links");
        let (ws, outside) = (dir.join("ws"), dir.join("outside"));
        std::fs::create_dir_all(ws.join("src")).unwrap();
        std::fs::create_dir_all(outside.join("main.rs/inside")).unwrap();
        std::fs::write(outside.join("lib.rs"), "outside\n").unwrap();
        std::fs::write(outside.join("victim"), "victim\n").unwrap();
        let mut snapshot = Snapshot::create(dir.join("layer"), &ws).unwrap();
        let upper = dir.join("layer/upper");
        symlink(&outside, upper.join("src")).unwrap();
        symlink(outside.join("victim"), upper.join("notes.md")).unwrap();
        symlink(&outside, upper.join("deep")).unwrap();
        snapshot
            .write_buffers(&[
                ("src/main.rs".into(), b"fn main() {}\n".to_vec()),
                ("src/lib.rs".into(), b"pub fn f() {}\n".to_vec()),
                ("notes.md".into(), b"notes\n".to_vec()),
                ("deep/a/b/c.txt".into(), b"c\n".to_vec()),
            ])
            .unwrap();
        // Outside: untouched, the folder the old code deleted still there.
        assert!(outside.join("main.rs/inside").is_dir());
        assert_eq!(
            std::fs::read_to_string(outside.join("lib.rs")).unwrap(),
            "outside\n"
        );
        assert_eq!(
            std::fs::read_to_string(outside.join("victim")).unwrap(),
            "victim\n"
        );
        assert!(!outside.join("a").exists());
        // Inside: real folders and files with the buffers' texts.
        for (path, text) in [
            ("src/main.rs", "fn main() {}\n"),
            ("src/lib.rs", "pub fn f() {}\n"),
            ("notes.md", "notes\n"),
            ("deep/a/b/c.txt", "c\n"),
        ] {
            let meta = std::fs::symlink_metadata(upper.join(path)).unwrap();
            assert!(meta.is_file(), "{path}");
            assert_eq!(std::fs::read_to_string(upper.join(path)).unwrap(), text);
        }
        assert!(
            !std::fs::symlink_metadata(upper.join("src"))
                .unwrap()
                .is_symlink()
        );
        snapshot.discard().unwrap();
        remove_tree(&dir).unwrap();
    }

    #[test]
    fn upper_layer_scans_give_added_modified_and_deleted_files() {
        let dir = temp("scan");
        let ws = dir.join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::write(ws.join("kept.txt"), "a\n").unwrap();
        std::fs::write(ws.join("gone.txt"), "b\n").unwrap();
        let mut snapshot = Snapshot::create(dir.join("layer"), &ws).unwrap();
        snapshot
            .write_buffers(&[("kept.txt".into(), b"a buffer\n".to_vec())])
            .unwrap();
        let before = snapshot.scan();
        // What a command would leave in the upper layer: an edit, a new file, a whiteout is
        // not creatable without privileges here, so a removed upper-only file stands in.
        let upper = dir.join("layer/upper");
        std::fs::write(upper.join("kept.txt"), "a buffer, formatted\n").unwrap();
        std::fs::write(upper.join("new.txt"), "c\n").unwrap();
        let after = snapshot.scan();
        let changes = snapshot.changes(&before, &after);
        assert_eq!(changes.len(), 2, "{changes:?}");
        assert_eq!(changes[0].path, Path::new("kept.txt"));
        assert_eq!(changes[0].kind, ChangeKind::Modified);
        assert!(
            changes[0]
                .diff
                .as_deref()
                .unwrap()
                .contains("-a buffer\n+a buffer, formatted\n")
        );
        assert_eq!(changes[1].kind, ChangeKind::Added);
        std::fs::remove_file(upper.join("new.txt")).unwrap();
        let gone = snapshot.changes(&after, &snapshot.scan());
        assert_eq!(gone[0].path, Path::new("new.txt"));
        assert_eq!(gone[0].kind, ChangeKind::Deleted);
        snapshot.discard().unwrap();
        remove_tree(&dir).unwrap();
    }

    /// A FIFO where a tracked file was, files too big to diff, and a change deeper than
    /// PATH_MAX: reported, never blocking, never read whole.
    #[test]
    fn fifos_huge_files_and_deep_paths_are_reported_without_reading_them() {
        let dir = temp("odd");
        let ws = dir.join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::write(ws.join("tracked.txt"), "text\n").unwrap();
        let big = vec![b'a'; (DIFF_LIMIT + 1) as usize];
        std::fs::write(ws.join("big.txt"), &big).unwrap();
        let snapshot = Snapshot::create(dir.join("layer"), &ws).unwrap();
        let before = snapshot.scan();
        let upper = dir.join("layer/upper");
        let fifo = std::ffi::CString::new(upper.join("tracked.txt").as_os_str().as_encoded_bytes())
            .unwrap();
        // SAFETY: a valid path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
        let mut bigger = big.clone();
        bigger.push(b'b');
        std::fs::write(upper.join("big.txt"), &bigger).unwrap();
        // 25 levels of 200 bytes: 5,000 bytes of path.
        let name = "d".repeat(199);
        let layer = Root::open_layer(&upper).unwrap();
        let mut deep = layer.open_root_dir().unwrap();
        for _ in 0..25 {
            deep.create_dir(OsStr::new(&name), 0o755).unwrap();
            deep = deep.open_dir(OsStr::new(&name)).unwrap();
        }
        std::io::Write::write_all(
            &mut deep.create_new(OsStr::new("leaf.txt"), 0o644).unwrap(),
            b"x",
        )
        .unwrap();
        let changes = snapshot.changes(&before, &snapshot.scan());
        let find = |suffix: &str| {
            changes
                .iter()
                .find(|c| c.path.to_string_lossy().ends_with(suffix))
                .unwrap_or_else(|| panic!("{suffix} in {changes:?}"))
        };
        let fifo = find("tracked.txt");
        assert_eq!(fifo.kind, ChangeKind::Modified);
        assert_eq!(fifo.note.as_deref(), Some("a FIFO, not read"));
        let big = find("big.txt");
        assert!(big.diff.is_none());
        assert!(
            big.note.as_deref().unwrap().contains("not compared"),
            "{big:?}"
        );
        let leaf = find("leaf.txt");
        assert_eq!(leaf.kind, ChangeKind::Added);
        assert!(leaf.path.as_os_str().len() > 4096);
        snapshot.discard().unwrap();
        remove_tree(&dir).unwrap();
    }
}
