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

pub mod disksim;
mod layout;

pub use layout::{DriveZone, MAX_SLIPS, SurfaceOrder};

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use schedhost_sdk::Op;

use super::{DeviceModel, DeviceRequest, EIO, Geometry, in_range};

/// Controller overheads in ms, by what the command is and what the previous one was.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Overheads {
    /// A read served from the buffer, after a read and after a write.
    pub read_hit: [f64; 2],
    /// A read that goes to the media.
    pub read_miss: [f64; 2],
    /// A write over data the buffer holds.
    pub write_hit: [f64; 2],
    /// A write that waits for the media.
    pub write_miss: [f64; 2],
    /// After the data of a read, and of a write, before the completion is reported.
    pub completion: [f64; 2],
}

/// Where a read's read-ahead stops, besides the segment's end (DiskSim's `Buffer continuous
/// read`, `disk_buffer_get_max_readahead` and the background reads of
/// `disk_initiate_seek`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ContinuousRead {
    /// No read-ahead (0).
    None,
    /// The maximum read-ahead, but not past the last sector's track: a head switch ends it
    /// (1).
    TrackEnd,
    /// The maximum read-ahead, but not past the last sector's cylinder: a seek ends it
    /// (2).
    CylinderEnd,
    /// The maximum read-ahead (3).
    #[default]
    SegmentEnd,
}

impl ContinuousRead {
    /// DiskSim's number for it.
    pub fn scheme(self) -> u8 {
        match self {
            Self::None => 0,
            Self::TrackEnd => 1,
            Self::CylinderEnd => 2,
            Self::SegmentEnd => 3,
        }
    }

    /// The mode DiskSim numbers `n`, if one.
    pub fn from_scheme(n: u64) -> Option<Self> {
        Some(match n {
            0 => Self::None,
            1 => Self::TrackEnd,
            2 => Self::CylinderEnd,
            3 => Self::SegmentEnd,
            _ => return Option::None,
        })
    }
}

/// Parameters of a DiskSim-described drive.
#[derive(Debug, Clone, PartialEq)]
pub struct DriveParams {
    /// Spindle speed.
    pub rpm: f64,
    /// Recording surfaces (heads).
    pub surfaces: u64,
    /// Which surface holds each track of a cylinder. Skews follow the tracks' order, not
    /// the surfaces' (DiskSim's `disk_map_pbn_skew`), so this moves only which head a
    /// sector is under.
    pub surface_order: SurfaceOrder,
    /// Where the zones' spares lie, and so how slips and remaps move LBNs: DiskSim's
    /// `Sparing scheme used` (0 none, 1 whole tracks, 2–6 sectors per cylinder, 3 per
    /// track, 7 at the end, 8 per range, 9 and 10 per zone).
    pub sparing_scheme: u8,
    /// Zones, outer to inner.
    pub zones: Vec<DriveZone>,
    /// Measured seek times: (distance in cylinders, ms), ascending.
    pub seek: Vec<(u64, f64)>,
    /// Seek across the whole disk, for distances past the table.
    pub full_seek_ms: f64,
    /// Switching to another surface in the same cylinder.
    pub head_switch_ms: f64,
    /// Extra settling before a write.
    pub write_settle_ms: f64,
    /// Bus time per sector between the drive's buffer and the host.
    pub bus_sector_ms: f64,
    /// Controller overheads.
    pub overheads: Overheads,
    /// Buffer segments.
    pub cache_segments: u32,
    /// Sectors per segment.
    pub segment_sectors: u64,
    /// How far a read is followed by read-ahead, in sectors past its end.
    pub max_read_ahead_sectors: u64,
    /// Where read-ahead stops (DiskSim's `Buffer continuous read`).
    pub continuous_read: ContinuousRead,
    /// The buffer holds data for later commands to hit (DiskSim's `Enable caching in
    /// buffer`); without it every command goes to the media, and nothing is read ahead.
    pub buffer_cache: bool,
    /// A read miss also keeps the sectors before it on its track that pass under the head
    /// while it waits for its first (DiskSim's `Read any free blocks`).
    pub read_free_blocks: bool,
    /// Read-ahead may replace the data the read returned in its segment, so it runs a whole
    /// segment past the read's end, not past its start (DiskSim's `Read-ahead over
    /// requested`).
    pub read_ahead_over_requested: bool,
    /// A command stops read-ahead at once, mid-sector; otherwise the sector under the head
    /// is read first (DiskSim's `Stop prefetch in sector`).
    pub stop_prefetch_in_sector: bool,
    /// Writes complete once buffered and pay the write-hit command overhead (DiskSim's
    /// `Fast write level` > 0); otherwise they complete on the media and pay the miss one.
    pub write_back: bool,
    /// Written data stays in the buffer for later reads and writes to hit (DiskSim's
    /// `Allow read hits on write data`).
    pub read_hits_on_writes: bool,
    /// A read that hits a segment still reading ahead keeps it reading ahead, past the hit
    /// by the read-ahead amount (DiskSim's `Read-ahead on idle hit`); otherwise the segment
    /// stops where its read-ahead was first aimed.
    pub read_ahead_on_hit: bool,
    /// A write that starts where the write still being written to the media ended joins it
    /// at once (DiskSim's `Combine seq writes`); without it, it waits for the mechanism.
    pub combine_seq_writes: bool,
    /// Writes keep their data in one segment of their own, which reads do not evict (DiskSim's
    /// `Use separate write segment`).
    pub separate_write_segment: bool,
    /// A read's data crosses the bus only once all of it is in the buffer (DiskSim's
    /// `Set watermark by reqsize` or `Hold bus entire read xfer`), not while it streams.
    pub transfer_after_media: bool,
    /// Addressable sectors.
    pub capacity_sectors: u64,
}

