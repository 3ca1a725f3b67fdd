//! schedhost: a user-space block I/O scheduler whose policies are sandboxed WebAssembly
//! components.
//!
//! The layers, each a folder, each importing only those below it:
//!
//! - [`core`]: the sans-IO scheduler core (queues, tags, merging, policy calls, timers), and
//!   [`policy`]: running policies as components or natively, and finding them.
//! - [`engine`]: the one driver every run goes through: lanes, dispatch, completions, timers,
//!   stalls, swaps and control.
//! - [`backend`]: what the engine dispatches to: simulated device models in virtual time, or
//!   io_uring on files and block devices.
//! - [`frontend`]: what feeds the engine: fio jobs (simulated or real), replayed traces, and
//!   the NBD server; and the [`frontend::outcome`] of a finished run.
//! - [`observe`]: what a run records while it runs (statistics, the live line, events,
//!   metrics) and plots; [`report`]: fio-like text and JSON reports of a finished run.
//!
//! Above them, the two checks: [`contract`] (`policy check`: the policy contract, checked on
//! seeded simulated workloads) and [`fidelity`] (`schedhost validate`: the simulator against
//! DiskSim's recorded drives).
//!
//! Beside them, used from several layers: [`control`] (the control socket and its client),
//! [`verify`] (fio-style data verification), [`input`] (reading the files a user names:
//! regular files only, bounded in size), [`value`] (the values users write: fio's sizes and
//! times, group names and limits), [`peer`] (private unix sockets, deadlines over
//! whole exchanges, bounded lines for the servers' untrusted peers) and [`signal`] (the
//! process's one answer to SIGINT and SIGTERM: a graceful stop, or the files it made removed
//! before it dies).

#![deny(missing_docs)]

pub mod contract;
pub mod fidelity;
pub mod report;

pub use schedhost_core::{core, input, policy};
pub use schedhost_engine::{backend, control, engine, observe, output, peer, signal, value};
pub use schedhost_frontend::{frontend, verify};
