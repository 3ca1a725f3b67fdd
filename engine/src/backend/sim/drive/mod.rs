//! `drive`: a disk described the way DiskSim describes one, parameter for parameter, so a
//! drive DiskSim's authors extracted and validated can be imported ([`disksim`]) and checked
//! against its recorded service times (`schedhost validate`).
//!
//! Where the `hdd` model derives its layout and seek curve from a few published figures, this
//! one takes them as measured: every zone's cylinders, sectors per track and skews; the seek
//! time for each measured distance (linear between them); head switch and write settling;
//! the controller's overheads by operation, cache outcome and previous operation; the
//! per-sector bus time; the buffer's segments and read-ahead; write-back caching.
//!
//! The mechanism serves one command at a time in arrival order (the validated drives ran with
//! `Max queue length = 1`). After a read it keeps reading ahead into the segment while idle;
//! a read wholly in the buffer, or arriving in time as the read-ahead streams, is a hit. With
//! write-back a write completes once its data is in the buffer and is written to the media
//! before the mechanism takes the next command.

mod bus;
mod cache;
pub mod disksim;
mod layout;
mod params;
mod room;

pub use layout::{DriveZone, MAX_SLIPS, SurfaceOrder};
pub use params::{ContinuousRead, DriveParams, Overheads};

use bus::Taken;
use cache::{Boundaries, Segment};

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use schedhost_sdk::Op;

use super::{DeviceModel, DeviceRequest, EIO, Geometry, in_range};

/// Where an LBN lies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Place {
    cylinder: u64,
    /// The head it is under.
    surface: u64,
    /// Its track's place in the cylinder's order (the skews count by it).
    track: u64,
    /// Rotational position of the sector, in sectors from the index.
    angle: u64,
    sectors_per_track: u64,
    /// Sectors left on this track from here.
    left_on_track: u64,
    zone: usize,
}

/// One access to the media: when the head was positioned, when reading or writing started
/// and when the request's last sector had passed, how long the head waited, and which of
/// the request's sectors came first (0 but under zero-latency access, which starts at the
/// sector under the head and comes round to the request's first sectors last).
#[derive(Debug, Clone, Copy)]
struct Access {
    positioned: u64,
    start: u64,
    end: u64,
    wait: u64,
    first_read: u64,
}

/// The write segment being written to the media: where it starts and ends, and until when.
#[derive(Debug, Clone, Copy)]
struct Writing {
    start: u64,
    end: u64,
    until_ps: u64,
}

/// The drive.
#[derive(Debug)]
pub struct Drive {
    params: DriveParams,
    /// First LBN of each zone.
    zone_lbn: Vec<u64>,
    rev_ps: u64,
    cylinder: u64,
    surface: u64,
    /// When the mechanism may take the next command.
    mech_free_ps: u64,
    last_was_write: bool,
    queue: VecDeque<(u64, DeviceRequest)>,
    segments: Vec<Segment>,
    /// The last write's segment, while the mechanism writes it.
    writing: Option<Writing>,
    due: BinaryHeap<Reverse<(u64, u64, u64, i32)>>,
    seq: u64,
}

const PS_PER_NS: u64 = 1000;

/// The longest seek a drive model takes: a second, thirty times any real full stroke. A
/// spec's seek table and an imported seek curve are held to it; a curve of years would
/// not be a drive.
pub const MAX_SEEK_MS: f64 = 1000.0;

/// Largest adjustment DiskSim's drives may declare below zero, in ms: a write's settling
/// delay ("Add. write settling delay", either way; negative in several of its drives) and
/// command or completion overheads, which DiskSim adds to others.
pub const MAX_ADJUSTMENT_MS: f64 = 1000.0;

fn ms_ps(ms: f64) -> u64 {
    (ms * 1e9).max(0.0) as u64
}

