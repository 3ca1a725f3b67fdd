//! The values users write: fio's sizes (`4k`, `1g`, `512KiB`), times (`30s`, `250us`, `2m`)
//! and booleans, and the group names and limits of `--group` and `ctl group`.
//!
//! Values are bounded where they are parsed, so what is computed from them later cannot
//! overflow: sizes and offsets at [`MAX_BYTES`], times at [`MAX_DURATION_NS`].

pub use crate::core::MAX_DURATION_NS;
use crate::core::MAX_SECTOR;

/// The largest size or offset: the byte at [`MAX_SECTOR`] (8 EiB).
pub const MAX_BYTES: u64 = MAX_SECTOR * 512;

/// Parses a size in bytes. Suffixes are binary (k = 1024), as fio's default `kb_base=1024`;
/// `KiB`/`MiB`… and a trailing `b`/`B` are accepted.
pub fn size(value: &str) -> Result<u64, String> {
    let v = value.trim();
    let digits = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
    if digits == 0 {
        return Err(format!(
            "`{value}` is not a size (for example 4k, 128KiB, 1g)"
        ));
    }
    let n: u64 = v[..digits]
        .parse()
        .map_err(|_| format!("`{value}` is too large"))?;
    let unit = v[digits..].trim().to_ascii_lowercase();
    let shift = match unit.trim_end_matches('b').trim_end_matches('i') {
        "" => 0,
        "k" => 10,
        "m" => 20,
        "g" => 30,
        "t" => 40,
        "p" => 50,
        _ => {
            return Err(format!(
                "`{value}`: unknown size unit `{}` (k, m, g, t, p)",
                &v[digits..]
            ));
        }
    };
    n.checked_mul(1u64 << shift)
        .filter(|&bytes| bytes <= MAX_BYTES)
        .ok_or_else(|| format!("`{value}` is too large (the limit is 8 EiB, 2^63 bytes)"))
}

/// Parses a duration into nanoseconds; a bare number is in `default_unit` ("s" or "us").
pub fn duration_ns(value: &str, default_unit: &str) -> Result<u64, String> {
    let v = value.trim();
    let digits = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
    if digits == 0 {
        return Err(format!(
            "`{value}` is not a time (for example 30s, 250ms, 100us)"
        ));
    }
    let n: u64 = v[..digits]
        .parse()
        .map_err(|_| format!("`{value}` is too large"))?;
    let unit = match &v[digits..] {
        "" => default_unit,
        u => u,
    };
    let scale: u64 = match unit.to_ascii_lowercase().as_str() {
        "ns" => 1,
        "us" | "usec" => 1_000,
        "ms" | "msec" => 1_000_000,
        "s" | "sec" => 1_000_000_000,
        "m" | "min" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        other => {
            return Err(format!(
                "`{value}`: unknown time unit `{other}` (ns, us, ms, s, m, h)"
            ));
        }
    };
    n.checked_mul(scale)
        .filter(|&ns| ns <= MAX_DURATION_NS)
        .ok_or_else(|| format!("`{value}` is too long (the limit is 366 days)"))
}

/// Parses an unsigned integer.
pub fn integer(value: &str) -> Result<u64, String> {
    value
        .trim()
        .parse()
        .map_err(|_| format!("`{value}` is not a non-negative integer"))
}

/// Parses fio's booleans: 1/0, true/false, yes/no, on/off; a bare flag is true.
pub fn boolean(value: &str) -> Result<bool, String> {
    match value.trim().to_ascii_lowercase().as_str() {
        "" | "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" => Ok(false),
        _ => Err(format!("`{value}` is not a boolean (1/0, true/false)")),
    }
}

/// A group's name: 1 to 64 letters, digits, `_`, `-` and `.`.
///
/// # Errors
/// Anything else, named.
pub fn group_name(value: &str) -> Result<String, String> {
    let ok = !value.is_empty()
        && value.len() <= 64
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if ok {
        Ok(value.to_owned())
    } else {
        Err(format!(
            "group name {value:?}: 1 to 64 letters, digits, `_`, `-` or `.`"
        ))
    }
}

/// A group's keys, for messages.
const KEYS: &str = "weight, reserve_iops, riops, wiops, rbps, wbps, their _burst, latency_target_us, latency_percentile";

