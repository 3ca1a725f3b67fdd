//! The sans-IO core: software queues, scheduler and driver tags, the merge engine, the policy
//! calls, timers and completion labelling — fed with events and a `now`, answering with
//! actions. No threads, no syscalls, no clock: the simulator and the io_uring driver both
//! drive this same state machine.
//!
//! A bio's path: [`Core::submit`] tries to merge it into a request (one-hit cache, or by end
//! and start sector); otherwise it becomes a request in its submitter's software queue, which
//! takes a scheduler tag when one is free (nr_requests per hardware queue, less for kinds the
//! policy limits). [`Core::run`] hands the new requests to the policy in one batch, then asks
//! it for as many requests as each hardware queue has free driver tags; those leave as
//! [`Action::Dispatch`]. [`Core::complete`] finishes a request: every bio in it leaves as
//! [`Action::Complete`] and the policy hears of it at the next `run`.

pub mod event;
mod merge;
mod recovery;
mod request;
mod routing;

use std::collections::VecDeque;

use schedhost_sdk::{
    Completion, Dispatch, MergeEvent, MergeKind, MergeQuery, Op, Request as PolicyRequest,
    RequestId, Sector, Setup,
};

use crate::policy::{Fallback, Fault, FaultKind, PolicyBackend, Turn};
use event::{Event, Kind, op_code};
pub use merge::{Limits, MergeIndex, Nomerges, can_coalesce, can_merge};
pub use recovery::{DEFAULT_WATCHDOG_NS, Ejection, OnFault, Recovery, Supervision, Swapped};
pub use request::{Bio, BioRef, Bios, Request, RequestTable, State};
pub use routing::{CompletionSite, RqAffinity, site};

/// The legacy block layer's nr_requests (BLKDEV_MAX_RQ), which cfq and the seed experiments
/// ran with. blk-mq's 2 × depth would leave a depth-1 disk two scheduler tags, so a policy
/// idling for one submitter would find that submitter's next request stuck behind
/// another's tag.
pub const LEGACY_NR_REQUESTS: u32 = 128;

/// The largest sector address anything may name, an I/O's end included: 2^54 sectors
/// (8 EiB), past any device, and small enough that byte offsets (× 512), ends and the
/// merge index's packed keys cannot overflow. Job files, spec files, traces and NBD
/// requests are checked against it where they are read.
pub const MAX_SECTOR: u64 = 1 << 54;

/// Most submitters (software queues, ctxs) a run may have: each has its own queue,
/// statistics and, on a real device, buffers, so a job file or a trace cannot ask for
/// millions.
pub const MAX_SUBMITTERS: usize = 65_536;

/// The longest time a job or a trace may name: 366 days. Starts, ramps, runtimes, think
/// times and trace timestamps are added together; each below 2^55 ns, their sums cannot
/// reach u64::MAX.
pub const MAX_DURATION_NS: u64 = 366 * 24 * 3600 * 1_000_000_000;

/// Queue limits and attributes, as the kernel's queue sysfs directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// Hardware dispatch queues.
    pub hw_queues: u32,
    /// Driver tags per hardware queue: requests on the device at once.
    pub queue_depth: u32,
    /// Scheduler tags per hardware queue: requests in the scheduler plus on the device.
    pub nr_requests: u32,
    /// Largest request, in sectors (max_sectors_kb × 2).
    pub max_sectors: u32,
    /// Most bios in one request (the queue's max_segments).
    pub max_segments: u32,
    /// Which merges are tried.
    pub nomerges: Nomerges,
    /// Where completion work runs.
    pub rq_affinity: RqAffinity,
}

/// A policy's tunables by name, with their values (None: the policy did not say).
pub type TunableValues = Vec<(String, Option<i64>)>;

/// The status a device answers when it is busy (`-EBUSY`, blk-mq's `BLK_STS_RESOURCE`):
/// the request is sent back to the policy rather than completed.
pub const BUSY: i32 = -16;

/// Times one request may be sent back by a busy device; the next busy answer completes it
/// with that error, so a device that is always busy cannot hold a bio forever.
pub const MAX_REQUEUES: u8 = 8;

/// The default segment limit: UIO_MAXIOV, the most iovecs one vectored read or write may
/// carry, so a merged request of small bios always fits one I/O on a real device.
pub const MAX_SEGMENTS: u32 = 1024;

impl Config {
    /// What merges must stay within.
    pub fn limits(&self) -> merge::Limits {
        merge::Limits {
            max_sectors: self.max_sectors,
            max_segments: self.max_segments.max(1),
        }
    }

    /// Defaults for a device of this depth: nr_requests = max(2 × min(depth, 128), 128).
    pub fn for_device(hw_queues: u32, queue_depth: u32, max_sectors: u32) -> Self {
        Self {
            hw_queues: hw_queues.max(1),
            queue_depth: queue_depth.max(1),
            nr_requests: (2 * queue_depth.clamp(1, 128)).max(LEGACY_NR_REQUESTS),
            max_sectors: max_sectors.max(1),
            max_segments: MAX_SEGMENTS,
            nomerges: Nomerges::All,
            rq_affinity: RqAffinity::Group,
        }
    }
}

