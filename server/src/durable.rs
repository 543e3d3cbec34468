//! Durable file replacement, the one way wright replaces a file outside the sandbox (the
//! user's files an edit changes, the index's manifest, `wright exec`'s undo record, the
//! artifacts): the new content goes to a temporary file beside its destination and is synced,
//! the temporary is renamed over the destination, and the folder is synced.
//!
//! The rename alone is atomic against a crash of the process, not of the machine: after a
//! power loss a file system may show the rename without the data it points to (XFS, btrfs,
//! ext4 mounted without `auto_da_alloc`: an empty or zero-filled file where the old one
//! was). Syncing the temporary before the rename puts the data on the disk first; syncing the
//! folder afterwards makes the rename itself durable. Temporaries are named after their
//! destination and this process ([`replace_beside`]); an edit's name also says its place in
//! the plan, for the sweep of stale ones (see `edit::apply`).
//!
//! The syncs cost a few milliseconds per file (about 4 ms on the development VM's ext4: an
//! edit of one file went from about 1.3 ms to about 6 ms, of three files to about 19 ms).
//! That is kept for every file, not only the user's: beside a model step's seconds, or a
//! tantivy commit's own syncs (the index files), it does not show.

use std::fs::{self, File, Permissions};
use std::io::{self, Write};
use std::path::Path;

/// Writes `bytes` to a new file at `temp` (truncating one left there), with `permissions`
/// when given, and syncs its content and metadata to the disk.
pub fn write_synced(temp: &Path, bytes: &[u8], permissions: Option<Permissions>) -> io::Result<()> {
    let mut file = File::create(temp)?;
    file.write_all(bytes)?;
    if let Some(permissions) = permissions {
        file.set_permissions(permissions)?;
    }
    file.sync_all()
}

/// Syncs the folder `dir`, so that the entries renamed, created or removed in it stay so
/// after a power loss.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// [`replace`] through the temporary `.NAME.PID.tmp` beside `target` (NAME its file name, PID
/// this process): what every caller uses but an edit, whose temporaries carry a name the
/// workspace sweep recognises (`edit::apply`).
pub fn replace_beside(target: &Path, bytes: &[u8]) -> io::Result<()> {
    let name = target.file_name().unwrap_or_default().to_string_lossy();
    let temp = target.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    replace(target, &temp, bytes, None)
}

/// The folder holding `path` (`.` for a bare file name).
pub fn parent(path: &Path) -> &Path {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    }
}

/// Replaces `target` with `bytes` through `temp`, which must be in the same folder (a rename
/// across file systems is not atomic): the temporary is written and synced, renamed over the
/// target, and the folder synced. If writing or renaming fails, the temporary is removed and
/// `target` is as it was; once this returns `Ok`, the new content survives a power loss.
pub fn replace(
    target: &Path,
    temp: &Path,
    bytes: &[u8],
    permissions: Option<Permissions>,
) -> io::Result<()> {
    let renamed = write_synced(temp, bytes, permissions).and_then(|()| fs::rename(temp, target));
    if let Err(err) = renamed {
        let _ = fs::remove_file(temp);
        return Err(err);
    }
    sync_dir(parent(target))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn a_replacement_lands_whole_with_the_permissions_given_and_leaves_no_temporary() {
        let dir = std::env::temp_dir().join(format!("wright-durable-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let (target, temp) = (dir.join("f.json"), dir.join(".f.json.tmp"));
        fs::write(&target, "old").unwrap();
        fs::write(&temp, "a longer leftover of an earlier attempt").unwrap();
        replace(&target, &temp, b"new", Some(Permissions::from_mode(0o640))).unwrap();
        assert_eq!(fs::read_to_string(&target).unwrap(), "new");
        assert_eq!(
            fs::metadata(&target).unwrap().permissions().mode() & 0o777,
            0o640
        );
        assert!(!temp.exists());

        // A rename that cannot happen (the target is a non-empty folder) leaves the target
        // as it was and no temporary.
        let folder = dir.join("folder");
        fs::create_dir_all(folder.join("inside")).unwrap();
        let temp = dir.join(".folder.tmp");
        assert!(replace(&folder, &temp, b"new", None).is_err());
        assert!(folder.join("inside").is_dir() && !temp.exists());
        assert_eq!(parent(Path::new("bare.json")), Path::new("."));
        fs::remove_dir_all(&dir).unwrap();
    }
}
