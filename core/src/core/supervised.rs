//! The policy as the core runs it: the instance, what it said of itself, the fault it made
//! (latched until recovery acts on it), and the supervision that decides what follows — a
//! restart, the built-in FIFO, or the end of the run — with the ejections that followed.
//! Which requests the policy holds is the core's business ([`super::recovery`] hands them
//! over); this type owns everything about the policy itself.

use schedhost_sdk::{Info, MergeRules, Setup};

use super::admission::{DepthLimits, depth_limits};
use super::{Config, CoreStats, StartError};
use crate::policy::{Fallback, Fault, PolicyBackend};

/// What happens after a policy fault (`--on-fault`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnFault {
    /// Stop the run with the fault.
    Abort,
    /// Switch to the built-in FIFO (native noop) for the rest of the run.
    Fallback,
    /// Start a new instance of the same policy, up to this many times; then fall back.
    Restart(u32),
}

/// How the core supervises its policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Supervision {
    /// What to do after a fault.
    pub on_fault: OnFault,
    /// Eject a policy that dispatches nothing for this long while it holds requests and
    /// tags are free; `None` turns the watchdog off.
    pub watchdog_ns: Option<u64>,
}

/// The watchdog's default limit: far beyond any idling a real policy does (cfq's slice_idle
/// is 8 ms, bfq's budget timeout 125 ms), short enough that a stuck run ends on its own.
pub const DEFAULT_WATCHDOG_NS: u64 = 10_000_000_000;

impl Default for Supervision {
    fn default() -> Self {
        Self {
            on_fault: OnFault::Fallback,
            watchdog_ns: Some(DEFAULT_WATCHDOG_NS),
        }
    }
}

/// What the core did about a fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Recovery {
    /// Switched to the built-in FIFO.
    Fallback,
    /// Started a new instance of the same policy.
    Restarted,
}

/// One ejection, for the reports.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Ejection {
    /// When, on the run's clock.
    pub at_ns: u64,
    /// `trap`, `timeout`, `memory`, `invalid-answer` or `starved`.
    pub kind: &'static str,
    /// The interface function that failed.
    pub call: &'static str,
    /// What happened, with the wasm backtrace where there is one.
    pub message: String,
    /// What the core did.
    pub recovery: Recovery,
    /// Requests handed to the replacement.
    pub requeued: usize,
}

/// Starts `policy` for a device of `config` with `settings`, and a predecessor's saved
/// `state` when it is a newer build of the same policy: what it says of itself, and the
/// scheduler tags it allows each kind (those calls count in `stats`). The one way every
/// instance starts: the first, restarts, the fallback and hot swaps.
///
/// # Errors
/// Its fault, or its refusal of a setting or of the state.
pub(super) fn start(
    policy: &mut dyn PolicyBackend,
    config: &Config,
    settings: &[(String, i64)],
    state: Option<&[u8]>,
    stats: &mut CoreStats,
) -> Result<(Said, DepthLimits), StartError> {
    let info = policy.info()?;
    let setup = Setup {
        hw_queues: config.hw_queues,
        queue_depth: config.queue_depth,
        nr_requests: config.nr_requests,
        rotational: config.rotational,
    };
    policy
        .init(&setup, settings)?
        .map_err(StartError::Rejected)?;
    if let Some(state) = state {
        policy
            .restore_state(state)?
            .map_err(|e| StartError::Rejected(format!("refused the old state: {e}")))?;
    }
    let merge_rules = merge_rules(policy, info.merge_veto, stats)?;
    Ok((Said { info, merge_rules }, depth_limits(policy, stats)?))
}

/// What an instance says of itself: its info when it starts, and its merge rules, which a
/// tunable may change.
pub(super) struct Said {
    pub(super) info: Info,
    pub(super) merge_rules: MergeRules,
}

/// Which merges to ask `policy` about: none without a merge `veto` (its info's
/// `merge-veto`), else as it answers.
///
/// # Errors
/// Its fault, or an answer no rules have.
pub(super) fn merge_rules(
    policy: &mut dyn PolicyBackend,
    veto: bool,
    stats: &mut CoreStats,
) -> Result<MergeRules, Fault> {
    if !veto {
        return Ok(MergeRules::ALLOW);
    }
    stats.policy_calls += 1;
    let bits = policy.merge_rules()?;
    MergeRules::from_bits(bits).ok_or_else(|| Fault {
        kind: crate::policy::FaultKind::InvalidAnswer,
        call: "merge-rules",
        message: format!(
            "merge rules {bits:#x} have bits no rule has (two bits per end, each 0, 1 or 2)"
        ),
    })
}

/// One core's policy under supervision.
pub(super) struct Supervised {
    instance: Box<dyn PolicyBackend>,
    /// What the instance said of itself when it started: reports and status read it here,
    /// so nothing outside the core calls the policy.
    info: Info,
    /// Which merges it is asked about, as it said after starting or after its last set.
    merge_rules: MergeRules,
    /// Which instance requests were shown to: bumped by every replacement, so a new policy
    /// never hears of requests it did not see.
    epoch: u32,
    /// A call failed during the current operation; the policy is not called again until
    /// recovery replaced it.
    fault: Option<Fault>,
    supervision: Supervision,
    ejections: Vec<Ejection>,
    /// Restarts used of [`OnFault::Restart`]'s allowance.
    restarts: u32,
    /// The tunables the instance runs with, for restarts.
    settings: Vec<(String, i64)>,
    /// The last time the policy dispatched something or held nothing (for the watchdog).
    last_progress_ns: u64,
    /// Wake-ups of the policy's own timer in a row after which it dispatched nothing while
    /// it held requests and tags were free: progress is bounded in calls, not only in time.
    idle_wakes: u32,
    /// The built-in FIFO to fall back to, made by whoever built the core.
    fallback: Fallback,
}

