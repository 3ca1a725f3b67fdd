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

mod drive_keys;

use drive_keys::{check_drive, set_drive};

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
                "contention_ns" => p.contention_ns = num(key, value)?,
                "jitter_ns" => p.jitter_ns = num(key, value)?,
                "jitter_permille" => p.jitter_permille = num(key, value)?,
                "complete_together" => p.complete_together = flag(key, value)?,
                "write_contention_ns" => p.write_contention_ns = num(key, value)?,
                "capacity_sectors" => p.capacity_sectors = positive(key, value)?,
                "hw_queues" => p.hw_queues = positive(key, value)?,
                "queue_depth" => p.queue_depth = positive(key, value)?,
                "max_sectors" => p.max_sectors = positive(key, value)?,
                "rotational" => p.rotational = flag(key, value)?,
                _ => {
                    return Err(unknown(
                        key,
                        "ssd",
                        "channels dies_per_channel page_bytes read_ns program_ns channel_bytes_per_s overhead_ns contention_ns jitter_ns jitter_permille complete_together write_contention_ns capacity_sectors hw_queues queue_depth max_sectors rotational",
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

/// `0` or `1`.
fn flag(key: &str, value: &str) -> Result<bool, String> {
    match value {
        "0" => Ok(false),
        "1" => Ok(true),
        _ => Err(format!("`{key} = {value}`: 0 or 1")),
    }
}

fn unknown(key: &str, model: &str, known: &str) -> String {
    format!("unknown {model} parameter `{key}` (known: {known})")
}

/// The largest value each parameter takes. Counts size the model's tables and times are
/// added to the virtual clock, so a spec file may not ask for more than these.
const LIMITS: &[(&str, u64)] = &[
    ("jitter_permille", 1_000_000),
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
    ("contention_ns", 1_000_000_000),
    ("write_contention_ns", 1_000_000_000),
    ("jitter_ns", 1_000_000_000),
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
