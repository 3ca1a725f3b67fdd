//! Policies as WebAssembly components under wasmtime.
//!
//! The engine is set up for the hot path: Cranelift at `speed`, the pooling allocator so an
//! instance is ~5 µs from its `InstancePre`, and no `component-model-async` (it triples the
//! cost of every call). The world has no imports, so the linker is empty.
//!
//! Every call runs under [`Limits`]: a deadline by epoch interruption (a thread ticks the
//! engine's epoch every millisecond), a cap on the instance's memory, and optionally fuel.
//! A call that breaks one fails with a [`FaultKind::Timeout`] or [`FaultKind::Memory`]
//! fault, and the core ejects the policy.

use std::path::{Path, PathBuf};
use std::time::Duration;

use schedhost_sdk::packed;
use schedhost_sdk::{
    Completion, Dispatch, Info, MergeEvent, MergeKind, MergeQuery, Op, Request, RequestId, Setup,
    Tunable,
};
use wasmtime::component::{Component, Linker, types::ComponentItem};
use wasmtime::{
    Config, Engine, InstanceAllocationStrategy, OptLevel, PoolingAllocationConfig, Store, Trap,
    WasmBacktrace,
};

use super::{Fault, FaultKind, PolicyBackend, Turn, answers, turn_by_parts};

use super::calls::{Caps, Scheduler, bindings, wit};
use super::core_abi::CoreModule;

pub use super::calls::{INTERFACE, INTERFACE_VERSION};

mod bench_hooks;
mod runtime;
#[cfg(test)]
mod tests;

pub use runtime::{
    DEFAULT_CALL_DEADLINE_MS, DEFAULT_MEMORY_MIB, Limits, LoadError, LoadedPolicy,
    MAX_COMPONENT_BYTES, WasmRuntime, read_component,
};

impl WasmPolicy {
    /// The answer a `turn` kept back because it was more than one id.
    fn take_answer(&mut self) -> Result<Dispatch, Fault> {
        arm(&mut self.store, self.ticks, self.fuel);
        self.calls
            .call_take_answer(&mut self.store)
            .map_err(|e| self.fault("take-answer", e))
    }
}

/// A policy's answer to `call` that breaks the interface's bounds.
fn invalid(call: &'static str, why: String) -> Fault {
    Fault {
        kind: FaultKind::InvalidAnswer,
        call,
        message: why,
    }
}

/// Gives the next call its deadline and fuel.
pub(super) fn arm(store: &mut Store<Caps>, ticks: u64, fuel: Option<u64>) {
    store.set_epoch_deadline(ticks);
    if let Some(fuel) = fuel {
        // Fails only when fuel is off in the engine, which `fuel` being set rules out.
        let _ = store.set_fuel(fuel);
    }
}

/// One instance of a policy component.
pub struct WasmPolicy {
    store: Store<Caps>,
    calls: Box<dyn Scheduler>,
    /// Epoch ticks each call may run.
    ticks: u64,
    fuel: Option<u64>,
    /// Where fresh instances come from.
    loaded: LoadedPolicy,
    /// `info`'s checked answer: a policy describes itself once, and scrapes and status
    /// lines ask often.
    info: Option<Info>,
}

impl std::fmt::Debug for WasmPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WasmPolicy").finish_non_exhaustive()
    }
}

impl WasmPolicy {
    /// The failure of `call`, classified, with the wasm backtrace wasmtime attached.
    fn fault(&self, call: &'static str, err: wasmtime::Error) -> Fault {
        let kind = match err.downcast_ref::<Trap>() {
            Some(Trap::Interrupt | Trap::OutOfFuel) => FaultKind::Timeout,
            _ if self.store.data().hit => FaultKind::Memory,
            _ => FaultKind::Trap,
        };
        // The cause first, then the guest's frames: the report shows the first line.
        let cause = err.root_cause().to_string();
        let frames = err
            .downcast_ref::<WasmBacktrace>()
            .map(|trace| format!("\n{trace}"))
            .unwrap_or_default();
        let message = match (kind, self.fuel) {
            (FaultKind::Timeout, Some(fuel)) => format!(
                "ran past its deadline ({} ms) or its fuel ({fuel}){frames}",
                self.ticks - 1
            ),
            (FaultKind::Timeout, None) => {
                format!("ran past its deadline ({} ms){frames}", self.ticks - 1)
            }
            _ => format!("{cause}{frames}"),
        };
        Fault {
            kind,
            call,
            message,
        }
    }
}

