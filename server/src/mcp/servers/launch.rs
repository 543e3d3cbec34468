//! How each configured server is reached: a stdio server started in wright's sandbox (the
//! default: the workspace read-only, only `writable` and a private /tmp to write, no network
//! unless `network = true`, only PATH, HOME, LANG, TMPDIR=/tmp and its `env` set), or unconfined when the
//! user's own configuration says `sandbox = false`; an HTTP server by its URL, its token
//! read from the variable the configuration names.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::config::{McpServer, Reach};
use crate::mcp::client::{Launch, Pipes, Transport, Unconfined};
use crate::sandbox::host::HostCommand;
use crate::sandbox::{Environment, Filesystem, Network, Permissions, Request};

/// How to reach `server`, whose stdio process runs in `root` (or its `cwd`); `deny_read`
/// (`sandbox.deny_read`) is hidden from a sandboxed one, as from commands.
pub fn transport(
    server: &McpServer,
    root: &Path,
    cache_dir: Option<&Path>,
    deny_read: &[PathBuf],
) -> Result<Transport, String> {
    match &server.reach {
        Reach::Http {
            url,
            bearer_token_env,
            headers,
        } => {
            let mut bearer_token = match bearer_token_env {
                Some(var) => Some(std::env::var(var).map_err(|_| {
                    format!(
                        "MCP server `{}`: `bearer_token_env` names {var}, which is not set",
                        server.name
                    )
                })?),
                None => None,
            };
            for (name, value) in headers {
                match value.strip_prefix("Bearer ") {
                    Some(token) if name.eq_ignore_ascii_case("authorization") => {
                        bearer_token = Some(token.to_owned());
                    }
                    _ => {
                        return Err(format!(
                            "MCP server `{}`: the header {name:?} cannot be sent (only \
                             `Authorization: Bearer …` is)",
                            server.name
                        ));
                    }
                }
            }
            Ok(Transport::Http {
                url: url.clone(),
                bearer_token,
            })
        }
        Reach::Stdio {
            command,
            args,
            env,
            cwd,
            sandbox,
            network,
            writable,
        } => {
            let cwd = match cwd {
                Some(cwd) if cwd.is_absolute() => cwd.clone(),
                Some(cwd) => root.join(cwd),
                None => root.to_path_buf(),
            };
            let env: Vec<(String, String)> =
                env.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            if !*sandbox {
                return Ok(Transport::Stdio(Arc::new(Unconfined(HostCommand {
                    program: command.clone(),
                    args: args.clone(),
                    cwd,
                    env,
                }))));
            }
            let cache_dir = cache_dir.ok_or_else(|| {
                format!(
                    "MCP server `{}`: the sandbox needs wright's cache folder, and there is none",
                    server.name
                )
            })?;
            let pool = crate::agent::sandboxed::pool(cache_dir)
                .map_err(|err| format!("MCP server `{}`: {err}", server.name))?;
            let home = std::env::var_os("HOME").map(PathBuf::from);
            let writable = writable
                .iter()
                .map(|path| match (path.strip_prefix("~"), &home) {
                    (Ok(rest), Some(home)) => home.join(rest),
                    _ if path.is_relative() => root.join(path),
                    _ => path.clone(),
                })
                .collect();
            let relative_cwd = cwd.strip_prefix(root).ok().map(Path::to_path_buf);
            let mut argv = vec![command.clone()];
            argv.extend(args.iter().cloned());
            let readable = readable_trees(&argv, &env, root);
            Ok(Transport::Stdio(Arc::new(Sandboxed {
                pool,
                request: Request {
                    argv,
                    workspace: root.to_path_buf(),
                    cwd: relative_cwd,
                    filesystem: Filesystem::ReadOnly,
                    permissions: Permissions {
                        network: if *network {
                            Network::Host
                        } else {
                            Network::Off
                        },
                        extra_writable: writable,
                    },
                    env,
                    environment: Environment::Exact,
                    deny_read: deny_read.to_vec(),
                    readable,
                    ..Request::default()
                },
            })))
        }
    }
}

/// A server installed under the host's /tmp (a clone there, a test's folder) would be hidden
/// by the sandbox's private /tmp: the trees its program and arguments name stay visible,
/// read-only (the workspace is visible anyway).
fn readable_trees(argv: &[String], env: &[(String, String)], root: &Path) -> Vec<PathBuf> {
    let program = argv.first().and_then(|command| on_path(command, env));
    let mut readable: Vec<PathBuf> = argv
        .iter()
        .map(Path::new)
        .chain(program.as_deref())
        .filter(|path| !path.starts_with(root))
        .filter_map(crate::sandbox::host_tmp_tree)
        .collect();
    readable.sort();
    readable.dedup();
    readable
}

/// Where a bare program name (`node`) is found: on the `PATH` the server is given, else on
/// wright's own (which the exact environment passes on).
fn on_path(command: &str, env: &[(String, String)]) -> Option<PathBuf> {
    if command.contains('/') {
        return None;
    }
    let path = env
        .iter()
        .rev()
        .find(|(name, _)| name == "PATH")
        .map(|(_, value)| value.into())
        .or_else(|| std::env::var_os("PATH"))?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(command))
        .find(|candidate| candidate.is_file())
}

/// A stdio server inside the sandbox, attached by its pipes for as long as it lives.
struct Sandboxed {
    pool: Arc<crate::sandbox::Pool>,
    request: Request,
}

impl Launch for Sandboxed {
    fn launch(&self) -> std::io::Result<Pipes> {
        // A zygote prepared ahead when one is idle: a server starts (or restarts) warm.
        let attached = self
            .pool
            .spawn_attached(&self.request)
            .map_err(std::io::Error::other)?;
        Ok(Pipes {
            stdin: attached.stdin,
            stdout: attached.stdout,
            stderr: Some(attached.stderr),
            guard: Box::new(attached.handle),
        })
    }

    fn describe(&self) -> String {
        format!(
            "`{}`, sandboxed ({})",
            self.request.argv.join(" "),
            match self.request.permissions.network {
                Network::Off => "no network",
                _ => "with network",
            }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_trees_a_server_names_under_the_hosts_tmp_are_readable_but_not_the_workspaces() {
        let dir = std::env::temp_dir().join(format!("wright-launch-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("bin")).unwrap();
        std::fs::write(dir.join("bin/tool"), "").unwrap();
        let argv = |args: &[&str]| args.iter().map(|a| a.to_string()).collect::<Vec<_>>();
        let root = Path::new("/tmp/ws");
        let path = vec![("PATH".to_owned(), dir.join("bin").display().to_string())];
        let found = readable_trees(&argv(&["tool", "/tmp/ws/x", "/usr/lib/y"]), &path, root);
        let expected = crate::sandbox::host_tmp_tree(&dir)
            .into_iter()
            .collect::<Vec<_>>();
        assert_eq!(found, expected);
        let named = readable_trees(
            &argv(&[
                "/tmp/a/node",
                "/tmp/a/server.js",
                "/tmp/b",
                "/tmp/ws/sub",
                "/tmp",
            ]),
            &[],
            root,
        );
        assert_eq!(named, [PathBuf::from("/tmp/a"), PathBuf::from("/tmp/b")]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
