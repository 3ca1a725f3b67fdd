//! Batches and the elevator: which request goes next, and how long a write batch runs
//! (`as_dispatch_request`, `as_choose_req`, `update_write_batch`).

use schedhost_sdk::{RequestId, Sector};

use crate::{Antic, Anticipatory, BACK_PENALTY, Dir, MAXBACK, Owned};

impl Anticipatory {
    /// The next request of `dir` in elevator order from where the last one ended.
    fn next_rq(&self, dir: Dir) -> Option<RequestId> {
        let queue = &self.queues[dir as usize];
        let last = self.last_sector[dir as usize];
        [queue.at_or_after(last), queue.before(last), queue.lowest()]
            .into_iter()
            .flatten()
            .reduce(|a, b| {
                if prefers(last, a.sector, b.sector) {
                    a
                } else {
                    b
                }
            })
            .map(|p| p.id)
    }

    /// `as_fifo_expired`: whether the oldest request of `dir` is overdue, looked at no more
    /// than once per expiry interval (many overdue requests would otherwise make a seek
    /// storm).
    fn fifo_expired(&mut self, dir: Dir, now_ns: u64) -> bool {
        let d = dir as usize;
        if now_ns.abs_diff(self.last_check_fifo_ns[d]) < self.fifo_expire_ns[d] {
            return false;
        }
        self.last_check_fifo_ns[d] = now_ns;
        self.queues[d]
            .fifo_front()
            .is_some_and(|due| now_ns > due.expires_ns)
    }

    /// `as_batch_expired`.
    fn batch_expired(&self, now_ns: u64) -> bool {
        if self.changed_batch || self.new_batch {
            return false;
        }
        let late = now_ns > self.current_batch_expires_ns;
        match self.batch_dir {
            Dir::Sync => late,
            Dir::Async => late || self.current_write_count == 0,
        }
    }

    fn fifo_front(&self, dir: Dir) -> Option<RequestId> {
        self.queues[dir as usize].fifo_front().map(|due| due.id)
    }

    /// `as_dispatch_request`: the next request to send, or none (nothing queued, waiting for
    /// the anticipated process, or waiting for the old batch to drain).
    pub(crate) fn dispatch_request(&mut self, now_ns: u64) -> Option<RequestId> {
        let reads = !self.queues[Dir::Sync as usize].is_empty();
        let writes = !self.queues[Dir::Async as usize].is_empty();
        // The write batch ran dry: it cannot be timed.
        if self.batch_dir == Dir::Async && !reads && (self.current_write_count == 0 || !writes) {
            self.write_batch_idled = true;
        }
        if !(reads || writes)
            || matches!(self.antic, Antic::WaitReq | Antic::WaitNext)
            || self.changed_batch
        {
            return None;
        }
        let (rq, fifo_checked) = self.choose(now_ns, reads, writes)?;
        let rq = if !fifo_checked && self.fifo_expired(self.batch_dir, now_ns) {
            self.fifo_front(self.batch_dir)?
        } else {
            rq
        };
        if self.changed_batch {
            if !self.in_flight.is_empty() {
                return None; // the new batch starts when the old one has drained
            }
            match self.batch_dir {
                Dir::Async => {
                    self.current_batch_expires_ns =
                        now_ns.saturating_add(self.batch_expire_ns[Dir::Async as usize]);
                }
                Dir::Sync => self.new_batch = true,
            }
            self.changed_batch = false;
        }
        self.move_to_dispatch(rq);
        Some(rq)
    }

    /// The request a batch continues with, or the first of a new batch; with whether the
    /// FIFO was already consulted for it. `None` when anticipating instead.
    fn choose(&mut self, now_ns: u64, reads: bool, writes: bool) -> Option<(RequestId, bool)> {
        if !(reads && writes && self.batch_expired(now_ns)) {
            // The batch runs on (or only one direction has work).
            let rq = self.next_rq(self.batch_dir);
            if self.batch_dir == Dir::Sync && self.antic_expire_ns > 0 {
                if self.fifo_expired(Dir::Sync, now_ns) {
                    return self.fifo_front(Dir::Sync).map(|id| (id, true));
                }
                if self.can_anticipate(rq, now_ns) {
                    self.antic_waitreq();
                    return None;
                }
            }
            if let Some(rq) = rq {
                if reads && !writes {
                    self.current_batch_expires_ns =
                        now_ns.saturating_add(self.batch_expire_ns[Dir::Sync as usize]);
                }
                return Some((rq, false));
            }
        }
        // A new batch: reads after writes, writes after reads.
        if reads && !(writes && self.batch_dir == Dir::Sync) {
            if self.batch_dir == Dir::Async {
                self.changed_batch = true;
            }
            self.batch_dir = Dir::Sync;
            self.last_check_fifo_ns[Dir::Sync as usize] = now_ns;
            return self.fifo_front(Dir::Sync).map(|id| (id, false));
        }
        if self.batch_dir == Dir::Sync {
            self.changed_batch = true;
            // The queue may have run out of reads before the first read completed.
            self.new_batch = false;
        }
        self.batch_dir = Dir::Async;
        self.current_write_count = self.write_batch_count;
        self.write_batch_idled = false;
        self.last_check_fifo_ns[Dir::Async as usize] = now_ns;
        self.fifo_front(Dir::Async).map(|id| (id, false))
    }

