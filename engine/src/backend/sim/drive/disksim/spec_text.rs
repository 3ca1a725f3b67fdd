//! An imported drive written back as a spec file: every parameter, and what the model does
//! not represent as comments.

use super::*;

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
    let _ = writeln!(s, "min_write_seek_ms = {}", p.min_write_seek_ms);
    let _ = writeln!(s, "bus_sector_ms = {}", p.bus_sector_ms);
    if let Some(ms) = p.write_bus_sector_ms {
        let _ = writeln!(s, "write_bus_sector_ms = {ms}");
    }
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
    let _ = writeln!(s, "data_prep_ms = {}", o.data_prep);
    let _ = writeln!(s, "reselect_ms = {}", o.reselect);
    let _ = writeln!(s, "read_disconnect_after_read_ms = {}", o.disconnect[0]);
    let _ = writeln!(s, "read_disconnect_after_write_ms = {}", o.disconnect[1]);
    let _ = writeln!(s, "write_disconnect_ms = {}", o.disconnect[2]);
    let _ = writeln!(s, "read_water_mark = {}", p.read_water_mark);
    let _ = writeln!(s, "write_water_mark = {}", p.write_water_mark);
    let _ = writeln!(s, "cache_segments = {}", p.cache_segments);
    let _ = writeln!(s, "segment_sectors = {}", p.segment_sectors);
    let _ = writeln!(s, "max_read_ahead_sectors = {}", p.max_read_ahead_sectors);
    let _ = writeln!(s, "min_read_ahead_sectors = {}", p.min_read_ahead_sectors);
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
        ("drop_returned_data", p.drop_returned_data),
        ("stop_prefetch_in_sector", p.stop_prefetch_in_sector),
        ("read_direct_to_buffer", p.read_direct_to_buffer),
        ("write_back", p.write_back),
        ("extra_write_disconnect", p.extra_write_disconnect),
        ("transfer_after_media", p.transfer_after_media),
        ("read_water_of_segment", p.read_water_of_segment),
        ("write_holds_bus", p.write_holds_bus),
        ("never_disconnect", p.never_disconnect),
        ("immediate_partial_hit", p.immediate_partial_hit),
        ("immediate_read", p.immediate_read),
        ("immediate_write", p.immediate_write),
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
pub(super) fn zone_slips(s: &mut String, i: usize, z: &DriveZone) {
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
