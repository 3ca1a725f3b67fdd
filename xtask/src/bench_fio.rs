//! `cargo xtask bench-fio`: raw fio (io_uring, O_DIRECT) against schedhost's policies on the
//! same file, same jobs, interleaved round by round so drift on a noisy machine hits every
//! column alike. Prints medians of IOPS and p99 latency (from submission by the job to
//! completion, on both sides), and ratios to fio.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::loop_device::LoopDevice;
use anyhow::{Context, Result, bail, ensure};
use serde_json::Value;

/// One row of the table: a job as fio options, and the policies to run it under.
struct Case {
    label: &'static str,
    options: &'static [&'static str],
    policies: &'static [&'static str],
}

const CASES: &[Case] = &[
    Case {
        label: "4k randread QD1",
        options: &["--rw=randread", "--bs=4k", "--iodepth=1"],
        policies: &["noop", "deadline", "cfq"],
    },
    Case {
        label: "4k randread QD32",
        options: &["--rw=randread", "--bs=4k", "--iodepth=32"],
        policies: &["noop", "deadline", "cfq"],
    },
    Case {
        label: "128k read QD8",
        options: &["--rw=read", "--bs=128k", "--iodepth=8"],
        policies: &["noop", "deadline", "cfq"],
    },
    Case {
        label: "4k randread QD2048",
        options: &["--rw=randread", "--bs=4k", "--iodepth=2048"],
        policies: &["noop", "deadline"],
    },
];

/// IOPS and p99 completion latency (µs) of one run.
#[derive(Debug, Clone, Copy)]
struct Sample {
    iops: f64,
    p99_us: f64,
}

/// Runs the comparison on the jobs whose label contains `only` (all if empty). `file` is
/// created and filled (1 GiB) if missing. With a `baseline` binary (an older build), each
/// policy also runs under it, in the same rounds, as `POLICY@base`: before and after in one
/// run.
pub fn run(
    root: &Path,
    file: Option<PathBuf>,
    rounds: usize,
    seconds: u32,
    only: &str,
    baseline: Option<&Path>,
) -> Result<()> {
    ensure!(
        Command::new("fio").arg("--version").output().is_ok(),
        "fio is not installed (apt-get install fio)"
    );
    let schedhost = root.join("target/release/schedhost");
    let file = file.unwrap_or_else(|| root.join("target/bench/fio-compare.dat"));
    prepare(&schedhost, &file)?;
    let runtime = format!("--runtime={seconds}");
    let common = [
        "--name=bench",
        "--size=1g",
        "--time_based",
        runtime.as_str(),
        "--direct=1",
    ];
    println!(
        "{} rounds of {seconds} s per cell on {}; medians, ratios to fio",
        rounds,
        file.display()
    );
    println!(
        "{:<20} {:<10} {:>10} {:>8} {:>10} {:>8}",
        "job", "runner", "IOPS", "ratio", "p99 µs", "ratio"
    );
    for case in CASES.iter().filter(|c| c.label.contains(only)) {
        let mut columns: Vec<(String, Vec<Sample>)> = std::iter::once("fio".to_owned())
            .chain(case.policies.iter().flat_map(|p| {
                let base = baseline.map(|_| format!("{p}@base"));
                std::iter::once((*p).to_owned()).chain(base)
            }))
            .map(|name| (name, Vec::new()))
            .collect();
        for _ in 0..rounds {
            for (name, samples) in &mut columns {
                let mut cmd = if name == "fio" {
                    let mut c = Command::new("fio");
                    c.args([
                        "--ioengine=io_uring",
                        "--output-format=json",
                        "--lat_percentiles=1",
                    ])
                    .arg(format!("--filename={}", file.display()));
                    c
                } else {
                    let (policy, binary) = match (name.strip_suffix("@base"), baseline) {
                        (Some(policy), Some(base)) => (policy, base),
                        _ => (name.as_str(), schedhost.as_path()),
                    };
                    let mut c = Command::new(binary);
                    c.args(["--policy", policy, "--output-format", "json"])
                        .arg("--device")
                        .arg(&file)
                        // The baseline finds the components this build made.
                        .env("SCHEDHOST_POLICY_DIR", root.join("target/policies"));
                    c
                };
                cmd.args(common).args(case.options);
                samples.push(
                    sample(&mut cmd).with_context(|| format!("{} under {name}", case.label))?,
                );
            }
        }
        let fio = median(&columns[0].1);
        for (name, samples) in &columns {
            let m = median(samples);
            println!(
                "{:<20} {:<10} {:>10.0} {:>8.3} {:>10.1} {:>8.3}",
                case.label,
                name,
                m.iops,
                m.iops / fio.iops,
                m.p99_us,
                m.p99_us / fio.p99_us
            );
        }
    }
    Ok(())
}

