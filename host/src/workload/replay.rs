//! Replaying a trace: one submitter per recorded stream issues that stream's I/Os at their
//! recorded times (scaled), or as fast as its depth allows (`--no-stall`).

use std::sync::Arc;

use schedhost_sdk::PrioClass;

use super::job::{Direction, JobSpec, Location, Pattern};
use crate::core::Bio;
use crate::trace::{Trace, TraceIo};

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

/// One job per stream of `trace`, named after the stream, sharing the device from sector 0
/// (the trace's sectors are absolute).
pub fn jobs_for_trace(trace: &Trace, pacing: Pacing, source: &str) -> Vec<JobSpec> {
    let end = trace
        .ios
        .iter()
        .map(|io| (io.sector + u64::from(io.sectors)) * 512)
        .max()
        .unwrap_or(0)
        .max(4096);
    trace
        .streams
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let ios: Arc<[TraceIo]> = trace
                .ios
                .iter()
                .filter(|io| io.stream == i as u32)
                .copied()
                .collect();
            let mut job = JobSpec::for_replay(
                name,
                Location {
                    source: source.to_owned(),
                    line: 0,
                },
            );
            job.size = Some(end);
            job.filename = Some("trace".into());
            job.iodepth = pacing.depth.max(1);
            job.bs = typical_block(&ios);
            let reads = ios
                .iter()
                .filter(|io| io.op == schedhost_sdk::Op::Read)
                .count();
            job.pattern = Pattern::Random;
            job.direction = match reads {
                0 => Direction::Write,
                r if r == ios.len() => Direction::Read,
                _ => Direction::Mixed,
            };
            job.replay = Some(ReplaySpec { ios, pacing });
            job
        })
        .collect()
}

/// The most common I/O size of a stream, in bytes (for the report's `bs=` only: buffers
/// are sized by [`ReplaySpec::largest_io_bytes`]).
fn typical_block(ios: &[TraceIo]) -> u32 {
    let mut counts: Vec<(u32, usize)> = Vec::new();
    for io in ios.iter().filter(|io| io.sectors > 0) {
        match counts.iter_mut().find(|(s, _)| *s == io.sectors) {
            Some((_, n)) => *n += 1,
            None => counts.push((io.sectors, 1)),
        }
    }
    counts
        .into_iter()
        .max_by_key(|&(_, n)| n)
        .map_or(4096, |(s, _)| s.saturating_mul(512))
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

    /// True once every I/O was issued.
    pub fn exhausted(&self) -> bool {
        self.next >= self.spec.ios.len()
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
