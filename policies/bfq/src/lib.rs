//! bfq: Budget Fair Queueing (block/bfq-iosched.c) as a schedhost policy.
//!
//! Sync requests queue per submitter, async ones per priority class and level, as in cfq. A
//! queue is served for a *budget* of sectors rather than a time slice, so service is shared
//! by weight in sectors whatever the device's speed. Queues are picked by B-WF2Q+: each
//! busy queue has a virtual start and finish time (finish = start + budget / weight); among
//! queues whose start is not after the system's virtual time, the earliest finish goes next.
//! Weights come from the priority level (`(8 − level) × 10`); RT queues go before BE, BE
//! before IDLE. The in-service queue keeps the device until its budget is spent, it has
//! been served for `timeout_sync`, or it has run dry and idled `slice_idle` for its next
//! request. With `low_latency`, a submitter's queue is weight-raised ×30 for its first
//! 3 s, as bfq raises new interactive queues. With `strict_guarantees`, bfq also idles
//! for async queues.
//!
//! Groups (io.weight) share the device by their weights, as BFQ's group scheduling does:
//! each group has its own async queues, and a queue of a group is scheduled with its
//! weight's share of the group's, `group weight × queue weight / Σ weights of the group's
//! busy queues`, so the busy queues of a group together weigh what the group does. That is
//! BFQ's two-level hierarchy flattened into one B-WF2Q+ level: while queues stay busy it
//! gives each group and each queue the share the hierarchy would. Submitters in no group
//! (group 0) compete with the groups by their own weights, as root-level processes do.

#![forbid(unsafe_code)]

use std::collections::BTreeMap;

use schedhost_sdk::{
    Completion, Dispatch, ElevatorQueue, Group, IdMap, MergeEvent, Policy, PrioClass, Request,
    RequestId, Sector, Setup, TunableSpec, Word, WordMap,
};

const MS: u64 = 1_000_000;
/// `BFQ_DEFAULT_MAX_BUDGET`: the budget when `max_budget` is 0 (auto).
const DEFAULT_MAX_BUDGET: u64 = 16 * 1024;
/// Weight-raising factor and duration for new queues under `low_latency`.
const WR_COEFF: u64 = 30;
const WR_DURATION_NS: u64 = 3_000 * MS;
/// cgroup v2's default io.weight, for a group the host has not described.
const DEFAULT_GROUP_WEIGHT: u64 = 100;
/// Queue weights are scaled by this before a group's share divides them, so a small share
/// of a light group keeps its precision.
const WEIGHT_SCALE: u64 = 1000;
/// Virtual time is kept in sectors × this / weight, so small budgets keep precision. Scaled
/// with the weights, so that ungrouped queues' times are what they were unscaled.
const VT_SCALE: u128 = (1 << 20) * WEIGHT_SCALE as u128;
/// FIFO expiry of sync and async requests (`bfq_fifo_expire`: 125 ms and 250 ms).
const FIFO_EXPIRE_NS: [u64; 2] = [250 * MS, 125 * MS];

const TUNABLES: &[TunableSpec<Bfq>] = &[
    TunableSpec {
        name: "slice_idle",
        default: 8,
        min: 0,
        max: 1_000,
        unit: "ms",
        help: "how long an empty sync queue keeps the device",
        field: |p| &mut p.knobs.slice_idle,
    },
    TunableSpec {
        name: "timeout_sync",
        default: 125,
        min: 1,
        max: 60_000,
        unit: "ms",
        help: "longest service of one queue at a time",
        field: |p| &mut p.knobs.timeout_sync,
    },
    TunableSpec {
        name: "max_budget",
        default: 0,
        min: 0,
        max: 1 << 30,
        unit: "sectors",
        help: "sectors a queue is served per turn; 0 = auto (16384)",
        field: |p| &mut p.knobs.max_budget,
    },
    TunableSpec {
        name: "low_latency",
        default: 1,
        min: 0,
        max: 1,
        unit: "",
        help: "raise the weight of new submitters' queues for their first seconds",
        field: |p| &mut p.knobs.low_latency,
    },
    TunableSpec {
        name: "strict_guarantees",
        default: 0,
        min: 0,
        max: 1,
        unit: "",
        help: "idle for async queues too, trading throughput for fairness",
        field: |p| &mut p.knobs.strict_guarantees,
    },
];

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum QueueKey {
    Sync(u32),
    /// Group, class, level.
    Async(u32, u8, u8),
}

/// One word per key, for a [`WordMap`]: a lookup hashes one `u64`. Any lookup is dear in a
/// component (about 130 instructions, counted), so the active queue is looked up once per
/// decision.
impl Word for QueueKey {
    fn word(self) -> u64 {
        match self {
            QueueKey::Sync(ctx) => u64::from(ctx),
            QueueKey::Async(group, class, level) => {
                1 << 63 | u64::from(group) << 16 | u64::from(class) << 8 | u64::from(level)
            }
        }
    }
}

