//! Which device of a run a bio goes to.

use crate::core::Bio;

/// How bios are spread over a run's devices: the address space is cut into chunks of
/// `chunk_sectors`, chunk `i` on device `i mod lanes`. The lane is a function of the
/// address alone, so a block always goes to one device, whatever the size of the I/O that
/// reaches it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Striping {
    pub(super) lanes: u64,
    pub(super) chunk_sectors: u64,
}

impl Striping {
    /// One device: everything on lane 0.
    pub fn single() -> Self {
        Self {
            lanes: 1,
            chunk_sectors: u64::MAX,
        }
    }

    /// `lanes` devices in chunks of `chunk_sectors`.
    pub fn new(lanes: usize, chunk_sectors: u64) -> Self {
        Self {
            lanes: lanes.max(1) as u64,
            chunk_sectors: chunk_sectors.max(1),
        }
    }

    /// The lane of `bio`, or None if it straddles two chunks (it would need two devices).
    pub fn lane_of(&self, bio: &Bio) -> Option<usize> {
        if self.lanes == 1 {
            return Some(0);
        }
        let chunk = bio.sector / self.chunk_sectors;
        let last = bio.end().saturating_sub(1).max(bio.sector) / self.chunk_sectors;
        (chunk == last).then_some((chunk % self.lanes) as usize)
    }
}
