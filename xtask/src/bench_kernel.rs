//! `cargo xtask bench-kernel`: the differential harness. A matrix of multi-job workloads runs
//! on one loop device under each kernel scheduler the kernel offers (fio, io_uring), and
//! under schedhost's counterpart over the kernel's `none` on the same device, interleaved
//! round by round. Per job: IOPS, its share of the workload's IOPS, p50 and p99 of the
//! latency from submission to completion; each beside the kernel's, with the issue's
//! tolerances (share and total ±10 %, p99 ±30 %) judged per row.
//!
//! The kernel's side is loaded by fio, or (`--load schedhost`) by schedhost itself passing
//! every request straight through (noop, no merging, tags for every request the jobs keep
//! in flight): then both sides have one load generator, and what differs is the scheduler.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, ensure};
use serde_json::Value;

use crate::loop_device::LoopDevice;

/// A kernel scheduler and the bundled policy that follows it.
const PAIRS: &[(&str, &str)] = &[
    ("none", "noop"),
    ("mq-deadline", "deadline"),
    ("kyber", "kyber"),
    ("bfq", "bfq"),
];

/// One workload of the matrix: its jobs as fio job sections (4 KiB unless a section says
/// otherwise), without the `[global]` section the harness writes.
struct Workload {
    label: &'static str,
    sections: &'static str,
}

const WORKLOADS: &[Workload] = &[
    Workload {
        label: "4 readers QD1",
        sections: "[r]\nrw=randread\niodepth=1\nnumjobs=4\n",
    },
    Workload {
        label: "4 readers QD8",
        sections: "[r]\nrw=randread\niodepth=8\nnumjobs=4\n",
    },
    Workload {
        label: "seq + random reader",
        sections: "[seq]\nrw=read\nbs=64k\niodepth=1\n[rand]\nrw=randread\niodepth=1\n",
    },
    Workload {
        label: "readers + buffered writer",
        sections: "[r]\nrw=randread\niodepth=1\nnumjobs=2\n[w]\nrw=write\nbs=64k\ndirect=0\n",
    },
    Workload {
        label: "readers + direct writer",
        sections: "[r]\nrw=randread\niodepth=1\nnumjobs=2\n[w]\nrw=randwrite\niodepth=8\n",
    },
    Workload {
        label: "RT beside BE",
        sections: "[rt]\nrw=randread\niodepth=8\nprioclass=1\n[be]\nrw=randread\niodepth=8\nprioclass=2\n",
    },
    Workload {
        label: "deep mixed",
        sections: "[m]\nrw=randrw\niodepth=32\nnumjobs=2\n",
    },
    Workload {
        label: "4k seq writes QD64",
        sections: "[w]\nrw=write\niodepth=64\n",
    },
];

/// What drives the kernel's side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Load {
    /// fio, io_uring: a user's view of the kernel.
    Fio,
    /// schedhost over the kernel's scheduler, holding nothing back: the same engine on both
    /// sides, so an engine's cost (fio's processes against one io_uring loop) divides out.
    Schedhost,
}

impl Load {
    /// `fio` or `schedhost`.
    pub fn parse(name: &str) -> Result<Self> {
        match name {
            "fio" => Ok(Self::Fio),
            "schedhost" => Ok(Self::Schedhost),
            other => anyhow::bail!("--load takes fio or schedhost, not {other:?}"),
        }
    }
}

/// Tolerances the issue names: a job's share and the total within 10 % of the kernel's, p99
/// within 30 %.
const SHARE_TOLERANCE: f64 = 0.10;
const TOTAL_TOLERANCE: f64 = 0.10;
const P99_TOLERANCE: f64 = 0.30;

/// Every round's figures of one workload under one pair: (the kernel's runs, schedhost's).
type Rounds = (Vec<Vec<JobFigures>>, Vec<Vec<JobFigures>>);

/// What one job did in one run.
#[derive(Debug, Clone)]
struct JobFigures {
    name: String,
    iops: f64,
    p50_us: f64,
    p99_us: f64,
}

