//! Maps and sets keyed by request id, built on how the host numbers requests: an id's low
//! 32 bits are the host's slot for it (the high bits its generation), so the slots of the
//! requests alive at once are small and dense. A slot indexes a vector directly: one bounds
//! check and one compare per lookup, no hashing and no allocation once the vector has grown
//! to the deepest queue seen. An id whose slot is taken by another id (a stale entry a
//! policy still holds) or lies past [`DENSE_SLOTS`] goes to a [`WordMap`] beside it, so any
//! ids at all are correct and memory stays bounded by the entries held.

use std::hash::Hasher;

use super::word_map::{Word, WordMap};
use crate::types::RequestId;

/// Slots indexed directly; an id past them goes to the spill map. 2^16 slots is far more
/// requests than any queue holds, and bounds the vector a hostile id could grow.
pub const DENSE_SLOTS: usize = 1 << 16;

/// Slots a map grows to whatever it holds: small maps (one per cfq or bfq queue, say) index
/// directly without ever growing past this.
const SMALL_SLOTS: usize = 64;

/// True iff a map holding `len` entries may grow its vector to cover slot `slot`: past
/// [`SMALL_SLOTS`], only to eight times what it holds, so a policy with a thousand small
/// maps (a queue per client) keeps a few KiB each, not a vector as long as the host's
/// deepest slot. A device-wide map ([`IdMap::device_wide`]) grows to any dense slot.
fn may_grow_to(slot: usize, len: usize, device_wide: bool) -> bool {
    device_wide || slot < SMALL_SLOTS.max(len.saturating_add(1).saturating_mul(8))
}

/// A hasher for request ids, or any key a policy hashes as one `u64` (`write_u64`): one
/// multiply, no random seed, so maps behave the same natively and inside a component (which
/// has no source of randomness).
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

impl Word for RequestId {
    fn word(self) -> u64 {
        self.0
    }
}

type Spill<V> = WordMap<RequestId, V>;

/// One directly indexed slot: the id holding it, if any, and how many ids of this slot
/// are in the spill map, so a lookup that misses the slot knows whether to look there.
#[derive(Debug, Clone)]
struct Slot<V> {
    entry: Option<(RequestId, V)>,
    spilled: u32,
}

impl<V> Slot<V> {
    const EMPTY: Self = Self {
        entry: None,
        spilled: 0,
    };
}

/// A map keyed by request id (see the module's notes for how it is laid out).
///
/// Invariant: for every slot `s` below `dense.len()`, `dense[s].spilled` is the number of
/// spilled ids whose slot is `s`.
#[derive(Debug, Clone)]
pub struct IdMap<V> {
    dense: Vec<Slot<V>>,
    spill: Spill<V>,
    len: usize,
    device_wide: bool,
}

impl<V> Default for IdMap<V> {
    fn default() -> Self {
        Self {
            dense: Vec::new(),
            spill: WordMap::new(),
            len: 0,
            device_wide: false,
        }
    }
}

/// The dense slot of `id`, if it has one.
fn slot(id: RequestId) -> Option<usize> {
    let slot = (id.0 & 0xffff_ffff) as usize;
    (slot < DENSE_SLOTS).then_some(slot)
}

/// Where a lookup of an id not holding its slot must go on.
enum Miss {
    /// No id of its slot is spilled: it is not held.
    Absent,
    /// It may be in the spill map.
    Spill,
}

impl<V> IdMap<V> {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty map for a policy's one map of its kind, which may hold any of the device's
    /// requests (a policy's in-flight or queued requests, not one queue's): its vector grows
    /// to the deepest slot it sees (at most [`DENSE_SLOTS`]), so no live id spills however
    /// few it holds. The host reuses slots lowest-freed first, so that is the device's
    /// deepest queue, not its id count.
    pub fn device_wide() -> Self {
        Self {
            device_wide: true,
            ..Self::default()
        }
    }

    /// Whether `id`, not found in its slot, may be spilled.
    #[inline]
    fn miss(&self, id: RequestId) -> Miss {
        match slot(id).and_then(|s| self.dense.get(s)) {
            Some(held) if held.spilled == 0 => Miss::Absent,
            _ if self.spill.is_empty() => Miss::Absent,
            _ => Miss::Spill,
        }
    }

