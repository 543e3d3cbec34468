//! Every file wright reads or writes on a workspace's behalf (or in a snapshot layer a
//! command wrote) goes through a [`Root`]: a directory handle, and paths resolved beneath it
//! one component at a time, never through a symbolic link that leads out of it.
//!
//! A repository is untrusted input: it can ship `notes.md -> ~/.bashrc`, a folder linked to
//! `~/.ssh`, a `.gitignore` linked to `/dev/zero`, a FIFO where a file should be, or links
//! at the names of wright's own temporaries. So:
//!
//! - a link whose target (every component followed) stays beneath the root works as that
//!   target: reads read it, writes write it and keep the link; one that leads out is refused
//!   with [`FileError::Outside`], naming the link, and nothing is read or written through it.
//!   A root opened with [`Links::Refuse`] (a snapshot layer) follows no link at all;
//! - reads open with `O_NOFOLLOW | O_NONBLOCK`, take only regular files, and stop at a limit
//!   ([`FileError::TooLarge`]): a FIFO cannot block wright, `/dev/zero` cannot fill it;
//! - writes go to a temporary created exclusively (`O_CREAT | O_EXCL | O_NOFOLLOW`, a name
//!   with a random part) beside the destination, synced, renamed over it, and the folder
//!   synced: a planted link at a temporary's name fails the create instead of being followed.
//!
//! Where the kernel has `openat2`, a read resolves in one call with `RESOLVE_BENEATH` (and
//! `RESOLVE_NO_SYMLINKS` in a layer); whatever it refuses (a link out, an absolute link, a
//! race) is resolved again component by component (`resolve.rs`), which decides exactly and
//! says why. `private.rs` is the same care for wright's own files (journals, artifacts,
//! undo records, the index): folders 0700, files 0600, never through a link.

mod bytecode;
mod private;
mod resolve;

pub use private::{
    append_private, create_private, ensure_private_dir, fresh_private_dir, open_private,
    read_private, write_private,
};

use std::ffi::{OsStr, OsString};
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

use resolve::{Last, Parent};

/// Whether a root follows symbolic links that stay beneath it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Links {
    /// Links whose target stays beneath the root work as their target (a workspace).
    Inside,
    /// No link is followed, wherever it leads (a snapshot layer a command wrote).
    Refuse,
}

/// Why a file operation beneath a root did not happen.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error(
        "{path}: {link} is a symbolic link to {target}, which leads outside the workspace; \
         it is neither read nor written through",
        path = .path.display(), link = .link.display(), target = .target.display()
    )]
    Outside {
        path: PathBuf,
        /// The link, relative to the root, as far as the path was resolved.
        link: PathBuf,
        target: PathBuf,
    },
    #[error("{} is not inside the workspace", .path.display())]
    Escapes { path: PathBuf },
    #[error(
        "{path}: {link} is a symbolic link, and no link is followed here",
        path = .path.display(), link = .link.display()
    )]
    Link { path: PathBuf, link: PathBuf },
    #[error("{}: too many levels of symbolic links", .path.display())]
    Loop { path: PathBuf },
    #[error("{} is not a regular file but {kind}", .path.display())]
    NotRegular { path: PathBuf, kind: &'static str },
    #[error("{} is {size} bytes, over the limit of {limit}", .path.display())]
    TooLarge {
        path: PathBuf,
        size: u64,
        limit: u64,
    },
    #[error("{}: {source}", .path.display())]
    Io { path: PathBuf, source: io::Error },
}

impl FileError {
    fn io(path: &Path, errno: Errno) -> Self {
        Self::Io {
            path: path.to_owned(),
            source: errno.into(),
        }
    }

    fn from_io(path: &Path, source: io::Error) -> Self {
        Self::Io {
            path: path.to_owned(),
            source,
        }
    }

