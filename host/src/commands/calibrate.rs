//! `schedhost calibrate --device PATH`: a short probe run on a real file or block device that
//! writes a simulated device spec, so `compare --device SPEC` predicts the device.
//!
//! The probes go through the same path `compare` measures (io_uring, O_DIRECT, the bundled
//! noop component), so the host's own cost per request is part of what is fitted:
//!
//! 1. 1 MiB sequential writes at depth 1 (only with `--allow-overwrite`, or on a file this
//!    command creates, which is written once first): the write time per MiB;
//! 2. 4 KiB random reads at depth 1: the latency of one request;
//! 3. 4 KiB random reads at depths 4, 16 and 64: how latency grows with the queue;
//! 4. 1 MiB sequential reads at depth 1: for telling a disk from flash, and its bandwidth.
//!
//! Flash-like devices (a random read under 1.5 ms) become an `ssd` spec: one die per channel,
//! the dies' read time fitted so that depth 1 gives the measured latency, their count so
//! that a 1 MiB read takes what it took, and the time each request on the device adds to a
//! new one's (`contention_ns`) fitted to the latencies at depths 4 to 64 (each `depth /
//! IOPS`): a device whose latency grows with its queue from the first request on (a
//! virtual disk's host thread) serves four random readers at about twice one reader's
//! IOPS, not four times, and a policy's ratio to noop depends on that. The program time is
//! fitted so that a 1 MiB write takes what it took. Slower devices become an `hdd` spec
//! fitted from the depth-1 and depth-64 figures.

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use schedhost::backend::sim::{DeviceModel, DeviceRequest, FaultPlan, Ssd, SsdParams};
use schedhost::core::DEFAULT_WATCHDOG_NS;
use schedhost::frontend::jobs::parse_cmdline;
use schedhost::frontend::run::{Device, PolicyPlan, run};
use schedhost::policy::load;
use schedhost::report::rates;
use schedhost_sdk::Op;

use super::flags::{Devices, RunFlags, Scope, parse_device};

