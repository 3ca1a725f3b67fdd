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
        // One event at a time: a recording of any size is printed in constant memory.
        let (header, mut reader) = file::Reader::open(&self.file)?;
        let stdout = std::io::stdout();
        let mut out = BufWriter::new(stdout.lock());
        let mut seq = 0u64;
        let written = loop {
            let Some(event) = reader.next_event()? else {
                break writeln!(
                    out,
                    "# {seq} events on {} under {}",
                    header.device, header.policy
                )
                .and_then(|()| out.flush());
            };
            seq += 1;
            if let Err(e) = writeln!(out, "{}", text::line(seq, &event)) {
                break Err(e);
            }
        };
        match written {
            // `schedhost events F | head` closes the pipe early: not an error.
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
            other => other.context("writing the events"),
        }
    }
}
