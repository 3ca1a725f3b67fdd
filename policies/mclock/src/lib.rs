//! mclock: dmClock's tags (Gulati, Merchant and Varman, *mClock*, OSDI 2010; Ceph's
//! `dmclock`) over the host's groups, each with a reservation `r` (IOPS), a weight `w` and
//! a limit `l` (IOPS, by direction).
//!
//! A request's cost is its size in units of `cost_unit` KiB (at least 1), so a 1 MiB read
//! spends 256 times what a 4 KiB one does; or, given the device's peak bandwidth
//! `peak_bw` and mean positioning time `positioning_us`, mClock's `1 + S / (B_peak · T_m)`,
//! one positioning plus the transfer in positionings (with 100 MiB/s and 8 ms, 1.005 for
//! 4 KiB and 2.25 for 1 MiB). On arrival it takes three tags from its group's
//! previous ones: `R = max(now, R' + cost/r)`, `L = max(now, L' + cost/l)` and
//! `P = P' + cost/w`. `P` keeps its own clock, as start-time fair queueing's tags do:
//! dmClock's `max(now, P' + cost/w)` lags the clock wherever the weights add up to more
//! than the device's IOPS (weights of hundreds on a disk), and then every tag is `now` and
//! the order is arrival's. Dispatch first serves, by smallest `R`, any group whose
//! head's reservation is due (`R ≤ now`); otherwise, among groups whose head is under its
//! limit (`L ≤ now`), the smallest `P`. A request served by weight moves its group's later
//! `R` tags back by its cost/r, as dmClock does, so reservation counts only what it served.
//! A group that was idle (nothing waiting and nothing on the device) starts its `P` no
//! earlier than the smallest `P` of the groups already waiting (with none waiting, the
//! last `P` served), so an idle spell is not saved up as credit; and when a dispatch leaves
//! nothing waiting in any group, every group was served all it asked, and their next tags
//! start level, no earlier than the last `P` served, so requests a device took all at once
//! (while the bound below is off) put no group ahead of the others. Within a group requests
//! go in arrival order. When every waiting group is over its limit the policy idles until
//! the first `L` is due.
//!
//! A device deeper than the load would serve its own queue in its own order and undo the
//! tags, so while two or more groups have requests and the device queues, mclock keeps on
//! it only what lets every group hold its weight's part ([`schedhost_sdk::device_share`],
//! dmClock's bound on what is outstanding at a server, derived instead of configured;
//! `device_share=0` turns it off), keeping no room for a group its io.max limit holds.
//!
//! The host holds io.max limits itself before the policy, bursts included, so the `L` tags
//! are off by default (`limit_tags=1` turns them on): paced again without the bursts, a
//! group with `riops=100,riops_burst=20` got 11 % less than its limit allowed. A request
//! outside every group (group 0) has weight 100 and no reservation.

#![forbid(unsafe_code)]

use std::collections::{BTreeMap, VecDeque};

use schedhost_sdk::device_share::{Backlog, DeviceShare};
use schedhost_sdk::{
    Completion, Dispatch, Group, MergeEvent, Op, Policy, Request, RequestId, Setup, TunableSpec,
};

/// Tags are in picoseconds, so a step of `cost / rate` keeps its precision at any rate up to
/// the 10^9 IOPS the host accepts.
const PS_PER_S: u128 = 1_000_000_000_000;
const PS_PER_NS: u128 = 1_000;
/// Costs are kept in 1024ths of a unit, so mClock's fractional costs keep their precision.
const COST_PARTS: u64 = 1024;
/// cgroup v2's default io.weight, for group 0 and groups not yet described.
const DEFAULT_WEIGHT: u32 = 100;