impl Default for DriveParams {
    /// A small generic drive, so a spec file may start from `model = drive`.
    fn default() -> Self {
        Self {
            rpm: 7200.0,
            surfaces: 4,
            surface_order: SurfaceOrder::Normal,
            sparing_scheme: 9,
            zones: vec![DriveZone {
                first_cylinder: 0,
                last_cylinder: 9999,
                sectors_per_track: 400,
                track_skew: 40,
                cylinder_skew: 60,
                spares: 0,
                first_offset: 0,
                front_gap: 0,
                range_cylinders: 0,
                slips: Vec::new(),
                remaps: Vec::new(),
            }],
            seek: vec![(1, 1.0), (3333, 8.5), (10_000, 16.0)],
            full_seek_ms: 16.0,
            head_switch_ms: 0.8,
            write_settle_ms: 0.0,
            bus_sector_ms: 0.005,
            overheads: Overheads::default(),
            cache_segments: 4,
            segment_sectors: 512,
            max_read_ahead_sectors: 512,
            continuous_read: ContinuousRead::SegmentEnd,
            buffer_cache: true,
            read_free_blocks: false,
            read_ahead_over_requested: false,
            stop_prefetch_in_sector: true,
            write_back: true,
            transfer_after_media: false,
            read_hits_on_writes: true,
            read_ahead_on_hit: false,
            combine_seq_writes: true,
            separate_write_segment: false,
            capacity_sectors: 16_000_000,
        }
    }
}

impl DriveParams {
    /// Sectors the zones hold, spares taken out.
    pub fn zoned_sectors(&self) -> u64 {
        self.zones.iter().map(|z| z.lbns(self.surfaces)).sum()
    }
}

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

/// The write segment being written to the media: where it starts and ends, and until when.
#[derive(Debug, Clone, Copy)]
struct Writing {
    start: u64,
    end: u64,
    until_ps: u64,
}

