//! The drive's side of the host bus: when a command's data may cross, at what rate, and
//! what the controller charges to give the bus up and take it again, as DiskSim's
//! `disksim_diskctlr.c` runs that protocol.

use super::{Access, DeviceRequest, Drive, Place, ms_ps};

/// When a command reached the drive and when the drive could act on it: later where the
/// mechanism was still busy (a buffered write going to the media). DiskSim runs a command's
/// overhead from its arrival whatever the mechanism does, and acts once both are done
/// (`disk_read_arrive` and `disk_write_arrive` set `overhead_done` at arrival;
/// `disk_check_hda` waits for it and for the mechanism).
#[derive(Debug, Clone, Copy)]
pub(super) struct Taken {
    pub(super) arrived_ps: u64,
    pub(super) start_ps: u64,
}

impl Taken {
    /// When a command overhead of `overhead_ps` from arrival is done and the drive is free.
    pub(super) fn overhead_done(self, overhead_ps: u64) -> u64 {
        self.arrived_ps
            .saturating_add(overhead_ps)
            .max(self.start_ps)
    }

    /// Whether the command waited for the mechanism.
    pub(super) fn waited(self) -> bool {
        self.start_ps > self.arrived_ps
    }
}

impl Drive {
    /// How many of a write's `sectors` must be in the buffer before its first goes on the
    /// media: DiskSim's rule for a drive with `Extra write disconnect` (the HP C2247A's
    /// firmware, `disk_buffer_block_available`), ten (or the whole write, if shorter) under
    /// 45 sectors and fifteen from there; otherwise one.
    pub(super) fn write_gate(&self, sectors: u32) -> u32 {
        match (self.params.extra_write_disconnect, sectors) {
            (false, _) => 1,
            (true, n) if n < 45 => n.min(10),
            (true, _) => 15,
        }
    }

    /// A read's `sectors` across the bus.
    pub(super) fn bus_ps(&self, sectors: u32) -> u64 {
        ms_ps(self.params.bus_sector_ms * f64::from(sectors))
    }

    /// A write's `sectors` across the bus.
    pub(super) fn write_bus_ps(&self, sectors: u32) -> u64 {
        let ms = self
            .params
            .write_bus_sector_ms
            .unwrap_or(self.params.bus_sector_ms);
        ms_ps(ms * f64::from(sectors))
    }

    /// When a write's data starts to cross the bus: after its command overhead and the data
    /// preparation (DiskSim's READY_TO_TRANSFER path), or, where it waited for the
    /// mechanism, having given the bus up (with the write disconnect overhead where writes
    /// are buffered), once the mechanism is free and the drive has reselected
    /// (`disk_write_arrive`, `disk_check_bus`).
    pub(super) fn write_data_from(&self, taken: Taken, overhead: u64) -> u64 {
        let o = &self.params.overheads;
        let prep = ms_ps(o.data_prep);
        if taken.waited() && !self.params.never_disconnect {
            let disconnect = if self.params.write_back {
                ms_ps(o.disconnect[2])
            } else {
                0
            };
            taken
                .overhead_done(overhead.saturating_add(disconnect))
                .saturating_add(ms_ps(o.reselect))
                .saturating_add(prep)
        } else {
            taken.overhead_done(overhead).saturating_add(prep)
        }
    }

    /// When a read miss's data may start across the bus, the drive having given the bus up
    /// after the command (its overhead and the read disconnect overhead from arrival):
    /// once its water mark of sectors is in the buffer (`held` of them were already), the
    /// drive reselects and prepares the data (DiskSim's `disk_request_needs_bus`,
    /// `disk_check_bus`).
    pub(super) fn read_reconnects(
        &self,
        taken: Taken,
        overhead: u64,
        (media_request, media): (&DeviceRequest, &Access),
        held: u64,
    ) -> u64 {
        let o = &self.params.overheads;
        let disconnected = taken
            .arrived_ps
            .saturating_add(overhead)
            .saturating_add(ms_ps(o.disconnect[usize::from(self.last_was_write)]));
        let sectors = u64::from(media_request.sectors).max(1) + held;
        let mark = self.read_mark(sectors);
        let buffered = if mark <= held {
            0
        } else {
            // Sectors 0..n are read in order, or, under zero-latency access from sector f,
            // f.. first: the mark's sectors are all in once the last of them read is.
            let from_media = mark - held;
            let f = media.first_read.min(from_media);
            let last = if f > 0 { f } else { from_media } - 1;
            self.read_at(media_request, media, last)
        };
        buffered
            .max(disconnected)
            .saturating_add(ms_ps(o.reselect))
            .saturating_add(ms_ps(o.data_prep))
    }

