//! Limits per group (cgroup v2's `io.max`: `riops`, `wiops`, `rbps`, `wbps`), held in the
//! host before the scheduler, as the kernel's blk-throttle holds bios before they reach the
//! elevator: a limit then binds whichever policy runs and survives a swap, and a policy
//! never sees a bio its group may not issue yet.
//!
//! Each limit is a generic cell rate algorithm (virtual scheduling) in exact integer
//! arithmetic: a bio conforms once `now` reaches its theoretical arrival time less the
//! burst tolerance, and then pushes that time on by its cost (1 I/O, or its bytes) over the
//! rate. Bios that do not conform wait, in arrival order per group and direction, until the
//! nanosecond they do: limits hold down to 1 IOPS or 1 byte/s, with no time slices.

use std::collections::VecDeque;

use schedhost_sdk::Op;

use super::request::Bio;

/// One group's parameters, in cgroup v2's words; `None` is unset (unlimited, unreserved).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct GroupSpec {
    /// Its name (fio's `cgroup=`).
    pub name: String,
    /// io.weight: its share against other groups, 1 to 10000 (fio's `cgroup_weight=`). The
    /// policy serves it (mclock, bfq); the host does not.
    pub weight: u32,
    /// I/Os per second it is promised whatever the others do (mClock's reservation), served
    /// by the policy.
    pub reserve_iops: Option<u64>,
    /// Read I/Os per second.
    pub riops: Option<u64>,
    /// Write I/Os per second (flushes and discards count as writes).
    pub wiops: Option<u64>,
    /// Read bytes per second.
    pub rbps: Option<u64>,
    /// Write bytes per second.
    pub wbps: Option<u64>,
    /// I/Os beyond the rate that may go at once (`riops_burst`, `wiops_burst`), per
    /// direction.
    pub iops_burst: [u64; 2],
    /// Bytes beyond the rate that may go at once (`rbps_burst`, `wbps_burst`).
    pub bps_burst: [u64; 2],
    /// io.latency's `target`: when the group's mean latency over a window is above it, the
    /// groups with looser targets (or none) get half the queue depth they had, down to 1.
    pub latency_target_ns: Option<u64>,
    /// The target holds for this percentile of the group's I/Os, in tenths of a percent
    /// (`latency_percentile=99` is 990), in place of io.latency's mean. JSON says it as the
    /// flag does (`"latency_percentile": 99.0`).
    #[serde(rename = "latency_percentile", serialize_with = "permille_as_percent")]
    pub latency_permille: Option<u16>,
}

fn permille_as_percent<S: serde::Serializer>(
    permille: &Option<u16>,
    out: S,
) -> Result<S::Ok, S::Error> {
    match permille {
        Some(p) => out.serialize_f64(f64::from(*p) / 10.0),
        None => out.serialize_none(),
    }
}

/// cgroup v2's default io.weight.
pub const DEFAULT_WEIGHT: u32 = 100;

impl Default for GroupSpec {
    fn default() -> Self {
        Self {
            name: String::new(),
            weight: DEFAULT_WEIGHT,
            reserve_iops: None,
            riops: None,
            wiops: None,
            rbps: None,
            wbps: None,
            iops_burst: [0; 2],
            bps_burst: [0; 2],
            latency_target_ns: None,
            latency_permille: None,
        }
    }
}

impl GroupSpec {
    /// What the policy hears of group number `id` (from 1).
    pub fn for_policy(&self, id: u32) -> schedhost_sdk::Group {
        schedhost_sdk::Group {
            id,
            weight: self.weight,
            reserve_iops: self.reserve_iops,
            limit_iops: [self.riops, self.wiops],
            limit_bps: [self.rbps, self.wbps],
            latency_target_ns: self.latency_target_ns,
        }
    }

    /// True iff it limits anything or protects itself with a latency target.
    pub fn limits(&self) -> bool {
        self.riops
            .or(self.wiops)
            .or(self.rbps)
            .or(self.wbps)
            .or(self.latency_target_ns)
            .is_some()
    }
}

/// io.latency's window: the latencies of 100 ms decide.
pub const LATENCY_WINDOW_NS: u64 = 100_000_000;

/// One group's share of io.latency: what it has in flight, the depth it may have (`None`:
/// any), and its latencies in the current window.
#[derive(Debug, Clone, Copy, Default)]
struct Depth {
    inflight: u32,
    allowed: Option<u32>,
    latency_sum: u128,
    completions: u64,
    /// Completions in the window over the group's target.
    over_target: u64,
    /// When the group last went from no room (at its allowed depth) to room: a bio held
    /// by the depth became eligible then, not when it arrived.
    room_since: u64,
    /// Under a percentile target: one less than the depth at which the group's I/O last
    /// made a target miss, which growing back does not pass until it probes.
    ceiling: Option<u32>,
    /// Under a percentile target: windows met since the last miss, near miss or probe.
    calm: u32,
}

/// Under a percentile target, a cut group probes one past its ceiling after this many
/// windows met in a row: a window over the target is then at most one in this many.
const PROBE_WINDOWS: u32 = 10;

