//! Policies linked into the host through the SDK's native mode: the same crate a component
//! is built from, called directly. Used for the wasm-vs-native benchmark and in tests.

use schedhost_sdk::{
    Completion, Dispatch, Info, MergeEvent, MergeQuery, Op, Policy, Request, Runtime, Setup,
    Tunable,
};

use super::{Fault, PolicyBackend};

/// A policy crate run natively. Its calls cannot trap the way a component's can: a panic in
/// native code is a host bug, which is why only the project's own policies run this way.
#[derive(Debug)]
pub struct NativePolicy<P: Policy>(Runtime<P>);

impl<P: Policy> Default for NativePolicy<P> {
    fn default() -> Self {
        Self(Runtime::new())
    }
}

impl<P: Policy + Send + 'static> PolicyBackend for NativePolicy<P> {
    fn fresh(&self) -> Option<Box<dyn PolicyBackend>> {
        Some(Box::new(Self::default()))
    }
    fn info(&mut self) -> Result<Info, Fault> {
        Ok(self.0.info())
    }
    fn tunables(&mut self) -> Result<Vec<Tunable>, Fault> {
        Ok(self.0.tunables())
    }
    fn init(
        &mut self,
        setup: &Setup,
        settings: &[(String, i64)],
    ) -> Result<Result<(), String>, Fault> {
        Ok(self.0.init(setup, settings))
    }
    fn get(&mut self, name: &str) -> Result<Option<i64>, Fault> {
        Ok(self.0.get(name))
    }
    fn set(&mut self, name: &str, value: i64) -> Result<Result<(), String>, Fault> {
        Ok(self.0.set(name, value))
    }
    fn insert(&mut self, now_ns: u64, requests: &[Request]) -> Result<(), Fault> {
        self.0.insert(now_ns, requests);
        Ok(())
    }
    fn requeue(&mut self, now_ns: u64, requests: &[Request]) -> Result<(), Fault> {
        self.0.requeue(now_ns, requests);
        Ok(())
    }
    fn dispatch(&mut self, now_ns: u64, hw_queue: u32, budget: u32) -> Result<Dispatch, Fault> {
        Ok(self.0.dispatch(now_ns, hw_queue, budget))
    }
    fn allow_merge(&mut self, query: &MergeQuery) -> Result<bool, Fault> {
        Ok(self.0.allow_merge(query))
    }
    fn merged(&mut self, now_ns: u64, events: &[MergeEvent]) -> Result<(), Fault> {
        self.0.merged(now_ns, events);
        Ok(())
    }
    fn completed(&mut self, now_ns: u64, done: &[Completion]) -> Result<(), Fault> {
        self.0.completed(now_ns, done);
        Ok(())
    }
    fn limit_depth(&mut self, op: Op, sync: bool) -> Result<u32, Fault> {
        Ok(self.0.limit_depth(op, sync))
    }
    fn save_state(&mut self) -> Result<Vec<u8>, Fault> {
        Ok(self.0.save_state())
    }
    fn restore_state(&mut self, state: &[u8]) -> Result<Result<(), String>, Fault> {
        Ok(self.0.restore_state(state))
    }
}

/// The policies built into the host natively, by name.
/// Makes a fresh instance.
type Constructor = fn() -> Box<dyn PolicyBackend>;

const NATIVE: &[(&str, Constructor)] = &[
    ("noop", make::<schedhost_policy_noop::Noop>),
    ("deadline", make::<schedhost_policy_deadline::Deadline>),
    ("time-slice", make::<schedhost_policy_time_slice::TimeSlice>),
    ("cfq", make::<schedhost_policy_cfq::Cfq>),
    ("kyber", make::<schedhost_policy_kyber::Kyber>),
    ("bfq", make::<schedhost_policy_bfq::Bfq>),
];

fn make<P: Policy + Send>() -> Box<dyn PolicyBackend> {
    Box::new(NativePolicy::<P>::default())
}

/// Names of the policies built into the host natively.
pub fn native_names() -> Vec<&'static str> {
    NATIVE.iter().map(|(name, _)| *name).collect()
}

/// A fresh native instance of the named built-in policy.
pub fn native_policy(name: &str) -> Option<Box<dyn PolicyBackend>> {
    NATIVE
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, make)| make())
}
