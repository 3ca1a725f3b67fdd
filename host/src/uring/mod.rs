//! The real driver: the same core and submitters as the simulator, on the monotonic clock,
//! dispatching to files and block devices through io_uring with O_DIRECT.
//!
//! One thread runs the loop, as one fio job thread runs its own I/O: submitters are state
//! machines on it, so a bio costs no cross-thread hand-off. Each device (`--device a:b`) has
//! its own core and policy instance; blocks are striped across devices by block number. The
//! thread's single ring carries every device's I/O, with registered files and, where the
//! kernel allows, one registered buffer arena for `READ_FIXED`/`WRITE_FIXED`. Merged requests
//! go out as vectored I/O over their bios' buffers.

mod buffers;
mod ring;
mod target;

use std::io;
use std::mem::ManuallyDrop;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use schedhost_sdk::Op;

use crate::core::{
    Action, BioDone, Config, Core, CoreStats, Nomerges, StartError, UnknownCompletion,
};
use crate::device::Geometry;
use crate::outcome::{Outcome, SubmitterSummary};
use crate::policy::{Fault, PolicyBackend};
use crate::stats::CtxStats;
use crate::verify::{Expect, Ledger, Mismatch, check, stamp};
use crate::workload::{Direction, JobSpec, Next, Placement, Submitter, place};

use buffers::Arena;
use ring::{Io, IoKind, Ring, Segments};
pub use target::{OpenRules, Target, TargetError, TargetKind};

/// Driver tags per device unless `--queue-depth` says otherwise: deep enough for any
/// single disk or virtio queue, shallow enough that a policy still has requests to order.
pub const DEFAULT_QUEUE_DEPTH: u32 = 128;

/// Largest request the merge engine builds (1280 KiB, the simulated disks' limit).
const MAX_SECTORS: u32 = 2560;

/// Knobs of a real run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RealOptions {
    /// Seeds every submitter's random choices.
    pub seed: u64,
    /// The queue's `nomerges`.
    pub nomerges: Nomerges,
    /// Overrides nr_requests (scheduler tags per device).
    pub nr_requests: Option<u32>,
    /// Driver tags per device: requests on the kernel at once.
    pub queue_depth: u32,
    /// Writing over an existing file or a block device was allowed.
    pub allow_overwrite: bool,
    /// A kernel thread polls the submission queue (idle timeout, ms).
    pub sqpoll_idle_ms: Option<u32>,
}

impl Default for RealOptions {
    fn default() -> Self {
        Self {
            seed: 1,
            nomerges: Nomerges::All,
            nr_requests: None,
            queue_depth: DEFAULT_QUEUE_DEPTH,
            allow_overwrite: false,
            sqpoll_idle_ms: None,
        }
    }
}

/// Why a real run stopped.
#[derive(Debug, thiserror::Error)]
pub enum RealError {
    /// A target cannot be used.
    #[error(transparent)]
    Target(#[from] TargetError),
    /// The jobs do not fit or do not suit the targets.
    #[error("{0}")]
    Layout(String),
    /// The policy refused to start.
    #[error("policy failed to start: {0}")]
    Start(#[from] StartError),
    /// The policy failed during the run.
    #[error("after {at_ms:.3} ms, the policy for {device}: {fault}")]
    Fault {
        /// Time into the run.
        at_ms: f64,
        /// The device whose policy failed.
        device: String,
        /// The fault.
        fault: Fault,
    },
    /// The policy keeps requests without dispatching them or asking to be woken.
    #[error(
        "after {at_ms:.3} ms the run cannot progress: the policies hold {queued} requests, none are on the device, and none asked for a wake-up"
    )]
    Stalled {
        /// Time into the run.
        at_ms: f64,
        /// Requests the policies hold.
        queued: usize,
    },
    /// Data read back did not match what was written.
    #[error("{path}: {mismatch}")]
    Verify {
        /// The target.
        path: String,
        /// What was wrong.
        mismatch: Mismatch,
    },
    /// io_uring itself failed.
    #[error("io_uring: {action}: {source}")]
    Ring {
        /// What was being done.
        action: &'static str,
        /// The error.
        source: io::Error,
    },
    /// A driver bug.
    #[error(transparent)]
    Driver(#[from] UnknownCompletion),
}

/// A finished real run: the report's outcome and the targets it used.
#[derive(Debug)]
pub struct RealOutcome {
    /// What the reports print.
    pub outcome: Outcome,
    /// Per device: path, kind, size, whether it was created.
    pub targets: Vec<TargetSummary>,
    /// The kernel accepted the buffer arena as fixed buffers.
    pub fixed_buffers: bool,
}

/// One device of a real run.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TargetSummary {
    /// As given.
    pub path: String,
    /// File or block device.
    pub kind: TargetKind,
    /// Bytes.
    pub capacity: u64,
    /// This run created it.
    pub created: bool,
    /// Its scheduler's counters.
    pub core: CoreStats,
}

