//! `schedhost policy check`: the contract a policy must keep, checked on seeded simulated
//! workloads, with a report card in text or JSON and a non-zero exit on any violation.

use std::sync::Arc;

use anyhow::{Result, bail};
use schedhost::backend::sim::FaultPlan;
use schedhost::contract::{
    CheckOptions, CheckReport, DEFAULT_CHECK_WATCHDOG_NS, Maker, check_policy,
};
use schedhost::policy::load;

use super::OutputFormat;
use super::flags::{Devices, PolicyFlags, RunFlags, Scope};

/// Fuel per call under check: honest policies use a few thousand units a call on these
/// workloads; a call that needs millions is doing something no scheduler needs.
const CHECK_FUEL: u64 = 2_000_000;

/// What `policy check` does with the run flags: its rounds run simulated devices of its own,
/// and a fault ends a round.
const SCOPE: Scope = Scope {
    command: "policy check",
    devices: Devices::Sim,
    own_seed: None,
    own_queue: None,
    own_on_fault: Some("a round ends at the policy's first fault, which is what the check reports"),
    own_ring: None,
    own_threads: None,
    own_status: None,
    own_events: Some(
        "the check runs many rounds; record one run's events with `run --trace-events`",
    ),
    default_fuel: Some(CHECK_FUEL),
    default_watchdog_ns: Some(DEFAULT_CHECK_WATCHDOG_NS),
};

#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// A component (PATH.wasm), a bundled name, or native:NAME, with tunables after a colon
    /// as `--set` takes them.
    pub policy: String,
    /// Workloads to run, alternating the simulated SSD and HDD; odd ones swap the policy
    /// out and back in.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub rounds: u32,
    /// Virtual time per workload, in seconds.
    #[arg(long, value_name = "SECS", default_value_t = 1.0)]
    pub runtime: f64,
    /// Longest a request may wait in the policy (submission to dispatch) before it is a
    /// violation, in ms.
    #[arg(long, value_name = "MS", default_value_t = 5000, value_parser = clap::value_parser!(u64).range(1..=86_400_000))]
    pub max_wait_ms: u64,
    /// The run flags, as `run`'s: `--seed` is the first workload's (round r uses SEED + r);
    /// fuel defaults to 2 000 000 units a call here, and `--watchdog` to 2 s of virtual time
    /// (holding requests while dispatching nothing that long is a fault); a round ends at
    /// the policy's first fault, which is what the check reports.
    #[command(flatten)]
    pub flags: RunFlags,
    /// The policy's flags, as `run`'s: `--set` on every instance; the check swaps the policy
    /// out and back in itself and runs no real device, so `--swap-at` and `--control` are
    /// refused.
    #[command(flatten)]
    pub policy_flags: PolicyFlags,
    /// Report format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Normal)]
    pub output_format: OutputFormat,
}

impl CheckArgs {
    pub fn execute(self) -> Result<()> {
        if !(self.runtime > 0.0 && self.runtime <= 3600.0) {
            bail!("--runtime {}: give 0 < SECS ≤ 3600", self.runtime);
        }
        let plan = self.flags.plan(&SCOPE, FaultPlan::default(), false)?;
        self.policy_flags.refuse(
            "policy check",
            Some("odd rounds swap the policy out and back in themselves"),
            Some("the check's rounds are simulated; control a run on a real device with `run --control`"),
        )?;
        let runtime = self.flags.runtime(&SCOPE)?;
        let (name, settings) = self.policy_flags.policy_and_settings(&self.policy)?;
        let (source, loaded) = load(&runtime, name)?;
        let make: Maker = Arc::new(move || loaded.instantiate().map_err(|e| format!("{e:#}")));
        let options = CheckOptions {
            plan,
            rounds: self.rounds,
            runtime_ns: (self.runtime * 1e9) as u64,
            max_wait_ns: self.max_wait_ms * 1_000_000,
            settings,
        };
        let report = check_policy(&make, &options);
        match self.output_format {
            OutputFormat::Json | OutputFormat::JsonPlus => {
                println!("{}", serde_json::to_string_pretty(&report)?)
            }
            OutputFormat::Normal => print!(
                "{}",
                schedhost::output::printable_lines(&card(&source.label(), &report))
            ),
        }
        // A shortfall of the check's own coverage is not the policy's fault: say so.
        if !report.passed && report.violations.iter().all(|v| v.rule == "coverage") {
            bail!(
                "the check fell short of its coverage with {}, which broke no rule it checked: \
                 give more --rounds or --runtime",
                self.policy
            );
        }
        if !report.passed {
            bail!(
                "{} broke the policy contract ({} violation{})",
                self.policy,
                report.violations.len(),
                if report.violations.len() == 1 {
                    ""
                } else {
                    "s"
                }
            );
        }
        Ok(())
    }
}

/// The text report card.
fn card(source: &str, r: &CheckReport) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let verdict = if r.passed { "PASS" } else { "FAIL" };
    let _ = writeln!(out, "policy check: {} ({source}): {verdict}", r.policy);
    for round in &r.rounds {
        let _ = writeln!(
            out,
            "  seed {:<4} {:<8} {} ctxs{}: {} requests, {} dispatched, {:.3} s virtual",
            round.seed,
            round.device,
            round.ctxs,
            if round.swaps {
                ", swapped out and back"
            } else {
                ""
            },
            round.requests,
            round.dispatched,
            round.end_ns as f64 / 1e9
        );
    }
    let _ = writeln!(
        out,
        "  longest wait in the policy (bound {:.0} ms):",
        r.max_wait_ns as f64 / 1e6
    );
    for w in &r.waits {
        let _ = writeln!(
            out,
            "    {:<5} {:<6} {:>10.3} ms",
            w.class,
            w.direction,
            w.longest_ns as f64 / 1e6
        );
    }
    let yes = |b: bool| if b { "yes" } else { "no" };
    let _ = writeln!(
        out,
        "  same seed, same dispatch order: {}",
        yes(r.deterministic)
    );
    let _ = writeln!(out, "  tunables checked: {}", r.tunables_checked);
    let state = r
        .state_bytes
        .map_or_else(|| "failed".to_owned(), |n| format!("{n} bytes round-trip"));
    let _ = writeln!(out, "  save/restore: {state}");
    let _ = writeln!(
        out,
        "  cost: {:.0} ns of policy calls per request ({} calls)",
        r.cost_ns_per_request, r.calls
    );
    let memory = r.memory_high_water_bytes.map_or_else(
        || "not counted (native)".to_owned(),
        |b| format!("{} KiB", b / 1024),
    );
    let _ = writeln!(out, "  memory high-water: {memory}");
    let (c, m) = (&r.coverage, &r.coverage_minimums);
    let _ = writeln!(out, "  exercised (times, minimum):");
    for clause in &schedhost::contract::CLAUSES {
        let (got, need) = (c.of(clause), m.of(clause));
        let _ = writeln!(out, "    {:<40} {got:>8} {need:>8}", clause.label);
    }
    if r.violations.is_empty() {
        let _ = writeln!(out, "  violations: none");
    } else {
        let _ = writeln!(out, "  violations:");
        for v in &r.violations {
            let _ = writeln!(out, "    [{}] {}", v.rule, v.detail);
        }
    }
    out
}