/// What the driver must do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Send this request to the device on `hw_queue`; report it back with [`Core::complete`].
    /// It carries its bios in sector order, so a driver lays out the I/O without asking the
    /// core about the request again.
    Dispatch {
        /// Hardware queue (ring) to use.
        hw_queue: u32,
        /// Request id.
        id: u64,
        /// Operation.
        op: Op,
        /// First sector.
        sector: u64,
        /// Length in sectors.
        sectors: u32,
        /// Its bios with their submitters, in sector order.
        bios: Bios,
    },
    /// A bio finished.
    Complete(BioDone),
}

/// A finished bio, for its submitter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BioDone {
    /// The submitter's bio id.
    pub bio: u64,
    /// The submitter.
    pub ctx: u32,
    /// Operation.
    pub op: Op,
    /// Length in sectors.
    pub sectors: u32,
    /// 0 or a negative errno.
    pub status: i32,
    /// From submission to completion.
    pub latency_ns: u64,
    /// From submission to dispatch: the time the bio spent in the scheduler.
    pub sched_ns: u64,
    /// Where its completion work should run.
    pub site: CompletionSite,
}

/// Counters the reports show.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct CoreStats {
    /// Bios submitted.
    pub bios: u64,
    /// Requests created (bios that did not merge).
    pub requests: u64,
    /// Bios merged at the back of a request.
    pub back_merges: u64,
    /// Bios merged at the front of a request.
    pub front_merges: u64,
    /// Requests absorbed into a neighbour.
    pub coalesced: u64,
    /// Requests sent to the device.
    pub dispatched: u64,
    /// Requests completed.
    pub completed: u64,
    /// Merges the policy refused.
    pub merges_vetoed: u64,
    /// Calls into the policy.
    pub policy_calls: u64,
    /// Requests a busy device sent back to the policy.
    #[serde(skip_serializing_if = "is_zero")]
    pub requeued: u64,
}

impl CoreStats {
    /// Adds another core's counters (several devices in one run).
    pub fn add(&mut self, other: &CoreStats) {
        self.bios += other.bios;
        self.requests += other.requests;
        self.back_merges += other.back_merges;
        self.front_merges += other.front_merges;
        self.coalesced += other.coalesced;
        self.dispatched += other.dispatched;
        self.completed += other.completed;
        self.merges_vetoed += other.merges_vetoed;
        self.policy_calls += other.policy_calls;
        self.requeued += other.requeued;
    }
}

/// Counters that are zero in most runs stay out of the reports then (as before they existed).
fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Why the core could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The policy failed.
    #[error(transparent)]
    Fault(#[from] Fault),
    /// The policy refused the settings.
    #[error("{0}")]
    Rejected(String),
}

/// A driver reported something the core never asked for: a driver bug, not a policy fault.
#[derive(Debug, thiserror::Error)]
#[error("driver completed request {id:#x}, which is not on the device")]
pub struct UnknownCompletion {
    /// The id it reported.
    pub id: u64,
}

/// Per hardware queue state: tags in use, software-queue waiters, the policy's timer.
#[derive(Debug, Default)]
struct HwQueue {
    /// Driver tags in use.
    inflight: u32,
    /// Scheduler tags in use, by `[op][sync]`.
    held: [[u32; 2]; 4],
    /// Scheduler tags in use in all.
    held_total: u32,
    /// Submitters with requests waiting for a scheduler tag, served round robin.
    waiting: VecDeque<u32>,
    /// When the policy asked to be called again.
    timer: Option<u64>,
}

/// The scheduler core for one device.
pub struct Core {
    config: Config,
    policy: Box<dyn PolicyBackend>,
    merge_veto: bool,
    /// Whether the policy wants `completed` calls.
    completions: bool,
    /// Scheduler tags a request of kind `[op][sync]` may hold per hardware queue.
    depth_limit: [[u32; 2]; 4],
    table: RequestTable,
    index: MergeIndex,
    queues: Vec<HwQueue>,
    /// Software queues by ctx: each submitter's requests waiting for a scheduler tag.
    software: Vec<VecDeque<u64>>,
    /// Requests with a scheduler tag, not yet shown to the policy.
    pending_insert: Vec<u64>,
    /// Requests a busy device sent back, not yet given back to the policy.
    pending_requeue: Vec<u64>,
    pending_merges: Vec<MergeEvent>,
    pending_completions: Vec<Completion>,
    /// Requests the policy holds.
    queued: usize,
    actions: VecDeque<Action>,
    stats: CoreStats,
    scratch: Vec<PolicyRequest>,
    /// Which policy instance requests were shown to: bumped by every replacement, so a new
    /// policy never hears of requests it did not see.
    epoch: u32,
    /// A policy call failed during the current operation; the policy is not called again
    /// until recovery replaced it.
    fault: Option<Fault>,
    supervision: Supervision,
    ejections: Vec<Ejection>,
    /// Restarts used of [`OnFault::Restart`]'s allowance.
    restarts: u32,
    /// The tunables the policy started with, for restarts.
    settings: Vec<(String, i64)>,
    /// The last time the policy dispatched something or held nothing (for the watchdog).
    last_progress_ns: u64,
    /// Wake-ups of the policy's own timer in a row after which it dispatched nothing while
    /// it held requests and tags were free: progress is bounded in calls, not only in time.
    idle_wakes: u32,
    /// Per-request events, recorded only when asked for (`--trace-events`).
    events: Option<Vec<Event>>,
    /// The built-in FIFO the core falls back to, made by whoever built the core.
    fallback: Fallback,
    /// What the policy said of itself when it started: reports and status read it here,
    /// so nothing outside the core calls the policy.
    info: schedhost_sdk::Info,
}