/// Runs `jobs` on the devices at `paths`, one policy instance from `policies` per device.
///
/// # Errors
/// A [`RealError`] naming what stopped the run.
pub fn run(
    jobs: &[JobSpec],
    paths: &[PathBuf],
    policies: Vec<Box<dyn PolicyBackend>>,
    settings: &[(String, i64)],
    options: RealOptions,
) -> Result<RealOutcome, RealError> {
    let placements = place(jobs, u64::MAX).map_err(RealError::Layout)?;
    let need = placements
        .iter()
        .map(|p| (p.region_start + p.region_sectors) * 512)
        .max()
        .unwrap_or(0);
    let rules = OpenRules {
        writes: jobs.iter().any(|j| j.direction != Direction::Read),
        allow_overwrite: options.allow_overwrite,
        direct: jobs.iter().any(|j| j.direct),
    };
    let targets = paths
        .iter()
        .map(|p| Target::open(p, need, rules))
        .collect::<Result<Vec<_>, _>>()?;
    if rules.direct {
        check_alignment(jobs, &placements, &targets)?;
    }
    let mut config = Config::for_device(1, options.queue_depth, MAX_SECTORS);
    config.nomerges = options.nomerges;
    if let Some(n) = options.nr_requests {
        config.nr_requests = n.max(1);
    }
    let mut info = None;
    let mut lanes = Vec::new();
    for (i, (mut policy, target)) in policies.into_iter().zip(&targets).enumerate() {
        if info.is_none() {
            info = Some(policy.info().map_err(StartError::Fault)?);
        }
        lanes.push(Lane {
            core: Core::new(config, policy, settings)?,
            file: i as u32,
            ledger: Ledger::default(),
            name: target.path.display().to_string(),
        });
    }
    let Some(policy) = info else {
        return Err(RealError::Layout("no device given".into()));
    };
    let submitters: Vec<Submitter> = placements
        .into_iter()
        .enumerate()
        .map(|(ctx, placement)| {
            Submitter::new(ctx as u32, &jobs[placement.job], placement, options.seed)
        })
        .collect();
    let mut driver = Driver::new(jobs, &targets, lanes, submitters, config, options)?;
    driver.run_to_end()?;
    driver.finish(&targets, config, policy)
}

/// Every job's blocks and regions must be whole logical blocks of every device (O_DIRECT).
fn check_alignment(
    jobs: &[JobSpec],
    placements: &[Placement],
    targets: &[Target],
) -> Result<(), RealError> {
    for target in targets {
        let lb = u64::from(target.logical_block);
        for p in placements {
            let job = &jobs[p.job];
            if u64::from(job.bs) % lb != 0 || (p.region_start * 512) % lb != 0 {
                return Err(RealError::Layout(format!(
                    "job '{}': bs={} and its offsets must be multiples of {}'s logical block size, {lb} bytes, for O_DIRECT",
                    job.name,
                    job.bs,
                    target.path.display()
                )));
            }
        }
    }
    Ok(())
}

/// One device: its scheduler and what was written to it.
struct Lane {
    core: Core,
    /// Its index among the ring's registered files.
    file: u32,
    ledger: Ledger,
    name: String,
}

/// The bio lent a buffer slot.
#[derive(Debug, Clone, Copy, Default)]
struct SlotUse {
    offset: u64,
    generation: u32,
}

