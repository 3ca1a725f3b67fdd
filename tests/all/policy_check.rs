//! `policy check`: the bundled policies keep the contract; every chaos mode, and policies
//! written here to break one rule each, fail it with that rule named.

use schedhost_sdk::RequestId;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use schedhost::contract::{CheckOptions, CheckReport, Maker, Violation, check_policy};
use schedhost::policy::{NativePolicy, PolicyBackend};
use schedhost_sdk::{Dispatch, MergeEvent, Policy, Request, Setup, TunableSpec};

use crate::helpers::component_maker;

/// Short runs: the rules are broken early or not at all on these workloads.
fn quick() -> CheckOptions {
    CheckOptions {
        rounds: 2,
        runtime_ns: 300_000_000,
        ..CheckOptions::default()
    }
}

fn native<P: Policy + Send + 'static>() -> Maker {
    Arc::new(|| Ok(Box::new(NativePolicy::<P>::default()) as Box<dyn PolicyBackend>))
}

fn rules(report: &CheckReport) -> Vec<&'static str> {
    report.violations.iter().map(|v| v.rule).collect()
}

#[test]
fn the_six_bundled_policies_pass_with_cost_and_memory_reported() {
    for name in [
        "noop",
        "deadline",
        "cfq",
        "time-slice",
        "kyber",
        "bfq",
        "anticipatory",
    ] {
        let Some(make) = component_maker(name) else {
            return;
        };
        let report = check_policy(&make, &quick());
        assert!(report.passed, "{name}: {:?}", report.violations);
        assert!(report.deterministic, "{name}");
        assert!(report.rounds.iter().all(|r| r.dispatched > 0), "{name}");
        assert!(
            report.memory_high_water_bytes.is_some_and(|b| b > 0),
            "{name}"
        );
        assert!(
            report.calls > 0 && report.cost_ns_per_request > 0.0,
            "{name}"
        );
        assert!(!report.waits.is_empty(), "{name}");
    }
}

#[test]
fn kernel_faithful_policies_pass_at_the_checks_own_defaults() {
    // deadline holding lower classes while a higher one is on the device, and cfq and bfq
    // idling for a queue, must still reach every clause's minimum: a user's
    // `policy check deadline` once failed on `front-merges` (76 of 100) and cfq's on
    // `tunables-set` (33 of 100).
    for (name, make) in [
        ("deadline", native::<schedhost_policy_deadline::Deadline>()),
        ("cfq", native::<schedhost_policy_cfq::Cfq>()),
        ("bfq", native::<schedhost_policy_bfq::Bfq>()),
    ] {
        let report = check_policy(&make, &CheckOptions::default());
        assert!(report.passed, "{name}: {:?}", report.violations);
    }
}

#[test]
fn every_chaos_mode_fails_check_with_its_violation_named() {
    // mode → the rule that names it, and a phrase of its detail.
    let expected: [(i64, &str, &str); 10] = [
        (1, "fault", "deadline"),
        (2, "fault", "trapped"),
        (3, "fault", "insert-and-dispatch"),
        (4, "unknown-id", "never given"),
        (5, "dispatched-twice", "again"),
        (6, "stall", "none asked for a wake-up"),
        (7, "fault", "fuel"),
        (8, "save-restore", "restore-state"),
        (9, "fault", "times in a row"),
        (10, "fault", "starved"),
    ];
    let Some(make) = component_maker("chaos") else {
        return;
    };
    assert_each_mode_fails(&make, &expected, &[]);
}

