//! A map for keys that fit one `u64` word (a submitter, a queue's class and level): the
//! entries in one vector, found through a table of their indices probed linearly from the
//! key's Fibonacci hash. A lookup is one multiply, one load of the table and one compare in
//! the common case, with no hasher state. Inside a component that still counts about 130
//! instructions per lookup (Cranelift's code for the probe and its bounds checks; `std`'s
//! hash map counted 147), so a policy should look a key up once per decision, not once per
//! helper.
//!
//! The order of [`WordMap::iter`] depends only on the inserts and removes made (a removal
//! moves the last entry into the gap), never on hashing, so it is the same natively and in
//! a component.

use std::ops::Index;

/// A key that is one `u64` word: distinct keys must give distinct words.
pub trait Word: Copy + Eq {
    /// The key's word.
    fn word(self) -> u64;
}

impl Word for u64 {
    fn word(self) -> u64 {
        self
    }
}

impl Word for u32 {
    fn word(self) -> u64 {
        u64::from(self)
    }
}

/// A table slot holding no entry.
const EMPTY: u32 = u32::MAX;

/// The smallest table: eight slots, so a handful of keys never grows it.
const MIN_TABLE_BITS: u32 = 3;

/// A map from one-word keys to values (see the module's notes).
#[derive(Debug, Clone)]
pub struct WordMap<K, V> {
    entries: Vec<(K, V)>,
    /// The table slot of each entry, so a removal finds the slot of the entry it moves.
    slot_of: Vec<u32>,
    /// Indices into `entries`, or [`EMPTY`]; a power of two long, at most half full.
    table: Vec<u32>,
    /// 64 less the table's bits: the hash's top bits pick the home slot.
    shift: u32,
}

impl<K, V> Default for WordMap<K, V> {
    fn default() -> Self {
        Self {
            entries: Vec::new(),
            slot_of: Vec::new(),
            table: Vec::new(),
            shift: 64,
        }
    }
}

impl<K: Word, V> WordMap<K, V> {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True iff nothing is held.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Removes every entry, keeping the memory for the next ones.
    pub fn clear(&mut self) {
        self.entries.clear();
        self.slot_of.clear();
        self.table.fill(EMPTY);
    }

    /// `key`'s home slot in the table.
    #[inline]
    fn home(&self, key: K) -> usize {
        // Fibonacci hashing: the product's top bits depend on every bit of the word.
        (key.word().wrapping_mul(0x9e37_79b9_7f4a_7c15) >> self.shift) as usize
    }

    /// The table slot and entry index of `key`, if held.
    #[inline]
    fn find(&self, key: K) -> Option<(usize, usize)> {
        if self.table.is_empty() {
            return None;
        }
        let mask = self.table.len() - 1;
        let mut at = self.home(key);
        loop {
            let index = self.table[at];
            if index == EMPTY {
                return None;
            }
            if self.entries[index as usize].0 == key {
                return Some((at, index as usize));
            }
            at = (at + 1) & mask;
        }
    }

    /// `key`'s value.
    #[inline]
    pub fn get(&self, key: &K) -> Option<&V> {
        let (_, index) = self.find(*key)?;
        Some(&self.entries[index].1)
    }

    /// `key`'s value, to change.
    #[inline]
    pub fn get_mut(&mut self, key: &K) -> Option<&mut V> {
        let (_, index) = self.find(*key)?;
        Some(&mut self.entries[index].1)
    }

    /// True iff `key` has a value.
    pub fn contains_key(&self, key: &K) -> bool {
        self.find(*key).is_some()
    }

    /// `key`'s value, first made by `make` if it has none.
    pub fn get_or_insert_with(&mut self, key: K, make: impl FnOnce() -> V) -> &mut V {
        let index = match self.find(key) {
            Some((_, index)) => index,
            None => self.push(key, make()),
        };
        &mut self.entries[index].1
    }

    /// Sets `key`'s value; returns the one it replaces.
    pub fn insert(&mut self, key: K, value: V) -> Option<V> {
        match self.find(key) {
            Some((_, index)) => Some(std::mem::replace(&mut self.entries[index].1, value)),
            None => {
                self.push(key, value);
                None
            }
        }
    }

    /// Takes `key`'s value out; the last entry moves into its place in [`WordMap::iter`].
    pub fn remove(&mut self, key: &K) -> Option<V> {
        let (at, index) = self.find(*key)?;
        self.vacate(at);
        let (_, value) = self.entries.swap_remove(index);
        self.slot_of.swap_remove(index);
        if let Some(&moved_at) = self.slot_of.get(index) {
            // The last entry moved to `index`: point its slot there. Fits: `push` refuses
            // an index past 2^31.
            self.table[moved_at as usize] = index as u32;
        }
        Some(value)
    }

