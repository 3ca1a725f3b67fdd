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
            queued: IdMap::default(),
            in_flight: IdMap::default(),
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

    /// When a wait for the next request runs out.
    fn antic_deadline(&self) -> u64 {
        self.antic_start_ns.saturating_add(self.antic_expire_ns)
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

    /// `as_antic_timeout`, run when the wake the policy asked for comes.
    fn antic_timer(&mut self, now_ns: u64) {
        if self.antic != Antic::WaitNext || now_ns < self.antic_deadline() {
            return;
        }
        self.antic = Antic::Finished;
        let unknown = self
            .io_context
            .and_then(|ctx| self.histories.get(&ctx))
            .is_none_or(|h| h.ttime_samples == 0);
        if unknown {
            self.newcomers.timed_out_unknown();
        }
    }

    /// `as_antic_stop`: a wait ends; the next dispatch serves a request.
    fn antic_stop(&mut self) {
        if matches!(self.antic, Antic::WaitReq | Antic::WaitNext) {
            self.antic = Antic::Finished;
        }
    }

    /// `as_antic_waitreq`: start waiting, from the completion of the last read if it has
    /// completed, else from when it does.
    fn antic_waitreq(&mut self) {
        debug_assert_ne!(self.antic, Antic::Finished);
        if self.antic == Antic::Off {
            self.antic = if self.io_context.is_none() || self.ioc_finished {
                Antic::WaitNext
            } else {
                Antic::WaitReq
            };
        }
    }

    /// `as_can_break_anticipation`: whether `rq` (or, with none, the state alone) ends the
    /// wait for the anticipated process. The tests, in the kernel's order.
    fn can_break_anticipation(&mut self, rq: Option<Candidate>, now_ns: u64) -> bool {
        let Some(ioc) = self.io_context else {
            return true;
        };
        if rq.is_some_and(|r| r.ctx == ioc) {
            return true; // the anticipated process itself
        }
        if self.ioc_finished && now_ns.saturating_sub(self.antic_start_ns) >= self.antic_expire_ns {
            return true; // waited long enough; the timer has not run yet
        }
        let Some(history) = self.histories.get(&ioc).cloned() else {
            return false;
        };
        if history.nr_queued > 0 {
            return true; // it has more requests waiting
        }
        if let Some(r) = rq
            && r.dir == Dir::Sync
            && self.close_req(&history, &r, now_ns)
        {
            // A close request from a cooperating process: it counts in our history.
            let newcomers = &mut self.newcomers;
            if let Some(history) = self.histories.get_mut(&ioc) {
                history.queued_sync(newcomers, now_ns, r.sector.0, r.end.0);
            }
            return true;
        }
        if history.ttime_samples == 0 {
            // Nothing known of it yet: judge by processes new to the scheduler.
            self.newcomers.ttime_mean_us * 1000 > self.antic_expire_ns
        } else {
            // It thinks too long between requests to be worth the wait.
            history.ttime_mean_us * 1000 > self.antic_expire_ns
        }
    }

    /// `as_close_req`: whether `rq` lies near enough to the head to serve at once, the
    /// window doubling for each millisecond already waited.
    fn close_req(&self, history: &History, rq: &Candidate, now_ns: u64) -> bool {
        let delay_ms = if self.antic == Antic::Off || !self.ioc_finished {
            0
        } else {
            now_ns.saturating_sub(self.antic_start_ns) / MS
        };
        let delta = if delay_ms == 0 {
            CLOSE_SECTORS
        } else if delay_ms <= CLOSE_GROWTH_MS && delay_ms <= self.antic_expire_ns / MS {
            CLOSE_SECTORS << delay_ms
        } else {
            return true;
        };
        let last = self.last_sector[self.batch_dir as usize].0;
        let next = rq.sector.0;
        if last <= next.saturating_add(delta >> 1) && next <= last.saturating_add(delta) {
            return true;
        }
        let seek = last.abs_diff(next);
        let expected = if history.seek_samples == 0 {
            self.newcomers.seek_mean
        } else {
            history.seek_mean
        };
        expected > seek
    }

    /// `as_can_anticipate`: whether to wait rather than send `rq`.
    fn can_anticipate(&mut self, rq: Option<RequestId>, now_ns: u64) -> bool {
        if self.io_context.is_none() || self.antic == Antic::Finished {
            return false;
        }
        let candidate = rq.and_then(|id| self.candidate(id));
        !self.can_break_anticipation(candidate, now_ns)
    }

    /// A queued request as the break test reads it.
    fn candidate(&self, id: RequestId) -> Option<Candidate> {
        let owned = self.queued.get(&id)?;
        let extent = self.queues[owned.dir as usize].extent(id)?;
        Some(Candidate {
            ctx: owned.ctx,
            dir: owned.dir,
            sector: extent.sector,
            end: extent.end(),
        })
    }

    /// The next request of `dir` in elevator order from where the last one ended.
    fn next_rq(&self, dir: Dir) -> Option<RequestId> {
        let queue = &self.queues[dir as usize];
        let last = self.last_sector[dir as usize];
        [queue.at_or_after(last), queue.before(last), queue.lowest()]
            .into_iter()
            .flatten()
            .reduce(|a, b| {
                if prefers(last, a.sector, b.sector) {
                    a
                } else {
                    b
                }
            })
            .map(|p| p.id)
    }

    /// `as_fifo_expired`: whether the oldest request of `dir` is overdue, looked at no more
    /// than once per expiry interval (many overdue requests would otherwise make a seek
    /// storm).
    fn fifo_expired(&mut self, dir: Dir, now_ns: u64) -> bool {
        let d = dir as usize;
        if now_ns.abs_diff(self.last_check_fifo_ns[d]) < self.fifo_expire_ns[d] {
            return false;
        }
        self.last_check_fifo_ns[d] = now_ns;
        self.queues[d]
            .fifo_front()
            .is_some_and(|due| now_ns > due.expires_ns)
    }

    /// `as_batch_expired`.
    fn batch_expired(&self, now_ns: u64) -> bool {
        if self.changed_batch || self.new_batch {
            return false;
        }
        let late = now_ns > self.current_batch_expires_ns;
        match self.batch_dir {
            Dir::Sync => late,
            Dir::Async => late || self.current_write_count == 0,
        }
    }

    fn fifo_front(&self, dir: Dir) -> Option<RequestId> {
        self.queues[dir as usize].fifo_front().map(|due| due.id)
    }

    /// `as_dispatch_request`: the next request to send, or none (nothing queued, waiting for
    /// the anticipated process, or waiting for the old batch to drain).
    fn dispatch_request(&mut self, now_ns: u64) -> Option<RequestId> {
        let reads = !self.queues[Dir::Sync as usize].is_empty();
        let writes = !self.queues[Dir::Async as usize].is_empty();
        // The write batch ran dry: it cannot be timed.
        if self.batch_dir == Dir::Async && !reads && (self.current_write_count == 0 || !writes) {
            self.write_batch_idled = true;
        }
        if !(reads || writes)
            || matches!(self.antic, Antic::WaitReq | Antic::WaitNext)
            || self.changed_batch
        {
            return None;
        }
        let (rq, fifo_checked) = self.choose(now_ns, reads, writes)?;
        let rq = if !fifo_checked && self.fifo_expired(self.batch_dir, now_ns) {
            self.fifo_front(self.batch_dir)?
        } else {
            rq
        };
        if self.changed_batch {
            if !self.in_flight.is_empty() {
                return None; // the new batch starts when the old one has drained
            }
            match self.batch_dir {
                Dir::Async => {
                    self.current_batch_expires_ns =
                        now_ns.saturating_add(self.batch_expire_ns[Dir::Async as usize]);
                }
                Dir::Sync => self.new_batch = true,
            }
            self.changed_batch = false;
        }
        self.move_to_dispatch(rq);
        Some(rq)
    }

    /// The request a batch continues with, or the first of a new batch; with whether the
    /// FIFO was already consulted for it. `None` when anticipating instead.
    fn choose(&mut self, now_ns: u64, reads: bool, writes: bool) -> Option<(RequestId, bool)> {
        if !(reads && writes && self.batch_expired(now_ns)) {
            // The batch runs on (or only one direction has work).
            let rq = self.next_rq(self.batch_dir);
            if self.batch_dir == Dir::Sync && self.antic_expire_ns > 0 {
                if self.fifo_expired(Dir::Sync, now_ns) {
                    return self.fifo_front(Dir::Sync).map(|id| (id, true));
                }
                if self.can_anticipate(rq, now_ns) {
                    self.antic_waitreq();
                    return None;
                }
            }
            if let Some(rq) = rq {
                if reads && !writes {
                    self.current_batch_expires_ns =
                        now_ns.saturating_add(self.batch_expire_ns[Dir::Sync as usize]);
                }
                return Some((rq, false));
            }
        }
        // A new batch: reads after writes, writes after reads.
        if reads && !(writes && self.batch_dir == Dir::Sync) {
            if self.batch_dir == Dir::Async {
                self.changed_batch = true;
            }
            self.batch_dir = Dir::Sync;
            self.last_check_fifo_ns[Dir::Sync as usize] = now_ns;
            return self.fifo_front(Dir::Sync).map(|id| (id, false));
        }
        if self.batch_dir == Dir::Sync {
            self.changed_batch = true;
            // The queue may have run out of reads before the first read completed.
            self.new_batch = false;
        }
        self.batch_dir = Dir::Async;
        self.current_write_count = self.write_batch_count;
        self.write_batch_idled = false;
        self.last_check_fifo_ns[Dir::Async as usize] = now_ns;
        self.fifo_front(Dir::Async).map(|id| (id, false))
    }

    /// `as_move_to_dispatch`: `id` leaves the scheduler for the device.
    fn move_to_dispatch(&mut self, id: RequestId) {
        let Some(owned) = self.queued.remove(&id) else {
            return;
        };
        self.antic = Antic::Off;
        if let Some(extent) = self.queues[owned.dir as usize].take(id) {
            self.last_sector[owned.dir as usize] = extent.end();
        }
        match owned.dir {
            // In case the scheduler anticipates after this one.
            Dir::Sync => self.io_context = Some(owned.ctx),
            Dir::Async => {
                self.io_context = None;
                self.current_write_count = self.current_write_count.saturating_sub(1);
            }
        }
        self.ioc_finished = false;
        let history = self.history(owned.ctx);
        history.nr_queued = history.nr_queued.saturating_sub(1);
        self.in_flight.insert(id, owned);
    }

    /// `as_completed_request`.
    fn completed_request(&mut self, now_ns: u64, owned: Owned) {
        // `in_flight` no longer holds this one: the kernel's count of 1 before its decrement.
        if self.changed_batch && self.in_flight.is_empty() {
            self.current_batch_expires_ns =
                now_ns.saturating_add(self.batch_expire_ns[self.batch_dir as usize]);
            self.changed_batch = false;
            if self.batch_dir == Dir::Sync {
                self.new_batch = true;
            }
        }
        // A batch is timed from when its first request is served, which helps devices that
        // take many requests into a cache or a queue.
        if self.new_batch && self.batch_dir == owned.dir {
            self.update_write_batch(now_ns);
            self.current_batch_expires_ns =
                now_ns.saturating_add(self.batch_expire_ns[Dir::Sync as usize]);
            self.new_batch = false;
        }
        if self.io_context == Some(owned.ctx) {
            self.antic_start_ns = now_ns;
            self.ioc_finished = true;
            if self.antic == Antic::WaitReq {
                self.antic = Antic::WaitNext; // it came back: now wait for the next one
            }
        }
        if owned.dir == Dir::Sync {
            self.history(owned.ctx).ended_sync(now_ns);
        }
    }

    /// `update_write_batch`: lengthens the write batch when it ended early, shortens it
    /// when it overran, judged at the first completion of the read batch after it.
    fn update_write_batch(&mut self, now_ns: u64) {
        let batch = self.batch_expire_ns[Dir::Async as usize];
        let write_time =
            (now_ns.saturating_add(batch)).saturating_sub(self.current_batch_expires_ns);
        let count = &mut self.write_batch_count;
        if write_time > batch && !self.write_batch_idled {
            *count = if write_time > batch.saturating_mul(3) {
                *count / 2
            } else {
                count.saturating_sub(1)
            };
        } else if write_time < batch && self.current_write_count == 0 {
            *count = if batch > write_time.saturating_mul(3) {
                count.saturating_mul(2)
            } else {
                count.saturating_add(1)
            };
        }
        *count = (*count).max(1);
    }
}