/// Checks chaos in each `(mode, rule, phrase)` of `expected` (with `settings` besides the
/// mode) and asserts it fails with that rule, the phrase in its detail. A leaked id (mode
/// 15) is one the device has (`dispatched-twice`) or had (`unknown-id`).
fn assert_each_mode_fails(make: &Maker, expected: &[(i64, &str, &str)], settings: &[(&str, i64)]) {
    for &(mode, rule, phrase) in expected {
        let mut all = vec![("mode".to_owned(), mode)];
        all.extend(settings.iter().map(|&(k, v)| (k.to_owned(), v)));
        let options = CheckOptions {
            settings: all,
            ..quick()
        };
        let report = check_policy(make, &options);
        assert!(!report.passed, "mode {mode} passed");
        let leaked =
            |v: &Violation| mode == 15 && ["dispatched-twice", "unknown-id"].contains(&v.rule);
        assert!(
            report
                .violations
                .iter()
                .any(|v| (v.rule == rule || leaked(v)) && v.detail.contains(phrase)),
            "mode {mode}: no [{rule}] … {phrase:?} in {:?}",
            report.violations
        );
        for v in &report.violations {
            assert_ne!(
                v.rule, "coverage",
                "mode {mode}: coverage advice beside a real violation: {:?}",
                report.violations
            );
            assert!(
                // The tunables and saved-state checks, and the longest waits over all rounds,
                // belong to no one workload.
                ["tunables", "save-restore", "wait-bound"].contains(&v.rule)
                    || v.detail.starts_with("seed "),
                "mode {mode}: [{}] does not name its seed: {}",
                v.rule,
                v.detail
            );
        }
    }
}

#[test]
fn policies_that_break_in_merges_state_handover_or_requeue_fail_by_name() {
    // Each passed when a check let a few dozen merge notifications reach the policy, its
    // swaps never handed state over, and no device was ever busy.
    let expected: [(i64, &str, &str); 4] = [
        (13, "fault", "merged"),
        (14, "absorbed-id", "a merge had absorbed"),
        (15, "", "dispatched"),
        // Requests it forgot are held by the host, never dispatched.
        (16, "stall", "cannot progress"),
    ];
    let Some(make) = component_maker("chaos") else {
        return;
    };
    assert_each_mode_fails(&make, &expected, &[("after", 200)]);
}

#[test]
fn the_card_counts_every_clause_and_a_check_too_short_to_reach_them_fails_itself() {
    let make = native::<schedhost_policy_noop::Noop>();
    let report = check_policy(&make, &quick());
    assert!(report.passed, "{:?}", report.violations);
    let (c, m) = (report.coverage, report.coverage_minimums);
    for (clause, got, need) in [
        ("back merges", c.back_merges, m.back_merges),
        ("front merges", c.front_merges, m.front_merges),
        ("coalesced", c.coalesced, m.coalesced),
        ("errors", c.error_completions, m.error_completions),
        ("handed over", c.handed_over, m.handed_over),
        ("requeues", c.requeues, m.requeues),
    ] {
        assert!(need >= 10 && got >= need, "{clause}: {got} of {need}");
    }
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["coverage"]["back_merges"], c.back_merges);
    let short = CheckOptions {
        rounds: 1,
        runtime_ns: 10_000_000,
        ..CheckOptions::default()
    };
    let report = check_policy(&make, &short);
    let shortfall = report.violations.iter().find(|v| v.rule == "coverage");
    assert!(
        shortfall.is_some_and(|v| v.detail.contains("the check itself fell short")),
        "{:?}",
        report.violations
    );
}

#[test]
fn a_set_that_traps_is_named_by_the_tunables_check() {
    let Some(make) = component_maker("chaos") else {
        return;
    };
    let report = check_policy(&make, &quick());
    let trap = report
        .violations
        .iter()
        .find(|v| v.rule == "tunables")
        .expect("panic_on_set traps in set");
    assert!(
        trap.detail
            .starts_with("panic_on_set: policy trapped in `set`"),
        "{}",
        trap.detail
    );
    assert_eq!(rules(&report), ["tunables"], "mode 0 is otherwise honest");
}

/// FIFO helpers for the policies below.
#[derive(Default)]
struct Fifo {
    queue: std::collections::VecDeque<RequestId>,
}

impl Fifo {
    fn take(&mut self, n: usize, out: &mut Dispatch) {
        while out.ids.len() < n {
            let Some(id) = self.queue.pop_front() else {
                break;
            };
            out.ids.push(id);
        }
    }
    fn forget(&mut self, event: &MergeEvent) {
        if let Some(gone) = event.absorbed {
            self.queue.retain(|&id| id != gone);
        }
    }
}

/// Answers everything it holds, whatever the budget.
#[derive(Default)]
struct Greedy(Fifo);

