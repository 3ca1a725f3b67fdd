//! Whether to idle for the queue in service (`bfq_better_to_idle`), how long, and what it
//! is judged from: seeks, think time, the device's queueing, asymmetric scenarios.

use std::collections::BTreeMap;

use schedhost_sdk::hw_tag;

use super::{Bfq, HW_QUEUE_THRESHOLD, MIN_TT_NS, MS, Queue, QueueKey, SEEKY_OF_32};

impl Bfq {
    /// Whether a dry queue should keep the device for its next request
    /// (`bfq_better_to_idle`): idling boosts throughput without hurting raised queues, or
    /// service guarantees need it.
    pub(super) fn better_to_idle(&self, key: QueueKey, now_ns: u64) -> bool {
        let Some(queue) = self.queues.get(&key) else {
            return false;
        };
        if self.strict {
            return true;
        }
        if self.slice_idle == 0 || !queue.sync || queue.class == 2 {
            return false;
        }
        let busy = self.queues.values().filter(|q| q.busy);
        let (busy_queues, raised_busy) = busy.fold((0u32, 0u32), |(b, r), q| {
            (b + 1, r + u32::from(now_ns < q.raised_until))
        });
        let boosts = self.idling_boosts_throughput(key, now_ns);
        // idling_needed_for_service_guarantees.
        let raised = now_ns < queue.raised_until;
        let protects_raised =
            raised && (raised_busy < busy_queues || self.in_driver >= queue.inflight + 4);
        boosts || protects_raised || self.asymmetric(key, now_ns)
    }

    /// Whether every scheduler tag is held by a request waiting in bfq: no submitter can
    /// send another request until bfq dispatches one (nothing is on the device to complete
    /// and free a tag), so idling with nothing to inject waits for nothing but its timer.
    pub(super) fn holds_every_tag(&self) -> bool {
        let pool = u64::from(self.nr_requests) * u64::from(self.hw_queues.max(1));
        pool > 0 && self.queued.len() as u64 >= pool
    }

    /// Whether idling for dry queue `key` pays in throughput
    /// (`idling_boosts_thr_without_issues`): on a disk that queues no commands, and for a
    /// sequential queue quick to send its next request on a disk or on flash that queues
    /// none, unless a raised queue would wait.
    pub(super) fn idling_boosts_throughput(&self, key: QueueKey, now_ns: u64) -> bool {
        let Some(queue) = self.queues.get(&key) else {
            return false;
        };
        let raised_busy = self
            .queues
            .values()
            .any(|q| q.busy && now_ns < q.raised_until);
        let sequential = !seeky(queue) && !queue.habits.thinks_longer_than(self.slice_idle);
        let queueing = self.hw_tag.queueing();
        let rot_without_queueing = self.rotational && !queueing;
        (rot_without_queueing || ((self.rotational || !queueing) && sequential)) && !raised_busy
    }

    /// Whether the queues differ so that idling is needed to keep `key`'s share
    /// (`bfq_asymmetric_scenario`): busy queues' weights that differ with `key`'s not the
    /// smallest, more than one class busy, or more than one group with requests pending,
    /// queued or on the device (`num_groups_with_pending_reqs`, which keeps a group until
    /// its last request completes): a light group whose every request is on the device
    /// still takes the device's time, and without idling the heavy group's queue, sent dry
    /// at each request by its part of the scheduler tags, lost its turn at every request.
    pub(super) fn asymmetric(&self, key: QueueKey, now_ns: u64) -> bool {
        let busy = || self.queues.values().filter(|q| q.busy);
        // Each group's busy queues' own weights per class, summed once (as busy_weight
        // does), so a thousand queues cost two passes, not a pass each.
        let mut siblings: BTreeMap<(u32, usize), u64> = BTreeMap::new();
        for q in busy().filter(|q| q.group != 0) {
            *siblings.entry((q.group, q.class)).or_default() += Self::own_weight(q, now_ns);
        }
        let mut classes = [false; 3];
        let (mut lightest, mut heaviest) = (u64::MAX, 0);
        for q in busy() {
            classes[q.class] = true;
            let sum = siblings.get(&(q.group, q.class)).copied().unwrap_or(0);
            let w = self.share(q, now_ns, sum);
            lightest = lightest.min(w);
            heaviest = heaviest.max(w);
        }
        let mut groups: Vec<u32> = Vec::new();
        let pending = self.queues.values().filter(|q| q.busy || q.inflight > 0);
        for q in pending.filter(|q| q.group != 0) {
            if !groups.contains(&q.group) {
                groups.push(q.group);
            }
        }
        let mine = self
            .queues
            .get(&key)
            .map_or(lightest, |q| self.weight(q, now_ns));
        let varied = lightest < heaviest && mine > lightest;
        let classes_busy = classes.iter().filter(|&&c| c).count();
        varied || classes_busy > 1 || groups.len() > 1
    }

    /// How long to idle for a dry queue (`bfq_arm_slice_timer`): `slice_idle`, at most
    /// `BFQ_MIN_TT` for a seeky, unraised queue when nothing is asymmetric, at least 20 ms
    /// for a raised one.
    pub(super) fn idle_slice(&self, key: QueueKey, now_ns: u64) -> u64 {
        let Some(queue) = self.queues.get(&key) else {
            return self.slice_idle;
        };
        let raised = now_ns < queue.raised_until;
        if seeky(queue) && !raised && !self.asymmetric(key, now_ns) {
            self.slice_idle.min(MIN_TT_NS)
        } else if raised {
            self.slice_idle.max(20 * MS)
        } else {
            self.slice_idle
        }
    }

    /// A completion's sample of the device's queueing (`bfq_update_hw_tag`), taken before
    /// it leaves the device count.
    pub(super) fn update_hw_tag(&mut self) {
        let in_driver = self.in_driver;
        let busy = in_driver + self.queued.len() as u32 > HW_QUEUE_THRESHOLD;
        // A quick queue in service with too few requests to fill the device proves nothing.
        let starved = self
            .in_service
            .and_then(|s| self.queues.get(&s.key))
            .is_some_and(|q| {
                !q.habits.thinks_longer_than(self.slice_idle)
                    && q.inflight + (q.requests.len() as u32) < HW_QUEUE_THRESHOLD
                    && in_driver < HW_QUEUE_THRESHOLD
            });
        self.hw_tag.sample(hw_tag::BFQ, in_driver, busy && !starved);
    }
}

/// Whether `queue` seeks: more than [`SEEKY_OF_32`] of its last 32 requests.
pub(super) fn seeky(queue: &Queue) -> bool {
    queue.habits.seeks() > SEEKY_OF_32
}
