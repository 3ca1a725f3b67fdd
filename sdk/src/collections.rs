//! Containers every real policy needs, deterministic on every target.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

use crate::types::{MergeEvent, Request, RequestId, Sector};

/// A hasher for request ids: one multiply, no random seed, so maps behave the same natively
/// and inside a component (which has no source of randomness).
#[derive(Debug, Default, Clone, Copy)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 =
                (self.0.rotate_left(5) ^ u64::from(byte)).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
        }
    }

    fn write_u64(&mut self, n: u64) {
        // Fibonacci hashing spreads sequential ids over the high bits hashbrown looks at.
        self.0 = (self.0 ^ n).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }

    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }
}

/// A map keyed by request id.
pub type IdMap<V> = HashMap<RequestId, V, BuildHasherDefault<IdHasher>>;
/// A set of request ids.
pub type IdSet = HashSet<RequestId, BuildHasherDefault<IdHasher>>;

/// A queued request and where it starts: what the sector-ordered lookups find.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Positioned {
    /// Its first sector (the sort key, so it comes first).
    pub sector: Sector,
    /// The request.
    pub id: RequestId,
}

/// A queued request and its deadline: what the expiry-ordered lookups find.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Due {
    /// The request.
    pub id: RequestId,
    /// When it expires.
    pub expires_ns: u64,
}

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

/// Request ids sorted by start sector: the elevator's sort tree.
#[derive(Debug, Default, Clone)]
pub struct SectorSet {
    by_sector: BTreeSet<Positioned>,
}

impl SectorSet {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds request `id` starting at `sector`.
    pub fn insert(&mut self, sector: Sector, id: RequestId) {
        self.by_sector.insert(Positioned { sector, id });
    }

    /// Removes request `id` starting at `sector`; returns true iff it was there.
    pub fn remove(&mut self, sector: Sector, id: RequestId) -> bool {
        self.by_sector.remove(&Positioned { sector, id })
    }

    /// Moves request `id` whose start changed (a front merge).
    pub fn reposition(&mut self, old_sector: Sector, new_sector: Sector, id: RequestId) {
        if self.remove(old_sector, id) {
            self.insert(new_sector, id);
        }
    }

    /// The first request starting at or after `sector`.
    pub fn at_or_after(&self, sector: Sector) -> Option<Positioned> {
        self.by_sector.range(lowest_at(sector)..).next().copied()
    }

    /// The last request starting before `sector`.
    pub fn before(&self, sector: Sector) -> Option<Positioned> {
        self.by_sector
            .range(..lowest_at(sector))
            .next_back()
            .copied()
    }

    /// The request with the lowest start sector.
    pub fn first(&self) -> Option<Positioned> {
        self.by_sector.first().copied()
    }

    /// Number of requests.
    pub fn len(&self) -> usize {
        self.by_sector.len()
    }

    /// True iff no request is held.
    pub fn is_empty(&self) -> bool {
        self.by_sector.is_empty()
    }

    /// All requests in sector order.
    pub fn iter(&self) -> impl Iterator<Item = Positioned> + '_ {
        self.by_sector.iter().copied()
    }
}

/// The smallest key at `sector`: range bounds that include every id there.
fn lowest_at(sector: Sector) -> Positioned {
    Positioned {
        sector,
        id: RequestId(0),
    }
}

/// Request ids in order of expiry: the elevator's FIFO with deadlines.
///
/// Entries with the same expiry keep insertion order. When two requests merge, the survivor
/// takes the earlier deadline of the two ([`ExpiryFifo::absorb`]), as mq-deadline does.
#[derive(Debug, Default, Clone)]
pub struct ExpiryFifo {
    /// Keyed by (expiry, insertion sequence).
    order: BTreeMap<(u64, u64), RequestId>,
    key_of: IdMap<(u64, u64)>,
    seq: u64,
}

impl ExpiryFifo {
    /// An empty FIFO.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends `id`, expiring at `expires_ns`.
    pub fn push(&mut self, id: RequestId, expires_ns: u64) {
        let key = (expires_ns, self.seq);
        self.seq += 1;
        self.order.insert(key, id);
        self.key_of.insert(id, key);
    }

    /// Removes `id`; returns true iff it was queued.
    pub fn remove(&mut self, id: RequestId) -> bool {
        match self.key_of.remove(&id) {
            Some(key) => self.order.remove(&key).is_some(),
            None => false,
        }
    }

    /// `absorbed` merged into `target`: drops `absorbed`, and `target` inherits its place
    /// if that was earlier.
    pub fn absorb(&mut self, target: RequestId, absorbed: RequestId) {
        let Some(gone) = self.key_of.remove(&absorbed) else {
            return;
        };
        self.order.remove(&gone);
        if let Some(kept) = self.key_of.get_mut(&target)
            && gone < *kept
        {
            self.order.remove(kept);
            self.order.insert(gone, target);
            *kept = gone;
        }
    }

    /// The request that expires first.
    pub fn front(&self) -> Option<Due> {
        self.order
            .first_key_value()
            .map(|(&(expires_ns, _), &id)| Due { id, expires_ns })
    }

