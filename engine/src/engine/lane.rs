//! A lane: one device's scheduler core, with its policy's call clock and its counters when
//! metering. Every driver sets its lanes up here, the same way.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use crate::core::{Config, Core, StartError, Supervision};
use crate::observe::stats::meter::Meter;
use crate::policy::{PolicyBackend, for_core};

/// How every lane of a run is set up.
#[derive(Debug, Clone, Copy)]
pub struct LaneSetup<'a> {
    /// The queue settings.
    pub config: Config,
    /// The policy's tunables, set before the first request.
    pub settings: &'a [(String, i64)],
    /// What happens when the policy fails.
    pub supervision: Supervision,
    /// Record per-request events.
    pub record_events: bool,
    /// Time every policy call and keep per-ctx counters (live stats, metrics).
    pub metering: bool,
}

/// One device: its scheduler, and where its policy calls are timed when metering.
pub struct Lane {
    /// Its scheduler.
    pub core: Core,
    /// The device's name in reports and replies.
    pub name: String,
    /// Where the policy's calls are timed, when metering.
    pub policy_clock: Option<Arc<AtomicU64>>,
    /// Per-ctx counters for live stats and metrics, recorded from the completions the
    /// core hands out, while metering.
    pub meter: Option<Meter>,
}

impl std::fmt::Debug for Lane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lane")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl Lane {
    /// A device named `name` scheduled by `policy` (with the bundled fallback injected).
    ///
    /// # Errors
    /// The policy refused to start.
    pub fn new(
        name: String,
        policy: Box<dyn PolicyBackend>,
        setup: &LaneSetup<'_>,
    ) -> Result<Self, StartError> {
        let policy_clock = setup.metering.then(|| Arc::new(AtomicU64::new(0)));
        let (policy, fallback) = for_core(policy, policy_clock.as_ref());
        let mut core = Core::new(setup.config, policy, setup.settings, fallback)?;
        core.supervise(setup.supervision);
        core.record_events(setup.record_events);
        Ok(Self {
            core,
            name,
            policy_clock,
            meter: setup.metering.then(Meter::default),
        })
    }

    /// `policy`, timed on this lane's clock when metering: what a swap installs.
    pub fn timed(&self, policy: Box<dyn PolicyBackend>) -> Box<dyn PolicyBackend> {
        match &self.policy_clock {
            Some(clock) => crate::policy::timed(policy, clock),
            None => policy,
        }
    }
}
