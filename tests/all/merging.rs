//! The merge engine: back and front merges, coalescing, size limits, nomerges modes and the
//! per-submitter rule for requests the policy has not seen.

use schedhost::core::{Action, Bio, Config, Core, Nomerges};
use schedhost_sdk::{Op, PrioClass};

use crate::helpers::{dispatched, noop_core};

fn read(id: u64, ctx: u32, sector: u64) -> Bio {
    Bio {
        id,
        ctx,
        op: Op::Read,
        sector,
        sectors: 8,
        sync: true,
        prio_class: PrioClass::None,
        prio_level: 4,
    }
}

#[test]
fn contiguous_bio_merges_at_the_back() {
    let mut core = noop_core(4, 2560, Nomerges::All);
    core.submit(0, read(1, 0, 0)).unwrap();
    core.submit(0, read(2, 0, 8)).unwrap();
    assert_eq!(dispatched(&mut core, 0), vec![(0, 16)]);
    assert_eq!(core.stats().back_merges, 1);
}

#[test]
fn preceding_bio_merges_at_the_front() {
    let mut core = noop_core(4, 2560, Nomerges::All);
    core.submit(0, read(1, 0, 8)).unwrap();
    core.submit(0, read(2, 0, 0)).unwrap();
    assert_eq!(dispatched(&mut core, 0), vec![(0, 16)]);
    assert_eq!(core.stats().front_merges, 1);
}

#[test]
fn bio_filling_a_gap_coalesces_both_neighbours() {
    let mut core = noop_core(4, 2560, Nomerges::All);
    core.submit(0, read(1, 0, 0)).unwrap();
    core.submit(0, read(2, 0, 16)).unwrap();
    core.submit(0, read(3, 0, 8)).unwrap();
    assert_eq!(dispatched(&mut core, 0), vec![(0, 24)]);
    assert_eq!(core.stats().coalesced, 1);
}

#[test]
fn merges_stop_at_max_sectors() {
    let mut core = noop_core(4, 16, Nomerges::All);
    for (id, sector) in [(1, 0), (2, 8), (3, 16)] {
        core.submit(0, read(id, 0, sector)).unwrap();
    }
    assert_eq!(dispatched(&mut core, 0), vec![(0, 16), (16, 8)]);
}

#[test]
fn nomerges_2_never_merges() {
    let mut core = noop_core(4, 2560, Nomerges::Off);
    core.submit(0, read(1, 0, 0)).unwrap();
    core.submit(0, read(2, 0, 8)).unwrap();
    assert_eq!(dispatched(&mut core, 0), vec![(0, 8), (8, 8)]);
}

#[test]
fn nomerges_1_tries_only_the_last_request() {
    let bios = [read(1, 0, 0), read(2, 0, 1000), read(3, 0, 8)];
    let mut all = noop_core(4, 2560, Nomerges::All);
    let mut one_hit = noop_core(4, 2560, Nomerges::OneHit);
    for bio in bios {
        all.submit(0, bio).unwrap();
        one_hit.submit(0, bio).unwrap();
    }
    assert_eq!(dispatched(&mut all, 0), vec![(0, 16), (1000, 8)]);
    assert_eq!(dispatched(&mut one_hit, 0), vec![(0, 8), (1000, 8), (8, 8)]);
    // The one-hit cache does catch the request that just arrived.
    let mut one_hit = noop_core(4, 2560, Nomerges::OneHit);
    one_hit.submit(0, read(1, 0, 0)).unwrap();
    one_hit.submit(0, read(2, 0, 8)).unwrap();
    assert_eq!(dispatched(&mut one_hit, 0), vec![(0, 16)]);
}

#[test]
fn unseen_requests_merge_only_within_their_submitter() {
    let mut core = noop_core(4, 2560, Nomerges::All);
    core.submit(0, read(1, 0, 0)).unwrap();
    core.submit(0, read(2, 1, 8)).unwrap();
    assert_eq!(dispatched(&mut core, 0), vec![(0, 8), (8, 8)]);
}

#[test]
fn queued_requests_merge_across_submitters() {
    // Depth 1: the first request occupies the device, the second waits in the policy.
    let mut core = noop_core(1, 2560, Nomerges::All);
    core.submit(0, read(1, 0, 5000)).unwrap();
    assert_eq!(dispatched(&mut core, 0), vec![(5000, 8)]);
    core.submit(0, read(2, 0, 0)).unwrap();
    assert!(dispatched(&mut core, 0).is_empty());
    core.submit(1, read(3, 1, 8)).unwrap();
    assert_eq!(core.stats().back_merges, 1);
    let first = core.stats().dispatched;
    assert_eq!(first, 1);
}

