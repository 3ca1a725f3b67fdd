//! The simulator: a device model as the engine's backend, in virtual time. Time moves only
//! when the engine waits, to the next completion, timer or paced issue; nothing reads a
//! clock, so a seed fixes the result.

use crate::backend::sim::{DeviceSpec, Faulty, HORIZON_NS, SimBackend};
use crate::core::{Bio, StartError};
use crate::engine::{self, Done, Lane, ScheduledSwap};
use crate::frontend::RunError;
use crate::frontend::jobs::feed::{BioWork, Jobs};
use crate::frontend::jobs::{JobSpec, Submitter, place};
use crate::frontend::outcome::Outcome;
use crate::frontend::plan::{EngineParts, RunPlan};
use crate::observe::stats::CtxStats;
use crate::policy::PolicyBackend;

/// Simulated bios are numbers in issue order, and finishing one is recording it.
struct Numbered(u64);

impl BioWork for Numbered {
    type Error = RunError;

    fn next_id(&mut self, _ctx: usize) -> Option<u64> {
        Some(self.0)
    }

    fn issued(&mut self, _bio: &Bio) {
        self.0 += 1;
    }

    fn complete(&mut self, done: &Done, stats: &mut CtxStats, now: u64) -> Result<bool, RunError> {
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
/// A [`RunError`] naming what stopped the run.
pub fn run(
    jobs: &[JobSpec],
    device: &DeviceSpec,
    policy: Box<dyn PolicyBackend>,
    settings: &[(String, i64)],
    plan: &RunPlan,
    progress: &mut dyn FnMut(u64),
) -> Result<Outcome, RunError> {
    run_swapping(jobs, device, policy, settings, plan, Vec::new(), progress)
}

/// As [`run`], with hot swaps at set virtual times.
///
/// # Errors
/// A [`RunError`] naming what stopped the run.
pub fn run_swapping(
    jobs: &[JobSpec],
    device: &DeviceSpec,
    mut policy: Box<dyn PolicyBackend>,
    settings: &[(String, i64)],
    plan: &RunPlan,
    swaps: Vec<ScheduledSwap>,
    progress: &mut dyn FnMut(u64),
) -> Result<Outcome, RunError> {
    let mut model = device.build();
    if !plan.faults.is_empty() {
        model = Box::new(Faulty::new(model, plan.faults));
    }
    let geometry = model.geometry();
    let config = plan.queue.config(
        geometry.hw_queues,
        geometry.queue_depth,
        geometry.max_sectors,
        geometry.rotational,
    );
    let info = policy.info().map_err(StartError::Fault)?;
    let mut lane = Lane::new(
        device.name().to_owned(),
        policy,
        &plan.lane_setup(config, settings),
    )?;
    let placements = place(jobs, geometry.capacity_sectors).map_err(RunError::Layout)?;
    within_horizon(jobs).map_err(RunError::Layout)?;
    let submitters: Vec<Submitter> = placements
        .into_iter()
        .enumerate()
        .map(|(ctx, placement)| {
            Submitter::new(ctx as u32, &jobs[placement.job], placement, plan.seed)
        })
        .collect();
    if let Some(throttle) = super::throttle_for(jobs, &submitters) {
        lane.core.set_throttle(throttle);
    }
    let backend = SimBackend::new(model.as_mut());
    let parts = EngineParts {
        swaps,
        ..EngineParts::default()
    };
    let mut engine = plan.engine(backend, vec![lane], parts);
    let mut frontend = Jobs::new(submitters, Numbered(0), Some(progress));
    frontend.start(0);
    engine::drive(&mut engine, &mut frontend)?;
    let end_ns = engine.now();
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
        sets: finished.sets,
        groups: finished.groups,
        events: finished.events,
    })
}
