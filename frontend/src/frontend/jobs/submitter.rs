//! A submitter: one clone of one job, issuing bios into its own software queue (ctx) as fio's
//! I/O loop would: up to `iodepth` in flight, paced by `rate_iops` and `thinktime`, until its
//! I/O count, size or runtime is reached.

use std::collections::BTreeMap;

use schedhost_sdk::{Op, PrioClass};

use super::distribution::Picker;
use super::job::{ContinueOn, JobSpec, Pattern};
use super::rng::{Permutation, Rng};
use super::stream::Replay;
use crate::core::Bio;

/// Where a clone's I/O goes and when it may run.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Placement {
    /// Index of the job in the job list.
    pub job: usize,
    /// Clone number within the job (0..numjobs).
    pub clone: u32,
    /// First sector of its region.
    pub region_start: u64,
    /// Sectors in its region.
    pub region_sectors: u64,
    /// Reporting group.
    pub group: u32,
    /// Stonewall phase: a phase starts when every earlier one has finished.
    pub phase: u32,
}

/// What a submitter wants to do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Submit this bio now.
    Issue(Bio),
    /// Nothing before this time (rate limit or think time).
    WaitUntil(u64),
    /// `iodepth` bios are in flight; wait for a completion.
    Full,
    /// All I/O issued; wait for what is in flight.
    Draining,
}

/// One job clone.
#[derive(Debug)]
pub struct Submitter {
    /// Its software queue.
    pub ctx: u32,
    /// Where and when.
    pub placement: Placement,
    read_pct: u32,
    block_sectors: u32,
    blocks: u64,
    iodepth: u32,
    io_limit: Option<u64>,
    runtime_ns: Option<u64>,
    ramp_ns: u64,
    /// Pacing: I/Os a second (`rate_iops`) and bytes a second per direction (`rate`).
    rate_iops: Option<u64>,
    rate_bytes: [Option<u64>; 2],
    /// Bytes issued per direction, [read, write], for `rate`.
    issued_dir_bytes: [u64; 2],
    /// The direction of the next I/O, drawn ahead when `rate` paces each direction apart.
    next_op: Option<Op>,
    /// bssplit: each size in blocks, with the cumulative percentage that picks it.
    split: Vec<(u64, u32)>,
    /// bssplit: the bytes `size` allows (fio's size counts bytes).
    bytes_limit: Option<u64>,
    /// Bytes issued so far.
    issued_bytes: u64,
    thinktime_ns: u64,
    write_sync: bool,
    prio_class: PrioClass,
    prio_level: u8,
    /// Blocks written, one bit each in 64-block words, when the job verifies. Sparse: its
    /// memory follows the writes made, not the region's size, which a job file chooses.
    written: Option<BTreeMap<u64, u64>>,
    /// The verify pass's position, once the job's own I/O is done.
    verify_next: Option<u64>,
    /// A replayed stream, whose I/Os replace the generated ones.
    replay: Option<Replay>,
    rng: Rng,
    order: Option<Permutation>,
    /// A skewed random job's draw (it replaces `order`).
    picker: Option<Picker>,
    /// The job's fio logs, if it asked for any.
    log_spec: Option<crate::observe::stats::logs::LogSpec>,
    next_block: u64,
    /// Bios issued.
    pub issued: u64,
    /// Of those, reads of the verify pass.
    pub issued_verify: u64,
    /// Bios completed.
    pub completed: u64,
    inflight: u32,
    start_ns: u64,
    ready_at_ns: u64,
    /// When it started, once it has.
    pub started_ns: Option<u64>,
    /// When its last bio completed.
    pub finished_ns: Option<u64>,
    /// Which failed I/O it carries on after (`continue_on_error`).
    continue_on: ContinueOn,
    /// A bio failed that it does not carry on after: it issues nothing more, as fio ends a
    /// job at its first error.
    halted: bool,
}