/// `NAME:weight=N,reserve_iops=N,riops=N,wiops=N,rbps=B,wbps=B,riops_burst=N,…`: a group's
/// parameters in cgroup v2's key words (io.weight, io.max, io.latency's `target` in µs)
/// plus mClock's reservation: the words cgroup users write, one flag per group, and one
/// line for `ctl group`. `KEY=max` leaves a limit, reservation or target unset, as io.max's
/// `max` does.
///
/// # Errors
/// A bad name, an unknown or repeated key, a value out of range, or no key at all, each
/// named.
pub fn parse_group(text: &str) -> Result<crate::core::GroupSpec, String> {
    let edit = parse_group_edit(text)?;
    edit.apply(&crate::core::GroupSpec {
        name: edit.name.clone(),
        ..crate::core::GroupSpec::default()
    })
}

/// `ctl group NAME:KEY=VALUE,…`: the keys to change in group NAME's parameters, the rest
/// kept, as writing one key of cgroup's io.max changes only that key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupEdit {
    /// The group's name.
    pub name: String,
    /// The keys, in the order given, each once.
    keys: Vec<(String, String)>,
}

/// Parses a group's name and keys, checking each key and value on its own.
///
/// # Errors
/// As [`parse_group`].
pub fn parse_group_edit(text: &str) -> Result<GroupEdit, String> {
    let (name, keys) = text
        .split_once(':')
        .ok_or_else(|| format!("{text:?}: expected NAME:KEY=VALUE,… (e.g. tenant:riops=1000)"))?;
    let name = group_name(name)?;
    let mut edit = GroupEdit {
        name: name.clone(),
        keys: Vec::new(),
    };
    for pair in keys.split(',').filter(|p| !p.is_empty()) {
        let (key, value) = pair
            .split_once('=')
            .ok_or_else(|| format!("group {name}: {pair:?}: expected KEY=VALUE"))?;
        if edit.keys.iter().any(|(k, _)| k == key) {
            return Err(format!("group {name}: {key} given twice"));
        }
        // Each key and value is checked here, so a bad one is refused as it is read.
        set_group_key(&mut crate::core::GroupSpec::default(), &name, key, value)?;
        edit.keys.push((key.to_owned(), value.to_owned()));
    }
    if edit.keys.is_empty() {
        return Err(format!("group {name}: no parameter given ({KEYS})"));
    }
    Ok(edit)
}

impl GroupEdit {
    /// `base` with the keys changed.
    ///
    /// # Errors
    /// A burst left without its rate.
    pub fn apply(&self, base: &crate::core::GroupSpec) -> Result<crate::core::GroupSpec, String> {
        let mut spec = base.clone();
        for (key, value) in &self.keys {
            set_group_key(&mut spec, &self.name, key, value)?;
        }
        let bursts = [
            ("riops_burst", spec.iops_burst[0], "riops", spec.riops),
            ("wiops_burst", spec.iops_burst[1], "wiops", spec.wiops),
            ("rbps_burst", spec.bps_burst[0], "rbps", spec.rbps),
            ("wbps_burst", spec.bps_burst[1], "wbps", spec.wbps),
        ];
        for (burst, amount, rate, limit) in bursts {
            if amount > 0 && limit.is_none() {
                return Err(format!(
                    "group {}: {burst} without {rate}: a burst is tolerance beyond a rate",
                    self.name
                ));
            }
        }
        Ok(spec)
    }
}

