//! Merging: a bio joins a queued request at its back or front, and a request that then
//! touches its neighbour absorbs it (coalescing), under the queue's `nomerges`, its limits,
//! and the policy's veto when it asks for one. [`Merging`] owns the index and the rules;
//! the core asks the policy and keeps the counts.

use schedhost_sdk::{MergeEvent, MergeKind, MergeQuery, MergeRule, RequestId, Sector};

use super::event::Kind;
use super::merge::{MergeIndex, MergeLimits, Nomerges, can_coalesce, can_merge};
use super::request::{Bio, BioRef, Request, RequestTable};
use super::{Core, State};

/// The merge index and the rules a merge must keep.
#[derive(Debug)]
pub(super) struct Merging {
    index: MergeIndex,
    nomerges: Nomerges,
    limits: MergeLimits,
}

impl Merging {
    /// Merges under `nomerges`, within `limits`.
    pub(super) fn new(nomerges: Nomerges, limits: MergeLimits) -> Self {
        Self {
            index: MergeIndex::default(),
            nomerges,
            limits,
        }
    }

    /// Request `id` may be merged into from now on.
    pub(super) fn add(&mut self, id: u64, request: &Request) {
        self.index.add(id, request);
    }

    /// Request `id` may no longer be merged into (it left for the device).
    pub(super) fn remove(&mut self, id: u64, request: &Request) {
        self.index.remove(id, request);
    }

    /// The requests `bio` may join, and at which end, best first: the candidates the index
    /// and the mode offer that the limits allow (at most two: no allocation per bio).
    pub(super) fn candidates(
        &self,
        bio: &Bio,
        table: &RequestTable,
    ) -> [Option<(u64, MergeKind)>; 2] {
        let mergeable = |&(id, _): &(u64, MergeKind)| {
            table
                .get(id)
                .is_some_and(|r| can_merge(r, bio, self.limits))
        };
        self.index
            .candidates(bio, self.nomerges, table)
            .map(|c| c.filter(mergeable))
    }

    /// Adds `bio`, submitted at `submitted_ns` and let go by its group's limits at
    /// `admitted_ns`, to request `id` at its `kind` end.
    pub(super) fn grow(
        &mut self,
        table: &mut RequestTable,
        id: u64,
        kind: MergeKind,
        bio: &Bio,
        (submitted_ns, admitted_ns): (u64, u64),
    ) {
        let Some(request) = table.get_mut(id) else {
            return;
        };
        // What every driver relies on when it lays a request out as one I/O: its bios are
        // one operation, back to back, within the queue's limits.
        let touches = match kind {
            MergeKind::Back => request.end() == bio.sector,
            MergeKind::Front => bio.end() == request.sector,
        };
        assert!(
            touches && request.op == bio.op,
            "bio {} merged into request {id}, which it does not continue",
            bio.id
        );
        self.index.remove(id, request);
        request.sectors += bio.sectors;
        if kind == MergeKind::Front {
            request.sector = bio.sector;
        }
        let bio_ref = (
            bio.ctx,
            BioRef {
                id: bio.id,
                submit_ns: submitted_ns,
                admitted_ns,
                sectors: bio.sectors,
            },
        );
        // Bios stay in sector order: a front merge goes first.
        if kind == MergeKind::Front {
            request.bios.insert(0, bio_ref);
        } else {
            request.bios.push(bio_ref);
        }
        assert!(
            request.sectors <= self.limits.max_sectors
                && request.bios.len() <= self.limits.max_segments as usize,
            "a merge grew request {id} past the queue's limits"
        );
        self.index.add(id, request);
    }

