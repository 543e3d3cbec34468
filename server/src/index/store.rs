//! The index on disk: where it lives, its format check, and the manifest of indexed files.
//!
//! Layout: `<cache>/index/<hash of root>-<root name>/` holding `meta.json` (format version and
//! root), `tantivy/`, `manifest.json` (per file: size, mtime, content hash, the names it
//! defines and references, whether its entries are still lexical) and, after incremental commits, `stale.json` (the files those
//! commits changed, whose manifest entries are out of date). Anything unexpected there means
//! the folder is rebuilt.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use tantivy::Index;
use tantivy::directory::MmapDirectory;

use super::schema::{self, FORMAT_VERSION, IDENTIFIER_TOKENIZER, IdentifierTokenizer};
use super::{Extracted, IndexError, Opened};

#[derive(Serialize, Deserialize)]
struct Meta {
    format: u32,
    root: PathBuf,
}

/// One indexed file.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileRecord {
    pub size: u64,
    pub mtime_ns: u64,
    pub hash: u64,
    pub definition_count: u32,
    pub reference_count: u32,
    /// Distinct names defined here.
    pub defines: Vec<String>,
    /// Distinct names referenced here, with how often.
    pub references: Vec<(String, u32)>,
    /// Its documents come from the lexical scan only: the tree-sitter pass has yet to
    /// replace them (an interrupted refinement resumes with these files).
    #[serde(default)]
    pub lexical: bool,
}

