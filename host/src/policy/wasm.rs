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

/// Why a file is not a policy this host can run.
#[derive(Debug, thiserror::Error)]
#[expect(missing_docs, reason = "each field is named in its variant's message")]
pub enum LoadError {
    /// Not a regular file (a FIFO, a device such as /dev/zero, a directory), or larger than
    /// [`MAX_COMPONENT_BYTES`].
    #[error("cannot load policy {path}: {why}")]
    Unreadable { path: PathBuf, why: String },
    /// The file could not be read.
    #[error("cannot read policy {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// Not WebAssembly at all.
    #[error("{path} is not a WebAssembly file (it does not start with \\0asm)")]
    NotWasm { path: PathBuf },
    /// A core module, not a component.
    #[error(
        "{path} is a core WebAssembly module, not a component; build policies with `cargo xtask build` (or `cargo xtask build-policy DIR`)"
    )]
    CoreModule { path: PathBuf },
    /// wasmtime refused it.
    #[error("{path} is not a valid component: {message}")]
    Invalid { path: PathBuf, message: String },
    /// Built against another version of the interface.
    #[error(
        "{path} implements {found}, but this schedhost speaks {INTERFACE}@{INTERFACE_VERSION}; rebuild the policy from its source against schedhost-sdk {INTERFACE_VERSION} (`cargo xtask build-policy DIR`)"
    )]
    Version { path: PathBuf, found: String },
    /// Some other component.
    #[error(
        "{path} is not a schedhost policy: it does not export {INTERFACE}@{INTERFACE_VERSION} (it exports: {exports})"
    )]
    NotPolicy { path: PathBuf, exports: String },
    /// It wants imports; policies get none.
    #[error(
        "{path} imports {imports}; a schedhost policy may not import anything (no WASI, no host functions)"
    )]
    Imports { path: PathBuf, imports: String },
}

/// What a policy call may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Wall-clock time per call (rounded up to the epoch tick, 1 ms).
    pub call_deadline: Duration,
    /// Linear memory per instance.
    pub memory_bytes: usize,
    /// Fuel per call (about one unit per wasm instruction), for a deadline that does not
    /// depend on the machine; `None` leaves fuel off (it costs every call a little).
    pub fuel: Option<u64>,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            call_deadline: Duration::from_millis(DEFAULT_CALL_DEADLINE_MS),
            memory_bytes: DEFAULT_MEMORY_MIB << 20,
            fuel: None,
        }
    }
}

/// A policy call that takes this long is stuck: real calls take microseconds.
pub const DEFAULT_CALL_DEADLINE_MS: u64 = 100;
/// Memory per policy instance: the bundled policies use well under 1 MiB at QD 2048.
pub const DEFAULT_MEMORY_MIB: usize = 64;
/// How often the epoch advances.
const EPOCH_TICK: Duration = Duration::from_millis(1);

/// The wasmtime engine, shared by every policy of a host.
#[derive(Clone)]
pub struct WasmRuntime {
    engine: Engine,
    limits: Limits,
}

impl std::fmt::Debug for WasmRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WasmRuntime").finish_non_exhaustive()
    }
}

/// A compiled, checked policy component, ready to instantiate per device.
#[derive(Clone)]
pub struct LoadedPolicy {
    pre: bindings::PolicyPre<Caps>,
    /// Its one core module, when it is called through that ([`super::core_abi`]).
    core: Option<CoreModule>,
    engine: Engine,
    limits: Limits,
    /// Where it came from.
    pub path: PathBuf,
}