/// A window met under a percentile target: a cut depth that never missed doubles (slow
/// start); after a miss it grows by a quarter (at least 1) up to the ceiling that miss set,
/// and every [`PROBE_WINDOWS`] calm windows the ceiling rises by one; grown back to `base`,
/// the group is uncut. The tail of a run is its windows over the target, so growth
/// approaches the depth that missed instead of jumping past it.
fn grow_under_tail_target(d: &mut Depth, base: u32) {
    let Some(allowed) = d.allowed else {
        return;
    };
    d.calm += 1;
    if d.calm >= PROBE_WINDOWS {
        d.ceiling = d.ceiling.map(|c| c.saturating_add(1));
        d.calm = 0;
    }
    let step = match d.ceiling {
        None => allowed,
        Some(_) => (allowed / 4).max(1),
    };
    let grown = allowed
        .saturating_add(step)
        .min(d.ceiling.unwrap_or(u32::MAX));
    if grown >= base {
        (d.allowed, d.ceiling) = (None, None);
    } else {
        d.allowed = Some(grown);
    }
}

/// True iff more of the window's I/Os were over the target than `1/share` of what the
/// percentile `permille` allows (share 1: the whole allowance).
fn over_allowance(d: &Depth, permille: u16, share: u64) -> bool {
    let allowed = u128::from(d.completions) * u128::from(1000 - permille.min(999));
    u128::from(d.over_target) * 1000 * u128::from(share) > allowed
}

/// blk-throttle's slice (`throtl_slice`): 100 ms on a disk, 20 ms on flash
/// (`DFL_THROTL_SLICE_HD`, `DFL_THROTL_SLICE_SSD`). A group that left its rate unused for
/// less than a slice may still use it, as blk-throttle lets it within the slice.
pub const SLICE_ROTATIONAL_NS: u64 = 100_000_000;
pub const SLICE_FLASH_NS: u64 = 20_000_000;

/// One limit's state: the theoretical arrival time, scaled by the rate so that every step
/// is an integer (`tat × rate`, in ns·units/s).
#[derive(Debug, Clone, Copy)]
struct Cell {
    rate: u64,
    /// Tolerance: burst units, scaled as `tat`.
    tolerance: u128,
    tat: u128,
    /// The slice, in ns: how far back an idle group's unused rate reaches.
    slice_ns: u64,
    /// Whether a bio went yet: before the first, the group left nothing unused.
    started: bool,
}

impl Cell {
    fn new(rate: u64, burst: u64, slice_ns: u64) -> Self {
        Self {
            rate: rate.max(1),
            tolerance: u128::from(burst) * 1_000_000_000,
            tat: 0,
            slice_ns,
            started: false,
        }
    }

    /// When the next bio may go: the first nanosecond it conforms.
    fn due(&self) -> u64 {
        let earliest = self.tat.saturating_sub(self.tolerance);
        u64::try_from(earliest.div_ceil(u128::from(self.rate))).unwrap_or(u64::MAX)
    }

    /// A bio costing `units` goes at `now_ns`. Its cost runs from the theoretical time if
    /// the group was idle for less than a slice (and so from the nanosecond it became due,
    /// rounding never drifting the rate), else from a slice before `now_ns`: a group whose
    /// submitter fell behind for a moment (a client starved of CPU beside a busy tenant)
    /// gets its rate over the slice, and never more than a slice's worth at once.
    fn charge(&mut self, now_ns: u64, units: u64) {
        let now = u128::from(now_ns) * u128::from(self.rate);
        let reach = if self.started {
            u128::from(self.slice_ns) * u128::from(self.rate)
        } else {
            0
        };
        self.started = true;
        let base = self.tat.max(now.saturating_sub(reach));
        self.tat = base + u128::from(units) * 1_000_000_000;
    }
}

/// One group and direction: its limits and the bios waiting for them.
#[derive(Debug, Default)]
struct Lane {
    iops: Option<Cell>,
    bps: Option<Cell>,
    /// Each with when it arrived.
    waiting: VecDeque<(Bio, u64)>,
}

impl Lane {
    /// When its next bio may go (its limits' latest).
    fn due(&self) -> u64 {
        let by_iops = self.iops.map_or(0, |c| c.due());
        let by_bytes = self.bps.map_or(0, |c| c.due());
        by_iops.max(by_bytes)
    }

    fn charge(&mut self, now_ns: u64, bio: &Bio) {
        if let Some(c) = &mut self.iops {
            c.charge(now_ns, 1);
        }
        if let Some(c) = &mut self.bps {
            c.charge(now_ns, charged_bytes(bio));
        }
    }
}

/// What a bio costs against a byte rate. A discard moves no data: blk-throttle charges it
/// one sector (`throtl_bio_data_size`), so a TRIM of a whole export is not hours of debt
/// for its group's writes and flushes.
fn charged_bytes(bio: &Bio) -> u64 {
    if bio.op == Op::Discard {
        512
    } else {
        u64::from(bio.sectors) * 512
    }
}

