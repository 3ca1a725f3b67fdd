//! Why a run stopped: one error for every front-end and backend, so a command reports a
//! simulated run, a run on real devices and a server the same way.

use std::io;

use crate::backend::ring::{RingError, TargetError};
use crate::backend::sim::PastHorizon;
use crate::core::{StartError, UnknownCompletion};
use crate::engine::{Clock, Stop};
use crate::policy::Fault;
use crate::verify::Mismatch;

/// Why a run could not start or had to stop.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// A file or block device cannot be used.
    #[error(transparent)]
    Target(#[from] TargetError),
    /// The jobs do not fit or do not suit the device (or a front-end bug placed a bio no
    /// one device holds).
    #[error("{0}")]
    Layout(String),
    /// Anything else about the setup the user can fix: an address taken, a control socket
    /// that cannot be made, an export that is empty.
    #[error("{0}")]
    Setup(String),
    /// The policy refused to start.
    #[error("policy failed to start: {0}")]
    Start(#[from] StartError),
    /// The policy failed and the supervision says stop.
    #[error("{}, the policy for {device}: {fault}", clock.moment(*at_ns))]
    Fault {
        /// The run's clock.
        clock: Clock,
        /// When, on it.
        at_ns: u64,
        /// The device whose policy failed.
        device: String,
        /// The fault.
        fault: Fault,
    },
    /// The policies keep requests without dispatching them or asking to be woken.
    #[error(
        "{} the run cannot progress: the policies hold {queued} requests, none are on the device, and none asked for a wake-up",
        clock.moment(*at_ns)
    )]
    Stalled {
        /// The run's clock.
        clock: Clock,
        /// When, on it.
        at_ns: u64,
        /// Requests the policies hold.
        queued: usize,
    },
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
    /// A driver bug: a completion for a request no core dispatched.
    #[error(transparent)]
    Driver(#[from] UnknownCompletion),
}

impl From<RingError> for RunError {
    fn from(error: RingError) -> Self {
        match error {
            RingError::Io { action, source } => Self::Ring { action, source },
            oversized @ RingError::Oversized { .. } => Self::Layout(oversized.to_string()),
        }
    }
}

impl From<Stop> for RunError {
    fn from(stop: Stop) -> Self {
        match stop {
            Stop::Fault {
                clock,
                at_ns,
                device,
                fault,
            } => Self::Fault {
                clock,
                at_ns,
                device,
                fault,
            },
            Stop::Stalled {
                clock,
                at_ns,
                queued,
            } => Self::Stalled {
                clock,
                at_ns,
                queued,
            },
            Stop::Driver(bug) => Self::Driver(bug),
            straddle @ Stop::Straddles { .. } => Self::Layout(straddle.to_string()),
        }
    }
}
