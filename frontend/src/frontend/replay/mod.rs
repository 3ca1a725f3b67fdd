//! Recorded workloads: blkparse text output and fio iologs (versions 2 and 3), parsed into
//! timed I/Os per stream (a process, or a file of the iolog). Sans-IO: text in, I/Os or an
//! error naming the file and line out. [`crate::frontend::jobs`] turns each stream into a
//! submitter that issues its I/Os at the recorded times.

mod blkparse;
mod iolog;

use schedhost_sdk::Op;

use crate::input::Location;

/// A trace format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Format {
    /// `blkparse` text output; Q (queued) events become I/Os.
    Blkparse,
    /// `fio version 2 iolog`: no timestamps, `wait` lines in microseconds.
    IologV2,
    /// `fio version 3 iolog`: a timestamp in microseconds on every line.
    IologV3,
}

impl Format {
    /// Its name on the command line (`--trace-format`) and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Format::Blkparse => "blkparse",
            Format::IologV2 => "iolog-v2",
            Format::IologV3 => "iolog-v3",
        }
    }
}

/// One recorded I/O.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceIo {
    /// When it was issued, from the start of the trace.
    pub at_ns: u64,
    /// Which stream (index into [`Trace::streams`]) issued it.
    pub stream: u32,
    /// What it does.
    pub op: Op,
    /// First 512-byte sector.
    pub sector: u64,
    /// Length in sectors (0 for a flush).
    pub sectors: u32,
    /// The issuer waited for it.
    pub sync: bool,
}

/// A parsed trace.
#[derive(Debug, Clone, PartialEq)]
pub struct Trace {
    /// Its format.
    pub format: Format,
    /// Every I/O, in issue order.
    pub ios: Vec<TraceIo>,
    /// Names of the streams (`pid 18615 (java)`, or an iolog's file names).
    pub streams: Vec<String>,
    /// blkparse only: the merges and plugs the traced kernel made.
    pub recorded: Option<TracedCounts>,
}

/// What the traced kernel's block layer did, counted from blkparse's events, to put beside
/// what a replay does.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct TracedCounts {
    /// Bios merged at the back of a request (`M`).
    pub back_merges: u64,
    /// Bios merged at the front of a request (`F`).
    pub front_merges: u64,
    /// Plugs (`P`).
    pub plugs: u64,
    /// Unplugs by a submitter (`U`).
    pub unplugs: u64,
    /// Unplugs by the plug's timer (`UT`).
    pub timer_unplugs: u64,
}

/// What is wrong with a trace, and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{location}: {message}")]
pub struct TraceError {
    /// The file and line.
    pub location: Location,
    /// What is wrong.
    pub message: String,
}

/// Parses `text` (read from `source`) as `format`, or detects the format: an iolog starts
/// with its version line, anything else is taken for blkparse output.
///
/// # Errors
/// The first bad line, with its number; a trace without a single I/O.
pub fn parse(source: &str, text: &str, format: Option<Format>) -> Result<Trace, TraceError> {
    let format = format.unwrap_or_else(|| detect(text));
    let trace = match format {
        Format::Blkparse => blkparse::parse(source, text)?,
        Format::IologV2 | Format::IologV3 => iolog::parse(source, text, format)?,
    };
    if trace.ios.is_empty() {
        return Err(TraceError {
            location: Location {
                source: source.to_owned(),
                line: 0,
            },
            message: match format {
                Format::Blkparse => "no Q (queued) events with data: nothing to replay".into(),
                _ => "no read, write, trim or sync lines: nothing to replay".into(),
            },
        });
    }
    Ok(trace)
}

/// The format `text` is in.
pub fn detect(text: &str) -> Format {
    let first = text.lines().next().unwrap_or_default().trim();
    if first.starts_with("fio version 3 iolog") {
        Format::IologV3
    } else if first.starts_with("fio version 2 iolog") {
        Format::IologV2
    } else {
        Format::Blkparse
    }
}

/// A helper for the parsers: an error at line `line` (1-based) of `source`.
fn error(source: &str, line: usize, message: String) -> TraceError {
    TraceError {
        location: Location {
            source: source.to_owned(),
            line,
        },
        message,
    }
}

use std::collections::HashMap;

use crate::core::{MAX_DURATION_NS, MAX_SECTOR, MAX_SUBMITTERS};

/// Checks that an I/O at `at_ns` from the trace's start lies within the longest time a
/// workload may span ([`MAX_DURATION_NS`], 366 days), so replay times cannot overflow.
fn check_time(at_ns: Option<u64>) -> Result<u64, String> {
    at_ns.filter(|&t| t <= MAX_DURATION_NS).ok_or_else(|| {
        "the I/O lies more than 366 days after the trace's start, the longest a replay may span"
            .to_owned()
    })
}

/// Checks that an I/O of `sectors` at `sector` lies within [`MAX_SECTOR`].
fn check_range(sector: u64, sectors: u32) -> Result<(), String> {
    match sector.checked_add(u64::from(sectors)) {
        Some(end) if end <= MAX_SECTOR => Ok(()),
        _ => Err(format!(
            "sector {sector} + {sectors} lies beyond 2^54 sectors, past any device"
        )),
    }
}

/// A trace's streams by name. Each becomes a submitter when replayed, so there are at most
/// [`MAX_SUBMITTERS`]; they are looked up by hash, so a trace of many streams parses in
/// linear time.
#[derive(Debug, Default)]
struct Streams {
    names: Vec<String>,
    index: HashMap<String, u32>,
}

impl Streams {
    /// The index of stream `name`, added if new.
    fn index(&mut self, name: &str) -> Result<u32, String> {
        if let Some(&i) = self.index.get(name) {
            return Ok(i);
        }
        if self.names.len() >= MAX_SUBMITTERS {
            return Err(format!(
                "more than {MAX_SUBMITTERS} streams (processes or files): a replay runs one submitter each"
            ));
        }
        let i = self.names.len() as u32;
        self.names.push(name.to_owned());
        self.index.insert(name.to_owned(), i);
        Ok(i)
    }

    fn into_names(self) -> Vec<String> {
        self.names
    }
}
