//! time-slice's behaviour, each scenario run on the native build and on the component.

use crate::helpers::RawIds;
use schedhost::policy::PolicyBackend;
use schedhost_policy_time_slice::TimeSlice;
use schedhost_sdk::{Completion, Op, PrioClass, Request, Setup};
use schedhost_sdk::{RequestId, Sector};

use crate::helpers::both_builds;

const US: u64 = 1_000;

fn builds(slice_us: i64) -> Vec<(&'static str, Box<dyn PolicyBackend>)> {
    both_builds::<TimeSlice>(
        "time-slice",
        Setup {
            hw_queues: 1,
            queue_depth: 1,
            nr_requests: 64,
            rotational: true,
        },
        &[("time_slice_us", slice_us)],
    )
}

fn req(id: u64, ctx: u32) -> Request {
    Request {
        id: RequestId(id),
        ctx,
        op: Op::Read,
        sector: Sector(id * 8),
        sectors: 8,
        sync: true,
        prio_class: PrioClass::None,
        prio_level: 4,
        group: 0,
        arrival_ns: 0,
    }
}

/// Reports request `id` of `ctx` done at `now`.
fn complete(p: &mut Box<dyn PolicyBackend>, now: u64, id: u64, ctx: u32) {
    let done = Completion {
        id: RequestId(id),
        ctx,
        op: Op::Read,
        sectors: 8,
        latency_ns: now,
        service_ns: now,
        status: 0,
    };
    p.completed(now, &[done]).unwrap();
}

#[test]
fn time_slice_zero_round_robins_one_request_per_ctx() {
    for (build, mut p) in builds(0) {
        p.insert(0, &[req(1, 0), req(2, 0), req(3, 1), req(4, 1), req(5, 2)])
            .unwrap();
        let ids = p.dispatch(0, 0, 8).unwrap().ids.raw();
        assert_eq!(ids, vec![1, 3, 5, 2, 4], "{build}");
    }
}

#[test]
fn time_slice_serves_one_ctx_and_idles_for_it_within_its_slice() {
    for (build, mut p) in builds(250) {
        p.insert(0, &[req(1, 0), req(2, 1)]).unwrap();
        assert_eq!(p.dispatch(0, 0, 1).unwrap().ids.raw(), vec![1], "{build}");
        complete(&mut p, 90 * US, 1, 0);
        // ctx 0 is empty but its slice runs until 250 µs: wait for it rather than switch.
        let answer = p.dispatch(100 * US, 0, 1).unwrap();
        assert!(answer.ids.is_empty(), "{build}");
        assert_eq!(answer.wake_at_ns, Some(250 * US), "{build}");
        p.insert(120 * US, &[req(3, 0)]).unwrap();
        assert_eq!(
            p.dispatch(120 * US, 0, 1).unwrap().ids.raw(),
            vec![3],
            "{build}"
        );
    }
}

#[test]
fn time_slice_switches_after_slice_expiry() {
    for (build, mut p) in builds(250) {
        p.insert(0, &[req(1, 0), req(2, 0), req(3, 0), req(4, 1)])
            .unwrap();
        assert_eq!(p.dispatch(0, 0, 1).unwrap().ids.raw(), vec![1], "{build}");
        assert_eq!(
            p.dispatch(200 * US, 0, 1).unwrap().ids.raw(),
            vec![2],
            "{build}"
        );
        // The slice ended at 250 µs: at the next completion ctx 1 gets the next one, though
        // ctx 0 still has work.
        complete(&mut p, 260 * US, 1, 0);
        assert_eq!(
            p.dispatch(260 * US, 0, 1).unwrap().ids.raw(),
            vec![4],
            "{build}"
        );
        complete(&mut p, 300 * US, 4, 1);
        assert_eq!(
            p.dispatch(300 * US, 0, 1).unwrap().wake_at_ns,
            Some(510 * US),
            "{build}: ctx 1's slice runs to 510 µs"
        );
        assert_eq!(
            p.dispatch(510 * US, 0, 1).unwrap().ids.raw(),
            vec![3],
            "{build}"
        );
    }
}

#[test]
fn time_slice_lets_a_request_on_the_device_outlast_its_slice() {
    for (build, mut p) in builds(250) {
        p.insert(0, &[req(1, 0), req(2, 1)]).unwrap();
        assert_eq!(p.dispatch(0, 0, 1).unwrap().ids.raw(), vec![1], "{build}");
        // Past the slice, but nothing has completed or arrived: no switch and no timer, since
        // request 1's completion will run the queue.
        let answer = p.dispatch(300 * US, 0, 1).unwrap();
        assert!(answer.ids.is_empty(), "{build}");
        assert_eq!(answer.wake_at_ns, None, "{build}");
        complete(&mut p, 8_000 * US, 1, 0);
        assert_eq!(
            p.dispatch(8_000 * US, 0, 1).unwrap().ids.raw(),
            vec![2],
            "{build}"
        );
    }
}

#[test]
fn time_slice_switches_at_a_submission_after_expiry() {
    for (build, mut p) in builds(250) {
        p.insert(0, &[req(1, 0), req(2, 0), req(3, 1)]).unwrap();
        assert_eq!(
            p.dispatch(0, 0, 2).unwrap().ids.raw(),
            vec![1, 2],
            "{build}"
        );
        // A deep submitter keeps requests on the device all the time; its slice still ends
        // at the first submission after expiry.
        p.insert(400 * US, &[req(4, 2)]).unwrap();
        assert_eq!(
            p.dispatch(400 * US, 0, 1).unwrap().ids.raw(),
            vec![3],
            "{build}"
        );
    }
}