/// A buffer segment: sectors `[start, end)` held, and the read-ahead still streaming into it.
#[derive(Debug, Clone, Copy)]
struct Segment {
    start: u64,
    /// Held at `since_ps`.
    end: u64,
    /// While streaming: when `end` was reached, ps per sector, and where it stops.
    since_ps: u64,
    per_sector_ps: u64,
    stream_to: u64,
    streaming: bool,
    used: u64,
    /// It holds a write's data.
    written: bool,
}

impl Segment {
    /// The end of what the segment holds at `at_ps`.
    fn end_at(&self, at_ps: u64) -> u64 {
        if !self.streaming || at_ps <= self.since_ps {
            return self.end;
        }
        let read = (at_ps - self.since_ps) / self.per_sector_ps.max(1);
        self.end.saturating_add(read).min(self.stream_to)
    }
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
        let skew = switches * z.track_skew + cyl_in_zone * z.cylinder_skew;
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

    fn bus_ps(&self, sectors: u32) -> u64 {
        ms_ps(self.params.bus_sector_ms * f64::from(sectors))
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
        (data_from_ps, bus_ps): (u64, u64),
    ) -> (u64, u64, u64) {
        let place = self.place(request.sector);
        let distance = place.cylinder.abs_diff(self.cylinder);
        let mut position = ms_ps(self.seek_ms(distance));
        if distance == 0 && place.surface != self.surface {
            position = ms_ps(self.params.head_switch_ms);
        }
        if write {
            // DiskSim's "Add. write settling delay" adjusts a write's positioning either way;
            // drives of its suite declare it negative. Positioning never goes below zero.
            let settle = self.params.write_settle_ms;
            position = if settle >= 0.0 {
                position + ms_ps(settle)
            } else {
                position.saturating_sub(ms_ps(-settle))
            };
        }
        let spt = place.sectors_per_track;
        let per_sector = self.rev_ps / spt;
        let sectors = u64::from(request.sectors);
        let media = self.media_ps(request.sector, sectors, per_sector);
        let ready = if write {
            self.write_ready(place, sectors, per_sector, (data_from_ps, bus_ps))
        } else {
            0
        };
        // Positioned, the head waits for the sector to come round once the data is there.
        let arrive = (at_ps + position).max(ready);
        // In u128: a slow spindle's revolution times a long track passes u64.
        let target = (u128::from(place.angle) * u128::from(self.rev_ps) / u128::from(spt)) as u64;
        let wait = (target + self.rev_ps - arrive % self.rev_ps) % self.rev_ps;
        let start = arrive + wait;
        let end = start.saturating_add(media);
        let last = self.place(request.end().saturating_sub(1).max(request.sector));
        self.cylinder = last.cylinder;
        self.surface = last.surface;
        (start, end, wait)
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
        let period = self.params.surfaces.max(1);
        if crossings <= 2 * period {
            (0..crossings).for_each(|i| ready = ready.max(track_end(i)));
        } else {
            (0..period)
                .chain(crossings - period..crossings)
                .for_each(|i| ready = ready.max(track_end(i)));
        }
        ready
    }

    /// Reading or writing `sectors` from `lbn` once the first is under the head: media time,
    /// with each track and cylinder boundary costing its skew.
    fn media_ps(&self, lbn: u64, sectors: u64, per_sector: u64) -> u64 {
        let first = self.place(lbn);
        let skews = self.skew_before(first, Self::crossings(first, sectors));
        sectors.saturating_add(skews).saturating_mul(per_sector)
    }

    /// The segment holding `[sector, end)` by `at_ps`, or streaming towards it, and when the
    /// last sector is (or will be) there.
    fn lookup(&self, at_ps: u64, sector: u64, end: u64) -> Option<(usize, u64)> {
        if !self.params.buffer_cache {
            return None;
        }
        self.segments.iter().enumerate().find_map(|(i, s)| {
            if s.start > sector {
                return None;
            }
            if s.end_at(at_ps) >= end {
                return Some((i, at_ps));
            }
            (s.streaming && end <= s.stream_to && sector < s.end_at(at_ps) + 1).then(|| {
                let streamed = (end - s.end).saturating_mul(s.per_sector_ps);
                (i, s.since_ps.saturating_add(streamed))
            })
        })
    }

