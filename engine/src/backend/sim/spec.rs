//! Choosing a simulated device: `sim:null`, `sim:ssd`, `sim:hdd`, or a spec file that names a
//! model and overrides its parameters:
//!
//! ```text
//! # a slower, NCQ-less disk
//! model = hdd
//! rpm = 5400
//! ncq_depth = 1
//! ```
//!
//! Keys are the field names of [`HddParams`], [`SsdParams`] and [`NullParams`]. A `drive`
//! (a disk described as DiskSim describes one, usually written by `schedhost import-disksim`)
//! takes [`DriveParams`]' scalars plus repeated `zone = first last spt track_skew
//! cylinder_skew spares` and `seek = distance ms` lines; the first of each replaces the
//! default table.

use std::path::{Path, PathBuf};

use super::drive::{Drive, MAX_SEEK_MS};
use super::faults::FaultPlan;
use super::{
    ContinuousRead, DeviceModel, DriveParams, DriveZone, Hdd, HddParams, MAX_SLIPS, Null,
    NullParams, Ssd, SsdParams, SurfaceOrder,
};

/// A device model with its parameters.
#[derive(Debug, Clone, PartialEq)]
pub enum DeviceSpec {
    /// The null device.
    Null(NullParams),
    /// The flash device.
    Ssd(SsdParams),
    /// The disk.
    Hdd(HddParams),
    /// A disk described parameter by parameter (DiskSim's way).
    Drive(Box<DriveParams>),
}

/// What is wrong with a `--device` argument or spec file.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    /// Not `sim:…` and not a readable file.
    #[error(
        "--device {arg}: not a simulated device (sim:null, sim:ssd, sim:hdd) and not a readable spec file: {reason}"
    )]
    Unknown {
        /// The argument.
        arg: String,
        /// Why the file could not be read.
        reason: String,
    },
    /// A line of a spec file.
    #[error("{path}:{line}: {message}")]
    Line {
        /// The spec file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// A DiskSim drive that could not be imported.
    #[error("--device {arg}: {reason}")]
    Import {
        /// The argument.
        arg: String,
        /// What the importer said.
        reason: String,
    },
    /// The file names no model.
    #[error("{0}: no `model = null|ssd|hdd|drive` line")]
    NoModel(PathBuf),
}

impl DeviceSpec {
    /// Parses a `--device` argument.
    ///
    /// # Errors
    /// A [`SpecError`] naming the argument, or the file and line at fault.
    pub fn parse(arg: &str) -> Result<Self, SpecError> {
        Self::parse_with_faults(arg).map(|(spec, _)| spec)
    }

    /// Parses a `--device` argument and the fault plan its spec file gives (`faults = …`,
    /// see [`FaultPlan`]); devices named `sim:NAME` or imported from DiskSim have none.
    ///
    /// # Errors
    /// A [`SpecError`] naming the argument, or the file and line at fault.
    pub fn parse_with_faults(arg: &str) -> Result<(Self, FaultPlan), SpecError> {
        match arg {
            "sim:null" => return Ok((Self::Null(NullParams::default()), FaultPlan::default())),
            "sim:ssd" => return Ok((Self::Ssd(SsdParams::default()), FaultPlan::default())),
            "sim:hdd" => return Ok((Self::Hdd(HddParams::default()), FaultPlan::default())),
            _ => {}
        }
        let path = Path::new(arg);
        let disksim = match path.extension().and_then(|e| e.to_str()) {
            Some("diskspecs") => Some(super::drive::disksim::import(path)),
            Some("parv") => Some(super::drive::disksim::import_parv(path)),
            _ => None,
        };
        if let Some(imported) = disksim {
            let imported = imported.map_err(|e| SpecError::Import {
                arg: arg.to_owned(),
                reason: e.to_string(),
            })?;
            return Ok((Self::Drive(Box::new(imported.params)), FaultPlan::default()));
        }
        let text = crate::input::read_text(Path::new(arg), crate::input::MAX_CONFIG_BYTES)
            .map_err(|e| SpecError::Unknown {
                arg: arg.to_owned(),
                reason: e.to_string(),
            })?;
        Self::parse_file_with_faults(Path::new(arg), &text)
    }

    /// Parses the text of a spec file; `path` names it in errors. A `faults` line is
    /// checked, and left to [`Self::parse_file_with_faults`].
    ///
    /// # Errors
    /// A [`SpecError::Line`] for the first bad line.
    pub fn parse_file(path: &Path, text: &str) -> Result<Self, SpecError> {
        Self::parse_file_with_faults(path, text).map(|(spec, _)| spec)
    }

