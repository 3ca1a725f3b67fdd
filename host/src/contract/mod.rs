//! The policy contract, checked from outside: `schedhost policy check`. A policy runs on
//! seeded mixed workloads over the simulated devices, wrapped in a `recorder` that checks
//! every answer, with faults stopping the run (`--on-fault abort`) so none is hidden by a
//! fallback. Around the runs: its tunables, its saved state, and a second run of the first
//! seed, which must dispatch in the same order.

mod recorder;
mod tunables;
mod workload;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use schedhost_sdk::{PrioClass, Setup, Tunable};

pub use recorder::{CLAUSES, Clause, Coverage, LONG_WAIT_NS, Violation};
use recorder::{Record, recorded};
use tunables::{check_state, check_tunables};

use crate::backend::sim::{DeviceSpec, FaultPlan};
use crate::core::OnFault;
use crate::engine::{ScheduledSwap, Stop};
use crate::frontend::RunError;
use crate::frontend::plan::RunPlan;
use crate::frontend::run::{Device, Instances, PolicyPlan, run};
use crate::policy::{Fault, PolicyBackend, builtin_fifo};

/// Makes a fresh, uninitialised instance of the policy under check.
pub type Maker = Arc<dyn Fn() -> Result<Box<dyn PolicyBackend>, String> + Send + Sync>;

/// What to check, and how hard.
#[derive(Debug, Clone)]
pub struct CheckOptions {
    /// The runs' plan: the first workload's seed (round `r` uses `seed + r`), the queue's
    /// attributes and the watchdog (holding requests this long while dispatching nothing is
    /// a fault). Each round sets its own seed and faults, and ends at the policy's first
    /// fault; a pool left at its default gets room for every bio the workloads keep in
    /// flight.
    pub plan: RunPlan,
    /// Workloads to run: even rounds on the simulated SSD, odd ones on the HDD with the
    /// policy swapped out and back in.
    pub rounds: u32,
    /// Virtual time each workload runs.
    pub runtime_ns: u64,
    /// Longest a request may wait in the policy before it is a violation.
    pub max_wait_ns: u64,
    /// Tunables set on every instance.
    pub settings: Vec<(String, i64)>,
}

/// The watchdog under check: a round is seconds long, so a policy that holds requests for
/// two of them without dispatching is stuck.
pub const DEFAULT_CHECK_WATCHDOG_NS: u64 = 2_000_000_000;

impl Default for CheckOptions {
    fn default() -> Self {
        let mut plan = RunPlan::default();
        plan.supervision.watchdog_ns = Some(DEFAULT_CHECK_WATCHDOG_NS);
        Self {
            plan,
            rounds: 4,
            runtime_ns: 1_000_000_000,
            max_wait_ns: 5_000_000_000,
            settings: Vec::new(),
        }
    }
}

/// One workload's run.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RoundReport {
    /// Its seed.
    pub seed: u64,
    /// The simulated device.
    pub device: String,
    /// Whether the policy was swapped out and back in during it.
    pub swaps: bool,
    /// Submitters.
    pub ctxs: usize,
    /// Requests the policy was given.
    pub requests: u64,
    /// Requests it dispatched (the rest were absorbed by merges).
    pub dispatched: u64,
    /// Virtual time at the end, in ns.
    pub end_ns: u64,
}

/// The longest wait of one class and direction.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Wait {
    /// `rt`, `be` or `idle` (requests without a class count as `be`).
    pub class: &'static str,
    /// `read` or `write`.
    pub direction: &'static str,
    /// The longest submission-to-dispatch time seen, in ns.
    pub longest_ns: u64,
}

/// A policy as reports name it: an object with its name and version, in every command's
/// JSON (`run`'s, `policy check`'s, `ctl status`'s).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PolicyId {
    /// What it calls itself.
    pub name: String,
    /// Its version.
    pub version: String,
}

impl std::fmt::Display for PolicyId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.name, self.version)
    }
}

