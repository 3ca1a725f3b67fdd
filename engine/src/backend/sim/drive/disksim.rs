//! Importing a DiskSim drive: its `.diskspecs` (controller, cache, overheads), the `.model`
//! it names (surfaces, zones, skews, spares, mechanics) and the `.seek` table that names.
//!
//! DiskSim's parameter files are nested blocks, `type NAME { Key = value, … }`, with lists in
//! `[ … ]` and `#` comments. Every parameter is either carried into [`DriveParams`], or
//! reported in [`Imported::not_represented`] with its value: none is dropped silently.

use std::path::{Path, PathBuf};

use super::{
    ContinuousRead, DriveParams, DriveZone, MAX_ADJUSTMENT_MS, MAX_SEEK_MS, MAX_SLIPS, Overheads,
    SurfaceOrder,
};

/// Deepest nesting accepted (DiskSim's own files nest four deep).
const MAX_DEPTH: usize = 16;
/// Most zones and seek points accepted.
const MAX_ZONES: usize = 4096;
const MAX_SEEK_POINTS: usize = 1 << 20;

/// A parsed DiskSim value.
#[derive(Debug, Clone, PartialEq)]
enum Node {
    Scalar(String),
    List(Vec<Node>),
    Block {
        kind: String,
        fields: Vec<(String, Node)>,
    },
}

/// A drive read from DiskSim's files.
#[derive(Debug, Clone, PartialEq)]
pub struct Imported {
    /// The drive's name in the `.diskspecs`.
    pub name: String,
    /// What schedhost's `drive` model takes.
    pub params: DriveParams,
    /// Parameters the model does not represent, with their values and why it matters.
    pub not_represented: Vec<String>,
}

/// What went wrong, with the file and where.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {message}")]
pub struct ImportError {
    /// The file at fault.
    pub path: PathBuf,
    /// What is wrong.
    pub message: String,
}

fn fail(path: &Path, message: impl Into<String>) -> ImportError {
    ImportError {
        path: path.to_owned(),
        message: message.into(),
    }
}

