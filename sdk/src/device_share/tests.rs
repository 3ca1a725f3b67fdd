use super::*;
use crate::{Group, Op};

fn done(id: u64, service_ns: u64) -> Completion {
    Completion {
        id: RequestId(id),
        ctx: 0,
        op: Op::Read,
        sectors: 8,
        latency_ns: service_ns,
        service_ns,
        status: 0,
    }
}

/// Groups of weights 1 and 5, each with 64 requests outstanding.
fn two_groups() -> [Backlog; 2] {
    [1, 5].map(|weight| Backlog {
        group: u32::try_from(weight).unwrap(),
        weight,
        outstanding: 64,
    })
}

/// A share that saw one window with service times `times` (cycled).
fn after_window(times: &[u64]) -> DeviceShare {
    let mut share = DeviceShare::default();
    for i in 0..u64::from(WINDOW) {
        share.sent(RequestId(i), 1);
    }
    let done: Vec<Completion> = (0..u64::from(WINDOW))
        .map(|i| done(i, times[i as usize % times.len()]))
        .collect();
    share.completed(&done);
    share
}

#[test]
fn a_bound_applies_from_the_start_until_a_window_shows_no_queueing() {
    // Swapped in under load, a policy never sees the device idle: it bounds first.
    let mut share = DeviceShare::new(64, 1);
    let two = two_groups();
    assert!(share.saturated() && share.bound(two).is_some());
    for i in 0..u64::from(WINDOW) {
        share.sent(RequestId(i), 1);
    }
    let calm: Vec<Completion> = (0..u64::from(WINDOW))
        .map(|i| done(i, 100 + i % 3 * 10))
        .collect();
    share.completed(&calm);
    assert!(
        !share.saturated(),
        "a window within 1.5 × the least lifts it"
    );
    assert_eq!(share.room(two), u32::MAX);
}

#[test]
fn apportioned_parts_add_up_and_the_largest_remainders_take_what_the_floors_leave() {
    // Quotas 4.60, 1.91, 93.69, 0.45, 8.53, 4.83: floors 110, four more by remainder.
    assert_eq!(
        apportion(114, &[41, 17, 835, 4, 76, 43]),
        vec![5, 2, 94, 0, 8, 5]
    );
    assert_eq!(
        apportion(2, &[1, 1, 1]),
        vec![1, 1, 0],
        "ties to the earlier"
    );
    assert!(apportion(7, &[]).is_empty());
    // Generated pools and weights: the parts add up, each within one of its quota.
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = |n: u64| {
        x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        (x >> 33) % n
    };
    for _ in 0..500 {
        let total = u32::try_from(next(5000)).unwrap();
        let weights: Vec<u64> = (0..1 + next(8)).map(|_| 1 + next(10_000)).collect();
        let parts = apportion(total, &weights);
        assert_eq!(
            parts.iter().map(|&p| u64::from(p)).sum::<u64>(),
            u64::from(total)
        );
        let sum: u64 = weights.iter().sum();
        for (&p, &w) in parts.iter().zip(&weights) {
            let quota = f64::from(total) * w as f64 / sum as f64;
            assert!(
                (f64::from(p) - quota).abs() < 1.0,
                "{p} for a quota of {quota}"
            );
        }
    }
}

#[test]
fn no_bound_below_saturation_or_with_one_group() {
    let calm = after_window(&[100, 110, 120]);
    assert!(!calm.saturated());
    let two = two_groups();
    assert_eq!(calm.room(two), u32::MAX);
    let busy = after_window(&[100, 400, 700]);
    assert!(busy.saturated());
    assert_eq!(
        busy.bound([Backlog {
            group: 5,
            weight: 5,
            outstanding: 64
        }]),
        None
    );
}

#[test]
fn a_saturated_device_holds_what_lets_the_heaviest_group_keep_its_part() {
    let busy = after_window(&[100, 400, 700]);
    // 1:2:5 at 64 each: the weight-5 group may have 5/8 of B in flight with a request
    // to spare, so B = 0.9 × 64 × 8 / 5.
    let groups = [1, 2, 5].map(|weight| Backlog {
        group: u32::try_from(weight).unwrap(),
        weight,
        outstanding: 64,
    });
    assert_eq!(busy.bound(groups), Some(92));
    // An idle group does not count.
    let groups = [
        Backlog {
            group: 1,
            weight: 1,
            outstanding: 0,
        },
        Backlog {
            group: 2,
            weight: 1,
            outstanding: 10,
        },
        Backlog {
            group: 3,
            weight: 1,
            outstanding: 40,
        },
    ];
    assert_eq!(busy.bound(groups), Some(18));
}

