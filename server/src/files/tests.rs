//! The attacks a repository (or a command's leftovers) can make on wright's own file access,
//! each tried against [`Root`].

use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};

use super::*;

/// A scratch folder with `ws/` (the root) and `outside/` beside it.
struct Scratch {
    dir: PathBuf,
}

impl Scratch {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("wright-files-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("ws/src")).unwrap();
        std::fs::create_dir_all(dir.join("outside")).unwrap();
        std::fs::write(dir.join("outside/secret"), "outside secret\n").unwrap();
        std::fs::write(dir.join("ws/src/main.rs"), "fn main() {}\n").unwrap();
        Self { dir }
    }

    fn ws(&self) -> PathBuf {
        self.dir.join("ws")
    }

    fn outside(&self) -> PathBuf {
        self.dir.join("outside")
    }

    fn root(&self) -> Root {
        Root::open(self.ws()).unwrap()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[test]
fn links_that_stay_inside_work_as_their_target_and_writes_keep_the_link() {
    let s = Scratch::new("inside");
    symlink("src/main.rs", s.ws().join("relative")).unwrap();
    symlink(s.ws().join("src/main.rs"), s.ws().join("absolute")).unwrap();
    symlink("src", s.ws().join("srcdir")).unwrap();
    let root = s.root();
    for link in ["relative", "absolute", "srcdir/main.rs", "src/../relative"] {
        assert_eq!(
            root.read(Path::new(link), 1 << 20).unwrap(),
            b"fn main() {}\n",
            "{link}"
        );
        assert_eq!(
            root.resolved(Path::new(link)).unwrap(),
            Path::new("src/main.rs")
        );
    }
    root.write(Path::new("relative"), b"fn main() { 1; }\n", None)
        .unwrap();
    assert!(
        std::fs::symlink_metadata(s.ws().join("relative"))
            .unwrap()
            .is_symlink()
    );
    assert_eq!(
        std::fs::read_to_string(s.ws().join("src/main.rs")).unwrap(),
        "fn main() { 1; }\n"
    );
    let names: Vec<_> = root
        .read_dir(Path::new("srcdir"))
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(names, ["main.rs"]);
}

#[test]
fn links_out_of_the_root_are_neither_read_nor_written_through() {
    let s = Scratch::new("outside");
    let secret = s.outside().join("secret");
    symlink(&secret, s.ws().join("key.txt")).unwrap();
    symlink("../outside/secret", s.ws().join("relative.txt")).unwrap();
    symlink(s.outside(), s.ws().join("linked")).unwrap();
    symlink("../../outside", s.ws().join("src/up")).unwrap();
    let root = s.root();
    for path in ["key.txt", "relative.txt", "linked/secret", "src/up/secret"] {
        let err = root.read(Path::new(path), 1 << 20).unwrap_err();
        assert!(matches!(err, FileError::Outside { .. }), "{path}: {err}");
        assert_eq!(err.kind(), "outside");
        assert!(err.to_string().contains("leads outside"), "{err}");
        let err = root.write(Path::new(path), b"pwned", None).unwrap_err();
        assert_eq!(err.kind(), "outside", "{path}: {err}");
        assert!(root.stat(Path::new(path)).is_err(), "{path}");
    }
    // Adding a file under a linked folder creates nothing outside.
    assert_eq!(
        root.write(Path::new("linked/new.txt"), b"x", None)
            .unwrap_err()
            .kind(),
        "outside"
    );
    assert_eq!(
        root.create_dir_all(Path::new("linked/a/b"))
            .unwrap_err()
            .kind(),
        "outside"
    );
    assert!(root.read_dir(Path::new("linked")).is_err());
    // Removing a path through the linked folder is refused; removing the link itself removes
    // only the link.
    assert!(root.remove_file(Path::new("linked/secret")).is_err());
    root.remove_file(Path::new("key.txt")).unwrap();
    assert!(!s.ws().join("key.txt").exists());
    assert_eq!(
        std::fs::read_to_string(&secret).unwrap(),
        "outside secret\n"
    );
    assert!(!s.outside().join("new.txt").exists() && !s.outside().join("a").exists());
}

#[test]
fn paths_that_climb_out_are_refused_and_those_that_do_not_work() {
    let s = Scratch::new("climb");
    let root = s.root();
    for path in [
        "../outside/secret",
        "src/../../outside/secret",
        "/etc/passwd",
    ] {
        let err = root.read(Path::new(path), 1 << 20).unwrap_err();
        assert_eq!(err.kind(), "outside", "{path}: {err}");
    }
    assert_eq!(
        root.read(Path::new("src/../src/./main.rs"), 1 << 20)
            .unwrap(),
        b"fn main() {}\n"
    );
    // Lexical checks of what an editor sends.
    let ws = s.ws();
    assert_eq!(
        root.relative(&ws.join("src/main.rs")).unwrap(),
        Path::new("src/main.rs")
    );
    assert!(root.relative(&ws.join("../outside/secret")).is_err());
    assert!(root.relative(&ws.join("src/../../outside")).is_err());
    assert!(root.relative(Path::new("../x")).is_err());
    assert!(root.relative(Path::new("/elsewhere/x")).is_err());
}

#[test]
fn a_root_for_a_layer_follows_no_link_at_all() {
    let s = Scratch::new("layer");
    symlink("src", s.ws().join("srcdir")).unwrap();
    symlink("src/main.rs", s.ws().join("file")).unwrap();
    let layer = Root::open_layer(s.ws()).unwrap();
    for path in ["srcdir/main.rs", "file"] {
        let err = layer.read(Path::new(path), 1 << 20).unwrap_err();
        assert!(matches!(err, FileError::Link { .. }), "{path}: {err}");
        assert!(layer.write(Path::new(path), b"x", None).is_err());
    }
    assert!(layer.create_dir_all(Path::new("srcdir/sub")).is_err());
    assert!(!s.ws().join("src/sub").exists());
    assert_eq!(
        std::fs::read_to_string(s.ws().join("src/main.rs")).unwrap(),
        "fn main() {}\n"
    );
}

#[test]
fn reads_take_only_regular_files_within_the_limit_and_never_block() {
    let s = Scratch::new("kinds");
    let fifo = s.ws().join("fifo");
    let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    symlink("/dev/zero", s.ws().join(".gitignore")).unwrap();
    std::fs::write(s.ws().join("big"), vec![b'x'; 5000]).unwrap();
    let root = s.root();
    let err = root.read(Path::new("fifo"), 1 << 20).unwrap_err();
    assert!(
        matches!(err, FileError::NotRegular { kind: "a FIFO", .. }),
        "{err}"
    );
    assert_eq!(
        root.read(Path::new(".gitignore"), 1 << 20)
            .unwrap_err()
            .kind(),
        "outside"
    );
    assert!(matches!(
        root.read(Path::new("big"), 4096).unwrap_err(),
        FileError::TooLarge { size: 5000, .. }
    ));
    assert_eq!(root.read(Path::new("big"), 5000).unwrap().len(), 5000);
    assert!(matches!(
        root.read(Path::new("src"), 10).unwrap_err(),
        FileError::NotRegular { .. }
    ));
    // Writing over a FIFO is refused too, not blocked.
    assert!(root.write(Path::new("fifo"), b"x", None).is_err());
}

#[test]
fn temporaries_are_exclusive_so_links_planted_at_old_names_are_never_followed() {
    let s = Scratch::new("temporaries");
    let victim = s.outside().join("secret");
    // The names earlier versions used, predictable from a pid and a step.
    for pid in [std::process::id(), 1, 2] {
        for step in ["0", "1", "restore"] {
            symlink(
                &victim,
                s.ws().join(format!("src/.main.rs.wright-{pid}-{step}.tmp")),
            )
            .unwrap();
        }
    }
    let root = s.root();
    root.write(Path::new("src/main.rs"), b"fn main() { 2; }\n", None)
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(&victim).unwrap(),
        "outside secret\n"
    );
    let meta = std::fs::symlink_metadata(s.ws().join("src/main.rs")).unwrap();
    assert!(meta.is_file(), "the edited file stays a file");
    // Nothing of ours is left beside it.
    let leftovers = std::fs::read_dir(s.ws().join("src"))
        .unwrap()
        .filter(|e| {
            let e = e.as_ref().unwrap();
            !e.file_type().unwrap().is_symlink() && e.file_name() != "main.rs"
        })
        .count();
    assert_eq!(leftovers, 0);
}

#[test]
fn a_replaced_file_keeps_its_mode_and_a_new_one_gets_the_umasks() {
    let s = Scratch::new("modes");
    let path = s.ws().join("src/main.rs");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o750)).unwrap();
    let root = s.root();
    root.write(Path::new("src/main.rs"), b"x", None).unwrap();
    assert_eq!(
        std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o750
    );
    let created = root.create_dir_all(Path::new("new/deep")).unwrap();
    assert_eq!(created, [PathBuf::from("new"), PathBuf::from("new/deep")]);
    root.write(Path::new("new/deep/file.txt"), b"y", Some(0o640))
        .unwrap();
    let mode = std::fs::metadata(s.ws().join("new/deep/file.txt"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o640);
}

