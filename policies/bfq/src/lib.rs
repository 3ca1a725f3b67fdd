//! bfq: Budget Fair Queueing (block/bfq-iosched.c) as a schedhost policy.
//!
//! Sync requests queue per submitter, async ones per priority class and level, as in cfq. A
//! queue is served for a *budget* of sectors rather than a time slice, so service is shared
//! by weight in sectors whatever the device's speed. Queues are picked by B-WF2Q+: each
//! busy queue has a virtual start and finish time (finish = start + budget / weight); among
//! queues whose start is not after the system's virtual time, the earliest finish goes next.
//! Weights come from the priority level (`(8 − level) × 10`); RT queues go before BE, BE
//! before IDLE. The in-service queue keeps the device until its budget is spent, it has
//! been served for `timeout_sync`, or it has run dry and bfq would rather not idle for it,
//! or idled `slice_idle` for its next request (2 ms for a seeky queue when nothing is
//! asymmetric). Whether to idle is `bfq_better_to_idle`'s: when it boosts throughput
//! (the device queues no commands, or the queue is sequential and thinks briefly, and no
//! queue is weight-raised) or when service guarantees need it (asymmetric weights,
//! classes or groups; a raised queue among unraised ones or behind a deep device). The
//! device's queueing is estimated as `bfq_update_hw_tag` does, from the requests on it.
//! A slow queue (seeky, or served under half a budget in more than 20 ms) and one timed
//! out with a third of its budget left are charged the time they held the device, as a
//! share of `max_budget` per `timeout_sync`, not the sectors they moved
//! (`bfq_bfqq_charge_time`): a random reader beside a sequential one gets time, not
//! sectors. With `low_latency`, a submitter's queue is weight-raised ×30 for its first
//! 3 s, as bfq raises new interactive queues, or until it has been served 120 000 sectors
//! (`max_service_from_wr`); raised queues are never charged time. With
//! `strict_guarantees`, bfq always idles, for async queues too.
//!
//! On flash (`rotational` 0) only a far request that is also small counts as a seek, and
//! idling boosts throughput only for a sequential queue on a device that queues no commands.
//!
//! An async queue is charged three times its sectors (`bfq_async_charge_factor`) unless the
//! scenario is asymmetric; the idle class gets a turn at least every 200 ms
//! (`BFQ_CL_IDLE_TIMEOUT`); async requests hold at most half the scheduler tags and sync
//! writes three quarters (`bfq_limit_depth`, as with no queue raised).
//!
//! A queue that becomes busy takes the device from the one in service if B-WF2Q+ would
//! serve it next and it is of a higher class or weight (in the same group), or resumed its
//! turn raised at least as much, or bfq would no longer idle for the queue in service
//! (`bfq_bfqq_handle_idle_busy_switch`). While a dry queue is kept for guarantees, other
//! queues' requests are injected up to its learned limit (`inject.rs`). A bio merges only
//! into a request of the queue it would join (`bfq_allow_bio_merge`).
//!
//! Sync queues created eight or more within 180 ms of each other in one group are a large
//! burst and are not weight-raised (`burst.rs`, `bfq_handle_burst`).
//!
//! Not modelled: adaptive budgets
//! and the peak-rate autotuning of `max_budget`, soft real-time raising, raising again
//! after a long idle, the lower tag shares while a queue is raised, waker and blocked queues'
//! injection.
//!
//! Groups (io.weight) share the device by their weights, as BFQ's group scheduling does:
//! each group has its own async queues, and a queue of a group is scheduled with its
//! weight's share of the group's, `group weight × queue weight / Σ weights of the group's
//! busy queues`, so the busy queues of a group together weigh what the group does. That is
//! BFQ's two-level hierarchy flattened into one B-WF2Q+ level: while queues stay busy it
//! gives each group and each queue the share the hierarchy would. Submitters in no group
//! (group 0) compete with the groups by their own weights, as root-level processes do.

