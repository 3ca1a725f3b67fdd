//! The live view: a line every `--status-interval` with rates since the last line, the p99
//! completion latency per ctx, queue depths, the policy and its ejections.

use std::fmt::Write;

use super::meter::Meter;
use super::short_count;

/// What the line shows besides the counters.
#[derive(Debug, Clone, Copy)]
pub struct Gauges<'a> {
    /// The policy's name.
    pub policy: &'a str,
    /// Requests the policy holds.
    pub queued: usize,
    /// Requests on the device.
    pub inflight: usize,
    /// Policy ejections so far.
    pub ejections: usize,
}

/// When the next line is due, and the counters the last one saw.
#[derive(Debug, Clone)]
pub struct Live {
    every_ns: u64,
    next_ns: u64,
    last_ns: u64,
    /// Totals at the last line: [read, write] ios and bytes.
    last: ([u64; 2], [u64; 2]),
}

impl Live {
    /// A line every `every_ns`, the first one `every_ns` from now (`now_ns`).
    pub fn new(every_ns: u64, now_ns: u64) -> Self {
        let every_ns = every_ns.max(1_000_000);
        Self {
            every_ns,
            next_ns: now_ns + every_ns,
            last_ns: now_ns,
            last: ([0; 2], [0; 2]),
        }
    }

    /// True iff a line is due at `now_ns`.
    pub fn due(&self, now_ns: u64) -> bool {
        now_ns >= self.next_ns
    }

    /// How long until the next line, from `now_ns`.
    pub fn wait_ns(&self, now_ns: u64) -> u64 {
        self.next_ns.saturating_sub(now_ns)
    }

    /// The line for `now_ns`; `meter` holds every device's counters, its recent latencies
    /// since the last line.
    pub fn line(&mut self, now_ns: u64, meter: &Meter, gauges: Gauges<'_>) -> String {
        let seconds = now_ns.saturating_sub(self.last_ns) as f64 / 1e9;
        let mut ios = [0u64; 2];
        let mut bytes = [0u64; 2];
        for c in &meter.ctxs {
            for d in 0..2 {
                ios[d] += c.ios[d];
                bytes[d] += c.bytes[d];
            }
        }
        let mut out = format!("[{:>8.1} s] {}", now_ns as f64 / 1e9, gauges.policy);
        for (d, name) in ["read", "write"].iter().enumerate() {
            let rate = |now: u64, then: u64| (now.saturating_sub(then)) as f64 / seconds.max(1e-9);
            let _ = write!(
                out,
                " | {name} {} IOPS {:.1} MiB/s",
                short_count(rate(ios[d], self.last.0[d])),
                rate(bytes[d], self.last.1[d]) / 1048576.0
            );
        }
        let p99: Vec<String> = meter
            .ctxs
            .iter()
            .enumerate()
            .filter(|(_, c)| !c.recent.is_empty())
            .map(|(ctx, c)| {
                format!(
                    "ctx{ctx} {}",
                    micros(c.recent.histogram().value_at_quantile(0.99))
                )
            })
            .collect();
        if !p99.is_empty() {
            let _ = write!(out, " | p99 {}", p99.join(", "));
        }
        let _ = write!(
            out,
            " | queued {}, on device {} | ejections {}",
            gauges.queued, gauges.inflight, gauges.ejections
        );
        self.last = (ios, bytes);
        self.last_ns = now_ns;
        while self.next_ns <= now_ns {
            self.next_ns += self.every_ns;
        }
        out
    }
}

fn micros(ns: u64) -> String {
    if ns >= 10_000_000 {
        format!("{:.1} ms", ns as f64 / 1e6)
    } else {
        format!("{} µs", ns / 1000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use schedhost_sdk::Op;

    #[test]
    fn a_line_shows_rates_since_the_last_line_and_each_ctxs_p99() {
        let mut meter = Meter::default();
        let mut live = Live::new(1_000_000_000, 0);
        assert!(!live.due(999_999_999));
        assert!(live.due(1_000_000_000));
        for _ in 0..2000 {
            meter.record(0, Op::Read, 8, 300_000, 0);
        }
        meter.record(1, Op::Write, 256, 2_000_000, 0);
        let gauges = Gauges {
            policy: "cfq",
            queued: 3,
            inflight: 16,
            ejections: 0,
        };
        let line = live.line(1_000_000_000, &meter, gauges);
        assert!(
            line.contains("cfq | read 2.0k IOPS 7.8 MiB/s | write 1 IOPS 0.1 MiB/s"),
            "{line}"
        );
        assert!(line.contains("p99 ctx0 300 µs, ctx1 2000 µs"), "{line}");
        assert!(
            line.contains("queued 3, on device 16 | ejections 0"),
            "{line}"
        );
        meter.clear_recent();
        let quiet = live.line(2_000_000_000, &meter, gauges);
        assert!(quiet.contains("read 0 IOPS 0.0 MiB/s"), "{quiet}");
        assert!(!quiet.contains("p99"), "{quiet}");
        assert_eq!(live.wait_ns(2_500_000_000), 500_000_000);
    }
}
