//! The user's trust in workspace-defined servers: `wright mcp trust NAME` records the exact
//! definition a workspace gives, for that workspace, in the user's data folder (never in the
//! workspace, which the repository controls); a definition that differs in anything is not
//! trusted.
//!
//! The definition is kept whole (its normalised text), not a digest of it: comparing the text
//! itself cannot be fooled by a crafted collision, and a repository's definition is no secret.

use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::config::{McpServer, Origin};

/// The store's file, under `config::data_dir`.
const FILE: &str = "mcp-trust.json";
/// A store bigger than this is not one wright wrote.
const MAX_STORE: u64 = 4 * 1024 * 1024;

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Trust {
    trusted: Vec<Trusted>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Trusted {
    /// The workspace root, canonical.
    root: PathBuf,
    name: String,
    /// [`McpServer::normalised`] when the user trusted it.
    definition: String,
}

fn canonical(root: &Path) -> PathBuf {
    // host path: the workspace root itself, resolved so one workspace has one entry.
    std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf())
}

impl Trust {
    /// The store in `data_dir`; none yet is an empty one, and so is one that cannot be read
    /// (then nothing is trusted, which is the safe side; the error says why).
    pub fn load(data_dir: &Path) -> (Self, Option<String>) {
        let path = data_dir.join(FILE);
        match crate::files::read_private(&path, MAX_STORE) {
            Ok(bytes) => match serde_json::from_slice(&bytes) {
                Ok(trust) => (trust, None),
                Err(err) => (
                    Self::default(),
                    Some(format!("{}: not a trust store ({err})", path.display())),
                ),
            },
            Err(err) if err.kind() == io::ErrorKind::NotFound => (Self::default(), None),
            Err(err) => (
                Self::default(),
                Some(format!("{}: not read ({err})", path.display())),
            ),
        }
    }

    /// Whether `server` may start in the workspace at `root`: the user's own and a
    /// session's always, a workspace's only as trusted.
    pub fn allows(&self, root: &Path, server: &McpServer) -> bool {
        if server.origin != Origin::Workspace {
            return true;
        }
        let root = canonical(root);
        let definition = server.normalised();
        self.trusted
            .iter()
            .any(|t| t.root == root && t.name == server.name && t.definition == definition)
    }

    /// Trusts `server` as defined now in the workspace at `root` (replacing what was trusted
    /// under its name there), and writes the store.
    pub fn trust(&mut self, data_dir: &Path, root: &Path, server: &McpServer) -> io::Result<()> {
        let root = canonical(root);
        self.trusted
            .retain(|t| !(t.root == root && t.name == server.name));
        self.trusted.push(Trusted {
            root,
            name: server.name.clone(),
            definition: server.normalised(),
        });
        let bytes = serde_json::to_vec_pretty(self).map_err(io::Error::other)?;
        crate::files::write_private(&data_dir.join(FILE), &bytes)
    }
}