#[test]
fn a_staged_file_is_removed_unless_committed() {
    let s = Scratch::new("staged");
    let root = s.root();
    let staged = root.stage(Path::new("src/main.rs"), b"new", None).unwrap();
    assert_eq!(std::fs::read_dir(s.ws().join("src")).unwrap().count(), 2);
    drop(staged);
    assert_eq!(std::fs::read_dir(s.ws().join("src")).unwrap().count(), 1);
    assert_eq!(
        std::fs::read_to_string(s.ws().join("src/main.rs")).unwrap(),
        "fn main() {}\n"
    );
    root.stage(Path::new("src/main.rs"), b"new", None)
        .unwrap()
        .commit()
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(s.ws().join("src/main.rs")).unwrap(),
        "new"
    );
    root.rename(Path::new("src/main.rs"), Path::new("moved/lib.rs"))
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(s.ws().join("moved/lib.rs")).unwrap(),
        "new"
    );
}

#[test]
fn a_walk_through_folder_handles_goes_deeper_than_path_max() {
    let s = Scratch::new("deep");
    let root = s.root();
    let name = "d".repeat(200);
    let mut dir = root.open_dir(Path::new("")).unwrap();
    let mut depth = 0;
    // 30 levels of 201 bytes: past the 4096 bytes a path may have.
    let mut path = s.ws();
    while depth < 30 {
        let c = std::ffi::CString::new(name.as_str()).unwrap();
        assert_eq!(
            // SAFETY: creating a folder relative to a descriptor we hold.
            unsafe { libc::mkdirat(std::os::fd::AsRawFd::as_raw_fd(&dir.fd), c.as_ptr(), 0o755) },
            0
        );
        dir = dir.open_dir(std::ffi::OsStr::new(&name)).unwrap();
        path.push(&name);
        depth += 1;
    }
    assert!(path.as_os_str().len() > 4096);
    assert!(dir.entries().unwrap().is_empty());
    assert!(dir.stat().unwrap().is_dir());
    // The standard library removes a tree through folder handles too.
    std::fs::remove_dir_all(s.ws().join(&name)).unwrap();
}

