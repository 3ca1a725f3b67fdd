//! Bios as submitters hand them in, and requests as the scheduler sees them.

use schedhost_sdk::{Op, PrioClass};
use smallvec::SmallVec;

/// The bios of a request: most requests hold one, so it lives inline without an allocation.
pub type Bios = SmallVec<[(u32, BioRef); 1]>;

/// One I/O from a submitter. Several contiguous bios may merge into one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bio {
    /// Chosen by the submitter; reported back on completion.
    pub id: u64,
    /// The submitter (software queue).
    pub ctx: u32,
    /// What it does.
    pub op: Op,
    /// First 512-byte sector.
    pub sector: u64,
    /// Length in sectors.
    pub sectors: u32,
    /// The submitter waits for it.
    pub sync: bool,
    /// Priority class.
    pub prio_class: PrioClass,
    /// Level within the class.
    pub prio_level: u8,
}

impl Bio {
    /// One past the last sector (saturating: front-ends keep ends within
    /// [`super::MAX_SECTOR`], so a bio that does not still cannot wrap to sector 0).
    pub fn end(&self) -> u64 {
        self.sector.saturating_add(u64::from(self.sectors))
    }
}

/// Where a request is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// In its submitter's software queue, waiting for a scheduler tag.
    Staged,
    /// Holds a scheduler tag; goes to the policy with the next insert batch.
    Pending,
    /// Came back from a busy device; goes back to the policy with the next requeue batch.
    Requeued,
    /// The policy has it.
    Queued,
    /// On the device via `hw_queue` since `at_ns`.
    #[expect(missing_docs, reason = "documented on the variant")]
    Dispatched { hw_queue: u32, at_ns: u64 },
}

/// A bio inside a request, with what its completion needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BioRef {
    /// The submitter's bio id.
    pub id: u64,
    /// When the bio entered the host.
    pub submit_ns: u64,
    /// When its group's limits let it go to the scheduler (`submit_ns` when none held it):
    /// io.latency times the device and the scheduler from here, as blk-iolatency times a
    /// bio from when blk-throttle lets it go, so a group's own io.max hold is not latency.
    pub admitted_ns: u64,
    /// Its length, for byte accounting.
    pub sectors: u32,
}

/// A request: one or more contiguous bios of one operation.
#[derive(Debug, Clone)]
pub struct Request {
    /// Submitter of the first bio; merged bios from other submitters complete to their own.
    pub ctx: u32,
    /// What it does.
    pub op: Op,
    /// First sector.
    pub sector: u64,
    /// Length in sectors.
    pub sectors: u32,
    /// The submitter waits for it.
    pub sync: bool,
    /// Priority class.
    pub prio_class: PrioClass,
    /// Level within the class.
    pub prio_level: u8,
    /// The group (from 1) its first bio's submitter is in, 0 for none. Requests of two
    /// groups never merge, as blk-cgroup keeps them apart, so a request is one group's.
    pub group: u32,
    /// When the first bio arrived.
    pub arrival_ns: u64,
    /// Hardware queue whose scheduler tags it holds.
    pub home_queue: u32,
    /// Where it is.
    pub state: State,
    /// The policy instance (see [`crate::core::Core`]'s replacements) it was shown to.
    pub epoch: u32,
    /// Its bios, with their submitters.
    pub bios: Bios,
    /// Times a busy device sent it back.
    pub requeues: u8,
}

/// What a scheduler tag is held for: the request's kind, and its group (from 1; 0 for none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct TagKind {
    pub op: Op,
    pub sync: bool,
    pub group: u32,
}

impl Request {
    /// One past the last sector (saturating, as [`Bio::end`]).
    pub fn end(&self) -> u64 {
        self.sector.saturating_add(u64::from(self.sectors))
    }

    /// True iff the policy knows this request (it was inserted and not yet dispatched).
    pub fn is_queued(&self) -> bool {
        self.state == State::Queued
    }

    /// True iff merges may still change it.
    pub fn is_mergeable(&self) -> bool {
        !matches!(self.state, State::Dispatched { .. }) && self.op != Op::Flush
    }

    /// What its scheduler tag is held for.
    pub(super) fn tag_kind(&self) -> TagKind {
        TagKind {
            op: self.op,
            sync: self.sync,
            group: self.group,
        }
    }
}

/// Requests by id. An id is a slot index with a generation in its high half, so an id stays
/// unique for the life of the host and a stale or invented id is caught in O(1).
#[derive(Debug, Default)]
pub struct RequestTable {
    slots: Vec<Slot>,
    free: Vec<u32>,
    live: usize,
}

#[derive(Debug, Default)]
struct Slot {
    generation: u32,
    request: Option<Request>,
}

impl RequestTable {
    /// Stores `request`; returns its new id.
    pub fn insert(&mut self, request: Request) -> u64 {
        self.live += 1;
        let index = match self.free.pop() {
            Some(index) => index,
            None => {
                self.slots.push(Slot::default());
                (self.slots.len() - 1) as u32
            }
        };
        let slot = &mut self.slots[index as usize];
        // 31-bit generations keep ids below 2^63, as the interface promises policies.
        slot.generation = slot.generation.wrapping_add(1) & 0x7fff_ffff;
        slot.request = Some(request);
        (u64::from(slot.generation) << 32) | u64::from(index)
    }

    /// The request with this id, if it is live.
    pub fn get(&self, id: u64) -> Option<&Request> {
        let slot = self.slots.get((id & 0xffff_ffff) as usize)?;
        if u64::from(slot.generation) == id >> 32 {
            slot.request.as_ref()
        } else {
            None
        }
    }

    /// The request with this id, if it is live.
    pub fn get_mut(&mut self, id: u64) -> Option<&mut Request> {
        let slot = self.slots.get_mut((id & 0xffff_ffff) as usize)?;
        if u64::from(slot.generation) == id >> 32 {
            slot.request.as_mut()
        } else {
            None
        }
    }

    /// Removes and returns the request with this id.
    pub fn remove(&mut self, id: u64) -> Option<Request> {
        let index = (id & 0xffff_ffff) as u32;
        let slot = self.slots.get_mut(index as usize)?;
        if u64::from(slot.generation) != id >> 32 {
            return None;
        }
        let request = slot.request.take()?;
        self.free.push(index);
        self.live -= 1;
        Some(request)
    }

    /// Every live request with its id, in slot order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &Request)> {
        self.slots.iter().enumerate().filter_map(|(index, slot)| {
            let id = (u64::from(slot.generation) << 32) | index as u64;
            slot.request.as_ref().map(|r| (id, r))
        })
    }

    /// Number of live requests.
    pub fn len(&self) -> usize {
        self.live
    }

    /// True iff no request is live.
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }
}
