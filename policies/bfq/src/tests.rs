use super::*;

#[test]
fn the_busy_weight_sum_is_each_busy_queues_weight_summed() {
    let mut bfq = Bfq {
        group_weights: [(1, 300), (2, 100)].into_iter().collect(),
        ..Bfq::default()
    };
    // Queues in no group, in groups 1 and 2 and in group 3 (no weight told), busy or
    // idle, of two classes, some weight-raised.
    for ctx in 0..40u32 {
        let queue = Queue {
            class: (ctx % 2) as usize,
            weight: u64::from(10 + ctx % 7 * 10),
            group: ctx % 4,
            busy: ctx % 3 != 0,
            raised_until: if ctx % 5 == 0 { 1_000 } else { 0 },
            ..Queue::default()
        };
        bfq.queues.insert(QueueKey::Sync(ctx), queue);
    }
    for now in [0, 2_000] {
        for class in 0..2 {
            let each: u128 = bfq
                .queues
                .values()
                .filter(|q| q.busy && q.class == class)
                .map(|q| u128::from(bfq.weight(q, now).max(1)))
                .sum();
            assert_eq!(bfq.busy_weight(class, now), each, "class {class} at {now}");
        }
    }
}

/// A busy sync queue of the best-effort class in group `group`, with nothing queued.
fn busy_queue_of(group: u32) -> Queue {
    Queue {
        group,
        class: 1,
        weight: 40,
        sync: true,
        busy: true,
        ..Queue::default()
    }
}

#[test]
fn under_the_groups_parts_the_group_furthest_under_its_part_is_injected_first() {
    let mut bfq = Bfq {
        group_weights: [(1, 100), (2, 100), (3, 100)].into_iter().collect(),
        share: DeviceShare::new(64, 1),
        ..Bfq::default()
    };
    // Group 3's queue is in service; groups 1 and 2 each have a busy queue with a request.
    for ctx in 1..=3u32 {
        let mut queue = Queue {
            budget: 1024,
            ..busy_queue_of(ctx)
        };
        queue.requests.push(&read(u64::from(ctx), ctx), u64::MAX);
        bfq.queues.insert(QueueKey::Sync(ctx), queue);
    }
    // Group 1 has 3 of its part of 4 on the device, group 2 none of its 4.
    for id in 10..13 {
        bfq.share.sent(RequestId(id), 1);
    }
    let parts: BTreeMap<u32, u32> = [(1, 4), (2, 4), (3, 4)].into_iter().collect();
    let source = bfq.injection_source(QueueKey::Sync(3), 0, Some(&parts));
    assert_eq!(
        source,
        Some(QueueKey::Sync(2)),
        "group 2 is furthest under its part"
    );
    // By fill, not by count: group 1 with 3 of 8 is further under than group 2 with 1 of 2.
    let parts: BTreeMap<u32, u32> = [(1, 8), (2, 2), (3, 4)].into_iter().collect();
    bfq.share.sent(RequestId(13), 2);
    let source = bfq.injection_source(QueueKey::Sync(3), 0, Some(&parts));
    assert_eq!(source, Some(QueueKey::Sync(1)), "3 of 8 against 1 of 2");
}

/// A queue that has sent 32 far, small reads: seeky by `BFQQ_SEEKY` on either device.
fn seeky_queue(group: u32) -> Queue {
    let mut queue = Queue {
        group,
        class: 1,
        weight: 40,
        sync: true,
        budget: 2048,
        ..Queue::default()
    };
    for i in 0..32u64 {
        let start = Sector(i * 1_000_000);
        queue
            .habits
            .arrived(0, (start, 8), SeekRule::FarAndSmall, 0);
    }
    assert!(idling::seeky(&queue), "the queue is seeky");
    queue
}

#[test]
fn a_heavy_groups_dry_queue_idles_while_a_light_groups_requests_are_all_on_the_device() {
    let mut bfq = Bfq {
        group_weights: [(1, 13), (2, 2)].into_iter().collect(),
        slice_idle: 8 * MS,
        ..Bfq::default()
    };
    // Group 1's queue is in service and dry; group 2's has nothing queued, three on the
    // device.
    let heavy = Queue {
        busy: true,
        inflight: 1,
        ..seeky_queue(1)
    };
    bfq.queues.insert(QueueKey::Sync(1), heavy);
    let light = Queue {
        inflight: 3,
        ..seeky_queue(2)
    };
    bfq.queues.insert(QueueKey::Sync(2), light);
    bfq.in_driver = 4;
    assert!(
        bfq.better_to_idle(QueueKey::Sync(1), 0),
        "two groups have requests pending: idling keeps the heavy group's share"
    );
    // Once the light group's requests complete, nothing asks for it.
    if let Some(light) = bfq.queues.get_mut(&QueueKey::Sync(2)) {
        light.inflight = 0;
    }
    bfq.in_driver = 1;
    assert!(
        !bfq.better_to_idle(QueueKey::Sync(1), 0),
        "one group pending, one seeky queue on flash: no idling"
    );
}

