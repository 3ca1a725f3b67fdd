//! The engine: one driver for every run, simulated or real, whatever feeds it.
//!
//! It owns what lies between a front-end and a device: one core per device ("lane"), the
//! routing of bios to lanes, dispatch to the [`Backend`], completions back into the cores,
//! policy timers, stall detection, swaps and control requests, the live line and the
//! counters. A front-end ([`Frontend`]: fio jobs, replay, NBD, submitter threads) hands it
//! bios through a [`Feed`], which the engine submits when the front-end's call returns, and
//! hears of finished bios; [`drive`] is the one loop.
//! Simulated and real runs differ only in their backend and its clock.

mod backend;
mod control;
mod drive;
mod lane;
mod record;
mod stop;
mod striping;

use std::io::Write;
use std::time::{Duration, Instant};

pub use backend::{Backend, Outgoing, Readiness};
pub use drive::{Feed, Flow, Frontend, drive};
pub use lane::{Lane, LaneSetup};
pub use record::{SetRecord, SwapRecord};
pub use stop::{Clock, Halt, Stop};
pub use striping::Striping;

use crate::control::Control;
use crate::core::{Action, Bio, BioDone, CoreStats, Ejection};
use crate::observe::events::Event;
use crate::observe::metrics::exposition::DeviceView;
use crate::observe::stats::live::{Gauges, Live};
use crate::observe::stats::meter::Meter;
use crate::policy::{Fault, PolicyBackend};

/// A finished bio and the lane it went through.
#[derive(Debug, Clone, Copy)]
pub struct Done {
    /// The lane (device).
    pub lane: u32,
    /// The bio.
    pub bio: BioDone,
}

/// A policy swap at a set time (`--swap-at 2s:cfq`).
pub struct ScheduledSwap {
    /// When (ns on the backend's clock).
    pub at_ns: u64,
    /// What was asked for, for the report.
    pub label: String,
    /// Makes the new policy at the time of the swap (from a compiled component, ~5 µs).
    pub policy: PolicyMaker,
    /// Its tunables.
    pub settings: Vec<(String, i64)>,
}

/// Makes a policy instance when it is needed.
pub type PolicyMaker = Box<dyn FnOnce() -> Result<Box<dyn PolicyBackend>, String> + Send>;

impl std::fmt::Debug for ScheduledSwap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScheduledSwap")
            .field("at_ns", &self.at_ns)
            .field("label", &self.label)
            .finish_non_exhaustive()
    }
}

/// How long the policies may hold requests with nothing on the device, no timer and no new
/// bios before an engine fed by other threads declares them starving. Fed by its own
/// front-end, the engine knows at once.
const STALL_LIMIT: Duration = Duration::from_secs(2);

/// A ctx no front-end placed: its bios go by the striping.
const UNROUTED: u32 = u32::MAX;

/// The driver state between the front-end and the backend.
#[derive(Debug)]
pub struct Engine<B> {
    /// The device(s): private, so that only the engine dispatches and reaps.
    backend: B,
    /// Bios the front-end handed over during its call, submitted when it returns.
    outbox: Vec<Bio>,
    lanes: Vec<Lane>,
    striping: Striping,
    /// By ctx, the lane a front-end placed it on ([`UNROUTED`]: by `striping`), for
    /// front-ends whose submitters each have one device (an NBD export's clients).
    routes: Vec<u32>,
    /// Bios finished since the front-end last heard.
    done: Vec<Done>,
    reaped: Vec<(u32, u64, i32)>,
    control: Option<Control>,
    live: Option<Live>,
    /// Since when the policies have held requests with nothing on the device and no timer.
    stuck_since: Option<Instant>,
    /// Swaps still to come, latest first.
    scheduled: Vec<ScheduledSwap>,
    swaps: Vec<SwapRecord>,
    /// Tunable changes through the control socket, in order.
    sets: Vec<SetRecord>,
}

/// What an engine is built with besides its backend.
#[derive(Debug)]
pub struct EngineSetup {
    /// One lane per device, in device order.
    pub lanes: Vec<Lane>,
    /// How bios spread over the lanes ([`Striping::single`] for one).
    pub striping: Striping,
    /// A control socket whose requests are answered at every turn.
    pub control: Option<Control>,
    /// Print a live line to stderr this often (ns on the backend's clock).
    pub live_every_ns: Option<u64>,
    /// Swaps made at their times.
    pub swaps: Vec<ScheduledSwap>,
}

