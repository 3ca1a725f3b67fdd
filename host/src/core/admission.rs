//! Admission: scheduler tags and the software queues waiting for them. A request holds a
//! tag from the moment it is admitted until it completes, within nr_requests per hardware
//! queue and the depth the policy allows each kind (its `limit_depth`); one that finds no tag
//! waits in its submitter's software queue, and a freed tag lets the waiting queues in,
//! round robin, as the kernel's per-ctx software queues wait for its scheduler tags.

use std::collections::VecDeque;

use schedhost_sdk::Op;

use super::request::RequestTable;
use super::{Core, CoreStats, Fault, PolicyBackend, State};

/// Scheduler tags a request of each kind `[op][sync]` may hold per hardware queue.
pub(super) type DepthLimits = [[u32; 2]; 4];

/// The tags and the software queues of one core.
#[derive(Debug)]
pub(super) struct Admission {
    nr_requests: u32,
    depth_limit: DepthLimits,
    /// Per hardware queue.
    tags: Vec<Tags>,
    /// Software queues by ctx: each submitter's requests waiting for a tag, in arrival order.
    software: Vec<VecDeque<u64>>,
}

/// One hardware queue's scheduler tags.
#[derive(Debug, Default)]
struct Tags {
    /// In use, by `[op][sync]`.
    held: [[u32; 2]; 4],
    /// In use in all.
    held_total: u32,
    /// Submitters with requests waiting for a tag here, served round robin.
    waiting: VecDeque<u32>,
}

impl Admission {
    /// `nr_requests` tags on each of `hw_queues`, no kind limited yet.
    pub(super) fn new(hw_queues: u32, nr_requests: u32) -> Self {
        Self {
            nr_requests,
            depth_limit: [[u32::MAX; 2]; 4],
            tags: (0..hw_queues).map(|_| Tags::default()).collect(),
            software: Vec::new(),
        }
    }

    /// The policy's limits per kind, from now on.
    pub(super) fn set_depth_limits(&mut self, limits: DepthLimits) {
        self.depth_limit = limits;
    }

    /// True iff a request of this kind may take a tag on `home` now.
    pub(super) fn tag_free(&self, home: u32, op: Op, sync: bool) -> bool {
        let tags = &self.tags[home as usize];
        tags.held_total < self.nr_requests
            && tags.held[op as usize][usize::from(sync)]
                < self.depth_limit[op as usize][usize::from(sync)]
    }

    /// A request of this kind takes a tag on `home`.
    pub(super) fn take_tag(&mut self, home: u32, op: Op, sync: bool) {
        let tags = &mut self.tags[home as usize];
        tags.held[op as usize][usize::from(sync)] += 1;
        tags.held_total += 1;
    }

    /// Request `id` of `ctx` waits at the tail of its software queue for a tag on `home`.
    pub(super) fn stage(&mut self, ctx: u32, home: u32, id: u64) {
        let ctx_index = ctx as usize;
        if self.software.len() <= ctx_index {
            self.software.resize_with(ctx_index + 1, VecDeque::new);
        }
        let queue = &mut self.software[ctx_index];
        if queue.is_empty() {
            self.tags[home as usize].waiting.push_back(ctx);
        }
        queue.push_back(id);
    }

    /// Request `id` of `ctx` no longer waits (a merge absorbed it).
    pub(super) fn unstage(&mut self, ctx: u32, id: u64) {
        if let Some(queue) = self.software.get_mut(ctx as usize) {
            queue.retain(|&s| s != id);
        }
    }

    /// Frees a tag of this kind on `home` and lets waiting requests in: one from each
    /// waiting software queue in turn, skipping a queue whose head is of a kind at its depth
    /// limit. Those let in hold a tag from now on and are appended to `admitted`.
    pub(super) fn release(
        &mut self,
        home: u32,
        op: Op,
        sync: bool,
        table: &RequestTable,
        admitted: &mut Vec<u64>,
    ) {
        let tags = &mut self.tags[home as usize];
        let kind = &mut tags.held[op as usize][usize::from(sync)];
        debug_assert!(
            *kind > 0 && tags.held_total > 0,
            "a tag released that was not held"
        );
        *kind = kind.saturating_sub(1);
        tags.held_total = tags.held_total.saturating_sub(1);
        let mut fruitless = 0;
        while fruitless < self.tags[home as usize].waiting.len()
            && self.tags[home as usize].held_total < self.nr_requests
        {
            let Some(ctx) = self.tags[home as usize].waiting.pop_front() else {
                break;
            };
            let head = self.software[ctx as usize]
                .front()
                .and_then(|&id| table.get(id).map(|r| (id, r.op, r.sync)));
            let let_in = match head {
                Some((id, op, sync)) if self.tag_free(home, op, sync) => {
                    self.software[ctx as usize].pop_front();
                    self.take_tag(home, op, sync);
                    admitted.push(id);
                    true
                }
                _ => false,
            };
            fruitless = if let_in { 0 } else { fruitless + 1 };
            if !self.software[ctx as usize].is_empty() {
                self.tags[home as usize].waiting.push_back(ctx);
            }
        }
    }

    /// Requests waiting for a tag.
    pub(super) fn staged(&self) -> usize {
        self.software.iter().map(VecDeque::len).sum()
    }

    /// The tags in use are what their per-kind counts say, within nr_requests.
    pub(super) fn check_invariants(&self) {
        for (q, tags) in self.tags.iter().enumerate() {
            let by_kind: u32 = tags.held.iter().flatten().sum();
            assert_eq!(
                by_kind, tags.held_total,
                "queue {q}: scheduler tags by kind"
            );
            assert!(
                tags.held_total <= self.nr_requests,
                "queue {q}: {} scheduler tags held past nr_requests {}",
                tags.held_total,
                self.nr_requests
            );
        }
    }
}

impl Core {
    /// Gives request `id` a scheduler tag and queues it for the next insert batch.
    pub(super) fn admit(&mut self, id: u64) {
        let Some(request) = self.table.get_mut(id) else {
            return;
        };
        request.state = State::Pending;
        self.admission
            .take_tag(request.home_queue, request.op, request.sync);
        self.pending_insert.push(id);
    }

    /// Frees a scheduler tag on `home`; the requests it lets in go to the next insert batch.
    pub(super) fn release_tag(&mut self, home: u32, op: Op, sync: bool) {
        let from = self.pending_insert.len();
        self.admission
            .release(home, op, sync, &self.table, &mut self.pending_insert);
        for &id in &self.pending_insert[from..] {
            if let Some(request) = self.table.get_mut(id) {
                request.state = State::Pending;
            }
        }
    }

    pub(super) fn refresh_depth_limits(&mut self) {
        let limits = depth_limits(self.policy.instance(), &mut self.stats);
        if let Some(limits) = self.policy.guard(limits.map(Some), None) {
            self.admission.set_depth_limits(limits);
        }
    }
}

/// Scheduler tags each kind of request may hold, as `policy` says.
pub(super) fn depth_limits(
    policy: &mut dyn PolicyBackend,
    stats: &mut CoreStats,
) -> Result<DepthLimits, Fault> {
    let mut limits = [[u32::MAX; 2]; 4];
    for op in Op::ALL {
        for sync in [false, true] {
            stats.policy_calls += 1;
            limits[op as usize][usize::from(sync)] = policy.limit_depth(op, sync)?.max(1);
        }
    }
    Ok(limits)
}