#[test]
fn a_seeky_turn_too_short_to_measure_is_charged_an_idle_slice_on_a_disk_and_min_tt_on_flash() {
    for (rotational, least_ns) in [(true, 8 * MS), (false, MIN_TT_NS)] {
        let bfq = Bfq {
            slice_idle: 8 * MS,
            timeout: 125 * MS,
            max_budget: 16_384,
            rotational,
            ..Bfq::default()
        };
        let queue = seeky_queue(0);
        let service = InService {
            key: QueueKey::Sync(0),
            served: 8,
            budget: 16_384,
            charge_factor: 1,
            started: 0,
            until: 125 * MS,
            idle_started: 0,
            idle_until: None,
            held_for_heavy: false,
        };
        // Dry after 100 µs: the max budget's part of the timeout for `least_ns`.
        let charged = bfq.charge(&queue, &service, 100_000, Expiry::NoMoreRequests);
        assert_eq!(
            u128::from(charged),
            16_384 * u128::from(least_ns) / u128::from(125 * MS),
            "rotational {rotational}"
        );
    }
}

/// A request of submitter `ctx` in group `ctx` for `test`s: 4 KiB at a sector of its own.
fn read(id: u64, ctx: u32) -> Request {
    Request {
        id: RequestId(id),
        ctx,
        op: Op::Read,
        sector: Sector(id * 1_000_000),
        sectors: 8,
        sync: true,
        prio_class: PrioClass::Be,
        prio_level: 4,
        group: ctx,
        arrival_ns: 0,
    }
}

/// A light group's queue in service, its one request on the device and a limit of one
/// learned, a heavy group's queue waiting with two requests; the light request completes
/// and its submitter sends the next at once (one host turn): what one dispatch sends.
fn completion_then_next_request(rotational: bool, latency_target: bool) -> Vec<RequestId> {
    let mut bfq = Bfq {
        group_weights: [(1, 10), (2, 1000)].into_iter().collect(),
        latency_targets: latency_target.then_some(1).into_iter().collect(),
        slice_idle: 8 * MS,
        timeout: 125 * MS,
        max_budget: 16_384,
        rotational,
        ..Bfq::default()
    };
    let light = Queue {
        busy: true,
        inflight: 1,
        inject: inject::InjectLimit::learned(1, 100_000),
        ..seeky_queue(1)
    };
    bfq.queues.insert(QueueKey::Sync(1), light);
    let mut heavy = Queue {
        busy: true,
        ..seeky_queue(2)
    };
    for id in [20, 21] {
        heavy.requests.push(&read(id, 2), u64::MAX);
        bfq.queued.insert(RequestId(id), QueueKey::Sync(2));
    }
    bfq.queues.insert(QueueKey::Sync(2), heavy);
    bfq.on_device.insert(RequestId(1), QueueKey::Sync(1));
    bfq.in_driver = 1;
    bfq.in_service = Some(sync_1_in_service());
    let now = 100_000;
    let done = Completion {
        id: RequestId(1),
        ctx: 1,
        op: Op::Read,
        sectors: 8,
        latency_ns: now,
        service_ns: now,
        status: 0,
    };
    bfq.completed(now, &[done]);
    bfq.insert(now, &[read(2, 1)]);
    let mut out = Dispatch::default();
    bfq.dispatch(now, 0, 8, &mut out);
    // On the device now, the limit one: nothing more beside it.
    let mut again = Dispatch::default();
    bfq.dispatch(now, 0, 8, &mut again);
    assert!(again.ids.is_empty(), "{:?}", again.ids);
    out.ids
}