/// The report card.
#[derive(Debug, Clone, serde::Serialize)]
pub struct CheckReport {
    /// The policy's name and version, as it says.
    pub policy: PolicyId,
    /// True iff no rule was broken.
    pub passed: bool,
    /// Every broken rule (the first few of each run).
    pub violations: Vec<Violation>,
    /// The workloads run.
    pub rounds: Vec<RoundReport>,
    /// Longest waits, by class and direction.
    pub waits: Vec<Wait>,
    /// The bound on waits, in ns.
    pub max_wait_ns: u64,
    /// The first seed ran twice with the same dispatch order.
    pub deterministic: bool,
    /// Tunables checked (defaults in range, get and set round trips).
    pub tunables_checked: usize,
    /// Bytes of saved state that restored and saved again unchanged.
    pub state_bytes: Option<usize>,
    /// Wall-clock time in policy calls per request given to the policy, in ns. The card
    /// prints it; the JSON leaves it out, so the same seed gives the same bytes.
    #[serde(skip)]
    pub cost_ns_per_request: f64,
    /// Policy calls made.
    pub calls: u64,
    /// The most linear memory an instance held (components only).
    pub memory_high_water_bytes: Option<u64>,
    /// How often the runs reached each clause of the contract.
    pub coverage: Coverage,
    /// The least each clause must be reached for the check to count (scaled to the rounds
    /// and runtime asked for); short of it, the check itself failed (`coverage`).
    pub coverage_minimums: Coverage,
}

/// How the simulated devices fail in every round: rarely, but enough for hundreds of
/// errored completions, some late ones, and a reset.
fn round_faults(seed: u64, runtime_ns: u64) -> FaultPlan {
    // Probabilities per billion: 2 % errors and busy answers, 0.2 % late by 30 ms.
    let mut resets = [0; crate::backend::sim::MAX_RESETS];
    resets[0] = runtime_ns / 2;
    FaultPlan {
        read_errors: 20_000_000,
        write_errors: 20_000_000,
        busy: 20_000_000,
        spikes: (2_000_000, 30_000_000),
        resets,
        reset_count: 1,
        seed,
        ..FaultPlan::default()
    }
}

/// The minimums for `options`: each clause's per round-second, scaled. The hand-overs need a
/// second round (only odd rounds swap), and the mid-run sets a policy with tunables.
fn minimums(options: &CheckOptions, has_tunables: bool) -> Coverage {
    let scale = f64::from(options.rounds) * options.runtime_ns as f64 / 1e9;
    let mut minimum = Coverage::default();
    for clause in CLAUSES {
        *(clause.count)(&mut minimum) = (clause.per_round_second as f64 * scale).ceil() as u64;
    }
    if options.rounds < 2 {
        minimum.handed_over = 0;
    }
    if !has_tunables {
        minimum.tunables_set = 0;
    }
    minimum
}

/// Each clause short of its minimum, as a violation of the check itself.
fn short_clauses(coverage: &Coverage, minimum: &Coverage) -> Vec<Violation> {
    CLAUSES
        .iter()
        .filter(|clause| coverage.of(clause) < minimum.of(clause))
        .map(|clause| Violation {
            rule: "coverage",
            detail: format!(
                "the check itself fell short: it reached `{}` {} times, below its minimum of {}; the pass would not mean what it says (give more --rounds or --runtime)",
                clause.name,
                coverage.of(clause),
                minimum.of(clause)
            ),
        })
        .collect()
}

