//! cfq's behaviour, each scenario run on the native build and on the component.

use crate::helpers::RawIds;
use schedhost::policy::PolicyBackend;
use schedhost_policy_cfq::Cfq;
use schedhost_sdk::{Op, PrioClass, Request, Setup};
use schedhost_sdk::{RequestId, Sector};

use crate::helpers::{
    assert_merges_only_into_the_bios_own_queue, both_builds, done, generator, group,
};

const MS: u64 = 1_000_000;

fn builds(settings: &[(&str, i64)]) -> Vec<(&'static str, Box<dyn PolicyBackend>)> {
    both_builds::<Cfq>(
        "cfq",
        Setup {
            hw_queues: 1,
            queue_depth: 32,
            nr_requests: 64,
            rotational: true,
        },
        settings,
    )
}

fn read(id: u64, ctx: u32, sector: u64, at_ms: u64) -> Request {
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
        arrival_ns: at_ms * MS,
    }
}

#[test]
fn cfq_idles_for_same_ctx_within_slice_idle() {
    for (build, mut p) in builds(&[]) {
        p.insert(0, &[read(1, 0, 0, 0), read(2, 1, 100_000, 0)])
            .unwrap();
        assert_eq!(
            p.dispatch(0, 0, 8).unwrap().ids.raw(),
            vec![1],
            "{build}: one queue owns the device"
        );
        // While ctx 0's request is on the device, ctx 1 waits.
        assert!(p.dispatch(MS, 0, 8).unwrap().ids.is_empty(), "{build}");
        p.completed(2 * MS, &[done(1, 0)]).unwrap();
        // ctx 0 is empty: cfq idles 8 ms for its next request rather than seek to ctx 1.
        let idle = p.dispatch(2 * MS, 0, 8).unwrap();
        assert!(idle.ids.is_empty(), "{build}");
        assert_eq!(idle.wake_at_ns, Some(10 * MS), "{build}");
        p.insert(5 * MS, &[read(3, 0, 8, 5)]).unwrap();
        assert_eq!(
            p.dispatch(5 * MS, 0, 8).unwrap().ids.raw(),
            vec![3],
            "{build}: the reader came back within slice_idle"
        );
        p.completed(6 * MS, &[done(3, 0)]).unwrap();
        assert!(
            p.dispatch(6 * MS, 0, 8).unwrap().ids.is_empty(),
            "{build}: idling again"
        );
        // Idling ran out at 14 ms: ctx 1 gets the device.
        assert_eq!(
            p.dispatch(14 * MS, 0, 8).unwrap().ids.raw(),
            vec![2],
            "{build}"
        );
    }
}

#[test]
fn cfq_rotates_after_slice() {
    for (build, mut p) in builds(&[("slice_sync", 20), ("low_latency", 0)]) {
        let reqs: Vec<Request> = (0..10)
            .map(|i| read(i, 0, i * 8, 0))
            .chain([read(100, 1, 900_000, 0)])
            .collect();
        p.insert(0, &reqs).unwrap();
        let mut sent = Vec::new();
        for ms in 0..10 {
            let ids = p.dispatch(ms * MS, 0, 1).unwrap().ids.raw();
            for &id in &ids {
                p.completed(ms * MS, &[done(id, 0)]).unwrap();
            }
            sent.extend(ids);
        }
        assert_eq!(
            sent,
            (0..10).collect::<Vec<_>>(),
            "{build}: ctx 0 keeps its 20 ms slice"
        );
        p.insert(10 * MS, &[read(10, 0, 80, 10)]).unwrap();
        assert_eq!(
            p.dispatch(15 * MS, 0, 1).unwrap().ids.raw(),
            vec![10],
            "{build}"
        );
        p.completed(15 * MS, &[done(10, 0)]).unwrap();
        p.insert(15 * MS, &[read(11, 0, 88, 15)]).unwrap();
        // The slice (0–20 ms) has ended: ctx 1's turn, though ctx 0 has work.
        assert_eq!(
            p.dispatch(21 * MS, 0, 1).unwrap().ids.raw(),
            vec![100],
            "{build}"
        );
    }
}