#[test]
fn a_completion_that_leaves_the_queue_in_service_dry_injects_before_its_next_request() {
    assert_eq!(
        completion_then_next_request(false, false),
        [RequestId(20), RequestId(2)],
        "the heavy group's request goes as the kernel's run from the completion injects it, then the light one"
    );
    // Not on a disk, whose simulated queue would keep a read behind injected writes, nor
    // for a group with a latency target, whose next request would wait behind it.
    assert_eq!(completion_then_next_request(true, false), [RequestId(2)]);
    assert_eq!(completion_then_next_request(false, true), [RequestId(2)]);
}

#[test]
fn with_groups_a_queue_more_than_one_turn_ahead_of_the_virtual_time_is_not_injected() {
    let mut bfq = Bfq {
        group_weights: [(1, 10), (2, 1000), (3, 1000)].into_iter().collect(),
        ..Bfq::default()
    };
    bfq.vtime[1] = 1_000;
    // Group 3's queue is in service and dry, with room under its limit; group 1's light
    // queue has been injected so often that its turn starts 250 past the virtual time,
    // its turns 100 long; group 2's starts 50 past, its turns 100 long.
    let in_service = Queue {
        busy: true,
        inject: inject::InjectLimit::learned(4, 100_000),
        ..seeky_queue(3)
    };
    bfq.queues.insert(QueueKey::Sync(3), in_service);
    for (ctx, start) in [(1u32, 1_250u128), (2, 1_050)] {
        let mut queue = Queue {
            busy: true,
            start,
            finish: start + 100,
            ..seeky_queue(ctx)
        };
        queue
            .requests
            .push(&read(u64::from(ctx) * 10, ctx), u64::MAX);
        bfq.queues.insert(QueueKey::Sync(ctx), queue);
    }
    assert_eq!(
        bfq.injection_source(QueueKey::Sync(3), 0, None),
        Some(QueueKey::Sync(2)),
        "the light queue, more than a turn ahead of the earliest other, waits"
    );
    // Alone beside the queue in service (as beside a group held by io.max), however far
    // ahead: B-WF2Q+ would serve it next.
    bfq.queues.remove(&QueueKey::Sync(2));
    assert_eq!(
        bfq.injection_source(QueueKey::Sync(3), 0, None),
        Some(QueueKey::Sync(1))
    );
    // Without groups the kernel's rule: any busy queue with a request, by key.
    let mut heavy = Queue {
        busy: true,
        start: 1_050,
        finish: 1_150,
        ..seeky_queue(2)
    };
    heavy.requests.push(&read(20, 2), u64::MAX);
    bfq.queues.insert(QueueKey::Sync(2), heavy);
    bfq.group_weights.clear();
    assert_eq!(
        bfq.injection_source(QueueKey::Sync(3), 0, None),
        Some(QueueKey::Sync(1))
    );
}

/// Queue `Sync(1)`'s turn from time 0: a request served of a 2 048-sector budget, not idling.
fn sync_1_in_service() -> InService {
    InService {
        key: QueueKey::Sync(1),
        served: 8,
        budget: 2048,
        charge_factor: 1,
        started: 0,
        until: 125 * MS,
        idle_started: 0,
        idle_until: None,
        held_for_heavy: false,
    }
}

/// Group 1's queue in service and dry, nothing on the device; group 2's, 350 times lighter,
/// with `held` requests waiting in bfq and its budget spent on injected ones, so none can be
/// injected. Two hardware queues of 4 scheduler tags. What bfq dispatches, and whether it
/// arms a timer.
fn dry_heavy_queue_beside_held_requests(held: u64) -> Dispatch {
    let mut bfq = Bfq {
        group_weights: [(1, 700), (2, 2)].into_iter().collect(),
        slice_idle: 8 * MS,
        timeout: 125 * MS,
        max_budget: 16_384,
        nr_requests: 4,
        hw_queues: 2,
        ..Bfq::default()
    };
    let heavy = Queue {
        busy: true,
        ..seeky_queue(1)
    };
    bfq.queues.insert(QueueKey::Sync(1), heavy);
    let mut light = Queue {
        busy: true,
        budget: 16,
        injected: 16,
        ..seeky_queue(2)
    };
    for id in 100..100 + held {
        light.requests.push(&read(id, 2), u64::MAX);
        bfq.queued.insert(RequestId(id), QueueKey::Sync(2));
    }
    bfq.queues.insert(QueueKey::Sync(2), light);
    bfq.in_service = Some(sync_1_in_service());
    assert!(
        bfq.better_to_idle(QueueKey::Sync(1), MS),
        "the weights differ"
    );
    let mut out = Dispatch::default();
    bfq.dispatch(MS, 0, 8, &mut out);
    out
}

