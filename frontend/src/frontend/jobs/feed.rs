//! Fio jobs and replayed traces as the engine's front-end: every submitter is a state
//! machine on the engine's thread, as one fio job thread runs its own I/O, so a bio costs
//! no hand-off. Phases (`stonewall`) run one after another.
//!
//! A turn visits only the submitters something happened to: a completion, their pacing
//! time or runtime reached, their phase started. Each one's state changes only so, and
//! they are visited in ctx order, so a turn issues what visiting every submitter would,
//! in the same order, at a cost that does not grow with the clones that wait.

use std::collections::BTreeSet;

use super::{Next, Submitter};
use crate::core::Bio;
use crate::engine::{Backend, Done, Engine, Feed, Flow, Frontend, Stop};
use crate::frontend::outcome::SubmitterSummary;
use crate::observe::stats::CtxStats;
use crate::observe::stats::logs::JobLogs;

/// Where a job front-end's bios get their ids (and buffers), and what finishing one costs.
/// In virtual time a bio is a number; on a real device it leases a buffer, and its
/// completion may check the data it read.
pub trait BioWork {
    /// What completion work can fail with.
    type Error;

    /// The id for submitter `ctx`'s next bio, if it may issue one now (real runs: a free
    /// buffer). Asking again without [`BioWork::issued`] gives the same id.
    fn next_id(&mut self, ctx: usize) -> Option<u64>;

    /// `bio`, numbered by [`BioWork::next_id`], is about to be submitted.
    fn issued(&mut self, bio: &Bio);

    /// The completion work of `done` at `now`, recorded into `stats`; the bio's id may be
    /// handed out again after. Returns whether data was checked.
    ///
    /// # Errors
    /// The data did not verify.
    fn complete(
        &mut self,
        done: &Done,
        stats: &mut CtxStats,
        now: u64,
    ) -> Result<bool, Self::Error>;
}

/// Submitters run on the engine's thread.
pub struct Jobs<'p, W> {
    submitters: Vec<Submitter>,
    stats: Vec<CtxStats>,
    phase: u32,
    work: W,
    verified: u64,
    progress: Option<&'p mut dyn FnMut(u64)>,
    turns: u64,
    /// Who the next turn visits: those that completed bios or whose phase started.
    due: BTreeSet<usize>,
    /// Who this turn visited: they may have run out of work.
    visited: BTreeSet<usize>,
    /// When each waiting submitter's pacing lets it issue next, and who: (time, ctx).
    wakes: BTreeSet<(u64, usize)>,
    /// Each submitter's entry in `wakes`, if it has one.
    wake_of: Vec<Option<u64>>,
    /// The runtime ends of the running phase's unfinished submitters: (time, ctx).
    deadlines: BTreeSet<(u64, usize)>,
    /// Submitters of the running phase not finished.
    unfinished: usize,
}

/// What a job front-end hands back to its run's report.
#[derive(Debug)]
pub struct JobsRan {
    /// Per submitter, its latencies and counts.
    pub stats: Vec<CtxStats>,
    /// Per submitter, its life.
    pub submitters: Vec<SubmitterSummary>,
    /// Blocks whose data was checked.
    pub verified: u64,
}

impl<W> std::fmt::Debug for Jobs<'_, W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Jobs")
            .field("phase", &self.phase)
            .field("submitters", &self.submitters.len())
            .finish_non_exhaustive()
    }
}

impl<'p, W: BioWork> Jobs<'p, W> {
    /// `submitters` (in ctx order) with `work` for their bios; `progress` hears the time
    /// now and then.
    pub fn new(
        submitters: Vec<Submitter>,
        work: W,
        progress: Option<&'p mut dyn FnMut(u64)>,
    ) -> Self {
        Self {
            stats: vec![CtxStats::default(); submitters.len()],
            wake_of: vec![None; submitters.len()],
            submitters,
            phase: 0,
            work,
            verified: 0,
            progress,
            turns: 0,
            due: BTreeSet::new(),
            visited: BTreeSet::new(),
            wakes: BTreeSet::new(),
            deadlines: BTreeSet::new(),
            unfinished: 0,
        }
    }

    /// Starts the first phase at `now`.
    pub fn start(&mut self, now: u64) {
        self.start_phase(0, now);
    }

    /// The report's part, at `end_ns`.
    pub fn finish(mut self, end_ns: u64) -> (JobsRan, W) {
        for logs in self.stats.iter_mut().filter_map(|s| s.logs.as_mut()) {
            logs.finish();
        }
        let ran = JobsRan {
            submitters: self
                .submitters
                .iter()
                .map(|s| SubmitterSummary::of(s, end_ns))
                .collect(),
            stats: self.stats,
            verified: self.verified,
        };
        (ran, self.work)
    }

    /// Starts the submitters of `phase` at `now`; false iff there are none.
    fn start_phase(&mut self, phase: u32, now: u64) -> bool {
        self.phase = phase;
        let mut any = false;
        for (i, s) in self
            .submitters
            .iter_mut()
            .enumerate()
            .filter(|(_, s)| s.placement.phase == phase)
        {
            s.start(now);
            let stats = &mut self.stats[s.ctx as usize];
            stats.measure_from_ns = s.measured_from_ns();
            stats.logs = s
                .log_spec()
                .map(|spec| Box::new(JobLogs::new(spec.clone(), stats.measure_from_ns)));
            if let Some(end) = s.deadline() {
                self.deadlines.insert((end, i));
            }
            self.due.insert(i);
            self.unfinished += 1;
            any = true;
        }
        any
    }

