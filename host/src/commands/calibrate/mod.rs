//! `schedhost calibrate --device PATH`: a short probe run on a real file or block device that
//! writes a simulated device spec, so `compare --device SPEC` predicts the device.
//!
//! The probes go through the same path `compare` measures (io_uring, O_DIRECT, the bundled
//! noop component), so the host's own cost per request is part of what is fitted:
//!
//! 1. writes, only with `--allow-overwrite` or on a file this command creates (which is
//!    written once first): 1 MiB sequential at depth 1, then 4 KiB random at depth 1;
//! 2. 4 KiB random reads at depth 1: the latency of one request and its spread;
//! 3. 4 KiB random reads at depths 4, 16 and 64: how latency grows with the queue (2 and 3
//!    in turn `--rounds` times, each figure the median of its rounds: this machine's disk
//!    drifts over minutes, three depth-1 probes of one run reading 10 867, 14 343 and
//!    12 452 IOPS, and one slow probe once fitted every QD1 p99 at 0.30 ms where the same
//!    run measured 0.17); where it may write, each round also runs 4 KiB random reads and
//!    writes at even odds four deep: how writes slow what runs beside them;
//! 4. 1 MiB sequential reads at depth 1: for telling a disk from flash.
//!
//! Flash-like devices (a random read under 1.5 ms) become an `ssd` spec (`fit.rs`): the
//! read time so that depth 1 gives the measured latency; an exponential time added to each
//! request, its mean in proportion to the request's time on the device (`jitter_permille`:
//! this machine's disk keeps its p99 near twice its mean at every depth to 32, where a
//! constant jitter left the simulated QD8 × 4 p99 near half the measured), fitted to the p99
//! probed at every depth; whether the reads sent at one instant complete together
//! (`complete_together`), as the reads four deep showed (this machine's disk returns them all
//! at once: it runs in lockstep); the
//! dies and the time each request on the device adds to a new one's (`contention_ns`)
//! whose simulated reads come closest to the probed IOPS at every depth (a device whose
//! latency grows with its queue from the first request on, as a virtual disk's host thread
//! makes it, serves four random readers at about 2.5 times one reader's IOPS, not four
//! times, and a policy's ratio to noop depends on that); the program time so that a 4 KiB
//! random write at depth 1 takes what it took; the time each write on the device adds to a
//! new request (`write_contention_ns`) so that the mixed probe completes what it did (this
//! machine's disk: a write alone as fast as a read, four mixed about a sixth slower than
//! four reads). Slower devices become an `hdd` spec fitted
//! from the depth-1 and depth-64 figures.

use std::fmt::Write as _;
use std::path::PathBuf;

mod fit;
#[cfg(test)]
mod tests;

use anyhow::{Context, Result, bail};
use schedhost::backend::sim::FaultPlan;
use schedhost::core::DEFAULT_WATCHDOG_NS;
use schedhost::frontend::jobs::parse_cmdline;
use schedhost::frontend::run::{Device, PolicyPlan, run};
use schedhost::policy::load;
use schedhost::report::rates;