#[test]
fn a_dry_queue_is_not_idled_for_once_the_requests_bfq_holds_fill_every_scheduler_tag() {
    let free_tag = dry_heavy_queue_beside_held_requests(7);
    assert!(
        free_tag.ids.is_empty() && free_tag.wake_at_ns.is_some(),
        "a tag is free, so group 1's next request can come: idled for ({:?}, {:?})",
        free_tag.ids,
        free_tag.wake_at_ns
    );
    let every_tag = dry_heavy_queue_beside_held_requests(8);
    assert_eq!(
        every_tag.ids.first(),
        Some(&RequestId(100)),
        "every tag held here: the turn ends and group 2's requests go"
    );
}

/// Group 1's queue in service and dry, its inject limit learned down to nothing at time 0
/// from a baseline of 100 µs; group 2's queue waiting with three requests.
fn limit_learned_down_to_nothing() -> Bfq {
    let mut bfq = Bfq {
        group_weights: [(1, 232), (2, 135)].into_iter().collect(),
        slice_idle: 8 * MS,
        timeout: 125 * MS,
        max_budget: 16_384,
        ..Bfq::default()
    };
    let in_service = Queue {
        busy: true,
        inject: inject::InjectLimit::learned(0, 100_000),
        ..seeky_queue(1)
    };
    bfq.queues.insert(QueueKey::Sync(1), in_service);
    let mut other = Queue {
        busy: true,
        ..seeky_queue(2)
    };
    for id in [20, 21, 22] {
        other.requests.push(&read(id, 2), u64::MAX);
        bfq.queued.insert(RequestId(id), QueueKey::Sync(2));
    }
    bfq.queues.insert(QueueKey::Sync(2), other);
    bfq.in_service = Some(sync_1_in_service());
    bfq
}

#[test]
fn an_inject_limit_learned_down_to_nothing_is_probed_with_one_request_ten_ms_after_it_fell() {
    let mut bfq = limit_learned_down_to_nothing();
    let (key, other) = (QueueKey::Sync(1), Some(QueueKey::Sync(2)));
    // The kernel keeps such a limit until it is learned again a second later: a queue at
    // iodepth 1 then kept the device 125 ms with nothing beside it, and a group held by
    // io.max beside it fell 24 % short of its rate (the sweep's seed 8 cell 164).
    assert_eq!(bfq.injection_source(key, 9 * MS, None), None);
    assert_eq!(bfq.injection_source(key, 10 * MS, None), other);
    // One request at most: the probe goes only onto an empty device.
    bfq.in_driver = 1;
    assert_eq!(bfq.injection_source(key, 10 * MS, None), None);
    bfq.in_driver = 0;
    // The probe: injected, then the queue's own request arrives and goes beside it, and
    // takes 200 µs, twice its time alone: the limit stays at nothing, and the next probe
    // waits another 10 ms from that completion.
    let mut out = Dispatch::default();
    assert!(bfq.inject(key, 10 * MS, None, &mut out));
    bfq.sample_arrival(key, 10 * MS);
    bfq.sample_dispatch(RequestId(1));
    bfq.in_driver = 2;
    let done = 10 * MS + 200_000;
    bfq.sample_completion(RequestId(1), key, done);
    bfq.in_driver = 0;
    assert_eq!(bfq.injection_source(key, done + 9 * MS, None), None);
    assert_eq!(bfq.injection_source(key, done + 10 * MS, None), other);
    // A probe beside which the queue's request took no longer than alone raises the limit.
    let mut out = Dispatch::default();
    let at = done + 10 * MS;
    assert!(bfq.inject(key, at, None, &mut out));
    bfq.sample_arrival(key, at);
    bfq.sample_dispatch(RequestId(2));
    bfq.in_driver = 2;
    bfq.sample_completion(RequestId(2), key, at + 100_000);
    bfq.in_driver = 0;
    assert_eq!(
        bfq.injection_source(key, at + MS, None),
        other,
        "a limit of one, learned: no probe is due, and one request may go onto an empty device"
    );
}

/// Group 1's queue in service with nothing learned and `own` of its requests on the device,
/// nothing else there; group 2's queue waiting with three requests.
fn unlearned_with_own_on_the_device(own: u32) -> Bfq {
    let mut bfq = limit_learned_down_to_nothing();
    let queue = bfq.queues.get_mut(&QueueKey::Sync(1)).expect("in service");
    queue.inject = inject::InjectLimit::new(0);
    queue.inflight = own;
    bfq.in_driver = own;
    bfq
}

