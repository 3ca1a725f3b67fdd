//! Request ids sorted by start sector, in one sorted vector: a queue holds at most a few
//! hundred requests, where a binary search over 16-byte entries and a short move on insert
//! cost less than a B-tree's nodes, allocations and pointer chasing through linear memory.
//!
//! An elevator walks the set in sector order: it asks for the request at or after where the
//! last one ended, then removes what it found, and the next request it asks for lies where
//! that one was. The set remembers that index, and a lookup or removal tries it before
//! searching.

use std::cell::Cell;

use crate::types::{RequestId, Sector};

/// A queued request and where it starts: what the sector-ordered lookups find.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Positioned {
    /// Its first sector (the sort key, so it comes first).
    pub sector: Sector,
    /// The request.
    pub id: RequestId,
}

/// Request ids sorted by start sector: the elevator's sort tree.
#[derive(Debug, Default, Clone)]
pub struct SectorSet {
    /// Sorted, each entry once.
    by_sector: Vec<Positioned>,
    /// Where the last lookup or removal was: a guess only, checked before it is used.
    hint: Cell<usize>,
}

impl SectorSet {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds request `id` starting at `sector`.
    pub fn insert(&mut self, sector: Sector, id: RequestId) {
        let entry = Positioned { sector, id };
        // Requests mostly arrive in ascending order: try the end first.
        if self.by_sector.last().is_none_or(|last| *last < entry) {
            self.by_sector.push(entry);
            return;
        }
        if let Err(at) = self.by_sector.binary_search(&entry) {
            self.by_sector.insert(at, entry);
        }
    }

    /// Removes request `id` starting at `sector`; returns true iff it was there.
    pub fn remove(&mut self, sector: Sector, id: RequestId) -> bool {
        let entry = Positioned { sector, id };
        let hint = self.hint.get();
        let found = if self.by_sector.get(hint) == Some(&entry) {
            Ok(hint)
        } else {
            self.by_sector.binary_search(&entry)
        };
        match found {
            Ok(at) => {
                self.by_sector.remove(at);
                // The entry after it moved into its place.
                self.hint.set(at);
                true
            }
            Err(_) => false,
        }
    }

    /// Moves request `id` whose start changed (a front merge).
    pub fn reposition(&mut self, old_sector: Sector, new_sector: Sector, id: RequestId) {
        if self.remove(old_sector, id) {
            self.insert(new_sector, id);
        }
    }

    /// Index of the first entry starting at or after `sector`.
    fn first_at(&self, sector: Sector) -> usize {
        let hint = self.hint.get();
        let at_or_after = |i: usize| self.by_sector.get(i).is_none_or(|p| p.sector >= sector);
        let before =
            |i: usize| i == 0 || self.by_sector.get(i - 1).is_some_and(|p| p.sector < sector);
        if at_or_after(hint) && before(hint) {
            return hint;
        }
        let at = self.by_sector.partition_point(|p| p.sector < sector);
        self.hint.set(at);
        at
    }

    /// The first request starting at or after `sector`.
    pub fn at_or_after(&self, sector: Sector) -> Option<Positioned> {
        self.by_sector.get(self.first_at(sector)).copied()
    }

    /// The last request starting before `sector`.
    pub fn before(&self, sector: Sector) -> Option<Positioned> {
        let at = self.first_at(sector);
        at.checked_sub(1).map(|i| self.by_sector[i])
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

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A request at `sector` with `id`, as the lookups answer it (the elevator's tests too).
    pub(in crate::collections) fn at(sector: u64, id: u64) -> Option<Positioned> {
        Some(Positioned {
            sector: Sector(sector),
            id: RequestId(id),
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
        assert_eq!(set.before(Sector(50)), None);
        set.reposition(Sector(100), Sector(40), RequestId(1));
        assert_eq!(set.first(), at(40, 1));
        set.insert(Sector(40), RequestId(1));
        assert_eq!(set.len(), 3, "an entry is held once");
        assert!(!set.remove(Sector(100), RequestId(1)));
    }

    #[test]
    fn requests_at_one_sector_are_kept_by_id_and_found_first_by_lowest_id() {
        let mut set = SectorSet::new();
        for id in [9, 3, 6] {
            set.insert(Sector(8), RequestId(id));
        }
        assert_eq!(set.at_or_after(Sector(8)), at(8, 3));
        let ids: Vec<u64> = set.iter().map(|p| p.id.0).collect();
        assert_eq!(ids, [3, 6, 9]);
    }

    #[test]
    fn a_sector_set_agrees_with_a_btree_set_when_an_elevator_walks_it_and_others_arrive() {
        use std::collections::BTreeSet;
        let mut set = SectorSet::new();
        let mut model: BTreeSet<(u64, u64)> = BTreeSet::new();
        let mut x = 0x2545_f491_4f6c_dd1d_u64;
        let mut head = 0;
        for id in 0..20_000u64 {
            let r = crate::collections::xorshift(&mut x);
            let step = if model.is_empty() { 0 } else { r % 3 };
            if step == 0 {
                // Few sectors, so requests share them and the walk meets equal starts.
                let sector = (r >> 8) % 300;
                set.insert(Sector(sector), RequestId(id));
                model.insert((sector, id));
            } else if step == 1 {
                // The elevator: the next request from the head, taken, the head past it.
                let want = model.range((head, 0)..).next().copied();
                assert_eq!(
                    set.at_or_after(Sector(head)),
                    want.and_then(|(s, i)| at(s, i))
                );
                let (sector, id) = want.unwrap_or_else(|| *model.first().unwrap());
                assert!(set.remove(Sector(sector), RequestId(id)));
                model.remove(&(sector, id));
                head = sector + (r >> 20) % 3;
            } else {
                // Something else leaves, or a lookup from elsewhere.
                let sector = (r >> 8) % 300;
                let before = model.range(..(sector, 0)).next_back().copied();
                assert_eq!(
                    set.before(Sector(sector)),
                    before.and_then(|(s, i)| at(s, i))
                );
                if let Some((s, i)) = before {
                    assert!(set.remove(Sector(s), RequestId(i)));
                    model.remove(&(s, i));
                }
                assert!(!set.remove(Sector(sector), RequestId(id)), "never inserted");
            }
            assert_eq!(set.len(), model.len());
        }
        let all: Vec<(u64, u64)> = set.iter().map(|p| (p.sector.0, p.id.0)).collect();
        assert_eq!(all, model.into_iter().collect::<Vec<_>>());
    }
}
