//! A dispatch answer the core has acted on goes back to the policy's backend, which carries
//! the next answer in it instead of allocating one per I/O.

use schedhost::policy::{PolicyBackend, Turn};
use schedhost_sdk::{Dispatch, RequestId, Setup};

use crate::helpers::{component, read_request, runtime};

/// One request in and one dispatched, in the single crossing a component makes of it.
fn one_in_one_out(policy: &mut dyn PolicyBackend, id: u64) -> Dispatch {
    let requests = [read_request(id)];
    let turn = Turn {
        completions: &[],
        merges: &[],
        requests: &requests,
        dispatch: Some((0, 1)),
    };
    policy.turn(0, &turn).unwrap().unwrap()
}

#[test]
fn a_components_one_id_answer_is_carried_in_the_list_given_back() {
    let Some(path) = component("noop") else {
        return;
    };
    let mut policy = runtime().load(&path).unwrap().instantiate().unwrap();
    let setup = Setup {
        hw_queues: 1,
        queue_depth: 32,
        nr_requests: 64,
        rotational: true,
    };
    policy.init(&setup, &[]).unwrap().unwrap();
    assert_eq!(one_in_one_out(&mut policy, 1).ids, [RequestId(1)]);
    // A list larger than any answer needs: only the given-back one is this large.
    let handed = Dispatch {
        ids: Vec::with_capacity(1000),
        wake_at_ns: None,
    };
    let buffer = handed.ids.as_ptr();
    policy.give_back(handed);
    let answer = one_in_one_out(&mut policy, 2);
    assert_eq!(answer.ids, [RequestId(2)], "nothing else is in it");
    assert_eq!(
        answer.ids.as_ptr(),
        buffer,
        "the given-back list carries it"
    );
    assert!(answer.ids.capacity() >= 1000);
}

/// Turns no flat `turn` can carry (two completions, merges, three requests) crossing as one
/// `turn-words` list, and the answers the native build gives the same turns.
fn answers_to_whole_turns(policy: &mut dyn PolicyBackend) -> Vec<Vec<u64>> {
    use schedhost_sdk::{Completion, MergeEvent, MergeKind, Op, Sector};
    let done = |id: u64| Completion {
        id: RequestId(id),
        ctx: 0,
        op: Op::Read,
        sectors: 8,
        latency_ns: 1_000,
        service_ns: 500,
        status: 0,
    };
    let first: Vec<_> = (1..=3).map(read_request).collect();
    let mut answers = Vec::new();
    let mut turn = |t: &Turn<'_>| {
        let answer = policy.turn(1_000, t).unwrap().unwrap_or_default();
        answers.push(answer.ids.iter().map(|id| id.0).collect::<Vec<_>>());
    };
    // Three requests, nothing dispatched yet.
    turn(&Turn {
        completions: &[],
        merges: &[],
        requests: &first,
        dispatch: None,
    });
    // Request 2 grows to cover request 3, which it absorbs (sectors 16..32); request 1
    // grows at its front. Then two more requests and a dispatch of everything.
    let merges = [
        MergeEvent {
            target: RequestId(2),
            sector: Sector(16),
            sectors: 16,
            kind: MergeKind::Back,
            absorbed: Some(RequestId(3)),
        },
        MergeEvent {
            target: RequestId(1),
            sector: Sector(0),
            sectors: 16,
            kind: MergeKind::Front,
            absorbed: None,
        },
    ];
    let more: Vec<_> = (4..=5).map(read_request).collect();
    turn(&Turn {
        completions: &[],
        merges: &merges,
        requests: &more,
        dispatch: Some((0, 8)),
    });
    // Two completions and two requests, one dispatched.
    let later: Vec<_> = (6..=7).map(read_request).collect();
    turn(&Turn {
        completions: &[done(1), done(2)],
        merges: &[],
        requests: &later,
        dispatch: Some((0, 1)),
    });
    answers
}

#[test]
fn a_whole_turn_reaches_a_component_as_the_separate_calls_reach_the_native_build() {
    let setup = Setup {
        hw_queues: 1,
        queue_depth: 32,
        nr_requests: 64,
        rotational: true,
    };
    for (name, builds) in [
        (
            "noop",
            crate::helpers::both_builds::<schedhost_policy_noop::Noop>("noop", setup, &[]),
        ),
        (
            "deadline",
            crate::helpers::both_builds::<schedhost_policy_deadline::Deadline>(
                "deadline",
                setup,
                &[],
            ),
        ),
        (
            "cfq",
            crate::helpers::both_builds::<schedhost_policy_cfq::Cfq>("cfq", setup, &[]),
        ),
    ] {
        let mut answers = Vec::new();
        for (build, mut policy) in builds {
            let got = answers_to_whole_turns(policy.as_mut());
            let mut sent: Vec<u64> = got.concat();
            assert!(
                !sent.contains(&3),
                "{name} {build}: absorbed request 3 was dispatched: {got:?}"
            );
            assert!(!sent.is_empty(), "{name} {build}: nothing dispatched");
            sent.sort_unstable();
            sent.dedup();
            assert_eq!(sent.len(), got.concat().len(), "{name} {build}: {got:?}");
            answers.push(got);
        }
        if let [native, wasm] = answers.as_slice() {
            assert_eq!(native, wasm, "{name}: the component answered otherwise");
        }
    }
}