impl Cell {
    /// This cell as it goes on under `rate` and `burst` from `now_ns`: unchanged when
    /// neither changed; otherwise the units it is owed (the debt past `now_ns`) are
    /// carried over at the new rate, so a change never forgives what was already spent.
    fn retuned(self, now_ns: u64, rate: u64, burst: u64) -> Self {
        let fresh = Self::new(rate, burst, self.slice_ns);
        if fresh.rate == self.rate && fresh.tolerance == self.tolerance {
            return self;
        }
        // `tat` is ns × rate, so past `now` it is the units charged ahead, × 1e9, whatever
        // the rate: the same debt, repaid at the new one.
        let owed = self
            .tat
            .saturating_sub(u128::from(now_ns) * u128::from(self.rate));
        Self {
            tat: u128::from(now_ns) * u128::from(fresh.rate) + owed,
            ..fresh
        }
    }
}

/// What a group did, for the report.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct GroupStats {
    /// Bios that passed the limits, [read, write].
    pub ios: [u64; 2],
    /// Their bytes.
    pub bytes: [u64; 2],
    /// Of those, bios that had to wait.
    pub throttled: u64,
    /// Their waits, added up, in ns.
    pub throttled_ns: u64,
    /// Windows in which this group's mean latency was above its target.
    pub missed_windows: u64,
    /// The queue depth io.latency allows the group now, if it cut it.
    pub allowed_depth: Option<u32>,
}

/// A group in the report: its limits and what it did, one plain object.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct GroupReport {
    /// Its name and limits.
    #[serde(flatten)]
    pub limits: GroupSpec,
    /// What it did.
    #[serde(flatten)]
    pub stats: GroupStats,
}

/// The groups: which ctx belongs to which, each one's parameters, and its limits held.
#[derive(Debug, Default)]
pub struct Throttle {
    groups: Vec<GroupSpec>,
    /// Per group, [read, write].
    lanes: Vec<[Lane; 2]>,
    stats: Vec<GroupStats>,
    /// By ctx: its group, if any.
    member: Vec<Option<u16>>,
    /// The group of every ctx past `member` (an NBD export's clients, which come and go).
    default: Option<u16>,
    /// Per group: io.latency's depth and window.
    depth: Vec<Depth>,
    /// The depth io.latency cuts from and grows back to (the device's queue depth).
    base_depth: u32,
    /// When the current latency window began.
    window_start: u64,
    /// blk-throttle's slice for this device ([`SLICE_FLASH_NS`] until told).
    slice_ns: u64,
}

impl Throttle {
    /// `groups`, with `member[ctx]` naming each ctx's group (an index into `groups`).
    pub fn new(groups: Vec<GroupSpec>, member: Vec<Option<u16>>) -> Self {
        let lanes = groups
            .iter()
            .map(|g| {
                let lane = |iops: Option<u64>, bps: Option<u64>, d: usize| Lane {
                    iops: iops.map(|r| Cell::new(r, g.iops_burst[d], SLICE_FLASH_NS)),
                    bps: bps.map(|r| Cell::new(r, g.bps_burst[d], SLICE_FLASH_NS)),
                    waiting: VecDeque::new(),
                };
                [lane(g.riops, g.rbps, 0), lane(g.wiops, g.wbps, 1)]
            })
            .collect();
        let n = groups.len();
        let mut throttle = Self {
            groups,
            lanes,
            stats: vec![GroupStats::default(); n],
            member,
            default: None,
            depth: vec![Depth::default(); n],
            base_depth: 32,
            window_start: 0,
            slice_ns: SLICE_FLASH_NS,
        };
        throttle.start_below_tail_targets();
        throttle
    }

    /// A target on a percentile is held from the first I/O: every group with a looser
    /// target (or none) starts at depth 1 and earns depth back window by window. Starting
    /// at the device's depth would spend the first windows over the target while the cuts
    /// halve their way down, and a few windows over are the whole tail of a run.
    fn start_below_tail_targets(&mut self) {
        let target = |g: &GroupSpec| g.latency_target_ns.unwrap_or(u64::MAX);
        let tightest = self
            .groups
            .iter()
            .filter(|g| g.latency_permille.is_some())
            .map(target)
            .min();
        if let Some(tightest) = tightest {
            for (g, d) in self.groups.iter().zip(&mut self.depth) {
                if target(g) > tightest {
                    d.allowed = Some(1);
                }
            }
        }
    }

    /// io.latency cuts depths from `depth` (the device's queue depth) and grows them back
    /// to it.
    pub fn with_base_depth(mut self, depth: u32) -> Self {
        self.base_depth = depth.max(1);
        self
    }

    /// Limits hold over blk-throttle's slice for a device that seeks (`rotational`) or not.
    pub fn with_slice_for(mut self, rotational: bool) -> Self {
        self.slice_ns = if rotational {
            SLICE_ROTATIONAL_NS
        } else {
            SLICE_FLASH_NS
        };
        for cell in self
            .lanes
            .iter_mut()
            .flatten()
            .flat_map(|lane| [lane.iops.as_mut(), lane.bps.as_mut()])
            .flatten()
        {
            cell.slice_ns = self.slice_ns;
        }
        self
    }

    /// True iff group `g` may have one more bio in flight.
    fn room(&self, g: usize) -> bool {
        let d = &self.depth[g];
        d.allowed.is_none_or(|allowed| d.inflight < allowed)
    }

