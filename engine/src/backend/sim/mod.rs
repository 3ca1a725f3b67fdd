//! Simulated devices. Each model is a sans-IO state machine in virtual time: the simulator
//! submits requests with `now`, asks when the next completion is due, and polls it.
//!
//! Every parameter is documented with its source in the model's file and can be overridden
//! from a device spec file (see [`spec`]).

mod backend;
pub mod drive;
mod faults;
mod hdd;
mod null;
pub mod spec;
mod ssd;

use schedhost_sdk::Op;

pub use backend::{HORIZON_NS, PastHorizon, SimBackend};
pub use drive::{ContinuousRead, Drive, DriveParams, DriveZone, MAX_SLIPS, SurfaceOrder};
pub use faults::{Admission, FaultPlan, FaultState, Faulty, MAX_RESETS};
pub use hdd::{Hdd, HddParams};
pub use null::{Null, NullParams};
pub use spec::{DeviceSpec, SpecError};
pub use ssd::{Ssd, SsdParams};

/// `-EIO`: what a device answers for a request past its end.
pub const EIO: i32 = -5;

pub use crate::core::BUSY;

/// A request as the device sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceRequest {
    /// The core's request id.
    pub id: u64,
    /// Operation.
    pub op: Op,
    /// First sector.
    pub sector: u64,
    /// Length in sectors.
    pub sectors: u32,
}

impl DeviceRequest {
    /// One past the last sector.
    pub fn end(&self) -> u64 {
        self.sector + u64::from(self.sectors)
    }
}

/// Size and queueing of a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Geometry {
    /// Capacity in 512-byte sectors.
    pub capacity_sectors: u64,
    /// Hardware queues.
    pub hw_queues: u32,
    /// Requests the device accepts at once per hardware queue.
    pub queue_depth: u32,
    /// Largest request, in sectors.
    pub max_sectors: u32,
    /// It seeks: a disk, not flash.
    pub rotational: bool,
}

/// A simulated device.
pub trait DeviceModel: Send {
    /// Its size and queueing.
    fn geometry(&self) -> Geometry;
    /// Accepts a request at `now_ns`.
    fn submit(&mut self, now_ns: u64, request: DeviceRequest);
    /// When the next completion is due, if any request is outstanding.
    fn next_event(&self) -> Option<u64>;
    /// A request finished at or before `now_ns`, with its status (0 or a negative errno).
    fn poll(&mut self, now_ns: u64) -> Option<(u64, i32)>;
}

/// True iff `request` lies within `capacity` sectors.
fn in_range(request: &DeviceRequest, capacity: u64) -> bool {
    request.end() <= capacity
}
