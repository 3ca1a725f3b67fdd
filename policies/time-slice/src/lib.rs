//! time-slice: the 2016 blk-mq RFC "blk-mq: Introduce per sw queue time-slice" (Andreas
//! Herrmann's patch on linux-block, before blk-mq had I/O schedulers) as a schedhost policy.
//!
//! Requests stay in their submitter's queue (ctx) in arrival order. With `time_slice_us=0`
//! dispatch takes one request from each non-empty ctx in turn, as plain blk-mq drains its
//! software queues. With a slice, one ctx is served exclusively until its slice ends; if it
//! runs empty before then the device idles for it (a sequential reader's next request is
//! usually a moment away), and when the slice ends the next non-empty ctx gets a fresh one.
//!
//! An expired slice ends when the hardware queue next runs, as in blk-mq, where a queue run
//! follows a submission or a completion. While the active ctx has a request on the device,
//! no timer is armed: that request's completion (or any submission) is the next chance to
//! switch. A timer ends the slice only when the active ctx has nothing on the device, since
//! then no completion is coming.

#![forbid(unsafe_code)]

use std::collections::VecDeque;

use schedhost_sdk::{
    Completion, Dispatch, IdSet, MergeEvent, Policy, Request, RequestId, Setup, TunableSpec,
};

const TUNABLES: &[TunableSpec<TimeSlice>] = &[TunableSpec {
    name: "time_slice_us",
    default: 0,
    min: 0,
    max: 10_000_000,
    unit: "us",
    help: "serve one submitter exclusively for this long; 0 = round robin per request (plain blk-mq)",
    field: |p| &mut p.time_slice_us,
}];

/// A submitter's queued requests, in arrival order, and how many of its requests are on
/// the device.
#[derive(Debug, Default)]
struct Submitter {
    ctx: u32,
    queue: VecDeque<RequestId>,
    on_device: u32,
}

/// The time-slice policy.
#[derive(Debug, Default)]
pub struct TimeSlice {
    /// Every submitter seen, sorted by ctx, each once: round robin walks them in ctx order,
    /// and a binary search over a few contiguous entries costs less in a component than a
    /// B-tree's nodes or a hash lookup.
    submitters: Vec<Submitter>,
    /// Ids absorbed by merges while still queued; skipped when reached, so that an
    /// absorbed id never counts as the active submitter's next request.
    absorbed: IdSet,
    time_slice_us: i64,
    slice_ns: u64,
    /// The ctx being served and when its slice ends.
    active: Option<(u32, u64)>,
    /// Round-robin position for `time_slice_us=0` (`u32::MAX` before the first pick).
    cursor: u32,
    /// A submission or completion arrived since the last dispatch: blk-mq would run the
    /// hardware queue now.
    queue_run: bool,
}

impl Policy for TimeSlice {
    const NAME: &'static str = "time-slice";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const TUNABLES: &'static [TunableSpec<Self>] = TUNABLES;
    const COMPLETIONS: bool = true;
    const HANDLES_ABSORBED: bool = true;

    fn new(_setup: &Setup) -> Self {
        Self {
            cursor: u32::MAX,
            absorbed: IdSet::device_wide(),
            ..Self::default()
        }
    }

    fn retuned(&mut self, _name: &str) {
        self.slice_ns = self.time_slice_us.unsigned_abs() * 1000;
    }

    fn insert(&mut self, _now_ns: u64, requests: &[Request]) {
        self.queue_run = true;
        for r in requests {
            self.submitter(r.ctx).queue.push_back(r.id);
        }
    }

    fn dispatch(&mut self, now_ns: u64, _hw_queue: u32, budget: u32, out: &mut Dispatch) {
        let queue_run = std::mem::take(&mut self.queue_run);
        while out.ids.len() < budget as usize {
            if self.slice_ns == 0 {
                let Some(ctx) = self.next_busy_ctx(self.cursor) else {
                    break;
                };
                self.cursor = ctx;
                if let Some(id) = self.take(ctx) {
                    out.ids.push(id);
                }
                continue;
            }
            match self.active {
                Some((ctx, end)) if now_ns < end => match self.take(ctx) {
                    Some(id) => out.ids.push(id),
                    // Idle for the active submitter: its completion runs the queue again.
                    None if self.has_on_device(ctx) => break,
                    None => {
                        // Nothing of it is on the device: only a timer ends the slice.
                        out.wake_at_ns = Some(end);
                        break;
                    }
                },
                // Expired, but no submission or completion has run the queue since.
                Some((ctx, _)) if !queue_run && self.has_on_device(ctx) => break,
                _ => {
                    let after = self.active.map_or(u32::MAX, |(ctx, _)| ctx);
                    match self.next_busy_ctx(after) {
                        Some(ctx) => self.active = Some((ctx, now_ns + self.slice_ns)),
                        None => {
                            self.active = None;
                            break;
                        }
                    }
                }
            }
        }
    }

