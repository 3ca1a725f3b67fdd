//! Admission: scheduler tags and the software queues waiting for them. A request holds a
//! tag from the moment it is admitted until it completes, within nr_requests per hardware
//! queue (one pool of them all while groups share it) and the depth the policy allows each
//! kind (its `limit_depth`); one that finds no tag waits in its submitter's software queue,
//! and a freed tag lets the waiting queues in, round robin, as the kernel's per-ctx software
//! queues wait for its scheduler tags.
//!
//! With groups, the tags are also shared between the groups, so that whichever group fills
//! the pool first does not get the pool: while two or more groups hold tags or wait for
//! them, a group holding its part (what it is sure of when the pool is divided among the
//! active groups in whole parts, at least two each where the pool holds two for every
//! group, else one) takes another only if more stay free than the waiting groups under
//! their parts are owed (a group whose own limits hold bios back is owed one:
//! `GroupTags::kept`). A group alone takes every tag, and a part one group leaves unused,
//! or a tag no group is sure of, goes to the others, so no tag idles while a request waits
//! for one nobody is owed: to the waiting group that holds fewest for its weight, unless
//! the asker's requests go to the device as they come (the policy holds fewer of them than
//! its part), so that a light group whose requests the policy holds back does not keep
//! every such tag it ever took. The parts are equal unless the policy asks for them weighted
//! (`weighted-tags`, as bfq's `bfqq_request_over_limit` weighs each group's part of
//! `nr_requests`): weights are the policy's to serve (a policy that ignores them, as `none`
//! does in the kernel, must not have them served by the pool), and the pool's job is only
//! to give every group requests for the policy to choose among, in the proportion the
//! policy serves. The legacy kernel kept a request list per blkcg for the same reason.
//! The parts and the rule for a group at its part are `parts.rs`.

use std::collections::VecDeque;

use schedhost_sdk::Op;

mod parts;
#[cfg(test)]
mod tests;

use parts::{Division, PartsCache, may_take};

use super::request::{RequestTable, TagKind};
use super::{Core, CoreStats, DEFAULT_WEIGHT, Fault, PolicyBackend, State};

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
    /// Requests in all the software queues together, kept so that the core's count law
    /// costs no walk over the submitters.
    staged: usize,
    /// Whether the tags are shared between groups (a run with groups).
    shared: bool,
    /// The groups' weights by group number, when their parts are weighted.
    weights: Option<Vec<u32>>,
    /// How many hardware queues' pools are one (`share_between_groups`): 1, or all.
    joined: u32,
    /// Working space for a division not kept: asked by a group that holds and waits for
    /// nothing.
    scratch: Division,
}

/// One group's use of one hardware queue's tags.
#[derive(Debug, Default, Clone, Copy)]
struct GroupTags {
    held: u32,
    /// Of those held, the requests on the device (the others the policy holds).
    on_device: u32,
    /// Its requests in software queues waiting for a tag here.
    staged: u32,
    /// Its bios wait for its own limits (io.max, io.latency's depth): each comes for a tag
    /// as its limit lets it go.
    limited: bool,
}

impl GroupTags {
    fn active(self) -> bool {
        self.held > 0 || self.staged > 0 || self.limited
    }

    /// How many of the tags it is owed under `part` are kept free for it: all it lacks while
    /// it waits for tags, and one while its limit holds bios that will come for one (the
    /// next such bio finds it; the one after, a tag its predecessor's completion freed). A
    /// group let through by its limit a bio at a time otherwise found every tag lent to
    /// groups past their parts, their requests held in the policy while it idled for the
    /// limited group's next one (bfq, the sweep's seed 4 cell 7: a group at riops=5127
    /// completed 1 982 of the 2 051 its rate gave the 400 ms judged; 2 051 with a tag kept,
    /// as with 4 096 tags). Its whole part kept for it cost a group beside a heavy limited
    /// one its throughput (mclock, seed 4 cell 198: 0.24 of noop's).
    fn kept(self, part: u32) -> u32 {
        let lacks = part.saturating_sub(self.held);
        if self.staged > 0 {
            lacks
        } else if self.limited {
            lacks.min(1)
        } else {
            0
        }
    }
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
    /// By group number, when there are groups.
    by_group: Vec<GroupTags>,
    /// The active groups' parts of this pool.
    parts: PartsCache,
}

