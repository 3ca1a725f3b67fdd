//! Every submitted bio completes exactly once, merged or not, whatever the device does.

use std::collections::HashSet;

use schedhost::backend::sim::DeviceSpec;
use schedhost::core::{Action, Bio, Core, Nomerges};
use schedhost::frontend::jobs::sim;
use schedhost::frontend::jobs::{Rng, parse_job_file};
use schedhost::frontend::plan::RunPlan;
use schedhost::policy::NativePolicy;
use schedhost_policy_noop::Noop;
use schedhost_sdk::{Op, PrioClass};

use crate::helpers::noop_core;

/// Runs the core and sorts its actions: dispatched ids onto the device, completed bios off
/// the outstanding set (a bio completing twice fails the test).
fn run_and_collect(
    core: &mut Core,
    now: u64,
    outstanding: &mut HashSet<u64>,
    on_device: &mut Vec<u64>,
) {
    core.run(now).unwrap();
    while let Some(action) = core.poll_action() {
        match action {
            Action::Dispatch { id, .. } => on_device.push(id),
            Action::Complete(done) => assert!(
                outstanding.remove(&done.bio),
                "bio {} completed twice",
                done.bio
            ),
        }
    }
}

#[test]
fn every_bio_completes_exactly_once_under_random_merging_load() {
    for nomerges in [Nomerges::All, Nomerges::OneHit, Nomerges::Off] {
        let mut core = noop_core(8, 64, nomerges);
        let mut rng = Rng::new(42);
        let mut outstanding = HashSet::new();
        let mut on_device: Vec<u64> = Vec::new();
        let mut next_bio = 0u64;
        for now in 0..5_000u64 {
            for _ in 0..rng.below(4) {
                let op = if rng.below(3) == 0 {
                    Op::Write
                } else {
                    Op::Read
                };
                let bio = Bio {
                    id: next_bio,
                    ctx: rng.below(3) as u32,
                    op,
                    sector: rng.below(64) * 8,
                    sectors: 8,
                    sync: true,
                    prio_class: PrioClass::None,
                    prio_level: 4,
                };
                outstanding.insert(next_bio);
                next_bio += 1;
                core.submit(now, bio).unwrap();
            }
            run_and_collect(&mut core, now, &mut outstanding, &mut on_device);
            // The device finishes a random subset, out of order.
            let mut i = 0;
            while i < on_device.len() {
                if rng.below(2) == 0 {
                    let id = on_device.swap_remove(i);
                    core.complete(now, id, 0).unwrap();
                } else {
                    i += 1;
                }
            }
        }
        // Drain.
        let mut now = 5_000;
        while !outstanding.is_empty() {
            run_and_collect(&mut core, now, &mut outstanding, &mut on_device);
            for id in on_device.drain(..) {
                core.complete(now, id, 0).unwrap();
            }
            now += 1;
            assert!(
                now < 100_000,
                "{} bios never completed ({nomerges:?})",
                outstanding.len()
            );
        }
        let stats = core.stats();
        assert_eq!(stats.bios, next_bio);
        assert_eq!(stats.dispatched, stats.completed);
        assert_eq!(
            stats.requests,
            stats.dispatched + stats.coalesced,
            "{nomerges:?}: every request is dispatched once or absorbed"
        );
        assert_eq!(core.requests_in_flight(), 0);
        if nomerges == Nomerges::All {
            assert!(
                stats.back_merges + stats.front_merges > 0,
                "the load merges"
            );
        }
    }
}

#[test]
fn completing_an_unknown_request_is_an_error_not_a_panic() {
    let mut core = noop_core(4, 2560, Nomerges::All);
    let err = core.complete(0, 12345, 0).unwrap_err();
    assert!(err.to_string().contains("not on the device"), "{err}");
}

