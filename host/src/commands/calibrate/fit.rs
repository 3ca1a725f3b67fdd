//! The spec `calibrate` writes, from what its probes measured: pure, so that a fit is a
//! function of the probes (and checked without a device).

use std::fmt::Write as _;

use schedhost::backend::sim::{DeviceModel, DeviceRequest, Ssd, SsdParams};
use schedhost_sdk::Op;

/// What the probes measured.
#[derive(Debug, Clone, Copy)]
pub(super) struct Probes {
    /// 4 KiB random reads per second at depth 1, and at each of [`DEEPER`].
    pub(super) qd1_iops: f64,
    /// The depth-1 reads' completion latencies.
    pub(super) qd1_latency: Latency,
    pub(super) deeper_iops: [f64; DEEPER.len()],
    /// The reads' 99th percentile latency at each of [`DEEPER`], in ns (0: not probed).
    pub(super) deeper_p99_ns: [f64; DEEPER.len()],
    /// 4 KiB random reads and writes at even odds, [`MIXED_DEPTH`] deep: both directions'
    /// IOPS (None where writes are not allowed).
    pub(super) mixed_iops: Option<f64>,
    /// In the reads four deep, the part of the requests on the device that completed at
    /// one instant, on average (1: all four at once, in lockstep; None: not seen).
    pub(super) together: Option<f64>,
    /// 1 MiB sequential writes and reads, bytes per second at depth 1 (writes: None when not
    /// allowed).
    pub(super) write_bps: Option<f64>,
    /// 4 KiB random writes per second at depth 1 (None when not allowed).
    pub(super) write_4k_iops: Option<f64>,
    pub(super) read_bps: f64,
}

/// A probe's completion latencies, in ns.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Latency {
    pub(super) mean_ns: f64,
    pub(super) p99_ns: f64,
}

/// The depths past 1 the random-read probe runs at; the last is the deepest.
pub(super) const DEEPER: [u32; 3] = [4, 16, 64];

/// Pages are 4 KiB and requests at most 128 KiB (the `ssd` model's defaults).
const PAGE: f64 = 4096.0;