/// Sets `key` of group `name`'s `spec` to `value`.
fn set_group_key(
    spec: &mut crate::core::GroupSpec,
    name: &str,
    key: &str,
    value: &str,
) -> Result<(), String> {
    const MAX_IOPS: u64 = 1_000_000_000;
    const MAX_BPS: u64 = 1 << 50;
    let count = |max: u64| -> Result<u64, String> {
        integer(value)
            .ok()
            .filter(|n| (1..=max).contains(n))
            .ok_or_else(|| {
                format!("group {name}: {key}={value}: expected a number from 1 to {max}")
            })
    };
    let bytes = |max: u64| -> Result<u64, String> {
        size(value)
            .ok()
            .filter(|n| (1..=max).contains(n))
            .ok_or_else(|| {
                format!("group {name}: {key}={value}: expected bytes per second from 1 to {max} (k, m, g allowed)")
            })
    };
    // `max`: unset, io.max's word for no limit.
    let unset = value == "max";
    let optional = |parse: &dyn Fn(u64) -> Result<u64, String>, max: u64| {
        if unset {
            Ok(None)
        } else {
            parse(max).map(Some)
        }
    };
    let burst = |parse: &dyn Fn(u64) -> Result<u64, String>, max: u64| {
        if unset { Ok(0) } else { parse(max) }
    };
    // A rate unset takes its burst with it: there is nothing left to burst beyond.
    match key {
        "riops" => {
            spec.riops = optional(&count, MAX_IOPS)?;
            spec.iops_burst[0] *= u64::from(spec.riops.is_some());
        }
        "wiops" => {
            spec.wiops = optional(&count, MAX_IOPS)?;
            spec.iops_burst[1] *= u64::from(spec.wiops.is_some());
        }
        "rbps" => {
            spec.rbps = optional(&bytes, MAX_BPS)?;
            spec.bps_burst[0] *= u64::from(spec.rbps.is_some());
        }
        "wbps" => {
            spec.wbps = optional(&bytes, MAX_BPS)?;
            spec.bps_burst[1] *= u64::from(spec.wbps.is_some());
        }
        "riops_burst" => spec.iops_burst[0] = burst(&count, MAX_IOPS)?,
        "wiops_burst" => spec.iops_burst[1] = burst(&count, MAX_IOPS)?,
        "rbps_burst" => spec.bps_burst[0] = burst(&bytes, MAX_BPS)?,
        "wbps_burst" => spec.bps_burst[1] = burst(&bytes, MAX_BPS)?,
        "latency_target_us" => {
            spec.latency_target_ns = optional(&count, 60_000_000)?.map(|us| us * 1000);
        }
        "latency_percentile" => {
            spec.latency_permille = if unset {
                None
            } else {
                Some(permille(value).ok_or_else(|| {
                    format!(
                        "group {name}: {key}={value}: expected a percentile from 50 to 99.9 (tenths at most), or max for the mean"
                    )
                })?)
            };
        }
        "weight" => {
            spec.weight = u32::try_from(count(10_000)?).expect("at most 10000");
        }
        "reserve_iops" => spec.reserve_iops = optional(&count, MAX_IOPS)?,
        _ => {
            return Err(format!("group {name}: unknown key {key:?} ({KEYS})"));
        }
    }
    Ok(())
}

/// A percentile from 50 to 99.9 with at most one decimal, in tenths of a percent.
fn permille(text: &str) -> Option<u16> {
    let (whole, tenths) = match text.split_once('.') {
        Some((whole, tenth)) if tenth.len() == 1 => (whole, tenth),
        Some(_) => return None,
        None => (text, "0"),
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) && s.len() <= 3;
    if !digits(whole) || !digits(tenths) {
        return None;
    }
    let value = whole.parse::<u16>().ok()? * 10 + tenths.parse::<u16>().ok()?;
    (500..=999).contains(&value).then_some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_use_binary_units_like_fio() {
        assert_eq!(size("4k"), Ok(4096));
        assert_eq!(size("128KiB"), Ok(128 << 10));
        assert_eq!(size("5G"), Ok(5 << 30));
        assert_eq!(size("512"), Ok(512));
        assert!(size("4q").unwrap_err().contains("unknown size unit"));
        assert!(size("k").is_err());
    }

    #[test]
    fn times_default_to_the_given_unit() {
        assert_eq!(duration_ns("30", "s"), Ok(30_000_000_000));
        assert_eq!(duration_ns("250us", "s"), Ok(250_000));
        assert_eq!(duration_ns("100", "us"), Ok(100_000));
        assert_eq!(duration_ns("2m", "s"), Ok(120_000_000_000));
        assert!(duration_ns("3 fortnights", "s").is_err());
    }

    #[test]
    fn values_past_the_limits_are_refused_not_wrapped() {
        assert!(
            duration_ns("5000000h", "s")
                .unwrap_err()
                .contains("366 days")
        );
        assert_eq!(duration_ns("366d", "s").map_err(|_| ()), Err(()));
        assert_eq!(duration_ns("8784h", "s"), Ok(MAX_DURATION_NS));
        assert!(
            size("18446744073709547520")
                .unwrap_err()
                .contains("too large")
        );
        assert!(size("8193p").unwrap_err().contains("too large"));
        assert_eq!(size("8192p"), Ok(MAX_BYTES));
    }
}
