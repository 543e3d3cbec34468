//! wright's own files (session journals, artifacts, undo records, checkpoint logs, the
//! index): they hold the user's prompts and code, so folders are created 0700 and files 0600,
//! and none is ever opened through a symbolic link (a link planted at a journal's name is
//! refused, not followed).

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::OwnedFd;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::Path;

use rustix::fs::{Mode, OFlags};

/// Creates `dir` and its missing parents with mode 0700. An existing `dir` owned by this
/// user is narrowed to 0700 (earlier versions made them 0755); a link there is refused.
pub fn ensure_private_dir(dir: &Path) -> io::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let meta = std::fs::symlink_metadata(dir)?;
    if meta.file_type().is_symlink() {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{} is a symbolic link; wright keeps its own files only in real folders",
                dir.display()
            ),
        ));
    }
    // A folder someone else made where wright keeps its files could hold what they planted
    // (an undo record, a journal) and they could read what wright writes there.
    if meta.uid() != euid() {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{} belongs to another user (uid {}); wright keeps its own files only in \
                 folders of its user",
                dir.display(),
                meta.uid()
            ),
        ));
    }
    if meta.mode() & 0o077 != 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

/// A new folder of this process's own in the system temp folder, `PREFIX-UID-RANDOM`, 0700:
/// made with one `mkdir` under a name nobody could guess, so nobody else made it first. For
/// what has no folder of the user's to go to (no `HOME`) and need not outlive the process.
pub fn fresh_private_dir(prefix: &str) -> io::Result<std::path::PathBuf> {
    let base = std::env::temp_dir();
    let mut last = io::Error::from(io::ErrorKind::AlreadyExists);
    for _ in 0..16 {
        let dir = base.join(format!("{prefix}-{}-{:016x}", euid(), super::random_u64()));
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => return Ok(dir),
            Err(err) if err.kind() == io::ErrorKind::AlreadyExists => last = err,
            Err(err) => return Err(err),
        }
    }
    Err(last)
}

fn euid() -> u32 {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() }
}

fn open(path: &Path, flags: OFlags) -> io::Result<OwnedFd> {
    Ok(rustix::fs::open(
        path,
        flags | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NOCTTY,
        Mode::from_raw_mode(0o600),
    )?)
}

/// Opens `path` for appending, creating it 0600 (its folder made private first).
pub fn append_private(path: &Path) -> io::Result<File> {
    if let Some(dir) = path.parent() {
        ensure_private_dir(dir)?;
    }
    Ok(File::from(open(
        path,
        OFlags::WRONLY | OFlags::APPEND | OFlags::CREATE,
    )?))
}

/// Creates the new file `path` for appending, 0600 (its folder made private first); a file
/// or link already there makes it fail (`O_EXCL | O_NOFOLLOW`).
pub fn create_private(path: &Path) -> io::Result<File> {
    if let Some(dir) = path.parent() {
        ensure_private_dir(dir)?;
    }
    Ok(File::from(open(
        path,
        OFlags::WRONLY | OFlags::APPEND | OFlags::CREATE | OFlags::EXCL,
    )?))
}

/// Opens the regular file `path` for reading: a link, a FIFO or a file owned by another
/// user is refused (another user could have planted it where wright looks).
pub fn open_private(path: &Path) -> io::Result<File> {
    let file = File::from(open(path, OFlags::RDONLY | OFlags::NONBLOCK)?);
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is not a regular file", path.display()),
        ));
    }
    if meta.uid() != euid() {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{} belongs to another user; wright reads back only its own files",
                path.display()
            ),
        ));
    }
    Ok(file)
}

/// Reads the regular file `path`, at most `limit` bytes, as [`open_private`] opens it.
pub fn read_private(path: &Path, limit: u64) -> io::Result<Vec<u8>> {
    let file = open_private(path)?;
    let meta = file.metadata()?;
    if meta.len() > limit {
        return Err(io::Error::new(
            io::ErrorKind::FileTooLarge,
            format!("{} is {} bytes, over {limit}", path.display(), meta.len()),
        ));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(limit.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(io::Error::new(
            io::ErrorKind::FileTooLarge,
            format!("{} grew past {limit} bytes while read", path.display()),
        ));
    }
    Ok(bytes)
}

/// Replaces `path` with `bytes`, mode 0600, durably: an exclusive temporary beside it,
/// synced, renamed over it, the folder synced. Once it returns, the file survives a power
/// loss, and at no point is it half written.
pub fn write_private(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    ensure_private_dir(dir)?;
    let name = path.file_name().ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} names no file", path.display()),
        )
    })?;
    let root = super::Root::open_layer(dir).map_err(super::FileError::into_io)?;
    root.write(Path::new(name), bytes, Some(0o600))
        .map_err(super::FileError::into_io)
}
