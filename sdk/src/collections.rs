//! Containers every real policy needs, deterministic on every target.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

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

/// A map keyed by request id (or ctx).
pub type IdMap<V> = HashMap<u64, V, BuildHasherDefault<IdHasher>>;
/// A set of request ids.
pub type IdSet = HashSet<u64, BuildHasherDefault<IdHasher>>;

/// Request ids sorted by start sector: the elevator's sort tree.
#[derive(Debug, Default, Clone)]
pub struct SectorSet {
    by_sector: BTreeSet<(u64, u64)>,
}

impl SectorSet {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds request `id` starting at `sector`.
    pub fn insert(&mut self, sector: u64, id: u64) {
        self.by_sector.insert((sector, id));
    }

    /// Removes request `id` starting at `sector`; returns true iff it was there.
    pub fn remove(&mut self, sector: u64, id: u64) -> bool {
        self.by_sector.remove(&(sector, id))
    }

    /// Moves request `id` whose start changed (a front merge).
    pub fn reposition(&mut self, old_sector: u64, new_sector: u64, id: u64) {
        if self.remove(old_sector, id) {
            self.insert(new_sector, id);
        }
    }

    /// The first request starting at or after `sector`, as `(sector, id)`.
    pub fn at_or_after(&self, sector: u64) -> Option<(u64, u64)> {
        self.by_sector.range((sector, 0)..).next().copied()
    }

    /// The last request starting before `sector`, as `(sector, id)`.
    pub fn before(&self, sector: u64) -> Option<(u64, u64)> {
        self.by_sector.range(..(sector, 0)).next_back().copied()
    }

    /// The request with the lowest start sector.
    pub fn first(&self) -> Option<(u64, u64)> {
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

    /// All `(sector, id)` pairs in sector order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.by_sector.iter().copied()
    }
}

/// Request ids in order of expiry: the elevator's FIFO with deadlines.
///
/// Entries with the same expiry keep insertion order. When two requests merge, the survivor
/// takes the earlier deadline of the two ([`ExpiryFifo::absorb`]), as mq-deadline does.
#[derive(Debug, Default, Clone)]
pub struct ExpiryFifo {
    order: BTreeMap<(u64, u64), u64>,
    key_of: IdMap<(u64, u64)>,
    seq: u64,
}

impl ExpiryFifo {
    /// An empty FIFO.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends `id`, expiring at `expires_ns`.
    pub fn push(&mut self, id: u64, expires_ns: u64) {
        let key = (expires_ns, self.seq);
        self.seq += 1;
        self.order.insert(key, id);
        self.key_of.insert(id, key);
    }

    /// Removes `id`; returns true iff it was queued.
    pub fn remove(&mut self, id: u64) -> bool {
        match self.key_of.remove(&id) {
            Some(key) => self.order.remove(&key).is_some(),
            None => false,
        }
    }

