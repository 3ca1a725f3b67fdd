//! `schedhost validate`: replay a drive's recorded requests on a simulated device, one at a
//! time as they were measured, and compare the two response-time distributions.
//!
//! The trace format is DiskSim's validation format, one request per line:
//! `R|W ACTION blkno bcount service_us next_us`, where ACTION is the drive's cache outcome as
//! recorded (`Hit`, `Miss`, and the multi-part `Doub` and `Trip` in DiskSim's traces; DiskSim
//! reads it as any word). The next request is issued `next_us` after
//! the previous one completed, so the replay is closed-loop and the device's idle time between
//! requests (its read-ahead, its rotational position) is what the real drive had.
//!
//! The figure of merit is Ruemmler and Wilkes' demerit: the root-mean-square horizontal
//! distance between the two cumulative distributions, as a percentage of the measured mean.

use schedhost_sdk::Op;

mod differences;
mod rms_tool;
pub use differences::{Differences, EDGES_MS as DIFFERENCE_EDGES_MS};
pub use rms_tool::disksim_rms_ms;

use crate::backend::sim::{DeviceModel, DeviceRequest, DeviceSpec};

/// Most requests a trace may hold (the shared traces have 10 000).
pub const MAX_REQUESTS: usize = 10_000_000;

/// Most virtual time a replay may span: 100 days. The device models count picoseconds in
/// u64, which hold about 213 days; the shared traces span minutes.
pub const MAX_REPLAY_NS: u64 = 100 * 86_400 * 1_000_000_000;

/// The cache outcome a validation trace records for a request: DiskSim's reader
/// (`iotrace_validate_get_ioreq_event`) takes the column as any word and keeps it for its
/// statistics; these are the words its traces use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum CacheAction {
    /// `Hit`.
    Hit,
    /// `Miss`.
    Miss,
    /// `Doub`: a request the drive served in two parts.
    Double,
    /// `Trip`: in three parts.
    Triple,
    /// Any other word, as DiskSim accepts it.
    Other,
}

impl CacheAction {
    /// Longest word taken in the column (DiskSim reads it into a small fixed buffer).
    const MAX_WORD: usize = 15;

    /// The column's word, or why it cannot be one.
    fn parse(word: &str) -> Result<Self, String> {
        Ok(match word {
            "Hit" => Self::Hit,
            "Miss" => Self::Miss,
            "Doub" => Self::Double,
            "Trip" => Self::Triple,
            _ if word.len() <= Self::MAX_WORD && word.chars().all(|c| c.is_ascii_graphic()) => {
                Self::Other
            }
            _ => {
                return Err(format!(
                    "cache action `{word}` is not a word of at most {} printable characters",
                    Self::MAX_WORD
                ));
            }
        })
    }

    /// The trace's word for it (`other` for the rest).
    pub fn name(self) -> &'static str {
        match self {
            Self::Hit => "Hit",
            Self::Miss => "Miss",
            Self::Double => "Doub",
            Self::Triple => "Trip",
            Self::Other => "other",
        }
    }
}

/// DiskSim's own figure for a drive of its validation suite: the RMS demerit its simulation
/// reaches against the recorded trace, as DiskSim's `valid/runvalid` states it ("rms should
/// be about …", in ms).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct DiskSimFigure {
    /// The drive.
    pub drive: &'static str,
    /// DiskSim's RMS horizontal distance between the CDFs, in ms.
    pub rms_ms: f64,
    /// Where the figure is stated.
    pub source: &'static str,
    /// Request by request on its whole trace, DiskSim's recorded time less its own, as its
    /// validation run printed them (`valid/NAME.outv`, "Trace access diff time
    /// distribution"): set beside the model's, it says whether the model agrees with the
    /// drive request for request as often as DiskSim does, also on a part of the trace.
    pub own: Differences,
}

/// Where the figures are stated.
const RUNVALID: &str = "DiskSim's valid/runvalid";

