//! Shared setup: finding the bundled components, building cores and jobs.

use std::path::PathBuf;

use schedhost::core::{Action, Config, Core, Nomerges};
use schedhost::policy::{NativePolicy, PolicyBackend, WasmRuntime};
use schedhost_policy_noop::Noop;
use schedhost_sdk::{Policy, Setup};

/// The component `target/policies/NAME.wasm`, built by `cargo xtask build`.
///
/// Returns `None` (and says so) when it is missing, so plain `cargo test` works for the host
/// alone; under `cargo xtask test` (SCHEDHOST_REQUIRE_WASM=1) a missing component fails.
pub fn component(name: &str) -> Option<PathBuf> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../target/policies")
        .join(format!("{name}.wasm"));
    if path.is_file() {
        return Some(path);
    }
    assert!(
        std::env::var_os("SCHEDHOST_REQUIRE_WASM").is_none(),
        "{} is missing: `cargo xtask build` builds the policy components",
        path.display()
    );
    eprintln!(
        "skipping: {} not built (run `cargo xtask test` for the wasm tests)",
        path.display()
    );
    None
}

/// A wasmtime engine for tests.
pub fn runtime() -> WasmRuntime {
    WasmRuntime::new().expect("the engine starts")
}

/// Runs the core at `now` and returns the (sector, sectors) of every request dispatched.
pub fn dispatched(core: &mut Core, now: u64) -> Vec<(u64, u32)> {
    core.run(now).expect("noop does not fault");
    let mut out = Vec::new();
    while let Some(action) = core.poll_action() {
        if let Action::Dispatch {
            sector, sectors, ..
        } = action
        {
            out.push((sector, sectors));
        }
    }
    out
}

/// A core over the native noop policy.
pub fn noop_core(queue_depth: u32, max_sectors: u32, nomerges: Nomerges) -> Core {
    let mut config = Config::for_device(1, queue_depth, max_sectors);
    config.nomerges = nomerges;
    Core::new(
        config,
        Box::new(NativePolicy::<Noop>::default()),
        &[],
        Box::new(schedhost::policy::builtin_fifo),
    )
    .expect("noop starts")
}

