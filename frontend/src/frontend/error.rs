//! Why a run stopped: one error for every front-end and backend, so a command reports a
//! simulated run, a run on real devices and a server the same way.

use std::io;

use crate::backend::ring::{RingError, TargetError};
use crate::backend::sim::PastHorizon;
use crate::core::StartError;
use crate::engine::Stop;
use crate::verify::Mismatch;

/// Why a run could not start or had to stop.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// A file or block device cannot be used.
    #[error(transparent)]
    Target(#[from] TargetError),
    /// The jobs do not fit or do not suit the device.
    #[error("{0}")]
    Layout(String),
    /// Anything else about the setup the user can fix: an address taken, a control socket
    /// that cannot be made, an export that is empty.
    #[error("{0}")]
    Setup(String),
    /// The policy refused to start.
    #[error("policy failed to start: {0}")]
    Start(#[from] StartError),
    /// The engine stopped the run: a policy fault the supervision does not recover from,
    /// policies that hold requests and cannot progress, a driver bug.
    #[error(transparent)]
    Stopped(#[from] Stop),
    /// Data read back did not match what was written.
    #[error("{path}: {mismatch}")]
    Verify {
        /// The device.
        path: String,
        /// What was wrong.
        mismatch: Mismatch,
    },
    /// io_uring, or a file the run writes besides the device, failed.
    #[error("io_uring: {action}: {source}")]
    Ring {
        /// What was being done.
        action: &'static str,
        /// The error.
        source: io::Error,
    },
    /// Virtual time ran out.
    #[error(transparent)]
    PastHorizon(#[from] PastHorizon),
}

impl From<RingError> for RunError {
    fn from(error: RingError) -> Self {
        match error {
            RingError::Io { action, source } => Self::Ring { action, source },
            oversized @ RingError::Oversized { .. } => Self::Layout(oversized.to_string()),
        }
    }
}