impl Submitter {
    /// A submitter for `job` at `placement`, seeded with `seed`.
    pub fn new(ctx: u32, job: &JobSpec, placement: Placement, seed: u64) -> Self {
        // With bssplit, offsets align to the smallest size, and each I/O is a run of them.
        let unit = job
            .bssplit
            .iter()
            .map(|&(bs, _)| bs)
            .min()
            .unwrap_or(job.bs);
        let block_sectors = unit / 512;
        let blocks = (placement.region_sectors / u64::from(block_sectors)).max(1);
        let mut cumulative = 0;
        let split: Vec<(u64, u32)> = job
            .bssplit
            .iter()
            .map(|&(bs, pct)| {
                cumulative += pct;
                (u64::from(bs / unit).clamp(1, blocks), cumulative)
            })
            .collect();
        // fio's size bounds bytes: with one block size that is a count of I/Os.
        let size_ios = job
            .size
            .filter(|_| split.is_empty())
            .map(|s| s / u64::from(job.bs))
            .filter(|_| !job.time_based);
        let bytes_limit = job.size.filter(|_| !split.is_empty() && !job.time_based);
        let io_limit = match (size_ios, job.number_ios) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let io_limit = match &job.replay {
            Some(replay) => Some(replay.ios.len() as u64),
            None => io_limit,
        };
        let mut rng = Rng::new(seed ^ (u64::from(ctx) + 1).wrapping_mul(0xa076_1d64_78bd_642f));
        let random = job.pattern == Pattern::Random;
        let picker = random
            .then(|| Picker::new(job.distribution, blocks, &mut rng))
            .flatten();
        let order = (random && picker.is_none()).then(|| Permutation::new(blocks, &mut rng));
        let prio_class = match job.prioclass {
            Some(1) => PrioClass::Rt,
            Some(2) => PrioClass::Be,
            Some(3) => PrioClass::Idle,
            _ => PrioClass::None,
        };
        Self {
            ctx,
            placement,
            read_pct: job.read_pct(),
            block_sectors,
            blocks,
            iodepth: job.iodepth,
            io_limit,
            runtime_ns: job.runtime_ns,
            ramp_ns: job.ramp_ns,
            rate_iops: job.rate_iops,
            rate_bytes: job.rate_bytes,
            issued_dir_bytes: [0; 2],
            next_op: None,
            split,
            bytes_limit,
            issued_bytes: 0,
            thinktime_ns: job.thinktime_ns,
            write_sync: job.direct,
            prio_class,
            prio_level: job.prio.unwrap_or(4),
            written: (job.verify && job.read_pct() < 100).then(BTreeMap::new),
            verify_next: None,
            replay: job.replay.clone().map(Replay::new),
            rng,
            order,
            picker,
            log_spec: job.logs.any().then(|| job.logs.clone()),
            next_block: 0,
            issued: 0,
            issued_verify: 0,
            completed: 0,
            inflight: 0,
            start_ns: 0,
            ready_at_ns: 0,
            started_ns: None,
            finished_ns: None,
            continue_on: job.continue_on_error,
            halted: false,
        }
    }

    /// Starts issuing at `now_ns`.
    pub fn start(&mut self, now_ns: u64) {
        self.start_ns = now_ns;
        self.ready_at_ns = now_ns;
        self.started_ns = Some(now_ns);
    }

    /// True iff it will issue nothing more and nothing is in flight.
    pub fn is_finished(&self) -> bool {
        self.finished_ns.is_some()
    }

    /// What to do at `now_ns`; `bio_id` is used if a bio is issued.
    pub fn next(&mut self, now_ns: u64, bio_id: u64) -> Next {
        if self.halted {
            return Next::Draining;
        }
        if self.out_of_work(now_ns) {
            return self.next_verify(bio_id);
        }
        if self.inflight >= self.iodepth {
            return Next::Full;
        }
        let ready = self.ready_at();
        if ready > now_ns {
            return Next::WaitUntil(ready);
        }
        if self.replay.is_none()
            && let Some(wait) = self.rate_direction(now_ns)
        {
            return Next::WaitUntil(wait);
        }
        if let Some(replay) = &mut self.replay {
            return match replay.take(self.ctx, bio_id) {
                Some(bio) => {
                    self.issued += 1;
                    self.inflight += 1;
                    Next::Issue(bio)
                }
                None => Next::Draining,
            };
        }
        Next::Issue(self.make_bio(bio_id))
    }

