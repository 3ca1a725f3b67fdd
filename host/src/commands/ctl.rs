//! `schedhost ctl`: talk to a running schedhost through its control socket.

use std::path::PathBuf;

use anyhow::{Result, bail};
use schedhost::control::{parse_request, request};

#[derive(Debug, clap::Args)]
pub struct CtlArgs {
    /// The socket the running schedhost was given with --control.
    #[arg(long, value_name = "SOCKET")]
    pub control: PathBuf,
    /// The request: `swap POLICY`, `set NAME=VALUE`, `get`, `status`, `stats`, `groups`, or
    /// `group NAME:KEY=VALUE,…` (change those keys of a group, in `--group`'s words; the
    /// others keep their values, and `KEY=max` unsets a limit).
    #[arg(required = true, num_args = 1..)]
    pub request: Vec<String>,
}

impl CtlArgs {
    pub fn execute(self) -> Result<()> {
        let line = self.request.join(" ");
        // Refuse a malformed request here, with the same message the server would give.
        parse_request(&line).map_err(anyhow::Error::msg)?;
        let reply = request(&self.control, &line)?;
        println!("{reply:#}");
        if reply["ok"] != true {
            bail!(
                "{}",
                reply["error"].as_str().unwrap_or("the request failed")
            );
        }
        Ok(())
    }
}