/// DiskSim's figures, by the names its validation traces go by (DiskSim 4.0's
/// `DRIVE.trace` and the older `trace.DRIVE`): the ten drives `runvalid` replays, with the
/// RMS it states for each, in its order.
#[expect(
    clippy::approx_constant,
    reason = "0.318 ms is DiskSim's figure for the Cheetah 4LP, not 1/π"
)]
const DISKSIM_FIGURES: &[(&[&str], DiskSimFigure)] = &[
    (
        &["atlas_III.trace"],
        DiskSimFigure {
            drive: "Quantum Atlas III (QM39100TD-SW)",
            rms_ms: 0.378,
            source: RUNVALID,
            own: Differences::from_counts([356, 1523, 552, 4963, 584, 1300, 704, 6, 1, 11]),
        },
    ),
    (
        &["barracuda.trace"],
        DiskSimFigure {
            drive: "Seagate Barracuda (ST32171W)",
            rms_ms: 0.349,
            source: RUNVALID,
            own: Differences::from_counts([147, 1036, 423, 6384, 435, 1059, 507, 8, 1, 0]),
        },
    ),
    (
        &["cheetah4LP.trace"],
        DiskSimFigure {
            drive: "Seagate Cheetah 4LP",
            rms_ms: 0.318,
            source: RUNVALID,
            own: Differences::from_counts([5, 964, 546, 6592, 579, 1119, 186, 2, 3, 4]),
        },
    ),
    (
        &["cheetah9LP.trace"],
        DiskSimFigure {
            drive: "Seagate Cheetah 9LP (ST39102LW)",
            rms_ms: 0.107,
            source: RUNVALID,
            own: Differences::from_counts([10, 1111, 595, 6474, 628, 1059, 121, 1, 1, 0]),
        },
    ),
    (
        &["ibm18es.trace"],
        DiskSimFigure {
            drive: "IBM Ultrastar 18ES (DNES-309170W)",
            rms_ms: 0.135,
            source: RUNVALID,
            own: Differences::from_counts([171, 1154, 465, 6379, 438, 1006, 384, 3, 0, 0]),
        },
    ),
    (
        &["atlas10k.trace"],
        DiskSimFigure {
            drive: "Quantum Atlas 10K",
            rms_ms: 0.268,
            source: RUNVALID,
            own: Differences::from_counts([9, 1096, 563, 6792, 550, 908, 81, 1, 0, 0]),
        },
    ),
    (
        &["hp_c2247a.trace", "trace.hpc2247"],
        DiskSimFigure {
            drive: "HP C2247",
            rms_ms: 0.090,
            source: RUNVALID,
            own: Differences::from_counts([227, 0, 6, 9556, 7, 1, 2, 47, 151, 2]),
        },
    ),
    (
        &["hp_c3323a.trace", "trace.hpc3323"],
        DiskSimFigure {
            drive: "HP C3323A",
            rms_ms: 0.306,
            source: RUNVALID,
            own: Differences::from_counts([687, 1454, 564, 3406, 566, 1264, 1010, 54, 56, 13]),
        },
    ),
    (
        &["hp_c2490a.trace", "trace.hpc2490"],
        DiskSimFigure {
            drive: "HP C2490",
            rms_ms: 0.254,
            source: RUNVALID,
            own: Differences::from_counts([524, 2, 58, 8843, 45, 3, 505, 3, 1, 0]),
        },
    ),
    (
        &["dec_rz26.trace"],
        DiskSimFigure {
            drive: "DEC RZ26",
            rms_ms: 0.340,
            source: RUNVALID,
            own: Differences::from_counts([318, 203, 401, 5959, 477, 153, 220, 148, 75, 26]),
        },
    ),
];

/// DiskSim's own figure for the validation trace named `file_name`, when it is one of
/// DiskSim's suite.
pub fn disksim_figure(file_name: &str) -> Option<DiskSimFigure> {
    DISKSIM_FIGURES
        .iter()
        .find(|(names, _)| names.contains(&file_name))
        .map(|&(_, figure)| figure)
}

