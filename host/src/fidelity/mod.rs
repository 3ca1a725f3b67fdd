//! `schedhost validate`: replay a drive's recorded requests on a simulated device, one at a
//! time as they were measured, and compare the two response-time distributions.
//!
//! The trace format is DiskSim's validation format, one request per line:
//! `R|W Hit|Miss blkno bcount service_us next_us`. The next request is issued `next_us` after
//! the previous one completed, so the replay is closed-loop and the device's idle time between
//! requests (its read-ahead, its rotational position) is what the real drive had.
//!
//! The figure of merit is Ruemmler and Wilkes' demerit: the root-mean-square horizontal
//! distance between the two cumulative distributions, as a percentage of the measured mean.

use schedhost_sdk::Op;

use crate::backend::sim::{DeviceModel, DeviceRequest, DeviceSpec};

/// Most requests a trace may hold (the shared traces have 10 000).
pub const MAX_REQUESTS: usize = 10_000_000;

/// Most virtual time a replay may span: 100 days. The device models count picoseconds in
/// u64, which hold about 213 days; the shared traces span minutes.
pub const MAX_REPLAY_NS: u64 = 100 * 86_400 * 1_000_000_000;

/// One recorded request.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Recorded {
    /// Read or write.
    pub op: Op,
    /// First 512-byte block.
    pub sector: u64,
    /// Length in blocks.
    pub sectors: u32,
    /// What the real drive took.
    pub service_us: f64,
    /// Think time before the next request.
    pub next_us: f64,
}

/// A trace line that does not parse, with its line number.
#[derive(Debug, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct TraceError {
    /// 1-based.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

/// Parses a validation trace.
///
/// # Errors
/// The first bad line, or a trace with no requests or more than [`MAX_REQUESTS`].
pub fn parse_trace(text: &str) -> Result<Vec<Recorded>, TraceError> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let err = |message: String| TraceError {
            line: n + 1,
            message,
        };
        let f: Vec<&str> = line.split_whitespace().collect();
        let [op, cache, blkno, bcount, service, next] = f[..] else {
            return Err(err(format!(
                "expected `R|W Hit|Miss blkno bcount service_us next_us`, found {} fields",
                f.len()
            )));
        };
        let op = match op {
            "R" => Op::Read,
            "W" => Op::Write,
            other => return Err(err(format!("`{other}` is not R or W"))),
        };
        if !matches!(cache, "Hit" | "Miss") {
            return Err(err(format!("`{cache}` is not Hit or Miss")));
        }
        let sector: u64 = blkno
            .parse()
            .map_err(|_| err(format!("blkno `{blkno}` is not a whole number")))?;
        let sectors: u32 = bcount
            .parse()
            .ok()
            .filter(|&n| (1..=1 << 20).contains(&n))
            .ok_or_else(|| err(format!("bcount `{bcount}` is not 1 to 1048576")))?;
        let time = |what: &str, text: &str| -> Result<f64, TraceError> {
            text.parse::<f64>()
                .ok()
                .filter(|t| t.is_finite() && (0.0..=3.6e9).contains(t))
                .ok_or_else(|| err(format!("{what} `{text}` is not 0 to 3.6e9 µs")))
        };
        let service_us = time("service_us", service)?;
        let next_us = time("next_us", next)?;
        if out.len() == MAX_REQUESTS {
            return Err(err(format!("more than {MAX_REQUESTS} requests")));
        }
        out.push(Recorded {
            op,
            sector,
            sectors,
            service_us,
            next_us,
        });
    }
    if out.is_empty() {
        return Err(TraceError {
            line: 0,
            message: "no requests".into(),
        });
    }
    Ok(out)
}