    /// The kind reported to tools and in `wright apply --json` (`outside`, `io`, …).
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Outside { .. } | Self::Escapes { .. } => "outside",
            Self::Link { .. } | Self::Loop { .. } => "link",
            Self::NotRegular { .. } => "not_regular",
            Self::TooLarge { .. } => "too_large",
            Self::Io { .. } => "io",
        }
    }

    /// The path the operation was given (relative to the root, or as written).
    pub fn path(&self) -> &Path {
        match self {
            Self::Outside { path, .. }
            | Self::Escapes { path }
            | Self::Link { path, .. }
            | Self::Loop { path }
            | Self::NotRegular { path, .. }
            | Self::TooLarge { path, .. }
            | Self::Io { path, .. } => path,
        }
    }

    /// Whether the file (or a folder on its way) does not exist.
    pub fn is_not_found(&self) -> bool {
        matches!(self, Self::Io { source, .. } if source.kind() == io::ErrorKind::NotFound)
    }

    /// The error as an `io::Error` (for callers whose errors are `io::Error`s).
    pub fn into_io(self) -> io::Error {
        match self {
            Self::Io { source, .. } => source,
            Self::TooLarge { .. } => io::Error::new(io::ErrorKind::FileTooLarge, self.to_string()),
            Self::NotRegular { .. } => {
                io::Error::new(io::ErrorKind::InvalidInput, self.to_string())
            }
            _ => io::Error::new(io::ErrorKind::PermissionDenied, self.to_string()),
        }
    }
}

/// What an entry is, as `lstat` (or `stat`, once links are followed) sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stat {
    pub kind: FileType,
    pub size: u64,
    /// Permission bits (the low 12 bits of the mode).
    pub mode: u32,
    pub mtime_ns: u64,
    pub ino: u64,
    pub dev: u64,
    pub uid: u32,
    /// Bytes allocated on disk.
    pub blocks_bytes: u64,
    /// The device a device node stands for (0 for other files; overlayfs's whiteouts are
    /// character devices 0/0).
    pub rdev: u64,
}

impl Stat {
    fn of(stat: &rustix::fs::Stat) -> Self {
        Self {
            kind: FileType::from_raw_mode(stat.st_mode),
            size: stat.st_size as u64,
            mode: stat.st_mode & 0o7777,
            mtime_ns: (stat.st_mtime as u64)
                .saturating_mul(1_000_000_000)
                .saturating_add(stat.st_mtime_nsec),
            ino: stat.st_ino,
            dev: stat.st_dev,
            uid: stat.st_uid,
            blocks_bytes: (stat.st_blocks as u64).saturating_mul(512),
            rdev: stat.st_rdev,
        }
    }

    pub fn is_file(&self) -> bool {
        self.kind == FileType::RegularFile
    }

    pub fn is_dir(&self) -> bool {
        self.kind == FileType::Directory
    }

    pub fn is_symlink(&self) -> bool {
        self.kind == FileType::Symlink
    }
}

/// The name of a kind of file, for messages.
pub fn kind_name(kind: FileType) -> &'static str {
    match kind {
        FileType::RegularFile => "a regular file",
        FileType::Directory => "a folder",
        FileType::Symlink => "a symbolic link",
        FileType::Fifo => "a FIFO",
        FileType::Socket => "a socket",
        FileType::CharacterDevice => "a character device",
        FileType::BlockDevice => "a block device",
        FileType::Unknown => "of an unknown kind",
    }
}

/// One entry of a folder, as listed (links not followed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirEntry {
    pub name: OsString,
    pub kind: FileType,
}

/// A folder beneath a root, opened: what a walk descends through without ever resolving a
/// path again (so a path deeper than `PATH_MAX` is no problem, and a folder swapped for a
/// link meanwhile is not followed).
#[derive(Debug)]
pub struct Dir {
    fd: OwnedFd,
}

impl Dir {
    /// The entries, without `.` and `..`, in the order the file system gives them.
    pub fn entries(&self) -> io::Result<Vec<DirEntry>> {
        let dir = rustix::fs::Dir::read_from(&self.fd)?;
        let mut out = Vec::new();
        for entry in dir {
            let entry = entry?;
            let name = entry.file_name().to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            let name = OsStr::from_bytes(name).to_owned();
            let kind = match entry.file_type() {
                // Some file systems do not fill in the type: ask.
                FileType::Unknown => self.lstat(&name).map_or(FileType::Unknown, |s| s.kind),
                kind => kind,
            };
            out.push(DirEntry { name, kind });
        }
        Ok(out)
    }

    /// The entry `name` itself (a link is not followed).
    pub fn lstat(&self, name: &OsStr) -> io::Result<Stat> {
        Ok(Stat::of(&rustix::fs::statat(
            &self.fd,
            name,
            AtFlags::SYMLINK_NOFOLLOW,
        )?))
    }

    /// The sub-folder `name`; a link there is refused (`ELOOP`), never followed.
    pub fn open_dir(&self, name: &OsStr) -> io::Result<Dir> {
        Ok(Dir {
            fd: resolve::open_dir_at(&self.fd, name)?,
        })
    }

