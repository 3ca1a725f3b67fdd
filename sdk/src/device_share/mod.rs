//! A bound on what a weight-serving policy keeps outstanding on the device, so that the
//! device's own queue does not decide the groups' shares.
//!
//! A device deeper than the load takes every request as it comes and serves its queue in its
//! own order; each group then gets throughput in proportion to what it has in flight, not to
//! its weight, and the policy's order decides nothing. dmClock bounds what is outstanding at
//! a server by a fixed number; io.cost throttles issue by a cost model. [`DeviceShare`]
//! bounds it from what the groups have: the device may hold `B` requests where every
//! backlogged group can keep its weight's part of `B` in flight and one more waiting,
//!
//! ```text
//! B = max(min over groups with requests of  0.9 × outstanding(g) × Σ weights / weight(g),
//!         floor)        floor: learnt (below), or none while the groups contend for the tags
//! ```
//!
//! and only while the device is saturated, seen as queueing inside it: the mean time from
//! dispatch to completion over the last window at least twice the shortest ever seen (and,
//! once bound, until it falls under 1.5 times; taken as saturated until the first window).
//! Before it lifts, one window at half the depth (where that is above the floor): if the
//! device serves that a third faster, it queues after all and the shortest time was a
//! loaded one, as a policy swapped in under load learns it. Below saturation the bound is
//! off, so a shallow load keeps every tag the device has.
//!
//! The floor is what the device needs for its throughput, learnt. It starts at half of one
//! hardware queue's tags; while the device runs at it, a trial now and then lets it hold
//! twice that, and if the device completes 5 % more there (its rate by Little's law, the
//! mean number on it over the mean service time), the floor rises halfway to what it held.
//! A device that serves in parallel units (flash's dies) keeps gaining from depth long after
//! its service time has doubled: `sim:ssd` completes 280k random reads a second with 64 on
//! it and 378k with 256, and a floor of 64 held mclock under 0.9 of noop's IOPS on 22 of
//! the QoS sweep's 181 flash cells, where a group's weight asked for less. Where a group
//! cannot keep its weight's part in flight at the floor, its share is not what the bound
//! can give without losing throughput, and throughput wins, unless every group has more
//! outstanding than an equal split of the device's tags: then the groups contend for the
//! device's slots, each is owed its weight's part of them, and the bound goes under the
//! floor for it (a group of weight 388 beside five totalling 51, six groups at iodepth 66
//! on `sim:ssd`, got 0.26 of the IOPS over the floor, 0.88 at its part; the device at
//! 0.75 of noop's IOPS). Where the scheduler's tags are all taken, what a group holds is
//! what the pool let it have, not what it asks, so a group holding at least its weight's
//! part of a full pool counts as contending too ([`DeviceShare::for_setup`]).
//!
//! A group that completes at its io.max limit is left out of the min (`pace.rs`): the host's
//! limiter holds it back, not the device, and the room kept for its weight's part went
//! unused while the others waited (a limited group beside an unlimited one on `sim:ssd`:
//! 0.885 of noop's IOPS, 0.979 without the room kept). Its requests on the device count in
//! the bound, and it counts toward whether the groups contend, so the bound is never under
//! what it would be without the rule.
//!
//! Use: [`DeviceShare::groups`] with the host's groups, [`DeviceShare::room`] before
//! dispatching, [`DeviceShare::sent`] for each request sent, [`DeviceShare::completed_at`]
//! and [`DeviceShare::requeued`] as the host reports them.
//! The policy must see completions (`COMPLETIONS`) and keep absorbed requests out of its
//! answers itself (`HANDLES_ABSORBED`), so that every id it sends is one the device gets.

use std::collections::BTreeMap;

use crate::{Completion, Group, RequestId};

mod knee;
mod pace;

use knee::Knee;
use pace::LimitPace;

