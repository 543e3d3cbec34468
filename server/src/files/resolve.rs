//! Resolving a relative path beneath a root handle one component at a time, as the kernel
//! would, but with wright deciding at every symbolic link: followed while its target stays
//! beneath the root, refused (naming the link) when it leads out, or refused outright in a
//! root that allows no links (a snapshot layer a command wrote).
//!
//! Every step is relative to a directory descriptor opened with `O_NOFOLLOW`, so nothing a
//! concurrent writer renames or swaps can redirect a step that already happened: a component
//! replaced by a link between the look and the open makes the open fail, never follow. `..`
//! pops the directories resolved so far (the physical parent, as the kernel resolves it), and
//! popping past the root is leaving it.

use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

use super::{FileError, Links, Root, Stat};

/// The most links one resolution follows (the kernel's own limit is 40).
const MAX_LINKS: usize = 40;

/// The parent directory of a resolved name: the root itself, or a folder beneath it.
pub(crate) enum Parent<'a> {
    Root(BorrowedFd<'a>),
    Dir(OwnedFd),
}

impl AsFd for Parent<'_> {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            Self::Root(fd) => *fd,
            Self::Dir(fd) => fd.as_fd(),
        }
    }
}

/// Where a path led: the folder that holds its last component, that component's name, and
/// the path as resolved (every link replaced by where it leads), relative to the root.
pub(crate) struct Resolved<'a> {
    pub parent: Parent<'a>,
    /// `None` when the path is the root itself.
    pub name: Option<OsString>,
    pub relative: PathBuf,
    /// What the last component is (not followed when it is a link and `Last::Entry` asked
    /// for the entry itself); `None` when it does not exist.
    pub stat: Option<Stat>,
}

/// What to do with the last component when it is a symbolic link.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Last {
    /// Follow it, as a read or a write of the file does.
    Follow,
    /// Stop at the entry itself, as removing or renaming it does.
    Entry,
}

/// Splits a path given relative to the root into the names to resolve. An absolute path,
/// or a drive prefix, is not beneath anything.
pub(crate) fn components(path: &Path, display: &Path) -> Result<VecDeque<OsString>, FileError> {
    let mut names = VecDeque::new();
    for component in path.components() {
        match component {
            Component::Normal(name) => names.push_back(name.to_owned()),
            Component::CurDir => {}
            Component::ParentDir => names.push_back(OsString::from("..")),
            Component::RootDir | Component::Prefix(_) => {
                return Err(FileError::Escapes {
                    path: display.to_owned(),
                });
            }
        }
    }
    Ok(names)
}

