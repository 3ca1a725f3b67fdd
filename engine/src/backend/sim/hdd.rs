//! `hdd`: a 7200 rpm SATA disk with zoned recording, a seek curve, rotational position, NCQ
//! and an on-drive read-ahead cache.
//!
//! - Seek over d cylinders: `t_track + α(d−1) + β√(d−1)` (the form of Seagate cortx-motr
//!   `desim/chs.c`), with α and β solved so the curve passes through the track-to-track,
//!   average (at d = C/3, the mean distance of random seeks) and full-stroke times.
//! - Rotation is tracked as an angle in virtual time, so waiting for a sector is exact, not a
//!   random half-revolution.
//! - Reads that miss the cache read at least the minimum read-ahead (281 sectors, DiskSim's
//!   barracuda) before the mechanism takes the next command, and keep prefetching while the
//!   drive has nothing else to do, until the segment holds a segment's worth past what the
//!   host has read. Reads that hit are served by the interface while the mechanism works
//!   elsewhere. Without this cache no sequential-read figure in the seed tables can be
//!   reproduced: a purely seek-bound disk gives ~100 IOPS.
//! - The buffer is 32 MiB in 16 segments of 2 MiB: the cache of a 1 TB 7200 rpm SATA drive
//!   of the capacity and transfer rates modelled here (Seagate Barracuda 7200.12, 2009:
//!   32 MB). DiskSim's barracuda is a 1997 drive with a 512 KiB buffer; only its read-ahead
//!   policy is kept.
//! - With NCQ deeper than 1 the drive picks the queued command with the shortest positioning
//!   time (SPTF); at depth 1 it serves in arrival order. SPTF alone starves a far command
//!   while near ones keep coming (a streaming writer against a reader). `max_command_age_ms`
//!   bounds that: a command waiting that long goes next, oldest first. Drive firmware does not
//!   publish such a bound, so it is off by default.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use schedhost_sdk::Op;

use super::{DeviceModel, DeviceRequest, EIO, Geometry, in_range};

/// Parameters of the disk model.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HddParams {
    /// Spindle speed (7200 rpm: 8.33 ms per revolution).
    pub rpm: u32,
    /// Capacity (1 TB: 1 953 525 168 sectors).
    pub capacity_sectors: u64,
    /// Recording surfaces (4: two platters).
    pub heads: u32,
    /// Recording zones, outer to inner (16).
    pub zones: u32,
    /// Media rate in the outermost zone (111 MB/s, DESIGN.md's zoned transfer range).
    pub outer_mb_per_s: u32,
    /// Media rate in the innermost zone (75 MB/s).
    pub inner_mb_per_s: u32,
    /// Seek to the adjacent cylinder (0.8 ms).
    pub track_to_track_ms: f64,
    /// Average seek (8.5 ms).
    pub avg_seek_ms: f64,
    /// Seek across the whole disk (16 ms).
    pub full_stroke_ms: f64,
    /// Commands the drive queues and reorders (NCQ depth; 31 for SATA, 1 without NCQ).
    pub ncq_depth: u32,
    /// With NCQ, a command waiting this long is served next, oldest first (0: no aging).
    pub max_command_age_ms: u64,
    /// Read-ahead cache segments (16).
    pub cache_segments: u32,
    /// Sectors per segment: how far prefetch runs past what the host has read (4096 = 2 MiB).
    pub segment_sectors: u32,
    /// Read-ahead after a miss before the mechanism may take a waiting command (281: DiskSim
    /// barracuda).
    pub min_read_ahead_sectors: u32,
    /// Command processing per request, in µs (40: SATA command turnaround; with the
    /// interface time it puts a cache hit at ~54 µs, the 1-reader rate of the seed table).
    pub overhead_us: u64,
    /// Interface rate for cache hits (300 MB/s: SATA 3 Gb/s).
    pub interface_mb_per_s: u32,
    /// Largest request (2560 sectors = 1280 KiB).
    pub max_sectors: u32,
    /// The queue's `rotational` attribute it reports (default 1); see the ssd's.
    pub rotational: bool,
}

impl Default for HddParams {
    fn default() -> Self {
        Self {
            rpm: 7200,
            capacity_sectors: 1_953_525_168,
            heads: 4,
            zones: 16,
            outer_mb_per_s: 111,
            inner_mb_per_s: 75,
            track_to_track_ms: 0.8,
            avg_seek_ms: 8.5,
            full_stroke_ms: 16.0,
            ncq_depth: 31,
            max_command_age_ms: 0,
            cache_segments: 16,
            segment_sectors: 4096,
            min_read_ahead_sectors: 281,
            overhead_us: 40,
            interface_mb_per_s: 300,
            max_sectors: 2560,
            rotational: true,
        }
    }
}