/// Reads `diskspecs` and the files it names.
///
/// # Errors
/// A file is unreadable or malformed, or a parameter the model needs is missing or out of
/// range; the message names the file and the parameter.
pub fn import(diskspecs: &Path) -> Result<Imported, ImportError> {
    let text = read(diskspecs)?;
    let (kind, name, fields) = first_block(diskspecs, &text)?;
    if kind != "disksim_disk" {
        return Err(fail(
            diskspecs,
            format!("expected a `disksim_disk` block, found `{kind}`"),
        ));
    }
    let mut notes = Vec::new();
    let mut specs = Fields::new(diskspecs, fields);
    let model_path = specs.take_source("Model")?;
    let model_text = read(&model_path)?;
    let (_, _, model_fields) = first_block(&model_path, &model_text)?;
    let mut model = Fields::new(&model_path, model_fields);

    let surfaces = model.take_u64("Number of data surfaces", 1, 1024)?;
    let cylinders = model.take_u64("Number of cylinders", 1, 10_000_000)?;
    // Checked, but the zones' own total is the capacity, as DiskSim takes it (below).
    model.take_u64("Block count", 1, crate::core::MAX_SECTOR)?;
    let mut mech = model.take_block("Mechanical Model")?;
    let seek_type = mech.take_text("Seek type")?;
    let single = mech.take_ms("Single cylinder seek time")?;
    let mut seek = match seek_type.as_str() {
        "extracted" => read_seek(&mech.take_path("Full seek curve")?)?,
        // DiskSim's names (`dm_mech_g1`'s loader): `hplplus10` is the HPL curve with the
        // first ten distances given.
        "hpl" | "hplplus10" => {
            let hpl = mech.take_numbers("HPL seek equation values", 6)?;
            let first_ten = if seek_type == "hplplus10" {
                mech.take_numbers("First ten seek times", 10)?
            } else {
                Vec::new()
            };
            let table = hpl_table(&hpl, &first_ten, cylinders);
            physical_seeks(&model_path, &table)?;
            table
        }
        other => {
            return Err(fail(
                &model_path,
                format!(
                    "`Seek type = {other}`: imported are `extracted` (a .seek table), `hpl` and `hplplus10`"
                ),
            ));
        }
    };
    // Only the types that name it take the table file; the others may still carry it.
    let _ = mech.take_opt("Full seek curve");
    if seek.first().is_none_or(|&(d, _)| d != 1) {
        seek.insert(0, (1, single));
    }
    let full_seek_ms = mech.take_ms("Full strobe seek time")?;
    // An adjustment, negative in several of DiskSim's own drives (-0.48 to -0.64 ms); more
    // than a second either way is no drive's.
    let write_settle_ms = mech.take_f64(
        "Add. write settling delay",
        -MAX_ADJUSTMENT_MS,
        MAX_ADJUSTMENT_MS,
    )?;
    let head_switch_ms = mech.take_ms("Head switch time")?;
    let rpm = mech.take_f64("Rotation speed (in rpms)", 1.0, 100_000.0)?;
    let rpm_error = mech.take_f64("Percent error in rpms", 0.0, 100.0)?;
    if rpm_error != 0.0 {
        notes.push(format!(
            "Percent error in rpms = {rpm_error}: the spindle runs at exactly {rpm} rpm"
        ));
    }
    let access = mech.take_text("Access time type")?;
    if access != "trackSwitchPlusRotation" {
        notes.push(format!(
            "Access time type = {access}: modelled as seek, then head switch, then rotation"
        ));
    }
    mech.rest(&mut notes, "Mechanical Model");

    let mut layout = model.take_block("Layout Model")?;
    let sparing = Sparing::read(&mut layout)?;
    let sparing_scheme = sparing.scheme;
    let zones = import_zones(&mut layout, &mut notes, &model_path, (surfaces, sparing))?;
    // 0 numbers a cylinder's surfaces alike on every cylinder; 1 and 2 in reverse on
    // alternate cylinders (DiskSim's `diskmap_surfno_on_cylinder`).
    let scheme = layout
        .take_opt_u64("LBN-to-PBN mapping scheme", 0, u64::MAX)?
        .unwrap_or(0);
    let surface_order = SurfaceOrder::from_scheme(scheme).unwrap_or_else(|| {
        notes.push(format!(
            "LBN-to-PBN mapping scheme = {scheme}: LBNs run surface by surface, cylinder by cylinder (scheme 0)"
        ));
        SurfaceOrder::Normal
    });
    layout.rest(&mut notes, "Layout Model");
    model.rest(&mut notes, "the model");

    let scale = specs.take_f64("Time scale for overheads", 0.0, 1000.0)?;
    // DiskSim adds the per-request overhead to each command's, so either may be a negative
    // adjustment of the other; a step that sums below zero takes no time.
    let per_request = specs.take_adjustment_ms("Per-request overhead time")?;
    let mut clamped = Vec::new();
    let mut pair = |what: &str| -> Result<[f64; 2], ImportError> {
        let mut both = [0.0; 2];
        for (i, after) in ["read", "write"].into_iter().enumerate() {
            let key = format!("{what} after {after}");
            let sum = (specs.take_adjustment_ms(&key)? + per_request) * scale;
            if sum < 0.0 {
                clamped.push(key);
            }
            both[i] = sum.max(0.0);
        }
        Ok(both)
    };
    let mut overheads = Overheads {
        read_hit: pair("Read hit over.")?,
        read_miss: pair("Read miss over.")?,
        write_hit: pair("Write hit over.")?,
        write_miss: pair("Write miss over.")?,
        completion: [0.0; 2],
    };
    for (i, key) in ["Read completion overhead", "Write completion overhead"]
        .into_iter()
        .enumerate()
    {
        let ms = specs.take_opt_f64(key, -MAX_ADJUSTMENT_MS, 3_600_000.0)? * scale;
        if ms < 0.0 {
            clamped.push(key.to_owned());
        }
        overheads.completion[i] = ms.max(0.0);
    }
    if !clamped.is_empty() {
        notes.push(format!(
            "{}: negative in sum, taken as no time",
            clamped.join(", ")
        ));
    }
    let bus_sector_ms = specs.take_ms("Bulk sector transfer time")?;
    let cache_segments = specs.take_u64("Number of buffer segments", 1, 65_536)? as u32;
    let segment_sectors = specs.take_u64("Segment size (in blks)", 1, 1 << 24)?;
    let max_read_ahead_sectors = specs.take_u64("Maximum read-ahead (blks)", 0, 1 << 24)?;
    let continuous = specs
        .take_opt_u64("Buffer continuous read", 0, 4)?
        .unwrap_or(3);
    let continuous_read = ContinuousRead::from_scheme(continuous).unwrap_or_else(|| {
        // Modelled by DiskSim's own end (`disk_buffer_get_max_readahead`: the end of the
        // next LBN's track, or of the track after when the segment began earlier), the
        // Atlas 10K went from 0.168 to 0.287 ms RMS, past DiskSim's 0.268: DiskSim keeps a
        // segment across partial hits, which sets where that scheme stops, and this model
        // starts a segment at each miss. Not taken alone (BENCHMARKS.md).
        notes.push(
            "Buffer continuous read = 4 (DEC's prefetch scheme): read ahead by the maximum read-ahead, as 3".into(),
        );
        ContinuousRead::SegmentEnd
    });
    // 1 caches as the model does; DiskSim's 2 is taken as 1.
    let caching = specs
        .take_opt_u64("Enable caching in buffer", 0, 2)?
        .unwrap_or(1);
    if caching == 2 {
        notes.push("Enable caching in buffer = 2: cached as at 1".into());
    }
    let buffer_cache = caching != 0;
    // The model times every transfer a sector at a time (each sector, track and cylinder
    // switch), which is DiskSim's `Calc sector by sector = 1`.
    if specs.take_opt_u64("Calc sector by sector", 0, 1)? == Some(0) {
        notes.push("Calc sector by sector = 0: transfers are timed a sector at a time".into());
    }
    let read_free_blocks = specs.take_opt_u64("Read any free blocks", 0, 1)? == Some(1);
    let over_requested = specs.take_opt_f64("Read-ahead over requested", -1.0, 1.0)?;
    if over_requested < 0.0 {
        notes.push("Read-ahead over requested = -1: read-ahead keeps the data returned".into());
    }
    let read_ahead_over_requested = over_requested > 0.0;
    // The model stops read-ahead for every write, hit or not, which is DiskSim's 1.
    if specs.take_opt_u64("Write hit stop prefetch", 0, 1)? == Some(0) {
        notes.push("Write hit stop prefetch = 0: every write stops read-ahead".into());
    }
    let stop_prefetch_in_sector = specs
        .take_opt_u64("Stop prefetch in sector", 0, 1)?
        .unwrap_or(1)
        == 1;
    let fast_write = specs.take_u64("Fast write level", 0, 2)?;
    // DiskSim refuses these without a cache (`disk_postpass_perdisk`), and so does this.
    if !buffer_cache && (fast_write > 0 || continuous > 0 || read_free_blocks) {
        return Err(fail(
            diskspecs,
            format!(
                "`Enable caching in buffer = 0` with `Fast write level = {fast_write}`, `Buffer continuous read = {continuous}` and `Read any free blocks = {}`: fast writes, read-ahead and free blocks need the cache (DiskSim refuses them too)",
                u8::from(read_free_blocks)
            ),
        ));
    }
    if fast_write == 1 {
        // DiskSim reports any fast write once its data is in the buffer, at either level;
        // level 1 only lets appending writes go first among queued bus transfers.
        notes.push("Fast write level = 1: appending writes' priority among queued bus transfers (the drive serves in arrival order); writes are reported once buffered, as at level 2".into());
    }
    // The model has one write on its way to the media at a time (the segment being
    // written), which is DiskSim's `Maximum number of write segments = 1`.
    let write_segments = specs.take_opt_u64("Maximum number of write segments", 1, 65_536)?;
    if let Some(n) = write_segments.filter(|&n| n > 1) {
        notes.push(format!(
            "Maximum number of write segments = {n}: one write segment goes to the media at a time"
        ));
    }
    let by_reqsize = specs.take_opt_f64("Set watermark by reqsize", 0.0, 1.0)? != 0.0;
    let hold_bus = specs.take_opt_f64("Hold bus entire read xfer", 0.0, 1.0)? != 0.0;
    let read_water = specs.take_opt_f64("High (read) water mark", 0.0, 1.0)?;
    if by_reqsize && !hold_bus && read_water < 1.0 {
        // DiskSim reconnects the bus once max(1, mark × the request) sectors are buffered.
        // Transferring from the first sector, as the model's overlapped transfer does, moved
        // the Atlas 10K from 0.152 to 0.182 ms RMS and the Cheetah 4LP from 0.289 to 0.378
        // (past DiskSim's 0.318): the model has no bus disconnect and reconnect, which is
        // what DiskSim's transfer pays between the mark and the end (BENCHMARKS.md).
        notes.push(format!(
            "High (read) water mark = {read_water} with Set watermark by reqsize: a read's bus transfer starts after its last sector, as at 1"
        ));
    } else if !by_reqsize && !hold_bus && read_water > 0.0 {
        // A mark of the segment's size: DiskSim waits for that much of it; the model's
        // transfer overlaps the media from the first sector, as at 0.
        notes.push(format!(
            "High (read) water mark = {read_water} of the segment: a read's bus transfer overlaps the media from its first sector, as at 0"
        ));
    }
    let read_hits_on_writes = specs.take_opt_f64("Allow read hits on write data", 0.0, 1.0)? != 0.0;
    let read_ahead_on_hit = specs.take_opt_f64("Read-ahead on idle hit", 0.0, 1.0)? != 0.0;
    let separate_write_segment = specs.take_opt_f64("Use separate write segment", 0.0, 1.0)? != 0.0;
    let combine_seq_writes = specs.take_opt_f64("Combine seq writes", 0.0, 1.0)? != 0.0;
    let queue = specs.take_u64("Max queue length", 0, 1 << 16)?;
    if queue > 1 {
        notes.push(format!(
            "Max queue length = {queue}: the drive serves one command at a time"
        ));
    }
    let _ = specs.take_opt_text("Print stats");
    let _ = specs.take_opt_text("Avg sectors per cylinder");
    if let Some(scheduler) = specs.take_opt_block("Scheduler") {
        scheduler.rest(&mut notes, "Scheduler (the drive serves in arrival order)");
    }
    specs.rest(&mut notes, "the disk");

    if zones
        .last()
        .is_some_and(|z| z.last_cylinder + 1 != cylinders)
    {
        let last = zones.last().map_or(0, |z| z.last_cylinder);
        notes.push(format!(
            "Number of cylinders = {cylinders}, but the zones end at cylinder {last}"
        ));
    }
    let mut imported = Imported {
        name,
        params: DriveParams {
            rpm,
            surfaces,
            surface_order,
            sparing_scheme: sparing_scheme as u8,
            zones,
            seek,
            full_seek_ms,
            head_switch_ms,
            write_settle_ms,
            bus_sector_ms,
            overheads,
            cache_segments,
            segment_sectors,
            max_read_ahead_sectors,
            continuous_read,
            buffer_cache,
            read_free_blocks,
            read_ahead_over_requested,
            stop_prefetch_in_sector,
            write_back: fast_write > 0,
            transfer_after_media: by_reqsize || hold_bus,
            read_hits_on_writes,
            read_ahead_on_hit,
            separate_write_segment,
            combine_seq_writes,
            capacity_sectors: 0,
        },
        not_represented: notes,
    };
    // DiskSim takes the zones' own total over `Block count` (`checknumblocks` in
    // `dm_layout_g1`, `disk_check_numblocks` before it), warning at most.
    imported.params.capacity_sectors = imported.params.zoned_sectors();
    Ok(imported)
}

