//! {{name}}: first in, first out, with idling. After a read finishes, the device is kept
//! for the same submitter for up to `idle_us`, so a reader that issues its next read right
//! away is not overtaken by others (the kernel's anticipatory scheduling, in its simplest form).

#![forbid(unsafe_code)]

use std::collections::VecDeque;

use schedhost_sdk::{Completion, Dispatch, Op, Policy, Request, RequestId, Setup, TunableSpec};

/// The policy's state for one device.
#[derive(Debug, Default)]
pub struct {{Type}} {
    /// Queued requests as (id, submitter), oldest first.
    queue: VecDeque<(RequestId, u32)>,
    /// Tunable `idle_us`, as set.
    idle_us: i64,
    /// The same in ns.
    idle_ns: u64,
    /// The submitter whose read just finished, and until when the device waits for it.
    idling_for: Option<(u32, u64)>,
}

impl Policy for {{Type}} {
    const NAME: &'static str = "{{name}}";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    // Each tunable is declared once and bound to its field: the SDK checks the range,
    // stores the value and answers `get`.
    const TUNABLES: &'static [TunableSpec<Self>] = &[TunableSpec {
        name: "idle_us",
        default: 200,
        min: 0,
        max: 100_000,
        unit: "us",
        help: "how long the device waits for the next read of the submitter whose read just finished",
        field: |p| &mut p.idle_us,
    }];

    fn new(_setup: &Setup) -> Self {
        Self::default()
    }

    fn retuned(&mut self, _name: &str) {
        // Called after every change of a tunable: derive the working value.
        self.idle_ns = self.idle_us.unsigned_abs() * 1000;
    }

    fn insert(&mut self, _now_ns: u64, requests: &[Request]) {
        self.queue.extend(requests.iter().map(|r| (r.id, r.ctx)));
    }

    fn dispatch(&mut self, now_ns: u64, _hw_queue: u32, budget: u32, out: &mut Dispatch) {
        if let Some((ctx, until)) = self.idling_for {
            if let Some(at) = self.queue.iter().position(|&(_, c)| c == ctx) {
                // The awaited read came: it goes first.
                self.idling_for = None;
                out.ids.extend(self.queue.remove(at).map(|(id, _)| id));
            } else if now_ns < until {
                // Keep waiting; the host calls again at `until` or when a request arrives.
                out.wake_at_ns = Some(until);
                return;
            } else {
                self.idling_for = None;
            }
        }
        while out.ids.len() < budget as usize {
            let Some((id, _)) = self.queue.pop_front() else { break };
            out.ids.push(id);
        }
    }

    // No `merged`: a request a merge absorbed stays in `queue`, and the SDK drops it from
    // the answer and asks again for the rest of the budget.

    fn completed(&mut self, now_ns: u64, done: &[Completion]) {
        if self.idle_ns == 0 {
            return;
        }
        if let Some(read) = done.iter().rev().find(|c| c.op == Op::Read) {
            self.idling_for = Some((read.ctx, now_ns.saturating_add(self.idle_ns)));
        }
    }
}

// The component's exports when built for wasm32; nothing natively.
schedhost_sdk::export!({{Type}});

#[cfg(test)]
mod tests {
    use schedhost_sdk::{
        Completion, MergeEvent, MergeKind, Op, PrioClass, Request, RequestId, Runtime, Sector, Setup,
    };

    use super::*;

    fn request(id: u64, ctx: u32) -> Request {
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

    fn ids(ids: &[u64]) -> Vec<RequestId> {
        ids.iter().copied().map(RequestId).collect()
    }

    fn started(settings: &[(String, i64)]) -> Runtime<{{Type}}> {
        let mut rt = Runtime::<{{Type}}>::new();
        let setup = Setup { hw_queues: 1, queue_depth: 32, nr_requests: 64, rotational: true };
        rt.init(&setup, settings).unwrap();
        rt
    }

    #[test]
    fn requests_leave_in_arrival_order() {
        let mut rt = started(&[]);
        rt.insert(0, &[request(1, 0), request(2, 1), request(3, 0)]);
        assert_eq!(rt.dispatch(0, 0, 32).ids, ids(&[1, 2, 3]));
    }

    #[test]
    fn after_a_read_the_device_waits_for_the_same_reader() {
        let mut rt = started(&[("idle_us".into(), 500)]);
        let done = Completion {
            id: RequestId(1), ctx: 0, op: Op::Read, sectors: 8, latency_ns: 1, service_ns: 1, status: 0,
        };
        rt.completed(1_000, &[done]);
        rt.insert(1_000, &[request(2, 1)]);
        let idle = rt.dispatch(1_000, 0, 32);
        assert!(idle.ids.is_empty());
        assert_eq!(idle.wake_at_ns, Some(501_000));
        rt.insert(2_000, &[request(3, 0)]);
        assert_eq!(rt.dispatch(2_000, 0, 32).ids, ids(&[3, 2]));
    }

    #[test]
    fn an_absorbed_request_is_never_dispatched() {
        let mut rt = started(&[]);
        rt.insert(0, &[request(1, 0), request(2, 0)]);
        rt.merged(0, &[MergeEvent {
            target: RequestId(1), sector: Sector(8), sectors: 16, kind: MergeKind::Back,
            absorbed: Some(RequestId(2)),
        }]);
        assert_eq!(rt.dispatch(0, 0, 32).ids, ids(&[1]));
    }

    #[test]
    fn out_of_range_settings_are_refused() {
        let mut rt = started(&[]);
        assert!(rt.set("idle_us", 1_000_000).unwrap_err().contains("out of range"));
        rt.set("idle_us", 7).unwrap();
        assert_eq!(rt.get("idle_us"), Some(7));
    }
}
