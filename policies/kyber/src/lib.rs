//! kyber: the kernel's Kyber scheduler (block/kyber-iosched.c) as a schedhost policy.
//!
//! Requests fall into domains — read, write, discard, other — each with a token pool that
//! caps how many of its requests are on the device. Dispatch takes batches from the domains in
//! turn (16 reads, 8 writes, 1 discard, 1 other). Completions are bucketed against each
//! domain's target (`read_lat_nsec`, `write_lat_nsec`; eight buckets of a quarter target
//! each) twice, as kyber keeps them: by the time on the device (`KYBER_IO_LATENCY`) and by
//! the whole latency (`KYBER_TOTAL_LATENCY`). 100 ms after a completion (kyber's timer), a
//! domain's percentile is read once it has 500 samples or a second has passed since it was
//! first asked (`calculate_percentile`; its buckets are kept until then). If any domain's
//! device-time p90 reached its target the device is congested: every domain's depth is
//! scaled by its total-latency p99 bucket — shrinking domains under target, growing those
//! over it — between 1 and the domain's initial depth. Async requests hold at most three
//! quarters of the scheduler tags (`kyber_limit_depth`, `KYBER_ASYNC_PERCENT`).

#![forbid(unsafe_code)]

use std::collections::VecDeque;

use schedhost_sdk::{
    Completion, Dispatch, IdMap, IdSet, MergeEvent, Op, Policy, Request, RequestId, Setup,
    TunableSpec,
};

const TUNABLES: &[TunableSpec<Kyber>] = &[
    TunableSpec {
        name: "read_lat_nsec",
        default: 2_000_000,
        min: 1,
        max: 60_000_000_000,
        unit: "ns",
        help: "target read latency",
        field: |p| &mut p.lat_nsec[READ],
    },
    TunableSpec {
        name: "write_lat_nsec",
        default: 10_000_000,
        min: 1,
        max: 60_000_000_000,
        unit: "ns",
        help: "target write latency",
        field: |p| &mut p.lat_nsec[WRITE],
    },
];

/// Domains, as `enum kyber_sched_domain`.
const READ: usize = 0;
const WRITE: usize = 1;
const DISCARD: usize = 2;
const OTHER: usize = 3;
const DOMAINS: usize = 4;

/// Initial (and largest) token depth per domain (`kyber_depth`).
const MAX_DEPTH: [u32; DOMAINS] = [256, 128, 64, 16];
/// Requests taken from a domain per turn (`kyber_batch_size`).
const BATCH: [u32; DOMAINS] = [16, 8, 1, 1];
/// Latency buckets per domain; bucket i holds latencies in [i/4, (i+1)/4) of the target.
const BUCKETS: usize = 8;
/// The adjustment window (kyber's timer period).
const WINDOW_NS: u64 = 100_000_000;
/// Histograms per domain: time on the device, and the whole latency.
const IO_LATENCY: usize = 0;
const TOTAL_LATENCY: usize = 1;
/// Samples a percentile waits for, unless a second passes first (`calculate_percentile`).
const PERCENTILE_SAMPLES: u64 = 500;
const PERCENTILE_TIMEOUT_NS: u64 = 1_000_000_000;
/// Discard latency target (`kyber_latency_targets[KYBER_DISCARD]`: 5 s).
const DISCARD_TARGET_NS: u64 = 5_000_000_000;

fn domain_of(op: Op) -> usize {
    match op {
        Op::Read => READ,
        Op::Write => WRITE,
        Op::Discard => DISCARD,
        Op::Flush => OTHER,
    }
}