    /// A bio of `ctx` finished at `now_ns` after `latency_ns`: its group has one less in
    /// flight and one more latency for the window; a window that ended adjusts depths.
    pub fn on_complete(&mut self, now_ns: u64, ctx: u32, latency_ns: u64) {
        let Some(g) = self.group_of(ctx) else {
            return;
        };
        let had_room = self.room(g);
        let d = &mut self.depth[g];
        d.inflight = d.inflight.saturating_sub(1);
        if !had_room && d.allowed.is_none_or(|allowed| d.inflight < allowed) {
            d.room_since = now_ns;
        }
        d.latency_sum += u128::from(latency_ns);
        d.completions += 1;
        if self.groups[g]
            .latency_target_ns
            .is_some_and(|target| latency_ns > target)
        {
            d.over_target += 1;
        }
        if now_ns.saturating_sub(self.window_start) >= LATENCY_WINDOW_NS {
            self.end_window(now_ns);
        }
    }

    /// Group `g` missed its target in the window. By default, as io.latency judges: its mean
    /// latency was above it, or more than a tenth of its I/Os were (blk-iolatency judges
    /// rotational devices by the mean and others by the 90th percentile; the host holds a
    /// group to both). With a percentile, more of its I/Os than the percentile leaves were
    /// over.
    fn missed(&self, g: usize) -> bool {
        let d = &self.depth[g];
        let Some(target) = self.groups[g].latency_target_ns else {
            return false;
        };
        if d.completions == 0 {
            return false;
        }
        match self.groups[g].latency_permille {
            None => {
                d.latency_sum / u128::from(d.completions) > u128::from(target)
                    || d.over_target * 10 > d.completions
            }
            Some(permille) => over_allowance(d, permille, 1),
        }
    }

    /// Group `g`, held to a percentile, came within half its allowance of missing: the
    /// depths it cut stay where they are, so that growing back does not carry it over
    /// (the tail is the windows that miss).
    fn near_miss(&self, g: usize) -> bool {
        let d = &self.depth[g];
        match (
            self.groups[g].latency_target_ns,
            self.groups[g].latency_permille,
        ) {
            (Some(_), Some(permille)) => over_allowance(d, permille, 2),
            _ => false,
        }
    }

    /// io.latency at the end of a window: each group that missed its target halves the
    /// depth of every group with a looser target (or none), down to 1; when none missed, cut
    /// depths grow back by a sixteenth of the base a window, and past it are uncut. Under a
    /// percentile target growth is finer ([`Throttle::grow_under_tail_target`]), and a group
    /// that came near its allowance holds the others where they are.
    fn end_window(&mut self, now_ns: u64) {
        let target =
            |groups: &[GroupSpec], g: usize| groups[g].latency_target_ns.unwrap_or(u64::MAX);
        let missed: Vec<usize> = (0..self.groups.len()).filter(|&g| self.missed(g)).collect();
        let tightest_missed = missed.iter().map(|&g| target(&self.groups, g)).min();
        let tightest_near = (0..self.groups.len())
            .filter(|&g| self.near_miss(g))
            .map(|g| target(&self.groups, g))
            .min();
        let tail = self.groups.iter().any(|g| g.latency_permille.is_some());
        for g in 0..self.groups.len() {
            let had_room = self.room(g);
            let mine = target(&self.groups, g);
            let base = self.base_depth;
            let d = &mut self.depth[g];
            match tightest_missed {
                Some(t) if t < mine => {
                    let depth = d.allowed.unwrap_or(base);
                    if tail {
                        d.ceiling = Some(depth.saturating_sub(1).max(1));
                        d.calm = 0;
                    }
                    d.allowed = Some((depth / 2).max(1));
                }
                None if tightest_near.is_some_and(|t| t < mine) => d.calm = 0,
                None if tail => grow_under_tail_target(d, base),
                None => {
                    let step = (base / 16).max(1);
                    d.allowed = d
                        .allowed
                        .map(|a| a.saturating_add(step))
                        .filter(|&a| a < base);
                }
                Some(_) => {}
            }
            if !had_room && d.allowed.is_none_or(|allowed| d.inflight < allowed) {
                d.room_since = now_ns;
            }
            (d.latency_sum, d.completions, d.over_target) = (0, 0, 0);
        }
        for g in missed {
            self.stats[g].missed_windows += 1;
        }
        self.window_start = now_ns;
    }

    fn group_of(&self, ctx: u32) -> Option<usize> {
        let group = match self.member.get(ctx as usize) {
            Some(member) => (*member)?,
            None => self.default?,
        } as usize;
        (group < self.lanes.len()).then_some(group)
    }

    /// The group `ctx` is in, numbered from 1 (a [`schedhost_sdk::Group`]'s id), or 0.
    pub fn group_number(&self, ctx: u32) -> u32 {
        self.group_of(ctx).map_or(0, |g| g as u32 + 1)
    }

    /// `ctx` belongs to `group` (an index into `groups`; `None`: to none) from now on.
    pub fn assign(&mut self, ctx: u32, group: Option<u16>) {
        let index = ctx as usize;
        if self.member.len() <= index {
            self.member.resize(index + 1, self.default);
        }
        self.member[index] = group;
    }

    /// Every ctx `member` does not name belongs to group `group` (an index into `groups`).
    pub fn with_default(mut self, group: u16) -> Self {
        self.default = Some(group);
        self
    }

