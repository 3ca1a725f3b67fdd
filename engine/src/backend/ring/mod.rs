//! The real backend: one io_uring ring carrying every device's I/O to files and block
//! devices with O_DIRECT, with registered files and, where the kernel allows, one
//! registered buffer arena for `READ_FIXED`/`WRITE_FIXED`. Merged requests go out as
//! vectored I/O over their bios' buffers.

mod backend;
mod buffers;
mod target;
mod uring;

pub use backend::{RingBackend, RingError, RingSetup};

pub use buffers::{Arena, Lease, SlotAccess};
pub use target::{OpenRules, Target, TargetError, TargetKind, lay_out};
pub use uring::Notifier;

/// Largest request the merge engine builds on a real device or export (1280 KiB, the
/// simulated disks' limit).
pub const MAX_SECTORS: u32 = 2560;
