//! `cargo xtask bench-sweep`: the QoS property sweep. Cells are generated from a seed:
//! a policy, a device (`sim:ssd`, `sim:hdd`, or a DiskSim drive of `examples/validation`),
//! 2 to 6 groups with weights in 1–1000, an iodepth in 1–512 per group, nr_requests in
//! 16–4096, an io.max read limit on one group (a third of the cells) and a hot swap halfway
//! to another policy (a third); each cell runs once under its policy and once under noop
//! (the same jobs, limit and seed; noop does not swap). Checked per cell, where it applies:
//!
//! - nothing lost or duplicated: every request dispatched completed, and no more;
//! - total IOPS at least 0.9 × noop's on the same cell, on `sim:ssd` (every policy; one that
//!   idles on purpose and held requests from free tags for at least what it lost is named
//!   with the cell instead, and so is mclock's or bfq's cell where the shares cap the device
//!   under noop's depth and the policy ran at 0.9 or more of what noop does at that depth;
//!   disks are counted apart);
//! - for mclock and bfq (not swapped away), each group's share of
//!   the I/Os within ±3 % of its weight's share, when every group is backlogged and the
//!   device saturated: noop's cell ran at 0.97 or more of the device's peak (noop at iodepth
//!   512) and every group has more requests outstanding than the device has tags, divided
//!   among groups, and every group is owed 100 I/Os or more (so that ±3 % is three I/Os); a
//!   limited group's cell is not judged on shares. The I/Os counted are those completed
//!   after the run's first fifth (a ramp) and before its run time ends (not the drain);
//! - a limit is never exceeded (by more than one I/O over the run, the drain's time at the
//!   rate), and is reached within 1 % over the run time (the I/Os completed before it ended,
//!   against the rate times the run time) where the group had twice the limit to take (in
//!   each 100 ms window its part of what the window completed under the policy that ran
//!   it: its weight's under a policy that serves weights, mclock, bfq and cfq, an equal
//!   part under one that does not), judged over each side of a swap on its own and after
//!   the run's first fifth (a group completes its rate once its first requests' time in
//!   the queue is paid), and where the group asked its rate: under noop, which holds
//!   nothing back, it reached 0.99 of it (a group keeping `iodepth` requests out sends no
//!   more than `iodepth` a latency; where it asked less, the limit never bound, and the
//!   cell is named);
//! - no group starved, under policies that serve the groups (mclock, bfq and cfq, both
//!   sides of a swap; the others are measured the same way and printed apart, as their
//!   order is all they promise): on flash every group completes I/O in every 100 ms
//!   window in which its weight's part of the device is at least 4 I/Os (a group of
//!   weight 1 beside groups of 1000 is owed one I/O in seconds on a disk: weights are its
//!   promise, not a window);
//!   on a disk every group owed 4 I/Os or more over the run completes I/O in it (before its
//!   run time ends, not in the drain after it), and the windows are counted apart (a
//!   policy sorting by sector leaves a far region for up to a sweep or a read expiry).
//!
//! Printed: how many cells each invariant was checked on and held, and the worst cells with
//! the command that reruns them.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, bail, ensure};
use serde_json::Value;

mod invariants;

use invariants::*;