impl FileRecord {
    pub fn new(size: u64, mtime_ns: u64, hash: u64, extracted: &Extracted) -> Self {
        let mut defines: Vec<String> = extracted
            .definitions
            .iter()
            .map(|d| d.name.clone())
            .collect();
        defines.sort();
        defines.dedup();
        let mut counts: BTreeMap<&str, u32> = BTreeMap::new();
        for reference in &extracted.references {
            *counts.entry(&reference.name).or_default() += 1;
        }
        Self {
            size,
            mtime_ns,
            hash,
            definition_count: extracted.definitions.len() as u32,
            reference_count: extracted.references.len() as u32,
            defines,
            references: counts.into_iter().map(|(n, c)| (n.to_owned(), c)).collect(),
            lexical: false,
        }
    }
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Manifest {
    pub files: BTreeMap<String, FileRecord>,
}

/// FNV-1a over the content: cheap, stable across runs and platforms, and only asked whether a
/// file changed since it was last indexed.
pub fn hash(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The folder of `root`'s index inside `cache_dir`.
pub fn index_dir(cache_dir: &Path, root: &Path) -> PathBuf {
    cache_dir.join("index").join(root_key(root))
}

/// A file name that stands for `root`: a hash of its path, then its folder's name for people.
pub fn root_key(root: &Path) -> String {
    let name: String = root
        .file_name()
        .map(|n| {
            n.to_string_lossy()
                .chars()
                .filter(|c| c.is_alphanumeric() || *c == '-' || *c == '_')
                .take(32)
                .collect()
        })
        .unwrap_or_default();
    let key = hash(root.as_os_str().as_encoded_bytes());
    format!("{key:016x}-{name}")
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> IndexError + '_ {
    move |source| IndexError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Opens the index in `dir`, or creates it; an index that fails any check is removed and
/// created anew, with the reason.
pub fn open_or_create(dir: &Path, root: &Path) -> Result<(Index, Manifest, Opened), IndexError> {
    let opened = if dir.exists() {
        // Made 0755 by earlier versions: narrowed (and refused if another user's).
        crate::files::ensure_private_dir(dir).map_err(io_err(dir))?;
        let tantivy_dir = dir.join("tantivy");
        if tantivy_dir.is_dir() {
            crate::files::ensure_private_dir(&tantivy_dir).map_err(io_err(&tantivy_dir))?;
        }
        match open_existing(dir, root) {
            Ok((index, manifest)) => return Ok((index, manifest, Opened::Existing)),
            Err(reason) => {
                tracing::warn!("rebuilding the index at {}: {reason}", dir.display());
                // host path: an index folder in the user's cache.
                std::fs::remove_dir_all(dir).map_err(io_err(dir))?;
                Opened::Rebuilt(reason)
            }
        }
    } else {
        Opened::Created
    };
    let tantivy_dir = dir.join("tantivy");
    // The index holds the workspace's code: its folders are 0700 (tantivy makes its own
    // files with the umask's mode, which the folder's mode makes unreachable to others).
    crate::files::ensure_private_dir(&tantivy_dir).map_err(io_err(dir))?;
    let directory = MmapDirectory::open(&tantivy_dir).map_err(|err| IndexError::Io {
        path: tantivy_dir.clone(),
        source: std::io::Error::other(err.to_string()),
    })?;
    let index =
        Index::create(directory, schema::schema().0, Default::default()).map_err(|source| {
            IndexError::Tantivy {
                path: dir.to_path_buf(),
                source,
            }
        })?;
    register_tokenizer(&index);
    let meta = Meta {
        format: FORMAT_VERSION,
        root: root.to_path_buf(),
    };
    write_json(&dir.join("meta.json"), &meta)?;
    write_manifest(dir, &Manifest::default())?;
    Ok((index, Manifest::default(), opened))
}

fn open_existing(dir: &Path, root: &Path) -> Result<(Index, Manifest), String> {
    let mut manifest = peek(dir, root)?;
    let stale_file = dir.join(STALE);
    if stale_file.exists() {
        let stale: BTreeSet<String> = read_json(&stale_file)?;
        for path in stale {
            // Matches no file on disk: the refresh re-reads the file, or drops it if it is gone.
            let record = manifest.files.entry(path).or_default();
            record.size = u64::MAX;
            record.hash = 0;
        }
    }
    let index = Index::open_in_dir(dir.join("tantivy")).map_err(|err| format!("tantivy: {err}"))?;
    if index.schema() != schema::schema().0 {
        return Err("its schema differs from this build's".to_owned());
    }
    register_tokenizer(&index);
    // Opening reads only metadata; a searcher touches every segment's files.
    let reader = index.reader().map_err(|err| format!("tantivy: {err}"))?;
    let searcher = reader.searcher();
    for segment in searcher.segment_readers() {
        segment
            .inverted_index(schema::schema().1.name)
            .map_err(|err| format!("a segment is damaged: {err}"))?;
    }
    Ok((index, manifest))
}

/// The state of the index in `dir` as far as its metadata tells, without opening it.
pub fn peek(dir: &Path, root: &Path) -> Result<Manifest, String> {
    let meta: Meta = read_json(&dir.join("meta.json"))?;
    if meta.format != FORMAT_VERSION {
        return Err(format!(
            "format {} is not this build's {FORMAT_VERSION}",
            meta.format
        ));
    }
    if meta.root != root {
        return Err(format!("it belongs to {}", meta.root.display()));
    }
    read_json(&dir.join("manifest.json"))
}

pub(super) fn register_tokenizer(index: &Index) {
    index
        .tokenizers()
        .register(IDENTIFIER_TOKENIZER, IdentifierTokenizer);
}

/// The most a manifest (one record per indexed file) or list is read back.
const MAX_JSON: u64 = 1 << 30;

fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<T, String> {
    let text = crate::files::read_private(path, MAX_JSON)
        .map_err(|err| format!("{}: {err}", path.display()))?;
    serde_json::from_slice(&text).map_err(|err| format!("{}: {err}", path.display()))
}

const STALE: &str = "stale.json";

/// Writes the whole manifest, which makes any list of stale files obsolete.
pub fn write_manifest(dir: &Path, manifest: &Manifest) -> Result<(), IndexError> {
    write_json(&dir.join("manifest.json"), manifest)?;
    // host path: likewise.
    match std::fs::remove_file(dir.join(STALE)) {
        Err(err) if err.kind() != std::io::ErrorKind::NotFound => Err(io_err(dir)(err)),
        _ => Ok(()),
    }
}

/// Records the files whose manifest entries are out of date: a commit of a few files writes
/// this short list instead of the whole manifest (megabytes for a large workspace).
pub fn write_stale(dir: &Path, stale: &BTreeSet<String>) -> Result<(), IndexError> {
    write_json(&dir.join(STALE), stale)
}

/// Writes through a synced temporary file and a rename, so a crash or a power loss leaves
/// the old file or the new; 0600 in a 0700 folder (`files::private`).
fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<(), IndexError> {
    let bytes = serde_json::to_vec(value).map_err(|err| IndexError::Io {
        path: path.to_path_buf(),
        source: std::io::Error::other(err),
    })?;
    crate::files::write_private(path, &bytes).map_err(io_err(path))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn the_index_folders_are_0700_and_its_json_files_0600() {
        // SAFETY: umask(2) only sets the process's mask; 0o022 is the usual one.
        unsafe { libc::umask(0o022) };
        let base = std::env::temp_dir().join(format!("wright-store-modes-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let root = base.join("ws");
        std::fs::create_dir_all(&root).unwrap();
        let dir = index_dir(&base.join("cache"), &root);
        let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
        let (index, _, _) = open_or_create(&dir, &root).unwrap();
        drop(index);
        for folder in [dir.clone(), dir.join("tantivy"), base.join("cache/index")] {
            assert_eq!(mode(&folder), 0o700, "{}", folder.display());
        }
        for file in ["meta.json", "manifest.json"] {
            assert_eq!(mode(&dir.join(file)), 0o600, "{file}");
        }
        // An index an earlier version made 0755 is narrowed when opened.
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(dir.join("tantivy"), std::fs::Permissions::from_mode(0o755))
            .unwrap();
        let (index, _, opened) = open_or_create(&dir, &root).unwrap();
        drop(index);
        assert!(matches!(opened, Opened::Existing), "{opened:?}");
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&dir.join("tantivy")), 0o700);
        std::fs::remove_dir_all(&base).unwrap();
    }
}
