//! A policy wrapped so that every answer is checked against what it was told: the ids it
//! holds, the ones merges absorbed, the ones it already sent, the budget. It also times
//! each call and watches the instance's memory. What it sees goes into a [`Record`] shared
//! by every instance of one run (a swap brings a new one).

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use schedhost_sdk::{Completion, Dispatch, MergeEvent, PrioClass, Request, RequestId};

use crate::policy::{Answered, Around, Call, Fault, PolicyBackend, Wrapped};

/// At most this many violations are kept per run: the first ones say what is wrong.
const KEPT_VIOLATIONS: usize = 16;

/// Absorbed ids remembered, so a late dispatch of one is named as such; older ones are
/// forgotten (and named `unknown-id`), so a long check holds bounded memory.
const KEPT_ABSORBED: usize = 65_536;

/// A broken rule of the policy contract.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Violation {
    /// A short name of the rule (`unknown-id`, `over-budget`, …).
    pub rule: &'static str,
    /// What happened, with the ids and times.
    pub detail: String,
}

/// How often a run reached each clause of the contract: what the check exercised, so a
/// pass means something. Counted from outside, as the policy was told and answered.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Coverage {
    /// Dispatch answers given while the policy held more requests than the budget: it
    /// had to choose.
    pub choices: u64,
    /// Queued requests that grew at the back.
    pub back_merges: u64,
    /// Queued requests that grew at the front.
    pub front_merges: u64,
    /// Queued requests absorbed by a neighbour (coalescing).
    pub coalesced: u64,
    /// Requests dispatched after waiting longer than [`LONG_WAIT_NS`], past any FIFO expiry.
    pub long_waits: u64,
    /// Answers that asked for a wake-up.
    pub wake_ups: u64,
    /// Requests an instance held when a swap took them from it.
    pub handed_over: u64,
    /// Requests that completed with an error (the device's fault plan).
    pub error_completions: u64,
    /// Requests a busy device sent back to the policy (`requeue`).
    pub requeues: u64,
    /// Calls that came before the wake-up the policy had asked for (an arrival or a
    /// completion overtook it).
    pub wake_ups_overtaken: u64,
    /// Tunables set mid-run (each to the value it held, so its `retuned` runs while it holds
    /// requests), at the first dispatching call `SET_EVERY_NS` after the last.
    pub tunables_set: u64,
}

/// Virtual time between two mid-run sets of a tunable. Counted in time, not in calls, so a
/// policy that is called less (one that idles, or holds back a class) is set as often.
pub const SET_EVERY_NS: u64 = 5_000_000;

/// One clause of the contract a check counts: its name in violations and JSON, its line on
/// the card, the least a check must reach it per round and second of virtual time (0: no
/// minimum, as a policy that never idles never asks for a wake-up), and its counter.
#[derive(Debug, Clone, Copy)]
pub struct Clause {
    /// Short name, in a `coverage` violation.
    pub name: &'static str,
    /// What the card calls it.
    pub label: &'static str,
    /// The minimum per round-second.
    pub per_round_second: u64,
    /// Its counter.
    pub count: fn(&mut Coverage) -> &mut u64,
}

/// Every clause, in the card's order. The default check (4 rounds of 1 s) must reach each
/// with a minimum several hundred times, so a policy that breaks only after a few dozen
/// calls of one kind is caught.
pub const CLAUSES: [Clause; 11] = [
    Clause {
        name: "choices",
        label: "choices (more held than the budget)",
        per_round_second: 250,
        count: |c| &mut c.choices,
    },
    Clause {
        name: "back-merges",
        label: "back merges into queued requests",
        per_round_second: 50,
        count: |c| &mut c.back_merges,
    },
    Clause {
        name: "front-merges",
        label: "front merges into queued requests",
        per_round_second: 25,
        count: |c| &mut c.front_merges,
    },
    Clause {
        name: "coalesced",
        label: "queued requests coalesced away",
        per_round_second: 25,
        count: |c| &mut c.coalesced,
    },
    Clause {
        name: "long-waits",
        label: "dispatches after waiting over 500 ms",
        per_round_second: 50,
        count: |c| &mut c.long_waits,
    },
    Clause {
        name: "handed-over",
        label: "requests handed over by swaps",
        per_round_second: 25,
        count: |c| &mut c.handed_over,
    },
    Clause {
        name: "error-completions",
        label: "completions with an error",
        per_round_second: 50,
        count: |c| &mut c.error_completions,
    },
    Clause {
        name: "requeues",
        label: "requests sent back busy (requeue)",
        per_round_second: 25,
        count: |c| &mut c.requeues,
    },
    Clause {
        name: "wake-ups",
        label: "wake-ups asked for",
        per_round_second: 0,
        count: |c| &mut c.wake_ups,
    },
    Clause {
        name: "wake-ups-overtaken",
        label: "wake-ups overtaken by other calls",
        per_round_second: 0,
        count: |c| &mut c.wake_ups_overtaken,
    },
    Clause {
        name: "tunables-set",
        label: "tunables set mid-run (to their value)",
        per_round_second: 25,
        count: |c| &mut c.tunables_set,
    },
];

