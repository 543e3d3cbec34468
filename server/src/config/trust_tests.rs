//! What a repository's `.wright/config.toml` may do to the user's configuration: tighten the
//! policy keys, never loosen them; never name a file to load or run; prefer a model only
//! where the user allows it.

use std::path::{Path, PathBuf};

use serde_json::json;

use super::merge::{self, Choice, Given};
use super::schema::{Kind, Merge};
use super::*;

/// A user file and one workspace, written fresh for the test.
struct Setup {
    user: PathBuf,
    root: PathBuf,
}

impl Setup {
    fn new(name: &str, user: &str, workspace: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("wright-trust-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let root = dir.join("ws");
        std::fs::create_dir_all(root.join(".wright")).unwrap();
        let user_file = dir.join("user.toml");
        std::fs::write(&user_file, user).unwrap();
        std::fs::write(workspace_file(&root), workspace).unwrap();
        Self {
            user: user_file,
            root,
        }
    }

    fn layers(&self) -> Layers {
        Layers::load(
            Some(self.user.clone()),
            std::slice::from_ref(&self.root),
            &|_| None,
        )
    }

    fn resolve(&self) -> Config {
        self.layers().resolve()
    }

    fn workspace(&self) -> Source {
        Source::WorkspaceFile(workspace_file(&self.root))
    }

    fn user(&self) -> Source {
        Source::UserFile(self.user.clone())
    }
}

fn messages(config: &Config) -> Vec<String> {
    config.problems().iter().map(ToString::to_string).collect()
}

/// Each part's value and whether it counted.
fn parts(config: &Config, key: &str) -> Vec<(String, bool)> {
    config
        .parts(key)
        .iter()
        .map(|part| (part.display_value().to_owned(), part.ignored.is_none()))
        .collect()
}

#[test]
fn a_workspace_file_adds_approvals_to_the_users_and_cannot_replace_them() {
    let setup = Setup::new(
        "approvals",
        "[agent]\napprove_commands = \"git push*; rm -rf *\"\n",
        "[agent]\napprove_commands = \"touch forbidden*; git push*\"\n",
    );
    let config = setup.resolve();
    assert_eq!(
        config.list("agent.approve_commands"),
        ["git push*", "rm -rf *", "touch forbidden*"]
    );
    let source = &config.values["agent.approve_commands"].source;
    assert_eq!(
        source,
        &Source::Combined(vec![setup.user(), setup.workspace()])
    );
    assert!(source.to_string().starts_with("combined from user file "));
    assert_eq!(
        parts(&config, "agent.approve_commands"),
        [
            ("git push*; rm -rf *".to_owned(), true),
            ("touch forbidden*; git push*".to_owned(), true)
        ]
    );
    assert!(config.problems().is_empty(), "{:?}", messages(&config));
}

#[test]
fn list_keys_take_a_string_or_an_array_and_keep_one_form() {
    let setup = Setup::new(
        "lists",
        "[sandbox]\nprotected = [\"docs/adr\", \"./secrets.json\"]\n",
        "[sandbox]\nprotected = \"vendor/ ; docs/adr\"\ndeny_read = [\"~/work/keys\", \"a;b\"]\n",
    );
    let config = setup.resolve();
    assert_eq!(
        config.get("sandbox.protected"),
        Some("docs/adr; ./secrets.json; vendor/")
    );
    let problems = messages(&config);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].contains("`sandbox.deny_read`") && problems[0].contains("holds a `;`"),
        "{problems:?}"
    );
    let settings = config.sandbox_settings(Path::new("/home/u"));
    let protected: Vec<&str> = settings
        .protected
        .iter()
        .map(|p| p.to_str().unwrap())
        .collect();
    assert_eq!(
        protected,
        [".git", ".wright", "docs/adr", "secrets.json", "vendor"]
    );
    assert!(settings.deny_read.is_empty());
}