    /// Every entry, in the order the inserts and removes left them.
    pub fn iter(&self) -> impl Iterator<Item = (K, &V)> + '_ {
        self.entries.iter().map(|(k, v)| (*k, v))
    }

    /// Every value, in [`WordMap::iter`]'s order.
    pub fn values(&self) -> impl Iterator<Item = &V> + '_ {
        self.entries.iter().map(|(_, v)| v)
    }

    /// Every value, to change, in [`WordMap::iter`]'s order.
    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut V> + '_ {
        self.entries.iter_mut().map(|(_, v)| v)
    }

    /// Adds an entry for `key`, known absent; returns its index.
    fn push(&mut self, key: K, value: V) -> usize {
        if (self.entries.len() + 1) * 2 > self.table.len() {
            self.grow();
        }
        let index = self.entries.len();
        // At most 2^31 entries, so the table's slots (at most twice as many) fit a u32 too.
        assert!(index < 1 << 31, "a WordMap holds at most 2^31 entries");
        let index32 = index as u32;
        let at = self.place(key, index32);
        self.entries.push((key, value));
        self.slot_of.push(at);
        index
    }

    /// Puts entry `index` in the first free slot from `key`'s home; returns the slot.
    fn place(&mut self, key: K, index: u32) -> u32 {
        let mask = self.table.len() - 1;
        let mut at = self.home(key);
        while self.table[at] != EMPTY {
            at = (at + 1) & mask;
        }
        self.table[at] = index;
        // Fits: the table has at most 2^32 slots (`push`).
        at as u32
    }

    /// Doubles the table (eight slots at first) and places every entry again.
    fn grow(&mut self) {
        let bits = (64 - self.shift).max(MIN_TABLE_BITS - 1) + 1;
        self.table.clear();
        self.table.resize(1 << bits, EMPTY);
        self.shift = 64 - bits;
        for index in 0..self.entries.len() {
            // Fits: `push` refuses an index past 2^31.
            self.slot_of[index] = self.place(self.entries[index].0, index as u32);
        }
    }

    /// Empties slot `at`, shifting back the entries after it whose probe passed it, so every
    /// entry stays reachable from its home without tombstones.
    fn vacate(&mut self, at: usize) {
        let mask = self.table.len() - 1;
        let mut hole = at;
        let mut next = at;
        loop {
            next = (next + 1) & mask;
            let index = self.table[next];
            if index == EMPTY {
                break;
            }
            let home = self.home(self.entries[index as usize].0);
            // The entry may fill the hole iff its home is not cyclically in (hole, next].
            if next.wrapping_sub(home) & mask >= next.wrapping_sub(hole) & mask {
                self.table[hole] = index;
                self.slot_of[index as usize] = hole as u32;
                hole = next;
            }
        }
        self.table[hole] = EMPTY;
    }
}

impl<K: Word, V> Index<&K> for WordMap<K, V> {
    type Output = V;

    /// `key`'s value.
    ///
    /// # Panics
    /// If `key` has none (as `std`'s maps).
    fn index(&self, key: &K) -> &V {
        self.get(key).expect("a key held in the map")
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn a_word_map_agrees_with_a_btree_map_over_mixed_inserts_and_removes() {
        let mut map = WordMap::new();
        let mut model = BTreeMap::new();
        // A fixed pseudo-random walk over few keys, so keys collide, leave and come back.
        let mut x = 0x2545_f491_4f6c_dd1d_u64;
        for step in 0..20_000u64 {
            crate::collections::xorshift(&mut x);
            let key = (x >> 8) % 97 * 0x1_0000_0001;
            match x % 4 {
                0 => assert_eq!(map.remove(&key), model.remove(&key), "step {step}"),
                1 => *map.get_or_insert_with(key, || 0) += 1,
                _ => assert_eq!(
                    map.insert(key, step),
                    model.insert(key, step),
                    "step {step}"
                ),
            }
            if x % 4 == 1 {
                *model.entry(key).or_insert(0) += 1;
            }
            assert_eq!(map.len(), model.len());
        }
        for (key, value) in &model {
            assert_eq!(map.get(key), Some(value));
            assert_eq!(map[key], *value);
        }
        let mut held: Vec<(u64, u64)> = map.iter().map(|(k, v)| (k, *v)).collect();
        held.sort_unstable();
        assert_eq!(held, model.into_iter().collect::<Vec<_>>());
        assert!(map.table.len() >= 2 * map.len(), "at most half full");
        for (index, &at) in map.slot_of.iter().enumerate() {
            assert_eq!(
                map.table[at as usize] as usize, index,
                "entry {index}'s slot"
            );
        }
    }

    #[test]
    fn removing_keeps_the_rest_findable_and_moves_the_last_entry_into_the_gap() {
        let mut map = WordMap::new();
        for ctx in 0..40u32 {
            map.insert(ctx, ctx * 10);
        }
        assert_eq!(map.remove(&3), Some(30));
        assert_eq!(map.remove(&3), None);
        assert_eq!(
            map.iter().nth(3),
            Some((39, &390)),
            "the last entry took the gap"
        );
        for ctx in (0..40u32).filter(|&c| c != 3) {
            assert_eq!(map.get(&ctx), Some(&(ctx * 10)), "ctx {ctx}");
        }
        assert!(!map.contains_key(&3));
        assert_eq!(map.values().count(), 39);
    }
}
