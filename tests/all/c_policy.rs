//! The policy written in C (examples/sstf-policy): it keeps the contract `policy check`
//! checks, schedules as its README says, and runs a seed job to the end.

use std::path::Path;

use schedhost::backend::sim::DeviceSpec;
use schedhost::contract::{CheckOptions, check_policy};
use schedhost::frontend::jobs::parse_job_file;
use schedhost::frontend::jobs::sim;
use schedhost::frontend::plan::RunPlan;
use schedhost::policy::{PolicyBackend, WasmRuntime};
use schedhost_sdk::{MergeEvent, MergeKind, Op, PrioClass, Request, RequestId, Sector, Setup};

use crate::helpers::{RawIds, component, component_maker};

const MS: u64 = 1_000_000;

fn sstf(settings: &[(&str, i64)]) -> Option<Box<dyn PolicyBackend>> {
    let path = component("sstf")?;
    let mut p = WasmRuntime::new()
        .unwrap()
        .load(&path)
        .unwrap()
        .instantiate()
        .unwrap();
    let settings: Vec<(String, i64)> = settings.iter().map(|(k, v)| ((*k).into(), *v)).collect();
    let setup = Setup {
        hw_queues: 1,
        queue_depth: 32,
        nr_requests: 64,
        rotational: true,
    };
    p.init(&setup, &settings).unwrap().unwrap();
    Some(Box::new(p))
}

fn read(id: u64, sector: u64, arrival_ns: u64) -> Request {
    Request {
        id: RequestId(id),
        ctx: 0,
        op: Op::Read,
        sector: Sector(sector),
        sectors: 8,
        sync: true,
        prio_class: PrioClass::None,
        prio_level: 4,
        group: 0,
        arrival_ns,
    }
}

#[test]
fn the_c_policy_passes_policy_check() {
    let Some(make) = component_maker("sstf") else {
        return;
    };
    let options = CheckOptions {
        rounds: 2,
        runtime_ns: 300_000_000,
        ..CheckOptions::default()
    };
    let report = check_policy(&make, &options);
    assert!(report.passed, "{:?}", report.violations);
    assert!(report.deterministic);
    assert!(report.rounds.iter().all(|r| r.dispatched > 0));
}

#[test]
fn the_c_policy_serves_the_nearest_request_first_and_aged_ones_before_it() {
    let Some(mut p) = sstf(&[("max_wait_ms", 10)]) else {
        return;
    };
    p.insert(0, &[read(1, 1000, 0), read(2, 16, 0), read(3, 500, 0)])
        .unwrap();
    let order: Vec<u64> = (0..3)
        .flat_map(|_| p.dispatch(MS, 0, 1).unwrap().ids.raw())
        .collect();
    assert_eq!(order, [2, 3, 1], "nearest to the head each time");
    // The head is at 1008: request 5 is nearer, but 4 has waited past max_wait_ms.
    p.insert(20 * MS, &[read(4, 0, 5 * MS), read(5, 1008, 20 * MS)])
        .unwrap();
    assert_eq!(p.dispatch(20 * MS, 0, 2).unwrap().ids.raw(), [4, 5]);
}

#[test]
fn the_c_policy_never_dispatches_an_absorbed_request_and_checks_its_tunable() {
    let Some(mut p) = sstf(&[]) else {
        return;
    };
    p.insert(0, &[read(1, 0, 0), read(2, 8, 0)]).unwrap();
    let event = MergeEvent {
        target: RequestId(1),
        sector: Sector(0),
        sectors: 16,
        kind: MergeKind::Back,
        absorbed: Some(RequestId(2)),
    };
    p.merged(0, &[event]).unwrap();
    assert_eq!(p.dispatch(0, 0, 8).unwrap().ids.raw(), [1]);
    assert_eq!(p.get("max_wait_ms").unwrap(), Some(100), "the default");
    p.set("max_wait_ms", 7).unwrap().unwrap();
    assert_eq!(p.get("max_wait_ms").unwrap(), Some(7));
    let refused = p.set("max_wait_ms", 0).unwrap().unwrap_err();
    assert!(refused.contains("out of range 1..=60000"), "{refused}");
    assert!(p.set("quantum", 1).unwrap().is_err());
}

#[test]
fn the_c_policy_runs_a_seed_job_to_the_end() {
    let Some(path) = component("sstf") else {
        return;
    };
    let job = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/jobs/seed1-four-readers.fio");
    let jobs = parse_job_file(
        "seed1-four-readers.fio",
        &std::fs::read_to_string(job).unwrap(),
    )
    .unwrap();
    let device = DeviceSpec::parse("sim:hdd").unwrap();
    let policy = WasmRuntime::new()
        .unwrap()
        .load(&path)
        .unwrap()
        .instantiate()
        .unwrap();
    let outcome = sim::run(
        &jobs,
        &device,
        Box::new(policy),
        &[],
        &RunPlan::default(),
        &mut |_| {},
    )
    .unwrap();
    assert_eq!(outcome.policy.name, "sstf");
    assert!(outcome.ejections.is_empty(), "{:?}", outcome.ejections);
    for s in &outcome.submitters {
        assert!(s.issued > 0, "ctx {} issued nothing", s.ctx);
        assert_eq!(s.issued, s.completed, "ctx {}", s.ctx);
    }
}