#[derive(Debug, Default)]
struct Queue {
    requests: ElevatorQueue,
    inflight: u32,
    class: usize,
    weight: u64,
    /// Its group (0: none).
    group: u32,
    sync: bool,
    /// Virtual start and finish of its current turn.
    start: u128,
    finish: u128,
    /// Weight raising ends at this time.
    raised_until: u64,
    busy: bool,
}

#[derive(Debug, Clone, Copy)]
struct InService {
    key: QueueKey,
    served: u64,
    budget: u64,
    until: u64,
    idle_until: Option<u64>,
}

/// The BFQ policy.
#[derive(Debug, Default)]
pub struct Bfq {
    /// Iterated only for sums and for a minimum whose ties go to the lower key, so the
    /// map's order cannot reach a decision.
    queues: WordMap<QueueKey, Queue>,
    /// The queue each queued request is in.
    queued: IdMap<QueueKey>,
    on_device: IdMap<QueueKey>,
    in_service: Option<InService>,
    /// System virtual time per class.
    vtime: [u128; 3],
    head: Sector,
    knobs: Knobs,
    slice_idle: u64,
    timeout: u64,
    max_budget: u64,
    low_latency: bool,
    strict: bool,
    /// Groups' io.weight, by id, as the host last told them.
    group_weights: BTreeMap<u32, u32>,
}

/// The tunables as the user set them, in their sysfs units; `retuned` derives the working
/// values.
#[derive(Debug, Default)]
struct Knobs {
    slice_idle: i64,
    timeout_sync: i64,
    max_budget: i64,
    low_latency: i64,
    strict_guarantees: i64,
}

fn class_index(class: PrioClass) -> usize {
    match class.effective() {
        PrioClass::Rt => 0,
        PrioClass::Idle => 2,
        _ => 1,
    }
}

impl Policy for Bfq {
    const NAME: &'static str = "bfq";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const TUNABLES: &'static [TunableSpec<Self>] = TUNABLES;
    const HANDLES_ABSORBED: bool = true;

    fn new(_setup: &Setup) -> Self {
        // Its one queued map and one in-flight map may hold any of the device's requests;
        // each queue's own elevator stays small.
        Self {
            queued: IdMap::device_wide(),
            on_device: IdMap::device_wide(),
            ..Self::default()
        }
    }

    fn retuned(&mut self, _name: &str) {
        let k = &self.knobs;
        self.slice_idle = k.slice_idle.unsigned_abs() * MS;
        self.timeout = k.timeout_sync.unsigned_abs() * MS;
        self.max_budget = k.max_budget.unsigned_abs();
        self.low_latency = k.low_latency != 0;
        self.strict = k.strict_guarantees != 0;
    }

    fn groups(&mut self, _now_ns: u64, groups: &[Group]) {
        self.group_weights = groups.iter().map(|g| (g.id, g.weight)).collect();
    }

    fn insert(&mut self, now_ns: u64, requests: &[Request]) {
        for r in requests {
            let key = if r.sync {
                QueueKey::Sync(r.ctx)
            } else {
                QueueKey::Async(
                    r.group,
                    class_index(r.prio_class) as u8,
                    r.prio_level.min(7),
                )
            };
            let low_latency = self.low_latency;
            let queue = self.queues.get_or_insert_with(key, || Queue {
                class: class_index(r.prio_class),
                weight: (8 - u64::from(r.prio_level.min(7))) * 10,
                group: r.group,
                sync: r.sync,
                raised_until: if low_latency && r.sync {
                    now_ns + WR_DURATION_NS
                } else {
                    0
                },
                ..Queue::default()
            });
            queue
                .requests
                .push(r, r.arrival_ns + FIFO_EXPIRE_NS[usize::from(r.sync)]);
            self.queued.insert(r.id, key);
            if !queue.busy && self.in_service.is_none_or(|s| s.key != key) {
                self.activate(key, now_ns);
            }
        }
    }

