//! What each submitter saw: I/O counts, bytes, completion latency and time in the scheduler
//! per direction ([`Latencies`]: 3 significant digits, like fio's own percentile
//! resolution).

mod latencies;
pub mod live;
pub mod logs;
pub mod meter;

pub use latencies::Latencies;
use schedhost_sdk::Op;

/// Reads and writes apart; flush and discard count with writes, as fio's trim/sync do not.
pub const DIRECTIONS: [&str; 2] = ["read", "write"];

/// Latency and volume for one direction of one submitter.
#[derive(Debug, Clone, Default)]
pub struct OpStats {
    /// Completion latency, ns.
    pub clat: Latencies,
    /// Submission to dispatch, ns: what the policy alone adds (blktrace's Q2D).
    pub sched: Latencies,
    /// Bytes completed.
    pub bytes: u64,
    /// Bios completed.
    pub ios: u64,
    /// Bios that completed with an error.
    pub errors: u64,
}

impl OpStats {
    /// Records one completed bio: its latency and, of that, its time in the scheduler.
    pub fn record(&mut self, sectors: u32, latency_ns: u64, sched_ns: u64, status: i32) {
        self.ios += 1;
        if status != 0 {
            self.errors += 1;
            return;
        }
        self.bytes += u64::from(sectors) * 512;
        // 0 is a value like any other (a bio dispatched as it arrived): the report says 0,
        // as the text does.
        self.clat.record(latency_ns);
        self.sched.record(sched_ns);
    }

    /// Adds another submitter's numbers (group summaries).
    pub fn merge(&mut self, other: &OpStats) {
        self.bytes += other.bytes;
        self.ios += other.ios;
        self.errors += other.errors;
        self.clat.add(&other.clat);
        self.sched.add(&other.sched);
    }
}

/// Width of a timeline bucket: 10 ms, fine enough for a plot of a short simulated run.
pub const TIMELINE_BUCKET_NS: u64 = 10_000_000;

/// Most buckets a timeline keeps (256 KiB per submitter): a longer run doubles the bucket
/// width, folding neighbours together, so a timeline's memory does not grow with the run's
/// length (a think time of hours once asked for terabytes).
pub const TIMELINE_MAX_BUCKETS: usize = 1 << 16;

/// fio's sampling interval for bandwidth and IOPS (`bw_avg_time`, `iops_avg_time`).
pub const SAMPLE_NS: u64 = 500_000_000;

/// One direction's bandwidth and IOPS, sampled as fio does: what each [`SAMPLE_NS`] window
/// since the end of the ramp completed, summarised as it goes (a sample is not kept, so a
/// long run costs no memory).
#[derive(Debug, Clone, Default)]
pub struct Windows {
    /// The window being filled, counted from the ramp's end.
    current: u64,
    bytes: u64,
    ios: u64,
    /// Closed windows: bytes/s and ios/s.
    bw: Running,
    iops: Running,
}

/// Count, least, most, sum and sum of squares of a series.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Running {
    /// Samples.
    pub n: u64,
    /// Least (0 without samples).
    pub min: f64,
    /// Most.
    pub max: f64,
    sum: f64,
    sum_sq: f64,
}

impl Running {
    /// Adds `count` samples of `value`.
    fn add(&mut self, value: f64, count: u64) {
        if count == 0 {
            return;
        }
        if self.n == 0 {
            (self.min, self.max) = (value, value);
        } else {
            self.min = self.min.min(value);
            self.max = self.max.max(value);
        }
        self.n += count;
        let c = count as f64;
        self.sum += value * c;
        self.sum_sq += value * value * c;
    }

    /// The mean.
    pub fn mean(&self) -> f64 {
        if self.n == 0 {
            0.0
        } else {
            self.sum / self.n as f64
        }
    }

    /// The sample standard deviation (n − 1), as fio's.
    pub fn stddev(&self) -> f64 {
        if self.n < 2 {
            return 0.0;
        }
        let n = self.n as f64;
        ((self.sum_sq - self.sum * self.sum / n) / (n - 1.0))
            .max(0.0)
            .sqrt()
    }
}

