//! anticipatory: the kernel's anticipatory scheduler (Linux 2.6's `block/as-iosched.c`) as
//! a schedhost policy.
//!
//! Like deadline, requests sit per direction (sync, async) in sector order and in a FIFO by
//! expiry (`read_expire`, `write_expire`), and are served in batches: reads for up to
//! `read_batch_expire`, then writes for up to `write_batch_expire`, whose length in requests
//! tunes itself to that time. Within a batch the elevator goes one way from where the last
//! request ended, except for short back seeks (up to `MAXBACK`, counted twice). What it adds
//! is anticipation: when the process whose read it just sent has nothing else waiting, it
//! may keep the disk idle for up to `antic_expire` after that read completes, betting that
//! the process will soon ask for a nearby sector, rather than seek away to someone else's
//! request. Per process it keeps decayed means of think time and seek distance; the bet is
//! off when the process thinks longer than `antic_expire`, when a request close to the head
//! arrives, or when the wait runs out (`as_can_break_anticipation`'s tests, in its order).
//!
//! Where the host differs from the 2.6 block layer:
//! - A request handed to the host has started: there is no dispatch list between the
//!   scheduler and the driver, so the kernel's "the process has requests dispatched but not
//!   yet started" test never holds here, and requeued requests go out first as the kernel's
//!   dispatch list would send them.
//! - The host does not say when a process exits, so the tests on exited processes (and
//!   `exit_no_coop`) never fire; `exit_prob` is still learnt, as the kernel learns it.
//! - The next request in elevator order is found when needed, as the best of the nearest
//!   request ahead, the nearest behind and the lowest, by `as_choose_req`'s order; the
//!   kernel caches it and updates it per insertion, which can keep a worse one.

#![forbid(unsafe_code)]

mod anticipation;
mod batch;
mod history;

use std::collections::{BTreeMap, VecDeque};

use schedhost_sdk::{
    Completion, Dispatch, ElevatorQueue, IdMap, MergeEvent, Op, Policy, Request, RequestId, Sector,
    Setup, TunableSpec,
};

use history::{History, Newcomers};

const MS: u64 = 1_000_000;

/// Farthest the elevator goes backwards for a request, in sectors.
const MAXBACK: u64 = 1024 * 1024;
/// A backward seek costs this many times a forward one of the same length.
const BACK_PENALTY: u64 = 2;
/// Sectors around the head that count as close when the anticipated process has just
/// been sent its request (`as_close_req`); it doubles per millisecond of waiting.
const CLOSE_SECTORS: u64 = 8192;
/// Longest wait, in ms, for which "close" keeps growing.
const CLOSE_GROWTH_MS: u64 = 20;

/// The tunables, with the kernel's names and defaults (at HZ = 1000).
const TUNABLES: &[TunableSpec<Anticipatory>] = &[
    TunableSpec {
        name: "read_expire",
        default: 125,
        min: 0,
        max: 60_000,
        unit: "ms",
        help: "a read is due this long after it is queued",
        field: |p| &mut p.knobs.read_expire,
    },
    TunableSpec {
        name: "write_expire",
        default: 250,
        min: 0,
        max: 60_000,
        unit: "ms",
        help: "a write is due this long after it is queued",
        field: |p| &mut p.knobs.write_expire,
    },
    TunableSpec {
        name: "read_batch_expire",
        default: 500,
        min: 0,
        max: 60_000,
        unit: "ms",
        help: "how long reads are served before writes waiting get a turn",
        field: |p| &mut p.knobs.read_batch_expire,
    },
    TunableSpec {
        name: "write_batch_expire",
        default: 125,
        min: 0,
        max: 60_000,
        unit: "ms",
        help: "how long a write batch should last (its length in requests tunes itself)",
        field: |p| &mut p.knobs.write_batch_expire,
    },
    TunableSpec {
        name: "antic_expire",
        default: 6,
        min: 0,
        max: 60_000,
        unit: "ms",
        help: "longest wait for the last reader's next request; 0 turns anticipation off",
        field: |p| &mut p.knobs.antic_expire,
    },
];

/// The kernel's data directions, indexed as `BLK_RW_ASYNC` = 0, `BLK_RW_SYNC` = 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dir {
    Async = 0,
    Sync = 1,
}