const TUNABLES: &[TunableSpec<Mclock>] = &[
    TunableSpec {
        name: "cost_unit",
        default: 4,
        min: 1,
        max: 1024,
        unit: "KiB",
        help: "a request costs its size in these units (at least 1): reservations, weights and limits count cost",
        field: |p| &mut p.cost_unit_kib,
    },
    TunableSpec {
        name: "peak_bw",
        default: 0,
        min: 0,
        max: 1_000_000,
        unit: "MiB/s",
        help: "with positioning_us, a request costs 1 + size / (peak_bw × positioning_us), as mClock's; 0: cost_unit's linear cost",
        field: |p| &mut p.peak_bw_mib,
    },
    TunableSpec {
        name: "positioning_us",
        default: 0,
        min: 0,
        max: 1_000_000,
        unit: "µs",
        help: "the device's mean positioning time, for mClock's cost (with peak_bw)",
        field: |p| &mut p.positioning_us,
    },
    TunableSpec {
        name: "limit_tags",
        default: 0,
        min: 0,
        max: 1,
        unit: "",
        help: "1: also pace groups by dmClock's limit tags (the host already holds io.max, with its bursts)",
        field: |p| &mut p.limit_tags,
    },
    TunableSpec {
        name: "device_share",
        default: 1,
        min: 0,
        max: 1,
        unit: "",
        help: "1: while groups contend and the device queues, keep on it only what lets each group hold its weight's part",
        field: |p| &mut p.device_share,
    },
];

/// What a group is promised, from the host's `groups`.
#[derive(Debug, Clone, Copy)]
struct Promise {
    weight: u32,
    reserve_iops: Option<u64>,
    limit_iops: [Option<u64>; 2],
}

impl Default for Promise {
    fn default() -> Self {
        Self {
            weight: DEFAULT_WEIGHT,
            reserve_iops: None,
            limit_iops: [None; 2],
        }
    }
}

impl From<&Group> for Promise {
    fn from(g: &Group) -> Self {
        Self {
            weight: g.weight.max(1),
            reserve_iops: g.reserve_iops,
            limit_iops: g.limit_iops,
        }
    }
}

/// A waiting request and its tags. `r` is stored before its group's `r_back`.
#[derive(Debug, Clone, Copy)]
struct Tagged {
    id: RequestId,
    cost: u64,
    r: Option<u128>,
    l: u128,
    p: u128,
}

/// One group's queue and its last tags.
#[derive(Debug, Default)]
struct Lane {
    promise: Promise,
    queue: VecDeque<Tagged>,
    /// The last request's tags (`R` as stored); `None` before the first, which is due at
    /// once.
    last_r: Option<u128>,
    last_l: Option<u128>,
    last_p: Option<u128>,
    /// How far the weight phase has moved this group's `R` tags back.
    r_back: u128,
}

impl Lane {
    /// The head's reservation tag, as moved back.
    fn head_r(&self) -> Option<u128> {
        let r = self.queue.front()?.r?;
        Some(r.saturating_sub(self.r_back))
    }
}

/// dmClock's `max(now, previous + step)`; the first tag is `now`.
fn following(last: Option<u128>, step: u128, now_ps: u128) -> u128 {
    last.map_or(now_ps, |last| (last + step).max(now_ps))
}

/// `cost / rate` seconds, in picoseconds (`cost` in [`COST_PARTS`]).
fn step(cost: u64, rate: u64) -> u128 {
    u128::from(cost) * PS_PER_S / (u128::from(rate.max(1)) * u128::from(COST_PARTS))
}

/// The mClock policy.
#[derive(Debug, Default)]
pub struct Mclock {
    /// By group id. A request absorbed by a merge stays in its lane; the SDK drops it
    /// from the answer.
    lanes: BTreeMap<u32, Lane>,
    cost_unit_kib: i64,
    peak_bw_mib: i64,
    positioning_us: i64,
    limit_tags: i64,
    device_share: i64,
    /// What is on the device, by group.
    on_device: DeviceShare,
    /// The `P` tag of the request last served by weight: the weight tags' clock while
    /// nothing waits.
    served_p: Option<u128>,
}

impl Mclock {
    /// A request's cost in [`COST_PARTS`]: mClock's `1 + S / (B_peak · T_m)` when both
    /// are given, else its size in `cost_unit`s (at least one).
    fn cost(&self, r: &Request) -> u64 {
        let (peak, positioning) = (
            self.peak_bw_mib.unsigned_abs(),
            self.positioning_us.unsigned_abs(),
        );
        if peak > 0 && positioning > 0 {
            // Bytes the device moves in one positioning time, × 10^6 (µs).
            let per_positioning = u128::from(peak << 20) * u128::from(positioning);
            let bytes = u128::from(r.sectors) * 512 * 1_000_000;
            let transfer = bytes * u128::from(COST_PARTS) / per_positioning;
            return COST_PARTS.saturating_add(u64::try_from(transfer).unwrap_or(u64::MAX));
        }
        let unit = self.cost_unit_kib.clamp(1, 1024).unsigned_abs() * 2;
        u64::from(r.sectors).div_ceil(unit).max(1) * COST_PARTS
    }