    /// After request `id` grew at its `kind` end, the neighbour it now touches that it may
    /// absorb, if coalescing is on: `(survivor, absorbed)`.
    pub(super) fn neighbour(
        &self,
        table: &RequestTable,
        id: u64,
        kind: MergeKind,
    ) -> Option<(u64, u64)> {
        if self.nomerges != Nomerges::All {
            return None;
        }
        let request = table.get(id)?;
        let (survivor, absorbed) = match kind {
            MergeKind::Back => (id, self.index.successor(request)?),
            MergeKind::Front => (self.index.predecessor(request)?, id),
        };
        let (s, a) = (table.get(survivor)?, table.get(absorbed)?);
        (survivor != absorbed && can_coalesce(s, a, self.limits)).then_some((survivor, absorbed))
    }

    /// `survivor` absorbs `absorbed`, which leaves the table; returns it.
    pub(super) fn absorb(
        &mut self,
        table: &mut RequestTable,
        survivor: u64,
        absorbed: u64,
    ) -> Option<Request> {
        let gone = table.remove(absorbed)?;
        self.index.remove(absorbed, &gone);
        if let Some(s) = table.get_mut(survivor) {
            assert!(
                s.end() == gone.sector && s.op == gone.op,
                "request {survivor} absorbed request {absorbed}, which does not continue it"
            );
            self.index.remove(survivor, s);
            s.sectors += gone.sectors;
            s.arrival_ns = s.arrival_ns.min(gone.arrival_ns);
            s.bios.extend_from_slice(&gone.bios);
            self.index.add(survivor, s);
        }
        Some(gone)
    }

    /// `id` is the one-hit cache's entry.
    pub(super) fn touch(&mut self, id: u64) {
        self.index.touch(id);
    }
}

/// What the policy is asked before request `target_id` (`target`) takes in `joining` at
/// its `kind` end: the one form of the question, for bios and for coalescing alike.
fn query(target_id: u64, target: &Request, joining: Joining, kind: MergeKind) -> MergeQuery {
    MergeQuery {
        target: RequestId(target_id),
        target_ctx: target.ctx,
        ctx: joining.ctx,
        op: joining.op,
        sector: Sector(joining.sector),
        sectors: joining.sectors,
        sync: joining.sync,
        kind,
    }
}

/// What asks to join a request: a bio, or a request being coalesced.
#[derive(Debug, Clone, Copy)]
struct Joining {
    ctx: u32,
    op: schedhost_sdk::Op,
    sector: u64,
    sectors: u32,
    sync: bool,
}

impl From<&Bio> for Joining {
    fn from(b: &Bio) -> Self {
        Self {
            ctx: b.ctx,
            op: b.op,
            sector: b.sector,
            sectors: b.sectors,
            sync: b.sync,
        }
    }
}

impl From<&Request> for Joining {
    fn from(r: &Request) -> Self {
        Self {
            ctx: r.ctx,
            op: r.op,
            sector: r.sector,
            sectors: r.sectors,
            sync: r.sync,
        }
    }
}

impl Core {
    /// Merges `bio` into a request if the mode, the limits and the policy allow.
    /// Returns true iff it merged. A failing veto counts as a refusal.
    pub(super) fn try_merge(&mut self, now_ns: u64, submitted_ns: u64, bio: &Bio) -> bool {
        let group = self.group_of(bio.ctx);
        for (id, kind) in self
            .merging
            .candidates(bio, &self.table)
            .into_iter()
            .flatten()
        {
            let same_group = self.table.get(id).is_some_and(|r| r.group == group);
            if !same_group || !self.merge_allowed(id, Joining::from(bio), kind) {
                continue;
            }
            self.merging
                .grow(&mut self.table, id, kind, bio, (submitted_ns, now_ns));
            if let Some(grown) = self.table.get(id).filter(|r| !r.is_queued()) {
                self.plugging
                    .on_merge(bio.ctx, u64::from(grown.sectors) * 512);
            }
            match kind {
                MergeKind::Front => self.stats.front_merges += 1,
                MergeKind::Back => self.stats.back_merges += 1,
            }
            let merged = match kind {
                MergeKind::Back => Kind::BackMerge,
                MergeKind::Front => Kind::FrontMerge,
            };
            self.note(
                now_ns,
                merged,
                bio.ctx,
                bio.op,
                bio.sync,
                (bio.sector, bio.sectors),
                id,
            );
            let survivor = self.coalesce(id, kind);
            let (target, absorbed) = survivor.map_or((id, None), |(s, a)| (s, Some(a)));
            self.merging.touch(target);
            if let Some(request) = self.table.get(target).filter(|r| r.is_queued()) {
                let kind = if absorbed.is_some() {
                    MergeKind::Back
                } else {
                    kind
                };
                self.pending_merges.push(MergeEvent {
                    target: RequestId(target),
                    sector: Sector(request.sector),
                    sectors: request.sectors,
                    kind,
                    absorbed: absorbed.map(RequestId),
                });
            }
            return true;
        }
        false
    }