impl Drive {
    /// A drive with `params`.
    pub fn new(params: DriveParams) -> Self {
        let mut zone_lbn = Vec::with_capacity(params.zones.len());
        let mut lbn = 0;
        for z in &params.zones {
            zone_lbn.push(lbn);
            lbn += z.lbns(params.surfaces);
        }
        let rev_ps = (60e12 / params.rpm.max(1.0)) as u64;
        Self {
            params,
            zone_lbn,
            rev_ps,
            cylinder: 0,
            surface: 0,
            mech_free_ps: 0,
            last_was_write: false,
            queue: VecDeque::new(),
            segments: Vec::new(),
            writing: None,
            due: BinaryHeap::new(),
            seq: 0,
        }
    }

    fn place(&self, lbn: u64) -> Place {
        let zone = match self.zone_lbn.binary_search(&lbn) {
            Ok(i) => i,
            Err(i) => i.saturating_sub(1),
        };
        let z = &self.params.zones[zone];
        let spt = z.sectors_per_track.max(1);
        let surfaces = self.params.surfaces.max(1);
        // The zone's unused front comes before its first LBN, per-range spares and slips
        // between.
        let offset = z.physical(
            lbn - self.zone_lbn[zone],
            surfaces,
            self.params.sparing_scheme,
        );
        let track = offset / spt;
        let (cyl_in_zone, track) = (track / surfaces, track % surfaces);
        // Skew accumulates with every track and cylinder switch since the zone's start.
        let switches = cyl_in_zone * (surfaces - 1) + track;
        let cylinder = z.first_cylinder + cyl_in_zone;
        let surface = self
            .params
            .surface_order
            .surface(track, (cylinder, cyl_in_zone), surfaces);
        let skew = switches * z.track_skew
            + cyl_in_zone * z.cylinder_skew
            + z.slips_pushing_skew(self.params.sparing_scheme, (cyl_in_zone, surface), surfaces);
        let in_track = offset % spt;
        Place {
            cylinder,
            surface,
            track,
            angle: (in_track + skew + z.first_offset) % spt,
            sectors_per_track: spt,
            left_on_track: spt - in_track,
            zone,
        }
    }

    /// Seek time over `distance` cylinders: the measured table, linear between its points.
    pub fn seek_ms(&self, distance: u64) -> f64 {
        if distance == 0 {
            return 0.0;
        }
        let table = &self.params.seek;
        let Some(&(last_d, last_ms)) = table.last() else {
            return self.params.full_seek_ms;
        };
        if distance >= last_d {
            // Past the last measured distance: the full-stroke time bounds it.
            return last_ms.max(self.params.full_seek_ms);
        }
        let i = table.partition_point(|&(d, _)| d <= distance);
        if i == 0 {
            return table[0].1;
        }
        let (d0, t0) = table[i - 1];
        let (d1, t1) = table[i];
        t0 + (t1 - t0) * (distance - d0) as f64 / (d1 - d0).max(1) as f64
    }

    fn overhead_ps(&self, write: bool, hit: bool) -> u64 {
        let o = &self.params.overheads;
        let table = match (write, hit) {
            (false, true) => o.read_hit,
            (false, false) => o.read_miss,
            (true, true) => o.write_hit,
            (true, false) => o.write_miss,
        };
        ms_ps(table[usize::from(self.last_was_write)])
    }

