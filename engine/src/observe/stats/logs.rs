//! fio's per-job logs: `write_lat_log`, `write_bw_log` and `write_iops_log`, with
//! `log_avg_msec`, in fio's text format, one `time, value, direction, block size, priority`
//! line per entry (time in ms since the job started; latency in ns, bandwidth in KiB/s,
//! IOPS as a count per second), so fio's own tools (`fio2gnuplot`) read them.
//!
//! Without `log_avg_msec` every completion is an entry: its latency, and for bandwidth and
//! IOPS the rate since the previous completion in its direction. With it, each window of
//! that many ms in which a direction completed anything is one entry: the mean latency,
//! the bytes and I/Os over the window's length, block size 0, as fio's averaged logs.
//! Entries are kept in memory, as fio keeps them, up to [`MAX_LOG_ENTRIES`] per log; a log
//! that reaches it stops growing and says so (`log_avg_msec` keeps long runs within it).

use std::fmt::Write as _;

/// What a job asked to log.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct LogSpec {
    /// `write_lat_log`: the prefix of its `_lat`, `_clat` and `_slat` logs.
    pub lat: Option<String>,
    /// `write_bw_log`: the prefix of its `_bw` log.
    pub bw: Option<String>,
    /// `write_iops_log`: the prefix of its `_iops` log.
    pub iops: Option<String>,
    /// `log_avg_msec`, in ns (0: an entry per completion).
    pub avg_ns: u64,
}

impl LogSpec {
    /// True iff any log is asked for.
    pub fn any(&self) -> bool {
        self.lat.is_some() || self.bw.is_some() || self.iops.is_some()
    }
}

/// Entries one log keeps at most (fio's logs grow in memory too): 1 Mi, 24 MiB of memory
/// and about 25 MiB of text a log.
pub const MAX_LOG_ENTRIES: usize = 1 << 20;

/// One line of a log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    ms: u64,
    value: u64,
    dir: u8,
    bs: u32,
}

/// One direction's window (averaged logs) or last completion (per-I/O logs).
#[derive(Debug, Clone, Copy, Default)]
struct Window {
    /// Averaged: which window it is, counted from the job's start.
    index: u64,
    bytes: u64,
    ios: u64,
    latency_sum: u128,
    /// Per I/O: when this direction last completed, ns since the start.
    last_ns: Option<u64>,
}

/// A job's logs as the run goes.
#[derive(Debug, Clone)]
pub struct JobLogs {
    spec: LogSpec,
    start_ns: u64,
    lat: Vec<Entry>,
    bw: Vec<Entry>,
    iops: Vec<Entry>,
    windows: [Window; 2],
    truncated: bool,
}

impl JobLogs {
    /// Logs for a job that started at `start_ns`.
    pub fn new(spec: LogSpec, start_ns: u64) -> Self {
        Self {
            spec,
            start_ns,
            lat: Vec::new(),
            bw: Vec::new(),
            iops: Vec::new(),
            windows: [Window::default(); 2],
            truncated: false,
        }
    }

    /// What the job asked for.
    pub fn spec(&self) -> &LogSpec {
        &self.spec
    }

    /// True iff a log reached [`MAX_LOG_ENTRIES`] and stopped.
    pub fn truncated(&self) -> bool {
        self.truncated
    }

    /// A bio of direction `dir` (0 read, 1 write) and `bytes` completed at `now_ns` after
    /// `latency_ns`.
    pub fn record(&mut self, now_ns: u64, dir: usize, bytes: u64, latency_ns: u64) {
        let since = now_ns.saturating_sub(self.start_ns);
        let d = dir.min(1);
        if self.spec.avg_ns == 0 {
            let bs = u32::try_from(bytes).unwrap_or(u32::MAX);
            let ms = since / 1_000_000;
            let gap = self.windows[d]
                .last_ns
                .map_or(since, |last| since.saturating_sub(last))
                .max(1_000);
            self.windows[d].last_ns = Some(since);
            let entry = |value| Entry {
                ms,
                value,
                dir: d as u8,
                bs,
            };
            let (lat, bw, iops) = (
                entry(latency_ns),
                entry(per_second(bytes, gap) / 1024),
                entry(per_second(1, gap)),
            );
            self.push(lat, bw, iops);
            return;
        }
        let index = since / self.spec.avg_ns;
        if index > self.windows[d].index {
            self.close(d);
            self.windows[d].index = index;
        }
        let w = &mut self.windows[d];
        w.bytes += bytes;
        w.ios += 1;
        w.latency_sum += u128::from(latency_ns);
    }

    /// The job ended: the last windows become entries.
    pub fn finish(&mut self) {
        if self.spec.avg_ns > 0 {
            self.close(0);
            self.close(1);
        }
    }

