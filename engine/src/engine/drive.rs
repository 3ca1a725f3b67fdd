//! The one loop: a turn takes everything due now, then the engine waits for the next thing
//! to happen, whatever the front-end and the backend.

use std::os::fd::RawFd;
use std::time::Instant;

use super::*;

/// Whether a front-end's run goes on after a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// Wait for the next event.
    Wait,
    /// Something new started (a phase): take another turn at once.
    Again,
    /// The run is over.
    Done,
}

/// What a front-end may do while the engine calls it: hand over bios, which the engine
/// submits when the call returns (a front-end never calls into the engine), watch file
/// descriptors where the backend offers readiness, and read what the engine observed.
pub struct Feed<'a, B: Backend> {
    engine: &'a mut Engine<B>,
}

impl<B: Backend> std::fmt::Debug for Feed<'_, B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Feed")
            .field("handed_over", &self.engine.outbox.len())
            .finish_non_exhaustive()
    }
}

impl<B: Backend> Feed<'_, B> {
    /// `bio` goes to its device's core once the front-end's call returns, after the bios
    /// handed over before it.
    pub fn submit(&mut self, bio: Bio) {
        self.engine.outbox.push(bio);
    }

    /// Every bio of `ctx` goes to lane `lane`, in its group `group` there (see
    /// [`Engine::place`]).
    pub fn place(&mut self, ctx: u32, lane: usize, group: Option<u16>) {
        self.engine.place(ctx, lane, group);
    }

    /// Every bio its group's limits hold completes at `now` with `status`, without
    /// reaching a policy (a server refusing what has not started as it stops).
    pub fn refuse_held(&mut self, now: u64, status: i32) -> usize {
        self.engine.refuse_held(now, status)
    }

    /// The engine, to read: its clock, its counters, what it holds.
    pub fn engine(&self) -> &Engine<B> {
        self.engine
    }

    /// Every lane's view for the metrics.
    pub fn views(&mut self) -> Vec<DeviceView> {
        self.engine.views()
    }

    /// The per-request events recorded since the last call.
    pub fn take_events(&mut self) -> Vec<Event> {
        self.engine.take_events()
    }
}

impl<B: Readiness> Feed<'_, B> {
    /// Wakes the engine's wait when `fd` is ready for `events`, reported as `token`.
    ///
    /// # Errors
    /// The backend could not arm the watch.
    pub fn watch(&mut self, fd: RawFd, events: u32, token: u64) -> Result<(), B::Error> {
        self.engine.backend.watch_fd(fd, events, token)
    }

    /// The tokens of the watches that fired since the last call.
    pub fn take_ready(&mut self, into: &mut Vec<u64>) {
        self.engine.backend.take_ready(into);
    }
}

/// What feeds the engine and hears of finished bios.
pub trait Frontend<B: Backend> {
    /// What the front-end's run fails with.
    type Error: From<Stop> + From<B::Error>;

    /// `done` finished, in that order. Completion work may hand over more (a flush a write
    /// waits for) through `feed`.
    ///
    /// # Errors
    /// Completion work failed (data that does not verify).
    fn complete(
        &mut self,
        now: u64,
        done: &[Done],
        feed: &mut Feed<'_, B>,
    ) -> Result<(), Self::Error>;

