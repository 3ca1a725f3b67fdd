//! The ring as the engine's backend: dispatched requests go to the kernel over their bios'
//! buffers in the arena, on the monotonic clock.

use std::mem::ManuallyDrop;
use std::os::fd::RawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use schedhost_sdk::{Op, PrioClass};

use super::Target;
use super::buffers::{Arena, Lease, SlotAccess};
use super::uring::{IOPRIO_CLASS_SHIFT, Io, IoKind, Notifier, Ring, Segments};
use crate::backend::sim::{Admission, FaultPlan, FaultState};
use crate::engine::{Backend, Outgoing, Readiness};

/// What the ring can fail with.
#[derive(Debug, thiserror::Error)]
pub enum RingError {
    /// io_uring itself failed.
    #[error("io_uring: {action}: {source}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// The error.
        source: std::io::Error,
    },
    /// A bio longer than the buffer it leased: a driver bug, refused rather than cut short.
    #[error("a {len}-byte bio does not fit its {room}-byte buffer; refusing to issue it short")]
    Oversized {
        /// The bio's length in bytes.
        len: usize,
        /// Its buffer's.
        room: usize,
    },
}

/// The io_uring ring over the targets (one per lane), and the buffer arena whose slots
/// the bios lease.
pub struct RingBackend {
    // Field order matters: the ring is dropped before the arena whose memory it lends to the
    // kernel, after `Drop` drained it.
    ring: Ring,
    /// Freed by `Drop` only once the ring holds no I/O.
    arena: ManuallyDrop<Arena>,
    /// Where the run's time starts.
    clock: Instant,
    /// Faults injected as the setup's plan says, by (lane, request).
    faults: Option<FaultState<(u32, u64)>>,
    /// Reaps that found something finished: with the completions' count, how many the
    /// device returns at once.
    completion_instants: u64,
}

impl std::fmt::Debug for RingBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RingBackend")
            .field("faults", &self.faults.is_some())
            .finish_non_exhaustive()
    }
}

impl Drop for RingBackend {
    fn drop(&mut self) {
        // Until the ring is drained the kernel may still write into the arena; if it cannot
        // be drained, leaking the arena is the only safe choice.
        if self.ring.drain() {
            // SAFETY: dropped exactly once, here, and never used after.
            unsafe { ManuallyDrop::drop(&mut self.arena) }
        }
    }
}

/// How the ring is set up, beyond its size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingSetup {
    /// A kernel thread polls the submission queue (idle timeout, ms).
    pub sqpoll_idle_ms: Option<u32>,
    /// Register the buffer arena with the kernel (`READ_FIXED`/`WRITE_FIXED`), as fio's
    /// `fixedbufs`: the pages are not mapped per I/O. Off, the ring issues plain reads and
    /// writes, as fio does by default.
    pub fixed_buffers: bool,
    /// Faults injected between the host and the kernel, as on a simulated device: EIO
    /// without the I/O reaching the file, busy answers, late completions, a stall, resets
    /// (a reset reports what was in flight as EIO, whether or not it reached the file, once
    /// the kernel has let go of its buffers).
    pub faults: FaultPlan,
}

impl Default for RingSetup {
    fn default() -> Self {
        Self {
            sqpoll_idle_ms: None,
            fixed_buffers: true,
            faults: FaultPlan::default(),
        }
    }
}

