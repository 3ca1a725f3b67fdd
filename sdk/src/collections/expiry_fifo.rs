//! Request ids in order of expiry, in a deque: an elevator's deadlines mostly arrive in
//! order (now plus a fixed expiry), so a push appends and the front is the next to expire.
//! A request taken out of the middle (dispatched in sector order) leaves its entry behind,
//! recognised as stale by its key and dropped when it reaches the front; when stale entries
//! outnumber live ones the deque is compacted, so memory stays proportional to what is
//! queued.

use std::collections::VecDeque;

use super::id_map::IdMap;
use crate::types::RequestId;

/// A queued request and its deadline: what the expiry-ordered lookups find.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Due {
    /// The request.
    pub id: RequestId,
    /// When it expires.
    pub expires_ns: u64,
}

/// (expiry, insertion sequence): unique, and the order of the FIFO.
type Key = (u64, u64);

/// Request ids in order of expiry: the elevator's FIFO with deadlines, each with a value
/// `V` of its own (the elevator queue keeps a request's extent there, so one lookup finds
/// both).
///
/// Entries with the same expiry keep insertion order. When two requests merge, the survivor
/// takes the earlier deadline of the two ([`ExpiryFifo::absorb`]), as mq-deadline does.
#[derive(Debug, Clone)]
pub struct ExpiryFifo<V = ()> {
    /// Sorted by key; an entry is live iff `key_of` gives its id that key. The front entry
    /// is always live.
    order: VecDeque<(Key, RequestId)>,
    key_of: IdMap<(Key, V)>,
    seq: u64,
}

impl<V> Default for ExpiryFifo<V> {
    fn default() -> Self {
        Self {
            order: VecDeque::new(),
            key_of: IdMap::new(),
            seq: 0,
        }
    }
}

impl ExpiryFifo {
    /// An empty FIFO.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends `id`, expiring at `expires_ns`.
    pub fn push(&mut self, id: RequestId, expires_ns: u64) {
        self.push_with(id, expires_ns, ());
    }
}

impl<V> ExpiryFifo<V> {
    /// An empty FIFO that may hold any of the device's requests: its id lookups are laid
    /// out as [`IdMap::device_wide`].
    pub fn device_wide() -> Self {
        Self {
            key_of: IdMap::device_wide(),
            ..Self::default()
        }
    }

    /// Appends `id` with `value`, expiring at `expires_ns`.
    pub fn push_with(&mut self, id: RequestId, expires_ns: u64, value: V) {
        let key = (expires_ns, self.seq);
        self.seq += 1;
        let again = self.key_of.insert(id, (key, value)).is_some();
        if self.order.back().is_none_or(|&(last, _)| last < key) {
            self.order.push_back((key, id));
        } else {
            let at = self.order.partition_point(|&(k, _)| k < key);
            self.order.insert(at, (key, id));
        }
        if again {
            // Pushed twice: its older entry is stale now, and may be the front.
            self.drop_stale_front();
        }
    }

    /// Removes `id`; returns true iff it was queued.
    pub fn remove(&mut self, id: RequestId) -> bool {
        self.take(id).is_some()
    }

    /// Removes `id`, returning its value.
    pub fn take(&mut self, id: RequestId) -> Option<V> {
        let (key, value) = self.key_of.remove(&id)?;
        // Only the front must be live; a stale entry elsewhere waits until it gets there,
        // or for a compaction.
        if self.order.front().is_some_and(|&(k, _)| k == key) || self.stale_heavy() {
            self.drop_stale_front();
        }
        Some(value)
    }

    /// `id`'s value.
    pub fn get(&self, id: RequestId) -> Option<&V> {
        self.key_of.get(&id).map(|(_, v)| v)
    }

    /// `id`'s value, to change.
    pub fn get_mut(&mut self, id: RequestId) -> Option<&mut V> {
        self.key_of.get_mut(&id).map(|(_, v)| v)
    }

    /// `absorbed` merged into `target`: drops `absorbed`, and `target` inherits its place
    /// if that was earlier.
    pub fn absorb(&mut self, target: RequestId, absorbed: RequestId) {
        let Some((gone, _)) = self.key_of.remove(&absorbed) else {
            return;
        };
        if let Some((kept, _)) = self.key_of.get_mut(&target)
            && gone < *kept
        {
            *kept = gone;
            // The absorbed request's entry becomes the target's; the target's old one is
            // stale.
            if let Ok(at) = self.order.binary_search_by(|&(k, _)| k.cmp(&gone)) {
                self.order[at].1 = target;
            }
        }
        self.drop_stale_front();
    }

