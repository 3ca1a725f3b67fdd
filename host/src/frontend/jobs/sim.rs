//! The simulator: a device model as the engine's backend, in virtual time. Time moves only
//! when the engine waits, to the next completion, timer or paced issue; nothing reads a
//! clock, so a seed fixes the result.

use crate::backend::sim::{DeviceSpec, FaultPlan, Faulty, HORIZON_NS, PastHorizon, SimBackend};
use crate::core::{Bio, Config, Nomerges, StartError, Supervision, UnknownCompletion};
use crate::engine::{self, Backend, Done, Engine, Lane, LaneSetup, ScheduledSwap, Stop};
use crate::frontend::jobs::feed::{BioWork, Jobs};
use crate::frontend::jobs::{JobSpec, Submitter, place};
use crate::frontend::outcome::Outcome;
use crate::observe::stats::CtxStats;
use crate::policy::{Fault, PolicyBackend};

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
    /// How the device fails (nothing, by default).
    pub faults: FaultPlan,
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
            faults: FaultPlan::default(),
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
    /// Virtual time ran out.
    #[error(transparent)]
    PastHorizon(#[from] PastHorizon),
    /// A bio no one device could take (a front-end bug).
    #[error("{0}")]
    Unrouted(String),
}

impl From<Stop> for SimError {
    fn from(stop: Stop) -> Self {
        match stop {
            Stop::Fault { at_ns, fault, .. } => Self::Fault {
                at_ms: at_ns as f64 / 1e6,
                fault,
            },
            Stop::Stalled { at_ns, queued } => Self::Stalled {
                at_ms: at_ns as f64 / 1e6,
                queued,
            },
            Stop::Driver(bug) => Self::Driver(bug),
            straddle @ Stop::Straddles { .. } => Self::Unrouted(straddle.to_string()),
        }
    }
}

/// Simulated bios are numbers in issue order, and finishing one is recording it.
struct Numbered(u64);

impl BioWork for Numbered {
    type Error = SimError;

    fn next_id(&mut self, _ctx: usize) -> Option<u64> {
        Some(self.0)
    }

    fn issued(&mut self, _bio: &Bio) {
        self.0 += 1;
    }

    fn complete(&mut self, done: &Done, stats: &mut CtxStats, now: u64) -> Result<bool, SimError> {
        let bio = &done.bio;
        stats.record(
            now,
            bio.op,
            bio.sectors,
            (bio.latency_ns, bio.sched_ns),
            bio.status,
        );
        Ok(false)
    }
}

/// Refuses a job whose runtime, ramp or think time alone passes the end of virtual time.
fn within_horizon(jobs: &[JobSpec]) -> Result<(), String> {
    for job in jobs {
        let runtime = job.runtime_ns.unwrap_or(0).saturating_add(job.ramp_ns);
        for (what, ns) in [
            ("runtime + ramp_time", runtime),
            ("thinktime", job.thinktime_ns),
        ] {
            if ns > HORIZON_NS {
                return Err(format!(
                    "{}: job '{}': {what} is {:.1} days; a simulated run ends at 100 days of virtual time",
                    job.location,
                    job.name,
                    ns as f64 / 86_400e9
                ));
            }
        }
    }
    Ok(())
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
    swaps: Vec<ScheduledSwap>,
    progress: &mut dyn FnMut(u64),
) -> Result<Outcome, SimError> {
    let mut model = device.build();
    if !options.faults.is_empty() {
        model = Box::new(Faulty::new(model, options.faults));
    }
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
    let setup = LaneSetup {
        config,
        settings,
        supervision: options.supervision,
        record_events: options.record_events,
        // Metering times every policy call, as live stats and metrics would.
        metering: options.metering,
    };
    let lane = Lane::new(device.name().to_owned(), policy, &setup)?;
    let placements = place(jobs, geometry.capacity_sectors).map_err(SimError::Layout)?;
    within_horizon(jobs).map_err(SimError::Layout)?;
    let submitters: Vec<Submitter> = placements
        .into_iter()
        .enumerate()
        .map(|(ctx, placement)| {
            Submitter::new(ctx as u32, &jobs[placement.job], placement, options.seed)
        })
        .collect();
    let backend = SimBackend::new(model.as_mut());
    let mut engine = Engine::new(backend, vec![lane]).with_swaps(swaps);
    let mut frontend = Jobs::new(submitters, Numbered(0), Some(progress));
    frontend.start(0);
    engine::drive(&mut engine, &mut frontend)?;
    let end_ns = engine.backend.now();
    let (ran, _) = frontend.finish(end_ns);
    let finished = engine.finish(end_ns);
    Ok(Outcome {
        stats: ran.stats,
        submitters: ran.submitters,
        core: finished.core,
        geometry,
        config,
        policy: info,
        end_ns,
        verified_blocks: 0,
        ejections: finished.ejections,
        swaps: finished.swaps,
        events: finished.events,
    })
}
