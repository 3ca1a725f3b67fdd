//! The sandbox: the chaos policy, as a component, misbehaves in every way the issue lists,
//! and the host survives each one: it ejects (or restarts, or aborts, as told), the report
//! names the fault, and every bio still completes exactly once.

use std::time::Duration;

use schedhost::backend::sim::DeviceSpec;
use schedhost::core::{OnFault, Recovery, Supervision};
use schedhost::frontend::RunError;
use schedhost::frontend::jobs::parse_job_file;
use schedhost::frontend::jobs::sim;
use schedhost::frontend::outcome::Outcome;
use schedhost::frontend::plan::RunPlan;
use schedhost::policy::{FaultKind, SandboxLimits, WasmRuntime};

use crate::helpers::component;

const JOBS: &str = "
[r]
rw=randrw
bs=4k
size=8m
iodepth=8
numjobs=2
";

fn limits() -> SandboxLimits {
    SandboxLimits {
        call_deadline: Duration::from_millis(20),
        ..SandboxLimits::default()
    }
}

/// Runs the chaos component in `mode` (honest for its first 10 dispatch calls).
fn chaos(
    mode: i64,
    limits: SandboxLimits,
    supervision: Supervision,
) -> Option<Result<Outcome, RunError>> {
    let path = component("chaos")?;
    let runtime = WasmRuntime::with_limits(limits).unwrap();
    let policy = runtime.load(&path).unwrap().instantiate().unwrap();
    let jobs = parse_job_file("chaos.fio", JOBS).unwrap();
    let device = DeviceSpec::parse("sim:ssd").unwrap();
    let settings = [("mode".to_owned(), mode), ("after".to_owned(), 10)];
    let options = RunPlan {
        supervision,
        ..RunPlan::default()
    };
    Some(sim::run(
        &jobs,
        &device,
        Box::new(policy),
        &settings,
        &options,
        &mut |_| {},
    ))
}

/// Every bio issued completed once and was counted once.
fn assert_exactly_once(o: &Outcome) {
    for (s, stats) in o.submitters.iter().zip(&o.stats) {
        let ios: u64 = stats.dirs.iter().map(|d| d.ios).sum();
        assert_eq!(s.issued, 2048, "ctx {} issued its whole job", s.ctx);
        assert_eq!(s.completed, s.issued, "ctx {}", s.ctx);
        assert_eq!(ios, s.completed, "ctx {}", s.ctx);
    }
    assert_eq!(o.core.dispatched, o.core.completed);
    assert_eq!(o.core.bios, 4096);
}

/// The mode's single ejection to the built-in FIFO, with everything served.
fn ejected(mode: i64) -> Option<schedhost::core::Ejection> {
    let outcome = chaos(mode, limits(), Supervision::default())?
        .unwrap_or_else(|e| panic!("mode {mode}: the run survives: {e}"));
    assert_exactly_once(&outcome);
    assert_eq!(
        outcome.ejections.len(),
        1,
        "mode {mode}: {:?}",
        outcome.ejections
    );
    let e = outcome.ejections[0].clone();
    assert_eq!(e.recovery, Recovery::Fallback);
    Some(e)
}

#[test]
fn sandbox_ejects_a_policy_that_loops_forever_at_its_deadline() {
    let Some(e) = ejected(1) else { return };
    assert_eq!((e.kind, e.call), ("timeout", "turn-words"));
    assert!(
        e.message.contains("ran past its deadline (20 ms)"),
        "{}",
        e.message
    );
}

#[test]
fn sandbox_ejects_a_policy_that_panics_with_its_wasm_backtrace() {
    let Some(e) = ejected(2) else { return };
    assert_eq!(e.kind, "trap");
    assert!(e.message.contains("unreachable"), "{}", e.message);
    assert!(
        e.message.contains("Policy>::dispatch"),
        "the guest's frames, demangled: {}",
        e.message
    );
}

#[test]
fn sandbox_ejects_a_policy_that_exhausts_its_memory_cap() {
    // A small cap and a roomy deadline, so the cap is what stops it on a busy machine.
    let capped = SandboxLimits {
        call_deadline: Duration::from_secs(10),
        memory_bytes: 8 << 20,
        ..SandboxLimits::default()
    };
    let Some(outcome) = chaos(3, capped, Supervision::default()) else {
        return;
    };
    let outcome = outcome.unwrap();
    assert_exactly_once(&outcome);
    let e = &outcome.ejections[0];
    assert_eq!(e.kind, "memory");
    assert!(
        e.message.contains("past the policy's cap of 8388608 bytes"),
        "{}",
        e.message
    );
}