/// Flash: QD1 latency = overhead + read time (+ a page on a fast channel) + a jitter in
/// proportion to the rest ([`fit_jitter`]: the p99 at every depth); completing together
/// where the probes saw it; the dies and the contention are those whose simulated random
/// reads come closest to the probed IOPS at every depth ([`fit_queueing`]); a 4 KiB write at
/// depth 1 is a page programmed, and each write on the device costs others what the mixed
/// probe shows ([`fit_write_contention`]).
pub(super) fn ssd_spec(p: &Probes, capacity: u64) -> String {
    let latency_ns = 1e9 / p.qd1_iops.max(1.0);
    let channel_bytes_per_s = (p.read_bps.max(p.write_bps.unwrap_or(0.0)) * 4.0).max(1e9);
    let transfer_ns = PAGE * 1e9 / channel_bytes_per_s;
    let overhead_ns = (latency_ns * 0.1).min(10_000.0);
    let jitter_ns = jitter_ns(p.qd1_latency).min(latency_ns / 2.0);
    let read_ns = (latency_ns - overhead_ns - transfer_ns - jitter_ns).max(1000.0);
    let mut params = SsdParams {
        channels: 1,
        dies_per_channel: 1,
        page_bytes: PAGE as u32,
        read_ns: read_ns.round() as u64,
        program_ns: read_ns.round() as u64,
        channel_bytes_per_s: channel_bytes_per_s.round() as u64,
        overhead_ns: overhead_ns.round() as u64,
        contention_ns: 0,
        capacity_sectors: capacity,
        hw_queues: 1,
        queue_depth: 128,
        ..SsdParams::default()
    };
    // In thousandths of the rest of the depth-1 latency: a jitter in proportion to each
    // request's time on the device keeps the tail's shape at every depth, as this machine's
    // virtual disk keeps it (p99 about twice the mean from depth 1 to 32), where a constant
    // one leaves a deep queue's p99 near its mean.
    let own_ns = overhead_ns + read_ns + transfer_ns;
    params.jitter_permille = (jitter_ns * 1000.0 / own_ns).round() as u64;
    // A device that returns most of what it holds at once runs in lockstep: what was sent
    // together completes together (four reads alone on free-running flash complete at
    // four instants, a lockstep device's at one).
    params.complete_together = p.together.is_some_and(|part| part >= LOCKSTEP_PART);
    (params.channels, params.contention_ns) = fit_queueing(params, p);
    if let Some(permille) = fit_jitter(params, p, latency_ns, transfer_ns) {
        // The tail at every depth probed, not the depth-1 spread alone: at depth 1 this
        // machine's disk idles between reads, and one slow round of three once gave depth 1
        // a p99 of 278 µs where four jobs at QD1 then measured 210.
        let with = 1.0 + permille as f64 / 1000.0;
        params.jitter_permille = permille;
        params.read_ns =
            ((latency_ns / with - overhead_ns - transfer_ns).max(1000.0)).round() as u64;
        (params.channels, params.contention_ns) = fit_queueing(params, p);
    }
    let with_jitter = 1.0 + params.jitter_permille as f64 / 1000.0;
    if let Some(iops) = p.write_4k_iops {
        // A page crosses the channel and is programmed, alone on the device at depth 1,
        // and the jitter adds its part of that.
        let write_ns = 1e9 / iops.max(1.0);
        params.program_ns = (write_ns / with_jitter - overhead_ns - transfer_ns)
            .max(1000.0)
            .round() as u64;
    }
    params.write_contention_ns = fit_write_contention(params, p);
    let mut s = String::new();
    let simulated: Vec<String> = std::iter::once(1)
        .chain(DEEPER)
        .map(|d| {
            let p99 = closed_loop(params, d, TAIL_CHECK_NS).p99_ns;
            format!("{:.0} µs at {d}", p99 / 1e3)
        })
        .collect();
    let together = closed_loop(params, TOGETHER_DEPTH, TAIL_CHECK_NS).per_instant;
    let _ = writeln!(
        s,
        "# this spec's own 99th percentile there: {}; reads {TOGETHER_DEPTH} deep: {:.0} % at each instant",
        simulated.join(", "),
        together * 100.0 / f64::from(TOGETHER_DEPTH)
    );
    let _ = writeln!(s, "model = ssd");
    let _ = writeln!(s, "channels = {}", params.channels);
    let _ = writeln!(s, "dies_per_channel = 1");
    let _ = writeln!(s, "page_bytes = {}", params.page_bytes);
    let _ = writeln!(s, "read_ns = {}", params.read_ns);
    let _ = writeln!(s, "program_ns = {}", params.program_ns);
    let _ = writeln!(s, "channel_bytes_per_s = {}", params.channel_bytes_per_s);
    let _ = writeln!(s, "overhead_ns = {}", params.overhead_ns);
    let _ = writeln!(s, "contention_ns = {}", params.contention_ns);
    let _ = writeln!(s, "jitter_permille = {}", params.jitter_permille);
    let _ = writeln!(
        s,
        "complete_together = {}",
        u8::from(params.complete_together)
    );
    let _ = writeln!(s, "write_contention_ns = {}", params.write_contention_ns);
    let _ = writeln!(s, "capacity_sectors = {capacity}");
    let _ = writeln!(s, "hw_queues = 1");
    let _ = writeln!(s, "queue_depth = 128");
    s
}

/// The mean of the exponential time that, added to a constant one, gives depth-1 reads
/// the probed mean and 99th percentile: an exponential's p99 is ln(100) ≈ 4.6 of its
/// means, so the spread from the mean to the p99 is 3.6 of them.
pub(super) fn jitter_ns(qd1: Latency) -> f64 {
    ((qd1.p99_ns - qd1.mean_ns) / (100f64.ln() - 1.0)).max(0.0)
}

/// Virtual time the fitted spec's own tail is simulated at each depth, for its header.
const TAIL_CHECK_NS: u64 = 200_000_000;

/// Dies (one per channel) tried by [`fit_queueing`].
const DIES: [u32; 14] = [1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 24, 32, 48, 64];
/// Contention tried: this many steps from none to the depth-1 latency per request ahead.
const CONTENTION_STEPS: u32 = 40;
/// Virtual time each candidate is simulated at each depth.
const FIT_WINDOW_NS: u64 = 20_000_000;

/// The dies and the contention whose simulated random 4 KiB reads at depth 1 and at each
/// of [`DEEPER`] come closest to the probed IOPS (least squares of the log ratios, so that
/// each depth counts by its relative error). Dies alone make latency grow only as requests
/// collide on them, a device whose requests share one resource grows it from the first
/// (this machine's virtual disk: four random readers at about 2.5 times one reader's
/// IOPS); the fit takes what the probes show of each. Deterministic: the simulation is.
fn fit_queueing(base: SsdParams, p: &Probes) -> (u32, u64) {
    let probed: Vec<(u32, f64)> = std::iter::once((1, p.qd1_iops))
        .chain(DEEPER.into_iter().zip(p.deeper_iops))
        .collect();
    let qd1_latency_ns =
        (base.overhead_ns + base.read_ns) * (1000 + base.jitter_permille.min(1000)) / 1000
            + base.jitter_ns;
    let error = |dies: u32, step: u32| -> f64 {
        let params = SsdParams {
            channels: dies,
            contention_ns: qd1_latency_ns * u64::from(step) / u64::from(CONTENTION_STEPS),
            ..base
        };
        probed
            .iter()
            .map(|&(depth, iops)| {
                let predicted = closed_loop_iops(params, depth, FIT_WINDOW_NS);
                (predicted.max(1.0) / iops.max(1.0)).ln().powi(2)
            })
            .sum()
    };
    let mut best = (f64::INFINITY, base.channels, 0);
    for dies in DIES {
        let (step, e) = least_step(CONTENTION_STEPS, |step| error(dies, step));
        if e < best.0 {
            best = (e, dies, step);
        }
    }
    (
        best.1,
        qd1_latency_ns * u64::from(best.2) / u64::from(CONTENTION_STEPS),
    )
}

