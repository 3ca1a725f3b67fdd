//! Injection (`bfq_choose_bfqq_for_injection`, `bfq_update_inject_limit`): while bfq keeps
//! the device for a queue in service that has run dry (idling for its next request, or
//! waiting for its requests on the device) because guarantees need it rather than
//! throughput, other queues' requests go to the device, up to the in-service queue's inject
//! limit.
//!
//! The limit is learned per queue from the total service time of its requests, from one
//! arriving at the empty queue to its completion: alone on the device that is the baseline;
//! with injected requests beside it the limit grows while the time stays under 3/2 of the
//! baseline and shrinks past it. It starts again every second, so it follows the workload.
//! A limit that has shrunk to nothing lets one request through onto an empty device 10 ms
//! after it fell, to be sampled again (not the kernel's, which keeps it at nothing until the
//! second is up): one slow sample, a collision on a die, had kept the device to a queue at
//! iodepth 1 for its whole 125 ms turn, and a group held by io.max beside it fell short of
//! its rate (the sweep's seed 8 cell 164: 1 143 of 1 506 I/Os).
//! "Alone" is with nothing on the device but the queue's own requests (not the kernel's,
//! which samples only onto an empty device): a queue that keeps two or more requests in
//! flight never leaves the device empty, so in the kernel it never learns a baseline, its
//! limit stays at nothing, and nothing goes beside it for its whole turn. Its first limit is
//! the number of its own requests. Nor does a request arriving beside the queue's own
//! restart a sample whose request is still on the device (the kernel restarts at every
//! qualifying arrival, which onto an empty device comes at most once per request): a queue
//! whose next request arrives before its last completes would never finish one. A queue at
//! iodepth 1 learns as in the kernel. Five groups at iodepth 2 on `sim:ssd` ran at 0.20 of
//! noop's IOPS under bfq without these, 0.95 with them (the sweep's seed 12 cell 406), and a
//! group held by io.max beside such turns completed 2 331 of the 3 009 its rate gave, 3 009
//! with them (seed 10 cell 356).
//! An injected request is charged to its own queue, against what is left of its budget, and
//! counts in that queue's next turn. With groups named, a queue is injected only while its
//! turn starts less than one turn ahead of the virtual time B-WF2Q+ would serve at without
//! the queue in service (the system's, or the earliest start among the others; eligibility
//! with a turn's slack; not the kernel's, which injects from any busy queue): injection
//! bypasses the timestamps, and a queue it empties comes back busy at the virtual time,
//! so a light group could take every chance beside the heavy groups' turns.
//!
//! The kernel runs the hardware queue from a completion, so a queue in service whose request
//! just completed is dry when bfq is next asked to dispatch, however soon its submitter sends
//! the next one; that is where a limit of one injects, and so where the limit's learning
//! starts. The host hears a completion and the submitter's next request in one turn, before
//! one dispatch: on flash, a completion that leaves the queue in service dry, kept for
//! guarantees, with room under its limit, is honoured at that dispatch with the injection
//! the kernel would have made first (not on a disk, nor for a group with a latency target:
//! see `note_injection_due`). Without it a queue that always has its one request on the
//! device never let anything beside it: a light group's turns at one or two tags kept the
//! device nearly idle for milliseconds, and its limit stayed at one.

use std::collections::BTreeMap;

use super::{Bfq, Dispatch, MS, QueueKey, RequestId, choose};

/// The in-service queue's time with injection may grow to this many halves of its time
/// alone before its limit shrinks.
const SLOWDOWN_HALVES: u64 = 3;
/// A limit is learned again from scratch this often (`bfq_reset_inject_limit`).
const RELEARN_NS: u64 = 1_000 * MS;
/// A new sample starts no sooner than this after the limit last fell.
const RESAMPLE_NS: u64 = 10 * MS;
/// On flash a large request (`BFQQ_SECT_THR_NONROT` sectors or more) is injected only onto
/// an empty device: the drive favours large requests and would make the in-service queue's
/// next one wait.
const LARGE_ON_FLASH: u32 = 64;

/// A queue's injection limit and what it was learned from.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct InjectLimit {
    /// Requests on the device beyond which nothing is injected for this queue.
    limit: u32,
    /// Its requests' total service time alone on the device (0: not yet measured).
    baseline_ns: u64,
    /// When the limit last fell or was reset (`decrease_time_jif`).
    changed_at: u64,
}

