//! The groups' parts of a pool of scheduler tags: the pool divided among the active groups
//! by weight in whole parts (`apportion`), kept per asking group while the groups stay the
//! same, and whether a group at its part may take one more.

use schedhost_sdk::device_share::apportion_into;

use super::{Admission, GroupTags};

/// One division of a pool between groups: who, by what weight, and the parts, with the
/// sort's working space. Kept so that it allocates only while it grows.
#[derive(Debug, Default)]
pub(super) struct Division {
    ids: Vec<u32>,
    weights: Vec<u64>,
    parts: Vec<u32>,
    order: Vec<usize>,
}

impl Division {
    /// `nr_requests` divided between `others` and, last, `asker` (a tie in the remainders
    /// goes to the earlier group, so never to the one asking: each group asks as if it were
    /// the one a tie passes over, and equal groups see equal parts).
    pub(super) fn divide(
        &mut self,
        nr_requests: u32,
        others: impl Iterator<Item = u32>,
        asker: u32,
        weights: Option<&Vec<u32>>,
    ) {
        self.ids.clear();
        self.ids.extend(others.chain([asker]));
        self.weights.clear();
        self.weights
            .extend(self.ids.iter().map(|&g| Admission::weight(weights, g)));
        apportion_into(nr_requests, &self.weights, &mut self.parts, &mut self.order);
    }

    /// Each group's part, at least one tag.
    pub(super) fn parts(&self) -> impl Iterator<Item = (u32, u32)> + Clone + '_ {
        (self.ids.iter().zip(&self.parts)).map(|(&g, &part)| (g, part.max(1)))
    }

    /// Group `g`'s part, at least one tag (1 for a group not in the division).
    fn part(&self, g: u32) -> u32 {
        self.parts()
            .find(|&(id, _)| id == g)
            .map_or(1, |(_, part)| part)
    }
}

/// Rows are kept for at most this many active groups (a row per group, a part per group in
/// each: 16 KiB at this bound). Past it each ask divides afresh, so that a job file of
/// 65 536 groups, each with a request waiting, cannot make the rows take 16 GiB.
const KEPT_GROUPS: usize = 64;

/// The parts each active group sees when it asks, kept while the active groups and their
/// weights stay the same: a saturated pool asks at every tag and changes its groups rarely.
#[derive(Debug, Default)]
pub(super) struct PartsCache {
    /// Whether `members` are the active groups now.
    fresh: bool,
    /// The active groups, by number.
    members: Vec<u32>,
    /// Whether row `i` of `parts` is divided yet.
    divided: Vec<bool>,
    /// Row `i` (`members.len()` parts, by member): the parts as `members[i]` asks them.
    parts: Vec<u32>,
    division: Division,
}

impl PartsCache {
    /// A group turned active or idle, or the weights changed: every row is divided again.
    pub(super) fn stale(&mut self) {
        self.fresh = false;
    }

    /// The active groups' parts (`by_group` says which are active) as `asker`, one of
    /// them, sees them: divided the first time it asks while the groups stay the same.
    /// `None` past [`KEPT_GROUPS`] active groups: the caller divides afresh.
    pub(super) fn as_asked(
        &mut self,
        by_group: &[GroupTags],
        asker: u32,
        nr_requests: u32,
        weights: Option<&Vec<u32>>,
    ) -> Option<impl Iterator<Item = (u32, u32)> + Clone + '_> {
        if !self.fresh {
            self.members.clear();
            self.members.extend(
                (by_group.iter().enumerate())
                    .filter(|(_, t)| t.active())
                    .map(|(g, _)| g as u32),
            );
            let n = self.members.len();
            let kept = if n <= KEPT_GROUPS { n } else { 0 };
            self.divided.clear();
            self.divided.resize(kept, false);
            self.parts.clear();
            self.parts.resize(kept * kept, 0);
            self.fresh = true;
        }
        let n = self.members.len();
        if n > KEPT_GROUPS {
            return None;
        }
        let found = self.members.iter().position(|&g| g == asker);
        let i = found.unwrap_or_else(|| panic!("group {asker} asks but is not active"));
        if !self.divided[i] {
            let others = self.members.iter().copied().filter(|&g| g != asker);
            self.division.divide(nr_requests, others, asker, weights);
            for (k, &g) in self.members.iter().enumerate() {
                self.parts[i * n + k] = self.division.part(g);
            }
            self.divided[i] = true;
        }
        let row = &self.parts[i * n..(i + 1) * n];
        Some(self.members.iter().copied().zip(row.iter().copied()))
    }

    /// Parts kept, in all rows.
    #[cfg(test)]
    pub(super) fn kept(&self) -> usize {
        self.parts.len()
    }
}

/// Whether `group` may take another tag of a pool with `held_total` held, given every
/// group's part (`parts`, the asker's own among them): under its part it may; at or over
/// it, only if more stay free than the waiting groups under their parts are owed.
pub(super) fn may_take(
    by_group: &[GroupTags],
    held_total: u32,
    group: u32,
    nr_requests: u32,
    parts: impl Iterator<Item = (u32, u32)> + Clone,
) -> bool {
    let tags_of = |g: u32| by_group.get(g as usize).copied().unwrap_or_default();
    let own = parts
        .clone()
        .find(|&(g, _)| g == group)
        .map_or(1, |(_, part)| part);
    if tags_of(group).held < own {
        return true;
    }
    let free = nr_requests.saturating_sub(held_total);
    let owed: u32 = parts
        .filter(|&(g, _)| g != group)
        .map(|(g, part)| (tags_of(g), part))
        .filter(|(t, _)| t.staged > 0)
        .map(|(t, part)| part.saturating_sub(t.held))
        .fold(0, u32::saturating_add);
    free > owed
}
