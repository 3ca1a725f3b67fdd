//! The simulator: a discrete-event loop in virtual time that runs a workload's submitters
//! against the core and a device model. Nothing reads a clock, so a seed fixes the result.

use crate::core::{Action, Config, Core, Nomerges, StartError, Supervision, UnknownCompletion};
use crate::device::{DeviceModel, DeviceRequest, DeviceSpec};
use crate::outcome::{Outcome, SubmitterSummary, SwapRecord};
use std::sync::Arc;

use crate::policy::{Fault, PolicyBackend, for_core};
use crate::stats::CtxStats;
use crate::stats::meter::Meter;
use crate::workload::{JobSpec, Next, Submitter, next_wake, phase_finished, place, start_phase};

/// Knobs of a simulated run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SimOptions {
    /// Seeds every submitter's random choices.
    pub seed: u64,
    /// Overrides the queue's `nomerges`.
    pub nomerges: Nomerges,
    /// Overrides nr_requests (scheduler tags per hardware queue).
    pub nr_requests: Option<u32>,
    /// What happens when the policy fails.
    pub supervision: Supervision,
    /// Record per-request events into the outcome.
    pub record_events: bool,
    /// Keep the per-ctx counters live stats and metrics read (what they cost the core).
    pub metering: bool,
}

impl Default for SimOptions {
    fn default() -> Self {
        Self {
            seed: 1,
            nomerges: Nomerges::All,
            nr_requests: None,
            supervision: Supervision::default(),
            record_events: false,
            metering: false,
        }
    }
}

/// Why a simulated run stopped early.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The jobs do not fit the device.
    #[error("{0}")]
    Layout(String),
    /// The policy refused to start.
    #[error("policy failed to start: {0}")]
    Start(#[from] StartError),
    /// The policy failed during the run.
    #[error("at {at_ms:.3} ms of virtual time: {fault}")]
    Fault {
        /// Virtual time of the fault.
        at_ms: f64,
        /// The fault.
        fault: Fault,
    },
    /// The policy keeps requests without dispatching them or asking to be woken.
    #[error(
        "at {at_ms:.3} ms of virtual time the run cannot progress: the policy holds {queued} requests, none are on the device, and it asked for no wake-up"
    )]
    Stalled {
        /// Virtual time.
        at_ms: f64,
        /// Requests the policy holds.
        queued: usize,
    },
    /// A driver bug.
    #[error(transparent)]
    Driver(#[from] UnknownCompletion),
}

/// Makes a policy instance when it is needed.
pub type PolicyMaker = Box<dyn FnOnce() -> Result<Box<dyn PolicyBackend>, String> + Send>;

/// A hot swap scheduled in virtual time (`--swap-at 2s:cfq`).
pub struct Swap {
    /// When.
    pub at_ns: u64,
    /// What was asked for, for the report.
    pub label: String,
    /// Makes the new policy (from a compiled component, ~5 µs), at the time of the swap.
    pub policy: PolicyMaker,
    /// Its tunables.
    pub settings: Vec<(String, i64)>,
}

impl std::fmt::Debug for Swap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Swap")
            .field("at_ns", &self.at_ns)
            .field("label", &self.label)
            .finish_non_exhaustive()
    }
}

/// Runs `jobs` on a fresh device from `device` with `policy`.
///
/// `progress` is called now and then with the virtual time, for progress displays.
///
/// # Errors
/// A [`SimError`] naming what stopped the run.
pub fn run(
    jobs: &[JobSpec],
    device: &DeviceSpec,
    policy: Box<dyn PolicyBackend>,
    settings: &[(String, i64)],
    options: SimOptions,
    progress: &mut dyn FnMut(u64),
) -> Result<Outcome, SimError> {
    run_swapping(
        jobs,
        device,
        policy,
        settings,
        options,
        Vec::new(),
        progress,
    )
}