#[test]
fn the_bound_keeps_half_a_hardware_queue_on_the_device() {
    let mut busy = after_window(&[100, 400, 700]);
    let fresh = DeviceShare::new(31, 1);
    (busy.floor, busy.tags) = (fresh.floor, fresh.tags);
    let groups = [1, 2, 5].map(|weight| Backlog {
        group: u32::try_from(weight).unwrap(),
        weight,
        outstanding: 2,
    });
    assert_eq!(
        busy.bound(groups),
        Some(15),
        "2 × 8 / 5 × 0.9 would leave 2"
    );
}

#[test]
fn groups_each_beyond_an_equal_split_of_the_tags_are_bounded_at_their_parts_under_the_floor() {
    // 256 tags, a floor learnt up to 200: groups 1:5 at 150 each contend for the tags
    // (300 outstanding), and the weight-5 group keeps its part only at 0.9 × 150 × 6 / 5.
    let mut busy = after_window(&[100, 400, 700]);
    (busy.floor, busy.tags) = (200, 256);
    assert_eq!(busy.bound(light_and_heavy(150)), Some(162));
    // At 100 each the device holds them all with tags to spare: the floor keeps its
    // throughput.
    assert_eq!(busy.bound(light_and_heavy(100)), Some(200));
}

#[test]
fn a_bound_lifts_only_once_the_queueing_falls_well_under_where_it_began() {
    let mut share = after_window(&[100, 400, 700]);
    let mut window = |times: &[u64]| {
        for i in 0..u64::from(WINDOW) {
            share.sent(RequestId(1000 + i), 1);
        }
        let done: Vec<Completion> = (0..u64::from(WINDOW))
            .map(|i| done(1000 + i, times[i as usize % times.len()]))
            .collect();
        share.completed(&done);
        share.saturated()
    };
    assert!(
        window(&[100, 170, 230]),
        "a mean of 1.67 × the least keeps it"
    );
    assert!(!window(&[100, 130, 160]), "1.3 × lifts it");
    assert!(
        !window(&[100, 170, 230]),
        "and 1.67 × does not set it again"
    );
}

#[test]
fn a_bound_lifts_only_if_half_the_depth_is_not_a_third_faster() {
    let send = |share: &mut DeviceShare, ids: std::ops::Range<u64>| {
        for id in ids {
            share.sent(RequestId(id), 1);
        }
    };
    let complete = |share: &mut DeviceShare, ids: std::ops::Range<u64>, time: u64| {
        let done: Vec<Completion> = ids.map(|id| done(id, time)).collect();
        share.completed(&done);
    };
    for (half_depth_time, lifts) in [(230, false), (440, true)] {
        // Swapped in under load, a policy's first samples are a loaded device's: 96 on
        // it, every one at 460.
        let mut share = DeviceShare::new(64, 1);
        send(&mut share, 0..96);
        complete(&mut share, 0..32, 460);
        assert!(
            share.saturated(),
            "calm against its own loaded time, but a probe first"
        );
        assert_eq!(
            share.bound(two_groups()),
            Some(32),
            "half the 64 left on it"
        );
        // Requests sent at the deeper depth are not the probe's.
        complete(&mut share, 32..64, 460);
        send(&mut share, 96..128);
        complete(&mut share, 64..96, 460);
        assert!(share.probe.is_some(), "no window at half the depth yet");
        complete(&mut share, 96..128, half_depth_time);
        assert_eq!(
            !share.saturated(),
            lifts,
            "at half the depth {half_depth_time}"
        );
        assert_eq!(share.least_ns, Some(half_depth_time), "the shortest seen");
    }
}