    fn dispatch(&mut self, now_ns: u64, _hw_queue: u32, budget: u32, out: &mut Dispatch) {
        while out.ids.len() < budget as usize {
            let Some(service) = self.in_service else {
                if !self.select(now_ns) {
                    break;
                }
                continue;
            };
            if service.served >= service.budget || now_ns >= service.until {
                self.expire(now_ns);
                continue;
            }
            // One lookup of the queue in service, through the choice and the send (lookups
            // are a component's dearest step).
            let Some(queue) = self.queues.get_mut(&service.key) else {
                self.in_service = None;
                continue;
            };
            if queue.requests.is_empty() {
                let (sync, inflight) = (queue.sync, queue.inflight);
                let may_idle = (sync || self.strict) && self.slice_idle > 0;
                if !may_idle {
                    self.expire(now_ns);
                    continue;
                }
                if inflight > 0 {
                    out.wake_at_ns = Some(service.until);
                    break;
                }
                let until = match service.idle_until {
                    Some(until) => until,
                    None => {
                        let until = (now_ns + self.slice_idle).min(service.until);
                        if let Some(s) = &mut self.in_service {
                            s.idle_until = Some(until);
                        }
                        until
                    }
                };
                if now_ns < until {
                    out.wake_at_ns = Some(until);
                    break;
                }
                self.expire(now_ns);
                continue;
            }
            let id = choose(queue, self.head, now_ns);
            out.ids.push(id);
            let Some(extent) = queue.requests.take(id) else {
                continue;
            };
            queue.inflight += 1;
            self.queued.remove(&id);
            self.on_device.insert(id, service.key);
            self.head = extent.end();
            if let Some(s) = &mut self.in_service {
                s.served += u64::from(extent.sectors);
                s.idle_until = None;
            }
        }
    }

    fn merged(&mut self, _now_ns: u64, event: &MergeEvent) {
        // bfq vetoes no merge, so the absorbed request may sit in another queue.
        if let Some(gone) = event.absorbed
            && let Some(queue) = self
                .queued
                .remove(&gone)
                .and_then(|key| self.queues.get_mut(&key))
        {
            queue.requests.absorb(event.target, gone);
        }
        if let Some(queue) = self
            .queued
            .get(&event.target)
            .and_then(|key| self.queues.get_mut(key))
        {
            queue
                .requests
                .resize(event.target, event.sector, event.sectors);
        }
    }

    /// bfq_finish_requeue_request: the request leaves its queue's device count and waits
    /// in the queue again.
    fn requeue(&mut self, now_ns: u64, requests: &[Request]) {
        for r in requests {
            if let Some(key) = self.on_device.remove(&r.id)
                && let Some(queue) = self.queues.get_mut(&key)
            {
                queue.inflight = queue.inflight.saturating_sub(1);
            }
        }
        self.insert(now_ns, requests);
    }

    fn completed(&mut self, _now_ns: u64, done: &[Completion]) {
        for c in done {
            if let Some(key) = self.on_device.remove(&c.id)
                && let Some(queue) = self.queues.get_mut(&key)
            {
                queue.inflight = queue.inflight.saturating_sub(1);
            }
        }
    }
}

impl Bfq {
    fn budget(&self) -> u64 {
        if self.max_budget == 0 {
            DEFAULT_MAX_BUDGET
        } else {
            self.max_budget
        }
    }

    /// The queue's own weight, raised while it is new under `low_latency`.
    fn own_weight(queue: &Queue, now_ns: u64) -> u64 {
        if now_ns < queue.raised_until {
            queue.weight * WR_COEFF
        } else {
            queue.weight
        }
    }

    /// The weight B-WF2Q+ schedules `queue` by: its own, or, in a group, its share of the
    /// group's weight among the group's busy queues of its class (`queue` counted busy).
    fn weight(&self, queue: &Queue, now_ns: u64) -> u64 {
        let siblings = if queue.group == 0 {
            0
        } else {
            self.queues
                .values()
                .filter(|q| q.busy && q.group == queue.group && q.class == queue.class)
                .map(|q| Self::own_weight(q, now_ns))
                .sum()
        };
        self.share(queue, now_ns, siblings)
    }

    /// [`Self::weight`] of `queue`, given the own weights of its group's busy queues of its
    /// class summed (`siblings`, `queue` among them if it is busy; unused outside a group).
    fn share(&self, queue: &Queue, now_ns: u64, siblings: u64) -> u64 {
        let own = Self::own_weight(queue, now_ns) * WEIGHT_SCALE;
        if queue.group == 0 {
            return own;
        }
        let group_weight = self
            .group_weights
            .get(&queue.group)
            .map_or(DEFAULT_GROUP_WEIGHT, |&w| u64::from(w));
        let busy_total = if queue.busy {
            siblings
        } else {
            siblings + Self::own_weight(queue, now_ns)
        };
        (own * group_weight / busy_total.max(1)).max(1)
    }

    /// The weights of class `class`'s busy queues summed, each as [`Self::weight`] gives
    /// it: the groups' sums are taken once, so a thousand grouped queues cost two passes,
    /// not a pass each.
    fn busy_weight(&self, class: usize, now_ns: u64) -> u128 {
        let busy = || self.queues.values().filter(|q| q.busy && q.class == class);
        let mut siblings: BTreeMap<u32, u64> = BTreeMap::new();
        for q in busy().filter(|q| q.group != 0) {
            *siblings.entry(q.group).or_default() += Self::own_weight(q, now_ns);
        }
        busy()
            .map(|q| {
                let sum = siblings.get(&q.group).copied().unwrap_or(0);
                u128::from(self.share(q, now_ns, sum).max(1))
            })
            .sum()
    }