    /// How many of a read's `sectors` must be in the buffer before the drive reconnects:
    /// DiskSim's read water mark, max(1, mark × min(segment, request)) by the request's
    /// size or the mark × the segment rounded up, at most the request; all of them, up to a
    /// segment's worth, where the transfer waits for the last (`disk_read_arrive`).
    pub(super) fn read_mark(&self, sectors: u64) -> u64 {
        let p = &self.params;
        let mark = if p.transfer_after_media {
            // The mark of the whole request, by the request's size: of at most a segment.
            sectors.min(p.segment_sectors)
        } else if p.read_water_of_segment {
            (p.segment_sectors as f64 * p.read_water_mark + 0.999_999_999_9) as u64
        } else {
            (sectors.min(p.segment_sectors) as f64 * p.read_water_mark) as u64
        };
        mark.clamp(1, sectors)
    }

    /// When sector `j` of `request`, read by `media`, has passed under the head: in order
    /// from the start, each track switch costing its skew, or under zero-latency access
    /// (one track, from sector `media.first_read`) those from it first.
    pub(super) fn read_at(&self, request: &DeviceRequest, media: &Access, j: u64) -> u64 {
        self.read_from(self.place(request.sector), media, j)
    }

    /// [`Self::read_at`] for a request whose first sector lies at `first`.
    pub(super) fn read_from(&self, first: Place, media: &Access, j: u64) -> u64 {
        let spt = first.sectors_per_track.max(1);
        let per_sector = self.rev_ps / spt;
        let f = media.first_read;
        let read_as = if f > 0 {
            if j < f { spt - f + j } else { j - f }
        } else {
            let track = match j.checked_sub(first.left_on_track) {
                Some(past) => 1 + past / spt,
                None => 0,
            };
            j.saturating_add(self.skew_before(first, track))
        };
        media
            .start
            .saturating_add((read_as + 1).saturating_mul(per_sector))
    }

    /// When the last sector of a read has crossed the bus, sent in the request's order a
    /// sector at a time as each is buffered (DiskSim reconnects at a water mark of one
    /// sector, and gives the bus up and reconnects whenever the transfer catches the media):
    /// sector `j`, read by `t(j)`, goes no sooner, and the `n - j` sectors from it take
    /// `n - j` bus times after it. In order, `t(j)` is `start + (j + 1 + skews) *
    /// per_sector`, the same step from sector to sector within a track, so the binding
    /// sectors are each track's first and last of the request, and from cylinder to cylinder
    /// they step alike ([`Self::binding_tracks`]). Under zero-latency access
    /// (one track) from sector `k`, sectors `k..n` come first and `0..k` a revolution's
    /// remainder later: sector 0 and sector `k - 1` bind.
    pub(super) fn read_sent(&self, request: &DeviceRequest, media: &Access) -> u64 {
        let first = self.place(request.sector);
        let spt = first.sectors_per_track.max(1);
        let per_sector = self.rev_ps / spt;
        let sectors = u64::from(request.sectors).max(1);
        let bus_one = self.bus_ps(1);
        let from = |read_as: u64, j: u64| {
            let read = media
                .start
                .saturating_add((read_as + 1).saturating_mul(per_sector));
            read.saturating_add(bus_one.saturating_mul(sectors - j))
        };
        let k = media.first_read.min(sectors);
        if k > 0 {
            // Sector j < k is the (spt - k + j)th read from the start.
            return from(spt - k, 0).max(from(spt - 1, k - 1));
        }
        let mut sent = 0;
        for i in self.binding_tracks(Self::crossings(first, sectors) + 1) {
            let (head, tail) = if i == 0 {
                (0, first.left_on_track - 1)
            } else {
                let head = first.left_on_track + (i - 1) * spt;
                (head, head + spt - 1)
            };
            let skews = self.skew_before(first, i);
            let tail = tail.min(sectors - 1);
            sent = sent
                .max(from(head.saturating_add(skews), head))
                .max(from(tail.saturating_add(skews), tail));
        }
        sent
    }
}