/// Runs `completions` completions on a device kept full to the bound that `groups`
/// ask for, after one request alone teaches it the device's shortest time. The device
/// takes `service(depth)` ns for a request sent when `depth` are on it, itself included.
/// Returns the deepest bound it met.
fn run_at_the_bound(
    share: &mut DeviceShare,
    groups: [Backlog; 2],
    completions: u64,
    service: impl Fn(u32) -> u64,
) -> u32 {
    let mut on_device = std::collections::VecDeque::new();
    let (mut next, mut deepest) = (1_000_000, 0);
    share.sent(RequestId(next), 1);
    share.completed(&[done(next, service(1))]);
    for _ in 0..completions {
        let bound = share.bound(groups).expect("a saturated device, two groups");
        deepest = deepest.max(bound);
        while share.in_flight() < bound {
            next += 1;
            share.sent(RequestId(next), 1 + next as u32 % 2);
            on_device.push_back((next, service(share.in_flight())));
        }
        let (id, time) = on_device.pop_front().expect("a request on the device");
        share.completed(&[done(id, time)]);
    }
    deepest
}

/// Weights 1 and 5 with `outstanding` each: the heavier group's part of the device
/// asks for at most `0.9 × outstanding × 6 / 5` on it.
fn light_and_heavy(outstanding: u32) -> [Backlog; 2] {
    [1, 5].map(|weight| Backlog {
        group: u32::try_from(weight).unwrap(),
        weight,
        outstanding,
    })
}

#[test]
fn the_floor_rises_while_a_device_completes_5_percent_more_at_twice_it() {
    // A request waits for an eighth of those ahead of it: the rate at a depth d goes
    // as d / (8 + d), 5 % more at twice d until d is about 76. The groups ask for 43.
    let parallel = |depth: u32| 1_000 + 125 * u64::from(depth);
    let mut share = DeviceShare::new(128, 2);
    assert_eq!(share.floor, 64);
    run_at_the_bound(&mut share, light_and_heavy(40), 20_000, parallel);
    assert!(
        (76..=128).contains(&share.floor),
        "the floor at {}: past where doubling gains 5 %, not far past it",
        share.floor
    );
    let floor = share.floor;
    run_at_the_bound(&mut share, light_and_heavy(40), 20_000, parallel);
    assert_eq!(share.floor, floor, "and there it stays");
}

#[test]
fn the_floor_stays_where_a_device_completes_no_more_at_twice_it() {
    // One unit serving in turn: twice the depth, twice the time, the same rate.
    let mut share = DeviceShare::new(128, 2);
    run_at_the_bound(&mut share, light_and_heavy(40), 20_000, |depth| {
        1_000 * u64::from(depth)
    });
    assert_eq!(share.floor, 64);
    assert!(
        share.knee.backed_off(),
        "each trial that found nothing waits longer for the next"
    );
}

#[test]
fn a_floor_trial_never_asks_for_more_than_the_device_has_tags() {
    // 16 tags in one queue: the floor starts at 8, its trials at 16, never 16 × 2.
    let mut share = DeviceShare::new(16, 1);
    let deepest = run_at_the_bound(&mut share, light_and_heavy(6), 5_000, |depth| {
        1_000 + 300 * u64::from(depth)
    });
    assert_eq!(deepest, 16, "tried at its tags");
    assert!((9..=16).contains(&share.floor), "risen to {}", share.floor);
}

#[test]
fn completions_and_requeues_leave_the_device_and_strangers_are_ignored() {
    let mut share = DeviceShare::default();
    share.sent(RequestId(1), 7);
    share.sent(RequestId(2), 7);
    share.sent(RequestId(2), 7);
    assert_eq!((share.in_flight(), share.in_flight_of(7)), (2, 2));
    share.requeued(RequestId(1));
    share.completed(&[done(2, 50), done(99, 50)]);
    assert_eq!((share.in_flight(), share.in_flight_of(7)), (0, 0));
    assert_eq!(share.window_count, 1, "only its own completion counted");
}

fn group(id: u32, weight: u32, riops: Option<u64>) -> Group {
    Group {
        id,
        weight,
        reserve_iops: None,
        limit_iops: [riops, None],
        limit_bps: [None, None],
        latency_target_ns: None,
    }
}