#[derive(Debug, clap::Args)]
pub struct CalibrateArgs {
    /// The file or block device to measure, as `run --device` names one. A file that does
    /// not exist is created, filled by the write probe, and left in place.
    #[arg(long, value_name = "PATH", value_parser = parse_measured_device)]
    pub device: PathBuf,
    /// How much of it the probes use, as fio's size= (default 256m).
    #[arg(long, default_value = "256m")]
    pub size: String,
    /// Seconds per probe.
    #[arg(long, value_name = "SECS", default_value_t = 2.0)]
    pub seconds: f64,
    /// The run flags, as `run`'s, for every probe; --allow-overwrite lets the write probe
    /// write over an existing file or block device (the first --size bytes).
    #[command(flatten)]
    pub flags: RunFlags,
    /// Write the spec here (never over an existing file) instead of standard output.
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// What `calibrate` does with the run flags: it writes a spec, not events.
const SCOPE: Scope = Scope {
    command: "calibrate",
    devices: Devices::Real,
    own_seed: None,
    own_queue: None,
    own_on_fault: None,
    own_ring: None,
    own_threads: None,
    own_status: None,
    own_events: Some(
        "calibrate writes a device spec; record a run's events with `run --trace-events`",
    ),
    default_fuel: None,
    default_watchdog_ns: Some(DEFAULT_WATCHDOG_NS),
};

/// `--device`: one file or block device, in `run --device`'s syntax, with no fault plan (the
/// probes measure the device as it is).
fn parse_measured_device(arg: &str) -> Result<PathBuf, String> {
    match parse_device(arg).map_err(|e| format!("{e:#}"))? {
        (Device::Real(mut paths), faults) if paths.len() == 1 && faults.is_empty() => {
            Ok(paths.pop().unwrap_or_default())
        }
        (Device::Real(paths), _) if paths.len() == 1 => {
            Err("a fault plan would distort what the probes measure; give the device alone".into())
        }
        (Device::Real(_), _) => Err("calibrate measures one file or block device".into()),
        (Device::Sim(_), _) => Err(
            "calibrate measures a real file or block device; a simulated one is already a spec"
                .into(),
        ),
    }
}

/// What the probes measured.
#[derive(Debug, Clone, Copy)]
struct Probes {
    /// 4 KiB random reads per second at depth 1, and at each of [`DEEPER`].
    qd1_iops: f64,
    /// The depth-1 reads' completion latencies.
    qd1_latency: Latency,
    deeper_iops: [f64; DEEPER.len()],
    /// 1 MiB sequential writes and reads, bytes per second at depth 1 (writes: None when not
    /// allowed).
    write_bps: Option<f64>,
    read_bps: f64,
}

/// A probe's completion latencies, in ns.
#[derive(Debug, Clone, Copy, Default)]
struct Latency {
    mean_ns: f64,
    p99_ns: f64,
}

impl CalibrateArgs {
    pub fn execute(self) -> Result<()> {
        if !(self.seconds > 0.0 && self.seconds <= 600.0) {
            bail!("--seconds {}: give 0 < SECS ≤ 600", self.seconds);
        }
        if let Some(out) = &self.output
            && out.symlink_metadata().is_ok()
        {
            bail!("{} exists; give a new file name", out.display());
        }
        // A device that is not there is created here, exclusively, so that "created" means
        // this run made it: a file someone else puts there later is never written over.
        let created = match schedhost::output::create_new(&self.device) {
            Ok(_) => true,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => false,
            Err(e) => bail!("creating {}: {e}", self.device.display()),
        };
        // A file this run made is removed if the probes fail or a signal stops them; once
        // they succeed it is the user's, as the help says.
        let on_signal = match created.then(|| schedhost::signal::RemovedOnSignal::new(&self.device))
        {
            Some(Err(e)) => {
                let _ = std::fs::remove_file(&self.device);
                bail!(
                    "registering {} for removal on a signal: {e}",
                    self.device.display()
                );
            }
            guard => guard.and_then(Result::ok),
        };
        let probed = self.probe_and_fit(created);
        if created && probed.is_err() {
            let _ = std::fs::remove_file(&self.device);
        }
        drop(on_signal);
        let text = probed?;
        match &self.output {
            None => print!("{text}"),
            Some(out) => {
                schedhost::output::write_new(out, text.as_bytes()).map_err(anyhow::Error::msg)?;
                eprintln!("schedhost: wrote {}", out.display());
            }
        }
        Ok(())
    }

