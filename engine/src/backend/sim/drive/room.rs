//! A read longer than its segment. DiskSim reads a sector into the segment only where it has
//! room, what the bus has not yet sent taking the rest (`disk_buffer_sector_done`); a sector
//! without room is passed over and read when it comes round again. Where the media outruns
//! the bus, the head then reads in bursts a revolution apart, as the bus frees room, and is
//! busy until the read's last sector is in; the bus sets the read's end, unless a segment's
//! worth crosses it in less than a revolution: then it waits for the head as well.

use super::{Access, DeviceRequest, Drive};

/// Most sectors one read is timed through its segment's room, a sector at a time: 512 MiB
/// in one command, the most a `validate` trace may ask (a run's requests are split at the
/// drive's 2 048); a longer one, which only a caller of the model could send, is timed as
/// if its segment held it all.
pub(super) const MAX_ROOM_SECTORS: u32 = 1 << 20;

/// When a read through its segment's room ends, and how the read-ahead after it comes in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Through {
    /// Its last sector has crossed the bus.
    pub(super) sent: u64,
    /// The head has read its last sector.
    pub(super) media_end: u64,
    /// The read-ahead's `k`th sector (from 0) is in at `ahead_since + (k + 1) * ahead_per_sector`:
    /// at the bus's pace where that frees room slower than the media reads, as the sectors
    /// the bus sends from the read's last segment's worth make room for it.
    pub(super) ahead_since: u64,
    pub(super) ahead_per_sector: u64,
}

impl Drive {
    /// Whether `request`, read from the media by `media`, is timed through its segment's
    /// room: longer than the segment, read in order from its first sector, and not so long
    /// that timing it a sector at a time would hold the simulation up. A zero-latency read
    /// lies on one track, which only the DEC RZ26 of DiskSim's suite makes longer than its
    /// segment (58 sectors against 57); it is timed as if its segment held it all.
    pub(super) fn reads_through_room(&self, request: &DeviceRequest, media: &Access) -> bool {
        u64::from(request.sectors) > self.params.segment_sectors
            && request.sectors <= MAX_ROOM_SECTORS
            && media.first_read == 0
    }

    /// Times `request` (see [`Self::reads_through_room`]) from the first pass of each sector
    /// under the head (`read_at`): sector `j` past the segment's first `S` waits for room,
    /// sector `j - S` having crossed the bus, checked as the head reaches the sector or once
    /// read ([`super::DriveParams::read_direct_to_buffer`]); once passed over it is read a
    /// whole number of revolutions later, and every sector after it as many; the bus sends
    /// each sector once it is read and the one before has gone, from `data_from`.
    pub(super) fn read_through_room(
        &self,
        request: &DeviceRequest,
        media: &Access,
        data_from: u64,
    ) -> Through {
        let n = u64::from(request.sectors);
        let segment = self.params.segment_sectors.max(1);
        debug_assert!(n > segment && request.sectors <= MAX_ROOM_SECTORS);
        let first = self.place(request.sector);
        let per_sector = self.rev_ps / first.sectors_per_track.max(1);
        let rev = self.rev_ps.max(1);
        let bus = self.bus_ps(1);
        let check = if self.params.read_direct_to_buffer {
            per_sector
        } else {
            0
        };
        // When each of the last `segment` sectors crossed the bus, by index mod `segment`:
        // bounded by `MAX_ROOM_SECTORS`, as `segment` is under `n`.
        let mut crossed = vec![0u64; usize::try_from(segment).unwrap_or(usize::MAX)];
        let (mut sent, mut read, mut turns) = (data_from, 0u64, 0u64);
        for j in 0..n {
            let pass = self.read_from(first, media, j);
            let slot = (j % segment) as usize;
            if j >= segment {
                // Room once sector j - segment has crossed, checked a sector before the
                // pass ends (as the head reaches the sector) or as it ends (once read).
                let room_at = crossed[slot].saturating_add(check);
                if room_at > pass {
                    turns = turns.max((room_at - pass).div_ceil(rev));
                }
            }
            read = pass.saturating_add(turns.saturating_mul(rev));
            sent = sent.max(read).saturating_add(bus);
            crossed[slot] = sent;
        }
        // The read-ahead's sector k needs sector n + k - segment sent: the bus's pace after
        // the sector that freed room for the read's last one.
        let (ahead_since, ahead_per_sector) = if bus > per_sector {
            let freed = crossed[(n % segment) as usize];
            (read.max(freed.saturating_sub(bus)), bus)
        } else {
            (read, per_sector)
        };
        Through {
            sent,
            media_end: read,
            ahead_since,
            ahead_per_sector,
        }
    }
}