#[test]
fn private_files_are_0600_in_0700_folders_and_never_through_a_link() {
    let s = Scratch::new("private");
    let dir = s.dir.join("state/wright/sessions");
    let file = dir.join("s1.jsonl");
    write_private(&file, b"{}\n").unwrap();
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&file), 0o600);
    assert_eq!(mode(&dir), 0o700);
    let mut appended = append_private(&dir.join("s2.jsonl")).unwrap();
    std::io::Write::write_all(&mut appended, b"line\n").unwrap();
    assert_eq!(mode(&dir.join("s2.jsonl")), 0o600);
    assert_eq!(read_private(&file, 100).unwrap(), b"{}\n");
    assert!(read_private(&file, 2).is_err());
    // A link planted at a journal's name is refused, and its target untouched.
    symlink(s.outside().join("secret"), dir.join("planted.jsonl")).unwrap();
    assert!(append_private(&dir.join("planted.jsonl")).is_err());
    assert!(read_private(&dir.join("planted.jsonl"), 100).is_err());
    assert!(write_private(&dir.join("planted.jsonl"), b"x").is_err());
    assert_eq!(
        std::fs::read_to_string(s.outside().join("secret")).unwrap(),
        "outside secret\n"
    );
    // An existing folder of ours made 0755 by an earlier version is narrowed.
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    ensure_private_dir(&dir).unwrap();
    assert_eq!(mode(&dir), 0o700);
}

