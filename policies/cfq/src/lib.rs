//! cfq: Completely Fair Queueing (block/cfq-iosched.c, removed in Linux 5.0) as a schedhost
//! policy.
//!
//! Sync requests queue per submitter; async requests share one queue per priority class and
//! level. One queue at a time is active and owns the device for a time slice (`slice_sync`,
//! `slice_async`, longer for higher priority levels, shortened under `low_latency` so that all
//! busy queues get a turn within `target_latency`). Within its slice a queue dispatches in
//! sector order from the head position (a backward seek of up to `back_seek_max` counts
//! `back_seek_penalty` times its distance), checking its FIFO once per slice
//! (`fifo_expire_sync/async`), with at most `quantum / 2` requests on the device, `quantum`
//! once one of its slice's requests has completed and while the slice is not about to end,
//! and no limit if it is the only busy queue or the only busy sync one; under `low_latency`
//! an async queue ramps up one request per `slice_sync` since a sync request was last
//! delayed (`cfq_may_dispatch`, `cfq_slice_used_soon`, `last_delayed_sync`). When an active
//! sync queue runs dry, cfq waits for its requests to complete and then idles `slice_idle`
//! for the next one before giving the device away, except on flash that queues commands
//! (`rotational` 0 and the queueing estimated as `cfq_update_hw_tag` does), where it never
//! idles for a queue's own next request and counts small requests as seeks. Classes are served RT, then BE, then IDLE;
//! a request arriving for another queue may preempt the active one (`cfq_should_preempt`:
//! sync over async but never non-RT over RT, RT over a lower class, anything over an idle
//! class queue or one whose slice is used, the other queue of an empty sync-noidle tree,
//! anything over an empty queue cfq would not idle for, and, while cfq idles, a request
//! within 8 MiB of the head; never a queue of another group but the root's).
//!
//! Groups (io.weight) take turns by weighted virtual disk time, each with its own service
//! trees and async queues, as `CFQ_GROUP_IOSCHED` does (`groups.rs`); while every
//! submitter is in the root group cfq behaves as a kernel built without it (no
//! `group_idle`, no `wait_busy`).

#![forbid(unsafe_code)]

use std::collections::{BTreeMap, VecDeque};

mod groups;
mod idling;
mod slices;

use groups::{Cfqg, GroupTree, Groups};

use slices::Step;

use schedhost_sdk::habits::{Habits, SeekRule};
use schedhost_sdk::hw_tag::{self, HwTag};
use schedhost_sdk::{
    Completion, Dispatch, ElevatorQueue, IdMap, MergeEvent, MergeQuery, Policy, PrioClass, Request,
    RequestId, Sector, Setup, TunableSpec, Word, WordMap,
};

const MS: u64 = 1_000_000;
/// A request this close to the head, in sectors, is as good as the idling queue's next
/// one (`CFQQ_CLOSE_THR`: 8 MiB).
const CLOSE_THRESHOLD: u64 = 8 * 1024;
/// The shortest workload slice (`CFQ_MIN_TT`: two jiffies at HZ=1000).
const MIN_TT_NS: u64 = 2 * MS;
/// A jiffy at HZ=1000.
const JIFFY_NS: u64 = MS;

const fn tunable(
    name: &'static str,
    default: i64,
    max: i64,
    unit: &'static str,
    help: &'static str,
    field: fn(&mut Cfq) -> &mut i64,
) -> TunableSpec<Cfq> {
    TunableSpec {
        name,
        default,
        min: 0,
        max,
        unit,
        help,
        field,
    }
}

