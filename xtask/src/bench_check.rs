//! `cargo xtask bench-check [--rounds N] [--baseline DIR] [--count] [--only P1,P2]`:
//! `policy check`'s cost line (ns of policy calls per request over its seeded workloads)
//! for every bundled policy (or those `--only` names) as a
//! component and natively, and for an older build beside it: DIR holds that build's
//! `schedhost` and its `policies/`. Interleaved round by round and pinned to one core, so
//! the machine's drift hits every column alike; medians are printed.
//!
//! With `--count`, instructions instead of time: callgrind counts a whole `policy check`
//! with `--rounds 4` and with `--rounds 2`, and the difference over the requests between
//! them (which cancels compiling and set-up) is printed per request. It counts the host's
//! side too (the simulated device, the jobs, the contract's recorder), so it is a total to
//! compare between builds and against native, not the timed line's share; where a call
//! lasts a few hundred ns, this machine's clock moves by more than the change measured.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

const POLICIES: &[&str] = &["noop", "deadline", "cfq", "bfq", "kyber", "time-slice"];

/// A build to measure: its binary and its components.
struct Build {
    label: String,
    schedhost: PathBuf,
    policies: PathBuf,
}

pub fn run(
    root: &Path,
    rounds: usize,
    baseline: Option<&Path>,
    count: bool,
    only: Option<&[&str]>,
) -> Result<()> {
    let policies: Vec<&str> = match only {
        Some(names) => {
            if let Some(bad) = names.iter().find(|n| !POLICIES.contains(n)) {
                bail!("--only {bad}: not one of {}", POLICIES.join(", "));
            }
            names.to_vec()
        }
        None => POLICIES.to_vec(),
    };
    let mut builds = Vec::new();
    if let Some(dir) = baseline {
        builds.push(Build {
            label: "before".into(),
            schedhost: dir.join("schedhost"),
            policies: dir.join("policies"),
        });
    }
    builds.push(Build {
        label: if baseline.is_some() { "after" } else { "this" }.into(),
        schedhost: root.join("target/release/schedhost"),
        policies: root.join("target/policies"),
    });
    if count {
        return print_counted(&builds, &policies);
    }
    // [policy][build][component, native]: every round's figure.
    let mut costs = vec![vec![[Vec::new(), Vec::new()]; builds.len()]; policies.len()];
    for _ in 0..rounds {
        for (p, policy) in policies.iter().enumerate() {
            for (b, build) in builds.iter().enumerate() {
                costs[p][b][0].push(cost(build, policy)?);
                costs[p][b][1].push(cost(build, &format!("native:{policy}"))?);
            }
        }
    }
    println!("policy check's cost, ns of policy calls per request (median of {rounds}, pinned)");
    print_header(&builds);
    for (p, policy) in policies.iter().enumerate() {
        print!("{policy:<12}");
        for [components, natives] in &costs[p] {
            let (component, native) = (median(components), median(natives));
            print!(
                " {component:>11.0} {native:>9.0} {:>7.2}",
                component / native
            );
        }
        println!();
    }
    Ok(())
}

/// One `policy check` run's cost line, pinned to the second core.
fn cost(build: &Build, policy: &str) -> Result<f64> {
    let out = Command::new("taskset")
        .args(["-c", "1"])
        .arg(&build.schedhost)
        .args(["policy", "check", policy])
        .env("SCHEDHOST_POLICY_DIR", &build.policies)
        .output()
        .context("starting taskset and schedhost")?;
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        bail!("{} policy check {policy} failed:\n{text}", build.label);
    }
    text.lines()
        .find_map(|l| l.trim().strip_prefix("cost: "))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .with_context(|| format!("no cost line in:\n{text}"))
}

/// The columns: each build's component, native and their ratio.
fn print_header(builds: &[Build]) {
    print!("{:<12}", "policy");
    for build in builds {
        print!(
            " {:>11} {:>9} {:>7}",
            format!("{} comp", build.label),
            "native",
            "ratio"
        );
    }
    println!();
}

/// `--count`'s table: instructions per request, component and native, for each build.
fn print_counted(builds: &[Build], policies: &[&str]) -> Result<()> {
    println!("policy check, instructions per request (callgrind, 4 rounds less 2)");
    print_header(builds);
    for policy in policies {
        print!("{policy:<12}");
        for build in builds {
            let component = counted(build, policy)?;
            let native = counted(build, &format!("native:{policy}"))?;
            print!(
                " {component:>11.0} {native:>9.0} {:>7.2}",
                component / native
            );
        }
        println!();
    }
    Ok(())
}

/// Instructions per request of `policy check`'s workloads, set-up cancelled.
fn counted(build: &Build, policy: &str) -> Result<f64> {
    let (short, short_requests) = check_under_callgrind(build, policy, 2)?;
    let (long, long_requests) = check_under_callgrind(build, policy, 4)?;
    if long <= short || long_requests <= short_requests {
        bail!("{policy}: more rounds counted no more instructions or requests");
    }
    Ok((long - short) as f64 / (long_requests - short_requests) as f64)
}

/// A whole `policy check` with `rounds` under callgrind: its instructions and the requests
/// its rounds report.
fn check_under_callgrind(build: &Build, policy: &str, rounds: u32) -> Result<(u64, u64)> {
    let out = Command::new("valgrind")
        .args(["--tool=callgrind", "--callgrind-out-file=/dev/null"])
        .arg(&build.schedhost)
        .args(["policy", "check", policy, "--output-format", "json"])
        .arg(format!("--rounds={rounds}"))
        .env("SCHEDHOST_POLICY_DIR", &build.policies)
        // One compiler thread: a pool's idle spinning would differ from run to run.
        .env("RAYON_NUM_THREADS", "1")
        .output()
        .context("starting valgrind (apt-get install valgrind)")?;
    let log = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        bail!(
            "{} policy check {policy} under callgrind failed:\n{log}",
            build.label
        );
    }
    let instructions = log
        .lines()
        .find_map(|line| line.split("Collected : ").nth(1))
        .and_then(|n| n.trim().parse().ok())
        .with_context(|| format!("no instruction count in callgrind's output:\n{log}"))?;
    let report: serde_json::Value =
        serde_json::from_slice(&out.stdout).context("policy check's JSON report")?;
    let requests = report["rounds"]
        .as_array()
        .context("policy check's JSON has no rounds")?
        .iter()
        .filter_map(|r| r["requests"].as_u64())
        .sum();
    Ok((instructions, requests))
}

fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted.get(sorted.len() / 2).copied().unwrap_or(f64::NAN)
}
