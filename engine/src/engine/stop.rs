//! What stops the engine, whatever the backend, and the clock its moments are on.

use crate::core::UnknownCompletion;
use crate::policy::Fault;

/// Which clock a run's times are on, for messages that name a moment of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Clock {
    /// The simulator's: time moves only when the engine waits.
    Virtual,
    /// The monotonic clock, from the run's start.
    Wall,
}

impl Clock {
    /// `at_ns` on this clock, as a message says it: "at 1.500 ms of virtual time" or
    /// "after 1.500 ms".
    pub fn moment(self, at_ns: u64) -> String {
        let ms = at_ns as f64 / 1e6;
        match self {
            Self::Virtual => format!("at {ms:.3} ms of virtual time"),
            Self::Wall => format!("after {ms:.3} ms"),
        }
    }
}

/// What stops the engine, whatever the backend.
#[derive(Debug, thiserror::Error)]
pub enum Stop {
    /// A lane's policy failed and the supervision says stop.
    #[error("{}, the policy for {device}: {fault}", clock.moment(*at_ns))]
    Fault {
        /// The run's clock.
        clock: Clock,
        /// When.
        at_ns: u64,
        /// The lane's device.
        device: String,
        /// The fault.
        fault: Fault,
    },
    /// The policies hold requests with nothing on the device and no wake-up, and no
    /// fallback could take them over.
    #[error(
        "{} the run cannot progress: the policies hold {queued} requests, none are on the device, and none asked for a wake-up",
        clock.moment(*at_ns)
    )]
    Stalled {
        /// The run's clock.
        clock: Clock,
        /// When.
        at_ns: u64,
        /// Requests the policies hold.
        queued: usize,
    },
    /// A driver bug: a completion for a request no core dispatched.
    #[error(transparent)]
    Driver(#[from] UnknownCompletion),
    /// A front-end bug: a bio that spans two stripe chunks, so no one device holds it.
    #[error(
        "bio at sector {sector} of {sectors} sectors spans two stripe chunks of {chunk_sectors} sectors"
    )]
    Straddles {
        /// Its first sector.
        sector: u64,
        /// Its length.
        sectors: u32,
        /// The stripe unit.
        chunk_sectors: u64,
    },
}

/// Why an engine step stopped: the engine's own reason, or its backend's error. Turned into
/// the front-end's error where the loop hands it back ([`Halt::into_error`]).
#[derive(Debug)]
pub enum Halt<E> {
    /// The engine stops the run.
    Stop(Stop),
    /// The backend failed.
    Backend(E),
}

impl<E> From<Stop> for Halt<E> {
    fn from(stop: Stop) -> Self {
        Self::Stop(stop)
    }
}

impl<E> Halt<E> {
    /// As the error of a front-end whose error takes both.
    pub fn into_error<F: From<Stop> + From<E>>(self) -> F {
        match self {
            Self::Stop(stop) => stop.into(),
            Self::Backend(e) => e.into(),
        }
    }
}
