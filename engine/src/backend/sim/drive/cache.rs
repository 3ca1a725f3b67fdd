//! The drive's buffer: segments held and streaming read-ahead, looked up by each command,
//! replaced least recently used, as DiskSim's `disksim_diskcache.c` keeps them.

use schedhost_sdk::Op;

use super::{ContinuousRead, DeviceRequest, Drive, Place};

/// A buffer segment: sectors `[start, end)` held, and the read-ahead still streaming into it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Segment {
    pub(super) start: u64,
    /// Held at `since_ps`.
    pub(super) end: u64,
    /// While streaming: when `end` was reached, ps per sector, and where it stops.
    pub(super) since_ps: u64,
    pub(super) per_sector_ps: u64,
    pub(super) stream_to: u64,
    /// While streaming: when the read-ahead's own positioning to its first sector ends (one
    /// resumed on an idle hit seeks first; 0 where it reads on under the head).
    pub(super) seeking_until_ps: u64,
    /// Where the read-ahead must reach before a command other than a hit may stop it.
    pub(super) min_to: u64,
    pub(super) streaming: bool,
    pub(super) used: u64,
    /// It holds a write's data.
    pub(super) written: bool,
    /// Where the read-ahead from `end` meets track boundaries.
    pub(super) boundaries: Boundaries,
}

/// The track boundaries a read-ahead streaming from a segment's end meets: crossing one
/// costs its skew in sectors' time, as a media read's does (`Drive::media_ps`). DiskSim's
/// read-ahead is a media access sector by sector, so it pays them too; a stream timed at
/// one sector after another ran ahead of it by the skew at every track (17 of the HP
/// C3323A's 120 sectors). Taken within the zone the stream starts in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Boundaries {
    /// Sectors the stream reads before its first crossing.
    pub(super) first_cross: u64,
    pub(super) sectors_per_track: u64,
    pub(super) track_skew: u64,
    pub(super) cylinder_skew: u64,
    /// The surface the stream starts on, of `surfaces`: which crossings change cylinder.
    pub(super) surface: u64,
    pub(super) surfaces: u64,
}

impl Boundaries {
    /// A stream that meets none (a segment not streaming, or one the bus paces).
    pub(super) const NONE: Self = Self {
        first_cross: u64::MAX,
        sectors_per_track: u64::MAX,
        track_skew: 0,
        cylinder_skew: 0,
        surface: 0,
        surfaces: 1,
    };

    /// Sectors' time the first `k` sectors of the stream take: the sectors and the skew of
    /// every boundary crossed before the last of them.
    fn sectors_time(&self, k: u64) -> u64 {
        let crossings = match k.checked_sub(self.first_cross) {
            Some(past) if past > 0 => 1 + (past - 1) / self.sectors_per_track.max(1),
            _ => 0,
        };
        let cylinders = self.surface.saturating_add(crossings) / self.surfaces.max(1);
        let tracks = crossings - cylinders.min(crossings);
        k.saturating_add(tracks.saturating_mul(self.track_skew))
            .saturating_add(cylinders.saturating_mul(self.cylinder_skew))
    }
}

impl Segment {
    /// How long after `since_ps` the read-ahead has read `k` sectors past `end`.
    pub(super) fn read_after(&self, k: u64) -> u64 {
        self.boundaries
            .sectors_time(k)
            .saturating_mul(self.per_sector_ps)
    }