    /// Whether request `id` may take in `joining` at its `kind` end: always, unless the
    /// policy holds it; then as its merge rules say, asking it where they say to.
    fn merge_allowed(&mut self, id: u64, joining: Joining, kind: MergeKind) -> bool {
        let Some(target) = self.table.get(id) else {
            return false;
        };
        if !target.is_queued() {
            return true;
        }
        match self.policy.merge_rules().of(kind) {
            MergeRule::Allow => true,
            MergeRule::Refuse => {
                self.stats.merges_vetoed += 1;
                false
            }
            MergeRule::Ask => {
                let query = query(id, target, joining, kind);
                self.ask_merge(&query)
            }
        }
    }

    /// The policy's merge rules again, after a tunable changed; a fault leaves them.
    pub(super) fn refresh_merge_rules(&mut self) {
        let veto = self.policy.info().merge_veto;
        let rules = super::supervised::merge_rules(self.policy.instance(), veto, &mut self.stats);
        if let Some(rules) = self.policy.guard(rules.map(Some), None) {
            self.policy.set_merge_rules(rules);
        }
    }

    /// The policy's merge veto; a fault (or a dead policy) refuses.
    fn ask_merge(&mut self, query: &MergeQuery) -> bool {
        if !self.policy.alive() {
            return false;
        }
        self.stats.policy_calls += 1;
        let answer = self.policy.instance().allow_merge(query);
        let allowed = self.policy.guard(answer, false);
        if !allowed {
            self.stats.merges_vetoed += 1;
        }
        allowed
    }

    /// After request `id` grew at its `kind` end, absorbs the neighbour it now touches, if
    /// allowed. Returns `(survivor, absorbed)`.
    fn coalesce(&mut self, id: u64, kind: MergeKind) -> Option<(u64, u64)> {
        let (survivor, absorbed) = self.merging.neighbour(&self.table, id, kind)?;
        let joining = Joining::from(self.table.get(absorbed)?);
        if !self.merge_allowed(survivor, joining, MergeKind::Back) {
            return None;
        }
        let gone = self.merging.absorb(&mut self.table, survivor, absorbed)?;
        self.forget_waiting(absorbed, &gone);
        self.stats.coalesced += 1;
        Some((survivor, absorbed))
    }

    /// Drops an absorbed request from wherever it waited, and frees its scheduler tag.
    fn forget_waiting(&mut self, id: u64, gone: &Request) {
        match gone.state {
            State::Staged => {
                self.admission
                    .unstage(gone.ctx, gone.home_queue, gone.group, id);
            }
            State::Pending => {
                self.pending_insert.retain(|&p| p != id);
                self.release_tag(gone.home_queue, gone.tag_kind());
            }
            // Sent-back requests are out of the merge index, so none is absorbed; were one,
            // it would leave the requeue batch as a pending one leaves the insert batch.
            State::Requeued => {
                self.pending_requeue.retain(|&p| p != id);
                self.release_tag(gone.home_queue, gone.tag_kind());
            }
            State::Queued => {
                assert!(
                    self.queued > 0,
                    "an absorbed request the policy held, with none held"
                );
                self.queued -= 1;
                self.release_tag(gone.home_queue, gone.tag_kind());
            }
            State::Dispatched { .. } => {}
        }
    }
}
