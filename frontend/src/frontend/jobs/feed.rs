//! Fio jobs and replayed traces as the engine's front-end: every submitter is a state
//! machine on the engine's thread, as one fio job thread runs its own I/O, so a bio costs
//! no hand-off. Phases (`stonewall`) run one after another.

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
            submitters,
            phase: 0,
            work,
            verified: 0,
            progress,
            turns: 0,
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

    /// The submitters of the running phase.
    fn running(&mut self) -> impl Iterator<Item = &mut Submitter> {
        let phase = self.phase;
        self.submitters
            .iter_mut()
            .filter(move |s| s.placement.phase == phase)
    }

    /// Starts the submitters of `phase` at `now`; false iff there are none.
    fn start_phase(&mut self, phase: u32, now: u64) -> bool {
        self.phase = phase;
        let mut any = false;
        for s in self
            .submitters
            .iter_mut()
            .filter(|s| s.placement.phase == phase)
        {
            s.start(now);
            let stats = &mut self.stats[s.ctx as usize];
            stats.measure_from_ns = s.measured_from_ns();
            stats.logs = s
                .log_spec()
                .map(|spec| Box::new(JobLogs::new(spec.clone(), stats.measure_from_ns)));
            any = true;
        }
        any
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
            self.submitters[ctx].on_complete(now, bio.op, bio.status);
        }
        Ok(())
    }

    fn issue(&mut self, now: u64, feed: &mut Feed<'_, B>) -> Result<(), W::Error> {
        for i in 0..self.submitters.len() {
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
        }
        Ok(())
    }

    fn end_turn(&mut self, now: u64, _feed: &mut Feed<'_, B>) -> Result<(), W::Error> {
        self.running().for_each(|s| s.finish_if_idle(now));
        self.turns += 1;
        if self.turns.is_multiple_of(4096)
            && let Some(progress) = &mut self.progress
        {
            progress(now);
        }
        Ok(())
    }

    fn flow(&mut self, engine: &Engine<B>) -> Flow {
        let phase_over = self
            .submitters
            .iter()
            .filter(|s| s.placement.phase == self.phase)
            .all(Submitter::is_finished);
        if !phase_over {
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
        self.submitters
            .iter()
            .filter(|s| s.placement.phase == self.phase && !s.is_finished())
            .flat_map(|s| {
                let end = s.deadline().filter(|&d| deadlines && d > now);
                [s.wake_at(now), end]
            })
            .flatten()
            .min()
    }
}
