//! Plugging: holding requests back from the device for a moment so that the bios behind
//! them can still merge, as the kernel's block layer does in two historical forms.
//!
//! - **Legacy** (the single-queue block layer, before 2.6.39): a request entering an empty
//!   elevator plugs the whole queue; nothing is dispatched until the queue unplugs, when
//!   `unplug_thresh` requests wait, when `unplug_delay` has passed (kblockd's timer, `UT`),
//!   or when a submitter that waits for its I/O unplugs it (`U`). While plugged, requests
//!   sit in the elevator, where any bio may merge into them.
//! - **Per submitter** (blk-mq's per-task plug, 2.6.39 on): each submitter collects its
//!   requests in its own plug and hands them to the scheduler at the end of its submission
//!   batch, or earlier when it holds `max_requests` requests (32 since 5.16) or its last
//!   request reached `max_bytes` (128 KiB, `BLK_PLUG_FLUSH_SIZE`).
//!
//! [`Plugging`] is the state machine; it says what to do and the core does it.

use super::event::Kind;

/// Which plug the queue has, with its tunables.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Plug {
    /// No plug of its own: a submitter's bios merge with one another until the core's next
    /// turn, and the policy sees them then.
    #[default]
    None,
    /// The legacy queue plug.
    Legacy {
        /// Requests waiting that unplug the queue (the kernel's `unplug_thresh`, 4).
        unplug_thresh: u32,
        /// How long the queue stays plugged at most (`unplug_delay`, 3 ms).
        unplug_delay_ns: u64,
    },
    /// The per-submitter plug.
    Submitter {
        /// Requests in one plug that flush it (`BLK_MAX_REQUEST_COUNT`, 32).
        max_requests: u32,
        /// Size of the plug's last request that flushes it (`BLK_PLUG_FLUSH_SIZE`).
        max_bytes: u64,
    },
}

/// The kernel's legacy defaults: `q->unplug_thresh` and `q->unplug_delay`.
pub const LEGACY_UNPLUG_THRESH: u32 = 4;
/// 3 ms, `msecs_to_jiffies(3)`.
pub const LEGACY_UNPLUG_DELAY_NS: u64 = 3_000_000;
/// blk-mq's plug request count since 5.16 (16 before).
pub const SUBMITTER_MAX_REQUESTS: u32 = 32;
/// `BLK_PLUG_FLUSH_SIZE`: 128 KiB.
pub const SUBMITTER_MAX_BYTES: u64 = 128 * 1024;
/// The longest a legacy plug may be held: a plug is a moment's wait, and anything longer
/// would hold the queue past the watchdog's view of a stalled policy.
pub const MAX_UNPLUG_DELAY_NS: u64 = 1_000_000_000;

impl Plug {
    /// The legacy plug with the kernel's defaults.
    pub fn legacy() -> Self {
        Self::Legacy {
            unplug_thresh: LEGACY_UNPLUG_THRESH,
            unplug_delay_ns: LEGACY_UNPLUG_DELAY_NS,
        }
    }

    /// The per-submitter plug with the kernel's defaults.
    pub fn submitter() -> Self {
        Self::Submitter {
            max_requests: SUBMITTER_MAX_REQUESTS,
            max_bytes: SUBMITTER_MAX_BYTES,
        }
    }

    /// Its name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Legacy { .. } => "legacy",
            Self::Submitter { .. } => "submitter",
        }
    }
}

/// One submitter's plug (per-submitter mode): what it holds.
#[derive(Debug, Clone, Copy, Default)]
struct Held {
    requests: u32,
    last_bytes: u64,
}

/// The plug state of one queue.
#[derive(Debug, Default)]
pub(super) struct Plugging {
    mode: Plug,
    /// Legacy: the queue is plugged, and its timer fires then.
    deadline: Option<u64>,
    /// Per submitter, by ctx: what each plug holds.
    held: Vec<Held>,
}

impl Plugging {
    pub(super) fn new(mode: Plug) -> Self {
        Self {
            mode,
            ..Self::default()
        }
    }

    pub(super) fn mode(&self) -> Plug {
        self.mode
    }

    /// Legacy: nothing may be dispatched.
    pub(super) fn holds_queue(&self) -> bool {
        self.deadline.is_some()
    }

    /// Legacy: when the plug's timer fires, if the queue is plugged.
    pub(super) fn deadline(&self) -> Option<u64> {
        self.deadline
    }

