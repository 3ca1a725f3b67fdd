//! A device model as the engine's backend, in virtual time: time moves only when the engine
//! waits, to the next completion, timer or paced issue. Nothing reads a clock, so a seed
//! fixes the result.

use std::convert::Infallible;

use super::{DeviceModel, DeviceRequest};
use crate::engine::{Backend, Dispatch};

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
    type Error = Infallible;

    fn now(&self) -> u64 {
        self.now
    }

    fn dispatch(&mut self, now: u64, _lane: u32, request: Dispatch<'_>) -> Result<(), Infallible> {
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

    fn reap(&mut self, each: &mut dyn FnMut(u32, u64, i32)) -> Result<Option<u64>, Infallible> {
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

    fn wait(&mut self, until: Option<u64>) -> Result<(), Infallible> {
        if let Some(t) = until {
            self.now = self.now.max(t);
        }
        Ok(())
    }

    fn exact_deadlines(&self) -> bool {
        true
    }
}