impl<B: Backend> Engine<B> {
    /// An engine over `backend` with `setup`'s lanes, one per device. Front-ends build it
    /// through their run's plan (`RunPlan::engine` in the front-end crate), the one place that
    /// turns a plan's options into an engine.
    pub fn new(backend: B, setup: EngineSetup) -> Self {
        let EngineSetup {
            lanes,
            striping,
            control,
            live_every_ns,
            mut swaps,
        } = setup;
        // Latest first, so the next one due is popped from the end.
        swaps.sort_by_key(|s| std::cmp::Reverse(s.at_ns));
        Self {
            backend,
            outbox: Vec::new(),
            striping,
            routes: Vec::new(),
            lanes,
            done: Vec::new(),
            reaped: Vec::new(),
            control,
            live: live_every_ns.map(|every| Live::new(every, 0)),
            stuck_since: None,
            scheduled: swaps,
            swaps: Vec::new(),
            sets: Vec::new(),
        }
    }

    /// The lanes, in device order.
    pub fn lanes(&self) -> &[Lane] {
        &self.lanes
    }

    /// The backend, for what it can say of the run.
    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// The time now on the backend's clock.
    pub fn now(&self) -> u64 {
        self.backend.now()
    }

    /// Requests on the device(s).
    pub fn inflight(&self) -> usize {
        self.backend.inflight()
    }

    /// Every bio of `ctx` goes to lane `lane` from now on, and the ctx is in group `group`
    /// there (an index into that lane's groups; `None`: none). A front-end places a ctx
    /// before it submits the ctx's first bio, and again only once the last has finished.
    ///
    /// # Panics
    /// If `lane` is not a lane of the engine: a front-end's setup error.
    pub fn place(&mut self, ctx: u32, lane: usize, group: Option<u16>) {
        assert!(lane < self.lanes.len(), "placing ctx {ctx} on lane {lane}");
        let index = ctx as usize;
        if self.routes.len() <= index {
            self.routes.resize(index + 1, UNROUTED);
        }
        self.routes[index] = lane as u32;
        self.lanes[lane].core.place_in_group(ctx, group);
    }

    /// Every bio held by its group's limits, on every lane, completes at `now` with
    /// `status` (see [`crate::core::Core::refuse_held`]); the front-end hears of them this
    /// turn. Returns how many.
    pub fn refuse_held(&mut self, now: u64, status: i32) -> usize {
        self.lanes
            .iter_mut()
            .map(|lane| lane.core.refuse_held(now, status))
            .sum()
    }

    /// The lane `bio` goes to: where its ctx was placed, else by the striping.
    fn lane_of(&self, bio: &Bio) -> Result<usize, Stop> {
        match self.routes.get(bio.ctx as usize) {
            Some(&lane) if lane != UNROUTED => Ok(lane as usize),
            _ => self.striping.lane_of(bio).ok_or(Stop::Straddles {
                sector: bio.sector,
                sectors: bio.sectors,
                chunk_sectors: self.striping.chunk_sectors,
            }),
        }
    }

    /// `bio` enters its lane's core.
    ///
    /// # Errors
    /// The policy's merge veto failed, or the backend refused a dispatch.
    fn submit(&mut self, now: u64, bio: Bio) -> Result<(), Halt<B::Error>> {
        let lane = self.lane_of(&bio)?;
        debug_assert!(
            lane < self.lanes.len(),
            "striping over more lanes than the engine has"
        );
        let result = self.lanes[lane].core.submit(now, bio);
        result.map_err(|fault| self.fault(lane, now, fault))?;
        self.drain(lane, now).map_err(Halt::Backend)
    }

    /// Submits what the front-end handed over, in the order it did.
    ///
    /// # Errors
    /// As [`Self::submit`]; the bios after the one that failed are not submitted (the run
    /// stops).
    #[inline]
    pub(super) fn submit_outbox(&mut self, now: u64) -> Result<(), Halt<B::Error>> {
        // Most calls find nothing handed over: they cost a test, not a call.
        if self.outbox.is_empty() {
            return Ok(());
        }
        self.submit_handed_over(now)
    }

    /// Kept out of line, so that the test above inlines into the loop without this
    /// function's frame.
    #[inline(never)]
    fn submit_handed_over(&mut self, now: u64) -> Result<(), Halt<B::Error>> {
        // By index: a turn hands over one bio or none most of the time, and submitting
        // hands nothing over, so the list does not change under the loop.
        let mut next = 0;
        while let Some(&bio) = self.outbox.get(next) {
            next += 1;
            if let Err(halt) = self.submit(now, bio) {
                self.outbox.clear();
                return Err(halt);
            }
        }
        self.outbox.clear();
        Ok(())
    }

    /// Lets every policy dispatch.
    ///
    /// # Errors
    /// A policy failed, or the backend refused a dispatch.
    pub(super) fn run(&mut self, now: u64) -> Result<(), Halt<B::Error>> {
        for l in 0..self.lanes.len() {
            let result = self.lanes[l].core.run(now);
            result.map_err(|fault| self.fault(l, now, fault))?;
            self.drain(l, now).map_err(Halt::Backend)?;
        }
        Ok(())
    }

