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
/// with `latency`; returns how many the policy let out.
fn round_trip(
    p: &mut Box<dyn PolicyBackend>,
    first: u64,
    n: u64,
    op: Op,
    latency: u64,
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
            service_ns: latency,
            status: 0,
        })
        .collect();
    p.completed(now, &done).unwrap();
    ids.len()
}

#[test]
fn kyber_shrinks_depth_when_latency_exceeds_target() {
    for (build, mut p) in builds() {
        assert_eq!(
            round_trip(&mut p, 0, 200, Op::Write, MS, 0),
            128,
            "{build}: the write domain starts 128 deep"
        );
        // Drain the 72 writes left queued, still at 1 ms against a 10 ms target.
        assert_eq!(
            round_trip(&mut p, 200, 0, Op::Write, MS, 10 * MS),
            72,
            "{build}"
        );
        // Reads take 4 ms against a 2 ms target: once the window closes (at the first
        // completion report after 100 ms) the device counts as congested, and the write domain,
        // under its target, is throttled to (p99 bucket 0 + 1) / 4 of its depth.
        round_trip(&mut p, 1000, 50, Op::Read, 4 * MS, 50 * MS);
        p.completed(120 * MS, &[]).unwrap();
        assert_eq!(
            round_trip(&mut p, 2000, 200, Op::Write, MS, 121 * MS),
            32,
            "{build}"
        );
    }
}

#[test]
fn kyber_keeps_depths_while_latencies_meet_targets() {
    for (build, mut p) in builds() {
        assert_eq!(round_trip(&mut p, 0, 100, Op::Write, MS, 0), 100, "{build}");
        round_trip(&mut p, 1000, 50, Op::Read, MS / 2, 50 * MS);
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
