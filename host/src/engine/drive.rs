//! The one loop: a turn takes everything due now, then the engine waits for the next thing
//! to happen, whatever the front-end and the backend.

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

/// What feeds the engine and hears of finished bios.
pub trait Frontend<B: Backend> {
    /// What the front-end's run fails with.
    type Error: From<Stop> + From<B::Error>;

    /// `done` finished, in that order. Completion work may submit more (a flush a write
    /// waits for) through `engine`.
    ///
    /// # Errors
    /// Completion work failed (data that does not verify), or the engine's.
    fn complete(
        &mut self,
        now: u64,
        done: &[Done],
        engine: &mut Engine<B>,
    ) -> Result<(), Self::Error>;

    /// Submits, through [`Engine::submit`], what is due at `now`.
    ///
    /// # Errors
    /// The engine's.
    fn issue(&mut self, now: u64, engine: &mut Engine<B>) -> Result<(), Self::Error>;

    /// The end of a turn at `now`: pacing, observation.
    ///
    /// # Errors
    /// Observation failed (an event file that cannot be written).
    fn end_turn(&mut self, now: u64, engine: &mut Engine<B>) -> Result<(), Self::Error>;

    /// Whether the run goes on.
    fn flow(&mut self, engine: &Engine<B>) -> Flow;

    /// The front-end's next wake-up after `now`; runtime ends count only with `deadlines`.
    fn next_wake(&self, now: u64, deadlines: bool) -> Option<u64>;

    /// True iff other threads feed it (and wake the backend when they do), so an empty
    /// engine may yet get bios: a stall is declared only after [`STALL_LIMIT`].
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
        let reaped_at = self.reap::<F::Error>()?;
        let now = reaped_at.unwrap_or_else(|| self.backend.now());
        self.take_done(done);
        frontend.complete(now, done, self)?;
        if self.control.is_some() {
            self.serve::<F::Error>(now)?;
        }
        frontend.issue(now, self)?;
        self.run::<F::Error>(now)?;
        // Issuing and dispatching finish no bio (bios finish in the reap above), so this is
        // empty in practice: the front-end is called only if it is not.
        self.take_done(done);
        if !done.is_empty() {
            frontend.complete(now, done, self)?;
        }
        self.tick_live(now);
        frontend.end_turn(now, self)?;
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
            let watch = self.watch_stall::<F::Error>(now, inflight, timer)?;
            let until = [timer, watch, live].into_iter().flatten().min();
            return Ok(self.backend.wait(until)?);
        }
        if inflight || timer.is_some() {
            let until = [timer, live].into_iter().flatten().min();
            return Ok(self.backend.wait(until)?);
        }
        if self.starve::<F::Error>(now)? {
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
    fn watch_stall<E>(
        &mut self,
        now: u64,
        inflight: bool,
        timer: Option<u64>,
    ) -> Result<Option<u64>, E>
    where
        E: From<Stop> + From<B::Error>,
    {
        let stuck = !inflight && timer.is_none() && self.queued() > 0;
        self.stuck_since = match (stuck, self.stuck_since) {
            (false, _) => None,
            (true, None) => Some(Instant::now()),
            (true, Some(since)) if since.elapsed() > STALL_LIMIT => {
                if !self.starve::<E>(now)? {
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