    /// The regular file `name`, up to `limit` bytes (see [`Root::read`]).
    pub fn read(&self, name: &OsStr, limit: u64) -> Result<Vec<u8>, FileError> {
        read_at(&self.fd, name, Path::new(name), limit)
    }

    /// The folder itself.
    pub fn stat(&self) -> io::Result<Stat> {
        Ok(Stat::of(&rustix::fs::fstat(&self.fd)?))
    }

    /// The regular file `name` opened for reading (never a link, FIFO or device, and the
    /// open never blocks).
    pub fn open_regular(&self, name: &OsStr) -> io::Result<std::fs::File> {
        let stat = self.lstat(name)?;
        if !stat.is_file() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{} is not a regular file but {}",
                    Path::new(name).display(),
                    kind_name(stat.kind)
                ),
            ));
        }
        let fd = rustix::fs::openat(
            &self.fd,
            name,
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        let file = std::fs::File::from(fd);
        if !file.metadata()?.is_file() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} changed while opened", Path::new(name).display()),
            ));
        }
        Ok(file)
    }

    /// Creates the file `name`, which must not exist (`O_EXCL | O_NOFOLLOW`: whatever is
    /// there, a link included, makes it fail).
    pub fn create_new(&self, name: &OsStr, mode: u32) -> io::Result<std::fs::File> {
        let fd = rustix::fs::openat(
            &self.fd,
            name,
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(mode),
        )?;
        Ok(std::fs::File::from(fd))
    }

    /// Creates the folder `name`.
    pub fn create_dir(&self, name: &OsStr, mode: u32) -> io::Result<()> {
        Ok(rustix::fs::mkdirat(
            &self.fd,
            name,
            Mode::from_raw_mode(mode),
        )?)
    }

    /// Creates the symbolic link `name` pointing at `target` (its text is not looked at).
    pub fn symlink(&self, target: &Path, name: &OsStr) -> io::Result<()> {
        Ok(rustix::fs::symlinkat(target, &self.fd, name)?)
    }

    /// The target text of the link `name`.
    pub fn read_link(&self, name: &OsStr) -> io::Result<PathBuf> {
        let target = rustix::fs::readlinkat(&self.fd, name, Vec::new())?;
        Ok(PathBuf::from(OsStr::from_bytes(target.as_bytes())))
    }

    /// Removes the entry `name` whatever it is: a file, link, FIFO or device node itself, or
    /// a folder with everything in it (descending through handles, never through a link).
    pub fn remove_entry(&self, name: &OsStr) -> io::Result<()> {
        match rustix::fs::unlinkat(&self.fd, name, AtFlags::empty()) {
            Err(Errno::ISDIR) | Err(Errno::PERM) if self.lstat(name)?.is_dir() => {
                let child = self.open_dir(name)?;
                for entry in child.entries()? {
                    child.remove_entry(&entry.name)?;
                }
                drop(child);
                Ok(rustix::fs::unlinkat(&self.fd, name, AtFlags::REMOVEDIR)?)
            }
            other => Ok(other?),
        }
    }

    /// Sets the permission bits of the entry `name` (a folder or file; never through a link).
    pub fn set_mode(&self, name: &OsStr, mode: u32) -> io::Result<()> {
        let fd = rustix::fs::openat(
            &self.fd,
            name,
            OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        if FileType::from_raw_mode(rustix::fs::fstat(&fd)?.st_mode) == FileType::Symlink {
            return Ok(());
        }
        // fchmod does not take an O_PATH descriptor; its /proc name does, for exactly this
        // inode.
        let proc_path = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&fd));
        Ok(rustix::fs::chmod(
            proc_path.as_str(),
            Mode::from_raw_mode(mode),
        )?)
    }

    /// The folder's descriptor (for calls `files` has no wrapper for, such as `FICLONE`).
    pub fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// A directory whose files wright reads and writes, never leaving it (see the module doc).
#[derive(Debug)]
pub struct Root {
    fd: OwnedFd,
    /// As given (absolute).
    path: PathBuf,
    /// The same, every link resolved: an absolute link target may name either.
    real: PathBuf,
    links: Links,
}