#[test]
fn simulated_jobs_complete_every_issued_bio_on_each_device() {
    let jobs = parse_job_file(
        "conservation.fio",
        "[global]\nbs=4k\nsize=8m\n[seq]\nrw=read\niodepth=16\nnumjobs=2\n[mix]\nrw=randrw\niodepth=8\nnumber_ios=500\n[w]\nrw=write\niodepth=4\nstonewall\n",
    )
    .unwrap();
    for device in ["sim:null", "sim:ssd", "sim:hdd"] {
        let spec = DeviceSpec::parse(device).unwrap();
        let outcome = sim::run(
            &jobs,
            &spec,
            Box::new(NativePolicy::<Noop>::default()),
            &[],
            &RunPlan::default(),
            &mut |_| {},
        )
        .unwrap();
        for (s, stats) in outcome.submitters.iter().zip(&outcome.stats) {
            let done: u64 = stats.dirs.iter().map(|d| d.ios).sum();
            assert!(s.issued > 0, "{device}: ctx {} issued nothing", s.ctx);
            assert_eq!(s.issued, s.completed, "{device}: ctx {}", s.ctx);
            assert_eq!(done, s.issued, "{device}: ctx {}", s.ctx);
        }
        let c = outcome.core;
        assert_eq!(c.completed, c.dispatched, "{device}");
        assert_eq!(c.requests, c.dispatched + c.coalesced, "{device}");
        assert!(c.back_merges > 0, "{device}: sequential iodepth 16 merges");
    }
}

/// Runs a job file on sim:null with native noop.
fn run_null(text: &str) -> schedhost::frontend::outcome::Outcome {
    let jobs = parse_job_file("pace.fio", text).unwrap();
    let device = DeviceSpec::parse("sim:null").unwrap();
    sim::run(
        &jobs,
        &device,
        Box::new(NativePolicy::<Noop>::default()),
        &[],
        &RunPlan::default(),
        &mut |_| {},
    )
    .unwrap()
}

#[test]
fn rate_iops_paces_a_job_on_a_free_device() {
    let outcome =
        run_null("[r]\nrw=randread\nsize=64m\niodepth=8\nruntime=2s\ntime_based\nrate_iops=500\n");
    assert_eq!(outcome.submitters[0].issued, 1000, "500 IOPS for 2 s");
}

#[test]
fn thinktime_pauses_after_each_completion() {
    let outcome =
        run_null("[r]\nrw=read\nsize=64m\niodepth=1\nruntime=100ms\ntime_based\nthinktime=1ms\n");
    assert_eq!(
        outcome.submitters[0].issued, 100,
        "one I/O per millisecond of think time"
    );
}

#[test]
fn number_ios_and_size_stop_a_job() {
    assert_eq!(
        run_null("[r]\nrw=read\nsize=64m\nnumber_ios=123\n").submitters[0].issued,
        123
    );
    assert_eq!(
        run_null("[r]\nrw=randwrite\nbs=8k\nsize=1m\niodepth=4\n").submitters[0].issued,
        128
    );
}

#[test]
fn stonewall_starts_a_job_after_the_previous_ones_finish() {
    let outcome =
        run_null("[a]\nrw=read\nsize=1m\nthinktime=10us\n[b]\nrw=read\nsize=1m\nstonewall\n");
    let (a, b) = (&outcome.submitters[0], &outcome.submitters[1]);
    assert!(a.finished_ns > 0);
    assert_eq!(b.started_ns, a.finished_ns);
}

/// A turn visits only the submitters something happened to; debug builds check each turn
/// against a walk over all of them. Clones paced by a rate, by think time, by a count and by
/// a verify pass after a stonewall each issue what their job asks, on time.
#[test]
fn paced_thinking_counted_and_verifying_clones_each_issue_on_time_when_only_due_ones_are_visited() {
    let outcome = run_null(concat!(
        "[paced]\nrw=randread\nsize=64m\nnumjobs=4\nrate_iops=500\nruntime=200ms\ntime_based\n",
        "[thinking]\nrw=read\nsize=64m\nnumjobs=3\nthinktime=2ms\nruntime=200ms\ntime_based\n",
        "[counted]\nrw=randread\nsize=64m\nnumjobs=2\niodepth=4\nnumber_ios=50\n",
        "[after]\nstonewall\nrw=write\nsize=256k\nnumjobs=2\nverify=crc32c\n",
    ));
    let issued: Vec<u64> = outcome.submitters.iter().map(|s| s.issued).collect();
    assert_eq!(&issued[..4], &[100; 4], "500 IOPS for 200 ms");
    assert_eq!(&issued[4..7], &[100; 3], "one read per 2 ms of think time");
    assert_eq!(&issued[7..9], &[50; 2], "number_ios");
    assert_eq!(&issued[9..], &[128; 2], "64 writes, then a read of each");
    let first_phase_end = outcome.submitters[..9].iter().map(|s| s.finished_ns).max();
    assert!(
        outcome.submitters[9..]
            .iter()
            .all(|s| Some(s.started_ns) == first_phase_end)
    );
}