    /// Parses the text of a spec file and its fault plan (`faults = read_errors=0.01,…`).
    ///
    /// # Errors
    /// A [`SpecError::Line`] for the first bad line.
    pub fn parse_file_with_faults(path: &Path, text: &str) -> Result<(Self, FaultPlan), SpecError> {
        let mut spec: Option<Self> = None;
        let mut faults: Option<FaultPlan> = None;
        let mut tables_given: Vec<&str> = Vec::new();
        for (n, raw) in text.lines().enumerate() {
            let line = raw.split(['#', ';']).next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let err = |message: String| SpecError::Line {
                path: path.to_owned(),
                line: n + 1,
                message,
            };
            let Some((key, value)) = line.split_once('=') else {
                return Err(err(format!("expected `key = value`, found `{line}`")));
            };
            let (key, value) = (key.trim(), value.trim());
            if key == "faults" {
                if faults.is_some() {
                    return Err(err("`faults` given twice".into()));
                }
                faults = Some(FaultPlan::parse(value).map_err(err)?);
                continue;
            }
            if key == "model" {
                if spec.is_some() {
                    return Err(err("`model` given twice".into()));
                }
                spec = Some(match value {
                    "null" => Self::Null(NullParams::default()),
                    "ssd" => Self::Ssd(SsdParams::default()),
                    "hdd" => Self::Hdd(HddParams::default()),
                    "drive" => Self::Drive(Box::default()),
                    other => {
                        return Err(err(format!(
                            "unknown model `{other}` (null, ssd, hdd, drive)"
                        )));
                    }
                });
                continue;
            }
            let Some(spec) = spec.as_mut() else {
                return Err(err(format!(
                    "`{key}` before `model = …`: name the model first"
                )));
            };
            if let Self::Drive(p) = spec
                && let Some(table) = ["zone", "seek"].into_iter().find(|t| *t == key)
                && !tables_given.contains(&table)
            {
                tables_given.push(table);
                match table {
                    "zone" => p.zones.clear(),
                    _ => p.seek.clear(),
                }
            }
            spec.set(key, value).map_err(err)?;
        }
        let spec = spec.ok_or_else(|| SpecError::NoModel(path.to_owned()))?;
        if let Self::Drive(p) = &spec {
            check_drive(p).map_err(|message| SpecError::Line {
                path: path.to_owned(),
                line: text.lines().count(),
                message,
            })?;
        }
        Ok((spec, faults.unwrap_or_default()))
    }

