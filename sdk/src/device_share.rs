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
//!         queue_depth / 2)
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
//! can give without losing throughput, and throughput wins.
//!
//! Use: [`DeviceShare::room`] before dispatching, [`DeviceShare::sent`] for each request
//! sent, [`DeviceShare::completed`] and [`DeviceShare::requeued`] as the host reports them.
//! The policy must see completions (`COMPLETIONS`) and keep absorbed requests out of its
//! answers itself (`HANDLES_ABSORBED`), so that every id it sends is one the device gets.

use std::collections::BTreeMap;

use crate::{Completion, RequestId};

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
/// Windows each side of a floor trial is measured over: a window's rate is a few percent
/// off from one to the next, about the gain the trial looks for.
const TRIAL_WINDOWS: u32 = 4;
/// The floor rises where twice it completes this many twentieths more (5 %).
const GAIN_AT_DEPTH: u64 = 21;
/// Windows between floor trials, at first and at most: a trial that finds no gain doubles
/// the wait, so a floor that is right costs a trial's windows ever more rarely.
const TRIAL_WAIT: u32 = 8;
const TRIAL_WAIT_MAX: u32 = 1024;

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
    /// Its weight against the other groups.
    pub weight: u64,
    /// Requests the policy holds and requests on the device.
    pub outstanding: u32,
}

/// The device-queue bound and the bookkeeping behind it.
#[derive(Debug, Clone, Default)]
pub struct DeviceShare {
    /// The bound never goes under this: half of one hardware queue's driver tags, so a
    /// device that gains from its own queue (a disk reordering its commands) keeps most of
    /// that gain. Without it, three groups at iodepth 2 on `sim:hdd` ran at 0.81 of noop's
    /// IOPS (the bound left 2 of 6 requests on the disk).
    floor: u32,
    /// All the device's driver tags: the floor goes no higher.
    tags: u32,
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

/// What the device completes at a depth, summed over windows: by Little's law its rate is
/// the mean number on it over the mean service time, `depth_sum / service_sum_ns` (the
/// windows' counts cancel). The number is what each request found on the device when it
/// was sent, itself included: counted at completions instead, the requests sent while a
/// trial filled the device to its depth, each served behind fewer than that, made a device
/// that serves one at a time look a third faster at twice the floor.
#[derive(Debug, Clone, Copy, Default)]
struct Rate {
    depth_sum: u64,
    service_sum_ns: u64,
    windows: u32,
}

impl Rate {
    fn add(&mut self, depth_sum: u64, service_sum_ns: u64) {
        self.depth_sum = self.depth_sum.saturating_add(depth_sum);
        self.service_sum_ns = self.service_sum_ns.saturating_add(service_sum_ns);
        self.windows += 1;
    }

    /// Whether `self` completes [`GAIN_AT_DEPTH`] twentieths of `other`'s rate or more.
    fn gains_over(&self, other: &Rate) -> bool {
        let (a, b) = (u128::from(self.depth_sum), u128::from(self.service_sum_ns));
        let (c, d) = (
            u128::from(other.depth_sum),
            u128::from(other.service_sum_ns),
        );
        // a / b ≥ 21/20 × c / d, cross-multiplied.
        a * d * 20 >= c * b * u128::from(GAIN_AT_DEPTH)
    }

    /// The mean number on the device.
    fn mean_depth(&self) -> u32 {
        let completions = u64::from(self.windows) * u64::from(WINDOW);
        u32::try_from(self.depth_sum / completions.max(1)).unwrap_or(u32::MAX)
    }
}

/// The floor's trials: windows at the floor are measured, and now and then the device may
/// hold twice the floor for [`TRIAL_WINDOWS`] windows.
#[derive(Debug, Clone, Copy)]
struct Knee {
    /// Windows at about the floor since the last trial (the last [`TRIAL_WINDOWS`] kept).
    at_floor: Rate,
    /// Windows to go before the next trial, and the wait after a trial that found nothing.
    wait: u32,
    backoff: u32,
    /// The trial under way: the depth it allows and what it measured so far.
    trial: Option<(u32, Rate)>,
    /// A trial's first completions not measured: the requests sent while the device
    /// filled to its depth, each served behind fewer than that.
    ramp: u32,
}

impl Default for Knee {
    fn default() -> Self {
        Self {
            at_floor: Rate::default(),
            wait: TRIAL_WAIT,
            backoff: TRIAL_WAIT,
            trial: None,
            ramp: 0,
        }
    }
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
    /// A bound for a device of `hw_queues` hardware queues of `queue_depth` driver tags each.
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