    /// A new request of `ctx` of `bytes` appeared at `now_ns` with `waiting` requests
    /// already waiting for the device (in the elevator or about to enter it). Returns true
    /// iff that plugged (`P`), and, if it also unplugged for being full, how many requests
    /// the plug held then.
    pub(super) fn on_request(
        &mut self,
        now_ns: u64,
        ctx: u32,
        bytes: u64,
        waiting: usize,
    ) -> (bool, Option<u32>) {
        match self.mode {
            Plug::None => (false, None),
            Plug::Legacy {
                unplug_thresh,
                unplug_delay_ns,
            } => {
                // __make_request: plug an empty queue, add the request, then elv_insert
                // unplugs once unplug_thresh requests wait.
                let plugged = self.deadline.is_none() && waiting == 0;
                if plugged {
                    self.deadline = Some(now_ns.saturating_add(unplug_delay_ns.max(1)));
                }
                let held = waiting.saturating_add(1);
                let unplug =
                    (self.deadline.is_some() && held >= unplug_thresh as usize).then(|| {
                        self.deadline = None;
                        u32::try_from(held).unwrap_or(u32::MAX)
                    });
                (plugged, unplug)
            }
            Plug::Submitter {
                max_requests,
                max_bytes,
            } => {
                let index = ctx as usize;
                if self.held.len() <= index {
                    self.held.resize(index + 1, Held::default());
                }
                let held = &mut self.held[index];
                // blk_add_rq_to_plug: a full plug flushes before the new request joins it.
                let full = held.requests >= max_requests || held.last_bytes >= max_bytes;
                let flushed = (held.requests > 0 && full).then(|| {
                    let requests = held.requests;
                    *held = Held::default();
                    requests
                });
                let held = &mut self.held[index];
                let plugged = held.requests == 0;
                held.requests += 1;
                held.last_bytes = bytes;
                (plugged, flushed)
            }
        }
    }

    /// A bio of `ctx` grew a request to `bytes` (per-submitter mode: the plug's last
    /// request, as far as the flush size goes).
    pub(super) fn on_merge(&mut self, ctx: u32, bytes: u64) {
        if let Some(held) = self.held.get_mut(ctx as usize)
            && held.requests > 0
        {
            held.last_bytes = held.last_bytes.max(bytes);
        }
    }

    /// Legacy: a submitter unplugs the queue (it waits for its I/O). True iff it was plugged.
    pub(super) fn unplug_queue(&mut self) -> bool {
        self.deadline.take().is_some()
    }

    /// Legacy: the plug's timer fires at `now_ns` if it is due. True iff that unplugged.
    pub(super) fn expire(&mut self, now_ns: u64) -> bool {
        let due = self.deadline.is_some_and(|d| d <= now_ns);
        if due {
            self.deadline = None;
        }
        due
    }

    /// Per submitter: the submission batch ended; every plug that holds requests flushes.
    /// Calls `flushed` with each ctx and the requests its plug held.
    pub(super) fn end_batch(&mut self, mut flushed: impl FnMut(u32, u32)) {
        for (ctx, held) in self.held.iter_mut().enumerate() {
            if held.requests > 0 {
                flushed(ctx as u32, held.requests);
                *held = Held::default();
            }
        }
    }
}

impl super::Core {
    /// A new request is about to wait for the device: it may plug the queue (or start its
    /// submitter's plug), and it may fill the plug, which then lets go.
    pub(super) fn plug_for(&mut self, now_ns: u64, request: &super::Request) {
        let waiting = self.pending_insert.len() + self.pending_requeue.len() + self.queued;
        let bytes = u64::from(request.sectors) * 512;
        let (plugged, full) = self
            .plugging
            .on_request(now_ns, request.ctx, bytes, waiting);
        if let Some(held) = full {
            self.stats.threshold_unplugs += 1;
            if matches!(self.plugging.mode(), Plug::Submitter { .. }) {
                // blk_add_rq_to_plug flushes a full plug before the request joins the
                // next one, and blkparse shows that flush as U.
                self.note_plug(now_ns, Kind::Unplug(held), request.ctx);
                self.take_turn(now_ns, Some(request.ctx));
            }
        }
        if plugged {
            self.stats.plugs += 1;
            self.note_plug(now_ns, Kind::Plug, request.ctx);
        }
    }

