//! Groups on the core: their limits held before the scheduler (the throttle), their weights
//! told to the policy and used to share the scheduler tags, and which group each submitter is in.

use super::*;

impl Core {
    /// Holds the bios of limited groups to their limits from now on (a run sets it before
    /// its first bio).
    pub fn set_throttle(&mut self, throttle: Throttle) {
        let throttle = throttle
            .with_base_depth(self.config.queue_depth)
            .with_slice_for(self.config.rotational);
        self.throttle = Some(Box::new(throttle));
        self.admission.share_between_groups();
        self.tell_groups(0);
    }

    /// The groups' parts of the scheduler tags: weighted if the policy asks for it
    /// (`weighted-tags`), else equal. After the groups or the policy change.
    pub(super) fn weigh_tags(&mut self) {
        let weights = self
            .throttle
            .as_ref()
            .filter(|_| self.policy.info().weighted_tags)
            .map(|t| {
                std::iter::once(DEFAULT_WEIGHT)
                    .chain(t.groups().iter().map(|g| g.weight))
                    .collect()
            });
        self.admission.weigh_groups(weights);
    }

    /// `ctx` is in group `group` (an index into the throttle's groups; `None`: none) from
    /// now on; nothing without groups.
    pub fn place_in_group(&mut self, ctx: u32, group: Option<u16>) {
        if let Some(t) = &mut self.throttle {
            t.assign(ctx, group);
        }
    }

    /// Tells the policy every group's parameters. Never fails: a fault is latched.
    fn tell_groups(&mut self, now_ns: u64) {
        let Some(groups) = self.throttle.as_ref().map(|t| t.for_policy()) else {
            return;
        };
        self.weigh_tags();
        self.stats.policy_calls += 1;
        let answer = self.policy.instance().groups(now_ns, &groups);
        self.policy.guard(answer, ());
    }

    /// The groups' limits and what each did, if groups are limited.
    pub fn throttle(&self) -> Option<&Throttle> {
        self.throttle.as_deref()
    }

    /// Group `spec.name` takes new parameters from `now_ns` on, and the policy hears of them.
    ///
    /// # Errors
    /// No groups here, or none of that name.
    pub fn set_group(&mut self, now_ns: u64, spec: GroupSpec) -> Result<(), String> {
        match &mut self.throttle {
            Some(t) => t.set_limits(now_ns, spec)?,
            None => return Err("this run has no groups (--group)".into()),
        }
        self.tell_groups(now_ns);
        // A fault in the policy's answer is acted on at the next turn.
        Ok(())
    }

    /// The group (from 1) `ctx` is in, 0 for none.
    pub(super) fn group_of(&self, ctx: u32) -> u32 {
        self.throttle.as_ref().map_or(0, |t| t.group_number(ctx))
    }

    /// Bios held by their group's limits, not yet requests.
    pub fn throttled(&self) -> usize {
        self.throttle.as_ref().map_or(0, |t| t.waiting())
    }
}
