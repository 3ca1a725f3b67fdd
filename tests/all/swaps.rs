//! Hot swaps in simulated runs: every queued request goes to the new policy, nothing is lost
//! or completed twice across a thousand swaps, a newer build of the same policy gets the old
//! one's state, and a swap that cannot be made leaves the old policy running.

use schedhost::backend::sim::DeviceSpec;
use schedhost::core::{Bio, Config, Core};
use schedhost::engine::{PolicyMaker, ScheduledSwap};
use schedhost::frontend::jobs::parse_job_file;
use schedhost::frontend::jobs::sim;
use schedhost::frontend::outcome::Outcome;
use schedhost::frontend::plan::RunPlan;
use schedhost::policy::{LoadedPolicy, NativePolicy, PolicyBackend, WasmRuntime, native_policy};
use schedhost_sdk::RequestId;
use schedhost_sdk::{Dispatch, MergeEvent, Op, Policy, PrioClass, Request, Setup};

use crate::helpers::{component, runtime};

const JOBS: &str = "
[readers]
rw=randread
bs=4k
size=16m
iodepth=16
numjobs=3
runtime=4s
time_based

[writer]
rw=write
bs=64k
size=64m
iodepth=8
direct=0
runtime=4s
time_based
";

/// A policy compiled once: as a component when built, natively otherwise.
#[derive(Clone)]
struct Source {
    name: &'static str,
    loaded: Option<LoadedPolicy>,
}

impl Source {
    fn new(engine: &WasmRuntime, name: &'static str) -> Self {
        let loaded = component(name).map(|path| engine.load(&path).unwrap());
        Self { name, loaded }
    }

    /// Makes an instance at the time of the swap, as a running host does from its cache.
    fn maker(&self) -> PolicyMaker {
        let (name, loaded) = (self.name, self.loaded.clone());
        Box::new(move || match loaded {
            Some(loaded) => {
                let policy = loaded.instantiate().map_err(|e| e.to_string())?;
                Ok(Box::new(policy) as Box<dyn PolicyBackend>)
            }
            None => native_policy(name).ok_or_else(|| format!("no {name}")),
        })
    }
}

fn maker(name: &'static str) -> PolicyMaker {
    Source::new(&runtime(), name).maker()
}

fn run(swaps: Vec<ScheduledSwap>) -> Outcome {
    let jobs = parse_job_file("swap.fio", JOBS).unwrap();
    let device = DeviceSpec::parse("sim:hdd").unwrap();
    let first = (maker("noop"))().unwrap();
    sim::run_swapping(
        &jobs,
        &device,
        first,
        &[],
        &RunPlan::default(),
        swaps,
        &mut |_| {},
    )
    .unwrap()
}

/// Every bio issued completed once and was counted once.
fn assert_exactly_once(o: &Outcome) {
    for (s, stats) in o.submitters.iter().zip(&o.stats) {
        let ios: u64 = stats.dirs.iter().map(|d| d.ios).sum();
        assert!(s.issued > 0);
        assert_eq!(s.completed, s.issued, "ctx {}", s.ctx);
        assert_eq!(ios, s.completed, "ctx {}", s.ctx);
    }
    assert_eq!(o.core.dispatched, o.core.completed);
}

#[test]
fn swap_soak_thousand_swaps_lose_and_duplicate_nothing() {
    let engine = runtime();
    let sources: Vec<Source> = ["deadline", "cfq", "time-slice", "noop"]
        .into_iter()
        .map(|name| Source::new(&engine, name))
        .collect();
    let swaps = (0..1000u64)
        .map(|i| {
            let source = &sources[(i % 4) as usize];
            ScheduledSwap {
                at_ns: 2_000_000 + i * 3_900_000,
                label: source.name.into(),
                policy: source.maker(),
                settings: Vec::new(),
            }
        })
        .collect();
    let outcome = run(swaps);
    assert_exactly_once(&outcome);
    assert_eq!(outcome.swaps.len(), 1000);
    let failed: Vec<_> = outcome.swaps.iter().filter(|s| s.result.is_err()).collect();
    assert!(failed.is_empty(), "{failed:?}");
    let handed: usize = outcome
        .swaps
        .iter()
        .filter_map(|s| s.result.as_ref().ok())
        .map(|s| s.requeued)
        .sum();
    assert!(
        handed > 1000,
        "swaps happened with requests queued: {handed}"
    );
    assert!(outcome.ejections.is_empty());
}