    /// Direction `d`'s window ends: an entry if it completed anything.
    fn close(&mut self, d: usize) {
        let w = std::mem::take(&mut self.windows[d]);
        if w.ios == 0 {
            self.windows[d].index = w.index;
            return;
        }
        let avg = self.spec.avg_ns;
        let ms = (w.index + 1).saturating_mul(avg) / 1_000_000;
        let entry = |value| Entry {
            ms,
            value,
            dir: d as u8,
            bs: 0,
        };
        let mean = u64::try_from(w.latency_sum / u128::from(w.ios)).unwrap_or(u64::MAX);
        let (lat, bw, iops) = (
            entry(mean),
            entry(per_second(w.bytes, avg) / 1024),
            entry(per_second(w.ios, avg)),
        );
        self.push(lat, bw, iops);
        self.windows[d].index = w.index;
    }

    fn push(&mut self, lat: Entry, bw: Entry, iops: Entry) {
        if self.lat.len().max(self.bw.len()) >= MAX_LOG_ENTRIES {
            self.truncated = true;
            return;
        }
        if self.spec.lat.is_some() {
            self.lat.push(lat);
        }
        if self.spec.bw.is_some() {
            self.bw.push(bw);
        }
        if self.spec.iops.is_some() {
            self.iops.push(iops);
        }
    }

    /// The files to write for job number `n` (fio numbers jobs from 1): each path and its
    /// text. A latency log is written as fio writes it, three times: `_lat`, `_clat` (the
    /// same figures: a bio enters the host as it is issued) and `_slat` (zeros).
    pub fn files(&self, n: usize) -> Vec<(String, String)> {
        let mut out = Vec::new();
        if let Some(prefix) = &self.spec.lat {
            out.push((format!("{prefix}_lat.{n}.log"), text(&self.lat, false)));
            out.push((format!("{prefix}_clat.{n}.log"), text(&self.lat, false)));
            out.push((format!("{prefix}_slat.{n}.log"), text(&self.lat, true)));
        }
        if let Some(prefix) = &self.spec.bw {
            out.push((format!("{prefix}_bw.{n}.log"), text(&self.bw, false)));
        }
        if let Some(prefix) = &self.spec.iops {
            out.push((format!("{prefix}_iops.{n}.log"), text(&self.iops, false)));
        }
        out
    }
}

/// `count` per `ns` nanoseconds, as a count per second.
fn per_second(count: u64, ns: u64) -> u64 {
    let rate = u128::from(count) * 1_000_000_000 / u128::from(ns.max(1));
    u64::try_from(rate).unwrap_or(u64::MAX)
}

/// fio's log lines; `zero` writes every value as 0 (the submission-latency log).
fn text(entries: &[Entry], zero: bool) -> String {
    let mut out = String::with_capacity(entries.len() * 24);
    for e in entries {
        let value = if zero { 0 } else { e.value };
        let _ = writeln!(out, "{}, {value}, {}, {}, 0", e.ms, e.dir, e.bs);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(avg_ns: u64) -> LogSpec {
        LogSpec {
            lat: Some("j".into()),
            bw: Some("j".into()),
            iops: Some("j".into()),
            avg_ns,
        }
    }

    #[test]
    fn per_io_entries_carry_latency_and_the_rate_since_the_last_completion() {
        let mut logs = JobLogs::new(spec(0), 1_000_000_000);
        logs.record(1_010_000_000, 0, 4096, 50_000);
        logs.record(1_020_000_000, 0, 4096, 70_000);
        logs.finish();
        let files = logs.files(1);
        let names: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "j_lat.1.log",
                "j_clat.1.log",
                "j_slat.1.log",
                "j_bw.1.log",
                "j_iops.1.log"
            ]
        );
        assert_eq!(files[0].1, "10, 50000, 0, 4096, 0\n20, 70000, 0, 4096, 0\n");
        assert_eq!(files[2].1, "10, 0, 0, 4096, 0\n20, 0, 0, 4096, 0\n");
        // 4 KiB 10 ms after the previous completion: 400 KiB/s, 100 IOPS.
        assert!(
            files[3].1.ends_with("20, 400, 0, 4096, 0\n"),
            "{}",
            files[3].1
        );
        assert!(
            files[4].1.ends_with("20, 100, 0, 4096, 0\n"),
            "{}",
            files[4].1
        );
    }

    #[test]
    fn averaged_entries_are_one_per_window_with_io_and_block_size_zero() {
        let mut logs = JobLogs::new(spec(100_000_000), 0);
        for at in [10_000_000, 20_000_000, 250_000_000] {
            logs.record(at, 1, 8192, 1_000_000);
        }
        logs.finish();
        let iops = &logs.files(2)[4];
        assert_eq!(iops.0, "j_iops.2.log");
        assert_eq!(
            iops.1, "100, 20, 1, 0, 0\n300, 10, 1, 0, 0\n",
            "the empty window has no entry"
        );
        let bw = &logs.files(2)[3].1;
        assert!(
            bw.starts_with("100, 160, 1, 0, 0\n"),
            "16 KiB over 100 ms: {bw}"
        );
    }
}
