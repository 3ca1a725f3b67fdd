//! Submitters on their own threads, and completion work placed by rq_affinity.
//!
//! Each clone is a thread running its submitter: it fills its write buffers (stamping
//! verified blocks), pushes bios into the ring thread's inbox and wakes it through an
//! eventfd the ring watches. The ring thread owns the cores and the ring. When a bio
//! finishes, its completion work (checking the data, recording the latency) runs:
//! - `rq_affinity=0`: on the ring thread, which then wakes the submitter;
//! - `rq_affinity=1`: on a thread of the submitter's group (those sharing its hardware
//!   queue, taken in turn), which then wakes the submitter if it is another;
//! - `rq_affinity=2`: on the submitting thread itself.
//!
//! The policy's `completed` call is the core's and always runs on the ring thread.

use std::collections::VecDeque;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use schedhost_sdk::Op;

use super::work::{Reaped, SlotUses};
use super::{Run, work};
use crate::backend::ring::{Lease, Notifier, RingBackend, SlotAccess};
use crate::core::{Bio, RqAffinity};
use crate::engine::{self, Done, Engine, Feed, Flow, Frontend};
use crate::frontend::RunError;
use crate::frontend::jobs::feed::JobsRan;
use crate::frontend::jobs::{Next, Submitter};
use crate::frontend::outcome::SubmitterSummary;
use crate::observe::stats::CtxStats;

/// Runs `submitters` phase by phase, each clone on its own thread, through `engine`.
/// Returns their report and when the run ended.
pub(super) fn run(
    run: &Run<'_>,
    engine: &mut Engine<RingBackend>,
    ring: &super::RingHandles,
    submitters: Vec<Submitter>,
    mode: RqAffinity,
    notifier: Arc<Notifier>,
) -> Result<(JobsRan, u64), RunError> {
    let shared = Hub {
        run,
        clock: ring.clock,
        inbox: Mutex::new(Vec::new()),
        notifier,
        slots: ring.slots.clone(),
        mailboxes: submitters.iter().map(|_| Mailbox::default()).collect(),
        stats: submitters.iter().map(|_| Mutex::default()).collect(),
        failure: Mutex::new(None),
        stop: AtomicBool::new(false),
        finished: AtomicUsize::new(0),
        verified: AtomicU64::new(0),
    };
    let mut waiting: Vec<Option<Submitter>> = submitters.into_iter().map(Some).collect();
    let mut done: Vec<Option<Submitter>> = waiting.iter().map(|_| None).collect();
    let mut phase = 0;
    let mut end_ns = 0;
    let mut uses = SlotUses::new(run.slots.iter().map(|r| r.len()).sum());
    loop {
        let members: Vec<usize> = (0..waiting.len())
            .filter(|&i| {
                waiting[i]
                    .as_ref()
                    .is_some_and(|s| s.placement.phase == phase)
            })
            .collect();
        if members.is_empty() {
            break;
        }
        let result = run_phase(&shared, engine, &mut waiting, &members, mode, &mut uses);
        end_ns = shared.now();
        for (i, s) in result.finished {
            done[i] = Some(s);
        }
        result.outcome?;
        phase += 1;
    }
    let stats = shared
        .stats
        .iter()
        .map(|m| {
            let mut stats = m.lock().unwrap_or_else(PoisonError::into_inner).clone();
            if let Some(logs) = &mut stats.logs {
                logs.finish();
            }
            stats
        })
        .collect();
    let ran = JobsRan {
        submitters: done
            .iter()
            .flatten()
            .map(|s| SubmitterSummary::of(s, end_ns))
            .collect(),
        stats,
        verified: shared.verified.load(Ordering::Relaxed),
    };
    Ok((ran, end_ns))
}

/// What a submitter thread is told.
enum Letter {
    /// Do the completion work of this bio (which may be another thread's).
    Work(Reaped),
    /// Your bio holding this buffer finished (an I/O of this op, with this status) and its
    /// completion work is done.
    Credit(Lease, Op, i32),
    /// The phase is over: exit.
    Stop,
}

#[derive(Default)]
struct Mailbox {
    letters: Mutex<VecDeque<Letter>>,
    ready: Condvar,
}

impl Mailbox {
    fn send(&self, letter: Letter) {
        self.letters
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push_back(letter);
        self.ready.notify_one();
    }

    /// Every letter waiting, after waiting up to `timeout` (forever if `None`) for one.
    fn receive(&self, timeout: Option<Duration>) -> VecDeque<Letter> {
        let mut letters = self.letters.lock().unwrap_or_else(PoisonError::into_inner);
        if letters.is_empty() {
            letters = match timeout {
                Some(t) => {
                    self.ready
                        .wait_timeout(letters, t)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0
                }
                None => self
                    .ready
                    .wait(letters)
                    .unwrap_or_else(PoisonError::into_inner),
            };
        }
        std::mem::take(&mut *letters)
    }
}

