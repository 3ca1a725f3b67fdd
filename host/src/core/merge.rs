//! The merge engine: finds queued requests a bio can join, and requests that a grown request
//! now touches (the kernel's bio merge, request merge and `requests_merged`).

use std::collections::HashMap;
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

/// Packs a sector and an operation into one key; sectors stay far below 2^62.
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
    if map.get(&key) == Some(&id) {
        map.remove(&key);
    }
}

/// True iff `bio` may join `request` without exceeding `max_sectors`: same operation and
/// priority, still mergeable, and — unless the policy already has the request — from the same
/// submitter (software-queue merges are per submitter, as the kernel's plug is per task).
pub fn can_merge(request: &Request, bio: &Bio, max_sectors: u32) -> bool {
    request.is_mergeable()
        && request.op == bio.op
        && request.prio_class == bio.prio_class
        && request.prio_level == bio.prio_level
        && request.sectors + bio.sectors <= max_sectors
        && (request.is_queued() || request.ctx == bio.ctx)
}

/// True iff request `b` may be absorbed into `a` (they touch, in that order or the other):
/// same operation and priority, same stage of life, within `max_sectors`.
pub fn can_coalesce(a: &Request, b: &Request, max_sectors: u32) -> bool {
    a.is_mergeable()
        && b.is_mergeable()
        && a.op == b.op
        && a.prio_class == b.prio_class
        && a.prio_level == b.prio_level
        && a.state == b.state
        && (a.is_queued() || a.ctx == b.ctx)
        && a.sectors + b.sectors <= max_sectors
}