    /// Takes the backend's finished requests into the cores; returns the time they were
    /// completed at, if anything finished.
    ///
    /// # Errors
    /// The backend failed, or reported a request no core dispatched.
    pub(super) fn reap(&mut self) -> Result<Option<u64>, Halt<B::Error>> {
        let mut reaped = std::mem::take(&mut self.reaped);
        reaped.clear();
        let at = self
            .backend
            .reap(&mut |lane, id, status| reaped.push((lane, id, status)));
        let result = at.map_err(Halt::Backend).and_then(|at| {
            if let Some(now) = at {
                for &(lane, id, status) in &reaped {
                    let done = self.lanes[lane as usize].core.complete(now, id, status);
                    done.map_err(Stop::from)?;
                    self.drain(lane as usize, now).map_err(Halt::Backend)?;
                }
            }
            Ok(at)
        });
        self.reaped = reaped;
        result
    }

    /// The bios finished since the last call, in the order they finished.
    pub(super) fn take_done(&mut self, into: &mut Vec<Done>) {
        into.clear();
        std::mem::swap(into, &mut self.done);
    }

    /// The earliest wake-up a policy asked for.
    pub fn next_timer(&self) -> Option<u64> {
        self.lanes
            .iter()
            .filter_map(|l| l.core.poll_timeout())
            .min()
    }

    /// Requests the policies hold.
    pub fn queued(&self) -> usize {
        self.lanes.iter().map(|l| l.core.queued_in_policy()).sum()
    }

    /// The run is stuck with requests in the policies: ejects the ones holding requests
    /// (see [`crate::core::Core::starve`]); true iff any was replaced.
    ///
    /// # Errors
    /// A fallback failed too, or the backend refused a dispatch.
    pub(super) fn starve(&mut self, now: u64) -> Result<bool, Halt<B::Error>> {
        let mut replaced = false;
        for l in 0..self.lanes.len() {
            let result = self.lanes[l].core.starve(now);
            replaced |= result.map_err(|fault| self.fault(l, now, fault))?;
            self.drain(l, now).map_err(Halt::Backend)?;
        }
        Ok(replaced)
    }

    /// Carries out lane `l`'s actions: dispatches go to the backend, finished bios to the
    /// front-end's list (and the lane's meter).
    fn drain(&mut self, l: usize, now: u64) -> Result<(), B::Error> {
        while let Some(action) = self.lanes[l].core.poll_action() {
            match action {
                Action::Dispatch {
                    id,
                    op,
                    sector,
                    sectors,
                    prio,
                    bios,
                    ..
                } => {
                    let request = Outgoing {
                        id,
                        op,
                        sector,
                        sectors,
                        prio,
                        bios: &bios,
                    };
                    self.backend.dispatch(now, l as u32, request)?;
                }
                Action::Complete(bio) => {
                    if let Some(meter) = &mut self.lanes[l].meter {
                        meter.record_done(&bio);
                    }
                    self.done.push(Done {
                        lane: l as u32,
                        bio,
                    });
                }
            }
        }
        Ok(())
    }

    /// Makes every scheduled swap due at `now`.
    fn swap_due(&mut self, now: u64) {
        while self.scheduled.last().is_some_and(|s| s.at_ns <= now) {
            if let Some(swap) = self.scheduled.pop() {
                let started = Instant::now();
                let policies = (swap.policy)().map(|p| vec![p]);
                let (_, record) = self.swap(now, swap.label, policies, &swap.settings, started);
                self.record_swap(record);
            }
        }
    }

    /// Prints the live line to stderr if one is due at `now`.
    fn tick_live(&mut self, now: u64) {
        if !self.live.as_ref().is_some_and(|l| l.due(now)) {
            return;
        }
        let mut meter = Meter::default();
        for lane in &mut self.lanes {
            if let Some(m) = &mut lane.meter {
                meter.absorb(m);
                m.clear_recent();
            }
        }
        let policy = self
            .lanes
            .first()
            .map(|l| l.core.policy_info().name.clone())
            .unwrap_or_default();
        let gauges = Gauges {
            policy: &policy,
            queued: self.queued(),
            inflight: self.backend.inflight(),
            ejections: self.lanes.iter().map(|l| l.core.ejections().len()).sum(),
        };
        if let Some(live) = &mut self.live {
            // A closed stderr must not stop the I/O.
            let _ = writeln!(std::io::stderr(), "{}", live.line(now, &meter, gauges));
        }
    }

