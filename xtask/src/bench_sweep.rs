//! `cargo xtask bench-sweep`: the QoS property sweep. Cells are generated from a seed:
//! a policy, a simulated device, 2 to 6 groups with weights in 1–1000, an iodepth in 1–512
//! per group and nr_requests in 16–4096; each cell runs once under its policy and once under
//! noop (the same jobs, the same seed). Checked per cell, where it applies:
//!
//! - nothing lost or duplicated: every request dispatched completed, and no more;
//! - total IOPS at least 0.9 × noop's on the same cell (every policy);
//! - for the weight-serving policies (mclock, bfq), each group's share of the I/Os within
//!   ±3 % of its weight's share, when every group is backlogged and the device saturated:
//!   noop's cell ran at 0.97 or more of the device's peak (noop at iodepth 512) and every
//!   group has more requests outstanding than the device has tags, divided among groups;
//! - no group starved: every group completed I/O.
//!
//! Printed: how many cells each invariant was checked on and held, and the worst cells with
//! the command that reruns them.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, bail, ensure};
use serde_json::Value;

const POLICIES: &[&str] = &[
    "mclock",
    "bfq",
    "deadline",
    "kyber",
    "cfq",
    "time-slice",
    "anticipatory",
];
const WEIGHT_SERVING: &[&str] = &["mclock", "bfq"];
/// Devices and their driver tags in all (hardware queues × depth).
const DEVICES: &[(&str, u32)] = &[("sim:ssd", 256), ("sim:hdd", 31)];
const SHARE_TOLERANCE: f64 = 0.03;
const THROUGHPUT_FLOOR: f64 = 0.9;
/// Virtual run time of each run.
const RUNTIME: &str = "500ms";

/// One generated cell.
#[derive(Debug, Clone)]
struct Cell {
    policy: &'static str,
    device: &'static str,
    device_tags: u32,
    weights: Vec<u32>,
    iodepth: u32,
    nr_requests: u32,
    seed: u64,
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

fn cells(seed: u64, count: usize) -> Vec<Cell> {
    let mut rng = Rng(seed);
    (0..count)
        .map(|_| {
            let policy = POLICIES[rng.range(0, POLICIES.len() as u32 - 1) as usize];
            let (device, device_tags) = DEVICES[rng.range(0, DEVICES.len() as u32 - 1) as usize];
            let groups = rng.range(2, 6);
            Cell {
                policy,
                device,
                device_tags,
                weights: (0..groups).map(|_| rng.log_range(1, 1000)).collect(),
                iodepth: rng.log_range(1, 512),
                nr_requests: rng.log_range(16, 4096),
                seed: rng.next() % 1_000_000,
            }
        })
        .collect()
}

impl Cell {
    fn args(&self, policy: &str, iodepth: u32) -> Vec<String> {
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
        for (g, w) in self.weights.iter().enumerate() {
            args.extend([
                format!("--name=g{g}"),
                format!("--cgroup=g{g}"),
                format!("--cgroup_weight={w}"),
                "--rw=randread".into(),
                "--bs=4k".into(),
                "--size=1g".into(),
                format!("--iodepth={iodepth}"),
                format!("--runtime={RUNTIME}"),
                "--time_based".into(),
            ]);
        }
        args
    }