    /// Where the data a segment holds of `sector..end` ends, when a segment holds its start
    /// but not its end (no segment is reading ahead: called once they are stopped).
    fn held_from(&self, sector: u64, end: u64) -> Option<u64> {
        if !self.params.buffer_cache {
            return None;
        }
        self.segments
            .iter()
            .filter(|s| s.start <= sector && sector < s.end && s.end < end)
            .map(|s| s.end)
            .max()
    }

    /// True iff `request`, arriving at `at_ps`, appends to the write segment the mechanism
    /// is still writing: it starts where the last write ended, and the segment has room.
    fn appends(&self, at_ps: u64, request: &DeviceRequest) -> bool {
        self.params.combine_seq_writes
            && self.writing.is_some_and(|w| {
                request.sector == w.end
                    && at_ps < w.until_ps
                    && request.end() - w.start <= self.params.segment_sectors
            })
    }

    /// Segment `i`, if it is still reading ahead, reads on to the read-ahead amount past
    /// `end`, but no further than the segment holds from its start (DiskSim's continuous
    /// read to the segment's end).
    fn read_ahead_past(&mut self, i: usize, end: u64) {
        if !self.segments[i].streaming {
            return;
        }
        let target = self.read_ahead_to(self.segments[i].start, end);
        let s = &mut self.segments[i];
        s.stream_to = s.stream_to.max(target);
    }

    /// Sectors before `sector` on its track that passed wholly under the head in the
    /// `waited` ps before it came round, kept under [`DriveParams::read_free_blocks`].
    fn free_blocks_before(&self, sector: u64, waited: u64) -> u64 {
        if !self.params.read_free_blocks {
            return 0;
        }
        let place = self.place(sector);
        let per_sector = (self.rev_ps / place.sectors_per_track).max(1);
        let on_track_before = place.sectors_per_track - place.left_on_track;
        (waited / per_sector).min(on_track_before).min(sector)
    }

    /// Where read-ahead after a read ending at `end`, into a segment from `start`, stops:
    /// by [`DriveParams::continuous_read`], within the segment and the disk.
    fn read_ahead_to(&self, start: u64, end: u64) -> u64 {
        let p = &self.params;
        let most = end.saturating_add(p.max_read_ahead_sectors);
        let to = match p.continuous_read {
            ContinuousRead::None => end,
            ContinuousRead::SegmentEnd => most,
            ContinuousRead::TrackEnd | ContinuousRead::CylinderEnd => {
                let last = self.place(end.saturating_sub(1));
                let mut left = last.left_on_track;
                if p.continuous_read == ContinuousRead::CylinderEnd {
                    let tracks = p.surfaces.max(1) - 1 - last.track;
                    left += tracks * last.sectors_per_track;
                }
                most.min(end.saturating_sub(1).saturating_add(left))
            }
        };
        // The segment holds `segment_sectors` from its start, or, where read-ahead may
        // replace the data returned, from the read's end.
        let from = if p.read_ahead_over_requested {
            end
        } else {
            start
        };
        let segment = from.saturating_add(p.segment_sectors.max(1));
        to.min(segment).min(p.capacity_sectors).max(end)
    }

    /// Stops every read-ahead at `at_ps`; returns when the mechanism is free: at once, or,
    /// without [`DriveParams::stop_prefetch_in_sector`], once the sector under the head has
    /// been read.
    fn stop_streaming(&mut self, at_ps: u64) -> u64 {
        let in_sector = self.params.stop_prefetch_in_sector;
        let mut free = at_ps;
        for s in &mut self.segments {
            if !s.streaming {
                continue;
            }
            s.end = s.end_at(at_ps);
            s.streaming = false;
            let per = s.per_sector_ps.max(1);
            let into = at_ps.saturating_sub(s.since_ps);
            if !in_sector && at_ps > s.since_ps && s.end < s.stream_to && into % per != 0 {
                s.end += 1;
                free = free.max(s.since_ps + (into / per + 1) * per);
            }
        }
        free
    }