    /// Group `limits.name` takes `limits` from `now_ns` on (`ctl group`): a rate it did not
    /// change keeps its state, a changed one carries its debt at the new rate, and the bios
    /// already waiting wait for the new ones.
    ///
    /// # Errors
    /// No group of that name.
    pub fn set_limits(&mut self, now_ns: u64, limits: GroupSpec) -> Result<(), String> {
        let g = self
            .groups
            .iter()
            .position(|g| g.name == limits.name)
            .ok_or_else(|| {
                let names: Vec<&str> = self.groups.iter().map(|g| g.name.as_str()).collect();
                format!(
                    "no group {:?} (the groups are {})",
                    limits.name,
                    names.join(", ")
                )
            })?;
        // cgroup keeps a key it did not change and its state: a cell goes on as it was,
        // or under its new rate with its debt; only a new limit starts afresh, from now.
        let slice_ns = self.slice_ns;
        let retune = |cell: Option<Cell>, rate: Option<u64>, burst: u64| {
            rate.map(|r| match cell {
                Some(cell) => cell.retuned(now_ns, r, burst),
                None => {
                    let mut cell = Cell::new(r, burst, slice_ns);
                    cell.tat = u128::from(now_ns) * u128::from(cell.rate);
                    cell.started = true;
                    cell
                }
            })
        };
        for d in 0..2 {
            let (iops, bps) = if d == 0 {
                (limits.riops, limits.rbps)
            } else {
                (limits.wiops, limits.wbps)
            };
            let lane = &mut self.lanes[g][d];
            lane.iops = retune(lane.iops, iops, limits.iops_burst[d]);
            lane.bps = retune(lane.bps, bps, limits.bps_burst[d]);
        }
        self.groups[g] = limits;
        Ok(())
    }

    /// The groups' limits.
    pub fn groups(&self) -> &[GroupSpec] {
        &self.groups
    }

    /// The groups as the policy hears of them, numbered from 1.
    pub fn for_policy(&self) -> Vec<schedhost_sdk::Group> {
        (1..)
            .zip(&self.groups)
            .map(|(id, g)| g.for_policy(id))
            .collect()
    }

    /// What each group did so far.
    pub fn stats(&self) -> Vec<GroupStats> {
        self.stats
            .iter()
            .zip(&self.depth)
            .map(|(stats, depth)| GroupStats {
                allowed_depth: depth.allowed,
                ..*stats
            })
            .collect()
    }

    /// Each group's limits beside what it did, for the report.
    pub fn report(&self) -> Vec<GroupReport> {
        self.groups
            .iter()
            .zip(self.stats())
            .map(|(limits, stats)| GroupReport {
                limits: limits.clone(),
                stats,
            })
            .collect()
    }

    /// Bios waiting for their group's limits.
    pub fn waiting(&self) -> usize {
        self.lanes
            .iter()
            .flat_map(|l| l.iter())
            .map(|l| l.waiting.len())
            .sum()
    }

    fn place(&self, bio: &Bio) -> Option<(usize, usize)> {
        let group = self.group_of(bio.ctx)?;
        Some((group, usize::from(bio.op != Op::Read)))
    }

    /// `bio` arrives at `now_ns`: `Some(bio)` if it may go on now, `None` if it waits (it
    /// comes out of [`Self::release`] when it may).
    pub fn admit(&mut self, now_ns: u64, bio: Bio) -> Option<Bio> {
        let Some((g, d)) = self.place(&bio) else {
            return Some(bio);
        };
        let room = self.room(g);
        let lane = &mut self.lanes[g][d];
        if lane.waiting.is_empty() && lane.due() <= now_ns && room {
            lane.charge(now_ns, &bio);
            self.depth[g].inflight += 1;
            self.count(g, d, &bio, 0);
            return Some(bio);
        }
        lane.waiting.push_back((bio, now_ns));
        None
    }

    /// The next waiting bio that may go at `now_ns`, if any, with when it arrived.
    pub fn release(&mut self, now_ns: u64) -> Option<(Bio, u64)> {
        for g in 0..self.lanes.len() {
            for d in 0..2 {
                let room = self.room(g);
                let lane = &mut self.lanes[g][d];
                if lane.waiting.is_empty() || lane.due() > now_ns || !room {
                    continue;
                }
                let (bio, since) = lane.waiting.pop_front()?;
                // Charged from when it became eligible, not from when it was let go: a late
                // wake-up (a real device's timer) must not cost the group its rate. Nor from
                // when it arrived: a backlog held by io.latency's depth would then go out
                // as a burst once the cut lifts, faster than the rate.
                let eligible = since.max(lane.due()).max(self.depth[g].room_since);
                lane.charge(eligible.min(now_ns), &bio);
                self.depth[g].inflight += 1;
                self.count(g, d, &bio, now_ns.saturating_sub(since));
                return Some((bio, since));
            }
        }
        None
    }

    /// Every waiting bio, with when it arrived, in arrival order per group and direction:
    /// they leave the throttle without going on (a server refusing them as it stops).
    pub fn take_waiting(&mut self) -> Vec<(Bio, u64)> {
        self.lanes
            .iter_mut()
            .flat_map(|l| l.iter_mut())
            .flat_map(|lane| lane.waiting.drain(..))
            .collect()
    }