impl PolicyBackend for WasmPolicy {
    fn fresh(&self) -> Option<Box<dyn PolicyBackend>> {
        let policy = self.loaded.instantiate().ok()?;
        Some(Box::new(policy))
    }

    fn memory_bytes(&mut self) -> Option<u64> {
        Some(self.store.data().peak as u64)
    }

    fn info(&mut self) -> Result<Info, Fault> {
        if let Some(info) = &self.info {
            return Ok(info.clone());
        }
        arm(&mut self.store, self.ticks, self.fuel);
        let info = self
            .calls
            .call_info(&mut self.store)
            .map_err(|e| self.fault("info", e))?;
        let info = Info {
            name: info.name,
            version: info.version,
            merge_veto: info.merge_veto,
            completions: info.completions,
        };
        answers::check_info(&info).map_err(|why| invalid("info", why))?;
        self.info = Some(info.clone());
        Ok(info)
    }

    fn tunables(&mut self) -> Result<Vec<Tunable>, Fault> {
        arm(&mut self.store, self.ticks, self.fuel);
        let list = self
            .calls
            .call_tunables(&mut self.store)
            .map_err(|e| self.fault("tunables", e))?;
        let list: Vec<Tunable> = list
            .into_iter()
            .map(|t| Tunable {
                name: t.name,
                default: t.default,
                min: t.min,
                max: t.max,
                unit: t.unit,
                help: t.help,
            })
            .collect();
        answers::check_tunables(&list).map_err(|why| invalid("tunables", why))?;
        Ok(list)
    }

    fn init(
        &mut self,
        setup: &Setup,
        settings: &[(String, i64)],
    ) -> Result<Result<(), String>, Fault> {
        arm(&mut self.store, self.ticks, self.fuel);
        let setup = wit::Setup {
            hw_queues: setup.hw_queues,
            queue_depth: setup.queue_depth,
            nr_requests: setup.nr_requests,
        };
        self.calls
            .call_init(&mut self.store, setup, settings)
            .map(|answer| answer.map_err(answers::bound_message))
            .map_err(|e| self.fault("init", e))
    }

    fn get(&mut self, name: &str) -> Result<Option<i64>, Fault> {
        arm(&mut self.store, self.ticks, self.fuel);
        self.calls
            .call_get(&mut self.store, name)
            .map_err(|e| self.fault("get", e))
    }

    fn set(&mut self, name: &str, value: i64) -> Result<Result<(), String>, Fault> {
        arm(&mut self.store, self.ticks, self.fuel);
        self.calls
            .call_set(&mut self.store, name, value)
            .map(|answer| answer.map_err(answers::bound_message))
            .map_err(|e| self.fault("set", e))
    }

    fn insert(&mut self, now_ns: u64, requests: &[Request]) -> Result<(), Fault> {
        arm(&mut self.store, self.ticks, self.fuel);
        self.calls
            .call_insert(&mut self.store, now_ns, requests)
            .map_err(|e| self.fault("insert", e))
    }

    fn requeue(&mut self, now_ns: u64, requests: &[Request]) -> Result<(), Fault> {
        arm(&mut self.store, self.ticks, self.fuel);
        self.calls
            .call_requeue(&mut self.store, now_ns, requests)
            .map_err(|e| self.fault("requeue", e))
    }

    fn dispatch(&mut self, now_ns: u64, hw_queue: u32, budget: u32) -> Result<Dispatch, Fault> {
        arm(&mut self.store, self.ticks, self.fuel);
        self.calls
            .call_dispatch(&mut self.store, now_ns, hw_queue, budget)
            .map_err(|e| self.fault("dispatch", e))
    }