    /// After its own I/O: once every write has completed, a read of each block it wrote, as
    /// fio's verify phase.
    fn next_verify(&mut self, bio_id: u64) -> Next {
        if self.written.is_none() || (self.verify_next.is_none() && self.inflight > 0) {
            return Next::Draining;
        }
        if self.inflight >= self.iodepth {
            return Next::Full;
        }
        let from = self.verify_next.unwrap_or(0);
        match self.next_written(from) {
            Some(block) => {
                self.verify_next = Some(block + 1);
                self.issued += 1;
                self.issued_verify += 1;
                self.inflight += 1;
                Next::Issue(self.bio(bio_id, Op::Read, block))
            }
            None => {
                self.verify_next = Some(self.blocks);
                Next::Draining
            }
        }
    }

    /// The first written block at or after `from`.
    fn next_written(&self, from: u64) -> Option<u64> {
        let words = self.written.as_ref()?;
        words.range(from / 64..).find_map(|(&word, &bits)| {
            let bits = if word == from / 64 {
                bits & (!0u64 << (from % 64))
            } else {
                bits
            };
            (bits != 0).then(|| word * 64 + u64::from(bits.trailing_zeros()))
        })
    }

    /// True iff a verify pass is due or running.
    fn verify_pending(&self) -> bool {
        !self.halted
            && self.written.is_some()
            && self.verify_next.is_none_or(|next| next < self.blocks)
    }

    /// When pacing next allows an I/O, if it is waiting only for that after `now_ns`.
    pub fn wake_at(&self, now_ns: u64) -> Option<u64> {
        if self.is_finished() || self.out_of_work(now_ns) || self.inflight >= self.iodepth {
            return None;
        }
        Some(self.ready_at()).filter(|&t| t > now_ns)
    }

    /// The fio logs its job asked for.
    pub fn log_spec(&self) -> Option<&crate::observe::stats::logs::LogSpec> {
        self.log_spec.as_ref()
    }

    /// The earliest time rate_iops and thinktime allow the next I/O.
    fn ready_at(&self) -> u64 {
        if let Some(replay) = &self.replay {
            return replay.due_at(self.start_ns).unwrap_or(self.start_ns);
        }
        let after = |done: u64, per_s: u64| {
            let gap = u128::from(done) * 1_000_000_000 / u128::from(per_s.max(1));
            self.start_ns
                .saturating_add(u64::try_from(gap).unwrap_or(u64::MAX))
        };
        let by_ios = self.rate_iops.map_or(0, |r| after(self.issued, r));
        // The direction `rate` chose for the next I/O goes when its rate allows.
        let by_bytes = self
            .next_op
            .map_or(0, |op| self.rate_due(usize::from(op != Op::Read)));
        self.ready_at_ns.max(by_ios).max(by_bytes)
    }

    /// When direction `d` (0 read, 1 write) may issue again under `rate`: 0 if unlimited.
    fn rate_due(&self, d: usize) -> u64 {
        self.rate_bytes[d].map_or(0, |per_s| {
            let gap = u128::from(self.issued_dir_bytes[d]) * 1_000_000_000 / u128::from(per_s);
            self.start_ns
                .saturating_add(u64::try_from(gap).unwrap_or(u64::MAX))
        })
    }

    /// fio's `rate_ddir`: the next I/O's direction is drawn as usual; if that direction is
    /// ahead of its rate and the other is behind, the other goes instead; if both are
    /// ahead, the one due first goes when due. Returns when to look again, or `None` to
    /// issue now (in `next_op`).
    fn rate_direction(&mut self, now_ns: u64) -> Option<u64> {
        if self.rate_bytes == [None, None] {
            return None;
        }
        let op = match self.next_op {
            Some(op) => op,
            None => {
                let op = self.draw_op();
                self.next_op = Some(op);
                op
            }
        };
        let d = usize::from(op != Op::Read);
        let due = self.rate_due(d);
        if due <= now_ns {
            return None;
        }
        let other = 1 - d;
        let mixes = match other {
            0 => self.read_pct > 0,
            _ => self.read_pct < 100,
        };
        if !mixes {
            return Some(due);
        }
        let other_due = self.rate_due(other);
        let other_op = if other == 0 { Op::Read } else { Op::Write };
        if other_due <= now_ns {
            self.next_op = Some(other_op);
            return None;
        }
        if other_due < due {
            self.next_op = Some(other_op);
            return Some(other_due);
        }
        Some(due)
    }