    /// The model's short name.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Null(_) => "null",
            Self::Ssd(_) => "ssd",
            Self::Hdd(_) => "hdd",
            Self::Drive(_) => "drive",
        }
    }

    /// A fresh device.
    pub fn build(&self) -> Box<dyn DeviceModel> {
        match self {
            Self::Null(p) => Box::new(Null::new(*p)),
            Self::Ssd(p) => Box::new(Ssd::new(*p)),
            Self::Hdd(p) => Box::new(Hdd::new(*p)),
            Self::Drive(p) => Box::new(Drive::new((**p).clone())),
        }
    }

    fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        match self {
            Self::Drive(p) => return set_drive(p, key, value),
            Self::Null(p) => match key {
                "latency_ns" => p.latency_ns = num(key, value)?,
                "capacity_sectors" => p.capacity_sectors = positive(key, value)?,
                "hw_queues" => p.hw_queues = positive(key, value)?,
                "queue_depth" => p.queue_depth = positive(key, value)?,
                "max_sectors" => p.max_sectors = positive(key, value)?,
                _ => {
                    return Err(unknown(
                        key,
                        "null",
                        "latency_ns capacity_sectors hw_queues queue_depth max_sectors",
                    ));
                }
            },
            Self::Ssd(p) => match key {
                "channels" => p.channels = positive(key, value)?,
                "dies_per_channel" => p.dies_per_channel = positive(key, value)?,
                "page_bytes" => p.page_bytes = positive(key, value)?,
                "read_ns" => p.read_ns = num(key, value)?,
                "program_ns" => p.program_ns = num(key, value)?,
                "channel_bytes_per_s" => p.channel_bytes_per_s = positive(key, value)?,
                "overhead_ns" => p.overhead_ns = num(key, value)?,
                "capacity_sectors" => p.capacity_sectors = positive(key, value)?,
                "hw_queues" => p.hw_queues = positive(key, value)?,
                "queue_depth" => p.queue_depth = positive(key, value)?,
                "max_sectors" => p.max_sectors = positive(key, value)?,
                "rotational" => p.rotational = flag(key, value)?,
                _ => {
                    return Err(unknown(
                        key,
                        "ssd",
                        "channels dies_per_channel page_bytes read_ns program_ns channel_bytes_per_s overhead_ns capacity_sectors hw_queues queue_depth max_sectors rotational",
                    ));
                }
            },
            Self::Hdd(p) => match key {
                "rpm" => p.rpm = positive(key, value)?,
                "capacity_sectors" => p.capacity_sectors = positive(key, value)?,
                "heads" => p.heads = positive(key, value)?,
                "zones" => p.zones = positive(key, value)?,
                "outer_mb_per_s" => p.outer_mb_per_s = positive(key, value)?,
                "inner_mb_per_s" => p.inner_mb_per_s = positive(key, value)?,
                "track_to_track_ms" => p.track_to_track_ms = millis(key, value)?,
                "avg_seek_ms" => p.avg_seek_ms = millis(key, value)?,
                "full_stroke_ms" => p.full_stroke_ms = millis(key, value)?,
                "ncq_depth" => p.ncq_depth = positive(key, value)?,
                "cache_segments" => p.cache_segments = positive(key, value)?,
                "segment_sectors" => p.segment_sectors = positive(key, value)?,
                "min_read_ahead_sectors" => p.min_read_ahead_sectors = positive(key, value)?,
                "max_command_age_ms" => p.max_command_age_ms = num(key, value)?,
                "overhead_us" => p.overhead_us = num(key, value)?,
                "interface_mb_per_s" => p.interface_mb_per_s = positive(key, value)?,
                "max_sectors" => p.max_sectors = positive(key, value)?,
                "rotational" => p.rotational = flag(key, value)?,
                _ => {
                    return Err(unknown(
                        key,
                        "hdd",
                        "rpm capacity_sectors heads zones outer_mb_per_s inner_mb_per_s track_to_track_ms avg_seek_ms full_stroke_ms ncq_depth max_command_age_ms cache_segments segment_sectors min_read_ahead_sectors overhead_us interface_mb_per_s max_sectors rotational",
                    ));
                }
            },
        }
        if let Self::Hdd(p) = self
            && !(p.track_to_track_ms <= p.avg_seek_ms && p.avg_seek_ms <= p.full_stroke_ms)
        {
            return Err(
                "seek times must satisfy track_to_track_ms <= avg_seek_ms <= full_stroke_ms".into(),
            );
        }
        Ok(())
    }
}

const DRIVE_KEYS: &str = "rpm surfaces surface_order capacity_sectors zone slips remap sparing_scheme seek full_seek_ms head_switch_ms write_settle_ms bus_sector_ms read_hit_after_read_ms read_hit_after_write_ms read_miss_after_read_ms read_miss_after_write_ms write_hit_after_read_ms write_hit_after_write_ms write_miss_after_read_ms write_miss_after_write_ms read_completion_ms write_completion_ms cache_segments segment_sectors max_read_ahead_sectors continuous_read buffer_cache read_free_blocks read_ahead_over_requested stop_prefetch_in_sector write_back transfer_after_media read_hits_on_writes read_ahead_on_hit separate_write_segment combine_seq_writes";