/// What follows a fault, as the supervision says.
pub(super) enum Next {
    /// Stop the run with the fault.
    Stop(Fault),
    /// Try this fresh instance (a restart), falling back if it does not start.
    Restart(Fault, Box<dyn PolicyBackend>),
    /// Switch to the built-in FIFO.
    Fallback(Fault),
}

impl Supervised {
    /// `instance`, started with `settings`, which said `said` of itself.
    pub(super) fn new(
        instance: Box<dyn PolicyBackend>,
        said: Said,
        settings: &[(String, i64)],
        fallback: Fallback,
    ) -> Self {
        Self {
            instance,
            info: said.info,
            merge_rules: said.merge_rules,
            epoch: 0,
            fault: None,
            supervision: Supervision::default(),
            ejections: Vec::new(),
            restarts: 0,
            settings: settings.to_vec(),
            last_progress_ns: 0,
            idle_wakes: 0,
            fallback,
        }
    }

    /// The instance, to call.
    pub(super) fn instance(&mut self) -> &mut dyn PolicyBackend {
        self.instance.as_mut()
    }

    /// What it said of itself.
    pub(super) fn info(&self) -> &Info {
        &self.info
    }

    /// Which merges it is asked about.
    pub(super) fn merge_rules(&self) -> MergeRules {
        self.merge_rules
    }

    /// Its merge rules after a tunable changed.
    pub(super) fn set_merge_rules(&mut self, rules: MergeRules) {
        self.merge_rules = rules;
    }

    /// Which instance this is, counting replacements.
    pub(super) fn epoch(&self) -> u32 {
        self.epoch
    }

    /// How faults are handled from now on.
    pub(super) fn supervise(&mut self, supervision: Supervision) {
        self.supervision = supervision;
    }

    /// How faults are handled.
    pub(super) fn supervision(&self) -> Supervision {
        self.supervision
    }

    /// Every ejection so far.
    pub(super) fn ejections(&self) -> &[Ejection] {
        &self.ejections
    }

    /// An ejection happened.
    pub(super) fn ejected(&mut self, ejection: Ejection) {
        self.ejections.push(ejection);
    }

    /// True until a call fails; then the policy is not called again until replaced.
    pub(super) fn alive(&self) -> bool {
        self.fault.is_none()
    }

    /// Latches `fault` (the first one of an operation wins).
    pub(super) fn latch(&mut self, fault: Fault) {
        self.fault.get_or_insert(fault);
    }

    /// The value of a call, or `fallback` with the fault latched.
    pub(super) fn guard<T>(&mut self, result: Result<T, Fault>, fallback: T) -> T {
        result.unwrap_or_else(|fault| {
            self.latch(fault);
            fallback
        })
    }

    /// The latched fault and what follows it, if there is one.
    pub(super) fn next(&mut self) -> Option<Next> {
        let fault = self.fault.take()?;
        Some(match self.supervision.on_fault {
            OnFault::Abort => Next::Stop(fault),
            OnFault::Restart(limit) if self.restarts < limit => {
                self.restarts += 1;
                match self.instance.fresh() {
                    Some(fresh) => Next::Restart(fault, fresh),
                    None => Next::Fallback(fault),
                }
            }
            OnFault::Fallback | OnFault::Restart(_) => Next::Fallback(fault),
        })
    }

    /// A new instance of the built-in FIFO.
    pub(super) fn fallback(&self) -> Box<dyn PolicyBackend> {
        (self.fallback)()
    }

    /// The tunables the instance runs with.
    pub(super) fn settings(&self) -> &[(String, i64)] {
        &self.settings
    }

    /// `name` is now `value`: a restarted instance starts with it.
    pub(super) fn tuned(&mut self, name: &str, value: i64) {
        self.settings.retain(|(n, _)| n != name);
        self.settings.push((name.to_owned(), value));
    }

    /// Switches to `instance`, which said `said` and runs with `settings`, at `now_ns`;
    /// returns the old one. The new epoch starts clean: no fault, progress now.
    pub(super) fn switch(
        &mut self,
        now_ns: u64,
        instance: Box<dyn PolicyBackend>,
        said: Said,
        settings: Option<&[(String, i64)]>,
    ) -> Box<dyn PolicyBackend> {
        self.epoch = self.epoch.wrapping_add(1);
        self.info = said.info;
        self.merge_rules = said.merge_rules;
        if let Some(settings) = settings {
            self.settings = settings.to_vec();
        }
        self.fault = None;
        self.last_progress_ns = now_ns;
        self.idle_wakes = 0;
        std::mem::replace(&mut self.instance, instance)
    }

    /// The policy dispatched something, or holds nothing, at `now_ns`.
    pub(super) fn progressed(&mut self, now_ns: u64) {
        self.last_progress_ns = now_ns;
    }

    /// The last time it dispatched something or held nothing.
    pub(super) fn last_progress_ns(&self) -> u64 {
        self.last_progress_ns
    }

    /// A wake-up it asked for ended with nothing dispatched; returns how many in a row.
    pub(super) fn idle_wake(&mut self) -> u32 {
        self.idle_wakes += 1;
        self.idle_wakes
    }

    /// The run of idle wake-ups is over.
    pub(super) fn woke_usefully(&mut self) {
        self.idle_wakes = 0;
    }
}
