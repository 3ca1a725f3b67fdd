//! Device faults, seeded and deterministic: a [`FaultPlan`] wraps any model ([`Faulty`])
//! and makes it fail as real devices do; the io_uring backend drives the same
//! [`FaultState`] between the host and the kernel (`--device PATH@…`, `serve --faults`). Reads and writes fail with EIO (at a
//! rate, within a sector range, within a time window), completions arrive late (latency
//! spikes), the device stalls (nothing completes for a while, then everything due does),
//! and resets abort every request in flight with EIO. Every choice is drawn from the plan's
//! own seed in submission order, so a run with a plan is still a function of its inputs
//! and seeds alone.
//!
//! Written as `--device sim:ssd@read_errors=0.01,write_errors=0.01,spikes=0.001:20ms,…`:
//!
//! | key | meaning |
//! | --- | --- |
//! | `read_errors=P`, `write_errors=P` | each read (write) fails with EIO with probability P |
//! | `errors_in=START-END` | only requests touching sectors START..END may fail |
//! | `errors_during=FROM-TO` | only requests submitted in that window of virtual time may fail (`1s-2s`) |
//! | `busy=P` | each request is sent back at once as busy (EBUSY) with probability P: the host requeues it |
//! | `spikes=P:TIME` | each request completes TIME late with probability P |
//! | `stall=AT:FOR` | nothing completes from AT for FOR; what fell due then completes at the end |
//! | `reset=AT` | at AT every request in flight completes with EIO (repeatable) |
//! | `seed=N` | the plan's own seed (default 1) |

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};

use schedhost_sdk::Op;

use super::{DeviceModel, DeviceRequest, EIO, Geometry};

/// What goes wrong, and when. Probabilities are in parts per billion, so a plan is a plain
/// value (copied into a run's options, compared exactly).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FaultPlan {
    /// Probability a read fails with EIO, per billion.
    pub read_errors: u32,
    /// Probability a write (or flush) fails with EIO, per billion.
    pub write_errors: u32,
    /// Only requests touching these sectors may fail.
    pub errors_in: Option<(u64, u64)>,
    /// Only requests submitted in this window (ns) may fail.
    pub errors_during: Option<(u64, u64)>,
    /// Probability a request is sent back busy, per billion.
    pub busy: u32,
    /// Probability (per billion) a request completes late, and by how much (ns).
    pub spikes: (u32, u64),
    /// From when, and for how long (ns), nothing completes.
    pub stall: Option<(u64, u64)>,
    /// When every request in flight is aborted (ns), ascending: the first `reset_count`.
    pub resets: [u64; MAX_RESETS],
    /// How many of `resets` are set.
    pub reset_count: usize,
    /// The plan's seed.
    pub seed: u64,
}

/// The most resets a plan may hold.
pub const MAX_RESETS: usize = 8;

/// Parts per billion: a probability of 1.
const BILLION: u32 = 1_000_000_000;

impl FaultPlan {
    /// True iff the plan injects nothing.
    pub fn is_empty(&self) -> bool {
        self.read_errors == 0
            && self.write_errors == 0
            && self.busy == 0
            && self.spikes.0 == 0
            && self.stall.is_none()
            && self.reset_count == 0
    }

    /// The resets, ascending.
    pub fn resets(&self) -> &[u64] {
        &self.resets[..self.reset_count]
    }