/// Checks the policy `make` builds.
pub fn check_policy(make: &Maker, options: &CheckOptions) -> CheckReport {
    let mut violations = Vec::new();
    let mut note = |rule: &'static str, detail: String| violations.push(Violation { rule, detail });
    let policy = match describe(make) {
        Ok(id) => id,
        Err(e) => {
            note("start", e);
            PolicyId {
                name: "?".into(),
                version: "?".into(),
            }
        }
    };
    let tunables_checked = check_tunables(make, &options.settings, &mut note);
    let state_bytes = check_state(make, &options.settings, &mut note);

    let mut rounds = Vec::new();
    let mut waits: BTreeMap<(PrioClass, &'static str), u64> = BTreeMap::new();
    let (mut call_ns, mut calls, mut requests) = (0u64, 0u64, 0u64);
    let mut memory = None;
    let mut first_order = None;
    let mut coverage = Coverage::default();
    for r in 0..options.rounds {
        let seed = options.plan.seed.wrapping_add(u64::from(r));
        let run = run_round(make, options, seed, r);
        // Every violation names the workload that shows it, so it can be run again.
        let device = run.report.device.clone();
        violations.extend(run.record.violations.iter().map(|v| {
            let mut v = v.clone();
            if !v.detail.starts_with("seed ") {
                v.detail = format!("seed {seed} on {device}: {}", v.detail);
            }
            v
        }));
        if run.record.violation_count > run.record.violations.len() as u64 {
            violations.push(Violation {
                rule: "more",
                detail: format!(
                    "seed {seed}: {} more violations not listed",
                    run.record.violation_count - run.record.violations.len() as u64
                ),
            });
        }
        if let Some(stop) = run.stop {
            violations.push(stop);
        }
        for (&key, &wait) in &run.record.longest_wait_ns {
            let longest = waits.entry(key).or_default();
            *longest = (*longest).max(wait);
        }
        coverage.add(&run.record.coverage);
        coverage.error_completions += run.errors;
        call_ns += run.record.call_ns;
        calls += run.record.calls;
        requests += run.record.inserted;
        memory = memory.max(run.record.memory_bytes);
        if r == 0 {
            first_order = Some(run.record.order_hash);
        }
        rounds.push(run.report);
    }
    let deterministic = match first_order {
        Some(hash) => {
            let again = run_round(make, options, options.plan.seed, 0);
            let same = again.record.order_hash == hash;
            if !same {
                violations.push(Violation {
                    rule: "nondeterministic",
                    detail: format!(
                        "seed {} dispatched in a different order the second time",
                        options.plan.seed
                    ),
                });
            }
            same
        }
        None => false,
    };
    let waits: Vec<Wait> = waits
        .into_iter()
        .map(|((class, direction), longest_ns)| Wait {
            class: class_name(class),
            direction,
            longest_ns,
        })
        .collect();
    for w in &waits {
        if w.longest_ns > options.max_wait_ns {
            violations.push(Violation {
                rule: "wait-bound",
                detail: format!(
                    "a {} {} waited {:.1} ms in the policy, past the bound of {:.1} ms (--max-wait-ms)",
                    w.class,
                    w.direction,
                    w.longest_ns as f64 / 1e6,
                    options.max_wait_ns as f64 / 1e6
                ),
            });
        }
    }
    let coverage_minimums = minimums(options, tunables_checked > 0);
    // Short coverage says the check ran too little to judge; after a real violation (a
    // stall that ended a round early, say) it is only noise about that.
    if violations.is_empty() {
        violations.extend(short_clauses(&coverage, &coverage_minimums));
    }
    CheckReport {
        policy,
        passed: violations.is_empty(),
        violations,
        rounds,
        waits,
        max_wait_ns: options.max_wait_ns,
        deterministic,
        tunables_checked,
        state_bytes,
        cost_ns_per_request: call_ns as f64 / requests.max(1) as f64,
        calls,
        memory_high_water_bytes: memory,
        coverage,
        coverage_minimums,
    }
}

fn class_name(class: PrioClass) -> &'static str {
    match class.effective() {
        PrioClass::Rt => "rt",
        PrioClass::Idle => "idle",
        _ => "be",
    }
}

fn describe(make: &Maker) -> Result<PolicyId, String> {
    let mut p = make()?;
    let info = p.info().map_err(|f| one_line(&f))?;
    Ok(PolicyId {
        name: info.name,
        version: info.version,
    })
}

const SETUP: Setup = Setup {
    hw_queues: 1,
    queue_depth: 32,
    nr_requests: 64,
    rotational: true,
};

/// A fault or stop in one line: its message's first line (a trap's wasm backtrace follows).
fn one_line(what: &dyn std::fmt::Display) -> String {
    what.to_string()
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned()
}

struct Round {
    report: RoundReport,
    record: Record,
    stop: Option<Violation>,
    /// Requests the device failed.
    errors: u64,
}