/// The Kyber policy.
#[derive(Debug)]
pub struct Kyber {
    queues: [VecDeque<RequestId>; DOMAINS],
    /// Ids absorbed while queued: skipped when popped, so they take no token.
    absorbed: IdSet,
    on_device: IdMap<usize>,
    inflight: [u32; DOMAINS],
    depth: [u32; DOMAINS],
    /// `read_lat_nsec` and `write_lat_nsec` as set (the other two are unused).
    lat_nsec: [i64; 2],
    target_ns: [u64; DOMAINS],
    /// Latency histograms per domain, device time and total, kept until a percentile is read.
    latency: [[[u64; BUCKETS]; 2]; DOMAINS],
    /// Per domain, until when a percentile with under 500 samples waits (`latency_timeout`).
    latency_timeout: [Option<u64>; DOMAINS],
    /// When the timer was armed: by the first completion since it last fired.
    timer_start: Option<u64>,
    /// Last known p99 bucket per domain, kept for a congested window that lacks samples.
    last_p99: [Option<usize>; DOMAINS],
    current: usize,
    batching: u32,
    /// Scheduler tags async requests may hold (`async_depth`).
    async_depth: u32,
}

/// The part of the scheduler tags async requests may hold (`KYBER_ASYNC_PERCENT`).
const ASYNC_PERCENT: u64 = 75;

impl Policy for Kyber {
    const NAME: &'static str = "kyber";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const TUNABLES: &'static [TunableSpec<Self>] = TUNABLES;
    const HANDLES_ABSORBED: bool = true;

    fn new(setup: &Setup) -> Self {
        let async_depth = u64::from(setup.nr_requests) * ASYNC_PERCENT / 100;
        Self {
            async_depth: u32::try_from(async_depth).unwrap_or(u32::MAX).max(1),
            queues: Default::default(),
            absorbed: IdSet::device_wide(),
            on_device: IdMap::device_wide(),
            inflight: [0; DOMAINS],
            depth: MAX_DEPTH,
            lat_nsec: [0; 2],
            target_ns: [0, 0, DISCARD_TARGET_NS, 0],
            latency: [[[0; BUCKETS]; 2]; DOMAINS],
            latency_timeout: [None; DOMAINS],
            timer_start: None,
            last_p99: [None; DOMAINS],
            current: READ,
            batching: 0,
        }
    }

    fn retuned(&mut self, _name: &str) {
        self.target_ns[READ] = self.lat_nsec[READ].unsigned_abs();
        self.target_ns[WRITE] = self.lat_nsec[WRITE].unsigned_abs();
    }

    /// `kyber_limit_depth`: async requests take at most `async_depth` scheduler tags, so
    /// sync ones always find some.
    fn limit_depth(&self, _op: Op, sync: bool) -> Option<u32> {
        (!sync).then_some(self.async_depth)
    }

    fn insert(&mut self, _now_ns: u64, requests: &[Request]) {
        for r in requests {
            self.queues[domain_of(r.op)].push_back(r.id);
        }
    }

    fn dispatch(&mut self, _now_ns: u64, _hw_queue: u32, budget: u32, out: &mut Dispatch) {
        let mut fruitless = 0;
        while out.ids.len() < budget as usize && fruitless < DOMAINS {
            let d = self.current;
            let batch_done = self.batching >= BATCH[d];
            let id = if !batch_done && self.inflight[d] < self.depth[d] {
                self.pop(d)
            } else {
                None
            };
            match id {
                Some(id) => {
                    out.ids.push(id);
                    self.on_device.insert(id, d);
                    self.inflight[d] += 1;
                    self.batching += 1;
                    fruitless = 0;
                }
                None => {
                    self.current = (d + 1) % DOMAINS;
                    self.batching = 0;
                    // A finished batch is a turn taken, not a domain with nothing to send.
                    if !batch_done {
                        fruitless += 1;
                    }
                }
            }
        }
    }

    fn merged(&mut self, _now_ns: u64, event: &MergeEvent) {
        if let Some(gone) = event.absorbed {
            self.absorbed.insert(gone);
        }
    }