    /// Parses `key=value,…` (see the module's table).
    ///
    /// # Errors
    /// The key or value at fault, and what was expected.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut plan = Self {
            seed: 1,
            ..Self::default()
        };
        for item in text.split(',').filter(|i| !i.is_empty()) {
            let (key, value) = item
                .split_once('=')
                .ok_or_else(|| format!("fault `{item}`: expected KEY=VALUE"))?;
            let bad = |what: &str| format!("fault `{item}`: {what}");
            match key {
                "read_errors" => plan.read_errors = probability(value).map_err(|e| bad(&e))?,
                "write_errors" => plan.write_errors = probability(value).map_err(|e| bad(&e))?,
                "busy" => plan.busy = probability(value).map_err(|e| bad(&e))?,
                "errors_in" => {
                    let (a, b) = value
                        .split_once('-')
                        .ok_or_else(|| bad("expected START-END sectors"))?;
                    let (a, b) = (
                        whole(a).map_err(|e| bad(&e))?,
                        whole(b).map_err(|e| bad(&e))?,
                    );
                    if a >= b {
                        return Err(bad("START must be below END"));
                    }
                    plan.errors_in = Some((a, b));
                }
                "errors_during" => {
                    let (a, b) = value
                        .split_once('-')
                        .ok_or_else(|| bad("expected FROM-TO times"))?;
                    let (a, b) = (time(a).map_err(|e| bad(&e))?, time(b).map_err(|e| bad(&e))?);
                    if a >= b {
                        return Err(bad("FROM must be before TO"));
                    }
                    plan.errors_during = Some((a, b));
                }
                "spikes" => {
                    let (p, t) = value
                        .split_once(':')
                        .ok_or_else(|| bad("expected P:TIME"))?;
                    plan.spikes = (
                        probability(p).map_err(|e| bad(&e))?,
                        time(t).map_err(|e| bad(&e))?,
                    );
                }
                "stall" => {
                    let (at, span) = value
                        .split_once(':')
                        .ok_or_else(|| bad("expected AT:FOR"))?;
                    plan.stall = Some((
                        time(at).map_err(|e| bad(&e))?,
                        time(span).map_err(|e| bad(&e))?,
                    ));
                }
                "reset" => {
                    if plan.reset_count >= MAX_RESETS {
                        return Err(bad(&format!("at most {MAX_RESETS} resets")));
                    }
                    plan.resets[plan.reset_count] = time(value).map_err(|e| bad(&e))?;
                    plan.reset_count += 1;
                    plan.resets[..plan.reset_count].sort_unstable();
                }
                "seed" => plan.seed = whole(value).map_err(|e| bad(&e))?,
                _ => {
                    return Err(format!(
                        "unknown fault `{key}` (read_errors, write_errors, busy, errors_in, errors_during, spikes, stall, reset, seed)"
                    ));
                }
            }
        }
        Ok(plan)
    }
}

/// A probability from 0 to 1, in parts per billion.
fn probability(value: &str) -> Result<u32, String> {
    match value.parse::<f64>() {
        Ok(p) if (0.0..=1.0).contains(&p) => Ok((p * f64::from(BILLION)).round() as u32),
        _ => Err(format!("`{value}` is not a probability from 0 to 1")),
    }
}

fn whole(value: &str) -> Result<u64, String> {
    value
        .parse()
        .map_err(|_| format!("`{value}` is not a whole number"))
}

/// A time of at most 100 days (the end of virtual time): `250ms`, `2s`, `100us`, `5000ns`;
/// a bare number is ns.
fn time(value: &str) -> Result<u64, String> {
    let (digits, unit) = value
        .find(|c: char| !c.is_ascii_digit())
        .map_or((value, "ns"), |at| value.split_at(at));
    let scale = match unit {
        "ns" => 1,
        "us" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        _ => return Err(format!("`{value}`: a time takes ns, us, ms or s")),
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(scale))
        .filter(|&ns| ns <= super::HORIZON_NS)
        .ok_or_else(|| format!("`{value}` is not a time up to 100 days"))
}

/// SplitMix64, the plan's own stream: the device's faults never draw from the jobs'.
#[derive(Debug, Clone)]
struct Draws(u64);

impl Draws {
    /// True with probability `ppb` per billion.
    fn chance(&mut self, ppb: u32) -> bool {
        if ppb == 0 {
            return false;
        }
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        ((u128::from(z) * u128::from(BILLION)) >> 64) < u128::from(ppb)
    }
}

/// What a plan does to the requests of one device, sans-IO: which fail, which come back
/// busy, which are late, what a stall holds back and a reset aborts. A device model
/// ([`Faulty`]) or a real ring ([`crate::backend::ring`]) drives it with its own requests,
/// keyed by whatever names them there (`K`).
#[derive(Debug)]
pub struct FaultState<K> {
    plan: FaultPlan,
    draws: Draws,
    /// Requests on the device whose completion is not yet decided: whether each is to fail,
    /// and whether it is late. Each leaves it once, into `held`, so each completes once.
    inflight: BTreeMap<K, (bool, bool)>,
    /// Completions held back (a busy answer, a spike, a stall, a reset): (due, order, key,
    /// status).
    held: BinaryHeap<Reverse<(u64, u64, K, i32)>>,
    order: u64,
    /// Resets still to come, latest first.
    resets: Vec<u64>,
    /// Requests a reset aborted while the device still held their buffers (see
    /// [`FaultState::over_lent_buffers`]): each completes with EIO once the device answers.
    aborted: BTreeSet<K>,
    /// The device reads and writes the requests' memory until it answers: a reset's EIO
    /// waits for that answer.
    lent_buffers: bool,
}