    fn command(&self) -> String {
        format!(
            "schedhost {}",
            self.args(self.policy, self.iodepth).join(" ")
        )
    }
}

/// What a run did: each group's I/Os, the total IOPS, and whether every request dispatched
/// completed exactly once.
struct Ran {
    ios: Vec<f64>,
    iops: f64,
    conserved: bool,
}

fn run(schedhost: &Path, args: &[String]) -> Result<Ran> {
    let out = Command::new(schedhost)
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
    let iops = jobs
        .iter()
        .map(|j| j["read"]["iops"].as_f64().unwrap_or(0.0))
        .sum();
    let r = &v["schedhost"]["requests"];
    let conserved = r["dispatched"].is_u64() && r["dispatched"] == r["completed"];
    Ok(Ran {
        ios,
        iops,
        conserved,
    })
}

/// A finding on one cell: the invariant, how far off (0 is exact), and what.
struct Finding {
    invariant: &'static str,
    error: f64,
    cell: usize,
    what: String,
}

pub fn sweep(root: &Path, seed: u64, count: usize) -> Result<()> {
    ensure!(count >= 1, "--cells takes 1 or more");
    let schedhost = root.join("target/release/schedhost");
    let cells = cells(seed, count);
    // The device's peak under noop, per device and group count (at iodepth 512).
    let mut peaks: std::collections::BTreeMap<(&str, usize), f64> = Default::default();
    let mut checked = [0usize; 4];
    let mut held = [0usize; 4];
    let mut findings: Vec<Finding> = Vec::new();
    // By policy: (throughput checked, held, shares checked, held).
    let mut by_policy: std::collections::BTreeMap<&str, [usize; 4]> = Default::default();
    let mut worst_share = 0.0f64;
    let mut worst_ratio = f64::INFINITY;
    for (i, cell) in cells.iter().enumerate() {
        if i % 50 == 0 {
            eprintln!("cell {i} of {count}");
        }
        let ours = run(&schedhost, &cell.args(cell.policy, cell.iodepth))
            .with_context(|| format!("cell {i}: {}", cell.command()))?;
        let noop = run(&schedhost, &cell.args("noop", cell.iodepth))
            .with_context(|| format!("cell {i}, noop"))?;
        let key = (cell.device, cell.weights.len());
        let peak = match peaks.get(&key) {
            Some(&p) => p,
            None => {
                let p = run(&schedhost, &cell.args("noop", 512))?.iops;
                peaks.insert(key, p);
                p
            }
        };
        // Nothing lost or duplicated.
        checked[0] += 1;
        if ours.conserved && noop.conserved {
            held[0] += 1;
        } else {
            findings.push(Finding {
                invariant: "conserved",
                error: 1.0,
                cell: i,
                what: "dispatched and completed differ".into(),
            });
        }
        // Throughput against noop's.
        checked[1] += 1;
        let ratio = ours.iops / noop.iops.max(1.0);
        worst_ratio = worst_ratio.min(ratio);
        let tally = by_policy.entry(cell.policy).or_default();
        tally[0] += 1;
        if ratio >= THROUGHPUT_FLOOR {
            held[1] += 1;
            tally[1] += 1;
        } else {
            findings.push(Finding {
                invariant: "throughput",
                error: THROUGHPUT_FLOOR - ratio,
                cell: i,
                what: format!("{ratio:.3} of noop's {:.0} IOPS", noop.iops),
            });
        }
        // No group starved.
        checked[2] += 1;
        if ours.ios.iter().all(|&n| n > 0.0) {
            held[2] += 1;
        } else {
            findings.push(Finding {
                invariant: "starved",
                error: 1.0,
                cell: i,
                what: format!("I/Os per group {:?}", ours.ios),
            });
        }
        // Shares, where every group is backlogged and the device saturated.
        let groups = cell.weights.len() as u32;
        let backlogged = cell.iodepth > cell.device_tags.div_ceil(groups);
        let saturated = noop.iops >= 0.97 * peak;
        if WEIGHT_SERVING.contains(&cell.policy) && backlogged && saturated {
            checked[3] += 1;
            by_policy.entry(cell.policy).or_default()[2] += 1;
            let total_w: f64 = cell.weights.iter().map(|&w| f64::from(w)).sum();
            let total_ios: f64 = ours.ios.iter().sum();
            let error = cell
                .weights
                .iter()
                .zip(&ours.ios)
                .map(|(&w, &n)| ((n / total_ios) / (f64::from(w) / total_w) - 1.0).abs())
                .fold(0.0, f64::max);
            worst_share = worst_share.max(error);
            if error <= SHARE_TOLERANCE {
                held[3] += 1;
                by_policy.entry(cell.policy).or_default()[3] += 1;
            } else {
                findings.push(Finding {
                    invariant: "shares",
                    error,
                    cell: i,
                    what: format!("a group {:.1} % off its weight's share", error * 100.0),
                });
            }
        }
    }
    println!("{count} cells from seed {seed} ({RUNTIME} each, every cell also under noop)");
    for (name, (c, h)) in [
        "nothing lost",
        "throughput ≥ 0.9 × noop",
        "no group starved",
        "shares ±3 %",
    ]
    .iter()
    .zip(checked.iter().zip(&held))
    {
        println!("{name:<26} held on {h} of {c} cells checked");
    }
    println!(
        "worst share error {:.1} %; worst throughput ratio {:.3}",
        worst_share * 100.0,
        worst_ratio
    );
    for (policy, [tc, th, sc, sh]) in &by_policy {
        println!("  {policy:<13} throughput held on {th} of {tc}; shares held on {sh} of {sc}");
    }
    findings.sort_by(|a, b| b.error.total_cmp(&a.error));
    // The worst of each invariant, so one kind does not hide the others.
    let mut shown = std::collections::BTreeMap::<&str, usize>::new();
    for f in findings.iter().filter(|f| {
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
            cell.command()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_are_a_function_of_the_seed_and_stay_in_their_ranges() {
        let (a, b) = (cells(7, 200), cells(7, 200));
        assert!(a.iter().zip(&b).all(|(x, y)| x.command() == y.command()));
        assert_ne!(cells(8, 1)[0].command(), a[0].command());
        for c in &a {
            assert!((2..=6).contains(&c.weights.len()));
            assert!(c.weights.iter().all(|w| (1..=1000).contains(w)));
            assert!((1..=512).contains(&c.iodepth) && (16..=4096).contains(&c.nr_requests));
        }
        assert!(a.iter().any(|c| c.iodepth <= 4) && a.iter().any(|c| c.iodepth >= 128));
    }
}
