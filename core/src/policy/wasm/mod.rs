//! Policies as WebAssembly components under wasmtime.
//!
//! The engine is set up for the hot path: Cranelift at `speed`, the pooling allocator so an
//! instance is ~5 µs from its `InstancePre`, and no `component-model-async` (it triples the
//! cost of every call). The world has no imports, so the linker is empty.
//!
//! Every call runs under [`SandboxLimits`]: a deadline by epoch interruption (a thread ticks the
//! engine's epoch every millisecond), a cap on the instance's memory, and optionally fuel.
//! A call that breaks one fails with a [`FaultKind::Timeout`] or [`FaultKind::Memory`]
//! fault, and the core ejects the policy.

use std::path::{Path, PathBuf};
use std::time::Duration;

use schedhost_sdk::packed;
use schedhost_sdk::{Completion, Dispatch, Info, Request, RequestId, Setup, Tunable};
use wasmtime::component::{Component, Linker, types::ComponentItem};
use wasmtime::{
    Config, InstanceAllocationStrategy, OptLevel, PoolingAllocationConfig, Store, Trap,
    WasmBacktrace,
};

use super::{Fault, FaultKind, PolicyBackend, Turn, answers, turn_by_parts};

use super::calls::{Caps, Scheduler, bindings};
use super::core_abi::CoreModule;

pub use super::calls::{INTERFACE, INTERFACE_VERSION};

mod bench_hooks;
mod runtime;
#[cfg(test)]
mod tests;

pub use runtime::{
    DEFAULT_CALL_DEADLINE_MS, DEFAULT_MEMORY_MIB, LoadError, LoadedPolicy, MAX_COMPONENT_BYTES,
    SandboxLimits, WasmRuntime, read_component,
};

impl WasmPolicy {
    /// The answer a `turn` kept back because it was more than one id.
    fn take_answer(&mut self) -> Result<Dispatch, Fault> {
        arm(&mut self.store, self.ticks, self.fuel);
        self.calls
            .take_answer(&mut self.store)
            .map_err(|e| self.fault("take-answer", e))
    }

