//! schedhost's sans-IO scheduler core and its policy runtime.
//!
//! Nothing here does I/O of its own or starts a thread: a [`core::Core`] is fed bios and
//! completions by its driver, answers with requests to dispatch and timers to arm, and asks
//! its policy (a sandboxed WebAssembly component or a policy crate linked natively, see
//! [`policy`]) every decision. The schedhost binary drives it with its engine (simulated
//! devices, io_uring); a program with its own event loop and its own I/O can drive it the
//! same way (`examples/embed`).
//!
//! - [`core`]: software and hardware queues, tags, admission, merging, plugging, the
//!   throttle, completion routing, supervision of a faulty policy and hot swaps.
//! - [`policy`]: loading, sandboxing and calling policies, and finding bundled ones.
//! - [`input`]: reading the files a user names (regular files only, bounded in size).

#![deny(missing_docs)]

pub mod core;
pub mod input;
pub mod policy;