/// Replays `trace` on a fresh `device`, closed-loop, and returns each request's simulated
/// response time in µs, in trace order.
///
/// # Errors
/// A request lies past the device's end, or the device failed it or never finished it.
pub fn replay(trace: &[Recorded], device: &DeviceSpec) -> Result<Vec<f64>, String> {
    let mut model: Box<dyn DeviceModel> = device.build();
    let capacity = model.geometry().capacity_sectors;
    let mut now_ns: u64 = 0;
    let mut out = Vec::with_capacity(trace.len());
    for (i, r) in trace.iter().enumerate() {
        let end = r.sector.checked_add(u64::from(r.sectors));
        if end.is_none_or(|end| end > capacity) {
            return Err(format!(
                "request {} (blocks {}+{}) lies past the device's {capacity} sectors",
                i + 1,
                r.sector,
                r.sectors
            ));
        }
        let id = i as u64;
        model.submit(
            now_ns,
            DeviceRequest {
                id,
                op: r.op,
                sector: r.sector,
                sectors: r.sectors,
            },
        );
        let mut clock = now_ns;
        let mut polls = 0u32;
        let done_ns = loop {
            polls += 1;
            if polls > 1_000_000 {
                return Err(format!("request {}: the device made no progress", i + 1));
            }
            let Some(at) = model.next_event() else {
                return Err(format!("request {} never completed", i + 1));
            };
            clock = clock.max(at);
            match model.poll(clock) {
                Some((done, 0)) if done == id => break clock,
                Some((done, status)) if done == id => {
                    return Err(format!("request {} failed with status {status}", i + 1));
                }
                // Nothing else is outstanding; an event that was not ours moves time on.
                Some(_) | None => {}
            }
        };
        out.push((done_ns - now_ns) as f64 / 1000.0);
        now_ns = done_ns.saturating_add((r.next_us * 1000.0) as u64);
        if now_ns > MAX_REPLAY_NS && i + 1 < trace.len() {
            return Err(format!(
                "request {}: the trace spans more than 100 days of virtual time",
                i + 2
            ));
        }
    }
    Ok(out)
}

/// Mean and percentiles of one distribution, in µs.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Distribution {
    /// Mean.
    pub mean_us: f64,
    /// Median.
    pub p50_us: f64,
    /// 90th percentile.
    pub p90_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// Largest.
    pub max_us: f64,
}

