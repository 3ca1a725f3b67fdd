//! `cargo xtask bench-check [--rounds N] [--baseline DIR]`: `policy check`'s cost line (ns of
//! policy calls per request over its seeded workloads) for every bundled policy as a
//! component and natively, and for an older build beside it: DIR holds that build's
//! `schedhost` and its `policies/`. Interleaved round by round and pinned to one core, so
//! the machine's drift hits every column alike; medians are printed.

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

pub fn run(root: &Path, rounds: usize, baseline: Option<&Path>) -> Result<()> {
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
    // [policy][build][component, native]: every round's figure.
    let mut costs = vec![vec![[Vec::new(), Vec::new()]; builds.len()]; POLICIES.len()];
    for _ in 0..rounds {
        for (p, policy) in POLICIES.iter().enumerate() {
            for (b, build) in builds.iter().enumerate() {
                costs[p][b][0].push(cost(build, policy)?);
                costs[p][b][1].push(cost(build, &format!("native:{policy}"))?);
            }
        }
    }
    println!("policy check's cost, ns of policy calls per request (median of {rounds}, pinned)");
    print!("{:<12}", "policy");
    for build in &builds {
        print!(
            " {:>11} {:>9} {:>7}",
            format!("{} comp", build.label),
            "native",
            "ratio"
        );
    }
    println!();
    for (p, policy) in POLICIES.iter().enumerate() {
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

fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted.get(sorted.len() / 2).copied().unwrap_or(f64::NAN)
}
