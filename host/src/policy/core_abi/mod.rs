//! Calling a policy component through its one core module.
//!
//! A component call through wasmtime's component API costs about 90 ns on its own (lifting,
//! lowering and the component's call protocol; `schedhost bench --phases`), a core wasm call
//! about 11 ns. Every SDK-built policy is a component wrapping exactly one core module
//! without imports, whose exports are the interface's functions under their canonical-ABI
//! names. For those, the host instantiates that module alone and speaks the canonical ABI
//! itself: flat scalars straight through, lists and strings through the module's
//! `cabi_realloc` and memory, results read from the return area, then the post-return
//! function. Components of another shape run through the component API ([`super::wasm`]).
//!
//! The sandbox is the same: the same code runs in the same store, under the same memory cap,
//! epoch deadline and fuel. What the guest writes is not trusted: every pointer and length is
//! checked against its memory before it is read, lengths are bounded before anything is
//! copied, and text must be UTF-8.

use schedhost_sdk::{
    Completion, Dispatch, Info, MergeEvent, MergeKind, MergeQuery, Op, Request, Setup, Tunable,
    packed,
};
use wasmtime::{Engine, Instance, Module, Store, TypedFunc};

use super::calls::{Caps, INTERFACE, INTERFACE_VERSION, Scheduler};

/// Most ids a dispatch answer is read with: more than any budget, so an oversized answer is
/// still seen as one (the core refuses it) without copying what a guest claims.
const MAX_ANSWER_IDS: u32 = 1 << 16;
/// Most bytes of saved state read back.
const MAX_STATE_BYTES: u32 = 64 << 20;

mod guest;
mod layout;

use guest::{Guest, bad};

/// The core module of a component, if the component is one this module can call.
#[derive(Clone)]
pub(super) struct CoreModule {
    module: Module,
}

impl CoreModule {
    /// The component's one core module, if it has exactly one, it imports nothing, and it
    /// exports the interface's functions with their canonical-ABI types.
    pub(super) fn extract(engine: &Engine, component: &[u8]) -> Option<Self> {
        // Every core module at any depth: the nested components wit-component writes only
        // re-export the interface's types, and hold no code.
        let mut modules = Vec::new();
        for payload in wasmparser::Parser::new(0).parse_all(component) {
            if let wasmparser::Payload::ModuleSection {
                unchecked_range, ..
            } = payload.ok()?
            {
                modules.push(unchecked_range);
            }
        }
        let [range] = modules.as_slice() else {
            return None;
        };
        let module = Module::new(engine, component.get(range.clone())?).ok()?;
        if module.imports().len() != 0 {
            return None;
        }
        let core = Self { module };
        core.has_every_export().then_some(core)
    }

    /// True iff every export the calls need is there with its core type (the typed lookups
    /// at instantiation would fail otherwise).
    fn has_every_export(&self) -> bool {
        use wasmtime::ValType::{I32, I64};
        let func = |name: &str, params: &[wasmtime::ValType], results: &[wasmtime::ValType]| {
            self.module
                .get_export(name)
                .and_then(|e| e.func().cloned())
                .is_some_and(|ty| {
                    let p: Vec<_> = ty.params().collect();
                    let r: Vec<_> = ty.results().collect();
                    p.len() == params.len()
                        && r.len() == results.len()
                        && p.iter().zip(params).all(|(a, b)| a.matches(b))
                        && r.iter().zip(results).all(|(a, b)| a.matches(b))
                })
        };
        let f = |name: &str| format!("{INTERFACE}@{INTERFACE_VERSION}#{name}");
        let core = |types: &[layout::Flat]| -> Vec<wasmtime::ValType> {
            types
                .iter()
                .map(|t| match t {
                    layout::Flat::I32 => I32,
                    layout::Flat::I64 => I64,
                })
                .collect()
        };
        self.module
            .get_export("memory")
            .is_some_and(|e| e.memory().is_some())
            && func("cabi_realloc", &[I32, I32, I32, I32], &[I32])
            && layout::EXPORTS
                .iter()
                .all(|(name, params, results)| func(&f(name), &core(params), &core(results)))
    }

