//! `schedhost events FILE`: a `--trace-events` recording as blkparse-like text, which
//! `schedhost replay` reads back.

use std::io::{BufWriter, Write};
use std::path::PathBuf;

use anyhow::{Context, Result};
use schedhost::observe::events::{file, text};

#[derive(Debug, clap::Args)]
pub struct EventsArgs {
    /// A file written by `--trace-events`.
    pub file: PathBuf,
}

impl EventsArgs {
    pub fn execute(self) -> Result<()> {
        let (header, events) = file::read(&self.file)?;
        let stdout = std::io::stdout();
        let mut out = BufWriter::new(stdout.lock());
        let write = |out: &mut BufWriter<_>| -> std::io::Result<()> {
            for (seq, event) in events.iter().enumerate() {
                writeln!(out, "{}", text::line(seq as u64 + 1, event))?;
            }
            writeln!(
                out,
                "# {} events on {} under {}",
                events.len(),
                header.device,
                header.policy
            )?;
            out.flush()
        };
        match write(&mut out) {
            // `schedhost events F | head` closes the pipe early: not an error.
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
            other => other.context("writing the events"),
        }
    }
}