/// Completions per window of the saturation test.
const WINDOW: u32 = 32;
/// The device turns saturated when a window's mean service time is this many times the
/// shortest seen, and stops being so under the second ratio (in tenths), so that a bound which
/// just removed the queueing it was set for does not lift at once.
const SATURATED_AT: u64 = 20;
const CALM_UNDER: u64 = 15;
/// Before the bound lifts, a window at half the depth must not be faster by this (in
/// tenths: its mean at most two thirds of the deeper window's) for the device to be taken
/// as not queueing.
const FASTER_AT_HALF: u64 = 15;
/// `total` divided in proportion to `weights` (not all zero), in whole parts that add up to
/// `total`: each
/// takes its quotient's floor, and the largest remainders (ties to the earlier weight) take
/// what the floors leave (Hamilton's method). A ceiling or a floor alone is off by up to one
/// a part, which for a part owed 1.9 of a pool of 114 is half its share.
pub fn apportion(total: u32, weights: &[u64]) -> Vec<u32> {
    let (mut parts, mut order) = (Vec::new(), Vec::new());
    apportion_into(total, weights, &mut parts, &mut order);
    parts
}

/// [`apportion`] into `parts`, with `order` as its working space: a caller that divides a
/// pool at every request keeps both and allocates nothing once they have grown.
pub fn apportion_into(total: u32, weights: &[u64], parts: &mut Vec<u32>, order: &mut Vec<usize>) {
    let sum: u128 = weights.iter().map(|&w| u128::from(w)).sum::<u128>().max(1);
    let pool = u128::from(total);
    let share = |w: u64| pool * u128::from(w);
    parts.clear();
    parts.extend(
        weights
            .iter()
            .map(|&w| u32::try_from(share(w) / sum).unwrap_or(u32::MAX)),
    );
    let whole: u128 = parts.iter().map(|&p| u128::from(p)).sum();
    order.clear();
    order.extend(0..weights.len());
    // Keys are unique (the index breaks ties), so the unstable sort, which allocates
    // nothing, orders as a stable one would.
    order.sort_unstable_by_key(|&i| (std::cmp::Reverse(share(weights[i]) % sum), i));
    let left = usize::try_from(pool.saturating_sub(whole)).unwrap_or(usize::MAX);
    for &i in order.iter().take(left) {
        parts[i] = parts[i].saturating_add(1);
    }
}

/// What one group has outstanding (in the policy and on the device) and its weight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backlog {
    /// The group, as in a request's `group`.
    pub group: u32,
    /// Its weight against the other groups.
    pub weight: u64,
    /// Requests the policy holds and requests on the device.
    pub outstanding: u32,
}

/// The device-queue bound and the bookkeeping behind it.
#[derive(Debug, Clone, Default)]
pub struct DeviceShare {
    /// The bound never goes under this: at first half of one hardware queue's driver tags,
    /// so a device that gains from its own queue (a disk reordering its commands) keeps most
    /// of that gain (without it, three groups at iodepth 2 on `sim:hdd` ran at 0.81 of
    /// noop's IOPS, the bound leaving 2 of 6 requests on the disk); raised by the trials of
    /// `knee.rs` while the device completes more at twice it, never lowered.
    floor: u32,
    /// All the device's driver tags: the floor goes no higher.
    tags: u32,
    /// The scheduler tags the groups share (`nr_requests` of every hardware queue, one
    /// pool while groups share it), if known ([`Self::for_setup`]).
    pool: Option<u32>,
    /// The floor's trials (module doc).
    knee: Knee,
    /// Requests sent and not completed.
    on_device: BTreeMap<RequestId, Sent>,
    /// By group.
    per_group: BTreeMap<u32, u32>,
    window_sum_ns: u64,
    window_count: u32,
    /// The requests on the device each of the window's requests found when sent.
    window_depth_sum: u64,
    /// The shortest service time seen: the device without a queue. The first requests
    /// of a run find it idle, so even a run that floods from the start sees it.
    least_ns: Option<u64>,
    saturated: bool,
    /// A window at half the depth, asked before the bound lifts.
    probe: Option<Probe>,
    /// Which limited groups complete at their limits.
    pace: LimitPace,
}

