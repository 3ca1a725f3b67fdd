//! noop: first in, first out, with the host's merging — the kernel's `none` scheduler.
//!
//! Requests leave in the order they arrived. The host still merges contiguous bios into
//! queued requests; a request absorbed by such a merge stays in the queue and the SDK drops
//! it from the answer, so noop never hears of merges.

#![forbid(unsafe_code)]

use std::collections::VecDeque;

use schedhost_sdk::{Dispatch, Policy, Request, RequestId, Setup};

/// The FIFO policy.
#[derive(Debug, Default)]
pub struct Noop {
    queue: VecDeque<RequestId>,
}

impl Policy for Noop {
    const NAME: &'static str = "noop";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const COMPLETIONS: bool = false;

    fn new(_setup: &Setup) -> Self {
        Self::default()
    }

    fn insert(&mut self, _now_ns: u64, requests: &[Request]) {
        for r in requests {
            self.queue.push_back(r.id);
        }
    }

    fn dispatch(&mut self, _now_ns: u64, _hw_queue: u32, budget: u32, out: &mut Dispatch) {
        let n = (budget as usize)
            .saturating_sub(out.ids.len())
            .min(self.queue.len());
        // Copied, then dropped: one pass each, with no per-id capacity checks.
        out.ids.extend(self.queue.iter().take(n).copied());
        self.queue.drain(..n);
    }
}

schedhost_sdk::export!(Noop);

#[cfg(test)]
mod tests {
    use schedhost_sdk::{MergeEvent, MergeKind, Op, PrioClass, Runtime, Sector};

    use super::*;

    fn request(id: u64, sector: u64) -> Request {
        Request {
            id: RequestId(id),
            ctx: 0,
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

    fn runtime() -> Runtime<Noop> {
        let mut rt = Runtime::new();
        rt.init(
            &Setup {
                hw_queues: 1,
                queue_depth: 4,
                nr_requests: 8,
                rotational: true,
            },
            &[],
        )
        .expect("noop has no tunables to reject");
        rt
    }

    #[test]
    fn noop_dispatches_in_arrival_order_within_budget() {
        let mut rt = runtime();
        rt.insert(0, &[request(7, 800), request(3, 0), request(5, 400)]);
        assert_eq!(rt.dispatch(0, 0, 2).ids, ids(&[7, 3]));
        assert_eq!(rt.dispatch(0, 0, 2).ids, ids(&[5]));
        assert!(rt.dispatch(0, 0, 2).ids.is_empty());
    }

    #[test]
    fn noop_keeps_arrival_order_across_its_ring_buffer_wrapping() {
        let mut rt = runtime();
        let mut next = 0;
        let mut expected = 0;
        // Uneven inserts and dispatches walk the queue's start around its buffer, so some
        // answers take ids from both of its halves.
        for round in 0..50u64 {
            let batch: Vec<Request> = (0..1 + round % 7)
                .map(|_| {
                    next += 1;
                    request(next, next * 8)
                })
                .collect();
            rt.insert(0, &batch);
            let answer = rt.dispatch(0, 0, 1 + (round % 5) as u32).ids;
            for id in answer {
                expected += 1;
                assert_eq!(id, RequestId(expected), "round {round}");
            }
        }
        let rest = rt.dispatch(0, 0, u32::MAX).ids;
        assert_eq!(rest, ids(&((expected + 1)..=next).collect::<Vec<_>>()));
    }

    #[test]
    fn noop_never_dispatches_an_absorbed_request() {
        let mut rt = runtime();
        rt.insert(0, &[request(1, 0), request(2, 16), request(3, 8)]);
        rt.merged(
            0,
            &[MergeEvent {
                target: RequestId(1),
                sector: Sector(0),
                sectors: 24,
                kind: MergeKind::Back,
                absorbed: Some(RequestId(2)),
            }],
        );
        assert_eq!(
            rt.dispatch(0, 0, 2).ids,
            ids(&[1, 3]),
            "the budget is refilled"
        );
        assert!(rt.dispatch(0, 0, 8).ids.is_empty());
    }

    fn ids(ids: &[u64]) -> Vec<RequestId> {
        ids.iter().copied().map(RequestId).collect()
    }

    #[test]
    fn noop_rejects_any_tunable_by_name() {
        let mut rt = runtime();
        let err = rt.set("quantum", 4).expect_err("noop has no tunables");
        assert!(err.contains("noop has no tunables"), "{err}");
    }
}