/// Reads are always sync; other operations when their submitter waits (`rq_is_sync`).
fn dir_of(op: Op, sync: bool) -> Dir {
    if op == Op::Read || sync {
        Dir::Sync
    } else {
        Dir::Async
    }
}

/// Where anticipation stands (`enum anticipation_status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Antic {
    /// Not anticipating.
    Off,
    /// Waiting for the anticipated process's last read to complete.
    WaitReq,
    /// Waiting, at most `antic_expire` from that completion, for its next request.
    WaitNext,
    /// Done waiting (a candidate came, or the wait ran out): serve the next request.
    Finished,
}

/// What the break test reads of a request: submitter, direction and extent.
#[derive(Debug, Clone, Copy)]
struct Candidate {
    ctx: u32,
    dir: Dir,
    sector: Sector,
    end: Sector,
}

impl Candidate {
    fn of(r: &Request) -> Self {
        Self {
            ctx: r.ctx,
            dir: dir_of(r.op, r.sync),
            sector: r.sector,
            end: r.end_sector(),
        }
    }
}

/// A request in the scheduler: its direction and submitter.
#[derive(Debug, Clone, Copy)]
struct Owned {
    dir: Dir,
    ctx: u32,
}

/// The tunables in their sysfs units; [`Anticipatory::retuned`] derives the working values.
#[derive(Debug, Default)]
struct Knobs {
    read_expire: i64,
    write_expire: i64,
    read_batch_expire: i64,
    write_batch_expire: i64,
    antic_expire: i64,
}

/// The anticipatory policy.
#[derive(Debug)]
pub struct Anticipatory {
    queues: [ElevatorQueue; 2],
    queued: IdMap<Owned>,
    /// Sent and not yet completed (`nr_dispatched` is its length).
    in_flight: IdMap<Owned>,
    /// Sent, bounced by a busy device, to go out again first.
    requeued: VecDeque<RequestId>,
    /// Where the last request sent of each direction ended.
    last_sector: [Sector; 2],
    /// Per submitter. Ordered, so nothing depends on hash order.
    histories: BTreeMap<u32, History>,
    newcomers: Newcomers,
    current_batch_expires_ns: u64,
    last_check_fifo_ns: [u64; 2],
    /// Waiting for the old batch to drain before the new one starts.
    changed_batch: bool,
    /// A read batch starts timing at its first completion.
    new_batch: bool,
    batch_dir: Dir,
    write_batch_count: u32,
    current_write_count: u32,
    /// The write batch ran out of work before its time.
    write_batch_idled: bool,
    antic: Antic,
    antic_start_ns: u64,
    /// The process anticipated on: the submitter of the last sync request sent.
    io_context: Option<u32>,
    /// Its last request has completed.
    ioc_finished: bool,
    /// A request has been queued: the batch clock and write batch count are set.
    started: bool,
    knobs: Knobs,
    fifo_expire_ns: [u64; 2],
    batch_expire_ns: [u64; 2],
    antic_expire_ns: u64,
}

impl Policy for Anticipatory {
    const NAME: &'static str = "anticipatory";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const TUNABLES: &'static [TunableSpec<Self>] = TUNABLES;
    const HANDLES_ABSORBED: bool = true;

    fn new(_setup: &Setup) -> Self {
        Self {
            queues: Default::default(),
            queued: IdMap::device_wide(),
            in_flight: IdMap::device_wide(),
            requeued: VecDeque::new(),
            last_sector: [Sector::ZERO; 2],
            histories: BTreeMap::new(),
            newcomers: Newcomers::default(),
            current_batch_expires_ns: 0,
            last_check_fifo_ns: [0; 2],
            changed_batch: false,
            new_batch: false,
            // as_init_queue zeroes its data: the first batch is "async".
            batch_dir: Dir::Async,
            write_batch_count: 2,
            current_write_count: 0,
            write_batch_idled: false,
            antic: Antic::Off,
            antic_start_ns: 0,
            io_context: None,
            ioc_finished: false,
            started: false,
            knobs: Knobs::default(),
            fifo_expire_ns: [0; 2],
            batch_expire_ns: [0; 2],
            antic_expire_ns: 0,
        }
    }

