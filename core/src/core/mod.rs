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
//!
//! Invariants, asserted in every build where they are relied on:
//!
//! - Every request is in exactly one place: its submitter's software queue, the insert
//!   batch, the requeue batch, the policy or the device; those counts add up to the table
//!   (`check_invariants`, after every public call that moves requests).
//! - A hardware queue never has more requests on the device than its driver tags (at each
//!   dispatch: the backends size their rings and buffer slots by them).
//! - Scheduler tags in use stay within `nr_requests`, and a tag is released only by a
//!   request that holds one (`Admission::take_tag`, `Admission::release`).
//! - A request leaves for the device once and finishes once: a dispatch takes it from what
//!   the policy holds, a completion from what the device holds.
//! - A merge joins only what continues a request: same operation, back to back, within
//!   `max_sectors` and `max_segments` (`Merging::grow`, `Merging::absorb`), which drivers
//!   rely on to lay a request out as one I/O.
//! - A group's limits let nothing go before it conforms (`throttle::Cell::charge`).

mod admission;
mod config;
mod dispatch;
pub mod event;
mod groups;
mod merge;
mod merging;
mod outcome;
mod plug;
mod recovery;
mod request;
mod routing;
mod supervised;
mod throttle;
mod tunables;

use std::collections::VecDeque;

use schedhost_sdk::{
    Completion, Dispatch, MergeEvent, Op, Request as PolicyRequest, RequestId, Sector,
};

use crate::policy::{Fallback, Fault, FaultKind, PolicyBackend, Turn};
use admission::Admission;
pub use config::{
    BUSY, Config, LEGACY_NR_REQUESTS, MAX_DURATION_NS, MAX_REQUEUES, MAX_SECTOR, MAX_SEGMENTS,
    MAX_SUBMITTERS, TunableValues,
};
use event::{Event, Kind, op_code};
pub use merge::{MergeIndex, MergeLimits, Nomerges, can_coalesce, can_merge};
use merging::Merging;
pub use outcome::{Action, BioDone, CoreStats, StartError, UnknownCompletion};
use plug::Plugging;
pub use plug::{
    LEGACY_UNPLUG_DELAY_NS, LEGACY_UNPLUG_THRESH, MAX_UNPLUG_DELAY_NS, Plug, SUBMITTER_MAX_BYTES,
    SUBMITTER_MAX_REQUESTS,
};
pub use recovery::Swapped;
pub use request::{Bio, BioRef, Bios, Request, RequestTable, State};
pub use routing::{CompletionSite, RqAffinity, site};
use supervised::Supervised;
pub use supervised::{DEFAULT_WATCHDOG_NS, Ejection, OnFault, Recovery, Supervision};
pub use throttle::{DEFAULT_WEIGHT, GroupReport, GroupSpec, GroupStats, Throttle};

/// Per hardware queue state besides its scheduler tags: driver tags in use, the policy's
/// timer.
#[derive(Debug, Default)]
struct HwQueue {
    /// Driver tags in use.
    inflight: u32,
    /// When the policy asked to be called again.
    timer: Option<u64>,
}

/// The scheduler core for one device.
pub struct Core {
    config: Config,
    /// The policy, its faults and what follows them.
    policy: Supervised,
    /// Scheduler tags and the software queues waiting for them.
    admission: Admission,
    table: RequestTable,
    /// The merge index and the rules merges keep.
    merging: Merging,
    /// The plug: whether requests are held back from the device a moment.
    plugging: Plugging,
    queues: Vec<HwQueue>,
    /// Requests on the device, every hardware queue's together.
    on_device: usize,
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
    /// Plugs flushed at the end of a batch, reused.
    plug_scratch: Vec<(u32, u32)>,
    /// Groups' limits (io.max), when any group has them: bios wait here, before the
    /// scheduler.
    throttle: Option<Box<Throttle>>,
    /// Per-request events, recorded only when asked for (`--trace-events`).
    events: Option<Vec<Event>>,
    /// Since when the policy has held requests with driver tags free (counted into
    /// [`CoreStats::held_ns`] at the next round).
    held_since: Option<u64>,
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
        let mut stats = CoreStats::default();
        let (said, limits) =
            supervised::start(policy.as_mut(), &config, settings, None, &mut stats)?;
        let mut core = Self {
            config,
            policy: Supervised::new(policy, said, settings, fallback),
            admission: Admission::new(config.hw_queues, config.nr_requests),
            table: RequestTable::default(),
            merging: Merging::new(config.nomerges, config.limits()),
            plugging: Plugging::new(config.plug),
            queues: (0..config.hw_queues).map(|_| HwQueue::default()).collect(),
            on_device: 0,
            pending_insert: Vec::new(),
            pending_requeue: Vec::new(),
            pending_merges: Vec::new(),
            pending_completions: Vec::new(),
            queued: 0,
            actions: VecDeque::new(),
            stats,
            scratch: Vec::new(),
            plug_scratch: Vec::new(),
            throttle: None,
            held_since: None,
            events: None,
        };
        core.admission.set_depth_limits(limits);
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

