//! The host holds policies to the interface's rules: answers that break them are faults
//! naming the call, a policy that sits on requests stops a run instead of hanging it, and
//! completions reach only policies that ask for them.

use schedhost::backend::sim::DeviceSpec;
use schedhost::core::{Action, Bio, Config, Core, OnFault, Supervision};
use schedhost::frontend::RunError;
use schedhost::frontend::jobs::parse_job_file;
use schedhost::frontend::jobs::sim;
use schedhost::frontend::plan::RunPlan;
use schedhost::policy::{FaultKind, NativePolicy};
use schedhost_sdk::RequestId;
use schedhost_sdk::{Completion, Dispatch, MergeEvent, Op, Policy, PrioClass, Request, Setup};

/// Answers dispatch according to `MODE`: 0 honest FIFO, 1 an invented id, 2 the same id
/// twice, 3 more ids than the budget, 4 nothing ever; 5 honest FIFO that declines completions.
#[derive(Debug, Default)]
struct Rogue<const MODE: u8> {
    queue: Vec<RequestId>,
    completed: u64,
}

impl<const MODE: u8> Policy for Rogue<MODE> {
    const NAME: &'static str = "rogue";
    const VERSION: &'static str = "0";
    const COMPLETIONS: bool = MODE != 5;

    fn new(_: &Setup) -> Self {
        Self::default()
    }

    fn insert(&mut self, _: u64, requests: &[Request]) {
        self.queue.extend(requests.iter().map(|r| r.id));
    }

    fn dispatch(&mut self, _: u64, _: u32, budget: u32, out: &mut Dispatch) {
        match MODE {
            1 => out.ids.push(RequestId(0xdead_beef)),
            2 => {
                if let Some(&id) = self.queue.first() {
                    out.ids.extend([id, id]);
                }
            }
            3 => out
                .ids
                .extend(self.queue.drain(..).take(budget as usize + 1)),
            4 => {}
            _ => {
                let n = self.queue.len().min(budget as usize);
                out.ids.extend(self.queue.drain(..n));
            }
        }
    }

    fn merged(&mut self, _: u64, _: &MergeEvent) {}

    fn completed(&mut self, _: u64, done: &[Completion]) {
        self.completed += done.len() as u64;
    }

    fn save_state(&self) -> Vec<u8> {
        self.completed.to_le_bytes().to_vec()
    }
}