/// One recording zone.
#[derive(Debug, Clone, Copy)]
struct Zone {
    first_lba: u64,
    first_cylinder: u64,
    sectors_per_track: u64,
}

/// A read-ahead cache segment: sectors from `base` arrive from the media at a steady rate
/// from `t0_ps` until `stop_ps` (when the mechanism left for another command).
#[derive(Debug, Clone, Copy)]
struct Segment {
    base: u64,
    t0_ps: u64,
    per_sector_ps: u64,
    stop_ps: u64,
    /// Highest sector handed to the host; prefetch runs at most a segment beyond it.
    consumed: u64,
    /// End of the data the segment holds once the mechanism has left (`u64::MAX` before).
    limit: u64,
    last_used: u64,
}

impl Segment {
    /// When sectors up to `end` are in the buffer, if they ever will be.
    fn ready_at(&self, end: u64, segment_sectors: u64) -> Option<u64> {
        if end > self.consumed + segment_sectors || end > self.limit {
            return None;
        }
        let at = self.t0_ps + (end - self.base) * self.per_sector_ps;
        (at <= self.stop_ps).then_some(at)
    }

    /// The mechanism leaves at `at_ps`. A full buffer paused the prefetch a segment past what
    /// the host had read, so that is all the segment keeps, however long the mechanism stayed.
    fn stop(&mut self, at_ps: u64, segment_sectors: u64) {
        self.stop_ps = self.stop_ps.min(at_ps);
        let streamed = self.base + self.stop_ps.saturating_sub(self.t0_ps) / self.per_sector_ps;
        self.limit = streamed.min(self.consumed + segment_sectors);
    }
}

/// A command waiting for the mechanism.
#[derive(Debug, Clone, Copy)]
struct Waiting {
    request: DeviceRequest,
    seq: u64,
    since_ps: u64,
}

/// The disk.
#[derive(Debug)]
pub struct Hdd {
    params: HddParams,
    zones: Vec<Zone>,
    cylinders: u64,
    rev_ps: u64,
    seek_alpha_ms: f64,
    seek_beta_ms: f64,
    head_cylinder: u64,
    /// When the mechanism may take the next command (ps).
    mech_free_ps: u64,
    queue: Vec<Waiting>,
    segments: Vec<Segment>,
    /// Index into `segments` of the one being prefetched, if any.
    active: Option<usize>,
    due: BinaryHeap<Reverse<(u64, u64, u64, i32)>>,
    seq: u64,
}

const PS_PER_NS: u64 = 1000;

impl Hdd {
    /// A disk with `params`.
    pub fn new(params: HddParams) -> Self {
        let rev_ps = 60_000_000_000_000 / u64::from(params.rpm.max(1));
        let spt =
            |mb: u32| (u64::from(mb) * 1_000_000 * 60 / u64::from(params.rpm.max(1)) / 512).max(1);
        let (outer, inner) = (spt(params.outer_mb_per_s), spt(params.inner_mb_per_s));
        let heads = u64::from(params.heads.max(1));
        let zone_count = u64::from(params.zones.max(1));
        let mean_spt = (outer + inner) / 2;
        let cylinders_per_zone = (params.capacity_sectors / (heads * mean_spt) / zone_count).max(1);
        let mut zones = Vec::new();
        let (mut lba, mut cylinder) = (0u64, 0u64);
        for z in 0..zone_count {
            let step = if zone_count > 1 {
                (outer - inner) * z / (zone_count - 1)
            } else {
                0
            };
            let sectors_per_track = outer - step;
            zones.push(Zone {
                first_lba: lba,
                first_cylinder: cylinder,
                sectors_per_track,
            });
            let cylinders = if z + 1 == zone_count {
                (params.capacity_sectors.saturating_sub(lba))
                    .div_ceil(heads * sectors_per_track)
                    .max(1)
            } else {
                cylinders_per_zone
            };
            lba += cylinders * heads * sectors_per_track;
            cylinder += cylinders;
        }
        let (alpha, beta) = seek_coefficients(&params, cylinder);
        Self {
            params,
            zones,
            cylinders: cylinder,
            rev_ps,
            seek_alpha_ms: alpha,
            seek_beta_ms: beta,
            head_cylinder: 0,
            mech_free_ps: 0,
            queue: Vec::new(),
            segments: Vec::new(),
            active: None,
            due: BinaryHeap::new(),
            seq: 0,
        }
    }

