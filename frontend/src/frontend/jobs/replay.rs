//! Replaying a trace: one submitter per recorded stream issues that stream's I/Os at their
//! recorded times (scaled), or as fast as its depth allows (`--no-stall`).

use std::sync::Arc;

use super::job::{Direction, JobSpec, Pattern};
use super::stream::{Pacing, ReplaySpec};
use crate::frontend::replay::{Trace, TraceIo};
use crate::input::Location;

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
    // Each stream's I/Os, in one pass over the trace (a trace may have thousands of streams).
    let mut per_stream: Vec<Vec<TraceIo>> = vec![Vec::new(); trace.streams.len()];
    for io in &trace.ios {
        if let Some(stream) = per_stream.get_mut(io.stream as usize) {
            stream.push(*io);
        }
    }
    trace
        .streams
        .iter()
        .zip(per_stream)
        .map(|(name, ios)| {
            let ios: Arc<[TraceIo]> = ios.into();
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
