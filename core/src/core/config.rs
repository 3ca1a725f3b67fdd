//! The queue's limits and attributes (the kernel's queue sysfs directory), and the bounds
//! every input is held to.

use super::merge::{self, Nomerges};
use super::plug::Plug;
use super::routing::RqAffinity;

/// The legacy block layer's nr_requests (BLKDEV_MAX_RQ), which cfq and the seed experiments
/// ran with. blk-mq's 2 × depth would leave a depth-1 disk two scheduler tags, so a policy
/// idling for one submitter would find that submitter's next request stuck behind
/// another's tag.
pub const LEGACY_NR_REQUESTS: u32 = 128;

/// The largest sector address anything may name, an I/O's end included: 2^54 sectors
/// (8 EiB), past any device, and small enough that byte offsets (× 512), ends and the
/// merge index's packed keys cannot overflow. Job files, spec files, traces and NBD
/// requests are checked against it where they are read.
pub const MAX_SECTOR: u64 = 1 << 54;

/// Most submitters (software queues, ctxs) a run may have: each has its own queue,
/// statistics and, on a real device, buffers, so a job file or a trace cannot ask for
/// millions.
pub const MAX_SUBMITTERS: usize = 65_536;

/// The longest time a job or a trace may name: 366 days. Starts, ramps, runtimes, think
/// times and trace timestamps are added together; each below 2^55 ns, their sums cannot
/// reach u64::MAX.
pub const MAX_DURATION_NS: u64 = 366 * 24 * 3600 * 1_000_000_000;

/// Queue limits and attributes, as the kernel's queue sysfs directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// Hardware dispatch queues.
    pub hw_queues: u32,
    /// Driver tags per hardware queue: requests on the device at once.
    pub queue_depth: u32,
    /// Scheduler tags per hardware queue: requests in the scheduler plus on the device.
    pub nr_requests: u32,
    /// Largest request, in sectors (max_sectors_kb × 2).
    pub max_sectors: u32,
    /// Most bios in one request (the queue's max_segments).
    pub max_segments: u32,
    /// Which merges are tried.
    pub nomerges: Nomerges,
    /// Where completion work runs.
    pub rq_affinity: RqAffinity,
    /// How requests are held back so that bios behind them can merge.
    pub plug: Plug,
    /// The device seeks (`rotational`): told to the policy, which may idle and judge seeks
    /// by it.
    pub rotational: bool,
}

/// A policy's tunables by name, with their values (None: the policy did not say).
pub type TunableValues = Vec<(String, Option<i64>)>;

/// The status a device answers when it is busy (`-EBUSY`, blk-mq's `BLK_STS_RESOURCE`):
/// the request is sent back to the policy rather than completed.
pub const BUSY: i32 = -16;

/// Times one request may be sent back by a busy device; the next busy answer completes it
/// with that error, so a device that is always busy cannot hold a bio forever.
pub const MAX_REQUEUES: u8 = 8;

/// The default segment limit: UIO_MAXIOV, the most iovecs one vectored read or write may
/// carry, so a merged request of small bios always fits one I/O on a real device.
pub const MAX_SEGMENTS: u32 = 1024;

impl Config {
    /// What merges must stay within.
    pub fn limits(&self) -> merge::MergeLimits {
        merge::MergeLimits {
            max_sectors: self.max_sectors,
            max_segments: self.max_segments.max(1),
        }
    }

    /// Defaults for a device of this depth: nr_requests = max(2 × min(depth, 128), 128);
    /// rotational, as a queue was before its driver said otherwise (the kernel's default
    /// until 6.11).
    pub fn for_device(hw_queues: u32, queue_depth: u32, max_sectors: u32) -> Self {
        Self {
            hw_queues: hw_queues.max(1),
            queue_depth: queue_depth.max(1),
            nr_requests: (2 * queue_depth.clamp(1, 128)).max(LEGACY_NR_REQUESTS),
            max_sectors: max_sectors.max(1),
            max_segments: MAX_SEGMENTS,
            nomerges: Nomerges::All,
            rq_affinity: RqAffinity::Group,
            plug: Plug::None,
            rotational: true,
        }
    }
}
