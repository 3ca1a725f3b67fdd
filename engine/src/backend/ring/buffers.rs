//! The I/O buffers: one page-aligned arena cut into fixed slots, so O_DIRECT's alignment holds
//! for every slot and the whole arena can be registered with the ring once.

use std::alloc::{Layout, alloc_zeroed, dealloc};
use std::ptr::NonNull;
use std::sync::Arc;

/// Page alignment satisfies O_DIRECT on every logical block size Linux supports.
const ALIGN: usize = 4096;

/// A buffer slot lent to one bio while it is in flight. The real drivers number each bio by
/// the slot it holds, so a bio's id and its lease convert into each other here and nowhere
/// else.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lease(u32);

impl Lease {
    /// Slot `slot` of the arena.
    pub fn new(slot: u32) -> Self {
        Self(slot)
    }

    /// The lease of the bio the driver numbered `bio`.
    pub fn of_bio(bio: u64) -> Self {
        // Drivers number bios by their slot, and an arena has fewer than 2^32 slots.
        Self(bio as u32)
    }

    /// The id the bio holding this lease carries.
    pub fn bio_id(self) -> u64 {
        u64::from(self.0)
    }

    /// The slot's index in the arena.
    pub fn index(self) -> usize {
        self.0 as usize
    }

    /// The slot's number, as the NBD pools count them.
    pub fn slot(self) -> u32 {
        self.0
    }
}

/// A slot: where it starts in the arena and how long it is.
#[derive(Debug, Clone, Copy)]
struct Slot {
    offset: usize,
    len: usize,
}

/// Page-aligned memory divided into slots, each lent to one in-flight bio at a time.
#[derive(Debug)]
pub struct Arena {
    base: NonNull<u8>,
    layout: Layout,
    slots: Arc<[Slot]>,
}

// SAFETY: the arena owns its allocation outright; moving it to another thread moves that
// ownership, as for a Vec<u8>.
unsafe impl Send for Arena {}

impl Arena {
    /// An arena with one slot per entry of `lens`, each rounded up to whole pages.
    ///
    /// # Panics
    /// Never in practice: only if the total overflows `isize`, which no job can ask for.
    pub fn new(lens: &[usize]) -> Self {
        let mut slots: Vec<Slot> = Vec::with_capacity(lens.len());
        let mut total = 0usize;
        for &len in lens {
            slots.push(Slot { offset: total, len });
            total += len.next_multiple_of(ALIGN);
        }
        let layout = Layout::from_size_align(total.max(ALIGN), ALIGN)
            .expect("arena size fits isize: jobs are bounded by iodepth × bs");
        // SAFETY: the layout has a non-zero size.
        let raw = unsafe { alloc_zeroed(layout) };
        let Some(base) = NonNull::new(raw) else {
            std::alloc::handle_alloc_error(layout);
        };
        Self {
            base,
            layout,
            slots: slots.into(),
        }
    }

    /// Fills every slot with pseudo-random bytes, so unverified writes do not send zero
    /// pages (which some devices compress or skip).
    /// Called before the arena is lent to any ring.
    pub fn fill_random(&mut self, seed: u64) {
        let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        for i in 0..self.slots.len() {
            // SAFETY: the arena is filled before any ring exists, so no I/O uses a slot.
            let slot = unsafe { self.slot_mut(Lease::new(i as u32)) };
            fill_pseudo_random(slot, &mut x);
        }
    }

    /// A view other threads use to fill and check the slots they hold.
    pub fn access(&self) -> SlotAccess {
        SlotAccess {
            base: self.base,
            slots: Arc::clone(&self.slots),
        }
    }

    /// Start and length of the whole arena, for registering it with the ring.
    pub fn region(&self) -> (*mut u8, usize) {
        (self.base.as_ptr(), self.layout.size())
    }

    /// Where `lease`'s slot starts and its length, for handing to the kernel.
    pub fn raw(&self, lease: Lease) -> (*mut u8, usize) {
        let slot = self.slots[lease.index()];
        // SAFETY: every slot lies inside the allocation (built from the same lengths).
        (unsafe { self.base.as_ptr().add(slot.offset) }, slot.len)
    }