#[test]
fn sandbox_ejects_a_policy_that_dispatches_an_unknown_id() {
    let Some(e) = ejected(4) else { return };
    assert_eq!(e.kind, "invalid-answer");
    assert!(
        e.message.contains("0xbad00000bad, which is not queued"),
        "{}",
        e.message
    );
}

#[test]
fn sandbox_ejects_a_policy_that_dispatches_an_id_twice() {
    let Some(e) = ejected(5) else { return };
    assert_eq!(e.kind, "invalid-answer");
    assert!(e.message.contains("which is not queued"), "{}", e.message);
}

#[test]
fn sandbox_ejects_a_policy_that_never_dispatches_as_starving() {
    let Some(e) = ejected(6) else { return };
    assert_eq!(e.kind, "starved");
    assert!(e.requeued > 0);
}

#[test]
fn sandbox_ejects_policies_that_keep_asking_to_be_woken_without_dispatching() {
    // In the past (9), a nanosecond ahead (11: virtual time crept a nanosecond a call, about
    // 80 minutes of wall time for a check round), or dispatching once per 100 000 wake-ups
    // (12): each is ejected after a bounded number of wake-ups, not of virtual time.
    for mode in [9, 11, 12] {
        let Some(e) = ejected(mode) else { return };
        assert_eq!(e.kind, "starved", "mode {mode}");
        assert!(
            e.message.contains("times in a row at its own request"),
            "mode {mode}: {}",
            e.message
        );
    }
}

#[test]
fn sandbox_watchdog_fires_within_its_period_when_a_policy_asks_to_sleep_an_hour() {
    let Some(e) = ejected(10) else { return };
    assert_eq!(e.kind, "starved");
    assert!(e.requeued > 0);
    // The default watchdog is 10 s; the policy asked to be woken an hour later.
    assert!(
        e.at_ns < 11_000_000_000,
        "ejected at {:.3} s of virtual time",
        e.at_ns as f64 / 1e9
    );
}

#[test]
fn sandbox_keeps_a_slow_policy_that_stays_within_its_deadline() {
    let roomy = SandboxLimits {
        call_deadline: Duration::from_secs(5),
        ..SandboxLimits::default()
    };
    let Some(outcome) = chaos(7, roomy, Supervision::default()) else {
        return;
    };
    let outcome = outcome.unwrap();
    assert_exactly_once(&outcome);
    assert!(outcome.ejections.is_empty(), "{:?}", outcome.ejections);
}

#[test]
fn sandbox_restarts_a_trapping_policy_then_falls_back_when_restarts_run_out() {
    let supervision = Supervision {
        on_fault: OnFault::Restart(2),
        ..Supervision::default()
    };
    let Some(outcome) = chaos(2, limits(), supervision) else {
        return;
    };
    let outcome = outcome.unwrap();
    assert_exactly_once(&outcome);
    let recoveries: Vec<Recovery> = outcome.ejections.iter().map(|e| e.recovery).collect();
    // Each new instance gets the same tunables, so it traps again after its 10 calls.
    assert_eq!(
        recoveries,
        [Recovery::Restarted, Recovery::Restarted, Recovery::Fallback]
    );
}

#[test]
fn sandbox_aborts_the_run_on_a_fault_when_told_to() {
    let supervision = Supervision {
        on_fault: OnFault::Abort,
        ..Supervision::default()
    };
    let Some(result) = chaos(2, limits(), supervision) else {
        return;
    };
    match result.unwrap_err() {
        RunError::Stopped(schedhost::engine::Stop::Fault { fault, .. }) => {
            assert_eq!(fault.kind, FaultKind::Trap)
        }
        other => panic!("expected the fault, got {other}"),
    }
}

#[test]
fn sandbox_fuel_ejects_a_looping_policy_at_the_same_virtual_time_every_run() {
    let fuel = SandboxLimits {
        call_deadline: Duration::from_secs(30),
        fuel: Some(5_000_000),
        ..SandboxLimits::default()
    };
    let Some(first) = chaos(1, fuel, Supervision::default()) else {
        return;
    };
    let first = first.unwrap();
    let second = chaos(1, fuel, Supervision::default()).unwrap().unwrap();
    assert_exactly_once(&first);
    assert_eq!(first.ejections[0].kind, "timeout");
    assert!(first.ejections[0].message.contains("or its fuel (5000000)"));
    assert_eq!(first.ejections[0].at_ns, second.ejections[0].at_ns);
    assert_eq!(first.end_ns, second.end_ns);
}