/// Resolves `path` (relative to `root`). With `create`, missing folders on the way are made
/// (mode 0777 less the umask, as `mkdir -p` does) and recorded, outermost first, as paths
/// relative to the root.
pub(crate) fn resolve<'a>(
    root: &'a Root,
    path: &Path,
    last: Last,
    mut create: Option<&mut Vec<PathBuf>>,
) -> Result<Resolved<'a>, FileError> {
    let mut pending = components(path, path)?;
    // The folders resolved so far beneath the root, with their names.
    let mut stack: Vec<(OwnedFd, OsString)> = Vec::new();
    let mut links = 0;
    // The last link followed and its target, for the error if a `..` it brought climbs out.
    let mut followed: Option<(PathBuf, PathBuf)> = None;
    let relative_of = |stack: &[(OwnedFd, OsString)], name: Option<&OsStr>| -> PathBuf {
        let mut out: PathBuf = stack.iter().map(|(_, name)| name.as_os_str()).collect();
        if let Some(name) = name {
            out.push(name);
        }
        out
    };
    loop {
        let Some(name) = pending.pop_front() else {
            // The path names a folder (or the root): hand back its parent and name.
            return match stack.pop() {
                None => Ok(Resolved {
                    parent: Parent::Root(root.fd.as_fd()),
                    name: None,
                    relative: PathBuf::new(),
                    stat: Some(Stat::of(
                        &rustix::fs::fstat(&root.fd)
                            .map_err(|errno| FileError::io(root.path(), errno))?,
                    )),
                }),
                Some((fd, dir_name)) => {
                    let stat =
                        rustix::fs::fstat(&fd).map_err(|errno| FileError::io(path, errno))?;
                    let relative = relative_of(&stack, Some(&dir_name));
                    let parent = match stack.pop() {
                        Some((parent, _)) => Parent::Dir(parent),
                        None => Parent::Root(root.fd.as_fd()),
                    };
                    Ok(Resolved {
                        parent,
                        name: Some(dir_name),
                        relative,
                        stat: Some(Stat::of(&stat)),
                    })
                }
            };
        };
        if name == ".." {
            if stack.pop().is_none() {
                // Climbing above the root: through the last link followed, if one brought
                // this `..`, else as the path was written.
                return Err(match followed.take() {
                    Some((link, target)) => FileError::Outside {
                        path: path.to_owned(),
                        link,
                        target,
                    },
                    None => FileError::Escapes {
                        path: path.to_owned(),
                    },
                });
            }
            continue;
        }
        let is_last = pending.is_empty();
        let current: BorrowedFd<'_> = match stack.last() {
            Some((fd, _)) => fd.as_fd(),
            None => root.fd.as_fd(),
        };
        let stat = match rustix::fs::statat(current, name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) => Some(Stat::of(&stat)),
            Err(Errno::NOENT) => None,
            Err(errno) => return Err(FileError::io(&relative_of(&stack, Some(&name)), errno)),
        };
        let kind = stat.as_ref().map(|s| s.kind);
        if kind == Some(FileType::Symlink) && !(is_last && last == Last::Entry) {
            let link = relative_of(&stack, Some(&name));
            if root.links == Links::Refuse {
                return Err(FileError::Link {
                    path: path.to_owned(),
                    link,
                });
            }
            links += 1;
            if links > MAX_LINKS {
                return Err(FileError::Loop {
                    path: path.to_owned(),
                });
            }
            let target: PathBuf = rustix::fs::readlinkat(current, name.as_os_str(), Vec::new())
                .map(|target| PathBuf::from(OsStr::from_bytes(target.as_bytes())))
                .map_err(|errno| FileError::io(&link, errno))?;
            let within = if target.is_absolute() {
                match root.strip(&target) {
                    Some(inside) => {
                        stack.clear();
                        inside
                    }
                    None => {
                        return Err(FileError::Outside {
                            path: path.to_owned(),
                            link,
                            target,
                        });
                    }
                }
            } else {
                target.clone()
            };
            // A relative target that climbs above the root is caught by the `..` rule.
            let mut names = components(&within, path).map_err(|_| FileError::Outside {
                path: path.to_owned(),
                link: link.clone(),
                target: target.clone(),
            })?;
            while let Some(next) = names.pop_back() {
                pending.push_front(next);
            }
            followed = Some((link, target));
            continue;
        }
        if is_last {
            let relative = relative_of(&stack, Some(&name));
            let parent = match stack.pop() {
                Some((fd, _)) => Parent::Dir(fd),
                None => Parent::Root(root.fd.as_fd()),
            };
            return Ok(Resolved {
                parent,
                name: Some(name),
                relative,
                stat,
            });
        }
        match kind {
            Some(FileType::Directory) => {}
            None if create.is_some() => {
                match rustix::fs::mkdirat(current, name.as_os_str(), Mode::from_raw_mode(0o777)) {
                    Ok(()) => {
                        if let Some(created) = create.as_deref_mut() {
                            created.push(relative_of(&stack, Some(&name)));
                        }
                    }
                    // Made meanwhile by someone else: use it if it is a folder (checked by
                    // the open below).
                    Err(Errno::EXIST) => {}
                    Err(errno) => {
                        return Err(FileError::io(&relative_of(&stack, Some(&name)), errno));
                    }
                }
            }
            None => {
                return Err(FileError::io(
                    &relative_of(&stack, Some(&name)),
                    Errno::NOENT,
                ));
            }
            Some(_) => {
                return Err(FileError::io(
                    &relative_of(&stack, Some(&name)),
                    Errno::NOTDIR,
                ));
            }
        }
        let fd = open_dir_at(current, &name)
            .map_err(|errno| FileError::io(&relative_of(&stack, Some(&name)), errno))?;
        stack.push((fd, name));
    }
}

/// Opens the folder `name` in `dir`, refusing to follow a link there.
pub(crate) fn open_dir_at(dir: impl AsFd, name: &OsStr) -> Result<OwnedFd, Errno> {
    rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
}
