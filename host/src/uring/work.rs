//! Completion work for one bio: checking its data and recording it. This is what
//! rq_affinity moves between threads; preparing a verified write is its counterpart on the
//! submitting side.

use std::sync::{Mutex, PoisonError};

use schedhost_sdk::Op;

use super::RealError;
use super::devices::Finished;
use crate::stats::CtxStats;
use crate::verify::{Expect, Ledger, check, stamp};
use crate::workload::{Direction, JobSpec};

/// What was written where on each device, shared by the threads that write and check.
pub(super) type Ledgers = [Mutex<Ledger>];

fn lock(ledger: &Mutex<Ledger>) -> std::sync::MutexGuard<'_, Ledger> {
    // A thread that panicked while holding it left a consistent map: each update is one
    // field at a time on a value the panic did not touch.
    ledger.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Stamps `buf` for a verified write at `offset`; returns the write's generation.
pub(super) fn prepare_write(ledger: &Mutex<Ledger>, buf: &mut [u8], offset: u64) -> u32 {
    let generation = lock(ledger).begin_write(offset);
    stamp(buf, offset, generation);
    generation
}

/// The completion work of `finished`, whose buffer holds `data`: verification when the job
/// asks for it, then the statistics. Returns whether data was checked.
///
/// # Errors
/// The data did not verify.
pub(super) fn complete(
    job: &JobSpec,
    ledgers: &Ledgers,
    device: &str,
    finished: &Finished,
    data: &[u8],
    stats: &mut CtxStats,
    now_ns: u64,
) -> Result<bool, RealError> {
    let done = &finished.done;
    let mut checked = false;
    if job.verify {
        let ledger = &ledgers[finished.lane as usize];
        let offset = finished.slot.offset;
        match done.op {
            Op::Write => lock(ledger).end_write(offset, finished.slot.generation, done.status == 0),
            Op::Read if done.status == 0 => {
                let expect = lock(ledger).expect(offset, job.direction == Direction::Read);
                check(data, offset, expect).map_err(|mismatch| RealError::Verify {
                    path: device.to_owned(),
                    mismatch,
                })?;
                checked = expect != Expect::Nothing;
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