/// Reads a `.parv`: the drive its `source X.diskspecs` line names, with the slowest bus's
/// per-block transfer time when that is slower than the drive's own.
///
/// # Errors
/// As [`import`], or the `.parv` names no `.diskspecs`.
pub fn import_parv(parv: &Path) -> Result<Imported, ImportError> {
    let text = read(parv)?;
    let specs = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("source "))
        .map(str::trim)
        .find(|name| name.ends_with(".diskspecs"))
        .ok_or_else(|| fail(parv, "no `source X.diskspecs` line"))?;
    let mut imported = import(&parv.parent().unwrap_or(Path::new(".")).join(specs))?;
    let mut bus_ms = 0f64;
    let mut from = 0;
    while let Some(found) = text[from..].find("disksim_bus ") {
        let start = from + found;
        from = start + 1;
        let Some(brace) = text[start..].find('{').map(|b| start + b) else {
            break;
        };
        // `disksim_bus NAME {` on one line; the topology's `disksim_bus bus0 [` is not a block.
        if text[start..brace].contains(['\n', '[']) {
            continue;
        }
        let mut p = Parser {
            text: text.as_bytes(),
            at: brace + 1,
        };
        let fields = p
            .fields(0)
            .map_err(|(at, m)| fail(parv, format!("line {}: {m}", line_of(&text, at))))?;
        let mut bus = Fields::new(parv, fields);
        for key in ["Read block transfer time", "Write block transfer time"] {
            bus_ms = bus_ms.max(bus.take_opt_f64(key, 0.0, 3_600_000.0)?);
        }
    }
    if bus_ms > imported.params.bus_sector_ms {
        imported.not_represented.push(format!(
            "the bus takes {bus_ms} ms per block, more than the drive's {} ms: the bus's is used",
            imported.params.bus_sector_ms
        ));
        imported.params.bus_sector_ms = bus_ms;
    }
    Ok(imported)
}

/// DiskSim's sparing scheme (`Sparing scheme used`, with `Rangesize for sparing`): how a
/// zone's `Number of spares` becomes the sectors it withholds from the LBN space, as
/// DiskSim's `disk_compute_blksinband` counts them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Sparing {
    scheme: u64,
    range: u64,
}

impl Sparing {
    /// DiskSim's largest scheme number (`SECTSPERZONE_SPARING_SLIPTOEND`).
    const MAX_SCHEME: u64 = 10;