/// `own` of group 1's requests on the device, and `others` of other queues'.
fn on_the_device(bfq: &mut Bfq, own: u32, others: u32) {
    bfq.queues
        .get_mut(&QueueKey::Sync(1))
        .expect("in service")
        .inflight = own;
    bfq.in_driver = own + others;
}

/// Group 1's request `id` arrives at `at` and goes beside `own` of its own, `others` of
/// other queues' on the device.
fn arrives_and_goes(bfq: &mut Bfq, id: u64, at: u64, own: u32, others: u32) {
    bfq.sample_arrival(QueueKey::Sync(1), at);
    bfq.sample_dispatch(RequestId(id));
    on_the_device(bfq, own + 1, others);
}

/// Group 1's request `id` completes at `at`, one of its own left on the device: what may
/// be injected beside it then.
fn completes_one_left(bfq: &mut Bfq, id: u64, at: u64) -> Option<QueueKey> {
    bfq.sample_completion(RequestId(id), QueueKey::Sync(1), at);
    on_the_device(bfq, 1, 0);
    bfq.injection_source(QueueKey::Sync(1), at, None)
}

#[test]
fn a_queue_keeping_two_requests_on_the_device_learns_its_limit_beside_its_own_and_lets_one_in() {
    let (key, other) = (QueueKey::Sync(1), Some(QueueKey::Sync(2)));
    let mut bfq = unlearned_with_own_on_the_device(1);
    // The kernel samples only onto an empty device, which such a queue never leaves: its
    // limit stays at nothing and nothing goes beside it for its whole turn.
    assert_eq!(bfq.injection_source(key, 20 * MS, None), None);
    // Its next request arrives with only its own on the device, goes, and both complete
    // in 100 µs: the baseline, and a limit of its own two.
    let at = 20 * MS;
    arrives_and_goes(&mut bfq, 2, at, 1, 0);
    assert_eq!(
        bfq.injection_source(key, at, None),
        None,
        "two on the device"
    );
    assert_eq!(
        completes_one_left(&mut bfq, 2, at + 100_000),
        other,
        "one of its two done: one request may go beside the other"
    );
    // Another queue's request on the device as well: the sample is not one alone.
    let mut crowded = unlearned_with_own_on_the_device(1);
    on_the_device(&mut crowded, 1, 1);
    arrives_and_goes(&mut crowded, 2, at, 1, 1);
    assert_eq!(completes_one_left(&mut crowded, 2, at + 100_000), None);
}

#[test]
fn a_sample_beside_the_queues_own_requests_is_not_restarted_by_its_next_arrival() {
    // Each of its requests arrives while its last is still on the device.
    let mut bfq = unlearned_with_own_on_the_device(1);
    let at = 20 * MS;
    arrives_and_goes(&mut bfq, 2, at, 1, 0);
    // Request 1 completes, request 3 arrives and goes: the sample is still request 2's.
    arrives_and_goes(&mut bfq, 3, at + 50_000, 1, 0);
    assert_eq!(
        completes_one_left(&mut bfq, 2, at + 100_000),
        Some(QueueKey::Sync(2)),
        "request 2's sample finished: a baseline and a limit of two"
    );
}

/// What three dispatch calls send for one queue with four reads queued, on a disk: the
/// first, a second at once, and a third after the first sent request completed.
fn sends_with_strict_guarantees(strict: bool) -> [usize; 3] {
    let mut bfq = Bfq {
        strict,
        slice_idle: 8 * MS,
        timeout: 125 * MS,
        max_budget: 16_384,
        rotational: true,
        ..Bfq::default()
    };
    bfq.insert(0, &[1, 2, 3, 4].map(|id| read(id, 1)));
    let mut first = Dispatch::default();
    bfq.dispatch(0, 0, 8, &mut first);
    let mut second = Dispatch::default();
    bfq.dispatch(0, 0, 8, &mut second);
    let done = Completion {
        id: first.ids[0],
        ctx: 1,
        op: Op::Read,
        sectors: 8,
        latency_ns: 1_000,
        service_ns: 1_000,
        status: 0,
    };
    bfq.completed(1_000, &[done]);
    let mut after = Dispatch::default();
    bfq.dispatch(1_000, 0, 8, &mut after);
    [first.ids.len(), second.ids.len(), after.ids.len()]
}

