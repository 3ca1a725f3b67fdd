//! Where a drive's LBNs lie: its zones, the spares each withholds and where, the slipped
//! and remapped defects, and which surface holds each track of a cylinder, as DiskSim's
//! `dm_layout_g1` lays them out.

/// Most numbers a zone's slips or remaps take: DiskSim's `MAXSLIPS` and `MAXDEFECTS` (2048),
/// a remap being two numbers.
pub const MAX_SLIPS: usize = 4096;

/// One recording zone, as DiskSim's `dm_layout_g1_zone`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DriveZone {
    /// First cylinder.
    pub first_cylinder: u64,
    /// Last cylinder (inclusive).
    pub last_cylinder: u64,
    /// Sectors per track.
    pub sectors_per_track: u64,
    /// Rotational offset of a track's first sector from the previous track's, in sectors.
    pub track_skew: u64,
    /// The same across a cylinder boundary.
    pub cylinder_skew: u64,
    /// Sectors of the zone kept as spares (not addressable).
    pub spares: u64,
    /// Rotational position of the zone's first sector, in sectors from the index.
    pub first_offset: u64,
    /// Sectors unused at the zone's front, before its first LBN.
    pub front_gap: u64,
    /// Cylinders per sparing range (DiskSim's `SECTPERRANGE_SPARING`): the spares sit at the
    /// end of every whole range of this many cylinders, in equal parts, not at the zone's
    /// end. 0: at the zone's end.
    pub range_cylinders: u64,
    /// Slipped defects (DiskSim's `slips`), in the order given: positions from the zone's
    /// first sector (its first track, under track sparing), each of
    /// which the LBN map steps over, pushing the LBNs from there on by one.
    pub slips: Vec<u64>,
    /// Remapped defects (DiskSim's `defects`, in pairs): a position and the spare its LBN
    /// is moved to, counted as `slips` are.
    pub remaps: Vec<(u64, u64)>,
}

impl DriveZone {
    /// Where the zone's `lbn`th addressable sector lies among its sectors, counting from
    /// the zone's first, under DiskSim's sparing scheme `scheme`: past its unused front,
    /// the spares of every unit (range, cylinder, track) before it, the slips before it,
    /// and moved to its spare if remapped, as DiskSim's `g1_ltop_*` map it. Cylinders after
    /// the last whole range hold no spares.
    pub fn physical(&self, lbn: u64, surfaces: u64, scheme: u8) -> u64 {
        let lbn = lbn.saturating_add(self.front_gap);
        let spt = self.sectors_per_track.max(1);
        match scheme {
            1 => {
                // Whole tracks are spares, and slips and remaps name tracks.
                let track = self.slipped(0, lbn / spt, |track, _| track);
                track * spt + lbn % spt
            }
            2 | 4 | 5 | 6 | 7 => self.per_cylinder(lbn, surfaces, matches!(scheme, 4 | 6 | 7)),
            3 => self.per_track(lbn, surfaces),
            _ => self.per_range_or_zone(lbn, surfaces),
        }
    }

    /// Sectors the zone's slips push the skew of track `(cylinder, surface)` on by
    /// (`cylinder` counted in the zone), as DiskSim's `g1_map_pbn_skew` assumes slips do
    /// under spares per cylinder (schemes 2, 4, 5, 6: every slip before the cylinder's
    /// first sector) and per track (3: every slip before the track's first sector, the
    /// track counted by its head); under the other schemes none.
    pub(super) fn slips_pushing_skew(
        &self,
        scheme: u8,
        (cylinder, surface): (u64, u64),
        surfaces: u64,
    ) -> u64 {
        let tracks = match scheme {
            2 | 4 | 5 | 6 => cylinder.saturating_mul(surfaces),
            3 => cylinder.saturating_mul(surfaces).saturating_add(surface),
            _ => return 0,
        };
        let cutoff = tracks.saturating_mul(self.sectors_per_track);
        self.slips.iter().filter(|&&s| s < cutoff).count() as u64
    }

    /// Spares at the end of every range of `range_cylinders` (`g1_ltop_sectperrangespare`:
    /// slips and remaps stay in their range), or at the zone's end
    /// (`g1_ltop_sectperzonespare`).
    fn per_range_or_zone(&self, lbn: u64, surfaces: u64) -> u64 {
        let cylinders = self.cylinders();
        let ranges = cylinders.checked_div(self.range_cylinders).unwrap_or(0);
        if ranges == 0 || self.spares == 0 {
            return self.slipped(0, lbn, |at, _| at);
        }
        let range_sectors = self.range_cylinders * surfaces * self.sectors_per_track;
        let range_lbns = range_sectors.saturating_sub(self.spares / ranges).max(1);
        let range = lbn / range_lbns;
        let (start, at) = if range >= ranges {
            (ranges * range_sectors, lbn - ranges * range_lbns)
        } else {
            (range * range_sectors, lbn % range_lbns)
        };
        self.slipped(start, at, |spare, start| start + spare % range_sectors)
    }

