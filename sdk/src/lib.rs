//! # schedhost-sdk: write block I/O scheduling policies for schedhost
//!
//! A policy decides which queued request goes to the device next, whether a bio may merge
//! into a queued request, and when to idle. The host owns everything else: queues, tags,
//! merging, timers, the device. A policy crate implements [`Policy`], calls [`export!`], and
//! builds to a WebAssembly component that any schedhost host loads; the same crate also
//! builds natively, so it is unit-tested with plain `cargo test` through [`Runtime`].
//!
//! ## A complete policy
//!
//! Last in, first out — a bad idea on a disk, but a complete one:
//!
//! ```
//! use schedhost_sdk::{Dispatch, MergeEvent, Policy, Request, Setup, TunableSpec};
//!
//! pub struct Lifo {
//!     stack: Vec<u64>,
//!     batch: i64,
//! }
//!
//! impl Policy for Lifo {
//!     const NAME: &'static str = "lifo";
//!     const VERSION: &'static str = "0.1.0";
//!     const TUNABLES: &'static [TunableSpec] = &[TunableSpec {
//!         name: "batch", default: 4, min: 1, max: 64, unit: "requests",
//!         help: "most requests sent per dispatch call",
//!     }];
//!
//!     fn new(_setup: &Setup) -> Self {
//!         Lifo { stack: Vec::new(), batch: 0 }
//!     }
//!
//!     fn set(&mut self, name: &str, value: i64) {
//!         if name == "batch" { self.batch = value }
//!     }
//!
//!     fn get(&self, name: &str) -> Option<i64> {
//!         (name == "batch").then_some(self.batch)
//!     }
//!
//!     fn insert(&mut self, _now_ns: u64, requests: &[Request]) {
//!         self.stack.extend(requests.iter().map(|r| r.id));
//!     }
//!
//!     fn dispatch(&mut self, _now_ns: u64, _hw_queue: u32, budget: u32, out: &mut Dispatch) {
//!         let n = budget.min(self.batch as u32) as usize;
//!         while out.ids.len() < n {
//!             let Some(id) = self.stack.pop() else { break };
//!             out.ids.push(id);
//!         }
//!     }
//!
//!     fn merged(&mut self, _now_ns: u64, event: &MergeEvent) {
//!         // A request absorbed into another must never be dispatched.
//!         if let Some(gone) = event.absorbed {
//!             self.stack.retain(|&id| id != gone);
//!         }
//!     }
//! }
//!
//! // Generates the component's exports when built for wasm32; nothing natively.
//! schedhost_sdk::export!(Lifo);
//!
//! // Native mode: drive it as the host would.
//! # use schedhost_sdk::{Op, PrioClass, Runtime};
//! let mut rt = Runtime::<Lifo>::new();
//! rt.init(&Setup { hw_queues: 1, queue_depth: 32, nr_requests: 64 }, &[("batch".into(), 2)]).unwrap();
//! let req = |id| Request { id, ctx: 0, op: Op::Read, sector: id * 8, sectors: 8, sync: true,
//!                          prio_class: PrioClass::None, prio_level: 4, arrival_ns: 0 };
//! rt.insert(0, &[req(1), req(2), req(3)]);
//! assert_eq!(rt.dispatch(0, 0, 32).ids, vec![3, 2]);
//! assert!(rt.set("batch", 0).unwrap_err().contains("out of range 1..=64"));
//! ```
//!
//! ## Building a component
//!
//! `schedhost policy new DIR` writes a policy crate with this SDK vendored; `schedhost
//! policy build DIR` compiles it for wasm32 and writes `DIR/target/NAME.wasm`, and
//! `schedhost policy check NAME.wasm` tests it against the rules below on seeded workloads.
//! The crate needs `crate-type = ["cdylib", "rlib"]`. In the schedhost repository,
//! `cargo xtask build` builds every bundled policy the same way.
//!
//! ## Rules the host enforces
//!
//! - `dispatch` returns at most `budget` ids, each queued and not yet dispatched.
//! - Every inserted request is eventually dispatched, unless a merge absorbed it.
//! - Time is `now_ns`; a policy that waits answers with [`Dispatch::wake_at_ns`].

#![deny(missing_docs)]
#![deny(unsafe_code)]

pub mod collections;
#[doc(hidden)]
pub mod packed;
mod policy;
mod runtime;
mod types;

#[cfg(target_arch = "wasm32")]
#[doc(hidden)]
pub mod guest;

#[cfg(target_arch = "wasm32")]
#[doc(hidden)]
pub use guest as __guest;

pub use collections::{ElevatorQueue, ExpiryFifo, IdMap, IdSet, SectorSet};
pub use policy::{Policy, TunableSpec};
pub use runtime::Runtime;
pub use types::{
    Completion, Dispatch, Info, MergeEvent, MergeKind, MergeQuery, Op, PrioClass, Request, Setup,
    Tunable,
};

/// The WIT package version this SDK implements.
pub const INTERFACE_VERSION: &str = "0.2.0";

/// Exports a [`Policy`] as the component's implementation of the `schedhost:policy` world.
///
/// Expands to nothing when not building for wasm32, so the same crate serves native tests.
#[macro_export]
macro_rules! export {
    ($policy:ty) => {
        #[cfg(target_arch = "wasm32")]
        $crate::__export_component!($policy);
    };
}
