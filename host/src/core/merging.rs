//! Merging a bio into a queued request (back, front, then coalescing neighbours), with the
//! policy's veto when it asks for one.

use super::*;

impl Core {
    /// Merges `bio` into a request if the mode, the limits and the policy allow.
    /// Returns true iff it merged. A failing veto counts as a refusal.
    pub(super) fn try_merge(&mut self, now_ns: u64, bio: &Bio) -> bool {
        for (id, kind) in self
            .index
            .candidates(bio, self.config.nomerges, &self.table)
            .into_iter()
            .flatten()
        {
            let Some(request) = self.table.get(id) else {
                continue;
            };
            if !can_merge(request, bio, self.config.limits()) {
                continue;
            }
            if self.policy.info().merge_veto && request.is_queued() {
                let query = MergeQuery {
                    target: RequestId(id),
                    target_ctx: request.ctx,
                    ctx: bio.ctx,
                    op: bio.op,
                    sector: Sector(bio.sector),
                    sectors: bio.sectors,
                    sync: bio.sync,
                    kind,
                };
                if !self.ask_merge(&query) {
                    continue;
                }
            }
            self.grow(id, kind, bio, now_ns);
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
            let survivor = match self.config.nomerges {
                Nomerges::All => self.coalesce(id, kind),
                _ => None,
            };
            let (target, absorbed) = survivor.map_or((id, None), |(s, a)| (s, Some(a)));
            self.index.touch(target);
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

    /// The policy's merge veto; a fault (or a dead policy) refuses.
    pub(super) fn ask_merge(&mut self, query: &MergeQuery) -> bool {
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

    /// Adds `bio` to request `id` at the `kind` end.
    pub(super) fn grow(&mut self, id: u64, kind: MergeKind, bio: &Bio, now_ns: u64) {
        let Some(request) = self.table.get_mut(id) else {
            return;
        };
        self.index.remove(id, request);
        request.sectors += bio.sectors;
        if kind == MergeKind::Front {
            request.sector = bio.sector;
            self.stats.front_merges += 1;
        } else {
            self.stats.back_merges += 1;
        }
        let bio_ref = (
            bio.ctx,
            BioRef {
                id: bio.id,
                submit_ns: now_ns,
                sectors: bio.sectors,
            },
        );
        // Bios stay in sector order: a front merge goes first.
        if kind == MergeKind::Front {
            request.bios.insert(0, bio_ref);
        } else {
            request.bios.push(bio_ref);
        }
        self.index.add(id, request);
    }

    /// After request `id` grew at its `kind` end, absorbs the neighbour it now touches, if
    /// allowed. Returns `(survivor, absorbed)`.
    pub(super) fn coalesce(&mut self, id: u64, kind: MergeKind) -> Option<(u64, u64)> {
        let request = self.table.get(id)?;
        let (survivor, absorbed) = match kind {
            MergeKind::Back => match self.index.successor(request) {
                Some(next) => (id, next),
                None => return None,
            },
            MergeKind::Front => match self.index.predecessor(request) {
                Some(prev) => (prev, id),
                None => return None,
            },
        };
        let (Some(s), Some(a)) = (self.table.get(survivor), self.table.get(absorbed)) else {
            return None;
        };
        if survivor == absorbed || !can_coalesce(s, a, self.config.limits()) {
            return None;
        }
        if self.policy.info().merge_veto && s.is_queued() {
            let query = MergeQuery {
                target: RequestId(survivor),
                target_ctx: s.ctx,
                ctx: a.ctx,
                op: a.op,
                sector: Sector(a.sector),
                sectors: a.sectors,
                sync: a.sync,
                kind: MergeKind::Back,
            };
            if !self.ask_merge(&query) {
                return None;
            }
        }
        let gone = self.table.remove(absorbed)?;
        self.index.remove(absorbed, &gone);
        self.forget_waiting(absorbed, &gone);
        if let Some(s) = self.table.get_mut(survivor) {
            self.index.remove(survivor, s);
            s.sectors += gone.sectors;
            s.arrival_ns = s.arrival_ns.min(gone.arrival_ns);
            s.bios.extend_from_slice(&gone.bios);
            self.index.add(survivor, s);
        }
        self.stats.coalesced += 1;
        Some((survivor, absorbed))
    }

    /// Drops an absorbed request from wherever it waited, and frees its scheduler tag.
    pub(super) fn forget_waiting(&mut self, id: u64, gone: &Request) {
        match gone.state {
            State::Staged => {
                self.admission.unstage(gone.ctx, id);
            }
            State::Pending => {
                self.pending_insert.retain(|&p| p != id);
                self.release_tag(gone.home_queue, gone.op, gone.sync);
            }
            // Sent-back requests are out of the merge index, so none is absorbed; were one,
            // it would leave the requeue batch as a pending one leaves the insert batch.
            State::Requeued => {
                self.pending_requeue.retain(|&p| p != id);
                self.release_tag(gone.home_queue, gone.op, gone.sync);
            }
            State::Queued => {
                debug_assert!(
                    self.queued > 0,
                    "an absorbed request the policy held, with none held"
                );
                self.queued = self.queued.saturating_sub(1);
                self.release_tag(gone.home_queue, gone.op, gone.sync);
            }
            State::Dispatched { .. } => {}
        }
    }
}
