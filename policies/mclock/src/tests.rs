use schedhost_sdk::{PrioClass, Runtime, Sector};

use super::*;

fn request(id: u64, group: u32, sectors: u32, arrival_ns: u64) -> Request {
    Request {
        id: RequestId(id),
        ctx: group,
        op: Op::Read,
        sector: Sector(id * 2048),
        sectors,
        sync: true,
        prio_class: PrioClass::None,
        prio_level: 4,
        group,
        arrival_ns,
    }
}

fn group(id: u32, weight: u32) -> Group {
    Group {
        id,
        weight,
        reserve_iops: None,
        limit_iops: [None; 2],
        limit_bps: [None; 2],
        latency_target_ns: None,
    }
}

fn runtime(groups: &[Group]) -> Runtime<Mclock> {
    runtime_with(groups, &[])
}

fn runtime_with(groups: &[Group], settings: &[(String, i64)]) -> Runtime<Mclock> {
    let mut rt = Runtime::new();
    let setup = Setup {
        hw_queues: 1,
        queue_depth: 32,
        nr_requests: 1024,
        rotational: true,
    };
    rt.init(&setup, settings)
        .expect("the settings are accepted");
    rt.groups(0, groups);
    rt
}

/// Every group keeps `depth` requests waiting; a device that finishes one request every
/// `service_ns` takes them for `ns` from `start` (ids and arrivals continue from it, so
/// runs on one policy can follow each other). Returns how many each group got.
fn saturate(
    rt: &mut Runtime<Mclock>,
    groups: &[(u32, u32)],
    depth: u32,
    service_ns: u64,
    (start, ns): (u64, u64),
) -> BTreeMap<u32, u64> {
    let mut next = start;
    let mut got = BTreeMap::new();
    let mut waiting: BTreeMap<RequestId, u32> = BTreeMap::new();
    let mut refill =
        |rt: &mut Runtime<Mclock>, waiting: &mut BTreeMap<RequestId, u32>, now: u64| {
            for &(g, sectors) in groups {
                while waiting.values().filter(|&&w| w == g).count() < depth as usize {
                    next += 1;
                    waiting.insert(RequestId(next), g);
                    rt.insert(now, &[request(next, g, sectors, now)]);
                }
            }
        };
    let mut now = start;
    while now < start + ns {
        refill(rt, &mut waiting, now);
        let answer = rt.dispatch(now, 0, 1);
        let mut done = Vec::new();
        for id in &answer.ids {
            let g = waiting.remove(id).expect("a waiting request");
            *got.entry(g).or_insert(0) += 1;
            done.push(Completion {
                id: *id,
                ctx: g,
                op: Op::Read,
                sectors: 8,
                latency_ns: service_ns,
                service_ns,
                status: 0,
            });
        }
        // The device finishes what it took before the next one: it never queues.
        rt.completed(now, &done);
        now += service_ns;
    }
    got
}

#[test]
fn backlogged_groups_share_by_weight() {
    let mut rt = runtime(&[group(1, 300), group(2, 100)]);
    let got = saturate(&mut rt, &[(1, 8), (2, 8)], 8, 100_000, (0, 1_000_000_000));
    assert_eq!(got[&1] + got[&2], 10_000);
    assert!((7490..=7510).contains(&got[&1]), "{got:?}");
}

#[test]
fn weights_adding_up_to_more_than_the_devices_iops_still_share_by_weight() {
    // A disk at 200 IOPS and weights of 764 and 358: dmClock's `max(now, P' + 1/w)` lags
    // the clock and becomes arrival order (0.50 / 0.50).
    let mut rt = runtime(&[group(1, 764), group(2, 358)]);
    let got = saturate(
        &mut rt,
        &[(1, 8), (2, 8)],
        8,
        5_000_000,
        (0, 10_000_000_000),
    );
    let share = got[&1] as f64 / (got[&1] + got[&2]) as f64;
    assert!(
        (share - 764.0 / 1122.0).abs() < 0.005,
        "{got:?}: {share:.4}"
    );
}