    /// Reads the layout's scheme (default: spares per zone, the count as sectors).
    fn read(layout: &mut Fields<'_>) -> Result<Self, ImportError> {
        let scheme = layout
            .take_opt_u64("Sparing scheme used", 0, Self::MAX_SCHEME)?
            .unwrap_or(9);
        let range = layout
            .take_opt_u64("Rangesize for sparing", 1, 10_000_000)?
            .unwrap_or(1);

        Ok(Self { scheme, range })
    }

    /// Whether the drive model steps over slips and remaps under this scheme, as DiskSim's
    /// `g1_ltop_*` do: every scheme but none (0), whose map ignores them, and spares at
    /// the end (7), whose map DiskSim shares with the per-cylinder schemes with a spare
    /// count it never sets.
    fn maps_slips(self) -> bool {
        !matches!(self.scheme, 0 | 7)
    }

    /// Sectors zone withholds: `spares` its count, over `cylinders` cylinders of
    /// `surfaces` tracks of `spt` sectors, with `slips` slipped sectors.
    fn sectors(self, spares: u64, (cylinders, surfaces, spt): (u64, u64, u64), slips: u64) -> u64 {
        let withheld = match self.scheme {
            0 => 0,
            1 => spares.saturating_mul(spt),
            3 => spares.saturating_mul(cylinders).saturating_mul(surfaces),
            7 => slips,
            9 => spares,
            10 => spares.saturating_add(slips),
            2 | 5 => spares.saturating_mul(cylinders),
            4 | 6 => spares.saturating_mul(cylinders).saturating_add(slips),
            8 => spares.saturating_mul(cylinders / self.range),
            _ => unreachable!("schemes are checked when read"),
        };
        // Never more than the zone holds.
        withheld.min(cylinders.saturating_mul(surfaces).saturating_mul(spt))
    }
}

fn import_zones(
    layout: &mut Fields<'_>,
    notes: &mut Vec<String>,
    path: &Path,
    (surfaces, sparing): (u64, Sparing),
) -> Result<Vec<DriveZone>, ImportError> {
    let Node::List(items) = layout.take("Zones")? else {
        return Err(fail(path, "`Zones` is not a list"));
    };
    if items.is_empty() || items.len() > MAX_ZONES {
        return Err(fail(
            path,
            format!("`Zones` has {} entries (1 to {MAX_ZONES})", items.len()),
        ));
    }
    let mut zones = Vec::with_capacity(items.len());
    let (mut slips, mut defects) = (0usize, 0usize);
    for (i, item) in items.into_iter().enumerate() {
        let Node::Block { fields, .. } = item else {
            return Err(fail(path, format!("zone {i} is not a block")));
        };
        let mut z = Fields::new(path, fields);
        let first = z.take_u64("First cylinder number", 0, 10_000_000)?;
        let last = z.take_u64("Last cylinder number", first, 10_000_000)?;
        let spt = z.take_u64("Blocks per track", 1, 1 << 20)?;
        let track_skew = z.take_f64("Skew for track switch", 0.0, 1e6)?.round() as u64 % spt;
        let cylinder_skew = z.take_f64("Skew for cylinder switch", 0.0, 1e6)?.round() as u64 % spt;
        let spare_count = z.take_u64("Number of spares", 0, u64::MAX >> 8)?;
        // Positions within the zone: tracks under track sparing, else sectors.
        let positions = (last - first + 1) * surfaces * if sparing.scheme == 1 { 1 } else { spt };
        let zone_slips = z.take_positions("slips", positions)?;
        let spares = sparing.sectors(
            spare_count,
            (last - first + 1, surfaces, spt),
            zone_slips.len() as u64,
        );
        let listed = z.take_positions("defects", positions)?;
        if listed.len() % 2 == 1 {
            return Err(fail(
                path,
                format!(
                    "zone {i}: `defects` lists a defect and its spare in pairs, {} numbers given",
                    listed.len()
                ),
            ));
        }
        // A defect listed as its own spare is not moved (DiskSim skips it).
        let zone_remaps: Vec<(u64, u64)> = listed
            .chunks_exact(2)
            .map(|pair| (pair[0], pair[1]))
            .filter(|&(d, to)| d != to)
            .collect();
        slips += zone_slips.len();
        defects += zone_remaps.len();
        let first_offset = z.take_opt_f64("Offset of first block", 0.0, 1e9)?.round() as u64 % spt;
        let front_gap = z
            .take_opt_f64("Empty space at zone front", 0.0, 1e12)?
            .round() as u64;
        z.rest(notes, &format!("zone {i}"));
        if let Some(prev) = zones.last().map(|p: &DriveZone| p.last_cylinder)
            && first <= prev
        {
            return Err(fail(
                path,
                format!("zone {i} starts at cylinder {first}, inside the zone before"),
            ));
        }
        zones.push(DriveZone {
            first_cylinder: first,
            last_cylinder: last,
            sectors_per_track: spt,
            track_skew,
            cylinder_skew,
            spares,
            first_offset,
            front_gap,
            // A range longer than the zone holds no spares: the same as none.
            range_cylinders: if sparing.scheme == 8 && sparing.range <= last - first + 1 {
                sparing.range
            } else {
                0
            },
            slips: if sparing.maps_slips() {
                zone_slips
            } else {
                Vec::new()
            },
            remaps: if sparing.maps_slips() {
                zone_remaps
            } else {
                Vec::new()
            },
        });
    }
    if slips + defects > 0 && !sparing.maps_slips() {
        notes.push(format!(
            "{slips} slipped and {defects} remapped defects under sparing scheme {}: the LBN map does not step over them (it does under every scheme but 0 and 7)",
            sparing.scheme
        ));
    }
    Ok(zones)
}

