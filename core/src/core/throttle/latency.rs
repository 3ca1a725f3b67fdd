//! io.latency (blk-iolatency) over the groups: each group's depth, its latencies over 100 ms
//! windows, and the cuts a missed target makes in looser groups' depths; with
//! `latency_percentile`, the target holds for a percentile of the group's I/Os.

use super::{GroupSpec, Throttle};

/// io.latency's window: the latencies of 100 ms decide.
pub(super) const LATENCY_WINDOW_NS: u64 = 100_000_000;

/// One group's share of io.latency: what it has in flight, the depth it may have (`None`:
/// any), and its latencies in the current window.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Depth {
    pub(super) inflight: u32,
    pub(super) allowed: Option<u32>,
    pub(super) latency_sum: u128,
    pub(super) completions: u64,
    /// Completions in the window over the group's target.
    pub(super) over_target: u64,
    /// When the group last went from no room (at its allowed depth) to room: a bio held
    /// by the depth became eligible then, not when it arrived.
    pub(super) room_since: u64,
    /// Under a percentile target: one less than the depth at which the group's I/O last
    /// made a target miss, which growing back does not pass until it probes.
    pub(super) ceiling: Option<u32>,
    /// Under a percentile target: windows met since the last miss, near miss or probe.
    pub(super) calm: u32,
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

impl Throttle {
    /// A target on a percentile is held from the first I/O: every group with a looser
    /// target (or none) starts at depth 1 and earns depth back window by window. Starting
    /// at the device's depth would spend the first windows over the target while the cuts
    /// halve their way down, and a few windows over are the whole tail of a run.
    pub(super) fn start_below_tail_targets(&mut self) {
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

    /// True iff group `g` may have one more bio in flight.
    pub(super) fn room(&self, g: usize) -> bool {
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
}