    /// Hands over, through `feed`, what is due at `now`.
    ///
    /// # Errors
    /// The front-end's own (a socket it cannot watch).
    fn issue(&mut self, now: u64, feed: &mut Feed<'_, B>) -> Result<(), Self::Error>;

    /// The end of a turn at `now`: pacing, observation.
    ///
    /// # Errors
    /// Observation failed (an event file that cannot be written).
    fn end_turn(&mut self, now: u64, feed: &mut Feed<'_, B>) -> Result<(), Self::Error>;

    /// Whether the run goes on.
    fn flow(&mut self, engine: &Engine<B>) -> Flow;

    /// The front-end's next wake-up after `now`; runtime ends count only with `deadlines`.
    fn next_wake(&self, now: u64, deadlines: bool) -> Option<u64>;

    /// True iff other threads feed it (and wake the backend when they do), so an empty
    /// engine may yet get bios: a stall is declared only after `STALL_LIMIT`.
    fn fed_from_outside(&self) -> bool {
        false
    }
}

/// Runs `frontend` on `engine` until the front-end is done.
///
/// # Errors
/// Whatever stopped the run: a policy fault under `--on-fault abort`, a stall no fallback
/// could clear, the backend failing, or the front-end's own failure.
pub fn drive<B: Backend, F: Frontend<B>>(
    engine: &mut Engine<B>,
    frontend: &mut F,
) -> Result<(), F::Error> {
    let mut done = Vec::new();
    loop {
        let now = engine.turn(frontend, &mut done)?;
        match frontend.flow(engine) {
            Flow::Done => return Ok(()),
            Flow::Again => continue,
            Flow::Wait => engine.idle(frontend, now)?,
        }
    }
}

impl<B: Backend> Engine<B> {
    /// Everything due now: scheduled swaps, completions, control requests, new bios, policy
    /// dispatch. Returns the turn's time.
    fn turn<F: Frontend<B>>(
        &mut self,
        frontend: &mut F,
        done: &mut Vec<Done>,
    ) -> Result<u64, F::Error> {
        if !self.scheduled.is_empty() {
            self.swap_due(self.backend.now());
        }
        // One clock read per turn where it can be: the reap's, if it reaped anything.
        let reaped_at = self.reap().map_err(Halt::into_error::<F::Error>)?;
        let now = reaped_at.unwrap_or_else(|| self.backend.now());
        self.take_done(done);
        frontend.complete(now, done, &mut Feed { engine: self })?;
        self.submit_outbox(now)
            .map_err(Halt::into_error::<F::Error>)?;
        if self.control.is_some() {
            self.serve(now).map_err(Halt::into_error::<F::Error>)?;
        }
        frontend.issue(now, &mut Feed { engine: self })?;
        self.submit_outbox(now)
            .map_err(Halt::into_error::<F::Error>)?;
        self.run(now).map_err(Halt::into_error::<F::Error>)?;
        // Issuing and dispatching finish no bio (bios finish in the reap above), so this is
        // empty in practice: the front-end is called only if it is not.
        self.take_done(done);
        if !done.is_empty() {
            frontend.complete(now, done, &mut Feed { engine: self })?;
            self.submit_outbox(now)
                .map_err(Halt::into_error::<F::Error>)?;
        }
        self.tick_live(now);
        frontend.end_turn(now, &mut Feed { engine: self })?;
        self.submit_outbox(now)
            .map_err(Halt::into_error::<F::Error>)?;
        Ok(now)
    }

    /// Waits for the next thing to happen: a completion, a policy timer, a swap, the
    /// front-end's wake-up, as they stood at the turn at `now` (a wake-up that fell due
    /// since is a deadline already past, and the wait returns at once). With nothing in
    /// flight and nothing to wait for, the policies are starving their requests: they are
    /// ejected, or the run stops.
    fn idle<F: Frontend<B>>(&mut self, frontend: &F, now: u64) -> Result<(), F::Error> {
        let inflight = self.backend.inflight() > 0;
        let deadlines = self.backend.exact_deadlines() || !inflight;
        let timer = [
            self.backend.next_event(),
            self.next_timer(),
            self.scheduled.last().map(|s| s.at_ns),
            frontend.next_wake(now, deadlines),
        ]
        .into_iter()
        .flatten()
        .min();
        let live = self
            .live
            .as_ref()
            .map(|l| now.saturating_add(l.wait_ns(now)));
        if frontend.fed_from_outside() {
            let watch = self
                .watch_stall(now, inflight, timer)
                .map_err(Halt::into_error::<F::Error>)?;
            let until = [timer, watch, live].into_iter().flatten().min();
            return Ok(self.backend.wait(until)?);
        }
        if inflight || timer.is_some() {
            let until = [timer, live].into_iter().flatten().min();
            return Ok(self.backend.wait(until)?);
        }
        if self.starve(now).map_err(Halt::into_error::<F::Error>)? {
            return Ok(());
        }
        Err(Stop::Stalled {
            clock: self.clock(),
            at_ns: now,
            queued: self.queued(),
        }
        .into())
    }

    /// For an engine fed from outside: a policy holding requests with nothing on the device
    /// and no timer for [`STALL_LIMIT`] is ejected as starving them. Returns when to look
    /// again.
    fn watch_stall(
        &mut self,
        now: u64,
        inflight: bool,
        timer: Option<u64>,
    ) -> Result<Option<u64>, Halt<B::Error>> {
        let stuck = !inflight && timer.is_none() && self.queued() > 0;
        self.stuck_since = match (stuck, self.stuck_since) {
            (false, _) => None,
            (true, None) => Some(Instant::now()),
            (true, Some(since)) if since.elapsed() > STALL_LIMIT => {
                if !self.starve(now)? {
                    return Err(Stop::Stalled {
                        clock: self.clock(),
                        at_ns: now,
                        queued: self.queued(),
                    }
                    .into());
                }
                None
            }
            (true, since) => since,
        };
        let again = (STALL_LIMIT / 4).as_nanos() as u64;
        Ok(self.stuck_since.map(|_| now.saturating_add(again)))
    }
}
