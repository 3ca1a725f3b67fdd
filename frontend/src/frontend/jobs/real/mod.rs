//! Jobs on real files and block devices: the same core and submitters as the simulator,
//! on the monotonic clock, over the io_uring backend ([`RingBackend`]).
//!
//! Each device (`--device a:b`) is a lane with its own core and policy instance; blocks are
//! striped across devices by block number. Two ways to feed the engine:
//! - inline (the default): the submitters are state machines on the ring's thread
//!   ([`Jobs`]), as one fio job thread runs its own I/O, so a bio costs no cross-thread
//!   hand-off;
//! - threads (`--rq-affinity N`): each clone is a thread that pushes bios to the ring's
//!   thread, and the kernel's rq_affinity decides where completion work runs
//!   ([`crate::core::RqAffinity`]).

mod threads;
mod work;

use std::ops::Range;
use std::path::PathBuf;
use std::sync::Mutex;

use crate::backend::ring::{MAX_SECTORS, OpenRules, RingBackend, Target};
use crate::backend::sim::Geometry;
use crate::core::{Config, StartError};
use crate::engine::{self, Engine, Lane, Striping};
use crate::frontend::RunError;
use crate::frontend::jobs::feed::{Jobs, JobsRan};
use crate::frontend::jobs::{Direction, JobSpec, Placement, Submitter, extent_bytes, place};
use crate::frontend::outcome::{Outcome, TargetSummary};
use crate::frontend::plan::{EngineParts, RunPlan};
use crate::policy::PolicyBackend;
use crate::verify::{Ledger, interval_for};

use crate::policy::WasmRuntime;

/// A finished real run: the report's outcome and the targets it used.
#[derive(Debug)]
pub struct RealOutcome {
    /// What the reports print.
    pub outcome: Outcome,
    /// Per device: path, kind, size, whether it was created.
    pub targets: Vec<TargetSummary>,
    /// The kernel accepted the buffer arena as fixed buffers.
    pub fixed_buffers: bool,
    /// How many times the ring found I/O finished: the completions over it are how many
    /// the device returns at once.
    pub completion_instants: u64,
}

/// Before jobs that read: a file this run created is written whole first, as fio lays out
/// a new file, so reads measure the device and not holes; an existing file with holes in
/// the range the jobs use is named in a warning (its holes' reads never reach the device).
///
/// # Errors
/// Laying a new file out failed.
fn lay_out_or_warn(
    jobs: &[JobSpec],
    targets: &[Target],
    need: u64,
    seed: u64,
) -> Result<(), RunError> {
    if jobs.iter().all(|j| j.direction == Direction::Write) {
        return Ok(());
    }
    for target in targets {
        if target.created {
            eprintln!(
                "schedhost: laying out {} ({} MiB), as fio does, so that reads reach the device",
                target.path.display(),
                target.capacity >> 20
            );
            target.lay_out(seed).map_err(|source| RunError::Ring {
                action: "laying out the new file",
                source,
            })?;
        } else if let Some(at) = target.first_hole(need) {
            tracing::warn!(
                "{} has a hole at byte {at} within the range the jobs use: reads of a hole \
                 never reach the device, so they measure nothing (write the file first, or \
                 let a run create it)",
                target.path.display()
            );
        }
    }
    Ok(())
}

/// Runs `jobs` on the devices at `paths`, one policy instance from `policies` per device.
///
/// # Errors
/// A [`RunError`] naming what stopped the run.
pub fn run(
    jobs: &[JobSpec],
    paths: &[PathBuf],
    policies: Vec<Box<dyn PolicyBackend>>,
    settings: &[(String, i64)],
    plan: &RunPlan,
) -> Result<RealOutcome, RunError> {
    run_controlled(jobs, paths, policies, settings, plan, None)
}