/// One request sent, and whether it went during a [`Probe`].
#[derive(Debug, Clone, Copy)]
struct Sent {
    group: u32,
    probed: bool,
    /// Sent during a floor trial.
    tried: bool,
    /// The requests on the device once it was sent, itself included.
    depth: u32,
}

/// Before the bound lifts, the device is held at half what it had for one window: if it
/// serves a third faster or more at half the depth, it queues inside after all, and the
/// shortest time it was judged by was a loaded one. A policy swapped in under load learns
/// its shortest time from a device it never saw idle: the first window then looked calm
/// and the bound lifted for good (seed 5's cell 326: mclock swapped for mclock, a group of
/// weight 21 beside 485 got 2.7 times its share from the swap on).
#[derive(Debug, Clone, Copy)]
struct Probe {
    depth: u32,
    /// The deeper window's mean service time, in tenths of a ns.
    deep_mean_tenths: u64,
}

impl DeviceShare {
    /// A bound for a device of `hw_queues` hardware queues of `queue_depth` driver tags each,
    /// not told the scheduler pool (a policy with its `Setup` uses [`Self::for_setup`]).
    pub fn new(queue_depth: u32, hw_queues: u32) -> Self {
        Self {
            floor: (queue_depth / 2).max(1),
            tags: queue_depth.saturating_mul(hw_queues.max(1)).max(1),
            // Taken as saturated until a window says otherwise: a policy swapped in under
            // load never sees the device idle, so its shortest service time would be the
            // loaded one and no window could look twice as slow. Bound from the start, the
            // device's queue drains, the shortest time is learnt, and a device that was not
            // queueing is released after one window.
            saturated: true,
            ..Self::default()
        }
    }

    /// A bound for the device of `setup`, which also knows the scheduler tags the groups
    /// share: a group holding its weight's part of them when they are all taken counts as
    /// contending for the device, whatever it holds (`pool_parts`).
    pub fn for_setup(setup: &crate::Setup) -> Self {
        let hw_queues = setup.hw_queues.max(1);
        Self {
            pool: Some(setup.nr_requests.saturating_mul(hw_queues).max(1)),
            ..Self::new(setup.queue_depth, hw_queues)
        }
    }

    /// Requests on the device.
    pub fn in_flight(&self) -> u32 {
        u32::try_from(self.on_device.len()).unwrap_or(u32::MAX)
    }

    /// Group `group`'s requests on the device.
    pub fn in_flight_of(&self, group: u32) -> u32 {
        self.per_group.get(&group).copied().unwrap_or(0)
    }

    /// The host's groups (`Policy::groups`): their limits, for [`Self::at_limit`].
    pub fn groups(&mut self, groups: &[Group]) {
        self.pace.set(groups);
    }

    /// Whether `group` completed at its io.max limit over its last window: the bound
    /// keeps no room for it.
    pub fn at_limit(&self, group: u32) -> bool {
        self.pace.at_limit(group)
    }

    /// Whether the last window saw queueing inside the device.
    pub fn saturated(&self) -> bool {
        self.saturated
    }

    /// How many more requests may go to the device now (`u32::MAX` when unbounded), given
    /// every group with requests outstanding.
    pub fn room(&self, groups: impl IntoIterator<Item = Backlog>) -> u32 {
        match self.bound(groups) {
            Some(bound) => bound.saturating_sub(self.in_flight()),
            None => u32::MAX,
        }
    }