/// What the ring thread and the submitter threads share.
struct Hub<'a, 'r> {
    run: &'a Run<'r>,
    clock: Instant,
    /// Bios pushed by submitters, with the buffers they lease.
    inbox: Mutex<Vec<(Lease, Bio)>>,
    notifier: Arc<Notifier>,
    slots: SlotAccess,
    mailboxes: Vec<Mailbox>,
    stats: Vec<Mutex<CtxStats>>,
    failure: Mutex<Option<RunError>>,
    stop: AtomicBool,
    /// Submitters of the running phase that finished.
    finished: AtomicUsize,
    verified: AtomicU64,
}

impl Hub<'_, '_> {
    fn now(&self) -> u64 {
        self.clock.elapsed().as_nanos() as u64
    }

    /// Records the first failure and stops everyone.
    fn fail(&self, error: RunError) {
        let mut failure = self.failure.lock().unwrap_or_else(PoisonError::into_inner);
        failure.get_or_insert(error);
        self.stop.store(true, Ordering::Release);
        self.notifier.notify();
    }

    /// The completion work of `finished`, on whichever thread calls it.
    fn complete(&self, finished: &Reaped) -> Result<(), RunError> {
        let ctx = finished.done.ctx as usize;
        let lane = finished.lane as usize;
        let job = &self.run.jobs[self.run.ctx_jobs[ctx]];
        // SAFETY: the bio finished, so no I/O uses its slot, and its owner does not touch it
        // until it is credited after this work.
        let data = unsafe { self.slots.slot(finished.lease) };
        let mut stats = self.stats[ctx]
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let checked = work::complete(
            job,
            &self.run.ledger,
            &self.run.names[lane],
            finished,
            data,
            &mut stats,
            self.now(),
        )?;
        self.verified
            .fetch_add(u64::from(checked), Ordering::Relaxed);
        Ok(())
    }
}

struct PhaseResult {
    finished: Vec<(usize, Submitter)>,
    outcome: Result<(), RunError>,
}

/// Runs the submitters `members` (indices into `waiting`) to the end of their phase.
fn run_phase(
    shared: &Hub<'_, '_>,
    engine: &mut Engine<RingBackend>,
    waiting: &mut [Option<Submitter>],
    members: &[usize],
    mode: RqAffinity,
    uses: &mut SlotUses,
) -> PhaseResult {
    shared.finished.store(0, Ordering::Release);
    std::thread::scope(|scope| {
        let handles: Vec<_> = members
            .iter()
            .filter_map(|&i| {
                let submitter = waiting[i].take()?;
                let slots = shared.run.slots[i].clone();
                let spawned = std::thread::Builder::new()
                    .name("schedhost-submitter".into())
                    .spawn_scoped(scope, move || submitter_thread(shared, submitter, slots));
                match spawned {
                    Ok(handle) => Some((i, handle)),
                    // Out of threads: the run stops with the error instead of a panic.
                    Err(source) => {
                        shared.fail(RunError::Ring {
                            action: "starting a submitter thread",
                            source,
                        });
                        None
                    }
                }
            })
            .collect();
        let mut ring_side = RingSide {
            shared,
            members,
            mode,
            uses,
            turn: 0,
            bios: Vec::new(),
        };
        let outcome = engine::drive(engine, &mut ring_side);
        if outcome.is_err() {
            shared.stop.store(true, Ordering::Release);
        }
        for &i in members {
            shared.mailboxes[i].send(Letter::Stop);
        }
        let finished = handles
            .into_iter()
            .filter_map(|(i, h)| h.join().ok().map(|s| (i, s)))
            .collect();
        let failure = shared
            .failure
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        PhaseResult {
            finished,
            outcome: match failure {
                Some(error) => Err(error),
                None => outcome,
            },
        }
    })
}

/// The ring thread's side of a phase: bios in from the submitters' inbox, completions out
/// routed by `mode`, until every member finished or something failed.
struct RingSide<'s, 'a, 'r> {
    shared: &'s Hub<'a, 'r>,
    members: &'s [usize],
    mode: RqAffinity,
    uses: &'s mut SlotUses,
    /// Whose turn it is to do completion work under `rq_affinity=1`.
    turn: usize,
    bios: Vec<(Lease, Bio)>,
}