/// Policy `P` built natively and, when its component `name` is built, as that component;
/// each initialised for `setup` with `settings`. Behaviour tests run every scenario on both.
pub fn both_builds<P: Policy + Send>(
    name: &str,
    setup: Setup,
    settings: &[(&str, i64)],
) -> Vec<(&'static str, Box<dyn PolicyBackend>)> {
    let mut out: Vec<(&'static str, Box<dyn PolicyBackend>)> =
        vec![("native", Box::new(NativePolicy::<P>::default()))];
    if let Some(path) = component(name) {
        out.push((
            "wasm",
            Box::new(
                runtime()
                    .load(&path)
                    .expect("component loads")
                    .instantiate()
                    .expect("instantiates"),
            ),
        ));
    }
    let settings: Vec<(String, i64)> = settings
        .iter()
        .map(|(k, v)| ((*k).to_owned(), *v))
        .collect();
    for (build, policy) in &mut out {
        policy
            .init(&setup, &settings)
            .expect("init does not trap")
            .unwrap_or_else(|e| panic!("{build}: {e}"));
    }
    out
}

/// Ids as plain numbers, for comparing answers with literals.
pub trait RawIds {
    /// Each id's number, in order.
    fn raw(&self) -> Vec<u64>;
}

impl RawIds for [schedhost_sdk::RequestId] {
    fn raw(&self) -> Vec<u64> {
        self.iter().map(|id| id.0).collect()
    }
}

/// Fresh instances of component `name` under `policy check`'s fuel (2 M units a call), for
/// `schedhost::contract::check`; `None` as [`component`].
pub fn component_maker(name: &str) -> Option<schedhost::contract::Maker> {
    let path = component(name)?;
    let limits = schedhost::policy::SandboxLimits {
        fuel: Some(2_000_000),
        ..schedhost::policy::SandboxLimits::default()
    };
    let loaded = WasmRuntime::with_limits(limits)
        .unwrap()
        .load(&path)
        .unwrap();
    Some(std::sync::Arc::new(move || {
        let p: Box<dyn PolicyBackend> = Box::new(loaded.instantiate().map_err(|e| e.to_string())?);
        Ok(p)
    }))
}

/// A group of `weight`, with nothing else set.
pub fn group(id: u32, weight: u32) -> schedhost_sdk::Group {
    schedhost_sdk::Group {
        id,
        weight,
        reserve_iops: None,
        limit_iops: [None; 2],
        limit_bps: [None; 2],
        latency_target_ns: None,
    }
}

/// A 4 KiB read's completion for `ctx`, waited and served 1 ms.
pub fn done(id: u64, ctx: u32) -> schedhost_sdk::Completion {
    schedhost_sdk::Completion {
        id: schedhost_sdk::RequestId(id),
        ctx,
        op: schedhost_sdk::Op::Read,
        sectors: 8,
        latency_ns: 1_000_000,
        service_ns: 1_000_000,
        status: 0,
    }
}

/// A synchronous 4 KiB read from submitter 0 at sector `id * 8`, with no priority and no
/// group.
pub fn read_request(id: u64) -> schedhost_sdk::Request {
    schedhost_sdk::Request {
        id: schedhost_sdk::RequestId(id),
        ctx: 0,
        op: schedhost_sdk::Op::Read,
        sector: schedhost_sdk::Sector(id * 8),
        sectors: 8,
        sync: true,
        prio_class: schedhost_sdk::PrioClass::None,
        prio_level: 4,
        group: 0,
        arrival_ns: 0,
    }
}

/// How many calls of each kind reach a policy, by the call's name (`turn`, `dispatch`,
/// `allow_merge`…): a hook for [`schedhost::policy::Wrapped`].
#[derive(Clone, Default)]
pub struct CallCounts(std::sync::Arc<std::sync::Mutex<std::collections::BTreeMap<String, u32>>>);

impl CallCounts {
    /// Calls named `name` so far.
    pub fn of(&self, name: &str) -> u32 {
        let counts = self.0.lock().unwrap();
        counts.get(name).copied().unwrap_or(0)
    }

    /// `policy` with its calls counted here.
    pub fn around(&self, policy: Box<dyn PolicyBackend>) -> schedhost::policy::Wrapped<Self> {
        schedhost::policy::Wrapped::new(policy, self.clone())
    }
}

impl schedhost::policy::Around for CallCounts {
    fn after(
        &mut self,
        _: &mut dyn PolicyBackend,
        call: &schedhost::policy::Call<'_>,
        _: schedhost::policy::Answered<'_>,
    ) {
        // A call's Debug form starts with its name: `turn { … }`.
        let text = format!("{call:?}");
        let name = text.split([' ', '{']).next().unwrap_or_default().to_owned();
        *self.0.lock().unwrap().entry(name).or_default() += 1;
    }
    fn fresh(&self) -> Option<Self> {
        None
    }
}

/// `target`, a queued sync read of ctx 0 ending at sector 8, takes a back merge from its
/// own submitter's sync bio only: not another submitter's, not an async bio (cfq's and
/// bfq's `allow_bio_merge`).
pub fn assert_merges_only_into_the_bios_own_queue(
    build: &str,
    p: &mut dyn PolicyBackend,
    target: schedhost_sdk::RequestId,
) {
    use schedhost_sdk::{MergeKind, MergeQuery, Op, Sector};
    let query = MergeQuery {
        target,
        target_ctx: 0,
        ctx: 0,
        op: Op::Read,
        sector: Sector(8),
        sectors: 8,
        sync: true,
        kind: MergeKind::Back,
    };
    assert!(p.allow_merge(&query).unwrap(), "{build}");
    assert!(
        !p.allow_merge(&MergeQuery { ctx: 1, ..query }).unwrap(),
        "{build}: another submitter's sync queue"
    );
    let async_bio = MergeQuery {
        sync: false,
        ..query
    };
    assert!(!p.allow_merge(&async_bio).unwrap(), "{build}: an async bio");
}

/// Numbers below the bound asked, from `seed` (xorshift: the same every run), for tests
/// that generate their shapes.
pub fn generator(mut seed: u64) -> impl FnMut(u64) -> u64 {
    move |bound| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % bound
    }
}