/// Runs the matrix (workloads whose label contains `only`), `rounds` rounds of `seconds` each.
/// Returns an error when a run fails; misses are printed, not errors: they are findings.
pub fn run(root: &Path, rounds: usize, seconds: u32, only: &str, load: Load) -> Result<()> {
    ensure!(
        Command::new("fio").arg("--version").output().is_ok(),
        "fio is not installed (apt-get install fio)"
    );
    ensure!(
        rounds >= 1 && seconds >= 1,
        "--rounds and --seconds take 1 or more"
    );
    let schedhost = root.join("target/release/schedhost");
    let file = root.join("target/bench/fio-compare.dat");
    crate::bench_fio::prepare(&schedhost, &file)?;
    let jobs_dir = root.join("target/bench/kernel");
    std::fs::create_dir_all(&jobs_dir)?;
    let dev = LoopDevice::attach(&file)?;
    let pairs = dev.offered(PAIRS);
    let workloads: Vec<&Workload> = WORKLOADS
        .iter()
        .filter(|w| w.label.contains(only))
        .collect();
    ensure!(
        !workloads.is_empty(),
        "bench-kernel: no workload's label contains {only:?}"
    );
    println!(
        "{rounds} rounds of {seconds} s on {} over {}; the kernel's side loaded by {}; medians \
         per job; latency from submission to completion (fio's lat with lat_percentiles=1)",
        dev.path,
        file.display(),
        match load {
            Load::Fio => "fio",
            Load::Schedhost => "schedhost passing every request through",
        }
    );
    // samples[workload][pair] = (kernel runs, schedhost runs)
    let mut samples: Vec<Vec<Rounds>> = workloads
        .iter()
        .map(|_| pairs.iter().map(|_| (Vec::new(), Vec::new())).collect())
        .collect();
    for round in 0..rounds {
        eprintln!("round {} of {rounds}", round + 1);
        for (w, workload) in workloads.iter().enumerate() {
            let fio_job = jobs_dir.join(format!("w{w}-fio.fio"));
            let ours_job = jobs_dir.join(format!("w{w}-schedhost.fio"));
            std::fs::write(&fio_job, job_text(workload, seconds, Some(&dev.path)))?;
            std::fs::write(&ours_job, job_text(workload, seconds, None))?;
            for (p, &(kernel, policy)) in pairs.iter().enumerate() {
                dev.set_scheduler(kernel)?;
                let mut generator = match load {
                    Load::Fio => {
                        let mut fio = Command::new("fio");
                        fio.args(["--output-format=json"]).arg(&fio_job);
                        fio
                    }
                    Load::Schedhost => passthrough(&schedhost, &dev.path, &ours_job),
                };
                let theirs = figures(&mut generator)
                    .with_context(|| format!("{load:?} load, {kernel}, {}", workload.label))?;
                dev.set_scheduler("none")?;
                let mut ours = Command::new(&schedhost);
                ours.args(["--policy", policy, "--output-format", "json", "--device"])
                    .arg(&dev.path)
                    // The loop device is over this benchmark's own file.
                    .arg("--allow-overwrite")
                    .arg(&ours_job);
                let ours = figures(&mut ours)
                    .with_context(|| format!("schedhost, {policy}, {}", workload.label))?;
                samples[w][p].0.push(theirs);
                samples[w][p].1.push(ours);
            }
        }
    }
    let mut misses = Vec::new();
    let mut rows = 0;
    println!(
        "{:<26} {:<20} {:<6} {:>8} {:>6} {:>7} {:>7} | {:>8} {:>6} {:>7} {:>7} | {:>6} {:>6}  verdict",
        "workload",
        "kernel / schedhost",
        "job",
        "IOPS",
        "share",
        "p50 µs",
        "p99 µs",
        "IOPS",
        "share",
        "p50 µs",
        "p99 µs",
        "share×",
        "p99×"
    );
    for (w, workload) in workloads.iter().enumerate() {
        for (p, &(kernel, policy)) in pairs.iter().enumerate() {
            let (theirs, ours) = (&samples[w][p].0, &samples[w][p].1);
            let (k, s) = (medians(theirs)?, medians(ours)?);
            ensure!(
                k.len() == s.len(),
                "{}: fio reported {} jobs and schedhost {}",
                workload.label,
                k.len(),
                s.len()
            );
            let (k_total, s_total) = (total(&k), total(&s));
            let pair = format!("{kernel} / {policy}");
            for (kj, sj) in k.iter().zip(&s) {
                rows += 1;
                let (k_share, s_share) = (kj.iops / k_total, sj.iops / s_total);
                let share_ratio = s_share / k_share;
                let p99_ratio = sj.p99_us / kj.p99_us;
                let mut verdict = Vec::new();
                if !within(share_ratio, SHARE_TOLERANCE) {
                    verdict.push("share");
                }
                if !within(p99_ratio, P99_TOLERANCE) {
                    verdict.push("p99");
                }
                let verdict = if verdict.is_empty() {
                    "holds".to_owned()
                } else {
                    misses.push(format!(
                        "{} {pair} {}: {}",
                        workload.label,
                        kj.name,
                        verdict.join(", ")
                    ));
                    format!("MISS {}", verdict.join(", "))
                };
                println!(
                    "{:<26} {:<20} {:<6} {:>8.0} {:>6.3} {:>7.0} {:>7.0} | {:>8.0} {:>6.3} {:>7.0} {:>7.0} | {:>6.2} {:>6.2}  {verdict}",
                    workload.label,
                    pair,
                    kj.name,
                    kj.iops,
                    k_share,
                    kj.p50_us,
                    kj.p99_us,
                    sj.iops,
                    s_share,
                    sj.p50_us,
                    sj.p99_us,
                    share_ratio,
                    p99_ratio
                );
            }
            rows += 1;
            let total_ratio = s_total / k_total;
            let verdict = if within(total_ratio, TOTAL_TOLERANCE) {
                "holds".to_owned()
            } else {
                misses.push(format!("{} {pair} total: {total_ratio:.2}", workload.label));
                "MISS total".to_owned()
            };
            println!(
                "{:<26} {:<20} {:<6} {:>8.0} {:>6} {:>7} {:>7} | {:>8.0} {:>6} {:>7} {:>7} | {:>6.2} {:>6}  {verdict}",
                workload.label,
                pair,
                "total",
                k_total,
                "",
                "",
                "",
                s_total,
                "",
                "",
                "",
                total_ratio,
                ""
            );
        }
    }
    scheduler_effects(&workloads, &pairs, &samples)?;
    println!(
        "{} of {rows} rows within tolerance (share and total ±{:.0} %, p99 ±{:.0} %)",
        rows - misses.len(),
        SHARE_TOLERANCE * 100.0,
        P99_TOLERANCE * 100.0
    );
    for miss in &misses {
        println!("miss: {miss}");
    }
    Ok(())
}