    /// How many more requests may go to the device now.
    fn device_room(&self) -> u32 {
        if self.device_share == 0 {
            return u32::MAX;
        }
        let backlog = self.lanes.iter().map(|(&g, lane)| Backlog {
            group: g,
            weight: u64::from(lane.promise.weight),
            outstanding: u32::try_from(lane.queue.len())
                .unwrap_or(u32::MAX)
                .saturating_add(self.on_device.in_flight_of(g)),
        });
        self.on_device.room(backlog)
    }

    /// The smallest `P` among waiting groups other than `group`.
    fn lowest_waiting_p(&self, group: u32) -> Option<u128> {
        self.lanes
            .iter()
            .filter(|&(&g, _)| g != group)
            .filter_map(|(_, lane)| lane.queue.front().map(|t| t.p))
            .min()
    }

    fn tag(&mut self, now_ps: u128, r: &Request) {
        let cost = self.cost(r);
        let floor = self.lowest_waiting_p(r.group);
        let in_flight = self.on_device.in_flight_of(r.group);
        let lane = self.lanes.entry(r.group).or_default();
        let promise = lane.promise;
        let back = lane.r_back;
        let reservation = promise.reserve_iops.map(|rate| {
            let due = lane.last_r.map_or(now_ps, |last| {
                (last.saturating_sub(back) + step(cost, rate)).max(now_ps)
            });
            *lane.last_r.insert(due + back)
        });
        let direction = usize::from(r.op != Op::Read);
        let limit = promise.limit_iops[direction].filter(|_| self.limit_tags != 0);
        let l = match limit {
            Some(rate) => *lane
                .last_l
                .insert(following(lane.last_l, step(cost, rate), now_ps)),
            None => 0,
        };
        // Weight tags keep their own clock (start-time fair queueing's): a busy group's
        // next is its last plus the step, whatever the time. Held to `now` as dmClock's
        // `max(now, P' + 1/w)` is, they lagged the clock wherever the groups' weights added
        // up to more than the device's IOPS, and every tag became `now`: arrival order (two
        // groups 764:358 on `sim:hdd` split 0.50 / 0.50).
        let p_step = step(cost, u64::from(promise.weight));
        // Idle is nothing waiting and nothing on the device: a group whose requests are all
        // on the device is busy, and taken as idle it lost its place to the lowest waiting
        // tag every time its queue emptied (a group of weight 1 beside 147 and 137 with 76
        // tags read 54 % over its share, the heavy groups' queues emptying as the device
        // bound took their requests). An idle group starts no earlier than the tags'
        // clock: the lowest tag waiting, else the last served.
        let idle = lane.queue.is_empty() && in_flight == 0;
        let clock = floor.or(self.served_p);
        let p = match lane.last_p {
            Some(last) if !idle => last + p_step,
            Some(last) => (last + p_step).max(clock.unwrap_or(0)),
            None => clock.unwrap_or(now_ps),
        };
        lane.last_p = Some(p);
        lane.queue.push_back(Tagged {
            id: r.id,
            cost,
            r: reservation,
            l,
            p,
        });
    }

    /// Nothing waits in any lane: every group was served all it asked, so none is owed or
    /// ahead, and the weight tags start again level, from the last one served (start-time
    /// fair queueing's virtual time when the server empties). Kept apart, a group whose
    /// requests a device with room for all took at once was ahead by all of them: at a
    /// run's start, the device bound lifting after its first window, a group of weight 1
    /// beside 980 sent its 55 requests with the others' and then waited 0.26 s for them to
    /// catch up (it completed nothing in two 100 ms windows where it was owed 26 I/Os each).
    fn drained(&mut self) {
        let Some(clock) = self.served_p else {
            return;
        };
        for lane in self.lanes.values_mut() {
            if let Some(last) = &mut lane.last_p {
                *last = (*last).max(clock);
            }
        }
    }