#[test]
fn cfq_sync_request_preempts_async_slice() {
    for (build, mut p) in builds(&[]) {
        let writes: Vec<Request> = (0..4)
            .map(|i| Request {
                op: Op::Write,
                sync: false,
                ..read(10 + i, 5, i * 8, 0)
            })
            .collect();
        p.insert(0, &writes).unwrap();
        assert_eq!(p.dispatch(0, 0, 1).unwrap().ids.raw(), vec![10], "{build}");
        p.insert(MS, &[read(1, 0, 500_000, 1)]).unwrap();
        // The read ends the async slice, but cfq drains the async write on the device
        // before it starts sync I/O (cfq_may_dispatch), and sends no more writes.
        assert!(
            p.dispatch(MS, 0, 1).unwrap().ids.is_empty(),
            "{build}: the write in flight drains first"
        );
        p.completed(2 * MS, &[done(10, 5)]).unwrap();
        assert_eq!(
            p.dispatch(2 * MS, 0, 1).unwrap().ids.raw(),
            vec![1],
            "{build}: the read does not wait for the rest of the async slice"
        );
    }
}

#[test]
fn cfq_merges_only_within_the_queue_a_bio_would_join() {
    for (build, mut p) in builds(&[]) {
        p.insert(0, &[read(1, 0, 0, 0)]).unwrap();
        assert_merges_only_into_the_bios_own_queue(build, p.as_mut(), RequestId(1));
    }
}

#[test]
fn cfq_tunables_have_kernel_defaults_and_ranges() {
    for (build, mut p) in builds(&[]) {
        let defaults: Vec<(String, i64)> = p
            .tunables()
            .unwrap()
            .into_iter()
            .map(|t| (t.name, t.default))
            .collect();
        for (name, value) in [
            ("quantum", 8),
            ("slice_sync", 100),
            ("slice_idle", 8),
            ("target_latency", 300),
            ("back_seek_max", 16384),
        ] {
            assert!(
                defaults.contains(&(name.to_owned(), value)),
                "{build}: {name}"
            );
            assert_eq!(p.get(name).unwrap(), Some(value), "{build}: {name}");
        }
        let err = p.set("low_latency", 2).unwrap().unwrap_err();
        assert_eq!(err, "cfq: low_latency=2 is out of range 0..=1", "{build}");
    }
}

#[test]
fn cfq_lifts_quantum_for_the_only_busy_queue_and_caps_it_beside_another_at_half_then_whole() {
    for (build, mut p) in builds(&[]) {
        // One submitter with 32 requests: the only busy queue has no limit
        // (cfq_may_dispatch: "Sole queue user, no limit").
        let many: Vec<Request> = (0..32).map(|i| read(i, 0, i * 8, 0)).collect();
        p.insert(0, &many).unwrap();
        assert_eq!(p.dispatch(0, 0, 32).unwrap().ids.raw().len(), 32, "{build}");
        // Beside another sync queue the active one stops at quantum / 2 (4) until one of
        // its requests completes, then at quantum (8) while its slice is not about to end
        // (cfq_slice_used_soon).
        let (mut q, _) = (
            builds(&[])
                .into_iter()
                .find(|(b, _)| *b == build)
                .unwrap()
                .1,
            (),
        );
        let mut two: Vec<Request> = (0..32).map(|i| read(i, 0, i * 8, 0)).collect();
        two.push(read(100, 1, 900_000, 0));
        q.insert(0, &two).unwrap();
        assert_eq!(q.dispatch(0, 0, 32).unwrap().ids.raw().len(), 4, "{build}");
        q.completed(MS, &[done(0, 0)]).unwrap();
        assert_eq!(
            q.dispatch(MS, 0, 32).unwrap().ids.raw().len(),
            5,
            "{build}: 8 out"
        );
    }
}

#[test]
fn cfq_gives_an_async_queue_sixteen_requests_a_slice_at_level_four() {
    for (build, mut p) in builds(&[]) {
        // Two async queues, levels 4 and 5: each slice ends after cfq_prio_to_maxrq requests,
        // 2 · slice_async_rq (2) · (8 − level): 16 at level 4, 12 at level 5.
        let write = |id: u64, level: u8| Request {
            op: Op::Write,
            sync: false,
            prio_level: level,
            ..read(id, 0, id * 8, 0)
        };
        let writes: Vec<Request> = (0..40)
            .map(|i| write(i, 4))
            .chain((100..140).map(|i| write(i, 5)))
            .collect();
        p.insert(0, &writes).unwrap();
        let mut runs: Vec<(bool, u32)> = Vec::new();
        for i in 0..60 {
            let ids = p.dispatch(i * MS, 0, 1).unwrap().ids.raw();
            let Some(&id) = ids.first() else { break };
            p.completed(i * MS, &[done(id, 0)]).unwrap();
            let level4 = id < 100;
            match runs.last_mut() {
                Some((l, n)) if *l == level4 => *n += 1,
                _ => runs.push((level4, 1)),
            }
        }
        let expected: Vec<(bool, u32)> = runs
            .iter()
            .take(2)
            .map(|&(l, _)| (l, if l { 16 } else { 12 }))
            .collect();
        assert_eq!(runs[..2], expected[..], "{build}: slices of {runs:?}");
    }
}