/// `sorted`'s summary; `sorted` ascending and not empty.
pub fn distribution(sorted: &[f64]) -> Distribution {
    let at =
        |q: f64| sorted[((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1];
    Distribution {
        mean_us: sorted.iter().sum::<f64>() / sorted.len() as f64,
        p50_us: at(0.5),
        p90_us: at(0.9),
        p99_us: at(0.99),
        max_us: sorted[sorted.len() - 1],
    }
}

/// Ruemmler and Wilkes' demerit of `simulated` against `measured` (both ascending, the same
/// length): the RMS of the horizontal distances between the CDFs, in µs, and as a percentage
/// of the measured mean.
pub fn demerit(measured: &[f64], simulated: &[f64]) -> (f64, f64) {
    let n = measured.len().min(simulated.len()).max(1);
    let sum: f64 = measured
        .iter()
        .zip(simulated)
        .map(|(m, s)| (m - s) * (m - s))
        .sum();
    let rms = (sum / n as f64).sqrt();
    let mean = measured.iter().sum::<f64>() / n as f64;
    (rms, if mean > 0.0 { 100.0 * rms / mean } else { 0.0 })
}

/// The outcome of a validation run.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Validation {
    /// Requests replayed.
    pub requests: usize,
    /// RMS horizontal distance between the CDFs.
    pub demerit_us: f64,
    /// The same as a percentage of the measured mean.
    pub demerit_percent: f64,
    /// What the drive took.
    pub measured: Distribution,
    /// What the model took.
    pub simulated: Distribution,
    /// Reads alone and writes alone, when the trace has both.
    pub by_op: Vec<OpValidation>,
    /// Both distributions, ascending (for plots).
    #[serde(skip)]
    pub curves: (Vec<f64>, Vec<f64>),
}

/// One operation's share of a validation.
#[derive(Debug, Clone, serde::Serialize)]
pub struct OpValidation {
    /// `read` or `write`.
    pub op: &'static str,
    /// Its requests.
    pub requests: usize,
    /// Its demerit, against its own measured mean.
    pub demerit_percent: f64,
    /// What the drive took.
    pub measured: Distribution,
    /// What the model took.
    pub simulated: Distribution,
}

/// Replays and compares.
///
/// # Errors
/// As [`replay`].
pub fn validate(trace: &[Recorded], device: &DeviceSpec) -> Result<Validation, String> {
    let simulated = replay(trace, device)?;
    let sorted = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v
    };
    let per_op = |op: Op| -> Option<OpValidation> {
        let (m, s): (Vec<f64>, Vec<f64>) = trace
            .iter()
            .zip(&simulated)
            .filter(|(r, _)| r.op == op)
            .map(|(r, s)| (r.service_us, *s))
            .unzip();
        if m.is_empty() || m.len() == trace.len() {
            return None;
        }
        let (m, s) = (sorted(m), sorted(s));
        Some(OpValidation {
            op: op.name(),
            requests: m.len(),
            demerit_percent: demerit(&m, &s).1,
            measured: distribution(&m),
            simulated: distribution(&s),
        })
    };
    let by_op: Vec<OpValidation> = [Op::Read, Op::Write]
        .into_iter()
        .filter_map(per_op)
        .collect();
    let measured = sorted(trace.iter().map(|r| r.service_us).collect());
    let simulated = sorted(simulated);
    let (demerit_us, demerit_percent) = demerit(&measured, &simulated);
    Ok(Validation {
        requests: trace.len(),
        demerit_us,
        demerit_percent,
        measured: distribution(&measured),
        simulated: distribution(&simulated),
        by_op,
        curves: (measured, simulated),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_trace_lines_parse_and_bad_ones_name_the_line() {
        let t = parse_trace("R Hit 100 8 6657.0 64047.0\nW Miss 4 4 607 34200\n").unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!((t[0].op, t[0].sector, t[0].sectors), (Op::Read, 100, 8));
        assert_eq!(t[1].next_us, 34200.0);
        for (text, want) in [
            ("R Hit 1 8 1\n", "line 1: expected"),
            (
                "R Hit 1 8 1 1\nX Hit 1 8 1 1\n",
                "line 2: `X` is not R or W",
            ),
            ("R Hit 1 0 1 1\n", "bcount `0`"),
            ("R Hit 1 8 -3 1\n", "service_us `-3`"),
            ("R Hit 1 8 NaN 1\n", "service_us `NaN`"),
            ("", "no requests"),
        ] {
            let err = parse_trace(text).unwrap_err().to_string();
            assert!(err.contains(want), "{text:?}: {err}");
        }
    }

    #[test]
    fn demerit_is_the_rms_horizontal_distance_over_the_measured_mean() {
        let measured = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(demerit(&measured, &measured), (0.0, 0.0));
        // Every point 0.5 late: RMS 0.5 over a mean of 2.5 is 20 %.
        let (rms, pct) = demerit(&measured, &[1.5, 2.5, 3.5, 4.5]);
        assert!(
            (rms - 0.5).abs() < 1e-12 && (pct - 20.0).abs() < 1e-9,
            "{rms} {pct}"
        );
    }

    #[test]
    fn replay_is_closed_loop_and_refuses_requests_past_the_end() {
        let spec = DeviceSpec::parse_file(
            std::path::Path::new("n.spec"),
            "model = null\nlatency_ns = 250000\ncapacity_sectors = 1000\n",
        )
        .unwrap();
        let trace = parse_trace("R Hit 0 8 1 1000\nW Hit 8 8 1 0\n").unwrap();
        assert_eq!(replay(&trace, &spec).unwrap(), [250.0, 250.0]);
        let far = parse_trace("R Hit 999 8 1 1\n").unwrap();
        assert!(
            replay(&far, &spec)
                .unwrap_err()
                .contains("past the device's 1000 sectors")
        );
    }

    #[test]
    fn a_replay_longer_than_100_days_of_virtual_time_is_refused() {
        // An hour between requests, 2 500 times: past the bound, whose picoseconds would
        // otherwise run out of u64 a hundred days later.
        let text = "R Hit 0 8 1 3600000000\n".repeat(2500);
        let trace = parse_trace(&text).unwrap();
        let err = replay(&trace, &DeviceSpec::parse("sim:null").unwrap()).unwrap_err();
        assert!(err.contains("more than 100 days"), "{err}");
    }
}