#[test]
fn swap_to_a_policy_that_will_not_start_keeps_the_old_one() {
    let swaps = vec![ScheduledSwap {
        at_ns: 1_000_000_000,
        label: "deadline with a bad tunable".into(),
        policy: maker("deadline"),
        settings: vec![("fifo_batch".into(), 0)],
    }];
    let outcome = run(swaps);
    assert_exactly_once(&outcome);
    let err = outcome.swaps[0].result.as_ref().unwrap_err();
    assert!(err.contains("fifo_batch=0 is out of range"), "{err}");
}

/// Counts what it dispatched and carries the count across builds (`save-state`).
#[derive(Debug, Default)]
struct Counter {
    queue: std::collections::VecDeque<RequestId>,
    dispatched: u64,
}

impl Policy for Counter {
    const NAME: &'static str = "counter";
    const VERSION: &'static str = "1";
    const COMPLETIONS: bool = false;

    fn new(_: &Setup) -> Self {
        Self::default()
    }

    fn insert(&mut self, _: u64, requests: &[Request]) {
        self.queue.extend(requests.iter().map(|r| r.id));
    }

    fn dispatch(&mut self, _: u64, _: u32, budget: u32, out: &mut Dispatch) {
        while out.ids.len() < budget as usize {
            let Some(id) = self.queue.pop_front() else {
                break;
            };
            out.ids.push(id);
            self.dispatched += 1;
        }
    }

    fn merged(&mut self, _: u64, _: &MergeEvent) {}

    fn save_state(&self) -> Vec<u8> {
        self.dispatched.to_le_bytes().to_vec()
    }

    fn restore_state(&mut self, state: &[u8]) -> Result<(), String> {
        let bytes: [u8; 8] = state.try_into().map_err(|_| "want 8 bytes".to_owned())?;
        self.dispatched = u64::from_le_bytes(bytes);
        Ok(())
    }
}

fn read(id: u64, sector: u64) -> Bio {
    Bio {
        id,
        ctx: 0,
        op: Op::Read,
        sector,
        sectors: 8,
        sync: true,
        prio_class: PrioClass::None,
        prio_level: 4,
    }
}

#[test]
fn swap_to_a_newer_build_hands_over_state_and_queued_requests() {
    let mut core = Core::new(
        Config::for_device(1, 1, 2560),
        Box::new(NativePolicy::<Counter>::default()),
        &[],
        Box::new(schedhost::policy::builtin_fifo),
    )
    .unwrap();
    for i in 0..4 {
        core.submit(0, read(i, i * 1000)).unwrap();
    }
    core.run(0).unwrap();
    assert_eq!(core.queued_in_policy(), 3, "depth 1: one on the device");
    let swapped = core
        .replace_policy(1, Box::new(NativePolicy::<Counter>::default()), &[])
        .unwrap();
    assert_eq!(swapped.requeued, 3);
    assert_eq!(swapped.state_bytes, Some(8));
    assert_eq!(core.saved_state(1).unwrap().unwrap(), 1u64.to_le_bytes());
}

#[test]
fn swap_refused_when_the_new_build_cannot_take_the_old_state() {
    let Some(path) = component("chaos") else {
        return;
    };
    let loaded = runtime().load(&path).unwrap();
    let mut core = Core::new(
        Config::for_device(1, 1, 2560),
        Box::new(loaded.instantiate().unwrap()),
        &[("mode".into(), 8)],
        Box::new(schedhost::policy::builtin_fifo),
    )
    .unwrap();
    for i in 0..4 {
        core.submit(0, read(i, i * 1000)).unwrap();
    }
    core.run(0).unwrap();
    let err = core
        .replace_policy(1, Box::new(loaded.instantiate().unwrap()), &[])
        .unwrap_err();
    assert!(err.to_string().contains("restore-state"), "{err}");
    // The old instance still runs and still holds the requests.
    assert_eq!(core.queued_in_policy(), 3);
    assert!(core.ejections().is_empty());
    let mut sent = 0;
    for done in 1..=3u64 {
        while let Some(action) = core.poll_action() {
            if let schedhost::core::Action::Dispatch { id, .. } = action {
                core.complete(done, id, 0).unwrap();
                sent += 1;
            }
        }
        core.run(done).unwrap();
    }
    assert_eq!(sent, 3, "the old policy dispatched on");
}