/// As [`run`], listening on a control socket (`--control`) for swaps and tunables; `runtime`
/// compiles the policies swapped in.
///
/// # Errors
/// A [`RunError`] naming what stopped the run.
pub fn run_controlled(
    jobs: &[JobSpec],
    paths: &[PathBuf],
    policies: Vec<Box<dyn PolicyBackend>>,
    settings: &[(String, i64)],
    plan: &RunPlan,
    control: Option<(&std::path::Path, &WasmRuntime)>,
) -> Result<RealOutcome, RunError> {
    let placements = place(jobs, u64::MAX).map_err(RunError::Layout)?;
    let striping = striping_for(jobs, &placements, paths.len()).map_err(RunError::Layout)?;
    let need = extent_bytes(&placements);
    let rules = OpenRules {
        writes: jobs.iter().any(|j| j.direction != Direction::Read),
        allow_overwrite: plan.ring.allow_overwrite,
        direct: jobs.iter().any(|j| j.direct),
    };
    let mut targets = paths
        .iter()
        .map(|p| Target::open(p, need, rules))
        .collect::<Result<Vec<_>, _>>()?;
    if rules.direct {
        check_alignment(jobs, &placements, &targets)?;
    }
    lay_out_or_warn(jobs, &targets, need, plan.seed)?;
    // Each device's own queue; the report's is the first's.
    let config_for = |t: &Target| {
        plan.queue
            .config(1, plan.queue.queue_depth, MAX_SECTORS, t.rotational)
    };
    let mut info = None;
    let mut lanes = Vec::new();
    for (mut policy, target) in policies.into_iter().zip(&targets) {
        if info.is_none() {
            info = Some(policy.info().map_err(StartError::Fault)?);
        }
        lanes.push(Lane::new(
            target.path.display().to_string(),
            policy,
            &plan.lane_setup(config_for(target), settings),
        )?);
    }
    let config = targets.first().map_or_else(
        || {
            plan.queue
                .config(1, plan.queue.queue_depth, MAX_SECTORS, true)
        },
        config_for,
    );
    let Some(policy) = info else {
        return Err(RunError::Layout("no device given".into()));
    };
    let submitters: Vec<Submitter> = placements
        .into_iter()
        .enumerate()
        .map(|(ctx, placement)| {
            Submitter::new(ctx as u32, &jobs[placement.job], placement, plan.seed)
        })
        .collect();
    if let Some(throttle) = super::throttle_for(jobs, &submitters) {
        // One throttle per device would multiply a group's limit by the devices.
        if lanes.len() > 1 {
            return Err(RunError::Layout(
                "--group limits apply to runs on one device; several were given".into(),
            ));
        }
        if let Some(lane) = lanes.first_mut() {
            lane.core.set_throttle(throttle);
        }
    }
    let (slot_lens, slots) = buffer_slots(jobs, &submitters)?;
    let mut backend = crate::frontend::ring::backend(plan, &targets, &slot_lens)?;
    let run = Run {
        jobs,
        names: targets
            .iter()
            .map(|t| t.path.display().to_string())
            .collect(),
        ledger: Mutex::new(Ledger::new(interval_for(jobs.iter().map(|j| j.bs)))),
        slots,
        ctx_jobs: submitters.iter().map(|s| s.placement.job).collect(),
    };
    // Submitter threads and the control socket wake the ring through one eventfd.
    let notifier = if plan.ring.threads.is_some() || control.is_some() {
        Some(crate::frontend::ring::notifier(&mut backend)?)
    } else {
        None
    };
    let control = match (control, &notifier) {
        (Some(control), Some(notifier)) => Some(crate::frontend::ring::control(
            control,
            lanes.len(),
            notifier,
        )?),
        _ => None,
    };
    // Set up: from here on, files the run created hold its data and stay.
    targets.iter_mut().for_each(Target::keep);
    backend.restart_clock();
    let ring = RingHandles {
        clock: backend.clock(),
        slots: backend.slots(),
        fixed_buffers: backend.fixed_buffers(),
    };
    let parts = EngineParts {
        striping: Some(striping),
        control,
        swaps: Vec::new(),
    };
    let mut engine = plan.engine(backend, lanes, parts);
    let ran = match (plan.ring.threads, notifier) {
        (Some(mode), Some(notifier)) => {
            threads::run(&run, &mut engine, &ring, submitters, mode, notifier)?
        }
        _ => {
            let work = work::Leased::new(&run, ring.slots.clone());
            let mut frontend = Jobs::new(submitters, work, None);
            frontend.start(0);
            engine::drive(&mut engine, &mut frontend)?;
            let end_ns = engine.now();
            (frontend.finish(end_ns).0, end_ns)
        }
    };
    Ok(outcome(
        ran,
        &mut engine,
        &targets,
        config,
        policy,
        ring.fixed_buffers,
    ))
}

