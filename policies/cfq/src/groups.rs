//! cfq's group scheduling (`CFQ_GROUP_IOSCHED`): each cgroup has its own service trees, and
//! the groups take turns by weighted virtual disk time. A group's turn lasts one of its
//! queues' slices; when it ends the group is charged the time the queue held the device
//! (the requests it sent, in IOPS mode: `slice_idle` 0 on a device that queues commands)
//! divided by its part of the weights of the busy groups (`cfq_group_served`,
//! `cfqg_scale_charge`), and the group with the least `vdisktime` goes next
//! (`cfq_get_next_cfqg`). A group that becomes busy goes after the last one
//! (`cfq_group_notify_queue_add`), so a group that keeps the device busy through its
//! turns keeps its place and one that goes idle loses it: hence `group_idle` and
//! `wait_busy`, which keep a group's only queue in service across its think time.

use super::*;

/// A group's part of the device is `vfraction / 2^SHIFT` (`CFQ_SERVICE_SHIFT`).
const SHIFT: u32 = 12;
/// Where a newly busy group goes, past the last group's `vdisktime`: the kernel adds
/// `CFQ_SLICE_MODE_GROUP_DELAY` (200 ms in ns) or, in IOPS mode, `CFQ_IOPS_MODE_GROUP_DELAY`
/// (`HZ / 5`, 200 at HZ=1000) to a time scaled by 2^24, so either puts it just behind.
const SLICE_MODE_DELAY: u64 = 200 * MS;
const IOPS_MODE_DELAY: u64 = 200;
/// The most one turn is charged, in ns or requests.
const MAX_CHARGE: u64 = 1 << 36;
/// The root group's weight (submitters in no group): cgroup v2's default doubled, as
/// `cfq_cpd_init` gives the root blkcg.
const ROOT_WEIGHT: u32 = 200;
/// io.weight's default, for a group the host has not described.
const DEFAULT_WEIGHT: u32 = 100;

/// One group's state (`struct cfq_group`).
#[derive(Debug, Default)]
pub(crate) struct Cfqg {
    weight: u32,
    /// Its queues waiting for a slice, per class (RT, BE, IDLE): its service trees, each
    /// queue on the workload type its idle window gives it.
    pub(crate) waiting: [VecDeque<QueueKey>; 3],
    /// Its requests on the device (`cfqg->dispatched`).
    pub(crate) dispatched: u32,
    vdisktime: u64,
    /// Its part of the weights of the groups on the tree when it was last put there, of
    /// 2^12 (`vfraction`); 0 while it is off the tree.
    vfraction: u32,
    /// Order among equal keys: a group put on the tree later goes after.
    seq: u64,
    /// What was left of its workload slice when its last turn ended (`saved_wl_slice`,
    /// `saved_wl_type`, `saved_wl_class`): its next turn resumes it.
    pub(crate) saved: Option<(u8, Workload, u64)>,
}

impl Cfqg {
    fn on_tree(&self) -> bool {
        self.vfraction > 0
    }

    /// Its waiting queues of class `class`.
    pub(crate) fn waiting_in(&self, class: usize) -> usize {
        self.waiting[class].len()
    }
}

/// The groups by id, in id order: a vector searched by id, since most runs have a few
/// groups (none but the root without groups) and a component's map lookup is dear.
#[derive(Debug, Default)]
pub(crate) struct Groups(Vec<(u32, Cfqg)>);

impl Groups {
    pub(crate) fn get(&self, id: &u32) -> Option<&Cfqg> {
        let at = self.0.binary_search_by_key(id, |(g, _)| *g).ok()?;
        Some(&self.0[at].1)
    }

    pub(crate) fn get_mut(&mut self, id: &u32) -> Option<&mut Cfqg> {
        let at = self.0.binary_search_by_key(id, |(g, _)| *g).ok()?;
        Some(&mut self.0[at].1)
    }

