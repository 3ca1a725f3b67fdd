//! The policy runtime: one trait over the two ways to run a policy — a WebAssembly component
//! under wasmtime, or the same SDK crate linked natively — and how a `--policy` argument
//! finds one.

pub mod answers;
mod budget;
mod calls;
mod core_abi;
mod interface;
mod native;
pub mod phases;
mod resolve;
mod timed;
mod wasm;

use std::fmt;

use schedhost_sdk::{Completion, Dispatch, MergeEvent, Request};

pub use interface::{Answered, Around, Call, PolicyBackend, Wrapped};
pub use native::{NativePolicy, native_names, native_policy};
pub use resolve::{Loaded, PolicySource, bundled_dirs, load, resolve};
pub use timed::Timing;
pub use wasm::{
    DEFAULT_CALL_DEADLINE_MS, DEFAULT_MEMORY_MIB, LoadError, LoadedPolicy, MAX_COMPONENT_BYTES,
    SandboxLimits, WasmPolicy, WasmRuntime, read_component,
};

/// Why a policy call failed: the policy, not the host, is at fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    /// What kind of failure.
    pub kind: FaultKind,
    /// The interface function that was called.
    pub call: &'static str,
    /// What happened, with the wasm backtrace where there is one.
    pub message: String,
}

/// The kinds of policy failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// The policy trapped (a panic, an out-of-bounds access, `unreachable`).
    Trap,
    /// A call ran past its deadline (or out of fuel).
    Timeout,
    /// The policy's memory would have grown past its cap.
    Memory,
    /// The policy answered something the interface forbids.
    InvalidAnswer,
    /// The policy held requests and dispatched nothing for longer than the watchdog allows.
    Starved,
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.kind {
            FaultKind::Trap => "trapped",
            FaultKind::Timeout => "ran past its deadline",
            FaultKind::Memory => "ran out of memory",
            FaultKind::InvalidAnswer => "gave an invalid answer",
            FaultKind::Starved => "starved its requests",
        };
        write!(f, "policy {kind} in `{}`: {}", self.call, self.message)
    }
}

impl std::error::Error for Fault {}

/// Makes the policy a core falls back to after a fault: injected, so the core links no
/// policy of its own.
pub type Fallback = Box<dyn Fn() -> Box<dyn PolicyBackend> + Send>;

/// The built-in FIFO: the bundled noop, linked natively.
///
/// # Panics
/// Never: noop is always linked.
pub fn builtin_fifo() -> Box<dyn PolicyBackend> {
    #[expect(clippy::expect_used, reason = "noop is linked into every build")]
    native_policy("noop").expect("noop is linked into every build")
}

/// `policy` and the built-in FIFO as a core runs them: each call's wall-clock time added to
/// `clock` when one is given (metering, for the metrics), the policy untouched otherwise.
pub fn for_core(
    policy: Box<dyn PolicyBackend>,
    clock: Option<&std::sync::Arc<std::sync::atomic::AtomicU64>>,
) -> (Box<dyn PolicyBackend>, Fallback) {
    match clock {
        Some(clock) => {
            let for_fallback = std::sync::Arc::clone(clock);
            (
                timed(policy, clock),
                Box::new(move || timed(builtin_fifo(), &for_fallback)),
            )
        }
        None => (policy, Box::new(builtin_fifo)),
    }
}

/// `policy`, its calls timed into `clock`.
pub fn timed(
    policy: Box<dyn PolicyBackend>,
    clock: &std::sync::Arc<std::sync::atomic::AtomicU64>,
) -> Box<dyn PolicyBackend> {
    Box::new(Wrapped::new(
        policy,
        Timing::new(std::sync::Arc::clone(clock)),
    ))
}

/// What one turn of a driver has for the policy.
#[derive(Debug, Clone, Copy)]
pub struct Turn<'a> {
    /// Dispatched requests that finished.
    pub completions: &'a [Completion],
    /// Queued requests that grew or were absorbed.
    pub merges: &'a [MergeEvent],
    /// Requests entering the scheduler.
    pub requests: &'a [Request],
    /// Then dispatch up to `.1` requests on hardware queue `.0`.
    pub dispatch: Option<(u32, u32)>,
}

/// The calls `turn_by_parts` would make of `turn`, named as the interface names them
/// (`` `merged` and `insert-and-dispatch` ``): what a fault in one crossing of the whole
/// turn happened in, for the policy's author.
pub fn turn_call_names(turn: &Turn<'_>) -> String {
    let last = match (turn.requests.is_empty(), turn.dispatch.is_some()) {
        (true, false) => None,
        (true, true) => Some("dispatch"),
        (false, false) => Some("insert"),
        (false, true) => Some("insert-and-dispatch"),
    };
    let names: Vec<String> = [
        (!turn.completions.is_empty()).then_some("completed"),
        (!turn.merges.is_empty()).then_some("merged"),
        last,
    ]
    .into_iter()
    .flatten()
    .map(|name| format!("`{name}`"))
    .collect();
    names.join(" and ")
}

/// `turn` as the separate calls: `completed`, `merged`, then `insert_and_dispatch`,
/// `insert` or `dispatch`, skipping what is empty. The first fault ends the turn.
///
/// # Errors
/// The fault of the call that failed.
pub fn turn_by_parts<P: PolicyBackend + ?Sized>(
    policy: &mut P,
    now_ns: u64,
    turn: &Turn<'_>,
) -> Result<Option<Dispatch>, Fault> {
    if !turn.completions.is_empty() {
        policy.completed(now_ns, turn.completions)?;
    }
    if !turn.merges.is_empty() {
        policy.merged(now_ns, turn.merges)?;
    }
    match (turn.requests, turn.dispatch) {
        ([], None) => Ok(None),
        ([], Some((hw_queue, budget))) => policy.dispatch(now_ns, hw_queue, budget).map(Some),
        (requests, None) => policy.insert(now_ns, requests).map(|()| None),
        (requests, Some((hw_queue, budget))) => policy
            .insert_and_dispatch(now_ns, requests, hw_queue, budget)
            .map(Some),
    }
}