    fn completed(&mut self, _now_ns: u64, done: &[Completion]) {
        self.queue_run = true;
        for c in done {
            if let Some(s) = self.known_mut(c.ctx) {
                s.on_device = s.on_device.saturating_sub(1);
            }
        }
    }

    fn merged(&mut self, _now_ns: u64, event: &MergeEvent) {
        if let Some(gone) = event.absorbed {
            self.absorbed.insert(gone);
        }
    }

    /// The requests leave their submitters' device counts and wait again.
    fn requeue(&mut self, now_ns: u64, requests: &[Request]) {
        for r in requests {
            if let Some(s) = self.known_mut(r.ctx) {
                s.on_device = s.on_device.saturating_sub(1);
            }
        }
        self.insert(now_ns, requests);
    }
}

impl TimeSlice {
    /// Where `ctx`'s entry is, or where it would go.
    fn position(&self, ctx: u32) -> Result<usize, usize> {
        self.submitters.binary_search_by_key(&ctx, |s| s.ctx)
    }

    /// `ctx`'s entry, made empty if it is new.
    fn submitter(&mut self, ctx: u32) -> &mut Submitter {
        let at = match self.position(ctx) {
            Ok(at) => at,
            Err(at) => {
                self.submitters.insert(
                    at,
                    Submitter {
                        ctx,
                        ..Submitter::default()
                    },
                );
                at
            }
        };
        &mut self.submitters[at]
    }

    /// `ctx`'s entry, if it has submitted.
    fn known_mut(&mut self, ctx: u32) -> Option<&mut Submitter> {
        let at = self.position(ctx).ok()?;
        Some(&mut self.submitters[at])
    }

    /// The first ctx after `after` (wrapping) with a live queued request. Only the queues
    /// walked past are cleaned of absorbed heads: the rest keep theirs until reached, which
    /// changes nothing, since `pop` skips them too.
    fn next_busy_ctx(&mut self, after: u32) -> Option<u32> {
        // From the first ctx at or past `after + 1` (saturating, so the initial cursor,
        // u32::MAX, starts at ctx u32::MAX itself), around to where it started.
        let from = after.saturating_add(1);
        let start = self.submitters.partition_point(|s| s.ctx < from);
        let (before, later) = self.submitters.split_at_mut(start);
        let absorbed = &mut self.absorbed;
        later.iter_mut().chain(before).find_map(|s| {
            drop_absorbed_heads(&mut s.queue, absorbed);
            (!s.queue.is_empty()).then_some(s.ctx)
        })
    }

    fn has_on_device(&self, ctx: u32) -> bool {
        self.position(ctx)
            .is_ok_and(|at| self.submitters[at].on_device > 0)
    }

    /// The next live request of `ctx`, counted as on the device.
    fn take(&mut self, ctx: u32) -> Option<RequestId> {
        let at = self.position(ctx).ok()?;
        let absorbed = &mut self.absorbed;
        let submitter = &mut self.submitters[at];
        let id = pop(&mut submitter.queue, absorbed)?;
        submitter.on_device += 1;
        Some(id)
    }
}

/// The next live request of `queue`.
fn pop(queue: &mut VecDeque<RequestId>, absorbed: &mut IdSet) -> Option<RequestId> {
    while let Some(id) = queue.pop_front() {
        if absorbed.is_empty() || !absorbed.remove(&id) {
            return Some(id);
        }
    }
    None
}

/// Removes absorbed ids at `queue`'s head, so its emptiness is exact.
fn drop_absorbed_heads(queue: &mut VecDeque<RequestId>, absorbed: &mut IdSet) {
    if absorbed.is_empty() {
        return;
    }
    while let Some(id) = queue.front() {
        if !absorbed.remove(id) {
            break;
        }
        queue.pop_front();
    }
}

schedhost_sdk::export!(TimeSlice);