fn set_drive(p: &mut DriveParams, key: &str, value: &str) -> Result<(), String> {
    let o = &mut p.overheads;
    let after = usize::from(key.contains("after_write"));
    match key {
        "rpm" => p.rpm = f64::from(positive::<u32>(key, value)?),
        "surfaces" => p.surfaces = positive(key, value)?,
        "surface_order" => {
            p.surface_order = SurfaceOrder::from_scheme(num(key, value)?).ok_or_else(|| {
                format!(
                    "`surface_order = {value}`: 0 (every cylinder alike), 1 (reversed on every other cylinder of a zone) or 2 (on odd cylinders), as DiskSim's LBN-to-PBN mapping scheme"
                )
            })?;
        }
        "capacity_sectors" => p.capacity_sectors = positive(key, value)?,
        "full_seek_ms" => p.full_seek_ms = millis_or_zero(key, value)?,
        "head_switch_ms" => p.head_switch_ms = millis_or_zero(key, value)?,
        "write_settle_ms" => p.write_settle_ms = settle_adjustment(key, value)?,
        "bus_sector_ms" => p.bus_sector_ms = millis_or_zero(key, value)?,
        "read_hit_after_read_ms" | "read_hit_after_write_ms" => {
            o.read_hit[after] = millis_or_zero(key, value)?;
        }
        "read_miss_after_read_ms" | "read_miss_after_write_ms" => {
            o.read_miss[after] = millis_or_zero(key, value)?;
        }
        "write_hit_after_read_ms" | "write_hit_after_write_ms" => {
            o.write_hit[after] = millis_or_zero(key, value)?;
        }
        "write_miss_after_read_ms" | "write_miss_after_write_ms" => {
            o.write_miss[after] = millis_or_zero(key, value)?;
        }
        "read_completion_ms" => o.completion[0] = millis_or_zero(key, value)?,
        "write_completion_ms" => o.completion[1] = millis_or_zero(key, value)?,
        "cache_segments" => p.cache_segments = positive(key, value)?,
        "segment_sectors" => p.segment_sectors = positive(key, value)?,
        "max_read_ahead_sectors" => p.max_read_ahead_sectors = num(key, value)?,
        "continuous_read" => {
            p.continuous_read = ContinuousRead::from_scheme(num(key, value)?).ok_or_else(|| {
                format!(
                    "`continuous_read = {value}`: DiskSim's Buffer continuous read, 0 (none), 1 (to the track's end), 2 (the cylinder's) or 3 (the segment's)"
                )
            })?;
        }
        "write_back" => p.write_back = num::<u8>(key, value)? != 0,
        "buffer_cache" => p.buffer_cache = flag(key, value)?,
        "read_free_blocks" => p.read_free_blocks = flag(key, value)?,
        "read_ahead_over_requested" => p.read_ahead_over_requested = flag(key, value)?,
        "stop_prefetch_in_sector" => p.stop_prefetch_in_sector = flag(key, value)?,
        "transfer_after_media" => p.transfer_after_media = num::<u8>(key, value)? != 0,
        "read_hits_on_writes" => p.read_hits_on_writes = num::<u8>(key, value)? != 0,
        "read_ahead_on_hit" => p.read_ahead_on_hit = num::<u8>(key, value)? != 0,
        "separate_write_segment" => p.separate_write_segment = num::<u8>(key, value)? != 0,
        "combine_seq_writes" => p.combine_seq_writes = num::<u8>(key, value)? != 0,
        "zone" => {
            if p.zones.len() >= 65_536 {
                return Err("more than 65536 zones".into());
            }
            // Six numbers, eight with the first sector's offset and the unused front, or nine
            // with the cylinders of a sparing range.
            let n = match value.split_whitespace().count() {
                6 => {
                    let six = numbers::<6>(key, value)?;
                    [six[0], six[1], six[2], six[3], six[4], six[5], 0, 0, 0]
                }
                8 => {
                    let eight = numbers::<8>(key, value)?;
                    [
                        eight[0], eight[1], eight[2], eight[3], eight[4], eight[5], eight[6],
                        eight[7], 0,
                    ]
                }
                _ => numbers::<9>(key, value)?,
            };
            let [
                first_cylinder,
                last_cylinder,
                sectors_per_track,
                track_skew,
                cylinder_skew,
                spares,
                first_offset,
                front_gap,
                range_cylinders,
            ] = n;
            if last_cylinder < first_cylinder
                || sectors_per_track == 0
                || last_cylinder > 10_000_000
                || sectors_per_track > 1 << 20
            {
                return Err(format!(
                    "`zone = {value}`: needs first <= last cylinder (at most 10000000) and 1 to 1048576 sectors per track"
                ));
            }
            if range_cylinders > last_cylinder + 1 - first_cylinder {
                return Err(format!(
                    "`zone = {value}`: a sparing range of {range_cylinders} cylinders is longer than the zone"
                ));
            }
            let tracks = (last_cylinder + 1 - first_cylinder) * p.surfaces.min(1024);
            if spares.saturating_add(front_gap) > tracks * sectors_per_track {
                return Err(format!(
                    "`zone = {value}`: spares and the unused front are more than the zone's {} sectors",
                    tracks * sectors_per_track
                ));
            }
            if p.zones
                .last()
                .is_some_and(|z| first_cylinder <= z.last_cylinder)
            {
                return Err(format!("`zone = {value}` starts inside the zone before"));
            }
            p.zones.push(DriveZone {
                first_cylinder,
                last_cylinder,
                sectors_per_track,
                track_skew: track_skew % sectors_per_track,
                cylinder_skew: cylinder_skew % sectors_per_track,
                spares,
                first_offset: first_offset % sectors_per_track,
                front_gap,
                range_cylinders,
                slips: Vec::new(),
                remaps: Vec::new(),
            });
        }
        "slips" | "remap" => {
            let mut words = value.split_whitespace();
            let zone: usize = words
                .next()
                .and_then(|w| w.parse().ok())
                .filter(|&z| z < p.zones.len())
                .ok_or_else(|| {
                    format!(
                        "`{key} = {value}`: starts with the number of a zone given above (0 to {})",
                        p.zones.len().saturating_sub(1)
                    )
                })?;
            let positions: Vec<u64> = words
                .map(|w| {
                    w.parse()
                        .map_err(|_| format!("`{key} = {value}`: {w:?} is not a position"))
                })
                .collect::<Result<_, _>>()?;
            let z = &mut p.zones[zone];
            if key == "remap" {
                let [defect, spare] = positions[..] else {
                    return Err(format!("`remap = {value}`: expected `zone defect spare`"));
                };
                z.remaps.push((defect, spare));
            } else {
                z.slips.extend(positions);
            }
            if z.slips.len() + 2 * z.remaps.len() > MAX_SLIPS {
                return Err(format!(
                    "`{key} = {value}`: zone {zone} has more than {MAX_SLIPS} slips and remaps"
                ));
            }
        }
        "sparing_scheme" => {
            p.sparing_scheme =
                num::<u8>(key, value)
                    .ok()
                    .filter(|&n| n <= 10)
                    .ok_or_else(|| {
                        format!("`sparing_scheme = {value}`: DiskSim's sparing scheme, 0 to 10")
                    })?;
        }
        "seek" => {
            if p.seek.len() >= 1 << 20 {
                return Err("more than 1048576 seek points".into());
            }
            let (d, ms) = value
                .split_once(char::is_whitespace)
                .ok_or_else(|| format!("`seek = {value}`: expected `distance ms`"))?;
            let d: u64 = d
                .trim()
                .parse()
                .map_err(|_| format!("`seek = {value}`: the distance is not a whole number"))?;
            let ms = millis_or_zero(key, ms.trim())?;
            if ms > MAX_SEEK_MS {
                return Err(format!(
                    "`seek = {value}`: a seek takes at most {MAX_SEEK_MS} ms (real drives: under 30)"
                ));
            }
            if p.seek.last().is_some_and(|&(last, _)| d <= last) || d == 0 {
                return Err(format!("`seek = {value}`: distances must rise from 1"));
            }
            p.seek.push((d, ms));
        }
        _ => return Err(unknown(key, "drive", DRIVE_KEYS)),
    }
    Ok(())
}

