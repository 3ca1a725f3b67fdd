//! A device model as the engine's backend, in virtual time: time moves only when the engine
//! waits, to the next completion, timer or paced issue. Nothing reads a clock, so a seed
//! fixes the result.

use super::{DeviceModel, DeviceRequest};
use crate::engine::{Backend, Outgoing};

/// The end of virtual time: 100 days. The device models keep picosecond clocks in u64,
/// which wrap after 213 days; a run stops here with an error rather than let them wrap.
pub const HORIZON_NS: u64 = 100 * 86_400 * 1_000_000_000;

/// A simulated run went on past [`HORIZON_NS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "the run would pass 100 days of virtual time (to {:.1} days), where the device models' clocks end",
    *.at_ns as f64 / 86_400e9
)]
pub struct PastHorizon {
    /// The time it would have moved to.
    pub at_ns: u64,
}

/// A device model on the virtual clock.
pub struct SimBackend<'m> {
    model: &'m mut dyn DeviceModel,
    now: u64,
}

impl<'m> SimBackend<'m> {
    /// `model` at time zero.
    pub fn new(model: &'m mut dyn DeviceModel) -> Self {
        Self { model, now: 0 }
    }
}

impl std::fmt::Debug for SimBackend<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimBackend")
            .field("now", &self.now)
            .finish_non_exhaustive()
    }
}

impl Backend for SimBackend<'_> {
    type Error = PastHorizon;

    fn now(&self) -> u64 {
        self.now
    }

    fn dispatch(&mut self, now: u64, _lane: u32, request: Outgoing<'_>) -> Result<(), PastHorizon> {
        self.model.submit(
            now,
            DeviceRequest {
                id: request.id,
                op: request.op,
                sector: request.sector,
                sectors: request.sectors,
            },
        );
        Ok(())
    }

    fn reap(&mut self, each: &mut dyn FnMut(u32, u64, i32)) -> Result<Option<u64>, PastHorizon> {
        let mut any = false;
        while let Some((id, status)) = self.model.poll(self.now) {
            each(0, id, status);
            any = true;
        }
        Ok(any.then_some(self.now))
    }

    fn inflight(&self) -> usize {
        usize::from(self.model.next_event().is_some())
    }

    fn next_event(&self) -> Option<u64> {
        self.model.next_event()
    }

    fn wait(&mut self, until: Option<u64>) -> Result<(), PastHorizon> {
        if let Some(t) = until {
            if t > HORIZON_NS {
                return Err(PastHorizon { at_ns: t });
            }
            self.now = self.now.max(t);
        }
        Ok(())
    }

    fn exact_deadlines(&self) -> bool {
        true
    }
}