    /// The mechanism positions for `request` starting at `at_ps` and transfers it; returns
    /// when its first sector is under the head and when its last has passed. A write's
    /// data crosses the bus from `data_from_ps`, a sector every `bus_ps`: no sector goes on
    /// the media before it is in the buffer, so where the bus is slower than the media the
    /// write starts late enough that its last sector has arrived when the head reaches it.
    fn access(
        &mut self,
        at_ps: u64,
        request: &DeviceRequest,
        write: bool,
        (data_from_ps, bus_ps, first_from_ps): (u64, u64, u64),
        min_position_ps: u64,
    ) -> Access {
        let place = self.place(request.sector);
        let position = self
            .reposition_ps((self.cylinder, self.surface), place, write)
            .max(min_position_ps);
        let spt = place.sectors_per_track;
        let per_sector = self.rev_ps / spt;
        let sectors = u64::from(request.sectors);
        let media = self.media_ps(request.sector, sectors, per_sector);
        let ready = if write {
            self.write_ready(place, sectors, per_sector, (data_from_ps, bus_ps))
                .max(first_from_ps)
        } else {
            0
        };
        // Positioned, the head waits for the sector to come round once the data is there.
        let arrive = at_ps.saturating_add(position).max(ready);
        // In u128: a slow spindle's revolution times a long track passes u64.
        let target = (u128::from(place.angle) * u128::from(self.rev_ps) / u128::from(spt)) as u64;
        let wait = (target + self.rev_ps - arrive % self.rev_ps) % self.rev_ps;
        // A write goes out of order only once all its data is in the buffer.
        let data_in =
            !write || data_from_ps.saturating_add(bus_ps.saturating_mul(sectors)) <= arrive;
        let zero_latency = data_in
            .then(|| self.zero_latency(write, place, sectors, arrive, target))
            .flatten();
        let (start, end, wait, first_read) = match zero_latency {
            Some(to_boundary) => {
                // From the next sector boundary round to it again: the sectors under the head
                // first, then those before them (DiskSim's `g1_access_block` with `immed`).
                let start = arrive.saturating_add(to_boundary);
                let into = (arrive % self.rev_ps + self.rev_ps - target) % self.rev_ps;
                let first_read = (into + to_boundary) / per_sector.max(1);
                (
                    start,
                    start.saturating_add(self.rev_ps),
                    to_boundary,
                    first_read,
                )
            }
            None => {
                let start = arrive.saturating_add(wait);
                (start, start.saturating_add(media), wait, 0)
            }
        };
        self.head_to(request.end().saturating_sub(1).max(request.sector));
        Access {
            positioned: arrive,
            start,
            end,
            wait,
            first_read,
        }
    }

    /// `request`, a write positioned from `at_ps` with its `data` as [`Self::access`] takes
    /// it, timed through its segment's room where it is longer than the segment
    /// ([`Self::write_through_room`]): positioned for its first segment's worth, which is
    /// what the first transfer brings. None where it is not (the caller times it whole),
    /// or where that first part would be written with zero latency on one track, which
    /// is timed as if the segment held the write.
    fn write_in_room(
        &mut self,
        at_ps: u64,
        request: &DeviceRequest,
        data: (u64, u64, u64),
        min_position_ps: u64,
    ) -> Option<room::WrittenThrough> {
        if !self.writes_through_room(request) {
            return None;
        }
        // Under the request's sectors, as `writes_through_room` checked.
        let first_part = DeviceRequest {
            sectors: u32::try_from(self.params.segment_sectors).unwrap_or(request.sectors),
            ..*request
        };
        let head = (self.cylinder, self.surface);
        let media = self.access(at_ps, &first_part, true, data, min_position_ps);
        if media.first_read != 0 {
            // The caller positions for the whole write from where the head was.
            (self.cylinder, self.surface) = head;
            return None;
        }
        self.head_to(request.end() - 1);
        Some(self.write_through_room(request, &media, (data.0, data.1)))
    }

    /// The seek and head switch from the head's `(cylinder, surface)` to `place`'s track.
    fn reposition_ps(&self, (cylinder, surface): (u64, u64), place: Place, write: bool) -> u64 {
        let distance = place.cylinder.abs_diff(cylinder);
        let mut position = ms_ps(self.seek_ms(distance));
        if place.surface != surface {
            // Changing heads takes the head switch at least, seeking or not (DiskSim's
            // `dm_seek_time_g1`: the longer of the two).
            position = position.max(ms_ps(self.params.head_switch_ms));
        }
        if write && position > 0 {
            // DiskSim's "Add. write settling delay" adjusts a write's positioning either way,
            // where there is one: a seek or a head switch (`dm_seek_time_g1` adds it to a
            // nonzero positioning only); drives of its suite declare it negative.
            // Positioning never goes below zero.
            let settle = self.params.write_settle_ms;
            position = if settle >= 0.0 {
                position.saturating_add(ms_ps(settle))
            } else {
                position.saturating_sub(ms_ps(-settle))
            };
        }
        position
    }

    /// The head is over `lbn`'s track: where the next positioning starts.
    pub(super) fn head_to(&mut self, lbn: u64) {
        let place = self.place(lbn);
        self.cylinder = place.cylinder;
        self.surface = place.surface;
    }