const POLICIES: &[&str] = &[
    "mclock",
    "bfq",
    "deadline",
    "kyber",
    "cfq",
    "time-slice",
    "anticipatory",
];
/// Policies that serve io.weight: a group is owed its weight's part of the device.
const WEIGHT_SERVING: &[&str] = &["mclock", "bfq", "cfq"];
/// Policies whose shares are judged to ±3 %: cfq's are by time, and a cell's run is too
/// short for them (on flash its first round of turns, one per group and at least two
/// `slice_idle`s each whatever the weight, is most of a 500 ms run).
const SHARES_JUDGED: &[&str] = &["mclock", "bfq"];
/// Policies that give a queue the device for a slice of time (or a budget with a timeout).
const SLICING: &[&str] = &["bfq", "cfq", "time-slice", "anticipatory"];
/// The devices; the DiskSim drive's path is the repository's. Their driver tags are read
/// from each run's report.
const DEVICES: &[&str] = &[FLASH, "sim:hdd", "examples/validation/atlas10k.parv"];
/// The one device without a head: throughput and 100 ms windows are judged on it.
const FLASH: &str = "sim:ssd";
const SHARE_TOLERANCE: f64 = 0.03;
const THROUGHPUT_FLOOR: f64 = 0.9;
/// Virtual run time of each run on flash, in ms.
const RUNTIME_MS: u64 = 500;
/// A disk's cells run this many times longer: a disk completes a few hundred I/Os a second,
/// so 500 ms leaves a group of weight 1 beside weights in the hundreds owed less than one
/// I/O, and the first window's start-up (the device's queue filled before any policy
/// bound holds) would be most of the run.
const DISK_RUNTIME_FACTOR: u64 = 10;
/// Shares are judged where every group is owed at least this many I/Os, so that ±3 % is
/// three I/Os and not a fraction of one.
const SHARE_RESOLUTION_IOS: f64 = 100.0;
/// Shares are counted after the first of this many parts of the run (a ramp, as fio's
/// `ramp_time`).
const SHARE_RAMP_PARTS: usize = 5;
/// The lean sweep the test command runs: its seed, cells and run time (the debug host).
#[cfg(test)]
const LEAN_SEED: u64 = 3;
#[cfg(test)]
const LEAN_CELLS: usize = 8;
#[cfg(test)]
const LEAN_RUNTIME_MS: u64 = 200;
/// The starvation window, in ms.
const WINDOW_MS: u64 = 100;
/// A group is owed progress in a window where its weight's part of the device is this many
/// I/Os.
const OWED_PER_WINDOW: f64 = 4.0;
/// A limit's tolerance, and the I/Os over a run it may be off by rounding.
const LIMIT_TOLERANCE: f64 = 0.01;

/// One generated cell.
#[derive(Debug, Clone)]
struct Cell {
    policy: &'static str,
    device: &'static str,
    weights: Vec<u32>,
    iodepth: u32,
    nr_requests: u32,
    seed: u64,
    /// io.max's riops on one group: (the group, a fraction of the device's peak over the
    /// groups), made a rate once the peak is known.
    limit: Option<(usize, f64)>,
    /// The policy swapped to halfway.
    swap: Option<&'static str>,
    /// Virtual run time.
    runtime_ms: u64,
}

/// splitmix64: the cells are a function of the sweep's seed alone.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..=hi`.
    fn range(&mut self, lo: u32, hi: u32) -> u32 {
        lo + (self.next() % u64::from(hi - lo + 1)) as u32
    }

    /// Log-uniform in `lo..=hi` (as many cells at 1–10 as at 100–1000).
    fn log_range(&mut self, lo: u32, hi: u32) -> u32 {
        let (a, b) = (f64::from(lo).ln(), f64::from(hi).ln());
        let u = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        ((a + u * (b - a)).exp().round() as u32).clamp(lo, hi)
    }
}

fn cells(seed: u64, count: usize, runtime_ms: u64) -> Vec<Cell> {
    let mut rng = Rng(seed);
    (0..count)
        .map(|_| {
            let policy = POLICIES[rng.range(0, POLICIES.len() as u32 - 1) as usize];
            let device = DEVICES[rng.range(0, DEVICES.len() as u32 - 1) as usize];
            let groups = rng.range(2, 6);
            let weights = (0..groups).map(|_| rng.log_range(1, 1000)).collect();
            let iodepth = rng.log_range(1, 512);
            let nr_requests = rng.log_range(16, 4096);
            let seed = rng.next() % 1_000_000;
            let limit = (rng.range(0, 2) == 0).then(|| {
                let group = rng.range(0, groups - 1) as usize;
                (group, f64::from(rng.log_range(5, 100)) / 100.0)
            });
            let swap = (rng.range(0, 2) == 0)
                .then(|| POLICIES[rng.range(0, POLICIES.len() as u32 - 1) as usize]);
            Cell {
                policy,
                device,
                weights,
                iodepth,
                nr_requests,
                seed,
                limit,
                swap,
                runtime_ms: if device == FLASH {
                    runtime_ms
                } else {
                    runtime_ms * DISK_RUNTIME_FACTOR
                },
            }
        })
        .collect()
}