impl Policy for Greedy {
    const NAME: &'static str = "greedy";
    const VERSION: &'static str = "0";
    fn new(_: &Setup) -> Self {
        Self::default()
    }
    fn insert(&mut self, _: u64, requests: &[Request]) {
        self.0.queue.extend(requests.iter().map(|r| r.id));
    }
    fn dispatch(&mut self, _: u64, _: u32, _budget: u32, out: &mut Dispatch) {
        self.0.take(usize::MAX, out);
    }
    fn merged(&mut self, _: u64, event: &MergeEvent) {
        self.0.forget(event);
    }
}

#[test]
fn a_policy_over_its_budget_is_named() {
    let report = check_policy(&native::<Greedy>(), &quick());
    assert!(
        rules(&report).contains(&"over-budget"),
        "{:?}",
        report.violations
    );
}

/// A tunable whose `retuned` overwrites what `set` stored, so `get` does not say it.
#[derive(Default)]
struct Liar {
    fifo: Fifo,
    depth: i64,
}

impl Policy for Liar {
    const NAME: &'static str = "liar";
    const VERSION: &'static str = "0";
    const TUNABLES: &'static [TunableSpec<Self>] = &[TunableSpec {
        name: "depth",
        default: 4,
        min: 1,
        max: 64,
        unit: "",
        help: "always put back to 4",
        field: |p| &mut p.depth,
    }];
    fn new(_: &Setup) -> Self {
        Self::default()
    }
    fn retuned(&mut self, _: &str) {
        self.depth = 4;
    }
    fn insert(&mut self, _: u64, requests: &[Request]) {
        self.fifo.queue.extend(requests.iter().map(|r| r.id));
    }
    fn dispatch(&mut self, _: u64, _: u32, budget: u32, out: &mut Dispatch) {
        self.fifo.take(budget as usize, out);
    }
    fn merged(&mut self, _: u64, event: &MergeEvent) {
        self.fifo.forget(event);
    }
}

#[test]
fn a_tunable_that_does_not_read_back_is_named() {
    let report = check_policy(&native::<Liar>(), &quick());
    assert_eq!(
        rules(&report),
        ["tunables", "tunables"],
        "{:?}",
        report.violations
    );
    assert!(
        report.violations[0]
            .detail
            .contains("depth: set to its minimum 1, get answered Some(4)")
    );
}

/// Each instance reverses the order of the one before: the same seed does not give the
/// same dispatch order.
#[derive(Default)]
struct Moody {
    fifo: Fifo,
    lifo: bool,
}

static INSTANCES: AtomicU64 = AtomicU64::new(0);

impl Policy for Moody {
    const NAME: &'static str = "moody";
    const VERSION: &'static str = "0";
    fn new(_: &Setup) -> Self {
        Self {
            fifo: Fifo::default(),
            lifo: INSTANCES.fetch_add(1, Ordering::Relaxed) % 2 == 1,
        }
    }
    fn insert(&mut self, _: u64, requests: &[Request]) {
        self.fifo.queue.extend(requests.iter().map(|r| r.id));
    }
    fn dispatch(&mut self, _: u64, _: u32, budget: u32, out: &mut Dispatch) {
        if self.lifo {
            self.fifo.queue.make_contiguous().reverse();
        }
        self.fifo.take(budget as usize, out);
    }
    fn merged(&mut self, _: u64, event: &MergeEvent) {
        self.fifo.forget(event);
    }
}

#[test]
fn a_policy_whose_order_depends_on_more_than_the_seed_is_named() {
    let options = CheckOptions {
        rounds: 1,
        ..quick()
    };
    let report = check_policy(&native::<Moody>(), &options);
    assert!(!report.deterministic);
    assert!(
        rules(&report).contains(&"nondeterministic"),
        "{:?}",
        report.violations
    );
}

#[test]
fn a_wait_past_the_bound_is_named_with_its_class() {
    let Some(make) = component_maker("bfq") else {
        return;
    };
    let options = CheckOptions {
        max_wait_ns: 1_000_000,
        ..quick()
    };
    let report = check_policy(&make, &options);
    let wait = report
        .violations
        .iter()
        .find(|v| v.rule == "wait-bound")
        .expect("bfq idles longer than 1 ms");
    assert!(
        wait.detail.contains("past the bound of 1.0 ms"),
        "{}",
        wait.detail
    );
}