#[test]
fn merged_bios_complete_with_their_request() {
    let mut core = noop_core(4, 2560, Nomerges::All);
    core.submit(0, read(1, 0, 0)).unwrap();
    core.submit(10, read(2, 1, 8)).unwrap();
    core.submit(20, read(3, 0, 8)).unwrap();
    core.run(20).unwrap();
    let mut ids = Vec::new();
    while let Some(action) = core.poll_action() {
        if let Action::Dispatch { id, .. } = action {
            ids.push(id);
        }
    }
    for id in ids {
        core.complete(100, id, 0).unwrap();
    }
    let mut done = Vec::new();
    while let Some(action) = core.poll_action() {
        if let Action::Complete(bio) = action {
            done.push((bio.bio, bio.ctx, bio.latency_ns));
        }
    }
    done.sort_unstable();
    assert_eq!(done, vec![(1, 0, 100), (2, 1, 90), (3, 0, 80)]);
}

#[test]
fn software_queues_take_scheduler_tags_in_turn() {
    let mut config = schedhost::core::Config::for_device(1, 1, 2560);
    config.nr_requests = 1;
    let policy =
        Box::new(schedhost::policy::NativePolicy::<schedhost_policy_noop::Noop>::default());
    let mut core = Core::new(
        config,
        policy,
        &[],
        Box::new(schedhost::policy::builtin_fifo),
    )
    .unwrap();
    // ctx 0 submits three reads, ctx 1 two; one scheduler tag: the rest wait per submitter.
    for (id, ctx, sector) in [
        (1, 0, 0),
        (2, 0, 100),
        (3, 0, 200),
        (4, 1, 1000),
        (5, 1, 1100),
    ] {
        core.submit(0, read(id, ctx, sector)).unwrap();
    }
    let mut order = Vec::new();
    for now in 0..5 {
        core.run(now).unwrap();
        let mut on_device = Vec::new();
        while let Some(action) = core.poll_action() {
            match action {
                Action::Dispatch { id, sector, .. } => {
                    order.push(sector);
                    on_device.push(id);
                }
                Action::Complete(_) => {}
            }
        }
        for id in on_device {
            core.complete(now, id, 0).unwrap();
        }
    }
    assert_eq!(order, vec![0, 100, 1000, 200, 1100]);
}

/// deadline over a one-tag device: request 2 (sectors 2000..2008) waits in the policy behind
/// request 1 while bio 3 continues it (a back merge) and bio 4 precedes it (a front merge);
/// then the device finishes one request per step.
/// The (sector, sectors) dispatched, the merges vetoed and the `allow-merge` calls made.
fn deadline_merges(
    policy: Box<dyn schedhost::policy::PolicyBackend>,
    front_merges: i64,
) -> (Vec<(u64, u32)>, u64, u32) {
    let counts = crate::helpers::CallCounts::default();
    let policy = counts.around(policy);
    let settings = [("front_merges".to_owned(), front_merges)];
    let mut core = Core::new(
        Config::for_device(1, 1, 2560),
        Box::new(policy),
        &settings,
        Box::new(schedhost::policy::builtin_fifo),
    )
    .unwrap();
    // One step at `now`: run, note what went to the device, and finish it a tick later.
    let mut sent = Vec::new();
    let mut on_device = Vec::new();
    let mut step = |core: &mut Core, now: u64, finish: bool| {
        if finish {
            for id in on_device.drain(..) {
                core.complete(now, id, 0).unwrap();
            }
        }
        core.run(now).unwrap();
        while let Some(action) = core.poll_action() {
            if let Action::Dispatch {
                id,
                sector,
                sectors,
                ..
            } = action
            {
                sent.push((sector, sectors));
                on_device.push(id);
            }
        }
    };
    core.submit(0, read(1, 0, 1000)).unwrap();
    step(&mut core, 0, false);
    core.submit(1, read(2, 0, 2000)).unwrap();
    step(&mut core, 1, false);
    core.submit(2, read(3, 0, 2008)).unwrap();
    core.submit(2, read(4, 0, 1992)).unwrap();
    for now in 2..8 {
        step(&mut core, now, true);
    }
    (sent, core.stats().merges_vetoed, counts.of("allow_merge"))
}

#[test]
fn deadline_front_merges_follow_its_merge_rules_without_a_call_per_merge() {
    let Some(path) = crate::helpers::component("deadline") else {
        return;
    };
    let loaded = crate::helpers::runtime().load(&path).unwrap();
    for front_merges in [1, 0] {
        let builds: [(&str, Box<dyn schedhost::policy::PolicyBackend>); 2] = [
            (
                "native",
                Box::new(schedhost::policy::NativePolicy::<
                    schedhost_policy_deadline::Deadline,
                >::default()),
            ),
            ("wasm", Box::new(loaded.instantiate().unwrap())),
        ];
        for (build, policy) in builds {
            let (sent, vetoed, asks) = deadline_merges(policy, front_merges);
            let want = if front_merges == 1 {
                // Both bios joined request 2.
                (vec![(1000, 8), (1992, 24)], 0)
            } else {
                // Bio 3 joined it; bio 4 was refused and went on its own, first in
                // sector order.
                (vec![(1000, 8), (1992, 8), (2000, 16)], 1)
            };
            assert_eq!((sent, vetoed), want, "{build}, front_merges={front_merges}");
            assert_eq!(asks, 0, "{build}: asked allow-merge {asks} times");
        }
    }
}
