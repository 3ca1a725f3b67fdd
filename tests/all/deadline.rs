//! deadline's behaviour, each scenario run on the native build and on the component.

use crate::helpers::RawIds;
use schedhost::policy::PolicyBackend;
use schedhost_policy_deadline::Deadline;
use schedhost_sdk::{MergeKind, MergeQuery, Op, PrioClass, Request, Setup};
use schedhost_sdk::{RequestId, Sector};

use crate::helpers::both_builds;

const MS: u64 = 1_000_000;

fn builds(settings: &[(&str, i64)]) -> Vec<(&'static str, Box<dyn PolicyBackend>)> {
    both_builds::<Deadline>(
        "deadline",
        Setup {
            hw_queues: 1,
            queue_depth: 32,
            nr_requests: 64,
            rotational: true,
        },
        settings,
    )
}

/// A read of class `class`, as [`req`] makes it.
fn read_in(class: PrioClass, id: u64, sector: u64, arrival_ms: u64) -> Request {
    Request {
        prio_class: class,
        ..req(id, Op::Read, sector, arrival_ms)
    }
}

fn req(id: u64, op: Op, sector: u64, arrival_ms: u64) -> Request {
    Request {
        id: RequestId(id),
        ctx: 0,
        op,
        sector: Sector(sector),
        sectors: 8,
        sync: true,
        prio_class: PrioClass::None,
        prio_level: 4,
        group: 0,
        arrival_ns: arrival_ms * MS,
    }
}

fn one(p: &mut Box<dyn PolicyBackend>, now_ms: u64) -> Option<u64> {
    let ids = p.dispatch(now_ms * MS, 0, 1).unwrap().ids.raw();
    assert!(ids.len() <= 1);
    ids.first().copied()
}

#[test]
fn deadline_serves_reads_in_sector_order_from_the_last_position() {
    for (build, mut p) in builds(&[]) {
        p.insert(
            0,
            &[
                req(1, Op::Read, 9000, 0),
                req(2, Op::Read, 100, 0),
                req(3, Op::Read, 5000, 0),
            ],
        )
        .unwrap();
        let order: Vec<_> = (0..3).filter_map(|_| one(&mut p, 1)).collect();
        assert_eq!(order, vec![2, 3, 1], "{build}");
    }
}

#[test]
fn deadline_serves_expired_read_before_sorted_write_batch() {
    for (build, mut p) in builds(&[("read_expire", 500), ("fifo_batch", 1)]) {
        // A first batch, so later calls start new batches.
        p.insert(0, &[req(9, Op::Read, 0, 0)]).unwrap();
        assert_eq!(one(&mut p, 0), Some(9), "{build}");
        let writes: Vec<Request> = (0..8)
            .map(|i| req(10 + i, Op::Write, 100 + i * 8, 0))
            .collect();
        p.insert(0, &writes).unwrap();
        p.insert(
            0,
            &[req(1, Op::Read, 90_000, 0), req(2, Op::Read, 80_000, 400)],
        )
        .unwrap();
        // At 600 ms the first read has expired: it goes before the read that is next in
        // sector order, and before the writes sorted near the head.
        assert_eq!(one(&mut p, 600), Some(1), "{build}");
        // Nothing lies ahead of 90 008 in sector order: the next batch starts at the FIFO head.
        assert_eq!(one(&mut p, 600), Some(2), "{build}");
        // Reads were preferred twice while writes waited (writes_starved = 2): now writes.
        assert_eq!(one(&mut p, 600), Some(10), "{build}");
    }
}

#[test]
fn deadline_does_not_starve_writes_beyond_writes_starved() {
    for (build, mut p) in builds(&[("fifo_batch", 1), ("writes_starved", 2)]) {
        p.insert(0, &[req(0, Op::Read, 0, 0)]).unwrap();
        let mut served = vec![one(&mut p, 0).unwrap()];
        p.insert(MS, &[req(100, Op::Write, 50_000, 1)]).unwrap();
        for i in 1..5u64 {
            p.insert(i * MS, &[req(i, Op::Read, i * 8, i)]).unwrap();
            served.push(one(&mut p, i).unwrap());
        }
        // Reads are preferred twice while the write waits; the third batch is the write.
        assert_eq!(served, vec![0, 1, 2, 100, 3], "{build}");
    }
}

