//! Tests of the index as a whole: cold and warm refresh, incremental updates, corruption.

use std::path::{Path, PathBuf};

use super::*;

struct Fixture {
    dir: PathBuf,
}

impl Fixture {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("wright-index-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("ws")).unwrap();
        Self { dir }
    }

    fn root(&self) -> PathBuf {
        self.dir.join("ws")
    }

    fn write(&self, relative: &str, text: &str) {
        let path = self.root().join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    fn open(&self) -> Index {
        Index::open(
            &self.root(),
            Options {
                cache_dir: self.dir.join("cache"),
                walk: WalkOptions::default(),
            },
        )
        .unwrap()
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn refresh(index: &Index) -> Report {
    index.refresh(&|_| {}).unwrap()
}

fn names(hits: &[SymbolHit]) -> Vec<&str> {
    hits.iter().map(|hit| hit.name.as_str()).collect()
}

const LIB: &str = "pub fn parse_http_request() {}\npub struct HttpServer;\nimpl HttpServer { pub fn start(&self) { parse_http_request() } }\n";

#[test]
fn cold_then_warm_then_incremental() {
    let fixture = Fixture::new("warm");
    fixture.write("src/lib.rs", LIB);
    fixture.write("app.py", "def main():\n    start()\n");
    fixture.write("README.md", "not source");

    let index = fixture.open();
    let report = refresh(&index);
    assert_eq!(report.opened, Opened::Created);
    assert!(!report.incremental);
    assert_eq!((report.files, report.parsed, report.other_files), (2, 2, 1));
    assert_eq!(report.definitions, 4);
    drop(index);

    let index = fixture.open();
    let report = refresh(&index);
    assert_eq!(report.opened, Opened::Existing);
    assert!(report.incremental);
    assert_eq!((report.files, report.parsed), (2, 0));

    // Rewritten with the same content: hashed, not parsed.
    fixture.write("app.py", "def main():\n    start()\n");
    assert_eq!(refresh(&index).parsed, 0);
    fixture.write(
        "app.py",
        "def main():\n    start()\n\ndef helper():\n    pass\n",
    );
    let report = refresh(&index);
    assert_eq!(report.parsed, 1);
    assert_eq!(names(&index.symbols("helper", None, 5)), ["helper"]);

    std::fs::remove_file(fixture.root().join("app.py")).unwrap();
    let report = refresh(&index);
    assert_eq!((report.files, report.removed), (1, 1));
    assert!(index.symbols("helper", None, 5).is_empty());
}

#[test]
fn queries_rank_exact_then_parts_then_near_misses() {
    let fixture = Fixture::new("query");
    fixture.write("src/lib.rs", LIB);
    fixture.write(
        "src/other.rs",
        "pub fn request_count() {}\npub fn parse() {}\n",
    );
    let index = fixture.open();
    refresh(&index);

    let hits = index.symbols("parse_http_request", None, 10);
    assert_eq!(hits[0].name, "parse_http_request");
    assert_eq!(
        (hits[0].path.as_str(), hits[0].line, hits[0].column),
        ("src/lib.rs", 0, 7)
    );
    // Identifier parts: "request" finds both names that contain the word.
    let hits = index.symbols("request", None, 10);
    let mut parts = names(&hits);
    parts.sort();
    assert_eq!(parts, ["parse_http_request", "request_count"]);
    // camelCase query against snake_case names, and a typo.
    assert_eq!(index.symbols("httpServer", None, 1)[0].name, "HttpServer");
    assert_eq!(names(&index.symbols("HttpServr", None, 1)), ["HttpServer"]);
    // Kind filter and containers.
    let methods = index.symbols("start", Some("method"), 5);
    assert_eq!(methods[0].container.as_deref(), Some("HttpServer"));
    assert!(index.symbols("start", Some("class"), 5).is_empty());
    // Nothing to search for.
    assert!(index.symbols("!!! ... ---", None, 5).is_empty());
    // References and outlines.
    let refs = index.references("parse_http_request", 10);
    assert_eq!((refs[0].path.as_str(), refs[0].line), ("src/lib.rs", 2));
    let outline: Vec<_> = index
        .outline("src/lib.rs")
        .into_iter()
        .map(|h| h.name)
        .collect();
    assert_eq!(outline, ["parse_http_request", "HttpServer", "start"]);
}

/// A document holds every site of one name in one file: each site comes back as its own hit,
/// with its own kind, in the file's order, in both phases and from a buffer.
#[test]
fn every_site_of_a_name_in_a_file_is_its_own_reference() {
    let fixture = Fixture::new("sites");
    let calls = "pub fn helper() {}
pub struct Wrapper;
impl Clone for Wrapper { fn clone(&self) -> Self { helper(); Wrapper } }
pub fn twice() {
    helper();
    helper();
}
";
    fixture.write("src/lib.rs", calls);
    fixture.write(
        "src/other.rs",
        "pub fn other() { crate::helper() }
",
    );
    let index = fixture.open();
    let sites = |index: &Index, name: &str, limit: usize| -> Vec<(String, u32, u32, String)> {
        index
            .references(name, limit)
            .into_iter()
            .map(|hit| {
                assert_eq!(hit.name, name);
                (hit.path, hit.line, hit.column, hit.kind)
            })
            .collect()
    };
    let expected = [
        ("src/lib.rs".to_owned(), 2, 51, "call".to_owned()),
        ("src/lib.rs".to_owned(), 4, 4, "call".to_owned()),
        ("src/lib.rs".to_owned(), 5, 4, "call".to_owned()),
        ("src/other.rs".to_owned(), 0, 24, "call".to_owned()),
    ];
    lexical(&index);
    assert_eq!(sites(&index, "helper", 10), expected);
    index.refine(&|_| {}, &|| false).unwrap();
    assert_eq!(sites(&index, "helper", 10), expected);
    // Kinds per site: the trait an impl names is an implementation.
    assert_eq!(
        sites(&index, "Clone", 10),
        [("src/lib.rs".to_owned(), 2, 5, "implementation".to_owned())]
    );
    // A limit counts sites, not documents.
    assert_eq!(sites(&index, "helper", 2), expected[..2]);
    // An outline is definitions only, though the file's reference documents share its path.
    let outline: Vec<_> = index
        .outline("src/lib.rs")
        .into_iter()
        .map(|h| h.name)
        .collect();
    assert_eq!(outline, ["helper", "Wrapper", "clone", "twice"]);
    // Nor does a reference make a symbol.
    assert_eq!(names(&index.symbols("helper", None, 10)), ["helper"]);

    // A buffer's sites replace the file's, before and after the commit.
    index.update_text(
        "src/lib.rs",
        "pub fn helper() {}
fn once() { helper() }
",
    );
    let updated = [
        ("src/lib.rs".to_owned(), 1, 12, "call".to_owned()),
        ("src/other.rs".to_owned(), 0, 24, "call".to_owned()),
    ];
    assert_eq!(sites(&index, "helper", 10), updated);
    index.commit().unwrap();
    assert_eq!(sites(&index, "helper", 10), updated);

    // A file's sites go with it: removed from a buffer's side, or deleted on disk.
    index.remove("src/other.rs");
    assert_eq!(sites(&index, "helper", 10), updated[..1]);
    index.commit().unwrap();
    assert_eq!(sites(&index, "helper", 10), updated[..1]);
    for file in ["src/lib.rs", "src/other.rs"] {
        std::fs::remove_file(fixture.root().join(file)).unwrap();
    }
    refresh(&index);
    assert_eq!(sites(&index, "helper", 10), []);
}

#[test]
fn buffer_updates_are_searchable_before_the_commit_and_rank_with_the_rest() {
    let fixture = Fixture::new("recent");
    fixture.write("a.rs", "pub fn alpha() {}\n");
    fixture.write("b.rs", "pub fn parse_http() {}\npub fn http() {}\n");
    fixture.write("c.rs", "pub fn gone() {}\n");
    let index = fixture.open();
    refresh(&index);

    index.update_text("a.rs", "pub fn parse_request() {}\n");
    index.remove("c.rs");
    // No commit: the updates are searchable already, and the files' old symbols are gone.
    assert!(index.symbols("alpha", None, 5).is_empty());
    assert!(index.symbols("gone", None, 5).is_empty());
    assert_eq!(
        index
            .outline("a.rs")
            .iter()
            .map(|h| &h.name)
            .collect::<Vec<_>>(),
        ["parse_request"]
    );
    // Scored with the disk index's statistics: the exact name first, then the names sharing
    // a part, whichever index holds them.
    assert_eq!(
        names(&index.symbols("parse_request", None, 5)),
        ["parse_request", "parse_http"]
    );
    assert_eq!(
        names(&index.symbols("parse_http", None, 5))[0],
        "parse_http"
    );

    // After the commit the disk index answers alone, with the same result and no duplicate.
    index.commit().unwrap();
    assert_eq!(
        names(&index.symbols("parse_request", None, 5)),
        ["parse_request", "parse_http"]
    );
    assert!(index.symbols("gone", None, 5).is_empty());
    let reopened = {
        drop(index);
        fixture.open()
    };
    assert_eq!(
        names(&reopened.symbols("parse_request", None, 1)),
        ["parse_request"]
    );
}

#[test]
fn buffer_text_updates_are_searchable_after_commit() {
    let fixture = Fixture::new("buffer");
    fixture.write("a.ts", "export function alpha() {}\n");
    let index = fixture.open();
    refresh(&index);
    index.update_text("a.ts", "export function beta() {}\n");
    index.commit().unwrap();
    assert!(index.symbols("alpha", None, 5).is_empty());
    assert_eq!(names(&index.symbols("beta", None, 5)), ["beta"]);
    // The disk still says alpha: a refresh (the editor closed the buffer) restores it.
    refresh(&index);
    assert_eq!(names(&index.symbols("alpha", None, 5)), ["alpha"]);
    index.remove("a.ts");
    index.commit().unwrap();
    assert!(index.symbols("alpha", None, 5).is_empty());
}

#[test]
fn a_buffer_commit_lists_the_file_as_stale_and_the_next_open_rereads_it() {
    let fixture = Fixture::new("stale");
    fixture.write("a.rs", "fn alpha() {}\n");
    fixture.write("b.rs", "fn keep() {}\n");
    let index = fixture.open();
    refresh(&index);
    let manifest = std::fs::read(index.dir.join("manifest.json")).unwrap();
    index.update_text("a.rs", "fn beta() {}\n");
    index.update_text("new.rs", "fn unsaved() {}\n");
    index.commit().unwrap();
    // The manifest is left as it was; the files it is wrong about are listed.
    assert_eq!(
        std::fs::read(index.dir.join("manifest.json")).unwrap(),
        manifest
    );
    assert!(index.dir.join("stale.json").exists());
    drop(index);

    // Reopened (the editor gone): the disk's content wins, the never-saved file goes.
    let index = fixture.open();
    let report = refresh(&index);
    assert_eq!((report.parsed, report.files), (1, 2), "{report:?}");
    assert_eq!(names(&index.symbols("alpha", None, 5)), ["alpha"]);
    assert!(index.symbols("beta", None, 5).is_empty());
    assert!(index.symbols("unsaved", None, 5).is_empty());
    assert!(!index.dir.join("stale.json").exists());
}

#[test]
fn a_corrupt_or_foreign_index_is_rebuilt_not_trusted() {
    let fixture = Fixture::new("corrupt");
    fixture.write("m.go", "package m\nfunc Gamma() {}\n");
    let index = fixture.open();
    refresh(&index);
    let dir = index.dir.clone();
    drop(index);

    std::fs::write(dir.join("meta.json"), b"{not json").unwrap();
    let index = fixture.open();
    assert!(
        matches!(&index.opened, Opened::Rebuilt(reason) if reason.contains("meta.json")),
        "{:?}",
        index.opened
    );
    assert_eq!(refresh(&index).parsed, 1);
    drop(index);

    // Damage every tantivy file: the index must not be read.
    for entry in std::fs::read_dir(dir.join("tantivy")).unwrap().flatten() {
        std::fs::write(entry.path(), b"garbage").unwrap();
    }
    let index = fixture.open();
    assert!(
        matches!(index.opened, Opened::Rebuilt(_)),
        "{:?}",
        index.opened
    );
    refresh(&index);
    assert_eq!(names(&index.symbols("Gamma", None, 5)), ["Gamma"]);
}

#[test]
fn binary_unreadable_and_lossy_files_are_reported() {
    let fixture = Fixture::new("odd");
    fixture.write("ok.c", "int ok(void) { return 0; }\n");
    std::fs::write(fixture.root().join("blob.c"), b"int x;\0\0\0").unwrap();
    std::fs::write(
        fixture.root().join("latin.py"),
        b"def caf\xe9():\n    pass\ndef fine():\n    pass\n",
    )
    .unwrap();
    let index = fixture.open();
    let report = refresh(&index);
    assert_eq!(report.skipped.counts.get(&SkipReason::Binary), Some(&1));
    assert_eq!(report.skipped.counts.get(&SkipReason::NotText), Some(&1));
    assert_eq!(report.files, 2);
    assert_eq!(names(&index.symbols("fine", None, 5)), ["fine"]);
}

#[test]
fn the_index_lives_in_the_cache_keyed_by_root() {
    let a = store::index_dir(Path::new("/c"), Path::new("/w/one"));
    let b = store::index_dir(Path::new("/c"), Path::new("/x/one"));
    assert_ne!(a, b);
    assert!(a.starts_with("/c/index") && a.to_string_lossy().ends_with("-one"));
}

#[test]
fn a_second_process_reads_an_index_whose_writer_is_taken() {
    let fixture = Fixture::new("locked");
    fixture.write("a.rb", "def shared_name\nend\n");
    let owner = fixture.open();
    refresh(&owner);
    let reader = fixture.open();
    assert!(reader.read_only() && !owner.read_only());
    let report = refresh(&reader);
    assert!(report.read_only);
    assert_eq!((report.files, report.parsed), (1, 0));
    assert_eq!(
        names(&reader.symbols("shared_name", None, 5)),
        ["shared_name"]
    );
    // Updates through the reader are not possible, and do not fail.
    reader.update_text("a.rb", "def other\nend\n");
    reader.commit().unwrap();
    assert_eq!(
        names(&owner.symbols("shared_name", None, 5)),
        ["shared_name"]
    );
    drop(owner);
    drop(reader);
    assert!(!fixture.open().read_only());
}

/// A file whose tree-sitter extraction has what the lexical scan lacks: a doc comment (Python:
/// its scan is not complete, so its files wait for the tree-sitter pass).
const DOCUMENTED: &str = "# Parses a request.\ndef parse_http_request():\n    pass\n\ndef serve():\n    parse_http_request()\n";

fn lexical(index: &Index) -> Report {
    index.refresh_lexical(&|_| {}).unwrap()
}

#[test]
fn lexical_phase_is_searchable_then_refined_with_references_and_docs() {
    let fixture = Fixture::new("two-phase");
    fixture.write("src/lib.py", DOCUMENTED);
    fixture.write("app.rs", "/// Starts.\nfn main() {\n    serve();\n}\n");
    fixture.write("empty.py", "");
    let index = fixture.open();

    let report = lexical(&index);
    assert_eq!((report.files, report.lexical_files), (3, 2));
    let hits = index.symbols("parse_http_request", None, 5);
    assert_eq!(names(&hits), ["parse_http_request"]);
    assert_eq!((hits[0].line, hits[0].column), (1, 4));
    assert_eq!(
        hits[0].doc, None,
        "Python's lexical scan reads no doc comments"
    );
    // Call sites are there from the lexical scan on.
    let refs = index.references("parse_http_request", 5);
    assert_eq!(refs.len(), 1);
    assert_eq!((refs[0].line, refs[0].column), (5, 4));
    assert_eq!(index.references("serve", 5)[0].path, "app.rs");
    // A Rust file is complete after the lexical phase: its doc comment is there, and it
    // waits for no tree-sitter pass.
    assert_eq!(
        index.symbols("main", None, 1)[0].doc.as_deref(),
        Some("Starts.")
    );
    let files = index.files();
    assert!(!files["app.rs"].lexical);
    assert!(files["src/lib.py"].lexical && files["empty.py"].lexical);

    let refined = index.refine(&|_| {}, &|| false).unwrap();
    assert_eq!((refined.refined, refined.remaining), (2, 0));
    let hits = index.symbols("parse_http_request", None, 5);
    assert_eq!(names(&hits), ["parse_http_request"]);
    assert_eq!(hits[0].doc.as_deref(), Some("Parses a request."));
    assert_eq!(index.references("parse_http_request", 5).len(), 1);
    assert_eq!(index.references("serve", 5)[0].path, "app.rs");
    assert!(index.files().values().all(|record| !record.lexical));
}

#[test]
fn an_edit_during_refinement_is_not_overwritten_by_the_disk() {
    let fixture = Fixture::new("refine-edit");
    fixture.write("src/lib.py", DOCUMENTED);
    let index = fixture.open();
    lexical(&index);

    // The buffer changes after the refinement started, before it reached the file: the
    // refinement's parse of the disk must not replace the buffer's entries.
    let edited = std::sync::Once::new();
    let refined = index
        .refine(&|_| {}, &|| {
            edited.call_once(|| {
                index.update_text("src/lib.py", "def edited_in_buffer():\n    pass\n")
            });
            false
        })
        .unwrap();
    assert_eq!(refined.refined, 0);
    assert_eq!(
        names(&index.symbols("edited_in_buffer", None, 5)),
        ["edited_in_buffer"]
    );
    assert!(index.symbols("parse_http_request", None, 5).is_empty());

    // A phase-2 result computed before an edit and arriving after it is dropped too.
    drop(index);
    let index = fixture.open();
    lexical(&index);
    let record = index.files()["src/lib.py"].clone();
    assert!(record.lexical);
    index.update_text("src/lib.py", "def newer():\n    pass\n");
    assert!(!index.refine_file("src/lib.py", record.hash));
    assert_eq!(names(&index.symbols("newer", None, 5)), ["newer"]);
}

#[test]
fn an_interrupted_refinement_resumes_after_a_restart() {
    let fixture = Fixture::new("refine-resume");
    fixture.write("src/lib.py", DOCUMENTED);
    fixture.write("src/other.py", "def other():\n    serve()\n");
    let index = fixture.open();
    lexical(&index);
    let stopped = index.refine(&|_| {}, &|| true).unwrap();
    assert_eq!((stopped.refined, stopped.remaining), (0, 2));
    drop(index);

    // The manifest on disk still says lexical: the next refresh refines, parsing nothing anew.
    let index = fixture.open();
    assert_eq!(index.opened, Opened::Existing);
    assert!(index.files().values().all(|record| record.lexical));
    let report = refresh(&index);
    assert_eq!((report.parsed, report.lexical_files), (0, 0));
    assert_eq!(index.references("serve", 5)[0].path, "src/other.py");
    assert_eq!(
        index.symbols("parse_http_request", None, 1)[0]
            .doc
            .as_deref(),
        Some("Parses a request.")
    );
}