#[test]
fn paths_are_checked_where_they_are_read() {
    let mut layers = Layers::load(None, &[], &|_| None);
    layers.set_initialization_options(&json!({"sandbox": {
        "protected": ["/etc/passwd"],
        "denyRead": "relative/keys",
    }}));
    let problems = messages(&layers.resolve()).join("\n");
    assert!(
        problems.contains("`sandbox.protected`: \"/etc/passwd\" must be relative to the workspace"),
        "{problems}"
    );
    assert!(
        problems
            .contains("`sandbox.deny_read`: \"relative/keys\" must be absolute or start with ~/"),
        "{problems}"
    );
    layers.set_initialization_options(&json!({"sandbox": {
        "protected": "docs/../../outside",
        "denyRead": "/srv/../etc",
    }}));
    let problems = messages(&layers.resolve());
    assert!(
        problems.iter().all(|p| p.contains("must not contain `..`")) && problems.len() == 2,
        "{problems:?}"
    );
    layers.set_initialization_options(&json!({"sandbox": {
        "deny_read": "~/work/keys; /srv/secrets; ~",
        "disk_mb": 512,
        "tmp_mb": 64,
        "fallback": "landlock",
    }}));
    let config = layers.resolve();
    assert!(config.problems().is_empty(), "{:?}", messages(&config));
    assert_eq!(
        config.sandbox_settings(Path::new("/home/u")),
        SandboxSettings {
            protected: vec![PathBuf::from(".git"), PathBuf::from(".wright")],
            deny_read: vec![
                PathBuf::from("/home/u/work/keys"),
                PathBuf::from("/srv/secrets"),
                PathBuf::from("/home/u"),
            ],
            disk_mb: 512,
            tmp_mb: 64,
            fallback: Fallback::Landlock,
        }
    );
}

#[test]
fn the_sandbox_defaults_are_the_documented_ones() {
    let config = Layers::load(None, &[], &|_| None).resolve();
    let settings = config.sandbox_settings(Path::new("/home/u"));
    assert_eq!(
        (settings.disk_mb, settings.tmp_mb, settings.fallback),
        (4096, 1024, Fallback::Off)
    );
    assert!(settings.deny_read.is_empty());
    assert_eq!(config.get("allow_workspace_model"), Some("false"));
}

#[test]
fn a_workspace_file_may_keep_the_network_off_but_never_open_it() {
    let setup = Setup::new("network-loosen", "", "[sandbox]\nnetwork = \"allow\"\n");
    let config = setup.resolve();
    assert_eq!(config.get("sandbox.network"), Some("ask"));
    assert_eq!(config.values["sandbox.network"].source, Source::Default);
    assert_eq!(
        parts(&config, "sandbox.network"),
        [("ask".to_owned(), true), ("allow".to_owned(), false)]
    );
    assert_eq!(
        config.parts("sandbox.network")[1].ignored,
        Some("not stricter than the value that applies")
    );
    // Not a problem: a file written for other users' settings is not an error.
    assert!(config.problems().is_empty(), "{:?}", messages(&config));

    let setup = Setup::new(
        "network-tighten",
        "[sandbox]\nnetwork = \"allow\"\n",
        "[sandbox]\nnetwork = \"deny\"\n",
    );
    let config = setup.resolve();
    assert_eq!(config.get("sandbox.network"), Some("deny"));
    assert_eq!(config.values["sandbox.network"].source, setup.workspace());
    assert_eq!(
        config.parts("sandbox.network")[0].ignored,
        Some("a workspace file's value is stricter")
    );
    let setup = Setup::new(
        "network-ask",
        "[sandbox]\nnetwork = \"deny\"\n",
        "[sandbox]\nnetwork = \"ask\"\n",
    );
    assert_eq!(setup.resolve().get("sandbox.network"), Some("deny"));
}