/// schedhost loading the kernel's scheduler: noop passing each request on as it comes (no
/// merging, the default 128 tags: more than any workload keeps in flight), so the kernel's
/// scheduler sees every request at once, as it does under fio.
fn passthrough(schedhost: &Path, device: &str, job: &Path) -> Command {
    let mut cmd = Command::new(schedhost);
    cmd.args([
        "--policy",
        "noop",
        "--nomerges",
        "2",
        "--output-format",
        "json",
    ])
    .args(["--device", device, "--allow-overwrite"])
    .arg(job);
    cmd
}

/// Each scheduler's total against its own side's baseline (the kernel's `none`, schedhost's
/// `noop`), so that what differs between fio and schedhost as engines (processes against one
/// io_uring loop, merging in the plug) divides out and what is left is the scheduler's effect.
fn scheduler_effects(
    workloads: &[&Workload],
    pairs: &[(&str, &str)],
    samples: &[Vec<Rounds>],
) -> Result<()> {
    let Some(base) = pairs.iter().position(|&(kernel, _)| kernel == "none") else {
        return Ok(());
    };
    println!(
        "{:<26} {:<20} {:>12} {:>12} {:>7}",
        "workload", "kernel / schedhost", "kernel/none", "ours/noop", "ratio"
    );
    for (w, workload) in workloads.iter().enumerate() {
        let k_base = total(&medians(&samples[w][base].0)?);
        let s_base = total(&medians(&samples[w][base].1)?);
        for (p, &(kernel, policy)) in pairs.iter().enumerate() {
            if p == base {
                continue;
            }
            let k = total(&medians(&samples[w][p].0)?) / k_base;
            let s = total(&medians(&samples[w][p].1)?) / s_base;
            println!(
                "{:<26} {:<20} {k:>12.3} {s:>12.3} {:>7.3}",
                workload.label,
                format!("{kernel} / {policy}"),
                s / k
            );
        }
    }
    Ok(())
}

/// The workload as a job file: `[global]` with the device (fio's side only: schedhost gets
/// it from `--device`), the run time and 4 KiB direct I/O over 256 MiB per job, then its
/// jobs. fio's clones share their region of a device; schedhost gives each clone its own,
/// so four clones fill the 1 GiB file.
fn job_text(workload: &Workload, seconds: u32, fio_device: Option<&str>) -> String {
    let mut text = String::from("[global]\nsize=256m\nbs=4k\ndirect=1\ntime_based\n");
    text.push_str(&format!("runtime={seconds}\n"));
    if let Some(device) = fio_device {
        // fio only: its engine, and latency percentiles from submission, which is where
        // schedhost's clock starts too.
        text.push_str(&format!(
            "filename={device}\nioengine=io_uring\nlat_percentiles=1\n"
        ));
    }
    text.push_str(workload.sections);
    text
}

