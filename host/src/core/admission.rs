//! Scheduler tags and the software queues waiting for them: a request holds a tag from the
//! moment it is admitted until it completes, within nr_requests per hardware queue and the
//! depth the policy allows each kind.

use super::*;

impl Core {
    /// True iff a request of this kind may take a scheduler tag on `home` now.
    pub(super) fn tag_free(&self, home: u32, op: Op, sync: bool) -> bool {
        let queue = &self.queues[home as usize];
        queue.held_total < self.config.nr_requests
            && queue.held[op as usize][usize::from(sync)]
                < self.depth_limit[op as usize][usize::from(sync)]
    }

    /// Gives staged request `id` a scheduler tag and queues it for the next insert batch.
    pub(super) fn admit(&mut self, id: u64) {
        let Some(request) = self.table.get_mut(id) else {
            return;
        };
        request.state = State::Pending;
        let queue = &mut self.queues[request.home_queue as usize];
        queue.held[request.op as usize][usize::from(request.sync)] += 1;
        queue.held_total += 1;
        self.pending_insert.push(id);
    }

    /// Puts request `id` at the tail of `ctx`'s software queue to wait for a scheduler tag.
    pub(super) fn stage(&mut self, ctx: u32, home: u32, id: u64) {
        let ctx_index = ctx as usize;
        if self.software.len() <= ctx_index {
            self.software.resize_with(ctx_index + 1, VecDeque::new);
        }
        let queue = &mut self.software[ctx_index];
        if queue.is_empty() {
            self.queues[home as usize].waiting.push_back(ctx);
        }
        queue.push_back(id);
    }

    /// Frees a scheduler tag on `home` and lets waiting requests in: one from each waiting
    /// software queue in turn, skipping a queue whose head is of a kind at its depth limit.
    pub(super) fn release_tag(&mut self, home: u32, op: Op, sync: bool) {
        let queue = &mut self.queues[home as usize];
        let kind = &mut queue.held[op as usize][usize::from(sync)];
        debug_assert!(
            *kind > 0 && queue.held_total > 0,
            "a tag released that was not held"
        );
        *kind = kind.saturating_sub(1);
        queue.held_total = queue.held_total.saturating_sub(1);
        let mut fruitless = 0;
        while fruitless < self.queues[home as usize].waiting.len()
            && self.queues[home as usize].held_total < self.config.nr_requests
        {
            let Some(ctx) = self.queues[home as usize].waiting.pop_front() else {
                break;
            };
            let software = &mut self.software[ctx as usize];
            let head = software
                .front()
                .and_then(|&id| self.table.get(id).map(|r| (id, r.op, r.sync)));
            let admitted = match head {
                Some((id, op, sync)) if self.tag_free(home, op, sync) => {
                    self.software[ctx as usize].pop_front();
                    self.admit(id);
                    true
                }
                _ => false,
            };
            fruitless = if admitted { 0 } else { fruitless + 1 };
            if !self.software[ctx as usize].is_empty() {
                self.queues[home as usize].waiting.push_back(ctx);
            }
        }
    }

    pub(super) fn refresh_depth_limits(&mut self) {
        let limits = depth_limits(self.policy.as_mut(), &mut self.stats);
        if let Some(limits) = self.guard(limits.map(Some), None) {
            self.depth_limit = limits;
        }
    }
}

/// Scheduler tags each kind of request may hold, as `policy` says.
pub(super) fn depth_limits(
    policy: &mut dyn PolicyBackend,
    stats: &mut CoreStats,
) -> Result<[[u32; 2]; 4], Fault> {
    let mut limits = [[u32::MAX; 2]; 4];
    for op in Op::ALL {
        for sync in [false, true] {
            stats.policy_calls += 1;
            limits[op as usize][usize::from(sync)] = policy.limit_depth(op, sync)?.max(1);
        }
    }
    Ok(limits)
}