    /// The end of what the segment holds at `at_ps`.
    pub(super) fn end_at(&self, at_ps: u64) -> u64 {
        if !self.streaming || at_ps <= self.since_ps {
            return self.end;
        }
        let elapsed = at_ps - self.since_ps;
        // The most sectors read by then: `read_after` grows with every sector.
        let (mut lo, mut hi) = (0, self.stream_to.saturating_sub(self.end));
        while lo < hi {
            let mid = lo + (hi - lo).div_ceil(2);
            if self.read_after(mid) <= elapsed {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        self.end.saturating_add(lo)
    }

    /// The first sector the segment still holds at `at_ps`, where it holds `size`: read-ahead
    /// running past that replaces its oldest data, as DiskSim's `disk_buffer_segment_wrap`
    /// moves a segment's start (how far read-ahead runs: `Drive::read_ahead_to`).
    pub(super) fn start_at(&self, at_ps: u64, size: u64) -> u64 {
        self.start
            .max(self.end_at(at_ps).saturating_sub(size.max(1)))
    }
}

/// What stopping read-ahead costs a command ([`Drive::stop_streaming`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Stop {
    /// When the mechanism is free, a read-ahead short of its minimum having reached it.
    pub(super) after_minimum: u64,
    /// Then the rest of the sector under the head, added to the command's overhead.
    pub(super) settling: u64,
}

impl Drive {
    /// The segment holding `[sector, end)` by `at_ps`, or streaming towards it, and when the
    /// last sector is (or will be) there.
    pub(super) fn lookup(&self, at_ps: u64, sector: u64, end: u64) -> Option<(usize, u64)> {
        if !self.params.buffer_cache {
            return None;
        }
        self.segments.iter().enumerate().find_map(|(i, s)| {
            if s.start_at(at_ps, self.params.segment_sectors) > sector {
                return None;
            }
            if s.end_at(at_ps) >= end {
                return Some((i, at_ps));
            }
            (s.streaming && end <= s.stream_to && sector < s.end_at(at_ps) + 1)
                .then(|| (i, s.since_ps.saturating_add(s.read_after(end - s.end))))
        })
    }