    /// When the next waiting bio may go, if any waits.
    pub fn next_release(&self) -> Option<u64> {
        // A group at its io.latency depth goes on when one of its bios completes, not at a
        // time.
        self.lanes
            .iter()
            .enumerate()
            .filter(|&(g, _)| self.room(g))
            .flat_map(|(_, l)| l.iter())
            .filter(|lane| !lane.waiting.is_empty())
            .map(Lane::due)
            .min()
    }

    fn count(&mut self, g: usize, d: usize, bio: &Bio, waited: u64) {
        let s = &mut self.stats[g];
        s.ios[d] += 1;
        s.bytes[d] += u64::from(bio.sectors) * 512;
        if waited > 0 {
            s.throttled += 1;
            s.throttled_ns = s.throttled_ns.saturating_add(waited);
        }
    }
}

#[cfg(test)]
mod tests {
    use schedhost_sdk::PrioClass;

    use super::*;

    fn read(id: u64) -> Bio {
        Bio {
            id,
            ctx: 0,
            op: Op::Read,
            sector: id * 8,
            sectors: 8,
            sync: true,
            prio_class: PrioClass::None,
            prio_level: 4,
        }
    }

    fn throttle(limits: GroupSpec) -> Throttle {
        Throttle::new(vec![limits], vec![Some(0)])
    }

    /// Releases everything that waits, in order, returning when each went.
    fn drain(t: &mut Throttle) -> Vec<u64> {
        let mut at = Vec::new();
        while let Some(when) = t.next_release() {
            while t.release(when).is_some() {
                at.push(when);
            }
        }
        at
    }

    #[test]
    fn an_iops_limit_spaces_bios_to_the_nanosecond() {
        let mut t = throttle(GroupSpec {
            riops: Some(3),
            ..GroupSpec::default()
        });
        assert!(t.admit(0, read(0)).is_some(), "the first goes at once");
        for id in 1..4 {
            assert!(t.admit(0, read(id)).is_none());
        }
        assert_eq!(drain(&mut t), [333_333_334, 666_666_667, 1_000_000_000]);
        assert_eq!(t.stats()[0].throttled, 3);
    }

    #[test]
    fn one_iops_lets_one_bio_a_second() {
        let mut t = throttle(GroupSpec {
            riops: Some(1),
            ..GroupSpec::default()
        });
        for id in 0..4 {
            let _ = t.admit(0, read(id));
        }
        assert_eq!(drain(&mut t), [1_000_000_000, 2_000_000_000, 3_000_000_000]);
    }

    #[test]
    fn a_burst_goes_at_once_then_the_rate_holds() {
        let mut t = throttle(GroupSpec {
            riops: Some(10),
            iops_burst: [2, 0],
            ..GroupSpec::default()
        });
        let now: Vec<bool> = (0..5).map(|id| t.admit(0, read(id)).is_some()).collect();
        assert_eq!(now, [true, true, true, false, false], "1 + a burst of 2");
        assert_eq!(drain(&mut t), [100_000_000, 200_000_000]);
    }

    #[test]
    fn a_byte_rate_charges_each_bio_its_size_and_order_is_kept() {
        let mut t = throttle(GroupSpec {
            rbps: Some(4096),
            ..GroupSpec::default()
        });
        assert!(t.admit(0, read(0)).is_some());
        assert!(t.admit(0, read(1)).is_none());
        assert_eq!(t.next_release(), Some(1_000_000_000), "4 KiB at 4 KiB/s");
        assert!(t.release(999_999_999).is_none());
        assert_eq!(
            t.release(1_000_000_000).map(|(b, at)| (b.id, at)),
            Some((1, 0))
        );
    }

    #[test]
    fn new_limits_take_over_from_now_and_unknown_groups_are_named() {
        let mut t = throttle(GroupSpec {
            name: "a".into(),
            riops: Some(1),
            ..GroupSpec::default()
        })
        .with_default(0);
        let _ = t.admit(0, read(0));
        let late = Bio { ctx: 7, ..read(1) };
        assert!(
            t.admit(0, late).is_none(),
            "a ctx past the map is the default group's"
        );
        let faster = GroupSpec {
            name: "a".into(),
            riops: Some(1000),
            ..GroupSpec::default()
        };
        t.set_limits(500_000_000, faster).unwrap();
        assert_eq!(
            t.next_release(),
            Some(500_500_000),
            "the new rate starts now, repaying the half I/O still owed"
        );
        let missing = GroupSpec {
            name: "b".into(),
            ..GroupSpec::default()
        };
        assert!(
            t.set_limits(0, missing)
                .unwrap_err()
                .contains("no group \"b\"")
        );
    }

