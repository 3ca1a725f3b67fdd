//! kyber's behaviour, each scenario run on the native build and on the component.

use crate::helpers::RawIds;
use schedhost::policy::PolicyBackend;
use schedhost_policy_kyber::Kyber;
use schedhost_sdk::{Completion, Op, PrioClass, Request, Setup};
use schedhost_sdk::{RequestId, Sector};

use crate::helpers::both_builds;

const MS: u64 = 1_000_000;

fn builds() -> Vec<(&'static str, Box<dyn PolicyBackend>)> {
    both_builds::<Kyber>(
        "kyber",
        Setup {
            hw_queues: 1,
            queue_depth: 1024,
            nr_requests: 2048,
            rotational: true,
        },
        &[],
    )
}

fn request(id: u64, op: Op) -> Request {
    Request {
        id: RequestId(id),
        ctx: 0,
        op,
        sector: Sector(id * 8),
        sectors: 8,
        sync: true,
        prio_class: PrioClass::None,
        prio_level: 4,
        group: 0,
        arrival_ns: 0,
    }
}

/// Inserts `n` requests of `op` from id `first`, dispatches them, completes them at `now`
/// after `latency` in all and `service` on the device; returns how many the policy let out.
fn round_trip_timed(
    p: &mut Box<dyn PolicyBackend>,
    (first, n, op): (u64, u64, Op),
    (latency, service): (u64, u64),
    now: u64,
) -> usize {
    let requests: Vec<Request> = (first..first + n).map(|id| request(id, op)).collect();
    p.insert(now, &requests).unwrap();
    let ids = p.dispatch(now, 0, 1024).unwrap().ids.raw();
    let done: Vec<Completion> = ids
        .iter()
        .map(|&id| Completion {
            id: RequestId(id),
            ctx: 0,
            op,
            sectors: 8,
            latency_ns: latency,
            service_ns: service,
            status: 0,
        })
        .collect();
    p.completed(now, &done).unwrap();
    ids.len()
}

/// As [`round_trip_timed`], all of `latency` on the device.
fn round_trip(
    p: &mut Box<dyn PolicyBackend>,
    first: u64,
    n: u64,
    op: Op,
    latency: u64,
    now: u64,
) -> usize {
    round_trip_timed(p, (first, n, op), (latency, latency), now)
}

/// `rounds` round trips of 128 requests of `op` from id `first`, from `now` ms on.
fn many(
    p: &mut Box<dyn PolicyBackend>,
    first: u64,
    rounds: u64,
    op: Op,
    timed: (u64, u64),
    now: u64,
) {
    for r in 0..rounds {
        round_trip_timed(p, (first + r * 128, 128, op), timed, (now + r) * MS);
    }
}

#[test]
fn kyber_shrinks_depth_when_latency_exceeds_target() {
    for (build, mut p) in builds() {
        assert_eq!(
            round_trip(&mut p, 0, 200, Op::Write, MS, 0),
            128,
            "{build}: the write domain starts 128 deep"
        );
        // Drain the 72 writes left queued, then 512 more, at 1 ms against a 10 ms target.
        assert_eq!(
            round_trip(&mut p, 200, 0, Op::Write, MS, 10 * MS),
            72,
            "{build}"
        );
        many(&mut p, 10_000, 4, Op::Write, (MS, MS), 11);
        // 640 reads take 4 ms on the device against a 2 ms target: once the timer fires (at
        // the first completion report 100 ms after it was armed) the device counts as
        // congested, and the write domain, under its target, is throttled to
        // (p99 bucket 0 + 1) / 4 of its depth.
        many(&mut p, 20_000, 5, Op::Read, (4 * MS, 4 * MS), 50);
        p.completed(120 * MS, &[]).unwrap();
        assert_eq!(
            round_trip(&mut p, 2000, 200, Op::Write, MS, 121 * MS),
            32,
            "{build}"
        );
    }
}

#[test]
fn kyber_judges_congestion_on_time_on_the_device_not_time_in_the_scheduler() {
    for (build, mut p) in builds() {
        many(&mut p, 0, 5, Op::Write, (MS, MS), 0);
        // Reads wait 4 ms in all but spend 0.1 ms on the device: the device is not
        // congested (KYBER_IO_LATENCY), so writes keep their depth.
        many(&mut p, 20_000, 5, Op::Read, (4 * MS, MS / 10), 50);
        p.completed(120 * MS, &[]).unwrap();
        assert_eq!(
            round_trip(&mut p, 2000, 200, Op::Write, MS, 121 * MS),
            128,
            "{build}"
        );
    }
}

#[test]
fn kyber_reads_a_percentile_only_after_500_samples_or_a_second() {
    for (build, mut p) in builds() {
        many(&mut p, 0, 5, Op::Write, (MS, MS), 0);
        // 50 slow reads: too few to judge when the timer fires at 120 ms.
        round_trip(&mut p, 20_000, 50, Op::Read, 4 * MS, 50 * MS);
        p.completed(120 * MS, &[]).unwrap();
        assert_eq!(
            round_trip(&mut p, 2000, 128, Op::Write, MS, 121 * MS),
            128,
            "{build}: 50 samples are not read before a second has passed"
        );
        // A second after the read domain was first asked, its kept samples decide: the
        // device is congested, and writes go to their last known p99 (bucket 0): a quarter.
        round_trip(&mut p, 30_000, 1, Op::Read, 4 * MS, 1200 * MS);
        p.completed(1310 * MS, &[]).unwrap();
        assert_eq!(
            round_trip(&mut p, 40_000, 200, Op::Write, MS, 1311 * MS),
            32,
            "{build}"
        );
    }
}

#[test]
fn kyber_keeps_depths_while_latencies_meet_targets() {
    for (build, mut p) in builds() {
        assert_eq!(round_trip(&mut p, 0, 100, Op::Write, MS, 0), 100, "{build}");
        many(&mut p, 1000, 5, Op::Read, (MS / 2, MS / 2), 50);
        p.completed(120 * MS, &[]).unwrap();
        assert_eq!(
            round_trip(&mut p, 3000, 200, Op::Write, MS, 130 * MS),
            128,
            "{build}"
        );
    }
}

#[test]
fn kyber_takes_batches_from_each_domain_in_turn() {
    for (build, mut p) in builds() {
        let mut requests: Vec<Request> = (0..20).map(|id| request(id, Op::Write)).collect();
        requests.extend((100..120).map(|id| request(id, Op::Read)));
        p.insert(0, &requests).unwrap();
        let ids = p.dispatch(0, 0, 30).unwrap().ids.raw();
        let kinds: Vec<bool> = ids.iter().map(|&id| id >= 100).collect();
        // 16 reads, then 8 writes, then reads again.
        let expected: Vec<bool> = std::iter::repeat_n(true, 16)
            .chain(std::iter::repeat_n(false, 8))
            .chain(std::iter::repeat_n(true, 4))
            .chain(std::iter::repeat_n(false, 2))
            .collect();
        assert_eq!(kinds, expected, "{build}");
    }
}

#[test]
fn kyber_leaves_sync_requests_every_tag_and_async_ones_three_quarters() {
    for (build, mut p) in builds() {
        assert_eq!(p.limit_depth(Op::Read, true).unwrap(), u32::MAX, "{build}");
        assert_eq!(p.limit_depth(Op::Write, true).unwrap(), u32::MAX, "{build}");
        assert_eq!(
            p.limit_depth(Op::Write, false).unwrap(),
            1536,
            "{build}: 3/4 of 2048"
        );
    }
}