    /// Probes the device and returns the spec fitted to it. `created`: this run made the
    /// file, so it may write it.
    fn probe_and_fit(&self, created: bool) -> Result<String> {
        let mut plan = self.flags.plan(&SCOPE, FaultPlan::default(), true)?;
        plan.ring.allow_overwrite |= created;
        let runtime = self.flags.runtime(&SCOPE)?;
        let (_, noop) = load(&runtime, "noop")?;
        // The queue attribute the device reports, as the probes' runs read it.
        let rotational = std::cell::Cell::new(None);
        // The depth-1 read's latencies: their spread is the device's own.
        let qd1_latency = std::cell::Cell::new(Latency::default());
        let probe = |rw: &str, bs: &str, depth: u32| -> Result<f64> {
            let options: Vec<String> = [
                "--name=probe".to_owned(),
                format!("--rw={rw}"),
                format!("--bs={bs}"),
                format!("--size={}", self.size),
                format!("--iodepth={depth}"),
                format!("--runtime={}ms", (self.seconds * 1000.0) as u64),
            ]
            .into();
            let jobs = parse_cmdline(&options)?;
            let device = Device::Real(vec![self.device.clone()]);
            let done = run(
                &jobs,
                &device,
                PolicyPlan::fixed(&noop, &[]),
                &plan,
                &mut |_| {},
            )
            .with_context(|| {
                format!(
                    "probing {} with {rw} {bs} at depth {depth}",
                    self.device.display()
                )
            })?;
            if let Some(target) = done.real.as_ref().and_then(|r| r.targets.first()) {
                rotational.set(Some(target.rotational));
            }
            let o = &done.outcome;
            let dir = usize::from(rw.contains("write"));
            let (s, sub) = (&o.stats[0], &o.submitters[0]);
            let r = rates(&s.dirs[dir], sub.finished_ns.saturating_sub(sub.started_ns));
            eprintln!(
                "schedhost: calibrate: {rw} {bs} depth {depth}: {:.0} IOPS, {:.1} MB/s",
                r.iops,
                r.iops * block_bytes(bs) / 1e6
            );
            let clat = &s.dirs[dir].clat;
            if rw == "randread" && depth == 1 && !clat.is_empty() {
                qd1_latency.set(Latency {
                    mean_ns: clat.mean(),
                    p99_ns: clat.value_at_quantile(0.99) as f64,
                });
            }
            Ok(r.iops)
        };
        // The write comes first: it also fills a new file, so the reads meet real data. A
        // file's first write also allocates it, so a created file is written twice and the
        // second pass measured, as `compare` on the file would find it.
        let write_bps = if plan.ring.allow_overwrite {
            if created {
                probe("write", "1m", 1)?;
            }
            Some(probe("write", "1m", 1)? * 1_048_576.0)
        } else {
            eprintln!(
                "schedhost: calibrate: no write probe on an existing device without --allow-overwrite; writes are modelled as fast as reads"
            );
            None
        };
        let qd1_iops = probe("randread", "4k", 1)?;
        let mut deeper_iops = [0.0; DEEPER.len()];
        for (iops, depth) in deeper_iops.iter_mut().zip(DEEPER) {
            *iops = probe("randread", "4k", depth)?;
        }
        let read_bps = probe("read", "1m", 1)? * 1_048_576.0;
        let probes = Probes {
            write_bps,
            qd1_iops,
            qd1_latency: qd1_latency.get(),
            deeper_iops,
            read_bps,
        };
        let capacity = device_sectors(&self.device)?;
        let mut spec = if 1.0 / probes.qd1_iops.max(1.0) < 0.0015 {
            ssd_spec(&probes, capacity)
        } else {
            hdd_spec(&probes, capacity)
        };
        if let Some(rotational) = rotational.get() {
            // What the policies on the real device are told, whatever the model: cfq and bfq
            // idle by it, so a spec that said otherwise would predict another policy.
            let _ = writeln!(
                spec,
                "rotational = {} # the device's queue attribute, as policies read it",
                u8::from(rotational)
            );
        }
        Ok(format!("{}{spec}", header(&self.device, &probes)))
    }
}

fn block_bytes(bs: &str) -> f64 {
    if bs == "1m" { 1_048_576.0 } else { 4096.0 }
}

fn device_sectors(path: &std::path::Path) -> Result<u64> {
    use std::io::{Seek, SeekFrom};
    let mut file =
        std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let bytes = file
        .seek(SeekFrom::End(0))
        .with_context(|| format!("sizing {}", path.display()))?;
    Ok((bytes / 512).max(1))
}

fn header(device: &std::path::Path, p: &Probes) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# {} as measured by `schedhost calibrate` (noop, io_uring, O_DIRECT):",
        device.display()
    );
    let deeper: Vec<String> = DEEPER
        .iter()
        .zip(p.deeper_iops)
        .map(|(d, iops)| format!("{iops:.0} at {d}"))
        .collect();
    let _ = writeln!(
        s,
        "#   4 KiB random read: {:.0} IOPS at depth 1, {}",
        p.qd1_iops,
        deeper.join(", ")
    );
    let _ = writeln!(
        s,
        "#   1 MiB sequential read at depth 1: {:.1} MB/s",
        p.read_bps / 1e6
    );
    match p.write_bps {
        Some(w) => {
            let _ = writeln!(
                s,
                "#   1 MiB sequential write at depth 1: {:.1} MB/s",
                w / 1e6
            );
        }
        None => {
            let _ = writeln!(
                s,
                "#   writes not probed (an existing device without --allow-overwrite)"
            );
        }
    }
    s
}

/// The depths past 1 the random-read probe runs at; the last is the deepest.
const DEEPER: [u32; 3] = [4, 16, 64];

/// Pages are 4 KiB and requests at most 128 KiB (the `ssd` model's defaults).
const PAGE: f64 = 4096.0;
const PAGES_PER_MIB: f64 = 256.0;