/// `as_choose_req`: whether a request at `s1` goes before one at `s2`, the head at `last`.
/// A one-way elevator, except that a seek back of up to `MAXBACK` counts twice its length;
/// requests farther behind come after every other, lowest first.
fn prefers(last: Sector, s1: Sector, s2: Sector) -> bool {
    let cost = |s: Sector| -> Option<u64> {
        if s >= last {
            Some(s.0 - last.0)
        } else if s.0.saturating_add(MAXBACK) >= last.0 {
            Some((last.0 - s.0) * BACK_PENALTY)
        } else {
            None // behind the head, too far to go back for
        }
    };
    match (cost(s1), cost(s2)) {
        (Some(_), None) => true,
        (None, Some(_)) => false,
        (None, None) => s1 <= s2,
        (Some(d1), Some(d2)) => d1 < d2 || (d1 == d2 && s1 >= s2),
    }
}

schedhost_sdk::export!(Anticipatory);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_elevator_prefers_a_back_seek_only_at_half_the_distance() {
        let last = Sector(10_000);
        // 100 back costs 200: it beats 201 ahead, loses to 199 ahead.
        assert!(prefers(last, Sector(9_900), Sector(10_201)));
        assert!(!prefers(last, Sector(9_900), Sector(10_199)));
        // Beyond MAXBACK behind: after anything ahead, however far.
        let far = Sector(5_000_000);
        assert!(prefers(
            far,
            Sector(9_000_000),
            Sector(5_000_000 - MAXBACK - 1)
        ));
        // Two far behind: the lower first.
        assert!(prefers(far, Sector(1), Sector(2)));
        // Equal cost: the one ahead (the higher sector).
        assert!(prefers(last, Sector(10_200), Sector(9_900)));
    }
}