/// What the ways of running take from the ring before the engine owns it: its clock's
/// start, access to the buffer arena, and whether the kernel took the buffers as fixed.
struct RingHandles {
    clock: std::time::Instant,
    slots: crate::backend::ring::SlotAccess,
    fixed_buffers: bool,
}

/// What both ways of running share: the jobs, the devices' names, the ledger, and which
/// buffer slots belong to which submitter.
struct Run<'a> {
    jobs: &'a [JobSpec],
    names: Vec<String>,
    ledger: Mutex<Ledger>,
    /// Per submitter, its slots: one per bio it may have in flight.
    slots: Vec<Range<u32>>,
    /// Per submitter, the index of its job.
    ctx_jobs: Vec<usize>,
}

/// The most memory the buffer arena may take: the sum over clones of iodepth × their
/// largest I/O. Past it a run is refused up front, naming the limit.
pub const ARENA_LIMIT_BYTES: u64 = 2 << 30;

/// One buffer slot per bio each submitter may have in flight, as long as its longest bio:
/// `bs` for a job, the longest recorded I/O for a replayed stream, so no I/O is ever cut
/// to fit its buffer.
///
/// # Errors
/// The slots would take more than [`ARENA_LIMIT_BYTES`].
fn buffer_slots(
    jobs: &[JobSpec],
    submitters: &[Submitter],
) -> Result<(Vec<usize>, Vec<Range<u32>>), RunError> {
    let mut lens = Vec::new();
    let mut ranges = Vec::new();
    let mut total = 0u64;
    for s in submitters {
        let job = &jobs[s.placement.job];
        let len = job
            .replay
            .as_ref()
            .map_or(u64::from(job.largest_bs()), |r| r.largest_io_bytes());
        total = total.saturating_add(len.saturating_mul(u64::from(job.iodepth)));
        if total > ARENA_LIMIT_BYTES {
            return Err(RunError::Layout(format!(
                "job '{}': its buffers (iodepth {} × {len} bytes, with the jobs before it) would take more than the {} MiB buffer limit; lower iodepth, bs or the trace's largest I/O",
                job.name,
                job.iodepth,
                ARENA_LIMIT_BYTES >> 20
            )));
        }
        let first = lens.len() as u32;
        // Below the limit, so within usize.
        lens.extend(std::iter::repeat_n(len as usize, job.iodepth as usize));
        ranges.push(first..lens.len() as u32);
    }
    Ok((lens, ranges))
}

/// The report of a run that ended at `end_ns`.
fn outcome(
    (ran, end_ns): (JobsRan, u64),
    engine: &mut Engine<RingBackend>,
    targets: &[Target],
    config: Config,
    policy: schedhost_sdk::Info,
    fixed_buffers: bool,
) -> RealOutcome {
    let finished = engine.finish(end_ns);
    if engine.backend().rt_refused() {
        tracing::warn!(
            "the kernel refused the real-time I/O priority (it needs CAP_SYS_ADMIN or \
             CAP_SYS_NICE): requests of prioclass=1 reached the device without one"
        );
    }
    let summaries = finished
        .lanes
        .iter()
        .zip(targets)
        .map(|(stats, target)| TargetSummary {
            path: target.path.display().to_string(),
            kind: target.kind.label(),
            capacity: target.capacity,
            created: target.created,
            rotational: target.rotational,
            core: *stats,
        })
        .collect();
    let geometry = Geometry {
        capacity_sectors: targets.iter().map(|t| t.capacity / 512).min().unwrap_or(0),
        hw_queues: 1,
        queue_depth: config.queue_depth,
        max_sectors: config.max_sectors,
        rotational: config.rotational,
    };
    RealOutcome {
        outcome: Outcome {
            stats: ran.stats,
            submitters: ran.submitters,
            core: finished.core,
            geometry,
            config,
            policy,
            end_ns,
            verified_blocks: ran.verified,
            ejections: finished.ejections,
            swaps: finished.swaps,
            sets: finished.sets,
            groups: finished.groups,
            events: finished.events,
        },
        targets: summaries,
        fixed_buffers,
        completion_instants: engine.backend().completion_instants(),
    }
}

/// Every job's blocks and regions must be whole logical blocks of every device (O_DIRECT).
fn check_alignment(
    jobs: &[JobSpec],
    placements: &[Placement],
    targets: &[Target],
) -> Result<(), RunError> {
    for target in targets {
        let name = target.path.display().to_string();
        check_blocks(jobs, placements, &name, target.logical_block).map_err(RunError::Layout)?;
    }
    Ok(())
}

