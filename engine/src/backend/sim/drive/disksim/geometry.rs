//! A drive's geometry from DiskSim's model and seek files: zones with their spares, slips and
//! remapped defects, and the seek curve (an `extracted` table or HPL's formula).

use super::*;

/// DiskSim's sparing scheme (`Sparing scheme used`, with `Rangesize for sparing`): how a
/// zone's `Number of spares` becomes the sectors it withholds from the LBN space, as
/// DiskSim's `disk_compute_blksinband` counts them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Sparing {
    pub(super) scheme: u64,
    pub(super) range: u64,
}

impl Sparing {
    /// DiskSim's largest scheme number (`SECTSPERZONE_SPARING_SLIPTOEND`).
    pub(super) const MAX_SCHEME: u64 = 10;

    /// Reads the layout's scheme (default: spares per zone, the count as sectors).
    pub(super) fn read(layout: &mut Fields<'_>) -> Result<Self, ImportError> {
        let scheme = layout
            .take_opt_u64("Sparing scheme used", 0, Self::MAX_SCHEME)?
            .unwrap_or(9);
        let range = layout
            .take_opt_u64("Rangesize for sparing", 1, 10_000_000)?
            .unwrap_or(1);

        Ok(Self { scheme, range })
    }

    /// Whether the drive model steps over slips and remaps under this scheme, as DiskSim's
    /// `g1_ltop_*` do: every scheme but none (0), whose map ignores them. Spares at the
    /// end (7) share the per-cylinder schemes' map, slipping to the end
    /// (`issliptoend`): every slip before an LBN pushes it on.
    pub(super) fn maps_slips(self) -> bool {
        self.scheme != 0
    }

    /// Sectors zone withholds: `spares` its count, over `cylinders` cylinders of
    /// `surfaces` tracks of `spt` sectors, with `slips` slipped sectors.
    pub(super) fn sectors(
        self,
        spares: u64,
        (cylinders, surfaces, spt): (u64, u64, u64),
        slips: u64,
    ) -> u64 {
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

pub(super) fn import_zones(
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
        if sparing.scheme == 7 && spare_count > 0 {
            // `g1_ltop_sectpercylspare` leaves that many sectors of every cylinder out of
            // the map, while the zone's LBNs (`dm_layout_g1_compute_blksinband`) withhold
            // only the slips: DiskSim's own map then runs past its zone.
            notes.push(format!(
                "zone {i}: Number of spares = {spare_count} under sparing scheme 7: the map holds none back in each cylinder (DiskSim's withholds them there but not from the zone's LBNs)"
            ));
        }
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
    if defects > 0 && sparing.maps_slips() {
        notes.push(format!(
            "{defects} remapped defects: the LBN map sends each to its spare, but a transfer over one is timed as if it lay in place, where DiskSim leaves for the spare and comes back in mid-transfer (`disk_get_remapped_sector`; under `Read directly to buffer` a read checks its room first)"
        ));
    }
    if slips + defects > 0 && !sparing.maps_slips() {
        notes.push(format!(
            "{slips} slipped and {defects} remapped defects under sparing scheme {}: the LBN map does not step over them (it does under every scheme but 0)",
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
/// joins with straight lines (and [`extend_seeks_as_disksim`] carries to the full stroke).
pub(super) fn hpl_table(hpl: &[f64], first_ten: &[f64], cylinders: u64) -> Vec<(u64, f64)> {
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
pub(super) fn physical_seeks(path: &Path, table: &[(u64, f64)]) -> Result<(), ImportError> {
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
pub(super) fn read_seek(path: &Path) -> Result<Vec<(u64, f64)>, ImportError> {
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
        let ms_text = ms.trim();
        let ms: f64 = ms_text.parse().map_err(|_| bad())?;
        if !(ms.is_finite() && ms >= 0.0) {
            return Err(bad());
        }
        if ms > MAX_SEEK_MS {
            // The file's own words: a huge value printed in full runs to hundreds of digits.
            return Err(fail(
                path,
                format!(
                    "line {}: a seek of `{ms_text}` ms; a drive's seek takes at most {MAX_SEEK_MS} ms",
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

/// A seek table carried out to the longest seek the drive can make, `far` cylinders (its
/// zones' last cylinder, as DiskSim lays the drive out by its zones), as DiskSim reads
/// past a table's end: `dm_mech_g1_seek_extracted` extrapolates the line through the last
/// two points, and the HPL curve past its boundary is that line; the model would
/// otherwise hold the last time (or the full-stroke time). Kept within what a drive can
/// be ([`MAX_SEEK_MS`]) and never below zero (DiskSim's unsigned time could not go there
/// either); a table of one point has no line to extend and stays as it is.
pub(super) fn extend_seeks_as_disksim(table: &mut Vec<(u64, f64)>, far: u64) {
    let [.., (d1, t1), (d2, t2)] = table[..] else {
        return;
    };
    if far <= d2 {
        return;
    }
    let slope = (t2 - t1) / (d2 - d1) as f64;
    let ms = (t2 + slope * (far - d2) as f64).clamp(0.0, MAX_SEEK_MS);
    table.push((far, ms));
}
