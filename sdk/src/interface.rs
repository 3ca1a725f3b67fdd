//! The policy interface, declared once: every call the host makes of a running policy, as
//! one list that the SDK and the host both expand.
//!
//! Each entry is `"wit-name" name(args) -> answer;`, the export's name in `wit/policy.wit`,
//! the method's name and arguments in the SDK's types, and its answer. An argument written
//! `as $crate::packed::Words` is a slice of [`crate::packed::Packed`] records crossing as
//! one `list<u64>`; every other argument crosses as the WIT type of the same name. From the
//! list come:
//!
//! - in the SDK: [`crate::Runtime`]'s method for every `forwarded` call (it hands the call
//!   to the [`crate::Policy`] method of the same name) and a component's exports
//!   (`guest.rs`), which turn the WIT's values into the SDK's and call the runtime;
//! - in the host: the `PolicyBackend` trait and its wrappers, native policies' calls, the
//!   calls through wasmtime's component API, and the canonical-ABI calls into a component's
//!   core module with the core signature every export must have.
//!
//! So a new call is an entry here, its export in the WIT and its method on [`crate::Policy`];
//! the crossings are written once per type, not per call. `runtime` calls are those the
//! runtime answers itself (tunables, the absorbed-id filter); the host's flat `turn`
//! crossing is not in the list, as it is the host's and the runtime's own protocol.

/// Hands `$then!` the interface's calls (see the module). `all [then] extra…` passes every
/// call as `required { … }` after `extra`; `forwarded [then]` only the forwarded ones.
#[doc(hidden)]
#[macro_export]
macro_rules! __policy_calls {
    (@pick all [$($then:tt)*] [$($extra:tt)*]
        runtime { $($r:tt)* } forwarded { $($f:tt)* }) => {
        $($then)*! { $($extra)* required { $($r)* $($f)* } }
    };
    (@pick forwarded [$($then:tt)*] [$($extra:tt)*]
        runtime { $($r:tt)* } forwarded { $($f:tt)* }) => {
        $($then)*! { $($extra)* forwarded { $($f)* } }
    };
    ($mode:ident [$($then:tt)*] $($extra:tt)*) => {
        $crate::__policy_calls! { @pick $mode [$($then)*] [$($extra)*]
            runtime {
                /// Name, version, merge preference.
                "info" info() -> $crate::Info;
                /// Tunables with defaults and ranges.
                "tunables" tunables() -> Vec<$crate::Tunable>;
                /// Creates the policy state for a device with `settings` applied; the
                /// policy's refusal of a setting is `Err(message)`.
                "init" init(setup: &'a $crate::Setup, settings: &'a [(String, i64)]) -> Result<(), String>;
                /// A tunable's value.
                "get" get(name: &'a str) -> Option<i64>;
                /// Changes a tunable; a refusal is `Err(message)`.
                "set" set(name: &'a str, value: i64) -> Result<(), String>;
                /// Up to `budget` requests for `hw_queue`.
                "dispatch" dispatch(now_ns: u64, hw_queue: u32, budget: u32) -> $crate::Dispatch;
                /// `insert` then `dispatch`, in one call.
                "insert-and-dispatch" insert_and_dispatch(
                    now_ns: u64,
                    requests: &'a [$crate::Request] as $crate::packed::Words,
                    hw_queue: u32,
                    budget: u32
                ) -> $crate::Dispatch;
                /// Queued requests grew or were absorbed.
                "merged" merged(now_ns: u64, events: &'a [$crate::MergeEvent]) -> ();
                /// Scheduler tags a kind of request may hold (`u32::MAX`: no limit).
                "limit-depth" limit_depth(op: $crate::Op, sync: bool) -> u32;
                /// Which merges to ask `allow-merge` about, as `MergeRules::bits`
                /// (every one allowed unasked without `merge-veto`).
                "merge-rules" merge_rules() -> u32;
            }
            forwarded {
                /// Requests enter the scheduler.
                "insert" insert(now_ns: u64, requests: &'a [$crate::Request] as $crate::packed::Words) -> ();
                /// Dispatched requests came back from a busy device: the policy holds them
                /// again.
                "requeue" requeue(now_ns: u64, requests: &'a [$crate::Request] as $crate::packed::Words) -> ();
                /// May a bio join a queued request?
                "allow-merge" allow_merge(query: &'a $crate::MergeQuery) -> bool;
                /// Dispatched requests finished.
                "completed" completed(now_ns: u64, done: &'a [$crate::Completion] as $crate::packed::Words) -> ();
                /// The groups' parameters: every group, at the start and whenever one
                /// changes.
                "groups" groups(now_ns: u64, groups: &'a [$crate::Group] as $crate::packed::Words) -> ();
                /// State for a newer build.
                "save-state" save_state() -> Vec<u8>;
                /// Continues from saved state; a refusal is `Err(message)`.
                "restore-state" restore_state(state: &'a [u8]) -> Result<(), String>;
            }
        }
    };
}
