//! Seeded device faults in simulation: whatever a fault plan does to a device (EIO by rate,
//! range and window, busy answers the host requeues, latency spikes, a stall, resets), every
//! bio completes exactly once, the errors are reported for the bios they hit, and the same
//! seed gives the same run.
//! `SCHEDHOST_FAULT_PLANS=1000` runs the long version.

use schedhost::backend::sim::{DeviceSpec, FaultPlan};
use schedhost::core::{Action, BUSY, Bio, MAX_REQUEUES, Nomerges};
use schedhost::frontend::jobs::sim;
use schedhost::frontend::jobs::{Rng, parse_job_file};
use schedhost::frontend::outcome::Outcome;
use schedhost::frontend::plan::RunPlan;
use schedhost::policy::{native_names, native_policy};

/// Fault plans per device model and policy (CI runs a short version).
fn plans() -> u64 {
    std::env::var("SCHEDHOST_FAULT_PLANS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(6)
}

/// A plan drawn from `seed`: any mix of errors, spikes, a stall and resets.
fn plan(seed: u64) -> FaultPlan {
    let mut rng = Rng::new(seed);
    let ms = 1_000_000;
    let mut text = format!("seed={seed}");
    let mut add = |item: String| {
        text.push(',');
        text.push_str(&item);
    };
    if rng.below(2) == 0 {
        add(format!("read_errors=0.{:02}", rng.below(30)));
    }
    if rng.below(2) == 0 {
        add(format!("write_errors=0.{:02}", rng.below(30)));
    }
    if rng.below(3) == 0 {
        let from = rng.below(4096) * 8;
        add(format!("errors_in={from}-{}", from + 1 + rng.below(65536)));
    }
    if rng.below(3) == 0 {
        let from = rng.below(50) * ms;
        add(format!(
            "errors_during={from}-{}",
            from + 1 + rng.below(50) * ms
        ));
    }
    if rng.below(2) == 0 {
        add(format!(
            "spikes=0.{:02}:{}us",
            rng.below(20),
            1 + rng.below(20_000)
        ));
    }
    if rng.below(3) == 0 {
        add(format!("stall={}ms:{}ms", rng.below(40), 1 + rng.below(40)));
    }
    for _ in 0..rng.below(3) {
        add(format!("reset={}us", rng.below(60_000)));
    }
    FaultPlan::parse(&text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

fn run(device: &DeviceSpec, policy: &str, faults: FaultPlan) -> Outcome {
    let jobs = parse_job_file(
        "f.fio",
        "[global]\ncontinue_on_error=all\n[m]\nrw=randrw\nbs=4k\nsize=8m\niodepth=8\nnumjobs=2\nnumber_ios=64\n[s]\nrw=write\nbs=64k\nsize=8m\niodepth=4\nnumber_ios=32\n",
    )
    .unwrap();
    let options = RunPlan {
        seed: faults.seed,
        faults,
        ..RunPlan::default()
    };
    sim::run(
        &jobs,
        device,
        native_policy(policy).unwrap(),
        &[],
        &options,
        &mut |_| {},
    )
    .unwrap_or_else(|e| panic!("{policy} on {} under {faults:?}: {e}", device.name()))
}

/// Every bio the jobs issued completed once, ok or with an error, and the errors are
/// counted; returns the errors.
fn assert_conserved(outcome: &Outcome, what: &str) -> u64 {
    let issued: u64 = outcome.submitters.iter().map(|s| s.issued).sum();
    let completed: u64 = outcome.submitters.iter().map(|s| s.completed).sum();
    let counted: u64 = outcome
        .stats
        .iter()
        .flat_map(|s| s.dirs.iter())
        .map(|d| d.ios)
        .sum();
    assert_eq!(issued, 64 * 2 + 32, "{what}: every bio was issued");
    assert_eq!(completed, issued, "{what}: every bio completed");
    assert_eq!(counted, issued, "{what}: every completion was counted once");
    assert_eq!(
        outcome.core.bios, issued,
        "{what}: the core saw each bio once"
    );
    outcome
        .stats
        .iter()
        .flat_map(|s| s.dirs.iter())
        .map(|d| d.errors)
        .sum()
}

#[test]
fn under_seeded_fault_plans_every_bio_completes_once_with_its_error_reported() {
    let drive = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../examples/validation/cheetah4LP.diskspecs"
    );
    let devices = ["sim:null", "sim:ssd", "sim:hdd", drive].map(|d| DeviceSpec::parse(d).unwrap());
    let mut errors = 0;
    for device in &devices {
        for policy in native_names() {
            for seed in 0..plans() {
                let faults = plan(seed);
                let what = format!("{policy} on {} under {faults:?}", device.name());
                errors += assert_conserved(&run(device, policy, faults), &what);
            }
        }
    }
    assert!(errors > 0, "the plans injected no error at all");
}

#[test]
fn a_fault_plan_is_part_of_the_seed_the_same_plan_gives_the_same_run() {
    let device = DeviceSpec::parse("sim:hdd").unwrap();
    for seed in 0..4 {
        let faults = plan(seed);
        let (a, b) = (
            run(&device, "deadline", faults),
            run(&device, "deadline", faults),
        );
        let errors = |o: &Outcome| -> Vec<u64> {
            o.stats
                .iter()
                .flat_map(|s| s.dirs.iter())
                .map(|d| d.errors)
                .collect()
        };
        assert_eq!((a.end_ns, errors(&a)), (b.end_ns, errors(&b)), "{faults:?}");
    }
}

#[test]
fn errors_hit_only_the_sectors_and_times_the_plan_names() {
    let device = DeviceSpec::parse("sim:ssd").unwrap();
    // Every request fails, but only past the end of the jobs' files: none is hit.
    let none =
        FaultPlan::parse("read_errors=1,write_errors=1,errors_in=1000000000-1000000001").unwrap();
    assert_eq!(
        assert_conserved(&run(&device, "noop", none), "errors out of range"),
        0
    );
    // Every request fails: every bio carries the error.
    let all = FaultPlan::parse("read_errors=1,write_errors=1").unwrap();
    assert_eq!(
        assert_conserved(&run(&device, "noop", all), "all errors"),
        64 * 2 + 32
    );
    // A reset at 0 with nothing in flight aborts nothing.
    let idle = FaultPlan::parse("reset=0ns").unwrap();
    assert_eq!(
        assert_conserved(&run(&device, "noop", idle), "idle reset"),
        0
    );
}

#[test]
fn fault_plans_name_what_they_cannot_take() {
    for (text, want) in [
        ("read_errors=2", "not a probability"),
        ("spikes=0.1", "expected P:TIME"),
        ("stall=1s:1y", "a time takes ns, us, ms or s"),
        ("reset=200days", "a time takes"),
        ("errors_in=10-5", "START must be below END"),
        ("flaky=1", "unknown fault `flaky`"),
    ] {
        let err = FaultPlan::parse(text).unwrap_err();
        assert!(err.contains(want), "{text}: {err}");
    }
}

#[test]
fn a_busy_answer_sends_the_request_back_to_the_policy_and_the_ninth_completes_it() {
    let mut core = crate::helpers::noop_core(4, 2560, Nomerges::All);
    let bio = Bio {
        id: 7,
        ctx: 0,
        op: schedhost_sdk::Op::Read,
        sector: 0,
        sectors: 8,
        sync: true,
        prio_class: schedhost_sdk::PrioClass::None,
        prio_level: 4,
    };
    core.submit(0, bio).unwrap();
    let mut sent = 0;
    for now in 1..=u64::from(MAX_REQUEUES) + 1 {
        core.run(now).unwrap();
        let mut dispatched = Vec::new();
        while let Some(action) = core.poll_action() {
            match action {
                Action::Dispatch { id, .. } => dispatched.push(id),
                Action::Complete(done) => panic!("completed while busy answers remain: {done:?}"),
            }
        }
        assert_eq!(dispatched.len(), 1, "sent again after busy answer {sent}");
        core.complete(now, dispatched[0], BUSY).unwrap();
        sent += 1;
    }
    // The ninth busy answer is the bio's error: it completes once, with it.
    let mut done = Vec::new();
    while let Some(action) = core.poll_action() {
        if let Action::Complete(d) = action {
            done.push(d);
        }
    }
    assert_eq!(sent, u64::from(MAX_REQUEUES) + 1);
    assert_eq!(done.len(), 1);
    assert_eq!((done[0].bio, done[0].status), (7, BUSY));
    assert_eq!(core.stats().requeued, u64::from(MAX_REQUEUES));
    assert_eq!(core.requests_in_flight(), 0);
}

#[test]
fn a_job_stops_at_its_first_error_unless_continue_on_error_says_otherwise() {
    let device = DeviceSpec::parse("sim:ssd").unwrap();
    let faults = FaultPlan::parse("read_errors=0.2").unwrap();
    let run_with = |extra: &str| {
        let text = format!("[r]\nrw=randread\nbs=4k\nsize=8m\niodepth=4\nnumber_ios=400\n{extra}");
        let jobs = parse_job_file("c.fio", &text).unwrap();
        let options = RunPlan {
            faults,
            ..RunPlan::default()
        };
        sim::run(
            &jobs,
            &device,
            native_policy("noop").unwrap(),
            &[],
            &options,
            &mut |_| {},
        )
        .unwrap()
    };
    // fio's default: the job ends at its first error, with what was in flight.
    let stopped = run_with("");
    let issued = stopped.submitters[0].issued;
    assert!(
        issued < 400,
        "the job went on after its first error ({issued} issued)"
    );
    assert_eq!(stopped.submitters[0].completed, issued);
    assert_eq!(
        stopped.stats[0].first_error, 5,
        "err= is the first error's errno, EIO"
    );
    // Reads carry on under read, io and all; not under write.
    for (value, all) in [
        ("read", true),
        ("io", true),
        ("all", true),
        ("1", true),
        ("write", false),
    ] {
        let outcome = run_with(&format!("continue_on_error={value}\n"));
        assert_eq!(
            outcome.submitters[0].issued == 400,
            all,
            "continue_on_error={value}"
        );
    }
}

#[test]
fn a_spec_file_carries_its_fault_plan_and_a_bad_one_names_its_line() {
    let text = "model = ssd\nfaults = read_errors=1,seed=3\n";
    let (spec, faults) =
        DeviceSpec::parse_file_with_faults(std::path::Path::new("flaky.spec"), text).unwrap();
    assert_eq!(spec.name(), "ssd");
    assert_eq!(faults, FaultPlan::parse("read_errors=1,seed=3").unwrap());
    let bad = DeviceSpec::parse_file(
        std::path::Path::new("flaky.spec"),
        "model = ssd\nfaults = stall=1s\n",
    )
    .unwrap_err()
    .to_string();
    assert!(
        bad.contains("flaky.spec:2") && bad.contains("expected AT:FOR"),
        "{bad}"
    );
}

#[test]
fn a_device_that_stalls_longer_than_the_watchdog_gets_no_policy_blamed() {
    // Fifteen seconds without a completion, past the watchdog's ten: the requests are on
    // the device, not held back by the policy.
    let device = DeviceSpec::parse("sim:hdd").unwrap();
    let faults = FaultPlan::parse("stall=10ms:15s").unwrap();
    let jobs = parse_job_file(
        "s.fio",
        "[r]\nrw=randread\nbs=4k\nsize=8m\niodepth=64\nnumber_ios=500\n",
    )
    .unwrap();
    for policy in native_names() {
        let options = RunPlan {
            faults,
            ..RunPlan::default()
        };
        let outcome = sim::run(
            &jobs,
            &device,
            native_policy(policy).unwrap(),
            &[],
            &options,
            &mut |_| {},
        )
        .unwrap_or_else(|e| panic!("{policy}: {e}"));
        assert!(
            outcome.ejections.is_empty(),
            "{policy} blamed for a stall: {:?}",
            outcome.ejections
        );
        assert!(
            outcome.end_ns > 15_000_000_000,
            "{policy}: the stall happened"
        );
        assert_eq!(outcome.submitters[0].completed, 500);
    }
}
