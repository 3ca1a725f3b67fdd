//! When the active queue runs dry or its slice ends, whether it keeps the device: idling for
//! its own next request (`slice_idle`, `cfq_should_idle`), for its group's (`group_idle`),
//! waiting for its requests on the device, or stretching its slice so that its group stays
//! on the group tree (`wait_busy`).

use super::*;

impl Cfq {
    /// Flash that queues commands: cfq idles for no queue's own next request there, only
    /// for a group's (`cfq_arm_slice_timer`), and gives idle windows no weight
    /// (`cfq_should_idle`).
    pub(crate) fn flash_queueing(&self) -> bool {
        !self.rotational && self.hw_tag.queueing()
    }

    /// The active queue has nothing queued (`cfq_select_queue`): it keeps the device while
    /// idling, for its requests on the device if cfq would idle for it, or, as its group's
    /// only busy queue, for its group's requests on the device (`group_idle`); once none is
    /// out it idles `slice_idle` for its next request, or `group_idle` for its group's
    /// (`cfq_arm_slice_timer`); else its slice ends.
    pub(crate) fn when_dry(
        &mut self,
        active: Active,
        sync: bool,
        inflight: u32,
        now_ns: u64,
    ) -> Step {
        if let Some(until) = active.idle_until {
            return if now_ns < until {
                Step::WaitUntil(until)
            } else {
                Step::Expire
            };
        }
        if !sync {
            return Step::Expire;
        }
        if inflight > 0 && self.should_idle(active.key) {
            return Step::WaitUntil(active.slice_end);
        }
        if self.group_idles(active) {
            return Step::WaitUntil(active.slice_end);
        }
        if inflight > 0 {
            return Step::Expire;
        }
        let Some(idle) = self.idle_for(active) else {
            return Step::Expire;
        };
        let until = (now_ns + idle).min(active.slice_end);
        if let Some(a) = &mut self.active {
            a.idle_until = Some(until);
        }
        if now_ns < until {
            Step::WaitUntil(until)
        } else {
            Step::Expire
        }
    }

    /// `group_idle` in force: some group other than the root has been seen.
    fn group_idle_ns(&self) -> u64 {
        if self.grouped { self.t.group_idle } else { 0 }
    }

    /// Whether the active queue, its group's only busy one, keeps the device while its
    /// group has requests out (`cfq_select_queue`'s `check_group_idle`).
    fn group_idles(&self, active: Active) -> bool {
        let group_idle = self.group_idle_ns();
        group_idle > 0
            && self.busy_in(active.group) == 1
            && self
                .groups
                .get(&active.group)
                .is_some_and(|g| g.dispatched > 0)
            && !self.thinks_long(active.key, group_idle)
    }

    /// How long the dry active queue, with nothing on the device, idles
    /// (`cfq_arm_slice_timer`): `slice_idle` if cfq idles for it, else `group_idle` if it is
    /// its group's only busy queue and quick to think; never on flash that queues without
    /// `group_idle`.
    fn idle_for(&self, active: Active) -> Option<u64> {
        let group_idle = self.group_idle_ns();
        if self.flash_queueing() && group_idle == 0 {
            return None;
        }
        if self.should_idle(active.key) {
            return Some(self.t.slice_idle);
        }
        let alone = self.busy_in(active.group) == 1;
        (group_idle > 0 && alone && !self.thinks_long(active.key, group_idle)).then_some(group_idle)
    }

    /// Queue `key`'s think time is known and longer than `limit` (`cfq_io_thinktime_big`;
    /// a group's, sampled while it has one queue, is that queue's).
    fn thinks_long(&self, key: QueueKey, limit: u64) -> bool {
        self.queues
            .get(&key)
            .is_some_and(|q| q.window.habits.thinks_longer_than(limit))
    }

    /// Whether the active queue, its slice used, keeps the device (`cfq_select_queue`): as
    /// its group's only busy queue, dry with requests out that cfq would idle for, or while
    /// its group has requests out (`group_idle`). Only with groups.
    pub(crate) fn keeps_used_slice(&self, active: Active) -> bool {
        if !self.grouped {
            return false;
        }
        let dry_and_out = self
            .queues
            .get(&active.key)
            .is_some_and(|q| q.sync && q.requests.is_empty() && q.inflight > 0);
        (dry_and_out && self.busy_in(active.group) == 1 && self.should_idle(active.key))
            || self.group_idles(active)
    }

    /// A request of the active queue completed (`cfq_completed_request`): a dry queue that
    /// is its group's only busy one waits for its next request past its slice's end
    /// (`cfq_should_wait_busy`: slice used, or less of it left than the queue thinks, or a
    /// jiffy), so its group stays on the tree; a slice used ends.
    pub(crate) fn active_completed(&mut self, now_ns: u64) {
        let Some(active) = self.active else {
            return;
        };
        let mut updated = active;
        if self.grouped && self.should_wait_busy(active, now_ns) {
            let extend = if self.t.slice_idle > 0 {
                self.t.slice_idle
            } else {
                self.t.group_idle
            };
            updated.slice_end = now_ns.saturating_add(extend);
            updated.wait_busy = true;
        }
        if now_ns >= updated.slice_end {
            updated.used_up = true;
        }
        self.active = Some(updated);
    }

    /// `cfq_should_wait_busy`: the active queue is dry and its group's only busy one,
    /// quick to think, and its slice is used or about to be.
    fn should_wait_busy(&self, active: Active, now_ns: u64) -> bool {
        let Some(queue) = self.queues.get(&active.key) else {
            return false;
        };
        if !queue.requests.is_empty()
            || self.busy_in(active.group) > 1
            || self.thinks_long(active.key, self.t.group_idle)
        {
            return false;
        }
        let left = active.slice_end.saturating_sub(now_ns);
        left == 0 || queue.window.habits.thinks_longer_than(left) || left <= JIFFY_NS
    }

    /// Whether cfq idles for sync queue `key` when it runs dry (`cfq_should_idle`): it has
    /// an idle window (not on flash that queues commands), or it is the last busy queue of
    /// its service tree (its class's sync queues with an idle window, or those without:
    /// the sync-noidle tree idles as a whole), unless its thinking is too slow.
    pub(crate) fn should_idle(&self, key: QueueKey) -> bool {
        let Some(queue) = self.queues.get(&key) else {
            return false;
        };
        if queue.class == 2 || self.t.slice_idle == 0 {
            return false;
        }
        let window = queue.window.idle_window;
        if window && !self.flash_queueing() {
            return true;
        }
        let Some(group) = self.groups.get(&queue.group) else {
            return false;
        };
        let others_on_tree = group.waiting[queue.class as usize].iter().any(|k| {
            *k != key
                && matches!(k, QueueKey::Sync(_))
                && self
                    .queues
                    .get(k)
                    .is_some_and(|q| q.window.idle_window == window)
        });
        let slow = queue.window.habits.thinks_longer_than(self.t.slice_idle);
        !others_on_tree && !slow
    }
}
