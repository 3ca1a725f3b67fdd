//! The policy's tunables through the core: read, set and saved, a fault in any of those calls
//! ejecting the policy as any other fault does.

use super::*;

impl Core {
    /// Every tunable of the policy with its current value, under the same supervision as
    /// every other call: the first fault ejects the policy (or, under
    /// [`OnFault::Abort`], stops the run) and no further call is made.
    ///
    /// # Errors
    /// A fault that stops the run; after an ejection the answer is `Ok(Err(why))`.
    pub fn tunable_values(&mut self, now_ns: u64) -> Result<Result<TunableValues, String>, Fault> {
        match self.read_tunables() {
            Ok(values) => Ok(Ok(values)),
            Err(fault) => self.eject_for(now_ns, fault).map(Err),
        }
    }

    /// The policy's saved state (what a newer build of it would be handed), supervised as
    /// [`Self::tunable_values`].
    ///
    /// # Errors
    /// A fault that stops the run; after an ejection the answer is `Ok(Err(why))`.
    pub fn saved_state(&mut self, now_ns: u64) -> Result<Result<Vec<u8>, String>, Fault> {
        self.stats.policy_calls += 1;
        match self.policy.instance().save_state() {
            Ok(state) => Ok(Ok(state)),
            Err(fault) => self.eject_for(now_ns, fault).map(Err),
        }
    }

    /// A call made outside a policy round failed: the policy is ejected (or, under
    /// [`OnFault::Abort`], the run stops), as after any fault. Returns what to tell the asker.
    ///
    /// # Errors
    /// The fault, when faults stop the run.
    fn eject_for(&mut self, now_ns: u64, fault: Fault) -> Result<String, Fault> {
        let why = format!(
            "the policy failed in {} and was ejected: {fault}",
            fault.call
        );
        self.policy.latch(fault);
        self.act_on_fault(now_ns)?;
        Ok(why)
    }

    fn read_tunables(&mut self) -> Result<TunableValues, Fault> {
        self.stats.policy_calls += 1;
        let specs = self.policy.instance().tunables()?;
        let mut values = Vec::with_capacity(specs.len());
        for spec in specs {
            self.stats.policy_calls += 1;
            let value = self.policy.instance().get(&spec.name)?;
            values.push((spec.name, value));
        }
        Ok(values)
    }

    /// Changes a tunable at `now_ns`; depth limits are asked again afterwards. A fault in the
    /// call is handled as any other (an ejection at `now_ns`, or the error under
    /// [`OnFault::Abort`]).
    ///
    /// # Errors
    /// A fault that stops the run; the policy's refusal comes back as `Ok(Err(message))`.
    pub fn set_tunable(
        &mut self,
        now_ns: u64,
        name: &str,
        value: i64,
    ) -> Result<Result<(), String>, Fault> {
        self.stats.policy_calls += 1;
        let answer = match self.policy.instance().set(name, value) {
            Ok(answer) => answer,
            Err(fault) => return self.eject_for(now_ns, fault).map(Err),
        };
        if answer.is_ok() && self.policy.alive() {
            self.refresh_depth_limits();
            self.refresh_merge_rules();
            // A restarted instance starts with the tunables as they are now.
            self.policy.tuned(name, value);
        }
        self.act_on_fault(now_ns)?;
        Ok(answer)
    }
}
