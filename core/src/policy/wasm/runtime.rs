//! The wasmtime engine and the components it compiles: limits, loading and checking a
//! component, and instances of it.

use super::*;

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
pub struct SandboxLimits {
    /// Wall-clock time per call (rounded up to the epoch tick, 1 ms).
    pub call_deadline: Duration,
    /// Linear memory per instance.
    pub memory_bytes: usize,
    /// Fuel per call (about one unit per wasm instruction), for a deadline that does not
    /// depend on the machine; `None` leaves fuel off (it costs every call a little).
    pub fuel: Option<u64>,
}

impl Default for SandboxLimits {
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
    pub(super) engine: wasmtime::Engine,
    limits: SandboxLimits,
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
    /// Its one core module, when it is called through that ([`crate::policy::core_abi`]).
    core: Option<CoreModule>,
    engine: wasmtime::Engine,
    limits: SandboxLimits,
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
        Self::with_limits(SandboxLimits::default())
    }

    /// An engine whose policy calls run under `limits`.
    ///
    /// # Errors
    /// As [`WasmRuntime::new`].
    pub fn with_limits(limits: SandboxLimits) -> anyhow::Result<Self> {
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
        let engine = wasmtime::Engine::new(&config).or_else(|_| {
            config.allocation_strategy(InstanceAllocationStrategy::OnDemand);
            wasmtime::Engine::new(&config)
        })?;
        start_epoch_ticker(&engine)?;
        Ok(Self { engine, limits })
    }

    /// The limits every call runs under.
    pub fn limits(&self) -> SandboxLimits {
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
        crate::policy::budget::within_budget(bytes).map_err(|why| LoadError::Invalid {
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
fn start_epoch_ticker(engine: &wasmtime::Engine) -> std::io::Result<()> {
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
fn check_shape(
    engine: &wasmtime::Engine,
    component: &Component,
    path: &Path,
) -> Result<(), LoadError> {
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
    /// How calls reach it: `core module` (its one core module, `policy::core_abi`) or
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
            spare_ids: Vec::new(),
        })
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