    /// One driver turn in as few crossings as it fits: flat scalars for at most one
    /// completion and one request and no merge, else one `turn-words` list.
    fn whole_turn(&mut self, now_ns: u64, turn: &Turn<'_>) -> Result<Option<Dispatch>, Fault> {
        if turn
            .dispatch
            .is_some_and(|(q, _)| q > packed::TURN_MAX_HW_QUEUE)
        {
            return turn_by_parts(self, now_ns, turn);
        }
        let (completion, request) = match (turn.completions, turn.merges, turn.requests) {
            (c @ ([] | [_]), [], r @ ([] | [_])) => (c.first(), r.first()),
            _ => return self.turn_words(now_ns, turn),
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
                self.calls.turn_flat(&mut self.store, now_ns, control, &r)
            }
            Some(c) => {
                let control =
                    packed::turn_control(parts | packed::TURN_COMPLETION, hw_queue, budget);
                let c = packed::completion_words(c);
                self.calls
                    .turn_after_completion(&mut self.store, now_ns, control, &c, &r)
            }
        }
        .map_err(|e| self.fault("turn", e))?;
        self.turn_answer(turn, result)
    }

    /// A turn `turn`'s flat scalars cannot carry, in one `turn-words` crossing.
    fn turn_words(&mut self, now_ns: u64, turn: &Turn<'_>) -> Result<Option<Dispatch>, Fault> {
        let (hw_queue, budget) = turn.dispatch.unwrap_or_default();
        let parts = if turn.dispatch.is_some() {
            packed::TURN_DISPATCH
        } else {
            0
        };
        let control = packed::turn_control(parts, hw_queue, budget);
        arm(&mut self.store, self.ticks, self.fuel);
        let result = self
            .calls
            .turn_words(&mut self.store, now_ns, control, turn)
            .map_err(|e| {
                let mut fault = self.fault("turn-words", e);
                fault.message = format!(
                    "one crossing standing for {}; {}",
                    super::turn_call_names(turn),
                    fault.message
                );
                fault
            })?;
        self.turn_answer(turn, result)
    }

    /// A turn's dispatch answer from its two words: none or one id and the wake-up, or the
    /// whole answer `take-answer` holds. The one id fills the list the host gave back.
    fn turn_answer(
        &mut self,
        turn: &Turn<'_>,
        result: (u64, u64),
    ) -> Result<Option<Dispatch>, Fault> {
        if turn.dispatch.is_none() {
            return Ok(None);
        }
        if result.0 == packed::TURN_MORE {
            return self.take_answer().map(Some);
        }
        let ids = std::mem::take(&mut self.spare_ids);
        Ok(packed::turn_answer(result, ids))
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
    /// The id list of an answer the core gave back: a one-id `turn` answer fills it.
    spare_ids: Vec<RequestId>,
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

/// Every call but `turn` is the same: its deadline and fuel armed, the call made, a failure
/// classified as the call's fault, and the answer checked against the interface's bounds
/// ([`Checked`]): generated from the interface's list.
macro_rules! component_calls {
    (
        provided { $($provided:tt)* }
        required { $($(#[$doc:meta])* $wit:literal $name:ident($($arg:ident: $ty:ty $(as $shape:ty)?),* $(,)?) -> $ret:ty;)* }
    ) => {
        #[allow(
            clippy::extra_unused_lifetimes,
            reason = "every call is declared with 'a, whether its arguments borrow or not"
        )]
        impl PolicyBackend for WasmPolicy {
            $(fn $name<'a>(&mut self, $($arg: $ty),*) -> Result<$ret, Fault> {
                arm(&mut self.store, self.ticks, self.fuel);
                let answer = self
                    .calls
                    .$name(&mut self.store, $($arg),*)
                    .map_err(|e| self.fault($wit, e))?;
                Checked::checked(answer, $wit)
            })*

            fn fresh(&self) -> Option<Box<dyn PolicyBackend>> {
                let policy = self.loaded.instantiate().ok()?;
                Some(Box::new(policy))
            }

            fn memory_bytes(&mut self) -> Option<u64> {
                Some(self.store.data().peak as u64)
            }

            fn give_back(&mut self, answer: Dispatch) {
                answer.recycle_into(&mut self.spare_ids);
            }

            fn turn(&mut self, now_ns: u64, turn: &Turn<'_>) -> Result<Option<Dispatch>, Fault> {
                self.whole_turn(now_ns, turn)
            }
        }
    };
}
super::interface::policy_calls!(component_calls);

/// A component's answer as the host takes it: checked against the interface's bounds where
/// it has any (a policy's name, its tunables, the length of a refusal).
trait Checked: Sized {
    /// The answer of `call`, or the fault it is.
    fn checked(self, call: &'static str) -> Result<Self, Fault> {
        let _ = call;
        Ok(self)
    }
}

impl Checked for Info {
    fn checked(self, call: &'static str) -> Result<Self, Fault> {
        answers::check_info(&self).map_err(|why| invalid(call, why))?;
        Ok(self)
    }
}

impl Checked for Vec<Tunable> {
    fn checked(self, call: &'static str) -> Result<Self, Fault> {
        answers::check_tunables(&self).map_err(|why| invalid(call, why))?;
        Ok(self)
    }
}

/// A refusal: kept, cut to the length the host keeps of one.
impl Checked for Result<(), String> {
    fn checked(self, _: &'static str) -> Result<Self, Fault> {
        Ok(self.map_err(answers::bound_message))
    }
}

/// Answers the core checks itself (dispatched ids), or that have no bounds.
impl Checked for Dispatch {}
impl Checked for Option<i64> {}
impl Checked for Vec<u8> {}
impl Checked for () {}
impl Checked for bool {}
impl Checked for u32 {}
