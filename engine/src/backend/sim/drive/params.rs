//! A drive's parameters, as DiskSim names them: what a spec file's `model = drive` keys and
//! the DiskSim importer fill in.

use super::layout::{DriveZone, SurfaceOrder};

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
    /// Before data crosses the bus, each time the drive starts sending or taking it
    /// (DiskSim's `Data preparation overhead`).
    pub data_prep: f64,
    /// Taking the bus again after giving it up (DiskSim's `First reselect overhead`): a
    /// read's data after its media access, a write's completion after its media write.
    pub reselect: f64,
    /// Giving the bus up: after a read's command (after a read, after a write) and after a
    /// write's data. The drive cannot reselect before (DiskSim's `Read disconnect
    /// afterread`, `afterwrite` and `Write disconnect overhead`).
    pub disconnect: [f64; 3],
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
    /// DEC's prefetch scheme (4): to the end of the track the next sector is on, and the
    /// track after it too where the segment began on an earlier track
    /// (`disk_buffer_get_max_readahead`); the maximum read-ahead does not apply.
    Dec,
}

impl ContinuousRead {
    /// DiskSim's number for it.
    pub fn scheme(self) -> u8 {
        match self {
            Self::None => 0,
            Self::TrackEnd => 1,
            Self::CylinderEnd => 2,
            Self::SegmentEnd => 3,
            Self::Dec => 4,
        }
    }

