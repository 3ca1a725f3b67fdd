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
//!
//! # Driving a core
//!
//! The driver owns time and I/O: it submits bios, lets the core run its policy, performs
//! each [`core::Action::Dispatch`] however it likes, and reports the request back; every bio
//! comes out as an [`core::Action::Complete`]. Here a native policy (a component loads the
//! same way through [`policy::load`]) and a "device" that finishes each request at once:
//!
//! ```
//! use schedhost_core::core::{Action, Bio, Config, Core};
//! use schedhost_core::policy::{for_core, native_policy};
//! use schedhost_sdk::{Op, PrioClass};
//!
//! let policy = native_policy("deadline").expect("linked in");
//! let (policy, fallback) = for_core(policy, None);
//! let mut core = Core::new(Config::for_device(1, 4, 256), policy, &[], fallback)
//!     .expect("the policy starts");
//! // Two bios back to back: the second merges into the first's request.
//! for (id, sector) in [(1, 0), (2, 8)] {
//!     let bio = Bio {
//!         id,
//!         ctx: 0,
//!         op: Op::Read,
//!         sector,
//!         sectors: 8,
//!         sync: false,
//!         prio_class: PrioClass::None,
//!         prio_level: 0,
//!     };
//!     core.submit(0, bio).expect("no policy fault");
//! }
//! core.run(0).expect("no policy fault");
//! let mut finished = Vec::new();
//! while let Some(action) = core.poll_action() {
//!     match action {
//!         // The driver's I/O goes here; this device finishes at once.
//!         Action::Dispatch { id, sectors, .. } => {
//!             assert_eq!(sectors, 16, "one request of both bios");
//!             core.complete(1_000, id, 0).expect("it was dispatched");
//!         }
//!         Action::Complete(done) => finished.push(done.bio),
//!     }
//! }
//! assert_eq!(finished, [1, 2]);
//! ```

#![deny(missing_docs)]

pub mod core;
pub mod input;
pub mod policy;
