//! Snapshots of the workspace: an overlay whose lower layer is the workspace on disk and
//! whose upper layer (this folder's `upper/`) belongs to one agent session. The server writes
//! the editor's modified buffers into the upper layer before a command, so the command sees
//! what the editor shows; what commands write stays there for the session (build outputs keep
//! builds incremental); and the difference between two scans of the upper layer is what a
//! command changed. Creating one is two `mkdir`s, whatever the workspace's size.

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Component, Path, PathBuf};

use super::spec::OverlayDirs;

/// One session's writable layer over a workspace.
#[derive(Debug)]
pub struct Snapshot {
    dir: PathBuf,
    workspace: PathBuf,
    /// The texts last written from buffers, the "before" of the diffs of files a command
    /// then changed.
    buffers: HashMap<PathBuf, Vec<u8>>,
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

/// The state of the upper layer at one moment: what each entry is.
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

impl Snapshot {
    /// Prepares the layer folders under `dir` (which must not exist), on a file system that
    /// supports overlay upper layers (not another overlay).
    pub fn create(dir: PathBuf, workspace: &Path) -> io::Result<Self> {
        std::fs::create_dir_all(dir.join("upper"))?;
        std::fs::create_dir_all(dir.join("work"))?;
        Ok(Self {
            dir,
            workspace: workspace.to_path_buf(),
            buffers: HashMap::new(),
        })
    }

    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    pub(crate) fn dirs(&self) -> OverlayDirs {
        OverlayDirs {
            upper: self.dir.join("upper"),
            work: self.dir.join("work"),
        }
    }

    /// Writes modified buffers into the upper layer (while no command runs), so the next
    /// command sees their text instead of the disk's. Paths are relative to the workspace.
    pub fn write_buffers(&mut self, files: &[(PathBuf, Vec<u8>)]) -> io::Result<()> {
        let upper = self.dir.join("upper");
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
            let path = upper.join(relative);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)?;
            }
            // A whiteout or directory left by an earlier command gives way to the buffer.
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

    /// The upper layer's current state.
    pub fn scan(&self) -> Scan {
        let mut entries = BTreeMap::new();
        scan_dir(&self.dir.join("upper"), Path::new(""), &mut entries);
        Scan(entries)
    }

    /// What changed between two scans, as files of the workspace's view.
    pub fn changes(&self, before: &Scan, after: &Scan) -> Vec<Change> {
        let upper = self.dir.join("upper");
        let mut changes = Vec::new();
        for (path, entry) in &after.0 {
            if before.0.get(path) == Some(entry) || *entry == Entry::Dir {
                continue;
            }
            let in_lower = std::fs::symlink_metadata(self.workspace.join(path)).is_ok();
            let was_visible = match before.0.get(path) {
                Some(Entry::Whiteout) => false,
                Some(_) => true,
                None => in_lower,
            };
            let kind = match (entry, was_visible) {
                (Entry::Whiteout, false) => continue,
                (Entry::Whiteout, true) => ChangeKind::Deleted,
                (_, false) => ChangeKind::Added,
                (_, true) => ChangeKind::Modified,
            };
            let diff = (kind == ChangeKind::Modified)
                .then(|| {
                    let old = match before.0.get(path) {
                        Some(_) => self.buffers.get(path).cloned()?,
                        None => std::fs::read(self.workspace.join(path)).ok()?,
                    };
                    let new = std::fs::read(upper.join(path)).ok()?;
                    super::diff::unified(&path.to_string_lossy(), &old, &new)
                })
                .flatten();
            changes.push(Change {
                path: path.clone(),
                kind,
                diff,
            });
        }
        // A file that was in the upper layer and is no longer there at all was removed by a
        // command deleting its whole (upper-only) folder.
        for path in before.0.keys() {
            if !after.0.contains_key(path) && before.0[path] != Entry::Dir {
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

    /// Removes the layer for good.
    pub fn discard(self) -> io::Result<()> {
        remove_tree(&self.dir)
    }

    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }
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
    use std::os::unix::fs::PermissionsExt;
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