    /// Which policy this is since the core started: 0 for the first, one more at each swap,
    /// restart or fallback.
    pub fn policy_epoch(&self) -> u32 {
        self.policy.epoch()
    }

    /// The running policy's name, version and wishes, as it gave them when it started.
    pub fn policy_info(&self) -> &schedhost_sdk::Info {
        self.policy.info()
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
        let timer = self
            .queues
            .iter()
            .filter_map(|q| q.timer)
            .chain(self.plugging.deadline())
            .chain(self.throttle.as_ref().and_then(|t| t.next_release()))
            .min()?;
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
        let bio = match &mut self.throttle {
            // Held by its group's limits: it comes back at `run` once it may go.
            Some(throttle) => match throttle.admit(now_ns, bio) {
                Some(bio) => bio,
                None => {
                    let group = throttle.group_number(bio.ctx);
                    self.admission.limited(group, true);
                    return Ok(());
                }
            },
            None => bio,
        };
        self.place_bio(now_ns, now_ns, bio);
        if bio.sync {
            self.unplug_for(now_ns, bio.ctx);
        }
        let settled = self.act_on_fault(now_ns).map(|_| ());
        self.check_invariants();
        settled
    }

    /// Merges `bio` or makes it a request. Never fails: a policy fault is latched, and the
    /// bio is placed all the same.
    /// `submitted_ns` is when the bio came from its submitter (earlier than `now_ns` for a
    /// bio its group's limits held): its latency runs from then.
    pub(super) fn place_bio(&mut self, now_ns: u64, submitted_ns: u64, bio: Bio) {
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
        if self.try_merge(now_ns, submitted_ns, &bio) {
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
            group: self.group_of(bio.ctx),
            arrival_ns: now_ns,
            home_queue: home,
            state: State::Staged,
            epoch: self.policy.epoch(),
            bios: smallvec::smallvec![(
                bio.ctx,
                BioRef {
                    id: bio.id,
                    submit_ns: submitted_ns,
                    admitted_ns: now_ns,
                    sectors: bio.sectors,
                },
            )],
            requeues: 0,
        };
        self.plug_for(now_ns, &request);
        let kind = request.tag_kind();
        let admitted = self.admission.tag_free(home, kind);
        let id = self.table.insert(request);
        if let Some(request) = self.table.get(id) {
            self.merging.add(id, request);
        }
        if admitted {
            self.admit(id);
        } else {
            self.admission.stage(bio.ctx, home, kind.group, id);
        }
    }

    /// Every bio its group's limits still hold completes at `now_ns` with `status` (a
    /// negative errno) without reaching the scheduler: a server that stops refuses what has
    /// not started rather than wait out the rates. Returns how many.
    pub fn refuse_held(&mut self, now_ns: u64, status: i32) -> usize {
        let Some(throttle) = &mut self.throttle else {
            return 0;
        };
        let held = throttle.take_waiting();
        for &(bio, _) in &held {
            self.admission
                .limited(throttle.group_number(bio.ctx), false);
        }
        for &(bio, arrived_ns) in &held {
            let home = bio.ctx % self.config.hw_queues;
            self.actions.push_back(Action::Complete(BioDone {
                bio: bio.id,
                ctx: bio.ctx,
                op: bio.op,
                sectors: bio.sectors,
                status,
                latency_ns: now_ns.saturating_sub(arrived_ns),
                sched_ns: 0,
                site: site(self.config.rq_affinity, home, home, bio.ctx),
            }));
        }
        held.len()
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
        let Some((State::Dispatched { hw_queue, at_ns }, home, group)) =
            (self.table.get(id)).map(|r| (r.state, r.home_queue, r.tag_kind().group))
        else {
            return Err(UnknownCompletion { id });
        };
        let queue = &mut self.queues[hw_queue as usize];
        assert!(
            queue.inflight > 0,
            "a completion on a queue with nothing in flight"
        );
        queue.inflight -= 1;
        self.on_device -= 1;
        self.admission.on_device(home, group, false);
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
            if let Some(throttle) = &mut self.throttle {
                throttle.on_complete(now_ns, ctx, now_ns.saturating_sub(bio.admitted_ns));
            }
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
        if self.policy.info().completions && request.epoch == self.policy.epoch() {
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
        self.release_tag(request.home_queue, request.tag_kind());
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
        if self.pending_requeue.is_empty() || !self.policy.alive() {
            return;
        }
        let mut views = Vec::with_capacity(self.pending_requeue.len());
        for id in std::mem::take(&mut self.pending_requeue) {
            if let Some(request) = self.table.get_mut(id) {
                request.state = State::Queued;
                request.epoch = self.policy.epoch();
                views.push(policy_view(id, request));
            }
        }
        self.queued += views.len();
        self.stats.policy_calls += 1;
        let answer = self.policy.instance().requeue(now_ns, &views);
        self.policy.guard(answer, ());
    }
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
        group: r.group,
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