fn within(ratio: f64, tolerance: f64) -> bool {
    ratio.is_finite() && (ratio - 1.0).abs() <= tolerance
}

fn total(jobs: &[JobFigures]) -> f64 {
    jobs.iter().map(|j| j.iops).sum()
}

/// Runs one side and reads each job's figures from its JSON report, in the report's order
/// (both fio and schedhost list clones in order, one entry each).
fn figures(cmd: &mut Command) -> Result<Vec<JobFigures>> {
    let json = crate::bench_fio::json_report(cmd)?;
    let jobs = json["jobs"].as_array().context("no jobs in the report")?;
    let mut clones = std::collections::BTreeMap::<String, usize>::new();
    jobs.iter()
        .map(|job| {
            let name = job["jobname"].as_str().unwrap_or("?").to_owned();
            let n = clones.entry(name.clone()).or_default();
            let label = format!("{name}.{n}");
            *n += 1;
            job_figures(job, label)
        })
        .collect()
}

/// A job's IOPS over both directions, and the percentiles of the direction that did more.
fn job_figures(job: &Value, name: String) -> Result<JobFigures> {
    let ios = |dir: &str| job[dir]["total_ios"].as_f64().unwrap_or(0.0);
    let main = if ios("write") > ios("read") {
        "write"
    } else {
        "read"
    };
    let iops =
        job["read"]["iops"].as_f64().unwrap_or(0.0) + job["write"]["iops"].as_f64().unwrap_or(0.0);
    let dir = &job[main];
    let latency = if dir["lat_ns"]["percentile"].is_object() {
        &dir["lat_ns"]
    } else {
        &dir["clat_ns"]
    };
    let pct = |p: &str| {
        latency["percentile"][p]
            .as_f64()
            .map(|ns| ns / 1000.0)
            .with_context(|| format!("{name}: no {p} percentile of its {main}s"))
    };
    Ok(JobFigures {
        iops,
        p50_us: pct("50.000000")?,
        p99_us: pct("99.000000")?,
        name,
    })
}

/// Per job, the median of each figure over the rounds.
fn medians(runs: &[Vec<JobFigures>]) -> Result<Vec<JobFigures>> {
    let first = runs.first().context("no runs")?;
    ensure!(
        runs.iter().all(|r| r.len() == first.len()),
        "the number of jobs changed between rounds"
    );
    let mid = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    Ok((0..first.len())
        .map(|j| JobFigures {
            name: first[j].name.clone(),
            iops: mid(runs.iter().map(|r| r[j].iops).collect()),
            p50_us: mid(runs.iter().map(|r| r[j].p50_us).collect()),
            p99_us: mid(runs.iter().map(|r| r[j].p99_us).collect()),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_jobs_figures_come_from_the_direction_that_did_more_and_clones_are_numbered() {
        let report = serde_json::json!({"jobs": [
            {"jobname": "w", "read": {"iops": 0.0, "total_ios": 0},
             "write": {"iops": 500.0, "total_ios": 1000,
                       "lat_ns": {"percentile": {"50.000000": 2000.0, "99.000000": 9000.0}}}},
            {"jobname": "w", "read": {"iops": 100.0, "total_ios": 200,
                       "clat_ns": {"percentile": {"50.000000": 1000.0, "99.000000": 3000.0}}},
             "write": {"iops": 10.0, "total_ios": 20}},
        ]});
        let jobs = report["jobs"].as_array().unwrap();
        let a = job_figures(&jobs[0], "w.0".into()).unwrap();
        assert_eq!((a.iops, a.p50_us, a.p99_us), (500.0, 2.0, 9.0));
        let b = job_figures(&jobs[1], "w.1".into()).unwrap();
        assert_eq!((b.iops, b.p99_us), (110.0, 3.0));
    }

    #[test]
    fn the_tolerance_is_relative_and_a_missing_figure_misses() {
        assert!(within(1.09, 0.10) && within(0.91, 0.10));
        assert!(!within(1.11, 0.10) && !within(f64::NAN, 0.10) && !within(f64::INFINITY, 0.3));
    }

    #[test]
    fn only_fios_job_text_names_the_device_and_its_engine() {
        let w = &WORKLOADS[0];
        let fio = job_text(w, 3, Some("/dev/loop7"));
        let ours = job_text(w, 3, None);
        assert!(fio.contains("filename=/dev/loop7") && fio.contains("lat_percentiles=1"));
        assert!(!ours.contains("filename") && !ours.contains("ioengine"));
        assert!(ours.contains("runtime=3") && ours.ends_with(w.sections));
    }
}