/// Flash: QD1 latency = overhead + read time (+ a page on a fast channel); the dies and
/// the contention are those whose simulated random reads come closest to the probed IOPS
/// at every depth ([`fit_queueing`]); a 1 MiB write is its pages programmed over the dies.
fn ssd_spec(p: &Probes, capacity: u64) -> String {
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
        jitter_ns: jitter_ns.round() as u64,
        capacity_sectors: capacity,
        hw_queues: 1,
        queue_depth: 128,
        ..SsdParams::default()
    };
    (params.channels, params.contention_ns) = fit_queueing(params, p);
    let dies = f64::from(params.channels);
    if let Some(bps) = p.write_bps {
        let per_mib_ns = 1_048_576.0 * 1e9 / bps.max(1.0);
        let rounds = (PAGES_PER_MIB / dies).ceil();
        params.program_ns = ((per_mib_ns - overhead_ns - transfer_ns) / rounds)
            .max(1000.0)
            .round() as u64;
    }
    let mut s = String::new();
    let _ = writeln!(s, "model = ssd");
    let _ = writeln!(s, "channels = {}", params.channels);
    let _ = writeln!(s, "dies_per_channel = 1");
    let _ = writeln!(s, "page_bytes = {}", params.page_bytes);
    let _ = writeln!(s, "read_ns = {}", params.read_ns);
    let _ = writeln!(s, "program_ns = {}", params.program_ns);
    let _ = writeln!(s, "channel_bytes_per_s = {}", params.channel_bytes_per_s);
    let _ = writeln!(s, "overhead_ns = {}", params.overhead_ns);
    let _ = writeln!(s, "contention_ns = {}", params.contention_ns);
    let _ = writeln!(s, "jitter_ns = {}", params.jitter_ns);
    let _ = writeln!(s, "capacity_sectors = {capacity}");
    let _ = writeln!(s, "hw_queues = 1");
    let _ = writeln!(s, "queue_depth = 128");
    s
}

/// The mean of the exponential time that, added to a constant one, gives depth-1 reads
/// the probed mean and 99th percentile: an exponential's p99 is ln(100) ≈ 4.6 of its
/// means, so the spread from the mean to the p99 is 3.6 of them.
fn jitter_ns(qd1: Latency) -> f64 {
    ((qd1.p99_ns - qd1.mean_ns) / (100f64.ln() - 1.0)).max(0.0)
}

/// Dies (one per channel) tried by [`fit_queueing`].
const DIES: [u32; 14] = [1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 24, 32, 48, 64];
/// Contention tried: this many steps from none to the depth-1 latency per request ahead.
const CONTENTION_STEPS: u32 = 40;
/// Virtual time each candidate is simulated at each depth.
const FIT_WINDOW_NS: u64 = 50_000_000;

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
    let qd1_latency_ns = base.overhead_ns + base.read_ns + base.jitter_ns;
    let mut best = (f64::INFINITY, base.channels, 0);
    for dies in DIES {
        for step in 0..=CONTENTION_STEPS {
            let contention_ns = qd1_latency_ns * u64::from(step) / u64::from(CONTENTION_STEPS);
            let params = SsdParams {
                channels: dies,
                contention_ns,
                ..base
            };
            let error: f64 = probed
                .iter()
                .map(|&(depth, iops)| {
                    let predicted = closed_loop_iops(params, depth, FIT_WINDOW_NS);
                    (predicted.max(1.0) / iops.max(1.0)).ln().powi(2)
                })
                .sum();
            if error < best.0 {
                best = (error, dies, contention_ns);
            }
        }
    }
    (best.1, best.2)
}