    /// Where the data a segment holds of `sector..end` ends, when a segment holds its start
    /// but not its end (no segment is reading ahead: called once they are stopped).
    pub(super) fn held_from(&self, sector: u64, end: u64) -> Option<u64> {
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
    pub(super) fn appends(&self, at_ps: u64, request: &DeviceRequest) -> bool {
        self.params.combine_seq_writes
            && self.writing.is_some_and(|w| {
                request.sector == w.end
                    && at_ps < w.until_ps
                    && request.end() - w.start <= self.params.segment_sectors
            })
    }

    /// Segment `i`, if it is still reading ahead at `at_ps`, reads on to where a read of
    /// `sector..end` aims read-ahead ([`Self::read_ahead_to`]). False where it was idle:
    /// stopped, or done reading ahead.
    pub(super) fn read_ahead_past(
        &mut self,
        i: usize,
        at_ps: u64,
        (sector, end): (u64, u64),
    ) -> bool {
        let size = self.params.segment_sectors;
        let s = &mut self.segments[i];
        if s.streaming && s.end_at(at_ps) >= s.stream_to {
            // Done: the mechanism read ahead as far as it aimed and went idle over the last
            // sector, the segment holding its size up to there.
            let head_over = (s.stream_to > s.end).then(|| s.stream_to - 1);
            s.start = s.start_at(at_ps, size);
            s.end = s.stream_to;
            s.streaming = false;
            if let Some(last) = head_over {
                self.head_to(last);
            }
            return false;
        }
        if !s.streaming {
            return false;
        }
        let target = self.read_ahead_to(self.segments[i].start, sector, end);
        let least = self.min_read_ahead_to(end);
        let s = &mut self.segments[i];
        s.stream_to = s.stream_to.max(target);
        s.min_to = s.min_to.max(least);
        true
    }

    /// Idle segment `i` reads ahead again, from where it ends to where a read of
    /// `sector..end` aims read-ahead: the mechanism, free at `at_ps` (once the hit's command
    /// overhead is done, as DiskSim's `disk_check_hda` starts the seek after
    /// `overhead_done`), positions at the segment's end and streams from there (DiskSim's
    /// `Read-ahead on idle hit`).
    pub(super) fn resume_read_ahead(&mut self, i: usize, at_ps: u64, (sector, end): (u64, u64)) {
        let (from, start) = (self.segments[i].end, self.segments[i].start);
        let target = self.read_ahead_to(start, sector, end);
        if from >= target || from >= self.params.capacity_sectors {
            return;
        }
        let next = DeviceRequest {
            id: 0,
            op: Op::Read,
            sector: from,
            sectors: 1,
        };
        let at_ps = at_ps.max(self.mech_free_ps);
        let media = self.access(at_ps, &next, false, (0, 0, 0), 0);
        let first_under_head = media.start;
        let place = self.place(from);
        // A seek under way is not cut short: a command other than a hit lets it end, on
        // top of its own overhead ([`Self::stop_streaming`]); a hit is served at once
        // (DiskSim's `disk_buffer_stopable_access` takes a hit on the segment first).
        let per_sector_ps = (self.rev_ps / place.sectors_per_track).max(1);
        let least = self.min_read_ahead_to(end);
        // Its first sector is under the head at `first_under_head`: the stream reads
        // the rest of that track before it crosses.
        let boundaries = self.boundaries(place, place.left_on_track);
        let s = &mut self.segments[i];
        s.since_ps = first_under_head;
        s.seeking_until_ps = media.positioned;
        s.per_sector_ps = per_sector_ps;
        s.boundaries = boundaries;
        s.stream_to = target;
        s.min_to = least;
        s.streaming = true;
    }

    /// The boundaries a stream meets that reads `first_cross` sectors of `place`'s track
    /// before it crosses to the next.
    pub(super) fn boundaries(&self, place: Place, first_cross: u64) -> Boundaries {
        let zone = &self.params.zones[place.zone];
        Boundaries {
            first_cross,
            sectors_per_track: place.sectors_per_track,
            track_skew: zone.track_skew,
            cylinder_skew: zone.cylinder_skew,
            surface: place.track,
            surfaces: self.params.surfaces,
        }
    }

    /// Sectors before `sector` on its track that passed wholly under the head in the
    /// `waited` ps before it came round, kept under [`DriveParams::read_free_blocks`].
    pub(super) fn free_blocks_before(&self, sector: u64, waited: u64) -> u64 {
        if !self.params.read_free_blocks {
            return 0;
        }
        let place = self.place(sector);
        let per_sector = (self.rev_ps / place.sectors_per_track).max(1);
        let on_track_before = place.sectors_per_track - place.left_on_track;
        (waited / per_sector).min(on_track_before).min(sector)
    }

    /// Where read-ahead after a read of `sector..end`, into a segment from `start`, stops,
    /// as DiskSim's `disk_buffer_get_max_readahead` aims it: the maximum read-ahead past
    /// the read; without one, a segment's size from the read's start, or past its end where
    /// read-ahead may replace the data returned; then by [`DriveParams::continuous_read`]
    /// and within the disk. The segment keeps its size up to there (`Segment::start_at`).
    pub(super) fn read_ahead_to(&self, start: u64, sector: u64, end: u64) -> u64 {
        let p = &self.params;
        let size = p.segment_sectors.max(1);
        let most = if p.max_read_ahead_sectors > 0 {
            end.saturating_add(p.max_read_ahead_sectors)
        } else if p.read_ahead_over_requested || p.drop_returned_data {
            end.saturating_add(size)
        } else {
            // A read as long as the segment reads nothing ahead.
            sector.saturating_add(size).max(end)
        };
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
            ContinuousRead::Dec => {
                let next = self.place(end);
                let track_end = end.saturating_add(next.left_on_track);
                let track_start = track_end.saturating_sub(next.sectors_per_track);
                if start < track_start {
                    track_end.saturating_add(next.sectors_per_track)
                } else {
                    track_end
                }
            }
        };
        to.min(p.capacity_sectors).max(end)
    }

    /// Where read-ahead after a read ending at `end` must reach before a command other than
    /// a hit may stop it ([`DriveParams::min_read_ahead_sectors`]).
    pub(super) fn min_read_ahead_to(&self, end: u64) -> u64 {
        end.saturating_add(self.params.min_read_ahead_sectors)
            .min(self.params.capacity_sectors)
    }

    /// Where read-ahead in `s` has read to `reached`, the end of a track, and goes on to the
    /// next: when the switch to it ends (DiskSim times it as a seek started at the last
    /// sector, `disk_buffer_sector_done` calling `disk_initiate_seek`) and when that
    /// track's first sector comes under the head.
    fn between_tracks(&self, s: &Segment, reached: u64) -> Option<(u64, u64)> {
        let read = reached.checked_sub(s.end)?;
        let past_first = read.checked_sub(s.boundaries.first_cross)?;
        let at_track_end = past_first % s.boundaries.sectors_per_track.max(1) == 0;
        if !at_track_end || reached >= s.stream_to || reached == 0 {
            return None;
        }
        let (from, to) = (self.place(reached - 1), self.place(reached));
        let switch = self.reposition_ps((from.cylinder, from.surface), to, false);
        let crossed = s.since_ps.saturating_add(s.read_after(read));
        let first_read = s.since_ps.saturating_add(s.read_after(read + 1));
        Some((
            crossed.saturating_add(switch),
            first_read.saturating_sub(s.per_sector_ps),
        ))
    }