    /// Where zero-latency access applies (the drive declares it for this operation, the
    /// request lies on one track, a write's data is all in the buffer, and the head lands
    /// inside the request): the time to the next sector boundary.
    fn zero_latency(
        &self,
        write: bool,
        place: Place,
        sectors: u64,
        arrive: u64,
        target: u64,
    ) -> Option<u64> {
        let declared = if write {
            self.params.immediate_write
        } else {
            self.params.immediate_read
        };
        if !declared || sectors > place.left_on_track {
            return None;
        }
        // At least 1 ps: a spec may give a fast spindle more sectors than picoseconds.
        let per_sector = (self.rev_ps / place.sectors_per_track).max(1);
        // How far past the request's first sector the head lands.
        let into = (arrive % self.rev_ps + self.rev_ps - target) % self.rev_ps;
        let inside = into > 0 && into < sectors.saturating_mul(per_sector);
        inside.then(|| (per_sector - into % per_sector) % per_sector)
    }

    /// Tracks a transfer of `sectors` from `first` moves on to after its first.
    fn crossings(first: Place, sectors: u64) -> u64 {
        match sectors.checked_sub(first.left_on_track) {
            Some(past) if past > 0 => 1 + (past - 1) / first.sectors_per_track,
            _ => 0,
        }
    }

    /// Sectors of skew the head passes on the way from `first`'s track to the `tracks`th
    /// after it: a track switch costs the track skew, a cylinder switch the cylinder skew
    /// (DiskSim's layout, as `place` lays the sectors out).
    fn skew_before(&self, first: Place, tracks: u64) -> u64 {
        let z = &self.params.zones[first.zone];
        let cylinders = (first.track + tracks) / self.params.surfaces.max(1);
        (tracks - cylinders)
            .saturating_mul(z.track_skew)
            .saturating_add(cylinders.saturating_mul(z.cylinder_skew))
    }

    /// The earliest media start at which no sector of a write overtakes its data: sector `j`
    /// is in the buffer at `data_from + (j + 1) * bus` and under the head `t_j` after the
    /// start. Within a track `t_j` grows a sector at a time, so the binding sectors are the
    /// first, each track's last, and the request's last. Track to track that bound steps
    /// by the same amounts every cylinder, so its largest value lies among the first
    /// cylinder's tracks or the last's.
    fn write_ready(
        &self,
        first: Place,
        sectors: u64,
        per_sector: u64,
        (data_from_ps, bus_ps): (u64, u64),
    ) -> u64 {
        let need = |j: u64, skews: u64| {
            let under_head = j.saturating_add(skews).saturating_mul(per_sector);
            data_from_ps
                .saturating_add(bus_ps.saturating_mul(j + 1))
                .saturating_sub(under_head)
        };
        let crossings = Self::crossings(first, sectors);
        let last = sectors.saturating_sub(1);
        let mut ready = need(0, 0).max(need(last, self.skew_before(first, crossings)));
        let track_end = |i: u64| {
            let j = first.left_on_track - 1 + i * first.sectors_per_track;
            need(j, self.skew_before(first, i))
        };
        for i in self.binding_tracks(crossings) {
            ready = ready.max(track_end(i));
        }
        ready
    }

    /// The tracks, of the `tracks` a transfer runs over (0 its first), whose sectors can
    /// bind a bound that steps by the same amounts every cylinder: all of them, or, over
    /// more than two cylinders, the first cylinder's and the last's (a hostile trace's
    /// request may cross a million tracks).
    fn binding_tracks(&self, tracks: u64) -> impl Iterator<Item = u64> {
        let period = self.params.surfaces.max(1);
        let (head, tail) = if tracks <= 2 * period {
            (0..tracks, tracks..tracks)
        } else {
            (0..period, tracks - period..tracks)
        };
        head.chain(tail)
    }

    /// Reading or writing `sectors` from `lbn` once the first is under the head: media time,
    /// with each track and cylinder boundary costing its skew.
    fn media_ps(&self, lbn: u64, sectors: u64, per_sector: u64) -> u64 {
        let first = self.place(lbn);
        let skews = self.skew_before(first, Self::crossings(first, sectors));
        sectors.saturating_add(skews).saturating_mul(per_sector)
    }

