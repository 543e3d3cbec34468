//! A stdio server run as the user, outside the sandbox (`sandbox = false`, or the command a
//! user gives `wright mcp check`): the sandbox's host spawn as a [`Launch`].

use crate::sandbox::host::HostCommand;

use super::{Launch, Pipes};

/// Starts `command` unconfined: a clean environment, its own process group, killed with it.
pub struct Unconfined(pub HostCommand);

impl Launch for Unconfined {
    fn launch(&self) -> std::io::Result<Pipes> {
        let process = self.0.spawn()?;
        Ok(Pipes {
            stdin: process.stdin,
            stdout: process.stdout,
            stderr: Some(process.stderr),
            guard: Box::new(process.guard),
        })
    }

    fn describe(&self) -> String {
        format!("`{}`, unconfined", self.0.describe())
    }
}
