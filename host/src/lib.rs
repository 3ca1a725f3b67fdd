//! schedhost: a user-space block I/O scheduler whose policies are sandboxed WebAssembly
//! components.
//!
//! - [`control`]: the control socket (`--control`) and its `ctl` client.
//! - [`core`]: the sans-IO scheduler core (queues, tags, merging, policy calls, timers).
//! - [`policy`]: running policies as components or natively, and finding them.
//! - [`device`]: simulated device models (`null`, `ssd`, `hdd`) and their spec files.
//! - [`sim`]: the virtual-time driver that runs a workload on a core and a device model.
//! - [`uring`]: the real driver: io_uring on files and block devices.
//! - [`nbd`]: the NBD server front-end (`serve --nbd`): unmodified clients through a policy.
//! - [`verify`]: fio-style data verification (`verify=crc32c`).
//! - [`outcome`]: what a finished run hands to the reports.
//! - [`workload`]: fio job files and command-line options, and the I/O they generate.
//! - [`trace`]: recorded workloads (blkparse, fio iologs) for `replay`.
//! - [`stats`]: latency histograms per submitter and operation.
//! - [`report`]: fio-like text and JSON reports.
//! - [`plot`]: SVG plots from the JSON reports (`--plot`, `schedhost plot`).
//! - [`metrics`]: Prometheus metrics over HTTP (`serve --metrics`).
//! - [`events`]: per-request events (`--trace-events`), their file and blkparse-like text.
//! - [`input`]: reading the files a user names: regular files only, bounded in size.
//! - [`peer`]: what the servers use with untrusted peers: private unix sockets, deadlines
//!   over whole exchanges, bounded lines.

#![deny(missing_docs)]

pub mod control;
pub mod core;
pub mod device;
pub mod engine;
pub mod events;
pub mod input;
pub mod metrics;
pub mod nbd;
pub mod outcome;
pub mod peer;
pub mod plot;
pub mod policy;
pub mod report;
pub mod sim;
pub mod stats;
pub mod trace;
pub mod uring;
pub mod verify;
pub mod workload;
