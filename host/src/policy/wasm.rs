//! Policies as WebAssembly components under wasmtime.
//!
//! The engine is set up for the hot path: Cranelift at `speed`, the pooling allocator so an
//! instance is ~5 µs from its `InstancePre`, and no `component-model-async` (it triples the
//! cost of every call). The world has no imports, so the linker is empty.

use std::path::{Path, PathBuf};

use schedhost_sdk::packed;
use schedhost_sdk::{
    Completion, Dispatch, Info, MergeEvent, MergeKind, MergeQuery, Op, Request, Setup, Tunable,
};
use wasmtime::component::{Component, Linker, types::ComponentItem};
use wasmtime::{
    Config, Engine, InstanceAllocationStrategy, OptLevel, PoolingAllocationConfig, Store,
};

use super::{Fault, FaultKind, PolicyBackend};

mod bindings {
    wasmtime::component::bindgen!({ path: "../wit", world: "policy" });
}

use bindings::exports::schedhost::policy::scheduler as wit;

/// The interface this host speaks: the export a policy component must have.
pub const INTERFACE: &str = "schedhost:policy/scheduler";
/// Its version.
pub const INTERFACE_VERSION: &str = schedhost_sdk::INTERFACE_VERSION;

/// Why a file is not a policy this host can run.
#[derive(Debug, thiserror::Error)]
#[expect(missing_docs, reason = "each field is named in its variant's message")]
pub enum LoadError {
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
        "{path} implements {found}, but this schedhost speaks {INTERFACE}@{INTERFACE_VERSION}; rebuild the policy against schedhost-sdk {INTERFACE_VERSION}"
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

/// The wasmtime engine, shared by every policy of a host.
#[derive(Clone)]
pub struct WasmRuntime {
    engine: Engine,
}

impl std::fmt::Debug for WasmRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WasmRuntime").finish_non_exhaustive()
    }
}

/// A compiled, checked policy component, ready to instantiate per device.
#[derive(Clone)]
pub struct LoadedPolicy {
    pre: bindings::PolicyPre<()>,
    engine: Engine,
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
        let mut config = Config::new();
        config.wasm_component_model(true);
        config.cranelift_opt_level(OptLevel::Speed);
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
        Ok(Self {
            engine: Engine::new(&config)?,
        })
    }

    /// Reads, compiles and checks a policy component.
    ///
    /// # Errors
    /// A [`LoadError`] naming the file and what is wrong with it.
    pub fn load(&self, path: &Path) -> Result<LoadedPolicy, LoadError> {
        let bytes = std::fs::read(path).map_err(|source| LoadError::Read {
            path: path.to_owned(),
            source,
        })?;
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
        let component =
            Component::from_binary(&self.engine, bytes).map_err(|e| LoadError::Invalid {
                path: path.clone(),
                message: format!("{e:#}"),
            })?;
        check_shape(&self.engine, &component, &path)?;
        let linker = Linker::<()>::new(&self.engine);
        let pre = linker
            .instantiate_pre(&component)
            .and_then(bindings::PolicyPre::new)
            .map_err(|e| LoadError::Invalid {
                path: path.clone(),
                message: format!("{e:#}"),
            })?;
        Ok(LoadedPolicy {
            pre,
            engine: self.engine.clone(),
            path,
        })
    }
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
    /// A fresh instance with its own store.
    ///
    /// # Errors
    /// If instantiation fails (the pool is exhausted, or the component's start traps).
    pub fn instantiate(&self) -> anyhow::Result<WasmPolicy> {
        let mut store = Store::new(&self.engine, ());
        let instance = self.pre.instantiate(&mut store)?;
        Ok(WasmPolicy {
            store,
            instance,
            words: Vec::new(),
        })
    }
}

/// One instance of a policy component.
pub struct WasmPolicy {
    store: Store<()>,
    instance: bindings::Policy,
    /// Reused buffer for packed batches.
    words: Vec<u64>,
}

impl std::fmt::Debug for WasmPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WasmPolicy").finish_non_exhaustive()
    }
}

/// A trap or host-side error in `call`, with the wasm backtrace wasmtime attached.
fn trap(call: &'static str, err: wasmtime::Error) -> Fault {
    Fault {
        kind: FaultKind::Trap,
        call,
        message: format!("{err:?}"),
    }
}

impl PolicyBackend for WasmPolicy {
    fn info(&mut self) -> Result<Info, Fault> {
        let info = self
            .instance
            .schedhost_policy_scheduler()
            .call_info(&mut self.store)
            .map_err(|e| trap("info", e))?;
        Ok(Info {
            name: info.name,
            version: info.version,
            merge_veto: info.merge_veto,
            completions: info.completions,
        })
    }