impl Root {
    /// A workspace: links that stay inside are followed.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, FileError> {
        Self::open_with(path.as_ref(), Links::Inside)
    }

    /// A folder whose every link is refused: a snapshot layer commands wrote, or wright's
    /// own folders.
    pub fn open_layer(path: impl AsRef<Path>) -> Result<Self, FileError> {
        Self::open_with(path.as_ref(), Links::Refuse)
    }

    fn open_with(path: &Path, links: Links) -> Result<Self, FileError> {
        let absolute = if path.is_absolute() {
            path.to_owned()
        } else {
            std::env::current_dir()
                .map_err(|err| FileError::from_io(path, err))?
                .join(path)
        };
        let fd = rustix::fs::open(
            &absolute,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|errno| FileError::io(path, errno))?;
        let real = std::fs::canonicalize(&absolute).unwrap_or_else(|_| absolute.clone());
        Ok(Self {
            fd,
            path: normalize(&absolute),
            real,
            links,
        })
    }

    /// The root as it was given, lexically normalised.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `path` relative to the root: an absolute path under the root (as given or as
    /// resolved), or a relative one; `..` is resolved lexically, and a path that climbs out
    /// or lies elsewhere is refused. No file is looked at.
    pub fn relative(&self, path: &Path) -> Result<PathBuf, FileError> {
        let escapes = || FileError::Escapes {
            path: path.to_owned(),
        };
        let inside = if path.is_absolute() {
            let normal = normalize(path);
            if normal.components().any(|c| c == Component::ParentDir) {
                return Err(escapes());
            }
            self.strip(&normal).ok_or_else(escapes)?
        } else {
            path.to_owned()
        };
        let normal = normalize(&inside);
        if normal.components().any(|c| c == Component::ParentDir) {
            return Err(escapes());
        }
        Ok(normal)
    }

    /// `target` (absolute) relative to the root, if it lies beneath it.
    fn strip(&self, target: &Path) -> Option<PathBuf> {
        target
            .strip_prefix(&self.path)
            .or_else(|_| target.strip_prefix(&self.real))
            .ok()
            .map(Path::to_owned)
    }

    /// The absolute path of `relative` beneath the root (for messages and for the editor).
    pub fn join(&self, relative: &Path) -> PathBuf {
        self.path.join(relative)
    }

    /// Where `path` leads, relative to the root (every link followed), when it stays inside:
    /// what a policy on paths (`.git`, protected paths) must judge.
    pub fn resolved(&self, path: &Path) -> Result<PathBuf, FileError> {
        Ok(resolve::resolve(self, path, Last::Follow, None)?.relative)
    }

    /// The file or folder `path` leads to; `None` when it does not exist.
    pub fn stat(&self, path: &Path) -> Result<Option<Stat>, FileError> {
        match resolve::resolve(self, path, Last::Follow, None) {
            Ok(resolved) => Ok(resolved.stat),
            Err(err) if err.is_not_found() => Ok(None),
            Err(err) => Err(err),
        }
    }

    /// The entry `path` itself (a final link is not followed); `None` when absent.
    pub fn lstat(&self, path: &Path) -> Result<Option<Stat>, FileError> {
        match resolve::resolve(self, path, Last::Entry, None) {
            Ok(resolved) => Ok(resolved.stat),
            Err(err) if err.is_not_found() => Ok(None),
            Err(err) => Err(err),
        }
    }

    /// The whole regular file `path` leads to, if it is at most `limit` bytes.
    pub fn read(&self, path: &Path, limit: u64) -> Result<Vec<u8>, FileError> {
        if let Some(bytes) = self.read_fast(path, limit)? {
            return Ok(bytes);
        }
        let resolved = resolve::resolve(self, path, Last::Follow, None)?;
        let name = resolved
            .name
            .as_deref()
            .ok_or_else(|| FileError::NotRegular {
                path: path.to_owned(),
                kind: "a folder",
            })?;
        read_at(&resolved.parent, name, path, limit)
    }

    /// One `openat2` call, where the kernel has it and the path has no link it refuses;
    /// `None` sends the read through the step-by-step resolution.
    fn read_fast(&self, path: &Path, limit: u64) -> Result<Option<Vec<u8>>, FileError> {
        if path.as_os_str().is_empty() || path.is_absolute() {
            return Ok(None);
        }
        let mut how = ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS;
        if self.links == Links::Refuse {
            how |= ResolveFlags::NO_SYMLINKS;
        }
        let opened = rustix::fs::openat2(
            &self.fd,
            path,
            OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC,
            Mode::empty(),
            how,
        );
        match opened {
            Ok(fd) => read_opened(fd, path, limit).map(Some),
            Err(Errno::NOENT) => Err(FileError::io(path, Errno::NOENT)),
            // EXDEV: a link out or an absolute link; ELOOP: a link in a layer; EAGAIN: a
            // rename raced; ENOSYS and friends: an older kernel. All resolved again slowly.
            Err(_) => Ok(None),
        }
    }

    /// Lists the folder `path` leads to.
    pub fn read_dir(&self, path: &Path) -> Result<Vec<DirEntry>, FileError> {
        self.open_dir(path)?
            .entries()
            .map_err(|err| FileError::from_io(path, err))
    }

    /// The root folder itself, for a walk of the whole tree.
    pub fn open_root_dir(&self) -> Result<Dir, FileError> {
        self.open_dir(Path::new(""))
    }

    /// Opens the folder `path` leads to, for a walk.
    pub fn open_dir(&self, path: &Path) -> Result<Dir, FileError> {
        let resolved = resolve::resolve(self, path, Last::Follow, None)?;
        let fd = match &resolved.name {
            None => rustix::fs::openat(
                &self.fd,
                ".",
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
            ),
            Some(name) => resolve::open_dir_at(&resolved.parent, name),
        }
        .map_err(|errno| FileError::io(path, errno))?;
        Ok(Dir { fd })
    }

    /// Creates the folder `path` and its missing parents; returns those created (outermost
    /// first, relative to the root).
    pub fn create_dir_all(&self, path: &Path) -> Result<Vec<PathBuf>, FileError> {
        let mut created = Vec::new();
        let resolved = resolve::resolve(self, path, Last::Follow, Some(&mut created))?;
        match (&resolved.name, resolved.stat) {
            (_, Some(stat)) if stat.is_dir() => {}
            (Some(name), None) => {
                rustix::fs::mkdirat(
                    &resolved.parent,
                    name.as_os_str(),
                    Mode::from_raw_mode(0o777),
                )
                .map_err(|errno| FileError::io(path, errno))?;
                created.push(resolved.relative.clone());
            }
            (_, _) => return Err(FileError::io(path, Errno::NOTDIR)),
        }
        Ok(created)
    }

    /// Replaces (or creates) the file `path` leads to with `bytes`, atomically and durably.
    /// A link inside is kept and its target written. `mode`: the new file's permissions
    /// (default: an existing file's, else 0666 less the umask).
    pub fn write(&self, path: &Path, bytes: &[u8], mode: Option<u32>) -> Result<(), FileError> {
        let staged = self.stage(path, bytes, mode)?;
        staged.commit()?;
        Ok(())
    }

    /// Writes `bytes` to a fresh temporary beside the file `path` leads to (creating missing
    /// folders, recorded in `created`), synced; [`Staged::commit`] renames it into place and
    /// dropping it removes it. What an edit of several files does for each before renaming
    /// any.
    pub fn stage_creating(
        &self,
        path: &Path,
        bytes: &[u8],
        mode: Option<u32>,
        created: &mut Vec<PathBuf>,
    ) -> Result<Staged<'_>, FileError> {
        let resolved = resolve::resolve(self, path, Last::Follow, Some(created))?;
        let Some(name) = resolved.name.clone() else {
            return Err(FileError::NotRegular {
                path: path.to_owned(),
                kind: "a folder",
            });
        };
        let existing = match resolved.stat {
            Some(stat) if stat.is_file() => Some(stat.mode),
            Some(stat) => {
                return Err(FileError::NotRegular {
                    path: path.to_owned(),
                    kind: kind_name(stat.kind),
                });
            }
            None => None,
        };
        let (temp, file) = create_temporary(&resolved.parent, &name)
            .map_err(|errno| FileError::io(&resolved.relative, errno))?;
        let staged = Staged {
            parent: resolved.parent,
            temp,
            name,
            relative: resolved.relative,
            committed: false,
        };
        let written = (|| -> io::Result<()> {
            let mut file = std::fs::File::from(file);
            file.write_all(bytes)?;
            let mode = mode.or(existing).unwrap_or_else(|| 0o666 & !umask());
            rustix::fs::fchmod(&file, Mode::from_raw_mode(mode))?;
            file.sync_all()
        })();
        written.map_err(|err| FileError::from_io(&staged.relative, err))?;
        Ok(staged)
    }

    /// [`Root::stage_creating`] without recording the folders made.
    pub fn stage(
        &self,
        path: &Path,
        bytes: &[u8],
        mode: Option<u32>,
    ) -> Result<Staged<'_>, FileError> {
        self.stage_creating(path, bytes, mode, &mut Vec::new())
    }

    /// Removes the entry `path` names: a file, or a link itself (never its target), after
    /// checking that the folders on the way stay inside.
    pub fn remove_file(&self, path: &Path) -> Result<(), FileError> {
        let resolved = resolve::resolve(self, path, Last::Entry, None)?;
        let name = resolved.name.as_deref().ok_or_else(|| FileError::Escapes {
            path: path.to_owned(),
        })?;
        match resolved.stat {
            None => Err(FileError::io(path, Errno::NOENT)),
            Some(stat) if stat.is_dir() => Err(FileError::io(path, Errno::ISDIR)),
            Some(_) => rustix::fs::unlinkat(&resolved.parent, name, AtFlags::empty())
                .map_err(|errno| FileError::io(path, errno)),
        }
    }

    /// Removes the empty folder `path`.
    pub fn remove_dir(&self, path: &Path) -> Result<(), FileError> {
        let resolved = resolve::resolve(self, path, Last::Entry, None)?;
        let name = resolved.name.as_deref().ok_or_else(|| FileError::Escapes {
            path: path.to_owned(),
        })?;
        rustix::fs::unlinkat(&resolved.parent, name, AtFlags::REMOVEDIR)
            .map_err(|errno| FileError::io(path, errno))
    }

    /// Renames the entry `from` to `to` (both beneath the root; a link is moved as a link),
    /// creating `to`'s missing folders.
    pub fn rename(&self, from: &Path, to: &Path) -> Result<(), FileError> {
        let source = resolve::resolve(self, from, Last::Entry, None)?;
        let target = resolve::resolve(self, to, Last::Entry, Some(&mut Vec::new()))?;
        let (Some(source_name), Some(target_name)) = (&source.name, &target.name) else {
            return Err(FileError::Escapes {
                path: from.to_owned(),
            });
        };
        rustix::fs::renameat(&source.parent, source_name, &target.parent, target_name)
            .map_err(|errno| FileError::io(from, errno))
    }

    /// Syncs the folder `path` leads to (after renames in it).
    pub fn sync_dir(&self, path: &Path) -> Result<(), FileError> {
        let dir = self.open_dir(path)?;
        rustix::fs::fsync(&dir.fd).map_err(|errno| FileError::io(path, errno))
    }
}