/// One recorded request.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RecordedRequest {
    /// Read or write.
    pub op: Op,
    /// The drive's cache outcome, as recorded.
    pub cache: CacheAction,
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
pub fn parse_trace(text: &str) -> Result<Vec<RecordedRequest>, TraceError> {
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
        // DiskSim's sscanf reads the first six fields and ignores what follows them.
        let [op, cache, blkno, bcount, service, next, ..] = f[..] else {
            return Err(err(format!(
                "expected `R|W Hit|Miss|Doub|Trip blkno bcount service_us next_us`, found {} fields",
                f.len()
            )));
        };
        let op = match op {
            "R" => Op::Read,
            "W" => Op::Write,
            other => return Err(err(format!("`{other}` is not R or W"))),
        };
        let cache = CacheAction::parse(cache).map_err(err)?;
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
        out.push(RecordedRequest {
            op,
            cache,
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
pub fn replay(trace: &[RecordedRequest], device: &DeviceSpec) -> Result<Vec<f64>, String> {
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
    /// The same distance as DiskSim's `rms` tool computes it over its buckets, in ms: the
    /// figure to set beside one DiskSim states.
    pub rms_tool_ms: f64,
    /// The same as a percentage of the measured mean.
    pub demerit_percent: f64,
    /// What the drive took.
    pub measured: Distribution,
    /// What the model took.
    pub simulated: Distribution,
    /// Reads alone and writes alone, when the trace has both.
    pub by_op: Vec<OpValidation>,
    /// Each cache outcome alone (`Hit`, `Miss`, `Doub`, `Trip`), when the trace has more
    /// than one.
    pub by_cache: Vec<CacheValidation>,
    /// Request by request, the recorded time less the model's, in DiskSim's buckets.
    pub differences: Differences,
    /// The model's time for each request, in the trace's order (µs).
    #[serde(skip)]
    pub by_request: Vec<f64>,
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

/// One recorded cache outcome's share of a validation.
#[derive(Debug, Clone, serde::Serialize)]
pub struct CacheValidation {
    /// The trace's word: `Hit`, `Miss`, `Doub`, `Trip`, or `other`.
    pub cache: &'static str,
    /// Its requests.
    pub requests: usize,
    /// Its demerit, against its own measured mean.
    pub demerit_percent: f64,
    /// What the drive took.
    pub measured: Distribution,
    /// What the model took.
    pub simulated: Distribution,
}

/// A part of a trace compared alone: (requests, demerit %, measured, simulated), or `None`
/// when the part is empty or the whole trace.
fn part(
    trace: &[RecordedRequest],
    simulated: &[f64],
    keep: impl Fn(&RecordedRequest) -> bool,
) -> Option<(usize, f64, Distribution, Distribution)> {
    let (mut m, mut s): (Vec<f64>, Vec<f64>) = trace
        .iter()
        .zip(simulated)
        .filter(|(r, _)| keep(r))
        .map(|(r, s)| (r.service_us, *s))
        .unzip();
    if m.is_empty() || m.len() == trace.len() {
        return None;
    }
    m.sort_by(f64::total_cmp);
    s.sort_by(f64::total_cmp);
    Some((
        m.len(),
        demerit(&m, &s).1,
        distribution(&m),
        distribution(&s),
    ))
}

/// Replays and compares.
///
/// # Errors
/// As [`replay`].
pub fn validate(trace: &[RecordedRequest], device: &DeviceSpec) -> Result<Validation, String> {
    let simulated = replay(trace, device)?;
    let sorted = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v
    };
    let by_op: Vec<OpValidation> = [Op::Read, Op::Write]
        .into_iter()
        .filter_map(|op| {
            let (requests, demerit_percent, measured, simulated) =
                part(trace, &simulated, |r| r.op == op)?;
            Some(OpValidation {
                op: op.name(),
                requests,
                demerit_percent,
                measured,
                simulated,
            })
        })
        .collect();
    let by_cache: Vec<CacheValidation> = [
        CacheAction::Hit,
        CacheAction::Miss,
        CacheAction::Double,
        CacheAction::Triple,
        CacheAction::Other,
    ]
    .into_iter()
    .filter_map(|cache| {
        let (requests, demerit_percent, measured, simulated) =
            part(trace, &simulated, |r| r.cache == cache)?;
        Some(CacheValidation {
            cache: cache.name(),
            requests,
            demerit_percent,
            measured,
            simulated,
        })
    })
    .collect();
    let differences = Differences::count(trace, &simulated);
    let measured = sorted(trace.iter().map(|r| r.service_us).collect());
    let by_request = simulated.clone();
    let simulated = sorted(simulated);
    let (demerit_us, demerit_percent) = demerit(&measured, &simulated);
    Ok(Validation {
        requests: trace.len(),
        demerit_us,
        rms_tool_ms: disksim_rms_ms(&measured, &simulated),
        demerit_percent,
        measured: distribution(&measured),
        simulated: distribution(&simulated),
        by_op,
        by_cache,
        differences,
        by_request,
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
    fn every_cache_action_disksim_records_is_read_and_a_long_word_is_refused() {
        let t = parse_trace(
            "R Hit 0 8 1 1\nR Miss 8 8 1 1\nR Doub 16 8 1 1\nW Trip 24 8 1 1\nR Pref 32 8 1 1\n",
        )
        .unwrap();
        let actions: Vec<&str> = t.iter().map(|r| r.cache.name()).collect();
        let trailing = parse_trace("R Hit 0 8 1 1 extra words\n").unwrap();
        assert_eq!(
            trailing[0].next_us, 1.0,
            "fields past the sixth are ignored, as DiskSim does"
        );
        assert_eq!(actions, ["Hit", "Miss", "Doub", "Trip", "other"]);
        let long = parse_trace("R Hitandmissandmore 0 8 1 1\n").unwrap_err();
        assert!(long.to_string().contains("line 1: cache action"), "{long}");
    }

    #[test]
    fn a_validation_reports_each_cache_action_alone_when_the_trace_has_several() {
        let spec = DeviceSpec::parse_file(
            std::path::Path::new("n.spec"),
            "model = null\nlatency_ns = 20000\ncapacity_sectors = 1000\n",
        )
        .unwrap();
        let trace = parse_trace("R Hit 0 8 10 0\nR Miss 8 8 30 0\nR Miss 16 8 50 0\n").unwrap();
        let v = validate(&trace, &spec).unwrap();
        let parts: Vec<(&str, usize)> = v.by_cache.iter().map(|c| (c.cache, c.requests)).collect();
        assert_eq!(parts, [("Hit", 1), ("Miss", 2)]);
        assert_eq!(v.by_cache[1].measured.mean_us, 40.0);
        let hits = parse_trace("R Hit 0 8 10 0\nR Hit 8 8 30 0\n").unwrap();
        assert!(
            validate(&hits, &spec).unwrap().by_cache.is_empty(),
            "one action: no parts"
        );
    }

    #[test]
    #[expect(
        clippy::approx_constant,
        reason = "0.318 ms is DiskSim's figure for the Cheetah 4LP, not 1/π"
    )]
    fn disksims_own_figure_is_known_for_its_suites_traces_only() {
        let atlas = disksim_figure("atlas10k.trace").unwrap();
        assert_eq!((atlas.drive, atlas.rms_ms), ("Quantum Atlas 10K", 0.268));
        assert_eq!(disksim_figure("trace.hpc3323").unwrap().rms_ms, 0.306);
        assert_eq!(disksim_figure("mine.trace"), None);
        // The ten drives runvalid replays, each by its DiskSim 4.0 trace name.
        let suite = [
            "atlas_III",
            "barracuda",
            "cheetah4LP",
            "cheetah9LP",
            "ibm18es",
            "atlas10k",
            "hp_c2247a",
            "hp_c3323a",
            "hp_c2490a",
            "dec_rz26",
        ];
        let figures: Vec<f64> = suite
            .iter()
            .map(|d| disksim_figure(&format!("{d}.trace")).unwrap().rms_ms)
            .collect();
        assert_eq!(
            figures,
            [
                0.378, 0.349, 0.318, 0.107, 0.135, 0.268, 0.090, 0.306, 0.254, 0.340
            ]
        );
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