impl Tags {
    /// Changes `group`'s use of the pool; the parts are divided again when a group turns
    /// active or idle.
    fn update_group(&mut self, group: u32, change: impl FnOnce(&mut GroupTags)) {
        let index = group as usize;
        if self.by_group.len() <= index {
            self.by_group.resize(index + 1, GroupTags::default());
        }
        let tags = &mut self.by_group[index];
        let was = tags.active();
        change(tags);
        if tags.active() != was {
            self.parts.stale();
        }
    }

    /// One of `group`'s requests left a software queue (admitted, or absorbed by a merge).
    fn unstaged(&mut self, group: u32) {
        self.update_group(group, |g| g.staged = g.staged.saturating_sub(1));
    }
}

impl Admission {
    /// `nr_requests` tags on each of `hw_queues`, no kind limited yet.
    pub(super) fn new(hw_queues: u32, nr_requests: u32) -> Self {
        Self {
            nr_requests,
            depth_limit: [[u32::MAX; 2]; 4],
            tags: (0..hw_queues).map(|_| Tags::default()).collect(),
            software: Vec::new(),
            staged: 0,
            shared: false,
            weights: None,
            joined: 1,
            scratch: Division::default(),
        }
    }

    /// The policy's limits per kind, from now on.
    pub(super) fn set_depth_limits(&mut self, limits: DepthLimits) {
        self.depth_limit = limits;
    }

    /// The tags are shared between groups from now on, and the hardware queues' pools are
    /// one of as many tags (the kernel's shared scheduler tags, `BLK_MQ_F_TAG_HCTX_SHARED`):
    /// a submitter's home queue is its CPU's, not its group's, so per queue a group alone
    /// on its queue would fill that queue's pool whatever its weight, and no part of one
    /// queue's pool could give another group its share. Set before the first request (a run
    /// sets its groups first); with tags already held, the pools stay apart.
    pub(super) fn share_between_groups(&mut self) {
        self.shared = true;
        let idle = self
            .tags
            .iter()
            .all(|t| t.held_total == 0 && t.waiting.is_empty());
        let queues = u32::try_from(self.tags.len()).unwrap_or(u32::MAX);
        if idle && self.joined == 1 && queues > 1 {
            self.joined = queues;
            self.nr_requests = self.nr_requests.saturating_mul(queues);
            // Parts kept for the old pool's size are not this pool's.
            for tags in &mut self.tags {
                tags.parts.stale();
            }
        }
    }

    /// The pool a request whose home is `home` takes its tag from.
    fn pool(&self, home: u32) -> usize {
        if self.joined > 1 { 0 } else { home as usize }
    }

    /// The groups' parts are in proportion to `weights` (by group number; group 0 holds
    /// requests outside every group), or equal (`None`).
    pub(super) fn weigh_groups(&mut self, weights: Option<Vec<u32>>) {
        self.weights = weights;
        for tags in &mut self.tags {
            tags.parts.stale();
        }
    }

    /// Group `group`'s weight for its part of the tags: 1 each when parts are equal.
    fn weight(weights: Option<&Vec<u32>>, group: u32) -> u64 {
        weights.map_or(1, |w| {
            u64::from(
                w.get(group as usize)
                    .copied()
                    .unwrap_or(DEFAULT_WEIGHT)
                    .max(1),
            )
        })
    }

