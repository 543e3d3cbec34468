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
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

use super::spec::Layer;

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
}

/// The state of a layer at one moment: what each entry is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scan(BTreeMap<PathBuf, Entry>);

#[derive(Debug, Clone, PartialEq, Eq)]
enum Entry {
    File {
        size: u64,
        mtime_ns: i128,
        inode: u64,
    },
    Symlink(PathBuf),
    Dir,
    /// overlayfs records a deletion as a 0/0 character device.
    Whiteout,
}

/// `FICLONE`: share the source file's extents with the destination.
const FICLONE: libc::c_ulong = 0x4004_9409;

impl Snapshot {
    /// An overlay layer under `dir`, on a file system that can hold overlay upper layers (not
    /// another overlay).
    pub fn create(dir: PathBuf, workspace: &Path) -> io::Result<Self> {
        std::fs::create_dir_all(dir.join("upper"))?;
        std::fs::create_dir_all(dir.join("work"))?;
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
        std::fs::create_dir_all(&tree)?;
        if let Err(err) = reflink_tree(workspace, &tree) {
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

    pub(crate) fn dir(&self) -> &Path {
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

    /// Writes modified buffers into the layer (while no command runs), so the next command
    /// sees their text instead of the disk's. Paths are relative to the workspace.
    pub fn write_buffers(&mut self, files: &[(PathBuf, Vec<u8>)]) -> io::Result<()> {
        let root = self.root();
        for (relative, text) in files {
            if relative.as_os_str().is_empty()
                || !relative
                    .components()
                    .all(|c| matches!(c, Component::Normal(_)))
            {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("{} is not a path inside the workspace", relative.display()),
                ));
            }
            let path = root.join(relative);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)?;
            }
            // A whiteout, symlink or folder left by an earlier command gives way to the buffer.
            if let Ok(meta) = std::fs::symlink_metadata(&path)
                && !meta.is_file()
            {
                if meta.is_dir() {
                    std::fs::remove_dir_all(&path)?;
                } else {
                    std::fs::remove_file(&path)?;
                }
            }
            std::fs::write(&path, text)?;
            self.buffers.insert(relative.clone(), text.clone());
        }
        Ok(())
    }

    /// The layer's current state.
    pub fn scan(&self) -> Scan {
        let mut entries = BTreeMap::new();
        scan_dir(&self.root(), Path::new(""), &mut entries);
        Scan(entries)
    }

    /// What changed between two scans, as files of the workspace's view.
    pub fn changes(&self, before: &Scan, after: &Scan) -> Vec<Change> {
        let mut changes = Vec::new();
        for (path, entry) in &after.0 {
            if before.0.get(path) == Some(entry) || *entry == Entry::Dir {
                continue;
            }
            let was_visible = match (self.kind, before.0.get(path)) {
                (_, Some(Entry::Whiteout)) => false,
                (_, Some(_)) => true,
                // Absent from the upper layer: visible if the lower layer has it.
                (SnapshotKind::Overlay, None) => {
                    std::fs::symlink_metadata(self.workspace.join(path)).is_ok()
                }
                (SnapshotKind::ReflinkCopy, None) => false,
            };
            let kind = match (entry, was_visible) {
                (Entry::Whiteout, false) => continue,
                (Entry::Whiteout, true) => ChangeKind::Deleted,
                (_, false) => ChangeKind::Added,
                (_, true) => ChangeKind::Modified,
            };
            let diff = (kind == ChangeKind::Modified)
                .then(|| self.diff(path, before.0.get(path)))
                .flatten();
            changes.push(Change {
                path: path.clone(),
                kind,
                diff,
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
                });
            }
        }
        changes.sort_by(|a, b| a.path.cmp(&b.path));
        changes
    }

    /// The diff of a modified file, when its text before the command is known: the buffer
    /// written for it, or the disk's (the layer did not have it yet, or the copy still had
    /// the disk's version).
    fn diff(&self, path: &Path, before: Option<&Entry>) -> Option<String> {
        let from_disk = match self.kind {
            SnapshotKind::Overlay => before.is_none(),
            SnapshotKind::ReflinkCopy => before == self.initial.0.get(path),
        };
        let old = match self.buffers.get(path) {
            Some(text) if !from_disk => text.clone(),
            _ if from_disk => std::fs::read(self.workspace.join(path)).ok()?,
            _ => return None,
        };
        let new = std::fs::read(self.root().join(path)).ok()?;
        super::diff::unified(&path.to_string_lossy(), &old, &new)
    }

    /// Removes the layer for good.
    pub fn discard(self) -> io::Result<()> {
        remove_tree(&self.dir)
    }
}

