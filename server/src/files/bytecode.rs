//! Compiled caches a write of a source file must drop: Python's bytecode.
//!
//! Python reuses `__pycache__/NAME.*.pyc` when the source's modification time (in whole
//! seconds) and size match what the bytecode recorded. An edit that keeps a file's size and
//! lands within the second of the last compile (`a - b` → `a + b`, then the tests again) is
//! not seen: the old code runs, and the agent "fixes" code that is already fixed. So every
//! write of `NAME.py` removes that bytecode beside it. (Commands are also started with
//! `PYTHONDONTWRITEBYTECODE=1`, so they leave none in the workspace.) Other tools' caches were
//! checked for the same key: make compares times only (a write is newer), mypy and pytest
//! confirm a match by content hash, Node, Go and Cargo hash contents.

use std::ffi::OsStr;
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;

use rustix::fs::{AtFlags, Mode, OFlags};

/// Removes `__pycache__/STEM.*.pyc` in the folder `parent` after `name` (a `.py` file) was
/// written there. Best effort: a cache that cannot be removed is logged, never an error of
/// the write (the write itself has landed).
pub(super) fn drop_stale(parent: impl AsFd, name: &OsStr) {
    let Some(stem) = name.as_bytes().strip_suffix(b".py") else {
        return;
    };
    let cache = match rustix::fs::openat(
        parent,
        "__pycache__",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        Ok(cache) => cache,
        Err(_) => return,
    };
    let Ok(entries) = rustix::fs::Dir::read_from(&cache) else {
        return;
    };
    for entry in entries.flatten() {
        let file = entry.file_name().to_bytes();
        let is_its_bytecode = file.len() > stem.len()
            && file.starts_with(stem)
            && file[stem.len()] == b'.'
            && file.ends_with(b".pyc");
        if is_its_bytecode
            && let Err(errno) = rustix::fs::unlinkat(&cache, entry.file_name(), AtFlags::empty())
        {
            tracing::warn!(
                "could not remove the stale bytecode {} of a written file: {errno}",
                String::from_utf8_lossy(file)
            );
        }
    }
}