/// Random 4 KiB reads kept `depth` deep on the flash model for `window_ns` of virtual time
/// (a fixed sequence of pages): IOPS.
fn closed_loop_iops(params: SsdParams, depth: u32, window_ns: u64) -> f64 {
    let mut device = Ssd::new(params);
    let pages = (params.capacity_sectors / 8).max(1);
    let mut next = 1u64;
    let mut page = || {
        next = next
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (next >> 33) % pages * 8
    };
    let read = |id, sector| DeviceRequest {
        id,
        op: Op::Read,
        sector,
        sectors: 8,
    };
    for id in 0..u64::from(depth) {
        device.submit(0, read(id, page()));
    }
    let (mut done, mut id) = (0u64, u64::from(depth));
    while let Some(now) = device.next_event().filter(|&t| t < window_ns) {
        while device.poll(now).is_some() {
            done += 1;
            device.submit(now, read(id, page()));
            id += 1;
        }
    }
    done as f64 * 1e9 / window_ns as f64
}

/// A disk: the random read is a seek and half a turn at 7200 rpm; the gain from depth 1 to
/// 64 is the drive's reordering (NCQ); the sequential rates are the media rates. Not checked
/// against a real disk here: this machine has none.
fn hdd_spec(p: &Probes, capacity: u64) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_depth_1_tail_is_fitted_as_the_exponential_that_gives_its_p99() {
        let qd1 = Latency {
            mean_ns: 40_000.0,
            p99_ns: 76_000.0,
        };
        assert!((jitter_ns(qd1) - 10_000.0).abs() < 100.0);
        let flat = Latency {
            mean_ns: 40_000.0,
            p99_ns: 40_000.0,
        };
        assert_eq!(jitter_ns(flat), 0.0);
    }

    /// Probes of a device whose latency at depth `d` is `base_ns + (d − 1) × per_ahead_ns`.
    fn linear_device(base_ns: f64, per_ahead_ns: f64) -> Probes {
        let iops = |d: u32| f64::from(d) * 1e9 / (base_ns + f64::from(d - 1) * per_ahead_ns);
        Probes {
            qd1_iops: iops(1),
            qd1_latency: Latency::default(),
            deeper_iops: DEEPER.map(iops),
            write_bps: Some(1.0e9),
            read_bps: 1.0e9,
        }
    }

    fn fitted(spec: &str, key: &str) -> u64 {
        spec.lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix(" = ")?.parse().ok())
            .unwrap_or_else(|| panic!("no {key} in\n{spec}"))
    }

    /// Reads the spec back as `compare --device` would, and runs it.
    fn spec_iops(spec: &str, depth: u32) -> f64 {
        let parsed = schedhost::backend::sim::DeviceSpec::parse_file(
            std::path::Path::new("fitted.spec"),
            spec,
        )
        .expect("the spec parses");
        let schedhost::backend::sim::DeviceSpec::Ssd(params) = parsed else {
            panic!("an ssd spec:\n{spec}");
        };
        closed_loop_iops(params, depth, 200_000_000)
    }

    #[test]
    fn a_device_whose_latency_grows_with_its_queue_is_fitted_with_contention() {
        // Like this machine's virtual disk: 33 µs alone, 6 µs more per request ahead.
        let probes = linear_device(33_000.0, 6_000.0);
        let spec = ssd_spec(&probes, 1 << 21);
        // Dies colliding explain part of the growth, contention the rest.
        assert!(fitted(&spec, "contention_ns") > 0, "{spec}");
        for (depth, iops) in [(1, probes.qd1_iops)]
            .into_iter()
            .chain(DEEPER.into_iter().zip(probes.deeper_iops))
        {
            let ratio = spec_iops(&spec, depth) / iops;
            assert!(
                (0.9..=1.1).contains(&ratio),
                "depth {depth}: {ratio:.2} of the probed IOPS\n{spec}"
            );
        }
    }

    #[test]
    fn a_device_that_scales_with_its_queue_is_fitted_with_dies_and_no_contention() {
        // Flash that serves 16 requests at once: IOPS grow with depth up to 16.
        let iops = |d: u32| f64::from(d.min(16)) * 1e9 / 33_000.0;
        let probes = Probes {
            qd1_iops: iops(1),
            qd1_latency: Latency::default(),
            deeper_iops: DEEPER.map(iops),
            write_bps: None,
            read_bps: 1.0e9,
        };
        let spec = ssd_spec(&probes, 1 << 21);
        assert_eq!(fitted(&spec, "contention_ns"), 0, "{spec}");
        assert!(fitted(&spec, "channels") >= 16, "{spec}");
    }
}