    /// Cylinders on the disk.
    pub fn cylinders(&self) -> u64 {
        self.cylinders
    }

    /// Seek time over `distance` cylinders, in ps.
    pub fn seek_ps(&self, distance: u64) -> u64 {
        if distance == 0 {
            return 0;
        }
        let d = (distance - 1) as f64;
        let ms =
            self.params.track_to_track_ms + self.seek_alpha_ms * d + self.seek_beta_ms * d.sqrt();
        (ms * 1e9) as u64
    }

    /// Cylinder, position within the track and sectors per track of `lba`.
    fn locate(&self, lba: u64) -> (u64, u64, u64) {
        let zone = match self.zones.binary_search_by(|z| z.first_lba.cmp(&lba)) {
            Ok(i) => self.zones[i],
            Err(i) => self.zones[i.saturating_sub(1)],
        };
        let offset = lba - zone.first_lba;
        let track = offset / zone.sectors_per_track;
        (
            zone.first_cylinder + track / u64::from(self.params.heads.max(1)),
            offset % zone.sectors_per_track,
            zone.sectors_per_track,
        )
    }

    /// Time from `at_ps` until `sector_in_track` passes under the head.
    fn rotational_wait(&self, at_ps: u64, sector_in_track: u64, spt: u64) -> u64 {
        let phase = at_ps % self.rev_ps;
        let target = sector_in_track * self.rev_ps / spt;
        (target + self.rev_ps - phase) % self.rev_ps
    }

    fn overhead_ps(&self) -> u64 {
        self.params.overhead_us * 1_000_000
    }

    fn interface_ps(&self, sectors: u32) -> u64 {
        u64::from(sectors) * 512 * 1_000_000 / u64::from(self.params.interface_mb_per_s.max(1))
    }

    /// Seek plus rotation to reach `request` if the mechanism starts at `at_ps`.
    fn positioning_ps(&self, at_ps: u64, request: &DeviceRequest) -> u64 {
        if !matches!(request.op, Op::Read | Op::Write) {
            return 0;
        }
        let (cylinder, sit, spt) = self.locate(request.sector);
        let seek = self.seek_ps(cylinder.abs_diff(self.head_cylinder));
        seek + self.rotational_wait(at_ps + self.overhead_ps() + seek, sit, spt)
    }

    /// Serves `request` from the cache if it is there or being prefetched; true iff so.
    fn try_cache(&mut self, now_ps: u64, request: &DeviceRequest) -> bool {
        let seg_sectors = u64::from(self.params.segment_sectors);
        let hit = self.segments.iter().position(|s| {
            s.base <= request.sector && s.ready_at(request.end(), seg_sectors).is_some()
        });
        let Some(i) = hit else { return false };
        let segment = &mut self.segments[i];
        let ready = segment
            .ready_at(request.end(), seg_sectors)
            .unwrap_or(now_ps);
        segment.consumed = segment.consumed.max(request.end());
        self.seq += 1;
        segment.last_used = self.seq;
        if self.active == Some(i) {
            // The mechanism stays on this stream until the data the host waits for is read.
            self.mech_free_ps = self.mech_free_ps.max(ready);
        }
        let done = (now_ps + self.overhead_ps()).max(ready) + self.interface_ps(request.sectors);
        self.complete_at(done, request.id, 0);
        true
    }

    /// The waiting command to start at `at_ps`: in arrival order without NCQ; with it, one
    /// past the age limit if any, else the nearest.
    fn pick(&self, at_ps: u64) -> Option<usize> {
        if self.params.ncq_depth <= 1 {
            return (!self.queue.is_empty()).then_some(0);
        }
        let max_age_ps = self.params.max_command_age_ms.saturating_mul(1_000_000_000);
        if max_age_ps > 0
            && let Some(i) = (0..self.queue.len()).min_by_key(|&i| self.queue[i].seq)
            && at_ps.saturating_sub(self.queue[i].since_ps) >= max_age_ps
        {
            return Some(i);
        }
        (0..self.queue.len()).min_by_key(|&i| {
            (
                self.positioning_ps(at_ps, &self.queue[i].request),
                self.queue[i].seq,
            )
        })
    }

