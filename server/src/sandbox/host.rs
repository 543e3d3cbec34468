//! The one command wright runs for itself outside the sandbox: the user's own key command
//! (`providers.*.api_key_command`, read only from the user's configuration and the editor's,
//! never from a workspace file), which must reach the user's password manager or keychain.
//! Bounded in time and output like any command, and its output never logged.

use std::io::Read;
use std::process::{Command, Stdio};
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
}