/// A drive's parameters hang together: zones and seeks given, capacity within the zones.
fn check_drive(p: &DriveParams) -> Result<(), String> {
    if p.zones.is_empty() || p.seek.is_empty() {
        return Err("a drive needs at least one `zone` and one `seek` line".into());
    }
    let zoned = p.zoned_sectors();
    if p.capacity_sectors > zoned {
        return Err(format!(
            "capacity_sectors = {} is more than the zones hold ({zoned})",
            p.capacity_sectors
        ));
    }
    if p.surfaces > 1024 {
        return Err(format!(
            "surfaces = {} is past its limit of 1024",
            p.surfaces
        ));
    }
    for (i, z) in p.zones.iter().enumerate() {
        let tracks = (z.last_cylinder + 1 - z.first_cylinder) * p.surfaces;
        let (count, unit) = if p.sparing_scheme == 1 {
            (tracks, "tracks")
        } else {
            (tracks * z.sectors_per_track, "sectors")
        };
        let remapped = z.remaps.iter().flat_map(|&(d, s)| [d, s]);
        if let Some(at) = z
            .slips
            .iter()
            .copied()
            .chain(remapped)
            .find(|&at| at >= count)
        {
            return Err(format!(
                "zone {i}: a slip or remap at {at}, past the zone's {count} {unit}"
            ));
        }
    }
    Ok(())
}