    /// `lease`'s slot to fill before a write; `&mut self` keeps two slices of the arena from
    /// coexisting.
    ///
    /// # Safety
    /// The lease's bio is not in flight: the kernel may write a slot while its I/O runs.
    unsafe fn slot_mut(&mut self, lease: Lease) -> &mut [u8] {
        let (ptr, len) = self.raw(lease);
        // SAFETY: in bounds (see `raw`); the exclusive borrow of the arena means no other
        // slice of it exists, and the caller vouches that no I/O uses the slot.
        unsafe { std::slice::from_raw_parts_mut(ptr, len) }
    }
}

/// Slot contents for the threads that borrow slots: a submitter fills its write buffer and
/// checks a finished read in its own slot while the ring thread does other I/O.
#[derive(Debug, Clone)]
pub struct SlotAccess {
    base: NonNull<u8>,
    slots: Arc<[Slot]>,
}

// SAFETY: the view is a pointer into the arena; `slot`/`slot_mut` are unsafe and make the
// caller prove exclusive use of the slot, which is what makes sharing the view sound.
unsafe impl Send for SlotAccess {}
// SAFETY: as for Send.
unsafe impl Sync for SlotAccess {}

impl SlotAccess {
    /// `lease`'s slot, to fill before its bio is submitted.
    ///
    /// # Safety
    /// The caller holds the lease: no I/O uses the slot and no other thread touches it until
    /// the caller hands it on (a channel send, which orders the writes before the receiver's
    /// use), and the arena outlives the returned slice.
    #[expect(
        clippy::mut_from_ref,
        reason = "exclusive use of the slot is the caller's contract"
    )]
    pub unsafe fn slot_mut(&self, lease: Lease) -> &mut [u8] {
        let slot = self.slots[lease.index()];
        // SAFETY: in bounds (built with the arena) and exclusively held per the contract.
        unsafe { std::slice::from_raw_parts_mut(self.base.as_ptr().add(slot.offset), slot.len) }
    }

    /// `lease`'s slot, to check after its bio finished.
    ///
    /// # Safety
    /// As for [`SlotAccess::slot_mut`].
    pub unsafe fn slot(&self, lease: Lease) -> &[u8] {
        let slot = self.slots[lease.index()];
        // SAFETY: as above.
        unsafe { std::slice::from_raw_parts(self.base.as_ptr().add(slot.offset), slot.len) }
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout. The ring that borrowed slots is dropped
        // first and waits for its I/O (see `Ring`'s drop).
        unsafe { dealloc(self.base.as_ptr(), self.layout) }
    }
}

/// Fills `bytes` from the xorshift stream in `state` (never 0), which it advances: data no
/// compressing or deduplicating layer can skip, for buffers and laid-out files.
pub fn fill_pseudo_random(bytes: &mut [u8], state: &mut u64) {
    for chunk in bytes.chunks_mut(8) {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        chunk.copy_from_slice(&state.to_le_bytes()[..chunk.len()]);
    }
}

#[cfg(test)]
mod tests {
    use super::{Arena, Lease};

    #[test]
    fn arena_slots_are_page_aligned_and_disjoint() {
        let arena = Arena::new(&[512, 4096, 131072, 512]);
        let (base, size) = arena.region();
        assert_eq!(base as usize % 4096, 0);
        assert_eq!(size, 4096 + 4096 + 131072 + 4096);
        for i in 0..4 {
            assert_eq!(arena.raw(Lease::new(i)).0 as usize % 4096, 0);
        }
        // SAFETY: no ring exists in this test, so no I/O uses any slot.
        let access = arena.access();
        unsafe {
            access.slot_mut(Lease::new(1)).fill(7);
            assert!(access.slot(Lease::new(0)).iter().all(|&b| b == 0));
            assert!(access.slot(Lease::new(2)).iter().all(|&b| b == 0));
            assert_eq!(access.slot(Lease::new(1)).len(), 4096);
        }
    }
}