/// The step in `0..=steps` where `error` is least, and that error, by ternary search: more
/// contention only slows the deeper depths down (or the mixed load), so the error falls to
/// one least step and rises past it (the last few steps are tried one by one).
fn least_step(steps: u32, error: impl Fn(u32) -> f64) -> (u32, f64) {
    let (mut lo, mut hi) = (0, steps);
    while hi - lo > 3 {
        let (a, b) = (lo + (hi - lo) / 3, hi - (hi - lo) / 3);
        if error(a) <= error(b) {
            hi = b;
        } else {
            lo = a;
        }
    }
    (lo..=hi)
        .map(|step| (step, error(step)))
        .fold(
            (lo, f64::INFINITY),
            |best, c| if c.1 < best.1 { c } else { best },
        )
}

/// What a closed loop of random reads did: its rate, its reads' 99th percentile, and how
/// many completed at each instant anything did, on average.
pub(super) struct ClosedLoop {
    pub(super) iops: f64,
    pub(super) p99_ns: f64,
    pub(super) per_instant: f64,
}

/// The part of the requests on the device that must complete at one instant, on average,
/// for the device to be taken as completing together.
const LOCKSTEP_PART: f64 = 0.5;

/// The read probe whose completions tell whether the device completes together.
pub(super) const TOGETHER_DEPTH: u32 = DEEPER[0];

/// Random 4 KiB reads kept `depth` deep on the flash model for `window_ns` of virtual time
/// (a fixed sequence of pages): IOPS.
pub(super) fn closed_loop_iops(params: SsdParams, depth: u32, window_ns: u64) -> f64 {
    closed_loop(params, depth, window_ns).iops
}

/// Random 4 KiB reads kept `depth` deep on the flash model for `window_ns` of virtual time
/// (a fixed sequence of pages).
pub(super) fn closed_loop(params: SsdParams, depth: u32, window_ns: u64) -> ClosedLoop {
    closed_loop_of(params, depth, window_ns, false)
}

/// [`closed_loop`] with every request a read, or (`mixed`) each a read or a write at even
/// odds, as fio's randrw; the IOPS of both.
pub(super) fn closed_loop_of(
    params: SsdParams,
    depth: u32,
    window_ns: u64,
    mixed: bool,
) -> ClosedLoop {
    let mut device = Ssd::new(params);
    let pages = (params.capacity_sectors / 8).max(1);
    let mut next = 1u64;
    let mut request = |id| {
        next = next
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let op = if mixed && (next >> 20) & 1 == 1 {
            Op::Write
        } else {
            Op::Read
        };
        DeviceRequest {
            id,
            op,
            sector: (next >> 33) % pages * 8,
            sectors: 8,
        }
    };
    // When each request on the device was sent, by id: ids are taken in order and each
    // slot is free again once its request completes.
    let mut sent = vec![0u64; depth.max(1) as usize];
    let slot = |id: u64| (id % u64::from(depth.max(1))) as usize;
    for id in 0..u64::from(depth) {
        device.submit(0, request(id));
    }
    let (mut latencies, mut instants) = (Vec::new(), 0u64);
    while let Some(now) = device.next_event().filter(|&t| t < window_ns) {
        let before = latencies.len();
        while let Some((done, _)) = device.poll(now) {
            latencies.push(now - sent[slot(done)]);
            sent[slot(done)] = now;
            // The next request takes the slot of the one done.
            device.submit(now, request(done + u64::from(depth)));
        }
        instants += u64::from(latencies.len() > before);
    }
    latencies.sort_unstable();
    let p99_ns = latencies
        .get((latencies.len() * 99 / 100).min(latencies.len().saturating_sub(1)))
        .map_or(0.0, |&l| l as f64);
    ClosedLoop {
        iops: latencies.len() as f64 * 1e9 / window_ns as f64,
        p99_ns,
        per_instant: latencies.len() as f64 / instants.max(1) as f64,
    }
}