/// As [`run`], with hot swaps at set virtual times.
///
/// # Errors
/// A [`SimError`] naming what stopped the run.
pub fn run_swapping(
    jobs: &[JobSpec],
    device: &DeviceSpec,
    mut policy: Box<dyn PolicyBackend>,
    settings: &[(String, i64)],
    options: SimOptions,
    mut swaps: Vec<Swap>,
    progress: &mut dyn FnMut(u64),
) -> Result<Outcome, SimError> {
    // Latest first, so the next one due is popped from the end.
    swaps.sort_by_key(|s| std::cmp::Reverse(s.at_ns));
    let mut model = device.build();
    let geometry = model.geometry();
    let mut config = Config::for_device(
        geometry.hw_queues,
        geometry.queue_depth,
        geometry.max_sectors,
    );
    config.nomerges = options.nomerges;
    if let Some(n) = options.nr_requests {
        config.nr_requests = n.max(1);
    }
    let info = policy.info().map_err(StartError::Fault)?;
    // Metering times every policy call, as live stats and metrics would.
    let clock = options
        .metering
        .then(|| Arc::new(std::sync::atomic::AtomicU64::new(0)));
    let (policy, fallback) = for_core(policy, clock.as_ref());
    let mut core = Core::new(config, policy, settings, fallback)?;
    core.supervise(options.supervision);
    core.record_events(options.record_events);
    let placements = place(jobs, geometry.capacity_sectors).map_err(SimError::Layout)?;
    let submitters = placements
        .into_iter()
        .enumerate()
        .map(|(ctx, placement)| {
            Submitter::new(ctx as u32, &jobs[placement.job], placement, options.seed)
        })
        .collect();
    let mut sim = Sim {
        core,
        model: model.as_mut(),
        submitters,
        stats: Vec::new(),
        now: 0,
        next_bio: 0,
        phase: 0,
        swaps,
        swapped: Vec::new(),
        clock,
        meter: options.metering.then(Meter::default),
    };
    sim.stats = vec![CtxStats::default(); sim.submitters.len()];
    sim.start_phase(0);
    sim.run_to_end(progress)?;
    // Swaps scheduled after the last I/O are reported, not silently dropped.
    while let Some(swap) = sim.swaps.pop() {
        let end_ms = sim.now as f64 / 1e6;
        sim.swapped.push(SwapRecord {
            at_ns: swap.at_ns,
            to: swap.label,
            result: Err(format!("not made: the run ended at {end_ms:.3} ms")),
            stall_ns: 0,
        });
    }
    let submitters = sim
        .submitters
        .iter()
        .map(|s| SubmitterSummary::of(s, sim.now))
        .collect();
    let mut events = Vec::new();
    sim.core.take_events(&mut events);
    Ok(Outcome {
        stats: sim.stats,
        submitters,
        core: sim.core.stats(),
        geometry,
        config,
        policy: info,
        end_ns: sim.now,
        verified_blocks: 0,
        ejections: sim.core.ejections().to_vec(),
        swaps: sim.swapped,
        events,
    })
}

struct Sim<'a> {
    core: Core,
    model: &'a mut dyn DeviceModel,
    submitters: Vec<Submitter>,
    stats: Vec<CtxStats>,
    now: u64,
    next_bio: u64,
    phase: u32,
    /// Swaps still to come, latest first.
    swaps: Vec<Swap>,
    swapped: Vec<SwapRecord>,
    /// Where policy calls are timed, when metering.
    clock: Option<Arc<std::sync::atomic::AtomicU64>>,
    /// Per-ctx counters as live stats and metrics keep them, when metering.
    meter: Option<Meter>,
}