struct Driver<'a> {
    // Field order matters: the ring is dropped before the arena whose memory it lends to the
    // kernel, after `Drop` drained it.
    ring: Ring,
    /// Freed by `Drop` only once the ring holds no I/O.
    arena: ManuallyDrop<Arena>,
    jobs: &'a [JobSpec],
    lanes: Vec<Lane>,
    submitters: Vec<Submitter>,
    /// Per arena slot, the bio using it.
    slots: Vec<SlotUse>,
    /// Per submitter, its free slots.
    free: Vec<Vec<u32>>,
    stats: Vec<CtxStats>,
    clock: Instant,
    now: u64,
    phase: u32,
    verified: u64,
    finished: Vec<((u32, u64), i32)>,
}

impl Drop for Driver<'_> {
    fn drop(&mut self) {
        // Until the ring is drained the kernel may still write into the arena; if it cannot
        // be drained, leaking the arena is the only safe choice.
        if self.ring.drain() {
            // SAFETY: dropped exactly once, here, and never used after.
            unsafe { ManuallyDrop::drop(&mut self.arena) }
        }
    }
}

impl<'a> Driver<'a> {
    fn new(
        jobs: &'a [JobSpec],
        targets: &[Target],
        lanes: Vec<Lane>,
        submitters: Vec<Submitter>,
        config: Config,
        options: RealOptions,
    ) -> Result<Self, RealError> {
        let mut lens = Vec::new();
        let mut free = Vec::new();
        for s in &submitters {
            let job = &jobs[s.placement.job];
            let first = lens.len() as u32;
            lens.extend(std::iter::repeat_n(job.bs as usize, job.iodepth as usize));
            free.push((first..lens.len() as u32).rev().collect());
        }
        let mut arena = Arena::new(&lens);
        fill_write_pattern(&mut arena, lens.len(), options.seed);
        let fds: Vec<_> = targets.iter().map(Target::raw_fd).collect();
        let depth = config.queue_depth * lanes.len() as u32;
        let entries = depth.clamp(8, 4096).next_power_of_two();
        let mut ring =
            Ring::new(entries, &fds, options.sqpoll_idle_ms).map_err(|source| RealError::Ring {
                action: "setting up the ring",
                source,
            })?;
        let (base, len) = arena.region();
        // SAFETY: the arena outlives the ring's use of it: `Driver::drop` drains the ring
        // before the arena can be freed, and leaks it if the ring cannot be drained.
        let fixed = unsafe { ring.register_buffer(base, len) };
        tracing::debug!(fixed, entries, "io_uring ready");
        let stats = vec![CtxStats::default(); submitters.len()];
        Ok(Self {
            ring,
            arena: ManuallyDrop::new(arena),
            jobs,
            lanes,
            slots: vec![SlotUse::default(); lens.len()],
            free,
            submitters,
            stats,
            clock: Instant::now(),
            now: 0,
            phase: 0,
            verified: 0,
            finished: Vec::new(),
        })
    }

    fn run_to_end(&mut self) -> Result<(), RealError> {
        self.clock = Instant::now();
        self.start_phase(0);
        loop {
            self.now = self.clock.elapsed().as_nanos() as u64;
            self.step()?;
            if self.phase_finished() {
                self.phase += 1;
                if !self.start_phase(self.phase) {
                    return Ok(());
                }
                continue;
            }
            self.wait()?;
        }
    }

    /// Everything due now: completions, new bios, policy dispatch.
    fn step(&mut self) -> Result<(), RealError> {
        self.reap()?;
        let now = self.now;
        for i in 0..self.submitters.len() {
            let s = &self.submitters[i];
            if s.placement.phase != self.phase || s.is_finished() {
                continue;
            }
            loop {
                let slot = self.free[i].last().copied().unwrap_or(u32::MAX);
                let Next::Issue(bio) = self.submitters[i].next(now, u64::from(slot)) else {
                    break;
                };
                self.free[i].pop();
                self.issue(slot, bio)?;
            }
        }
        for l in 0..self.lanes.len() {
            let result = self.lanes[l].core.run(now);
            result.map_err(|fault| self.fault(l, fault))?;
            self.drain_actions(l)?;
        }
        for s in &mut self.submitters {
            if s.placement.phase == self.phase {
                s.settle(now);
            }
        }
        Ok(())
    }

