//! A transfer longer than its segment. DiskSim reads a sector into the segment only where it
//! has room, what the bus has not yet sent taking the rest (`disk_buffer_sector_done`); a
//! sector without room is passed over and read when it comes round again. Where the media
//! outruns the bus, the head then reads in bursts a revolution apart, as the bus frees room,
//! and is busy until the read's last sector is in; the bus sets the read's end, unless a
//! segment's worth crosses it in less than a revolution: then it waits for the head as well.
//! A write's first transfer fills at most its segment, and the drive takes the bus again for
//! more once what is left of it to write has drained to the low water mark, sending the room
//! there is then (`disk_buffer_request_complete`, `disk_request_needs_bus`); a sector whose
//! data is not in when the head reaches it is written a revolution later.

use super::{Access, DeviceRequest, Drive, Place, ms_ps};

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
        let Room {
            n,
            segment,
            first,
            per_sector,
            rev,
        } = self.room(request);
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

    /// What timing `request` through its segment's room takes from the drive.
    fn room(&self, request: &DeviceRequest) -> Room {
        let segment = self.params.segment_sectors.max(1);
        let n = u64::from(request.sectors);
        debug_assert!(n > segment && request.sectors <= MAX_ROOM_SECTORS);
        let first = self.place(request.sector);
        Room {
            n,
            segment,
            first,
            per_sector: self.rev_ps / first.sectors_per_track.max(1),
            rev: self.rev_ps.max(1),
        }
    }

    /// Whether `request`, a write, is timed through its segment's room: longer than the
    /// segment and not so long that timing it a sector at a time would hold the simulation
    /// up (as [`Self::reads_through_room`]).
    pub(super) fn writes_through_room(&self, request: &DeviceRequest) -> bool {
        u64::from(request.sectors) > self.params.segment_sectors
            && request.sectors <= MAX_ROOM_SECTORS
    }

    /// Times `request` (see [`Self::writes_through_room`]), its first segment's worth
    /// positioned by `media`, its data crossing the bus a sector every `bus` from
    /// `data_from`: the first transfer fills the segment; each time a sector reaches the
    /// media with no more than the low water mark of the write left in the segment, the
    /// drive reselects (once the bus is free) and sends what room there is; sector `j`
    /// goes on the media as the head passes it if its data is in as the head reaches it,
    /// else a whole number of revolutions later, and every sector after it as many.
    pub(super) fn write_through_room(
        &self,
        request: &DeviceRequest,
        media: &Access,
        (data_from, bus): (u64, u64),
    ) -> WrittenThrough {
        let Room {
            n,
            segment,
            first,
            per_sector,
            rev,
        } = self.room(request);
        let o = &self.params.overheads;
        // Holding the bus, the drive takes data whenever room frees and never reselects.
        let (mark, reselect, disconnect) = if self.params.write_holds_bus {
            (segment, 0, 0)
        } else {
            (
                self.params.write_water_mark.min(segment),
                ms_ps(o.reselect),
                ms_ps(o.disconnect[2]),
            )
        };
        // When each sector's data is in, by index mod `segment`: a sector's slot is taken
        // only once the sector `segment` before it is on the media, which bounds the ring.
        let mut arrives = vec![0u64; usize::try_from(segment).unwrap_or(usize::MAX)];
        for (j, slot) in arrives.iter_mut().enumerate() {
            *slot = data_from.saturating_add(bus.saturating_mul(j as u64 + 1));
        }
        let mut sent = segment;
        let mut last_in = data_from.saturating_add(bus.saturating_mul(segment));
        let mut bus_free = last_in.saturating_add(disconnect);
        let (mut written, mut turns) = (0u64, 0u64);
        for j in 0..n {
            debug_assert!(sent > j, "sector {j}'s data was sent");
            let data_in = arrives[(j % segment) as usize];
            // The sector passes under the head by `pass`, plus the revolutions lost so far.
            let pass = self.read_from(first, media, j);
            let reaches = pass
                .saturating_add(turns.saturating_mul(rev))
                .saturating_sub(per_sector);
            if data_in > reaches {
                turns = turns.saturating_add((data_in - reaches).div_ceil(rev));
            }
            written = pass.saturating_add(turns.saturating_mul(rev));
            let on_media = j + 1;
            if sent < n && sent - on_media <= mark {
                let start = written.max(bus_free).saturating_add(reselect);
                let room = (segment - (sent - on_media)).min(n - sent);
                for i in 0..room {
                    let at = start.saturating_add(bus.saturating_mul(i + 1));
                    arrives[((sent + i) % segment) as usize] = at;
                    last_in = at;
                }
                sent += room;
                bus_free = last_in.saturating_add(disconnect);
            }
        }
        WrittenThrough {
            received: last_in,
            media_end: written,
        }
    }
}

/// A transfer longer than its segment, timed a sector at a time: its sectors, the segment's,
/// where it starts, a sector's and a revolution's time on the media.
struct Room {
    n: u64,
    segment: u64,
    first: Place,
    per_sector: u64,
    rev: u64,
}

/// When a write through its segment's room ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct WrittenThrough {
    /// Its last data is in the buffer.
    pub(super) received: u64,
    /// Its last sector is on the media.
    pub(super) media_end: u64,
}