#[test]
fn three_groups_share_one_one_two() {
    let mut rt = runtime(&[group(1, 100), group(2, 100), group(3, 200)]);
    let got = saturate(
        &mut rt,
        &[(1, 8), (2, 8), (3, 8)],
        8,
        100_000,
        (0, 1_000_000_000),
    );
    assert!((4990..=5010).contains(&got[&3]), "{got:?}");
    assert!(got[&1].abs_diff(got[&2]) <= 2, "{got:?}");
}

#[test]
fn a_reservation_is_served_before_weights_however_heavy_the_others() {
    let mut reserved = group(1, 1);
    reserved.reserve_iops = Some(2000);
    let mut rt = runtime(&[reserved, group(2, 10_000)]);
    // 10 000 IOPS for a second: by weight alone group 1 would get 1 in 10 001.
    let got = saturate(&mut rt, &[(1, 8), (2, 8)], 8, 100_000, (0, 1_000_000_000));
    assert!((2000..=2010).contains(&got[&1]), "{got:?}");
}

#[test]
fn mclocks_cost_charges_a_positioning_and_the_transfer_so_a_large_request_is_not_many_small_ones() {
    // 100 MiB/s × 8 ms: a positioning is worth 800 KiB of transfer, so 1 MiB costs 2.25 and
    // 4 KiB 1.005. Equal weights then give the small reader 2.24 times the requests, not
    // the 256 times that a linear cost gives.
    let settings = [
        ("peak_bw".to_owned(), 100),
        ("positioning_us".to_owned(), 8000),
    ];
    let mut rt = runtime_with(&[group(1, 100), group(2, 100)], &settings);
    let got = saturate(&mut rt, &[(1, 2048), (2, 8)], 4, 1_000, (0, 100_000_000));
    let ratio = got[&2] as f64 / got[&1] as f64;
    assert!(
        (ratio / (2.25 / 1.005) - 1.0).abs() < 0.01,
        "{got:?}: {ratio:.3}"
    );
}

#[test]
fn cost_counts_size_so_equal_weights_share_bytes_not_requests() {
    let mut rt = runtime(&[group(1, 100), group(2, 100)]);
    // 64 KiB against 4 KiB: sixteen 4 KiB units each.
    let got = saturate(&mut rt, &[(1, 128), (2, 8)], 8, 100_000, (0, 1_000_000_000));
    let bytes_1 = got[&1] * 16;
    assert!(bytes_1.abs_diff(got[&2]) <= 32, "{got:?}");
}

#[test]
fn with_limit_tags_a_group_at_its_limit_waits_and_asks_to_be_woken_when_it_is_due() {
    let mut limited = group(1, 100);
    limited.limit_iops = [Some(1000), None];
    let mut rt = runtime(&[limited]);
    rt.set("limit_tags", 1).expect("a tunable");
    rt.insert(
        0,
        &[
            request(1, 1, 8, 0),
            request(2, 1, 8, 0),
            request(3, 1, 8, 0),
        ],
    );
    let first = rt.dispatch(0, 0, 8);
    // The first is due at once; the second 1 ms later.
    assert_eq!(first.ids, vec![RequestId(1)]);
    assert_eq!(first.wake_at_ns, Some(1_000_000));
    assert!(rt.dispatch(999_999, 0, 8).ids.is_empty());
    assert_eq!(rt.dispatch(1_000_000, 0, 8).ids, vec![RequestId(2)]);
}

#[test]
fn limits_are_left_to_the_host_unless_limit_tags_is_set() {
    let mut limited = group(1, 100);
    limited.limit_iops = [Some(1000), None];
    let mut rt = runtime(&[limited]);
    rt.insert(0, &[request(1, 1, 8, 0), request(2, 1, 8, 0)]);
    let answer = rt.dispatch(0, 0, 8);
    assert_eq!(answer.ids, vec![RequestId(1), RequestId(2)]);
    assert_eq!(answer.wake_at_ns, None);
}