    /// Every device as the metrics see it (counters empty unless metering is on).
    pub fn views(&mut self) -> Vec<DeviceView> {
        let inflight = self.backend.inflight();
        self.lanes
            .iter_mut()
            .map(|lane| DeviceView {
                name: lane.name.clone(),
                policy: lane.core.policy_info().name.clone(),
                epoch: u64::from(lane.core.policy_epoch()),
                meter: lane.meter.clone().unwrap_or_default(),
                stats: lane.core.stats(),
                queued: lane.core.queued_in_policy(),
                // The backend's in-flight count is every lane's together.
                inflight,
                ejections: lane.core.ejections().len(),
                policy_call_ns: lane
                    .policy_clock
                    .as_ref()
                    .map_or(0, |c| c.load(std::sync::atomic::Ordering::Relaxed)),
                groups: lane
                    .core
                    .throttle()
                    .map(crate::core::Throttle::report)
                    .unwrap_or_default(),
            })
            .collect()
    }

    /// The swaps made (or refused) so far.
    pub fn swaps(&self) -> &[SwapRecord] {
        &self.swaps
    }

    /// The tunable changes made (or refused) so far.
    pub fn sets(&self) -> &[SetRecord] {
        &self.sets
    }

    /// The first lane's policy (every lane runs the same one), by name.
    fn policy_name(&self) -> String {
        self.lanes
            .first()
            .map(|l| l.core.policy_info().name.clone())
            .unwrap_or_default()
    }

    /// Keeps a swap for the report and tells the log, as it happens.
    fn record_swap(&mut self, record: SwapRecord) {
        log(&record.line());
        self.swaps.push(record);
    }

    /// Keeps a tunable change for the report and tells the log.
    fn record_set(&mut self, record: SetRecord) {
        log(&record.line());
        self.sets.push(record);
    }

    /// The events every lane's core recorded since the last call, in time order.
    pub fn take_events(&mut self) -> Vec<Event> {
        let mut events = Vec::new();
        for lane in &mut self.lanes {
            lane.core.take_events(&mut events);
        }
        // Each lane's events are in order; a stable sort interleaves them.
        events.sort_by_key(|e| e.at_ns);
        events
    }

    /// What the run's report needs from the engine, once it is over. Swaps scheduled after
    /// the last I/O are reported as not made, not silently dropped.
    pub fn finish(&mut self, end_ns: u64) -> Finished {
        while let Some(swap) = self.scheduled.pop() {
            let end_ms = end_ns as f64 / 1e6;
            self.swaps.push(SwapRecord {
                at_ns: swap.at_ns,
                from: self.policy_name(),
                to: swap.label,
                result: Err(format!("not made: the run ended at {end_ms:.3} ms")),
                stall_ns: 0,
            });
        }
        let lanes: Vec<CoreStats> = self.lanes.iter().map(|l| l.core.stats()).collect();
        let mut core = CoreStats::default();
        lanes.iter().for_each(|s| core.add(s));
        Finished {
            core,
            lanes,
            ejections: self
                .lanes
                .iter()
                .flat_map(|l| l.core.ejections().iter().cloned())
                .collect(),
            swaps: std::mem::take(&mut self.swaps),
            sets: std::mem::take(&mut self.sets),
            groups: self
                .lanes
                .first()
                .and_then(|l| l.core.throttle())
                .map(crate::core::Throttle::report)
                .unwrap_or_default(),
            events: self.take_events(),
        }
    }

    /// The clock this run's times are on.
    fn clock(&self) -> Clock {
        if self.backend.virtual_clock() {
            Clock::Virtual
        } else {
            Clock::Wall
        }
    }

    fn fault(&self, lane: usize, now: u64, fault: Fault) -> Stop {
        Stop::Fault {
            clock: self.clock(),
            at_ns: now,
            device: self.lanes[lane].name.clone(),
            fault,
        }
    }
}

/// What a finished run's report takes from the engine.
#[derive(Debug)]
pub struct Finished {
    /// Every lane's core counters together.
    pub core: CoreStats,
    /// Per lane.
    pub lanes: Vec<CoreStats>,
    /// Policy ejections, in lane order.
    pub ejections: Vec<Ejection>,
    /// Swaps, in the order they were made.
    pub swaps: Vec<SwapRecord>,
    /// Tunable changes, in the order they were made.
    pub sets: Vec<SetRecord>,
    /// Limited groups: their limits and what they did.
    pub groups: Vec<crate::core::GroupReport>,
    /// Per-request events not yet taken, in time order.
    pub events: Vec<Event>,
}

/// A line on stderr, where the live line goes: what changed in a run, as it changes. A
/// closed stderr must not stop the I/O.
pub(super) fn log(line: &str) {
    let _ = writeln!(
        std::io::stderr(),
        "schedhost: {}",
        crate::output::printable(line)
    );
}
