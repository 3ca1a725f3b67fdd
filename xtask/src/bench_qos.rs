//! `cargo xtask bench-qos`: groups sharing a simulated SSD (`examples/devices/shared-ssd.spec`,
//! one hardware queue of 32 tags, so tenants contend in the scheduler), each scenario under
//! mclock, bfq and noop side by side (and cfq where weights are shared). Simulated runs are deterministic: a figure is the same
//! on every machine, so one run is the measurement.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, bail};
use serde_json::Value;

const DEVICE: &str = "examples/devices/shared-ssd.spec";
const POLICIES: &[&str] = &["mclock", "bfq", "noop"];

/// One fio job of a scenario, in `run`'s own job options.
fn job(name: &str, options: &str) -> Vec<String> {
    let mut args = vec![format!("--name={name}"), format!("--cgroup={name}")];
    args.extend(options.split_whitespace().map(|o| format!("--{o}")));
    args
}

const FLOOD: &str = "rw=randread bs=4k size=1g iodepth=64 time_based";

/// A run's JSON report.
fn run(root: &Path, policy: &str, args: &[String]) -> Result<Value> {
    let out = Command::new(root.join("target/release/schedhost"))
        .current_dir(root)
        .args([
            "run",
            "--policy",
            policy,
            "--device",
            DEVICE,
            "--output-format=json",
        ])
        .args(args)
        .output()
        .context("running schedhost")?;
    if !out.status.success() {
        bail!(
            "schedhost {} failed:\n{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    serde_json::from_slice(&out.stdout).context("schedhost's JSON report")
}

/// Each job's name, completed I/Os, p99 completion latency in µs and runtime in s.
fn jobs(report: &Value) -> Vec<(String, u64, f64, f64)> {
    report["jobs"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|j| {
            let read = &j["read"];
            (
                j["jobname"].as_str().unwrap_or("?").to_owned(),
                read["total_ios"].as_u64().unwrap_or(0),
                read["clat_ns"]["percentile"]["99.000000"]
                    .as_f64()
                    .unwrap_or(0.0)
                    / 1000.0,
                read["runtime"].as_f64().unwrap_or(0.0) / 1000.0,
            )
        })
        .collect()
}

fn ios(report: &Value) -> Vec<u64> {
    jobs(report).iter().map(|j| j.1).collect()
}

/// Runs every scenario and prints one table per scenario.
pub fn run_all(root: &Path) -> Result<()> {
    weights(root, "weights 3:1", &[300, 100])?;
    weights(root, "weights 1:1:2", &[100, 100, 200])?;
    reservation(root)?;
    limits(root)?;
    latency(root)?;
    swap(root)
}

/// Groups saturating the device with `weights`: each one's share of the I/Os against its
/// weight's. nr_requests is 256, as the kernel gives a queue of depth 128: with fewer
/// scheduler tags than the groups keep in flight, bios wait for tags in arrival order and
/// the tags, not the policy, decide the split.
fn weights(root: &Path, label: &str, weights: &[u32]) -> Result<()> {
    println!(
        "\n{label}, 2 s, every group at iodepth 64, nr_requests 256: share of I/Os (weight's share)"
    );
    let total: u32 = weights.iter().sum();
    // cfq serves weights too, by time (its quantum keeps 8 requests out, so it runs at a
    // fraction of the others' throughput on this device).
    for policy in ["mclock", "bfq", "cfq", "noop"] {
        let mut args = vec!["--nr-requests=256".to_owned()];
        for (i, w) in weights.iter().enumerate() {
            args.extend(job(
                &format!("g{i}"),
                &format!("{FLOOD} runtime=2s cgroup_weight={w}"),
            ));
        }
        let got = ios(&run(root, policy, &args)?);
        let sum: u64 = got.iter().sum();
        let cells: Vec<String> = got
            .iter()
            .zip(weights)
            .map(|(&n, &w)| {
                let share = n as f64 / sum as f64;
                let want = f64::from(w) / f64::from(total);
                format!(
                    "{share:.4} ({want:.4}, {:+.1} %)",
                    (share / want - 1.0) * 100.0
                )
            })
            .collect();
        println!("  {policy:<8} {}", cells.join("  "));
    }
    Ok(())
}

/// A group reserving 2000 IOPS at weight 1 against a flood at weight 1000.
fn reservation(root: &Path) -> Result<()> {
    println!(
        "\nreservation: `r` reserve_iops=2000,weight=1 at iodepth 8 against `flood` (cgroup_weight=1000, iodepth 64), 2 s"
    );
    for policy in POLICIES {
        let mut args = vec![
            "--group".to_owned(),
            "r:reserve_iops=2000,weight=1".to_owned(),
        ];
        args.extend(job(
            "r",
            "rw=randread bs=4k size=1g iodepth=8 time_based runtime=2s",
        ));
        args.extend(job(
            "flood",
            &format!("{FLOOD} runtime=2s cgroup_weight=1000"),
        ));
        let got = ios(&run(root, policy, &args)?);
        let r = got[0] as f64 / 2.0;
        println!(
            "  {policy:<8} r {r:.0} IOPS ({:.3} of 2000), flood {:.0} IOPS",
            r / 2000.0,
            got[1] as f64 / 2.0
        );
    }
    Ok(())
}

/// io.max limits, held by the host whichever policy runs. A limited job's bios wait in the
/// host, so the run lasts until the last of them is served: the figure is I/Os against
/// what the limit allows over the job's runtime, `1 + burst + rate × runtime`.
fn limits(root: &Path) -> Result<()> {
    println!("\nlimits (io.max), a group at iodepth 64 beside a flood");
    let cases: &[(&str, &str, u64, f64, f64)] = &[
        ("riops=1000, 10 s", "l:riops=1000", 10, 1000.0, 0.0),
        ("riops=1, 10 s", "l:riops=1", 10, 1.0, 0.0),
        (
            "riops=100,riops_burst=20, 1 s",
            "l:riops=100,riops_burst=20",
            1,
            100.0,
            20.0,
        ),
        (
            "rbps=4k (one 4 KiB read/s), 10 s",
            "l:rbps=4k",
            10,
            1.0,
            0.0,
        ),
    ];
    for &(label, spec, seconds, rate, burst) in cases {
        for policy in ["mclock", "noop"] {
            let mut args = vec!["--group".to_owned(), spec.to_owned()];
            args.extend(job("l", &format!("{FLOOD} runtime={seconds}s")));
            args.extend(job("flood", &format!("{FLOOD} runtime={seconds}s")));
            let got = jobs(&run(root, policy, &args)?);
            let (ios, runtime) = (got[0].1, got[0].3);
            let allowed = 1.0 + burst + rate * runtime;
            println!(
                "  {label:<34} {policy:<8} {ios} I/Os in {runtime:.3} s: {:.2} IOPS; allowed {allowed:.1} ({:+.3} %)",
                ios as f64 / runtime,
                (ios as f64 / allowed - 1.0) * 100.0
            );
        }
    }
    Ok(())
}

/// A group with io.latency's target at iodepth 1 against a flood.
fn latency(root: &Path) -> Result<()> {
    println!(
        "\nlatency target: `fast` latency_target_us=150 at iodepth 1 against `bulk` at iodepth 64, 5 s (the device alone: p99 97 µs at iodepth 1)"
    );
    for policy in ["mclock", "bfq", "deadline", "noop"] {
        let mut args = vec![
            "--group".to_owned(),
            "fast:latency_target_us=150".to_owned(),
        ];
        args.extend(job(
            "fast",
            "rw=randread bs=4k size=1g iodepth=1 time_based runtime=5s",
        ));
        args.extend(job("bulk", &format!("{FLOOD} runtime=5s")));
        let report = run(root, policy, &args)?;
        let got = jobs(&report);
        println!(
            "  {policy:<8} fast p99 {:.0} µs, {} I/Os; bulk {:.0} IOPS",
            got[0].2,
            got[0].1,
            got[1].1 as f64 / 5.0
        );
    }
    Ok(())
}

/// mclock → bfq → mclock under load with weights 3:1.
fn swap(root: &Path) -> Result<()> {
    println!("\nhot swap mclock → bfq (1 s) → mclock (2 s), weights 3:1, 3 s");
    let mut args = vec![
        "--swap-at=1s:bfq".to_owned(),
        "--swap-at=2s:mclock".to_owned(),
    ];
    args.extend(job("a", &format!("{FLOOD} runtime=3s cgroup_weight=300")));
    args.extend(job("b", &format!("{FLOOD} runtime=3s cgroup_weight=100")));
    let report = run(root, "mclock", &args)?;
    let got = ios(&report);
    let requests = &report["schedhost"]["requests"];
    let swaps: Vec<String> = report["schedhost"]["swaps"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| {
            format!(
                "{}→{} ok={} handed over {}",
                s["from"], s["to"], s["ok"], s["requests_handed_over"]
            )
        })
        .collect();
    println!(
        "  a:b {:.3}; requests {} dispatched {} completed {}; groups in the report {}; {}",
        got[0] as f64 / got[1] as f64,
        requests["requests"],
        requests["dispatched"],
        requests["completed"],
        report["schedhost"]["groups"].as_array().map_or(0, Vec::len),
        swaps.join(", ")
    );
    Ok(())
}
