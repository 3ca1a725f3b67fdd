//! schedhost's engine and the devices it drives.
//!
//! - [`engine`]: the one driver every run goes through: lanes (one [`core::Core`] per
//!   device), dispatch, completions, timers, stalls, swaps and control. A front-end feeds it
//!   bios through a [`engine::Feed`].
//! - [`backend`]: what the engine dispatches to: simulated device models in virtual time, or
//!   io_uring on files and block devices.
//! - [`observe`]: what a run records while it runs (statistics, the live line, events,
//!   metrics) and plots.
//!
//! Beside them, used by the engine and the layers above: [`control`] (the control socket and
//! its client), [`value`] (the values users write: fio's sizes and times, group names and
//! limits), [`output`] (files a run writes), [`peer`] (private unix sockets, deadlines over
//! whole exchanges, bounded lines for untrusted peers) and [`signal`] (the process's one
//! answer to SIGINT and SIGTERM).

#![deny(missing_docs)]

pub mod backend;
pub mod control;
pub mod engine;
pub mod observe;
pub mod output;
pub mod peer;
pub mod signal;
pub mod value;

pub use schedhost_core::{core, input, policy};