    /// Whether the sharing lets `group` take another tag on `home` (the pool has one free).
    fn group_may_take(&mut self, home: u32, group: u32) -> bool {
        if !self.shared {
            return true;
        }
        let pool = self.pool(home);
        let (nr_requests, weights) = (self.nr_requests, self.weights.as_ref());
        let tags = &mut self.tags[pool];
        if !tags
            .by_group
            .iter()
            .enumerate()
            .any(|(g, t)| t.active() && g as u32 != group)
        {
            return true;
        }
        // The parts of the active groups and the asking one, at least one tag each (two
        // where the pool holds two for every group), and
        // what the floors leave to a remainder that wins it (a floor alone held a group owed
        // 1.9 tags to one, half its share whatever the policy did: mclock on the sweep's
        // cell 308, the weight-17 group of six 11 % under its share).
        let Tags {
            by_group,
            held_total,
            parts,
            ..
        } = tags;
        if by_group.get(group as usize).is_some_and(|t| t.active()) {
            let parts = parts.parts(by_group, nr_requests, weights);
            return may_take(by_group, *held_total, group, nr_requests, parts);
        }
        // A group that holds and waits for nothing asks as one of the groups it would join.
        let active = (by_group.iter().enumerate())
            .filter(|(_, t)| t.active())
            .map(|(g, _)| g as u32);
        let scratch = &mut self.scratch;
        scratch.divide(nr_requests, active.chain([group]), weights);
        may_take(by_group, *held_total, group, nr_requests, scratch.parts())
    }

    /// Whether `group`'s limits hold bios back (see [`GroupTags::kept`]), on every pool.
    pub(super) fn limited(&mut self, group: u32, limited: bool) {
        if !self.shared || group == 0 {
            return;
        }
        for tags in &mut self.tags {
            tags.update_group(group, |g| g.limited = limited);
        }
    }

    /// True iff a request of this kind may take a tag on `home` now.
    pub(super) fn tag_free(&mut self, home: u32, kind: TagKind) -> bool {
        let tags = &self.tags[self.pool(home)];
        let (op, sync) = (kind.op as usize, usize::from(kind.sync));
        tags.held_total < self.nr_requests
            && tags.held[op][sync] < self.depth_limit[op][sync].saturating_mul(self.joined)
            && self.group_may_take(home, kind.group)
    }

    /// A request of this kind takes a tag on `home`.
    pub(super) fn take_tag(&mut self, home: u32, kind: TagKind) {
        let pool = self.pool(home);
        let tags = &mut self.tags[pool];
        tags.held[kind.op as usize][usize::from(kind.sync)] += 1;
        tags.held_total += 1;
        assert!(
            tags.held_total <= self.nr_requests,
            "queue {home}: a scheduler tag taken past nr_requests {}",
            self.nr_requests
        );
        if self.shared {
            tags.update_group(kind.group, |g| g.held += 1);
        }
    }

    /// Request `id` of `ctx` (in `group`) waits at the tail of its software queue for a tag
    /// on `home`.
    pub(super) fn stage(&mut self, ctx: u32, home: u32, group: u32, id: u64) {
        let ctx_index = ctx as usize;
        if self.software.len() <= ctx_index {
            self.software.resize_with(ctx_index + 1, VecDeque::new);
        }
        let pool = self.pool(home);
        let queue = &mut self.software[ctx_index];
        if queue.is_empty() {
            self.tags[pool].waiting.push_back(ctx);
        }
        queue.push_back(id);
        self.staged += 1;
        if self.shared {
            self.tags[pool].update_group(group, |g| g.staged += 1);
        }
    }

    /// Request `id` of `ctx` (in `group`, waiting on `home`) no longer waits (a merge
    /// absorbed it).
    pub(super) fn unstage(&mut self, ctx: u32, home: u32, group: u32, id: u64) {
        let Some(queue) = self.software.get_mut(ctx as usize) else {
            return;
        };
        let before = queue.len();
        queue.retain(|&s| s != id);
        let removed = before - queue.len();
        let emptied = removed > 0 && queue.is_empty();
        self.staged -= removed;
        let pool = self.pool(home);
        if removed > 0 && self.shared {
            self.tags[pool].unstaged(group);
        }
        if emptied {
            // Out of the round robin, or staging again would put it in twice and give it
            // two turns for every other submitter's one.
            self.tags[pool].waiting.retain(|&c| c != ctx);
        }
    }

