//! `tidy`: the codebase's own rules, checked mechanically (run as a test by `cargo test`).
//!
//! The rules keep the code map of `docs/architecture.md` true: module boundaries that
//! `docs/design.md` and the architecture fix, a `//!` doc atop every file, no debugging
//! leftovers or stubs, and a repository that stands alone (no document or comment points to a
//! file outside it).

use std::path::{Path, PathBuf};

use anyhow::bail;

/// A rule that a pattern may appear only under some folder.
struct Boundary {
    /// Spelled in pieces so this file does not trip its own rules.
    pattern: [&'static str; 2],
    allowed_under: &'static str,
    why: &'static str,
}

const BOUNDARIES: &[Boundary] = &[
    Boundary {
        pattern: ["tower_lsp", "_server"],
        allowed_under: "server/src/lsp/",
        why: "only lsp/ knows LSP types",
    },
    Boundary {
        pattern: ["ls_", "types"],
        allowed_under: "server/src/lsp/",
        why: "only lsp/ knows LSP types",
    },
    Boundary {
        pattern: ["lsp_", "types"],
        allowed_under: "server/src/lsp/",
        why: "only lsp/ knows LSP types",
    },
    Boundary {
        pattern: ["process::", "Command"],
        allowed_under: "server/src/sandbox/",
        why: "only sandbox/ spawns processes",
    },
    Boundary {
        pattern: ["Command", "::new"],
        allowed_under: "server/src/sandbox/",
        why: "only sandbox/ spawns processes",
    },
    Boundary {
        pattern: ["req", "west"],
        allowed_under: "server/src/llm/",
        why: "only llm/ talks HTTP to models",
    },
];

/// Patterns never allowed in committed Rust code.
const FORBIDDEN: &[([&str; 2], &str)] = &[
    (["dbg", "!("], "a debugging leftover"),
    (["todo", "!("], "a stub: a feature not done must be absent"),
    (
        ["unimplemented", "!("],
        "a stub: a feature not done must be absent",
    ),
];

/// File-system calls that may touch a workspace path: only `server/src/files/` makes them
/// (it resolves beneath the root and never follows a link out), unless a comment says the path
/// is no workspace's: `// host path: <why>` on the line or the three above, or
/// `// host paths: <why>` anywhere in a file that only works on such paths (cgroupfs, /proc,
/// the sandbox's own folders).
const FILE_SYSTEM_CALLS: &[[&str; 2]] = &[
    ["std::", "fs::"],
    ["tokio::", "fs::"],
    ["File::", "open"],
    ["File::", "create"],
    ["OpenOptions::", "new"],
];

/// The top-level modules of `server/src` and what each may import (`crate::…`), lowest first.
/// A module imports only modules listed for it, and the table has no loop (checked), so no
/// import loop between modules can come back unseen. A new import that keeps the layering goes
/// in the table in the same commit.
const LAYERS: &[(&str, &[&str])] = &[
    ("files", &[]),
    ("buffers", &[]),
    ("languages", &[]),
    ("workspace", &["files"]),
    ("config", &["files"]),
    ("search", &["workspace"]),
    ("index", &["files", "languages", "workspace"]),
    ("sandbox", &["config", "files"]),
    ("llm", &["config", "sandbox"]),
    ("edit", &["config", "files", "languages", "workspace"]),
    ("router", &["config", "llm"]),
    ("retrieval", &["index", "llm", "workspace"]),
    ("compaction", &["config", "files", "llm"]),
    (
        "agent",
        &[
            "compaction",
            "config",
            "edit",
            "files",
            "index",
            "llm",
            "retrieval",
            "router",
            "sandbox",
            "search",
            "workspace",
        ],
    ),
    // MCP: `serve` offers the agent's tool table (and retrieval) to an MCP client; the
    // client starts unconfined servers through the sandbox's host spawn (`sandbox`); a
    // session's servers join the agent's tools (`servers`). The front ends open a session's
    // servers, so it sits between the session core and them.
    (
        "mcp",
        &[
            "agent",
            "config",
            "files",
            "index",
            "llm",
            "retrieval",
            "sandbox",
            "workspace",
        ],
    ),
    // What the journals tell: stats and trajectories, read from the session core's records.
    ("learning", &["agent", "edit", "files", "llm"]),
    (
        "lsp",
        &[
            "agent",
            "buffers",
            "config",
            "edit",
            "files",
            "index",
            "learning",
            "mcp",
            "retrieval",
            "sandbox",
            "workspace",
        ],
    ),
    // The ACP front end: the session core, as `lsp` uses it, and no LSP types.
    (
        "acp",
        &[
            "agent",
            "config",
            "edit",
            "files",
            "index",
            "llm",
            "mcp",
            "workspace",
        ],
    ),
    // The binary's subcommands: they reach the library as `wright::…`, as any user would.
    ("cli", &[]),
];

/// References to files outside the repository (the design notes it was started from): what the
/// code follows is in `docs/`.
const OUTSIDE_REFERENCES: &[[&str; 2]] = &[["DESIGN", ".md"], ["../", "shared/"]];

/// The crates whose files must start with a `//!` doc.
const CRATES: &[&str] = &["server", "protocol", "kernels", "tests", "xtask"];

pub fn run() -> anyhow::Result<()> {
    let violations = check(&crate::project_root());
    if violations.is_empty() {
        println!("tidy: ok");
        return Ok(());
    }
    for violation in &violations {
        eprintln!("{violation}");
    }
    bail!("{} tidy violation(s)", violations.len())
}

fn check(root: &Path) -> Vec<String> {
    let mut violations = Vec::new();
    let mut files = Vec::new();
    for krate in CRATES {
        collect_rust_files(&root.join(krate), &mut files);
    }
    for path in &files {
        let relative = path
            .strip_prefix(root)
            .unwrap_or(path)
            .to_string_lossy()
            .replace('\\', "/");
        if relative.starts_with("tests/fixtures/") {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(path) else {
            violations.push(format!("{relative}: not readable as UTF-8"));
            continue;
        };
        if !text.trim_start().starts_with("//!") {
            violations.push(format!(
                "{relative}: must start with a `//!` doc saying what it owns"
            ));
        }
        let lines: Vec<&str> = text.lines().collect();
        for (number, line) in lines.iter().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            if is_allow_attribute(code) {
                // The attribute may span a few lines; its reason is inside it.
                let attribute = lines[number..(number + 4).min(lines.len())].join(" ");
                if !attribute.contains(&["reason", " = "].concat()) {
                    violations.push(format!(
                        "{relative}:{}: an `allow` without a `reason = \"…\"`: say why the lint \
                         does not apply here",
                        number + 1
                    ));
                }
            }
            for boundary in BOUNDARIES {
                let pattern = boundary.pattern.concat();
                if relative.starts_with("server/src/")
                    && !relative.starts_with(boundary.allowed_under)
                    && code.contains(&pattern)
                {
                    violations.push(format!(
                        "{relative}:{}: `{pattern}` outside {}: {}",
                        number + 1,
                        boundary.allowed_under,
                        boundary.why
                    ));
                }
            }
            for (pattern, why) in FORBIDDEN {
                let pattern = pattern.concat();
                if code.contains(&pattern) {
                    violations.push(format!("{relative}:{}: `{pattern}` is {why}", number + 1));
                }
            }
        }
    }
    violations.extend(check_code_map(root));
    violations.extend(check_stands_alone(root, &files));
    violations.extend(check_file_access(root, &files));
    violations.extend(check_layers(root, &files));
    violations
}

/// Workspace files are touched only through `files::Root` (see [`FILE_SYSTEM_CALLS`]).
fn check_file_access(root: &Path, rust_files: &[PathBuf]) -> Vec<String> {
    let (line_marker, file_marker) = (["host ", "path:"].concat(), ["host ", "paths:"].concat());
    let mut violations = Vec::new();
    for path in rust_files {
        let relative = path
            .strip_prefix(root)
            .unwrap_or(path)
            .display()
            .to_string();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if !relative.starts_with("server/src/")
            || relative.starts_with("server/src/files/")
            || name == "tests.rs"
            || name.ends_with("_tests.rs")
        {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(path) else {
            continue;
        };
        if text.contains(&file_marker) {
            continue;
        }
        let lines: Vec<&str> = text.lines().collect();
        for (number, line) in lines.iter().enumerate() {
            // A file's unit tests (a `#[cfg(test)] mod tests` at its end) make scratch files.
            if line.trim() == "#[cfg(test)]"
                && lines
                    .get(number + 1)
                    .is_some_and(|next| next.contains("mod tests"))
            {
                break;
            }
            let code = line.split("//").next().unwrap_or("");
            let Some(call) = FILE_SYSTEM_CALLS
                .iter()
                .map(|call| call.concat())
                .find(|call| code.contains(call.as_str()))
            else {
                continue;
            };
            let marked = lines[number.saturating_sub(3)..=number]
                .iter()
                .any(|line| line.contains(&line_marker));
            if !marked {
                violations.push(format!(
                    "{relative}:{}: `{call}` outside server/src/files/: touch workspace files \
                     through files::Root, or say `// {line_marker} <why>` if the path is no \
                     workspace's",
                    number + 1
                ));
            }
        }
    }
    violations
}

/// Every `crate::MODULE` a top-level module of the server names is allowed it by [`LAYERS`],
/// and the table is free of loops.
fn check_layers(root: &Path, rust_files: &[PathBuf]) -> Vec<String> {
    let mut violations = Vec::new();
    let allowed = |module: &str| LAYERS.iter().find(|(name, _)| *name == module);
    // Listed lowest first: each module may import only modules listed before it.
    for (position, (module, imports)) in LAYERS.iter().enumerate() {
        for import in *imports {
            if !LAYERS[..position].iter().any(|(name, _)| name == import) {
                violations.push(format!(
                    "tidy's LAYERS: {module} may import {import}, which is not listed below it: \
                     that allows an import loop"
                ));
            }
        }
    }
    let source = root.join("server/src");
    for path in rust_files {
        let Ok(relative) = path.strip_prefix(&source) else {
            continue;
        };
        let Some(first) = relative.components().next() else {
            continue;
        };
        let first = first.as_os_str().to_string_lossy();
        let module = first.strip_suffix(".rs").unwrap_or(&first).to_owned();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if matches!(module.as_str(), "lib" | "main")
            || name == "tests.rs"
            || name.ends_with("_tests.rs")
        {
            continue;
        }
        let Some((_, imports)) = allowed(&module) else {
            violations.push(format!(
                "server/src/{first}: a top-level module tidy's LAYERS does not list: say what it may import"
            ));
            continue;
        };
        let Ok(text) = std::fs::read_to_string(path) else {
            continue;
        };
        // A file's unit tests at its end may reach anywhere.
        let text = text
            .split("#[cfg(test)]\nmod tests")
            .next()
            .unwrap_or(&text);
        for (number, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            for named in named_modules(code) {
                if named != module
                    && allowed(&named).is_some()
                    && !imports.contains(&named.as_str())
                {
                    violations.push(format!(
                        "{}:{}: {module} imports {named}, which tidy's LAYERS does not allow it \
                         (a module imports only those below it)",
                        path.strip_prefix(root).unwrap_or(path).display(),
                        number + 1
                    ));
                }
            }
        }
    }
    violations
}

/// The modules `code` names as `crate::NAME` or in `use crate::{NAME, …}`.
fn named_modules(code: &str) -> Vec<String> {
    let mut named = Vec::new();
    let word = |text: &str| -> String {
        text.chars()
            .take_while(|c| c.is_ascii_lowercase() || *c == '_')
            .collect()
    };
    for (at, _) in code.match_indices("crate::") {
        let rest = &code[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let group = group.split('}').next().unwrap_or(group);
            named.extend(
                group
                    .split(',')
                    .map(|item| word(item.trim()))
                    .filter(|w| !w.is_empty()),
            );
        } else {
            let first = word(rest);
            if !first.is_empty() {
                named.push(first);
            }
        }
    }
    named
}

/// Whether `code` opens an `allow` attribute (alone, or inside a `cfg_attr`).
fn is_allow_attribute(code: &str) -> bool {
    let trimmed = code.trim_start();
    let allow = ["all", "ow("].concat();
    [format!("#[{allow}"), format!("#![{allow}"), allow.clone()]
        .iter()
        .any(|start| trimmed.starts_with(start.as_str()))
}

/// No document, comment or string of the repository points to a file outside it.
fn check_stands_alone(root: &Path, rust_files: &[PathBuf]) -> Vec<String> {
    let mut documents: Vec<PathBuf> = vec![root.join("README.md")];
    for dir in [
        "docs",
        "editors/helix",
        "editors/nvim",
        "editors/vscode",
        "editors",
    ] {
        if let Ok(entries) = std::fs::read_dir(root.join(dir)) {
            documents.extend(
                entries
                    .flatten()
                    .map(|entry| entry.path())
                    .filter(|path| path.extension().is_some_and(|ext| ext == "md")),
            );
        }
    }
    let mut violations = Vec::new();
    for path in documents.iter().chain(rust_files) {
        let Ok(text) = std::fs::read_to_string(path) else {
            continue;
        };
        let relative = path
            .strip_prefix(root)
            .unwrap_or(path)
            .display()
            .to_string();
        for (number, line) in text.lines().enumerate() {
            for reference in OUTSIDE_REFERENCES {
                let reference = reference.concat();
                if line.contains(&reference) {
                    violations.push(format!(
                        "{relative}:{}: `{reference}` is outside the repository: say it in docs/",
                        number + 1
                    ));
                }
            }
        }
    }
    violations
}

/// Every module of the server must be in the code map of `docs/architecture.md`.
fn check_code_map(root: &Path) -> Vec<String> {
    let Ok(map) = std::fs::read_to_string(root.join("docs/architecture.md")) else {
        return vec!["docs/architecture.md is missing".to_owned()];
    };
    let Ok(entries) = std::fs::read_dir(root.join("server/src")) else {
        return vec!["server/src is missing".to_owned()];
    };
    let mut violations = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let module = name.strip_suffix(".rs").unwrap_or(&name);
        if matches!(module, "lib" | "main") {
            continue;
        }
        if !map.contains(&format!("`server/src/{module}")) {
            violations.push(format!(
                "server/src/{name} is not in the code map of docs/architecture.md: describe what it owns"
            ));
        }
    }
    // Every module inside them too: its file (`name.rs`) or folder (`name/`) is named.
    let mut files = Vec::new();
    collect_rust_files(&root.join("server/src"), &mut files);
    for path in files {
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        let Ok(relative) = path.strip_prefix(root.join("server/src")) else {
            continue;
        };
        if relative.components().count() < 2
            || matches!(name, "mod.rs" | "tests.rs")
            || name.ends_with("_tests.rs")
            || relative.starts_with("compaction/fixtures")
        {
            continue;
        }
        if !map.contains(&format!("`{name}`")) && !map.contains(&format!("{name}`")) {
            violations.push(format!(
                "server/src/{} is not named in docs/architecture.md: say what it owns",
                relative.display()
            ));
        }
    }
    violations
}

fn collect_rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if path.is_dir() {
            if name != "target" && name != "node_modules" {
                collect_rust_files(&path, out);
            }
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            out.push(path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tidy() {
        let violations = check(&crate::project_root());
        assert!(
            violations.is_empty(),
            "tidy violations:\n{}",
            violations.join("\n")
        );
    }

    #[test]
    fn tidy_catches_what_it_promises_to() {
        let root = std::env::temp_dir().join(format!("wright-tidy-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let write = |relative: &str, text: &str| {
            let path = root.join(relative);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        };
        let leftover = ["d", "bg!(x);"].concat();
        let lsp = ["use tower_lsp", "_server::Client;"].concat();
        let spawn = ["std::process::", "Command::new(\"sh\");"].concat();
        write(
            "server/src/edit/mod.rs",
            &format!("//! Edits.\n{lsp}\nfn f() {{ {spawn} }}\n"),
        );
        write("server/src/lsp/mod.rs", &format!("//! LSP.\n{lsp}\n"));
        write(
            "server/src/buffers.rs",
            &format!("fn no_doc() {{ {leftover} }}\n"),
        );
        write(
            "docs/architecture.md",
            "`server/src/lsp/` `server/src/buffers.rs`\n",
        );
        let violations = check(&root);
        std::fs::remove_dir_all(&root).unwrap();
        let joined = violations.join("\n");
        assert_eq!(violations.len(), 6, "{joined}");
        assert!(joined.contains("edit/mod.rs:2: `tower_lsp_server` outside server/src/lsp/"));
        assert!(joined.contains("edit/mod.rs:3: `process::Command` outside server/src/sandbox/"));
        assert!(joined.contains("edit/mod.rs:3: `Command::new` outside server/src/sandbox/"));
        assert!(joined.contains("buffers.rs: must start with a `//!` doc"));
        assert!(joined.contains("buffers.rs:1: `d") && joined.contains("is a debugging leftover"));
        assert!(joined.contains("server/src/edit is not in the code map"));
    }
}