impl Coverage {
    /// Adds `other`'s counts.
    pub fn add(&mut self, other: &Self) {
        let mut other = *other;
        for clause in CLAUSES {
            *(clause.count)(self) += *(clause.count)(&mut other);
        }
    }

    /// Clause `clause`'s count.
    pub fn of(mut self, clause: &Clause) -> u64 {
        *(clause.count)(&mut self)
    }
}

/// A wait past deadline's `read_expire` (500 ms): a request that old tests what a policy
/// does about starvation.
pub const LONG_WAIT_NS: u64 = 500_000_000;

/// What one run's policy instances did, seen from outside.
#[derive(Debug, Default)]
pub struct Record {
    /// The clauses reached.
    pub coverage: Coverage,
    /// Broken rules, the first [`KEPT_VIOLATIONS`].
    pub violations: Vec<Violation>,
    /// Broken rules in all.
    pub violation_count: u64,
    /// Dispatched ids in order, as an FNV-1a hash (same seed, same hash).
    pub order_hash: u64,
    /// Requests dispatched.
    pub dispatched: u64,
    /// Requests handed to the policy (including those handed over by swaps).
    pub inserted: u64,
    /// Longest submission-to-dispatch wait, by effective class and direction.
    pub longest_wait_ns: BTreeMap<(PrioClass, &'static str), u64>,
    /// Wall-clock time inside policy calls.
    pub call_ns: u64,
    /// Policy calls.
    pub calls: u64,
    /// The most linear memory an instance held.
    pub memory_bytes: Option<u64>,
    /// Ids on the device: sent and not yet finished.
    sent: HashSet<RequestId>,
    /// Ids a merge absorbed, the latest [`KEPT_ABSORBED`], oldest first.
    absorbed: HashSet<RequestId>,
    absorbed_order: VecDeque<RequestId>,
}

impl Record {
    fn violate(&mut self, rule: &'static str, detail: String) {
        self.violation_count += 1;
        if self.violations.len() < KEPT_VIOLATIONS {
            self.violations.push(Violation { rule, detail });
        }
    }

    fn absorb(&mut self, id: RequestId) {
        if self.absorbed.insert(id) {
            self.absorbed_order.push_back(id);
        }
        if self.absorbed_order.len() > KEPT_ABSORBED
            && let Some(old) = self.absorbed_order.pop_front()
        {
            self.absorbed.remove(&old);
        }
    }