    /// Sets `id`'s value; returns the one it replaces.
    #[inline]
    pub fn insert(&mut self, id: RequestId, value: V) -> Option<V> {
        if let Some(held) = slot(id).and_then(|s| self.dense.get_mut(s)) {
            match &mut held.entry {
                Some((holder, old)) if *holder == id => {
                    return Some(std::mem::replace(old, value));
                }
                // No id of this slot is spilled, so `id` is not held: it takes the slot.
                entry @ None if held.spilled == 0 => {
                    *entry = Some((id, value));
                    self.len += 1;
                    return None;
                }
                _ => {}
            }
        }
        self.insert_slow(id, value)
    }

    /// [`IdMap::insert`] where the vector must grow, the slot is taken or ids of it are
    /// spilled: kept out of line, so the common case does not pay for this code's registers
    /// and stack frame.
    #[inline(never)]
    fn insert_slow(&mut self, id: RequestId, value: V) -> Option<V> {
        let Some(s) = slot(id) else {
            return self.spill_insert(id, value);
        };
        if s >= self.dense.len() && may_grow_to(s, self.len, self.device_wide) {
            self.grow_to(s);
        }
        let Some(held) = self.dense.get_mut(s) else {
            return self.spill_insert(id, value);
        };
        match &mut held.entry {
            Some((holder, old)) if *holder == id => Some(std::mem::replace(old, value)),
            // An id spilled while its slot was taken stays in the spill map.
            entry @ None if held.spilled == 0 || !self.spill.contains_key(&id) => {
                *entry = Some((id, value));
                self.len += 1;
                None
            }
            _ => self.spill_insert(id, value),
        }
    }

    /// Grows the vector to cover slot `s` (to the next power of two: amortised, and no
    /// larger than twice the deepest slot seen), counting the spilled ids of the new slots.
    fn grow_to(&mut self, s: usize) {
        let old = self.dense.len();
        let len = (s + 1).next_power_of_two().min(DENSE_SLOTS);
        self.dense.resize_with(len, || Slot::EMPTY);
        for (id, _) in self.spill.iter() {
            if let Some(at) = slot(id).filter(|&at| at >= old && at < len) {
                self.dense[at].spilled += 1;
            }
        }
    }

    /// Puts `id` in the spill map, counting it against its slot.
    fn spill_insert(&mut self, id: RequestId, value: V) -> Option<V> {
        let old = self.spill.insert(id, value);
        if old.is_none() {
            self.len += 1;
            if let Some(held) = slot(id).and_then(|s| self.dense.get_mut(s)) {
                held.spilled += 1;
            }
        }
        old
    }

    /// Takes `id`'s value out.
    #[inline]
    pub fn remove(&mut self, id: &RequestId) -> Option<V> {
        let id = *id;
        if let Some(held) = slot(id).and_then(|s| self.dense.get_mut(s))
            && held.entry.as_ref().is_some_and(|(holder, _)| *holder == id)
        {
            self.len -= 1;
            return held.entry.take().map(|(_, v)| v);
        }
        match self.miss(id) {
            Miss::Absent => None,
            Miss::Spill => self.remove_spilled(id),
        }
    }

    /// [`IdMap::remove`] from the spill map: out of line, so the dense path stays a small
    /// function (inside a component, inlined probing code made every call pay for its
    /// registers and frame).
    #[inline(never)]
    fn remove_spilled(&mut self, id: RequestId) -> Option<V> {
        let old = self.spill.remove(&id)?;
        self.len -= 1;
        if let Some(held) = slot(id).and_then(|s| self.dense.get_mut(s)) {
            held.spilled -= 1;
        }
        Some(old)
    }

    /// `id`'s value.
    #[inline]
    pub fn get(&self, id: &RequestId) -> Option<&V> {
        let id = *id;
        if let Some(Some((holder, value))) = slot(id)
            .and_then(|s| self.dense.get(s))
            .map(|held| held.entry.as_ref())
            && *holder == id
        {
            return Some(value);
        }
        match self.miss(id) {
            Miss::Absent => None,
            Miss::Spill => self.get_spilled(id),
        }
    }

    /// [`IdMap::get`] from the spill map (out of line, as [`IdMap::remove_spilled`]).
    #[inline(never)]
    fn get_spilled(&self, id: RequestId) -> Option<&V> {
        self.spill.get(&id)
    }