/// The depth of the mixed probe: four requests, as four jobs at QD1 keep.
pub(super) const MIXED_DEPTH: u32 = 4;

/// Steps of the jitter tried by [`fit_jitter`], each 25 ‰: up to the whole of a request's
/// own time.
const JITTER_STEPS: u32 = 40;

/// The jitter (in thousandths of a request's own time) whose simulated reads' p99 comes
/// closest to the probed p99 at depth 1 and each of [`DEEPER`] (the least sum of the log
/// ratios' sizes, not their squares: this machine's disk puts its p99 at 64 deep at 2–5
/// times its mean where the other depths keep it near twice, and squares let that one
/// depth pull every other's tail up), the depth-1 latency (`qd1_ns`, `transfer_ns` of it
/// on the channel) kept, the read time giving the jitter its share; None where no p99 was
/// probed.
fn fit_jitter(base: SsdParams, p: &Probes, qd1_ns: f64, transfer_ns: f64) -> Option<u64> {
    let probed: Vec<(u32, f64)> = std::iter::once((1, p.qd1_latency.p99_ns))
        .chain(DEEPER.into_iter().zip(p.deeper_p99_ns))
        .filter(|&(_, p99)| p99 > 0.0)
        .collect();
    if probed.is_empty() {
        return None;
    }
    let permille = |step: u32| u64::from(step) * 1000 / u64::from(JITTER_STEPS);
    let error = |step: u32| -> f64 {
        let with = 1.0 + permille(step) as f64 / 1000.0;
        let params = SsdParams {
            jitter_permille: permille(step),
            read_ns: (qd1_ns / with - base.overhead_ns as f64 - transfer_ns).max(1000.0) as u64,
            ..base
        };
        probed
            .iter()
            .map(|&(depth, p99)| {
                let run = closed_loop(params, depth, TAIL_CHECK_NS);
                (run.p99_ns.max(1.0) / p99).ln().abs()
            })
            .sum()
    };
    Some(permille(least_step(JITTER_STEPS, error).0))
}

/// Steps of write contention tried by [`fit_write_contention`], each a fortieth of the
/// depth-1 latency per write on the device: up to twice it.
const WRITE_STEPS: u32 = 80;

/// The time each write on the device adds to a new request whose simulated randrw at
/// [`MIXED_DEPTH`] comes closest to the mixed probe's IOPS (none without one).
fn fit_write_contention(base: SsdParams, p: &Probes) -> u64 {
    let Some(mixed) = p.mixed_iops else {
        return 0;
    };
    let unit = 1e9 / p.qd1_iops.max(1.0) / 40.0;
    let contention = |step: u32| (unit * f64::from(step)).round() as u64;
    let error = |step: u32| {
        let params = SsdParams {
            write_contention_ns: contention(step),
            ..base
        };
        let iops = closed_loop_of(params, MIXED_DEPTH, TAIL_CHECK_NS, true).iops;
        (iops.max(1.0) / mixed.max(1.0)).ln().powi(2)
    };
    contention(least_step(WRITE_STEPS, error).0)
}

/// A disk: the random read is a seek and half a turn at 7200 rpm; the gain from depth 1 to
/// 64 is the drive's reordering (NCQ); the sequential rates are the media rates. Not checked
/// against a real disk here: this machine has none.
pub(super) fn hdd_spec(p: &Probes, capacity: u64) -> String {
    let latency_ms = 1e3 / p.qd1_iops.max(1.0);
    let half_turn_ms = 60_000.0 / 7200.0 / 2.0;
    let avg_seek_ms = (latency_ms - half_turn_ms - 0.05).max(0.5);
    let mb = (p.read_bps / 1e6).clamp(1.0, 100_000.0);
    let qd64_iops = p.deeper_iops[DEEPER.len() - 1];
    let ncq = if qd64_iops > 1.3 * p.qd1_iops { 31 } else { 1 };
    let mut s = String::new();
    let _ = writeln!(s, "model = hdd");
    let _ = writeln!(s, "rpm = 7200");
    let _ = writeln!(s, "capacity_sectors = {capacity}");
    let _ = writeln!(s, "outer_mb_per_s = {}", mb.round());
    let _ = writeln!(s, "inner_mb_per_s = {}", (mb * 0.6).round().max(1.0));
    let _ = writeln!(s, "track_to_track_ms = {:.3}", avg_seek_ms.min(0.8));
    let _ = writeln!(s, "avg_seek_ms = {avg_seek_ms:.3}");
    let _ = writeln!(s, "full_stroke_ms = {:.3}", avg_seek_ms * 2.0);
    let _ = writeln!(s, "ncq_depth = {ncq}");
    s
}