    /// A bio of `ctx` the submitter waits for: it unplugs a plugged queue (legacy), as a
    /// task that sleeps on its I/O ran the queue (`blk_unplug`).
    pub(super) fn unplug_for(&mut self, now_ns: u64, ctx: u32) {
        if self.plugging.unplug_queue() {
            self.stats.unplugs += 1;
            self.note_plug(now_ns, Kind::Unplug(self.allocated()), ctx);
        }
    }

    /// At the start of a round: the legacy plug's timer, if due, and the end of every
    /// submitter's batch, which flushes its plug.
    pub(super) fn flush_due_plugs(&mut self, now_ns: u64) {
        if self.plugging.expire(now_ns) {
            self.stats.timer_unplugs += 1;
            // kblockd's work, not a submitter's: blkparse names the idle task, pid 0.
            self.note_plug(now_ns, Kind::UnplugTimer(self.allocated()), 0);
        }
        let mut flushed = std::mem::take(&mut self.plug_scratch);
        self.plugging
            .end_batch(|ctx, held| flushed.push((ctx, held)));
        for &(ctx, held) in &flushed {
            self.stats.unplugs += 1;
            self.note_plug(now_ns, Kind::Unplug(held), ctx);
        }
        flushed.clear();
        self.plug_scratch = flushed;
    }

    /// Requests that hold a scheduler tag, on the device or not: what the legacy block layer
    /// printed as an unplug's depth (`q->rq.count`).
    fn allocated(&self) -> u32 {
        let allocated = self.table.len().saturating_sub(self.admission.staged());
        u32::try_from(allocated).unwrap_or(u32::MAX)
    }

    fn note_plug(&mut self, now_ns: u64, kind: Kind, ctx: u32) {
        self.note(now_ns, kind, ctx, schedhost_sdk::Op::Read, false, (0, 0), 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn legacy_plugs_an_empty_queue_and_unplugs_at_the_threshold() {
        let mut plug = Plugging::new(Plug::legacy());
        assert_eq!(plug.on_request(10, 0, 4096, 0), (true, None));
        assert_eq!(plug.deadline(), Some(10 + LEGACY_UNPLUG_DELAY_NS));
        assert_eq!(plug.on_request(11, 0, 4096, 1), (false, None));
        assert_eq!(plug.on_request(12, 0, 4096, 2), (false, None));
        assert_eq!(
            plug.on_request(13, 0, 4096, 3),
            (false, Some(4)),
            "the fourth waiting request unplugs"
        );
        assert!(!plug.holds_queue());
        assert_eq!(
            plug.on_request(14, 0, 4096, 4),
            (false, None),
            "a queue with requests waiting is not plugged again"
        );
    }

    #[test]
    fn legacy_timer_unplugs_only_when_due() {
        let mut plug = Plugging::new(Plug::legacy());
        plug.on_request(0, 0, 4096, 0);
        assert!(!plug.expire(LEGACY_UNPLUG_DELAY_NS - 1));
        assert!(plug.holds_queue());
        assert!(plug.expire(LEGACY_UNPLUG_DELAY_NS));
        assert!(!plug.holds_queue());
        assert!(
            !plug.unplug_queue(),
            "an unplugged queue is not unplugged twice"
        );
    }

    #[test]
    fn a_submitter_plug_flushes_when_full_by_count_or_by_size() {
        let mut plug = Plugging::new(Plug::Submitter {
            max_requests: 2,
            max_bytes: 8192,
        });
        assert_eq!(plug.on_request(0, 3, 512, 0), (true, None));
        assert_eq!(plug.on_request(0, 3, 512, 0), (false, None));
        assert_eq!(
            plug.on_request(0, 3, 512, 0),
            (true, Some(2)),
            "a third request flushes the two and starts a new plug"
        );
        plug.on_merge(3, 8192);
        assert_eq!(
            plug.on_request(0, 3, 512, 0),
            (true, Some(1)),
            "a last request of max_bytes flushes"
        );
        assert_eq!(
            plug.on_request(0, 5, 512, 0),
            (true, None),
            "plugs are per submitter"
        );
        let mut ended = Vec::new();
        plug.end_batch(|ctx, n| ended.push((ctx, n)));
        assert_eq!(ended, [(3, 1), (5, 1)]);
    }

    #[test]
    fn no_plug_never_holds_anything() {
        let mut plug = Plugging::new(Plug::None);
        assert_eq!(plug.on_request(0, 0, 4096, 0), (false, None));
        assert!(!plug.holds_queue());
        assert!(!plug.unplug_queue());
        let mut ended = 0;
        plug.end_batch(|_, _| ended += 1);
        assert_eq!(ended, 0);
    }
}