    /// Instantiates the module in `store` and looks up every function once.
    pub(super) fn instantiate(&self, store: &mut Store<Caps>) -> wasmtime::Result<CoreCalls> {
        let instance = Instance::new(&mut *store, &self.module, &[])?;
        let name = |n: &str| format!("{INTERFACE}@{INTERFACE_VERSION}#{n}");
        let post = |store: &mut Store<Caps>, n: &str| {
            instance
                .get_typed_func::<u32, ()>(&mut *store, &format!("cabi_post_{}", name(n)))
                .ok()
        };
        macro_rules! typed {
            ($n:expr) => {
                instance.get_typed_func(&mut *store, &name($n))?
            };
        }
        Ok(CoreCalls {
            guest: Guest(
                instance
                    .get_memory(&mut *store, "memory")
                    .ok_or_else(|| wasmtime::Error::msg("the policy exports no memory"))?,
            ),
            realloc: instance.get_typed_func(&mut *store, "cabi_realloc")?,
            info: (typed!("info"), post(store, "info")),
            tunables: (typed!("tunables"), post(store, "tunables")),
            init: (typed!("init"), post(store, "init")),
            get: (typed!("get"), post(store, "get")),
            set: (typed!("set"), post(store, "set")),
            insert: typed!("insert"),
            requeue: typed!("requeue"),
            dispatch: (typed!("dispatch"), post(store, "dispatch")),
            insert_and_dispatch: (
                typed!("insert-and-dispatch"),
                post(store, "insert-and-dispatch"),
            ),
            allow_merge: typed!("allow-merge"),
            merged: typed!("merged"),
            completed: typed!("completed"),
            limit_depth: typed!("limit-depth"),
            save_state: (typed!("save-state"), post(store, "save-state")),
            restore_state: (typed!("restore-state"), post(store, "restore-state")),
            turn: typed!("turn"),
            turn_after_completion: typed!("turn-after-completion"),
            take_answer: (typed!("take-answer"), post(store, "take-answer")),
        })
    }
}

/// A function returning its results in a return area, and its post-return function.
type WithPost<P> = (TypedFunc<P, u32>, Option<TypedFunc<u32, ()>>);

/// The interface's functions in one core instance.
pub(super) struct CoreCalls {
    guest: Guest,
    realloc: TypedFunc<(u32, u32, u32, u32), u32>,
    info: WithPost<()>,
    tunables: WithPost<()>,
    init: WithPost<(u32, u32, u32, u32, u32)>,
    get: WithPost<(u32, u32)>,
    set: WithPost<(u32, u32, i64)>,
    insert: TypedFunc<(u64, u32, u32), ()>,
    requeue: TypedFunc<(u64, u32, u32), ()>,
    dispatch: WithPost<(u64, u32, u32)>,
    insert_and_dispatch: WithPost<(u64, u32, u32, u32, u32)>,
    #[expect(clippy::type_complexity, reason = "a merge query's flat scalars")]
    allow_merge: TypedFunc<(u64, u32, u32, u32, u64, u32, u32, u32), u32>,
    merged: TypedFunc<(u64, u32, u32), ()>,
    completed: TypedFunc<(u64, u32, u32), ()>,
    limit_depth: TypedFunc<(u32, u32), u32>,
    save_state: WithPost<()>,
    restore_state: WithPost<(u32, u32)>,
    #[expect(clippy::type_complexity, reason = "the flat scalars of one crossing")]
    turn: TypedFunc<(u64, u64, u64, u64, u64, u64, u64), u64>,
    #[expect(clippy::type_complexity, reason = "the flat scalars of one crossing")]
    turn_after_completion:
        TypedFunc<(u64, u64, u64, u64, u64, u64, u64, u64, u64, u64, u64, u64), u64>,
    take_answer: WithPost<()>,
}

impl CoreCalls {
    /// Room for `len` bytes in guest memory, allocated by its `cabi_realloc` at `align`: the
    /// pointer and the slice to fill.
    fn allocate<'s>(
        &self,
        store: &'s mut Store<Caps>,
        len: usize,
        align: u32,
    ) -> wasmtime::Result<(u32, &'s mut [u8])> {
        let size = u32::try_from(len).map_err(|_| bad("an argument past 4 GiB"))?;
        let ptr = self.realloc.call(&mut *store, (0, 0, align, size))?;
        if ptr % align.max(1) != 0 {
            return Err(bad("a misaligned allocation"));
        }
        let start = ptr as usize;
        let target = self
            .guest
            .0
            .data_mut(store)
            .get_mut(start..start + len)
            .ok_or_else(|| bad("an allocation outside memory"))?;
        Ok((ptr, target))
    }

    /// Copies `bytes` into guest memory; the pointer.
    fn lower(&self, store: &mut Store<Caps>, bytes: &[u8], align: u32) -> wasmtime::Result<u32> {
        let (ptr, target) = self.allocate(store, bytes.len(), align)?;
        target.copy_from_slice(bytes);
        Ok(ptr)
    }

    /// Packs `records` straight into guest memory, little-endian as the guest reads them:
    /// the list's pointer and its length in words.
    fn lower_packed<T>(
        &self,
        store: &mut Store<Caps>,
        records: &[T],
        words_of: impl Fn(&T) -> [u64; packed::WORDS],
    ) -> wasmtime::Result<(u32, u32)> {
        const RECORD_BYTES: usize = packed::WORDS * 8;
        let words = records
            .len()
            .checked_mul(packed::WORDS)
            .and_then(|w| u32::try_from(w).ok())
            .ok_or_else(|| bad("an argument past 4 GiB"))?;
        let (ptr, target) = self.allocate(store, words as usize * 8, 8)?;
        for (slot, record) in target.chunks_exact_mut(RECORD_BYTES).zip(records) {
            for (bytes, word) in slot.chunks_exact_mut(8).zip(words_of(record)) {
                bytes.copy_from_slice(&word.to_le_bytes());
            }
        }
        Ok((ptr, words))
    }

    fn lower_str(&self, store: &mut Store<Caps>, s: &str) -> wasmtime::Result<(u32, u32)> {
        Ok((self.lower(store, s.as_bytes(), 1)?, s.len() as u32))
    }
}

