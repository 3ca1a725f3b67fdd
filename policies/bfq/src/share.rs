//! Groups' shares on a device deeper than the load (`device_share`, not the kernel's): while
//! two or more groups have requests and the device queues inside, bfq keeps on the device
//! only what lets each group hold its weight's part, with the SDK's [`DeviceShare`] bound
//! as mclock does; a group with a quarter of the bound or more is held in service at its
//! weight's part of it, and requests injected beside it come from groups under theirs (a
//! lighter group's turn too, at a run's start, while a heavy group not yet served waits
//! with nothing on the device: `heavy_group_waits`). On a disk the parts follow what each
//! group's completions show ([`DiskParts`]).
//!
//! Without it a group's throughput follows what it has in flight, not its weight: three
//! groups at 1:2:5 and iodepth 128 on `sim:ssd` split 1:2:3 (0.161 / 0.324 / 0.515 with
//! `group_budgets=0` as well; with budgets scaled to the weights they hold 1:2:5 without
//! it at 0.90 of noop's IOPS, 0.95 with it). The heaviest group's turn sends
//! its whole iodepth to the device, its queue runs dry, and at the end of its budget it
//! leaves the busy queues; it comes back at the system's virtual time, not its own finish,
//! and so takes every other turn at most. Held at its part, it keeps requests queued and
//! stays busy, and its timestamps run as B-WF2Q+ has them; meanwhile other groups under
//! their parts fill the device by injection, the parts rather than the learned limit
//! bounding them. The kernel's bfq has the same dry-queue behaviour at the end of a budget
//! (`non_blocking_wait_rq` is not set for `BFQQE_BUDGET_EXHAUSTED`); `device_share=0` is
//! the kernel's.
//!
//! [`DeviceShare`]: schedhost_sdk::device_share::DeviceShare

use std::collections::BTreeMap;

use schedhost_sdk::device_share::{Backlog, apportion};

use super::{Bfq, DEFAULT_GROUP_WEIGHT, idling};

/// Completions a disk's parts are judged over.
const CORRECTION_WINDOW: u32 = 64;
/// A correction of 1, in the fixed point corrections are kept in.
const UNIT: u64 = 1024;

/// On a disk, what each group's part of the bound gives it. A disk serves the requests
/// nearest its head first, so a group with few requests in its own region is served less
/// than its count on the device, and one with many more (19:140 on `sim:hdd`: the light
/// group's 4 of 30 on the disk got 8.4 % of the I/Os where its weight asks 11.9 %). Over
/// each window of completions under a bound, a group's completions are set against its
/// weight's part of them, and the weight its part of the bound is cut by moves an eighth
/// of the relative shortfall or excess (a quarter at most, within a sixteenth and sixteen
/// times its own): slowly, since a window holds about one round of turns and its count
/// depends on where the round stands; only where a count is a fair measure (`alike`).
/// The bound is taken with the corrected weights too, so that a group that cannot send
/// more than it has (its scheduler tags) gains by the others holding fewer.
#[derive(Debug, Default)]
pub(super) struct DiskParts {
    /// Completions of each group in the window, and of all.
    served: BTreeMap<u32, u32>,
    count: u32,
    /// Each group's requests' size in sectors, a running mean over its completions
    /// (seven eighths the last mean), kept across windows.
    sizes: BTreeMap<u32, u64>,
    /// Each group's correction, in [`UNIT`]s; 1 until its first window.
    corrections: BTreeMap<u32, u64>,
}

impl DiskParts {
    /// Group `group`'s correction, in [`UNIT`]s.
    fn correction(&self, group: u32) -> u64 {
        self.corrections.get(&group).copied().unwrap_or(UNIT)
    }
}

/// The groups' bound at one dispatch call.
pub(super) struct GroupBound {
    /// Requests the device may take beyond those on it.
    pub(super) room: u32,
    /// By group, the requests it may have on the device.
    pub(super) parts: BTreeMap<u32, u32>,
}

/// Why the queue in service waits at its group's part of the bound ([`Bfq::held_at_part`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Held {
    /// Its group has a quarter of the bound or more: the others' requests go beside it
    /// under their parts.
    AtItsPart,
    /// A light group's turn that found a heavy group not yet served shut out of the device
    /// ([`Bfq::heavy_group_waits`]): held so to the turn's end, the heavy groups' requests
    /// going first beside it ([`heavy_parts`]).
    ForHeavyBacklog,
}

/// Whether a part is a heavy group's: a quarter of the bound or more.
fn heavy(part: u32, bound: u32) -> bool {
    part.saturating_mul(4) >= bound
}