/// The tunables, with the kernel's names and defaults. Idling is capped at a second and the
/// other times at a minute: past those a disk is simply left idle.
const TUNABLES: &[TunableSpec<Cfq>] = &[
    tunable(
        "quantum",
        8,
        1024,
        "requests",
        "most requests the active queue has on the device while others are busy",
        |p| &mut p.knobs.quantum,
    ),
    tunable(
        "fifo_expire_sync",
        125,
        60_000,
        "ms",
        "a sync request is served out of sector order after this long",
        |p| &mut p.knobs.fifo_expire_sync,
    ),
    tunable(
        "fifo_expire_async",
        250,
        60_000,
        "ms",
        "an async request is served out of sector order after this long",
        |p| &mut p.knobs.fifo_expire_async,
    ),
    tunable(
        "back_seek_max",
        16384,
        1 << 30,
        "KiB",
        "longest backward seek taken in sector order",
        |p| &mut p.knobs.back_seek_max,
    ),
    // At least 1, as the kernel's store clamps it; declared so, a 0 is refused with the
    // range instead of being read back as 1.
    TunableSpec {
        min: 1,
        ..tunable(
            "back_seek_penalty",
            2,
            1024,
            "",
            "a backward seek counts this many times its distance",
            |p| &mut p.knobs.back_seek_penalty,
        )
    },
    tunable(
        "slice_sync",
        100,
        60_000,
        "ms",
        "time slice of a sync queue at priority level 4",
        |p| &mut p.knobs.slice_sync,
    ),
    tunable(
        "slice_async",
        40,
        60_000,
        "ms",
        "time slice of an async queue at priority level 4",
        |p| &mut p.knobs.slice_async,
    ),
    tunable(
        "slice_async_rq",
        2,
        1024,
        "requests",
        "base of an async queue's requests per slice: 2 × this × (8 − level), as cfq_prio_to_maxrq",
        |p| &mut p.knobs.slice_async_rq,
    ),
    tunable(
        "slice_idle",
        8,
        1_000,
        "ms",
        "how long an empty sync queue keeps the device",
        |p| &mut p.knobs.slice_idle,
    ),
    tunable(
        "group_idle",
        8,
        1_000,
        "ms",
        "how long a group's only queue keeps the device once dry, for the group's next request",
        |p| &mut p.knobs.group_idle,
    ),
    tunable(
        "low_latency",
        1,
        1,
        "",
        "shorten slices so every busy queue is served within target_latency",
        |p| &mut p.knobs.low_latency,
    ),
    tunable(
        "target_latency",
        300,
        60_000,
        "ms",
        "with low_latency, the round of all busy sync queues",
        |p| &mut p.knobs.target_latency,
    ),
];

/// Which queue a request belongs to: its submitter's for sync I/O, its group's one per
/// class and level for async I/O.
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

/// A service tree within a class (`wl_type`): cfq serves one at a time, for a workload
/// slice, so queues of one kind cannot keep the device from another's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Workload {
    Async,
    /// Sync queues without an idle window, idled for as a whole.
    SyncNoIdle,
    Sync,
}

/// One cfq queue.
#[derive(Debug, Default)]
struct Queue {
    requests: ElevatorQueue,
    /// Requests of this queue on the device.
    inflight: u32,
    class: u8,
    level: u8,
    sync: bool,
    /// Its group (0: the root, every submitter in none): cfq's `cfqq->cfqg`.
    group: u32,
    /// How its submitter behaves, for its idle window (sync queues).
    window: Window,
    /// Its place on its service tree while it waits (`rb_key`, ns): when it was added plus
    /// its slice offset; a preempting queue's is a second before its tree's first.
    rb_key: i64,
}

/// A sync queue's seeks and think time (the SDK's [`Habits`], as cfq keeps them per queue
/// and per process), and the idle window they decide (`cfq_update_idle_window`).
#[derive(Debug, Clone, Copy)]
struct Window {
    habits: Habits,
    /// It has had 4 or more requests queued at once (`cfq_cfqq_deep`).
    deep: bool,
    /// Whether cfq idles for it when it runs dry.
    idle_window: bool,
}

impl Default for Window {
    fn default() -> Self {
        // cfq_init_cfqq marks a new sync queue's idle window on.
        Self {
            habits: Habits::default(),
            deep: false,
            idle_window: true,
        }
    }
}

impl Window {
    /// A request of its at `start` for `sectors` arrived at `now_ns`, with `queued` of its
    /// requests waiting: the seek and think-time samples, then the idle window.
    fn arrived(
        &mut self,
        now_ns: u64,
        request: (Sector, u32),
        (queued, rule): (usize, SeekRule),
        slice_idle: u64,
    ) {
        self.habits.arrived(now_ns, request, rule, 2 * slice_idle);
        if queued >= 4 {
            self.deep = true;
        }
        self.idle_window = if slice_idle == 0 || (!self.deep && self.habits.seeky()) {
            false
        } else {
            !self.habits.thinks_longer_than(slice_idle)
        };
    }
}

/// The queue that owns the device.
#[derive(Debug, Clone, Copy)]
struct Active {
    key: QueueKey,
    /// Its group, whose turn this is.
    group: u32,
    /// When it was chosen, and the slice it was given (`allocated_slice`).
    start: u64,
    allocated: u64,
    slice_end: u64,
    dispatched: u32,
    fifo_checked: bool,
    /// When idling for this queue ends, once it has started.
    idle_until: Option<u64>,
    /// A more deserving queue became busy: end the slice at the next decision.
    preempt: bool,
    /// One of its requests completed in this slice (`!cfq_cfqq_slice_new`).
    completed_one: bool,
    /// A request of its completed after its slice ended: end it at the next decision.
    used_up: bool,
    /// Its slice was stretched to wait for its next request, as its group's only queue
    /// (`wait_busy`): the request ends the slice with the group still busy.
    wait_busy: bool,
}

