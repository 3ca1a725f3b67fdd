//! One recorded stream as a submitter replays it: its I/Os, how they are paced, and the
//! position of the replay.

use std::sync::Arc;

use schedhost_sdk::PrioClass;

use crate::core::Bio;
use crate::frontend::replay::TraceIo;

/// How a trace is replayed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pacing {
    /// Recorded gaps are multiplied by this (0.5 replays twice as fast).
    pub time_scale: f64,
    /// Ignore the recorded times: issue as soon as the stream's depth allows.
    pub no_stall: bool,
    /// I/Os a stream may have in flight (a trace recorded deeper waits for completions).
    pub depth: u32,
}

/// One stream's part of a trace, carried by its job.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplaySpec {
    /// The stream's I/Os, in order.
    pub ios: Arc<[TraceIo]>,
    /// How to pace them.
    pub pacing: Pacing,
}

impl ReplaySpec {
    /// The longest I/O of the stream, in bytes: what one of its buffers must hold.
    pub fn largest_io_bytes(&self) -> u64 {
        self.ios
            .iter()
            .map(|io| u64::from(io.sectors) * 512)
            .max()
            .unwrap_or(0)
    }
}

/// A stream being replayed.
#[derive(Debug)]
pub struct Replay {
    spec: ReplaySpec,
    next: usize,
}

impl Replay {
    /// The replay of `spec`, from its first I/O.
    pub fn new(spec: ReplaySpec) -> Self {
        Self { spec, next: 0 }
    }

    /// When the next I/O is due, for a replay started at `start_ns`.
    pub fn due_at(&self, start_ns: u64) -> Option<u64> {
        let io = self.spec.ios.get(self.next)?;
        if self.spec.pacing.no_stall {
            return Some(start_ns);
        }
        // `as` saturates a float past u64::MAX, and the sum saturates too.
        let scaled = (io.at_ns as f64 * self.spec.pacing.time_scale.max(0.0)) as u64;
        Some(start_ns.saturating_add(scaled))
    }

    /// The next I/O as a bio of `ctx`, with `id`.
    pub fn take(&mut self, ctx: u32, id: u64) -> Option<Bio> {
        let io = *self.spec.ios.get(self.next)?;
        self.next += 1;
        Some(Bio {
            id,
            ctx,
            op: io.op,
            sector: io.sector,
            sectors: io.sectors,
            sync: io.sync,
            prio_class: PrioClass::None,
            prio_level: 4,
        })
    }
}