/// `n` requests of `group`, `op`, each sent and completed `spacing_ns` after the last.
fn complete_paced(
    share: &mut DeviceShare,
    group: u32,
    op: Op,
    ids: std::ops::Range<u64>,
    spacing_ns: u64,
) {
    for (k, id) in ids.enumerate() {
        share.sent(RequestId(id), group);
        let mut c = done(id, 700);
        c.op = op;
        share.completed_at(k as u64 * spacing_ns, &[c]);
    }
}

/// A heavy group held by its io.max limit to 4 outstanding, beside two light ones with 64.
fn heavy_limited_beside_two() -> [Backlog; 3] {
    [(1, 5, 4), (2, 1, 64), (3, 2, 64)].map(|(group, weight, outstanding)| Backlog {
        group,
        weight,
        outstanding,
    })
}

#[test]
fn a_group_completing_at_its_limit_has_no_room_kept_for_its_weights_part() {
    let mut share = after_window(&[100, 400, 700]);
    share.groups(&[
        group(1, 5, Some(1000)),
        group(2, 1, None),
        group(3, 2, None),
    ]);
    // Bounded for the heavy group's part: 0.9 × 4 × 8 / 5.
    assert_eq!(share.bound(heavy_limited_beside_two()), Some(5));
    // 1000 IOPS for 40 ms: a window is 32 of its I/Os at the limit, 32 ms.
    complete_paced(&mut share, 1, Op::Read, 100..141, 1_000_000);
    assert!(share.at_limit(1));
    share.sent(RequestId(500), 1);
    share.sent(RequestId(501), 1);
    // The light two share what they are bounded to (0.9 × 64 × 3 / 2), and the limited
    // group's two on the device count besides.
    assert_eq!(share.bound(heavy_limited_beside_two()), Some(86 + 2));
    // With one other group left, nothing is bounded.
    let [heavy, light, _] = heavy_limited_beside_two();
    assert_eq!(share.bound([heavy, light]), None);
}

#[test]
fn a_group_under_its_limit_or_past_it_only_one_way_is_still_bounded_for() {
    // 1.1 ms apart: 909 IOPS under a limit of 1000.
    let mut under = after_window(&[100, 400, 700]);
    under.groups(&[group(1, 5, Some(1000))]);
    complete_paced(&mut under, 1, Op::Read, 100..141, 1_100_000);
    assert!(!under.at_limit(1));
    assert_eq!(under.bound(heavy_limited_beside_two()), Some(5));
    // At its read limit, but completing writes no limit holds back.
    let mut both = after_window(&[100, 400, 700]);
    both.groups(&[group(1, 5, Some(1000))]);
    let ids = 100..141;
    for (k, id) in ids.enumerate() {
        both.sent(RequestId(id), 1);
        both.sent(RequestId(id + 1000), 1);
        let read = done(id, 700);
        let write = Completion {
            op: Op::Write,
            ..done(id + 1000, 700)
        };
        both.completed_at(k as u64 * 1_000_000, &[read, write]);
    }
    assert!(!both.at_limit(1));
    // The window needs the time: without it, no group is seen at its limit.
    let mut untimed = after_window(&[100, 400, 700]);
    untimed.groups(&[group(1, 5, Some(1000))]);
    for id in 100..141 {
        untimed.sent(RequestId(id), 1);
        untimed.completed(&[done(id, 700)]);
    }
    assert!(!untimed.at_limit(1));
}

#[test]
fn a_changed_limit_starts_its_window_again() {
    let mut share = after_window(&[100, 400, 700]);
    share.groups(&[group(1, 5, Some(1000))]);
    complete_paced(&mut share, 1, Op::Read, 100..141, 1_000_000);
    assert!(share.at_limit(1));
    share.groups(&[group(1, 5, Some(1000))]);
    assert!(share.at_limit(1), "the same limits keep what was seen");
    share.groups(&[group(1, 5, Some(2000))]);
    assert!(!share.at_limit(1));
    share.groups(&[group(1, 5, None)]);
    assert!(!share.at_limit(1));
}