/// The CFQ policy.
#[derive(Debug, Default)]
pub struct Cfq {
    /// Never iterated: lookups only, so the map's order cannot reach a decision.
    queues: WordMap<QueueKey, Queue>,
    /// The queue each queued request is in.
    queued: IdMap<QueueKey>,
    on_device: IdMap<QueueKey>,
    /// Requests on the device, [async, sync] (`rq_in_flight`).
    in_flight: [u32; 2],
    /// The groups, by id, each with its busy queues waiting for a slice; iterated in id
    /// order.
    groups: Groups,
    /// Their order (`grp_service_tree`).
    tree: GroupTree,
    /// Groups' io.weight, by id, as the host last told them.
    weights: BTreeMap<u32, u32>,
    active: Option<Active>,
    /// The class and service tree being served in the serving group, and when its
    /// workload slice ends (`serving_wl_class`, `serving_wl_type`, `workload_expires`).
    serving: Option<(u8, Workload, u64)>,
    /// When a sync request last completed later than `fifo_expire_sync` after it arrived
    /// (`last_delayed_sync`; none yet counts as a second before the start).
    last_delayed_sync: Option<u64>,
    /// Where the last dispatched request ended.
    head: Sector,
    /// The device seeks (`!blk_queue_nonrot`).
    rotational: bool,
    /// Whether it queues commands (`hw_tag`).
    hw_tag: HwTag,
    /// A request of a group other than the root has been seen: `group_idle` and
    /// `wait_busy` apply.
    grouped: bool,
    knobs: Knobs,
    t: Tunables,
}

/// The tunables as the user set them, in their sysfs units; `retuned` derives [`Tunables`].
#[derive(Debug, Default, Clone, Copy)]
struct Knobs {
    quantum: i64,
    fifo_expire_sync: i64,
    fifo_expire_async: i64,
    back_seek_max: i64,
    back_seek_penalty: i64,
    slice_sync: i64,
    slice_async: i64,
    slice_async_rq: i64,
    slice_idle: i64,
    group_idle: i64,
    low_latency: i64,
    target_latency: i64,
}

#[derive(Debug, Default, Clone, Copy)]
struct Tunables {
    quantum: u32,
    fifo_expire: [u64; 2],
    back_seek_max_sectors: u64,
    back_seek_penalty: u64,
    slice_sync: u64,
    slice_async: u64,
    slice_async_rq: u32,
    slice_idle: u64,
    group_idle: u64,
    low_latency: bool,
    target_latency: u64,
}

fn class_index(class: PrioClass) -> u8 {
    match class.effective() {
        PrioClass::Rt => 0,
        PrioClass::Idle => 2,
        _ => 1,
    }
}

fn key_of(r: &Request) -> QueueKey {
    if r.sync {
        QueueKey::Sync(r.ctx)
    } else {
        QueueKey::Async(r.group, class_index(r.prio_class), r.prio_level.min(7))
    }
}

impl Policy for Cfq {
    const NAME: &'static str = "cfq";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const TUNABLES: &'static [TunableSpec<Self>] = TUNABLES;
    const MERGE_VETO: bool = true;
    const HANDLES_ABSORBED: bool = true;
    const WEIGHTED_TAGS: bool = true;

    fn new(setup: &Setup) -> Self {
        // Its one queued map and one in-flight map may hold any of the device's requests;
        // each queue's own elevator stays small.
        Self {
            queued: IdMap::device_wide(),
            on_device: IdMap::device_wide(),
            rotational: setup.rotational,
            ..Self::default()
        }
    }

    fn retuned(&mut self, _name: &str) {
        // The SDK range-checked every knob, so each fits its working type.
        let k = &self.knobs;
        let v = |value: i64| value.unsigned_abs();
        self.t = Tunables {
            quantum: v(k.quantum) as u32,
            fifo_expire: [v(k.fifo_expire_async) * MS, v(k.fifo_expire_sync) * MS],
            back_seek_max_sectors: v(k.back_seek_max) * 2,
            back_seek_penalty: v(k.back_seek_penalty),
            slice_sync: v(k.slice_sync) * MS,
            slice_async: v(k.slice_async) * MS,
            slice_async_rq: v(k.slice_async_rq) as u32,
            slice_idle: v(k.slice_idle) * MS,
            group_idle: v(k.group_idle) * MS,
            low_latency: k.low_latency != 0,
            target_latency: v(k.target_latency) * MS,
        };
    }