/// A seek table from DiskSim's HPL equation (Ruemmler and Wilkes' two-part curve):
/// `[boundary, a, b, c, d, single]` gives `a + b·√x` below `boundary` cylinders and
/// `c + d·x` from it on, with `single` for one cylinder unless it is −1. `first_ten` (the
/// `hplplus10` type) gives distances 1 to 10 directly, one cylinder included whatever
/// `single` says (DiskSim's `dm_mech_g1_seek_1st10_plus_hpl` reads only the ten there).
/// The curve is sampled at every distance up to 100 and then in 1 % steps, which the model
/// joins with straight lines.
fn hpl_table(hpl: &[f64], first_ten: &[f64], cylinders: u64) -> Vec<(u64, f64)> {
    let [boundary, a, b, c, d, single] = [hpl[0], hpl[1], hpl[2], hpl[3], hpl[4], hpl[5]];
    let curve = |x: u64| {
        let x = x as f64;
        if x < boundary {
            a + b * x.sqrt()
        } else {
            c + d * x
        }
    };
    let mut table = Vec::new();
    let mut x = 1u64;
    while x < cylinders.max(2) {
        let ms = match x {
            1..=10 if first_ten.len() == 10 => first_ten[x as usize - 1],
            1 if single >= 0.0 => single,
            _ => curve(x),
        };
        table.push((x, ms.max(0.0)));
        x = if x < 100 { x + 1 } else { x + (x / 100).max(1) };
    }
    table
}

/// Refuses a seek curve that leaves what a drive can be: every point at most
/// [`MAX_SEEK_MS`], as the spec parser will demand of the imported spec.
fn physical_seeks(path: &Path, table: &[(u64, f64)]) -> Result<(), ImportError> {
    match table
        .iter()
        .find(|&&(_, ms)| !(ms.is_finite() && ms <= MAX_SEEK_MS))
    {
        Some(&(d, ms)) => Err(fail(
            path,
            format!(
                "`HPL seek equation values` give a seek of {ms:.3} ms at {d} cylinders; a drive's seek takes at most {MAX_SEEK_MS} ms"
            ),
        )),
        None => Ok(()),
    }
}

/// The seek table: a header line, then `distance, ms` per line.
fn read_seek(path: &Path) -> Result<Vec<(u64, f64)>, ImportError> {
    let text = read(path)?;
    let mut points: Vec<(u64, f64)> = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with("Seek distances") || line.starts_with('#') {
            continue;
        }
        let bad = || {
            fail(
                path,
                format!("line {}: expected `distance, ms`, found `{line}`", n + 1),
            )
        };
        let (d, ms) = line.split_once(',').ok_or_else(bad)?;
        let d: u64 = d.trim().parse().map_err(|_| bad())?;
        let ms: f64 = ms.trim().parse().map_err(|_| bad())?;
        if !(ms.is_finite() && ms >= 0.0) {
            return Err(bad());
        }
        if ms > MAX_SEEK_MS {
            return Err(fail(
                path,
                format!(
                    "line {}: a seek of {ms} ms; a drive's seek takes at most {MAX_SEEK_MS} ms",
                    n + 1
                ),
            ));
        }
        if points.last().is_some_and(|&(last, _)| d <= last) {
            return Err(fail(
                path,
                format!("line {}: distance {d} is not above the one before", n + 1),
            ));
        }
        if points.len() == MAX_SEEK_POINTS {
            return Err(fail(
                path,
                format!("more than {MAX_SEEK_POINTS} seek points"),
            ));
        }
        points.push((d, ms));
    }
    if points.is_empty() {
        return Err(fail(path, "no seek points"));
    }
    Ok(points)
}

fn read(path: &Path) -> Result<String, ImportError> {
    crate::input::read_text(path, crate::input::MAX_CONFIG_BYTES)
        .map_err(|e| fail(path, e.to_string()))
}

/// The fields of one block, taken one by one; what is left is reported.
struct Fields<'a> {
    path: &'a Path,
    fields: Vec<(String, Node)>,
}

impl<'a> Fields<'a> {
    fn new(path: &'a Path, fields: Vec<(String, Node)>) -> Self {
        Self { path, fields }
    }

    fn take_opt(&mut self, key: &str) -> Option<Node> {
        let i = self
            .fields
            .iter()
            .position(|(k, _)| k.eq_ignore_ascii_case(key))?;
        Some(self.fields.remove(i).1)
    }

    /// `key` as a whole number in `min..=max`, if it is there.
    fn take_opt_u64(&mut self, key: &str, min: u64, max: u64) -> Result<Option<u64>, ImportError> {
        if !self.fields.iter().any(|(k, _)| k.eq_ignore_ascii_case(key)) {
            return Ok(None);
        }
        self.take_u64(key, min, max).map(Some)
    }

    fn take(&mut self, key: &str) -> Result<Node, ImportError> {
        self.take_opt(key)
            .ok_or_else(|| fail(self.path, format!("missing `{key}`")))
    }

    fn take_opt_text(&mut self, key: &str) -> Option<String> {
        match self.take_opt(key)? {
            Node::Scalar(s) => Some(s),
            other => Some(format!("{other:?}")),
        }
    }

    fn take_text(&mut self, key: &str) -> Result<String, ImportError> {
        match self.take(key)? {
            Node::Scalar(s) => Ok(s),
            _ => Err(fail(self.path, format!("`{key}` is not a plain value"))),
        }
    }

    fn take_f64(&mut self, key: &str, min: f64, max: f64) -> Result<f64, ImportError> {
        let text = self.take_text(key)?;
        match text.parse::<f64>() {
            Ok(v) if v.is_finite() && (min..=max).contains(&v) => Ok(v),
            _ => Err(fail(
                self.path,
                format!("`{key} = {text}`: expected a number from {min} to {max}"),
            )),
        }
    }

    /// An optional number, 0 when absent.
    fn take_opt_f64(&mut self, key: &str, min: f64, max: f64) -> Result<f64, ImportError> {
        if self.fields.iter().any(|(k, _)| k.eq_ignore_ascii_case(key)) {
            self.take_f64(key, min, max)
        } else {
            Ok(0.0)
        }
    }

    /// A list of exactly `n` numbers, each finite.
    /// A list of whole numbers under `count` (positions in a zone), at most
    /// [`MAX_SLIPS`]; none if absent.
    fn take_positions(&mut self, key: &str, count: u64) -> Result<Vec<u64>, ImportError> {
        let path = self.path;
        let bad = || {
            fail(
                path,
                format!("`{key}` must be a list of at most {MAX_SLIPS} positions under {count}"),
            )
        };
        let items = match self.take_opt(key) {
            None => return Ok(Vec::new()),
            Some(Node::List(items)) => items,
            Some(_) => return Err(bad()),
        };
        if items.len() > MAX_SLIPS {
            return Err(bad());
        }
        items
            .iter()
            .map(|item| match item {
                Node::Scalar(v) => v.parse::<u64>().ok().filter(|&n| n < count),
                _ => None,
            })
            .collect::<Option<_>>()
            .ok_or_else(bad)
    }