impl std::fmt::Debug for LoadedPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadedPolicy")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl WasmRuntime {
    /// An engine configured for policy calls.
    ///
    /// # Errors
    /// If wasmtime rejects the configuration (for instance, no virtual memory for the pool).
    pub fn new() -> anyhow::Result<Self> {
        Self::with_limits(Limits::default())
    }

    /// An engine whose policy calls run under `limits`.
    ///
    /// # Errors
    /// As [`WasmRuntime::new`].
    pub fn with_limits(limits: Limits) -> anyhow::Result<Self> {
        let mut config = Config::new();
        config.wasm_component_model(true);
        config.cranelift_opt_level(OptLevel::Speed);
        config.epoch_interruption(true);
        config.consume_fuel(limits.fuel.is_some());
        if std::env::var_os("SCHEDHOST_PERFMAP").is_some() {
            // `perf report` then names the policies' compiled functions.
            config.profiler(wasmtime::ProfilingStrategy::PerfMap);
        }
        let mut pool = PoolingAllocationConfig::default();
        // A host runs one instance per device plus spares for swaps. Each memory keeps the
        // default 4 GiB reservation (virtual address space only): with it, Cranelift elides
        // bounds checks on every guest load and store. A policy may grow to 256 MiB.
        pool.total_component_instances(64);
        pool.total_core_instances(64);
        pool.total_memories(64);
        pool.total_tables(64);
        pool.max_memory_size(256 << 20);
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        // The pool reserves its address space up front (about half a TiB). Where that is
        // refused (`ulimit -v`, valgrind), memories are reserved one instance at a time; the
        // policy's memory cap is the store's limiter either way.
        let engine = Engine::new(&config).or_else(|_| {
            config.allocation_strategy(InstanceAllocationStrategy::OnDemand);
            Engine::new(&config)
        })?;
        start_epoch_ticker(&engine)?;
        Ok(Self { engine, limits })
    }

    /// The limits every call runs under.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Reads, compiles and checks a policy component.
    ///
    /// # Errors
    /// A [`LoadError`] naming the file and what is wrong with it.
    pub fn load(&self, path: &Path) -> Result<LoadedPolicy, LoadError> {
        let bytes = read_component(path)?;
        self.load_bytes(path, &bytes)
    }

    /// Compiles and checks a policy component from memory; `path` names it in errors.
    ///
    /// # Errors
    /// A [`LoadError`] naming what is wrong.
    pub fn load_bytes(&self, path: &Path, bytes: &[u8]) -> Result<LoadedPolicy, LoadError> {
        let path = path.to_owned();
        match bytes.get(..8) {
            Some([0, b'a', b's', b'm', 1, 0, 0, 0]) => return Err(LoadError::CoreModule { path }),
            Some([0, b'a', b's', b'm', ..]) => {}
            _ => return Err(LoadError::NotWasm { path }),
        }
        super::budget::check(bytes).map_err(|why| LoadError::Invalid {
            path: path.clone(),
            message: why,
        })?;
        let component =
            Component::from_binary(&self.engine, bytes).map_err(|e| LoadError::Invalid {
                path: path.clone(),
                message: format!("{e:#}"),
            })?;
        check_shape(&self.engine, &component, &path)?;
        let linker = Linker::<Caps>::new(&self.engine);
        let pre = linker
            .instantiate_pre(&component)
            .and_then(bindings::PolicyPre::new)
            .map_err(|e| LoadError::Invalid {
                path: path.clone(),
                message: format!("{e:#}"),
            })?;
        Ok(LoadedPolicy {
            pre,
            core: CoreModule::extract(&self.engine, bytes),
            engine: self.engine.clone(),
            limits: self.limits,
            path,
        })
    }
}

/// Advances the engine's epoch every tick for as long as the engine lives.
fn start_epoch_ticker(engine: &Engine) -> std::io::Result<()> {
    let weak = engine.weak();
    std::thread::Builder::new()
        .name("schedhost-epoch".into())
        .spawn(move || {
            while let Some(engine) = weak.upgrade() {
                engine.increment_epoch();
                drop(engine);
                std::thread::sleep(EPOCH_TICK);
            }
        })
        .map(drop)
}