#[test]
fn a_round_without_new_requests_dispatches_in_its_turn_not_in_a_call_of_its_own() {
    use schedhost::core::{Action, Bio, Config, Core};
    let counts = crate::helpers::CallCounts::default();
    let policy = counts.around(Box::new(schedhost::policy::NativePolicy::<
        schedhost_policy_noop::Noop,
    >::default()));
    // One tag: three reads queue at once, then each completion frees the tag for the next
    // with nothing new submitted.
    let mut core = Core::new(
        Config::for_device(1, 1, 2560),
        Box::new(policy),
        &[],
        Box::new(schedhost::policy::builtin_fifo),
    )
    .unwrap();
    for id in 1..=3u64 {
        let bio = Bio {
            id,
            ctx: 0,
            op: schedhost_sdk::Op::Read,
            sector: id * 1000,
            sectors: 8,
            sync: true,
            prio_class: schedhost_sdk::PrioClass::None,
            prio_level: 4,
        };
        core.submit(0, bio).unwrap();
    }
    let mut sent = Vec::new();
    for now in 0..4 {
        core.run(now).unwrap();
        let mut on_device = Vec::new();
        while let Some(action) = core.poll_action() {
            if let Action::Dispatch { id, sector, .. } = action {
                sent.push(sector);
                on_device.push(id);
            }
        }
        for id in on_device {
            core.complete(now, id, 0).unwrap();
        }
    }
    assert_eq!(sent, [1000, 2000, 3000]);
    let (turns, dispatches) = (counts.of("turn"), counts.of("dispatch"));
    assert_eq!(
        dispatches, 0,
        "{turns} turns and {dispatches} dispatch calls"
    );
    assert_eq!(turns, 3, "one turn per request sent");
}

/// Flat turns (a request, or a completion, then a dispatch of one) and their whole answers:
/// ids and wake-up.
fn answers_with_wake_ups(policy: &mut dyn PolicyBackend) -> Vec<(Vec<u64>, Option<u64>)> {
    use schedhost_sdk::{Completion, Op, Request};
    let done = |id: u64| Completion {
        id: RequestId(id),
        ctx: 0,
        op: Op::Read,
        sectors: 8,
        latency_ns: 100_000,
        service_ns: 50_000,
        status: 0,
    };
    let mut answers = Vec::new();
    let mut turn = |now: u64, completions: &[Completion], requests: &[Request], budget: u32| {
        let turn = Turn {
            completions,
            merges: &[],
            requests,
            dispatch: (budget > 0).then_some((0, budget)),
        };
        if let Some(answer) = policy.turn(now, &turn).unwrap() {
            answers.push((answer.ids.iter().map(|i| i.0).collect(), answer.wake_at_ns));
        }
    };
    // A request at a time, each dispatched with tags to spare, then its completion: the
    // policy holds the device for its submitter's next request.
    for id in 1..=3 {
        let now = id * 1_000_000;
        turn(now, &[], &[read_request(id)], 4);
        turn(now + 100_000, &[done(id)], &[], 4);
    }
    answers
}

#[test]
fn a_wake_up_beside_one_id_or_none_reaches_the_host_from_a_component_as_from_the_native_build() {
    let setup = Setup {
        hw_queues: 1,
        queue_depth: 32,
        nr_requests: 64,
        rotational: true,
    };
    for (name, builds) in [
        (
            "cfq",
            crate::helpers::both_builds::<schedhost_policy_cfq::Cfq>("cfq", setup, &[]),
        ),
        (
            "bfq",
            // Unraised, so that idling for its sequential submitter pays
            // (bfq_better_to_idle: a raised queue alone is not idled for).
            crate::helpers::both_builds::<schedhost_policy_bfq::Bfq>(
                "bfq",
                setup,
                &[("low_latency", 0)],
            ),
        ),
    ] {
        let mut answers = Vec::new();
        for (build, mut policy) in builds {
            let got = answers_with_wake_ups(policy.as_mut());
            assert!(
                got.iter()
                    .any(|(ids, wake)| ids.len() == 1 && wake.is_some()),
                "{name} {build}: no answer of one id and a wake-up: {got:?}"
            );
            assert!(
                got.iter()
                    .any(|(ids, wake)| ids.is_empty() && wake.is_some()),
                "{name} {build}: no answer of a wake-up alone: {got:?}"
            );
            answers.push(got);
        }
        if let [native, wasm] = answers.as_slice() {
            assert_eq!(native, wasm, "{name}: the component answered otherwise");
        }
    }
}