impl Cell {
    /// The run's arguments under `policy` at `iodepth`; `riops` is the limit's rate, `swap`
    /// whether the cell's swap happens, `logs` the prefix of per-job IOPS logs.
    fn args(
        &self,
        policy: &str,
        iodepth: u32,
        riops: Option<u64>,
        swap: bool,
        logs: Option<&Path>,
    ) -> Vec<String> {
        let mut args = vec![
            "--policy".to_owned(),
            format!("native:{policy}"),
            "--device".into(),
            self.device.into(),
            "--nr-requests".into(),
            self.nr_requests.to_string(),
            "--seed".into(),
            self.seed.to_string(),
            "--output-format=json".into(),
        ];
        if let (Some(to), true) = (self.swap, swap) {
            args.push(format!("--swap-at={}ms:native:{to}", self.runtime_ms / 2));
        }
        if let (Some((g, _)), Some(rate)) = (self.limit, riops) {
            args.extend(["--group".into(), format!("g{g}:riops={rate}")]);
        }
        for (g, w) in self.weights.iter().enumerate() {
            args.extend([
                format!("--name=g{g}"),
                format!("--cgroup=g{g}"),
                format!("--cgroup_weight={w}"),
                "--rw=randread".into(),
                "--bs=4k".into(),
                "--size=1g".into(),
                format!("--iodepth={iodepth}"),
                format!("--runtime={}ms", self.runtime_ms),
                "--time_based".into(),
            ]);
            if let Some(prefix) = logs {
                args.extend([
                    format!("--write_iops_log={}/g{g}", prefix.display()),
                    format!("--log_avg_msec={WINDOW_MS}"),
                ]);
            }
        }
        args
    }

    /// The limit's rate on a device whose peak (noop, iodepth 512) is `peak` IOPS: at least
    /// 200, so that ±1 % is two I/Os over the run.
    fn riops(&self, peak: f64) -> Option<u64> {
        self.limit
            .map(|(_, fraction)| ((peak * fraction / self.weights.len() as f64) as u64).max(200))
    }

    fn command(&self, riops: Option<u64>) -> String {
        format!(
            "schedhost {}",
            self.args(self.policy, self.iodepth, riops, true, None)
                .join(" ")
        )
    }

    /// Group `g`'s part of the device over the run: its weight's under a policy that serves
    /// weights, else an equal one; with a swap halfway, half of each policy's.
    fn part(&self, g: usize) -> f64 {
        match self.swap {
            Some(to) => (self.part_under(g, self.policy) + self.part_under(g, to)) / 2.0,
            None => self.part_under(g, self.policy),
        }
    }

    /// Group `g`'s part of the device under `policy`.
    fn part_under(&self, g: usize, policy: &str) -> f64 {
        if WEIGHT_SERVING.contains(&policy) {
            let total: f64 = self.weights.iter().map(|&w| f64::from(w)).sum();
            f64::from(self.weights[g]) / total
        } else {
            1.0 / self.weights.len() as f64
        }
    }

    /// The policy the cell runs, and the one swapped in halfway if any.
    fn policies(&self) -> String {
        match self.swap {
            Some(to) => format!("{} then {to}", self.policy),
            None => self.policy.to_owned(),
        }
    }