    /// Hands `bio` (using buffer `slot`) to its device's core.
    fn issue(&mut self, slot: u32, bio: crate::core::Bio) -> Result<(), RealError> {
        let lanes = self.lanes.len() as u64;
        let lane = ((bio.sector / u64::from(bio.sectors.max(1))) % lanes) as usize;
        let offset = bio.sector * 512;
        let verify = self.jobs[self.submitters[bio.ctx as usize].placement.job].verify;
        let mut generation = 0;
        if bio.op == Op::Write && verify {
            generation = self.lanes[lane].ledger.begin_write(offset);
            stamp(self.arena.slot_mut(slot as usize), offset, generation);
        }
        self.slots[slot as usize] = SlotUse { offset, generation };
        let now = self.now;
        let result = self.lanes[lane].core.submit(now, bio);
        result.map_err(|fault| self.fault(lane, fault))?;
        self.drain_actions(lane)
    }

    /// Carries out lane `l`'s actions: dispatches go to the ring, completions to submitters.
    fn drain_actions(&mut self, l: usize) -> Result<(), RealError> {
        while let Some(action) = self.lanes[l].core.poll_action() {
            match action {
                Action::Dispatch { id, op, sector, .. } => self.dispatch(l, id, op, sector)?,
                Action::Complete(done) => self.complete_bio(l, done)?,
            }
        }
        Ok(())
    }

    /// Sends request `id` of lane `l` to the kernel over its bios' buffers, in file order.
    fn dispatch(&mut self, l: usize, id: u64, op: Op, sector: u64) -> Result<(), RealError> {
        let kind = match op {
            Op::Read => IoKind::Read,
            Op::Write => IoKind::Write,
            Op::Flush => IoKind::Flush,
            Op::Discard => {
                // Jobs never issue discards; answer as a device without TRIM would.
                let now = self.now;
                self.lanes[l].core.complete(now, id, -libc::EOPNOTSUPP)?;
                return Ok(());
            }
        };
        let mut bios: smallvec::SmallVec<[u32; 4]> = self.lanes[l]
            .core
            .request(id)
            .map(|r| r.bios.iter().map(|(_, b)| b.id as u32).collect())
            .unwrap_or_default();
        bios.sort_unstable_by_key(|&slot| self.slots[slot as usize].offset);
        let segments: Segments = bios
            .iter()
            .map(|&slot| self.arena.raw(slot as usize))
            .collect();
        let io = Io {
            file: self.lanes[l].file,
            kind,
            offset: sector * 512,
            segments,
            tag: (l as u32, id),
        };
        // SAFETY: the segments are arena slots lent to this request's bios; the driver touches
        // a slot again only after the request completed (reap), and the arena outlives the
        // ring's I/O (see `Drop`).
        unsafe { self.ring.start(io) }.map_err(|source| RealError::Ring {
            action: "submitting",
            source,
        })
    }

    /// Completions from the kernel, into their cores.
    fn reap(&mut self) -> Result<(), RealError> {
        let mut finished = std::mem::take(&mut self.finished);
        finished.clear();
        self.ring
            .reap(&mut |tag, status| finished.push((tag, status)))
            .map_err(|source| RealError::Ring {
                action: "resubmitting a short transfer",
                source,
            })?;
        self.now = self.clock.elapsed().as_nanos() as u64;
        for &((lane, id), status) in &finished {
            let now = self.now;
            self.lanes[lane as usize].core.complete(now, id, status)?;
            self.drain_actions(lane as usize)?;
        }
        self.finished = finished;
        Ok(())
    }

    /// A bio finished: check its data, count it, free its buffer, tell its submitter.
    fn complete_bio(&mut self, l: usize, done: BioDone) -> Result<(), RealError> {
        let slot = done.bio as usize;
        let ctx = done.ctx as usize;
        let use_ = self.slots[slot];
        let job = &self.jobs[self.submitters[ctx].placement.job];
        if job.verify {
            match done.op {
                Op::Write => {
                    self.lanes[l]
                        .ledger
                        .end_write(use_.offset, use_.generation, done.status == 0);
                }
                Op::Read if done.status == 0 => {
                    let trust = job.direction == Direction::Read;
                    let expect = self.lanes[l].ledger.expect(use_.offset, trust);
                    check(self.arena.slot(slot), use_.offset, expect).map_err(|mismatch| {
                        RealError::Verify {
                            path: self.lanes[l].name.clone(),
                            mismatch,
                        }
                    })?;
                    self.verified += u64::from(expect != Expect::Nothing);
                }
                _ => {}
            }
        }
        self.stats[ctx]
            .dir_mut(done.op)
            .record(done.sectors, done.latency_ns, done.status);
        self.submitters[ctx].on_complete(self.now);
        self.free[ctx].push(slot as u32);
        Ok(())
    }