/// A file staged beside its destination by [`Root::stage`].
pub struct Staged<'a> {
    parent: Parent<'a>,
    temp: OsString,
    name: OsString,
    relative: PathBuf,
    committed: bool,
}

impl Staged<'_> {
    /// The destination, relative to the root (links resolved).
    pub fn relative(&self) -> &Path {
        &self.relative
    }

    /// Renames the temporary over the destination and syncs the folder. A failed sync is
    /// logged, not returned: the file is in place by then.
    pub fn commit(mut self) -> Result<(), FileError> {
        rustix::fs::renameat(&self.parent, &self.temp, &self.parent, &self.name)
            .map_err(|errno| FileError::io(&self.relative, errno))?;
        self.committed = true;
        bytecode::drop_stale(&self.parent, &self.name);
        if let Err(errno) = rustix::fs::fsync(&self.parent) {
            tracing::error!(
                "{} is written but its folder could not be synced, so it may not survive a \
                 power loss: {errno}",
                self.relative.display()
            );
        }
        Ok(())
    }
}

impl Drop for Staged<'_> {
    fn drop(&mut self) {
        if !self.committed {
            let _ = rustix::fs::unlinkat(&self.parent, &self.temp, AtFlags::empty());
        }
    }
}

/// The process's umask (read without changing it where the kernel says it in /proc).
fn umask() -> u32 {
    static UMASK: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *UMASK.get_or_init(|| {
        std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|status| {
                status
                    .lines()
                    .find_map(|line| line.strip_prefix("Umask:"))
                    .and_then(|value| u32::from_str_radix(value.trim(), 8).ok())
            })
            .unwrap_or(0o022)
    })
}