    /// The bound, if one applies: two or more groups with requests and a saturated device.
    pub fn bound(&self, groups: impl IntoIterator<Item = Backlog>) -> Option<u32> {
        if !self.saturated {
            return None;
        }
        // A group at its limit is held by its limiter: its requests on the device count,
        // and no room is kept for its weight's part.
        let (held, groups): (Vec<Backlog>, Vec<Backlog>) = groups
            .into_iter()
            .filter(|g| g.outstanding > 0)
            .partition(|g| self.at_limit(g.group));
        if groups.len() < 2 {
            return None;
        }
        let held_on_device = held
            .iter()
            .map(|g| self.in_flight_of(g.group))
            .fold(0, u32::saturating_add);
        let total: u64 = groups
            .iter()
            .map(|g| g.weight.max(1))
            .fold(0, u64::saturating_add);
        let bound = groups
            .iter()
            // In u128: outstanding, the weights' sum and 9 can together pass u64.
            .map(|g| {
                u128::from(g.outstanding) * u128::from(total) * 9
                    / (u128::from(g.weight.max(1)) * 10)
            })
            .min()?;
        // Groups that each have more outstanding than an equal split of the device's tags
        // contend for its slots, and are owed their weights' parts whatever the depth
        // costs; the floor keeps throughput only where some group does not. A group at its
        // limit counts here as it did before it reached it: left out, its few requests
        // stopped keeping the floor, the bound fell to the heaviest group's part, and as
        // the group went in and out of its limit the others were served past their weights
        // and then waited for the heaviest to catch up, 100 ms and more (seed 11 cell 387).
        let n = (groups.len() + held.len()) as u64;
        let in_pool_part = self.pool_parts(groups.iter().chain(&held));
        let contended = groups
            .iter()
            .chain(&held)
            .all(|g| u64::from(g.outstanding) * n > u64::from(self.tags) || in_pool_part(g));
        let floor = if contended { 1 } else { self.floor() };
        Some(
            u32::try_from(bound)
                .unwrap_or(u32::MAX)
                .max(floor)
                .max(1)
                .saturating_add(held_on_device)
                .min(self.probe.map_or(u32::MAX, |p| p.depth)),
        )
    }

