//! Whether a group completes at its io.max rate. The host holds a group's limits before the
//! policy (as blk-throttle sits above the scheduler), so a group at its limit is held back by
//! its limiter, not by the device: it needs no room kept on the device for its weight's
//! part, and keeping that room for it costs the other groups the device's depth (a group at
//! `riops=111334` of weight 38 beside an unlimited one of weight 76 at iodepth 238 on
//! `sim:ssd`: the bound held the device where the limited group's weight's part was its
//! limit, and the two completed 0.885 of noop's IOPS).
//!
//! Each limited group's completions are counted over windows of at least 10 ms and 32 I/Os at
//! its limit; at a window's end the group is at its limit where, in every direction it
//! completed I/O in, a limit (IOPS or bytes) let through no more than 1/0.98 of what it
//! completed. A group whose weight's part is under its limit completes its part, under the
//! limit, and stays bounded for.

use std::collections::BTreeMap;

use crate::{Group, Op};

/// Shortest window.
const MIN_WINDOW_NS: u64 = 10_000_000;
/// Longest window: a limit of a few IOPS is judged over a second, not over 32 of its I/Os.
const MAX_WINDOW_NS: u64 = 1_000_000_000;
/// I/Os a window holds at the group's lowest limit (4 KiB each for a byte rate).
const WINDOW_IOS: u64 = 32;
const WINDOW_IO_BYTES: u64 = 4096;
/// At its limit: completions at least this many thousandths of what the limit lets through.
const AT_LIMIT_PERMILLE: u128 = 980;
const NS_PER_S: u128 = 1_000_000_000;

/// One group's io.max limits, [read, write] (writes and discards count as writes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Limits {
    iops: [Option<u64>; 2],
    bps: [Option<u64>; 2],
}

impl Limits {
    fn of(group: &Group) -> Self {
        Self {
            iops: group.limit_iops,
            bps: group.limit_bps,
        }
    }

    fn any(&self) -> bool {
        self.iops.iter().chain(&self.bps).any(Option::is_some)
    }

    /// A window long enough for [`WINDOW_IOS`] at the lowest limit, within the bounds.
    fn window_ns(&self) -> u64 {
        let by_iops = self
            .iops
            .iter()
            .flatten()
            .map(|&r| u128::from(WINDOW_IOS) * NS_PER_S / u128::from(r.max(1)));
        let by_bps =
            self.bps.iter().flatten().map(|&r| {
                u128::from(WINDOW_IOS * WINDOW_IO_BYTES) * NS_PER_S / u128::from(r.max(1))
            });
        let longest = by_iops.chain(by_bps).max().unwrap_or(0);
        u64::try_from(longest)
            .unwrap_or(u64::MAX)
            .clamp(MIN_WINDOW_NS, MAX_WINDOW_NS)
    }
}

/// A limited group's window.
#[derive(Debug, Clone, Default)]
struct Watch {
    limits: Limits,
    /// [`Limits::window_ns`], taken once: it is read at every completion.
    window_ns: u64,
    /// When the window began (the completion that closed the last one); `None` until the
    /// group's first completion.
    since_ns: Option<u64>,
    ios: [u64; 2],
    bytes: [u64; 2],
    at_limit: bool,
}

impl Watch {
    /// The window ends at `now_ns`: judged, and the next begins.
    fn close(&mut self, now_ns: u64) {
        let elapsed = now_ns.saturating_sub(self.since_ns.unwrap_or(now_ns));
        self.at_limit = self.judge(elapsed);
        self.since_ns = Some(now_ns);
        self.ios = [0; 2];
        self.bytes = [0; 2];
    }

    /// Whether the group completed at its limit over a window of `elapsed_ns` that ends now:
    /// in every direction it completed I/O in, at 0.98 of a limit or more.
    fn judge(&self, elapsed_ns: u64) -> bool {
        // Saturating: a rate and a window from a hostile host can pass even u128.
        let at = |done: u64, rate: Option<u64>| {
            rate.is_some_and(|r| {
                (u128::from(done) * NS_PER_S * 1000)
                    >= (AT_LIMIT_PERMILLE * u128::from(r)).saturating_mul(u128::from(elapsed_ns))
            })
        };
        let mut any = false;
        for d in 0..2 {
            if self.ios[d] == 0 {
                continue;
            }
            any = true;
            let (iops, bps) = (self.limits.iops[d], self.limits.bps[d]);
            if !(at(self.ios[d], iops) || at(self.bytes[d], bps)) {
                return false;
            }
        }
        any
    }
}

/// Each limited group's pace.
#[derive(Debug, Clone, Default)]
pub(super) struct LimitPace {
    groups: BTreeMap<u32, Watch>,
}

impl LimitPace {
    /// The groups' limits as the host gives them: a group whose limits changed starts a new
    /// window, not at its limit until it shows it.
    pub(super) fn set(&mut self, groups: &[Group]) {
        let mut next = BTreeMap::new();
        for g in groups {
            let limits = Limits::of(g);
            if !limits.any() {
                continue;
            }
            let watch = match self.groups.remove(&g.id) {
                Some(w) if w.limits == limits => w,
                _ => Watch {
                    limits,
                    window_ns: limits.window_ns(),
                    ..Watch::default()
                },
            };
            next.insert(g.id, watch);
        }
        self.groups = next;
    }

    /// A request of `group` completed at `now_ns`.
    pub(super) fn completed(&mut self, now_ns: u64, group: u32, op: Op, sectors: u32) {
        self.close_overdue(now_ns);
        let Some(watch) = self.groups.get_mut(&group) else {
            return;
        };
        let d = match op {
            Op::Read => 0,
            Op::Write | Op::Discard => 1,
            Op::Flush => return,
        };
        let Some(since) = watch.since_ns else {
            // The first completion opens the first window; the ones after it are counted.
            watch.since_ns = Some(now_ns);
            return;
        };
        // A discard costs one sector against a byte rate, as the host charges it.
        let bytes = if op == Op::Discard {
            512
        } else {
            u64::from(sectors) * 512
        };
        watch.ios[d] = watch.ios[d].saturating_add(1);
        watch.bytes[d] = watch.bytes[d].saturating_add(bytes);
        let elapsed = now_ns.saturating_sub(since);
        if elapsed >= watch.window_ns {
            watch.close(now_ns);
        }
    }

    /// Every window twice its length old is judged at `now_ns`, by any group's completion: a
    /// group that completes nothing is not at its limit, and would otherwise keep its last
    /// window's word until its next completion (a limited group whose requests waited
    /// behind the others' tags completed nothing for 100 ms and was still taken as held).
    fn close_overdue(&mut self, now_ns: u64) {
        for watch in self.groups.values_mut() {
            let Some(since) = watch.since_ns else {
                continue;
            };
            if now_ns.saturating_sub(since) >= watch.window_ns.saturating_mul(2) {
                watch.close(now_ns);
            }
        }
    }

    /// Whether `group` completed at its limit over its last window.
    pub(super) fn at_limit(&self, group: u32) -> bool {
        self.groups.get(&group).is_some_and(|w| w.at_limit)
    }
}