/// `parts` with every light part set to nothing: what goes first beside a light group's
/// turn held for a heavy group's backlog.
pub(super) fn heavy_parts(parts: &BTreeMap<u32, u32>) -> BTreeMap<u32, u32> {
    let bound: u32 = parts.values().copied().fold(0, u32::saturating_add);
    let keep = |part: u32| if heavy(part, bound) { part } else { 0 };
    (parts.iter()).map(|(&g, &part)| (g, keep(part))).collect()
}

impl Bfq {
    /// Each group with requests outstanding and what it has outstanding, with its weight.
    fn backlogs(&self) -> BTreeMap<u32, Backlog> {
        // Requests queued per group; a queue with requests on the device counts its group
        // in, queued or not.
        let mut backlogs: BTreeMap<u32, Backlog> = BTreeMap::new();
        for queue in self.queues.values() {
            let n = u32::try_from(queue.requests.len()).unwrap_or(u32::MAX);
            if n == 0 && queue.inflight == 0 {
                continue;
            }
            let backlog = backlogs.entry(queue.group).or_insert_with(|| Backlog {
                group: queue.group,
                weight: self
                    .group_weights
                    .get(&queue.group)
                    .map_or(DEFAULT_GROUP_WEIGHT, |&w| u64::from(w)),
                outstanding: self.share.in_flight_of(queue.group),
            });
            backlog.outstanding = backlog.outstanding.saturating_add(n);
        }
        backlogs
    }

    /// Whether requests sent are counted for the bound: it is on and the host named a group
    /// (the count costs a map update per request, which a run without groups does not pay).
    pub(super) fn counts_share(&self) -> bool {
        self.device_share && !self.group_weights.is_empty()
    }

    /// Whether a bound may apply: it is on, the host named a group (beside which the
    /// ungrouped submitters count as one more), and the device queues inside. Checked
    /// first: the backlog walks every queue.
    fn bound_may_apply(&self) -> bool {
        self.counts_share() && self.share.saturated()
    }

    /// The bound as it stands, if one applies: how many more requests the device may take
    /// under it, and each group's part of it by weight (at least 1). The backlog behind it
    /// does not change while one dispatch call sends (a request sent leaves the queued and
    /// joins the outstanding), so a call takes it once.
    pub(super) fn group_bound(&self) -> Option<GroupBound> {
        if !self.bound_may_apply() {
            return None;
        }
        let mut backlogs = self.backlogs();
        for (&g, b) in &mut backlogs {
            b.weight = b.weight.max(1) * self.disk_parts.correction(g);
        }
        let bound = self.share.bound(backlogs.values().copied())?;
        // Whole parts adding up to the bound (a ceiling gave a group owed 1.07 requests two,
        // and injection kept them on the device), at least one each.
        let (groups, weights): (Vec<u32>, Vec<u64>) =
            backlogs.iter().map(|(&g, b)| (g, b.weight)).unzip();
        let parts = groups
            .into_iter()
            .zip(apportion(bound, &weights).into_iter().map(|p| p.max(1)))
            .collect();
        Some(GroupBound {
            room: bound.saturating_sub(self.share.in_flight()),
            parts,
        })
    }

    /// Whether the queue in service, of group `group`, is held at its part, and why: a
    /// group with a quarter of the bound or more, or a lighter one whose turn found such a
    /// group shut out (`held_for_heavy`: it did earlier in the turn). A heavy group's whole
    /// iodepth on the device is what empties its queue and costs it turns; a light group
    /// held at a part of a few requests would instead keep the device for its whole turn
    /// nearly idle, unless a heavy group's requests fill it meanwhile.
    pub(super) fn held_at_part(
        &self,
        parts: Option<&BTreeMap<u32, u32>>,
        group: u32,
        held_for_heavy: bool,
    ) -> Option<Held> {
        let parts = parts?;
        let bound: u32 = parts.values().copied().fold(0, u32::saturating_add);
        let &part = parts.get(&group)?;
        if self.share.in_flight_of(group) < part {
            None
        } else if heavy(part, bound) {
            Some(Held::AtItsPart)
        } else if held_for_heavy || self.heavy_group_waits(parts, bound, group) {
            Some(Held::ForHeavyBacklog)
        } else {
            None
        }
    }

