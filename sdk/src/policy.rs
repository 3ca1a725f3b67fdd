//! The trait a policy author implements.

use crate::types::{Completion, Dispatch, MergeEvent, MergeQuery, Op, Request, Setup};

/// The static description of one tunable, declared by a policy in [`Policy::TUNABLES`].
///
/// The SDK checks names and ranges before [`Policy::set`] is called, so `set` only stores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TunableSpec {
    /// Name, as in sysfs (`fifo_batch`).
    pub name: &'static str,
    /// Value before any `set`.
    pub default: i64,
    /// Smallest accepted value.
    pub min: i64,
    /// Largest accepted value.
    pub max: i64,
    /// Unit for humans ("ms", "requests", "").
    pub unit: &'static str,
    /// One line on what it does.
    pub help: &'static str,
}

/// A scheduling policy.
///
/// The host calls `new` once, then `set` for every tunable (defaults first, then the user's
/// settings), then the scheduling methods. Every queued request is eventually returned from
/// `dispatch`; a request that was absorbed by a merge ([`MergeEvent::absorbed`]) must not be.
/// Time only arrives as `now` arguments, so a policy is deterministic.
pub trait Policy: Sized + 'static {
    /// Short name, e.g. `"deadline"`.
    const NAME: &'static str;
    /// The policy's own version, e.g. `env!("CARGO_PKG_VERSION")`.
    const VERSION: &'static str;
    /// Tunables with their defaults and ranges.
    const TUNABLES: &'static [TunableSpec] = &[];
    /// Set to ask [`Policy::allow_merge`] before each merge into a queued request.
    const MERGE_VETO: bool = false;
    /// Clear to tell the host not to call [`Policy::completed`] (saves a call per batch).
    const COMPLETIONS: bool = true;

    /// Creates the policy for a device, before any tunable is set.
    fn new(setup: &Setup) -> Self;

    /// Stores a tunable already checked against [`Policy::TUNABLES`].
    fn set(&mut self, name: &str, value: i64) {
        let _ = (name, value);
    }

    /// The current value of a tunable.
    fn get(&self, name: &str) -> Option<i64> {
        let _ = name;
        None
    }

    /// Requests enter the scheduler, in arrival order.
    fn insert(&mut self, now_ns: u64, requests: &[Request]);

    /// Chooses up to `budget` requests for `hw_queue` into `out.ids`; may set `out.wake_at_ns`.
    /// `out` arrives empty.
    fn dispatch(&mut self, now_ns: u64, hw_queue: u32, budget: u32, out: &mut Dispatch);

    /// Whether a bio may join a queued request. Only asked when `MERGE_VETO` is set.
    fn allow_merge(&mut self, query: &MergeQuery) -> bool {
        let _ = query;
        true
    }

    /// A queued request grew, and perhaps absorbed another.
    fn merged(&mut self, now_ns: u64, event: &MergeEvent);

    /// Dispatched requests finished. Only called when `COMPLETIONS` is set (the default).
    fn completed(&mut self, now_ns: u64, done: &[Completion]) {
        let _ = (now_ns, done);
    }

    /// Scheduler tags requests of this kind may hold, or `None` for no limit.
    fn limit_depth(&self, op: Op, sync: bool) -> Option<u32> {
        let _ = (op, sync);
        None
    }

    /// State for a newer build of this policy to continue from.
    fn save_state(&self) -> Vec<u8> {
        Vec::new()
    }

    /// Continues from a state saved by [`Policy::save_state`].
    ///
    /// # Errors
    /// A message saying why the state cannot be used; the host then keeps the old policy.
    fn restore_state(&mut self, state: &[u8]) -> Result<(), String> {
        if state.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "{} keeps no state but was given {} bytes",
                Self::NAME,
                state.len()
            ))
        }
    }
}