#[test]
fn under_strict_guarantees_the_device_holds_one_request_at_a_time() {
    assert_eq!(
        sends_with_strict_guarantees(true),
        [1, 0, 1],
        "one, none beside it, the next once it completed"
    );
    assert_eq!(
        sends_with_strict_guarantees(false),
        [4, 0, 0],
        "without it the queue's four go at once"
    );
}

/// Two groups of equal weight with 20 reads queued each under a bound, group 1's queue
/// seeky and group 2's seeky or not, after a window in which the device completed three of
/// group 1's 4 KiB requests for each of group 2's: their parts of the bound.
fn parts_after_a_lopsided_window(rotational: bool, second_seeky: bool) -> BTreeMap<u32, u32> {
    let mut bfq = Bfq {
        group_weights: [(1, 100), (2, 100)].into_iter().collect(),
        share: DeviceShare::new(31, 1),
        device_share: true,
        rotational,
        ..Bfq::default()
    };
    for ctx in 1..=2u32 {
        let mut queue = if ctx == 1 || second_seeky {
            Queue {
                busy: true,
                ..seeky_queue(ctx)
            }
        } else {
            busy_queue_of(ctx)
        };
        for i in 0..20 {
            queue
                .requests
                .push(&read(u64::from(ctx) * 100 + i, ctx), u64::MAX);
        }
        bfq.queues.insert(QueueKey::Sync(ctx), queue);
    }
    let even = bfq.group_bound().expect("a bound").parts;
    assert_eq!(
        even.values().collect::<Vec<_>>(),
        [&18, &18],
        "0.9 × 20 × 2, halved"
    );
    for served in [1, 1, 1, 2].repeat(16) {
        bfq.served_on_disk(served, 8);
    }
    bfq.group_bound().expect("a bound").parts
}

#[test]
fn on_a_disk_a_group_served_under_its_part_gets_more_of_the_bound_the_next_window() {
    let parts = parts_after_a_lopsided_window(true, true);
    assert!(parts[&2] > parts[&1], "{parts:?}");
    // Corrected by an eighth of the half each was off, to 960 and 1088 (1024 is one), and
    // the bound where group 2 keeps its part: 0.9 × 20 × 2048 / 1088.
    assert_eq!(parts.values().sum::<u32>(), 33, "{parts:?}");
    // Flash serves each request in its turn whatever its place: its parts stay by weight.
    let parts = parts_after_a_lopsided_window(false, true);
    assert_eq!(parts[&1], parts[&2], "{parts:?}");
}

#[test]
fn on_a_disk_a_sequential_group_beside_a_random_one_is_not_corrected_by_counts() {
    // Its requests cost a fraction of the random group's: a count says nothing of its part.
    let parts = parts_after_a_lopsided_window(true, false);
    assert_eq!((parts[&1], parts[&2]), (18, 18), "{parts:?}");
}

/// A bfq as `init` leaves it with its default tunables, on a disk.
fn started() -> Bfq {
    Bfq {
        slice_idle: 8 * MS,
        timeout: 125 * MS,
        max_budget: 16_384,
        rotational: true,
        ..Bfq::default()
    }
}

/// Submitter 1's queue served well ahead of the system's virtual time, with an inject
/// limit learned; submitter 2's behind it and weight-raised; an async queue: as a bfq
/// that ran a while leaves them, idle.
fn ran_a_while() -> Bfq {
    let mut bfq = started();
    bfq.vtime = [0, 5 << 30, 7];
    let ahead = Queue {
        start: 9 << 30,
        finish: 10 << 30,
        budget: 4096,
        inject: inject::InjectLimit::learned(3, 50_000),
        ..busy_queue_of(1)
    };
    let behind = Queue {
        start: 1 << 30,
        finish: 2 << 30,
        raised_until: 3_000 * MS,
        ..busy_queue_of(2)
    };
    let writer = Queue {
        class: 2,
        weight: 10,
        group: 2,
        finish: 3,
        ..Queue::default()
    };
    for (key, queue) in [
        (QueueKey::Sync(1), ahead),
        (QueueKey::Sync(2), behind),
        (QueueKey::Async(2, 2, 7), writer),
    ] {
        bfq.queues.insert(
            key,
            Queue {
                busy: false,
                ..queue
            },
        );
    }
    bfq
}

