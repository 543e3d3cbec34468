//! Secrets taken out of what is exported: API key shapes, the values of the workspace's
//! `.env` files and the keys the configuration names, each replaced by `[REDACTED]`.

use std::path::Path;

use regex::Regex;

pub const REDACTED: &str = "[REDACTED]";

/// Values shorter than this are not taken for secrets: `.env` files hold flags and ports
/// (`DEBUG=1`, `PORT=8080`) whose every occurrence in code would be blanked otherwise.
const MIN_SECRET: usize = 8;

/// What to take out of exported text.
pub struct Redactor {
    shapes: Regex,
    values: Vec<String>,
}

impl Redactor {
    /// Key shapes, the values of the `.env` files in `root` (its top folder: where tools read
    /// them from) and `known` values (the configured keys).
    pub fn new(root: &Path, known: impl IntoIterator<Item = String>) -> Self {
        // The common providers' key shapes: OpenAI and Anthropic (`sk-…`, `sk-ant-…`), GitHub
        // tokens, AWS access key ids, Google API keys, Slack tokens, and bearer headers.
        let shapes = Regex::new(
            r"sk-[A-Za-z0-9_\-]{16,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|AKIA[0-9A-Z]{16}|AIza[0-9A-Za-z_\-]{35}|xox[abprs]-[A-Za-z0-9\-]{10,}|(?i:bearer)\s+[A-Za-z0-9._\-]{16,}",
        )
        .expect("the key shapes parse");
        let mut values: Vec<String> = known
            .into_iter()
            .chain(env_values(root))
            .filter(|value| value.len() >= MIN_SECRET)
            .collect();
        // Longest first: a value that contains another is replaced whole.
        values.sort_by_key(|value| std::cmp::Reverse(value.len()));
        values.dedup();
        Self { shapes, values }
    }

    pub fn redact(&self, text: &str) -> String {
        let mut text = text.to_owned();
        for value in &self.values {
            if text.contains(value.as_str()) {
                text = text.replace(value.as_str(), REDACTED);
            }
        }
        self.shapes.replace_all(&text, REDACTED).into_owned()
    }
}

/// Whether an environment variable's name says it holds a credential (its value is then
/// redacted wherever it shows).
pub fn secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    ["KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL"]
        .iter()
        .any(|mark| upper.contains(mark))
}

/// The values of `root/.env`, `root/.env.*` (`KEY=value`, `export KEY=value`, quotes taken
/// off; comments and blank lines skipped).
fn env_values(root: &Path) -> Vec<String> {
    // Through the workspace's root: a `.env` link leading outside is not read.
    let Ok(workspace) = crate::files::Root::open(root) else {
        return Vec::new();
    };
    let Ok(entries) = workspace.read_dir(Path::new("")) else {
        return Vec::new();
    };
    let mut values = Vec::new();
    for entry in entries {
        let name = entry.name.to_string_lossy().into_owned();
        if name != ".env" && !name.starts_with(".env.") {
            continue;
        }
        let Ok(text) = workspace.read(Path::new(&name), 1 << 20) else {
            continue;
        };
        for line in String::from_utf8_lossy(&text).lines() {
            let line = line.trim();
            let line = line.strip_prefix("export ").unwrap_or(line);
            if line.starts_with('#') {
                continue;
            }
            if let Some((_, value)) = line.split_once('=') {
                let value = value.trim().trim_matches(['"', '\'']);
                if !value.is_empty() {
                    values.push(value.to_owned());
                }
            }
        }
    }
    values
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_shapes_env_values_and_known_keys_are_redacted() {
        let root = std::env::temp_dir().join(format!("wright-redact-{}", std::process::id()));
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(
            root.join(".env"),
            "# x\nDB_PASSWORD=\"hunter2-very-secret\"\nDEBUG=1\n",
        )
        .unwrap();
        let redactor = Redactor::new(&root, ["configured-key-42".to_owned()]);
        let text = "key sk-abcdefghijklmnop1234 pw hunter2-very-secret k configured-key-42 DEBUG=1";
        assert_eq!(
            redactor.redact(text),
            "key [REDACTED] pw [REDACTED] k [REDACTED] DEBUG=1"
        );
        let _ = std::fs::remove_dir_all(&root);
    }
}