impl InjectLimit {
    /// Whether a limit learned down to nothing lets one request through to sample again:
    /// [`RESAMPLE_NS`] after it fell (not the kernel's, which waits for [`RELEARN_NS`]).
    fn probes(&self, now_ns: u64) -> bool {
        self.limit == 0
            && self.baseline_ns > 0
            && now_ns >= self.changed_at.saturating_add(RESAMPLE_NS)
    }

    /// A limit already learned: `limit` from a baseline of `baseline_ns`.
    #[cfg(test)]
    pub(super) fn learned(limit: u32, baseline_ns: u64) -> Self {
        Self {
            limit,
            baseline_ns,
            changed_at: 0,
        }
    }

    /// What a newer build carries over (`state.rs`): the limit, its baseline and when it
    /// last changed.
    pub(super) fn parts(&self) -> (u32, u64, u64) {
        (self.limit, self.baseline_ns, self.changed_at)
    }

    /// A limit as [`Self::parts`] gave it.
    pub(super) fn from_parts((limit, baseline_ns, changed_at): (u32, u64, u64)) -> Self {
        Self {
            limit,
            baseline_ns,
            changed_at,
        }
    }

    /// A new queue's: nothing learned, and no sample for its first [`RESAMPLE_NS`]
    /// (`bfq_init_bfqq` sets `decrease_time_jif`).
    pub(super) fn new(now_ns: u64) -> Self {
        Self {
            changed_at: now_ns,
            ..Self::default()
        }
    }
}

/// The device-wide sample in progress.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Sampling {
    /// Requests were injected since the sample began.
    injected: bool,
    /// When the in-service queue's sampled request arrived at it empty.
    arrived_at: u64,
    /// The next request dispatched from the in-service queue is the sampled one.
    wait_dispatch: bool,
    /// The sampled request, on the device.
    waited: Option<RequestId>,
}

impl Bfq {
    /// A request arrived at queue `key`, which had none queued: every second its limit is
    /// learned again, and if it is in service with nothing on the device (or injection
    /// beside it to measure), a new sample of its total service time begins.
    pub(super) fn sample_arrival(&mut self, key: QueueKey, now_ns: u64) {
        let in_driver = self.in_driver;
        let injected = self.sampling.injected;
        let slice_idle = self.slice_idle;
        let Some(queue) = self.queues.get_mut(&key) else {
            return;
        };
        let inject = &mut queue.inject;
        if now_ns >= inject.changed_at.saturating_add(RELEARN_NS) {
            inject.baseline_ns = 0;
            inject.limit = u32::from(queue.habits.thinks_longer_than(slice_idle));
            inject.changed_at = now_ns;
            self.sampling.waited = None;
        }
        let in_service = self.in_service.is_some_and(|s| s.key == key);
        // Alone: nothing on the device but the queue's own requests (the kernel's: nothing
        // at all, which a queue keeping two or more requests in flight never sees).
        let alone = in_driver == queue.inflight;
        let worth = alone || (inject.baseline_ns > 0 && injected);
        // Beside requests of its own a sampled one may still be on the device: the sample
        // goes on (restarted at each arrival, a queue whose next request arrives before its
        // last completes would never finish one). Onto an empty device, as the kernel.
        let sampling = in_driver > 0 && self.sampling.waited.is_some();
        if in_service
            && worth
            && !sampling
            && now_ns >= inject.changed_at.saturating_add(RESAMPLE_NS)
        {
            self.sampling.arrived_at = now_ns;
            self.sampling.wait_dispatch = true;
            if alone {
                self.sampling.injected = false;
            }
        }
    }

    /// Request `id` went to the device from the queue in service.
    pub(super) fn sample_dispatch(&mut self, id: RequestId) {
        if self.sampling.wait_dispatch {
            self.sampling.wait_dispatch = false;
            self.sampling.waited = Some(id);
        }
    }