    /// `id`'s value, to change.
    #[inline]
    pub fn get_mut(&mut self, id: &RequestId) -> Option<&mut V> {
        let id = *id;
        let found = slot(id).filter(|&s| {
            self.dense
                .get(s)
                .and_then(|held| held.entry.as_ref())
                .is_some_and(|(holder, _)| *holder == id)
        });
        if let Some(s) = found {
            return self.dense[s].entry.as_mut().map(|(_, v)| v);
        }
        match self.miss(id) {
            Miss::Absent => None,
            Miss::Spill => self.get_spilled_mut(id),
        }
    }

    /// [`IdMap::get_mut`] from the spill map (out of line, as [`IdMap::remove_spilled`]).
    #[inline(never)]
    fn get_spilled_mut(&mut self, id: RequestId) -> Option<&mut V> {
        self.spill.get_mut(&id)
    }

    /// True iff `id` has a value.
    pub fn contains_key(&self, id: &RequestId) -> bool {
        self.get(id).is_some()
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Removes every entry, keeping the memory for the next ones.
    pub fn clear(&mut self) {
        self.dense.iter_mut().for_each(|held| *held = Slot::EMPTY);
        self.spill.clear();
        self.len = 0;
    }

    /// True iff nothing is held.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Every entry: the dense ones by slot, then the spilled ones by id, so the order is
    /// the same natively and in a component.
    pub fn iter(&self) -> impl Iterator<Item = (RequestId, &V)> + '_ {
        let mut spilled: Vec<(RequestId, &V)> = self.spill.iter().collect();
        spilled.sort_unstable_by_key(|&(k, _)| k);
        self.dense
            .iter()
            .filter_map(|held| held.entry.as_ref().map(|(k, v)| (*k, v)))
            .chain(spilled)
    }
}

impl Extend<RequestId> for IdSet {
    fn extend<I: IntoIterator<Item = RequestId>>(&mut self, ids: I) {
        for id in ids {
            self.insert(id);
        }
    }
}

/// A set of request ids, laid out as [`IdMap`].
#[derive(Debug, Clone, Default)]
pub struct IdSet(IdMap<()>);

impl IdSet {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty set laid out as [`IdMap::device_wide`].
    pub fn device_wide() -> Self {
        Self(IdMap::device_wide())
    }

    /// Adds `id`; true iff it was not there.
    pub fn insert(&mut self, id: RequestId) -> bool {
        self.0.insert(id, ()).is_none()
    }

    /// Removes `id`; true iff it was there.
    pub fn remove(&mut self, id: &RequestId) -> bool {
        self.0.remove(id).is_some()
    }

    /// True iff `id` is in the set.
    pub fn contains(&self, id: &RequestId) -> bool {
        self.0.contains_key(id)
    }

    /// Removes every id.
    pub fn clear(&mut self) {
        self.0.clear();
    }