/// Whether the device gets a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Send it to the device.
    Send,
    /// Do not: the device answered busy at once (the answer is held, due now).
    Busy,
}

impl<K: Ord + Copy> FaultState<K> {
    /// A device failing as `plan` says.
    pub fn new(plan: FaultPlan) -> Self {
        let mut resets = plan.resets().to_vec();
        resets.reverse();
        Self {
            draws: Draws(plan.seed),
            plan,
            inflight: BTreeMap::new(),
            held: BinaryHeap::new(),
            order: 0,
            resets,
            aborted: BTreeSet::new(),
            lent_buffers: false,
        }
    }

    /// A device that works in the requests' own memory (the kernel under io_uring): a
    /// reset still fails everything in flight with EIO, but each failure is reported only
    /// when the device has answered, since until then it may write into the buffer, and a
    /// buffer reported free goes to the next request at once.
    pub fn over_lent_buffers(plan: FaultPlan) -> Self {
        Self {
            lent_buffers: true,
            ..Self::new(plan)
        }
    }

    /// Request `key` (an `op` over `sector..end`) goes to the device at `now_ns`.
    pub fn submit(&mut self, now_ns: u64, key: K, op: Op, (sector, end): (u64, u64)) -> Admission {
        self.reset_due(now_ns);
        let rate = if op == Op::Read {
            self.plan.read_errors
        } else {
            self.plan.write_errors
        };
        // Every draw is made for every request, so one choice never shifts another's stream.
        let error = self.draws.chance(rate);
        let spike = self.draws.chance(self.plan.spikes.0);
        let busy = self.draws.chance(self.plan.busy);
        if busy {
            // Refused at once, as a full device refuses `queue_rq`: the host sends it back.
            self.hold(now_ns, key, super::BUSY);
            return Admission::Busy;
        }
        let fails = error && self.may_fail(now_ns, sector, end);
        let fresh = self.inflight.insert(key, (fails, spike)).is_none();
        debug_assert!(fresh, "a request submitted twice");
        Admission::Send
    }

    /// The device finished request `key` with `status` at `now_ns`.
    pub fn finished(&mut self, now_ns: u64, key: K, status: i32) {
        self.reset_due(now_ns);
        if self.aborted.remove(&key) {
            // Aborted by a reset while the device held its buffer: failed from the reset,
            // reported now that the buffer is free.
            self.hold(now_ns, key, EIO);
            return;
        }
        // A request a reset aborted completed then; the device's late answer is dropped.
        let Some((fails, spike)) = self.inflight.remove(&key) else {
            return;
        };
        let status = if fails && status == 0 { EIO } else { status };
        let mut due = now_ns;
        if spike {
            due = due.saturating_add(self.plan.spikes.1);
        }
        if let Some(end) = self.stalled_until(due) {
            due = end;
        }
        self.hold(due, key, status);
    }

    /// The next completion due by `now_ns`, with its status.
    pub fn pop_due(&mut self, now_ns: u64) -> Option<(K, i32)> {
        self.reset_due(now_ns);
        let &Reverse((due, _, key, status)) = self.held.peek()?;
        if due > now_ns {
            return None;
        }
        self.held.pop();
        Some((key, status))
    }

    /// When something is next due: a held completion, or a reset with requests in flight.
    pub fn next_due(&self) -> Option<u64> {
        let reset = (!self.inflight.is_empty())
            .then(|| self.resets.last().copied())
            .flatten();
        [self.held.peek().map(|Reverse((due, ..))| *due), reset]
            .into_iter()
            .flatten()
            .min()
    }

    /// Completions held back, not yet due.
    pub fn held(&self) -> usize {
        self.held.len()
    }