    /// `as_move_to_dispatch`: `id` leaves the scheduler for the device.
    fn move_to_dispatch(&mut self, id: RequestId) {
        let Some(owned) = self.queued.remove(&id) else {
            return;
        };
        self.antic = Antic::Off;
        if let Some(extent) = self.queues[owned.dir as usize].take(id) {
            self.last_sector[owned.dir as usize] = extent.end();
        }
        match owned.dir {
            // In case the scheduler anticipates after this one.
            Dir::Sync => self.io_context = Some(owned.ctx),
            Dir::Async => {
                self.io_context = None;
                self.current_write_count = self.current_write_count.saturating_sub(1);
            }
        }
        self.ioc_finished = false;
        let history = self.history(owned.ctx);
        history.nr_queued = history.nr_queued.saturating_sub(1);
        self.in_flight.insert(id, owned);
    }

    /// `as_completed_request`.
    pub(crate) fn completed_request(&mut self, now_ns: u64, owned: Owned) {
        // `in_flight` no longer holds this one: the kernel's count of 1 before its decrement.
        if self.changed_batch && self.in_flight.is_empty() {
            self.current_batch_expires_ns =
                now_ns.saturating_add(self.batch_expire_ns[self.batch_dir as usize]);
            self.changed_batch = false;
            if self.batch_dir == Dir::Sync {
                self.new_batch = true;
            }
        }
        // A batch is timed from when its first request is served, which helps devices that
        // take many requests into a cache or a queue.
        if self.new_batch && self.batch_dir == owned.dir {
            self.update_write_batch(now_ns);
            self.current_batch_expires_ns =
                now_ns.saturating_add(self.batch_expire_ns[Dir::Sync as usize]);
            self.new_batch = false;
        }
        if self.io_context == Some(owned.ctx) {
            self.antic_start_ns = now_ns;
            self.ioc_finished = true;
            if self.antic == Antic::WaitReq {
                self.antic = Antic::WaitNext; // it came back: now wait for the next one
            }
        }
        if owned.dir == Dir::Sync {
            self.history(owned.ctx).ended_sync(now_ns);
        }
    }

    /// `update_write_batch`: lengthens the write batch when it ended early, shortens it
    /// when it overran, judged at the first completion of the read batch after it.
    fn update_write_batch(&mut self, now_ns: u64) {
        let batch = self.batch_expire_ns[Dir::Async as usize];
        let write_time =
            (now_ns.saturating_add(batch)).saturating_sub(self.current_batch_expires_ns);
        let count = &mut self.write_batch_count;
        if write_time > batch && !self.write_batch_idled {
            *count = if write_time > batch.saturating_mul(3) {
                *count / 2
            } else {
                count.saturating_sub(1)
            };
        } else if write_time < batch && self.current_write_count == 0 {
            *count = if batch > write_time.saturating_mul(3) {
                count.saturating_mul(2)
            } else {
                count.saturating_add(1)
            };
        }
        *count = (*count).max(1);
    }
}

/// `as_choose_req`: whether a request at `s1` goes before one at `s2`, the head at `last`.
/// A one-way elevator, except that a seek back of up to `MAXBACK` counts twice its length;
/// requests farther behind come after every other, lowest first.
fn prefers(last: Sector, s1: Sector, s2: Sector) -> bool {
    let cost = |s: Sector| -> Option<u64> {
        if s >= last {
            Some(s.0 - last.0)
        } else if s.0.saturating_add(MAXBACK) >= last.0 {
            Some((last.0 - s.0) * BACK_PENALTY)
        } else {
            None // behind the head, too far to go back for
        }
    };
    match (cost(s1), cost(s2)) {
        (Some(_), None) => true,
        (None, Some(_)) => false,
        (None, None) => s1 <= s2,
        (Some(d1), Some(d2)) => d1 < d2 || (d1 == d2 && s1 >= s2),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_elevator_prefers_a_back_seek_only_at_half_the_distance() {
        let last = Sector(10_000);
        // 100 back costs 200: it beats 201 ahead, loses to 199 ahead.
        assert!(prefers(last, Sector(9_900), Sector(10_201)));
        assert!(!prefers(last, Sector(9_900), Sector(10_199)));
        // Beyond MAXBACK behind: after anything ahead, however far.
        let far = Sector(5_000_000);
        assert!(prefers(
            far,
            Sector(9_000_000),
            Sector(5_000_000 - MAXBACK - 1)
        ));
        // Two far behind: the lower first.
        assert!(prefers(far, Sector(1), Sector(2)));
        // Equal cost: the one ahead (the higher sector).
        assert!(prefers(last, Sector(10_200), Sector(9_900)));
    }
}
