//! The merge engine: finds queued requests a bio can join, and requests that a grown request
//! now touches (the kernel's bio merge, request merge and `requests_merged`).

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::hash::BuildHasherDefault;

use schedhost_sdk::collections::IdHasher;
use schedhost_sdk::{MergeKind, Op};

use super::request::{Bio, Request, RequestTable};

/// Which merges are tried, as the kernel's `nomerges` queue attribute.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Nomerges {
    /// 0: every merge: lookups by both ends, and coalescing of requests a bio joins.
    #[default]
    All,
    /// 1: only the one-hit cache: the request that last grew or arrived.
    OneHit,
    /// 2: never merge.
    Off,
}

impl Nomerges {
    /// The mode for the sysfs value 0, 1 or 2.
    pub fn from_level(level: u8) -> Option<Self> {
        match level {
            0 => Some(Self::All),
            1 => Some(Self::OneHit),
            2 => Some(Self::Off),
            _ => None,
        }
    }
}

type SectorKeyMap = HashMap<u64, u64, BuildHasherDefault<IdHasher>>;

/// Mergeable requests by end sector (for back merges) and start sector (for front merges),
/// per operation.
#[derive(Debug, Default)]
pub struct MergeIndex {
    by_end: SectorKeyMap,
    by_start: SectorKeyMap,
    /// The one-hit cache (the kernel's `last_merge`).
    last: Option<u64>,
}

/// Packs a sector and an operation into one key; sectors stay below
/// [`super::MAX_SECTOR`], far below 2^62.
fn key(sector: u64, op: Op) -> u64 {
    (sector << 2) | op as u64
}

impl MergeIndex {
    /// Makes `request` (id `id`) findable by both ends.
    pub fn add(&mut self, id: u64, request: &Request) {
        if request.op == Op::Flush {
            return;
        }
        self.by_end.insert(key(request.end(), request.op), id);
        self.by_start.insert(key(request.sector, request.op), id);
        self.last = Some(id);
    }

    /// Forgets `request`, unless another request has since taken its keys.
    pub fn remove(&mut self, id: u64, request: &Request) {
        remove_if(&mut self.by_end, key(request.end(), request.op), id);
        remove_if(&mut self.by_start, key(request.sector, request.op), id);
        if self.last == Some(id) {
            self.last = None;
        }
    }

    /// The request `bio` could join, and at which end, under `mode`.
    /// Returns candidates only: the caller checks [`can_merge`] and the policy's veto.
    pub fn candidates(
        &self,
        bio: &Bio,
        mode: Nomerges,
        table: &RequestTable,
    ) -> [Option<(u64, MergeKind)>; 2] {
        match mode {
            Nomerges::Off => [None, None],
            Nomerges::OneHit => {
                let hit = self.last.and_then(|id| {
                    let request = table.get(id)?;
                    if request.end() == bio.sector {
                        Some((id, MergeKind::Back))
                    } else if bio.end() == request.sector {
                        Some((id, MergeKind::Front))
                    } else {
                        None
                    }
                });
                [hit, None]
            }
            Nomerges::All => [
                self.by_end
                    .get(&key(bio.sector, bio.op))
                    .map(|&id| (id, MergeKind::Back)),
                self.by_start
                    .get(&key(bio.end(), bio.op))
                    .map(|&id| (id, MergeKind::Front)),
            ],
        }
    }

    /// The request that begins where `request` now ends (after a back merge).
    pub fn successor(&self, request: &Request) -> Option<u64> {
        self.by_start.get(&key(request.end(), request.op)).copied()
    }

    /// The request that ends where `request` now begins (after a front merge).
    pub fn predecessor(&self, request: &Request) -> Option<u64> {
        self.by_end.get(&key(request.sector, request.op)).copied()
    }

    /// Marks `id` as the one-hit cache entry.
    pub fn touch(&mut self, id: u64) {
        self.last = Some(id);
    }
}

fn remove_if(map: &mut SectorKeyMap, key: u64, id: u64) {
    // One probe: the entry found is the one removed.
    if let Entry::Occupied(entry) = map.entry(key)
        && *entry.get() == id
    {
        entry.remove();
    }
}

/// True iff `bio` may join `request` without exceeding `max_sectors`: same operation and
/// priority, still mergeable, and — unless the policy already has the request — from the same
/// submitter (software-queue merges are per submitter, as the kernel's plug is per task).
pub fn can_merge(request: &Request, bio: &Bio, limits: MergeLimits) -> bool {
    request.is_mergeable()
        && request.op == bio.op
        && request.prio_class == bio.prio_class
        && request.prio_level == bio.prio_level
        && fits(request.sectors, bio.sectors, limits.max_sectors)
        && request.bios.len() < limits.max_segments as usize
        && (request.is_queued() || request.ctx == bio.ctx)
}

