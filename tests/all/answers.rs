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