    /// The request that expires first.
    pub fn front(&self) -> Option<Due> {
        self.order
            .front()
            .map(|&((expires_ns, _), id)| Due { id, expires_ns })
    }

    /// Removes and returns the request that expires first.
    pub fn pop_front(&mut self) -> Option<RequestId> {
        let (_, id) = self.order.pop_front()?;
        self.key_of.remove(&id);
        self.drop_stale_front();
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
        self.key_of.len()
    }

    /// True iff no request is held.
    pub fn is_empty(&self) -> bool {
        self.key_of.is_empty()
    }

    fn live(&self, &(key, id): &(Key, RequestId)) -> bool {
        self.key_of.get(&id).is_some_and(|(k, _)| *k == key)
    }

    /// True iff stale entries outnumber live ones (and a compaction is worth its pass).
    fn stale_heavy(&self) -> bool {
        self.order.len() > 2 * self.key_of.len() + 32
    }

    /// Drops stale entries from the front, and compacts when they outnumber live ones.
    fn drop_stale_front(&mut self) {
        while let Some(front) = self.order.front() {
            if self.live(front) {
                break;
            }
            self.order.pop_front();
        }
        if self.stale_heavy() {
            let key_of = &self.key_of;
            self.order
                .retain(|&(key, id)| key_of.get(&id).is_some_and(|(k, _)| *k == key));
        }
        debug_assert!(self.order.front().is_none_or(|f| self.live(f)));
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A request `id` due at `expires_ns`, as the lookups answer it (the elevator's tests too).
    pub(in crate::collections) fn due(id: u64, expires_ns: u64) -> Option<Due> {
        Some(Due {
            id: RequestId(id),
            expires_ns,
        })
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
        assert_eq!(fifo.front(), None);
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
        assert_eq!(fifo.pop_front(), Some(RequestId(3)));
        assert_eq!(fifo.pop_front(), None, "no stale entry comes back");
    }

    #[test]
    fn entries_taken_from_the_middle_leave_no_more_than_a_bounded_backlog() {
        let mut fifo = ExpiryFifo::new();
        fifo.push(RequestId(0), 0);
        for id in 1..10_000u64 {
            fifo.push(RequestId(id), id);
            assert!(fifo.remove(RequestId(id)));
        }
        assert_eq!(fifo.len(), 1);
        let (live, slack) = (1, 32);
        assert!(
            fifo.order.len() <= 2 * live + slack + 1,
            "{}",
            fifo.order.len()
        );
        assert_eq!(fifo.front(), due(0, 0));
    }

    #[test]
    fn a_random_workload_matches_a_plain_sorted_model() {
        let mut fifo = ExpiryFifo::new();
        let mut model: Vec<(u64, u64, u64)> = Vec::new(); // (expires, seq, id)
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = || crate::collections::xorshift(&mut x);
        for seq in 0..20_000u64 {
            let id = next() % 64;
            match next() % 4 {
                0 | 1 if !fifo.contains(RequestId(id)) => {
                    let expires = seq + next() % 50;
                    fifo.push(RequestId(id), expires);
                    model.push((expires, seq, id));
                }
                2 => {
                    let had = model.iter().position(|m| m.2 == id);
                    assert_eq!(fifo.remove(RequestId(id)), had.is_some());
                    if let Some(i) = had {
                        model.remove(i);
                    }
                }
                _ => {
                    let target = next() % 64;
                    let (t, a) = (
                        model.iter().position(|m| m.2 == target),
                        model.iter().position(|m| m.2 == id),
                    );
                    if let (Some(t), Some(a)) = (t, a)
                        && t != a
                    {
                        fifo.absorb(RequestId(target), RequestId(id));
                        let gone = model[a];
                        if (gone.0, gone.1) < (model[t].0, model[t].1) {
                            model[t].0 = gone.0;
                            model[t].1 = gone.1;
                        }
                        model.remove(a);
                    }
                }
            }
            model.sort_unstable();
            let want = model.first().map(|m| Due {
                id: RequestId(m.2),
                expires_ns: m.0,
            });
            assert_eq!(fifo.front(), want, "step {seq}");
            assert_eq!(fifo.len(), model.len());
        }
    }
}