impl RingBackend {
    /// A ring over `targets` deep enough for `depth` requests on each, and one buffer slot
    /// per entry of `slot_lens`, filled from `seed`.
    ///
    /// # Errors
    /// The ring could not be set up.
    pub fn new(
        targets: &[Target],
        depth: u32,
        slot_lens: &[usize],
        seed: u64,
        setup: RingSetup,
    ) -> Result<Self, RingError> {
        let mut arena = Arena::new(slot_lens);
        arena.fill_random(seed);
        let fds: Vec<RawFd> = targets.iter().map(Target::raw_fd).collect();
        let depth = depth.saturating_mul(targets.len() as u32);
        let entries = depth.clamp(8, 4096).next_power_of_two();
        let mut ring =
            Ring::new(entries, &fds, setup.sqpoll_idle_ms).map_err(|source| RingError::Io {
                action: "setting up the ring",
                source,
            })?;
        let (base, len) = arena.region();
        // SAFETY: the arena outlives the ring's use of it: `Drop` drains the ring before the
        // arena can be freed, and leaks it if the ring cannot be drained.
        let fixed = setup.fixed_buffers && unsafe { ring.register_buffer(base, len) };
        tracing::debug!(fixed, entries, "io_uring ready");
        Ok(Self {
            ring,
            arena: ManuallyDrop::new(arena),
            clock: Instant::now(),
            // The kernel works in the arena's slots until its CQE: a reset's EIO waits for it.
            faults: (!setup.faults.is_empty()).then(|| FaultState::over_lent_buffers(setup.faults)),
            completion_instants: 0,
        })
    }

    /// How many reaps found something finished so far.
    pub fn completion_instants(&self) -> u64 {
        self.completion_instants
    }

    /// Starts the run's clock again (after setup).
    pub fn restart_clock(&mut self) {
        self.clock = Instant::now();
    }

    /// Where the run's time starts, for the threads that read it too.
    pub fn clock(&self) -> Instant {
        self.clock
    }

    /// Access to slot contents for whoever holds a lease (see [`SlotAccess`]).
    pub fn slots(&self) -> SlotAccess {
        self.arena.access()
    }

    /// True iff buffers are registered with the ring.
    pub fn fixed_buffers(&self) -> bool {
        self.ring.has_fixed_buffers()
    }

    /// Whether the kernel refused a real-time I/O priority (this process lacks
    /// CAP_SYS_ADMIN and CAP_SYS_NICE), so that RT requests reached it without one.
    pub fn rt_refused(&self) -> bool {
        self.ring.rt_refused()
    }

    /// Makes the ring's waits return when `notifier` is written.
    ///
    /// # Errors
    /// The ring refused the eventfd's read.
    pub fn watch(&mut self, notifier: Arc<Notifier>) -> Result<(), RingError> {
        self.ring.watch(notifier).map_err(|source| RingError::Io {
            action: "watching the eventfd",
            source,
        })
    }
}

/// A request's priority as the kernel takes it in an sqe (`IOPRIO_PRIO_VALUE(class,
/// level)`): none leaves the submitter's own, as a bio without one has.
fn ioprio_value((class, level): (PrioClass, u8)) -> u16 {
    let class = match class {
        PrioClass::None => return 0,
        PrioClass::Rt => 1,
        PrioClass::Be => 2,
        PrioClass::Idle => 3,
    };
    class << IOPRIO_CLASS_SHIFT | u16::from(level.min(7))
}

/// Socket readiness through the ring: a poll is one more request on it, so a socket and a
/// completion wake the same wait.
impl Readiness for RingBackend {
    /// One-shot: `token` is reported once `fd` is ready for `events` (`libc::POLLIN`,
    /// `libc::POLLOUT`).
    fn watch_fd(&mut self, fd: RawFd, events: u32, token: u64) -> Result<(), RingError> {
        self.ring
            .poll(fd, events, token)
            .map_err(|source| RingError::Io {
                action: "polling a socket",
                source,
            })
    }

    fn take_ready(&mut self, into: &mut Vec<u64>) {
        self.ring.take_ready(into);
    }
}

impl Backend for RingBackend {
    type Error = RingError;

    fn now(&self) -> u64 {
        self.clock.elapsed().as_nanos() as u64
    }