    fn complete_at(&mut self, at_ps: u64, id: u64, status: i32) {
        self.seq += 1;
        self.due
            .push(Reverse((at_ps.div_ceil(PS_PER_NS), self.seq, id, status)));
    }

    /// Serves `request`, taken at `taken.arrived_ps` and acted on from `taken.start_ps`.
    fn serve(&mut self, taken: Taken, request: DeviceRequest) {
        self.seq += 1;
        let write = request.op == Op::Write;
        let start_ps = taken.start_ps;
        if !matches!(request.op, Op::Read | Op::Write) {
            let at = start_ps.max(self.mech_free_ps);
            self.complete_at(at, request.id, 0);
            return;
        }
        let free = start_ps.max(self.mech_free_ps);
        if write {
            // A write appending to the write the buffer is still writing to the media joins
            // its segment (DiskSim's BUFFER_APPEND, with `Combine seq writes`). Data the
            // buffer held for the range is stale from now on.
            let appends = self.appends(start_ps, &request);
            let size = self.params.segment_sectors;
            let overlaps = |s: &Segment| {
                s.end_at(free) > request.sector && s.start_at(free, size) < request.end()
            };
            self.segments.retain(|s| !overlaps(s));
            // DiskSim charges a write the write-hit command overhead whenever fast writes
            // are on and the write-miss one when they are off (`disk_write_arrive`): "hit"
            // there means the buffer takes the write, not that it held the data.
            let overhead = self.overhead_ps(true, self.params.write_back);
            let accepted = taken.overhead_done(overhead);
            let data_from = self.write_data_from(taken, overhead);
            let received = data_from.saturating_add(self.write_bus_ps(request.sectors));
            let stop = self.stop_streaming(free);
            // The mechanism positions while the data crosses the bus.
            let mech_start = stop
                .after_minimum
                .max(accepted)
                .saturating_add(stop.settling);
            let (min_position, first_from) = if appends {
                (0, 0)
            } else {
                (
                    ms_ps(self.params.min_write_seek_ms),
                    data_from.saturating_add(self.write_bus_ps(self.write_gate(request.sectors))),
                )
            };
            let data = (data_from, self.write_bus_ps(1), first_from);
            // A write longer than its segment, not joining the one in the buffer, is timed
            // through the segment's room.
            let through = if appends {
                None
            } else {
                self.write_in_room(mech_start, &request, data, min_position)
            };
            let (media_end, received) = match through {
                Some(t) => (t.media_end, t.received),
                None => (
                    self.access(mech_start, &request, true, data, min_position)
                        .end,
                    received,
                ),
            };
            self.mech_free_ps = media_end;
            let segment_start = match self.writing {
                Some(w) if appends => w.start,
                _ => request.sector,
            };
            self.writing = Some(Writing {
                start: segment_start,
                end: request.end(),
                until_ps: media_end,
            });
            // Write-back reports once the data is in the buffer; otherwise once on the media,
            // taking the bus again, given up after the data (DiskSim's write with no fast
            // writes asks to disconnect once its data is in, `disk_buffer_transfer_size`).
            let stored = if self.params.write_back {
                received
            } else {
                let o = &self.params.overheads;
                media_end
                    .max(received.saturating_add(ms_ps(o.disconnect[2])))
                    .saturating_add(ms_ps(o.reselect))
            };
            let done = stored.saturating_add(ms_ps(self.params.overheads.completion[1]));
            if self.params.read_hits_on_writes {
                // The written data stays in the buffer, where later commands hit it.
                self.add_segment(Segment {
                    start: request.sector,
                    end: request.end(),
                    since_ps: done,
                    per_sector_ps: 1,
                    stream_to: request.end(),
                    seeking_until_ps: 0,
                    min_to: request.end(),
                    streaming: false,
                    used: self.seq,
                    written: true,
                    boundaries: Boundaries::NONE,
                });
            }
            self.last_was_write = true;
            self.complete_at(done, request.id, 0);
            return;
        }
        if let Some((i, ready)) = self.lookup(start_ps, request.sector, request.end()) {
            // A hit that waited for the mechanism was taken as DiskSim takes any read it
            // cannot serve at once: with the miss overhead, disconnecting (`disk_read_arrive`).
            let disconnected = taken.waited() && !self.params.never_disconnect;
            let overhead = self.overhead_ps(false, !disconnected);
            let taken_done = if disconnected {
                let o = &self.params.overheads;
                let disconnect = ms_ps(o.disconnect[usize::from(self.last_was_write)]);
                taken
                    .overhead_done(overhead.saturating_add(disconnect))
                    .saturating_add(ms_ps(o.reselect))
            } else {
                taken.overhead_done(overhead)
            };
            let data_from = taken_done.saturating_add(ms_ps(self.params.overheads.data_prep));
            self.segments[i].used = self.seq;
            // Sectors the read-ahead is still bringing in go over the bus as they arrive,
            // the first once it is read and the last after it (as a miss's, `read_sent`).
            let s = self.segments[i];
            let first_ready = if request.sector < s.end_at(start_ps) {
                start_ps
            } else {
                let ahead = (request.sector + 1).saturating_sub(s.end);
                s.since_ps
                    .saturating_add(ahead.saturating_mul(s.per_sector_ps))
            };
            let sent = data_from
                .max(first_ready)
                .saturating_add(self.bus_ps(request.sectors));
            let sent = sent.max(ready.saturating_add(self.bus_ps(1)));
            // A hit takes the segment over, and its read-ahead aims past the hit as far as
            // past a miss (DiskSim's `disk_buffer_attempt_seg_ownership` raises the
            // segment's `maxreadaheadblkno` for every read it serves); an idle segment
            // reads on only where the drive declares it.
            let read = (request.sector, request.end());
            if !self.read_ahead_past(i, start_ps, read) && self.params.read_ahead_on_hit {
                self.resume_read_ahead(i, taken_done, read);
            }
            let done = sent.saturating_add(ms_ps(self.params.overheads.completion[0]));
            if self.params.drop_returned_data {
                let s = &mut self.segments[i];
                s.start = s.start.max(request.end());
            }
            self.last_was_write = false;
            self.complete_at(done, request.id, 0);
            return;
        }
        let miss_overhead = self.overhead_ps(false, false);
        let taken_done = taken.overhead_done(miss_overhead);
        let stop = self.stop_streaming(free);
        // A read that starts in a segment and runs past what it holds reads only the rest
        // from the media (DiskSim's partial hit, `BUFFER_PARTIAL`).
        let from_media = match self.held_from(request.sector, request.end()) {
            Some(held) => DeviceRequest {
                sector: held,
                sectors: u32::try_from(request.end() - held).unwrap_or(request.sectors),
                ..request
            },
            None => request,
        };
        let positioning_from = taken_done
            .max(free)
            .max(stop.after_minimum)
            .saturating_add(stop.settling);
        let media = self.access(positioning_from, &from_media, false, (0, 0, 0), 0);
        let (media_end, waited) = (media.end, media.wait);
        let bus = self.bus_ps(request.sectors);
        let held_sectors = from_media.sector - request.sector;
        let ready_at_once =
            self.params.never_disconnect || (self.params.immediate_partial_hit && held_sectors > 0);
        let data_from = if ready_at_once {
            taken_done.saturating_add(ms_ps(self.params.overheads.data_prep))
        } else {
            self.read_reconnects(taken, miss_overhead, (&from_media, &media), held_sectors)
        };
        // A read longer than its segment waits for room, the head for the bus (`room.rs`).
        let through = (held_sectors == 0 && self.reads_through_room(&from_media, &media))
            .then(|| self.read_through_room(&from_media, &media, data_from));
        let media_end = through.map_or(media_end, |t| t.media_end);
        let sent = if let Some(t) = through {
            t.sent
        } else if self.params.immediate_partial_hit && held_sectors > 0 {
            // The held sectors go as soon as the command is taken, the rest as the media
            // delivers them: after the last, or while they stream.
            let held = self.bus_ps(u32::try_from(held_sectors).unwrap_or(0));
            let held_sent = data_from.saturating_add(held);
            if self.params.transfer_after_media {
                held_sent
                    .max(media_end)
                    .saturating_add(self.bus_ps(from_media.sectors))
            } else {
                media_end.max(data_from.saturating_add(bus))
            }
        } else if self.params.transfer_after_media {
            media_end.max(data_from).saturating_add(bus)
        } else {
            self.read_sent(&from_media, &media)
                .max(data_from.saturating_add(bus))
        };
        let done = sent.saturating_add(ms_ps(self.params.overheads.completion[0]));
        let place = self.place(request.end().saturating_sub(1));
        // At least 1 ps: a spec may give a fast spindle more sectors than picoseconds.
        let per_sector = (self.rev_ps / place.sectors_per_track).max(1);
        // Read-ahead goes on from the sector after the read's last, paying each track
        // boundary's skew; behind a read through its room, the bus paces it instead.
        let (ahead_since, ahead_per_sector, boundaries) = through.map_or(
            (
                media_end,
                per_sector,
                self.boundaries(place, place.left_on_track - 1),
            ),
            |t| (t.ahead_since, t.ahead_per_sector.max(1), Boundaries::NONE),
        );
        let first = request
            .sector
            .min(from_media.sector - self.free_blocks_before(from_media.sector, waited));
        let stream_to = self.read_ahead_to(first, request.sector, request.end());
        // Only the read-ahead stays once the read completes, where the drive drops the data
        // it returned; no other command comes before that completion (the drive queues one).
        let kept_from = if self.params.drop_returned_data {
            request.end()
        } else {
            first
        };
        self.add_segment(Segment {
            start: kept_from,
            end: request.end(),
            since_ps: ahead_since,
            per_sector_ps: ahead_per_sector,
            stream_to,
            seeking_until_ps: 0,
            min_to: self.min_read_ahead_to(request.end()),
            streaming: stream_to > request.end(),
            used: self.seq,
            written: false,
            boundaries,
        });
        // Read-ahead never holds the mechanism: the next command stops it.
        self.mech_free_ps = media_end;
        self.last_was_write = false;
        self.complete_at(done, request.id, 0);
    }