    fn take_numbers(&mut self, key: &str, n: usize) -> Result<Vec<f64>, ImportError> {
        let path = self.path;
        let bad = || fail(path, format!("`{key}` must be a list of {n} numbers"));
        let Node::List(items) = self.take(key)? else {
            return Err(bad());
        };
        let numbers: Vec<f64> = items
            .iter()
            .map(|item| match item {
                Node::Scalar(v) => v
                    .parse::<f64>()
                    .ok()
                    .filter(|x| x.is_finite() && x.abs() < 1e9),
                _ => None,
            })
            .collect::<Option<_>>()
            .ok_or_else(bad)?;
        if numbers.len() != n {
            return Err(bad());
        }
        Ok(numbers)
    }

    /// A time that DiskSim adds to others, so it may be negative: within a second below zero.
    fn take_adjustment_ms(&mut self, key: &str) -> Result<f64, ImportError> {
        self.take_f64(key, -MAX_ADJUSTMENT_MS, 3_600_000.0)
    }

    fn take_ms(&mut self, key: &str) -> Result<f64, ImportError> {
        // (A duration; adjustments that may be negative are taken with their own bounds.)
        self.take_f64(key, 0.0, 3_600_000.0)
    }

    fn take_u64(&mut self, key: &str, min: u64, max: u64) -> Result<u64, ImportError> {
        let text = self.take_text(key)?;
        match text.parse::<f64>() {
            Ok(v) if v.fract() == 0.0 && v >= min as f64 && v <= max as f64 => Ok(v as u64),
            _ => Err(fail(
                self.path,
                format!("`{key} = {text}`: expected a whole number from {min} to {max}"),
            )),
        }
    }

    fn take_opt_block(&mut self, key: &str) -> Option<Fields<'a>> {
        match self.take_opt(key)? {
            Node::Block { fields, .. } => Some(Fields::new(self.path, fields)),
            _ => None,
        }
    }

    fn take_block(&mut self, key: &str) -> Result<Fields<'a>, ImportError> {
        let path = self.path;
        self.take_opt_block(key)
            .ok_or_else(|| fail(path, format!("missing block `{key}`")))
    }

    /// A file named by `key`, relative to this file's directory.
    fn take_path(&mut self, key: &str) -> Result<PathBuf, ImportError> {
        let name = self.take_text(key)?;
        Ok(self.path.parent().unwrap_or(Path::new(".")).join(name))
    }

    /// `Model = source FILE`.
    fn take_source(&mut self, key: &str) -> Result<PathBuf, ImportError> {
        let text = self.take_text(key)?;
        let Some(name) = text.strip_prefix("source").map(str::trim) else {
            return Err(fail(
                self.path,
                format!("`{key} = {text}`: expected `source FILE`"),
            ));
        };
        Ok(self.path.parent().unwrap_or(Path::new(".")).join(name))
    }

    /// Reports every field not taken whose value is not zero.
    fn rest(self, notes: &mut Vec<String>, within: &str) {
        for (key, value) in self.fields {
            match value {
                Node::Scalar(v) if v.parse::<f64>().is_ok_and(|x| x == 0.0) => {}
                Node::Scalar(v) => notes.push(format!("{within}: {key} = {v}")),
                other => notes.push(format!("{within}: {key} = {other:?}")),
            }
        }
    }
}

/// A top-level block: its type, its name and its fields.
type TopBlock = (String, String, Vec<(String, Node)>);

/// The first `kind NAME { … }` block of a file.
fn first_block(path: &Path, text: &str) -> Result<TopBlock, ImportError> {
    let mut p = Parser {
        text: text.as_bytes(),
        at: 0,
    };
    let header = p.until(b"{").ok_or_else(|| fail(path, "no `{` block"))?;
    let mut words = header.split_whitespace();
    let kind = words.next().unwrap_or_default().to_owned();
    let name = words.collect::<Vec<_>>().join(" ");
    p.at += 1;
    let fields = p
        .fields(0)
        .map_err(|(at, m)| fail(path, format!("line {}: {m}", line_of(text, at))))?;
    Ok((kind, name, fields))
}

fn line_of(text: &str, at: usize) -> usize {
    1 + text.as_bytes()[..at.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
}

struct Parser<'t> {
    text: &'t [u8],
    at: usize,
}

type ParseResult<T> = Result<T, (usize, String)>;