    /// Submitter `i` has a new pacing time (or none), read after its visit.
    fn set_wake(&mut self, i: usize, wake: Option<u64>) {
        if let Some(old) = std::mem::replace(&mut self.wake_of[i], wake) {
            self.wakes.remove(&(old, i));
        }
        if let Some(at) = wake {
            self.wakes.insert((at, i));
        }
    }

    /// Submitter `i` finished: it waits for nothing more.
    fn finished(&mut self, i: usize) {
        self.set_wake(i, None);
        if let Some(end) = self.submitters[i].deadline() {
            self.deadlines.remove(&(end, i));
        }
        self.unfinished -= 1;
    }

    /// Finishes submitter `i` of the running phase if its work is over and nothing of it
    /// is in flight.
    fn finish_if_idle(&mut self, i: usize, now: u64) {
        let s = &mut self.submitters[i];
        if s.placement.phase == self.phase && !s.is_finished() {
            s.finish_if_idle(now);
            if s.is_finished() {
                self.finished(i);
            }
        }
    }

    /// Moves the submitters whose pacing time or runtime end has come to `due`.
    fn wake_due(&mut self, now: u64) {
        while let Some(&(at, i)) = self.wakes.first()
            && at <= now
        {
            self.wakes.pop_first();
            self.wake_of[i] = None;
            self.due.insert(i);
        }
        while let Some(&(end, i)) = self.deadlines.first()
            && end <= now
        {
            self.deadlines.pop_first();
            self.due.insert(i);
        }
    }

    /// What visiting every submitter would find: the same phase end and next wake-up
    /// (debug builds check every turn against it).
    fn check_visits(&self, now: u64) {
        if cfg!(debug_assertions) {
            let running = || {
                self.submitters
                    .iter()
                    .filter(|s| s.placement.phase == self.phase && !s.is_finished())
            };
            debug_assert_eq!(running().count(), self.unfinished, "unfinished submitters");
            let woken = running().filter_map(|s| s.wake_at(now)).min();
            debug_assert_eq!(woken, self.pacing_wake(now), "the next pacing wake-up");
        }
    }

    /// The earliest pacing time after `now`: the kept ones, and those of submitters that
    /// completed bios since they were visited.
    fn pacing_wake(&self, now: u64) -> Option<u64> {
        let kept = self.wakes.first().map(|&(at, _)| at).filter(|&at| at > now);
        let fresh = self
            .due
            .iter()
            .filter(|&&i| !self.submitters[i].is_finished())
            .filter_map(|&i| self.submitters[i].wake_at(now));
        kept.into_iter().chain(fresh).min()
    }
}

impl<B, W> Frontend<B> for Jobs<'_, W>
where
    B: Backend,
    W: BioWork,
    W::Error: From<Stop> + From<B::Error>,
{
    type Error = W::Error;

    fn complete(
        &mut self,
        now: u64,
        done: &[Done],
        _feed: &mut Feed<'_, B>,
    ) -> Result<(), W::Error> {
        for finished in done {
            let ctx = finished.bio.ctx as usize;
            let checked = self.work.complete(finished, &mut self.stats[ctx], now)?;
            self.verified += u64::from(checked);
            let bio = &finished.bio;
            let s = &mut self.submitters[ctx];
            let was_finished = s.is_finished();
            s.on_complete(now, bio.op, bio.status);
            if s.is_finished() && !was_finished {
                self.finished(ctx);
            }
            // Its pacing time is read again at its visit.
            self.set_wake(ctx, None);
            self.due.insert(ctx);
        }
        Ok(())
    }

    fn issue(&mut self, now: u64, feed: &mut Feed<'_, B>) -> Result<(), W::Error> {
        self.wake_due(now);
        let visit = std::mem::take(&mut self.due);
        for &i in &visit {
            let s = &self.submitters[i];
            if s.placement.phase != self.phase || s.is_finished() {
                continue;
            }
            while let Some(id) = self.work.next_id(i) {
                let Next::Issue(bio) = self.submitters[i].next(now, id) else {
                    break;
                };
                self.work.issued(&bio);
                feed.submit(bio);
            }
            let wake = self.submitters[i].wake_at(now);
            self.set_wake(i, wake);
        }
        self.visited = visit;
        Ok(())
    }

    fn end_turn(&mut self, now: u64, _feed: &mut Feed<'_, B>) -> Result<(), W::Error> {
        // Only a visit or a completion changes what finishes a submitter here (completions
        // after the visits are rare: dispatching finishes no bio).
        let completed_since: Vec<usize> = self.due.iter().copied().collect();
        while let Some(i) = self.visited.pop_first() {
            self.finish_if_idle(i, now);
        }
        for i in completed_since {
            self.finish_if_idle(i, now);
        }
        self.check_visits(now);
        self.turns += 1;
        if self.turns.is_multiple_of(4096)
            && let Some(progress) = &mut self.progress
        {
            progress(now);
        }
        Ok(())
    }

    fn flow(&mut self, engine: &Engine<B>) -> Flow {
        if self.unfinished > 0 {
            return Flow::Wait;
        }
        if self.start_phase(self.phase + 1, engine.now()) {
            Flow::Again
        } else {
            Flow::Done
        }
    }

    /// A paced issue, or (with `deadlines`) the end of a runtime.
    fn next_wake(&self, now: u64, deadlines: bool) -> Option<u64> {
        let end = self
            .deadlines
            .iter()
            .map(|&(end, _)| end)
            .find(|&end| deadlines && end > now);
        self.pacing_wake(now).into_iter().chain(end).min()
    }
}