    /// Removes and returns the request that expires first.
    pub fn pop_front(&mut self) -> Option<RequestId> {
        let (_, id) = self.order.pop_first()?;
        self.key_of.remove(&id);
        Some(id)
    }

    /// True iff the first request's deadline is at or before `now_ns`.
    pub fn expired(&self, now_ns: u64) -> bool {
        self.front().is_some_and(|due| due.expires_ns <= now_ns)
    }

    /// True iff `id` is queued.
    pub fn contains(&self, id: RequestId) -> bool {
        self.key_of.contains_key(&id)
    }

    /// Number of requests.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// True iff no request is held.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }
}

/// Queued requests kept the two ways every elevator needs — in sector order and in deadline
/// order — with the extents merges change. deadline keeps one per direction and class, cfq
/// and bfq one per queue.
#[derive(Debug, Default, Clone)]
pub struct ElevatorQueue {
    sorted: SectorSet,
    fifo: ExpiryFifo,
    extents: IdMap<Extent>,
}

impl ElevatorQueue {
    /// An empty queue.
    pub fn new() -> Self {
        Self::default()
    }

    /// Queues `request`, due by `expires_ns`.
    pub fn push(&mut self, request: &Request, expires_ns: u64) {
        self.sorted.insert(request.sector, request.id);
        self.fifo.push(request.id, expires_ns);
        let extent = Extent {
            sector: request.sector,
            sectors: request.sectors,
        };
        self.extents.insert(request.id, extent);
    }

    /// Removes `id`; returns where it lay if it was queued here.
    pub fn take(&mut self, id: RequestId) -> Option<Extent> {
        let extent = self.extents.remove(&id)?;
        self.sorted.remove(extent.sector, id);
        self.fifo.remove(id);
        Some(extent)
    }

    /// `absorbed` merged into `target`: drops `absorbed`; `target`, if queued here, inherits
    /// the earlier deadline of the two.
    pub fn absorb(&mut self, target: RequestId, absorbed: RequestId) {
        if let Some(extent) = self.extents.remove(&absorbed) {
            self.sorted.remove(extent.sector, absorbed);
            self.fifo.absorb(target, absorbed);
        }
    }

    /// Request `id` now covers `sector` + `sectors` (it grew by a merge).
    pub fn resize(&mut self, id: RequestId, sector: Sector, sectors: u32) {
        if let Some(extent) = self.extents.get_mut(&id) {
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
        self.extents.get(&id).copied()
    }

    /// Number of queued requests.
    pub fn len(&self) -> usize {
        self.extents.len()
    }

    /// True iff nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.extents.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(sector: u64, id: u64) -> Option<Positioned> {
        Some(Positioned {
            sector: Sector(sector),
            id: RequestId(id),
        })
    }

    fn due(id: u64, expires_ns: u64) -> Option<Due> {
        Some(Due {
            id: RequestId(id),
            expires_ns,
        })
    }

    #[test]
    fn sector_set_finds_next_request_at_or_after_position() {
        let mut set = SectorSet::new();
        set.insert(Sector(100), RequestId(1));
        set.insert(Sector(50), RequestId(2));
        set.insert(Sector(200), RequestId(3));
        assert_eq!(set.at_or_after(Sector(60)), at(100, 1));
        assert_eq!(set.at_or_after(Sector(100)), at(100, 1));
        assert_eq!(set.at_or_after(Sector(201)), None);
        assert_eq!(set.before(Sector(100)), at(50, 2));
        set.reposition(Sector(100), Sector(40), RequestId(1));
        assert_eq!(set.first(), at(40, 1));
    }

    #[test]
    fn expiry_fifo_orders_by_deadline_then_insertion() {
        let mut fifo = ExpiryFifo::new();
        fifo.push(RequestId(1), 500);
        fifo.push(RequestId(2), 500);
        fifo.push(RequestId(3), 400);
        assert_eq!(fifo.front(), due(3, 400));
        assert!(fifo.expired(400));
        assert!(!fifo.expired(399));
        assert_eq!(fifo.pop_front(), Some(RequestId(3)));
        assert_eq!(fifo.pop_front(), Some(RequestId(1)));
        assert!(fifo.remove(RequestId(2)));
        assert!(fifo.is_empty());
    }

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

    #[test]
    fn expiry_fifo_absorb_keeps_earlier_deadline_for_survivor() {
        let mut fifo = ExpiryFifo::new();
        fifo.push(RequestId(1), 100);
        fifo.push(RequestId(2), 900);
        fifo.push(RequestId(3), 500);
        fifo.absorb(RequestId(2), RequestId(1));
        assert_eq!(fifo.len(), 2);
        assert_eq!(fifo.front(), due(2, 100));
        assert!(!fifo.contains(RequestId(1)));
        fifo.absorb(RequestId(3), RequestId(2));
        assert_eq!(fifo.front(), due(3, 100));
        assert_eq!(fifo.len(), 1);
    }
}