impl std::fmt::Debug for Core {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Core")
            .field("config", &self.config)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl Core {
    /// Initialises `policy` for a device with `config` and tunable `settings`; after a
    /// fault the core falls back to what `fallback` makes ([`crate::policy::for_core`]).
    ///
    /// # Errors
    /// The policy's fault, or its refusal of a setting.
    pub fn new(
        config: Config,
        mut policy: Box<dyn PolicyBackend>,
        settings: &[(String, i64)],
        fallback: Fallback,
    ) -> Result<Self, StartError> {
        let info = policy.info()?;
        let setup = Setup {
            hw_queues: config.hw_queues,
            queue_depth: config.queue_depth,
            nr_requests: config.nr_requests,
        };
        policy
            .init(&setup, settings)?
            .map_err(StartError::Rejected)?;
        let mut core = Self {
            config,
            policy,
            merge_veto: info.merge_veto,
            completions: info.completions,
            depth_limit: [[u32::MAX; 2]; 4],
            table: RequestTable::default(),
            index: MergeIndex::default(),
            queues: (0..config.hw_queues).map(|_| HwQueue::default()).collect(),
            software: Vec::new(),
            pending_insert: Vec::new(),
            pending_requeue: Vec::new(),
            pending_merges: Vec::new(),
            pending_completions: Vec::new(),
            queued: 0,
            actions: VecDeque::new(),
            stats: CoreStats::default(),
            scratch: Vec::new(),
            epoch: 0,
            fault: None,
            supervision: Supervision::default(),
            ejections: Vec::new(),
            restarts: 0,
            settings: settings.to_vec(),
            last_progress_ns: 0,
            idle_wakes: 0,
            events: None,
            fallback,
            info,
        };
        core.depth_limit = depth_limits(core.policy.as_mut(), &mut core.stats)?;
        Ok(core)
    }

    /// The queue configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Counters so far.
    pub fn stats(&self) -> CoreStats {
        self.stats
    }

    /// The running policy's name, version and wishes, as it gave them when it started.
    pub fn policy_info(&self) -> &schedhost_sdk::Info {
        &self.info
    }

    /// Every tunable of the policy with its current value, under the same supervision as
    /// every other call: the first fault ejects the policy (or, under
    /// [`OnFault::Abort`], stops the run) and no further call is made.
    ///
    /// # Errors
    /// A fault that stops the run; after an ejection the answer is `Ok(Err(why))`.
    pub fn tunable_values(&mut self, now_ns: u64) -> Result<Result<TunableValues, String>, Fault> {
        match self.read_tunables() {
            Ok(values) => Ok(Ok(values)),
            Err(fault) => self.eject_for(now_ns, fault).map(Err),
        }
    }

    /// The policy's saved state (what a newer build of it would be handed), supervised as
    /// [`Self::tunable_values`].
    ///
    /// # Errors
    /// A fault that stops the run; after an ejection the answer is `Ok(Err(why))`.
    pub fn saved_state(&mut self, now_ns: u64) -> Result<Result<Vec<u8>, String>, Fault> {
        self.stats.policy_calls += 1;
        match self.policy.save_state() {
            Ok(state) => Ok(Ok(state)),
            Err(fault) => self.eject_for(now_ns, fault).map(Err),
        }
    }

    /// A call made outside a policy round failed: the policy is ejected (or, under
    /// [`OnFault::Abort`], the run stops), as after any fault. Returns what to tell the asker.
    ///
    /// # Errors
    /// The fault, when faults stop the run.
    fn eject_for(&mut self, now_ns: u64, fault: Fault) -> Result<String, Fault> {
        let why = format!(
            "the policy failed in {} and was ejected: {fault}",
            fault.call
        );
        self.latch(fault);
        self.settle(now_ns)?;
        Ok(why)
    }

    fn read_tunables(&mut self) -> Result<TunableValues, Fault> {
        self.stats.policy_calls += 1;
        let specs = self.policy.tunables()?;
        let mut values = Vec::with_capacity(specs.len());
        for spec in specs {
            self.stats.policy_calls += 1;
            let value = self.policy.get(&spec.name)?;
            values.push((spec.name, value));
        }
        Ok(values)
    }

    /// Changes a tunable at `now_ns`; depth limits are asked again afterwards. A fault in the
    /// call is handled as any other (an ejection at `now_ns`, or the error under
    /// [`OnFault::Abort`]).
    ///
    /// # Errors
    /// A fault that stops the run; the policy's refusal comes back as `Ok(Err(message))`.
    pub fn set_tunable(
        &mut self,
        now_ns: u64,
        name: &str,
        value: i64,
    ) -> Result<Result<(), String>, Fault> {
        self.stats.policy_calls += 1;
        let answer = match self.policy.set(name, value) {
            Ok(answer) => answer,
            Err(fault) => return self.eject_for(now_ns, fault).map(Err),
        };
        if answer.is_ok() && self.alive() {
            self.refresh_depth_limits();
            // A restarted instance starts with the tunables as they are now.
            self.settings.retain(|(n, _)| n != name);
            self.settings.push((name.to_owned(), value));
        }
        self.settle(now_ns)?;
        Ok(answer)
    }

    /// Requests anywhere in the host: software queues, scheduler, device.
    pub fn requests_in_flight(&self) -> usize {
        self.table.len()
    }

    /// Requests the policy holds.
    pub fn queued_in_policy(&self) -> usize {
        self.queued
    }

    /// The earliest time the core must run again, if the policy asked for a wake-up: that
    /// wake-up, or the watchdog's deadline if it comes first. A driver that waits no longer
    /// than this lets the watchdog fire within its period whatever the policy answers (a
    /// wake-up an hour away included). `None` means the policy asked for none: a driver
    /// with nothing in flight then has a stall on its hands ([`Core::starve`]).
    pub fn poll_timeout(&self) -> Option<u64> {
        let timer = self.queues.iter().filter_map(|q| q.timer).min()?;
        Some(timer.min(self.watchdog_deadline().unwrap_or(u64::MAX)))
    }

    /// The next action for the driver.
    pub fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    /// Starts or stops recording per-request events.
    pub fn record_events(&mut self, on: bool) {
        self.events = on.then(Vec::new);
    }

    /// Moves the events recorded so far to the end of `into`.
    pub fn take_events(&mut self, into: &mut Vec<Event>) {
        if let Some(events) = &mut self.events {
            into.append(events);
        }
    }

    /// Records an event if recording is on; one branch otherwise.
    #[expect(
        clippy::too_many_arguments,
        reason = "an event's fields, named at each call"
    )]
    fn note(
        &mut self,
        at_ns: u64,
        kind: Kind,
        ctx: u32,
        op: Op,
        sync: bool,
        (sector, sectors): (u64, u32),
        id: u64,
    ) {
        if let Some(events) = &mut self.events {
            events.push(Event {
                at_ns,
                kind,
                ctx,
                op: op_code(op),
                sync,
                sector,
                sectors,
                id,
            });
        }
    }

    /// A bio arrives from a submitter. It merges into a request or becomes one.
    ///
    /// # Errors
    /// A fault in the policy's merge veto.
    pub fn submit(&mut self, now_ns: u64, bio: Bio) -> Result<(), Fault> {
        self.place_bio(now_ns, bio);
        let settled = self.settle(now_ns).map(|_| ());
        self.check_invariants();
        settled
    }

    /// Merges `bio` or makes it a request. Never fails: a policy fault is latched, and the
    /// bio is placed all the same.
    fn place_bio(&mut self, now_ns: u64, bio: Bio) {
        self.stats.bios += 1;
        self.note(
            now_ns,
            Kind::Queue,
            bio.ctx,
            bio.op,
            bio.sync,
            (bio.sector, bio.sectors),
            bio.id,
        );
        if self.try_merge(now_ns, &bio) {
            return;
        }
        self.stats.requests += 1;
        let home = bio.ctx % self.config.hw_queues;
        let request = Request {
            ctx: bio.ctx,
            op: bio.op,
            sector: bio.sector,
            sectors: bio.sectors,
            sync: bio.sync,
            prio_class: bio.prio_class,
            prio_level: bio.prio_level,
            arrival_ns: now_ns,
            home_queue: home,
            state: State::Staged,
            epoch: self.epoch,
            bios: smallvec::smallvec![(
                bio.ctx,
                BioRef {
                    id: bio.id,
                    submit_ns: now_ns,
                    sectors: bio.sectors,
                },
            )],
            requeues: 0,
        };
        let admitted = self.tag_free(home, bio.op, bio.sync);
        let id = self.table.insert(request);
        if let Some(request) = self.table.get(id) {
            self.index.add(id, request);
        }
        if admitted {
            self.admit(id);
        } else {
            self.stage(bio.ctx, home, id);
        }
    }

    /// The device finished request `id` with `status` (0 or a negative errno).
    ///
    /// # Errors
    /// If `id` is not on the device.
    pub fn complete(&mut self, now_ns: u64, id: u64, status: i32) -> Result<(), UnknownCompletion> {
        let done = self.finish_request(now_ns, id, status);
        self.check_invariants();
        done
    }

    fn finish_request(
        &mut self,
        now_ns: u64,
        id: u64,
        status: i32,
    ) -> Result<(), UnknownCompletion> {
        let Some(State::Dispatched { hw_queue, at_ns }) = self.table.get(id).map(|r| r.state)
        else {
            return Err(UnknownCompletion { id });
        };
        let queue = &mut self.queues[hw_queue as usize];
        debug_assert!(
            queue.inflight > 0,
            "a completion on a queue with nothing in flight"
        );
        queue.inflight = queue.inflight.saturating_sub(1);
        if status == BUSY && self.send_back(id) {
            return Ok(());
        }
        let Some(request) = self.table.remove(id) else {
            return Err(UnknownCompletion { id });
        };
        self.stats.completed += 1;
        self.note(
            now_ns,
            Kind::Complete(status),
            request.ctx,
            request.op,
            request.sync,
            (request.sector, request.sectors),
            id,
        );
        for &(ctx, bio) in &request.bios {
            self.actions.push_back(Action::Complete(BioDone {
                bio: bio.id,
                ctx,
                op: request.op,
                sectors: bio.sectors,
                status,
                latency_ns: now_ns.saturating_sub(bio.submit_ns),
                sched_ns: at_ns.saturating_sub(bio.submit_ns),
                site: site(self.config.rq_affinity, hw_queue, request.home_queue, ctx),
            }));
        }
        if self.completions && request.epoch == self.epoch {
            self.pending_completions.push(Completion {
                id: RequestId(id),
                ctx: request.ctx,
                op: request.op,
                sectors: request.sectors,
                latency_ns: now_ns.saturating_sub(request.arrival_ns),
                service_ns: now_ns.saturating_sub(at_ns),
                status,
            });
        }
        self.release_tag(request.home_queue, request.op, request.sync);
        Ok(())
    }

    /// A busy device sent request `id` back: it keeps its scheduler tag and goes back to the
    /// policy with the next requeue batch, as blk-mq requeues `BLK_STS_RESOURCE`. False when
    /// it was sent back [`MAX_REQUEUES`] times already: then it completes with the error.
    fn send_back(&mut self, id: u64) -> bool {
        let Some(request) = self.table.get_mut(id) else {
            return false;
        };
        if request.requeues >= MAX_REQUEUES {
            return false;
        }
        request.requeues += 1;
        request.state = State::Requeued;
        self.pending_requeue.push(id);
        self.stats.requeued += 1;
        true
    }

    /// Hands the requests sent back since the last run to the policy, which holds them
    /// again. Never fails: a fault is latched.
    fn give_back(&mut self, now_ns: u64) {
        if self.pending_requeue.is_empty() || !self.alive() {
            return;
        }
        let mut views = Vec::with_capacity(self.pending_requeue.len());
        for id in std::mem::take(&mut self.pending_requeue) {
            if let Some(request) = self.table.get_mut(id) {
                request.state = State::Queued;
                request.epoch = self.epoch;
                views.push(policy_view(id, request));
            }
        }
        self.queued += views.len();
        self.stats.policy_calls += 1;
        let answer = self.policy.requeue(now_ns, &views);
        self.guard(answer, ());
    }

    /// Tells the policy what happened since the last run, in batches, and dispatches to every
    /// hardware queue with free driver tags.
    ///
    /// # Errors
    /// A fault in any policy call, including an invalid dispatch answer.
    pub fn run(&mut self, now_ns: u64) -> Result<(), Fault> {
        let ran = self.run_to_settled(now_ns);
        self.check_invariants();
        ran
    }

    fn run_to_settled(&mut self, now_ns: u64) -> Result<(), Fault> {
        self.run_policy(now_ns);
        // After a recovery the new policy holds the requests: let it dispatch at once.
        while self.settle(now_ns)? {
            self.run_policy(now_ns);
        }
        Ok(())
    }

    /// The core's counting laws, checked after every public call that moves requests, in
    /// debug and test builds: each request is in exactly one place (a software queue, the
    /// insert batch, the policy, the device), so those counts add up to the table; no
    /// hardware queue has more on the device than its driver tags, and the scheduler tags in
    /// use are what their per-kind counts say, within `nr_requests`.
    pub(super) fn check_invariants(&self) {
        if !cfg!(debug_assertions) {
            return;
        }
        let staged: usize = self.software.iter().map(VecDeque::len).sum();
        let on_device: usize = self.queues.iter().map(|q| q.inflight as usize).sum();
        assert_eq!(
            staged
                + self.pending_insert.len()
                + self.pending_requeue.len()
                + self.queued
                + on_device,
            self.table.len(),
            "every request is in exactly one place (staged {staged}, to insert {}, sent back {}, in the policy {}, on the device {on_device})",
            self.pending_insert.len(),
            self.pending_requeue.len(),
            self.queued
        );
        for (q, queue) in self.queues.iter().enumerate() {
            assert!(
                queue.inflight <= self.config.queue_depth,
                "queue {q}: {} on the device past {} driver tags",
                queue.inflight,
                self.config.queue_depth
            );
            let by_kind: u32 = queue.held.iter().flatten().sum();
            assert_eq!(
                by_kind, queue.held_total,
                "queue {q}: scheduler tags by kind"
            );
            assert!(
                queue.held_total <= self.config.nr_requests,
                "queue {q}: {} scheduler tags held past nr_requests {}",
                queue.held_total,
                self.config.nr_requests
            );
        }
    }

    /// One round of policy calls. Never fails: a fault is latched for [`Core::settle`].
    fn run_policy(&mut self, now_ns: u64) {
        let mut woken = false;
        for queue in &mut self.queues {
            if queue.timer.is_some_and(|t| t <= now_ns) {
                queue.timer = None;
                woken = true;
            }
        }
        let dispatched = self.stats.dispatched;
        self.give_back(now_ns);
        let served = self.take_turn(now_ns);
        for hw_queue in 0..self.config.hw_queues {
            let budget = self.budget(hw_queue);
            if served != Some(hw_queue) && budget > 0 && self.queued > 0 && self.alive() {
                self.stats.policy_calls += 1;
                let answer = self.policy.dispatch(now_ns, hw_queue, budget);
                if let Some(answer) = self.guard(answer.map(Some), None) {
                    self.send(now_ns, hw_queue, budget, answer, "dispatch");
                }
            }
        }
        if woken {
            self.count_idle_wake(self.stats.dispatched > dispatched);
        }
        self.watch(now_ns);
    }

    /// After a wake-up the policy asked for: a policy that keeps asking to be woken and
    /// then dispatches nothing, while it holds requests and the device has free tags, is
    /// at fault after [`MAX_IDLE_WAKES`] in a row, however close together it asks (one
    /// nanosecond apart would otherwise step virtual time a nanosecond at a time).
    fn count_idle_wake(&mut self, dispatched: bool) {
        let free = (0..self.config.hw_queues).any(|q| self.budget(q) > 0);
        if dispatched || self.queued == 0 || !free {
            self.idle_wakes = 0;
            return;
        }
        self.idle_wakes += 1;
        if self.idle_wakes > MAX_IDLE_WAKES && self.alive() {
            let message = format!(
                "was woken {} times in a row at its own request and dispatched nothing while it held {} requests and the device had free tags",
                self.idle_wakes, self.queued
            );
            self.idle_wakes = 0;
            self.latch(Fault {
                kind: FaultKind::Starved,
                call: "dispatch",
                message,
            });
        }
    }

    /// The turn's notices (completions, merges) and new requests go to the policy together
    /// with a dispatch for the first hardware queue with free tags, in one
    /// [`PolicyBackend::turn`]: a component hears them in one crossing where it can. Returns
    /// the hardware queue that was served, if one was.
    fn take_turn(&mut self, now_ns: u64) -> Option<u32> {
        if !self.alive() {
            return None;
        }
        let inserts = self.take_inserts(now_ns);
        let served = inserts
            .then(|| (0..self.config.hw_queues).find(|&q| self.budget(q) > 0))
            .flatten();
        let dispatch = served.map(|q| (q, self.budget(q)));
        let calls = [
            !self.pending_completions.is_empty(),
            !self.pending_merges.is_empty(),
            inserts,
        ];
        if !calls.contains(&true) {
            return None;
        }
        // Counted as the calls they stand for, however many crossings they take.
        self.stats.policy_calls += calls.iter().filter(|&&c| c).count() as u64;
        let turn = Turn {
            completions: &self.pending_completions,
            merges: &self.pending_merges,
            requests: if inserts { &self.scratch } else { &[] },
            dispatch,
        };
        let answer = self.policy.turn(now_ns, &turn);
        self.pending_completions.clear();
        self.pending_merges.clear();
        if let (Some(Some(answer)), Some((hw_queue, budget))) =
            (self.guard(answer.map(Some), None), dispatch)
        {
            self.send(now_ns, hw_queue, budget, answer, "insert-and-dispatch");
        }
        served
    }

    /// Free driver tags on `hw_queue`.
    fn budget(&self, hw_queue: u32) -> u32 {
        self.config.queue_depth - self.queues[hw_queue as usize].inflight
    }

    /// Moves requests waiting for the insert batch into `scratch`, as queued; true iff any.
    fn take_inserts(&mut self, now_ns: u64) -> bool {
        if self.pending_insert.is_empty() {
            return false;
        }
        self.scratch.clear();
        for &id in &self.pending_insert {
            if let Some(request) = self.table.get_mut(id) {
                request.state = State::Queued;
                request.epoch = self.epoch;
                self.scratch.push(policy_view(id, request));
                if let Some(events) = &mut self.events {
                    events.push(event(now_ns, Kind::Insert, id, request));
                }
            }
        }
        self.pending_insert.clear();
        self.queued += self.scratch.len();
        !self.scratch.is_empty()
    }

    /// Checks the policy's answer to `call` and sends its requests on `hw_queue`.
    fn send(
        &mut self,
        now_ns: u64,
        hw_queue: u32,
        budget: u32,
        answer: Dispatch,
        call: &'static str,
    ) {
        if answer.ids.len() > budget as usize {
            let message = format!("returned {} ids for a budget of {budget}", answer.ids.len());
            self.latch(invalid(call, message));
            return;
        }
        if !answer.ids.is_empty() {
            self.last_progress_ns = now_ns;
        }
        for &RequestId(id) in &answer.ids {
            let Some(request) = self.table.get_mut(id).filter(|r| r.is_queued()) else {
                self.latch(invalid(
                    call,
                    format!(
                        "returned id {id:#x}, which is not queued (unknown, absorbed or already dispatched)"
                    ),
                ));
                return;
            };
            request.state = State::Dispatched {
                hw_queue,
                at_ns: now_ns,
            };
            let (op, sector, sectors) = (request.op, request.sector, request.sectors);
            let (ctx, sync) = (request.ctx, request.sync);
            let bios = request.bios.clone();
            self.index.remove(id, request);
            self.note(now_ns, Kind::Dispatch, ctx, op, sync, (sector, sectors), id);
            debug_assert!(self.queued > 0, "a dispatch with nothing queued");
            self.queued = self.queued.saturating_sub(1);
            self.queues[hw_queue as usize].inflight += 1;
            self.stats.dispatched += 1;
            self.actions.push_back(Action::Dispatch {
                hw_queue,
                id,
                op,
                sector,
                sectors,
                bios,
            });
        }
        if let Some(wake) = answer.wake_at_ns {
            // A wake in the past means "as soon as possible": the next nanosecond. Asked for
            // again and again with nothing dispatched, the idle-wake count ejects it.
            self.queues[hw_queue as usize].timer = Some(wake.max(now_ns.saturating_add(1)));
        }
    }

    /// Merges `bio` into a request if the mode, the limits and the policy allow.
    /// Returns true iff it merged. A failing veto counts as a refusal.
    fn try_merge(&mut self, now_ns: u64, bio: &Bio) -> bool {
        for (id, kind) in self
            .index
            .candidates(bio, self.config.nomerges, &self.table)
            .into_iter()
            .flatten()
        {
            let Some(request) = self.table.get(id) else {
                continue;
            };
            if !can_merge(request, bio, self.config.limits()) {
                continue;
            }
            if self.merge_veto && request.is_queued() {
                let query = MergeQuery {
                    target: RequestId(id),
                    target_ctx: request.ctx,
                    ctx: bio.ctx,
                    op: bio.op,
                    sector: Sector(bio.sector),
                    sectors: bio.sectors,
                    sync: bio.sync,
                    kind,
                };
                if !self.ask_merge(&query) {
                    continue;
                }
            }
            self.grow(id, kind, bio, now_ns);
            let merged = match kind {
                MergeKind::Back => Kind::BackMerge,
                MergeKind::Front => Kind::FrontMerge,
            };
            self.note(
                now_ns,
                merged,
                bio.ctx,
                bio.op,
                bio.sync,
                (bio.sector, bio.sectors),
                id,
            );
            let survivor = match self.config.nomerges {
                Nomerges::All => self.coalesce(id, kind),
                _ => None,
            };
            let (target, absorbed) = survivor.map_or((id, None), |(s, a)| (s, Some(a)));
            self.index.touch(target);
            if let Some(request) = self.table.get(target).filter(|r| r.is_queued()) {
                let kind = if absorbed.is_some() {
                    MergeKind::Back
                } else {
                    kind
                };
                self.pending_merges.push(MergeEvent {
                    target: RequestId(target),
                    sector: Sector(request.sector),
                    sectors: request.sectors,
                    kind,
                    absorbed: absorbed.map(RequestId),
                });
            }
            return true;
        }
        false
    }

    /// The policy's merge veto; a fault (or a dead policy) refuses.
    fn ask_merge(&mut self, query: &MergeQuery) -> bool {
        if !self.alive() {
            return false;
        }
        self.stats.policy_calls += 1;
        let answer = self.policy.allow_merge(query);
        let allowed = self.guard(answer, false);
        if !allowed {
            self.stats.merges_vetoed += 1;
        }
        allowed
    }

    /// Adds `bio` to request `id` at the `kind` end.
    fn grow(&mut self, id: u64, kind: MergeKind, bio: &Bio, now_ns: u64) {
        let Some(request) = self.table.get_mut(id) else {
            return;
        };
        self.index.remove(id, request);
        request.sectors += bio.sectors;
        if kind == MergeKind::Front {
            request.sector = bio.sector;
            self.stats.front_merges += 1;
        } else {
            self.stats.back_merges += 1;
        }
        let bio_ref = (
            bio.ctx,
            BioRef {
                id: bio.id,
                submit_ns: now_ns,
                sectors: bio.sectors,
            },
        );
        // Bios stay in sector order: a front merge goes first.
        if kind == MergeKind::Front {
            request.bios.insert(0, bio_ref);
        } else {
            request.bios.push(bio_ref);
        }
        self.index.add(id, request);
    }

    /// After request `id` grew at its `kind` end, absorbs the neighbour it now touches, if
    /// allowed. Returns `(survivor, absorbed)`.
    fn coalesce(&mut self, id: u64, kind: MergeKind) -> Option<(u64, u64)> {
        let request = self.table.get(id)?;
        let (survivor, absorbed) = match kind {
            MergeKind::Back => match self.index.successor(request) {
                Some(next) => (id, next),
                None => return None,
            },
            MergeKind::Front => match self.index.predecessor(request) {
                Some(prev) => (prev, id),
                None => return None,
            },
        };
        let (Some(s), Some(a)) = (self.table.get(survivor), self.table.get(absorbed)) else {
            return None;
        };
        if survivor == absorbed || !can_coalesce(s, a, self.config.limits()) {
            return None;
        }
        if self.merge_veto && s.is_queued() {
            let query = MergeQuery {
                target: RequestId(survivor),
                target_ctx: s.ctx,
                ctx: a.ctx,
                op: a.op,
                sector: Sector(a.sector),
                sectors: a.sectors,
                sync: a.sync,
                kind: MergeKind::Back,
            };
            if !self.ask_merge(&query) {
                return None;
            }
        }
        let gone = self.table.remove(absorbed)?;
        self.index.remove(absorbed, &gone);
        self.forget_waiting(absorbed, &gone);
        if let Some(s) = self.table.get_mut(survivor) {
            self.index.remove(survivor, s);
            s.sectors += gone.sectors;
            s.arrival_ns = s.arrival_ns.min(gone.arrival_ns);
            s.bios.extend_from_slice(&gone.bios);
            self.index.add(survivor, s);
        }
        self.stats.coalesced += 1;
        Some((survivor, absorbed))
    }

    /// Drops an absorbed request from wherever it waited, and frees its scheduler tag.
    fn forget_waiting(&mut self, id: u64, gone: &Request) {
        match gone.state {
            State::Staged => {
                if let Some(queue) = self.software.get_mut(gone.ctx as usize) {
                    queue.retain(|&s| s != id);
                }
            }
            State::Pending => {
                self.pending_insert.retain(|&p| p != id);
                self.release_tag(gone.home_queue, gone.op, gone.sync);
            }
            // Sent-back requests are out of the merge index, so none is absorbed; were one,
            // it would leave the requeue batch as a pending one leaves the insert batch.
            State::Requeued => {
                self.pending_requeue.retain(|&p| p != id);
                self.release_tag(gone.home_queue, gone.op, gone.sync);
            }
            State::Queued => {
                debug_assert!(
                    self.queued > 0,
                    "an absorbed request the policy held, with none held"
                );
                self.queued = self.queued.saturating_sub(1);
                self.release_tag(gone.home_queue, gone.op, gone.sync);
            }
            State::Dispatched { .. } => {}
        }
    }

    /// True iff a request of this kind may take a scheduler tag on `home` now.
    fn tag_free(&self, home: u32, op: Op, sync: bool) -> bool {
        let queue = &self.queues[home as usize];
        queue.held_total < self.config.nr_requests
            && queue.held[op as usize][usize::from(sync)]
                < self.depth_limit[op as usize][usize::from(sync)]
    }

    /// Gives staged request `id` a scheduler tag and queues it for the next insert batch.
    fn admit(&mut self, id: u64) {
        let Some(request) = self.table.get_mut(id) else {
            return;
        };
        request.state = State::Pending;
        let queue = &mut self.queues[request.home_queue as usize];
        queue.held[request.op as usize][usize::from(request.sync)] += 1;
        queue.held_total += 1;
        self.pending_insert.push(id);
    }

    /// Puts request `id` at the tail of `ctx`'s software queue to wait for a scheduler tag.
    fn stage(&mut self, ctx: u32, home: u32, id: u64) {
        let ctx_index = ctx as usize;
        if self.software.len() <= ctx_index {
            self.software.resize_with(ctx_index + 1, VecDeque::new);
        }
        let queue = &mut self.software[ctx_index];
        if queue.is_empty() {
            self.queues[home as usize].waiting.push_back(ctx);
        }
        queue.push_back(id);
    }

    /// Frees a scheduler tag on `home` and lets waiting requests in: one from each waiting
    /// software queue in turn, skipping a queue whose head is of a kind at its depth limit.
    fn release_tag(&mut self, home: u32, op: Op, sync: bool) {
        let queue = &mut self.queues[home as usize];
        let kind = &mut queue.held[op as usize][usize::from(sync)];
        debug_assert!(
            *kind > 0 && queue.held_total > 0,
            "a tag released that was not held"
        );
        *kind = kind.saturating_sub(1);
        queue.held_total = queue.held_total.saturating_sub(1);
        let mut fruitless = 0;
        while fruitless < self.queues[home as usize].waiting.len()
            && self.queues[home as usize].held_total < self.config.nr_requests
        {
            let Some(ctx) = self.queues[home as usize].waiting.pop_front() else {
                break;
            };
            let software = &mut self.software[ctx as usize];
            let head = software
                .front()
                .and_then(|&id| self.table.get(id).map(|r| (id, r.op, r.sync)));
            let admitted = match head {
                Some((id, op, sync)) if self.tag_free(home, op, sync) => {
                    self.software[ctx as usize].pop_front();
                    self.admit(id);
                    true
                }
                _ => false,
            };
            fruitless = if admitted { 0 } else { fruitless + 1 };
            if !self.software[ctx as usize].is_empty() {
                self.queues[home as usize].waiting.push_back(ctx);
            }
        }
    }

    fn refresh_depth_limits(&mut self) {
        let limits = depth_limits(self.policy.as_mut(), &mut self.stats);
        if let Some(limits) = self.guard(limits.map(Some), None) {
            self.depth_limit = limits;
        }
    }
}