    /// Whether a group other than `group` with a heavy part of `bound` has never had a
    /// request complete, has nothing on the device and has requests queued to fill its
    /// part: a run's start. Its first turn may go to a light group (the turns' finishes
    /// tie under budgets scaled to the weights) with a budget scaled to the groups whose
    /// requests had reached bfq, the heaviest not among them: sent whole, it took the
    /// device from a heavy group's backlog and was charged for it in the judged window
    /// after (the sweep's seed 97 cell 255: a weight-2 group beside 19, 156 and 878 sent
    /// 210 requests where its part was 34, then completed nothing from 50 to 300 ms, 56.7 %
    /// under its share over 100–500 ms). Only then: a light turn held whenever a heavy
    /// group was under its part, or once one had nothing on the device, let light groups
    /// take 3.4–4.9 % more than their shares in steady runs (seed 95 cell 202, seed 102
    /// cell 53, seed 107 cell 43), and one held beside a heavy group that cannot fill its
    /// part (its iodepth under it) left that part to the light ones (seed 100 cell 179:
    /// twice their shares).
    fn heavy_group_waits(&self, parts: &BTreeMap<u32, u32>, bound: u32, group: u32) -> bool {
        parts.iter().any(|(&other, &part)| {
            other != group
                && heavy(part, bound)
                && self.share.in_flight_of(other) == 0
                && self.never_served(other)
                && self.queued_in(other) >= part
        })
    }

    /// Whether none of group `group`'s queues has had a request complete.
    fn never_served(&self, group: u32) -> bool {
        (self.queues.values())
            .filter(|q| q.group == group)
            .all(|q| q.habits.last_completion().is_none())
    }

    /// Requests group `group`'s queues hold.
    fn queued_in(&self, group: u32) -> u32 {
        let queued = (self.queues.values())
            .filter(|q| q.group == group)
            .map(|q| q.requests.len());
        u32::try_from(queued.sum::<usize>()).unwrap_or(u32::MAX)
    }

    /// Whether group `group` may have one more request on the device under `parts`.
    pub(super) fn under_part(&self, parts: Option<&BTreeMap<u32, u32>>, group: u32) -> bool {
        parts.is_none_or(|parts| {
            parts
                .get(&group)
                .is_none_or(|&part| self.share.in_flight_of(group) < part)
        })
    }

    /// A request of group `group` of `sectors` completed: on a disk under a bound,
    /// counted, and at the end of a window the groups' parts corrected where their requests
    /// cost alike.
    pub(super) fn served_on_disk(&mut self, group: u32, sectors: u32) {
        if !self.rotational || !self.bound_may_apply() {
            return;
        }
        let parts = &mut self.disk_parts;
        *parts.served.entry(group).or_default() += 1;
        let sectors = u64::from(sectors);
        let size = parts.sizes.entry(group).or_insert(sectors);
        *size = (*size * 7 + sectors) / 8;
        parts.count += 1;
        if parts.count < CORRECTION_WINDOW {
            return;
        }
        let backlogs = self.backlogs();
        if !self.alike(&backlogs) {
            self.disk_parts.served.clear();
            self.disk_parts.count = 0;
            return;
        }
        let total: u64 = backlogs.values().map(|b| b.weight.max(1)).sum();
        let parts = &mut self.disk_parts;
        let count = u64::from(parts.count);
        for (&g, b) in &backlogs {
            // Owed and served over the window, in completions times the weights' sum.
            let owed = b.weight.max(1) * count;
            let served = u64::from(parts.served.get(&g).copied().unwrap_or(0)) * total;
            let now = parts.correction(g);
            let step = (now / 8).saturating_mul(owed.abs_diff(served)) / owed.max(1);
            let step = step.min(now / 4);
            let next = if served < owed {
                now + step
            } else {
                now - step
            };
            parts
                .corrections
                .insert(g, next.clamp(UNIT / 16, UNIT * 16));
        }
        parts.served.clear();
        parts.count = 0;
    }

    /// Whether a count of completions is a fair measure between the groups with requests
    /// outstanding: each has only seeky queues busy or on the device, and their requests'
    /// sizes are within twice each other. A sequential reader's requests cost a fraction of
    /// a random one's, and bfq charges it sectors where it charges a seeky queue time:
    /// counted beside a random reader it lost most of its IOPS (4 KiB each, equal weights
    /// on `sim:hdd`, 372 to 79).
    fn alike(&self, backlogs: &BTreeMap<u32, Backlog>) -> bool {
        let seeky = (self.queues.values())
            .filter(|q| backlogs.contains_key(&q.group) && (q.busy || q.inflight > 0))
            .all(idling::seeky);
        let sizes = backlogs
            .keys()
            .map(|g| self.disk_parts.sizes.get(g).copied());
        let (mut least, mut most) = (u64::MAX, 0);
        for size in sizes {
            let Some(size) = size else {
                return false;
            };
            (least, most) = (least.min(size), most.max(size));
        }
        seeky && most <= least.saturating_mul(2)
    }
}