#[test]
fn deadline_serves_realtime_class_first_unless_lower_class_aged() {
    for (build, mut p) in builds(&[("prio_aging_expire", 100)]) {
        let be = read_in(PrioClass::Be, 1, 0, 0);
        let rt = read_in(PrioClass::Rt, 2, 8000, 0);
        p.insert(0, &[be, rt]).unwrap();
        assert_eq!(one(&mut p, 1), Some(2), "{build}: RT first");
        let rt2 = read_in(PrioClass::Rt, 3, 9000, 150);
        p.insert(150 * MS, &[rt2]).unwrap();
        assert_eq!(
            one(&mut p, 150),
            Some(1),
            "{build}: the BE read aged past 100 ms"
        );
        assert_eq!(one(&mut p, 150), Some(3), "{build}");
    }
}

#[test]
fn deadline_holds_a_lower_class_while_a_higher_one_has_requests_in_flight() {
    use crate::helpers::done;
    for (build, mut p) in builds(&[]) {
        let be = read_in(PrioClass::Be, 1, 0, 0);
        let rt = read_in(PrioClass::Rt, 2, 8000, 0);
        p.insert(0, &[be, rt]).unwrap();
        assert_eq!(one(&mut p, 1), Some(2), "{build}: RT first");
        // Nothing RT is queued, but one is on the device: mq-deadline's dd_queued(RT) is 1.
        assert_eq!(
            one(&mut p, 2),
            None,
            "{build}: BE waits for the RT read in flight"
        );
        p.completed(3 * MS, &[done(2, 0)]).unwrap();
        assert_eq!(
            one(&mut p, 3),
            Some(1),
            "{build}: BE once RT has nothing left"
        );
    }
}

#[test]
fn deadline_front_merges_follow_the_tunable() {
    let query = MergeQuery {
        target: RequestId(1),
        target_ctx: 0,
        ctx: 0,
        op: Op::Read,
        sector: Sector(0),
        sectors: 8,
        sync: true,
        kind: MergeKind::Front,
    };
    for (build, mut p) in builds(&[]) {
        assert!(p.allow_merge(&query).unwrap(), "{build}");
        p.set("front_merges", 0).unwrap().unwrap();
        assert!(!p.allow_merge(&query).unwrap(), "{build}");
        assert!(
            p.allow_merge(&MergeQuery {
                kind: MergeKind::Back,
                ..query
            })
            .unwrap(),
            "{build}"
        );
    }
}

#[test]
fn deadline_limits_async_requests_to_three_quarters_of_nr_requests() {
    for (build, mut p) in builds(&[]) {
        assert_eq!(p.limit_depth(Op::Write, false).unwrap(), 48, "{build}");
        assert_eq!(p.limit_depth(Op::Read, true).unwrap(), u32::MAX, "{build}");
        p.set("async_depth", 8).unwrap().unwrap();
        assert_eq!(p.limit_depth(Op::Write, false).unwrap(), 8, "{build}");
    }
}

#[test]
fn deadline_rejects_out_of_range_tunables_by_name() {
    for (build, mut p) in builds(&[]) {
        let err = p.set("fifo_batch", 0).unwrap().unwrap_err();
        assert_eq!(
            err, "deadline: fifo_batch=0 is out of range 1..=1024 requests",
            "{build}"
        );
        assert_eq!(p.get("read_expire").unwrap(), Some(500), "{build}");
        assert_eq!(p.get("write_expire").unwrap(), Some(5000), "{build}");
    }
}

#[test]
fn deadline_absorbed_request_is_never_dispatched() {
    for (build, mut p) in builds(&[]) {
        p.insert(
            0,
            &[
                req(1, Op::Read, 0, 0),
                req(2, Op::Read, 16, 0),
                req(3, Op::Read, 8, 0),
            ],
        )
        .unwrap();
        // Bio 8..16 joined request 1 and coalesced request 2 (host-side); 3 is a separate request.
        p.merged(
            0,
            &[schedhost_sdk::MergeEvent {
                target: RequestId(1),
                sector: Sector(0),
                sectors: 24,
                kind: MergeKind::Back,
                absorbed: Some(RequestId(2)),
            }],
        )
        .unwrap();
        let ids = p.dispatch(MS, 0, 8).unwrap().ids.raw();
        assert_eq!(ids, vec![1, 3], "{build}");
    }
}
