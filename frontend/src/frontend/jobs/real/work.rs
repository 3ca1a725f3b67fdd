//! Completion work for one bio: checking its data and recording it. This is what
//! rq_affinity moves between threads; preparing a verified write is its counterpart on the
//! submitting side.

use std::sync::{Mutex, PoisonError};

use schedhost_sdk::Op;

use super::Run;
use crate::backend::ring::{Lease, SlotAccess};
use crate::core::{Bio, BioDone};
use crate::engine::Done;
use crate::frontend::RunError;
use crate::frontend::jobs::feed::BioWork;
use crate::frontend::jobs::{Direction, JobSpec};
use crate::observe::stats::CtxStats;
use crate::verify::Ledger;

/// Where a bio's buffer goes on its device.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct SlotUse {
    pub offset: u64,
}

/// A finished bio, the device it went to, and the buffer it leased.
#[derive(Debug, Clone, Copy)]
pub(super) struct Reaped {
    pub lane: u32,
    pub done: BioDone,
    pub lease: Lease,
    pub slot: SlotUse,
}

/// Per buffer slot, where its bio goes: what verification checks the slot against.
pub(super) struct SlotUses(Vec<SlotUse>);

impl SlotUses {
    pub fn new(slots: usize) -> Self {
        Self(vec![SlotUse::default(); slots])
    }

    /// `bio`, holding `lease`, goes out.
    pub fn lend(&mut self, lease: Lease, bio: &Bio) {
        debug_assert_eq!(bio.id, lease.bio_id());
        self.0[lease.index()] = SlotUse {
            offset: bio.sector * 512,
        };
    }

    /// `done` as completion work sees it.
    pub fn finished(&self, done: &Done) -> Reaped {
        let lease = Lease::of_bio(done.bio.bio);
        Reaped {
            lane: done.lane,
            done: done.bio,
            lease,
            slot: self.0[lease.index()],
        }
    }
}

/// What was written where, shared by the threads that write and check. One for all the
/// devices: striping gives each address one device, so a block read back from the wrong one
/// is caught as stale.
pub(super) type SharedLedger = Mutex<Ledger>;

fn lock(ledger: &Mutex<Ledger>) -> std::sync::MutexGuard<'_, Ledger> {
    // A thread that panicked while holding it left a consistent map: each update is one
    // field at a time on a value the panic did not touch.
    ledger.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Stamps `buf` for a verified write at `offset`.
pub(super) fn prepare_write(ledger: &SharedLedger, buf: &mut [u8], offset: u64) {
    lock(ledger).stamp_write(buf, offset);
}

/// The completion work of `finished`, whose buffer holds `data`: verification when the job
/// asks for it, then the statistics. Returns whether data was checked.
///
/// # Errors
/// The data did not verify.
pub(super) fn complete(
    job: &JobSpec,
    ledger: &SharedLedger,
    device: &str,
    finished: &Reaped,
    data: &[u8],
    stats: &mut CtxStats,
    now_ns: u64,
) -> Result<bool, RunError> {
    let done = &finished.done;
    let mut checked = false;
    if job.verify {
        let offset = finished.slot.offset;
        // The bio's own bytes: its slot may be longer (sized to the submitter's longest bio).
        let data = &data[..(done.sectors as usize * 512).min(data.len())];
        match done.op {
            Op::Write => lock(ledger).finish_write(data, offset, done.status == 0),
            Op::Read if done.status == 0 => {
                let trust_unwritten = job.direction == Direction::Read;
                checked = lock(ledger)
                    .check_read(data, offset, trust_unwritten)
                    .map_err(|mismatch| RunError::Verify {
                        path: device.to_owned(),
                        mismatch,
                    })?;
            }
            _ => {}
        }
    }
    stats.record(
        now_ns,
        done.op,
        done.sectors,
        (done.latency_ns, done.sched_ns),
        done.status,
    );
    Ok(checked)
}

/// The bios of submitters on the ring's thread: each is numbered by the buffer it leases
/// from its submitter's slots, and its completion work runs on that thread too.
pub(super) struct Leased<'a, 'r> {
    run: &'a Run<'r>,
    access: SlotAccess,
    /// Per submitter, its free buffers.
    free: Vec<Vec<Lease>>,
    uses: SlotUses,
}

impl<'a, 'r> Leased<'a, 'r> {
    pub fn new(run: &'a Run<'r>, access: SlotAccess) -> Self {
        Self {
            free: run
                .slots
                .iter()
                .map(|r| r.clone().rev().map(Lease::new).collect())
                .collect(),
            uses: SlotUses::new(run.slots.iter().map(|r| r.len()).sum()),
            run,
            access,
        }
    }
}

impl BioWork for Leased<'_, '_> {
    type Error = RunError;

    /// A submitter with no free buffer has iodepth bios in flight: nothing to issue.
    fn next_id(&mut self, ctx: usize) -> Option<u64> {
        self.free[ctx].last().map(|lease| lease.bio_id())
    }

    fn issued(&mut self, bio: &Bio) {
        let ctx = bio.ctx as usize;
        let Some(lease) = self.free[ctx].pop() else {
            return;
        };
        let job = &self.run.jobs[self.run.ctx_jobs[ctx]];
        if bio.op == Op::Write && job.verify {
            // SAFETY: the lease came off the submitter's free list: its bio is not in flight.
            let buf = unsafe { self.access.slot_mut(lease) };
            prepare_write(&self.run.ledger, buf, bio.sector * 512);
        }
        self.uses.lend(lease, bio);
    }

    fn complete(&mut self, done: &Done, stats: &mut CtxStats, now: u64) -> Result<bool, RunError> {
        let finished = self.uses.finished(done);
        let ctx = done.bio.ctx as usize;
        let lane = done.lane as usize;
        let job = &self.run.jobs[self.run.ctx_jobs[ctx]];
        // SAFETY: the bio finished: no I/O uses its buffer until it is leased again.
        let data = unsafe { self.access.slot(finished.lease) };
        let checked = complete(
            job,
            &self.run.ledger,
            &self.run.names[lane],
            &finished,
            data,
            stats,
            now,
        )?;
        self.free[ctx].push(finished.lease);
        Ok(checked)
    }
}
