//! What each submitter saw: I/O counts, bytes and completion latency per direction, in
//! HDR histograms (3 significant digits, like fio's own percentile resolution).

pub mod live;
pub mod meter;

use hdrhistogram::Histogram;
use schedhost_sdk::Op;

/// Reads and writes apart; flush and discard count with writes, as fio's trim/sync do not.
pub const DIRECTIONS: [&str; 2] = ["read", "write"];

/// Latency and volume for one direction of one submitter.
#[derive(Debug, Clone)]
pub struct OpStats {
    /// Completion latency, ns.
    pub clat: Histogram<u64>,
    /// Bytes completed.
    pub bytes: u64,
    /// Bios completed.
    pub ios: u64,
    /// Bios that completed with an error.
    pub errors: u64,
}

impl Default for OpStats {
    fn default() -> Self {
        Self {
            clat: new_histogram(),
            bytes: 0,
            ios: 0,
            errors: 0,
        }
    }
}

fn new_histogram() -> Histogram<u64> {
    // 1 ns to ~1 hour covers every latency a run can see; three digits as fio.
    Histogram::new_with_bounds(1, 3_600_000_000_000, 3)
        .unwrap_or_else(|_| Histogram::new(3).unwrap_or_else(|_| unreachable!()))
}

impl OpStats {
    /// Records one completed bio.
    pub fn record(&mut self, sectors: u32, latency_ns: u64, status: i32) {
        self.ios += 1;
        if status != 0 {
            self.errors += 1;
            return;
        }
        self.bytes += u64::from(sectors) * 512;
        self.clat.saturating_record(latency_ns.max(1));
    }

    /// Adds another submitter's numbers (group summaries).
    pub fn merge(&mut self, other: &OpStats) {
        self.bytes += other.bytes;
        self.ios += other.ios;
        self.errors += other.errors;
        // Same bounds on both sides: adding cannot fail.
        let _ = self.clat.add(&other.clat);
    }
}

/// Width of a timeline bucket: 10 ms, fine enough for a plot of a short simulated run.
pub const TIMELINE_BUCKET_NS: u64 = 10_000_000;

/// Per-submitter statistics.
#[derive(Debug, Clone, Default)]
pub struct CtxStats {
    /// Indexed by direction: 0 read, 1 write.
    pub dirs: [OpStats; 2],
    /// Bios completed per [`TIMELINE_BUCKET_NS`] of the run, both directions.
    pub timeline: Vec<u32>,
}

impl CtxStats {
    /// Counts a completion at `now_ns` into the timeline.
    pub fn count_at(&mut self, now_ns: u64) {
        let bucket = (now_ns / TIMELINE_BUCKET_NS) as usize;
        if bucket >= self.timeline.len() {
            self.timeline.resize(bucket + 1, 0);
        }
        self.timeline[bucket] = self.timeline[bucket].saturating_add(1);
    }

    /// The direction slot for `op`.
    pub fn dir_mut(&mut self, op: Op) -> &mut OpStats {
        &mut self.dirs[usize::from(op != Op::Read)]
    }
}