#[test]
fn cfq_holds_an_async_queue_while_sync_requests_are_on_the_device() {
    // slice_idle=0: the reader's queue gives the device up as soon as it is empty.
    for (build, mut p) in builds(&[("slice_idle", 0)]) {
        // A sync read goes out; an async write queue becomes active once the reader's queue
        // is empty and expires, but sends nothing while the read is on the device
        // (cfq_may_dispatch: "If this is an async queue and we have sync IO in flight, let
        // it wait").
        p.insert(0, &[read(1, 0, 0, 0)]).unwrap();
        assert_eq!(p.dispatch(0, 0, 8).unwrap().ids.raw(), vec![1], "{build}");
        let write = Request {
            op: Op::Write,
            sync: false,
            ..read(2, 1, 500_000, 0)
        };
        p.insert(MS, &[write]).unwrap();
        let held = p.dispatch(2 * MS, 0, 8).unwrap();
        assert!(held.ids.is_empty(), "{build}: the write waits for the read");
        p.completed(21 * MS, &[done(1, 0)]).unwrap();
        assert_eq!(
            p.dispatch(21 * MS, 0, 8).unwrap().ids.raw(),
            vec![2],
            "{build}: then it goes"
        );
    }
}

#[test]
fn cfq_keeps_serving_a_real_time_async_queue_when_a_best_effort_read_arrives() {
    // cfq_should_preempt: a non-RT request never takes an RT queue's slice, even a sync
    // one from an async queue (and RT is served first whatever the flag says).
    for (build, mut p) in builds(&[]) {
        let writes: Vec<Request> = (0..4)
            .map(|i| Request {
                op: Op::Write,
                sync: false,
                prio_class: PrioClass::Rt,
                ..read(10 + i, 5, i * 8, 0)
            })
            .collect();
        p.insert(0, &writes).unwrap();
        assert_eq!(p.dispatch(0, 0, 1).unwrap().ids.raw(), vec![10], "{build}");
        p.insert(MS, &[read(1, 0, 500_000, 1)]).unwrap();
        p.completed(2 * MS, &[done(10, 5)]).unwrap();
        assert_eq!(
            p.dispatch(2 * MS, 0, 1).unwrap().ids.raw(),
            vec![11],
            "{build}: the RT async slice goes on"
        );
    }
}

#[test]
fn cfq_lets_a_request_near_the_head_preempt_the_queue_it_idles_for() {
    // cfq_should_preempt / cfq_rq_close: while cfq idles for ctx 0, a request of ctx 1
    // within 8 MiB of where the head is is as good as ctx 0's next one, and goes at once;
    // one far away waits for the idle to end.
    for (far, preempts) in [(100_000u64, false), (16, true)] {
        for (build, mut p) in builds(&[]) {
            p.insert(0, &[read(1, 0, 0, 0)]).unwrap();
            assert_eq!(p.dispatch(0, 0, 8).unwrap().ids.raw(), vec![1], "{build}");
            p.completed(2 * MS, &[done(1, 0)]).unwrap();
            assert!(
                p.dispatch(2 * MS, 0, 8).unwrap().ids.is_empty(),
                "{build}: idling"
            );
            p.insert(3 * MS, &[read(2, 1, far, 3)]).unwrap();
            let sent = p.dispatch(3 * MS, 0, 8).unwrap().ids.raw();
            if preempts {
                assert_eq!(sent, vec![2], "{build}: a request at sector {far}");
            } else {
                assert!(sent.is_empty(), "{build}: a request at sector {far}");
            }
        }
    }
}

#[test]
fn cfq_ramps_async_depth_up_one_request_per_sync_slice_after_a_delayed_sync_read() {
    // cfq_may_dispatch under low_latency: after a sync request completed later than
    // fifo_expire_sync, an async queue sends one request at a time, and one more for each
    // slice_sync (100 ms) since.
    for (build, mut p) in builds(&[]) {
        p.insert(0, &[read(1, 0, 0, 0)]).unwrap();
        assert_eq!(p.dispatch(0, 0, 8).unwrap().ids.raw(), vec![1], "{build}");
        let mut late = done(1, 0);
        late.latency_ns = 200 * MS;
        p.completed(200 * MS, &[late]).unwrap();
        let writes: Vec<Request> = (0..8)
            .map(|i| Request {
                op: Op::Write,
                sync: false,
                ..read(10 + i, 5, 1_000_000 + i * 8, 200)
            })
            .collect();
        p.insert(200 * MS, &writes).unwrap();
        let first = p.dispatch(200 * MS, 0, 8).unwrap();
        assert_eq!(
            first.ids.raw().len(),
            1,
            "{build}: one async request right after"
        );
        let later = p.dispatch(410 * MS, 0, 8).unwrap();
        assert_eq!(later.ids.raw().len(), 1, "{build}: two out 210 ms after");
    }
}