use super::flags::{Devices, RunFlags, Scope, parse_device};
use fit::{DEEPER, Latency, MIXED_DEPTH, Probes, TOGETHER_DEPTH, hdd_spec, ssd_spec};

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
    /// The 4 KiB random-read probes run this many times, their depths in turn each time, and
    /// each depth's median is fitted: a disk that drifts over the probes moves one round,
    /// not the spec.
    #[arg(long, value_name = "N", default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=20))]
    pub rounds: u32,
    /// The run flags, as `run`'s, for every probe; --allow-overwrite lets the write probes
    /// (1 MiB sequential, then 4 KiB random) write over an existing file or block device
    /// (within the first --size bytes).
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
        // this run made it: a file someone else puts there later is never written over. A
        // file this run made is removed if the probes fail or a signal stops them (from the
        // moment it exists); once they succeed it is the user's, as the help says.
        let on_signal = match schedhost::signal::create_removed_on_signal(
            &self.device,
            schedhost::output::create_new,
        ) {
            Ok((_, guard)) => Some(guard),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => None,
            Err(e) => bail!("creating {}: {e}", self.device.display()),
        };
        let created = on_signal.is_some();
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
        // At depth 4, the part of the reads on the device that completed at each instant.
        let together = std::cell::RefCell::new(Vec::new());
        // The random reads' latencies by depth, a round each: their spread at depth 1 is the
        // device's own, its growth with depth the queue's.
        let latencies =
            std::cell::RefCell::new(std::collections::BTreeMap::<u32, Vec<Latency>>::new());
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
            let elapsed = sub.finished_ns.saturating_sub(sub.started_ns);
            // A mixed probe counts both directions.
            let iops = if rw == "randrw" {
                s.dirs.iter().map(|d| rates(d, elapsed).iops).sum()
            } else {
                rates(&s.dirs[dir], elapsed).iops
            };
            eprintln!(
                "schedhost: calibrate: {rw} {bs} depth {depth}: {iops:.0} IOPS, {:.1} MB/s",
                iops * block_bytes(bs) / 1e6
            );
            if rw == "randread" && depth == TOGETHER_DEPTH {
                let instants = done.real.as_ref().map_or(0, |r| r.completion_instants);
                if instants > 0 {
                    let per_instant = o.core.completed as f64 / instants as f64;
                    together.borrow_mut().push(per_instant / f64::from(depth));
                }
            }
            let clat = s.dirs[dir].clat.histogram();
            if rw == "randread" && !clat.is_empty() {
                latencies
                    .borrow_mut()
                    .entry(depth)
                    .or_default()
                    .push(Latency {
                        mean_ns: clat.mean(),
                        p99_ns: clat.value_at_quantile(0.99) as f64,
                    });
            }
            Ok(iops)
        };
        // The write comes first: it also fills a new file, so the reads meet real data. A
        // file's first write also allocates it, so a created file is written twice and the
        // second pass measured, as `compare` on the file would find it.
        let (write_bps, write_4k_iops) = if plan.ring.allow_overwrite {
            if created {
                probe("write", "1m", 1)?;
            }
            let bps = probe("write", "1m", 1)? * 1_048_576.0;
            (Some(bps), Some(probe("randwrite", "4k", 1)?))
        } else {
            eprintln!(
                "schedhost: calibrate: no write probe on an existing device without --allow-overwrite; writes are modelled as fast as reads"
            );
            (None, None)
        };
        // Depth by depth in turn, round after round, so that a drift lands in every depth.
        let depths = [1].into_iter().chain(DEEPER);
        let mut by_depth = vec![Vec::new(); 1 + DEEPER.len()];
        let mut mixed = Vec::new();
        for _ in 0..self.rounds {
            for (seen, depth) in by_depth.iter_mut().zip(depths.clone()) {
                seen.push(probe("randread", "4k", depth)?);
            }
            if plan.ring.allow_overwrite {
                mixed.push(probe("randrw", "4k", MIXED_DEPTH)?);
            }
        }
        let mixed_iops = (!mixed.is_empty()).then(|| median(mixed));
        let together = Some(together.take()).filter(|t| !t.is_empty()).map(median);
        let read_bps = probe("read", "1m", 1)? * 1_048_576.0;
        let mut medians = by_depth.into_iter().map(median);
        let qd1_iops = medians.next().unwrap_or(0.0);
        let mut deeper_iops = [0.0; DEEPER.len()];
        for (iops, m) in deeper_iops.iter_mut().zip(medians) {
            *iops = m;
        }
        let mut latencies = latencies.take();
        let mut at_depth = |depth: u32| {
            let rounds = latencies.remove(&depth).unwrap_or_default();
            Latency {
                mean_ns: median(rounds.iter().map(|l| l.mean_ns).collect()),
                p99_ns: median(rounds.iter().map(|l| l.p99_ns).collect()),
            }
        };
        let qd1_latency = at_depth(1);
        let deeper_p99_ns = DEEPER.map(|depth| at_depth(depth).p99_ns);
        let probes = Probes {
            write_bps,
            write_4k_iops,
            qd1_iops,
            qd1_latency,
            deeper_iops,
            deeper_p99_ns,
            mixed_iops,
            together,
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
        Ok(format!(
            "{}{spec}",
            header(&self.device, &probes, self.rounds)
        ))
    }
}

/// The middle of `values` (the mean of the two middle ones for an even count; 0 for none).
fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    match n {
        0 => 0.0,
        _ if n % 2 == 1 => values[n / 2],
        _ => (values[n / 2 - 1] + values[n / 2]) / 2.0,
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

fn header(device: &std::path::Path, p: &Probes, rounds: u32) -> String {
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
        "#   4 KiB random read: {:.0} IOPS at depth 1, {} (the median of {} round{})",
        p.qd1_iops,
        deeper.join(", "),
        rounds,
        if rounds == 1 { "" } else { "s" }
    );
    let tails: Vec<String> = std::iter::once((1, p.qd1_latency.p99_ns))
        .chain(DEEPER.into_iter().zip(p.deeper_p99_ns))
        .map(|(d, p99)| format!("{:.0} µs at {d}", p99 / 1e3))
        .collect();
    let _ = writeln!(s, "#   its 99th percentile: {}", tails.join(", "));
    if let Some(part) = p.together {
        let _ = writeln!(
            s,
            "#   reads {TOGETHER_DEPTH} deep: {:.0} % of those on the device completed at each instant anything did",
            part * 100.0
        );
    }
    if let Some(mixed) = p.mixed_iops {
        let _ = writeln!(
            s,
            "#   4 KiB random reads and writes at depth {MIXED_DEPTH}: {mixed:.0} IOPS (both)"
        );
    }
    let _ = writeln!(
        s,
        "#   1 MiB sequential read at depth 1: {:.1} MB/s",
        p.read_bps / 1e6
    );
    match (p.write_bps, p.write_4k_iops) {
        (Some(w), Some(iops)) => {
            let _ = writeln!(
                s,
                "#   1 MiB sequential write at depth 1: {:.1} MB/s; 4 KiB random write at depth 1: {iops:.0} IOPS",
                w / 1e6
            );
        }
        _ => {
            let _ = writeln!(
                s,
                "#   writes not probed (an existing device without --allow-overwrite)"
            );
        }
    }
    s
}