    #[test]
    fn a_missed_latency_target_halves_looser_groups_depth_and_a_met_one_grows_it_back() {
        let fast = GroupSpec {
            name: "fast".into(),
            latency_target_ns: Some(100_000),
            ..GroupSpec::default()
        };
        let bulk = GroupSpec {
            name: "bulk".into(),
            ..GroupSpec::default()
        };
        let mut t = Throttle::new(vec![fast, bulk], vec![Some(0), Some(1)]).with_base_depth(32);
        let bulk_read = |id| Bio { ctx: 1, ..read(id) };
        for id in 0..20 {
            assert!(t.admit(0, bulk_read(id)).is_some(), "no cut yet");
        }
        // The fast group's mean is 300 µs over a window: bulk goes to 16, then 8.
        t.on_complete(50_000_000, 0, 300_000);
        t.on_complete(LATENCY_WINDOW_NS, 0, 300_000);
        assert_eq!(t.stats()[1].allowed_depth, Some(16));
        assert_eq!(t.stats()[0].missed_windows, 1);
        // 20 in flight, 16 allowed: the next bulk bio waits, with no time to wake for.
        assert!(t.admit(LATENCY_WINDOW_NS, bulk_read(20)).is_none());
        assert_eq!(
            t.next_release(),
            None,
            "a completion lets it go, not a timer"
        );
        for _ in 0..5 {
            t.on_complete(LATENCY_WINDOW_NS + 1, 1, 10_000);
        }
        assert!(
            t.release(LATENCY_WINDOW_NS + 1).is_some(),
            "15 in flight: room again"
        );
        t.on_complete(2 * LATENCY_WINDOW_NS, 0, 300_000);
        assert_eq!(t.stats()[1].allowed_depth, Some(8));
        // A window met: bulk grows back by a sixteenth of 32 per window, then is uncut.
        t.on_complete(3 * LATENCY_WINDOW_NS, 0, 50_000);
        assert_eq!(t.stats()[1].allowed_depth, Some(10));
        assert_eq!(
            t.stats()[0].allowed_depth,
            None,
            "the tight group is never cut"
        );
    }

    #[test]
    fn a_percentile_target_starts_looser_groups_at_one_and_grows_them_back_short_of_the_depth_that_missed()
     {
        let fast = GroupSpec {
            name: "fast".into(),
            latency_target_ns: Some(100_000),
            latency_permille: Some(990),
            ..GroupSpec::default()
        };
        let bulk = GroupSpec {
            name: "bulk".into(),
            ..GroupSpec::default()
        };
        let mut t = Throttle::new(vec![fast, bulk], vec![Some(0), Some(1)]).with_base_depth(32);
        let depth = |t: &Throttle| t.stats()[1].allowed_depth;
        assert_eq!(depth(&t), Some(1), "held from the first I/O");
        // Window `w` of the fast group's: 100 I/Os, `over` of them over the target; the last
        // ends the window.
        let window = |t: &mut Throttle, w: u64, over: u32| {
            for i in 0..100u32 {
                let latency = if i < over { 300_000 } else { 50_000 };
                let at = if i == 99 {
                    w * LATENCY_WINDOW_NS
                } else {
                    (w - 1) * LATENCY_WINDOW_NS + 1 + u64::from(i)
                };
                t.on_complete(at, 0, latency);
            }
        };
        // All under the target: bulk doubles (it never missed).
        window(&mut t, 1, 0);
        assert_eq!(depth(&t), Some(2));
        window(&mut t, 2, 0);
        assert_eq!(depth(&t), Some(4));
        window(&mut t, 3, 0);
        assert_eq!(depth(&t), Some(8));
        // 2 of 100 over the target: more than the 99th percentile leaves. Halved, and the
        // depth that missed less one is the ceiling.
        window(&mut t, 4, 2);
        assert_eq!(depth(&t), Some(4));
        assert_eq!(t.stats()[0].missed_windows, 1);
        // 1 of 100: within the allowance but past half of it: held where it is.
        window(&mut t, 5, 1);
        assert_eq!(depth(&t), Some(4));
        // Calm windows: a quarter at a time, up to the ceiling of 7, not past it.
        window(&mut t, 6, 0);
        assert_eq!(depth(&t), Some(5));
        window(&mut t, 7, 0);
        assert_eq!(depth(&t), Some(6));
        window(&mut t, 8, 0);
        assert_eq!(depth(&t), Some(7));
        for w in 9..=14 {
            window(&mut t, w, 0);
            assert_eq!(depth(&t), Some(7), "window {w}");
        }
        // The tenth calm window in a row probes one past the ceiling.
        window(&mut t, 15, 0);
        assert_eq!(depth(&t), Some(8));
        assert_eq!(
            t.stats()[0].allowed_depth,
            None,
            "the tight group is never cut"
        );
    }

    #[test]
    fn a_discard_is_charged_one_sector_against_a_byte_rate() {
        let mut t = throttle(GroupSpec {
            wbps: Some(4096),
            ..GroupSpec::default()
        });
        // A TRIM of 1 GiB, then a 4 KiB write.
        let trim = Bio {
            op: Op::Discard,
            sectors: 2 << 20,
            ..read(0)
        };
        assert!(t.admit(0, trim).is_some());
        let write = Bio {
            op: Op::Write,
            ..read(1)
        };
        assert!(t.admit(0, write).is_none());
        assert_eq!(
            t.next_release(),
            Some(125_000_000),
            "512 bytes at 4 KiB/s, not 1 GiB"
        );
        assert_eq!(
            t.stats()[0].bytes[1],
            1 << 30,
            "the report keeps its length"
        );
    }

