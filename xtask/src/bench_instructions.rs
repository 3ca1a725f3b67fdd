//! `cargo xtask bench-instructions`: the host's instructions per bio with a policy as a
//! component and natively, counted by valgrind's callgrind on `sim:null`. Counts repeat
//! exactly for the same binary and inputs, whatever else the machine is doing, so they show
//! changes of a few percent that timings on a shared machine cannot.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, bail, ensure};

/// Bios in the short and the long run; their difference leaves out start-up (loading and
/// compiling the component).
const SHORT: u64 = 100_000;
const LONG: u64 = 300_000;

pub fn run(root: &Path, policy: &str, depths: &[u32]) -> Result<()> {
    let schedhost = root.join("target/release/schedhost");
    println!(
        "instructions per bio on sim:null, 4k randread (callgrind; {LONG} minus {SHORT} bios)"
    );
    println!(
        "{:>8} {:>12} {:>12} {:>18}",
        "iodepth", "component", "native", "native/component"
    );
    for &depth in depths {
        let per_bio = |which: &str| -> Result<f64> {
            let short = instructions(&schedhost, which, depth, SHORT)?;
            let long = instructions(&schedhost, which, depth, LONG)?;
            ensure!(
                long > short,
                "callgrind counted fewer instructions for more bios"
            );
            Ok((long - short) as f64 / (LONG - SHORT) as f64)
        };
        let component = per_bio(policy)?;
        let native = per_bio(&format!("native:{policy}"))?;
        println!(
            "{depth:>8} {component:>12.1} {native:>12.1} {:>18.3}",
            native / component
        );
    }
    Ok(())
}

/// Instructions callgrind counts for one run of `bios` bios.
fn instructions(schedhost: &Path, policy: &str, depth: u32, bios: u64) -> Result<u64> {
    let out = Command::new("valgrind")
        .args(["--tool=callgrind", "--callgrind-out-file=/dev/null"])
        .arg(schedhost)
        .args(["run", "--policy", policy, "--device", "sim:null"])
        .args(["--name=b", "--rw=randread", "--bs=4k", "--size=4g"])
        .arg(format!("--iodepth={depth}"))
        .arg(format!("--number_ios={bios}"))
        // One compiler thread: a pool's idle spinning would differ from run to run.
        .env("RAYON_NUM_THREADS", "1")
        .output()
        .context("starting valgrind (apt-get install valgrind)")?;
    let log = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        bail!("{policy} at iodepth {depth} under callgrind failed:\n{log}");
    }
    log.lines()
        .find_map(|line| line.split("Collected : ").nth(1))
        .and_then(|n| n.trim().parse().ok())
        .with_context(|| format!("no instruction count in callgrind's output:\n{log}"))
}