    fn tunables(&mut self) -> Result<Vec<Tunable>, Fault> {
        let list = self
            .instance
            .schedhost_policy_scheduler()
            .call_tunables(&mut self.store)
            .map_err(|e| trap("tunables", e))?;
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
        &mut self,
        setup: &Setup,
        settings: &[(String, i64)],
    ) -> Result<Result<(), String>, Fault> {
        let setup = wit::Setup {
            hw_queues: setup.hw_queues,
            queue_depth: setup.queue_depth,
            nr_requests: setup.nr_requests,
        };
        self.instance
            .schedhost_policy_scheduler()
            .call_init(&mut self.store, setup, settings)
            .map_err(|e| trap("init", e))
    }

    fn get(&mut self, name: &str) -> Result<Option<i64>, Fault> {
        self.instance
            .schedhost_policy_scheduler()
            .call_get(&mut self.store, name)
            .map_err(|e| trap("get", e))
    }

    fn set(&mut self, name: &str, value: i64) -> Result<Result<(), String>, Fault> {
        self.instance
            .schedhost_policy_scheduler()
            .call_set(&mut self.store, name, value)
            .map_err(|e| trap("set", e))
    }

    fn insert(&mut self, now_ns: u64, requests: &[Request]) -> Result<(), Fault> {
        self.words.clear();
        for request in requests {
            packed::pack_request(request, &mut self.words);
        }
        self.instance
            .schedhost_policy_scheduler()
            .call_insert(&mut self.store, now_ns, &self.words)
            .map_err(|e| trap("insert", e))
    }

    fn dispatch(&mut self, now_ns: u64, hw_queue: u32, budget: u32) -> Result<Dispatch, Fault> {
        let answer = self
            .instance
            .schedhost_policy_scheduler()
            .call_dispatch(&mut self.store, now_ns, hw_queue, budget)
            .map_err(|e| trap("dispatch", e))?;
        Ok(Dispatch {
            ids: answer.ids,
            wake_at_ns: answer.wake_at_ns,
        })
    }

    fn insert_and_dispatch(
        &mut self,
        now_ns: u64,
        requests: &[Request],
        hw_queue: u32,
        budget: u32,
    ) -> Result<Dispatch, Fault> {
        self.words.clear();
        for request in requests {
            packed::pack_request(request, &mut self.words);
        }
        let answer = self
            .instance
            .schedhost_policy_scheduler()
            .call_insert_and_dispatch(&mut self.store, now_ns, &self.words, hw_queue, budget)
            .map_err(|e| trap("insert-and-dispatch", e))?;
        Ok(Dispatch {
            ids: answer.ids,
            wake_at_ns: answer.wake_at_ns,
        })
    }

    fn allow_merge(&mut self, q: &MergeQuery) -> Result<bool, Fault> {
        let query = wit::MergeQuery {
            target: q.target,
            target_ctx: q.target_ctx,
            ctx: q.ctx,
            op: to_wit_op(q.op),
            sector: q.sector,
            sectors: q.sectors,
            sync: q.sync,
            kind: to_wit_kind(q.kind),
        };
        self.instance
            .schedhost_policy_scheduler()
            .call_allow_merge(&mut self.store, query)
            .map_err(|e| trap("allow-merge", e))
    }

    fn merged(&mut self, now_ns: u64, events: &[MergeEvent]) -> Result<(), Fault> {
        let batch: Vec<wit::MergeEvent> = events
            .iter()
            .map(|e| wit::MergeEvent {
                target: e.target,
                sector: e.sector,
                sectors: e.sectors,
                kind: to_wit_kind(e.kind),
                absorbed: e.absorbed,
            })
            .collect();
        self.instance
            .schedhost_policy_scheduler()
            .call_merged(&mut self.store, now_ns, &batch)
            .map_err(|e| trap("merged", e))
    }

    fn completed(&mut self, now_ns: u64, done: &[Completion]) -> Result<(), Fault> {
        self.words.clear();
        for completion in done {
            packed::pack_completion(completion, &mut self.words);
        }
        self.instance
            .schedhost_policy_scheduler()
            .call_completed(&mut self.store, now_ns, &self.words)
            .map_err(|e| trap("completed", e))
    }

    fn limit_depth(&mut self, op: Op, sync: bool) -> Result<u32, Fault> {
        self.instance
            .schedhost_policy_scheduler()
            .call_limit_depth(&mut self.store, to_wit_op(op), sync)
            .map_err(|e| trap("limit-depth", e))
    }

    fn save_state(&mut self) -> Result<Vec<u8>, Fault> {
        self.instance
            .schedhost_policy_scheduler()
            .call_save_state(&mut self.store)
            .map_err(|e| trap("save-state", e))
    }

    fn restore_state(&mut self, state: &[u8]) -> Result<Result<(), String>, Fault> {
        self.instance
            .schedhost_policy_scheduler()
            .call_restore_state(&mut self.store, state)
            .map_err(|e| trap("restore-state", e))
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