    fn retuned(&mut self, _name: &str) {
        // The SDK range-checked every knob: each is 0..=60 000 ms.
        let ms = |value: i64| value.unsigned_abs() * MS;
        let k = &self.knobs;
        self.fifo_expire_ns = [ms(k.write_expire), ms(k.read_expire)];
        self.batch_expire_ns = [ms(k.write_batch_expire), ms(k.read_batch_expire)];
        self.antic_expire_ns = ms(k.antic_expire);
        if !self.started {
            // As as_init_queue, from the settings the queue starts with.
            self.current_batch_expires_ns = self.batch_expire_ns[Dir::Sync as usize];
            self.write_batch_count = (k.write_batch_expire.unsigned_abs() / 10).max(2) as u32;
        }
    }

    fn insert(&mut self, now_ns: u64, requests: &[Request]) {
        self.started = true;
        for r in requests {
            self.add_request(now_ns, r);
        }
    }

    fn requeue(&mut self, now_ns: u64, requests: &[Request]) {
        for r in requests {
            if self.in_flight.contains_key(&r.id) {
                self.requeued.push_back(r.id);
            } else {
                // Not sent by this instance (a swap came between): a new request to it.
                self.insert(now_ns, std::slice::from_ref(r));
            }
        }
    }

    fn dispatch(&mut self, now_ns: u64, _hw_queue: u32, budget: u32, out: &mut Dispatch) {
        self.antic_timer(now_ns);
        while out.ids.len() < budget as usize {
            let Some(id) = self
                .requeued
                .pop_front()
                .or_else(|| self.dispatch_request(now_ns))
            else {
                break;
            };
            out.ids.push(id);
        }
        if self.antic == Antic::WaitNext {
            out.wake_at_ns = Some(self.antic_deadline().max(now_ns.saturating_add(1)));
        }
    }

    fn merged(&mut self, now_ns: u64, event: &MergeEvent) {
        if let Some(gone) = event.absorbed
            && let Some(owned) = self.queued.remove(&gone)
        {
            let target_dir = self.queued.get(&event.target).map(|t| t.dir);
            if target_dir == Some(owned.dir) {
                // The survivor inherits the earlier expiry (as_merged_requests).
                self.queues[owned.dir as usize].absorb(event.target, gone);
            } else {
                self.queues[owned.dir as usize].take(gone);
            }
            let history = self.history(owned.ctx);
            history.nr_queued = history.nr_queued.saturating_sub(1);
            if owned.dir == Dir::Sync {
                history.ended_sync(now_ns);
            }
        }
        if let Some(target) = self.queued.get(&event.target) {
            self.queues[target.dir as usize].resize(event.target, event.sector, event.sectors);
        }
    }

    fn completed(&mut self, now_ns: u64, done: &[Completion]) {
        for c in done {
            if let Some(owned) = self.in_flight.remove(&c.id) {
                self.completed_request(now_ns, owned);
            }
        }
    }
}

impl Anticipatory {
    fn history(&mut self, ctx: u32) -> &mut History {
        self.histories.entry(ctx).or_default()
    }

    /// `as_add_request`: history, both orders, and whether this ends a wait.
    fn add_request(&mut self, now_ns: u64, r: &Request) {
        let dir = dir_of(r.op, r.sync);
        let newcomers = &mut self.newcomers;
        let history = self.histories.entry(r.ctx).or_default();
        if dir == Dir::Sync {
            history.queued_sync(newcomers, now_ns, r.sector.0, r.end_sector().0);
        }
        history.nr_queued = history.nr_queued.saturating_add(1);
        let expires = now_ns.saturating_add(self.fifo_expire_ns[dir as usize]);
        self.queues[dir as usize].push(r, expires);
        self.queued.insert(r.id, Owned { dir, ctx: r.ctx });
        // as_update_rq: is this the request the wait was for?
        if matches!(self.antic, Antic::WaitReq | Antic::WaitNext)
            && self.can_break_anticipation(Some(Candidate::of(r)), now_ns)
        {
            self.antic_stop();
        }
    }
}

schedhost_sdk::export!(Anticipatory);
