//! The elevator's queue: requests in sector order and in deadline order at once, with the
//! extents merges change.

use super::expiry_fifo::{Due, ExpiryFifo};
use super::sector_set::{Positioned, SectorSet};
use crate::types::{MergeEvent, Request, RequestId, Sector};

/// Where a queued request lies on the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extent {
    /// Its first sector.
    pub sector: Sector,
    /// Its length in sectors.
    pub sectors: u32,
}

impl Extent {
    /// One past its last sector.
    pub fn end(&self) -> Sector {
        self.sector.plus(self.sectors)
    }
}

/// Queued requests kept the two ways every elevator needs — in sector order and in deadline
/// order — with the extents merges change. deadline keeps one per direction and class, cfq
/// and bfq one per queue.
#[derive(Debug, Default, Clone)]
pub struct ElevatorQueue {
    sorted: SectorSet,
    /// Deadline order, each request with its extent: one id lookup finds both.
    fifo: ExpiryFifo<Extent>,
}

impl ElevatorQueue {
    /// An empty queue.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty queue that may hold any of the device's requests (deadline's, one per
    /// direction and class; not cfq's per-submitter ones): its id lookups are laid out as
    /// [`crate::IdMap::device_wide`].
    pub fn device_wide() -> Self {
        Self {
            sorted: SectorSet::new(),
            fifo: ExpiryFifo::device_wide(),
        }
    }

    /// Queues `request`, due by `expires_ns`.
    pub fn push(&mut self, request: &Request, expires_ns: u64) {
        self.sorted.insert(request.sector, request.id);
        let extent = Extent {
            sector: request.sector,
            sectors: request.sectors,
        };
        self.fifo.push_with(request.id, expires_ns, extent);
    }

    /// Removes `id`; returns where it lay if it was queued here.
    pub fn take(&mut self, id: RequestId) -> Option<Extent> {
        let extent = self.fifo.take(id)?;
        self.sorted.remove(extent.sector, id);
        Some(extent)
    }

    /// `absorbed` merged into `target`: drops `absorbed`; `target`, if queued here, inherits
    /// the earlier deadline of the two.
    pub fn absorb(&mut self, target: RequestId, absorbed: RequestId) {
        if let Some(&extent) = self.fifo.get(absorbed) {
            self.sorted.remove(extent.sector, absorbed);
            self.fifo.absorb(target, absorbed);
        }
    }

    /// Request `id` now covers `sector` + `sectors` (it grew by a merge).
    pub fn resize(&mut self, id: RequestId, sector: Sector, sectors: u32) {
        if let Some(extent) = self.fifo.get_mut(id) {
            if extent.sector != sector {
                self.sorted.reposition(extent.sector, sector, id);
            }
            *extent = Extent { sector, sectors };
        }
    }

    /// Applies a merge event to whichever of its requests are queued here.
    pub fn merged(&mut self, event: &MergeEvent) {
        if let Some(gone) = event.absorbed {
            self.absorb(event.target, gone);
        }
        self.resize(event.target, event.sector, event.sectors);
    }

    /// The first request starting at or after `sector`.
    pub fn at_or_after(&self, sector: Sector) -> Option<Positioned> {
        self.sorted.at_or_after(sector)
    }

    /// The last request starting before `sector`.
    pub fn before(&self, sector: Sector) -> Option<Positioned> {
        self.sorted.before(sector)
    }

    /// The request with the lowest start sector.
    pub fn lowest(&self) -> Option<Positioned> {
        self.sorted.first()
    }

    /// The request due first.
    pub fn fifo_front(&self) -> Option<Due> {
        self.fifo.front()
    }

    /// True iff the request due first is due at or before `now_ns`.
    pub fn expired(&self, now_ns: u64) -> bool {
        self.fifo.expired(now_ns)
    }

    /// Where queued request `id` lies.
    pub fn extent(&self, id: RequestId) -> Option<Extent> {
        self.fifo.get(id).copied()
    }

    /// Number of queued requests.
    pub fn len(&self) -> usize {
        self.fifo.len()
    }

    /// True iff nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.fifo.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collections::expiry_fifo::tests::due;
    use crate::collections::sector_set::tests::at;

    #[test]
    fn elevator_queue_follows_merges_in_both_orders() {
        let req = |id, sector| Request {
            id: RequestId(id),
            ctx: 0,
            op: crate::Op::Read,
            sector: Sector(sector),
            sectors: 8,
            sync: true,
            prio_class: crate::PrioClass::None,
            prio_level: 4,
            group: 0,
            arrival_ns: 0,
        };
        let mut q = ElevatorQueue::new();
        q.push(&req(1, 100), 900);
        q.push(&req(2, 108), 500);
        q.push(&req(3, 300), 700);
        // A bio before 100 grew request 1 at the front, and it absorbed request 2.
        q.merged(&MergeEvent {
            target: RequestId(1),
            sector: Sector(92),
            sectors: 24,
            kind: crate::MergeKind::Front,
            absorbed: Some(RequestId(2)),
        });
        assert_eq!(q.len(), 2);
        assert_eq!(q.at_or_after(Sector(0)), at(92, 1));
        assert_eq!(
            q.fifo_front(),
            due(1, 500),
            "the survivor inherits the earlier deadline"
        );
        let taken = q.take(RequestId(1)).unwrap();
        assert_eq!(
            (taken.sector, taken.sectors, taken.end()),
            (Sector(92), 24, Sector(116))
        );
        assert_eq!(q.lowest(), at(300, 3));
        assert_eq!(q.take(RequestId(2)), None);
    }
}
