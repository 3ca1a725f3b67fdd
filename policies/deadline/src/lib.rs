//! deadline: the kernel's mq-deadline (block/mq-deadline.c) as a schedhost policy.
//!
//! Per priority class and direction, requests sit in a sector-sorted set and in a FIFO by
//! deadline (`read_expire`, `write_expire`). Dispatch continues a batch in sector order from
//! where the last request ended, up to `fifo_batch` requests; a new batch prefers reads, but
//! serves writes once reads have been preferred `writes_starved` times while writes waited;
//! it starts from the FIFO head when that has expired (or nothing lies ahead of the head
//! position). Classes are served RT before BE before IDLE, and a class with requests queued
//! *or in flight* holds back every lower one (`dd_queued`), except that a request of a lower
//! class waiting longer than `prio_aging_expire` goes first (with two classes busy). Async requests may hold at most
//! `async_depth` scheduler tags. `front_merges=0` refuses merges in front of a request.

#![forbid(unsafe_code)]

use schedhost_sdk::{
    Completion, Dispatch, ElevatorQueue, IdMap, MergeEvent, MergeKind, MergeQuery, MergeRule,
    MergeRules, Op, Policy, PrioClass, Request, RequestId, Sector, Setup, TunableSpec,
};

/// Directions, as the kernel's `enum dd_data_dir`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dir {
    Read = 0,
    Write = 1,
}

const DIRS: [Dir; 2] = [Dir::Read, Dir::Write];

/// Priority classes served in this order, as `enum dd_prio`.
const PRIOS: usize = 3;

const MS: u64 = 1_000_000;

/// The tunables, with the kernel's names and defaults.
const TUNABLES: &[TunableSpec<Deadline>] = &[
    TunableSpec {
        name: "read_expire",
        default: 500,
        min: 1,
        max: 60_000,
        unit: "ms",
        help: "a read is served within this long",
        field: |p| &mut p.knobs.read_expire,
    },
    TunableSpec {
        name: "write_expire",
        default: 5000,
        min: 1,
        max: 60_000,
        unit: "ms",
        help: "a write is served within this long",
        field: |p| &mut p.knobs.write_expire,
    },
    TunableSpec {
        name: "writes_starved",
        default: 2,
        min: 0,
        max: 1024,
        unit: "batches",
        help: "how many times reads may be preferred while writes wait",
        field: |p| &mut p.knobs.writes_starved,
    },
    TunableSpec {
        name: "fifo_batch",
        default: 16,
        min: 1,
        max: 1024,
        unit: "requests",
        help: "requests per batch in sector order",
        field: |p| &mut p.knobs.fifo_batch,
    },
    TunableSpec {
        name: "front_merges",
        default: 1,
        min: 0,
        max: 1,
        unit: "",
        help: "allow bios to merge in front of a queued request",
        field: |p| &mut p.knobs.front_merges,
    },
    TunableSpec {
        name: "async_depth",
        default: 0,
        min: 0,
        max: 1 << 20,
        unit: "requests",
        help: "scheduler tags async requests may hold; 0 = 3/4 of nr_requests",
        field: |p| &mut p.knobs.async_depth,
    },
    TunableSpec {
        name: "prio_aging_expire",
        default: 10_000,
        min: 1,
        max: 60_000,
        unit: "ms",
        help: "a lower-priority request waiting this long goes before higher classes",
        field: |p| &mut p.knobs.prio_aging_expire,
    },
];

/// Per priority class: a sort tree and a FIFO per direction (`dd_per_prio`).
#[derive(Debug, Default)]
struct PerPrio {
    dirs: [ElevatorQueue; 2],
}

impl PerPrio {
    fn is_empty(&self) -> bool {
        self.dirs.iter().all(ElevatorQueue::is_empty)
    }
}

/// The tunables as the user set them, in their sysfs units; [`Deadline::retuned`] derives the
/// working values.
#[derive(Debug, Default)]
struct Knobs {
    read_expire: i64,
    write_expire: i64,
    writes_starved: i64,
    fifo_batch: i64,
    front_merges: i64,
    async_depth: i64,
    prio_aging_expire: i64,
}

/// Where a queued request is, and when it arrived (for priority aging).
#[derive(Debug, Clone, Copy)]
struct Queued {
    dir: Dir,
    prio: usize,
    arrival_ns: u64,
}