fn grouped_read(id: u64, ctx: u32, group: u32, sector: u64, at_ms: u64) -> Request {
    Request {
        group,
        ..read(id, ctx, sector, at_ms)
    }
}

#[test]
fn cfq_never_lets_a_request_of_another_group_but_the_roots_preempt_even_near_the_head() {
    // cfq_should_preempt: "for anybody else we disallow preemption to guarantee service
    // fairness among cgroups"; within a group, the request near the head preempts as before.
    // The root group is every group's ancestor, and its queues may preempt any.
    for (group, preempts) in [(2, false), (1, true), (0, true)] {
        for (build, mut p) in builds(&[]) {
            p.insert(0, &[grouped_read(1, 0, 1, 0, 0)]).unwrap();
            assert_eq!(p.dispatch(0, 0, 8).unwrap().ids.raw(), vec![1], "{build}");
            p.completed(2 * MS, &[done(1, 0)]).unwrap();
            assert!(
                p.dispatch(2 * MS, 0, 8).unwrap().ids.is_empty(),
                "{build}: idling"
            );
            p.insert(3 * MS, &[grouped_read(2, 1, group, 16, 3)])
                .unwrap();
            let sent = p.dispatch(3 * MS, 0, 8).unwrap().ids.raw();
            assert_eq!(
                sent.is_empty(),
                !preempts,
                "{build}: group {group}: {sent:?}"
            );
        }
    }
}

#[test]
fn cfq_offsets_a_newly_busy_queue_by_the_busy_queues_of_its_own_group() {
    // cfq_slice_offset: (cfqq->cfqg->nr_cfqq - 1) slices of difference. Three queues of
    // group 1 are busy when a queue of group 2 turns busy: alone in its group, it waits no
    // offset and goes before the third queue of group 1, which waited two. Without groups
    // it would have waited three and gone after.
    for (groups, third_before_fourth) in [(true, false), (false, true)] {
        for (build, mut p) in builds(&[]) {
            let g = |group: u32| if groups { group } else { 0 };
            p.insert(0, &[grouped_read(1, 0, g(1), 0, 0)]).unwrap();
            let mut served = p.dispatch(0, 0, 8).unwrap().ids.raw();
            p.insert(
                0,
                &[
                    grouped_read(2, 1, g(1), 1 << 20, 0),
                    grouped_read(3, 2, g(1), 2 << 20, 0),
                ],
            )
            .unwrap();
            p.insert(MS, &[grouped_read(4, 3, g(2), 3 << 20, 1)])
                .unwrap();
            let mut out: Vec<u64> = served.clone();
            for ms in 1..400 {
                for id in served.drain(..) {
                    p.completed(ms * MS, &[done(id, 0)]).unwrap();
                }
                served = p.dispatch(ms * MS, 0, 8).unwrap().ids.raw();
                out.extend(&served);
            }
            assert_eq!(out.len(), 4, "{build}: {out:?}");
            let at = |id: u64| out.iter().position(|&x| x == id).unwrap();
            assert_eq!(
                at(3) < at(4),
                third_before_fourth,
                "{build}: groups {groups}: {out:?}"
            );
        }
    }
}

#[test]
fn cfq_gives_busy_groups_the_device_in_proportion_to_their_weights_however_many_queues_each_has() {
    // cfq_group_served: a group's vdisktime grows by the time its queue held the device over
    // its part of the weights, and the group with the least goes next. ctx 0 and 1 are in
    // group 1, ctx 2 alone in group 2; every queue backlogged; one request a millisecond.
    for (weights, want) in [(Some((300, 100)), 3.0), (None, 1.0)] {
        for (build, mut p) in builds(&[]) {
            if let Some((a, b)) = weights {
                p.groups(0, &[group(1, a), group(2, b)]).unwrap();
            }
            let group_of = |ctx: u32| if ctx < 2 { 1 } else { 2 };
            let mut requests = Vec::new();
            for ctx in 0..3u32 {
                for i in 0..4000u64 {
                    let id = u64::from(ctx) * 4000 + i;
                    requests.push(grouped_read(id, ctx, group_of(ctx), id * 8, 0));
                }
            }
            p.insert(0, &requests).unwrap();
            let mut served = [0u64; 3];
            for ms in 0..6000u64 {
                for id in p.dispatch(ms * MS, 0, 1).unwrap().ids.raw() {
                    let ctx = (id / 4000) as u32;
                    served[ctx as usize] += 1;
                    p.completed(ms * MS, &[done(id, ctx)]).unwrap();
                }
            }
            let ratio = (served[0] + served[1]) as f64 / served[2] as f64;
            assert!(
                (want * 0.85..=want * 1.15).contains(&ratio),
                "{build}: weights {weights:?}: served {served:?}, groups {ratio:.2}, {want} wanted"
            );
        }
    }
}