    /// The direction of an I/O, from `rwmixread`.
    fn draw_op(&mut self) -> Op {
        match self.read_pct {
            100 => Op::Read,
            0 => Op::Write,
            pct => {
                if self.rng.below(100) < u64::from(pct) {
                    Op::Read
                } else {
                    Op::Write
                }
            }
        }
    }

    /// One of its bios, of `op`, completed at `now_ns` with `status` (0 or a negative errno).
    pub fn on_complete(&mut self, now_ns: u64, op: Op, status: i32) {
        debug_assert!(self.inflight > 0, "a completion with nothing in flight");
        self.inflight = self.inflight.saturating_sub(1);
        self.completed += 1;
        self.halted |= status != 0 && !self.continue_on.carries_on(op);
        if self.thinktime_ns > 0 {
            self.ready_at_ns = self
                .ready_at_ns
                .max(now_ns.saturating_add(self.thinktime_ns));
        }
        if self.inflight == 0 && self.out_of_work(now_ns) && !self.verify_pending() {
            self.finished_ns = Some(now_ns);
        }
    }

    /// Marks it finished if it never had anything to do, or its runtime ended while idle.
    pub fn finish_if_idle(&mut self, now_ns: u64) {
        if self.finished_ns.is_none()
            && self.inflight == 0
            && self.out_of_work(now_ns)
            && !self.verify_pending()
        {
            self.finished_ns = Some(now_ns);
        }
    }

    /// When its runtime ends, if it has one.
    pub fn deadline(&self) -> Option<u64> {
        self.runtime_ns
            .map(|r| self.measured_from_ns().saturating_add(r))
    }

    /// When its ramp ends: bios completing before then are not counted.
    pub fn measured_from_ns(&self) -> u64 {
        self.start_ns.saturating_add(self.ramp_ns)
    }

    fn out_of_work(&self, now_ns: u64) -> bool {
        self.halted
            || self.io_limit.is_some_and(|limit| self.issued >= limit)
            || self
                .bytes_limit
                .is_some_and(|limit| self.issued_bytes >= limit)
            || self.deadline().is_some_and(|end| now_ns >= end)
    }

    fn make_bio(&mut self, id: u64) -> Bio {
        let span = self.next_span();
        let block = match (&mut self.order, &mut self.picker) {
            (Some(order), _) => order.next_index(),
            (None, Some(picker)) => picker.next(&mut self.rng),
            (None, None) => {
                if self.next_block + span > self.blocks {
                    self.next_block = 0;
                }
                let block = self.next_block;
                self.next_block = (self.next_block + span) % self.blocks;
                block
            }
        };
        // A run of blocks stays within the region.
        let block = block.min(self.blocks - span);
        let op = match self.next_op.take() {
            Some(op) => op,
            None => self.draw_op(),
        };
        self.issued += 1;
        self.inflight += 1;
        if op == Op::Write
            && let Some(words) = &mut self.written
        {
            *words.entry(block / 64).or_default() |= 1 << (block % 64);
        }
        let mut bio = self.bio(id, op, block);
        // bssplit: the run is `span` blocks; spans keep within u32 sectors (64 MiB at most).
        bio.sectors = self
            .block_sectors
            .saturating_mul(u32::try_from(span).unwrap_or(1));
        self.issued_bytes += u64::from(bio.sectors) * 512;
        self.issued_dir_bytes[usize::from(op != Op::Read)] += u64::from(bio.sectors) * 512;
        bio
    }

    /// The next I/O's length in blocks: 1, or bssplit's pick.
    fn next_span(&mut self) -> u64 {
        if self.split.is_empty() {
            return 1;
        }
        let roll = self.rng.below(100) as u32;
        self.split
            .iter()
            .find(|&&(_, cumulative)| roll < cumulative)
            .or(self.split.last())
            .map_or(1, |&(span, _)| span)
    }

    fn bio(&self, id: u64, op: Op, block: u64) -> Bio {
        Bio {
            id,
            ctx: self.ctx,
            op,
            sector: self.placement.region_start + block * u64::from(self.block_sectors),
            sectors: self.block_sectors,
            sync: op == Op::Read || self.write_sync,
            prio_class: self.prio_class,
            prio_level: self.prio_level,
        }
    }
}