#[test]
fn private_files_are_created_exclusively_and_read_back_only_when_ours() {
    // SAFETY: umask(2) only sets the process's mask; 0o022 is the usual one.
    unsafe { libc::umask(0o022) };
    let s = Scratch::new("private-new");
    let dir = s.dir.join("data/wright/sessions/key");
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let journal = dir.join("s1.jsonl");
    std::io::Write::write_all(&mut create_private(&journal).unwrap(), b"line\n").unwrap();
    assert_eq!(mode(&journal), 0o600);
    for folder in [
        "data",
        "data/wright",
        "data/wright/sessions",
        "data/wright/sessions/key",
    ] {
        assert_eq!(mode(&s.dir.join(folder)), 0o700, "{folder}");
    }
    // A second create of the same name fails, and a link there is never followed.
    assert!(create_private(&journal).is_err());
    symlink(s.outside().join("secret"), dir.join("s2.jsonl")).unwrap();
    assert!(create_private(&dir.join("s2.jsonl")).is_err());
    assert!(open_private(&dir.join("s2.jsonl")).is_err());
    assert_eq!(
        std::fs::read_to_string(s.outside().join("secret")).unwrap(),
        "outside secret\n"
    );
    let mut text = String::new();
    std::io::Read::read_to_string(&mut open_private(&journal).unwrap(), &mut text).unwrap();
    assert_eq!(text, "line\n");
    // A folder wright keeps its files in must be a real one.
    let linked = s.dir.join("linked-data");
    symlink(s.outside(), &linked).unwrap();
    assert!(ensure_private_dir(&linked).is_err());

    // A fresh folder of the process's own: new, 0700, under a name nobody could guess.
    let fresh = fresh_private_dir("wright-files-test").unwrap();
    let other = fresh_private_dir("wright-files-test").unwrap();
    assert_ne!(fresh, other);
    assert_eq!(mode(&fresh), 0o700);
    std::fs::remove_dir(&fresh).unwrap();
    std::fs::remove_dir(&other).unwrap();
}

#[test]
fn a_folder_or_file_of_another_user_is_refused() {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        // Only root can make a file another user's; as any other user the check is the
        // same code, exercised by the root run.
        return;
    }
    let s = Scratch::new("private-owner");
    let dir = s.dir.join("planted");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("record.json"), "{}").unwrap();
    let chown = |path: &Path| {
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid path; 65534 is nobody.
        assert_eq!(unsafe { libc::chown(c.as_ptr(), 65534, 65534) }, 0);
    };
    chown(&dir.join("record.json"));
    let err = read_private(&dir.join("record.json"), 100).unwrap_err();
    assert!(err.to_string().contains("another user"), "{err}");
    chown(&dir);
    let err = ensure_private_dir(&dir).unwrap_err();
    assert!(err.to_string().contains("another user"), "{err}");
    assert!(write_private(&dir.join("new.json"), b"{}").is_err());
}

#[test]
fn writing_a_python_file_drops_its_bytecode_and_no_other() {
    let s = Scratch::new("bytecode");
    let cache = s.ws().join("src/__pycache__");
    std::fs::create_dir_all(&cache).unwrap();
    let names = [
        "calc.cpython-311.pyc",
        "calc.cpython-311.opt-1.pyc",
        "calculator.cpython-311.pyc",
        "other.cpython-311.pyc",
        "calc.cpython-311.pyc.notes",
    ];
    for name in names {
        std::fs::write(cache.join(name), "stale").unwrap();
    }
    // A link in the cache is removed as an entry, never followed.
    symlink(s.outside().join("secret"), cache.join("calc.linked.pyc")).unwrap();
    let root = s.root();
    root.write(
        Path::new("src/calc.py"),
        b"def add(a, b):\n    return a + b\n",
        None,
    )
    .unwrap();
    let mut left: Vec<String> = std::fs::read_dir(&cache)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .collect();
    left.sort();
    assert_eq!(
        left,
        [
            "calc.cpython-311.pyc.notes",
            "calculator.cpython-311.pyc",
            "other.cpython-311.pyc"
        ]
    );
    assert_eq!(
        std::fs::read_to_string(s.outside().join("secret")).unwrap(),
        "outside secret\n"
    );
    // Writing anything else leaves the cache alone.
    root.write(Path::new("src/calc.txt"), b"x", None).unwrap();
    assert_eq!(std::fs::read_dir(&cache).unwrap().count(), 3);
}

#[test]
fn a_bounded_read_of_a_file_of_no_workspace_follows_links_but_refuses_fifos_and_devices() {
    let s = Scratch::new("bounded");
    let fifo = s.outside().join("fifo");
    let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    symlink(s.outside().join("secret"), s.outside().join("link")).unwrap();
    assert_eq!(
        read_bounded(&s.outside().join("link"), 1 << 20).unwrap(),
        b"outside secret\n"
    );
    assert!(matches!(
        read_bounded(&fifo, 1 << 20).unwrap_err(),
        FileError::NotRegular { kind: "a FIFO", .. }
    ));
    assert!(matches!(
        read_bounded(Path::new("/dev/zero"), 1 << 20).unwrap_err(),
        FileError::NotRegular {
            kind: "a character device",
            ..
        }
    ));
    assert!(matches!(
        read_bounded(&s.outside().join("secret"), 4).unwrap_err(),
        FileError::TooLarge { size: 15, .. }
    ));
    assert!(
        read_bounded(&s.outside().join("missing"), 4)
            .unwrap_err()
            .is_not_found()
    );
}
