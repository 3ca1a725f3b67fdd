//! Submitters as state machines on the ring's thread: the simulator's loop with the
//! monotonic clock for virtual time and io_uring for the device model. Completion work runs
//! here too, so rq_affinity has nothing to move.

use std::time::{Duration, Instant};

use schedhost_sdk::Op;

use super::buffers::Lease;
use super::devices::Devices;
use super::{Ran, RealError, Run, work};
use crate::control::Control;
use crate::core::Bio;
use crate::outcome::{SubmitterSummary, SwapRecord};
use crate::stats::CtxStats;
use crate::workload::{Next, Submitter, next_wake, phase_finished, start_phase};

pub(super) fn run(
    run: &Run<'_>,
    devices: &mut Devices,
    submitters: Vec<Submitter>,
    control: Option<&Control>,
) -> Result<Ran, RealError> {
    let mut driver = Inline {
        control,
        swaps: Vec::new(),
        free: run
            .slots
            .iter()
            .map(|r| r.clone().rev().map(Lease::new).collect())
            .collect(),
        stats: vec![CtxStats::default(); submitters.len()],
        run,
        devices,
        submitters,
        clock: Instant::now(),
        now: 0,
        phase: 0,
        verified: 0,
    };
    driver.run_to_end()?;
    let end_ns = driver.now;
    Ok(Ran {
        swaps: driver.swaps,
        submitters: driver
            .submitters
            .iter()
            .map(|s| SubmitterSummary::of(s, end_ns))
            .collect(),
        stats: driver.stats,
        verified: driver.verified,
        end_ns,
    })
}

struct Inline<'a, 'r> {
    run: &'a Run<'r>,
    control: Option<&'a Control>,
    swaps: Vec<SwapRecord>,
    devices: &'a mut Devices,
    submitters: Vec<Submitter>,
    /// Per submitter, its free buffers.
    free: Vec<Vec<Lease>>,
    stats: Vec<CtxStats>,
    clock: Instant,
    now: u64,
    phase: u32,
    verified: u64,
}

impl Inline<'_, '_> {
    fn elapsed(&self) -> u64 {
        self.clock.elapsed().as_nanos() as u64
    }

    fn run_to_end(&mut self) -> Result<(), RealError> {
        self.clock = Instant::now();
        self.start_phase(0);
        loop {
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
        let clock = self.clock;
        // One clock read per turn where it can be: the reap's, if it reaped anything.
        let reaped_at = self.devices.reap(|| clock.elapsed().as_nanos() as u64)?;
        self.now = reaped_at.unwrap_or_else(|| self.elapsed());
        self.complete_finished()?;
        let now = self.now;
        if let Some(control) = self.control {
            self.devices.serve(control, now, &mut self.swaps)?;
            self.complete_finished()?;
        }
        for i in 0..self.submitters.len() {
            let s = &self.submitters[i];
            if s.placement.phase != self.phase || s.is_finished() {
                continue;
            }
            // A submitter with no free buffer has iodepth bios in flight: nothing to issue.
            while let Some(&lease) = self.free[i].last() {
                let Next::Issue(bio) = self.submitters[i].next(now, lease.bio_id()) else {
                    break;
                };
                self.free[i].pop();
                self.issue(lease, bio)?;
            }
        }
        self.devices.run(now)?;
        self.complete_finished()?;
        self.devices.tick_live(now);
        for s in &mut self.submitters {
            if s.placement.phase == self.phase {
                s.settle(now);
            }
        }
        Ok(())
    }

    /// Hands `bio` (holding buffer `lease`) to its device.
    fn issue(&mut self, lease: Lease, bio: Bio) -> Result<(), RealError> {
        let job = &self.run.jobs[self.submitters[bio.ctx as usize].placement.job];
        let mut generation = 0;
        if bio.op == Op::Write && job.verify {
            let ledger = &self.run.ledgers[self.devices.lane_of(&bio)];
            // SAFETY: the lease came off the submitter's free list: its bio is not in flight.
            let buf = unsafe { self.devices.slot_mut(lease) };
            generation = work::prepare_write(ledger, buf, bio.sector * 512);
        }
        self.devices.submit(self.now, lease, bio, generation)?;
        self.complete_finished()
    }

    /// Completion work for every finished bio, then its submitter hears of it.
    fn complete_finished(&mut self) -> Result<(), RealError> {
        let done = std::mem::take(&mut self.devices.done);
        for finished in &done {
            let ctx = finished.done.ctx as usize;
            let lane = finished.lane as usize;
            let job = &self.run.jobs[self.submitters[ctx].placement.job];
            // SAFETY: the bio finished: no I/O uses its buffer until it is leased again.
            let data = unsafe { self.devices.slot(finished.lease) };
            let checked = work::complete(
                job,
                &self.run.ledgers,
                &self.run.names[lane],
                finished,
                data,
                &mut self.stats[ctx],
                self.now,
            )?;
            self.verified += u64::from(checked);
            self.submitters[ctx].on_complete(self.now);
            self.free[ctx].push(finished.lease);
        }
        let mut done = done;
        done.clear();
        self.devices.done = done;
        Ok(())
    }

    /// Sleeps until a completion or the next timer. While I/O is in flight, runtime ends do
    /// not set a timeout: the next completion notices them, and an unarmed wait is the
    /// cheaper syscall.
    fn wait(&mut self) -> Result<(), RealError> {
        let inflight = self.devices.inflight() > 0;
        let next = self.next_time(!inflight);
        let timeout = next.map(|t| Duration::from_nanos(t.saturating_sub(self.elapsed())));
        // With a control socket the ring also wakes for commands, so it waits there.
        if inflight || (self.control.is_some() && timeout.is_some()) {
            return self.devices.wait(timeout);
        }
        match timeout {
            Some(t) => {
                std::thread::sleep(t);
                Ok(())
            }
            None => {
                let now = self.elapsed();
                if self.devices.starve(now)? {
                    return self.complete_finished();
                }
                Err(RealError::Stalled {
                    at_ms: now as f64 / 1e6,
                    queued: self.devices.queued(),
                })
            }
        }
    }

    /// The earliest policy timer, paced submitter or (with `deadlines`) runtime end.
    fn next_time(&self, deadlines: bool) -> Option<u64> {
        let submitters = next_wake(&self.submitters, self.phase, self.now, deadlines);
        self.devices
            .next_timer()
            .into_iter()
            .chain(submitters)
            .min()
    }

    fn phase_finished(&self) -> bool {
        phase_finished(&self.submitters, self.phase)
    }

    fn start_phase(&mut self, phase: u32) -> bool {
        let now = self.elapsed();
        start_phase(&mut self.submitters, &mut self.stats, phase, now)
    }
}