    /// Whether a group holds at least its weight's part of a full scheduler pool, given
    /// every group with requests: counted as contending for the device as well. A full
    /// pool leaves requests waiting in the submitters' software queues, which the policy
    /// does not see, so a group's outstanding is then what the pool let it have, not what
    /// it asks: a heavy group that cannot use its part (its iodepth under it) lends the
    /// rest to the light ones, each holds a fraction of what it sends, none looks
    /// contending, and the device, deep enough for the whole pool, served every request as
    /// it came (the sweep's seed 64 cell 200: weights 12/6/8/563 at iodepth 73 with 107
    /// tags a hardware queue on `sim:ssd`, the heavy group 0.34 of the IOPS where 256 tags
    /// gave it 0.954). Always false for a bound made without the pool ([`Self::new`]).
    fn pool_parts<'a>(
        &self,
        groups: impl Iterator<Item = &'a Backlog> + Clone,
    ) -> impl Fn(&Backlog) -> bool {
        let count = groups.clone().count() as u64;
        let taken = (groups.clone()).fold(0, |sum: u64, g| {
            sum.saturating_add(u64::from(g.outstanding))
        });
        let weights = (groups.map(|g| g.weight.max(1))).fold(0, u64::saturating_add);
        // Full, but for one request a group between a completion and its submitter's next.
        let full = (self.pool.map(u64::from)).filter(|&pool| taken.saturating_add(count) >= pool);
        move |g: &Backlog| {
            full.is_some_and(|pool| {
                // The whole part the host gives it (the floor of its quota), less that one.
                // In u128: a pool of 2^32 and a weight of 2^64 pass u64.
                let quota = u128::from(pool) * u128::from(g.weight.max(1));
                let part = quota / u128::from(weights.max(1));
                u128::from(g.outstanding) + 1 >= part
            })
        }
    }

    /// Request `id` of `group` went to the device.
    pub fn sent(&mut self, id: RequestId, group: u32) {
        let sent = Sent {
            group,
            probed: self.probe.is_some(),
            tried: self.knee.in_trial(),
            depth: self.in_flight().saturating_add(1),
        };
        if self.on_device.insert(id, sent).is_none() {
            *self.per_group.entry(group).or_default() += 1;
        }
    }

    /// The device sent request `id` back (it was busy): it is the policy's again.
    pub fn requeued(&mut self, id: RequestId) {
        self.forget(id);
    }

    /// Requests finished: they leave the device, and their service times feed the
    /// saturation test. Without the time, no group is seen at its limit: use
    /// [`Self::completed_at`].
    pub fn completed(&mut self, done: &[Completion]) {
        self.completed_when(None, done);
    }

    /// [`Self::completed`], at `now_ns`: each limited group's completions are also set
    /// against its limits.
    pub fn completed_at(&mut self, now_ns: u64, done: &[Completion]) {
        self.completed_when(Some(now_ns), done);
    }

    fn completed_when(&mut self, now_ns: Option<u64>, done: &[Completion]) {
        for c in done {
            let Some(sent) = self.forget(c.id) else {
                // Sent by a policy before a swap, or never counted: not this bound's.
                continue;
            };
            if let Some(now) = now_ns {
                self.pace.completed(now, sent.group, c.op, c.sectors);
            }
            let service = c.service_ns.max(1);
            let least = *self
                .least_ns
                .insert(self.least_ns.map_or(service, |l| l.min(service)));
            if (self.probe.is_some() && !sent.probed) || (self.knee.in_trial() && !sent.tried) {
                // Sent at the depth before the probe or the trial: not theirs.
                continue;
            }
            if self.knee.skips_ramp() {
                continue;
            }
            self.window_sum_ns = self.window_sum_ns.saturating_add(service);
            self.window_depth_sum = self.window_depth_sum.saturating_add(u64::from(sent.depth));
            self.window_count += 1;
            if self.window_count == WINDOW {
                let (sum_ns, depth_sum) = (self.window_sum_ns, self.window_depth_sum);
                self.window_sum_ns = 0;
                self.window_depth_sum = 0;
                self.window_count = 0;
                if self.judge_trial(depth_sum, sum_ns) {
                    continue;
                }
                self.judge_window(sum_ns.saturating_mul(10) / u64::from(WINDOW), least);
                self.watch_floor(depth_sum, sum_ns);
            }
        }
    }

    /// A window's mean service time (in tenths of a ns) against the shortest seen:
    /// saturated from twice it, calm again under 1.5 times, and, before the bound lifts, a
    /// window at half the depth.
    fn judge_window(&mut self, mean_tenths: u64, least: u64) {
        if let Some(probe) = self.probe.take() {
            let faster = mean_tenths.saturating_mul(FASTER_AT_HALF)
                <= probe.deep_mean_tenths.saturating_mul(10);
            if faster {
                // It queues: the time at half the depth is nearer its own.
                self.least_ns = Some(least.min(mean_tenths / 10));
            }
            self.saturated = faster;
            return;
        }
        let threshold = if self.saturated {
            CALM_UNDER
        } else {
            SATURATED_AT
        };
        let saturated = mean_tenths >= least.saturating_mul(threshold);
        let half = self.in_flight() / 2;
        if self.saturated && !saturated && half >= self.floor.max(1) {
            self.probe = Some(Probe {
                depth: half,
                deep_mean_tenths: mean_tenths,
            });
            return;
        }
        self.saturated = saturated;
    }

    fn forget(&mut self, id: RequestId) -> Option<Sent> {
        let sent = self.on_device.remove(&id)?;
        if let Some(n) = self.per_group.get_mut(&sent.group) {
            *n -= 1;
            if *n == 0 {
                self.per_group.remove(&sent.group);
            }
        }
        Some(sent)
    }
}

#[cfg(test)]
mod tests;
