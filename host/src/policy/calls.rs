//! How the host calls a policy instance: the interface's functions as one trait
//! ([`Scheduler`]), implemented by wasmtime's component bindings here and by a component's
//! core module in [`super::core_abi`]; and what every policy store carries ([`Caps`]).

use schedhost_sdk::{
    Completion, Dispatch, Info, MergeEvent, MergeKind, MergeQuery, Op, Request, RequestId, Setup,
    Tunable, packed,
};
use wasmtime::{ResourceLimiter, Store};

pub(super) mod bindings {
    wasmtime::component::bindgen!({ path: "../wit", world: "policy" });
}

pub(super) use bindings::exports::schedhost::policy::scheduler as wit;

/// The interface this host speaks: the export a policy component must have.
pub const INTERFACE: &str = "schedhost:policy/scheduler";
/// Its version.
pub const INTERFACE_VERSION: &str = schedhost_sdk::INTERFACE_VERSION;

/// The component's answer in the SDK's types. The ids are the guest's word and the core
/// checks each; the collect reuses the list's allocation (same layout).
fn dispatch_of(answer: wit::DispatchAnswer) -> Dispatch {
    Dispatch {
        ids: answer.ids.into_iter().map(RequestId).collect(),
        wake_at_ns: answer.wake_at_ns,
    }
}

/// `requests` in the interface's packed encoding, for the component API to lower.
fn packed_requests(requests: &[Request]) -> Vec<u64> {
    requests.iter().flat_map(packed::request_words).collect()
}

