//! What a finished run hands to the reports, whichever driver ran it.

use schedhost_sdk::Info;

use crate::backend::sim::Geometry;
use crate::core::{Config, CoreStats, Ejection};
use crate::engine::{SetRecord, SwapRecord};
use crate::frontend::jobs::Placement;
use crate::observe::stats::CtxStats;

/// Everything a report needs from a finished run.
#[derive(Debug)]
pub struct Outcome {
    /// Per submitter, indexed by ctx.
    pub stats: Vec<CtxStats>,
    /// Per submitter: where it ran, when it started and finished, bios issued.
    pub submitters: Vec<SubmitterSummary>,
    /// The core's counters.
    pub core: CoreStats,
    /// The device's geometry.
    pub geometry: Geometry,
    /// The queue configuration used.
    pub config: Config,
    /// The policy's description.
    pub policy: Info,
    /// Time at the end: virtual in a simulation, since the start on a real device.
    pub end_ns: u64,
    /// Blocks whose data was checked (`verify=crc32c` on a real device).
    pub verified_blocks: u64,
    /// Policy faults and what the host did about them.
    pub ejections: Vec<Ejection>,
    /// Hot swaps, done or refused.
    pub swaps: Vec<SwapRecord>,
    /// Tunable changes through the control socket, done or refused.
    pub sets: Vec<SetRecord>,
    /// Limited groups (`--group`): their limits and what they did.
    pub groups: Vec<crate::core::GroupReport>,
    /// Per-request events, when recording was asked for (`--trace-events`).
    pub events: Vec<crate::observe::events::Event>,
}

impl SubmitterSummary {
    /// `s` at the end of a run that ended at `end_ns`.
    pub fn of(s: &crate::frontend::jobs::Submitter, end_ns: u64) -> Self {
        Self {
            ctx: s.ctx,
            placement: s.placement.clone(),
            // Rates count from the end of the ramp, as fio's do.
            started_ns: s.started_ns.map_or(0, |_| s.measured_from_ns()),
            finished_ns: s.finished_ns.unwrap_or(end_ns),
            issued: s.issued,
            completed: s.completed,
        }
    }
}

/// One submitter's life.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SubmitterSummary {
    /// Its ctx.
    pub ctx: u32,
    /// Where and when.
    pub placement: Placement,
    /// Start, on the run's clock.
    pub started_ns: u64,
    /// End, on the run's clock.
    pub finished_ns: u64,
    /// Bios issued.
    pub issued: u64,
    /// Bios completed.
    pub completed: u64,
}

/// One device of a real run.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TargetSummary {
    /// As given.
    pub path: String,
    /// `File` or `BlockDevice`.
    pub kind: &'static str,
    /// Bytes.
    pub capacity: u64,
    /// This run created it.
    pub created: bool,
    /// Its queue's `rotational` attribute (the block device's under a file).
    pub rotational: bool,
    /// Its scheduler's counters.
    pub core: CoreStats,
}

/// What a run on real devices adds to the report.
#[derive(Debug, Clone)]
pub struct RealDetails {
    /// The devices.
    pub targets: Vec<TargetSummary>,
    /// The buffer arena was registered with the ring.
    pub fixed_buffers: bool,
    /// How many times the ring found I/O finished (see [`RealOutcome`]).
    ///
    /// [`RealOutcome`]: crate::frontend::jobs::real::RealOutcome
    pub completion_instants: u64,
}