fn core_with<P: Policy + Send>(depth: u32) -> Core {
    Core::new(
        Config::for_device(1, depth, 2560),
        Box::new(NativePolicy::<P>::default()),
        &[],
        Box::new(schedhost::policy::builtin_fifo),
    )
    .unwrap()
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

/// The fault of a rule-breaking answer, with faults set to stop the run (`--on-fault abort`).
fn fault_of<P: Policy + Send>() -> schedhost::policy::Fault {
    let mut core = core_with::<P>(2);
    core.supervise(Supervision {
        on_fault: OnFault::Abort,
        ..Supervision::default()
    });
    core.submit(0, read(1, 0)).unwrap();
    core.submit(0, read(2, 800)).unwrap();
    core.submit(0, read(3, 1600)).unwrap();
    core.run(0).expect_err("the answer breaks the rules")
}

#[test]
fn dispatching_an_unknown_id_is_a_fault() {
    let fault = fault_of::<Rogue<1>>();
    // New requests and the first dispatch of a round travel in one call.
    assert_eq!(
        (fault.kind, fault.call),
        (FaultKind::InvalidAnswer, "insert-and-dispatch")
    );
    assert!(
        fault.message.contains("0xdeadbeef, which is not queued"),
        "{}",
        fault.message
    );
}

#[test]
fn dispatching_an_id_twice_is_a_fault() {
    let fault = fault_of::<Rogue<2>>();
    assert!(
        fault.message.contains("which is not queued"),
        "{}",
        fault.message
    );
}

#[test]
fn dispatching_beyond_the_budget_is_a_fault() {
    let fault = fault_of::<Rogue<3>>();
    assert_eq!(fault.message, "returned 3 ids for a budget of 2");
}

#[test]
fn policy_that_never_dispatches_is_ejected_and_its_requests_served() {
    let jobs = parse_job_file("s.fio", "[a]\nsize=1m\n").unwrap();
    let device = DeviceSpec::parse("sim:null").unwrap();
    let outcome = sim::run(
        &jobs,
        &device,
        Box::new(NativePolicy::<Rogue<4>>::default()),
        &[],
        &RunPlan::default(),
        &mut |_| {},
    )
    .unwrap();
    assert_eq!(outcome.ejections.len(), 1);
    assert_eq!(outcome.ejections[0].kind, "starved");
    assert_eq!(outcome.ejections[0].requeued, 1);
    let s = &outcome.submitters[0];
    assert_eq!((s.issued, s.completed), (256, 256));
}

#[test]
fn policy_that_never_dispatches_stops_an_aborting_run_instead_of_hanging() {
    let jobs = parse_job_file("s.fio", "[a]\nsize=1m\n").unwrap();
    let device = DeviceSpec::parse("sim:null").unwrap();
    let options = RunPlan {
        supervision: Supervision {
            on_fault: OnFault::Abort,
            ..Supervision::default()
        },
        ..RunPlan::default()
    };
    let err = sim::run(
        &jobs,
        &device,
        Box::new(NativePolicy::<Rogue<4>>::default()),
        &[],
        &options,
        &mut |_| {},
    )
    .unwrap_err();
    assert!(
        matches!(
            err,
            RunError::Stopped(schedhost::engine::Stop::Stalled { queued: 1, .. })
        ),
        "{err}"
    );
    assert!(err.to_string().contains("cannot progress"), "{err}");
}

#[test]
fn completions_reach_only_policies_that_ask_for_them() {
    for (mut core, expected) in [
        (core_with::<Rogue<0>>(4), 2u64),
        (core_with::<Rogue<5>>(4), 0),
    ] {
        core.submit(0, read(1, 0)).unwrap();
        core.submit(0, read(2, 800)).unwrap();
        core.run(0).unwrap();
        let mut ids = Vec::new();
        while let Some(action) = core.poll_action() {
            if let Action::Dispatch { id, .. } = action {
                ids.push(id);
            }
        }
        for id in ids {
            core.complete(5, id, 0).unwrap();
        }
        core.run(5).unwrap();
        let state = core.saved_state(5).unwrap().unwrap();
        assert_eq!(u64::from_le_bytes(state.try_into().unwrap()), expected);
    }
}

/// Holds every request until it is 1 ms old, asking to be woken then: an idling policy.
#[derive(Debug, Default)]
struct Patient {
    queue: std::collections::VecDeque<(RequestId, u64)>,
}

impl Policy for Patient {
    const NAME: &'static str = "patient";
    const VERSION: &'static str = "0";

    fn new(_: &Setup) -> Self {
        Self::default()
    }

    fn insert(&mut self, _: u64, requests: &[Request]) {
        self.queue
            .extend(requests.iter().map(|r| (r.id, r.arrival_ns + 1_000_000)));
    }

    fn dispatch(&mut self, now: u64, _: u32, budget: u32, out: &mut Dispatch) {
        while out.ids.len() < budget as usize {
            match self.queue.front() {
                Some(&(id, ready)) if ready <= now => {
                    out.ids.push(id);
                    self.queue.pop_front();
                }
                Some(&(_, ready)) => {
                    out.wake_at_ns = Some(ready);
                    break;
                }
                None => break,
            }
        }
    }

    fn merged(&mut self, _: u64, _: &MergeEvent) {}
}

#[test]
fn policy_asking_to_be_woken_is_called_again_at_that_time() {
    let jobs = parse_job_file("w.fio", "[a]\nsize=64k\nrw=randread\niodepth=2\n").unwrap();
    let device = DeviceSpec::parse("sim:null").unwrap();
    let outcome = sim::run(
        &jobs,
        &device,
        Box::new(NativePolicy::<Patient>::default()),
        &[],
        &RunPlan::default(),
        &mut |_| {},
    )
    .expect("the timer keeps the run going");
    let read = &outcome.stats[0].dirs[0];
    assert_eq!(read.ios, 16);
    // Each request waits its 1 ms on a zero-latency device (the histogram keeps 3 digits).
    let clat = read.clat.histogram();
    assert!(clat.equivalent(clat.min(), 1_000_000), "min {}", clat.min());
    assert!(clat.equivalent(clat.max(), 1_000_000), "max {}", clat.max());
    assert_eq!(
        outcome.end_ns, 8_000_000,
        "16 requests, two at a time, 1 ms each"
    );
}

/// Fails every `get` as a looping call would, at its deadline: what `ctl get` met.
struct FailingGet {
    gets: std::sync::Arc<std::sync::atomic::AtomicU32>,
}

impl schedhost::policy::Around for FailingGet {
    fn before(
        &mut self,
        _: &mut dyn schedhost::policy::PolicyBackend,
        call: &schedhost::policy::Call<'_>,
    ) -> Result<(), schedhost::policy::Fault> {
        if !matches!(call, schedhost::policy::Call::get { .. }) {
            return Ok(());
        }
        self.gets.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Err(schedhost::policy::Fault {
            kind: FaultKind::Timeout,
            call: "get",
            message: "ran past its deadline (100 ms)".into(),
        })
    }
    fn after(
        &mut self,
        _: &mut dyn schedhost::policy::PolicyBackend,
        _: &schedhost::policy::Call<'_>,
        _: schedhost::policy::Answered<'_>,
    ) {
    }
    fn fresh(&self) -> Option<Self> {
        None
    }
}

#[test]
fn reading_tunables_is_supervised_the_first_failing_get_ejects_and_no_more_are_made() {
    let gets = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
    // deadline has several tunables: only the first read may be made.
    let policy = schedhost::policy::Wrapped::new(
        schedhost::policy::native_policy("deadline").unwrap(),
        FailingGet {
            gets: std::sync::Arc::clone(&gets),
        },
    );
    let mut core = Core::new(
        Config::for_device(1, 4, 2560),
        Box::new(policy),
        &[],
        Box::new(schedhost::policy::builtin_fifo),
    )
    .unwrap();
    let answer = core.tunable_values(7).expect("ejection is not a stop");
    let why = answer.expect_err("the read failed");
    assert!(why.contains("failed in get and was ejected"), "{why}");
    // Before, each tunable waited out its own deadline and the policy stayed.
    assert_eq!(gets.load(std::sync::atomic::Ordering::Relaxed), 1);
    assert_eq!(core.ejections().len(), 1);
    assert_eq!(
        (core.ejections()[0].at_ns, core.ejections()[0].call),
        (7, "get")
    );
    assert_eq!(
        core.ejections()[0].recovery,
        schedhost::core::Recovery::Fallback
    );
}

/// deadline, except that its `merge-rules` answer is `bits`: what a hostile component could
/// send, which no SDK-built policy can.
struct MergeRulesOf {
    inner: NativePolicy<schedhost_policy_deadline::Deadline>,
    bits: u32,
}

/// Every call but `merge_rules` goes to deadline.
macro_rules! to_inner {
    ($($name:ident($($arg:ident: $ty:ty),*) -> $ret:ty;)*) => {
        $(fn $name(&mut self, $($arg: $ty),*) -> Result<$ret, schedhost::policy::Fault> {
            self.inner.$name($($arg),*)
        })*
    };
}

impl schedhost::policy::PolicyBackend for MergeRulesOf {
    to_inner! {
        info() -> schedhost_sdk::Info;
        tunables() -> Vec<schedhost_sdk::Tunable>;
        init(setup: &Setup, settings: &[(String, i64)]) -> Result<(), String>;
        get(name: &str) -> Option<i64>;
        set(name: &str, value: i64) -> Result<(), String>;
        dispatch(now_ns: u64, hw_queue: u32, budget: u32) -> Dispatch;
        insert_and_dispatch(now_ns: u64, requests: &[Request], hw_queue: u32, budget: u32) -> Dispatch;
        merged(now_ns: u64, events: &[MergeEvent]) -> ();
        limit_depth(op: Op, sync: bool) -> u32;
        insert(now_ns: u64, requests: &[Request]) -> ();
        requeue(now_ns: u64, requests: &[Request]) -> ();
        allow_merge(query: &schedhost_sdk::MergeQuery) -> bool;
        completed(now_ns: u64, done: &[Completion]) -> ();
        groups(now_ns: u64, groups: &[schedhost_sdk::Group]) -> ();
        save_state() -> Vec<u8>;
        restore_state(state: &[u8]) -> Result<(), String>;
    }

    fn merge_rules(&mut self) -> Result<u32, schedhost::policy::Fault> {
        Ok(self.bits)
    }
}

#[test]
fn merge_rules_with_bits_no_rule_has_are_an_invalid_answer() {
    let start = |bits: u32| {
        let policy = MergeRulesOf {
            inner: NativePolicy::default(),
            bits,
        };
        Core::new(
            Config::for_device(1, 4, 2560),
            Box::new(policy),
            &[],
            Box::new(schedhost::policy::builtin_fifo),
        )
    };
    // Back merges asked about, front merges refused: a policy may say that.
    assert!(start(0b1001).is_ok());
    for bits in [0b0011, 0b1100, 1 << 4, u32::MAX] {
        let Err(schedhost::core::StartError::Fault(fault)) = start(bits) else {
            panic!("merge rules {bits:#x} were taken");
        };
        assert_eq!(
            (fault.kind, fault.call),
            (FaultKind::InvalidAnswer, "merge-rules"),
            "{bits:#x}"
        );
        assert!(
            fault.message.contains("bits no rule has"),
            "{}",
            fault.message
        );
    }
}
