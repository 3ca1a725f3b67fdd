//! What a compare cell shows, and how it is computed from a run's report.

use schedhost::frontend::outcome::Outcome;
use schedhost::observe::stats::OpStats;
use schedhost::report::rates;

/// What a cell shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Metric {
    /// Read IOPS summed over jobs.
    ReadIops,
    /// Write IOPS summed over jobs.
    WriteIops,
    /// Smallest read completion latency, ms.
    ReadMinLat,
    /// Largest read completion latency, ms.
    ReadMaxLat,
    /// 99th percentile of read completion latency over all jobs, ms.
    ReadP99Lat,
    /// Largest write completion latency, ms.
    WriteMaxLat,
    /// 99th percentile of write completion latency over all jobs, ms.
    WriteP99Lat,
    /// Longest a read waited in the scheduler (submission to dispatch), ms.
    ReadMaxSched,
    /// Longest a write waited in the scheduler (submission to dispatch), ms.
    WriteMaxSched,
    /// Read bandwidth summed over jobs, MiB/s.
    ReadBw,
    /// Write bandwidth summed over jobs, MiB/s.
    WriteBw,
    /// Mean read completion latency, ms.
    ReadMeanLat,
    /// Median read completion latency, ms.
    ReadP50Lat,
    /// 99.9th percentile of read completion latency, ms.
    ReadP999Lat,
    /// Mean write completion latency, ms.
    WriteMeanLat,
    /// 99th percentile of a read's time in the scheduler, ms.
    ReadP99Sched,
    /// Jain's fairness index over the submitters' IOPS: 1 when all get the same, 1/n when
    /// one gets everything.
    Fairness,
    /// The smallest submitter's share of all I/Os completed, percent.
    MinShare,
}

impl Metric {
    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Metric::ReadIops => "read-iops",
            Metric::WriteIops => "write-iops",
            Metric::ReadMinLat => "read-min-lat",
            Metric::ReadMaxLat => "read-max-lat",
            Metric::ReadP99Lat => "read-p99-lat",
            Metric::WriteMaxLat => "write-max-lat",
            Metric::WriteP99Lat => "write-p99-lat",
            Metric::ReadMaxSched => "read-max-sched",
            Metric::WriteMaxSched => "write-max-sched",
            Metric::ReadBw => "read-bw",
            Metric::WriteBw => "write-bw",
            Metric::ReadMeanLat => "read-mean-lat",
            Metric::ReadP50Lat => "read-p50-lat",
            Metric::ReadP999Lat => "read-p999-lat",
            Metric::WriteMeanLat => "write-mean-lat",
            Metric::ReadP99Sched => "read-p99-sched",
            Metric::Fairness => "fairness",
            Metric::MinShare => "min-share",
        }
    }

    pub(super) fn label(self) -> &'static str {
        match self {
            Metric::ReadIops => "read IOPS (sum over jobs)",
            Metric::WriteIops => "write IOPS (sum over jobs)",
            Metric::ReadMinLat => "min read latency (ms)",
            Metric::ReadMaxLat => "max read latency (ms)",
            Metric::ReadP99Lat => "p99 read latency (ms)",
            Metric::WriteMaxLat => "max write latency (ms)",
            Metric::WriteP99Lat => "p99 write latency (ms)",
            Metric::ReadMaxSched => "max read time in the scheduler (ms)",
            Metric::WriteMaxSched => "max write time in the scheduler (ms)",
            Metric::ReadBw => "read bandwidth (MiB/s, sum over jobs)",
            Metric::WriteBw => "write bandwidth (MiB/s, sum over jobs)",
            Metric::ReadMeanLat => "mean read latency (ms)",
            Metric::ReadP50Lat => "median read latency (ms)",
            Metric::ReadP999Lat => "p99.9 read latency (ms)",
            Metric::WriteMeanLat => "mean write latency (ms)",
            Metric::ReadP99Sched => "p99 read time in the scheduler (ms)",
            Metric::Fairness => "Jain's fairness index over the jobs' IOPS",
            Metric::MinShare => "smallest job's share of the I/Os (%)",
        }
    }

    /// This metric of a run.
    pub fn of(self, outcome: &Outcome) -> f64 {
        let dir = usize::from(matches!(
            self,
            Metric::WriteIops
                | Metric::WriteMaxLat
                | Metric::WriteP99Lat
                | Metric::WriteMaxSched
                | Metric::WriteBw
                | Metric::WriteMeanLat
        ));
        // Each job's rate over its own active span.
        let per_job = |d: usize| {
            outcome
                .stats
                .iter()
                .zip(&outcome.submitters)
                .map(move |(s, sub)| {
                    rates(&s.dirs[d], sub.finished_ns.saturating_sub(sub.started_ns))
                })
        };
        match self {
            Metric::ReadIops | Metric::WriteIops => per_job(dir).map(|r| r.iops).sum(),
            Metric::ReadBw | Metric::WriteBw => {
                per_job(dir).map(|r| r.bw_bytes).sum::<f64>() / 1_048_576.0
            }
            Metric::Fairness | Metric::MinShare => {
                let iops: Vec<f64> = per_job(0)
                    .zip(per_job(1))
                    .map(|(r, w)| r.iops + w.iops)
                    .collect();
                let ios: Vec<f64> = outcome
                    .stats
                    .iter()
                    .map(|s| (s.dirs[0].ios + s.dirs[1].ios) as f64)
                    .collect();
                if self == Metric::Fairness {
                    jain(&iops)
                } else {
                    let total: f64 = ios.iter().sum();
                    let least = ios.iter().copied().fold(f64::INFINITY, f64::min);
                    if total > 0.0 {
                        100.0 * least / total
                    } else {
                        0.0
                    }
                }
            }
            _ => {
                let mut all = OpStats::default();
                for s in &outcome.stats {
                    all.merge(&s.dirs[dir]);
                }
                if all.clat.is_empty() {
                    return 0.0;
                }
                let (clat, sched) = (all.clat.histogram(), all.sched.histogram());
                let ns = match self {
                    Metric::ReadMinLat => clat.min() as f64,
                    Metric::ReadMaxLat | Metric::WriteMaxLat => clat.max() as f64,
                    Metric::ReadMaxSched | Metric::WriteMaxSched => sched.max() as f64,
                    Metric::ReadMeanLat | Metric::WriteMeanLat => clat.mean(),
                    Metric::ReadP50Lat => clat.value_at_percentile(50.0) as f64,
                    Metric::ReadP999Lat => clat.value_at_percentile(99.9) as f64,
                    Metric::ReadP99Sched => sched.value_at_percentile(99.0) as f64,
                    _ => clat.value_at_percentile(99.0) as f64,
                };
                ns / 1e6
            }
        }
    }
}

/// Jain's fairness index of `x`: (Σx)² / (n · Σx²).
fn jain(x: &[f64]) -> f64 {
    let sum: f64 = x.iter().sum();
    let squares: f64 = x.iter().map(|v| v * v).sum();
    if squares == 0.0 {
        return 0.0;
    }
    sum * sum / (x.len() as f64 * squares)
}
