//! Running counters per ctx, kept by the core while live stats or metrics are on: bios and
//! bytes per direction, errors, completion latency in fixed buckets (for Prometheus), and a
//! histogram the live view empties at every line (for its p99).

use schedhost_sdk::Op;

use super::Latencies;
use crate::core::BioDone;

/// Upper bounds of the latency buckets, ns: 25 µs to 2.5 s in 1-2.5-5 steps; one more bucket
/// counts everything slower.
pub const BUCKET_BOUNDS_NS: [u64; 16] = [
    25_000,
    50_000,
    100_000,
    250_000,
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    25_000_000,
    50_000_000,
    100_000_000,
    250_000_000,
    500_000_000,
    1_000_000_000,
    2_500_000_000,
];

/// One ctx's counters.
#[derive(Debug, Clone, Default)]
pub struct CtxMeter {
    /// Bios completed without error: [read, write] (flush and discard count as writes).
    pub ios: [u64; 2],
    /// Bytes of those bios.
    pub bytes: [u64; 2],
    /// Bios completed with an error.
    pub errors: u64,
    /// Bios per latency bucket (not cumulative), [read, write]; the last is above every
    /// bound. Errors count where their direction's latency would.
    pub buckets: [[u64; BUCKET_BOUNDS_NS.len() + 1]; 2],
    /// Sum of all latencies, ns, [read, write].
    pub latency_sum_ns: [u64; 2],
    /// Latencies since the live view last took them.
    pub recent: Latencies,
}

impl CtxMeter {
    /// Bios completed, errors included.
    pub fn completed(&self) -> u64 {
        self.ios[0] + self.ios[1] + self.errors
    }
}

/// Counters for every ctx seen so far, indexed by ctx.
#[derive(Debug, Clone, Default)]
pub struct Meter {
    /// Per ctx.
    pub ctxs: Vec<CtxMeter>,
}

impl Meter {
    /// Counts a bio the core reports finished.
    pub fn record_done(&mut self, done: &BioDone) {
        self.record(
            done.ctx,
            done.op,
            done.sectors,
            done.latency_ns,
            done.status,
        );
    }

    /// Counts one finished bio.
    pub fn record(&mut self, ctx: u32, op: Op, sectors: u32, latency_ns: u64, status: i32) {
        let i = ctx as usize;
        if i >= self.ctxs.len() {
            self.ctxs.resize_with(i + 1, CtxMeter::default);
        }
        let m = &mut self.ctxs[i];
        let dir = usize::from(op != Op::Read);
        m.latency_sum_ns[dir] = m.latency_sum_ns[dir].saturating_add(latency_ns);
        let bucket = BUCKET_BOUNDS_NS.partition_point(|&b| b < latency_ns);
        m.buckets[dir][bucket] += 1;
        m.recent.record(latency_ns.max(1));
        if status != 0 {
            m.errors += 1;
            return;
        }
        m.ios[dir] += 1;
        m.bytes[dir] += u64::from(sectors) * 512;
    }
}

impl Meter {
    /// Adds `other`'s counters (another device's), ctx by ctx.
    pub fn absorb(&mut self, other: &Meter) {
        if other.ctxs.len() > self.ctxs.len() {
            self.ctxs.resize_with(other.ctxs.len(), CtxMeter::default);
        }
        for (mine, theirs) in self.ctxs.iter_mut().zip(&other.ctxs) {
            for d in 0..2 {
                mine.ios[d] += theirs.ios[d];
                mine.bytes[d] += theirs.bytes[d];
            }
            mine.errors += theirs.errors;
            for d in 0..2 {
                for (a, b) in mine.buckets[d].iter_mut().zip(&theirs.buckets[d]) {
                    *a += b;
                }
                mine.latency_sum_ns[d] =
                    mine.latency_sum_ns[d].saturating_add(theirs.latency_sum_ns[d]);
            }
            mine.recent.add(&theirs.recent);
        }
    }

    /// Empties every ctx's recent latencies (the live view took them).
    pub fn clear_recent(&mut self) {
        for c in &mut self.ctxs {
            c.recent = Latencies::default();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bios_land_in_their_ctx_direction_and_latency_bucket() {
        let mut m = Meter::default();
        m.record(2, Op::Read, 8, 30_000, 0);
        m.record(2, Op::Write, 16, 25_000, 0);
        m.record(2, Op::Write, 16, 3_000_000_000, -5);
        assert_eq!(m.ctxs.len(), 3);
        let c = &m.ctxs[2];
        assert_eq!((c.ios, c.bytes, c.errors), ([1, 1], [4096, 8192], 1));
        assert_eq!(c.buckets[1][0], 1, "25 µs is within the first bound");
        assert_eq!(c.buckets[0][1], 1, "the read is in the read histogram");
        assert_eq!(c.buckets[1][BUCKET_BOUNDS_NS.len()], 1, "above every bound");
        assert_eq!(c.latency_sum_ns, [30_000, 3_000_025_000]);
        assert_eq!(c.completed(), 3);
        assert_eq!(c.recent.histogram().len(), 3);
    }
}