    /// Starts the best waiting command at `at_ps`.
    fn start_next(&mut self, at_ps: u64) {
        let pick = self.pick(at_ps);
        let Some(i) = pick else { return };
        let request = self.queue.remove(i).request;
        if let Some(a) = self.active.take() {
            let segment_sectors = u64::from(self.params.segment_sectors);
            self.segments[a].stop(at_ps, segment_sectors);
        }
        let start = at_ps + self.overhead_ps();
        if !matches!(request.op, Op::Read | Op::Write) {
            self.mech_free_ps = start;
            self.complete_at(start, request.id, 0);
            return;
        }
        let (cylinder, sit, spt) = self.locate(request.sector);
        let arrive = start + self.seek_ps(cylinder.abs_diff(self.head_cylinder));
        let media = arrive + self.rotational_wait(arrive, sit, spt);
        let per_sector = self.rev_ps / spt;
        let done = media + u64::from(request.sectors) * per_sector;
        self.head_cylinder = cylinder;
        if request.op == Op::Read {
            let ahead = u64::from(request.sectors.max(self.params.min_read_ahead_sectors));
            self.mech_free_ps = media + ahead * per_sector;
            self.add_segment(Segment {
                base: request.sector,
                t0_ps: media,
                per_sector_ps: per_sector,
                stop_ps: u64::MAX,
                consumed: request.end(),
                limit: u64::MAX,
                last_used: 0,
            });
        } else {
            self.mech_free_ps = done;
            self.segments.retain(|s| {
                s.base >= request.end()
                    || s.consumed + u64::from(self.params.segment_sectors) <= request.sector
            });
            self.active = None;
        }
        self.complete_at(done, request.id, 0);
    }

    /// Adds a segment as the active one, evicting the least recently used.
    fn add_segment(&mut self, mut segment: Segment) {
        self.seq += 1;
        segment.last_used = self.seq;
        if self.segments.len() >= self.params.cache_segments.max(1) as usize
            && let Some(lru) = (0..self.segments.len()).min_by_key(|&i| self.segments[i].last_used)
        {
            self.segments.swap_remove(lru);
        }
        self.segments.push(segment);
        self.active = Some(self.segments.len() - 1);
    }

    fn complete_at(&mut self, at_ps: u64, id: u64, status: i32) {
        self.seq += 1;
        self.due
            .push(Reverse((at_ps.div_ceil(PS_PER_NS), self.seq, id, status)));
    }

    /// Starts waiting commands whose turn came by `now_ps`.
    fn advance(&mut self, now_ps: u64) {
        while !self.queue.is_empty() && self.mech_free_ps <= now_ps {
            self.start_next(self.mech_free_ps);
        }
    }
}

/// α and β of the seek curve through the three published seek times, for `cylinders`.
fn seek_coefficients(p: &HddParams, cylinders: u64) -> (f64, f64) {
    let x1 = (cylinders as f64 / 3.0 - 1.0).max(1.0);
    let x2 = (cylinders as f64 - 1.0).max(2.0);
    let a = p.avg_seek_ms - p.track_to_track_ms;
    let f = p.full_stroke_ms - p.track_to_track_ms;
    let det = x1 * x2.sqrt() - x2 * x1.sqrt();
    let alpha = (a * x2.sqrt() - f * x1.sqrt()) / det;
    let beta = (x1 * f - x2 * a) / det;
    (alpha.max(0.0), beta.max(0.0))
}

impl DeviceModel for Hdd {
    fn geometry(&self) -> Geometry {
        Geometry {
            capacity_sectors: self.params.capacity_sectors,
            hw_queues: 1,
            queue_depth: self.params.ncq_depth.max(1),
            max_sectors: self.params.max_sectors,
            rotational: self.params.rotational,
        }
    }

    fn submit(&mut self, now_ns: u64, request: DeviceRequest) {
        let now_ps = now_ns.saturating_mul(PS_PER_NS);
        self.advance(now_ps);
        if !in_range(&request, self.params.capacity_sectors) {
            self.complete_at(now_ps + self.overhead_ps(), request.id, EIO);
            return;
        }
        if request.op == Op::Read && self.try_cache(now_ps, &request) {
            return;
        }
        self.seq += 1;
        self.queue.push(Waiting {
            request,
            seq: self.seq,
            since_ps: now_ps,
        });
        if self.mech_free_ps <= now_ps {
            self.start_next(now_ps);
        }
    }

