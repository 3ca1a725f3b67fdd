//! Limits per group (cgroup v2's `io.max`: `riops`, `wiops`, `rbps`, `wbps`), held in the
//! host before the scheduler, as the kernel's blk-throttle holds bios before they reach the
//! elevator: a limit then binds whichever policy runs and survives a swap, and a policy
//! never sees a bio its group may not issue yet.
//!
//! Each limit is a generic cell rate algorithm (`cell.rs`): a bio conforms once `now`
//! reaches its theoretical arrival time less the burst tolerance, and then pushes that time
//! on by its cost (1 I/O, or its bytes) over the rate. Bios that do not conform wait, in
//! arrival order per group and direction, until the nanosecond they do: limits hold down to
//! 1 IOPS or 1 byte/s; a group that fell behind for less than blk-throttle's slice may use
//! the rate it left unused. io.latency's depths and windows are `latency.rs`.

mod cell;
mod latency;
#[cfg(test)]
mod tests;

use std::collections::VecDeque;

use schedhost_sdk::Op;

use super::request::Bio;
use cell::{Cell, SLICE_FLASH_NS, SLICE_ROTATIONAL_NS};
use latency::Depth;

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

    /// `bio` goes at `now_ns`, under a slice of `slice_ns`.
    fn charge(&mut self, now_ns: u64, bio: &Bio, slice_ns: u64) {
        if let Some(c) = &mut self.iops {
            c.charge(now_ns, 1, slice_ns);
        }
        if let Some(c) = &mut self.bps {
            c.charge(now_ns, charged_bytes(bio), slice_ns);
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
                    iops: iops.map(|r| Cell::new(r, g.iops_burst[d])),
                    bps: bps.map(|r| Cell::new(r, g.bps_burst[d])),
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
        self
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
        let retune = |cell: Option<Cell>, rate: Option<u64>, burst: u64| {
            rate.map(|r| match cell {
                Some(cell) => cell.retuned(now_ns, r, burst),
                None => {
                    let mut cell = Cell::new(r, burst);
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

    /// Whether group `group` (numbered from 1, as [`Self::group_number`] gives it) has bios
    /// waiting for its limits.
    pub fn holds(&self, group: u32) -> bool {
        let Some(index) = (group as usize).checked_sub(1) else {
            return false;
        };
        self.lanes
            .get(index)
            .is_some_and(|lanes| lanes.iter().any(|l| !l.waiting.is_empty()))
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
        let (room, slice_ns) = (self.room(g), self.slice_ns);
        let lane = &mut self.lanes[g][d];
        if lane.waiting.is_empty() && lane.due() <= now_ns && room {
            lane.charge(now_ns, &bio, slice_ns);
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
                let (room, slice_ns) = (self.room(g), self.slice_ns);
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
                lane.charge(eligible.min(now_ns), &bio, slice_ns);
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