    /// Group `id`, made by `make` if it is new.
    fn get_or_insert_with(&mut self, id: u32, make: impl FnOnce() -> Cfqg) -> &mut Cfqg {
        let at = match self.0.binary_search_by_key(&id, |(g, _)| *g) {
            Ok(at) => at,
            Err(at) => {
                self.0.insert(at, (id, make()));
                at
            }
        };
        &mut self.0[at].1
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = (&u32, &Cfqg)> {
        self.0.iter().map(|(id, g)| (id, g))
    }

    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = (&u32, &mut Cfqg)> {
        self.0.iter_mut().map(|(id, g)| (&*id, g))
    }

    pub(crate) fn values(&self) -> impl Iterator<Item = &Cfqg> {
        self.0.iter().map(|(_, g)| g)
    }

    fn keys(&self) -> impl Iterator<Item = &u32> {
        self.0.iter().map(|(id, _)| id)
    }
}

/// The group service tree (`grp_service_tree`): groups by `vdisktime`, relative to
/// `min_vdisktime`, which only moves forward.
#[derive(Debug, Default)]
pub(crate) struct GroupTree {
    min_vdisktime: u64,
    next_seq: u64,
}

impl Cfq {
    /// Group `id`'s state, made on first use with the weight the host gave it.
    pub(crate) fn cfqg(&mut self, id: u32) -> &mut Cfqg {
        let weights = &self.weights;
        self.groups.get_or_insert_with(id, || Cfqg {
            weight: weight_of(weights, id),
            ..Cfqg::default()
        })
    }

    /// The host described its groups: their weights count from their next turn, as a
    /// new weight does from `cfq_group_service_tree_add`.
    pub(crate) fn set_weights(&mut self, groups: &[schedhost_sdk::Group]) {
        self.weights = groups.iter().map(|g| (g.id, g.weight)).collect();
        let ids: Vec<u32> = self.groups.keys().copied().collect();
        for id in ids {
            let weight = weight_of(&self.weights, id);
            self.cfqg(id).weight = weight;
        }
    }

    /// Busy queues of group `id`: waiting, or in service.
    pub(crate) fn busy_in(&self, id: u32) -> usize {
        let waiting = self
            .groups
            .get(&id)
            .map_or(0, |g| g.waiting.iter().map(VecDeque::len).sum());
        waiting + usize::from(self.active.is_some_and(|a| a.group == id))
    }

    /// IOPS mode (`iops_mode`): no idling and a device that queues, so a group is charged
    /// the requests it sent rather than the time it held the device.
    fn iops_mode(&self) -> bool {
        self.t.slice_idle == 0 && self.hw_tag.queueing()
    }

    /// Group `id`'s part of `target_latency` (`cfq_group_slice`); all of it without groups.
    pub(crate) fn group_slice(&self, id: u32) -> u64 {
        let vfraction = self.groups.get(&id).map_or(1 << SHIFT, |g| g.vfraction);
        let vfraction = if vfraction == 0 {
            1 << SHIFT
        } else {
            vfraction
        };
        self.t.target_latency.saturating_mul(u64::from(vfraction)) >> SHIFT
    }

    /// Group `id` got a busy queue: unless it is on the tree already, it goes on it behind
    /// the last group, or at `min_vdisktime` if none is there.
    pub(crate) fn group_busy(&mut self, id: u32) {
        if self.groups.get(&id).is_some_and(Cfqg::on_tree) {
            return;
        }
        let delay = if self.iops_mode() {
            IOPS_MODE_DELAY
        } else {
            SLICE_MODE_DELAY
        };
        let last = self.last_on_tree().map(|g| g.vdisktime.wrapping_add(delay));
        let vdisktime = last.unwrap_or(self.tree.min_vdisktime);
        self.cfqg(id).vdisktime = vdisktime;
        self.tree_add(id);
    }

    /// Group `id` has no busy queue left: it leaves the tree, and its saved workload slice
    /// with it (`cfq_group_notify_queue_del`).
    pub(crate) fn group_idle(&mut self, id: u32) {
        if self.busy_in(id) > 0 {
            return;
        }
        if let Some(group) = self.groups.get_mut(&id) {
            group.vfraction = 0;
            group.saved = None;
        }
    }

    /// The group on the tree with the greatest key (`rb_rightmost`).
    fn last_on_tree(&self) -> Option<&Cfqg> {
        let min = self.tree.min_vdisktime;
        self.groups
            .values()
            .filter(|g| g.on_tree())
            .max_by_key(|g| (key(min, g.vdisktime), g.seq))
    }

