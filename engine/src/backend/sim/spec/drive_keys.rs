//! A `model = drive` spec's keys: DiskSim's parameters by the names the spec file gives them,
//! each range-checked, and the checks the whole drive must pass.

use super::*;

const DRIVE_KEYS: &str = "rpm surfaces surface_order capacity_sectors zone slips remap sparing_scheme seek full_seek_ms head_switch_ms write_settle_ms min_write_seek_ms bus_sector_ms write_bus_sector_ms read_hit_after_read_ms read_hit_after_write_ms read_miss_after_read_ms read_miss_after_write_ms write_hit_after_read_ms write_hit_after_write_ms write_miss_after_read_ms write_miss_after_write_ms read_completion_ms write_completion_ms data_prep_ms reselect_ms read_disconnect_after_read_ms read_disconnect_after_write_ms write_disconnect_ms read_water_mark read_water_of_segment write_water_mark write_holds_bus never_disconnect cache_segments segment_sectors max_read_ahead_sectors min_read_ahead_sectors continuous_read buffer_cache read_free_blocks read_ahead_over_requested drop_returned_data stop_prefetch_in_sector read_direct_to_buffer extra_write_disconnect write_back transfer_after_media immediate_partial_hit immediate_read immediate_write read_hits_on_writes read_ahead_on_hit separate_write_segment combine_seq_writes";

pub(super) fn set_drive(p: &mut DriveParams, key: &str, value: &str) -> Result<(), String> {
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
        "min_write_seek_ms" => p.min_write_seek_ms = millis_or_zero(key, value)?,
        "bus_sector_ms" => p.bus_sector_ms = millis_or_zero(key, value)?,
        "write_bus_sector_ms" => p.write_bus_sector_ms = Some(millis_or_zero(key, value)?),
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
        "data_prep_ms" => o.data_prep = millis_or_zero(key, value)?,
        "reselect_ms" => o.reselect = millis_or_zero(key, value)?,
        "read_disconnect_after_read_ms" => o.disconnect[0] = millis_or_zero(key, value)?,
        "read_disconnect_after_write_ms" => o.disconnect[1] = millis_or_zero(key, value)?,
        "write_disconnect_ms" => o.disconnect[2] = millis_or_zero(key, value)?,
        "read_water_mark" => p.read_water_mark = fraction(key, value)?,
        "read_water_of_segment" => p.read_water_of_segment = flag(key, value)?,
        "write_water_mark" => p.write_water_mark = num(key, value)?,
        "write_holds_bus" => p.write_holds_bus = flag(key, value)?,
        "never_disconnect" => p.never_disconnect = flag(key, value)?,
        "cache_segments" => p.cache_segments = positive(key, value)?,
        "segment_sectors" => p.segment_sectors = positive(key, value)?,
        "max_read_ahead_sectors" => p.max_read_ahead_sectors = num(key, value)?,
        "min_read_ahead_sectors" => p.min_read_ahead_sectors = num(key, value)?,
        "continuous_read" => {
            p.continuous_read = ContinuousRead::from_scheme(num(key, value)?).ok_or_else(|| {
                format!(
                    "`continuous_read = {value}`: DiskSim's Buffer continuous read, 0 (none), 1 (to the track's end), 2 (the cylinder's), 3 (the segment's) or 4 (DEC's: the next sector's track, and the one after where the segment began on an earlier track)"
                )
            })?;
        }
        "write_back" => p.write_back = num::<u8>(key, value)? != 0,
        "extra_write_disconnect" => p.extra_write_disconnect = flag(key, value)?,
        "buffer_cache" => p.buffer_cache = flag(key, value)?,
        "read_free_blocks" => p.read_free_blocks = flag(key, value)?,
        "immediate_partial_hit" => p.immediate_partial_hit = flag(key, value)?,
        "immediate_read" => p.immediate_read = flag(key, value)?,
        "immediate_write" => p.immediate_write = flag(key, value)?,
        "read_ahead_over_requested" => p.read_ahead_over_requested = flag(key, value)?,
        "drop_returned_data" => p.drop_returned_data = flag(key, value)?,
        "stop_prefetch_in_sector" => p.stop_prefetch_in_sector = flag(key, value)?,
        "read_direct_to_buffer" => p.read_direct_to_buffer = flag(key, value)?,
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
pub(super) fn check_drive(p: &DriveParams) -> Result<(), String> {
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

pub(super) fn numbers<const N: usize>(key: &str, value: &str) -> Result<[u64; N], String> {
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

pub(super) fn millis_or_zero(key: &str, value: &str) -> Result<f64, String> {
    match value.parse::<f64>() {
        Ok(ms) if ms.is_finite() && (0.0..=3_600_000.0).contains(&ms) => Ok(ms),
        _ => Err(format!(
            "`{key}` needs a number of milliseconds from 0 to one hour, found `{value}`"
        )),
    }
}

/// A write's settling adjustment: DiskSim's drives declare it negative as well, within a
/// second either way.
pub(super) fn settle_adjustment(key: &str, value: &str) -> Result<f64, String> {
    let max = crate::backend::sim::drive::MAX_ADJUSTMENT_MS;
    match value.parse::<f64>() {
        Ok(ms) if ms.is_finite() && (-max..=max).contains(&ms) => Ok(ms),
        _ => Err(format!(
            "`{key}` needs a number of milliseconds from -{max} to {max}, found `{value}`"
        )),
    }
}

/// A share, from 0 to 1.
pub(super) fn fraction(key: &str, value: &str) -> Result<f64, String> {
    match value.parse::<f64>() {
        Ok(f) if (0.0..=1.0).contains(&f) => Ok(f),
        _ => Err(format!(
            "`{key}` needs a share from 0 to 1, found `{value}`"
        )),
    }
}
