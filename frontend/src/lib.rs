//! What feeds schedhost's engine, and what a finished run hands back.
//!
//! - [`frontend`]: fio jobs (simulated, or real on io_uring with submitter threads), replayed
//!   traces (blkparse, fio's iolog) and the NBD server, each a
//!   [`schedhost_engine::engine::Frontend`]; the [`frontend::plan::RunPlan`] that
//!   sets up a run and the [`frontend::outcome`] of a finished one.
//! - [`verify`]: fio-style data verification.

#![deny(missing_docs)]

pub mod frontend;
pub mod verify;

pub use schedhost_core::{core, input, policy};
pub use schedhost_engine::{backend, control, engine, observe, output, peer, signal, value};