    /// Requests on the device.
    pub fn in_flight(&self) -> u32 {
        u32::try_from(self.on_device.len()).unwrap_or(u32::MAX)
    }

    /// Group `group`'s requests on the device.
    pub fn in_flight_of(&self, group: u32) -> u32 {
        self.per_group.get(&group).copied().unwrap_or(0)
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
        let groups: Vec<Backlog> = groups.into_iter().filter(|g| g.outstanding > 0).collect();
        if groups.len() < 2 {
            return None;
        }
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
        Some(
            u32::try_from(bound)
                .unwrap_or(u32::MAX)
                .max(self.floor())
                .max(1)
                .min(self.probe.map_or(u32::MAX, |p| p.depth)),
        )
    }

    /// Request `id` of `group` went to the device.
    pub fn sent(&mut self, id: RequestId, group: u32) {
        let sent = Sent {
            group,
            probed: self.probe.is_some(),
            tried: self.knee.trial.is_some(),
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
    /// saturation test.
    pub fn completed(&mut self, done: &[Completion]) {
        for c in done {
            let Some(sent) = self.forget(c.id) else {
                // Sent by a policy before a swap, or never counted: not this bound's.
                continue;
            };
            let service = c.service_ns.max(1);
            let least = *self
                .least_ns
                .insert(self.least_ns.map_or(service, |l| l.min(service)));
            if (self.probe.is_some() && !sent.probed) || (self.knee.trial.is_some() && !sent.tried)
            {
                // Sent at the depth before the probe or the trial: not theirs.
                continue;
            }
            if self.knee.trial.is_some() && self.knee.ramp > 0 {
                self.knee.ramp -= 1;
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

    /// The floor in force: a trial's depth while one runs.
    fn floor(&self) -> u32 {
        self.knee.trial.map_or(self.floor, |(depth, _)| depth)
    }

    /// A window of a floor trial: counted, and once it has [`TRIAL_WINDOWS`], judged
    /// against the windows at the floor before it. Whether a trial took the window.
    fn judge_trial(&mut self, depth_sum: u64, sum_ns: u64) -> bool {
        let Some((depth, mut deep)) = self.knee.trial else {
            return false;
        };
        deep.add(depth_sum, sum_ns);
        if deep.windows < TRIAL_WINDOWS {
            self.knee.trial = Some((depth, deep));
            return true;
        }
        let knee = &mut self.knee;
        knee.trial = None;
        if deep.gains_over(&knee.at_floor) {
            // Halfway to what the device held: a step short of a depth that may not be
            // needed whole, and the next trial goes on from there.
            let held = deep.mean_depth().clamp(self.floor, depth);
            self.floor = (self.floor + held).div_ceil(2).min(self.tags);
            knee.backoff = TRIAL_WAIT;
        } else {
            knee.backoff = knee.backoff.saturating_mul(2).min(TRIAL_WAIT_MAX);
        }
        knee.wait = knee.backoff;
        knee.at_floor = Rate::default();
        true
    }

    /// A window while the bound holds: if the device ran at about the floor (a tenth
    /// either side), it is measured, and a trial of twice the floor starts when its wait is
    /// over.
    fn watch_floor(&mut self, depth_sum: u64, sum_ns: u64) {
        let mean_depth = depth_sum / u64::from(WINDOW);
        let floor = u64::from(self.floor);
        let at_floor = mean_depth * 10 >= floor * 9 && mean_depth * 10 <= floor * 11;
        let contended = self.per_group.len() >= 2;
        if !(self.saturated && self.probe.is_none() && at_floor && contended) {
            return;
        }
        let knee = &mut self.knee;
        if knee.at_floor.windows == TRIAL_WINDOWS {
            knee.at_floor = Rate::default();
        }
        knee.at_floor.add(depth_sum, sum_ns);
        knee.wait = knee.wait.saturating_sub(1);
        let deeper = self.floor.saturating_mul(2).min(self.tags);
        if knee.wait == 0 && knee.at_floor.windows == TRIAL_WINDOWS && deeper > self.floor {
            knee.trial = Some((deeper, Rate::default()));
            knee.ramp = deeper - self.floor;
        }
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
mod tests {
    use super::*;
    use crate::Op;

    fn done(id: u64, service_ns: u64) -> Completion {
        Completion {
            id: RequestId(id),
            ctx: 0,
            op: Op::Read,
            sectors: 8,
            latency_ns: service_ns,
            service_ns,
            status: 0,
        }
    }

    /// Groups of weights 1 and 5, each with 64 requests outstanding.
    fn two_groups() -> [Backlog; 2] {
        [1, 5].map(|weight| Backlog {
            weight,
            outstanding: 64,
        })
    }

    /// A share that saw one window with service times `times` (cycled).
    fn after_window(times: &[u64]) -> DeviceShare {
        let mut share = DeviceShare::default();
        for i in 0..u64::from(WINDOW) {
            share.sent(RequestId(i), 1);
        }
        let done: Vec<Completion> = (0..u64::from(WINDOW))
            .map(|i| done(i, times[i as usize % times.len()]))
            .collect();
        share.completed(&done);
        share
    }

    #[test]
    fn a_bound_applies_from_the_start_until_a_window_shows_no_queueing() {
        // Swapped in under load, a policy never sees the device idle: it bounds first.
        let mut share = DeviceShare::new(64, 1);
        let two = two_groups();
        assert!(share.saturated() && share.bound(two).is_some());
        for i in 0..u64::from(WINDOW) {
            share.sent(RequestId(i), 1);
        }
        let calm: Vec<Completion> = (0..u64::from(WINDOW))
            .map(|i| done(i, 100 + i % 3 * 10))
            .collect();
        share.completed(&calm);
        assert!(
            !share.saturated(),
            "a window within 1.5 × the least lifts it"
        );
        assert_eq!(share.room(two), u32::MAX);
    }

    #[test]
    fn apportioned_parts_add_up_and_the_largest_remainders_take_what_the_floors_leave() {
        // Quotas 4.60, 1.91, 93.69, 0.45, 8.53, 4.83: floors 110, four more by remainder.
        assert_eq!(
            apportion(114, &[41, 17, 835, 4, 76, 43]),
            vec![5, 2, 94, 0, 8, 5]
        );
        assert_eq!(
            apportion(2, &[1, 1, 1]),
            vec![1, 1, 0],
            "ties to the earlier"
        );
        assert!(apportion(7, &[]).is_empty());
        // Generated pools and weights: the parts add up, each within one of its quota.
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = |n: u64| {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            (x >> 33) % n
        };
        for _ in 0..500 {
            let total = u32::try_from(next(5000)).unwrap();
            let weights: Vec<u64> = (0..1 + next(8)).map(|_| 1 + next(10_000)).collect();
            let parts = apportion(total, &weights);
            assert_eq!(
                parts.iter().map(|&p| u64::from(p)).sum::<u64>(),
                u64::from(total)
            );
            let sum: u64 = weights.iter().sum();
            for (&p, &w) in parts.iter().zip(&weights) {
                let quota = f64::from(total) * w as f64 / sum as f64;
                assert!(
                    (f64::from(p) - quota).abs() < 1.0,
                    "{p} for a quota of {quota}"
                );
            }
        }
    }

    #[test]
    fn no_bound_below_saturation_or_with_one_group() {
        let calm = after_window(&[100, 110, 120]);
        assert!(!calm.saturated());
        let two = two_groups();
        assert_eq!(calm.room(two), u32::MAX);
        let busy = after_window(&[100, 400, 700]);
        assert!(busy.saturated());
        assert_eq!(
            busy.bound([Backlog {
                weight: 5,
                outstanding: 64
            }]),
            None
        );
    }

    #[test]
    fn a_saturated_device_holds_what_lets_the_heaviest_group_keep_its_part() {
        let busy = after_window(&[100, 400, 700]);
        // 1:2:5 at 64 each: the weight-5 group may have 5/8 of B in flight with a request
        // to spare, so B = 0.9 × 64 × 8 / 5.
        let groups = [1, 2, 5].map(|weight| Backlog {
            weight,
            outstanding: 64,
        });
        assert_eq!(busy.bound(groups), Some(92));
        // An idle group does not count.
        let groups = [
            Backlog {
                weight: 1,
                outstanding: 0,
            },
            Backlog {
                weight: 1,
                outstanding: 10,
            },
            Backlog {
                weight: 1,
                outstanding: 40,
            },
        ];
        assert_eq!(busy.bound(groups), Some(18));
    }

    #[test]
    fn the_bound_keeps_half_a_hardware_queue_on_the_device() {
        let mut busy = after_window(&[100, 400, 700]);
        busy.floor = DeviceShare::new(31, 1).floor;
        let groups = [1, 2, 5].map(|weight| Backlog {
            weight,
            outstanding: 2,
        });
        assert_eq!(
            busy.bound(groups),
            Some(15),
            "2 × 8 / 5 × 0.9 would leave 2"
        );
    }

    #[test]
    fn a_bound_lifts_only_once_the_queueing_falls_well_under_where_it_began() {
        let mut share = after_window(&[100, 400, 700]);
        let mut window = |times: &[u64]| {
            for i in 0..u64::from(WINDOW) {
                share.sent(RequestId(1000 + i), 1);
            }
            let done: Vec<Completion> = (0..u64::from(WINDOW))
                .map(|i| done(1000 + i, times[i as usize % times.len()]))
                .collect();
            share.completed(&done);
            share.saturated()
        };
        assert!(
            window(&[100, 170, 230]),
            "a mean of 1.67 × the least keeps it"
        );
        assert!(!window(&[100, 130, 160]), "1.3 × lifts it");
        assert!(
            !window(&[100, 170, 230]),
            "and 1.67 × does not set it again"
        );
    }

    #[test]
    fn a_bound_lifts_only_if_half_the_depth_is_not_a_third_faster() {
        let send = |share: &mut DeviceShare, ids: std::ops::Range<u64>| {
            for id in ids {
                share.sent(RequestId(id), 1);
            }
        };
        let complete = |share: &mut DeviceShare, ids: std::ops::Range<u64>, time: u64| {
            let done: Vec<Completion> = ids.map(|id| done(id, time)).collect();
            share.completed(&done);
        };
        for (half_depth_time, lifts) in [(230, false), (440, true)] {
            // Swapped in under load, a policy's first samples are a loaded device's: 96 on
            // it, every one at 460.
            let mut share = DeviceShare::new(64, 1);
            send(&mut share, 0..96);
            complete(&mut share, 0..32, 460);
            assert!(
                share.saturated(),
                "calm against its own loaded time, but a probe first"
            );
            assert_eq!(
                share.bound(two_groups()),
                Some(32),
                "half the 64 left on it"
            );
            // Requests sent at the deeper depth are not the probe's.
            complete(&mut share, 32..64, 460);
            send(&mut share, 96..128);
            complete(&mut share, 64..96, 460);
            assert!(share.probe.is_some(), "no window at half the depth yet");
            complete(&mut share, 96..128, half_depth_time);
            assert_eq!(
                !share.saturated(),
                lifts,
                "at half the depth {half_depth_time}"
            );
            assert_eq!(share.least_ns, Some(half_depth_time), "the shortest seen");
        }
    }

    /// Runs `completions` completions on a device kept full to the bound that `groups`
    /// ask for, after one request alone teaches it the device's shortest time. The device
    /// takes `service(depth)` ns for a request sent when `depth` are on it, itself included.
    /// Returns the deepest bound it met.
    fn run_at_the_bound(
        share: &mut DeviceShare,
        groups: [Backlog; 2],
        completions: u64,
        service: impl Fn(u32) -> u64,
    ) -> u32 {
        let mut on_device = std::collections::VecDeque::new();
        let (mut next, mut deepest) = (1_000_000, 0);
        share.sent(RequestId(next), 1);
        share.completed(&[done(next, service(1))]);
        for _ in 0..completions {
            let bound = share.bound(groups).expect("a saturated device, two groups");
            deepest = deepest.max(bound);
            while share.in_flight() < bound {
                next += 1;
                share.sent(RequestId(next), 1 + next as u32 % 2);
                on_device.push_back((next, service(share.in_flight())));
            }
            let (id, time) = on_device.pop_front().expect("a request on the device");
            share.completed(&[done(id, time)]);
        }
        deepest
    }

    /// Weights 1 and 5 with `outstanding` each: the heavier group's part of the device
    /// asks for at most `0.9 × outstanding × 6 / 5` on it.
    fn light_and_heavy(outstanding: u32) -> [Backlog; 2] {
        [1, 5].map(|weight| Backlog {
            weight,
            outstanding,
        })
    }

    #[test]
    fn the_floor_rises_while_a_device_completes_5_percent_more_at_twice_it() {
        // A request waits for an eighth of those ahead of it: the rate at a depth d goes
        // as d / (8 + d), 5 % more at twice d until d is about 76. The groups ask for 43.
        let parallel = |depth: u32| 1_000 + 125 * u64::from(depth);
        let mut share = DeviceShare::new(128, 2);
        assert_eq!(share.floor, 64);
        run_at_the_bound(&mut share, light_and_heavy(40), 20_000, parallel);
        assert!(
            (76..=128).contains(&share.floor),
            "the floor at {}: past where doubling gains 5 %, not far past it",
            share.floor
        );
        let floor = share.floor;
        run_at_the_bound(&mut share, light_and_heavy(40), 20_000, parallel);
        assert_eq!(share.floor, floor, "and there it stays");
    }

    #[test]
    fn the_floor_stays_where_a_device_completes_no_more_at_twice_it() {
        // One unit serving in turn: twice the depth, twice the time, the same rate.
        let mut share = DeviceShare::new(128, 2);
        run_at_the_bound(&mut share, light_and_heavy(40), 20_000, |depth| {
            1_000 * u64::from(depth)
        });
        assert_eq!(share.floor, 64);
        assert!(
            share.knee.backoff > TRIAL_WAIT,
            "each trial that found nothing waits longer for the next"
        );
    }

    #[test]
    fn a_floor_trial_never_asks_for_more_than_the_device_has_tags() {
        // 16 tags in one queue: the floor starts at 8, its trials at 16, never 16 × 2.
        let mut share = DeviceShare::new(16, 1);
        let deepest = run_at_the_bound(&mut share, light_and_heavy(6), 5_000, |depth| {
            1_000 + 300 * u64::from(depth)
        });
        assert_eq!(deepest, 16, "tried at its tags");
        assert!((9..=16).contains(&share.floor), "risen to {}", share.floor);
    }

    #[test]
    fn completions_and_requeues_leave_the_device_and_strangers_are_ignored() {
        let mut share = DeviceShare::default();
        share.sent(RequestId(1), 7);
        share.sent(RequestId(2), 7);
        share.sent(RequestId(2), 7);
        assert_eq!((share.in_flight(), share.in_flight_of(7)), (2, 2));
        share.requeued(RequestId(1));
        share.completed(&[done(2, 50), done(99, 50)]);
        assert_eq!((share.in_flight(), share.in_flight_of(7)), (0, 0));
        assert_eq!(share.window_count, 1, "only its own completion counted");
    }
}