    /// Spares at the end of every cylinder (`g1_ltop_sectpercylspare`, schemes 2, 4, 5
    /// and 6, and 7 with none per cylinder, the zone withholding its slips): slips in the
    /// LBN's cylinder push it on, and with `slip_to_end` every slip in an earlier cylinder
    /// too; pushed past its cylinder's LBNs it goes on into the
    /// next cylinder's, as DiskSim's map positions it (its map back from sectors would
    /// put it in a spare). A remapped defect's spare is a position in the zone.
    fn per_cylinder(&self, lbn: u64, surfaces: u64, slip_to_end: bool) -> u64 {
        let per_cylinder = self.sectors_per_track * surfaces;
        let withheld = if slip_to_end {
            self.spares.saturating_sub(self.slips.len() as u64)
        } else {
            self.spares
        };
        let spares = withheld / self.cylinders().max(1);
        let lbns = per_cylinder.saturating_sub(spares).max(1);
        let (mut cylinder, mut at) = (lbn / lbns, lbn % lbns);
        let first = cylinder * per_cylinder;
        let mut slips = 0u64;
        for &s in &self.slips {
            let earlier = slip_to_end && s / per_cylinder.max(1) < cylinder;
            if earlier || (s >= first && s - first <= at.saturating_add(slips)) {
                slips += 1;
            }
        }
        at += slips;
        if let Some(&(_, to)) = self.remap_of(first + at) {
            return to;
        }
        cylinder += at / lbns;
        cylinder * per_cylinder + at % lbns
    }

    /// Spares at the end of every track (`g1_ltop_sectpertrackspare`, scheme 3): slips in
    /// the LBN's track push it on. A remapped defect's spare is a position in the zone.
    fn per_track(&self, lbn: u64, surfaces: u64) -> u64 {
        let spt = self.sectors_per_track.max(1);
        let spares = self.spares / (self.cylinders() * surfaces).max(1);
        let lbns = spt.saturating_sub(spares).max(1);
        let first = lbn / lbns * spt;
        let mut at = lbn % lbns;
        for &s in &self.slips {
            if s >= first && s - first <= at {
                at += 1;
            }
        }
        match self.remap_of(first + at) {
            Some(&(_, to)) => to,
            None => first + at,
        }
    }

    /// The remap of a defect at `position`, unless it names itself as its spare.
    fn remap_of(&self, position: u64) -> Option<&(u64, u64)> {
        self.remaps
            .iter()
            .find(|&&(d, to)| d == position && to != d)
    }

    fn cylinders(&self) -> u64 {
        (self.last_cylinder + 1).saturating_sub(self.first_cylinder)
    }

    /// Position `at` from `start` (a range's first sector, or the zone's) past every slip
    /// at or before it, each counted against where the ones before put it; then, if that
    /// is a remapped defect, where `spare(to, start)` puts its spare.
    fn slipped(&self, start: u64, at: u64, spare: impl Fn(u64, u64) -> u64) -> u64 {
        let mut slips = 0u64;
        for &s in &self.slips {
            if s >= start && s - start <= at.saturating_add(slips) {
                slips += 1;
            }
        }
        let position = start + at + slips;
        match self.remap_of(position) {
            Some(&(_, to)) => spare(to, start),
            None => position,
        }
    }

    /// LBNs the zone holds on `surfaces` surfaces: its sectors less spares and unused front.
    pub fn lbns(&self, surfaces: u64) -> u64 {
        let tracks = self.cylinders() * surfaces;
        (tracks * self.sectors_per_track).saturating_sub(self.spares.saturating_add(self.front_gap))
    }
}

/// Which surface holds a cylinder's `i`th track (DiskSim's `LBN-to-PBN mapping scheme`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SurfaceOrder {
    /// Surface `i` on every cylinder (`LAYOUT_NORMAL`, 0).
    #[default]
    Normal,
    /// Surfaces in reverse on every other cylinder of a zone, counted from the zone's first,
    /// so that a cylinder switch stays on the surface it was on
    /// (`LAYOUT_CYLSWITCHONSURF1`, 1).
    AlternateInZone,
    /// The same on odd cylinders of the disk (`LAYOUT_CYLSWITCHONSURF2`, 2).
    Alternate,
}

impl SurfaceOrder {
    /// DiskSim's number for it.
    pub fn scheme(self) -> u8 {
        match self {
            Self::Normal => 0,
            Self::AlternateInZone => 1,
            Self::Alternate => 2,
        }
    }

    /// The order DiskSim numbers `scheme`, if one of these.
    pub fn from_scheme(scheme: u64) -> Option<Self> {
        match scheme {
            0 => Some(Self::Normal),
            1 => Some(Self::AlternateInZone),
            2 => Some(Self::Alternate),
            _ => None,
        }
    }

    /// The surface of track `track` of cylinder `cylinder` (`cylinder_in_zone` of its
    /// zone), of `surfaces` (DiskSim's `diskmap_surfno_on_cylinder`).
    pub(super) fn surface(
        self,
        track: u64,
        (cylinder, cylinder_in_zone): (u64, u64),
        surfaces: u64,
    ) -> u64 {
        let reversed = match self {
            Self::Normal => false,
            Self::AlternateInZone => cylinder_in_zone % 2 == 1,
            Self::Alternate => cylinder % 2 == 1,
        };
        if reversed {
            surfaces - 1 - track
        } else {
            track
        }
    }
}