    /// Ids held.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True iff empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_sharing_a_slot_or_past_the_dense_slots_are_all_kept() {
        let mut map = IdMap::new();
        let young = RequestId(5);
        let old = RequestId(5 | 1 << 32);
        let far = RequestId(DENSE_SLOTS as u64 + 9);
        assert_eq!(map.insert(young, 'a'), None);
        assert_eq!(map.insert(old, 'b'), None, "a slot taken: spilled");
        assert_eq!(map.insert(far, 'c'), None);
        assert_eq!(map.insert(young, 'd'), Some('a'));
        assert_eq!(map.len(), 3);
        assert_eq!(
            (map.get(&young), map.get(&old), map.get(&far)),
            (Some(&'d'), Some(&'b'), Some(&'c'))
        );
        *map.get_mut(&old).unwrap() = 'e';
        assert_eq!(map.remove(&young), Some('d'));
        assert_eq!(map.get(&old), Some(&'e'), "the spilled one is still found");
        assert_eq!(
            map.insert(old, 'e'),
            Some('e'),
            "replaced where it is, not doubled"
        );
        assert_eq!(map.len(), 2);
        assert_eq!(map.remove(&young), None);
        let all: Vec<_> = map.iter().map(|(k, v)| (k.0, *v)).collect();
        assert_eq!(all, [(DENSE_SLOTS as u64 + 9, 'c'), (5 | 1 << 32, 'e')]);
        assert_eq!(map.remove(&old), Some('e'));
        assert_eq!(map.remove(&far), Some('c'));
        assert!(map.is_empty());
        assert!(map.dense.len() <= 8, "grown only to the slots used");
    }

    #[test]
    fn a_small_map_does_not_grow_its_vector_to_a_far_slot() {
        let mut map = IdMap::new();
        map.insert(RequestId(3), 1u8);
        map.insert(RequestId(5000), 2);
        assert!(map.dense.len() <= SMALL_SLOTS, "{}", map.dense.len());
        assert_eq!(map.get(&RequestId(5000)), Some(&2), "kept in the spill map");
        // A map holding many entries indexes them all directly.
        let mut big = IdMap::new();
        for id in 0..1000u64 {
            big.insert(RequestId(id), ());
        }
        assert!(big.spill.is_empty());
    }

    #[test]
    fn a_device_wide_map_indexes_a_far_slot_directly_however_few_it_holds() {
        let mut map = IdMap::device_wide();
        map.insert(RequestId(3), 1u8);
        map.insert(RequestId(5000 | 7 << 32), 2);
        assert!(map.spill.is_empty(), "nothing spilled");
        assert_eq!(map.get(&RequestId(5000 | 7 << 32)), Some(&2));
        // Past the dense slots, or in a slot another id holds, it still spills.
        map.insert(RequestId(DENSE_SLOTS as u64), 3);
        map.insert(RequestId(3 | 1 << 32), 4);
        assert_eq!(map.spill.len(), 2);
        assert_eq!(map.len(), 4);
        assert!(map.dense.len() <= 8192);
    }

    /// Checks that every slot counts exactly the spilled ids of that slot.
    fn assert_counts<V>(map: &IdMap<V>) {
        for (s, held) in map.dense.iter().enumerate() {
            let spilled = map
                .spill
                .iter()
                .filter(|(id, _)| slot(*id) == Some(s))
                .count();
            assert_eq!(held.spilled as usize, spilled, "slot {s}");
        }
    }

    #[test]
    fn an_id_map_agrees_with_a_btree_map_when_slots_collide_and_ids_lie_far() {
        use std::collections::BTreeMap;
        for device_wide in [false, true] {
            let mut map = if device_wide {
                IdMap::device_wide()
            } else {
                IdMap::new()
            };
            let mut model = BTreeMap::new();
            let mut x = 0x9e37_79b9_7f4a_7c15_u64;
            for step in 0..20_000u64 {
                crate::collections::xorshift(&mut x);
                // Few slots, several generations each, some far past the small maps' reach
                // and some past the dense slots.
                let slot = [3, 40, 700, 5_000, DENSE_SLOTS as u64 + 1][(x % 5) as usize];
                let id = RequestId(slot | ((x >> 8) % 4) << 32);
                match (x >> 16) % 3 {
                    0 => assert_eq!(map.remove(&id), model.remove(&id), "step {step}"),
                    1 => assert_eq!(map.insert(id, step), model.insert(id, step), "step {step}"),
                    _ => assert_eq!(map.get(&id), model.get(&id), "step {step}"),
                }
                if let Some(v) = map.get_mut(&id) {
                    *v += 1;
                    *model.get_mut(&id).expect("held in both") += 1;
                }
                assert_eq!(map.len(), model.len());
            }
            assert_counts(&map);
            let held: BTreeMap<_, _> = map.iter().map(|(k, v)| (k, *v)).collect();
            assert_eq!(held, model);
        }
    }

    #[test]
    fn an_id_spilled_past_the_vector_is_still_found_once_the_vector_grows_over_its_slot() {
        let mut map = IdMap::new();
        let far = RequestId(100);
        map.insert(far, 'f');
        assert_eq!(map.spill.len(), 1, "past a small map's reach: spilled");
        for id in 0..20 {
            map.insert(RequestId(id), 'n');
        }
        map.insert(RequestId(150), 'g');
        assert!(map.dense.len() > 150, "grown over both");
        assert_counts(&map);
        assert_eq!(map.get(&far), Some(&'f'));
        assert_eq!(map.remove(&far), Some('f'));
        assert_eq!(map.get(&far), None);
        assert_counts(&map);
    }

    #[test]
    fn a_set_counts_each_id_once() {
        let mut set = IdSet::new();
        assert!(set.insert(RequestId(3)));
        assert!(!set.insert(RequestId(3)));
        assert!(set.contains(&RequestId(3)));
        assert_eq!(set.len(), 1);
        assert!(set.remove(&RequestId(3)));
        assert!(!set.remove(&RequestId(3)));
        assert!(set.is_empty());
    }
}