/// `0` or `1`.
fn flag(key: &str, value: &str) -> Result<bool, String> {
    match value {
        "0" => Ok(false),
        "1" => Ok(true),
        _ => Err(format!("`{key} = {value}`: 0 or 1")),
    }
}

fn numbers<const N: usize>(key: &str, value: &str) -> Result<[u64; N], String> {
    let parts: Vec<&str> = value.split_whitespace().collect();
    if parts.len() != N {
        return Err(format!("`{key} = {value}`: expected {N} whole numbers"));
    }
    let mut out = [0; N];
    for (slot, part) in out.iter_mut().zip(parts) {
        *slot = part
            .parse()
            .map_err(|_| format!("`{key} = {value}`: `{part}` is not a whole number"))?;
    }
    Ok(out)
}

fn millis_or_zero(key: &str, value: &str) -> Result<f64, String> {
    match value.parse::<f64>() {
        Ok(ms) if ms.is_finite() && (0.0..=3_600_000.0).contains(&ms) => Ok(ms),
        _ => Err(format!(
            "`{key}` needs a number of milliseconds from 0 to one hour, found `{value}`"
        )),
    }
}

/// A write's settling adjustment: DiskSim's drives declare it negative as well, within a
/// second either way.
fn settle_adjustment(key: &str, value: &str) -> Result<f64, String> {
    let max = crate::backend::sim::drive::MAX_ADJUSTMENT_MS;
    match value.parse::<f64>() {
        Ok(ms) if ms.is_finite() && (-max..=max).contains(&ms) => Ok(ms),
        _ => Err(format!(
            "`{key}` needs a number of milliseconds from -{max} to {max}, found `{value}`"
        )),
    }
}

fn unknown(key: &str, model: &str, known: &str) -> String {
    format!("unknown {model} parameter `{key}` (known: {known})")
}

/// The largest value each parameter takes. Counts size the model's tables and times are
/// added to the virtual clock, so a spec file may not ask for more than these.
const LIMITS: &[(&str, u64)] = &[
    ("capacity_sectors", crate::core::MAX_SECTOR),
    ("hw_queues", 1024),
    ("queue_depth", 65_536),
    ("max_sectors", 1 << 20),
    ("channels", 1024),
    ("dies_per_channel", 1024),
    ("page_bytes", 1 << 20),
    ("rpm", 100_000),
    ("heads", 1024),
    ("zones", 65_536),
    ("ncq_depth", 65_536),
    ("cache_segments", 65_536),
    ("segment_sectors", 1 << 24),
    ("min_read_ahead_sectors", 1 << 24),
];

/// Times in nanoseconds or microseconds: at most one hour of virtual time per operation.
const TIME_LIMITS: &[(&str, u64)] = &[
    ("latency_ns", 3_600_000_000_000),
    ("read_ns", 3_600_000_000_000),
    ("program_ns", 3_600_000_000_000),
    ("overhead_ns", 3_600_000_000_000),
    ("overhead_us", 3_600_000_000),
    ("max_command_age_ms", 3_600_000),
];

fn num<T: std::str::FromStr + TryFrom<u64>>(key: &str, value: &str) -> Result<T, String> {
    let n: u64 = value
        .replace('_', "")
        .parse()
        .map_err(|_| format!("`{key}` needs a non-negative integer, found `{value}`"))?;
    let limit = LIMITS
        .iter()
        .chain(TIME_LIMITS)
        .find(|(k, _)| *k == key)
        .map_or(u64::MAX, |&(_, limit)| limit);
    if n > limit {
        return Err(format!("`{key}` = {n} is past its limit of {limit}"));
    }
    T::try_from(n).map_err(|_| format!("`{key}` = {n} is too large"))
}

fn positive<T: std::str::FromStr + TryFrom<u64> + PartialEq + Default>(
    key: &str,
    value: &str,
) -> Result<T, String> {
    let n: T = num(key, value)?;
    if n == T::default() {
        return Err(format!("`{key}` must be at least 1"));
    }
    Ok(n)
}

fn millis(key: &str, value: &str) -> Result<f64, String> {
    match value.parse::<f64>() {
        Ok(ms) if ms.is_finite() && ms > 0.0 && ms <= 3_600_000.0 => Ok(ms),
        _ => Err(format!(
            "`{key}` needs a positive number of milliseconds up to the limit of one hour, found `{value}`"
        )),
    }
}

#[cfg(test)]
mod tests;