    /// Frees a tag of this kind on `home` and lets waiting requests in: one from each
    /// waiting software queue in turn, skipping a queue whose head is of a kind at its depth
    /// limit. Those let in hold a tag from now on and are appended to `admitted`.
    pub(super) fn release(
        &mut self,
        home: u32,
        kind: TagKind,
        table: &RequestTable,
        admitted: &mut Vec<u64>,
    ) {
        let pool = self.pool(home);
        let tags = &mut self.tags[pool];
        let held = &mut tags.held[kind.op as usize][usize::from(kind.sync)];
        // A tag released twice would let a later request take one the pool never had.
        assert!(
            *held > 0 && tags.held_total > 0,
            "a tag released that was not held"
        );
        *held -= 1;
        tags.held_total -= 1;
        if self.shared {
            tags.update_group(kind.group, |group| {
                assert!(
                    group.held > 0,
                    "a group's tag released that it did not hold"
                );
                group.held -= 1;
            });
        }
        let mut fruitless = 0;
        while fruitless < self.tags[pool].waiting.len()
            && self.tags[pool].held_total < self.nr_requests
        {
            let Some(ctx) = self.tags[pool].waiting.pop_front() else {
                break;
            };
            let head = self.software[ctx as usize]
                .front()
                .and_then(|&id| table.get(id).map(|r| (id, r.tag_kind())));
            let let_in = match head {
                Some((id, kind)) if self.tag_free(home, kind) => {
                    self.software[ctx as usize].pop_front();
                    self.staged -= 1;
                    // The tag first, so that a group whose last waiting request this was
                    // does not turn idle for a moment and have the parts divided again.
                    self.take_tag(home, kind);
                    if self.shared {
                        self.tags[pool].unstaged(kind.group);
                    }
                    admitted.push(id);
                    true
                }
                _ => false,
            };
            fruitless = if let_in { 0 } else { fruitless + 1 };
            if !self.software[ctx as usize].is_empty() {
                self.tags[pool].waiting.push_back(ctx);
            }
        }
    }

    /// A request of `group` whose tag is on `home` was sent to the device (`sent`), or came
    /// off it (completed, or sent back by a busy device).
    pub(super) fn on_device(&mut self, home: u32, group: u32, sent: bool) {
        if !self.shared {
            return;
        }
        let pool = self.pool(home);
        self.tags[pool].update_group(group, |g| {
            if sent {
                assert!(
                    g.on_device < g.held,
                    "a request of a group sent past its tags"
                );
                g.on_device += 1;
            } else {
                assert!(
                    g.on_device > 0,
                    "a group's request left a device it was not on"
                );
                g.on_device -= 1;
            }
        });
    }

    /// Requests waiting for a tag.
    pub(super) fn staged(&self) -> usize {
        self.staged
    }

    /// The tags in use are what their per-kind counts say, within nr_requests, and no
    /// submitter waits in a round robin more often than there are submitters with
    /// requests waiting (each is in once, and only while it has one).
    pub(super) fn check_invariants(&self) {
        let in_queues: usize = self.software.iter().map(VecDeque::len).sum();
        assert_eq!(in_queues, self.staged, "requests in the software queues");
        let with_requests = self.software.iter().filter(|q| !q.is_empty()).count();
        let turns: usize = self.tags.iter().map(|t| t.waiting.len()).sum();
        assert!(
            turns <= with_requests,
            "{turns} turns in the round robins for {with_requests} submitters with requests waiting"
        );
        for (q, tags) in self.tags.iter().enumerate() {
            let by_kind: u32 = tags.held.iter().flatten().sum();
            assert_eq!(
                by_kind, tags.held_total,
                "queue {q}: scheduler tags by kind"
            );
            if self.shared {
                let by_group: u32 = tags.by_group.iter().map(|g| g.held).sum();
                assert_eq!(
                    by_group, tags.held_total,
                    "queue {q}: scheduler tags by group"
                );
                for (g, group) in tags.by_group.iter().enumerate() {
                    assert!(
                        group.on_device <= group.held,
                        "queue {q}: group {g} has {} requests on the device and {} tags",
                        group.on_device,
                        group.held
                    );
                }
            }
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
            .take_tag(request.home_queue, request.tag_kind());
        self.pending_insert.push(id);
    }

    /// Frees a scheduler tag of `kind` on `home`; the requests it lets in go to the next
    /// insert batch.
    pub(super) fn release_tag(&mut self, home: u32, kind: TagKind) {
        let from = self.pending_insert.len();
        self.admission
            .release(home, kind, &self.table, &mut self.pending_insert);
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