    #[test]
    fn a_limits_change_keeps_the_debt_of_a_rate_it_did_not_change_and_carries_a_changed_one() {
        let spec = |riops: u64, weight: u32| GroupSpec {
            name: "a".into(),
            riops: Some(riops),
            weight,
            ..GroupSpec::default()
        };
        let mut t = throttle(spec(1, 100));
        for id in 0..3 {
            let _ = t.admit(0, read(id));
        }
        // Re-sending the same rate with another weight forgives nothing.
        t.set_limits(500_000_000, spec(1, 200)).unwrap();
        assert_eq!(t.next_release(), Some(1_000_000_000));
        // Half an I/O still owed at 0.5 s, repaid at 2 IOPS: due at 0.75 s.
        t.set_limits(500_000_000, spec(2, 200)).unwrap();
        assert_eq!(t.next_release(), Some(750_000_000));
        assert_eq!(drain(&mut t), [750_000_000, 1_250_000_000]);
    }

    #[test]
    fn a_backlog_held_by_a_latency_cut_goes_out_at_the_rate_once_it_lifts() {
        let fast = GroupSpec {
            name: "fast".into(),
            latency_target_ns: Some(100_000),
            ..GroupSpec::default()
        };
        let bulk = GroupSpec {
            name: "bulk".into(),
            riops: Some(100),
            ..GroupSpec::default()
        };
        let mut t = Throttle::new(vec![fast, bulk], vec![Some(0), Some(1)]).with_base_depth(2);
        let bulk_read = |id| Bio { ctx: 1, ..read(id) };
        assert!(t.admit(0, bulk_read(0)).is_some());
        // The fast group misses its target: bulk may have 1 in flight, and has it.
        t.on_complete(LATENCY_WINDOW_NS, 0, 300_000);
        assert_eq!(t.stats()[1].allowed_depth, Some(1));
        for id in 1..400 {
            assert!(t.admit(LATENCY_WINDOW_NS, bulk_read(id)).is_none());
        }
        assert_eq!(t.next_release(), None, "held by the depth");
        // At 3 s its one I/O completes and the next window lifts the cut.
        t.on_complete(3_000_000_000, 1, 10_000);
        assert_eq!(t.stats()[1].allowed_depth, None);
        let mut went = Vec::new();
        let mut now = 3_000_000_000;
        while let Some(when) = t.next_release() {
            now = now.max(when);
            while t.release(now).is_some() {
                went.push(now);
            }
        }
        let first_second = went.iter().filter(|&&at| at < 4_000_000_000).count();
        assert_eq!(went[0], 3_000_000_000, "eligible when the room came");
        // The rate, one for the I/O at the start, and a slice's worth (20 ms at 100 IOPS) of
        // the rate left unused while held.
        assert!(
            first_second <= 103,
            "{first_second} I/Os in the second after the cut lifted, against riops=100"
        );
    }

    #[test]
    fn a_group_idle_under_a_slice_gets_the_rate_it_left_unused_and_never_more_than_a_slice_of_it() {
        let flash = throttle(GroupSpec {
            riops: Some(1000),
            ..GroupSpec::default()
        });
        for (mut t, slice_ios) in [
            (flash, 20),
            (
                throttle(GroupSpec {
                    riops: Some(1000),
                    ..GroupSpec::default()
                })
                .with_slice_for(true),
                100,
            ),
        ] {
            // One a millisecond from 0 to 4 ms, then nothing until 10 ms: the five it did
            // not send go at once with the one due, as blk-throttle lets a group use its
            // slice.
            for id in 0..5 {
                assert!(t.admit(id * 1_000_000, read(id)).is_some());
            }
            let mut at_once = 0;
            while t.admit(10_000_000, read(100 + at_once)).is_some() {
                at_once += 1;
            }
            assert_eq!(at_once, 6, "5 to 9 ms unused, and 10 ms on time");
            // Idle for a second: a slice's worth at once, not a second's.
            let mut t2 = throttle(GroupSpec {
                riops: Some(1000),
                ..GroupSpec::default()
            })
            .with_slice_for(slice_ios == 100);
            assert!(t2.admit(0, read(0)).is_some());
            let mut burst = 0;
            while t2.admit(2_000_000_000, read(1000 + burst)).is_some() {
                burst += 1;
            }
            assert_eq!(
                burst,
                slice_ios + 1,
                "a slice of {slice_ios} I/Os, and the one due now"
            );
        }
        // A group's first bio at 5 s left nothing unused before it: the next waits 1 ms.
        let mut t = throttle(GroupSpec {
            riops: Some(1000),
            ..GroupSpec::default()
        });
        assert!(t.admit(5_000_000_000, read(0)).is_some());
        assert!(t.admit(5_000_000_000, read(1)).is_none());
        assert_eq!(t.next_release(), Some(5_001_000_000));
    }

    #[test]
    fn writes_and_other_groups_are_not_held_by_a_read_limit() {
        let mut t = Throttle::new(
            vec![GroupSpec {
                riops: Some(1),
                ..GroupSpec::default()
            }],
            vec![Some(0), None],
        );
        let _ = t.admit(0, read(0));
        let write = Bio {
            op: Op::Write,
            ..read(1)
        };
        assert!(t.admit(0, write).is_some());
        let other = Bio { ctx: 1, ..read(2) };
        assert!(t.admit(0, other).is_some());
    }
}