impl Running {
    /// Another job's series added to this one, as fio's group reporting adds its members'
    /// bandwidth: least, most and mean add (the jobs ran side by side); the deviation is
    /// that of a sum of independent series.
    pub fn plus(&self, other: &Running) -> Running {
        if self.n == 0 {
            return *other;
        }
        if other.n == 0 {
            return *self;
        }
        let n = self.n.max(other.n);
        let mean = self.mean() + other.mean();
        let var = self.stddev().powi(2) + other.stddev().powi(2);
        let nf = n as f64;
        Running {
            n,
            min: self.min + other.min,
            max: self.max + other.max,
            sum: mean * nf,
            // Σx² = (n − 1)·var + n·mean², so stddev() gives back `var`.
            sum_sq: (nf - 1.0) * var + nf * mean * mean,
        }
    }
}

impl Windows {
    /// Counts `bytes` completed `since_ns` after the ramp's end.
    fn record(&mut self, since_ns: u64, bytes: u64) {
        self.close_until(since_ns / SAMPLE_NS);
        self.bytes += bytes;
        self.ios += 1;
    }

    /// Closes every window before `window`: the one being filled with what it holds, the
    /// ones after it with nothing (a direction that went quiet samples 0, as fio's).
    fn close_until(&mut self, window: u64) {
        if window <= self.current {
            return;
        }
        let per_s = 1e9 / SAMPLE_NS as f64;
        self.bw.add(self.bytes as f64 * per_s, 1);
        self.iops.add(self.ios as f64 * per_s, 1);
        let empty = window - self.current - 1;
        self.bw.add(0.0, empty);
        self.iops.add(0.0, empty);
        (self.current, self.bytes, self.ios) = (window, 0, 0);
    }

    /// Bandwidth (bytes/s) and IOPS over the windows that closed by `until_ns` after the
    /// ramp's end (the run's end: a last, partial window is not a sample, as in fio).
    pub fn summary(&self, until_ns: u64) -> (Running, Running) {
        let mut closed = self.clone();
        closed.close_until(until_ns / SAMPLE_NS);
        (closed.bw, closed.iops)
    }
}

/// Per-submitter statistics.
#[derive(Debug, Clone)]
pub struct CtxStats {
    /// Indexed by direction: 0 read, 1 write.
    pub dirs: [OpStats; 2],
    /// Bandwidth and IOPS samples per direction.
    pub windows: [Windows; 2],
    /// Bios completed per `bucket_ns` of the run, both directions.
    pub timeline: Vec<u32>,
    /// Width of a timeline bucket: [`TIMELINE_BUCKET_NS`], doubled each time the run
    /// outgrew [`TIMELINE_MAX_BUCKETS`].
    pub bucket_ns: u64,
    /// Bios completing before this are not counted (the end of fio's ramp_time).
    pub measure_from_ns: u64,
    /// The errno of the first bio that failed (fio's `err=`), 0 while none has.
    pub first_error: i32,
    /// fio's per-job logs, when the job asked for them.
    pub logs: Option<Box<logs::JobLogs>>,
}

impl Default for CtxStats {
    fn default() -> Self {
        Self {
            dirs: Default::default(),
            windows: Default::default(),
            timeline: Vec::new(),
            bucket_ns: TIMELINE_BUCKET_NS,
            measure_from_ns: 0,
            first_error: 0,
            logs: None,
        }
    }
}

impl CtxStats {
    /// Counts a bio that completed at `now_ns`, unless that was during the ramp. As fio
    /// resets its statistics when the ramp ends, a bio submitted before and completed after
    /// counts with its whole latency: a starved request is never hidden.
    pub fn record(
        &mut self,
        now_ns: u64,
        op: Op,
        sectors: u32,
        (latency_ns, sched_ns): (u64, u64),
        status: i32,
    ) {
        if status != 0 && self.first_error == 0 {
            self.first_error = status.saturating_neg();
        }
        if now_ns < self.measure_from_ns {
            return;
        }
        self.dir_mut(op)
            .record(sectors, latency_ns, sched_ns, status);
        if status == 0 {
            let since = now_ns - self.measure_from_ns;
            let (dir, bytes) = (usize::from(op != Op::Read), u64::from(sectors) * 512);
            self.windows[dir].record(since, bytes);
            if let Some(logs) = &mut self.logs {
                logs.record(now_ns, dir, bytes, latency_ns);
            }
        }
        self.count_at(now_ns);
    }