    /// The policy that runs at `ms` into the run.
    fn policy_at(&self, ms: u64) -> &'static str {
        match self.swap {
            Some(to) if ms >= self.runtime_ms / 2 => to,
            _ => self.policy,
        }
    }

    /// Whether starvation is judged (else measured): every policy the cell runs serves the
    /// groups (the sweep: "no group starved" for mclock and bfq, and for cfq since it
    /// serves io.weight).
    fn serves_groups(&self) -> bool {
        WEIGHT_SERVING.contains(&self.policy)
            && self.swap.is_none_or(|to| WEIGHT_SERVING.contains(&to))
    }

    /// Whether starvation is judged window by window: on flash, under policies that give
    /// no queue the device for a slice; elsewhere over the run.
    fn windows_judged(&self) -> bool {
        let slicing =
            SLICING.contains(&self.policy) || self.swap.is_some_and(|to| SLICING.contains(&to));
        self.device == FLASH && !slicing
    }

    /// The most a device may hold while the heaviest group keeps its weight's part of it
    /// with requests of its own waiting in the policy: `iodepth × Σ weights / heaviest`.
    /// Under a policy that bounds the device for shares (mclock and bfq, either side of a
    /// swap), where that is under what noop keeps on the device (its iodepths together, at
    /// most `tags`); else `None`.
    fn shares_depth(&self, tags: u32) -> Option<u32> {
        let bounds = SHARES_JUDGED.contains(&self.policy)
            || self.swap.is_some_and(|to| SHARES_JUDGED.contains(&to));
        let total: u64 = self.weights.iter().map(|&w| u64::from(w)).sum();
        let heaviest = u64::from(self.weights.iter().copied().max()?.max(1));
        let depth = u32::try_from(u64::from(self.iodepth) * total / heaviest).ok()?;
        let noop_depth = (self.iodepth.saturating_mul(self.weights.len() as u32)).min(tags);
        (bounds && depth < noop_depth).then_some(depth)
    }

    /// Whether the shares are judged: the policies that serve the groups for the whole run
    /// are judged on them.
    fn shares_judged(&self) -> bool {
        SHARES_JUDGED.contains(&self.policy)
            && self.swap.is_none_or(|to| SHARES_JUDGED.contains(&to))
    }
}

/// What a run did: each group's I/Os, the total IOPS, and whether every bio was accounted
/// for and every request dispatched and completed exactly once.
struct Ran {
    ios: Vec<f64>,
    /// Each group's run time in s, from its first I/O to its last completion (past the
    /// nominal run time while its last bios drain).
    seconds: Vec<f64>,
    iops: f64,
    conserved: bool,
    /// The part of the run in which the policy held requests back from free driver tags.
    held: f64,
    /// The device's driver tags in all (hardware queues × depth).
    tags: u32,
}

fn run(root: &Path, schedhost: &Path, args: &[String]) -> Result<Ran> {
    let out = Command::new(schedhost)
        .current_dir(root)
        .args(args)
        .output()
        .context("running schedhost")?;
    if !out.status.success() {
        bail!("{}", String::from_utf8_lossy(&out.stderr));
    }
    let v: Value = serde_json::from_slice(&out.stdout).context("parsing the report")?;
    let jobs = v["jobs"].as_array().context("no jobs")?;
    let ios = jobs
        .iter()
        .map(|j| j["read"]["total_ios"].as_f64().unwrap_or(0.0))
        .collect();
    let seconds = jobs
        .iter()
        .map(|j| j["read"]["runtime"].as_f64().unwrap_or(0.0) / 1000.0)
        .collect();
    let iops = jobs
        .iter()
        .map(|j| j["read"]["iops"].as_f64().unwrap_or(0.0))
        .sum();
    let geometry = &v["schedhost"]["device"]["geometry"];
    let tags = (|| {
        let queues = u32::try_from(geometry["hw_queues"].as_u64()?).ok()?;
        queues.checked_mul(u32::try_from(geometry["queue_depth"].as_u64()?).ok()?)
    })()
    .context("the report has no device geometry")?;
    let r = &v["schedhost"]["requests"];
    let held = r["held_ns"].as_f64().unwrap_or(0.0)
        / v["schedhost"]["virtual_time_ns"]
            .as_f64()
            .unwrap_or(0.0)
            .max(1.0);
    // Every bio became a request or merged into one; every request not coalesced into
    // another was dispatched and completed once.
    let n = |key: &str| r[key].as_u64();
    let conserved = (|| {
        let (bios, requests, completed) = (n("bios")?, n("requests")?, n("completed")?);
        let merged = n("back_merges")? + n("front_merges")?;
        let coalesced = n("coalesced")?;
        Some(
            bios == requests + merged
                && requests.checked_sub(coalesced) == Some(completed)
                && n("dispatched")? == completed,
        )
    })()
    .unwrap_or(false);
    Ok(Ran {
        ios,
        seconds,
        iops,
        conserved,
        held,
        tags,
    })
}

