//! `null`: every request completes after a fixed latency, any number at once — a device that
//! costs nothing, so a run measures the host's own cost (like the kernel's null_blk).

use std::collections::VecDeque;

use super::{DeviceModel, DeviceRequest, EIO, Geometry, in_range};

/// Parameters of the null device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NullParams {
    /// Completion latency (null_blk's `completion_nsec`; default 0).
    pub latency_ns: u64,
    /// Capacity (default 1 TiB, null_blk's `gb` raised so large jobs fit).
    pub capacity_sectors: u64,
    /// Hardware queues (null_blk `submit_queues`; default 1).
    pub hw_queues: u32,
    /// Queue depth (null_blk `hw_queue_depth`; default 64).
    pub queue_depth: u32,
    /// Largest request (default 2560 sectors = 1280 KiB, the kernel's max_sectors_kb).
    pub max_sectors: u32,
}

impl Default for NullParams {
    fn default() -> Self {
        Self {
            latency_ns: 0,
            capacity_sectors: 1 << 31,
            hw_queues: 1,
            queue_depth: 64,
            max_sectors: 2560,
        }
    }
}

/// The null device.
#[derive(Debug)]
pub struct Null {
    params: NullParams,
    /// In completion order: equal latencies keep submission order.
    due: VecDeque<(u64, u64, i32)>,
}

impl Null {
    /// A null device with `params`.
    pub fn new(params: NullParams) -> Self {
        Self {
            params,
            due: VecDeque::new(),
        }
    }
}

impl DeviceModel for Null {
    fn geometry(&self) -> Geometry {
        Geometry {
            capacity_sectors: self.params.capacity_sectors,
            hw_queues: self.params.hw_queues,
            queue_depth: self.params.queue_depth,
            max_sectors: self.params.max_sectors,
            rotational: false,
        }
    }

    fn submit(&mut self, now_ns: u64, request: DeviceRequest) {
        let status = if in_range(&request, self.params.capacity_sectors) {
            0
        } else {
            EIO
        };
        self.due
            .push_back((now_ns + self.params.latency_ns, request.id, status));
    }

    fn next_event(&self) -> Option<u64> {
        self.due.front().map(|&(at, _, _)| at)
    }

    fn poll(&mut self, now_ns: u64) -> Option<(u64, i32)> {
        match self.due.front() {
            Some(&(at, id, status)) if at <= now_ns => {
                self.due.pop_front();
                Some((id, status))
            }
            _ => None,
        }
    }
}