/// The mq-deadline policy.
#[derive(Debug)]
pub struct Deadline {
    prios: [PerPrio; PRIOS],
    queued: IdMap<Queued>,
    /// Where the last dispatched request of each direction ended (`latest_pos`).
    latest_pos: [Sector; 2],
    last_dir: Dir,
    /// Requests dispatched in the current batch.
    batching: u32,
    /// Times reads were preferred while writes waited.
    starved: u32,
    knobs: Knobs,
    expire_ns: [u64; 2],
    writes_starved: u32,
    fifo_batch: u32,
    front_merges: bool,
    async_depth: u32,
    prio_aging_ns: u64,
    nr_requests: u32,
    /// The class of each request this instance dispatched that has not completed.
    on_device: IdMap<usize>,
    /// Per class, requests dispatched and not completed: with the queued ones, the
    /// kernel's `dd_queued` (inserted − completed), which blocks every lower class.
    in_flight: [u32; PRIOS],
}

fn dir_of(op: Op) -> Dir {
    if op == Op::Read {
        Dir::Read
    } else {
        Dir::Write
    }
}

fn prio_index(class: PrioClass) -> usize {
    match class.effective() {
        PrioClass::Rt => 0,
        PrioClass::Idle => 2,
        _ => 1,
    }
}

impl Policy for Deadline {
    const NAME: &'static str = "deadline";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const TUNABLES: &'static [TunableSpec<Self>] = TUNABLES;
    const MERGE_VETO: bool = true;
    // Completions count each class's requests in flight (`dd_queued`).
    const COMPLETIONS: bool = true;
    const HANDLES_ABSORBED: bool = true;

    fn new(setup: &Setup) -> Self {
        Self {
            // One queue per class and direction, and one id map: each may hold any of the
            // device's requests.
            prios: std::array::from_fn(|_| PerPrio {
                dirs: [ElevatorQueue::device_wide(), ElevatorQueue::device_wide()],
            }),
            queued: IdMap::device_wide(),
            latest_pos: [Sector::ZERO; 2],
            // As dd_init_sched: the first batch "continues" writes if any are queued.
            last_dir: Dir::Write,
            batching: 0,
            starved: 0,
            knobs: Knobs::default(),
            expire_ns: [0; 2],
            writes_starved: 0,
            fifo_batch: 1,
            front_merges: true,
            async_depth: 0,
            prio_aging_ns: 0,
            nr_requests: setup.nr_requests,
            on_device: IdMap::device_wide(),
            in_flight: [0; PRIOS],
        }
    }

    fn retuned(&mut self, _name: &str) {
        // The SDK range-checked every knob, so each fits its working type.
        let k = &self.knobs;
        let ms = |value: i64| value.unsigned_abs() * MS;
        self.expire_ns = [ms(k.read_expire), ms(k.write_expire)];
        self.writes_starved = k.writes_starved as u32;
        self.fifo_batch = k.fifo_batch as u32;
        self.front_merges = k.front_merges != 0;
        self.async_depth = k.async_depth as u32;
        self.prio_aging_ns = ms(k.prio_aging_expire);
    }

    fn insert(&mut self, _now_ns: u64, requests: &[Request]) {
        for r in requests {
            let dir = dir_of(r.op);
            let prio = prio_index(r.prio_class);
            let per = &mut self.prios[prio];
            per.dirs[dir as usize].push(r, r.arrival_ns + self.expire_ns[dir as usize]);
            self.queued.insert(
                r.id,
                Queued {
                    dir,
                    prio,
                    arrival_ns: r.arrival_ns,
                },
            );
        }
    }

    fn dispatch(&mut self, now_ns: u64, _hw_queue: u32, budget: u32, out: &mut Dispatch) {
        while out.ids.len() < budget as usize {
            let Some(id) = self
                .aged_request(now_ns)
                .or_else(|| self.next_by_class(now_ns))
            else {
                break;
            };
            if let Some(prio) = self.remove(id, true) {
                self.on_device.insert(id, prio);
                self.in_flight[prio] += 1;
            }
            out.ids.push(id);
        }
    }

    fn requeue(&mut self, now_ns: u64, requests: &[Request]) {
        // Back from a busy device: queued again, no longer in flight.
        for r in requests {
            self.landed(r.id);
        }
        self.insert(now_ns, requests);
    }

    fn completed(&mut self, _now_ns: u64, done: &[Completion]) {
        for d in done {
            self.landed(d.id);
        }
    }

    fn merge_rules(&self) -> MergeRules {
        // dd_request_merge looks for a front merge only with front_merges set; back merges
        // are always taken. Neither needs a call per merge.
        MergeRules {
            back: MergeRule::Allow,
            front: if self.front_merges {
                MergeRule::Allow
            } else {
                MergeRule::Refuse
            },
        }
    }

    fn allow_merge(&mut self, query: &MergeQuery) -> bool {
        self.front_merges || query.kind != MergeKind::Front
    }

    fn merged(&mut self, _now_ns: u64, event: &MergeEvent) {
        // Merged requests share operation and priority, so one queue holds both; the survivor
        // inherits the earlier deadline, as dd_merged_requests does.
        if let Some(gone) = event.absorbed {
            self.queued.remove(&gone);
        }
        if let Some(q) = self.queued.get(&event.target) {
            self.prios[q.prio].dirs[q.dir as usize].merged(event);
        }
    }