/// The WIT enum `op`'s case index.
fn op_index(op: Op) -> u32 {
    match op {
        Op::Read => 0,
        Op::Write => 1,
        Op::Flush => 2,
        Op::Discard => 3,
    }
}

/// The WIT enum `merge-kind`'s case index.
fn kind_index(kind: MergeKind) -> u8 {
    match kind {
        MergeKind::Back => 0,
        MergeKind::Front => 1,
    }
}

impl Scheduler for CoreCalls {
    fn info(&self, store: &mut Store<Caps>) -> wasmtime::Result<Info> {
        answered(store, &self.info, (), |s, area| self.guest.info_at(s, area))
    }

    fn tunables(&self, store: &mut Store<Caps>) -> wasmtime::Result<Vec<Tunable>> {
        answered(store, &self.tunables, (), |s, area| {
            self.guest.tunables_at(s, area)
        })
    }

    fn init(
        &self,
        store: &mut Store<Caps>,
        setup: &Setup,
        settings: &[(String, i64)],
    ) -> wasmtime::Result<Result<(), String>> {
        let mut tuples = Vec::with_capacity(settings.len() * layout::SETTING_SIZE);
        for (name, value) in settings {
            let (ptr, len) = self.lower_str(store, name)?;
            let mut tuple = [0u8; layout::SETTING_SIZE];
            tuple[..4].copy_from_slice(&ptr.to_le_bytes());
            tuple[layout::LEN as usize..8].copy_from_slice(&len.to_le_bytes());
            tuple[layout::SETTING_VALUE..].copy_from_slice(&value.to_le_bytes());
            tuples.extend_from_slice(&tuple);
        }
        let list = self.lower(store, &tuples, 8)?;
        let params = (
            setup.hw_queues,
            setup.queue_depth,
            setup.nr_requests,
            list,
            settings.len() as u32,
        );
        answered(store, &self.init, params, |s, area| {
            self.guest.unit_or_string(s, area)
        })
    }

    fn get(&self, store: &mut Store<Caps>, name: &str) -> wasmtime::Result<Option<i64>> {
        let (ptr, len) = self.lower_str(store, name)?;
        answered(store, &self.get, (ptr, len), |s, area| {
            self.guest.option_s64_at(s, area)
        })
    }

    fn set(
        &self,
        store: &mut Store<Caps>,
        name: &str,
        value: i64,
    ) -> wasmtime::Result<Result<(), String>> {
        let (ptr, len) = self.lower_str(store, name)?;
        answered(store, &self.set, (ptr, len, value), |s, area| {
            self.guest.unit_or_string(s, area)
        })
    }

    fn insert(
        &self,
        store: &mut Store<Caps>,
        now_ns: u64,
        requests: &[Request],
    ) -> wasmtime::Result<()> {
        let (ptr, len) = self.lower_packed(store, requests, packed::request_words)?;
        self.insert.call(store, (now_ns, ptr, len))
    }

    fn requeue(
        &self,
        store: &mut Store<Caps>,
        now_ns: u64,
        requests: &[Request],
    ) -> wasmtime::Result<()> {
        let (ptr, len) = self.lower_packed(store, requests, packed::request_words)?;
        self.requeue.call(store, (now_ns, ptr, len))
    }

    fn dispatch(
        &self,
        store: &mut Store<Caps>,
        now_ns: u64,
        hw_queue: u32,
        budget: u32,
    ) -> wasmtime::Result<Dispatch> {
        answered(
            store,
            &self.dispatch,
            (now_ns, hw_queue, budget),
            |s, area| self.guest.answer_at(s, area),
        )
    }

    fn insert_and_dispatch(
        &self,
        store: &mut Store<Caps>,
        now_ns: u64,
        requests: &[Request],
        hw_queue: u32,
        budget: u32,
    ) -> wasmtime::Result<Dispatch> {
        let (ptr, len) = self.lower_packed(store, requests, packed::request_words)?;
        let params = (now_ns, ptr, len, hw_queue, budget);
        answered(store, &self.insert_and_dispatch, params, |s, area| {
            self.guest.answer_at(s, area)
        })
    }