    fn advance(&mut self, now_ps: u64) {
        while let Some(&(arrived, request)) = self.queue.front() {
            // A write that appends to the one still going to the media joins it at once;
            // any other command waits for the mechanism.
            let appends = request.op == Op::Write && self.appends(arrived, &request);
            if self.mech_free_ps > now_ps && !appends {
                return;
            }
            self.queue.pop_front();
            // The command starts when it arrived or when the mechanism came free.
            let start = if appends {
                arrived
            } else {
                arrived.max(self.mech_free_ps)
            };
            self.serve(
                Taken {
                    arrived_ps: arrived,
                    start_ps: start,
                },
                request,
            );
        }
    }
}

impl DeviceModel for Drive {
    fn geometry(&self) -> Geometry {
        Geometry {
            capacity_sectors: self.params.capacity_sectors,
            hw_queues: 1,
            queue_depth: 1,
            max_sectors: 2048,
            rotational: true,
        }
    }

    fn submit(&mut self, now_ns: u64, request: DeviceRequest) {
        let now_ps = now_ns.saturating_mul(PS_PER_NS);
        if !in_range(&request, self.params.capacity_sectors) {
            self.complete_at(now_ps, request.id, EIO);
            return;
        }
        self.queue.push_back((now_ps, request));
        self.advance(now_ps);
    }

    fn next_event(&self) -> Option<u64> {
        let due = self.due.peek().map(|Reverse((at, ..))| *at);
        let waiting = (!self.queue.is_empty()).then(|| self.mech_free_ps.div_ceil(PS_PER_NS));
        match (due, waiting) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn poll(&mut self, now_ns: u64) -> Option<(u64, i32)> {
        self.advance(now_ns.saturating_mul(PS_PER_NS));
        match self.due.peek() {
            Some(Reverse((at, ..))) if *at <= now_ns => {
                let Reverse((_, _, id, status)) = self.due.pop()?;
                Some((id, status))
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests;