/// The interface's functions on one instance, in the SDK's types: through the component API
/// (below) or, for a component that wraps one plain core module, through that module
/// ([`super::core_abi`]). Declared from the interface's list ([`super::interface`]), with the
/// flat crossings of the host's `turn` besides.
macro_rules! scheduler_trait {
    (
        required { $($(#[$doc:meta])* $wit:literal $name:ident($($arg:ident: $ty:ty),* $(,)?) -> $ret:ty;)* }
        provided { $($provided:tt)* }
    ) => {
        #[allow(
            clippy::extra_unused_lifetimes,
            reason = "every call is declared with 'a, whether its arguments borrow or not"
        )]
        pub(super) trait Scheduler: Send {
            $($(#[$doc])* fn $name<'a>(
                &self,
                store: &mut Store<Caps>,
                $($arg: $ty),*
            ) -> wasmtime::Result<$ret>;)*

            /// `turn`: one request and a dispatch, in flat scalars.
            fn turn_flat(
                &self,
                store: &mut Store<Caps>,
                now_ns: u64,
                control: u64,
                r: &[u64; 5],
            ) -> wasmtime::Result<u64>;

            /// `turn-after-completion`: a completion, one request and a dispatch.
            fn turn_after_completion(
                &self,
                store: &mut Store<Caps>,
                now_ns: u64,
                control: u64,
                c: &[u64; 5],
                r: &[u64; 5],
            ) -> wasmtime::Result<u64>;

            /// `take-answer`: the dispatch a `turn` kept back.
            fn take_answer(&self, store: &mut Store<Caps>) -> wasmtime::Result<Dispatch>;
        }
    };
}
super::interface::policy_calls!(scheduler_trait);

fn to_wit_op(op: Op) -> wit::Op {
    match op {
        Op::Read => wit::Op::Read,
        Op::Write => wit::Op::Write,
        Op::Flush => wit::Op::Flush,
        Op::Discard => wit::Op::Discard,
    }
}

fn to_wit_kind(kind: MergeKind) -> wit::MergeKind {
    match kind {
        MergeKind::Back => wit::MergeKind::Back,
        MergeKind::Front => wit::MergeKind::Front,
    }
}

impl Scheduler for bindings::Policy {
    fn info(&self, store: &mut Store<Caps>) -> wasmtime::Result<Info> {
        let info = self.schedhost_policy_scheduler().call_info(store)?;
        Ok(Info {
            name: info.name,
            version: info.version,
            merge_veto: info.merge_veto,
            completions: info.completions,
        })
    }
    fn tunables(&self, store: &mut Store<Caps>) -> wasmtime::Result<Vec<Tunable>> {
        let list = self.schedhost_policy_scheduler().call_tunables(store)?;
        Ok(list
            .into_iter()
            .map(|t| Tunable {
                name: t.name,
                default: t.default,
                min: t.min,
                max: t.max,
                unit: t.unit,
                help: t.help,
            })
            .collect())
    }
    fn init(
        &self,
        store: &mut Store<Caps>,
        setup: &Setup,
        settings: &[(String, i64)],
    ) -> wasmtime::Result<Result<(), String>> {
        let setup = wit::Setup {
            hw_queues: setup.hw_queues,
            queue_depth: setup.queue_depth,
            nr_requests: setup.nr_requests,
        };
        self.schedhost_policy_scheduler()
            .call_init(store, setup, settings)
    }
    fn get(&self, store: &mut Store<Caps>, name: &str) -> wasmtime::Result<Option<i64>> {
        self.schedhost_policy_scheduler().call_get(store, name)
    }
    fn set(
        &self,
        store: &mut Store<Caps>,
        name: &str,
        value: i64,
    ) -> wasmtime::Result<Result<(), String>> {
        self.schedhost_policy_scheduler()
            .call_set(store, name, value)
    }
    fn insert(
        &self,
        store: &mut Store<Caps>,
        now_ns: u64,
        requests: &[Request],
    ) -> wasmtime::Result<()> {
        self.schedhost_policy_scheduler()
            .call_insert(store, now_ns, &packed_requests(requests))
    }
    fn requeue(
        &self,
        store: &mut Store<Caps>,
        now_ns: u64,
        requests: &[Request],
    ) -> wasmtime::Result<()> {
        self.schedhost_policy_scheduler()
            .call_requeue(store, now_ns, &packed_requests(requests))
    }
    fn dispatch(
        &self,
        store: &mut Store<Caps>,
        now_ns: u64,
        hw_queue: u32,
        budget: u32,
    ) -> wasmtime::Result<Dispatch> {
        self.schedhost_policy_scheduler()
            .call_dispatch(store, now_ns, hw_queue, budget)
            .map(dispatch_of)
    }
    fn insert_and_dispatch(
        &self,
        store: &mut Store<Caps>,
        now_ns: u64,
        requests: &[Request],
        hw_queue: u32,
        budget: u32,
    ) -> wasmtime::Result<Dispatch> {
        let words = packed_requests(requests);
        self.schedhost_policy_scheduler()
            .call_insert_and_dispatch(store, now_ns, &words, hw_queue, budget)
            .map(dispatch_of)
    }
    fn allow_merge(&self, store: &mut Store<Caps>, q: &MergeQuery) -> wasmtime::Result<bool> {
        let query = wit::MergeQuery {
            target: q.target.0,
            target_ctx: q.target_ctx,
            ctx: q.ctx,
            op: to_wit_op(q.op),
            sector: q.sector.0,
            sectors: q.sectors,
            sync: q.sync,
            kind: to_wit_kind(q.kind),
        };
        self.schedhost_policy_scheduler()
            .call_allow_merge(store, query)
    }
    fn merged(
        &self,
        store: &mut Store<Caps>,
        now_ns: u64,
        events: &[MergeEvent],
    ) -> wasmtime::Result<()> {
        let batch: Vec<wit::MergeEvent> = events
            .iter()
            .map(|e| wit::MergeEvent {
                target: e.target.0,
                sector: e.sector.0,
                sectors: e.sectors,
                kind: to_wit_kind(e.kind),
                absorbed: e.absorbed.map(|id| id.0),
            })
            .collect();
        self.schedhost_policy_scheduler()
            .call_merged(store, now_ns, &batch)
    }
    fn completed(
        &self,
        store: &mut Store<Caps>,
        now_ns: u64,
        done: &[Completion],
    ) -> wasmtime::Result<()> {
        let words: Vec<u64> = done.iter().flat_map(packed::completion_words).collect();
        self.schedhost_policy_scheduler()
            .call_completed(store, now_ns, &words)
    }
    fn limit_depth(&self, store: &mut Store<Caps>, op: Op, sync: bool) -> wasmtime::Result<u32> {
        self.schedhost_policy_scheduler()
            .call_limit_depth(store, to_wit_op(op), sync)
    }
    fn save_state(&self, store: &mut Store<Caps>) -> wasmtime::Result<Vec<u8>> {
        self.schedhost_policy_scheduler().call_save_state(store)
    }
    fn restore_state(
        &self,
        store: &mut Store<Caps>,
        state: &[u8],
    ) -> wasmtime::Result<Result<(), String>> {
        self.schedhost_policy_scheduler()
            .call_restore_state(store, state)
    }
    fn turn_flat(
        &self,
        store: &mut Store<Caps>,
        now_ns: u64,
        control: u64,
        r: &[u64; 5],
    ) -> wasmtime::Result<u64> {
        self.schedhost_policy_scheduler()
            .call_turn(store, now_ns, control, r[0], r[1], r[2], r[3], r[4])
    }
    fn turn_after_completion(
        &self,
        store: &mut Store<Caps>,
        now_ns: u64,
        control: u64,
        c: &[u64; 5],
        r: &[u64; 5],
    ) -> wasmtime::Result<u64> {
        self.schedhost_policy_scheduler()
            .call_turn_after_completion(
                store, now_ns, control, c[0], c[1], c[2], c[3], c[4], r[0], r[1], r[2], r[3], r[4],
            )
    }
    fn take_answer(&self, store: &mut Store<Caps>) -> wasmtime::Result<Dispatch> {
        self.schedhost_policy_scheduler()
            .call_take_answer(store)
            .map(dispatch_of)
    }
}

/// A store's memory cap, remembering whether the policy hit it. The cap is for the whole
/// policy: every memory of every core instance in its store counts, so a component cannot
/// multiply it by bringing more memories.
#[derive(Debug)]
pub(super) struct Caps {
    /// Most bytes of linear memory, all memories together.
    pub(super) memory_bytes: usize,
    /// A growth past the cap was refused (the fault is then a memory fault).
    pub(super) hit: bool,
    /// Linear memory granted so far, all memories together (wasm memories never shrink, so
    /// this is also the high-water mark).
    pub(super) peak: usize,
}

/// Core instances one policy's store may hold: the components `policy build` writes have
/// one; the cap keeps a component from taking the process's instance pool for itself.
pub const MAX_CORE_INSTANCES: usize = 4;
/// Linear memories, and tables, one policy's store may hold.
pub const MAX_MEMORIES: usize = 4;

#[cfg(test)]
impl Caps {
    /// Caps for a store the tests build by hand.
    pub(super) fn for_tests() -> Self {
        Self {
            memory_bytes: 1 << 20,
            hit: false,
            peak: 0,
        }
    }
}

impl ResourceLimiter for Caps {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        // The store's memories together: this one's growth added to what all hold.
        let total = self.peak.saturating_sub(current).saturating_add(desired);
        if total > self.memory_bytes {
            self.hit = true;
            return Err(wasmtime::Error::msg(format!(
                "memory would grow to {total} bytes (all the policy's memories together), past the policy's cap of {} bytes",
                self.memory_bytes
            )));
        }
        self.peak = total;
        Ok(true)
    }

    fn instances(&self) -> usize {
        MAX_CORE_INSTANCES
    }

    fn memories(&self) -> usize {
        MAX_MEMORIES
    }

    fn tables(&self) -> usize {
        MAX_MEMORIES
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= 100_000)
    }
}