    fn limit_depth(&self, _op: Op, sync: bool) -> Option<u32> {
        if sync {
            return None;
        }
        Some(if self.async_depth == 0 {
            // In u64: a host may give any nr_requests.
            ((3 * u64::from(self.nr_requests) / 4) as u32).max(1)
        } else {
            self.async_depth
        })
    }
}

impl Deadline {
    /// The next request in class order (`dd_dispatch_request`): the first class that has
    /// one gives it, and a class with requests queued or in flight stops the search, so a
    /// lower class waits while a higher one has anything in flight (`dd_queued`), not only
    /// while it has something queued.
    fn next_by_class(&mut self, now_ns: u64) -> Option<RequestId> {
        for prio in 0..PRIOS {
            if let Some(id) = self.next_in_prio(prio, now_ns) {
                return Some(id);
            }
            if self.in_flight[prio] > 0 {
                return None;
            }
        }
        None
    }

    /// Request `id` left the device (completed, or sent back busy).
    fn landed(&mut self, id: RequestId) {
        if let Some(prio) = self.on_device.remove(&id) {
            self.in_flight[prio] = self.in_flight[prio].saturating_sub(1);
        }
    }

    /// True iff class `prio` has requests queued or in flight (`dd_queued` > 0).
    fn busy(&self, prio: usize) -> bool {
        !self.prios[prio].is_empty() || self.in_flight[prio] > 0
    }

    /// The next request of priority class `prio` (`__dd_dispatch_request`), or None if the
    /// class is empty. Updates batch and starvation state.
    fn next_in_prio(&mut self, prio: usize, now_ns: u64) -> Option<RequestId> {
        let per = &self.prios[prio];
        if per.is_empty() {
            return None;
        }
        // Continue the current batch in sector order while entitled to.
        if self.batching < self.fifo_batch
            && let Some(next) = per.dirs[self.last_dir as usize]
                .at_or_after(self.latest_pos[self.last_dir as usize])
        {
            self.batching += 1;
            return Some(next.id);
        }
        let dir = self.choose_direction(prio)?;
        let per = &self.prios[prio];
        let ahead = per.dirs[dir as usize]
            .at_or_after(self.latest_pos[dir as usize])
            .map(|next| next.id);
        let id = if per.dirs[dir as usize].expired(now_ns) || ahead.is_none() {
            per.dirs[dir as usize].fifo_front().map(|due| due.id)
        } else {
            ahead
        }?;
        self.last_dir = dir;
        self.batching = 1;
        Some(id)
    }

    /// Which direction a new batch serves: reads, unless writes have been starved
    /// `writes_starved` times (mq-deadline's `starved` counter).
    fn choose_direction(&mut self, prio: usize) -> Option<Dir> {
        let per = &self.prios[prio];
        let [reads, writes] = DIRS.map(|d| !per.dirs[d as usize].is_empty());
        if reads {
            if writes {
                let starved = self.starved;
                self.starved += 1;
                if starved >= self.writes_starved {
                    self.starved = 0;
                    return Some(Dir::Write);
                }
            }
            return Some(Dir::Read);
        }
        if writes {
            self.starved = 0;
            return Some(Dir::Write);
        }
        None
    }

    /// A request of a lower class that has waited past `prio_aging_expire`, oldest class
    /// last (`dd_dispatch_prio_aged_requests`).
    fn aged_request(&mut self, now_ns: u64) -> Option<RequestId> {
        // Aging only matters with two classes queued or in flight; checked first, it spares
        // the FIFO lookups when every request is in one class.
        if (0..PRIOS).filter(|&p| self.busy(p)).count() < 2 {
            return None;
        }
        for prio in 1..PRIOS {
            let per = &self.prios[prio];
            if per.is_empty() {
                continue;
            }
            let oldest = DIRS
                .iter()
                .filter_map(|&d| per.dirs[d as usize].fifo_front())
                .filter_map(|due| self.queued.get(&due.id).map(|q| (q.arrival_ns, due.id)))
                .min();
            if let Some((arrival, id)) = oldest
                && now_ns.saturating_sub(arrival) >= self.prio_aging_ns
            {
                return Some(id);
            }
        }
        None
    }

    /// Forgets request `id`; when dispatched, remembers where it ended. Returns its class.
    fn remove(&mut self, id: RequestId, dispatched: bool) -> Option<usize> {
        let q = self.queued.remove(&id)?;
        let taken = self.prios[q.prio].dirs[q.dir as usize].take(id);
        if dispatched && let Some(extent) = taken {
            self.latest_pos[q.dir as usize] = extent.end();
        }
        Some(q.prio)
    }
}

schedhost_sdk::export!(Deadline);