    /// Request `id` of queue `key` completed at `now_ns`, before it leaves the device
    /// count: if it was the sampled one, its total service time moves `key`'s limit.
    pub(super) fn sample_completion(&mut self, id: RequestId, key: QueueKey, now_ns: u64) {
        if self.sampling.waited != Some(id) {
            return;
        }
        let sampling = self.sampling;
        let (in_driver, most) = (self.in_driver, self.hw_tag.most_in_driver());
        self.sampling.waited = None;
        self.sampling.injected = false;
        let Some(queue) = self.queues.get_mut(&key) else {
            return;
        };
        let inject = &mut queue.inject;
        let took = now_ns.saturating_sub(sampling.arrived_at);
        let old = inject.limit;
        if inject.baseline_ns > 0 && sampling.injected {
            let threshold = inject.baseline_ns.saturating_mul(SLOWDOWN_HALVES) / 2;
            if took >= threshold {
                // At nothing already, the probe failed: the next one waits as after a fall.
                inject.limit = old.saturating_sub(1);
                inject.changed_at = now_ns;
            } else if took < threshold && old <= most {
                inject.limit += 1;
            }
        }
        // Alone on the device but for its own requests (the request itself is still
        // counted): the baseline, and the first one makes injection worth trying.
        let own = queue.inflight.max(1);
        let alone = in_driver <= own;
        if (inject.baseline_ns == 0 && alone) || took < inject.baseline_ns {
            if inject.baseline_ns == 0 {
                inject.limit = old.max(own);
            }
            inject.baseline_ns = took;
        } else if !sampling.injected && alone {
            inject.baseline_ns = took;
        }
    }

    /// Whether `key`, in service and run dry, lets other queues' requests go beside it:
    /// idling for it boosts no throughput, and it is unraised, or thinks long enough to
    /// absorb them, or is one of several raised queues.
    pub(super) fn may_inject_for(&self, key: QueueKey, now_ns: u64) -> bool {
        let Some(queue) = self.queues.get(&key) else {
            return false;
        };
        let raised = now_ns < queue.raised_until;
        let quick = !queue.habits.thinks_longer_than(self.slice_idle);
        let raised_busy = self
            .queues
            .values()
            .filter(|q| q.busy && now_ns < q.raised_until)
            .count();
        !self.idling_boosts_throughput(key, now_ns) && (!raised || raised_busy > 1 || !quick)
    }

    /// The queue to take a request from while `key` is in service and dry
    /// (`bfq_choose_bfqq_for_injection`), if the device has room under `key`'s limit: the
    /// first busy queue (by key; under the groups' parts, of the group furthest under its
    /// part) with a request that fits what is left of its budget, and that is raised if
    /// `key` is a quick raised queue.
    pub(super) fn injection_source(
        &self,
        key: QueueKey,
        now_ns: u64,
        held: Option<&BTreeMap<u32, u32>>,
    ) -> Option<QueueKey> {
        let in_service = self.queues.get(&key)?;
        let always = now_ns >= in_service.raised_until
            || in_service.habits.thinks_longer_than(self.slice_idle);
        let mut limit = in_service.inject.limit;
        let idling_long = self
            .in_service
            .and_then(|s| s.idle_until.map(|_| s.idle_started))
            .is_some_and(|started| now_ns >= started.saturating_add(self.slice_idle));
        if limit == 0 && in_service.inject.baseline_ns == 0 && idling_long {
            limit = 1;
        }
        // A limit learned down to nothing is tried again at one request (not the kernel's).
        if limit == 0 && in_service.inject.probes(now_ns) {
            limit = 1;
        }
        // Held at its group's part, the queue in service has its share of the device: the
        // groups' parts bound what others add, not the learned limit. Beside a dry queue
        // the learned limit does, as in the kernel.
        if self.in_driver >= limit && held.is_none() {
            return None;
        }
        let candidates = || {
            self.queues
                .iter()
                .filter(move |&(k, q)| k != key && q.busy && !q.requests.is_empty())
        };
        // The virtual time B-WF2Q+ would serve at if the queue in service were not: the
        // system's, or the earliest start among the others if none of them is eligible.
        let mut clock = self.vtime;
        if !self.group_weights.is_empty() {
            for (class, v) in clock.iter_mut().enumerate() {
                let earliest = candidates()
                    .filter(|(_, q)| q.class == class)
                    .map(|(_, q)| q.start)
                    .min();
                *v = (*v).max(earliest.unwrap_or(0));
            }
        }
        candidates()
            .filter(|(_, q)| self.under_part(held, q.group))
            // With groups, not a queue more than one of its turns ahead of that time (not
            // the kernel's): a light group's queue of one tag, emptied by each injection and
            // busy again at the system's virtual time, was injected at every chance, two
            // and a half times its share (seed 3's cell 290). Against the system's time
            // alone, a group alone beside a throttled one was held back once ahead of it.
            .filter(|(_, q)| {
                let turn = q.finish.saturating_sub(q.start);
                self.group_weights.is_empty() || q.start <= clock[q.class].saturating_add(turn)
            })
            .filter(|(_, q)| always || now_ns < q.raised_until)
            .filter(|&(k, q)| {
                let next = choose(q, self.head, now_ns);
                q.requests.extent(next).is_some_and(|e| {
                    let charge = u64::from(e.sectors) * self.charge_factor(k, now_ns);
                    let large = !self.rotational && e.sectors >= LARGE_ON_FLASH;
                    charge <= q.budget.saturating_sub(q.injected) && !(large && self.in_driver >= 1)
                })
            })
            // Under the groups' parts, the group furthest under its part goes first: by key,
            // the lowest group kept its part full and took more than its weight's share.
            .min_by_key(|&(k, q)| (self.fill_of_part(held, q.group), k))
            .map(|(k, _)| k)
    }