/// Checks that the component exports our interface at a compatible version and imports nothing.
fn check_shape(engine: &Engine, component: &Component, path: &Path) -> Result<(), LoadError> {
    let ty = component.component_type();
    let imports: Vec<String> = ty
        .imports(engine)
        .map(|(name, _)| name.to_owned())
        .collect();
    if !imports.is_empty() {
        return Err(LoadError::Imports {
            path: path.to_owned(),
            imports: imports.join(", "),
        });
    }
    let exports: Vec<(String, bool)> = ty
        .exports(engine)
        .map(|(name, item)| {
            (
                name.to_owned(),
                matches!(item.ty, ComponentItem::ComponentInstance(_)),
            )
        })
        .collect();
    let wanted = format!("{INTERFACE}@{INTERFACE_VERSION}");
    if exports.iter().any(|(name, _)| *name == wanted) {
        return Ok(());
    }
    if let Some((found, _)) = exports
        .iter()
        .find(|(name, _)| name.starts_with(&format!("{INTERFACE}@")))
    {
        return Err(LoadError::Version {
            path: path.to_owned(),
            found: found.clone(),
        });
    }
    let names: Vec<&str> = exports.iter().map(|(name, _)| name.as_str()).collect();
    Err(LoadError::NotPolicy {
        path: path.to_owned(),
        exports: if names.is_empty() {
            "nothing".into()
        } else {
            names.join(", ")
        },
    })
}

impl LoadedPolicy {
    /// How calls reach it: `core module` (its one core module, [`super::core_abi`]) or
    /// `component` (wasmtime's component API).
    pub fn crossing(&self) -> &'static str {
        if self.core.is_some() {
            "core module"
        } else {
            "component"
        }
    }

    /// The same policy with every call through wasmtime's component API, for comparing the
    /// two ways of calling it (tests, `schedhost bench --phases`).
    #[must_use]
    pub fn through_component(mut self) -> Self {
        self.core = None;
        self
    }

    /// A fresh instance with its own store.
    ///
    /// # Errors
    /// If instantiation fails (the pool is exhausted, or the component's start traps).
    pub fn instantiate(&self) -> anyhow::Result<WasmPolicy> {
        let caps = Caps {
            memory_bytes: self.limits.memory_bytes,
            hit: false,
            peak: 0,
        };
        let mut store = Store::new(&self.engine, caps);
        store.limiter(|caps| caps);
        store.epoch_deadline_trap();
        // The deadline counts whole ticks from now: one more covers the tick in progress.
        let ticks = self.limits.call_deadline.as_millis().max(1) as u64 + 1;
        arm(&mut store, ticks, self.limits.fuel);
        let calls: Box<dyn Scheduler> = match &self.core {
            Some(core) => Box::new(core.instantiate(&mut store)?),
            None => Box::new(self.pre.instantiate(&mut store)?),
        };
        Ok(WasmPolicy {
            store,
            calls,
            ticks,
            fuel: self.limits.fuel,
            loaded: self.clone(),
            info: None,
        })
    }
}

/// Direct calls for the phase benchmark ([`super::phases`]), each one interface call.
impl WasmPolicy {
    pub(super) fn init_for_bench(&mut self) -> anyhow::Result<()> {
        let setup = Setup {
            hw_queues: 1,
            queue_depth: 1024,
            nr_requests: 1024,
        };
        PolicyBackend::init(self, &setup, &[])?.map_err(anyhow::Error::msg)
    }

    pub(super) fn bench_parts(&mut self) -> (&mut Store<Caps>, u64, Option<u64>) {
        (&mut self.store, self.ticks, self.fuel)
    }

    pub(super) fn bench_limit_depth(&mut self) -> anyhow::Result<()> {
        arm(&mut self.store, self.ticks, self.fuel);
        self.calls
            .call_limit_depth(&mut self.store, wit::Op::Read, true)?;
        Ok(())
    }

    /// `turn` (or, with a completion in `c`, `turn-after-completion`) with `parts`, a
    /// dispatch budget of 1 on queue 0.
    pub(super) fn bench_turn(
        &mut self,
        parts: u64,
        c: Option<&[u64; packed::WORDS]>,
        r: &[u64; packed::WORDS],
    ) -> anyhow::Result<u64> {
        arm(&mut self.store, self.ticks, self.fuel);
        Ok(match c {
            None => {
                let control = packed::turn_control(parts, 0, 1);
                self.calls.call_turn(&mut self.store, 0, control, r)?
            }
            Some(c) => {
                let control = packed::turn_control(parts | packed::TURN_COMPLETION, 0, 1);
                self.calls
                    .call_turn_after_completion(&mut self.store, 0, control, c, r)?
            }
        })
    }