/// Copies `from` into the existing folder `to`, sharing every file's extents. Symlinks are
/// copied as links; sockets, pipes and devices are skipped.
fn reflink_tree(from: &Path, to: &Path) -> io::Result<()> {
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        let (source, target) = (entry.path(), to.join(entry.file_name()));
        let meta = entry.metadata()?;
        if kind.is_dir() {
            std::fs::create_dir(&target)?;
            reflink_tree(&source, &target)?;
            std::fs::set_permissions(&target, meta.permissions())?;
        } else if kind.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(&source)?, &target)?;
        } else if kind.is_file() {
            let input = std::fs::File::open(&source)?;
            let output = std::fs::File::create(&target)?;
            // SAFETY: FICLONE takes the source descriptor as its argument.
            if unsafe { libc::ioctl(output.as_raw_fd(), FICLONE, input.as_raw_fd()) } < 0 {
                let err = io::Error::last_os_error();
                return Err(match err.raw_os_error() {
                    Some(libc::EOPNOTSUPP | libc::EXDEV | libc::EINVAL | libc::ENOTTY) => {
                        io::Error::new(
                            io::ErrorKind::Unsupported,
                            format!(
                                "{} cannot be reflink-copied to {} ({err}): the file system \
                                 does not share extents, or they are on different file systems",
                                source.display(),
                                target.display()
                            ),
                        )
                    }
                    _ => err,
                });
            }
            output.set_permissions(std::fs::Permissions::from_mode(meta.mode()))?;
        }
    }
    Ok(())
}

/// Removes a folder tree that may hold snapshot layers: overlayfs's work folder keeps a
/// `work/` entry without search permission, so everything is made removable first.
pub fn remove_tree(dir: &Path) -> io::Result<()> {
    match std::fs::remove_dir_all(dir) {
        Err(err) if err.kind() == io::ErrorKind::PermissionDenied => {
            chmod_dirs(dir);
            std::fs::remove_dir_all(dir)
        }
        other => other,
    }
}

fn chmod_dirs(dir: &Path) {
    let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                chmod_dirs(&entry.path());
            }
        }
    }
}

fn scan_dir(dir: &Path, relative: &Path, out: &mut BTreeMap<PathBuf, Entry>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let Ok(meta) = entry.metadata() else {
            continue;
        };
        let path = relative.join(entry.file_name());
        let kind = meta.file_type();
        let state = if kind.is_dir() {
            scan_dir(&entry.path(), &path, out);
            Entry::Dir
        } else if kind.is_symlink() {
            Entry::Symlink(std::fs::read_link(entry.path()).unwrap_or_default())
        } else if kind.is_char_device() && meta.rdev() == 0 {
            Entry::Whiteout
        } else {
            Entry::File {
                size: meta.len(),
                mtime_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
                inode: meta.ino(),
            }
        };
        out.insert(path, state);
    }
}

#[cfg(test)]
mod tests {
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
        for bad in ["../escape", "/etc/passwd", ""] {
            let err = snapshot
                .write_buffers(&[(PathBuf::from(bad), b"x".to_vec())])
                .unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{bad}");
        }
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
}