    /// kyber_finish_request on a requeue: the domain token the request held is given back,
    /// and the request waits at the head of its domain's queue.
    fn requeue(&mut self, _now_ns: u64, requests: &[Request]) {
        for r in requests.iter().rev() {
            if let Some(d) = self.on_device.remove(&r.id) {
                self.inflight[d] = self.inflight[d].saturating_sub(1);
                self.queues[d].push_front(r.id);
            } else {
                self.insert(0, std::slice::from_ref(r));
            }
        }
    }

    fn completed(&mut self, now_ns: u64, done: &[Completion]) {
        for c in done {
            let Some(d) = self.on_device.remove(&c.id) else {
                continue;
            };
            self.inflight[d] = self.inflight[d].saturating_sub(1);
            // Domains without a target (other) keep no histogram.
            for (kind, ns) in [(IO_LATENCY, c.service_ns), (TOTAL_LATENCY, c.latency_ns)] {
                if let Some(quarters) = ns.saturating_mul(4).checked_div(self.target_ns[d]) {
                    self.latency[d][kind][quarters.min(BUCKETS as u64 - 1) as usize] += 1;
                }
            }
        }
        // The timer fires 100 ms after the completion that armed it; here, at the first
        // completion report from then on.
        let start = *self.timer_start.get_or_insert(now_ns);
        if now_ns >= start.saturating_add(WINDOW_NS) {
            self.adjust_depths(now_ns);
            self.timer_start = None;
        }
    }
}

impl Kyber {
    fn pop(&mut self, d: usize) -> Option<RequestId> {
        while let Some(id) = self.queues[d].pop_front() {
            if self.absorbed.is_empty() || !self.absorbed.remove(&id) {
                return Some(id);
            }
        }
        None
    }

    /// The bucket holding the `pct` percentile of domain `d`'s `kind` histogram
    /// (`calculate_percentile`): none without samples, or with fewer than 500 until a second
    /// after the domain was first asked; once read, the histogram starts again.
    fn percentile(&mut self, now_ns: u64, d: usize, kind: usize, pct: u64) -> Option<usize> {
        let samples: u64 = self.latency[d][kind].iter().sum();
        if samples == 0 {
            return None;
        }
        let timeout =
            *self.latency_timeout[d].get_or_insert(now_ns.saturating_add(PERCENTILE_TIMEOUT_NS));
        if samples < PERCENTILE_SAMPLES && now_ns < timeout {
            return None;
        }
        self.latency_timeout[d] = None;
        let buckets = std::mem::take(&mut self.latency[d][kind]);
        let mut wanted = (samples * pct).div_ceil(100);
        let mut bucket = 0;
        while bucket < BUCKETS - 1 && buckets[bucket] < wanted {
            wanted -= buckets[bucket];
            bucket += 1;
        }
        Some(bucket)
    }

    /// kyber_timer_fn: on congestion scale every domain's depth by its p99 bucket; otherwise
    /// only give domains over target more room.
    #[expect(
        clippy::needless_range_loop,
        reason = "the domain index addresses four per-domain arrays"
    )]
    fn adjust_depths(&mut self, now_ns: u64) {
        // Congestion is judged on time on the device; every domain is read (and its
        // histogram consumed), as the kernel's loop does.
        let mut bad = false;
        for d in 0..OTHER {
            let p90 = self.percentile(now_ns, d, IO_LATENCY, 90);
            bad |= p90.is_some_and(|b| b >= BUCKETS / 2);
        }
        for d in 0..OTHER {
            let mut p99 = self.percentile(now_ns, d, TOTAL_LATENCY, 99);
            if bad {
                p99 = p99.or(self.last_p99[d]);
                self.last_p99[d] = None;
            } else if p99.is_some() {
                self.last_p99[d] = p99;
            }
            let Some(p99) = p99 else { continue };
            if bad || p99 >= BUCKETS / 2 {
                let depth = (self.depth[d] as usize * (p99 + 1)) >> 2;
                self.depth[d] = (depth as u32).clamp(1, MAX_DEPTH[d]);
            }
        }
    }
}

schedhost_sdk::export!(Kyber);