impl Frontend<RingBackend> for RingSide<'_, '_, '_> {
    type Error = RunError;

    fn complete(
        &mut self,
        _now: u64,
        done: &[Done],
        _feed: &mut Feed<'_, RingBackend>,
    ) -> Result<(), RunError> {
        let shared = self.shared;
        for done in done {
            let finished = self.uses.finished(done);
            let owner = finished.done.ctx as usize;
            match self.mode {
                RqAffinity::Device => {
                    shared.complete(&finished)?;
                    shared.mailboxes[owner].send(Letter::Credit(
                        finished.lease,
                        finished.done.op,
                        finished.done.status,
                    ));
                }
                RqAffinity::Submitter => shared.mailboxes[owner].send(Letter::Work(finished)),
                RqAffinity::Group => {
                    self.turn = (self.turn + 1) % self.members.len();
                    shared.mailboxes[self.members[self.turn]].send(Letter::Work(finished));
                }
            }
        }
        Ok(())
    }

    fn issue(&mut self, _now: u64, feed: &mut Feed<'_, RingBackend>) -> Result<(), RunError> {
        std::mem::swap(
            &mut self.bios,
            &mut *self
                .shared
                .inbox
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        for (lease, bio) in self.bios.drain(..) {
            self.uses.lend(lease, &bio);
            feed.submit(bio);
        }
        Ok(())
    }

    fn end_turn(&mut self, _now: u64, _feed: &mut Feed<'_, RingBackend>) -> Result<(), RunError> {
        Ok(())
    }

    fn flow(&mut self, _engine: &Engine<RingBackend>) -> Flow {
        let shared = self.shared;
        if shared.stop.load(Ordering::Acquire)
            || shared.finished.load(Ordering::Acquire) == self.members.len()
        {
            Flow::Done
        } else {
            Flow::Wait
        }
    }

    /// The submitters keep their own time.
    fn next_wake(&self, _now: u64, _deadlines: bool) -> Option<u64> {
        None
    }

    fn fed_from_outside(&self) -> bool {
        true
    }
}

/// A submitter's thread: issue, wait for letters, do completion work it is handed, until
/// its phase ends. Returns the submitter for the report.
fn submitter_thread(shared: &Hub<'_, '_>, mut s: Submitter, slots: Range<u32>) -> Submitter {
    let me = s.ctx as usize;
    let mut free: Vec<Lease> = slots.rev().map(Lease::new).collect();
    s.start(shared.now());
    {
        let mut stats = shared.stats[me]
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        stats.measure_from_ns = s.measured_from_ns();
        stats.logs = s.log_spec().map(|spec| {
            Box::new(crate::observe::stats::logs::JobLogs::new(
                spec.clone(),
                stats.measure_from_ns,
            ))
        });
    }
    let mut counted = false;
    loop {
        if shared.stop.load(Ordering::Acquire) {
            return s;
        }
        let now = shared.now();
        if !s.is_finished() && issue(shared, &mut s, &mut free, now) {
            shared.notifier.notify();
        }
        s.finish_if_idle(now);
        if s.is_finished() && !counted {
            counted = true;
            shared.finished.fetch_add(1, Ordering::AcqRel);
            shared.notifier.notify();
        }
        let timeout = if s.is_finished() {
            None
        } else {
            let next = [s.wake_at(now), s.deadline().filter(|&d| d > now)]
                .into_iter()
                .flatten()
                .min();
            next.map(|t| Duration::from_nanos(t.saturating_sub(now)))
        };
        for letter in shared.mailboxes[me].receive(timeout) {
            match letter {
                Letter::Stop => return s,
                Letter::Credit(lease, op, status) => {
                    s.on_complete(shared.now(), op, status);
                    free.push(lease);
                }
                Letter::Work(finished) => {
                    if let Err(error) = shared.complete(&finished) {
                        shared.fail(error);
                        return s;
                    }
                    let owner = finished.done.ctx as usize;
                    if owner == me {
                        s.on_complete(shared.now(), finished.done.op, finished.done.status);
                        free.push(finished.lease);
                    } else {
                        shared.mailboxes[owner].send(Letter::Credit(
                            finished.lease,
                            finished.done.op,
                            finished.done.status,
                        ));
                    }
                }
            }
        }
    }
}

/// Pushes every bio `s` wants to issue now; true iff it pushed any.
fn issue(shared: &Hub<'_, '_>, s: &mut Submitter, free: &mut Vec<Lease>, now: u64) -> bool {
    let job = &shared.run.jobs[s.placement.job];
    let mut pushed = Vec::new();
    // A submitter with no free buffer has iodepth bios in flight: nothing to issue.
    while let Some(&lease) = free.last() {
        let Next::Issue(bio) = s.next(now, lease.bio_id()) else {
            break;
        };
        free.pop();
        if bio.op == Op::Write && job.verify {
            // SAFETY: the lease came off this submitter's free list: no I/O and no other
            // thread uses it until the bio is pushed below.
            let buf = unsafe { shared.slots.slot_mut(lease) };
            work::prepare_write(&shared.run.ledger, buf, bio.sector * 512);
        }
        pushed.push((lease, bio));
    }
    if pushed.is_empty() {
        return false;
    }
    shared
        .inbox
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .extend(pushed);
    true
}