#[test]
fn modes_take_the_stricter_and_limits_the_smaller() {
    let setup = Setup::new(
        "modes",
        "[edit]\nsyntax_gate = \"refuse\"\n[sandbox]\nfallback = \"landlock\"\ndisk_mb = 100\ntmp_mb = 50\n",
        "[edit]\nsyntax_gate = \"off\"\n[sandbox]\nfallback = \"off\"\ndisk_mb = 9000\ntmp_mb = 10\n",
    );
    let config = setup.resolve();
    assert_eq!(config.get("edit.syntax_gate"), Some("refuse"));
    assert_eq!(config.get("sandbox.fallback"), Some("off"));
    assert_eq!(config.values["sandbox.fallback"].source, setup.workspace());
    assert_eq!(config.get_u64("sandbox.disk_mb"), Some(100));
    assert_eq!(config.values["sandbox.disk_mb"].source, setup.user());
    assert_eq!(config.get_u64("sandbox.tmp_mb"), Some(10));

    let setup = Setup::new(
        "modes-default",
        "",
        "[edit]\nsyntax_gate = \"off\"\n[sandbox]\nfallback = \"landlock\"\ndisk_mb = 99999\n",
    );
    let config = setup.resolve();
    assert_eq!(config.get("edit.syntax_gate"), Some("report"));
    assert_eq!(config.get("sandbox.fallback"), Some("off"));
    assert_eq!(config.get_u64("sandbox.disk_mb"), Some(4096));
}

#[test]
fn the_editor_and_the_environment_are_the_users_layers() {
    let setup = Setup::new(
        "editor",
        "",
        "model = \"anthropic/from-workspace\"\n[agent]\napprove_commands = \"git push*\"\n[sandbox]\nnetwork = \"allow\"\n",
    );
    let mut layers = setup.layers();
    layers.set_initialization_options(&json!({"model": "openai/from-editor"}));
    layers.set_client_settings(&json!({"wright": {
        "agent": {"approveCommands": "npm publish*"},
        "sandbox": {"network": "allow"},
    }}));
    let config = layers.resolve();
    assert_eq!(config.get("model"), Some("openai/from-editor"));
    assert_eq!(config.get("sandbox.network"), Some("allow"));
    assert_eq!(
        config.list("agent.approve_commands"),
        ["npm publish*", "git push*"]
    );
    let env = |var: &str| (var == "WRIGHT_MODEL").then(|| "openai/from-env".to_owned());
    let config = Layers::load(None, std::slice::from_ref(&setup.root), &env).resolve();
    assert_eq!(config.get("model"), Some("openai/from-env"));
}

#[test]
fn the_users_model_wins_over_a_workspaces_and_the_workspace_applies_when_the_user_set_none() {
    let setup = Setup::new(
        "model-user",
        "model = \"openai/gpt-4.1\"\n",
        "model = \"anthropic/claude-opus-4\"\n[models.fast]\nmodel = \"anthropic/claude-haiku-4-5\"\n",
    );
    let config = setup.resolve();
    assert_eq!(config.get("model"), Some("openai/gpt-4.1"));
    assert_eq!(config.values["model"].source, setup.user());
    // The user chose their models: the workspace's fast tier is not used either.
    assert_eq!(config.get("models.fast.model"), None);
    assert_eq!(
        parts(&config, "models.fast.model"),
        [("anthropic/claude-haiku-4-5".to_owned(), false)]
    );
    assert!(
        config.parts("model")[1]
            .ignored
            .unwrap()
            .contains("allow_workspace_model = true")
    );

    let setup = Setup::new("model-none", "", "model = \"anthropic/claude-opus-4\"\n");
    let config = setup.resolve();
    assert_eq!(config.get("model"), Some("anthropic/claude-opus-4"));
    assert_eq!(config.values["model"].source, setup.workspace());
}

