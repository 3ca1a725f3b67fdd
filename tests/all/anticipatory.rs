//! anticipatory's decisions, each scenario run on the native build and on the component.

use schedhost::policy::PolicyBackend;
use schedhost_policy_anticipatory::Anticipatory;
use schedhost_sdk::{Op, PrioClass, Request, RequestId, Sector, Setup};

use crate::helpers::{RawIds, both_builds, done};

const MS: u64 = 1_000_000;

fn builds(settings: &[(&str, i64)]) -> Vec<(&'static str, Box<dyn PolicyBackend>)> {
    both_builds::<Anticipatory>(
        "anticipatory",
        Setup {
            hw_queues: 1,
            queue_depth: 32,
            nr_requests: 64,
            rotational: true,
        },
        settings,
    )
}

fn read(id: u64, ctx: u32, sector: u64) -> Request {
    Request {
        id: RequestId(id),
        ctx,
        op: Op::Read,
        sector: Sector(sector),
        sectors: 8,
        sync: true,
        prio_class: PrioClass::None,
        prio_level: 4,
        group: 0,
        arrival_ns: 0,
    }
}

fn write(id: u64, sector: u64) -> Request {
    Request {
        op: Op::Write,
        sync: false,
        ..read(id, 9, sector)
    }
}

/// Ids sent at `now_ms`, and the wake asked for (in ms).
fn send(p: &mut Box<dyn PolicyBackend>, now_ms: u64, budget: u32) -> (Vec<u64>, Option<u64>) {
    let d = p.dispatch(now_ms * MS, 0, budget).unwrap();
    (d.ids.raw(), d.wake_at_ns.map(|ns| ns / MS))
}

/// Process 1's read at sector 1000 sent at 0 ms and completed at 2 ms, with two writes
/// waiting since 0 ms: the scheduler waits for process 1's next read until 2 + 6 ms.
fn waiting_for_process_1(p: &mut Box<dyn PolicyBackend>, build: &str) {
    p.insert(0, &[read(1, 1, 1000)]).unwrap();
    assert_eq!(send(p, 0, 4).0, vec![1], "{build}");
    p.insert(0, &[write(10, 500_000), write(11, 500_008)])
        .unwrap();
    // The read is still on the device: wait for it (no timer yet), writes held.
    assert_eq!(send(p, 1, 4), (vec![], None), "{build}");
    p.completed(2 * MS, &[done(1, 1)]).unwrap();
    assert_eq!(
        send(p, 2, 4),
        (vec![], Some(8)),
        "{build}: waits antic_expire from the completion"
    );
}

#[test]
fn anticipatory_holds_writes_for_the_last_readers_next_request_and_serves_it_at_once() {
    for (build, mut p) in builds(&[]) {
        waiting_for_process_1(&mut p, build);
        p.insert(3 * MS, &[read(2, 1, 1008)]).unwrap();
        // Its next read goes at once; with a 1 ms think time it is waited for again.
        assert_eq!(send(&mut p, 3, 4).0, vec![2], "{build}");
    }
}

#[test]
fn anticipatory_gives_up_waiting_after_antic_expire() {
    for (build, mut p) in builds(&[]) {
        waiting_for_process_1(&mut p, build);
        assert_eq!(
            send(&mut p, 7, 4),
            (vec![], Some(8)),
            "{build}: still waiting"
        );
        assert_eq!(
            send(&mut p, 8, 4).0,
            vec![10, 11],
            "{build}: the writes' turn"
        );
    }
}

#[test]
fn anticipatory_waits_the_tunable_time() {
    for (build, mut p) in builds(&[("antic_expire", 20)]) {
        p.insert(0, &[read(1, 1, 1000)]).unwrap();
        send(&mut p, 0, 4);
        p.insert(0, &[write(10, 500_000)]).unwrap();
        p.completed(2 * MS, &[done(1, 1)]).unwrap();
        assert_eq!(send(&mut p, 2, 4), (vec![], Some(22)), "{build}");
    }
}