    /// Sleeps until a completion or the next timer. While I/O is in flight, runtime ends
    /// do not set a timeout: the next completion notices them, and an unarmed wait is the
    /// cheaper syscall.
    fn wait(&mut self) -> Result<(), RealError> {
        let next = self.next_time(self.ring.inflight() == 0);
        let now = self.clock.elapsed().as_nanos() as u64;
        let timeout = next.map(|t| Duration::from_nanos(t.saturating_sub(now)));
        if self.ring.inflight() > 0 {
            return self.ring.wait(timeout).map_err(|source| RealError::Ring {
                action: "waiting for completions",
                source,
            });
        }
        match timeout {
            Some(t) => {
                std::thread::sleep(t);
                Ok(())
            }
            None => Err(RealError::Stalled {
                at_ms: now as f64 / 1e6,
                queued: self.lanes.iter().map(|l| l.core.queued_in_policy()).sum(),
            }),
        }
    }

    /// The earliest policy timer, paced submitter or (with `deadlines`) runtime end.
    fn next_time(&self, deadlines: bool) -> Option<u64> {
        let timers = self.lanes.iter().filter_map(|l| l.core.poll_timeout());
        let submitters = self
            .submitters
            .iter()
            .filter(|s| s.placement.phase == self.phase && !s.is_finished())
            .flat_map(|s| {
                let end = s.deadline().filter(|&d| deadlines && d > self.now);
                [s.wake_at(self.now), end]
            })
            .flatten();
        timers.chain(submitters).min()
    }

    fn phase_finished(&self) -> bool {
        self.submitters
            .iter()
            .filter(|s| s.placement.phase == self.phase)
            .all(Submitter::is_finished)
    }

    fn start_phase(&mut self, phase: u32) -> bool {
        let now = self.clock.elapsed().as_nanos() as u64;
        let mut any = false;
        for s in self
            .submitters
            .iter_mut()
            .filter(|s| s.placement.phase == phase)
        {
            s.start(now);
            any = true;
        }
        any
    }

    fn fault(&self, lane: usize, fault: Fault) -> RealError {
        RealError::Fault {
            at_ms: self.now as f64 / 1e6,
            device: self.lanes[lane].name.clone(),
            fault,
        }
    }

    fn finish(
        self,
        targets: &[Target],
        config: Config,
        policy: schedhost_sdk::Info,
    ) -> Result<RealOutcome, RealError> {
        let mut core = CoreStats::default();
        let mut summaries = Vec::new();
        for (lane, target) in self.lanes.iter().zip(targets) {
            let stats = lane.core.stats();
            core.add(&stats);
            summaries.push(TargetSummary {
                path: target.path.display().to_string(),
                kind: target.kind,
                capacity: target.capacity,
                created: target.created,
                core: stats,
            });
        }
        let submitters = self
            .submitters
            .iter()
            .map(|s| SubmitterSummary {
                ctx: s.ctx,
                placement: s.placement.clone(),
                started_ns: s.started_ns.unwrap_or(0),
                finished_ns: s.finished_ns.unwrap_or(self.now),
                issued: s.issued,
                completed: s.completed,
            })
            .collect();
        let geometry = Geometry {
            capacity_sectors: targets.iter().map(|t| t.capacity / 512).min().unwrap_or(0),
            hw_queues: 1,
            queue_depth: config.queue_depth,
            max_sectors: config.max_sectors,
        };
        Ok(RealOutcome {
            outcome: Outcome {
                stats: self.stats.clone(),
                submitters,
                core,
                geometry,
                config,
                policy,
                end_ns: self.now,
                verified_blocks: self.verified,
            },
            targets: summaries,
            fixed_buffers: self.ring.has_fixed_buffers(),
        })
    }
}

/// Fills every buffer with pseudo-random bytes once, so unverified writes do not send zero
/// pages (which some devices compress or skip).
fn fill_write_pattern(arena: &mut Arena, slots: usize, seed: u64) {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    for i in 0..slots {
        for chunk in arena.slot_mut(i).chunks_mut(8) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            chunk.copy_from_slice(&x.to_le_bytes()[..chunk.len()]);
        }
    }
}
