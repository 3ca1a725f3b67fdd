//! What the engine needs from a device: somewhere to send dispatched requests, a way to
//! collect the finished ones, and a way to wait for the next of them. The simulated device
//! models implement it in virtual time ([`crate::backend::sim::SimBackend`]); the io_uring ring on
//! the monotonic clock ([`crate::backend::ring::RingBackend`]).

use schedhost_sdk::{Op, PrioClass};

use crate::core::Bios;

/// A request the core dispatched, as a backend sees it.
#[derive(Debug, Clone, Copy)]
pub struct Outgoing<'a> {
    /// The core's request id, reported back by [`Backend::reap`].
    pub id: u64,
    /// Operation.
    pub op: Op,
    /// First sector.
    pub sector: u64,
    /// Length in sectors.
    pub sectors: u32,
    /// I/O priority class and level, which a real backend passes to the kernel.
    pub prio: (PrioClass, u8),
    /// Its bios in sector order, whose buffers a real backend lays out.
    pub bios: &'a Bios,
}

/// A device (or set of devices, one per lane) the engine drives.
pub trait Backend {
    /// What the backend itself can fail with.
    type Error;

    /// The time now, on the backend's clock (ns since the run started).
    fn now(&self) -> u64;

    /// Sends request `request` of lane `lane` to its device at `now`.
    ///
    /// # Errors
    /// The device refused it.
    fn dispatch(&mut self, now: u64, lane: u32, request: Outgoing<'_>) -> Result<(), Self::Error>;

    /// Hands every finished request to `each` as (lane, request id, status) and returns the
    /// time they are completed at: the clock read after collecting them, or `None` if
    /// nothing finished.
    ///
    /// # Errors
    /// The device failed.
    fn reap(&mut self, each: &mut dyn FnMut(u32, u64, i32)) -> Result<Option<u64>, Self::Error>;

    /// Requests on the device.
    fn inflight(&self) -> usize;

    /// When the device will next finish something by itself, if it can say (the simulated
    /// models can; a real device cannot).
    fn next_event(&self) -> Option<u64>;

    /// Waits until `until` (ns on the backend's clock) or until something finishes or wakes
    /// the backend, whichever is first; `None` waits for a completion or a wake-up only.
    ///
    /// # Errors
    /// The wait failed.
    fn wait(&mut self, until: Option<u64>) -> Result<(), Self::Error>;

    /// True iff time moves only by waiting, so every deadline must be a wake-up (virtual
    /// time). A real clock moves by itself: while I/O is in flight the next completion
    /// notices a deadline that passed, and an unarmed wait is the cheaper syscall.
    fn exact_deadlines(&self) -> bool;

    /// True iff the clock is virtual (time moves only by waiting): then nothing measured on
    /// the wall clock may reach the run's report, which is a function of its inputs and seed.
    fn virtual_clock(&self) -> bool {
        self.exact_deadlines()
    }
}

/// A backend that also watches file descriptors (sockets) for readiness, so a front-end's
/// network I/O wakes the same wait as the device's completions.
pub trait Readiness: Backend {
    /// Reports `token` once `fd` is ready for `events` (poll(2) flags).
    ///
    /// # Errors
    /// The watch could not be armed.
    fn watch_fd(
        &mut self,
        fd: std::os::fd::RawFd,
        events: u32,
        token: u64,
    ) -> Result<(), Self::Error>;

    /// The tokens of the watches that fired since the last call.
    fn take_ready(&mut self, into: &mut Vec<u64>);
}