    /// `absorbed` merged into `target`: drops `absorbed`, and `target` inherits its place
    /// if that was earlier.
    pub fn absorb(&mut self, target: u64, absorbed: u64) {
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

    /// The request that expires first, as `(id, expires_ns)`.
    pub fn front(&self) -> Option<(u64, u64)> {
        self.order
            .first_key_value()
            .map(|(&(expires, _), &id)| (id, expires))
    }

    /// Removes and returns the request that expires first.
    pub fn pop_front(&mut self) -> Option<u64> {
        let (_, id) = self.order.pop_first()?;
        self.key_of.remove(&id);
        Some(id)
    }

    /// True iff the first request's deadline is at or before `now_ns`.
    pub fn expired(&self, now_ns: u64) -> bool {
        self.front().is_some_and(|(_, expires)| expires <= now_ns)
    }

    /// True iff `id` is queued.
    pub fn contains(&self, id: u64) -> bool {
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
    extents: IdMap<(u64, u32)>,
}

impl ElevatorQueue {
    /// An empty queue.
    pub fn new() -> Self {
        Self::default()
    }

    /// Queues `request`, due by `expires_ns`.
    pub fn push(&mut self, request: &crate::Request, expires_ns: u64) {
        self.sorted.insert(request.sector, request.id);
        self.fifo.push(request.id, expires_ns);
        self.extents
            .insert(request.id, (request.sector, request.sectors));
    }

    /// Removes `id`; returns its start sector and length if it was queued here.
    pub fn take(&mut self, id: u64) -> Option<(u64, u32)> {
        let (sector, sectors) = self.extents.remove(&id)?;
        self.sorted.remove(sector, id);
        self.fifo.remove(id);
        Some((sector, sectors))
    }

    /// `absorbed` merged into `target`: drops `absorbed`; `target`, if queued here, inherits
    /// the earlier deadline of the two.
    pub fn absorb(&mut self, target: u64, absorbed: u64) {
        if let Some((sector, _)) = self.extents.remove(&absorbed) {
            self.sorted.remove(sector, absorbed);
            self.fifo.absorb(target, absorbed);
        }
    }

    /// Request `id` now covers `sector` + `sectors` (it grew by a merge).
    pub fn resize(&mut self, id: u64, sector: u64, sectors: u32) {
        if let Some(extent) = self.extents.get_mut(&id) {
            if extent.0 != sector {
                self.sorted.reposition(extent.0, sector, id);
            }
            *extent = (sector, sectors);
        }
    }

    /// Applies a merge event to whichever of its requests are queued here.
    pub fn merged(&mut self, event: &crate::MergeEvent) {
        if let Some(gone) = event.absorbed {
            self.absorb(event.target, gone);
        }
        self.resize(event.target, event.sector, event.sectors);
    }

    /// The first request starting at or after `sector`, as `(sector, id)`.
    pub fn at_or_after(&self, sector: u64) -> Option<(u64, u64)> {
        self.sorted.at_or_after(sector)
    }

    /// The last request starting before `sector`, as `(sector, id)`.
    pub fn before(&self, sector: u64) -> Option<(u64, u64)> {
        self.sorted.before(sector)
    }

    /// The request with the lowest start sector, as `(sector, id)`.
    pub fn lowest(&self) -> Option<(u64, u64)> {
        self.sorted.first()
    }

    /// The request due first, as `(id, expires_ns)`.
    pub fn fifo_front(&self) -> Option<(u64, u64)> {
        self.fifo.front()
    }

    /// True iff the request due first is due at or before `now_ns`.
    pub fn expired(&self, now_ns: u64) -> bool {
        self.fifo.expired(now_ns)
    }

    /// Start sector and length of queued request `id`.
    pub fn extent(&self, id: u64) -> Option<(u64, u32)> {
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

    #[test]
    fn sector_set_finds_next_request_at_or_after_position() {
        let mut set = SectorSet::new();
        set.insert(100, 1);
        set.insert(50, 2);
        set.insert(200, 3);
        assert_eq!(set.at_or_after(60), Some((100, 1)));
        assert_eq!(set.at_or_after(100), Some((100, 1)));
        assert_eq!(set.at_or_after(201), None);
        assert_eq!(set.before(100), Some((50, 2)));
        set.reposition(100, 40, 1);
        assert_eq!(set.first(), Some((40, 1)));
    }

    #[test]
    fn expiry_fifo_orders_by_deadline_then_insertion() {
        let mut fifo = ExpiryFifo::new();
        fifo.push(1, 500);
        fifo.push(2, 500);
        fifo.push(3, 400);
        assert_eq!(fifo.front(), Some((3, 400)));
        assert!(fifo.expired(400));
        assert!(!fifo.expired(399));
        assert_eq!(fifo.pop_front(), Some(3));
        assert_eq!(fifo.pop_front(), Some(1));
        assert!(fifo.remove(2));
        assert!(fifo.is_empty());
    }

    #[test]
    fn elevator_queue_follows_merges_in_both_orders() {
        let req = |id, sector| crate::Request {
            id,
            ctx: 0,
            op: crate::Op::Read,
            sector,
            sectors: 8,
            sync: true,
            prio_class: crate::PrioClass::None,
            prio_level: 4,
            arrival_ns: 0,
        };
        let mut q = ElevatorQueue::new();
        q.push(&req(1, 100), 900);
        q.push(&req(2, 108), 500);
        q.push(&req(3, 300), 700);
        // A bio before 100 grew request 1 at the front, and it absorbed request 2.
        q.merged(&crate::MergeEvent {
            target: 1,
            sector: 92,
            sectors: 24,
            kind: crate::MergeKind::Front,
            absorbed: Some(2),
        });
        assert_eq!(q.len(), 2);
        assert_eq!(q.at_or_after(0), Some((92, 1)));
        assert_eq!(
            q.fifo_front(),
            Some((1, 500)),
            "the survivor inherits the earlier deadline"
        );
        assert_eq!(q.take(1), Some((92, 24)));
        assert_eq!(q.lowest(), Some((300, 3)));
        assert_eq!(q.take(2), None);
    }

    #[test]
    fn expiry_fifo_absorb_keeps_earlier_deadline_for_survivor() {
        let mut fifo = ExpiryFifo::new();
        fifo.push(1, 100);
        fifo.push(2, 900);
        fifo.push(3, 500);
        fifo.absorb(2, 1);
        assert_eq!(fifo.len(), 2);
        assert_eq!(fifo.front(), Some((2, 100)));
        assert!(!fifo.contains(1));
        fifo.absorb(3, 2);
        assert_eq!(fifo.front(), Some((3, 100)));
        assert_eq!(fifo.len(), 1);
    }
}
