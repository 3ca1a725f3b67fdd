//! What the core tells its driver and its reports: actions, finished bios, counters, and
//! the errors that end a core's work.

use schedhost_sdk::{Op, PrioClass};

use super::request::Bios;
use super::routing::CompletionSite;
use crate::policy::Fault;

/// What the driver must do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Send this request to the device on `hw_queue`; report it back with [`super::Core::complete`].
    /// It carries its bios in sector order, so a driver lays out the I/O without asking the
    /// core about the request again.
    Dispatch {
        /// Hardware queue (ring) to use.
        hw_queue: u32,
        /// Request id.
        id: u64,
        /// Operation.
        op: Op,
        /// First sector.
        sector: u64,
        /// Length in sectors.
        sectors: u32,
        /// Its I/O priority (its first bio's), which a real device is told.
        prio: (PrioClass, u8),
        /// Its bios with their submitters, in sector order.
        bios: Bios,
    },
    /// A bio finished.
    Complete(BioDone),
}

/// A finished bio, for its submitter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BioDone {
    /// The submitter's bio id.
    pub bio: u64,
    /// The submitter.
    pub ctx: u32,
    /// Operation.
    pub op: Op,
    /// Length in sectors.
    pub sectors: u32,
    /// 0 or a negative errno.
    pub status: i32,
    /// From submission to completion.
    pub latency_ns: u64,
    /// From submission to dispatch: the time the bio spent in the scheduler.
    pub sched_ns: u64,
    /// Where its completion work should run.
    pub site: CompletionSite,
}

/// Counters the reports show.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct CoreStats {
    /// Bios submitted.
    pub bios: u64,
    /// Requests created (bios that did not merge).
    pub requests: u64,
    /// Bios merged at the back of a request.
    pub back_merges: u64,
    /// Bios merged at the front of a request.
    pub front_merges: u64,
    /// Requests absorbed into a neighbour.
    pub coalesced: u64,
    /// Requests sent to the device.
    pub dispatched: u64,
    /// Requests completed.
    pub completed: u64,
    /// Merges the policy refused.
    pub merges_vetoed: u64,
    /// Calls into the policy.
    pub policy_calls: u64,
    /// Requests a busy device sent back to the policy.
    #[serde(skip_serializing_if = "is_zero")]
    pub requeued: u64,
    /// Plugs (blkparse's `P`).
    #[serde(skip_serializing_if = "is_zero")]
    pub plugs: u64,
    /// Unplugs by a submitter (`U`).
    #[serde(skip_serializing_if = "is_zero")]
    pub unplugs: u64,
    /// Unplugs by the plug's timer (`UT`).
    #[serde(skip_serializing_if = "is_zero")]
    pub timer_unplugs: u64,
    /// Unplugs because enough requests waited (legacy: `unplug_thresh`; per submitter: a
    /// full plug, which blkparse shows as `U`).
    #[serde(skip_serializing_if = "is_zero")]
    pub threshold_unplugs: u64,
    /// Time (ns) the policy held requests while the device had free driver tags: its
    /// choice (idling, a queue's slice, a depth it keeps), not the device's limit.
    /// Measured from one dispatch round to the next.
    #[serde(skip_serializing_if = "is_zero")]
    pub held_ns: u64,
}

impl CoreStats {
    /// Adds another core's counters (several devices in one run).
    pub fn add(&mut self, other: &CoreStats) {
        self.bios += other.bios;
        self.requests += other.requests;
        self.back_merges += other.back_merges;
        self.front_merges += other.front_merges;
        self.coalesced += other.coalesced;
        self.dispatched += other.dispatched;
        self.completed += other.completed;
        self.merges_vetoed += other.merges_vetoed;
        self.policy_calls += other.policy_calls;
        self.requeued += other.requeued;
        self.plugs += other.plugs;
        self.unplugs += other.unplugs;
        self.timer_unplugs += other.timer_unplugs;
        self.threshold_unplugs += other.threshold_unplugs;
        self.held_ns += other.held_ns;
    }
}

/// Counters that are zero in most runs stay out of the reports then (as before they existed).
fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Why the core could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The policy failed.
    #[error(transparent)]
    Fault(#[from] Fault),
    /// The policy refused the settings.
    #[error("{0}")]
    Rejected(String),
}

/// A driver reported something the core never asked for: a driver bug, not a policy fault.
#[derive(Debug, thiserror::Error)]
#[error("driver completed request {id:#x}, which is not on the device")]
pub struct UnknownCompletion {
    /// The id it reported.
    pub id: u64,
}