    pub(super) fn bench_completed(&mut self, done: &Completion) -> anyhow::Result<()> {
        arm(&mut self.store, self.ticks, self.fuel);
        self.calls
            .call_completed(&mut self.store, 0, std::slice::from_ref(done))?;
        Ok(())
    }

    pub(super) fn bench_dispatch(&mut self) -> anyhow::Result<usize> {
        arm(&mut self.store, self.ticks, self.fuel);
        Ok(self
            .calls
            .call_dispatch(&mut self.store, 0, 0, 1)
            .map(|answer| answer.ids.len())?)
    }

    /// The budget is one id per request.
    pub(super) fn bench_insert_and_dispatch(
        &mut self,
        requests: &[Request],
    ) -> anyhow::Result<usize> {
        arm(&mut self.store, self.ticks, self.fuel);
        let budget = requests.len() as u32;
        Ok(self
            .calls
            .call_insert_and_dispatch(&mut self.store, 0, requests, 0, budget)
            .map(|answer| answer.ids.len())?)
    }
}

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

/// The largest component file schedhost reads: the bundled policies are well under 1 MiB.
pub const MAX_COMPONENT_BYTES: u64 = 64 << 20;

/// Reads a component file, which must be a regular file of at most [`MAX_COMPONENT_BYTES`]
/// (see [`crate::input`]: a FIFO cannot hang the caller, nor `/dev/zero` fill its memory).
///
/// # Errors
/// [`LoadError::Unreadable`] or [`LoadError::Read`], naming the path.
pub fn read_component(path: &Path) -> Result<Vec<u8>, LoadError> {
    crate::input::read_bytes(path, MAX_COMPONENT_BYTES).map_err(|source| match source.kind() {
        std::io::ErrorKind::InvalidInput | std::io::ErrorKind::FileTooLarge => {
            LoadError::Unreadable {
                path: path.to_owned(),
                why: source.to_string(),
            }
        }
        _ => LoadError::Read {
            path: path.to_owned(),
            source,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Instantiates the component `wat` in a store under a `cap_mib` memory cap, as
    /// [`LoadedPolicy::instantiate`] does; the error if it is refused.
    fn instantiate_under_cap(wat: &str, cap_mib: usize) -> Result<(), String> {
        let runtime = WasmRuntime::new().expect("an engine");
        let bytes = wat::parse_str(wat).expect("the test component parses");
        let component = Component::from_binary(&runtime.engine, &bytes).expect("it compiles");
        let caps = Caps {
            memory_bytes: cap_mib << 20,
            hit: false,
            peak: 0,
        };
        let mut store = Store::new(&runtime.engine, caps);
        store.limiter(|caps| caps);
        Linker::<Caps>::new(&runtime.engine)
            .instantiate(&mut store, &component)
            .map(|_| ())
            .map_err(|e| format!("{e:#}"))
    }

    /// A component of `instances` core instances, each with a memory of `pages` pages.
    fn many_memories(instances: usize, pages: u32) -> String {
        let mut wat = format!("(component (core module $m (memory {pages}))");
        for i in 0..instances {
            wat.push_str(&format!(" (core instance $i{i} (instantiate $m))"));
        }
        wat.push(')');
        wat
    }

    #[test]
    fn the_memory_cap_holds_for_all_of_a_policys_memories_together() {
        // Three memories of 32 MiB: each within a 64 MiB cap, together past it.
        let err = instantiate_under_cap(&many_memories(3, 512), 64).unwrap_err();
        assert!(err.contains("all the policy's memories together"), "{err}");
        assert!(instantiate_under_cap(&many_memories(1, 512), 64).is_ok());
    }

    #[test]
    fn a_policy_cannot_take_more_than_its_share_of_the_instance_pool() {
        // Sixteen tiny instances: no memory cap is near, the instance count is.
        let err = instantiate_under_cap(&many_memories(16, 1), 64).unwrap_err();
        assert!(err.contains("instance"), "{err}");
        let most = crate::policy::calls::MAX_CORE_INSTANCES;
        assert!(instantiate_under_cap(&many_memories(most, 1), 64).is_ok());
    }
}