/// How large a merged request may grow: the queue limits `max_sectors` and `max_segments`.
/// Each bio is one segment (one buffer, one iovec on a real device), so the segment limit
/// keeps a request of small bios within what one vectored I/O can carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MergeLimits {
    /// Largest request, in sectors.
    pub max_sectors: u32,
    /// Most bios in one request.
    pub max_segments: u32,
}

/// True iff `a + b` sectors stay within `max_sectors`, summed without wrapping.
fn fits(a: u32, b: u32, max_sectors: u32) -> bool {
    u64::from(a) + u64::from(b) <= u64::from(max_sectors)
}

/// True iff request `b` may be absorbed into `a` (they touch, in that order or the other):
/// same operation and priority, same stage of life, within `max_sectors`.
pub fn can_coalesce(a: &Request, b: &Request, limits: MergeLimits) -> bool {
    a.is_mergeable()
        && b.is_mergeable()
        && a.op == b.op
        && a.group == b.group
        && a.prio_class == b.prio_class
        && a.prio_level == b.prio_level
        && a.state == b.state
        && (a.is_queued() || a.ctx == b.ctx)
        && fits(a.sectors, b.sectors, limits.max_sectors)
        && a.bios.len() + b.bios.len() <= limits.max_segments as usize
}

#[cfg(test)]
mod tests {
    use schedhost_sdk::PrioClass;

    use super::*;
    use crate::core::State;
    use crate::core::request::BioRef;

    fn request(sector: u64, sectors: u32) -> Request {
        Request {
            ctx: 0,
            op: Op::Write,
            sector,
            sectors,
            sync: true,
            prio_class: PrioClass::None,
            prio_level: 4,
            group: 0,
            arrival_ns: 0,
            home_queue: 0,
            state: State::Staged,
            epoch: 0,
            bios: smallvec::SmallVec::new(),
            requeues: 0,
        }
    }

    fn bio(sector: u64, sectors: u32) -> Bio {
        Bio {
            id: 1,
            ctx: 0,
            op: Op::Write,
            sector,
            sectors,
            sync: true,
            prio_class: PrioClass::None,
            prio_level: 4,
        }
    }

    fn sectors(max_sectors: u32) -> MergeLimits {
        MergeLimits {
            max_sectors,
            max_segments: u32::MAX,
        }
    }

    #[test]
    fn lengths_whose_sum_wraps_u32_do_not_merge() {
        let big = request(0, u32::MAX);
        let touching = bio(u64::from(u32::MAX), 2);
        assert!(!can_merge(&big, &touching, sectors(u32::MAX)));
        assert!(!can_coalesce(
            &big,
            &request(u64::from(u32::MAX), 2),
            sectors(u32::MAX)
        ));
        assert!(can_merge(&request(0, 8), &bio(8, 8), sectors(16)));
    }

    #[test]
    fn a_request_at_the_segment_limit_takes_no_more_bios() {
        let limits = MergeLimits {
            max_sectors: u32::MAX,
            max_segments: 2,
        };
        let mut two = request(0, 2);
        two.bios.push((
            0,
            BioRef {
                id: 1,
                submit_ns: 0,
                admitted_ns: 0,
                sectors: 1,
            },
        ));
        two.bios.push((
            0,
            BioRef {
                id: 2,
                submit_ns: 0,
                admitted_ns: 0,
                sectors: 1,
            },
        ));
        assert!(
            !can_merge(&two, &bio(2, 1), limits),
            "a third bio would be a third segment"
        );
        let mut one = request(0, 1);
        one.bios.push((
            0,
            BioRef {
                id: 1,
                submit_ns: 0,
                admitted_ns: 0,
                sectors: 1,
            },
        ));
        assert!(can_merge(&one, &bio(1, 1), limits));
        let mut other = request(2, 1);
        other.bios.push((
            0,
            BioRef {
                id: 3,
                submit_ns: 0,
                admitted_ns: 0,
                sectors: 1,
            },
        ));
        assert!(!can_coalesce(&two, &other, limits));
        assert!(can_coalesce(&one, &other, limits));
    }

    #[test]
    fn an_end_past_the_last_sector_saturates_instead_of_wrapping_to_zero() {
        assert_eq!(bio(u64::MAX - 1, 8).end(), u64::MAX);
        assert_eq!(request(u64::MAX, 1).end(), u64::MAX);
    }
}
