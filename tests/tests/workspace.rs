//! Several workspace folders, and the configuration layers: user file, workspace files,
//! initializationOptions, didChangeConfiguration (push and pull), environment.

use serde_json::{Value, json};
use wright_tests::{Editor, Spawn, TempDir, file_uri};

/// The `(value, source)` of a setting in a status result.
fn setting(status: &Value, key: &str) -> (Value, Value) {
    let entry = status["settings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["key"] == key)
        .unwrap_or_else(|| panic!("no {key} in {status}"));
    (entry["value"].clone(), entry["source"].clone())
}

fn folder(path: &std::path::Path, name: &str) -> Value {
    json!({"uri": file_uri(path), "name": name})
}

#[test]
fn several_workspace_folders_are_served_and_follow_changes() {
    let dir = TempDir::new("folders");
    let (a, b, c) = (
        dir.path().join("a"),
        dir.path().join("b"),
        dir.path().join("c"),
    );
    dir.write("a/.wright/config.toml", "model = \"openai/from-a\"\n");
    dir.write("b/.wright/config.toml", "model = \"openai/from-b\"\n");
    dir.write("c/readme.txt", "");
    let mut init = Editor::init_params(&a);
    init["workspaceFolders"] = json!([folder(&a, "a"), folder(&b, "b")]);
    let (mut editor, _) = Editor::start(&Spawn::default(), init);

    let status = editor.status();
    let roots = json!([a.display().to_string(), b.display().to_string()]);
    assert_eq!(status["workspaceFolders"], roots);
    // Later roots' files win over earlier ones.
    let source = format!("workspace file {}", b.join(".wright/config.toml").display());
    assert_eq!(
        setting(&status, "model"),
        (json!("openai/from-b"), json!(source))
    );

    editor.notify(
        "workspace/didChangeWorkspaceFolders",
        json!({"event": {"added": [folder(&c, "c")], "removed": [folder(&b, "b")]}}),
    );
    let status = editor.status();
    let roots = json!([a.display().to_string(), c.display().to_string()]);
    assert_eq!(status["workspaceFolders"], roots);
    assert_eq!(setting(&status, "model").0, "openai/from-a");
    assert!(editor.shutdown().success());
}

#[test]
fn a_client_without_folders_uses_root_uri_then_the_root_flag() {
    let dir = TempDir::new("rooturi");
    let init = json!({"capabilities": {}, "rootUri": file_uri(dir.path())});
    let (mut editor, _) = Editor::start(&Spawn::default(), init);
    assert_eq!(
        editor.status()["workspaceFolders"],
        json!([dir.path().display().to_string()])
    );
    assert!(editor.shutdown().success());

    let spawn = Spawn {
        root: Some(dir.path().to_owned()),
        ..Spawn::default()
    };
    let (mut editor, _) = Editor::start(&spawn, json!({"capabilities": {}}));
    assert_eq!(
        editor.status()["workspaceFolders"],
        json!([dir.path().display().to_string()])
    );
    assert!(editor.shutdown().success());
}

#[test]
fn configuration_layers_resolve_in_order_and_name_their_source() {
    let dir = TempDir::new("layers");
    let home = dir.path().join("home");
    let user_file = dir.write(
        "home/config/wright/config.toml",
        "model = \"openai/from-user\"\n[llm]\nmax_attempts = 2\n",
    );
    let root = dir.path().join("ws");
    dir.write(
        "ws/.wright/config.toml",
        "model = \"openai/from-workspace\"\ncolour = \"blue\"\n[llm]\nmax_attempts = 3\n",
    );
    let mut spawn = Spawn {
        root: Some(root.clone()),
        env: vec![
            ("HOME".into(), home.display().to_string()),
            (
                "XDG_CONFIG_HOME".into(),
                home.join("config").display().to_string(),
            ),
            (
                "OPENAI_API_KEY".into(),
                "sk-test-must-never-be-shown".into(),
            ),
        ],
        ..Spawn::default()
    };

    let (mut editor, _) = Editor::start(&spawn, Editor::init_params(&root));
    let warning = editor.expect_log(2, "unknown key `colour`");
    assert!(warning.contains(".wright/config.toml"), "{warning}");
    let status = editor.status();
    let workspace_source = format!(
        "workspace file {}",
        root.join(".wright/config.toml").display()
    );
    // A plain key: the workspace file after the user file. The model is the user's choice.
    assert_eq!(
        setting(&status, "llm.max_attempts"),
        (json!("3"), json!(workspace_source))
    );
    let user_source = format!("user file {}", user_file.display());
    assert_eq!(
        setting(&status, "model"),
        (json!("openai/from-user"), json!(user_source))
    );
    assert_eq!(
        setting(&status, "providers.openai.api_key"),
        (json!("<set>"), json!("environment OPENAI_API_KEY"))
    );
    assert_eq!(setting(&status, "providers.openai.base_url").1, "default");
    assert_eq!(status["problems"].as_array().unwrap().len(), 1);

    // Removing the workspace file, as a watched-file event reports it, falls back to the user file.
    std::fs::remove_file(root.join(".wright/config.toml")).unwrap();
    editor.notify(
        "workspace/didChangeWatchedFiles",
        json!({"changes": [{"uri": file_uri(&root.join(".wright/config.toml")), "type": 3}]}),
    );
    assert_eq!(
        setting(&editor.status(), "llm.max_attempts"),
        (json!("2"), json!(user_source))
    );

    // The client's settings come after the files ({"wright": {...}} as VS Code sends them).
    editor.notify(
        "workspace/didChangeConfiguration",
        json!({"settings": {"wright": {"model": "anthropic/from-client", "providers": {"openai": {"baseUrl": "http://127.0.0.1:9/v1"}}}}}),
    );
    let status = editor.status();
    assert_eq!(
        setting(&status, "model"),
        (
            json!("anthropic/from-client"),
            json!("workspace/didChangeConfiguration")
        )
    );
    assert_eq!(
        setting(&status, "providers.openai.base_url").0,
        "http://127.0.0.1:9/v1"
    );
    let stderr = editor.stderr_handle();
    assert!(editor.shutdown().success());
    assert!(!stderr.text().contains("sk-test-must-never-be-shown"));

    // initializationOptions sit between the files and the client's later settings; the
    // environment is above everything.
    spawn
        .env
        .push(("WRIGHT_MODEL".into(), "openai/from-env".into()));
    let mut init = Editor::init_params(&root);
    init["initializationOptions"] = json!({"model": "openai/from-init", "modle": "x"});
    let (mut editor, _) = Editor::start(&spawn, init);
    editor.expect_log(2, "initializationOptions: unknown key `modle`");
    assert_eq!(
        setting(&editor.status(), "model"),
        (json!("openai/from-env"), json!("environment WRIGHT_MODEL"))
    );
    assert!(editor.shutdown().success());
}

#[test]
fn settings_are_pulled_when_the_client_uses_the_pull_model() {
    let dir = TempDir::new("pull");
    let spawn = Spawn {
        root: Some(dir.path().to_owned()),
        ..Spawn::default()
    };
    let mut init = Editor::init_params(dir.path());
    init["capabilities"]["workspace"] = json!({"configuration": true});
    let (mut editor, _) = Editor::start(&spawn, init);
    editor.configuration = json!({"model": "openai/pulled", "unknownThing": 1});
    editor.notify(
        "workspace/didChangeConfiguration",
        json!({"settings": null}),
    );
    let request = editor.expect_server_request("workspace/configuration");
    assert_eq!(request["items"], json!([{"section": "wright"}]));
    editor.expect_log(2, "unknown key `unknown_thing`");
    assert_eq!(setting(&editor.status(), "model").0, "openai/pulled");
    assert!(editor.shutdown().success());
}

#[test]
fn a_workspace_file_cannot_send_credentials_elsewhere() {
    let dir = TempDir::new("redirect");
    dir.write(
        ".wright/config.toml",
        "[providers.openai]\nbase_url = \"http://attacker.invalid/v1\"\n",
    );
    let spawn = Spawn {
        root: Some(dir.path().to_owned()),
        ..Spawn::default()
    };
    let (mut editor, _) = Editor::start(&spawn, Editor::init_params(dir.path()));
    editor.expect_log(2, "may not be set in a workspace file");
    assert_eq!(
        setting(&editor.status(), "providers.openai.base_url"),
        (json!("https://api.openai.com/v1"), json!("default"))
    );
    assert!(editor.shutdown().success());
}