/// A finding on one cell: the invariant, how far off (0 is exact), and what.
struct Finding {
    invariant: &'static str,
    error: f64,
    cell: usize,
    what: String,
}

/// The invariants, in the order they are counted.
const INVARIANTS: [&str; 7] = [
    "nothing lost",
    "throughput ≥ 0.9 × noop",
    "no group starved",
    "shares ±3 %",
    "limit never exceeded",
    "limit reached -1 %",
    UNSERVED_PROGRESS,
];
/// Starvation measured as [`INVARIANTS`]' third is, under policies that serve no groups:
/// counted and printed, not judged. Such a policy promises a group only its order (arrival,
/// or sector from an expired head): deadline on a disk, with five groups' 170 requests each
/// queued at once and each job's blocks in a region of its own, serves its batches in the
/// first groups' regions while the last group's requests wait in the FIFO behind them, as
/// mq-deadline's would (seed 1 cell 142).
const UNSERVED_PROGRESS: &str = "starved, serving no groups";

/// What a sweep found: per invariant, cells checked and held; per policy, (throughput
/// checked, held, shares checked, held); the findings; the worst figures.
#[derive(Default)]
struct Sweep {
    checked: [usize; 7],
    held: [usize; 7],
    by_policy: std::collections::BTreeMap<&'static str, [usize; 4]>,
    findings: Vec<Finding>,
    worst_share: f64,
    worst_ratio: f64,
    worst_limit: f64,
    /// On disks and under slicing policies: cells checked for 100 ms windows, and cells
    /// where every owed window had I/O.
    disk_windows: [usize; 2],
    /// On disks: cells, cells at 0.9 × noop's throughput or more, the worst ratio.
    disk_throughput: (usize, usize, f64),
    /// On flash, cells under 0.9 × noop's throughput where a policy that idles on purpose
    /// held requests from free tags for at least the part of the run it lost: (cell, ratio,
    /// held).
    idled: Vec<(usize, f64, f64)>,
    /// On flash, cells under 0.9 × noop's throughput where the shares capped the device
    /// (`Cell::shares_depth`) and the policy ran at 0.9 or more of noop's IOPS at that
    /// depth: (cell, ratio to noop, the shares' depth, ratio to noop at that depth).
    capped: Vec<(usize, f64, u32, f64)>,
    /// Cells that met the shares' conditions but where a group was owed fewer than
    /// [`SHARE_RESOLUTION_IOS`] I/Os.
    unresolved_shares: usize,
    /// Cells whose limited group noop did not bring to its rate, its iodepth at the
    /// device's latency asking less: (cell, its IOPS under noop, the rate).
    unbound: Vec<(usize, f64, u64)>,
    /// The limit's rate per cell, for the commands that rerun them.
    rates: Vec<Option<u64>>,
    /// Per cell: what it ran and measured, written beside the summary for analysis.
    records: Vec<Value>,
}

impl Sweep {
    fn judge(&mut self, invariant: usize, cell: usize, error: f64, what: impl FnOnce() -> String) {
        self.checked[invariant] += 1;
        if error <= 0.0 {
            self.held[invariant] += 1;
        } else {
            self.findings.push(Finding {
                invariant: INVARIANTS[invariant],
                error,
                cell,
                what: what(),
            });
        }
    }
}