#[test]
fn a_group_back_from_idle_gets_no_credit_for_its_idle_time() {
    let mut rt = runtime(&[group(1, 100), group(2, 100)]);
    // Group 2 is served alone for a while, its weight tags running ahead of the clock.
    for id in 1..=100 {
        rt.insert(0, &[request(id, 2, 8, 0)]);
    }
    for _ in 0..50 {
        rt.dispatch(0, 0, 1);
    }
    // Group 1 arrives: from now on the two alternate instead of group 1 taking 50 in a row.
    for id in 101..=150 {
        rt.insert(0, &[request(id, 1, 8, 0)]);
    }
    let next: Vec<u32> = (0..20)
        .map(|_| {
            let id = rt.dispatch(0, 0, 1).ids[0].0;
            if id > 100 { 1 } else { 2 }
        })
        .collect();
    let ones = next.iter().filter(|&&g| g == 1).count();
    assert!((9..=11).contains(&ones), "{next:?}");
}

#[test]
fn new_parameters_apply_to_requests_tagged_after_them() {
    let mut rt = runtime(&[group(1, 100), group(2, 100)]);
    let even = saturate(&mut rt, &[(1, 8), (2, 8)], 8, 100_000, (0, 100_000_000));
    assert!(even[&1].abs_diff(even[&2]) <= 10, "{even:?}");
    // What the first run left waiting goes; the second run starts empty.
    rt.dispatch(100_000_000, 0, u32::MAX);
    rt.groups(100_000_000, &[group(1, 100), group(2, 900)]);
    let skewed = saturate(
        &mut rt,
        &[(1, 8), (2, 8)],
        8,
        100_000,
        (100_000_000, 1_000_000_000),
    );
    assert!(skewed[&2] > 8 * skewed[&1], "{skewed:?}");
}

#[test]
fn a_group_whose_requests_are_all_on_the_device_is_busy_not_idle_and_keeps_its_place() {
    let mut rt = runtime(&[group(1, 1), group(2, 100)]);
    // The heavy group's first request goes to the device; the light group's first follows
    // it and its second waits, tagged a second (its weight's step) later.
    rt.insert(0, &[request(1, 2, 8, 0)]);
    assert_eq!(rt.dispatch(0, 0, 1).ids, vec![RequestId(1)]);
    rt.insert(0, &[request(2, 1, 8, 0)]);
    assert_eq!(rt.dispatch(0, 0, 1).ids, vec![RequestId(2)]);
    rt.insert(0, &[request(3, 1, 8, 0)]);
    // The heavy group's queue is empty but its request is on the device: its next one is
    // tagged 10 ms after its last, not moved up to the light group's waiting tag.
    rt.insert(0, &[request(4, 2, 8, 0)]);
    assert_eq!(rt.dispatch(0, 0, 1).ids, vec![RequestId(4)]);
}

#[test]
fn a_flood_a_device_took_whole_leaves_no_group_ahead_of_the_others() {
    // No device bound: the device takes every request waiting at once.
    let settings = [("device_share".to_owned(), 0)];
    let mut rt = runtime_with(&[group(1, 1), group(2, 9)], &settings);
    for id in 1..=50 {
        rt.insert(0, &[request(id, 1, 8, 0), request(100 + id, 2, 8, 0)]);
    }
    assert_eq!(
        rt.dispatch(0, 0, u32::MAX).ids.len(),
        100,
        "all of both at once"
    );
    // Both keep requests waiting from now on: each was served all it asked, so they share
    // 1:9 from here, rather than group 1 waiting for 450 of group 2's (its 50 weight-1
    // steps ahead of group 2's 50 ninths).
    for id in 1..=20 {
        rt.insert(1, &[request(200 + id, 1, 8, 1), request(300 + id, 2, 8, 1)]);
    }
    let light = (0..20)
        .filter(|_| rt.dispatch(1, 0, 1).ids[0].0 < 300)
        .count();
    assert_eq!(light, 2, "group 1 got {light} of 20");
}