    /// Counts a completion at `now_ns` into the timeline, widening the buckets first if
    /// `now_ns` lies past the last one the timeline may keep.
    fn count_at(&mut self, now_ns: u64) {
        while now_ns / self.bucket_ns >= TIMELINE_MAX_BUCKETS as u64 {
            self.widen();
        }
        let bucket = (now_ns / self.bucket_ns) as usize;
        if bucket >= self.timeline.len() {
            self.timeline.resize(bucket + 1, 0);
        }
        self.timeline[bucket] = self.timeline[bucket].saturating_add(1);
    }

    /// Doubles the bucket width, adding neighbouring buckets together.
    fn widen(&mut self) {
        let folded = self
            .timeline
            .chunks(2)
            .map(|pair| pair.iter().fold(0u32, |sum, &n| sum.saturating_add(n)))
            .collect();
        self.timeline = folded;
        self.bucket_ns = self.bucket_ns.saturating_mul(2);
    }

    /// The direction slot for `op`.
    fn dir_mut(&mut self, op: Op) -> &mut OpStats {
        &mut self.dirs[usize::from(op != Op::Read)]
    }
}

/// 12345.6 → "12.3k", as fio prints IOPS.
pub fn short_count(n: f64) -> String {
    if n >= 1e6 {
        format!("{:.2}M", n / 1e6)
    } else if n >= 1e3 {
        format!("{:.1}k", n / 1e3)
    } else {
        format!("{n:.0}")
    }
}

#[cfg(test)]
mod timeline_tests {
    use super::*;

    #[test]
    fn a_completion_hours_away_widens_the_timeline_instead_of_growing_it() {
        let mut stats = CtxStats::default();
        stats.record(5_000_000, Op::Read, 8, (1, 0), 0);
        stats.record(15_000_000, Op::Read, 8, (1, 0), 0);
        assert_eq!(
            (stats.bucket_ns, stats.timeline.as_slice()),
            (TIMELINE_BUCKET_NS, &[1, 1][..])
        );
        // 5 000 000 hours of think time later.
        stats.record(18_000_000_000_000_000_000, Op::Read, 8, (1, 0), 0);
        assert!(stats.timeline.len() <= TIMELINE_MAX_BUCKETS);
        assert_eq!(stats.timeline.iter().map(|&n| u64::from(n)).sum::<u64>(), 3);
        assert_eq!(
            stats.timeline[0], 2,
            "the early completions fold into the first bucket"
        );
        assert_eq!(stats.bucket_ns % TIMELINE_BUCKET_NS, 0);
    }

    #[test]
    fn bandwidth_is_sampled_per_half_second_with_quiet_windows_as_zero() {
        let mut stats = CtxStats {
            measure_from_ns: 1_000_000_000,
            ..CtxStats::default()
        };
        // Window 0: two 4 KiB reads; window 1: none; window 2: one; window 3 is cut short.
        for at in [1_100_000_000, 1_200_000_000, 2_100_000_000, 2_600_000_000] {
            stats.record(at, Op::Read, 8, (1, 0), 0);
        }
        let (bw, iops) = stats.windows[0].summary(1_700_000_000);
        assert_eq!(
            iops.n, 3,
            "three whole windows; the last partial one is not a sample"
        );
        assert_eq!((iops.min, iops.max), (0.0, 4.0));
        assert!((iops.mean() - 2.0).abs() < 1e-9);
        assert_eq!(bw.max, 8192.0 * 2.0);
        assert!(
            (iops.stddev() - 2.0).abs() < 1e-9,
            "sample stddev of 4, 0, 2"
        );
        let (_, writes) = stats.windows[1].summary(1_700_000_000);
        assert_eq!(
            (writes.n, writes.max),
            (3, 0.0),
            "a direction unused samples 0"
        );
    }
}
