//! Anticipation: whether to keep the disk idle for the process whose read just went out
//! (`as_can_anticipate`, `as_can_break_anticipation` and the wait's timer).

use schedhost_sdk::RequestId;

use crate::history::History;
use crate::{Antic, Anticipatory, CLOSE_GROWTH_MS, CLOSE_SECTORS, Candidate, Dir, MS};

impl Anticipatory {
    /// When a wait for the next request runs out.
    pub(crate) fn antic_deadline(&self) -> u64 {
        self.antic_start_ns.saturating_add(self.antic_expire_ns)
    }

    /// `as_antic_timeout`, run when the wake the policy asked for comes.
    pub(crate) fn antic_timer(&mut self, now_ns: u64) {
        if self.antic != Antic::WaitNext || now_ns < self.antic_deadline() {
            return;
        }
        self.antic = Antic::Finished;
        let unknown = self
            .io_context
            .and_then(|ctx| self.histories.get(&ctx))
            .is_none_or(|h| h.ttime_samples == 0);
        if unknown {
            self.newcomers.timed_out_unknown();
        }
    }

    /// `as_antic_stop`: a wait ends; the next dispatch serves a request.
    pub(crate) fn antic_stop(&mut self) {
        if matches!(self.antic, Antic::WaitReq | Antic::WaitNext) {
            self.antic = Antic::Finished;
        }
    }

    /// `as_antic_waitreq`: start waiting, from the completion of the last read if it has
    /// completed, else from when it does.
    pub(crate) fn antic_waitreq(&mut self) {
        debug_assert_ne!(self.antic, Antic::Finished);
        if self.antic == Antic::Off {
            self.antic = if self.io_context.is_none() || self.ioc_finished {
                Antic::WaitNext
            } else {
                Antic::WaitReq
            };
        }
    }

    /// `as_can_break_anticipation`: whether `rq` (or, with none, the state alone) ends the
    /// wait for the anticipated process. The tests, in the kernel's order.
    pub(crate) fn can_break_anticipation(&mut self, rq: Option<Candidate>, now_ns: u64) -> bool {
        let Some(ioc) = self.io_context else {
            return true;
        };
        if rq.is_some_and(|r| r.ctx == ioc) {
            return true; // the anticipated process itself
        }
        if self.ioc_finished && now_ns.saturating_sub(self.antic_start_ns) >= self.antic_expire_ns {
            return true; // waited long enough; the timer has not run yet
        }
        let Some(history) = self.histories.get(&ioc).cloned() else {
            return false;
        };
        if history.nr_queued > 0 {
            return true; // it has more requests waiting
        }
        if let Some(r) = rq
            && r.dir == Dir::Sync
            && self.close_req(&history, &r, now_ns)
        {
            // A close request from a cooperating process: it counts in our history.
            let newcomers = &mut self.newcomers;
            if let Some(history) = self.histories.get_mut(&ioc) {
                history.queued_sync(newcomers, now_ns, r.sector.0, r.end.0);
            }
            return true;
        }
        if history.ttime_samples == 0 {
            // Nothing known of it yet: judge by processes new to the scheduler.
            self.newcomers.ttime_mean_us * 1000 > self.antic_expire_ns
        } else {
            // It thinks too long between requests to be worth the wait.
            history.ttime_mean_us * 1000 > self.antic_expire_ns
        }
    }

    /// `as_close_req`: whether `rq` lies near enough to the head to serve at once, the
    /// window doubling for each millisecond already waited.
    fn close_req(&self, history: &History, rq: &Candidate, now_ns: u64) -> bool {
        let delay_ms = if self.antic == Antic::Off || !self.ioc_finished {
            0
        } else {
            now_ns.saturating_sub(self.antic_start_ns) / MS
        };
        let delta = if delay_ms == 0 {
            CLOSE_SECTORS
        } else if delay_ms <= CLOSE_GROWTH_MS && delay_ms <= self.antic_expire_ns / MS {
            CLOSE_SECTORS << delay_ms
        } else {
            return true;
        };
        let last = self.last_sector[self.batch_dir as usize].0;
        let next = rq.sector.0;
        if last <= next.saturating_add(delta >> 1) && next <= last.saturating_add(delta) {
            return true;
        }
        let seek = last.abs_diff(next);
        let expected = if history.seek_samples == 0 {
            self.newcomers.seek_mean
        } else {
            history.seek_mean
        };
        expected > seek
    }

    /// `as_can_anticipate`: whether to wait rather than send `rq`.
    pub(crate) fn can_anticipate(&mut self, rq: Option<RequestId>, now_ns: u64) -> bool {
        if self.io_context.is_none() || self.antic == Antic::Finished {
            return false;
        }
        let candidate = rq.and_then(|id| self.candidate(id));
        !self.can_break_anticipation(candidate, now_ns)
    }

    /// A queued request as the break test reads it.
    fn candidate(&self, id: RequestId) -> Option<Candidate> {
        let owned = self.queued.get(&id)?;
        let extent = self.queues[owned.dir as usize].extent(id)?;
        Some(Candidate {
            ctx: owned.ctx,
            dir: owned.dir,
            sector: extent.sector,
            end: extent.end(),
        })
    }
}