    fn may_fail(&self, now_ns: u64, sector: u64, end: u64) -> bool {
        self.plan
            .errors_in
            .is_none_or(|(a, b)| sector < b && end > a)
            && self
                .plan
                .errors_during
                .is_none_or(|(from, to)| (from..to).contains(&now_ns))
    }

    /// When the stall that covers `at` ends, if one does.
    fn stalled_until(&self, at: u64) -> Option<u64> {
        self.plan
            .stall
            .map(|(from, span)| (from, from.saturating_add(span)))
            .filter(|&(from, to)| (from..to).contains(&at))
            .map(|(_, to)| to)
    }

    fn hold(&mut self, due: u64, key: K, status: i32) {
        self.order += 1;
        self.held.push(Reverse((due, self.order, key, status)));
    }

    /// Resets due by `now_ns`: every request in flight completes with EIO at the reset.
    fn reset_due(&mut self, now_ns: u64) {
        while let Some(&at) = self.resets.last()
            && at <= now_ns
        {
            self.resets.pop();
            for (key, _) in std::mem::take(&mut self.inflight) {
                if self.lent_buffers {
                    self.aborted.insert(key);
                } else {
                    self.hold(at, key, EIO);
                }
            }
        }
    }
}

/// A model that fails as its plan says.
pub struct Faulty {
    inner: Box<dyn DeviceModel>,
    state: FaultState<u64>,
}

impl std::fmt::Debug for Faulty {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Faulty")
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

impl Faulty {
    /// `inner` failing as `plan` says.
    pub fn new(inner: Box<dyn DeviceModel>, plan: FaultPlan) -> Self {
        Self {
            inner,
            state: FaultState::new(plan),
        }
    }
}

impl DeviceModel for Faulty {
    fn geometry(&self) -> Geometry {
        self.inner.geometry()
    }

    fn submit(&mut self, now_ns: u64, request: DeviceRequest) {
        let extent = (request.sector, request.end());
        if self.state.submit(now_ns, request.id, request.op, extent) == Admission::Send {
            self.inner.submit(now_ns, request);
        }
    }

    fn next_event(&self) -> Option<u64> {
        [self.inner.next_event(), self.state.next_due()]
            .into_iter()
            .flatten()
            .min()
    }

    fn poll(&mut self, now_ns: u64) -> Option<(u64, i32)> {
        while let Some((id, status)) = self.inner.poll(now_ns) {
            self.state.finished(now_ns, id, status);
        }
        self.state.pop_due(now_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(text: &str) -> FaultPlan {
        FaultPlan::parse(text).expect("a valid plan")
    }

    #[test]
    fn a_reset_over_lent_buffers_fails_in_flight_requests_only_once_the_device_answers() {
        let mut state = FaultState::over_lent_buffers(plan("reset=1ms"));
        for key in 0..3u64 {
            assert_eq!(
                state.submit(0, key, Op::Write, (key, key + 8)),
                Admission::Send
            );
        }
        // Past the reset: nothing is reported while the device still holds the buffers.
        assert_eq!(state.pop_due(2_000_000), None);
        state.finished(3_000_000, 1, 0);
        assert_eq!(
            state.pop_due(3_000_000),
            Some((1, EIO)),
            "failed, though it ran"
        );
        assert_eq!(
            state.pop_due(3_000_000),
            None,
            "0 and 2 are still the device's"
        );
        state.finished(4_000_000, 0, 0);
        state.finished(4_000_000, 2, 0);
        assert_eq!(state.pop_due(4_000_000), Some((0, EIO)));
        assert_eq!(state.pop_due(4_000_000), Some((2, EIO)));
        // A request sent after the reset runs as usual.
        assert_eq!(
            state.submit(5_000_000, 7, Op::Read, (0, 8)),
            Admission::Send
        );
        state.finished(6_000_000, 7, 0);
        assert_eq!(state.pop_due(6_000_000), Some((7, 0)));
    }

    #[test]
    fn a_reset_on_a_model_fails_in_flight_requests_at_the_reset() {
        let mut state = FaultState::new(plan("reset=1ms"));
        assert_eq!(state.submit(0, 0u64, Op::Read, (0, 8)), Admission::Send);
        assert_eq!(state.pop_due(1_000_000), Some((0, EIO)));
        state.finished(2_000_000, 0, 0);
        assert_eq!(state.pop_due(2_000_000), None, "its late answer is dropped");
    }
}