    /// A queue becomes busy: its turn starts at max(system virtual time, its last finish).
    fn activate(&mut self, key: QueueKey, now_ns: u64) {
        self.begin_turn(key, now_ns, false);
    }

    /// A new turn for queue `key`, finishing a budget later at its weight. A queue just
    /// served and still backlogged (`requeued`) starts where its turn finished, not at the
    /// system's virtual time (`__bfq_requeue_entity`): `max(vtime, finish)` would forgive a
    /// heavy queue the time it ran ahead, and weights 3:1 gave 2.7:1.
    fn begin_turn(&mut self, key: QueueKey, now_ns: u64, requeued: bool) {
        let budget = self.budget();
        let Some(queue) = self.queues.get(&key) else {
            return;
        };
        let weight = self.weight(queue, now_ns).max(1);
        let start = if requeued {
            queue.finish
        } else {
            self.vtime[queue.class].max(queue.finish)
        };
        if let Some(queue) = self.queues.get_mut(&key) {
            queue.start = start;
            queue.finish = start + u128::from(budget) * VT_SCALE / u128::from(weight);
            queue.busy = true;
        }
    }

    /// Picks the next queue by B-WF2Q+ in the highest class with a busy queue.
    fn select(&mut self, now_ns: u64) -> bool {
        for class in 0..3 {
            let busy = || {
                self.queues
                    .iter()
                    .filter(move |(_, q)| q.busy && q.class == class)
            };
            let Some(min_start) = busy().map(|(_, q)| q.start).min() else {
                continue;
            };
            // The system virtual time jumps to the earliest start if no queue is eligible.
            let v = self.vtime[class].max(min_start);
            self.vtime[class] = v;
            let Some((key, _)) = busy()
                .filter(|(_, q)| q.start <= v)
                .min_by_key(|(k, q)| (q.finish, *k))
            else {
                continue;
            };
            self.in_service = Some(InService {
                key,
                served: 0,
                budget: self.budget(),
                until: now_ns + self.timeout,
                idle_until: None,
            });
            return true;
        }
        false
    }

    /// Ends the in-service turn, charging the service received; the queue starts a new
    /// turn if it still has requests.
    fn expire(&mut self, now_ns: u64) {
        let Some(service) = self.in_service.take() else {
            return;
        };
        let Some(queue) = self.queues.get(&service.key) else {
            return;
        };
        let (class, weight) = (queue.class, self.weight(queue, now_ns).max(1));
        let total_weight = self.busy_weight(class, now_ns);
        let served = u128::from(service.served.max(1)) * VT_SCALE;
        let Some(queue) = self.queues.get_mut(&service.key) else {
            return;
        };
        // The turn finishes where its actual service, not its budget, says.
        queue.finish = queue.start + served / u128::from(weight);
        queue.busy = false;
        let backlogged = !queue.requests.is_empty();
        self.vtime[class] += served / total_weight.max(1);
        if backlogged {
            self.begin_turn(service.key, now_ns, true);
        }
    }
}

/// The next request of `queue`: its expired FIFO head, else the first at or after `head`,
/// else its lowest.
fn choose(queue: &Queue, head: Sector, now_ns: u64) -> RequestId {
    if queue.requests.expired(now_ns)
        && let Some(due) = queue.requests.fifo_front()
    {
        return due.id;
    }
    queue
        .requests
        .at_or_after(head)
        .or_else(|| queue.requests.lowest())
        .map_or(RequestId(0), |next| next.id)
}

schedhost_sdk::export!(Bfq);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_busy_weight_sum_is_each_busy_queues_weight_summed() {
        let mut bfq = Bfq {
            group_weights: [(1, 300), (2, 100)].into_iter().collect(),
            ..Bfq::default()
        };
        // Queues in no group, in groups 1 and 2 and in group 3 (no weight told), busy or
        // idle, of two classes, some weight-raised.
        for ctx in 0..40u32 {
            let queue = Queue {
                class: (ctx % 2) as usize,
                weight: u64::from(10 + ctx % 7 * 10),
                group: ctx % 4,
                busy: ctx % 3 != 0,
                raised_until: if ctx % 5 == 0 { 1_000 } else { 0 },
                ..Queue::default()
            };
            bfq.queues.insert(QueueKey::Sync(ctx), queue);
        }
        for now in [0, 2_000] {
            for class in 0..2 {
                let each: u128 = bfq
                    .queues
                    .values()
                    .filter(|q| q.busy && q.class == class)
                    .map(|q| u128::from(bfq.weight(q, now).max(1)))
                    .sum();
                assert_eq!(bfq.busy_weight(class, now), each, "class {class} at {now}");
            }
        }
    }
}
