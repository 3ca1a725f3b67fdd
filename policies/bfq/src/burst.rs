//! Large bursts (`bfq_handle_burst`): many queues created together are the start of one
//! big job (a parallel build, a server spawning workers), not interactive tasks, so they
//! are not weight-raised. Sync queues created within 180 ms of the one before, in the same
//! group, form a burst; once eight have, every one of them and every later one until the
//! burst ends is in a large burst.

use schedhost_sdk::Request;

use super::{Bfq, MS, Queue, QueueKey, WR_DURATION_NS};

/// Queues created within this long of the last one are in the same burst
/// (`bfq_burst_interval`).
const INTERVAL_NS: u64 = 180 * MS;
/// A burst this large is a large burst (`bfq_large_burst_thresh`).
const LARGE: u32 = 8;

/// The burst being watched.
#[derive(Debug, Default)]
pub(super) struct Burst {
    /// Its queues while it is not yet large (`burst_list`).
    members: Vec<QueueKey>,
    /// Queues created in it (`burst_size`).
    size: u32,
    /// It reached [`LARGE`]: queues created now join it at once.
    large: bool,
    /// When a queue last joined it, if one ever did.
    last_join: Option<u64>,
    /// The group its queues are in (`burst_parent_entity`).
    group: u32,
}

impl Burst {
    /// Sync queue `key` of `group` was created at `now_ns`, with `busy` queues busy: the
    /// queues that are in a large burst with it (`key` first, and those that joined the
    /// burst before it became large), or none if it is not in one.
    pub(super) fn created(
        &mut self,
        key: QueueKey,
        group: u32,
        now_ns: u64,
        busy: usize,
    ) -> Vec<QueueKey> {
        let continues = self
            .last_join
            .is_some_and(|last| now_ns <= last.saturating_add(INTERVAL_NS))
            && group == self.group;
        self.last_join = Some(now_ns);
        if !continues {
            // bfq_reset_burst_list: a burst starts with this queue if nothing else is busy.
            self.large = false;
            self.members.clear();
            self.group = group;
            self.size = u32::from(busy == 0);
            if busy == 0 {
                self.members.push(key);
            }
            return Vec::new();
        }
        if self.large {
            return vec![key];
        }
        self.size += 1;
        if self.size < LARGE {
            self.members.push(key);
            return Vec::new();
        }
        self.large = true;
        let mut marked = vec![key];
        marked.append(&mut self.members);
        marked
    }
}

impl Bfq {
    /// A sync queue for `r`'s submitter is created at `now_ns`: raised under `low_latency`
    /// unless it is in a large burst, whose queues end their raising with it.
    pub(super) fn created(&mut self, key: QueueKey, r: &Request, now_ns: u64) {
        let busy = self.queues.values().filter(|q| q.busy).count();
        let in_burst = self.burst.created(key, r.group, now_ns, busy);
        let mut queue = Queue::for_request(r, now_ns);
        if self.low_latency && in_burst.is_empty() {
            queue.raised_until = now_ns + WR_DURATION_NS;
        }
        self.queues.insert(key, queue);
        for member in in_burst {
            if let Some(q) = self.queues.get_mut(&member) {
                q.raised_until = q.raised_until.min(now_ns);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_eighth_queue_within_180_ms_makes_a_large_burst_of_all_and_a_late_one_starts_anew() {
        let mut burst = Burst::default();
        for ctx in 0..7 {
            assert!(
                burst
                    .created(
                        QueueKey::Sync(ctx),
                        0,
                        u64::from(ctx) * 100 * MS,
                        ctx as usize
                    )
                    .is_empty()
            );
        }
        let marked = burst.created(QueueKey::Sync(7), 0, 700 * MS, 7);
        assert_eq!(marked.len(), 8, "{marked:?}");
        assert_eq!(
            burst.created(QueueKey::Sync(8), 0, 800 * MS, 8),
            [QueueKey::Sync(8)]
        );
        assert!(
            burst
                .created(QueueKey::Sync(9), 0, 2_000 * MS, 9)
                .is_empty(),
            "late: a new burst"
        );
        assert!(
            burst
                .created(QueueKey::Sync(10), 1, 2_010 * MS, 9)
                .is_empty(),
            "another group"
        );
    }
}
