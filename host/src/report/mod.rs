//! Reports of a finished run: fio's text summary per job and per group, and JSON in fio's
//! shape (`jobs[].read|write.{iops, bw, io_bytes, total_ios, clat_ns{…}}`) plus a `schedhost`
//! section. Both come from the same [`Summary`], so they always agree.

mod json;
mod text;

use crate::frontend::jobs::JobSpec;
use crate::frontend::outcome::Outcome;
pub use crate::frontend::outcome::RealDetails;
use crate::observe::stats::OpStats;

pub use json::{to_json, to_json_plus};
pub use text::to_text;

/// fio's default percentile list.
pub const PERCENTILES: [f64; 17] = [
    1.0, 5.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 95.0, 99.0, 99.5, 99.9, 99.95,
    99.99,
];

/// How the run was set up, for the report's header.
#[derive(Debug, Clone)]
pub struct RunInfo {
    /// How the policy was given (`target/policies/noop.wasm`, `native:noop`).
    pub policy_source: String,
    /// How the device was given (`sim:hdd`, a spec file).
    pub device: String,
    /// The device model's name.
    pub device_model: String,
    /// The seed.
    pub seed: u64,
    /// Tunables set on the command line.
    pub settings: Vec<(String, i64)>,
    /// Set for runs on real devices: the clock was the wall clock.
    pub real: Option<RealDetails>,
    /// Set for replays.
    pub trace: Option<TraceSummary>,
}

/// The replayed trace, for the report.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TraceSummary {
    /// Its file.
    pub path: String,
    /// Its format.
    pub format: crate::frontend::replay::Format,
    /// I/Os in it.
    pub ios: usize,
    /// Streams (processes or files), each a submitter.
    pub streams: usize,
    /// blkparse: the merges and plugs the traced kernel made.
    pub recorded: Option<crate::frontend::replay::TracedCounts>,
}

/// A run, ready to print.
#[derive(Debug)]
pub struct Summary<'a> {
    /// The run's setup.
    pub info: &'a RunInfo,
    /// The jobs as parsed.
    pub jobs: &'a [JobSpec],
    /// What happened.
    pub outcome: &'a Outcome,
}

/// One direction's numbers over a time span.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rates {
    /// I/Os per second.
    pub iops: f64,
    /// Bytes per second.
    pub bw_bytes: f64,
    /// Span in ms.
    pub runtime_ms: u64,
}

/// IOPS and bandwidth of `op` over `runtime_ns`.
pub fn rates(op: &OpStats, runtime_ns: u64) -> Rates {
    let secs = runtime_ns as f64 / 1e9;
    let (iops, bw_bytes) = if secs > 0.0 {
        (op.ios as f64 / secs, op.bytes as f64 / secs)
    } else {
        (0.0, 0.0)
    };
    Rates {
        iops,
        bw_bytes,
        runtime_ms: runtime_ns.div_ceil(1_000_000),
    }
}

/// What one entry of a report covers: one submitter, or a whole group under fio's
/// `group_reporting`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The group.
    pub group: u32,
    /// Its submitters, by index, in ctx order.
    pub members: Vec<usize>,
}

impl Summary<'_> {
    /// The report's entries: a submitter each, except in a group where a job asked for
    /// `group_reporting`, which is one entry of all its submitters.
    pub fn entries(&self) -> Vec<Entry> {
        let mut entries = Vec::new();
        for (group, members) in self.groups() {
            let together = members.iter().any(|&i| {
                let job = self.outcome.submitters[i].placement.job;
                self.jobs[job].group_reporting
            });
            if together {
                entries.push(Entry { group, members });
            } else {
                entries.extend(members.into_iter().map(|i| Entry {
                    group,
                    members: vec![i],
                }));
            }
        }
        entries
    }

    /// An entry's active span: from its first start to its last finish.
    pub fn entry_runtime_ns(&self, entry: &Entry) -> u64 {
        let (start, end) = entry.members.iter().fold((u64::MAX, 0), |(lo, hi), &i| {
            let s = &self.outcome.submitters[i];
            (lo.min(s.started_ns), hi.max(s.finished_ns))
        });
        end.saturating_sub(start)
    }

    /// (group id, submitter indices) in group order.
    pub fn groups(&self) -> Vec<(u32, Vec<usize>)> {
        let mut groups: Vec<(u32, Vec<usize>)> = Vec::new();
        for (i, s) in self.outcome.submitters.iter().enumerate() {
            match groups.iter_mut().find(|(g, _)| *g == s.placement.group) {
                Some((_, members)) => members.push(i),
                None => groups.push((s.placement.group, vec![i])),
            }
        }
        groups
    }

    /// A submitter's active span.
    pub fn runtime_ns(&self, index: usize) -> u64 {
        let s = &self.outcome.submitters[index];
        s.finished_ns.saturating_sub(s.started_ns)
    }
}