/// The prefix every temporary wright writes beside a file carries after the file's name:
/// `.NAME.wright-PID-RANDOM.tmp`. The sweep of stale temporaries recognises this shape.
pub const TEMPORARY_MARK: &str = ".wright-";

/// Creates `.NAME.wright-PID-RANDOM.tmp` in `dir`, exclusively and without following a link:
/// a name planted there (a link, a file) makes the attempt fail and another random name is
/// tried.
fn create_temporary(dir: &impl AsFd, name: &OsStr) -> Result<(OsString, OwnedFd), Errno> {
    let mut last = Errno::EXIST;
    for _ in 0..16 {
        let mut temp = OsString::from(".");
        temp.push(name);
        temp.push(format!(
            "{TEMPORARY_MARK}{}-{:016x}.tmp",
            std::process::id(),
            random_u64()
        ));
        match rustix::fs::openat(
            dir,
            temp.as_os_str(),
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
        ) {
            Ok(fd) => return Ok((temp, fd)),
            Err(Errno::EXIST) => last = Errno::EXIST,
            Err(errno) => return Err(errno),
        }
    }
    Err(last)
}

/// 64 unpredictable bits: the OS-seeded keys of the standard library's hasher over a counter.
fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    hasher.finish()
}

/// Opens `name` in `dir` for reading without following a link or blocking, and reads it
/// whole if it is a regular file of at most `limit` bytes.
fn read_at(
    dir: &impl AsFd,
    name: &OsStr,
    display: &Path,
    limit: u64,
) -> Result<Vec<u8>, FileError> {
    // Looked at first, so a FIFO or device is never even opened.
    let stat = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
        .map_err(|errno| FileError::io(display, errno))?;
    let kind = FileType::from_raw_mode(stat.st_mode);
    if kind != FileType::RegularFile {
        return Err(FileError::NotRegular {
            path: display.to_owned(),
            kind: kind_name(kind),
        });
    }
    let fd = rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|errno| FileError::io(display, errno))?;
    read_opened(fd, display, limit)
}