    /// How full group `group` keeps its part of the device under `parts`, in millionths
    /// (0 without parts: the kernel's order, by key).
    fn fill_of_part(&self, parts: Option<&BTreeMap<u32, u32>>, group: u32) -> u64 {
        let Some(&part) = parts.and_then(|p| p.get(&group)) else {
            return 0;
        };
        u64::from(self.share.in_flight_of(group)) * 1_000_000 / u64::from(part.max(1))
    }

    /// After completions at `now_ns`: whether the queue in service is dry and kept for
    /// guarantees with room under its limit, so that the kernel's run of the hardware queue
    /// from the completion would inject now (`bfq_select_queue`).
    pub(super) fn note_injection_due(&mut self, now_ns: u64) {
        self.injection_due = None;
        // Flash only: a disk's simulated command queue serves the nearest request first and
        // never ages one, and writes injected beside a reader's turn kept a read on the disk
        // behind them for the whole run (seed 4's writer and readers: one read each in 20 s).
        let Some(service) = self.in_service.filter(|_| !self.rotational) else {
            return;
        };
        // Nor for a group with a latency target: the request injected at its completion is
        // one its next request waits behind (its p99 beside a flood, 97 → 167 µs against a
        // 150 µs target, on `examples/devices/shared-ssd.spec`).
        let dry = self
            .queues
            .get(&service.key)
            .is_some_and(|q| q.requests.is_empty() && !self.latency_targets.contains(&q.group));
        if dry
            && service.served < service.budget
            && now_ns < service.until
            && self.better_to_idle(service.key, now_ns)
            && self.may_inject_for(service.key, now_ns)
            && self.injection_source(service.key, now_ns, None).is_some()
        {
            self.injection_due = Some(now_ns);
        }
    }

    /// The injection a completion at this dispatch's time made due, if the queue in service
    /// had a request arrive since (dry still, the dispatch injects as it always does).
    pub(super) fn inject_due_at_completion(&mut self, now_ns: u64, out: &mut Dispatch) {
        if self.injection_due.take() != Some(now_ns) {
            return;
        }
        let Some(service) = self.in_service else {
            return;
        };
        let refilled = self
            .queues
            .get(&service.key)
            .is_some_and(|q| !q.requests.is_empty());
        if refilled {
            self.inject(service.key, now_ns, None, out);
        }
    }

    /// Sends one request of another queue while `key` is in service and dry, if one may
    /// go; true iff one went.
    /// `held`: the groups' parts, when the queue in service is not dry but held at its
    /// group's part of the device bound (`share.rs`).
    pub(super) fn inject(
        &mut self,
        key: QueueKey,
        now_ns: u64,
        held: Option<&BTreeMap<u32, u32>>,
        out: &mut Dispatch,
    ) -> bool {
        let Some(source) = self.injection_source(key, now_ns, held) else {
            return false;
        };
        let factor = self.charge_factor(source, now_ns);
        let Some(queue) = self.queues.get_mut(&source) else {
            return false;
        };
        let id = choose(queue, self.head, now_ns);
        let Some(extent) = queue.requests.take(id) else {
            return false;
        };
        out.ids.push(id);
        queue.inflight += 1;
        queue.injected += u64::from(extent.sectors) * factor;
        let (emptied, group) = (queue.requests.is_empty(), queue.group);
        self.in_driver += 1;
        self.queued.remove(&id);
        self.on_device.insert(id, source);
        if self.counts_share() {
            self.share.sent(id, group);
        }
        self.head = extent.end();
        self.sampling.injected = true;
        if emptied {
            // All its requests went as injected service: it leaves the busy queues,
            // charged for what it got, as a turn that ran dry would be.
            self.settle_injected(source, now_ns);
        }
        true
    }
}
