//! A policy wrapped to measure the wall-clock time spent in its calls, for the metrics
//! (`schedhost_policy_call_seconds_total`). Only cores with metering on wrap their policy,
//! so the clock reads cost nothing otherwise.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use schedhost_sdk::{
    Completion, Dispatch, Info, MergeEvent, MergeQuery, Op, Request, Setup, Tunable,
};

use super::{Fault, PolicyBackend, Turn};

/// `inner`, adding the time of each call to a counter shared with whoever reads it.
pub struct Timed {
    inner: Box<dyn PolicyBackend>,
    spent_ns: Arc<AtomicU64>,
}

impl std::fmt::Debug for Timed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Timed")
            .field("spent_ns", &self.spent_ns.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl Timed {
    /// Wraps `inner`; its calls add to `spent_ns`.
    pub fn new(inner: Box<dyn PolicyBackend>, spent_ns: Arc<AtomicU64>) -> Self {
        Self { inner, spent_ns }
    }

    fn time<T>(&mut self, call: impl FnOnce(&mut dyn PolicyBackend) -> T) -> T {
        let start = Instant::now();
        let answer = call(self.inner.as_mut());
        self.spent_ns
            .fetch_add(start.elapsed().as_nanos() as u64, Ordering::Relaxed);
        answer
    }
}

impl PolicyBackend for Timed {
    fn info(&mut self) -> Result<Info, Fault> {
        self.time(|p| p.info())
    }
    fn tunables(&mut self) -> Result<Vec<Tunable>, Fault> {
        self.time(|p| p.tunables())
    }
    fn init(
        &mut self,
        setup: &Setup,
        settings: &[(String, i64)],
    ) -> Result<Result<(), String>, Fault> {
        self.time(|p| p.init(setup, settings))
    }
    fn get(&mut self, name: &str) -> Result<Option<i64>, Fault> {
        self.time(|p| p.get(name))
    }
    fn set(&mut self, name: &str, value: i64) -> Result<Result<(), String>, Fault> {
        self.time(|p| p.set(name, value))
    }
    fn insert(&mut self, now_ns: u64, requests: &[Request]) -> Result<(), Fault> {
        self.time(|p| p.insert(now_ns, requests))
    }
    fn requeue(&mut self, now_ns: u64, requests: &[Request]) -> Result<(), Fault> {
        self.time(|p| p.requeue(now_ns, requests))
    }
    fn dispatch(&mut self, now_ns: u64, hw_queue: u32, budget: u32) -> Result<Dispatch, Fault> {
        self.time(|p| p.dispatch(now_ns, hw_queue, budget))
    }
    fn insert_and_dispatch(
        &mut self,
        now_ns: u64,
        requests: &[Request],
        hw_queue: u32,
        budget: u32,
    ) -> Result<Dispatch, Fault> {
        self.time(|p| p.insert_and_dispatch(now_ns, requests, hw_queue, budget))
    }
    fn turn(&mut self, now_ns: u64, turn: &Turn<'_>) -> Result<Option<Dispatch>, Fault> {
        self.time(|p| p.turn(now_ns, turn))
    }
    fn allow_merge(&mut self, query: &MergeQuery) -> Result<bool, Fault> {
        self.time(|p| p.allow_merge(query))
    }
    fn merged(&mut self, now_ns: u64, events: &[MergeEvent]) -> Result<(), Fault> {
        self.time(|p| p.merged(now_ns, events))
    }
    fn completed(&mut self, now_ns: u64, done: &[Completion]) -> Result<(), Fault> {
        self.time(|p| p.completed(now_ns, done))
    }
    fn limit_depth(&mut self, op: Op, sync: bool) -> Result<u32, Fault> {
        self.time(|p| p.limit_depth(op, sync))
    }
    fn save_state(&mut self) -> Result<Vec<u8>, Fault> {
        self.time(|p| p.save_state())
    }
    fn restore_state(&mut self, state: &[u8]) -> Result<Result<(), String>, Fault> {
        self.time(|p| p.restore_state(state))
    }
    fn memory_bytes(&mut self) -> Option<u64> {
        self.inner.memory_bytes()
    }
    fn fresh(&self) -> Option<Box<dyn PolicyBackend>> {
        let inner = self.inner.fresh()?;
        Some(Box::new(Self::new(inner, Arc::clone(&self.spent_ns))))
    }
}