impl Parser<'_> {
    fn skip_space(&mut self) {
        while self.at < self.text.len() {
            match self.text[self.at] {
                b'#' => {
                    while self.at < self.text.len() && self.text[self.at] != b'\n' {
                        self.at += 1;
                    }
                }
                b if b.is_ascii_whitespace() => self.at += 1,
                _ => break,
            }
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.skip_space();
        self.text.get(self.at).copied()
    }

    /// The text up to (not including) the first of `stops`, comments removed.
    fn until(&mut self, stops: &[u8]) -> Option<String> {
        let mut out = Vec::new();
        while self.at < self.text.len() {
            let b = self.text[self.at];
            if stops.contains(&b) {
                return Some(String::from_utf8_lossy(&out).trim().to_owned());
            }
            if b == b'#' {
                self.skip_space();
                out.push(b' ');
                continue;
            }
            out.push(b);
            self.at += 1;
        }
        None
    }

    /// `Key = value, …` up to the closing `}`.
    fn fields(&mut self, depth: usize) -> ParseResult<Vec<(String, Node)>> {
        self.within_depth(depth)?;
        let mut fields = Vec::new();
        loop {
            match self.peek() {
                None => return Err((self.at, "unclosed `{`".into())),
                Some(b'}') => {
                    self.at += 1;
                    return Ok(fields);
                }
                Some(b',') => self.at += 1,
                Some(_) => {
                    let key = self
                        .until(b"=}")
                        .ok_or((self.at, "unclosed `{`".to_owned()))?;
                    if self.text.get(self.at) != Some(&b'=') {
                        return Err((self.at, format!("`{key}` has no `=`")));
                    }
                    self.at += 1;
                    let value = self.value(depth)?;
                    fields.push((key, value));
                }
            }
        }
    }

    /// Every way in, blocks and lists alike, counts against one depth limit: the parser
    /// recurses, so nesting from the file must never reach the stack's end.
    fn within_depth(&self, depth: usize) -> ParseResult<()> {
        if depth > MAX_DEPTH {
            return Err((self.at, format!("nested more than {MAX_DEPTH} deep")));
        }
        Ok(())
    }

    fn value(&mut self, depth: usize) -> ParseResult<Node> {
        self.within_depth(depth)?;
        match self.peek() {
            Some(b'[') => {
                self.at += 1;
                let mut items = Vec::new();
                loop {
                    match self.peek() {
                        None => return Err((self.at, "unclosed `[`".into())),
                        Some(b']') => {
                            self.at += 1;
                            return Ok(Node::List(items));
                        }
                        Some(b',') => self.at += 1,
                        Some(_) => items.push(self.value(depth + 1)?),
                    }
                }
            }
            Some(_) => {
                let start = self.at;
                let text = self.until(b"{,}]\n").unwrap_or_default();
                if self.text.get(self.at) == Some(&b'{') {
                    self.at += 1;
                    let fields = self.fields(depth + 1)?;
                    return Ok(Node::Block { kind: text, fields });
                }
                if text.is_empty() {
                    return Err((start, "a value is missing".into()));
                }
                Ok(Node::Scalar(text))
            }
            None => Err((self.at, "a value is missing".into())),
        }
    }
}

/// The spec-file text for `imported`: every parameter, and what was not represented as
/// comments.
pub fn to_spec_text(imported: &Imported, source: &Path) -> String {
    use std::fmt::Write;
    let p = &imported.params;
    let o = &p.overheads;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# {} imported from {} by `schedhost import-disksim`",
        imported.name,
        source.display()
    );
    for note in &imported.not_represented {
        let _ = writeln!(s, "# not represented: {note}");
    }
    let _ = writeln!(s, "model = drive");
    let _ = writeln!(s, "rpm = {}", p.rpm);
    let _ = writeln!(s, "surfaces = {}", p.surfaces);
    let _ = writeln!(
        s,
        "surface_order = {} # DiskSim's LBN-to-PBN mapping scheme",
        p.surface_order.scheme()
    );
    let _ = writeln!(s, "capacity_sectors = {}", p.capacity_sectors);
    let _ = writeln!(s, "full_seek_ms = {}", p.full_seek_ms);
    let _ = writeln!(s, "head_switch_ms = {}", p.head_switch_ms);
    let _ = writeln!(s, "write_settle_ms = {}", p.write_settle_ms);
    let _ = writeln!(s, "bus_sector_ms = {}", p.bus_sector_ms);
    for (name, pair) in [
        ("read_hit", o.read_hit),
        ("read_miss", o.read_miss),
        ("write_hit", o.write_hit),
        ("write_miss", o.write_miss),
    ] {
        let _ = writeln!(s, "{name}_after_read_ms = {}", pair[0]);
        let _ = writeln!(s, "{name}_after_write_ms = {}", pair[1]);
    }
    let _ = writeln!(s, "read_completion_ms = {}", o.completion[0]);
    let _ = writeln!(s, "write_completion_ms = {}", o.completion[1]);
    let _ = writeln!(s, "cache_segments = {}", p.cache_segments);
    let _ = writeln!(s, "segment_sectors = {}", p.segment_sectors);
    let _ = writeln!(s, "max_read_ahead_sectors = {}", p.max_read_ahead_sectors);
    let _ = writeln!(
        s,
        "continuous_read = {} # DiskSim's Buffer continuous read",
        p.continuous_read.scheme()
    );
    // The buffer's switches, each 0 or 1.
    for (key, on) in [
        ("buffer_cache", p.buffer_cache),
        ("read_free_blocks", p.read_free_blocks),
        ("read_ahead_over_requested", p.read_ahead_over_requested),
        ("stop_prefetch_in_sector", p.stop_prefetch_in_sector),
        ("write_back", p.write_back),
        ("transfer_after_media", p.transfer_after_media),
        ("read_hits_on_writes", p.read_hits_on_writes),
        ("read_ahead_on_hit", p.read_ahead_on_hit),
        ("separate_write_segment", p.separate_write_segment),
        ("combine_seq_writes", p.combine_seq_writes),
    ] {
        let _ = writeln!(s, "{key} = {}", u8::from(on));
    }
    let _ = writeln!(
        s,
        "# zone = first_cylinder last_cylinder sectors_per_track track_skew cylinder_skew spares first_offset front_gap [range_cylinders]"
    );
    let _ = writeln!(
        s,
        "# slips = zone position...; remap = zone defect spare (positions in the zone, in {})",
        if p.sparing_scheme == 1 {
            "tracks"
        } else {
            "sectors"
        }
    );
    let _ = writeln!(
        s,
        "sparing_scheme = {} # DiskSim's Sparing scheme used",
        p.sparing_scheme
    );
    for (i, z) in p.zones.iter().enumerate() {
        let _ = write!(
            s,
            "zone = {} {} {} {} {} {} {} {}",
            z.first_cylinder,
            z.last_cylinder,
            z.sectors_per_track,
            z.track_skew,
            z.cylinder_skew,
            z.spares,
            z.first_offset,
            z.front_gap
        );
        if z.range_cylinders > 0 {
            let _ = write!(s, " {}", z.range_cylinders);
        }
        let _ = writeln!(s);
        zone_slips(&mut s, i, z);
    }
    let _ = writeln!(s, "# seek = distance_cylinders ms");
    for (d, ms) in &p.seek {
        let _ = writeln!(s, "seek = {d} {ms}");
    }
    s
}