    /// Keeps `segment`, in place of the least recently used one when the buffer is full. With
    /// a separate write segment (DiskSim's `Use separate write segment`), writes have one
    /// segment of their own, which the next write replaces, and reads the others.
    fn add_segment(&mut self, segment: Segment) {
        if !self.params.buffer_cache {
            return;
        }
        let all = self.params.cache_segments.max(1) as usize;
        let (limit, kind) = if self.params.separate_write_segment && all > 1 {
            if segment.written {
                (1, Some(true))
            } else {
                (all - 1, Some(false))
            }
        } else {
            (all, None)
        };
        let same_kind = |s: &Segment| kind.is_none_or(|written| s.written == written);
        if self.segments.iter().filter(|s| same_kind(s)).count() >= limit
            && let Some(lru) = (0..self.segments.len())
                .filter(|&i| same_kind(&self.segments[i]))
                .min_by_key(|&i| self.segments[i].used)
        {
            self.segments.swap_remove(lru);
        }
        self.segments.push(segment);
    }

    fn complete_at(&mut self, at_ps: u64, id: u64, status: i32) {
        self.seq += 1;
        self.due
            .push(Reverse((at_ps.div_ceil(PS_PER_NS), self.seq, id, status)));
    }

    fn serve(&mut self, arrived_ps: u64, request: DeviceRequest) {
        self.seq += 1;
        let write = request.op == Op::Write;
        if !matches!(request.op, Op::Read | Op::Write) {
            let at = arrived_ps.max(self.mech_free_ps);
            self.complete_at(at, request.id, 0);
            return;
        }
        let free = arrived_ps.max(self.mech_free_ps);
        if write {
            // A write appending to the write the buffer is still writing to the media joins
            // its segment (DiskSim's BUFFER_APPEND, with `Combine seq writes`). Data the
            // buffer held for the range is stale from now on.
            let appends = self.appends(arrived_ps, &request);
            let overlaps = |s: &Segment| s.end_at(free) > request.sector && s.start < request.end();
            self.segments.retain(|s| !overlaps(s));
            // DiskSim charges a write the write-hit command overhead whenever fast writes
            // are on and the write-miss one when they are off (`disk_write_arrive`): "hit"
            // there means the buffer takes the write, not that it held the data.
            let accepted = arrived_ps + self.overhead_ps(true, self.params.write_back);
            let received = accepted + self.bus_ps(request.sectors);
            let stopped = self.stop_streaming(free);
            // The mechanism positions while the data crosses the bus.
            let mech_start = stopped.max(accepted);
            let data = (accepted, self.bus_ps(1));
            let (_, media_end, _) = self.access(mech_start, &request, true, data);
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
            // Write-back reports once the data is in the buffer; otherwise once on the media.
            let stored = if self.params.write_back {
                received
            } else {
                media_end.max(received)
            };
            let done = stored + ms_ps(self.params.overheads.completion[1]);
            if self.params.read_hits_on_writes {
                // The written data stays in the buffer, where later commands hit it.
                self.add_segment(Segment {
                    start: request.sector,
                    end: request.end(),
                    since_ps: done,
                    per_sector_ps: 1,
                    stream_to: request.end(),
                    streaming: false,
                    used: self.seq,
                    written: true,
                });
            }
            self.last_was_write = true;
            self.complete_at(done, request.id, 0);
            return;
        }
        if let Some((i, ready)) = self.lookup(arrived_ps, request.sector, request.end()) {
            let overhead = self.overhead_ps(false, true);
            self.segments[i].used = self.seq;
            if self.params.read_ahead_on_hit {
                self.read_ahead_past(i, request.end());
            }
            let done = (arrived_ps + overhead).max(ready)
                + self.bus_ps(request.sectors)
                + ms_ps(self.params.overheads.completion[0]);
            self.last_was_write = false;
            self.complete_at(done, request.id, 0);
            return;
        }
        let overhead = self.overhead_ps(false, false);
        let stopped = self.stop_streaming(free);
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
        let (start, media_end, waited) =
            self.access((free + overhead).max(stopped), &from_media, false, (0, 0));
        let bus = self.bus_ps(request.sectors);
        let done = if self.params.transfer_after_media {
            media_end + bus
        } else {
            media_end.max(start + bus)
        } + ms_ps(self.params.overheads.completion[0]);
        let place = self.place(request.end().saturating_sub(1));
        let per_sector = self.rev_ps / place.sectors_per_track;
        let first = request
            .sector
            .min(from_media.sector - self.free_blocks_before(from_media.sector, waited));
        let stream_to = self.read_ahead_to(first, request.end());
        self.add_segment(Segment {
            start: first,
            end: request.end(),
            since_ps: media_end,
            per_sector_ps: per_sector,
            stream_to,
            streaming: stream_to > request.end(),
            used: self.seq,
            written: false,
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
            self.serve(start, request);
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
mod tests {
    use super::*;

    #[test]
    fn a_read_starting_in_a_segment_and_running_past_it_is_a_partial_hit_from_the_segments_end() {
        let mut drive = Drive::new(DriveParams::default());
        drive.segments.push(Segment {
            start: 0,
            end: 8,
            since_ps: 0,
            per_sector_ps: 1,
            stream_to: 8,
            streaming: false,
            used: 0,
            written: false,
        });
        assert_eq!(
            drive.held_from(4, 12),
            Some(8),
            "4..8 held, 8..12 from the media"
        );
        assert_eq!(
            drive.held_from(8, 12),
            None,
            "starts where the segment ends"
        );
        assert_eq!(
            drive.held_from(2, 6),
            None,
            "wholly held: a hit, not a partial one"
        );
        drive.params.buffer_cache = false;
        assert_eq!(drive.held_from(4, 12), None, "no buffer, no hits");
    }

    #[test]
    fn alternate_surface_orders_reverse_the_heads_of_odd_cylinders_and_keep_every_angle() {
        let normal = Drive::new(DriveParams::default());
        let spt = 400;
        let cylinder = 4 * spt; // sectors per cylinder of the default drive
        for order in [SurfaceOrder::AlternateInZone, SurfaceOrder::Alternate] {
            let alternate = Drive::new(DriveParams {
                surface_order: order,
                ..DriveParams::default()
            });
            for lbn in [
                0,
                spt,
                3 * spt + 7,
                cylinder,
                cylinder + 3 * spt,
                2 * cylinder + spt,
            ] {
                let (a, n) = (alternate.place(lbn), normal.place(lbn));
                assert_eq!(
                    (a.cylinder, a.track, a.angle),
                    (n.cylinder, n.track, n.angle)
                );
                let want = if a.cylinder % 2 == 1 {
                    3 - n.track
                } else {
                    n.track
                };
                assert_eq!(a.surface, want, "{order:?}, lbn {lbn}");
            }
        }
        // Counted from the zone's first cylinder, or from the disk's.
        let zones = |first| DriveZone {
            first_cylinder: first,
            last_cylinder: first + 9,
            ..DriveParams::default().zones[0].clone()
        };
        let params = |order| DriveParams {
            surface_order: order,
            zones: vec![zones(0), zones(11)],
            capacity_sectors: 2 * 10 * cylinder,
            ..DriveParams::default()
        };
        let first_of_second_zone = 10 * cylinder;
        let in_zone = Drive::new(params(SurfaceOrder::AlternateInZone)).place(first_of_second_zone);
        let on_disk = Drive::new(params(SurfaceOrder::Alternate)).place(first_of_second_zone);
        assert_eq!((in_zone.cylinder, in_zone.surface), (11, 0));
        assert_eq!((on_disk.cylinder, on_disk.surface), (11, 3));
    }
}