#[test]
fn a_newer_build_takes_over_the_virtual_times_and_saves_the_same_bytes_again() {
    let old = ran_a_while();
    let saved = old.save_state();
    let mut new = started();
    new.restore_state(&saved).expect("its own state");
    assert_eq!(new.vtime, old.vtime);
    // Nothing asked for yet: what it took is what it saves.
    assert_eq!(new.save_state(), saved);
    // Each queue is built from its first request, carrying its place, its raising's end
    // and its inject limit: submitter 1's turn starts at its old finish, ahead of the
    // virtual time; submitter 2's raising ends when it did, not 3 s after this request.
    let now = 100 * MS;
    new.insert(now, &[read(1, 1), read(2, 2)]);
    let ahead = new.queues.get(&QueueKey::Sync(1)).expect("created");
    assert_eq!(ahead.start, 10 << 30);
    assert_eq!(ahead.inject.parts(), (3, 50_000, 0));
    let behind = new.queues.get(&QueueKey::Sync(2)).expect("created");
    assert_eq!(behind.raised_until, 3_000 * MS);
    assert_eq!(behind.start, 5 << 30, "behind the virtual time: from it");
    // A bfq that never ran saves only the header, which restores to the same.
    let mut fresh = started();
    let empty = started().save_state();
    fresh.restore_state(&empty).expect("an empty state");
    assert_eq!(fresh.save_state(), empty);
}

/// Which submitter's request a bfq sends first when submitter 1 and then submitter 2
/// send one each, after `restore_state` with the state of `ran_a_while` or none.
fn first_served(restored: bool) -> u32 {
    let mut bfq = started();
    if restored {
        bfq.restore_state(&ran_a_while().save_state())
            .expect("its own state");
    }
    bfq.insert(0, &[read(1, 1), read(2, 2)]);
    let mut out = Dispatch::default();
    bfq.dispatch(0, 0, 1, &mut out);
    let first = out.ids.first().expect("a request sent");
    u32::try_from(first.0).expect("ids are the submitters'")
}

#[test]
fn a_newer_build_serves_first_the_queue_the_old_one_owed_service() {
    assert_eq!(first_served(true), 2, "submitter 1 was a turn ahead");
    assert_eq!(first_served(false), 1, "started afresh, in arrival order");
}

#[test]
fn a_state_that_does_not_parse_is_refused_saying_what_is_wrong() {
    let good = ran_a_while().save_state();
    let refused = |state: &[u8]| {
        let mut bfq = started();
        let why = bfq.restore_state(state).expect_err("refused");
        assert!(
            bfq.restored.is_empty(),
            "nothing taken from a refused state"
        );
        why
    };
    assert!(refused(&good[..3]).contains("version tag"));
    assert!(refused(b"bfq0").contains("not a state of this bfq"));
    assert!(refused(&good[..good.len() - 1]).contains("queues take"));
    let mut longer = good.clone();
    longer.push(0);
    assert!(refused(&longer).contains("queues take"));
    // `good` with `bytes` written at `at`.
    let patched = |at: usize, bytes: &[u8]| {
        let mut state = good.clone();
        state[at..at + bytes.len()].copy_from_slice(bytes);
        state
    };
    let most = u128::MAX.to_le_bytes();
    // The count says more queues than there are bytes for: no allocation by it.
    assert!(refused(&patched(52, &u32::MAX.to_le_bytes())).contains("queues take"));
    // The first record's start (after its key of 7 bytes) past its finish.
    assert!(refused(&patched(56 + 7, &most)).contains("after its finish"));
    // A virtual time, and then a finish, past any bfq's.
    assert!(refused(&patched(20, &most)).contains("past any bfq's"));
    assert!(refused(&patched(56 + 23, &most)).contains("past any bfq's virtual time"));
    // The first record's key kind set to one no bfq has.
    assert!(refused(&patched(56, &[9])).contains("no bfq queue has the key"));
    // A key twice: the second record a copy of the first.
    let record = (good.len() - 56) / 3;
    let mut twice = good.clone();
    twice.copy_within(56..56 + record, 56 + record);
    assert!(refused(&twice).contains("out of key order or twice"));
    // Into an instance that already holds queues.
    let mut running = ran_a_while();
    assert!(
        running
            .restore_state(&good)
            .expect_err("refused")
            .contains("before its first request")
    );
}