impl Sim<'_> {
    fn run_to_end(&mut self, progress: &mut dyn FnMut(u64)) -> Result<(), SimError> {
        let mut steps = 0u64;
        loop {
            steps += 1;
            if steps.is_multiple_of(4096) {
                progress(self.now);
            }
            self.step()?;
            if self.phase_finished() {
                self.phase += 1;
                if !self.start_phase(self.phase) {
                    return Ok(());
                }
                continue;
            }
            match self.next_time() {
                Some(t) => self.now = self.now.max(t),
                None if self.core.starve(self.now).map_err(|f| self.fault(f))? => {
                    self.drain_actions();
                }
                None => {
                    return Err(SimError::Stalled {
                        at_ms: self.now as f64 / 1e6,
                        queued: self.core.queued_in_policy(),
                    });
                }
            }
        }
    }

    /// Everything that happens at `now`: device completions, new bios, policy dispatch.
    fn step(&mut self) -> Result<(), SimError> {
        let now = self.now;
        while self.swaps.last().is_some_and(|s| s.at_ns <= now) {
            if let Some(swap) = self.swaps.pop() {
                self.swap(swap);
            }
        }
        while let Some((id, status)) = self.model.poll(now) {
            self.core.complete(now, id, status)?;
        }
        self.drain_actions();
        for i in 0..self.submitters.len() {
            if self.submitters[i].placement.phase != self.phase || self.submitters[i].is_finished()
            {
                continue;
            }
            while let Next::Issue(bio) = self.submitters[i].next(now, self.next_bio) {
                self.next_bio += 1;
                self.core
                    .submit(now, bio)
                    .map_err(|fault| self.fault(fault))?;
            }
        }
        self.core.run(now).map_err(|fault| self.fault(fault))?;
        self.drain_actions();
        for s in &mut self.submitters {
            if s.placement.phase == self.phase {
                s.settle(now);
            }
        }
        Ok(())
    }

    /// Swaps the policy at a batch boundary; a refused swap leaves the old one running.
    fn swap(&mut self, swap: Swap) {
        let started = std::time::Instant::now();
        let result = (swap.policy)()
            .map(|policy| match &self.clock {
                Some(clock) => crate::policy::timed(policy, clock),
                None => policy,
            })
            .and_then(|policy| {
                self.core
                    .replace_policy(self.now, policy, &swap.settings)
                    .map_err(|e| e.to_string())
            })
            .map_err(|why| format!("refused, the old policy stays: {why}"));
        self.swapped.push(SwapRecord {
            at_ns: self.now,
            to: swap.label,
            result,
            stall_ns: started.elapsed().as_nanos() as u64,
        });
    }

    fn drain_actions(&mut self) {
        while let Some(action) = self.core.poll_action() {
            match action {
                Action::Dispatch {
                    id,
                    op,
                    sector,
                    sectors,
                    ..
                } => {
                    self.model.submit(
                        self.now,
                        DeviceRequest {
                            id,
                            op,
                            sector,
                            sectors,
                        },
                    );
                }
                Action::Complete(done) => {
                    let ctx = done.ctx as usize;
                    if let Some(meter) = &mut self.meter {
                        meter.record_done(&done);
                    }
                    self.stats[ctx].record(
                        self.now,
                        done.op,
                        done.sectors,
                        (done.latency_ns, done.sched_ns),
                        done.status,
                    );
                    self.submitters[ctx].on_complete(self.now);
                }
            }
        }
    }

    /// The earliest future event: a device completion, a policy timer, a paced submitter or a
    /// runtime ending.
    fn next_time(&self) -> Option<u64> {
        let device_or_timer = [
            self.model.next_event(),
            self.core.poll_timeout(),
            self.swaps.last().map(|s| s.at_ns),
        ]
        .into_iter()
        .flatten();
        let submitters = next_wake(&self.submitters, self.phase, self.now, true);
        device_or_timer.chain(submitters).min()
    }

    fn phase_finished(&self) -> bool {
        phase_finished(&self.submitters, self.phase)
    }

    /// Starts the submitters of `phase`; false iff there are none.
    fn start_phase(&mut self, phase: u32) -> bool {
        start_phase(&mut self.submitters, &mut self.stats, phase, self.now)
    }

    fn fault(&self, fault: Fault) -> SimError {
        SimError::Fault {
            at_ms: self.now as f64 / 1e6,
            fault,
        }
    }
}
