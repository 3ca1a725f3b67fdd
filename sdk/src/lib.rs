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
//! use schedhost_sdk::{Dispatch, Policy, Request, RequestId, Setup, TunableSpec};
//!
//! pub struct Lifo {
//!     stack: Vec<RequestId>,
//!     batch: i64,
//! }
//!
//! impl Policy for Lifo {
//!     const NAME: &'static str = "lifo";
//!     const VERSION: &'static str = "0.1.0";
//!     // Declared once: the SDK range-checks, stores into the field and answers `get`.
//!     const TUNABLES: &'static [TunableSpec<Self>] = &[TunableSpec {
//!         name: "batch", default: 4, min: 1, max: 64, unit: "requests",
//!         help: "most requests sent per dispatch call",
//!         field: |p| &mut p.batch,
//!     }];
//!
//!     fn new(_setup: &Setup) -> Self {
//!         Lifo { stack: Vec::new(), batch: 0 }
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
//!     // No `merged`: the SDK drops ids that merges absorbed from the answers.
//! }
//!
//! // Generates the component's exports when built for wasm32; nothing natively.
//! schedhost_sdk::export!(Lifo);
//!
//! // Native mode: drive it as the host would.
//! # use schedhost_sdk::{MergeEvent, MergeKind, Op, PrioClass, Runtime, Sector};
//! let mut rt = Runtime::<Lifo>::new();
//! rt.init(&Setup { hw_queues: 1, queue_depth: 32, nr_requests: 64, rotational: true }, &[("batch".into(), 2)]).unwrap();
//! let req = |id| Request { id: RequestId(id), ctx: 0, op: Op::Read, sector: Sector(id * 8),
//!                          sectors: 8, sync: true, prio_class: PrioClass::None, prio_level: 4,
//!                          group: 0, arrival_ns: 0 };
//! rt.insert(0, &[req(1), req(2), req(3)]);
//! // Request 2 grew over request 3 and absorbed it.
//! rt.merged(0, &[MergeEvent { target: RequestId(2), sector: Sector(16), sectors: 16,
//!                             kind: MergeKind::Back, absorbed: Some(RequestId(3)) }]);
//! assert_eq!(rt.dispatch(0, 0, 32).ids, [RequestId(2), RequestId(1)]);
//! assert_eq!(rt.get("batch"), Some(2));
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

#[doc(hidden)]
pub mod block_cache;
pub mod collections;
pub mod device_share;
pub mod habits;
pub mod hw_tag;
mod interface;
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

pub use collections::{
    Due, ElevatorQueue, ExpiryFifo, Extent, IdHasher, IdMap, IdSet, Positioned, SectorSet, Word,
    WordMap,
};
pub use policy::{Policy, TunableSpec};
pub use runtime::Runtime;
pub use types::{
    Completion, Dispatch, Group, Info, MergeEvent, MergeKind, MergeQuery, MergeRule, MergeRules,
    Op, PrioClass, Request, RequestId, Sector, Setup, Tunable,
};

/// The WIT package version this SDK implements, read from `wit/policy.wit` itself so the two
/// cannot disagree.
pub const INTERFACE_VERSION: &str = package_version(include_str!("../../wit/policy.wit"));

/// The `X` of the first `package NAMESPACE:NAME@X;` in a WIT source, at compile time.
const fn package_version(wit: &str) -> &str {
    let bytes = wit.as_bytes();
    let mut at = 0;
    while at < bytes.len() && bytes[at] != b'@' {
        at += 1;
    }
    let mut end = at;
    while end < bytes.len() && bytes[end] != b';' {
        end += 1;
    }
    assert!(
        end < bytes.len(),
        "wit/policy.wit names no package@version;"
    );
    let (head, _) = bytes.split_at(end);
    let (_, version) = head.split_at(at + 1);
    match core::str::from_utf8(version) {
        Ok(version) => version,
        Err(_) => panic!("wit/policy.wit: the package version is not UTF-8"),
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interface_version_is_the_wit_packages() {
        let wit = include_str!("../../wit/policy.wit");
        assert!(wit.starts_with(&format!("package schedhost:policy@{INTERFACE_VERSION};")));
        assert_eq!(package_version("package a:b@10.2.3;\n"), "10.2.3");
    }
}