/// Wake-ups in a row that end with nothing dispatched (while requests wait and tags are
/// free) tolerated before the policy is starving its requests. A real policy idles for one
/// wake-up, or a few, before it dispatches (cfq's slice_idle, bfq's budget timeout).
const MAX_IDLE_WAKES: u32 = 10_000;

/// Scheduler tags each kind of request may hold, as `policy` says.
fn depth_limits(
    policy: &mut dyn PolicyBackend,
    stats: &mut CoreStats,
) -> Result<[[u32; 2]; 4], Fault> {
    let mut limits = [[u32::MAX; 2]; 4];
    for op in Op::ALL {
        for sync in [false, true] {
            stats.policy_calls += 1;
            limits[op as usize][usize::from(sync)] = policy.limit_depth(op, sync)?.max(1);
        }
    }
    Ok(limits)
}

fn policy_view(id: u64, r: &Request) -> PolicyRequest {
    PolicyRequest {
        id: RequestId(id),
        ctx: r.ctx,
        op: r.op,
        sector: Sector(r.sector),
        sectors: r.sectors,
        sync: r.sync,
        prio_class: r.prio_class,
        prio_level: r.prio_level,
        arrival_ns: r.arrival_ns,
    }
}

fn invalid(call: &'static str, message: String) -> Fault {
    Fault {
        kind: FaultKind::InvalidAnswer,
        call,
        message,
    }
}

/// The event `kind` of request `id`.
fn event(at_ns: u64, kind: Kind, id: u64, request: &Request) -> Event {
    Event {
        at_ns,
        kind,
        ctx: request.ctx,
        op: op_code(request.op),
        sync: request.sync,
        sector: request.sector,
        sectors: request.sectors,
        id,
    }
}