    /// The mode DiskSim numbers `n`, if one.
    pub fn from_scheme(n: u64) -> Option<Self> {
        Some(match n {
            0 => Self::None,
            1 => Self::TrackEnd,
            2 => Self::CylinderEnd,
            3 => Self::SegmentEnd,
            4 => Self::Dec,
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
    /// The least a write's positioning takes, settling included, unless it continues the
    /// write still going to the media (DiskSim's `Minimum seek delay`, `disk_check_hda`).
    pub min_write_seek_ms: f64,
    /// Bus time per sector between the drive's buffer and the host: a read's, and a
    /// write's where [`Self::write_bus_sector_ms`] does not say otherwise.
    pub bus_sector_ms: f64,
    /// A write's bus time per sector, where it differs from a read's (DiskSim's buses
    /// declare each direction).
    pub write_bus_sector_ms: Option<f64>,
    /// Controller overheads.
    pub overheads: Overheads,
    /// Buffer segments.
    pub cache_segments: u32,
    /// Sectors per segment.
    pub segment_sectors: u64,
    /// How far a read is followed by read-ahead, in sectors past its end.
    pub max_read_ahead_sectors: u64,
    /// How far read-ahead goes past a read's end before a command other than a hit on its
    /// segment may stop it: such a command waits for it (DiskSim's `Minimum read-ahead`,
    /// `disk_buffer_stopable_access`).
    pub min_read_ahead_sectors: u64,
    /// Where read-ahead stops (DiskSim's `Buffer continuous read`).
    pub continuous_read: ContinuousRead,
    /// The buffer holds data for later commands to hit (DiskSim's `Enable caching in
    /// buffer`); without it every command goes to the media, and nothing is read ahead.
    pub buffer_cache: bool,
    /// A read miss also keeps the sectors before it on its track that pass under the head
    /// while it waits for its first (DiskSim's `Read any free blocks`).
    pub read_free_blocks: bool,
    /// Read-ahead may replace the data the read returned in its segment (DiskSim's
    /// `Read-ahead over requested`): where no maximum read-ahead is declared it runs a whole
    /// segment past the read's end, not a segment from its start. A declared maximum runs
    /// that far past the end either way, and the segment keeps its size's last sectors.
    pub read_ahead_over_requested: bool,
    /// A read's segment no longer holds the data the read returned once it completes: its
    /// start moves to the read's end, so reading the same sectors again misses (DiskSim's
    /// `Read-ahead over requested = -1`, where `disk_request_complete` moves
    /// `seg->startblkno` to the request's end).
    pub drop_returned_data: bool,
    /// A command stops read-ahead at once, mid-sector; otherwise the sector under the head
    /// is read first (DiskSim's `Stop prefetch in sector`).
    pub stop_prefetch_in_sector: bool,
    /// A read sector's room in its segment is checked as the head reaches the sector, so
    /// that one without room is not read; otherwise once it has been read, and then
    /// dropped (DiskSim's `Read directly to buffer`, `disk_buffer_sector_done`). Either way
    /// a read longer than its segment waits for the bus to free room, the sector coming
    /// round again.
    pub read_direct_to_buffer: bool,
    /// A write goes to the media only once ten of its sectors (fifteen from 45 on, all of a
    /// shorter one) are in the buffer (DiskSim's `Extra write disconnect`, whose other
    /// overheads DiskSim charges to no request).
    pub extra_write_disconnect: bool,
    /// Writes complete once buffered and pay the write-hit command overhead (DiskSim's
    /// `Fast write level` > 0); otherwise they complete on the media and pay the miss one.
    pub write_back: bool,
    /// Written data stays in the buffer for later reads and writes to hit (DiskSim's
    /// `Allow read hits on write data`).
    pub read_hits_on_writes: bool,
    /// A read that hits a segment done reading ahead sends the mechanism back to read ahead
    /// past the hit (DiskSim's `Read-ahead on idle hit`). A hit on a segment still reading
    /// ahead moves its read-ahead past the hit either way.
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
    /// A read that gave the bus up reconnects once this share of its sectors is in the
    /// buffer (DiskSim's `High (read) water mark`): of the request, or with
    /// [`Self::read_water_of_segment`] of the segment; at least one sector.
    pub read_water_mark: f64,
    /// The read water mark is a share of the segment, not of the request (DiskSim's `Set
    /// watermark by reqsize = 0`).
    pub read_water_of_segment: bool,
    /// A write longer than its segment fills the segment first and refills it once what is
    /// left of it to write has drained to this many sectors, reselecting each time (DiskSim's
    /// `Low (write) water mark`, `disk_buffer_request_complete`).
    pub write_water_mark: u64,
    /// The drive keeps the bus through a write's whole transfer (DiskSim's `Hold bus entire
    /// write xfer`): a write longer than its segment takes more data as soon as room frees,
    /// with no reselection, whatever the water mark.
    pub write_holds_bus: bool,
    /// The drive keeps the bus from a read's command to its last sector: it never
    /// disconnects, so no water mark or reselection applies to a read (DiskSim's `Never
    /// disconnect`).
    pub never_disconnect: bool,
    /// A read that finds its first sectors in the buffer sends them at once, the rest as
    /// the media delivers them; otherwise such a partial hit waits as a miss does (DiskSim's
    /// `Immed transfer partial hit`, which skips the read water mark for it).
    pub immediate_partial_hit: bool,
    /// Zero-latency reads and writes (DiskSim's `Immediate buffer read` and `Immediate
    /// buffer write`, passed to its mechanism as `immed`): where the head lands inside a
    /// request that lies on one track, the access starts at the sector under the head and
    /// takes the ones before it when they come round, instead of waiting for the first.
    pub immediate_read: bool,
    /// As [`Self::immediate_read`], for writes whose data is all in the buffer.
    pub immediate_write: bool,
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
            min_write_seek_ms: 0.0,
            bus_sector_ms: 0.005,
            write_bus_sector_ms: None,
            overheads: Overheads::default(),
            cache_segments: 4,
            segment_sectors: 512,
            max_read_ahead_sectors: 512,
            min_read_ahead_sectors: 0,
            continuous_read: ContinuousRead::SegmentEnd,
            buffer_cache: true,
            read_free_blocks: false,
            read_ahead_over_requested: false,
            drop_returned_data: false,
            stop_prefetch_in_sector: true,
            read_direct_to_buffer: true,
            extra_write_disconnect: false,
            write_back: true,
            transfer_after_media: false,
            read_water_mark: 0.0,
            write_water_mark: 1,
            write_holds_bus: false,
            read_water_of_segment: false,
            never_disconnect: false,
            immediate_partial_hit: false,
            immediate_read: false,
            immediate_write: false,
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