    /// The next request: a due reservation first, then the smallest weight tag under its
    /// limit. `Err` holds when the first limit is due, if any request waits.
    fn next(&mut self, now_ps: u128) -> Result<(RequestId, u32), Option<u128>> {
        let due = self
            .lanes
            .iter()
            .filter_map(|(&g, lane)| lane.head_r().filter(|&r| r <= now_ps).map(|r| (r, g)))
            .min();
        if let Some((_, g)) = due {
            let lane = self.lanes.get_mut(&g).expect("the lane just seen");
            let t = lane.queue.pop_front().expect("a head");
            return Ok((t.id, g));
        }
        let by_weight = self
            .lanes
            .iter()
            .filter_map(|(&g, lane)| {
                lane.queue
                    .front()
                    .filter(|t| t.l <= now_ps)
                    .map(|t| (t.p, g))
            })
            .min();
        if let Some((p, g)) = by_weight {
            self.served_p = Some(p);
            let lane = self.lanes.get_mut(&g).expect("the lane just seen");
            let t = lane.queue.pop_front().expect("a head");
            if let Some(rate) = lane.promise.reserve_iops {
                lane.r_back += step(t.cost, rate);
            }
            return Ok((t.id, g));
        }
        Err(self
            .lanes
            .values()
            .filter_map(|lane| lane.queue.front().map(|t| t.l))
            .min())
    }
}

impl Policy for Mclock {
    const NAME: &'static str = "mclock";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const TUNABLES: &'static [TunableSpec<Self>] = TUNABLES;
    /// What is on the device is counted from what was sent and what completed.
    const COMPLETIONS: bool = true;
    /// Every id sent must be one the device gets, for that count.
    const HANDLES_ABSORBED: bool = true;
    const WEIGHTED_TAGS: bool = true;

    fn new(setup: &Setup) -> Self {
        Self {
            on_device: DeviceShare::for_setup(setup),
            ..Self::default()
        }
    }

    fn groups(&mut self, _now_ns: u64, groups: &[Group]) {
        for g in groups {
            self.lanes.entry(g.id).or_default().promise = Promise::from(g);
        }
        self.on_device.groups(groups);
    }

    fn insert(&mut self, now_ns: u64, requests: &[Request]) {
        let now_ps = u128::from(now_ns) * PS_PER_NS;
        for r in requests {
            self.tag(now_ps, r);
        }
    }

    fn requeue(&mut self, now_ns: u64, requests: &[Request]) {
        for r in requests {
            self.on_device.requeued(r.id);
        }
        self.insert(now_ns, requests);
    }

    fn merged(&mut self, _now_ns: u64, event: &MergeEvent) {
        let Some(gone) = event.absorbed else {
            return;
        };
        for lane in self.lanes.values_mut() {
            if let Some(at) = lane.queue.iter().position(|t| t.id == gone) {
                lane.queue.remove(at);
                return;
            }
        }
    }

    fn completed(&mut self, now_ns: u64, done: &[Completion]) {
        self.on_device.completed_at(now_ns, done);
    }

    fn dispatch(&mut self, now_ns: u64, _hw_queue: u32, budget: u32, out: &mut Dispatch) {
        let now_ps = u128::from(now_ns) * PS_PER_NS;
        let budget = budget.min(self.device_room());
        while out.ids.len() < budget as usize {
            match self.next(now_ps) {
                Ok((id, group)) => {
                    self.on_device.sent(id, group);
                    out.ids.push(id);
                }
                Err(limit_due) => {
                    // Ceiling: a wake-up a picosecond early would find nothing due.
                    out.wake_at_ns =
                        limit_due.map(|l| u64::try_from(l.div_ceil(PS_PER_NS)).unwrap_or(u64::MAX));
                    break;
                }
            }
        }
        if !out.ids.is_empty() && self.lanes.values().all(|lane| lane.queue.is_empty()) {
            self.drained();
        }
    }
}

schedhost_sdk::export!(Mclock);

#[cfg(test)]
mod tests;
