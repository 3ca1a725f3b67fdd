//! When a policy fails, and when it is replaced on purpose.
//!
//! A policy call that fails (a trap, a timeout, exhausted memory, an invalid answer) is
//! latched: the operation in progress finishes without calling the policy again, so the
//! core's own state stays whole, and [`Core::act_on_fault`] then acts on the fault as
//! [`OnFault`] says. Starvation is a fault too: the watchdog latches one when the policy
//! holds requests, tags are free, and it has dispatched nothing for too long.
//!
//! Replacing a policy ([`Core::replace_policy`], for ejection, restarts and hot swaps) starts
//! the new one, hands it every request the old one held in arrival order, and only then
//! switches. Requests already on the device complete as usual; the new policy is never told
//! of requests it did not see.

use super::supervised::{Ejection, Next, OnFault, Recovery, Supervision, start};
use super::{Core, State};
use crate::policy::{Fault, FaultKind, PolicyBackend};

/// What a hot swap did.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Swapped {
    /// The old policy's name and version.
    pub from: String,
    /// The new one's.
    pub to: String,
    /// Requests handed over (`requests_handed_over` in JSON, as in the swap record).
    #[serde(rename = "requests_handed_over")]
    pub requeued: usize,
    /// Bytes of state handed over (same policy, newer build), if any.
    pub state_bytes: Option<usize>,
}

impl Core {
    /// Sets how faults are handled.
    pub fn supervise(&mut self, supervision: Supervision) {
        self.policy.supervise(supervision);
    }

    /// Every ejection so far.
    pub fn ejections(&self) -> &[Ejection] {
        self.policy.ejections()
    }

    /// Acts on a latched fault. Returns true iff the policy was replaced (the caller may
    /// let the new one dispatch).
    ///
    /// # Errors
    /// The fault, when the run is to stop ([`OnFault::Abort`]).
    pub(super) fn act_on_fault(&mut self, now_ns: u64) -> Result<bool, Fault> {
        let (fault, fresh) = match self.policy.next() {
            None => return Ok(false),
            Some(Next::Stop(fault)) => return Err(fault),
            Some(Next::Fallback(fault)) => (fault, None),
            Some(Next::Restart(fault, fresh)) => (fault, Some(fresh)),
        };
        let restarted = fresh.and_then(|policy| {
            let settings = self.policy.settings().to_vec();
            self.install(now_ns, policy, &settings, None).ok()
        });
        let (recovery, requeued) = match restarted {
            Some((requeued, _)) => (Recovery::Restarted, requeued),
            None => (Recovery::Fallback, self.install_fallback(now_ns)?),
        };
        let ejection = Ejection {
            at_ns: now_ns,
            kind: kind_name(fault.kind),
            call: fault.call,
            message: fault.message,
            recovery,
            requeued,
        };
        tracing::warn!(
            "policy ejected at {:.3} ms: {} in `{}`: {} ({:?}, {} requests handed over)",
            now_ns as f64 / 1e6,
            ejection.kind,
            ejection.call,
            ejection.message.lines().next().unwrap_or_default(),
            recovery,
            requeued
        );
        self.policy.ejected(ejection);
        Ok(true)
    }

    /// Switches to the built-in FIFO, which cannot fail.
    fn install_fallback(&mut self, now_ns: u64) -> Result<usize, Fault> {
        let fifo = self.policy.fallback();
        self.install(now_ns, fifo, &[], None)
            .map(|(requeued, _)| requeued)
            .map_err(|e| Fault {
                kind: FaultKind::InvalidAnswer,
                call: "init",
                message: format!("the built-in FIFO did not start: {e}"),
            })
    }

    /// Hot swap: replaces the policy with `policy`, started with `settings`, given the old
    /// one's saved state when both have the same name (a newer build), and then every
    /// request the old one held, in arrival order. On any failure the old policy stays in
    /// place and the error says why.
    ///
    /// # Errors
    /// The new policy's fault or refusal (of a setting or of the old state).
    pub fn replace_policy(
        &mut self,
        now_ns: u64,
        mut policy: Box<dyn PolicyBackend>,
        settings: &[(String, i64)],
    ) -> Result<Swapped, super::StartError> {
        let from = self.policy.info().clone();
        let to = policy.info()?;
        let state = if from.name == to.name {
            match self.policy.instance().save_state() {
                Ok(state) => Some(state),
                Err(fault) => {
                    // The old policy failed: it is ejected as after any fault, and the swap
                    // is refused (what replaced it holds the requests now).
                    let refusal = super::StartError::Rejected(format!(
                        "the running policy failed in save_state and was ejected: {fault}"
                    ));
                    self.policy.latch(fault);
                    self.act_on_fault(now_ns)?;
                    return Err(refusal);
                }
            }
        } else {
            None
        };
        let (requeued, _) = self.install(now_ns, policy, settings, state.as_deref())?;
        self.check_invariants();
        Ok(Swapped {
            from: format!("{} {}", from.name, from.version),
            to: format!("{} {}", to.name, to.version),
            requeued,
            state_bytes: state.map(|s| s.len()),
        })
    }