    fn hash(&mut self, id: RequestId) {
        const PRIME: u64 = 0x100_0000_01b3;
        for byte in id.0.to_le_bytes() {
            self.order_hash = (self.order_hash ^ u64::from(byte)).wrapping_mul(PRIME);
        }
    }
}

/// A new, shared record.
pub fn record() -> Arc<Mutex<Record>> {
    Arc::new(Mutex::new(Record {
        order_hash: 0xcbf2_9ce4_8422_2325,
        ..Record::default()
    }))
}

/// One instance under watch: the policy wrapped in its [`Recorder`].
pub type WatchedPolicy = Wrapped<Recorder>;

/// Watches one instance: what it was told, what it holds, and every answer it gives.
pub struct Recorder {
    record: Arc<Mutex<Record>>,
    /// What this instance holds: id → (arrival, class, direction).
    queued: HashMap<RequestId, (u64, PrioClass, &'static str)>,
    /// The wake-up it asked for last, until it comes or is overtaken.
    wake_at: Option<u64>,
    /// When the next mid-run set is due.
    next_set_ns: u64,
    /// Mid-run sets made, which picks the tunable of the next.
    sets: u64,
    /// Its tunables' names, once asked.
    tunable_names: Option<Vec<String>>,
    /// When the call under way started.
    started: Option<Instant>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("queued", &self.queued.len())
            .finish_non_exhaustive()
    }
}

/// `inner`, its calls checked into `record`.
pub fn recorded(inner: Box<dyn PolicyBackend>, record: &Arc<Mutex<Record>>) -> WatchedPolicy {
    Wrapped::new(inner, Recorder::new(record))
}

impl Recorder {
    /// A recorder writing into `record`.
    pub fn new(record: &Arc<Mutex<Record>>) -> Self {
        Self {
            record: Arc::clone(record),
            queued: HashMap::new(),
            wake_at: None,
            next_set_ns: 0,
            sets: 0,
            tunable_names: None,
            started: None,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Record> {
        self.record.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A call of `inner` that took `spent_ns`: counted, and its memory noted.
    fn note_call(&mut self, inner: &mut dyn PolicyBackend, spent_ns: u64) {
        let memory = inner.memory_bytes();
        let mut record = self.lock();
        record.call_ns += spent_ns;
        record.calls += 1;
        if let Some(bytes) = memory {
            record.memory_bytes = Some(record.memory_bytes.unwrap_or(0).max(bytes));
        }
    }

    /// A call the recorder itself makes of `inner` (the mid-run sets), counted as the
    /// policy's.
    fn call<T>(
        &mut self,
        inner: &mut dyn PolicyBackend,
        f: impl FnOnce(&mut dyn PolicyBackend) -> T,
    ) -> T {
        let started = Instant::now();
        let answer = f(inner);
        self.note_call(inner, started.elapsed().as_nanos() as u64);
        answer
    }

    fn told_requests(&mut self, requests: &[Request]) {
        for r in requests {
            let direction = if r.op.is_write() { "write" } else { "read" };
            self.queued
                .insert(r.id, (r.arrival_ns, r.prio_class.effective(), direction));
        }
        self.lock().inserted += requests.len() as u64;
    }

    fn told_merges(&mut self, events: &[MergeEvent]) {
        let absorbed: Vec<RequestId> = events.iter().filter_map(|e| e.absorbed).collect();
        for id in &absorbed {
            self.queued.remove(id);
        }
        let mut record = self.lock();
        for e in events {
            let clause = match (e.absorbed, e.kind) {
                (Some(_), _) => &mut record.coverage.coalesced,
                (None, schedhost_sdk::MergeKind::Back) => &mut record.coverage.back_merges,
                (None, schedhost_sdk::MergeKind::Front) => &mut record.coverage.front_merges,
            };
            *clause += 1;
        }
        for id in absorbed {
            record.absorb(id);
        }
    }

    fn told_completions(&mut self, done: &[Completion]) {
        if done.is_empty() {
            return;
        }
        let mut record = self.lock();
        for c in done {
            record.sent.remove(&c.id);
        }
    }

    /// Before a call that may dispatch at `now_ns`: a wake-up still ahead was overtaken; and
    /// once [`SET_EVERY_NS`] have passed since the last, one tunable is set to the value it
    /// holds.
    ///
    /// # Errors
    /// The policy's fault in `tunables`, `get` or `set`.
    fn before_dispatching(
        &mut self,
        inner: &mut dyn PolicyBackend,
        now_ns: u64,
    ) -> Result<(), Fault> {
        if let Some(wake) = self.wake_at.take()
            && now_ns < wake
        {
            self.lock().coverage.wake_ups_overtaken += 1;
        }
        if now_ns < self.next_set_ns {
            return Ok(());
        }
        self.next_set_ns = now_ns.saturating_add(SET_EVERY_NS);
        self.sets += 1;
        if self.tunable_names.is_none() {
            let names = self
                .call(inner, |p| p.tunables())?
                .into_iter()
                .map(|t| t.name);
            self.tunable_names = Some(names.collect());
        }
        let names = self.tunable_names.as_deref().unwrap_or_default();
        let Some(name) = names.get(self.sets as usize % names.len().max(1)).cloned() else {
            return Ok(());
        };
        let Some(value) = self.call(inner, |p| p.get(&name))? else {
            return Ok(());
        };
        let answer = self.call(inner, |p| p.set(&name, value))?;
        let mut record = self.lock();
        record.coverage.tunables_set += 1;
        if let Err(why) = answer {
            record.violate(
                "tunables",
                format!(
                    "at {now_ns} ns, mid-run, set {name}={value} (its own value) was refused: {why}"
                ),
            );
        }
        Ok(())
    }

    /// After a dispatch answer: the wake-up it asks for, if any.
    fn asked(&mut self, answer: &Dispatch) {
        if let Some(wake) = answer.wake_at_ns {
            self.wake_at = Some(wake);
        }
    }

    /// Checks a dispatch answer against what the policy holds and the budget.
    fn check_answer(&mut self, now_ns: u64, budget: u32, answer: &Dispatch) {
        let choosing = self.queued.len() > budget as usize;
        let mut taken = Vec::with_capacity(answer.ids.len());
        for &id in &answer.ids {
            taken.push((id, self.queued.remove(&id)));
        }
        let mut record = self.lock();
        record.coverage.choices += u64::from(choosing);
        record.coverage.wake_ups += u64::from(answer.wake_at_ns.is_some());
        if answer.ids.len() > budget as usize {
            record.violate(
                "over-budget",
                format!(
                    "at {now_ns} ns dispatch answered {} ids for a budget of {budget}",
                    answer.ids.len()
                ),
            );
        }
        for (id, held) in taken {
            match held {
                Some((arrival, class, direction)) => {
                    record.sent.insert(id);
                    record.dispatched += 1;
                    record.hash(id);
                    let wait = now_ns.saturating_sub(arrival);
                    record.coverage.long_waits += u64::from(wait > LONG_WAIT_NS);
                    let longest = record
                        .longest_wait_ns
                        .entry((class, direction))
                        .or_default();
                    *longest = (*longest).max(wait);
                }
                None if record.absorbed.contains(&id) => record.violate(
                    "absorbed-id",
                    format!("at {now_ns} ns dispatched request {id}, which a merge had absorbed"),
                ),
                None if record.sent.contains(&id) => record.violate(
                    "dispatched-twice",
                    format!("at {now_ns} ns dispatched request {id} again"),
                ),
                None => record.violate(
                    "unknown-id",
                    format!(
                        "at {now_ns} ns dispatched id {id}, which it was never given (or which already finished)"
                    ),
                ),
            }
        }
    }
}

impl Drop for Recorder {
    /// An instance goes when a swap replaces it: what it still held was handed over.
    fn drop(&mut self) {
        let held = self.queued.len() as u64;
        self.lock().coverage.handed_over += held;
    }
}

impl Around for Recorder {
    fn before(&mut self, inner: &mut dyn PolicyBackend, call: &Call<'_>) -> Result<(), Fault> {
        match *call {
            Call::insert { requests, .. } => self.told_requests(requests),
            Call::requeue { requests, .. } => {
                {
                    let mut record = self.lock();
                    record.coverage.requeues += requests.len() as u64;
                    for r in requests {
                        record.sent.remove(&r.id);
                    }
                }
                self.told_requests(requests);
            }
            Call::dispatch { now_ns, .. } => self.before_dispatching(inner, now_ns)?,
            Call::insert_and_dispatch {
                now_ns, requests, ..
            } => {
                self.told_requests(requests);
                self.before_dispatching(inner, now_ns)?;
            }
            Call::turn { now_ns, turn } => {
                self.told_completions(turn.completions);
                self.told_merges(turn.merges);
                self.told_requests(turn.requests);
                if turn.dispatch.is_some() {
                    self.before_dispatching(inner, now_ns)?;
                }
            }
            Call::merged { events, .. } => self.told_merges(events),
            Call::completed { done, .. } => self.told_completions(done),
            _ => {}
        }
        self.started = Some(Instant::now());
        Ok(())
    }

    fn after(&mut self, inner: &mut dyn PolicyBackend, call: &Call<'_>, answer: Answered<'_>) {
        let spent = self
            .started
            .take()
            .map_or(0, |s| s.elapsed().as_nanos() as u64);
        self.note_call(inner, spent);
        let (now_ns, budget, answer) = match (*call, answer) {
            (Call::dispatch { now_ns, budget, .. }, Answered::dispatch(Ok(answer)))
            | (
                Call::insert_and_dispatch { now_ns, budget, .. },
                Answered::insert_and_dispatch(Ok(answer)),
            ) => (now_ns, budget, answer),
            (Call::turn { now_ns, turn }, Answered::turn(Ok(Some(answer)))) => {
                let Some((_, budget)) = turn.dispatch else {
                    return;
                };
                (now_ns, budget, answer)
            }
            _ => return,
        };
        self.check_answer(now_ns, budget, answer);
        self.asked(answer);
    }

    fn fresh(&self) -> Option<Self> {
        Some(Self::new(&self.record))
    }
}