/// Round `round` with `seed`: even rounds on the simulated SSD, odd ones on the HDD with
/// the policy swapped out and back in.
fn run_round(make: &Maker, options: &CheckOptions, seed: u64, round: u32) -> Round {
    let record = recorder::record();
    let swaps = round % 2 == 1;
    let (device_name, device_text) = if swaps {
        ("hdd, NCQ 1", "model = hdd\nncq_depth = 1\n")
    } else {
        (
            "ssd, 8 tags",
            "model = ssd\nhw_queues = 1\nqueue_depth = 8\n",
        )
    };
    let jobs = workload::jobs(seed, options.runtime_ns);
    let ctxs = jobs
        .as_ref()
        .map_or(0, |jobs| jobs.iter().map(|j| j.numjobs as usize).sum());
    let mut stop = None;
    let mut end_ns = 0;
    let mut errors = 0;
    // Devices that take few requests at once, so most wait in the policy, where merges,
    // coalescing, budgets and long waits reach it.
    let result = DeviceSpec::parse_file(std::path::Path::new(device_name), device_text)
        .map_err(|e| Violation {
            rule: "host",
            detail: e.to_string(),
        })
        .and_then(|device| {
            let jobs = jobs.as_ref().map_err(|e| Violation {
                rule: "host",
                detail: format!("the check's own workload does not parse: {e}"),
            })?;
            let started = make().map_err(|detail| Violation {
                rule: "start",
                detail,
            })?;
            let policy: Box<dyn PolicyBackend> = Box::new(recorded(started, &record));
            let schedule = if swaps {
                swap_out_and_in(make, &record, options)
            } else {
                Vec::new()
            };
            let mut plan = options.plan;
            plan.seed = seed;
            plan.supervision.on_fault = OnFault::Abort;
            plan.faults = round_faults(seed, options.runtime_ns);
            // Room in the scheduler for every bio the jobs keep in flight: none waits for a
            // tag where merges would reach no policy.
            plan.queue.nr_requests = plan.queue.nr_requests.or(Some(1024));
            let policy = PolicyPlan {
                instances: Instances::Given(vec![policy]),
                settings: &options.settings,
                swaps: schedule,
                control: None,
            };
            run(jobs, &Device::Sim(device), policy, &plan, &mut |_| {})
                .map(|ran| ran.outcome)
                .map_err(|e| stop_reason(&e))
        });
    match result {
        Ok(outcome) => {
            end_ns = outcome.end_ns;
            errors = outcome
                .stats
                .iter()
                .flat_map(|s| s.dirs.iter())
                .map(|d| d.errors)
                .sum();
            for swap in &outcome.swaps {
                if let Err(why) = &swap.result {
                    stop = Some(Violation {
                        rule: "swap",
                        detail: format!("seed {seed}: swap to {} refused: {why}", swap.to),
                    });
                }
            }
        }
        Err(why) => stop = Some(why),
    }
    if let Some(v) = &mut stop {
        v.detail = format!("seed {seed} on {device_name}: {}", v.detail);
    }
    let record = Arc::try_unwrap(record)
        .map(|m| m.into_inner().unwrap_or_else(PoisonError::into_inner))
        .unwrap_or_else(|shared| {
            std::mem::take(&mut *shared.lock().unwrap_or_else(PoisonError::into_inner))
        });
    Round {
        report: RoundReport {
            seed,
            device: device_name.to_owned(),
            swaps,
            ctxs,
            requests: record.inserted,
            dispatched: record.dispatched,
            end_ns,
        },
        record,
        stop,
        errors,
    }
}

/// A quarter of the way through, a fresh instance of the policy takes over from the running
/// one with its saved state (a newer build's hot swap); halfway, the built-in FIFO takes
/// over; three quarters through, a fresh instance takes its requests back.
fn swap_out_and_in(
    make: &Maker,
    record: &Arc<Mutex<Record>>,
    options: &CheckOptions,
) -> Vec<ScheduledSwap> {
    let fresh = |at_ns: u64, label: &str| {
        let (make, shared) = (Arc::clone(make), Arc::clone(record));
        ScheduledSwap {
            at_ns,
            label: label.into(),
            policy: Box::new(move || {
                Ok(Box::new(recorded(make()?, &shared)) as Box<dyn PolicyBackend>)
            }),
            settings: options.settings.clone(),
        }
    };
    vec![
        fresh(options.runtime_ns / 4, "the policy, its state handed over"),
        ScheduledSwap {
            at_ns: options.runtime_ns / 2,
            label: "the built-in FIFO".into(),
            policy: Box::new(|| Ok(builtin_fifo())),
            settings: Vec::new(),
        },
        fresh(options.runtime_ns / 4 * 3, "the policy again"),
    ]
}

fn stop_reason(e: &RunError) -> Violation {
    let rule = match e {
        RunError::Stopped(Stop::Fault { .. }) => "fault",
        RunError::Stopped(Stop::Stalled { .. }) | RunError::PastHorizon(_) => "stall",
        RunError::Start(_) => "start",
        RunError::Layout(_)
        | RunError::Setup(_)
        | RunError::Target(_)
        | RunError::Verify { .. }
        | RunError::Ring { .. }
        | RunError::Stopped(Stop::Driver(_) | Stop::Straddles { .. }) => "host",
    };
    Violation {
        rule,
        detail: one_line(e),
    }
}