/// Creates and fills the file with schedhost itself, so reads hit written blocks.
pub(crate) fn prepare(schedhost: &Path, file: &Path) -> Result<()> {
    if file.exists() {
        return Ok(());
    }
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let status = Command::new(schedhost)
        .arg("--device")
        .arg(file)
        .args([
            "--name=fill",
            "--rw=write",
            "--bs=1m",
            "--iodepth=8",
            "--size=1g",
            "--output-format=json",
        ])
        .stdout(std::process::Stdio::null())
        .status()
        .context("running schedhost to fill the benchmark file")?;
    ensure!(status.success(), "filling {} failed", file.display());
    Ok(())
}

/// Runs fio or schedhost and reads its JSON report; a failed run's stderr is the error.
pub(crate) fn json_report(cmd: &mut Command) -> Result<Value> {
    let out = cmd.output().context("starting the runner")?;
    if !out.status.success() {
        bail!("{}", String::from_utf8_lossy(&out.stderr));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    // fio may print notes before its JSON.
    serde_json::from_str(&text[text.find('{').unwrap_or(0)..]).context("parsing the JSON report")
}

fn sample(cmd: &mut Command) -> Result<Sample> {
    let json = json_report(cmd)?;
    let read = &json["jobs"][0]["read"];
    let iops = read["iops"].as_f64().context("no read.iops")?;
    // schedhost's clat runs from the bio's arrival at the host to its completion, so it
    // compares with fio's total latency (slat + clat), reported with --lat_percentiles=1.
    let latency = if read["lat_ns"]["percentile"].is_object() {
        &read["lat_ns"]
    } else {
        &read["clat_ns"]
    };
    let p99 = latency["percentile"]["99.000000"]
        .as_f64()
        .context("no 99th latency percentile")?;
    Ok(Sample {
        iops,
        p99_us: p99 / 1000.0,
    })
}

fn median(samples: &[Sample]) -> Sample {
    let mid = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    Sample {
        iops: mid(samples.iter().map(|s| s.iops).collect()),
        p99_us: mid(samples.iter().map(|s| s.p99_us).collect()),
    }
}

/// `cargo xtask bench-affinity`: seed 2, completion placement. Four submitter threads read
/// back 128 KiB verified blocks; the elapsed time of each rq_affinity mode (and of the
/// inline submitters, for reference), interleaved round by round, as mean and standard
/// deviation.
pub fn affinity(root: &Path, file: Option<PathBuf>, rounds: usize) -> Result<()> {
    let schedhost = root.join("target/release/schedhost");
    let file = file.unwrap_or_else(|| root.join("target/bench/affinity.dat"));
    let job = [
        "--name=r",
        "--bs=128k",
        "--size=64m",
        "--numjobs=4",
        "--iodepth=8",
        "--verify=crc32c",
    ];
    if !file.exists() {
        if let Some(dir) = file.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let status = Command::new(&schedhost)
            .arg("--device")
            .arg(&file)
            .args(job)
            .args(["--rw=write", "--output-format=json"])
            .stdout(std::process::Stdio::null())
            .status()
            .context("writing the verified data")?;
        ensure!(status.success(), "writing {} failed", file.display());
    }
    let modes = ["0", "1", "2", "inline"];
    let mut elapsed: Vec<Vec<f64>> = vec![Vec::new(); modes.len()];
    for _ in 0..rounds {
        for (i, mode) in modes.iter().enumerate() {
            let mut cmd = Command::new(&schedhost);
            cmd.arg("--device")
                .arg(&file)
                .args(["--output-format=json", "--rw=read"])
                .args(job);
            if *mode != "inline" {
                cmd.args(["--rq-affinity", mode]);
            }
            let out = cmd.output().context("running schedhost")?;
            if !out.status.success() {
                bail!("{}", String::from_utf8_lossy(&out.stderr));
            }
            let json: Value = serde_json::from_slice(&out.stdout).context("parsing the report")?;
            let ns = json["schedhost"]["elapsed_ns"]
                .as_f64()
                .context("no schedhost.elapsed_ns")?;
            elapsed[i].push(ns / 1e6);
        }
    }
    println!(
        "{rounds} rounds, 4 threads reading 4 × 64 MiB of verified 128k blocks from {}",
        file.display()
    );
    println!(
        "{:<14} {:>10} {:>10} {:>10}",
        "rq_affinity", "mean ms", "stddev", "vs 0"
    );
    let base = mean(&elapsed[0]);
    for (mode, samples) in modes.iter().zip(&elapsed) {
        let m = mean(samples);
        let sd =
            (samples.iter().map(|x| (x - m).powi(2)).sum::<f64>() / samples.len() as f64).sqrt();
        println!("{mode:<14} {m:>10.1} {sd:>10.1} {:>10.3}", m / base);
    }
    Ok(())
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

/// `cargo xtask bench-loop`: the kernel's schedulers under fio against schedhost's policies
/// over the kernel's `none`, on one loop device (needs root). The loop device is created
/// over the benchmark file with direct I/O, and detached at the end.
pub fn loop_device(root: &Path, rounds: usize, seconds: u32) -> Result<()> {
    let schedhost = root.join("target/release/schedhost");
    let file = root.join("target/bench/fio-compare.dat");
    prepare(&schedhost, &file)?;
    let dev = LoopDevice::attach(&file)?;
    let runtime = format!("--runtime={seconds}");
    let filename = format!("--filename={}", dev.path);
    // (the kernel's scheduler under fio, schedhost's policy over none)
    let pairs = [
        ("none", "noop"),
        ("mq-deadline", "deadline"),
        ("bfq", "bfq"),
        ("kyber", "kyber"),
    ];
    let jobs: [(&str, &[&str]); 3] = [
        (
            "4k randread QD1",
            &["--rw=randread", "--bs=4k", "--iodepth=1"],
        ),
        (
            "4k randread QD32",
            &["--rw=randread", "--bs=4k", "--iodepth=32"],
        ),
        (
            "4k randrw QD16",
            &["--rw=randrw", "--bs=4k", "--iodepth=16"],
        ),
    ];
    let pairs = dev.offered(&pairs);
    println!(
        "{rounds} rounds of {seconds} s on {} over {}; medians; read IOPS and read p99",
        dev.path,
        file.display()
    );
    println!(
        "{:<18} {:<12} {:>9} {:>9} {:<10} {:>9} {:>9} {:>7}",
        "job", "kernel", "IOPS", "p99 µs", "schedhost", "IOPS", "p99 µs", "ratio"
    );
    for (label, options) in jobs {
        for &(kernel, policy) in &pairs {
            let (mut theirs, mut ours) = (Vec::new(), Vec::new());
            for _ in 0..rounds {
                dev.set_scheduler(kernel)?;
                let mut fio = Command::new("fio");
                fio.args([
                    "--name=bench",
                    "--ioengine=io_uring",
                    "--direct=1",
                    "--size=1g",
                    "--time_based",
                    "--output-format=json",
                    "--lat_percentiles=1",
                ])
                .args([runtime.as_str(), filename.as_str()])
                .args(options);
                theirs.push(sample(&mut fio).with_context(|| format!("fio with {kernel}"))?);
                dev.set_scheduler("none")?;
                let mut ours_cmd = Command::new(&schedhost);
                ours_cmd
                    .args([
                        "--policy",
                        policy,
                        "--output-format",
                        "json",
                        "--device",
                        &dev.path,
                        // The loop device is over this benchmark's own file.
                        "--allow-overwrite",
                    ])
                    .args([
                        "--name=bench",
                        "--size=1g",
                        "--time_based",
                        runtime.as_str(),
                    ])
                    .args(options);
                ours.push(sample(&mut ours_cmd).with_context(|| format!("schedhost {policy}"))?);
            }
            let (k, s) = (median(&theirs), median(&ours));
            println!(
                "{label:<18} {kernel:<12} {:>9.0} {:>9.1} {policy:<10} {:>9.0} {:>9.1} {:>7.3}",
                k.iops,
                k.p99_us,
                s.iops,
                s.p99_us,
                s.iops / k.iops
            );
        }
    }
    Ok(())
}