    fn insert_and_dispatch(
        &mut self,
        now_ns: u64,
        requests: &[Request],
        hw_queue: u32,
        budget: u32,
    ) -> Result<Dispatch, Fault> {
        arm(&mut self.store, self.ticks, self.fuel);
        self.calls
            .call_insert_and_dispatch(&mut self.store, now_ns, requests, hw_queue, budget)
            .map_err(|e| self.fault("insert-and-dispatch", e))
    }

    fn turn(&mut self, now_ns: u64, turn: &Turn<'_>) -> Result<Option<Dispatch>, Fault> {
        let (completion, request) = match (turn.completions, turn.merges, turn.requests) {
            (c @ ([] | [_]), [], r @ ([] | [_]))
                if turn
                    .dispatch
                    .is_none_or(|(q, _)| q <= packed::TURN_MAX_HW_QUEUE) =>
            {
                (c.first(), r.first())
            }
            _ => return turn_by_parts(self, now_ns, turn),
        };
        let mut parts = 0;
        let r = request.map_or([0; packed::WORDS], |r| {
            parts |= packed::TURN_REQUEST;
            packed::request_words(r)
        });
        let (hw_queue, budget) = turn.dispatch.unwrap_or_default();
        if turn.dispatch.is_some() {
            parts |= packed::TURN_DISPATCH;
        }
        arm(&mut self.store, self.ticks, self.fuel);
        let result = match completion {
            None => {
                let control = packed::turn_control(parts, hw_queue, budget);
                self.calls.call_turn(&mut self.store, now_ns, control, &r)
            }
            Some(c) => {
                let control =
                    packed::turn_control(parts | packed::TURN_COMPLETION, hw_queue, budget);
                let c = packed::completion_words(c);
                self.calls
                    .call_turn_after_completion(&mut self.store, now_ns, control, &c, &r)
            }
        }
        .map_err(|e| self.fault("turn", e))?;
        if turn.dispatch.is_none() {
            return Ok(None);
        }
        Ok(Some(match result {
            packed::TURN_NONE => Dispatch::default(),
            packed::TURN_MORE => self.take_answer()?,
            id => Dispatch {
                ids: vec![RequestId(id)],
                wake_at_ns: None,
            },
        }))
    }

    fn allow_merge(&mut self, q: &MergeQuery) -> Result<bool, Fault> {
        arm(&mut self.store, self.ticks, self.fuel);
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
        self.calls
            .call_allow_merge(&mut self.store, query)
            .map_err(|e| self.fault("allow-merge", e))
    }

    fn merged(&mut self, now_ns: u64, events: &[MergeEvent]) -> Result<(), Fault> {
        arm(&mut self.store, self.ticks, self.fuel);
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
        self.calls
            .call_merged(&mut self.store, now_ns, &batch)
            .map_err(|e| self.fault("merged", e))
    }

    fn completed(&mut self, now_ns: u64, done: &[Completion]) -> Result<(), Fault> {
        arm(&mut self.store, self.ticks, self.fuel);
        self.calls
            .call_completed(&mut self.store, now_ns, done)
            .map_err(|e| self.fault("completed", e))
    }

    fn limit_depth(&mut self, op: Op, sync: bool) -> Result<u32, Fault> {
        arm(&mut self.store, self.ticks, self.fuel);
        self.calls
            .call_limit_depth(&mut self.store, to_wit_op(op), sync)
            .map_err(|e| self.fault("limit-depth", e))
    }

    fn save_state(&mut self) -> Result<Vec<u8>, Fault> {
        arm(&mut self.store, self.ticks, self.fuel);
        self.calls
            .call_save_state(&mut self.store)
            .map_err(|e| self.fault("save-state", e))
    }

    fn restore_state(&mut self, state: &[u8]) -> Result<Result<(), String>, Fault> {
        arm(&mut self.store, self.ticks, self.fuel);
        self.calls
            .call_restore_state(&mut self.store, state)
            .map_err(|e| self.fault("restore-state", e))
    }
}

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