#[test]
fn anticipatory_serves_a_close_read_of_another_process_at_once() {
    for (build, mut p) in builds(&[]) {
        waiting_for_process_1(&mut p, build);
        p.insert(3 * MS, &[read(3, 2, 1108)]).unwrap();
        assert_eq!(send(&mut p, 3, 1).0, vec![3], "{build}");
    }
}

#[test]
fn anticipatory_keeps_waiting_past_a_far_read_of_another_process() {
    for (build, mut p) in builds(&[]) {
        waiting_for_process_1(&mut p, build);
        p.insert(3 * MS, &[read(3, 2, 50_000_000)]).unwrap();
        assert_eq!(send(&mut p, 3, 4), (vec![], Some(8)), "{build}");
        // The wait runs out: the far read is served before the writes (a read batch).
        assert_eq!(send(&mut p, 8, 1).0, vec![3], "{build}");
    }
}

#[test]
fn anticipatory_does_not_wait_for_a_process_that_has_requests_queued() {
    for (build, mut p) in builds(&[]) {
        p.insert(0, &[read(1, 1, 1000)]).unwrap();
        assert_eq!(send(&mut p, 0, 1).0, vec![1], "{build}");
        // Process 1 has a read queued, far off; process 2's lies nearer the head. Neither is
        // close, but process 1 is not idle: the nearer read goes.
        p.insert(MS, &[read(3, 1, 2_000_000), read(4, 2, 200_000)])
            .unwrap();
        assert_eq!(send(&mut p, 1, 4).0, vec![4], "{build}");
    }
}

#[test]
fn anticipatory_does_not_wait_for_a_process_that_thinks_longer_than_antic_expire() {
    for (build, mut p) in builds(&[]) {
        // Process 1 reads with 15 ms between a completion and its next read.
        let mut now = 0;
        for i in 0..24 {
            p.insert(now * MS, &[read(i, 1, 1000 + i * 8)]).unwrap();
            assert_eq!(send(&mut p, now, 1).0, vec![i], "{build}");
            p.completed((now + 1) * MS, &[done(i, 1)]).unwrap();
            now += 16;
        }
        // Writes arrive just after its last read completed: no waiting for it.
        p.insert((now - 14) * MS, &[write(100, 500_000)]).unwrap();
        assert_eq!(send(&mut p, now - 14, 1).0, vec![100], "{build}");
    }
}

#[test]
fn anticipatory_serves_an_expired_read_before_the_elevator_reaches_it() {
    for (build, mut p) in builds(&[("antic_expire", 0)]) {
        p.insert(0, &[read(1, 1, 5_000_000), read(2, 2, 100)])
            .unwrap();
        assert_eq!(
            send(&mut p, 0, 1).0,
            vec![1],
            "{build}: the FIFO head starts the batch"
        );
        // The elevator goes on ahead; read 2, far behind, waits until it expires at 125 ms
        // (looked for once per read_expire).
        for k in 1..=12 {
            p.insert(k * 10 * MS, &[read(100 + k, 1, 5_000_000 + 8 * k)])
                .unwrap();
            assert_eq!(
                send(&mut p, k * 10, 1).0,
                vec![100 + k],
                "{build} at {k}0 ms"
            );
        }
        p.insert(130 * MS, &[read(113, 1, 5_000_104)]).unwrap();
        assert_eq!(send(&mut p, 130, 1).0, vec![2], "{build}");
    }
}

#[test]
fn anticipatory_turned_off_sends_writes_while_a_reader_thinks() {
    for (build, mut p) in builds(&[("antic_expire", 0)]) {
        p.insert(0, &[read(1, 1, 1000)]).unwrap();
        send(&mut p, 0, 4);
        p.insert(0, &[write(10, 500_000)]).unwrap();
        p.completed(2 * MS, &[done(1, 1)]).unwrap();
        assert_eq!(send(&mut p, 2, 4).0, vec![10], "{build}");
    }
}