    fn insert(&mut self, now_ns: u64, requests: &[Request]) {
        let rule = self.seek_rule();
        for r in requests {
            let key = key_of(r);
            let expires = r.arrival_ns + self.t.fifo_expire[usize::from(r.sync)];
            let queue = self.queues.get_or_insert_with(key, || Queue {
                class: class_index(r.prio_class),
                level: r.prio_level.min(7),
                sync: r.sync,
                group: r.group,
                ..Queue::default()
            });
            let was_idle = queue.requests.is_empty();
            if was_idle && queue.inflight == 0 && queue.group != r.group {
                // A submitter moved to another group: its queue follows while idle.
                let parked = self.active.is_some_and(|a| a.key == key)
                    || (self.groups.get(&queue.group))
                        .is_some_and(|g| g.waiting.iter().flatten().any(|&k| k == key));
                if !parked {
                    queue.group = r.group;
                }
            }
            self.grouped |= r.group != 0;
            queue.requests.push(r, expires);
            if queue.sync {
                let queued = (queue.requests.len(), rule);
                let slice_idle = self.t.slice_idle;
                queue
                    .window
                    .arrived(r.arrival_ns, (r.sector, r.sectors), queued, slice_idle);
            }
            self.queued.insert(r.id, key);
            self.arrived_at(key, r, was_idle, now_ns);
        }
    }

    fn dispatch(&mut self, now_ns: u64, _hw_queue: u32, budget: u32, out: &mut Dispatch) {
        while out.ids.len() < budget as usize {
            let Some(active) = self.active else {
                if !self.activate_next(now_ns) {
                    break;
                }
                continue;
            };
            if active.preempt || active.used_up {
                self.expire(now_ns);
                continue;
            }
            if now_ns >= active.slice_end {
                if self.keeps_used_slice(active) {
                    // Until one of its requests completes.
                    break;
                }
                self.expire(now_ns);
                continue;
            }
            match self.step(active, now_ns) {
                Step::Sent(id) => out.ids.push(id),
                Step::Expire => self.expire(now_ns),
                Step::WaitUntil(t) => {
                    out.wake_at_ns = Some(t);
                    break;
                }
            }
        }
    }

    fn groups(&mut self, _now_ns: u64, groups: &[schedhost_sdk::Group]) {
        self.set_weights(groups);
    }

    fn allow_merge(&mut self, query: &MergeQuery) -> bool {
        // cfq_allow_bio_merge: a bio merges only into a request of the queue it would join.
        let Some(target) = self.queued.get(&query.target) else {
            return false;
        };
        match target {
            QueueKey::Sync(ctx) => query.sync && query.ctx == *ctx,
            QueueKey::Async(..) => !query.sync,
        }
    }

    fn merged(&mut self, _now_ns: u64, event: &MergeEvent) {
        // Merges stay within a queue (allow_merge), so one queue holds both requests.
        if let Some(gone) = event.absorbed {
            self.queued.remove(&gone);
        }
        if let Some(queue) = self
            .queued
            .get(&event.target)
            .and_then(|key| self.queues.get_mut(key))
        {
            queue.requests.merged(event);
        }
    }

    /// cfq_requeue_request: the request leaves the device count of its queue and waits in
    /// the queue again.
    fn requeue(&mut self, now_ns: u64, requests: &[Request]) {
        for r in requests {
            if let Some(key) = self.on_device.remove(&r.id) {
                self.left_device(key, None);
            }
        }
        self.insert(now_ns, requests);
    }

    fn completed(&mut self, now_ns: u64, done: &[Completion]) {
        for c in done {
            if let Some(key) = self.on_device.remove(&c.id) {
                self.update_hw_tag();
                if let Some(a) = self.active.as_mut().filter(|a| a.key == key) {
                    a.completed_one = true;
                }
                let sync = matches!(key, QueueKey::Sync(_));
                if sync && c.latency_ns >= self.t.fifo_expire[1] {
                    self.last_delayed_sync = Some(now_ns);
                }
                self.left_device(key, Some(now_ns));
                if self.active.is_some_and(|a| a.key == key) {
                    self.active_completed(now_ns);
                }
            }
        }
    }
}

impl Cfq {
    /// A request of queue `key` left the device, completed at `completed` or sent back.
    fn left_device(&mut self, key: QueueKey, completed: Option<u64>) {
        let kind = usize::from(matches!(key, QueueKey::Sync(_)));
        self.in_flight[kind] = self.in_flight[kind].saturating_sub(1);
        let Some(queue) = self.queues.get_mut(&key) else {
            return;
        };
        queue.inflight = queue.inflight.saturating_sub(1);
        if let Some(now_ns) = completed {
            queue.window.habits.completed(now_ns);
        }
        let group = queue.group;
        if let Some(g) = self.groups.get_mut(&group) {
            g.dispatched = g.dispatched.saturating_sub(1);
        }
    }
}

schedhost_sdk::export!(Cfq);