#[test]
fn allow_workspace_model_lets_a_workspaces_model_win_and_only_the_user_sets_it() {
    let setup = Setup::new(
        "model-allowed",
        "allow_workspace_model = true\nmodel = \"openai/gpt-4.1\"\n[models.fast]\nmodel = \"openai/gpt-4.1-nano\"\n",
        "model = \"openai/gpt-4.1-mini\"\n",
    );
    let mut layers = setup.layers();
    layers.set_client_settings(&json!({"model": "openai/from-editor"}));
    let config = layers.resolve();
    assert_eq!(config.get("allow_workspace_model"), Some("true"));
    assert_eq!(config.get("model"), Some("openai/gpt-4.1-mini"));
    assert_eq!(config.values["model"].source, setup.workspace());
    assert_eq!(config.get("models.fast.model"), Some("openai/gpt-4.1-nano"));
    assert!(config.problems().is_empty(), "{:?}", messages(&config));

    // A repository cannot allow itself.
    let setup = Setup::new(
        "model-self-allowed",
        "model = \"openai/gpt-4.1\"\n",
        "allow_workspace_model = true\nmodel = \"openai/gpt-4.1-mini\"\n",
    );
    let config = setup.resolve();
    assert_eq!(config.get("model"), Some("openai/gpt-4.1"));
    assert_eq!(config.get("allow_workspace_model"), Some("false"));
    let problems = messages(&config);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].contains("`allow_workspace_model` may not be set in a workspace file"),
        "{problems:?}"
    );
}

#[test]
fn a_workspace_file_never_names_a_model_file() {
    let setup = Setup::new(
        "model-file",
        "allow_workspace_model = true\n",
        "model = \"local/repo_model.gguf\"\n[models.strong]\nmodel = \"local/smollm2\"\n[providers.local]\npath = \"repo_model.gguf\"\ndraft = \"draft.gguf\"\n",
    );
    let config = setup.resolve();
    assert_eq!(config.get("model"), None);
    assert_eq!(config.get("models.strong.model"), None);
    assert_eq!(config.get("providers.local.path"), None);
    assert_eq!(config.get("providers.local.draft"), None);
    let problems = messages(&config);
    assert_eq!(problems.len(), 4, "{problems:?}");
    let file = workspace_file(&setup.root).display().to_string();
    let about = |key: &str| {
        problems
            .iter()
            .find(|p| p.contains(&format!("`{key}`")))
            .unwrap_or_else(|| panic!("no problem names `{key}`: {problems:?}"))
    };
    for key in [
        "model",
        "models.strong.model",
        "providers.local.path",
        "providers.local.draft",
    ] {
        assert!(
            about(key).starts_with(&format!("workspace file {file}: ")),
            "{}",
            about(key)
        );
    }
    assert!(
        about("model")
            .contains("\"local/repo_model.gguf\": a repository must not choose a local model"),
        "{problems:?}"
    );
    assert!(
        about("providers.local.path").contains("must not choose a file for wright to load and run"),
        "{problems:?}"
    );

    // The user's own local model is theirs to name.
    let setup = Setup::new(
        "model-file-user",
        "model = \"local/my.gguf\"\n[providers.local]\npath = \"/models/my.gguf\"\n",
        "",
    );
    let config = setup.resolve();
    assert_eq!(config.get("model"), Some("local/my.gguf"));
    assert_eq!(config.get("providers.local.path"), Some("/models/my.gguf"));
}

/// A key no schema entry has yet: the rule itself, as later keys (MCP `tools`) declare it.
fn allow_list(unset_allows_all: bool) -> &'static KeySpec {
    Box::leak(Box::new(KeySpec {
        key: "example.allowed",
        env: None,
        default: None,
        secret: false,
        merge: Merge::Intersect { unset_allows_all },
        doc: "an allow-list",
        kind: Kind::List,
        workspace_refuses: None,
        validate: |_| Ok(()),
    }))
}

#[test]
fn an_allow_list_is_only_narrowed_by_a_workspace_file() {
    let (user, workspace) = (
        Source::UserFile("u".into()),
        Source::WorkspaceFile("w".into()),
    );
    let given = |value: &'static str, source: &'static Source, user: bool| Given {
        value,
        source,
        user,
    };
    let user: &'static Source = Box::leak(Box::new(user));
    let workspace: &'static Source = Box::leak(Box::new(workspace));
    let choice = Choice {
        allowed: false,
        user_chose: false,
    };
    let both = [
        given("read; grep; run", user, true),
        given("grep; delete; run", workspace, false),
    ];
    let combined = merge::combine(allow_list(false), &both, &choice);
    let (value, source) = combined.value.unwrap();
    assert_eq!(value, "grep; run");
    assert_eq!(
        source,
        Source::Combined(vec![user.clone(), workspace.clone()])
    );

    // Unset by the user: "nothing" stays nothing, "everything" is narrowed to the workspace's.
    let alone = [given("grep; delete", workspace, false)];
    let nothing = merge::combine(allow_list(false), &alone, &choice);
    assert_eq!(nothing.value, None);
    assert!(nothing.parts[0].ignored.is_some());
    let everything = merge::combine(allow_list(true), &alone, &choice);
    assert_eq!(everything.value.unwrap().0, "grep; delete");
}

