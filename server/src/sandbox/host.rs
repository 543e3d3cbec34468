//! The one command wright runs for itself outside the sandbox: the user's own key command
//! (`providers.*.api_key_command`, read only from the user's configuration and the editor's,
//! never from a workspace file), which must reach the user's password manager or keychain.
//! Bounded in time and output like any command, and its output never logged. And the servers
//! the user asked to run unconfined (an MCP server with `sandbox = false`, the command given to
//! `wright mcp check`): started as the user, with a clean environment, in a process group of
//! their own that ends with the handle.

use std::io::Read;
use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt as _;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a key command may take (a password manager may ask to unlock).
const TIMEOUT: Duration = Duration::from_secs(30);
/// A key is short; more output than this is not one.
const MAX_OUTPUT: u64 = 64 * 1024;

/// Runs `command` with `sh -c` on the host and returns its standard output, trimmed.
pub fn secret_from_command(command: &str) -> Result<String, String> {
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(command)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|err| format!("cannot start it: {err}"))?;
    let mut stdout = child.stdout.take().expect("stdout is piped");
    let reader = std::thread::spawn(move || {
        let mut output = Vec::new();
        let _ = (&mut stdout).take(MAX_OUTPUT + 1).read_to_end(&mut output);
        output
    });
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() < TIMEOUT => {
                std::thread::sleep(Duration::from_millis(10));
            }
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("it did not finish within {} s", TIMEOUT.as_secs()));
            }
            Err(err) => return Err(format!("waiting for it: {err}")),
        }
    };
    let output = reader.join().unwrap_or_default();
    if !status.success() {
        let mut stderr = String::new();
        if let Some(mut pipe) = child.stderr.take() {
            let _ = (&mut pipe).take(2048).read_to_string(&mut stderr);
        }
        return Err(format!(
            "it failed ({status}){}",
            if stderr.trim().is_empty() {
                String::new()
            } else {
                format!(": {}", stderr.trim())
            }
        ));
    }
    if output.len() as u64 > MAX_OUTPUT {
        return Err("it printed more than a key".to_owned());
    }
    let key = String::from_utf8(output).map_err(|_| "it printed something that is not text")?;
    let key = key.trim();
    if key.is_empty() {
        return Err("it printed nothing".to_owned());
    }
    Ok(key.to_owned())
}

/// A long-lived program run as the user, outside the sandbox: what to start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostCommand {
    pub program: String,
    pub args: Vec<String>,
    pub cwd: PathBuf,
    /// Set for the program; of wright's own environment it gets only [`PASSED_ENV`].
    pub env: Vec<(String, String)>,
}

/// The variables of wright's environment an unconfined program inherits: those a sandboxed
/// server gets.
pub const PASSED_ENV: &[&str] = super::env::EXACT_FROM_HOST;

/// A started [`HostCommand`]: its pipes, and the guard that ends it.
pub struct HostProcess {
    pub stdin: OwnedFd,
    pub stdout: OwnedFd,
    pub stderr: OwnedFd,
    pub guard: ProcessGroupGuard,
}

/// Kills the whole process group (the program and everything it started) when dropped.
pub struct ProcessGroupGuard {
    child: Option<Child>,
}

impl HostCommand {
    /// Starts the program with piped stdin, stdout and stderr.
    pub fn spawn(&self) -> std::io::Result<HostProcess> {
        let mut command = Command::new(&self.program);
        command
            .args(&self.args)
            .current_dir(&self.cwd)
            .env_clear()
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // Its own group, so that killing it reaches what it started (npx, sh -c …).
            .process_group(0);
        for name in PASSED_ENV {
            if let Some(value) = std::env::var_os(name) {
                command.env(name, value);
            }
        }
        command.envs(self.env.iter().map(|(name, value)| (name, value)));
        let mut child = command.spawn()?;
        let pipes = (child.stdin.take(), child.stdout.take(), child.stderr.take());
        let guard = ProcessGroupGuard { child: Some(child) };
        let (Some(stdin), Some(stdout), Some(stderr)) = pipes else {
            return Err(std::io::Error::other(
                "the program's pipes were not created",
            ));
        };
        Ok(HostProcess {
            stdin: stdin.into(),
            stdout: stdout.into(),
            stderr: stderr.into(),
            guard,
        })
    }

    /// The command line, for messages.
    pub fn describe(&self) -> String {
        std::iter::once(self.program.as_str())
            .chain(self.args.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

impl ProcessGroupGuard {
    /// The group's id (the program's pid).
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }
}

impl Drop for ProcessGroupGuard {
    fn drop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        if let Ok(group) = libc::pid_t::try_from(child.id()) {
            // SAFETY: killpg takes plain integers; the group is the one `spawn` created for this
            // child, which is not reaped yet, so its id cannot have been reused. A group gone
            // already (ESRCH) is nothing to do.
            unsafe { libc::killpg(group, libc::SIGKILL) };
        }
        let _ = child.kill();
        // Reap it so that no zombie stays; after SIGKILL this is immediate, but a drop may run
        // on an async worker, so a slow exit is waited for on a thread of its own.
        match child.try_wait() {
            Ok(Some(_)) => {}
            _ => {
                std::thread::spawn(move || {
                    let _ = child.wait();
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_command_gives_its_trimmed_output_or_says_why_not() {
        assert_eq!(
            secret_from_command("printf ' sk-123\\n'").unwrap(),
            "sk-123"
        );
        let failed = secret_from_command("echo locked >&2; exit 3").unwrap_err();
        assert!(failed.contains("locked"), "{failed}");
        assert!(secret_from_command("true").unwrap_err().contains("nothing"));
    }

    #[test]
    fn an_unconfined_program_gets_a_clean_environment_and_dies_with_its_guard() {
        let command = HostCommand {
            program: "sh".to_owned(),
            args: vec![
                "-c".to_owned(),
                "echo \"$WRIGHT_TEST_SET:$(pwd):$(env | cut -d= -f1 | sort | tr '\\n' ' ')\"; \
                 sleep 30 & wait"
                    .to_owned(),
            ],
            cwd: std::env::temp_dir(),
            env: vec![("WRIGHT_TEST_SET".to_owned(), "given".to_owned())],
        };
        let process = command.spawn().unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(std::fs::File::from(process.stdout)),
            &mut line,
        )
        .unwrap();
        let mut fields = line.trim().splitn(3, ':');
        assert_eq!(fields.next(), Some("given"));
        // host path: the temporary folder, no workspace.
        let cwd = std::fs::canonicalize(std::env::temp_dir()).unwrap();
        assert_eq!(fields.next(), Some(cwd.to_str().unwrap()));
        // What the shell sets itself (PWD, SHLVL, _) aside, only the passed variables are there.
        for name in fields.next().unwrap().split_whitespace() {
            assert!(
                PASSED_ENV.contains(&name)
                    || ["WRIGHT_TEST_SET", "PWD", "SHLVL", "_", "OLDPWD"].contains(&name),
                "{name} reached the program: {line}"
            );
        }
        let group = libc::pid_t::try_from(process.guard.pid().unwrap()).unwrap();
        drop(process.guard);
        let deadline = Instant::now() + Duration::from_secs(5);
        // The sleeping grandchild is in the group too: signal 0 to the group fails once all are
        // gone.
        // SAFETY: killpg with signal 0 only checks whether the group exists.
        while unsafe { libc::killpg(group, 0) } == 0 {
            assert!(
                Instant::now() < deadline,
                "the process group outlived its guard"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