    /// Sends the request to the kernel over its bios' buffers, which the core hands over in
    /// sector order.
    fn dispatch(&mut self, now: u64, lane: u32, request: Outgoing<'_>) -> Result<(), RingError> {
        if let Some(faults) = &mut self.faults {
            let extent = (request.sector, request.sector + u64::from(request.sectors));
            if faults.submit(now, (lane, request.id), request.op, extent) == Admission::Busy {
                return Ok(());
            }
        }
        let kind = match request.op {
            Op::Read => IoKind::Read,
            Op::Write => IoKind::Write,
            Op::Flush => IoKind::Flush,
            Op::Discard => IoKind::Discard(u64::from(request.sectors) * 512),
        };
        let mut segments = Segments::new();
        if matches!(kind, IoKind::Read | IoKind::Write) {
            // Each bio's buffer is the start of its slot, as long as the bio.
            for (_, bio) in request.bios {
                let len = bio.sectors as usize * 512;
                let (ptr, room) = self.arena.raw(Lease::of_bio(bio.id));
                // Slots are sized to their submitter's longest bio: a bio that does not fit
                // is a driver bug, and cutting it short would report bytes never moved.
                if len > room {
                    return Err(RingError::Oversized { len, room });
                }
                segments.push((ptr, len));
            }
        }
        let io = Io {
            file: lane,
            kind,
            offset: request.sector * 512,
            segments,
            tag: (lane, request.id),
            ioprio: ioprio_value(request.prio),
        };
        // SAFETY: the segments are arena slots lent to this request's bios; nobody touches a
        // slot again until its bio finished (after the reap), and the arena outlives the
        // ring's I/O (see `Drop`).
        unsafe { self.ring.start(io) }.map_err(|source| RingError::Io {
            action: "submitting",
            source,
        })
    }

    fn reap(&mut self, each: &mut dyn FnMut(u32, u64, i32)) -> Result<Option<u64>, RingError> {
        let mut any = false;
        let Some(faults) = &mut self.faults else {
            self.ring
                .reap(&mut |(lane, id), status| {
                    any = true;
                    each(lane, id, status);
                })
                .map_err(|source| RingError::Io {
                    action: "resubmitting a short transfer",
                    source,
                })?;
            self.completion_instants += u64::from(any);
            return Ok(any.then(|| self.now()));
        };
        let now = self.clock.elapsed().as_nanos() as u64;
        self.ring
            .reap(&mut |key, status| faults.finished(now, key, status))
            .map_err(|source| RingError::Io {
                action: "resubmitting a short transfer",
                source,
            })?;
        while let Some(((lane, id), status)) = faults.pop_due(now) {
            any = true;
            each(lane, id, status);
        }
        self.completion_instants += u64::from(any);
        Ok(any.then_some(now))
    }

    fn inflight(&self) -> usize {
        self.ring.inflight() + self.faults.as_ref().map_or(0, FaultState::held)
    }

    fn next_event(&self) -> Option<u64> {
        self.faults.as_ref().and_then(FaultState::next_due)
    }

    fn wait(&mut self, until: Option<u64>) -> Result<(), RingError> {
        let timeout = until.map(|t| Duration::from_nanos(t.saturating_sub(self.now())));
        // With nothing on the ring and no eventfd to watch, only the time is left to wait for.
        if self.ring.inflight() == 0 && !self.ring.watching() {
            if let Some(timeout) = timeout {
                std::thread::sleep(timeout);
            }
            return Ok(());
        }
        self.ring.wait(timeout).map_err(|source| RingError::Io {
            action: "waiting for completions",
            source,
        })
    }

    fn exact_deadlines(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_priority_reaches_the_sqe_as_the_kernels_class_and_level_and_none_as_zero() {
        assert_eq!(ioprio_value((PrioClass::None, 4)), 0);
        assert_eq!(ioprio_value((PrioClass::Rt, 0)), 1 << 13);
        assert_eq!(ioprio_value((PrioClass::Be, 4)), 2 << 13 | 4);
        assert_eq!(ioprio_value((PrioClass::Idle, 7)), 3 << 13 | 7);
    }
}
