//! fio's value syntax: sizes (`4k`, `1g`, `512KiB`), times (`30s`, `250us`, `2m`), booleans.
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