    /// The work of a replacement; returns how many requests were handed over, and the old
    /// policy.
    fn install(
        &mut self,
        now_ns: u64,
        mut policy: Box<dyn PolicyBackend>,
        settings: &[(String, i64)],
        state: Option<&[u8]>,
    ) -> Result<(usize, Box<dyn PolicyBackend>), super::StartError> {
        let (said, limits) = start(
            policy.as_mut(),
            &self.config,
            settings,
            state,
            &mut self.stats,
        )?;
        let mut held: Vec<(u64, u64)> = self
            .table
            .iter()
            .filter(|(_, r)| r.state == State::Queued)
            .map(|(id, r)| (r.arrival_ns, id))
            .collect();
        held.sort_unstable();
        let views: Vec<_> = held
            .iter()
            .filter_map(|&(_, id)| self.table.get(id).map(|r| super::policy_view(id, r)))
            .collect();
        // The groups first, so the held requests arrive in groups the policy knows.
        if let Some(groups) = self.throttle.as_ref().map(|t| t.for_policy()) {
            self.stats.policy_calls += 1;
            policy.groups(now_ns, &groups)?;
        }
        if !views.is_empty() {
            self.stats.policy_calls += 1;
            policy.insert(now_ns, &views)?;
        }
        // Past this point nothing can fail: switch.
        let old = self.policy.switch(now_ns, policy, said, Some(settings));
        for &(_, id) in &held {
            if let Some(r) = self.table.get_mut(id) {
                r.epoch = self.policy.epoch();
            }
        }
        self.admission.set_depth_limits(limits);
        self.weigh_tags();
        self.pending_completions.clear();
        self.pending_merges.clear();
        for queue in &mut self.queues {
            queue.timer = None;
        }
        Ok((held.len(), old))
    }

    /// The driver found the run stuck: the policy holds requests, none are on the device,
    /// and it asked for no wake-up. Ejects it as starving them, and returns true, unless
    /// faults abort the run (then the driver reports the stall itself).
    ///
    /// # Errors
    /// Only if the built-in FIFO cannot start, which would be a bug.
    pub fn starve(&mut self, now_ns: u64) -> Result<bool, Fault> {
        if self.queued == 0 || self.policy.supervision().on_fault == OnFault::Abort {
            return Ok(false);
        }
        self.policy.latch(Fault {
            kind: FaultKind::Starved,
            call: "dispatch",
            message: format!(
                "holds {} requests with none on the device and asked for no wake-up",
                self.queued
            ),
        });
        let replaced = self.act_on_fault(now_ns)?;
        self.run(now_ns)?;
        Ok(replaced)
    }

    /// When the watchdog fires if the policy dispatches nothing before: only while it holds
    /// requests, is alive, and the watchdog is on.
    pub(super) fn watchdog_deadline(&self) -> Option<u64> {
        let limit = self.policy.supervision().watchdog_ns?;
        (self.queued > 0 && self.policy.alive()).then(|| {
            self.policy
                .last_progress_ns()
                .saturating_add(limit)
                .saturating_add(1)
        })
    }

    /// The watchdog: latches a starvation fault when the policy holds requests, the device
    /// has nothing in flight, and nothing was dispatched for longer than the limit. While
    /// requests are on the device the policy may be waiting for them (cfq and bfq idle for
    /// their queue's completions): a device that stalls is not the policy's fault.
    pub(super) fn watch(&mut self, now_ns: u64) {
        if self.queued == 0 {
            self.policy.progressed(now_ns);
            return;
        }
        let Some(limit) = self.policy.supervision().watchdog_ns else {
            return;
        };
        if self.queues.iter().any(|q| q.inflight > 0) || self.plugging.holds_queue() {
            // A full device takes nothing, a plugged queue lets nothing out, and a policy
            // may wait for what it has: that time does not count.
            self.policy.progressed(now_ns);
            return;
        }
        let idle = now_ns.saturating_sub(self.policy.last_progress_ns());
        if idle > limit && self.policy.alive() {
            self.policy.latch(Fault {
                kind: FaultKind::Starved,
                call: "dispatch",
                message: format!(
                    "holds {} requests and dispatched none for {:.3} s while the device had nothing to do",
                    self.queued,
                    idle as f64 / 1e9
                ),
            });
        }
    }
}

fn kind_name(kind: FaultKind) -> &'static str {
    match kind {
        FaultKind::Trap => "trap",
        FaultKind::Timeout => "timeout",
        FaultKind::Memory => "memory",
        FaultKind::InvalidAnswer => "invalid-answer",
        FaultKind::Starved => "starved",
    }
}
