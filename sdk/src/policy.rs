//! The trait a policy author implements.

use crate::types::{
    Completion, Dispatch, Group, MergeEvent, MergeQuery, MergeRules, Op, Request, Setup,
};

/// One tunable, declared once by a policy in [`Policy::TUNABLES`] and bound to the field
/// that holds its value.
///
/// The SDK checks names and ranges, stores into `field`, and reads `get` from it; a policy
/// that derives something from a tunable recomputes it in [`Policy::retuned`].
pub struct TunableSpec<P> {
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
    /// Where the value lives: `|p| &mut p.fifo_batch`.
    pub field: fn(&mut P) -> &mut i64,
}

// By hand: derives would ask `P` itself to be `Clone` and `Debug`.
impl<P> Clone for TunableSpec<P> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<P> Copy for TunableSpec<P> {}

impl<P> std::fmt::Debug for TunableSpec<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TunableSpec")
            .field("name", &self.name)
            .field("default", &self.default)
            .field("min", &self.min)
            .field("max", &self.max)
            .field("unit", &self.unit)
            .finish_non_exhaustive()
    }
}

/// A scheduling policy.
///
/// The host calls `new` once; the SDK then stores every tunable's default and the user's
/// settings into their fields, calling [`Policy::retuned`] after each; then come the
/// scheduling methods. Every queued request is eventually returned from `dispatch`, unless a
/// merge absorbed it ([`MergeEvent::absorbed`]): the SDK drops absorbed ids from `dispatch`'s
/// answers, so a policy that only queues may ignore merges. Time only arrives as `now`
/// arguments, so a policy is deterministic.
pub trait Policy: Sized + 'static {
    /// Short name, e.g. `"deadline"`.
    const NAME: &'static str;
    /// The policy's own version, e.g. `env!("CARGO_PKG_VERSION")`.
    const VERSION: &'static str;
    /// Tunables with their defaults and ranges.
    const TUNABLES: &'static [TunableSpec<Self>] = &[];
    /// Set to have the host follow [`Policy::merge_rules`] for merges into queued requests,
    /// asking [`Policy::allow_merge`] where they say (by default, before each one).
    const MERGE_VETO: bool = false;
    /// Clear to tell the host not to call [`Policy::completed`] (saves a call per batch).
    const COMPLETIONS: bool = true;
    /// Set when [`Policy::merged`] removes absorbed requests from the policy's own queues
    /// (an elevator must, to keep its sort order). Left clear, the SDK remembers absorbed
    /// ids and filters them out of `dispatch`'s answers, asking again for the rest of the
    /// budget, so the policy never has to know about them.
    const HANDLES_ABSORBED: bool = false;
    /// Set to have the host share the scheduler tags (`nr_requests`) between groups in
    /// proportion to their weights, as bfq's `bfqq_request_over_limit`, rather than
    /// equally. A policy that serves weights wants it: with equal parts, a pool smaller
    /// than the groups' backlog holds as many requests of a weight-1 group as of a
    /// weight-1000 one, and the policy has only those to choose among.
    const WEIGHTED_TAGS: bool = false;

    /// Creates the policy for a device, before any tunable is set.
    fn new(setup: &Setup) -> Self;

    /// Tunable `name` was just stored in its field: recompute whatever derives from it.
    fn retuned(&mut self, name: &str) {
        let _ = name;
    }

    /// Requests enter the scheduler, in arrival order.
    fn insert(&mut self, now_ns: u64, requests: &[Request]);

    /// Requests this policy dispatched came back: the device was busy (blk-mq's requeue).
    /// The policy holds them again. The default inserts them anew; they keep their arrival
    /// times, so a policy that serves by age puts them first, as blk-mq re-inserts at the
    /// head. Override it to undo what dispatching them counted.
    fn requeue(&mut self, now_ns: u64, requests: &[Request]) {
        self.insert(now_ns, requests);
    }

    /// Chooses up to `budget` requests for `hw_queue` into `out.ids`; may set `out.wake_at_ns`.
    /// `out` arrives empty.
    fn dispatch(&mut self, now_ns: u64, hw_queue: u32, budget: u32, out: &mut Dispatch);

    /// Which merges the host asks [`Policy::allow_merge`] about, and which it allows or
    /// refuses outright. Read only when `MERGE_VETO` is set, after `new` and after every
    /// tunable set; the default asks about every merge.
    fn merge_rules(&self) -> MergeRules {
        MergeRules::ASK
    }

    /// Whether a bio may join a queued request. Only asked when `MERGE_VETO` is set, and
    /// only for the merges [`Policy::merge_rules`] says to ask about.
    fn allow_merge(&mut self, query: &MergeQuery) -> bool {
        let _ = query;
        true
    }

    /// A queued request grew, and perhaps absorbed another. The SDK already keeps absorbed
    /// ids out of `dispatch` unless [`Policy::HANDLES_ABSORBED`] is set.
    fn merged(&mut self, now_ns: u64, event: &MergeEvent) {
        let _ = (now_ns, event);
    }

    /// Dispatched requests finished. Only called when `COMPLETIONS` is set (the default).
    fn completed(&mut self, now_ns: u64, done: &[Completion]) {
        let _ = (now_ns, done);
    }

    /// The groups sharing the device and what each is promised ([`Group`]): every group,
    /// before the first request of a run that has groups and again whenever one changes
    /// (`ctl group`), so the latest call is the whole picture. A policy that serves no
    /// groups ignores it (the default).
    fn groups(&mut self, now_ns: u64, groups: &[Group]) {
        let _ = (now_ns, groups);
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
