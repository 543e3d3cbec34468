//! The environment a sandboxed command gets: only variables on an allow-list, and never one
//! whose name looks like a credential, whatever the allow-list or the caller says; a
//! sandboxed server's (`build_exact`): PATH, HOME and LANG, and what its configuration sets.

/// Variables passed through from the server's environment when set.
const ALLOWED: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "TERM",
    "TZ",
    "COLORTERM",
    "NO_COLOR",
    "CLICOLOR",
    "FORCE_COLOR",
    "COLUMNS",
    "CI",
    "SOURCE_DATE_EPOCH",
    "CARGO_HOME",
    "RUSTUP_HOME",
    "RUSTUP_TOOLCHAIN",
    "GOPATH",
    "GOROOT",
    "GOFLAGS",
    "JAVA_HOME",
    "VIRTUAL_ENV",
    "PYENV_ROOT",
    "NODE_PATH",
    "CC",
    "CXX",
    "CFLAGS",
    "CXXFLAGS",
    "LDFLAGS",
    "PKG_CONFIG_PATH",
];

/// Name fragments that mark a credential; such a variable is never passed.
const SECRET_MARKS: &[&str] = &[
    "KEY",
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "CREDENTIAL",
    "AUTH",
    "COOKIE",
    "SESSION",
];

/// Whether a variable name looks like it holds a credential.
pub fn looks_secret(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    SECRET_MARKS.iter().any(|mark| upper.contains(mark))
}

/// The command's environment: allowed variables from `host`, then `extra` (the caller's own,
/// e.g. a test filter), with credentials removed from both; TMPDIR points at the private /tmp.
pub fn build(
    host: impl IntoIterator<Item = (String, String)>,
    extra: &[(String, String)],
) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = host
        .into_iter()
        .filter(|(name, _)| ALLOWED.contains(&name.as_str()) || name.starts_with("LC_"))
        .chain(extra.iter().cloned())
        .filter(|(name, _)| !looks_secret(name))
        .collect();
    env.retain(|(name, _)| name != "TMPDIR");
    env.push(("TMPDIR".to_owned(), "/tmp".to_owned()));
    // Bytecode written into the workspace goes stale when an edit keeps a file's size within
    // the second of the compile (Python keys it on whole seconds and size): the next run would
    // execute the old code. Compiling the project's own modules each run is cheap; the
    // installed packages' bytecode is still read. The caller (a test command) may say otherwise.
    if !env
        .iter()
        .any(|(name, _)| name == "PYTHONDONTWRITEBYTECODE")
    {
        env.push(("PYTHONDONTWRITEBYTECODE".to_owned(), "1".to_owned()));
    }
    finish(env)
}

/// A default PATH when none was set; then later entries win, as they would in a shell.
fn finish(mut env: Vec<(String, String)>) -> Vec<(String, String)> {
    if !env.iter().any(|(name, _)| name == "PATH") {
        env.push((
            "PATH".to_owned(),
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".to_owned(),
        ));
    }
    let mut seen = std::collections::HashSet::new();
    let mut deduped: Vec<_> = env
        .into_iter()
        .rev()
        .filter(|(name, _)| seen.insert(name.clone()))
        .collect();
    deduped.reverse();
    deduped
}

/// Variables an `Exact` run (and an unconfined server, `host.rs`) takes from the server's
/// environment: enough to find programs and the user's files, nothing that could hold a
/// secret.
pub(crate) const EXACT_FROM_HOST: &[&str] = &["PATH", "HOME", "LANG"];

/// A server's environment (`Environment::Exact`): PATH, HOME and LANG from `host`, TMPDIR at
/// the private /tmp, then `extra` as given (later entries win), credential-like names
/// included: they are the user's own, named for this run, while wright's environment (its
/// model keys) never passes beyond the three.
pub fn build_exact(
    host: impl IntoIterator<Item = (String, String)>,
    extra: &[(String, String)],
) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = host
        .into_iter()
        .filter(|(name, _)| EXACT_FROM_HOST.contains(&name.as_str()))
        .collect();
    env.push(("TMPDIR".to_owned(), "/tmp".to_owned()));
    env.extend(extra.iter().cloned());
    finish(env)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn only_allowed_variables_pass_and_credentials_never() {
        let host = pairs(&[
            ("PATH", "/bin"),
            ("LC_ALL", "C"),
            ("OPENAI_API_KEY", "sk-1"),
            ("GITHUB_TOKEN", "t"),
            ("RANDOM_THING", "x"),
            ("TMPDIR", "/host/tmp"),
        ]);
        let extra = pairs(&[("RUST_LOG", "debug"), ("AWS_SECRET_ACCESS_KEY", "s")]);
        let env = build(host, &extra);
        let names: Vec<&str> = env.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            names,
            [
                "PATH",
                "LC_ALL",
                "RUST_LOG",
                "TMPDIR",
                "PYTHONDONTWRITEBYTECODE"
            ]
        );
        assert_eq!(env[3].1, "/tmp");
        assert_eq!(env[4].1, "1");
        let asked = build(Vec::new(), &pairs(&[("PYTHONDONTWRITEBYTECODE", "")]));
        assert!(asked.contains(&("PYTHONDONTWRITEBYTECODE".to_owned(), String::new())));
    }

    #[test]
    fn a_missing_path_gets_a_default() {
        let env = build(Vec::new(), &[]);
        assert!(
            env.iter()
                .any(|(k, v)| k == "PATH" && v.contains("/usr/bin"))
        );
    }

    #[test]
    fn an_exact_environment_takes_three_host_variables_and_the_configured_ones_as_given() {
        let host = pairs(&[
            ("PATH", "/bin"),
            ("HOME", "/home/u"),
            ("LANG", "C.UTF-8"),
            ("LC_ALL", "C"),
            ("USER", "u"),
            ("OPENAI_API_KEY", "sk-1"),
            ("TMPDIR", "/host/tmp"),
        ]);
        let extra = pairs(&[("DB_TOKEN", "configured"), ("LANG", "de_DE.UTF-8")]);
        let env = build_exact(host, &extra);
        assert_eq!(
            env,
            pairs(&[
                ("PATH", "/bin"),
                ("HOME", "/home/u"),
                ("TMPDIR", "/tmp"),
                ("DB_TOKEN", "configured"),
                ("LANG", "de_DE.UTF-8"),
            ])
        );
        let bare = build_exact(Vec::new(), &[]);
        assert!(
            bare.iter()
                .any(|(k, v)| k == "PATH" && v.contains("/usr/bin"))
        );
        assert!(!bare.iter().any(|(k, _)| k == "HOME"));
    }
}