/// Runs every cell and its noop counterpart with the host at `schedhost`, from `root`.
fn judge_cells(root: &Path, schedhost: &Path, cells: &[Cell]) -> Result<Sweep> {
    // Per process, so that the lean test and a bench do not share it.
    let logs = root.join(format!("target/bench/sweep-logs-{}", std::process::id()));
    let mut sweep = Sweep {
        worst_ratio: f64::INFINITY,
        disk_throughput: (0, 0, f64::INFINITY),
        ..Sweep::default()
    };
    // The device's peak under noop, per device and group count (at iodepth 512).
    let mut peaks: std::collections::BTreeMap<(&str, usize), f64> = Default::default();
    for (i, cell) in cells.iter().enumerate() {
        if i % 50 == 0 && cells.len() > 50 {
            eprintln!("cell {i} of {}", cells.len());
        }
        let key = (cell.device, cell.weights.len());
        let peak = match peaks.get(&key) {
            Some(&p) => p,
            None => {
                // The device's own peak: a pool that holds nothing back.
                let deep = Cell {
                    nr_requests: 4096,
                    ..cell.clone()
                };
                let p = run(root, schedhost, &deep.args("noop", 512, None, false, None))?.iops;
                peaks.insert(key, p);
                p
            }
        };
        let riops = cell.riops(peak);
        sweep.rates.push(riops);
        let _ = std::fs::remove_dir_all(&logs);
        std::fs::create_dir_all(&logs)?;
        let args = cell.args(cell.policy, cell.iodepth, riops, true, Some(&logs));
        let ours = run(root, schedhost, &args)
            .with_context(|| format!("cell {i}: {}", cell.command(riops)))?;
        let logged = read_logs(&logs, cell.weights.len(), cell.runtime_ms)?;
        let noop = run(
            root,
            schedhost,
            &cell.args("noop", cell.iodepth, riops, false, None),
        )
        .with_context(|| format!("cell {i}, noop"))?;
        let conserved = ours.conserved && noop.conserved;
        sweep.judge(0, i, f64::from(u8::from(!conserved)), || {
            "a bio or request not accounted for (bios, merges, coalesces, dispatches, completions)".into()
        });
        // Noop with the device held to the shares' depth, where a bound for shares may
        // have cost the throughput: what the device gives there.
        let capped = match cell.shares_depth(noop.tags) {
            Some(depth) if ours.iops < THROUGHPUT_FLOOR * noop.iops => {
                let per_group = depth.div_ceil(cell.weights.len() as u32).max(1);
                let args = cell.args("noop", per_group, riops, false, None);
                let ran = run(root, schedhost, &args)
                    .with_context(|| format!("cell {i}, noop at the shares' depth"))?;
                Some((depth, ran.iops))
            }
            _ => None,
        };
        throughput(&mut sweep, i, cell, &ours, &noop, capped);
        starvation(&mut sweep, i, cell, &ours, &logged);
        shares(&mut sweep, i, cell, &logged.ios, &noop, peak);
        limit(&mut sweep, i, cell, (&ours, &noop), &logged, riops);
        // Every invariant this cell missed, with what it measured: the summary prints only
        // the worst few of each.
        let missed: Vec<Value> = sweep
            .findings
            .iter()
            .filter(|f| f.cell == i)
            .map(|f| serde_json::json!({"invariant": f.invariant, "what": f.what}))
            .collect();
        sweep.records.push(serde_json::json!({
            "cell": i,
            "missed": missed,
            "policy": cell.policy,
            "device": cell.device,
            "weights": cell.weights,
            "iodepth": cell.iodepth,
            "nr_requests": cell.nr_requests,
            "riops": riops,
            "limited_group": cell.limit.map(|(g, _)| g),
            "swap_to": cell.swap,
            "iops": ours.iops,
            "held": ours.held,
            "noop_iops": noop.iops,
            "peak_iops": peak,
            "ios": ours.ios,
            "ios_in_run": logged.ios,
            "ios_within_runtime": logged.in_run,
            "command": cell.command(riops),
        }));
    }
    let _ = std::fs::remove_dir_all(&logs);
    Ok(sweep)
}

