//! A policy's calls timed on the wall clock, for the metrics
//! (`schedhost_policy_call_seconds_total`). Only cores with metering on wrap their policy, so
//! the clock reads cost nothing otherwise.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use super::interface::{Answered, Around, Call};
use super::{Fault, PolicyBackend};

/// The hook: each call's time added to a counter shared with whoever reads it.
#[derive(Debug)]
pub struct Timing {
    spent_ns: Arc<AtomicU64>,
    started: Option<Instant>,
}

impl Timing {
    /// Calls add to `spent_ns`.
    pub fn new(spent_ns: Arc<AtomicU64>) -> Self {
        Self {
            spent_ns,
            started: None,
        }
    }
}

impl Around for Timing {
    fn before(&mut self, _: &mut dyn PolicyBackend, _: &Call<'_>) -> Result<(), Fault> {
        self.started = Some(Instant::now());
        Ok(())
    }

    fn after(&mut self, _: &mut dyn PolicyBackend, _: &Call<'_>, _: Answered<'_>) {
        if let Some(started) = self.started.take() {
            self.spent_ns
                .fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
        }
    }

    fn fresh(&self) -> Option<Self> {
        Some(Self::new(Arc::clone(&self.spent_ns)))
    }
}