#[test]
fn any_bytes_given_as_a_state_are_taken_or_refused_and_never_panic() {
    let good = ran_a_while().save_state();
    // A fixed xorshift, so the cases are the same on every run.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut taken = 0;
    for case in 0..4_000 {
        let mut state = good.clone();
        match case % 4 {
            // A few bytes changed anywhere.
            0 | 1 => {
                for _ in 0..1 + next() % 4 {
                    let at = (next() % state.len() as u64) as usize;
                    state[at] = next() as u8;
                }
            }
            // Cut short.
            2 => state.truncate((next() % state.len() as u64) as usize),
            // Bytes of nothing in particular.
            _ => {
                let len = (next() % 300) as usize;
                state = (0..len).map(|_| next() as u8).collect();
            }
        }
        let mut bfq = started();
        if bfq.restore_state(&state).is_ok() {
            // Taken: it saves again, and serves requests from it.
            let _ = bfq.save_state();
            bfq.insert(0, &[read(1, 1), read(2, 2)]);
            let mut out = Dispatch::default();
            bfq.dispatch(0, 0, 2, &mut out);
            assert!(!out.ids.is_empty(), "case {case}: nothing sent");
            taken += 1;
        }
    }
    // Most changes to a record's times, budget or limits still parse: both ways are tried.
    assert!((500..3_000).contains(&taken), "{taken} of 4 000 taken");
}

/// Group 2 (weight 2) in service with 100 reads queued and a 2 048-sector budget, group 1
/// (weight 19) busy with `heavy` queued and nothing on the device, under a bound on a
/// 256-tag device, as a run's first turn that went to the light group found it; one
/// dispatch. The ids sent are group 1's from 1000, group 2's from 2000.
fn light_turn_beside_a_heavy_backlog(heavy: u64) -> (Bfq, Vec<RequestId>) {
    let mut bfq = Bfq {
        group_weights: [(1, 19), (2, 2)].into_iter().collect(),
        share: DeviceShare::new(256, 1),
        device_share: true,
        slice_idle: 8 * MS,
        timeout: 125 * MS,
        max_budget: 16_384,
        ..Bfq::default()
    };
    for (ctx, count, budget) in [(1u32, heavy, 16_384u64), (2, 100, 2048)] {
        let mut queue = Queue {
            busy: true,
            budget,
            ..seeky_queue(ctx)
        };
        for i in 0..count {
            let id = u64::from(ctx) * 1000 + i;
            queue.requests.push(&read(id, ctx), u64::MAX);
            bfq.queued.insert(RequestId(id), QueueKey::Sync(ctx));
        }
        bfq.queues.insert(QueueKey::Sync(ctx), queue);
    }
    bfq.in_service = Some(InService {
        key: QueueKey::Sync(2),
        served: 0,
        ..sync_1_in_service()
    });
    let mut out = Dispatch::default();
    bfq.dispatch(0, 0, 1000, &mut out);
    (bfq, out.ids)
}

/// How many of `ids` are group 1's and group 2's.
fn by_group(ids: &[RequestId]) -> (usize, usize) {
    let light = ids.iter().filter(|id| id.0 >= 2000).count();
    (ids.len() - light, light)
}

#[test]
fn a_light_turn_stops_at_its_part_while_a_heavy_backlog_has_nothing_on_the_device() {
    // The bound: 0.9 × 300 × 21 / 19 = 298, parts 270 and 28. Sent whole, the light
    // group's 100 took the device the heavy group was owed, and it was charged them after.
    let (mut bfq, sent) = light_turn_beside_a_heavy_backlog(300);
    assert_eq!(by_group(&sent), (270, 28), "the parts of the bound");
    // Held so for the rest of its turn: ten of the heavy group's complete and their
    // submitters send ten more; the room goes to its backlog, not to the light turn past
    // its part.
    let done: Vec<Completion> = (1000..1010)
        .map(|id| Completion {
            id: RequestId(id),
            ctx: 1,
            op: Op::Read,
            sectors: 8,
            latency_ns: 50_000,
            service_ns: 50_000,
            status: 0,
        })
        .collect();
    bfq.completed(50_000, &done);
    let next: Vec<Request> = (1300..1310).map(|id| read(id, 1)).collect();
    bfq.insert(50_000, &next);
    let mut out = Dispatch::default();
    bfq.dispatch(50_000, 0, 1000, &mut out);
    assert_eq!(by_group(&out.ids), (10, 0), "the heavy group's ten");
    // 30 queued cannot fill the heavy group's part of the floor's bound (128: 116 and 12):
    // the light turn goes on, and bfq charges it as it goes.
    let (_, sent) = light_turn_beside_a_heavy_backlog(30);
    assert_eq!(by_group(&sent).1, 100, "the light group's whole queue");
}
