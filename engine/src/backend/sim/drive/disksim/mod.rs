//! Importing a DiskSim drive: its `.diskspecs` (controller, cache, overheads), the `.model`
//! it names (surfaces, zones, skews, spares, mechanics) and the `.seek` table that names.
//!
//! DiskSim's parameter files are nested blocks, `type NAME { Key = value, … }`, with lists in
//! `[ … ]` and `#` comments. Every parameter is either carried into [`DriveParams`], or
//! reported in [`Imported::not_represented`] with its value: none is dropped silently.

use std::path::{Path, PathBuf};

mod geometry;
mod grammar;
mod spec_text;

use geometry::*;
use grammar::*;
pub use spec_text::to_spec_text;

use super::{
    ContinuousRead, DriveParams, DriveZone, MAX_ADJUSTMENT_MS, MAX_SEEK_MS, MAX_SLIPS, Overheads,
    SurfaceOrder,
};

/// Deepest nesting accepted (DiskSim's own files nest four deep).
const MAX_DEPTH: usize = 16;
/// Most zones and seek points accepted.
const MAX_ZONES: usize = 4096;
const MAX_SEEK_POINTS: usize = 1 << 20;

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
    import_specs(diskspecs)
}

/// [`import`], which a `.parv` follows with its bus.
fn import_specs(diskspecs: &Path) -> Result<Imported, ImportError> {
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
    // Only the types that name them use the table file, the HPL equation, the first ten
    // seeks and the average and constant seek times (`dm_mech_g1`'s seek functions switch on
    // the type; the average serves its `linear` and `curve` types); a drive may carry the
    // others, and DiskSim ignores them.
    for unused in [
        "Full seek curve",
        "HPL seek equation values",
        "First ten seek times",
        "Average seek time",
        "Constant seek time",
    ] {
        let _ = mech.take_opt(unused);
    }
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
    let reach = zones.iter().map(|z| z.last_cylinder).max().unwrap_or(0);
    extend_seeks_as_disksim(&mut seek, reach);
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
        data_prep: 0.0,
        reselect: 0.0,
        disconnect: [0.0; 3],
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
    // Where DiskSim's controller charges these (`disk_read_arrive`, `disk_write_arrive`,
    // `disk_check_bus`, `disk_reconnection_or_transfer_complete`): before each data
    // transfer; on taking the bus again; on giving it up after a read's command or a
    // write's data.
    let mut controller = |key: &str| -> Result<f64, ImportError> {
        Ok(specs.take_opt_f64(key, 0.0, 3_600_000.0)? * scale)
    };
    overheads.data_prep = controller("Data preparation overhead")?;
    overheads.reselect = controller("First reselect overhead")?;
    overheads.disconnect = [
        controller("Read disconnect afterread")?,
        controller("Read disconnect afterwrite")?,
        controller("Write disconnect overhead")?,
    ];
    // `Extra write disconnect` holds a write's media access back until enough of its data
    // is in (`disk_buffer_block_available`). The overheads after it DiskSim charges only to
    // a write its controller flags for an extra disconnect, and the code that would flag
    // one is commented out of its `disk_buffer_select_segment`: no request of DiskSim's
    // pays them.
    let extra_write_disconnect = specs.take_opt_f64("Extra write disconnect", 0.0, 1.0)? != 0.0;
    for unused in [
        "Other reselect overhead",
        "Extradisc command overhead",
        "Extradisc disconnect overhead",
        "Extradisc inter-disconnect delay",
        "Extradisc 2nd disconnect overhead",
        "Extradisc seek delta",
    ] {
        let _ = specs.take_opt(unused);
    }
    if !clamped.is_empty() {
        notes.push(format!(
            "{}: negative in sum, taken as no time",
            clamped.join(", ")
        ));
    }
    let bus_sector_ms = specs.take_ms("Bulk sector transfer time")?;
    // A write's positioning takes at least this, unless it continues a sequential write
    // stream (`disk_check_hda_pending` sets it as `disk_initiate_seek`'s minimum).
    let min_write_seek_ms = specs.take_opt_f64("Minimum seek delay", 0.0, MAX_SEEK_MS)?;
    let cache_segments = specs.take_u64("Number of buffer segments", 1, 65_536)? as u32;
    let segment_sectors = specs.take_u64("Segment size (in blks)", 1, 1 << 24)?;
    let declared_max = specs.take_u64("Maximum read-ahead (blks)", 0, 1 << 24)?;
    let declared_min = specs
        .take_opt_u64("Minimum read-ahead (blks)", 0, 1 << 24)?
        .unwrap_or(0);
    let continuous = specs
        .take_opt_u64("Buffer continuous read", 0, 4)?
        .unwrap_or(3);
    // DiskSim's `disk_postpass_perdisk`: no minimum where nothing is read ahead, and a
    // maximum under the minimum (or any, where nothing is read ahead) taken as the minimum.
    let min_read_ahead_sectors = if continuous == 0 { 0 } else { declared_min };
    let max_read_ahead_sectors = if declared_max < min_read_ahead_sectors || continuous == 0 {
        min_read_ahead_sectors
    } else {
        declared_max
    };
    // Every scheme DiskSim has (0 to 4) is the model's.
    let continuous_read =
        ContinuousRead::from_scheme(continuous).unwrap_or(ContinuousRead::SegmentEnd);
    // DiskSim accepts 0 to 2 and reads it only as on or off (`currdisk->enablecache` in
    // `disk_release_hda`, `disk_buffer_check_read_segments`, `disk_postpass_perdisk`): 2
    // caches as 1 does, as the HP C2490A of its suite declares.
    let caching = specs
        .take_opt_u64("Enable caching in buffer", 0, 2)?
        .unwrap_or(1);
    let buffer_cache = caching != 0;
    // The model times every transfer a sector at a time (each sector, track and cylinder
    // switch), which is DiskSim's `Calc sector by sector = 1`.
    if specs.take_opt_u64("Calc sector by sector", 0, 1)? == Some(0) {
        notes.push("Calc sector by sector = 0: transfers are timed a sector at a time".into());
    }
    let read_free_blocks = specs.take_opt_u64("Read any free blocks", 0, 1)? == Some(1);
    // DiskSim's -1 erases a read's data from its segment once it completes, which also
    // frees the segment's room for read-ahead past the read's end.
    let over_requested = specs.take_opt_f64("Read-ahead over requested", -1.0, 1.0)?;
    let drop_returned_data = over_requested < 0.0;
    let read_ahead_over_requested = over_requested > 0.0 || drop_returned_data;
    // The model stops read-ahead for every write, hit or not, which is DiskSim's 1.
    if specs.take_opt_u64("Write hit stop prefetch", 0, 1)? == Some(0) {
        // DiskSim stops a read-ahead for any command once past its minimum
        // (`disk_buffer_stopable_access`); the flag also lowers the read-ahead end of a
        // segment a write overlaps, so that it is not read on later.
        notes.push("Write hit stop prefetch = 0: every write stops read-ahead, as DiskSim stops it for any command; a segment the write overlaps is dropped, where DiskSim keeps its read-ahead end for a later read-ahead on an idle hit".into());
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
    // DiskSim takes 1 to the number of segments (`disk_postpass_perdisk`) and reads the
    // count only where `disk_check_hda` finds no segment for the next request and recycles
    // a read's for a write (`disk_buffer_recyclable_segment_check`); its choice of a
    // segment for a write leaves the count out (`disk_buffer_select_write_segment`). With
    // one command on the drive at a time (the model's queue depth) the mechanism takes the
    // next one with at most the read-ahead's segment busy, so any count serves alike, as
    // the Cheetah 9LP of its suite declares 3.
    specs.take_opt_u64(
        "Maximum number of write segments",
        1,
        u64::from(cache_segments),
    )?;
    let by_reqsize = specs.take_opt_f64("Set watermark by reqsize", 0.0, 1.0)? != 0.0;
    // Held, the bus follows the media from a read's reconnection to its last sector; given
    // up, it is taken again as sectors arrive (below).
    let hold_read = specs.take_opt_f64("Hold bus entire read xfer", 0.0, 1.0)? != 0.0;
    let read_water = specs.take_opt_f64("High (read) water mark", 0.0, 1.0)?;
    // A drive that never disconnects takes the bus with the command and keeps it: a read
    // goes READY_TO_TRANSFER at once whatever its water mark (`disk_read_arrive`), and its
    // data crosses as the media delivers it (`disk_buffer_transfer_size` waits, -2, rather
    // than disconnect), which is the model's overlapped transfer; no mark applies.
    let never_disconnect = specs.take_opt_f64("Never disconnect", 0.0, 1.0)? != 0.0;
    // A write's first transfer fills at most its segment; DiskSim reconnects for more once
    // the data still to go to the media has drained to the low water mark, and sends what
    // room there is then (`disk_request_needs_bus`; the mark in blocks from
    // `disk_select_bus_request`: max(1, mark × min(segment, request)) by the request's
    // size, else the mark × the segment rounded up). Holding the bus for the whole write,
    // the drive takes more as soon as room frees (`write_holds_bus`).
    let write_holds_bus = specs.take_opt_f64("Hold bus entire write xfer", 0.0, 1.0)? != 0.0;
    let write_water = specs.take_opt_f64("Low (write) water mark", 0.0, 1.0)?;
    let write_mark = if by_reqsize {
        ((segment_sectors as f64 * write_water) as u64).max(1)
    } else {
        (segment_sectors as f64 * write_water + 0.999_999_999_9) as u64
    };
    // Otherwise DiskSim reconnects for a read once its water mark of sectors is buffered:
    // max(1, mark × the request) by the request's size, else the mark × the segment
    // (`disk_read_arrive`), paying the reselect and data preparation overheads
    // (`disk_check_bus`). It then sends what is buffered and follows the media; not holding
    // the bus, it gives the bus up whenever the transfer catches the media and reconnects
    // at the mark again (`disk_reconnection_or_transfer_complete`). The model charges the
    // first reconnection: the later ones cost nothing where the drive declares no reselect
    // or preparation overhead, and are listed where it does.
    let after_media = !never_disconnect && by_reqsize && read_water >= 1.0;
    let read_water_mark = if never_disconnect { 0.0 } else { read_water };
    let reconnect_ms = overheads.reselect + overheads.data_prep;
    if !never_disconnect && !hold_read && read_water_mark < 1.0 && reconnect_ms > 0.0 {
        notes.push(format!(
            "Hold bus entire read xfer = 0 with {reconnect_ms} ms to reselect and prepare data: a read that catches up with the media gives the bus up and reselects at its water mark again, paying that each time; the model charges it once, at the first reselection"
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
        drive_scheduler(scheduler, &mut notes)?;
    }
    let immediate_partial_hit = specs.take_opt_u64("Immed transfer partial hit", 0, 1)? == Some(1);
    // DiskSim passes these to its mechanism as `immed` (`g1_access_block`): zero-latency
    // access. Its mode 2 is taken as 1, and said.
    let mut immediate = [false; 2];
    for (i, key) in ["Immediate buffer read", "Immediate buffer write"]
        .iter()
        .enumerate()
    {
        let mode = specs.take_opt_u64(key, 0, 2)?.unwrap_or(0);
        immediate[i] = mode > 0;
        if mode == 2 {
            notes.push(format!("{key} = 2: taken as 1 (zero-latency access)"));
        }
    }
    // DiskSim reads it in two places: whether a read sector's room in its segment is checked
    // as the head reaches the sector or once it has been read (`disk_buffer_sector_done`),
    // and whether a read checks its room before it leaves for a remapped sector's spare in
    // mid-transfer (`disk_get_remapped_sector`), which the model never does (listed with the
    // remaps, where a drive declares any).
    let read_direct = specs.take_opt_u64("Read directly to buffer", 0, 1)?;
    specs.rest(&mut notes, "the disk");
    // `Number of cylinders` bounds nothing beyond the seek table: DiskSim's layout counts
    // each zone's blocks from the zone's own cylinders (`dm_layout_g1_compute_blksinband`),
    // and so does the model, where a drive of DiskSim's suite ends its last zone at the
    // declared count (2629 of 2629 cylinders).
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
            min_write_seek_ms,
            bus_sector_ms,
            write_bus_sector_ms: None,
            overheads,
            cache_segments,
            segment_sectors,
            max_read_ahead_sectors,
            min_read_ahead_sectors,
            continuous_read,
            buffer_cache,
            read_free_blocks,
            read_ahead_over_requested,
            drop_returned_data,
            stop_prefetch_in_sector,
            read_direct_to_buffer: read_direct != Some(0),
            extra_write_disconnect,
            write_back: fast_write > 0,
            transfer_after_media: after_media,
            read_water_mark,
            read_water_of_segment: !by_reqsize,
            write_water_mark: write_mark,
            write_holds_bus,
            never_disconnect,
            immediate_partial_hit,
            immediate_read: immediate[0],
            immediate_write: immediate[1],
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
/// per-block transfer time when that is slower than the drive's own (DiskSim's
/// `disk_get_blktranstime` takes the slower of the two).
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
    let mut imported = import_specs(&parv.parent().unwrap_or(Path::new(".")).join(specs))?;
    // The slowest bus's per-block time, reading and writing.
    let mut bus_ms = [0f64; 2];
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
        for (slowest, key) in bus_ms
            .iter_mut()
            .zip(["Read block transfer time", "Write block transfer time"])
        {
            *slowest = slowest.max(bus.take_opt_f64(key, 0.0, 3_600_000.0)?);
        }
    }
    // A block crosses at the slower of the disk's bus, in the transfer's direction, and the
    // disk itself, as DiskSim's `disk_get_blktranstime` takes it.
    let disk_ms = imported.params.bus_sector_ms;
    let [read_ms, write_ms] = bus_ms.map(|ms| ms.max(disk_ms));
    imported.params.bus_sector_ms = read_ms;
    imported.params.write_bus_sector_ms = (write_ms != read_ms).then_some(write_ms);
    Ok(imported)
}

#[cfg(test)]
mod tests;

/// The drive's own queue (`disksim_ioqueue`). The model serves a drive's commands in arrival
/// order, which is DiskSim's FCFS (`Scheduling policy = 1`, `disksim_ioqueue.c`). Under FCFS
/// the cylinder mapping orders nothing, and the timeout and priority schedulers act only
/// where their schemes are on; anything else set is listed.
fn drive_scheduler(mut queue: Fields<'_>, notes: &mut Vec<String>) -> Result<(), ImportError> {
    const WITHIN: &str = "Scheduler (the drive serves in arrival order)";
    let policy = queue
        .take_opt_u64("Scheduling policy", 1, 1_000)?
        .unwrap_or(1);
    let mapping = queue.take_opt_u64("Cylinder mapping strategy", 0, 1_000)?;
    if policy != 1 {
        notes.push(format!(
            "{WITHIN}: Scheduling policy = {policy} (FCFS is 1)"
        ));
        if let Some(m) = mapping.filter(|&m| m != 0) {
            notes.push(format!("{WITHIN}: Cylinder mapping strategy = {m}"));
        }
    }
    for (scheme, its) in [
        (
            "Scheduling timeout scheme",
            &["Timeout time/weight", "Timeout scheduling"][..],
        ),
        ("Scheduling priority scheme", &["Priority scheduling"][..]),
    ] {
        let on = queue.take_opt_u64(scheme, 0, 1_000)?.unwrap_or(0);
        for key in its {
            let value = queue.take_opt_f64(key, 0.0, 1e9)?;
            if on != 0 && value != 0.0 {
                notes.push(format!("{WITHIN}: {key} = {value} ({scheme} = {on})"));
            }
        }
        if on != 0 {
            notes.push(format!("{WITHIN}: {scheme} = {on}"));
        }
    }
    queue.rest(notes, WITHIN);
    Ok(())
}