#[test]
fn every_policy_rule_is_declared_on_a_key_of_its_kind() {
    for spec in KEYS {
        match spec.merge {
            Merge::Union | Merge::Intersect { .. } => {
                assert_eq!(spec.kind, Kind::List, "{}", spec.key)
            }
            Merge::Smaller => assert_eq!(spec.kind, Kind::Integer, "{}", spec.key),
            Merge::Stricter(order) => {
                for value in order {
                    assert_eq!((spec.validate)(value), Ok(()), "{}: {value}", spec.key);
                }
                let default = spec.default.expect("a mode has a default");
                assert!(order.contains(&default), "{}", spec.key);
            }
            Merge::UserChoice { allowed_by, .. } => {
                let allowed = schema::find(allowed_by).expect("allowed_by is a key");
                assert_eq!(allowed.kind, Kind::Bool);
                assert!(matches!(allowed.merge, Merge::UserOnly(_)), "{allowed_by}");
            }
            Merge::Override | Merge::UserOnly(_) => {}
        }
    }
    // The keys that name a file or a host only the user may set.
    for key in [
        "providers.local.path",
        "providers.local.draft",
        "providers.openai.base_url",
        "providers.openai.api_key_command",
        "allow_workspace_model",
    ] {
        assert!(
            matches!(schema::find(key).unwrap().merge, Merge::UserOnly(_)),
            "{key}"
        );
    }
}

/// A repository's `.vscode/settings.json` reaches the server through the editor: the
/// extension's settings that choose a model, an endpoint or the sandbox's policy must be
/// settable by the user only (`"scope": "application"`), or a repository could set them.
#[test]
fn the_vs_code_extension_declares_its_model_and_sandbox_settings_for_the_user_only() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../editors/vscode/package.json");
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&manifest).unwrap()).unwrap();
    let properties = manifest["contributes"]["configuration"]["properties"]
        .as_object()
        .expect("the extension declares settings");
    // How the editor shows the agent's edits: a repository choosing it can do no harm.
    const PER_WORKSPACE: &[&str] = &["wright.applyMode"];
    for (name, setting) in properties {
        if PER_WORKSPACE.contains(&name.as_str()) {
            continue;
        }
        assert_eq!(
            setting["scope"], "application",
            "{name} must have \"scope\": \"application\" (or be listed as harmless per workspace)"
        );
    }
    for name in ["wright.model", "wright.sandboxNetwork", "wright.serverPath"] {
        assert!(properties.contains_key(name), "{name} is declared");
    }
}

#[test]
fn a_workspace_file_may_lower_the_sessions_budget_but_never_raise_it_nor_set_prices() {
    let setup = Setup::new(
        "budget",
        "[agent]\nmax_tokens = 100000\nmax_steps = 20\n",
        "prices = \"openai/gpt-4.1=0/0/0\"\n\
         [agent]\nmax_tokens = 900000000\nmax_steps = 5\nmax_wall_secs = 60\n",
    );
    let config = setup.resolve();
    assert_eq!(config.get_u64("agent.max_tokens"), Some(100_000));
    assert_eq!(config.get_u64("agent.max_steps"), Some(5));
    assert_eq!(config.get_u64("agent.max_wall_secs"), Some(60));
    assert_eq!(config.get("prices"), None);
    assert!(
        messages(&config)
            .iter()
            .any(|m| m.contains("`prices`") && m.contains("cost")),
        "{:?}",
        messages(&config)
    );
}