#[test]
fn cfq_idles_group_idle_for_a_groups_only_queue_even_without_slice_idle() {
    // cfq_arm_slice_timer: with slice_idle 0 cfq idles for no queue, but a group's only
    // busy queue keeps the device group_idle for the group's next request; with group_idle
    // 0 the other group's request goes first.
    for (group_idle, own_first) in [(8, true), (0, false)] {
        for (build, mut p) in builds(&[("slice_idle", 0), ("group_idle", group_idle)]) {
            p.insert(
                0,
                &[
                    grouped_read(1, 0, 1, 0, 0),
                    grouped_read(2, 1, 2, 1 << 30, 0),
                ],
            )
            .unwrap();
            let mut sent = p.dispatch(0, 0, 8).unwrap().ids.raw();
            p.completed(2 * MS, &[done(1, 0)]).unwrap();
            sent.extend(p.dispatch(2 * MS, 0, 8).unwrap().ids.raw());
            p.insert(3 * MS, &[grouped_read(3, 0, 1, 8, 3)]).unwrap();
            sent.extend(p.dispatch(3 * MS, 0, 8).unwrap().ids.raw());
            let at = |id: u64| sent.iter().position(|&x| x == id).unwrap_or(usize::MAX);
            assert_eq!(sent.first(), Some(&1), "{build}: {sent:?}");
            assert_eq!(
                at(3) < at(2),
                own_first,
                "{build}: group_idle {group_idle}: {sent:?}"
            );
        }
    }
}

#[test]
fn cfq_shares_follow_generated_weights_among_backlogged_groups_within_a_point() {
    // Over generated shapes (2 to 4 groups, weights 1 to 1000, one or two queues each, every
    // queue backlogged, one request a millisecond) each group's part of the requests served
    // over 20 s is its weight's part within 0.01: its turns, charged their time over its part
    // of the weights, come in proportion. The first round gives every group a turn of at least
    // two `slice_idle`s whatever its weight, which 20 s makes small.
    let mut next = generator(0x9e37_79b9_7f4a_7c15);
    for shape in 0..16 {
        let groups = 2 + next(3) as u32;
        let weights: Vec<u32> = (0..groups).map(|_| 1 + next(1000) as u32).collect();
        let queues: Vec<u32> = (0..groups).map(|_| 1 + next(2) as u32).collect();
        let (_, mut p) = builds(&[]).remove(0);
        let described: Vec<_> = (0..groups)
            .map(|g| group(g + 1, weights[g as usize]))
            .collect();
        p.groups(0, &described).unwrap();
        // ctx → group, each ctx's requests sequential in its own region.
        let ctx_group: Vec<u32> = (0..groups)
            .flat_map(|g| std::iter::repeat_n(g, queues[g as usize] as usize))
            .collect();
        const PER_CTX: u64 = 20_000;
        let mut requests = Vec::new();
        for (ctx, &g) in ctx_group.iter().enumerate() {
            for i in 0..PER_CTX {
                let id = ctx as u64 * PER_CTX + i;
                requests.push(grouped_read(id, ctx as u32, g + 1, id * 8, 0));
            }
        }
        p.insert(0, &requests).unwrap();
        let mut served = vec![0u64; groups as usize];
        for ms in 0..20_000u64 {
            for id in p.dispatch(ms * MS, 0, 1).unwrap().ids.raw() {
                let ctx = (id / PER_CTX) as usize;
                served[ctx_group[ctx] as usize] += 1;
                p.completed(ms * MS, &[done(id, ctx as u32)]).unwrap();
            }
        }
        let total: u64 = served.iter().sum();
        let sum: u32 = weights.iter().sum();
        for g in 0..groups as usize {
            let got = served[g] as f64 / total as f64;
            let want = f64::from(weights[g]) / f64::from(sum);
            assert!(
                (got - want).abs() <= 0.01,
                "shape {shape}: weights {weights:?}, queues {queues:?}: served {served:?}; group {g} {got:.3} against {want:.3}"
            );
        }
    }
}