#![forbid(unsafe_code)]

mod burst;
mod inject;
mod share;

use std::collections::BTreeMap;

use schedhost_sdk::device_share::DeviceShare;
use schedhost_sdk::habits::{Habits, SeekRule};
use schedhost_sdk::hw_tag::{self, HwTag};
use schedhost_sdk::{
    Completion, Dispatch, ElevatorQueue, Group, IdMap, MergeEvent, MergeQuery, Op, Policy,
    PrioClass, Request, RequestId, Sector, Setup, TunableSpec, Word, WordMap,
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
/// A queue is seeky when more than this many of its last 32 requests were seeks
/// (`BFQQ_SEEKY`, raised from 4 in Linux 4.19).
const SEEKY_OF_32: u32 = 19;
/// Service in sectors after which a raised queue is raised no more (`max_service_from_wr`):
/// an interactive start is done by then; more is a long sequential job.
const MAX_SERVICE_FROM_WR: u64 = 120_000;
/// An async queue's sectors count this many times against its budget and its virtual time
/// (`bfq_async_charge_factor`), unless the scenario is asymmetric.
const ASYNC_CHARGE_FACTOR: u64 = 3;
/// The idle class is served at least once in this long, however busy the others are
/// (`BFQ_CL_IDLE_TIMEOUT`: HZ / 5).
const CLASS_IDLE_TIMEOUT_NS: u64 = 200 * MS;
/// The longest idle for a seeky queue in a symmetric scenario (`BFQ_MIN_TT`).
const MIN_TT_NS: u64 = 2 * MS;
/// Fewer requests than this, queued and on the device, prove nothing of the device's
/// queueing (`BFQ_HW_QUEUE_THRESHOLD`).
const HW_QUEUE_THRESHOLD: u32 = 3;
/// A turn shorter than this is too short to measure a rate (`bfq_bfqq_is_slow`): charged
/// as one idle slice if slow. One longer than `RATE_WINDOW_NS` is judged by its rate.
const SHORT_TURN_NS: u64 = MS;
const RATE_WINDOW_NS: u64 = 20 * MS;

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
    TunableSpec {
        name: "device_share",
        default: 1,
        min: 0,
        max: 1,
        unit: "",
        help: "on a device deeper than the load, keep on it only what lets each group hold its weight's part (not the kernel's)",
        field: |p| &mut p.knobs.device_share,
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
    /// Its submitter's seeks and think time (sync queues).
    habits: Habits,
    /// Sectors served while it was raised (`service_from_wr`).
    service_from_wr: u64,
    /// Sectors its next turn may serve: a full budget, or what was left of the last one
    /// when it resumes.
    budget: u64,
    /// Budget left when a turn ended because it ran dry (`non_blocking_wait_rq`): if its
    /// next request comes in time, it resumes that turn where it stood, as if it had been
    /// idled for.
    resume_left: Option<u64>,
    /// Service it got as injected requests since its last turn, counted in its next one.
    injected: u64,
    /// How many requests may be injected beside it while it is in service.
    inject: inject::InjectLimit,
}

impl Queue {
    /// A new queue for `r`'s kind, unraised.
    fn for_request(r: &Request, now_ns: u64) -> Self {
        Self {
            class: class_index(r.prio_class),
            weight: (8 - u64::from(r.prio_level.min(7))) * 10,
            group: r.group,
            sync: r.sync,
            inject: inject::InjectLimit::new(now_ns),
            ..Self::default()
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct InService {
    key: QueueKey,
    served: u64,
    budget: u64,
    /// Each sector it sends counts this many times (`bfq_serv_to_charge`).
    charge_factor: u64,
    /// When the turn began (`last_budget_start`) and when it times out.
    started: u64,
    until: u64,
    /// When idling for it began (`last_idling_start`) and when it ends.
    idle_started: u64,
    idle_until: Option<u64>,
}

/// Why a turn ends (`enum bfqq_expiration`): what it is charged depends on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expiry {
    /// It idled for its next request and none came.
    TooIdle,
    /// It was served for `timeout_sync`.
    BudgetTimeout,
    /// It spent its budget.
    BudgetExhausted,
    /// It ran dry and bfq would rather not idle for it.
    NoMoreRequests,
    /// A queue whose request came in time to resume its turn took the device.
    Preempted,
}

/// A queue resumes its turn if its next request comes within this many idle slices of its
/// last completion (`arrived_in_time`).
const IN_TIME_SLICES: u64 = 3;

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
    /// Requests on the device (`rq_in_driver`).
    in_driver: u32,
    /// A queue that became busy and may take the device from the one in service, and
    /// whether it resumed its turn.
    preempting: Option<(QueueKey, bool)>,
    /// Whether the device queues commands (`hw_tag`).
    hw_tag: HwTag,
    /// The device seeks (`!blk_queue_nonrot`).
    rotational: bool,
    /// Scheduler tags per hardware queue, which `bfq_limit_depth` takes shares of.
    nr_requests: u32,
    /// When the idle class was last given a turn by its timeout
    /// (`bfq_class_idle_last_service`).
    idle_class_last: u64,
    /// The total service time being measured for the in-service queue's inject limit.
    sampling: inject::Sampling,
    /// Sync queues created together.
    burst: burst::Burst,
    /// Whether groups' shares bound what the device holds (`share.rs`).
    device_share: bool,
    /// What is on the device by group, and the bound.
    share: DeviceShare,
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
    device_share: i64,
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
    const MERGE_VETO: bool = true;
    const HANDLES_ABSORBED: bool = true;

    fn new(setup: &Setup) -> Self {
        // Its one queued map and one in-flight map may hold any of the device's requests;
        // each queue's own elevator stays small.
        Self {
            queued: IdMap::device_wide(),
            on_device: IdMap::device_wide(),
            rotational: setup.rotational,
            nr_requests: setup.nr_requests,
            share: DeviceShare::new(setup.queue_depth),
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
        self.device_share = k.device_share != 0;
    }

    /// `bfq_limit_depth` with no queue raised: async requests hold at most half the
    /// scheduler tags and sync writes three quarters, so sync reads always find one. (The
    /// kernel lowers these to 3/16 and 6/16 while a queue is raised; the host asks once.)
    fn limit_depth(&self, op: Op, sync: bool) -> Option<u32> {
        let nr = u64::from(self.nr_requests);
        let share = match (sync, op) {
            (true, Op::Read) => return None,
            (false, _) => nr / 2,
            (true, _) => 3 * nr / 4,
        };
        Some(u32::try_from(share).unwrap_or(u32::MAX).max(1))
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
            if r.sync && self.queues.get(&key).is_none() {
                self.created(key, r, now_ns);
            }
            let queue = self
                .queues
                .get_or_insert_with(key, || Queue::for_request(r, now_ns));
            queue
                .requests
                .push(r, r.arrival_ns + FIFO_EXPIRE_NS[usize::from(r.sync)]);
            let in_service = self.in_service.is_some_and(|s| s.key == key);
            if r.sync {
                // bfq_update_io_thinktime caps a sample at twice slice_idle.
                let cap = 2 * self.slice_idle;
                // BFQ_RQ_SEEKY: on flash only a far request that is also small seeks.
                let rule = if self.rotational {
                    SeekRule::Far
                } else {
                    SeekRule::FarAndSmall
                };
                queue
                    .habits
                    .arrived(r.arrival_ns, (r.sector, r.sectors), rule, cap);
            }
            self.queued.insert(r.id, key);
            if !queue.busy && !in_service {
                self.activate(key, now_ns);
            }
            self.sample_arrival(key, now_ns);
        }
    }

    fn dispatch(&mut self, now_ns: u64, _hw_queue: u32, budget: u32, out: &mut Dispatch) {
        if let Some((key, resumed)) = self.preempting.take()
            && self.may_preempt(key, resumed, now_ns)
        {
            self.expire(now_ns, Expiry::Preempted);
        }
        // Under a groups' bound the device takes this many more, and each group its part
        // (`share.rs`).
        let budget = budget.min(self.device_room());
        let parts = self.group_parts();
        let counts_share = self.counts_share();
        while out.ids.len() < budget as usize {
            let Some(service) = self.in_service else {
                if !self.select(now_ns) {
                    break;
                }
                continue;
            };
            if service.served >= service.budget {
                self.expire(now_ns, Expiry::BudgetExhausted);
                continue;
            }
            if now_ns >= service.until {
                self.expire(now_ns, Expiry::BudgetTimeout);
                continue;
            }
            if parts.is_some()
                && let Some(queue) = self.queues.get(&service.key)
                && !queue.requests.is_empty()
                && self.held_at_part(parts.as_ref(), queue.group)
            {
                // At its group's part: its next request goes when one of its completes, and
                // it stays backlogged, so its turn and its timestamps go on as B-WF2Q+ has them.
                // Meanwhile groups under their parts fill the device.
                if self.inject(service.key, now_ns, true, out) {
                    continue;
                }
                break;
            }
            // One lookup of the queue in service, through the choice and the send (lookups
            // are a component's dearest step).
            let Some(queue) = self.queues.get_mut(&service.key) else {
                self.in_service = None;
                continue;
            };
            if queue.requests.is_empty() {
                let inflight = queue.inflight;
                // bfq_select_queue: a dry queue keeps the device only if idling for it is
                // better; otherwise another queue's requests go now.
                if !self.better_to_idle(service.key, now_ns) {
                    self.expire(now_ns, Expiry::NoMoreRequests);
                    continue;
                }
                // Kept for guarantees, not throughput: others' requests may go meanwhile.
                if self.may_inject_for(service.key, now_ns)
                    && self.inject(service.key, now_ns, false, out)
                {
                    continue;
                }
                if inflight > 0 {
                    // Its next request may follow a completion, which calls again.
                    out.wake_at_ns = Some(service.until);
                    break;
                }
                let until = match service.idle_until {
                    Some(until) => until,
                    None => {
                        let slice = self.idle_slice(service.key, now_ns);
                        let until = (now_ns + slice).min(service.until);
                        if let Some(s) = &mut self.in_service {
                            s.idle_until = Some(until);
                            s.idle_started = now_ns;
                        }
                        until
                    }
                };
                if now_ns < until {
                    out.wake_at_ns = Some(until);
                    break;
                }
                self.expire(now_ns, Expiry::TooIdle);
                continue;
            }
            let id = choose(queue, self.head, now_ns);
            out.ids.push(id);
            let Some(extent) = queue.requests.take(id) else {
                continue;
            };
            queue.inflight += 1;
            self.in_driver += 1;
            self.queued.remove(&id);
            self.on_device.insert(id, service.key);
            if counts_share {
                self.share.sent(id, queue.group);
            }
            self.head = extent.end();
            if now_ns < queue.raised_until {
                queue.service_from_wr += u64::from(extent.sectors);
                if queue.service_from_wr > MAX_SERVICE_FROM_WR {
                    queue.raised_until = now_ns;
                }
            }
            if let Some(s) = &mut self.in_service {
                s.served += u64::from(extent.sectors) * s.charge_factor;
                s.idle_until = None;
            }
            self.sample_dispatch(id);
        }
    }

    fn allow_merge(&mut self, query: &MergeQuery) -> bool {
        // bfq_allow_bio_merge: a bio merges only into a request of the queue it would join
        // (a sync bio never into an async request).
        match self.queued.get(&query.target) {
            Some(QueueKey::Sync(ctx)) => query.sync && query.ctx == *ctx,
            Some(QueueKey::Async(..)) => !query.sync,
            None => false,
        }
    }

    fn merged(&mut self, _now_ns: u64, event: &MergeEvent) {
        // The host asks about bios joining requests (allow_merge); two queued requests it
        // coalesces may still be two queues', so the absorbed one leaves its own.
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
            if self.share.in_flight() > 0 {
                self.share.requeued(r.id);
            }
            if let Some(key) = self.on_device.remove(&r.id) {
                self.in_driver = self.in_driver.saturating_sub(1);
                if let Some(queue) = self.queues.get_mut(&key) {
                    queue.inflight = queue.inflight.saturating_sub(1);
                }
            }
        }
        self.insert(now_ns, requests);
    }

    fn completed(&mut self, now_ns: u64, done: &[Completion]) {
        // What was counted is uncounted, even if the groups went meanwhile.
        if self.share.in_flight() > 0 {
            self.share.completed(done);
        }
        for c in done {
            if let Some(key) = self.on_device.remove(&c.id) {
                self.update_hw_tag();
                self.sample_completion(c.id, key, now_ns);
                self.in_driver = self.in_driver.saturating_sub(1);
                if let Some(queue) = self.queues.get_mut(&key) {
                    queue.inflight = queue.inflight.saturating_sub(1);
                    queue.habits.completed(now_ns);
                }
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

    /// A queue becomes busy: its turn starts at max(system virtual time, its last finish),
    /// or, when it ran dry with budget left and this request came in time, it resumes that
    /// turn where it stood (`bfq_bfqq_update_budg_for_activation`, the timestamps
    /// back-shifted) and may take the device from the queue in service.
    fn activate(&mut self, key: QueueKey, now_ns: u64) {
        let slice = IN_TIME_SLICES * self.slice_idle;
        let resume = self.queues.get_mut(&key).and_then(|q| {
            let left = q.resume_left.take()?;
            let in_time = q
                .habits
                .last_completion()
                .is_some_and(|done| now_ns <= done.saturating_add(slice));
            (in_time && left > 0).then_some(left)
        });
        let Some(left) = resume else {
            self.begin_turn(key, now_ns, false);
            if self.in_service.is_some_and(|s| s.key != key) {
                self.preempting = Some((key, false));
            }
            return;
        };
        let Some(queue) = self.queues.get(&key) else {
            return;
        };
        let weight = self.weight(queue, now_ns).max(1);
        if let Some(queue) = self.queues.get_mut(&key) {
            queue.start = queue.finish;
            queue.finish = queue.start + u128::from(left) * VT_SCALE / u128::from(weight);
            queue.budget = left;
            queue.busy = true;
        }
        if self.in_service.is_some_and(|s| s.key != key) {
            self.preempting = Some((key, true));
        }
    }

    /// Whether `key`, just busy, takes the device from the queue in service
    /// (`bfq_bfqq_handle_idle_busy_switch`): B-WF2Q+ would serve it next (a higher class,
    /// or eligible in the same class), and it resumed its turn raised at least as much, or
    /// is of a higher class or weight (`bfq_bfqq_higher_class_or_weight`), or bfq would no
    /// longer idle for the queue in service.
    fn may_preempt(&self, key: QueueKey, resumed: bool, now_ns: u64) -> bool {
        let Some(service) = self.in_service else {
            return false;
        };
        let (Some(queue), Some(serving)) = (self.queues.get(&key), self.queues.get(&service.key))
        else {
            return false;
        };
        let raised = |q: &Queue| u8::from(now_ns < q.raised_until);
        let next = queue.class < serving.class
            || (queue.class == serving.class && queue.start <= self.vtime[queue.class]);
        if !queue.busy || !next {
            return false;
        }
        let recovers = resumed && raised(queue) >= raised(serving);
        let ranks = queue.class < serving.class
            || (queue.class == serving.class
                && queue.group == serving.group
                && Self::own_weight(queue, now_ns) > Self::own_weight(serving, now_ns));
        recovers || ranks || !self.better_to_idle(service.key, now_ns)
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
            queue.budget = budget;
            queue.busy = true;
        }
    }

    /// Picks the next queue by B-WF2Q+ in the highest class with a busy queue, the idle
    /// class first once every [`CLASS_IDLE_TIMEOUT_NS`] (`bfq_lookup_next_entity`).
    fn select(&mut self, now_ns: u64) -> bool {
        let idle_due = now_ns >= self.idle_class_last.saturating_add(CLASS_IDLE_TIMEOUT_NS);
        if idle_due {
            self.idle_class_last = now_ns;
        }
        let order = if idle_due { [2, 0, 1] } else { [0, 1, 2] };
        for class in order {
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
            let budget = self.queues.get(&key).map_or(self.budget(), |q| q.budget);
            let charge_factor = self.charge_factor(key, now_ns);
            // What it was given as injected service counts in this turn.
            let injected = self
                .queues
                .get_mut(&key)
                .map_or(0, |q| std::mem::take(&mut q.injected));
            self.in_service = Some(InService {
                key,
                served: injected,
                budget,
                charge_factor,
                started: now_ns,
                until: now_ns + self.timeout,
                idle_started: now_ns,
                idle_until: None,
            });
            return true;
        }
        false
    }

    /// Ends the in-service turn for `reason`, charging the service received, or the time
    /// held for a slow queue; the queue starts a new turn if it still has requests.
    fn expire(&mut self, now_ns: u64, reason: Expiry) {
        let Some(service) = self.in_service.take() else {
            return;
        };
        let Some(queue) = self.queues.get(&service.key) else {
            return;
        };
        let (class, weight) = (queue.class, self.weight(queue, now_ns).max(1));
        let charged = self.charge(queue, &service, now_ns, reason).max(1);
        let total_weight = self.busy_weight(class, now_ns);
        let charged = u128::from(charged) * VT_SCALE;
        let Some(queue) = self.queues.get_mut(&service.key) else {
            return;
        };
        // The turn finishes where its charge, not its budget, says.
        queue.finish = queue.start + charged / u128::from(weight);
        queue.busy = false;
        let backlogged = !queue.requests.is_empty();
        // Run dry, not out of budget or time: its next request may resume the turn.
        queue.resume_left = (!backlogged
            && !matches!(reason, Expiry::BudgetTimeout | Expiry::BudgetExhausted))
        .then(|| {
            let charged = u64::try_from(charged / VT_SCALE).unwrap_or(u64::MAX);
            service.budget.saturating_sub(charged)
        });
        self.vtime[class] += charged / total_weight.max(1);
        if backlogged {
            self.begin_turn(service.key, now_ns, true);
        }
    }

    /// How many times each sector of `key`'s turn counts (`bfq_serv_to_charge`): an async
    /// queue's three times, unless the scenario is asymmetric (judged as the turn begins,
    /// where the kernel judges each request).
    fn charge_factor(&self, key: QueueKey, now_ns: u64) -> u64 {
        let Some(queue) = self.queues.get(&key) else {
            return 1;
        };
        if queue.sync || now_ns < queue.raised_until || self.asymmetric(key, now_ns) {
            1
        } else {
            ASYNC_CHARGE_FACTOR
        }
    }

    /// What a turn ending for `reason` costs `queue` in sectors (`bfq_bfqq_expire`): the
    /// sectors it moved, or, for a slow queue or one timed out with a third of its budget
    /// left, the time it held the device as a share of `max_budget` per `timeout_sync`
    /// (`bfq_bfqq_charge_time`), whichever is more. A raised queue is never charged time.
    fn charge(&self, queue: &Queue, service: &InService, now_ns: u64, reason: Expiry) -> u64 {
        let served = service.served;
        if !queue.sync || now_ns < queue.raised_until {
            return served;
        }
        // bfq_bfqq_is_slow: after idling, the turn is measured to when idling began.
        let end = if reason == Expiry::TooIdle {
            service.idle_started
        } else {
            now_ns
        };
        let held = end.saturating_sub(service.started);
        let (slow, held) = if held < SHORT_TURN_NS {
            // Too short to measure: charged at least one seek (an idle slice) if seeky.
            (seeky(queue), self.slice_idle)
        } else if held > RATE_WINDOW_NS {
            (served < self.budget() / 2, held)
        } else {
            (seeky(queue), held)
        };
        let left = service.budget.saturating_sub(served);
        let timed_out = reason == Expiry::BudgetTimeout && left >= service.budget / 3;
        if !(slow || timed_out) || self.timeout == 0 {
            return served;
        }
        let for_time = u128::from(self.budget()) * u128::from(held.min(self.timeout))
            / u128::from(self.timeout);
        served.max(u64::try_from(for_time).unwrap_or(u64::MAX))
    }

    /// Whether a dry queue should keep the device for its next request
    /// (`bfq_better_to_idle`): idling boosts throughput without hurting raised queues, or
    /// service guarantees need it.
    fn better_to_idle(&self, key: QueueKey, now_ns: u64) -> bool {
        let Some(queue) = self.queues.get(&key) else {
            return false;
        };
        if self.strict {
            return true;
        }
        if self.slice_idle == 0 || !queue.sync || queue.class == 2 {
            return false;
        }
        let busy = self.queues.values().filter(|q| q.busy);
        let (busy_queues, raised_busy) = busy.fold((0u32, 0u32), |(b, r), q| {
            (b + 1, r + u32::from(now_ns < q.raised_until))
        });
        let boosts = self.idling_boosts_throughput(key, now_ns);
        // idling_needed_for_service_guarantees.
        let raised = now_ns < queue.raised_until;
        let protects_raised =
            raised && (raised_busy < busy_queues || self.in_driver >= queue.inflight + 4);
        boosts || protects_raised || (busy_queues > 1 && self.asymmetric(key, now_ns))
    }

    /// A sync queue for `r`'s submitter is created at `now_ns`: raised under `low_latency`
    /// unless it is in a large burst, whose queues end their raising with it.
    fn created(&mut self, key: QueueKey, r: &Request, now_ns: u64) {
        let busy = self.queues.values().filter(|q| q.busy).count();
        let in_burst = self.burst.created(key, r.group, now_ns, busy);
        let mut queue = Queue::for_request(r, now_ns);
        if self.low_latency && in_burst.is_empty() {
            queue.raised_until = now_ns + WR_DURATION_NS;
        }
        self.queues.insert(key, queue);
        for member in in_burst {
            if let Some(q) = self.queues.get_mut(&member) {
                q.raised_until = q.raised_until.min(now_ns);
            }
        }
    }

    /// Whether idling for dry queue `key` pays in throughput
    /// (`idling_boosts_thr_without_issues`): on a disk that queues no commands, and for a
    /// sequential queue quick to send its next request on a disk or on flash that queues
    /// none, unless a raised queue would wait.
    fn idling_boosts_throughput(&self, key: QueueKey, now_ns: u64) -> bool {
        let Some(queue) = self.queues.get(&key) else {
            return false;
        };
        let raised_busy = self
            .queues
            .values()
            .any(|q| q.busy && now_ns < q.raised_until);
        let sequential = !seeky(queue) && !queue.habits.thinks_longer_than(self.slice_idle);
        let queueing = self.hw_tag.queueing();
        let rot_without_queueing = self.rotational && !queueing;
        (rot_without_queueing || ((self.rotational || !queueing) && sequential)) && !raised_busy
    }

    /// A busy queue whose requests all went as injected service leaves the busy queues,
    /// charged for them as a turn that ran dry is (`bfq_del_bfqq_busy`).
    fn settle_injected(&mut self, key: QueueKey, now_ns: u64) {
        let Some(queue) = self.queues.get(&key) else {
            return;
        };
        let (class, weight) = (queue.class, self.weight(queue, now_ns).max(1));
        let total_weight = self.busy_weight(class, now_ns);
        let Some(queue) = self.queues.get_mut(&key) else {
            return;
        };
        let charged = u128::from(std::mem::take(&mut queue.injected).max(1)) * VT_SCALE;
        queue.finish = queue.start + charged / u128::from(weight);
        queue.busy = false;
        queue.resume_left = None;
        self.vtime[class] += charged / total_weight.max(1);
    }

    /// Whether the busy queues differ so that idling is needed to keep `key`'s share
    /// (`bfq_asymmetric_scenario`): weights that differ with `key`'s not the smallest,
    /// more than one class busy, or more than one group with requests.
    fn asymmetric(&self, key: QueueKey, now_ns: u64) -> bool {
        let busy = || self.queues.values().filter(|q| q.busy);
        // Each group's busy queues' own weights per class, summed once (as busy_weight
        // does), so a thousand queues cost two passes, not a pass each.
        let mut siblings: BTreeMap<(u32, usize), u64> = BTreeMap::new();
        for q in busy().filter(|q| q.group != 0) {
            *siblings.entry((q.group, q.class)).or_default() += Self::own_weight(q, now_ns);
        }
        let mut classes = [false; 3];
        let (mut lightest, mut heaviest) = (u64::MAX, 0);
        let mut groups: Vec<u32> = Vec::new();
        for q in busy() {
            classes[q.class] = true;
            let sum = siblings.get(&(q.group, q.class)).copied().unwrap_or(0);
            let w = self.share(q, now_ns, sum);
            lightest = lightest.min(w);
            heaviest = heaviest.max(w);
            if q.group != 0 && !groups.contains(&q.group) {
                groups.push(q.group);
            }
        }
        let mine = self
            .queues
            .get(&key)
            .map_or(lightest, |q| self.weight(q, now_ns));
        let varied = lightest < heaviest && mine > lightest;
        let classes_busy = classes.iter().filter(|&&c| c).count();
        varied || classes_busy > 1 || groups.len() > 1
    }

    /// How long to idle for a dry queue (`bfq_arm_slice_timer`): `slice_idle`, at most
    /// `BFQ_MIN_TT` for a seeky, unraised queue when nothing is asymmetric, at least 20 ms
    /// for a raised one.
    fn idle_slice(&self, key: QueueKey, now_ns: u64) -> u64 {
        let Some(queue) = self.queues.get(&key) else {
            return self.slice_idle;
        };
        let raised = now_ns < queue.raised_until;
        if seeky(queue) && !raised && !self.asymmetric(key, now_ns) {
            self.slice_idle.min(MIN_TT_NS)
        } else if raised {
            self.slice_idle.max(20 * MS)
        } else {
            self.slice_idle
        }
    }

    /// A completion's sample of the device's queueing (`bfq_update_hw_tag`), taken before
    /// it leaves the device count.
    fn update_hw_tag(&mut self) {
        let in_driver = self.in_driver;
        let busy = in_driver + self.queued.len() as u32 > HW_QUEUE_THRESHOLD;
        // A quick queue in service with too few requests to fill the device proves nothing.
        let starved = self
            .in_service
            .and_then(|s| self.queues.get(&s.key))
            .is_some_and(|q| {
                !q.habits.thinks_longer_than(self.slice_idle)
                    && q.inflight + (q.requests.len() as u32) < HW_QUEUE_THRESHOLD
                    && in_driver < HW_QUEUE_THRESHOLD
            });
        self.hw_tag.sample(hw_tag::BFQ, in_driver, busy && !starved);
    }
}

/// Whether `queue` seeks: more than [`SEEKY_OF_32`] of its last 32 requests.
fn seeky(queue: &Queue) -> bool {
    queue.habits.seeks() > SEEKY_OF_32
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