    /// Puts group `id` on the tree with its part of the weights now there, itself included
    /// (`cfq_group_service_tree_add`, the hierarchy being one level).
    fn tree_add(&mut self, id: u32) {
        let others: u64 = (self.groups.iter())
            .filter(|&(&g, group)| g != id && group.on_tree())
            .map(|(_, group)| u64::from(group.weight))
            .sum();
        let seq = self.tree.next_seq;
        self.tree.next_seq += 1;
        let group = self.cfqg(id);
        let weight = u64::from(group.weight);
        let vfraction = (weight << SHIFT) / (others + weight).max(1);
        group.vfraction = u32::try_from(vfraction).unwrap_or(1 << SHIFT).max(1);
        group.seq = seq;
    }

    /// The turn of group `id` ended after a slice of its queue `active` (`cfq_group_served`):
    /// its `vdisktime` grows by the charge over its part, it goes back on the tree, and
    /// what is left of the workload slice being served is kept for its next turn.
    pub(crate) fn group_served(&mut self, active: &Active, sync: bool, now_ns: u64) {
        let serving = self.serving;
        self.cfqg(active.group).saved = serving
            .filter(|&(_, _, expires)| expires > now_ns)
            .map(|(class, wl, expires)| (class, wl, expires - now_ns));
        if !self.grouped {
            // The root alone: it is the tree, whatever its vdisktime, and holds all of it.
            return;
        }
        let used = if active.completed_one {
            now_ns.saturating_sub(active.start).min(active.allocated)
        } else {
            // No request of the slice completed: the slice never started, and the time
            // since the queue was chosen is charged, at least a jiffy.
            now_ns.saturating_sub(active.start).max(JIFFY_NS)
        };
        let charge = if self.iops_mode() {
            u64::from(active.dispatched)
        } else if !sync && !self.has_busy_sync(active.group) {
            active.allocated
        } else {
            used
        };
        let group = self.cfqg(active.group);
        let vfraction = u64::from(group.vfraction.max(1));
        // At most 2^36 (a minute's slice and more), so that the scaled charge stays under
        // 2^61, in u64 (a u128 division is a call in a component), and keys a signed
        // difference.
        let scaled = (charge.min(MAX_CHARGE) << (2 * SHIFT)) / vfraction;
        group.vdisktime = group.vdisktime.wrapping_add(scaled);
        self.tree_add(active.group);
    }

    /// Whether group `id` has a busy sync queue outside the idle class.
    fn has_busy_sync(&self, id: u32) -> bool {
        let Some(group) = self.groups.get(&id) else {
            return false;
        };
        group.waiting[..2]
            .iter()
            .flatten()
            .any(|k| matches!(k, QueueKey::Sync(_)))
    }

    /// The group whose turn is next, the one with the least `vdisktime`
    /// (`cfq_choose_cfqg`): the workload it was serving when its last turn ended resumes.
    /// None iff no group is on the tree.
    pub(crate) fn choose_group(&mut self, now_ns: u64) -> Option<u32> {
        let min = self.tree.min_vdisktime;
        let (&id, first) = (self.groups.iter())
            .filter(|(_, g)| g.on_tree())
            .min_by_key(|(_, g)| (key(min, g.vdisktime), g.seq))?;
        if key(min, first.vdisktime) > 0 {
            self.tree.min_vdisktime = first.vdisktime;
        }
        self.serving = first
            .saved
            .map(|(class, wl, left)| (class, wl, now_ns.saturating_add(left)));
        Some(id)
    }
}

/// Group `id`'s weight: the host's, the default if it named none, the root's for 0.
fn weight_of(weights: &BTreeMap<u32, u32>, id: u32) -> u32 {
    if id == 0 {
        return ROOT_WEIGHT;
    }
    weights.get(&id).copied().unwrap_or(DEFAULT_WEIGHT).max(1)
}

/// A group's place on the tree (`cfqg_key`): its `vdisktime` past the tree's minimum, as
/// a signed difference so that the clock may wrap.
fn key(min: u64, vdisktime: u64) -> i64 {
    vdisktime.wrapping_sub(min) as i64
}