    /// Stops every read-ahead at `at_ps` for a command other than a hit on it: the
    /// mechanism is free at once, or once a read-ahead short of its minimum has reached it;
    /// without [`DriveParams::stop_prefetch_in_sector`] it then finishes the sector under
    /// the head, which DiskSim adds to the command's overhead (`disk_check_hda`). Between
    /// tracks the head is over the next one from the switch on (DiskSim's
    /// `disk_buffer_stopable_access` moves the mechanism to a read-ahead's seek target
    /// and lets the seek end, setting `DISK_SEEK_STOPTIME`): the rest of the switch is
    /// added to the command's overhead as well, and, without stopping in mid-sector, the
    /// wait for the new track's first sector, whose event DiskSim's drive lets come. So is
    /// the rest of a resumed read-ahead's seek to its first sector.
    pub(super) fn stop_streaming(&mut self, at_ps: u64) -> Stop {
        let in_sector = self.params.stop_prefetch_in_sector;
        let size = self.params.segment_sectors.max(1);
        let mut stop = Stop {
            after_minimum: at_ps,
            settling: 0,
        };
        // The last sector the read-ahead took off the media (or the first of the track it
        // is switching to): the head is over its track.
        let mut head_over = None;
        for i in 0..self.segments.len() {
            if !self.segments[i].streaming {
                continue;
            }
            let reached = self.segments[i].end_at(at_ps);
            let between = self.between_tracks(&self.segments[i], reached);
            let s = &mut self.segments[i];
            let before = s.end;
            s.streaming = false;
            let per = s.per_sector_ps.max(1);
            // Short of its minimum, the read-ahead goes on to it and the command waits.
            let least = s.min_to.min(s.stream_to);
            if reached < least {
                let at_least = s.since_ps.saturating_add(s.read_after(least - s.end));
                stop.after_minimum = stop.after_minimum.max(at_least);
                s.end = least;
                s.start = s.start.max(s.end.saturating_sub(size));
                head_over = Some(least - 1);
                continue;
            }
            s.end = reached;
            if at_ps < s.seeking_until_ps {
                // Still seeking to its first sector, the head over that track already.
                stop.settling = stop.settling.max(s.seeking_until_ps - at_ps);
                continue;
            }
            if let Some((switched, first_under_head)) = between {
                // Over the new track, its first sector not yet read.
                head_over = Some(reached);
                if at_ps < first_under_head {
                    let until = if at_ps < switched {
                        switched
                    } else if in_sector {
                        at_ps
                    } else {
                        first_under_head
                    };
                    stop.settling = stop.settling.max(until - at_ps);
                    s.start = s.start.max(s.end.saturating_sub(size));
                    continue;
                }
            }
            // The sector under the head, if the head is over one rather than a skew:
            // read whole where the drive does not stop in mid-sector.
            let next_done = s
                .since_ps
                .saturating_add(s.read_after(reached - before + 1));
            let in_next = at_ps > next_done.saturating_sub(per) && at_ps > s.since_ps;
            if !in_sector && in_next && s.end < s.stream_to {
                s.end += 1;
                stop.settling = stop.settling.max(next_done.saturating_sub(at_ps));
            }
            s.start = s.start.max(s.end.saturating_sub(size));
            if s.end > before && between.is_none() {
                head_over = Some(s.end - 1);
            }
        }
        if let Some(last) = head_over {
            self.head_to(last);
        }
        stop
    }

    /// Keeps `segment`, in place of the least recently used one when the buffer is full. With
    /// a separate write segment (DiskSim's `Use separate write segment`), writes have one
    /// segment of their own, which the next write replaces, and reads the others.
    pub(super) fn add_segment(&mut self, segment: Segment) {
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
}