#[test]
fn a_group_at_its_limit_still_keeps_the_floor_as_a_group_with_few_requests_does() {
    let mut share = after_window(&[100, 400, 700]);
    (share.floor, share.tags) = (200, 256);
    share.groups(&[
        group(1, 5, Some(1000)),
        group(2, 1, None),
        group(3, 30, None),
    ]);
    complete_paced(&mut share, 1, Op::Read, 100..141, 1_000_000);
    assert!(share.at_limit(1));
    let groups =
        [(1, 5, 4), (2, 1, 140), (3, 30, 140)].map(|(group, weight, outstanding)| Backlog {
            group,
            weight,
            outstanding,
        });
    // Counted out, it would leave two groups of 140 contending for 256 tags, and the bound
    // at the heavy one's part, 0.9 × 140 × 31 / 30: 130.
    assert_eq!(share.bound(groups), Some(200));
}

#[test]
fn a_limited_group_that_completes_nothing_is_not_taken_as_held_past_two_windows() {
    let mut share = after_window(&[100, 400, 700]);
    share.groups(&[group(1, 5, Some(1000)), group(2, 1, None)]);
    // At its limit to 40 ms; its window of 32 ms began again at 32 ms.
    complete_paced(&mut share, 1, Op::Read, 100..141, 1_000_000);
    assert!(share.at_limit(1));
    let other = |share: &mut DeviceShare, id: u64, at_ns: u64| {
        share.sent(RequestId(id), 2);
        share.completed_at(at_ns, &[done(id, 700)]);
    };
    other(&mut share, 900, 60_000_000);
    assert!(share.at_limit(1), "within two windows of its last");
    other(&mut share, 901, 100_000_000);
    assert!(!share.at_limit(1), "8 completions in 68 ms");
}

/// Groups given as (weight, outstanding) pairs, numbered from 1.
fn backlogs(groups: &[(u64, u32)]) -> Vec<Backlog> {
    (1..)
        .zip(groups)
        .map(|(group, &(weight, outstanding))| Backlog {
            group,
            weight,
            outstanding,
        })
        .collect()
}

#[test]
fn groups_holding_their_parts_of_a_full_pool_contend_though_each_holds_few() {
    // The sweep's seed 64 cell 200: 214 scheduler tags, a heavy group at its iodepth of 73
    // and three light ones sharing the other 141. Each light one holds under an equal split
    // of the device's 256 tags, so without the pool they did not contend, the floor let
    // them beside the heavy one's whole iodepth, and the device took every request.
    let mut share = after_window(&[100, 400, 700]);
    (share.floor, share.tags) = (200, 256);
    let cell = backlogs(&[(12, 4), (6, 73), (8, 64), (563, 73)]);
    assert_eq!(
        share.bound(cell.iter().copied()),
        Some(200),
        "no pool known"
    );
    share.pool = Some(214);
    // 0.9 × 73 × 589 / 563: the heavy group keeps its part.
    assert_eq!(share.bound(cell.iter().copied()), Some(68));
    // A group between a completion and its submitter's next request still holds its part
    // (the weight-12 group's is ⌊214 × 12 / 589⌋ = 4), and the pool counts as full.
    let between = backlogs(&[(12, 3), (6, 73), (8, 63), (563, 73)]);
    assert_eq!(share.bound(between.iter().copied()), Some(68));
}

#[test]
fn a_full_pool_keeps_the_floor_for_a_group_that_holds_less_than_its_part() {
    // The heavy group asks for 8, far under its part of the pool: the bound that would give
    // it its share (0.9 × 8 × 589 / 563 = 7) would idle the device, and the floor keeps
    // its throughput, as it does where the pool is not full.
    let mut share = after_window(&[100, 400, 700]);
    (share.floor, share.tags, share.pool) = (200, 256, Some(214));
    let cell = backlogs(&[(12, 70), (6, 68), (8, 68), (563, 8)]);
    assert_eq!(share.bound(cell.iter().copied()), Some(200));
    // Nor is a pool with room full: the light groups hold what they ask.
    let room = backlogs(&[(12, 40), (6, 40), (8, 40), (563, 73)]);
    assert_eq!(share.bound(room.iter().copied()), Some(200));
}

#[test]
fn a_bound_for_a_setup_knows_the_pool_of_every_hardware_queue() {
    let setup = crate::Setup {
        hw_queues: 2,
        queue_depth: 128,
        nr_requests: 107,
        rotational: false,
    };
    let share = DeviceShare::for_setup(&setup);
    assert_eq!((share.pool, share.tags, share.floor), (Some(214), 256, 64));
}