/// Zone `i`'s slips, on one line, and its remaps, a line each.
fn zone_slips(s: &mut String, i: usize, z: &DriveZone) {
    use std::fmt::Write;
    if !z.slips.is_empty() {
        let _ = write!(s, "slips = {i}");
        for at in &z.slips {
            let _ = write!(s, " {at}");
        }
        let _ = writeln!(s);
    }
    for (defect, spare) in &z.remaps {
        let _ = writeln!(s, "remap = {i} {defect} {spare}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_sparing_scheme_withholds_what_disksim_counts() {
        let zone = (10, 4, 100); // cylinders, surfaces, sectors per track
        let scheme = |scheme, range| Sparing { scheme, range };
        assert_eq!(scheme(0, 1).sectors(5, zone, 2), 0);
        assert_eq!(scheme(1, 1).sectors(5, zone, 2), 500, "tracks");
        assert_eq!(scheme(2, 1).sectors(5, zone, 2), 50, "per cylinder");
        assert_eq!(scheme(3, 1).sectors(5, zone, 2), 200, "per track");
        assert_eq!(
            scheme(4, 1).sectors(5, zone, 2),
            52,
            "per cylinder, slips to the end"
        );
        assert_eq!(scheme(7, 1).sectors(5, zone, 2), 2, "the slips");
        assert_eq!(
            scheme(8, 3).sectors(5, zone, 2),
            15,
            "per whole range of 3 cylinders"
        );
        assert_eq!(scheme(9, 1).sectors(5, zone, 2), 5, "per zone");
        assert_eq!(scheme(10, 1).sectors(5, zone, 2), 7);
        assert_eq!(
            scheme(1, 1).sectors(1_000, zone, 0),
            4_000,
            "never more than the zone"
        );
    }

    #[test]
    fn disksim_blocks_lists_and_comments_parse_into_fields() {
        let text = "disksim_disk D {\n  Model = source d.model,  # the layout\n  Zones = [ z { A = 1, B = 2 }, z { A = 3 } ],\n  Sub = t { X = 0.5 }\n}\n";
        let (kind, name, fields) = first_block(Path::new("d"), text).unwrap();
        assert_eq!((kind.as_str(), name.as_str()), ("disksim_disk", "D"));
        assert_eq!(
            fields[0],
            ("Model".into(), Node::Scalar("source d.model".into()))
        );
        let Node::List(zones) = &fields[1].1 else {
            panic!("{fields:?}")
        };
        assert_eq!(zones.len(), 2);
        assert!(matches!(&fields[2].1, Node::Block { kind, .. } if kind == "t"));
    }

    #[test]
    fn hpl_seek_curves_become_a_table_with_the_first_ten_and_single_cylinder_times() {
        let hpl = [300.0, 3.75, 0.33, 7.69, 0.0059, 0.2];
        let table = hpl_table(&hpl, &[], 3000);
        assert_eq!(table[0], (1, 0.2), "the single-cylinder time");
        let at = |d: u64| table.iter().find(|p| p.0 == d).unwrap().1;
        assert!((at(100) - (3.75 + 0.33 * 10.0)).abs() < 1e-9);
        let last = *table.last().unwrap();
        assert!(last.0 < 3000 && (last.1 - (7.69 + 0.0059 * last.0 as f64)).abs() < 1e-9);
        assert!(table.windows(2).all(|w| w[0].0 < w[1].0), "distances rise");
        let ten: Vec<f64> = (1..=10).map(f64::from).collect();
        let table = hpl_table(&[300.0, 3.75, 0.33, 7.69, 0.0059, -1.0], &ten, 3000);
        assert_eq!(&table[..3], &[(1, 1.0), (2, 2.0), (3, 3.0)]);
    }

    #[test]
    fn malformed_disksim_files_name_the_line() {
        for (text, want) in [
            ("d D {\n A = 1,\n B 2\n}", "line 4: `B 2` has no `=`"),
            ("d D {\n A = [ 1, 2\n", "unclosed `[`"),
            ("d D {\n A = 1,\n", "unclosed `{`"),
        ] {
            let err = first_block(Path::new("x.diskspecs"), text)
                .unwrap_err()
                .to_string();
            assert!(err.contains(want), "{err}");
        }
        let deep = format!("d D {{ {} }}", "A = t { ".repeat(40));
        let err = first_block(Path::new("x"), &deep).unwrap_err().to_string();
        assert!(err.contains("nested more than"), "{err}");
    }

    #[test]
    fn a_seek_curve_of_years_is_refused_by_name() {
        // c + d·x with d = 1e8 ms per cylinder: years at the full stroke.
        let table = hpl_table(&[300.0, 3.75, 0.33, 7.69, 1e8, 0.2], &[], 3000);
        let err = physical_seeks(Path::new("x.model"), &table)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("HPL seek equation values") && err.contains("at most 1000 ms"),
            "{err}"
        );
        let real = hpl_table(&[300.0, 3.75, 0.33, 7.69, 0.0059, 0.2], &[], 3000);
        assert!(physical_seeks(Path::new("x.model"), &real).is_ok());
    }

    #[test]
    fn hplplus10_takes_its_first_ten_seeks_before_the_single_cylinder_value_and_the_curve_after() {
        let hpl = [300.0, 3.0, 0.5, 8.0, 0.01, 0.9];
        let ten: Vec<f64> = (1..=10).map(|d| f64::from(d) / 10.0).collect();
        let table = hpl_table(&hpl, &ten, 1000);
        let at = |d: u64| table.iter().find(|&&(x, _)| x == d).unwrap().1;
        assert_eq!(
            at(1),
            0.1,
            "the first of the ten, not the single-cylinder 0.9"
        );
        assert_eq!(at(10), 1.0);
        assert_eq!(at(11), 3.0 + 0.5 * 11f64.sqrt());
        assert_eq!(at(300), 8.0 + 0.01 * 300.0);
        // Plain hpl: the single-cylinder value, then the curve.
        let table = hpl_table(&hpl, &[], 1000);
        assert_eq!(table[0], (1, 0.9));
        assert_eq!(table[1], (2, 3.0 + 0.5 * 2f64.sqrt()));
    }

    #[test]
    fn brackets_nested_past_the_limit_are_refused_not_recursed_into() {
        // 60 000 brackets overflowed the stack when only blocks counted against the limit.
        let deep = format!("d D {{ A = {} }}", "[".repeat(60_000));
        let err = first_block(Path::new("x"), &deep).unwrap_err().to_string();
        assert!(err.contains("nested more than"), "{err}");
    }
}