/// How the jobs' I/O is spread over `lanes` devices: in chunks of the least common multiple
/// of the jobs' block sizes, so every I/O lies within one chunk and a block always goes to
/// one device whatever the I/O that reaches it. A job whose offsets are not multiples of its
/// own block size would straddle chunks, and is refused.
fn striping_for(
    jobs: &[JobSpec],
    placements: &[Placement],
    lanes: usize,
) -> Result<Striping, String> {
    if lanes <= 1 {
        return Ok(Striping::single());
    }
    if let Some(job) = jobs.iter().find(|j| !j.bssplit.is_empty()) {
        // Runs of blocks of several sizes would straddle the stripe units.
        return Err(format!(
            "{}: job '{}': bssplit goes to one device; {lanes} were given",
            job.location, job.name
        ));
    }
    if let Some(job) = jobs.iter().find(|j| j.replay.is_some()) {
        // A trace's I/O has any size at any offset: some would straddle two devices.
        return Err(format!(
            "{}: a replayed trace goes to one device; {lanes} were given",
            job.location
        ));
    }
    let mut chunk: u64 = 1;
    for job in jobs {
        let sectors = u64::from(job.bs / 512).max(1);
        chunk = lcm(chunk, sectors)
            .filter(|&c| c <= MAX_STRIPE_SECTORS)
            .ok_or_else(|| {
                format!(
                    "the jobs' block sizes have no common stripe unit of at most {} MiB across {lanes} devices; give them sizes that divide one another",
                    MAX_STRIPE_SECTORS / 2048
                )
            })?;
    }
    for p in placements {
        let job = &jobs[p.job];
        let sectors = u64::from(job.bs / 512).max(1);
        if p.region_start % sectors != 0 {
            return Err(format!(
                "{}: job '{}': across {lanes} devices, I/O is striped in units of {} KiB, so offsets must be multiples of bs={}; clone {} starts at byte {}",
                job.location,
                job.name,
                chunk / 2,
                job.bs,
                p.clone,
                p.region_start * 512
            ));
        }
    }
    Ok(Striping::new(lanes, chunk))
}

/// The largest stripe unit, 1 GiB in sectors.
const MAX_STRIPE_SECTORS: u64 = 1 << 21;

fn lcm(a: u64, b: u64) -> Option<u64> {
    fn gcd(a: u64, b: u64) -> u64 {
        if b == 0 { a } else { gcd(b, a % b) }
    }
    (a / gcd(a, b)).checked_mul(b)
}

/// The O_DIRECT rule for one device with logical block `lb` bytes.
fn check_blocks(
    jobs: &[JobSpec],
    placements: &[Placement],
    device: &str,
    lb: u32,
) -> Result<(), String> {
    let lb = u64::from(lb.max(1));
    for p in placements {
        let job = &jobs[p.job];
        let sizes = job.block_sizes();
        if sizes.iter().any(|&bs| u64::from(bs) % lb != 0) || (p.region_start * 512) % lb != 0 {
            return Err(format!(
                "job '{}': bs={} and its offsets must be multiples of {device}'s logical block size, {lb} bytes, for O_DIRECT",
                job.name,
                sizes
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join("/")
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frontend::jobs::parse_job_file;

    #[test]
    fn direct_io_refuses_blocks_smaller_than_the_logical_block() {
        let jobs = parse_job_file("t.fio", "[a]\nbs=512\nsize=1m\n").unwrap();
        let placements = place(&jobs, u64::MAX).unwrap();
        assert_eq!(check_blocks(&jobs, &placements, "/dev/x", 512), Ok(()));
        let err = check_blocks(&jobs, &placements, "/dev/x", 4096).unwrap_err();
        assert!(err.contains("job 'a': bs=512"), "{err}");
        assert!(
            err.contains("/dev/x's logical block size, 4096 bytes"),
            "{err}"
        );
        let offset = parse_job_file("t.fio", "[b]\nbs=4k\noffset=2k\nsize=1m\n").unwrap();
        let placements = place(&offset, u64::MAX).unwrap();
        assert!(check_blocks(&offset, &placements, "/dev/x", 4096).is_err());
    }
}