    fn next_event(&self) -> Option<u64> {
        let mech = (!self.queue.is_empty()).then(|| self.mech_free_ps.div_ceil(PS_PER_NS));
        let done = self.due.peek().map(|Reverse((at, ..))| *at);
        match (mech, done) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn poll(&mut self, now_ns: u64) -> Option<(u64, i32)> {
        self.advance(now_ns.saturating_mul(PS_PER_NS));
        match self.due.peek() {
            Some(Reverse((at, ..))) if *at <= now_ns => self
                .due
                .pop()
                .map(|Reverse((_, _, id, status))| (id, status)),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hdd_seek_curve_passes_through_published_times() {
        let hdd = Hdd::new(HddParams::default());
        let c = hdd.cylinders();
        let ms = |d: u64| hdd.seek_ps(d) as f64 / 1e9;
        assert!((ms(1) - 0.8).abs() < 1e-6);
        assert!((ms(c / 3) - 8.5).abs() < 0.05, "{}", ms(c / 3));
        assert!((ms(c) - 16.0).abs() < 0.05, "{}", ms(c));
        assert!(ms(100) < ms(1000) && ms(1000) < ms(100_000));
    }

    #[test]
    fn hdd_sequential_reads_hit_read_ahead_cache() {
        let mut hdd = Hdd::new(HddParams::default());
        let mut now = 0;
        let mut latencies = Vec::new();
        for i in 0..64u64 {
            hdd.submit(
                now,
                DeviceRequest {
                    id: i,
                    op: Op::Read,
                    sector: 1_000_000 + i * 8,
                    sectors: 8,
                },
            );
            let mut at = now;
            while hdd.poll(at).is_none() {
                at = hdd.next_event().expect("a completion is due");
            }
            latencies.push(at - now);
            now = at;
        }
        let mean_after_first: u64 = latencies[1..].iter().sum::<u64>() / 63;
        assert!(
            latencies[0] > 1_000_000,
            "a cold read positions the head: {}",
            latencies[0]
        );
        assert!(
            mean_after_first < 100_000,
            "sequential reads stream from the cache: {mean_after_first} ns"
        );
    }

    /// Submits an 8-sector read at `now` and runs the disk until it completes; returns when.
    fn read_to_completion(hdd: &mut Hdd, now: u64, id: u64, sector: u64) -> u64 {
        let request = DeviceRequest {
            id,
            op: Op::Read,
            sector,
            sectors: 8,
        };
        hdd.submit(now, request);
        let mut at = now;
        while hdd.poll(at).is_none() {
            at = hdd.next_event().expect("a completion is due");
        }
        at
    }

    #[test]
    fn hdd_segment_keeps_one_segment_past_what_was_read_after_the_mechanism_leaves() {
        let mut hdd = Hdd::new(HddParams::default());
        let segment = u64::from(HddParams::default().segment_sectors);
        let start = 1_000_000;
        let done = read_to_completion(&mut hdd, 0, 0, start);
        // A second idle of prefetching, then a far read takes the mechanism away.
        let mut now = read_to_completion(&mut hdd, done + 1_000_000_000, 1, 900_000_000);
        let mut misses = Vec::new();
        for i in 1..(segment / 8 + 64) {
            let sector = start + i * 8;
            let at = read_to_completion(&mut hdd, now, 1 + i, sector);
            if at - now > 1_000_000 {
                misses.push(sector - start);
            }
            now = at;
        }
        assert_eq!(
            misses.first().copied(),
            Some(segment + 8),
            "the cache held exactly a segment past the first read: misses at {misses:?}"
        );
    }

    #[test]
    fn hdd_random_reads_cost_milliseconds() {
        let mut hdd = Hdd::new(HddParams {
            ncq_depth: 1,
            ..HddParams::default()
        });
        let mut now = 0;
        let mut x = 12345u64;
        for i in 0..50 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let sector = (x >> 20) % 1_900_000_000;
            hdd.submit(
                now,
                DeviceRequest {
                    id: i,
                    op: Op::Read,
                    sector,
                    sectors: 8,
                },
            );
            loop {
                now = hdd.next_event().expect("due");
                if let Some(done) = hdd.poll(now) {
                    assert_eq!(done, (i, 0));
                    break;
                }
            }
        }
        let per_io_ms = now as f64 / 50.0 / 1e6;
        assert!(
            (6.0..20.0).contains(&per_io_ms),
            "{per_io_ms} ms per random read"
        );
    }
}