/// Reads an opened file whole, checking (again, on the descriptor) that it is a regular file
/// within `limit`; a file that grows past it while read is refused too.
fn read_opened(fd: OwnedFd, display: &Path, limit: u64) -> Result<Vec<u8>, FileError> {
    let stat = Stat::of(&rustix::fs::fstat(&fd).map_err(|errno| FileError::io(display, errno))?);
    if !stat.is_file() {
        return Err(FileError::NotRegular {
            path: display.to_owned(),
            kind: kind_name(stat.kind),
        });
    }
    if stat.size > limit {
        return Err(FileError::TooLarge {
            path: display.to_owned(),
            size: stat.size,
            limit,
        });
    }
    let file = std::fs::File::from(fd);
    let mut bytes = Vec::with_capacity(stat.size as usize);
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|err| FileError::from_io(display, err))?;
    if bytes.len() as u64 > limit {
        return Err(FileError::TooLarge {
            path: display.to_owned(),
            size: bytes.len() as u64,
            limit,
        });
    }
    Ok(bytes)
}

/// The whole regular file at `path`, a file of no workspace (the user's own configuration, an
/// ignore file of a folder above the workspace): links are followed, as the user made them,
/// but a FIFO or device is refused without being opened for long, and at most `limit` bytes
/// are read.
pub fn read_bounded(path: &Path, limit: u64) -> Result<Vec<u8>, FileError> {
    // Looked at first (through links), so a FIFO or device is never opened.
    let stat = Stat::of(&rustix::fs::stat(path).map_err(|errno| FileError::io(path, errno))?);
    if !stat.is_file() {
        return Err(FileError::NotRegular {
            path: path.to_owned(),
            kind: kind_name(stat.kind),
        });
    }
    let fd = rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|errno| FileError::io(path, errno))?;
    read_opened(fd, path, limit)
}

/// The entry at `path` itself (a link is not followed), a file of no workspace.
pub fn lstat_outside(path: &Path) -> Result<Stat, FileError> {
    rustix::fs::lstat(path)
        .map(|stat| Stat::of(&stat))
        .map_err(|errno| FileError::io(path, errno))
}

/// `path` with `.` dropped and `..` applied lexically where a name precedes it (leading
/// `..`s stay, so a path that climbs out still says so).
pub fn normalize(path: &Path) -> PathBuf {
    let mut out: Vec<Component<'_>> = Vec::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => match out.last() {
                Some(Component::Normal(_)) => {
                    out.pop();
                }
                Some(Component::RootDir) => {}
                _ => out.push(component),
            },
            other => out.push(other),
        }
    }
    out.iter().collect()
}

#[cfg(test)]
mod tests;