    fn allow_merge(&self, store: &mut Store<Caps>, q: &MergeQuery) -> wasmtime::Result<bool> {
        let answer = self.allow_merge.call(
            store,
            (
                q.target.0,
                q.target_ctx,
                q.ctx,
                op_index(q.op),
                q.sector.0,
                q.sectors,
                u32::from(q.sync),
                u32::from(kind_index(q.kind)),
            ),
        )?;
        Ok(answer != 0)
    }

    fn merged(
        &self,
        store: &mut Store<Caps>,
        now_ns: u64,
        events: &[MergeEvent],
    ) -> wasmtime::Result<()> {
        use layout::{
            EVENT_ABSORBED, EVENT_ABSORBED_VALUE, EVENT_KIND, EVENT_SECTOR, EVENT_SECTORS,
        };
        let mut bytes = Vec::with_capacity(events.len() * layout::EVENT_SIZE);
        for e in events {
            let mut record = [0u8; layout::EVENT_SIZE];
            record[..EVENT_SECTOR].copy_from_slice(&e.target.0.to_le_bytes());
            record[EVENT_SECTOR..EVENT_SECTOR + 8].copy_from_slice(&e.sector.0.to_le_bytes());
            record[EVENT_SECTORS..EVENT_SECTORS + 4].copy_from_slice(&e.sectors.to_le_bytes());
            record[EVENT_KIND] = kind_index(e.kind);
            if let Some(absorbed) = e.absorbed {
                record[EVENT_ABSORBED] = 1;
                record[EVENT_ABSORBED_VALUE..].copy_from_slice(&absorbed.0.to_le_bytes());
            }
            bytes.extend_from_slice(&record);
        }
        let ptr = self.lower(store, &bytes, 8)?;
        self.merged.call(store, (now_ns, ptr, events.len() as u32))
    }

    fn completed(
        &self,
        store: &mut Store<Caps>,
        now_ns: u64,
        done: &[Completion],
    ) -> wasmtime::Result<()> {
        let (ptr, len) = self.lower_packed(store, done, packed::completion_words)?;
        self.completed.call(store, (now_ns, ptr, len))
    }

    fn limit_depth(&self, store: &mut Store<Caps>, op: Op, sync: bool) -> wasmtime::Result<u32> {
        self.limit_depth
            .call(store, (op_index(op), u32::from(sync)))
    }

    fn save_state(&self, store: &mut Store<Caps>) -> wasmtime::Result<Vec<u8>> {
        answered(store, &self.save_state, (), |s, area| {
            self.guest.state_at(s, area)
        })
    }

    fn restore_state(
        &self,
        store: &mut Store<Caps>,
        state: &[u8],
    ) -> wasmtime::Result<Result<(), String>> {
        let ptr = self.lower(store, state, 1)?;
        answered(
            store,
            &self.restore_state,
            (ptr, state.len() as u32),
            |s, area| self.guest.unit_or_string(s, area),
        )
    }

    fn turn_flat(
        &self,
        store: &mut Store<Caps>,
        now_ns: u64,
        control: u64,
        r: &[u64; 5],
    ) -> wasmtime::Result<u64> {
        self.turn
            .call(store, (now_ns, control, r[0], r[1], r[2], r[3], r[4]))
    }

    fn turn_after_completion(
        &self,
        store: &mut Store<Caps>,
        now_ns: u64,
        control: u64,
        c: &[u64; 5],
        r: &[u64; 5],
    ) -> wasmtime::Result<u64> {
        self.turn_after_completion.call(
            store,
            (
                now_ns, control, c[0], c[1], c[2], c[3], c[4], r[0], r[1], r[2], r[3], r[4],
            ),
        )
    }

    fn take_answer(&self, store: &mut Store<Caps>) -> wasmtime::Result<Dispatch> {
        answered(store, &self.take_answer, (), |s, area| {
            self.guest.answer_at(s, area)
        })
    }
}

/// Calls `func` with `params`, reads its answer from the return area with `read`, then lets
/// the guest free what the answer held (its post-return function, if it has one).
fn answered<P: wasmtime::WasmParams, T>(
    store: &mut Store<Caps>,
    (func, post): &WithPost<P>,
    params: P,
    read: impl FnOnce(&Store<Caps>, u32) -> wasmtime::Result<T>,
) -> wasmtime::Result<T> {
    let area = func.call(&mut *store, params)?;
    let answer = read(store, area)?;
    if let Some(post) = post {
        post.call(store, area)?;
    }
    Ok(answer)
}

#[cfg(test)]
mod tests;