pub fn sweep(root: &Path, seed: u64, count: usize) -> Result<()> {
    ensure!(count >= 1, "--cells takes 1 or more");
    let schedhost = root.join("target/release/schedhost");
    let cells = cells(seed, count, RUNTIME_MS);
    let mut sweep = judge_cells(root, &schedhost, &cells)?;
    let record = root.join(format!("target/bench/sweep-seed{seed}-cells{count}.json"));
    std::fs::write(&record, serde_json::to_vec_pretty(&sweep.records)?)
        .with_context(|| format!("writing {}", record.display()))?;
    println!(
        "{count} cells from seed {seed} ({RUNTIME_MS} ms each on flash, {} ms on disks; every cell also under noop)",
        RUNTIME_MS * DISK_RUNTIME_FACTOR
    );
    for (name, (c, h)) in INVARIANTS.iter().zip(sweep.checked.iter().zip(&sweep.held)) {
        if *name == UNSERVED_PROGRESS {
            println!("{name:<26} none on {h} of {c} cells (measured, not judged)");
        } else {
            println!("{name:<26} held on {h} of {c} cells checked");
        }
    }
    println!(
        "worst share error {:.1} %; worst throughput ratio judged {:.3}; worst limit excess {:.2} %",
        sweep.worst_share * 100.0,
        sweep.worst_ratio,
        sweep.worst_limit * 100.0
    );
    println!(
        "on disks and under slicing policies (starvation judged over the run): every owed 100 ms window served on {} of {} cells",
        sweep.disk_windows[1], sweep.disk_windows[0]
    );
    println!(
        "shares not judged where the least group was owed under {SHARE_RESOLUTION_IOS} I/Os: {} cells",
        sweep.unresolved_shares
    );
    let (checked, held, worst) = sweep.disk_throughput;
    println!(
        "throughput on disks (not judged): at 0.9 × noop or more on {held} of {checked} cells, worst {worst:.3}"
    );
    println!(
        "throughput on flash under 0.9 × noop by a policy idling on purpose (held requests from free tags at least as long as it lost), {} cells:",
        sweep.idled.len()
    );
    for &(c, ratio, held) in &sweep.idled {
        let cell = &cells[c];
        let policy = cell.policies();
        println!(
            "  cell {c:>3} {policy:<26} {ratio:.3} of noop, held {:>3.0} % ({} groups, iodepth {}, nr_requests {})",
            held * 100.0,
            cell.weights.len(),
            cell.iodepth,
            cell.nr_requests
        );
    }
    println!(
        "throughput on flash under 0.9 × noop where the shares cap the device (the heaviest group keeps its part waiting only while the device holds at most iodepth × Σ weights / its weight, under noop's depth), at 0.9 or more of noop's IOPS at that depth, {} cells:",
        sweep.capped.len()
    );
    for &(c, ratio, depth, at_depth) in &sweep.capped {
        let cell = &cells[c];
        println!(
            "  cell {c:>3} {:<26} {ratio:.3} of noop, {at_depth:.3} of noop at {depth} on the device ({} groups, iodepth {}, nr_requests {})",
            cell.policy,
            cell.weights.len(),
            cell.iodepth,
            cell.nr_requests
        );
    }
    println!(
        "limit reached not judged where the group had twice its rate to take but asked less (under noop, which holds nothing back, under 0.99 of its rate: its iodepth at the device's latency), {} cells:",
        sweep.unbound.len()
    );
    for &(c, under_noop, rate) in &sweep.unbound {
        let cell = &cells[c];
        let policy = cell.policies();
        println!(
            "  cell {c:>3} {policy:<26} {under_noop:.0} IOPS under noop of riops={rate} ({} groups, iodepth {}, nr_requests {})",
            cell.weights.len(),
            cell.iodepth,
            cell.nr_requests
        );
    }
    for (policy, [tc, th, sc, sh]) in &sweep.by_policy {
        println!("  {policy:<13} throughput held on {th} of {tc}; shares held on {sh} of {sc}");
    }
    println!("every cell's figures: {}", record.display());
    sweep.findings.sort_by(|a, b| b.error.total_cmp(&a.error));
    // The worst of each invariant, so one kind does not hide the others.
    let mut shown = std::collections::BTreeMap::<&str, usize>::new();
    for f in sweep.findings.iter().filter(|f| {
        let n = shown.entry(f.invariant).or_default();
        *n += 1;
        *n <= 5
    }) {
        let cell = &cells[f.cell];
        println!(
            "{:<10} cell {:>3}: {} (weights {:?}, iodepth {}, nr_requests {})\n    {}",
            f.invariant,
            f.cell,
            f.what,
            cell.weights,
            cell.iodepth,
            cell.nr_requests,
            cell.command(sweep.rates[f.cell])
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests;
