//! How the host calls a policy instance: the interface's functions as one trait
//! ([`Scheduler`]), implemented by wasmtime's component bindings here and by a component's
//! core module in [`super::core_abi`]; and what every policy store carries ([`Caps`]).

use schedhost_sdk::packed::{self, Plain};
use schedhost_sdk::{
    Dispatch, Info, MergeEvent, MergeKind, MergeQuery, Op, RequestId, Setup, Tunable,
};
use wasmtime::{ResourceLimiter, Store};

pub(super) mod bindings {
    wasmtime::component::bindgen!({ path: "../wit", world: "policy" });
}

pub(super) use bindings::exports::schedhost::policy::scheduler as wit;

/// The interface this host speaks: the export a policy component must have.
pub const INTERFACE: &str = "schedhost:policy/scheduler";
/// Its version.
pub const INTERFACE_VERSION: &str = schedhost_sdk::INTERFACE_VERSION;

/// The interface's functions on one instance, in the SDK's types: through the component API
/// (below) or, for a component that wraps one plain core module, through that module
/// ([`super::core_abi`]). Declared from the interface's list ([`super::interface`]), with the
/// flat crossings of the host's `turn` besides; the component API's calls come from the
/// same list, each argument crossing by its type's [`ToWit`] and each answer by [`FromWit`].
macro_rules! scheduler_trait {
    (
        provided { $($provided:tt)* }
        required { $($(#[$doc:meta])* $wit:literal $name:ident($($arg:ident: $ty:ty $(as $shape:ty)?),* $(,)?) -> $ret:ty;)* }
    ) => {
        #[allow(
            clippy::extra_unused_lifetimes,
            reason = "every call is declared with 'a, whether its arguments borrow or not"
        )]
        pub(super) trait Scheduler: Send {
            $($(#[$doc])* fn $name<'a>(
                &self,
                store: &mut Store<Caps>,
                $($arg: $ty),*
            ) -> wasmtime::Result<$ret>;)*

            /// `turn`: one request and a dispatch, in flat scalars.
            fn turn_flat(
                &self,
                store: &mut Store<Caps>,
                now_ns: u64,
                control: u64,
                r: &[u64; 5],
            ) -> wasmtime::Result<(u64, u64)>;

            /// `turn-after-completion`: a completion, one request and a dispatch.
            fn turn_after_completion(
                &self,
                store: &mut Store<Caps>,
                now_ns: u64,
                control: u64,
                c: &[u64; 5],
                r: &[u64; 5],
            ) -> wasmtime::Result<(u64, u64)>;

            /// `turn-words`: a turn of any size, its parts packed into one list.
            fn turn_words(
                &self,
                store: &mut Store<Caps>,
                now_ns: u64,
                control: u64,
                turn: &crate::policy::Turn<'_>,
            ) -> wasmtime::Result<(u64, u64)>;

            /// `take-answer`: the dispatch a `turn` kept back.
            fn take_answer(&self, store: &mut Store<Caps>) -> wasmtime::Result<Dispatch>;
        }

        #[allow(
            clippy::extra_unused_lifetimes,
            reason = "every call is declared with 'a, whether its arguments borrow or not"
        )]
        impl Scheduler for bindings::Policy {
            $(fn $name<'a>(
                &self,
                store: &mut Store<Caps>,
                $($arg: $ty),*
            ) -> wasmtime::Result<$ret> {
                $(let $arg = <$ty as ToWit<$($shape)?>>::hold($arg);)*
                let answer = pastey::paste! {
                    self.schedhost_policy_scheduler().[<call_ $name>](
                        store,
                        $(<$ty as ToWit<$($shape)?>>::wire(&$arg)),*
                    )?
                };
                Ok(FromWit::from_wit(answer))
            })*

            fn turn_flat(
                &self,
                store: &mut Store<Caps>,
                now_ns: u64,
                control: u64,
                r: &[u64; 5],
            ) -> wasmtime::Result<(u64, u64)> {
                self.schedhost_policy_scheduler()
                    .call_turn(store, now_ns, control, r[0], r[1], r[2], r[3], r[4])
            }

            fn turn_after_completion(
                &self,
                store: &mut Store<Caps>,
                now_ns: u64,
                control: u64,
                c: &[u64; 5],
                r: &[u64; 5],
            ) -> wasmtime::Result<(u64, u64)> {
                self.schedhost_policy_scheduler().call_turn_after_completion(
                    store, now_ns, control, c[0], c[1], c[2], c[3], c[4], r[0], r[1], r[2], r[3],
                    r[4],
                )
            }

            fn turn_words(
                &self,
                store: &mut Store<Caps>,
                now_ns: u64,
                control: u64,
                turn: &crate::policy::Turn<'_>,
            ) -> wasmtime::Result<(u64, u64)> {
                let counts = turn_counts(turn)?;
                let mut words = Vec::new();
                schedhost_sdk::packed::turn_words(
                    turn.completions,
                    turn.merges,
                    turn.requests,
                    &mut words,
                );
                self.schedhost_policy_scheduler().call_turn_words(
                    store, now_ns, control, counts[0], counts[1], counts[2], &words,
                )
            }

            fn take_answer(&self, store: &mut Store<Caps>) -> wasmtime::Result<Dispatch> {
                self.schedhost_policy_scheduler()
                    .call_take_answer(store)
                    .map(FromWit::from_wit)
            }
        }
    };
}
super::interface::policy_calls!(scheduler_trait);

/// `turn-words`' counts: the turn's completions, merges and requests.
pub(super) fn turn_counts(turn: &crate::policy::Turn<'_>) -> wasmtime::Result<[u32; 3]> {
    let count =
        |n: usize| u32::try_from(n).map_err(|_| wasmtime::Error::msg("a turn past 2^32 records"));
    Ok([
        count(turn.completions.len())?,
        count(turn.merges.len())?,
        count(turn.requests.len())?,
    ])
}

/// The length of `turn-words`' list, in words.
pub(super) fn turn_len(turn: &crate::policy::Turn<'_>) -> wasmtime::Result<usize> {
    let words = |n: usize, each: usize| n.checked_mul(each);
    words(
        turn.completions.len(),
        <schedhost_sdk::Completion as packed::Packed>::WORDS,
    )
    .zip(words(
        turn.merges.len(),
        <MergeEvent as packed::Packed>::WORDS,
    ))
    .zip(words(
        turn.requests.len(),
        <schedhost_sdk::Request as packed::Packed>::WORDS,
    ))
    .and_then(|((c, m), r)| c.checked_add(m)?.checked_add(r))
    .ok_or_else(|| wasmtime::Error::msg("a turn past the address space"))
}

/// How an argument of the SDK's type `Self` goes to wasmtime's component bindings: held as
/// `Held` for the call (converted, or packed: the shape `S`), and lent as the `Wire` value
/// the bindings take.
trait ToWit<S = Plain>: Sized {
    type Held;
    type Wire<'h>
    where
        Self: 'h;
    fn hold(self) -> Self::Held;
    fn wire(held: &Self::Held) -> Self::Wire<'_>;
}

/// An answer as the bindings give it, in the SDK's type.
trait FromWit<W> {
    fn from_wit(wit: W) -> Self;
}

/// Values the bindings take as they are.
macro_rules! as_is {
    ($($t:ty),*) => {$(
        impl ToWit for $t {
            type Held = $t;
            type Wire<'h> = $t;
            fn hold(self) -> $t {
                self
            }
            fn wire(held: &$t) -> $t {
                *held
            }
        }
        impl FromWit<$t> for $t {
            fn from_wit(wit: $t) -> $t {
                wit
            }
        }
    )*};
}
as_is!(u64, u32, i64, bool);

/// Borrowed values the bindings take as borrowed.
macro_rules! lent {
    ($($t:ty),*) => {$(
        impl<'a> ToWit for &'a $t {
            type Held = &'a $t;
            type Wire<'h> = &'h $t where 'a: 'h;
            fn hold(self) -> &'a $t {
                self
            }
            fn wire<'h>(held: &'h &'a $t) -> &'h $t {
                held
            }
        }
    )*};
}
lent!(str, [u8], [(String, i64)]);

/// A slice of packed records, crossing as their words.
impl<T: packed::Packed> ToWit<packed::Words> for &[T] {
    type Held = Vec<u64>;
    type Wire<'h>
        = &'h [u64]
    where
        Self: 'h;
    fn hold(self) -> Vec<u64> {
        let mut words = Vec::with_capacity(self.len() * T::WORDS);
        packed::pack_into(self, &mut words);
        words
    }
    fn wire(held: &Vec<u64>) -> &[u64] {
        held
    }
}

impl ToWit for Op {
    type Held = wit::Op;
    type Wire<'h> = wit::Op;
    fn hold(self) -> wit::Op {
        to_wit_op(self)
    }
    fn wire(held: &wit::Op) -> wit::Op {
        *held
    }
}

impl ToWit for &Setup {
    type Held = wit::Setup;
    type Wire<'h>
        = wit::Setup
    where
        Self: 'h;
    fn hold(self) -> wit::Setup {
        wit::Setup {
            hw_queues: self.hw_queues,
            queue_depth: self.queue_depth,
            nr_requests: self.nr_requests,
            rotational: self.rotational,
        }
    }
    fn wire(held: &wit::Setup) -> wit::Setup {
        *held
    }
}

impl ToWit for &MergeQuery {
    type Held = wit::MergeQuery;
    type Wire<'h>
        = wit::MergeQuery
    where
        Self: 'h;
    fn hold(self) -> wit::MergeQuery {
        wit::MergeQuery {
            target: self.target.0,
            target_ctx: self.target_ctx,
            ctx: self.ctx,
            op: to_wit_op(self.op),
            sector: self.sector.0,
            sectors: self.sectors,
            sync: self.sync,
            kind: to_wit_kind(self.kind),
        }
    }
    fn wire(held: &wit::MergeQuery) -> wit::MergeQuery {
        *held
    }
}

impl ToWit for &[MergeEvent] {
    type Held = Vec<wit::MergeEvent>;
    type Wire<'h>
        = &'h [wit::MergeEvent]
    where
        Self: 'h;
    fn hold(self) -> Vec<wit::MergeEvent> {
        self.iter()
            .map(|e| wit::MergeEvent {
                target: e.target.0,
                sector: e.sector.0,
                sectors: e.sectors,
                kind: to_wit_kind(e.kind),
                absorbed: e.absorbed.map(|id| id.0),
            })
            .collect()
    }
    fn wire(held: &Vec<wit::MergeEvent>) -> &[wit::MergeEvent] {
        held
    }
}

impl FromWit<()> for () {
    fn from_wit((): ()) {}
}

impl FromWit<Option<i64>> for Option<i64> {
    fn from_wit(wit: Option<i64>) -> Self {
        wit
    }
}

impl FromWit<Vec<u8>> for Vec<u8> {
    fn from_wit(wit: Vec<u8>) -> Self {
        wit
    }
}

impl FromWit<Result<(), String>> for Result<(), String> {
    fn from_wit(wit: Result<(), String>) -> Self {
        wit
    }
}

impl FromWit<wit::PolicyInfo> for Info {
    fn from_wit(info: wit::PolicyInfo) -> Self {
        Info {
            name: info.name,
            version: info.version,
            merge_veto: info.merge_veto,
            completions: info.completions,
            weighted_tags: info.weighted_tags,
        }
    }
}

impl FromWit<Vec<wit::Tunable>> for Vec<Tunable> {
    fn from_wit(list: Vec<wit::Tunable>) -> Self {
        list.into_iter()
            .map(|t| Tunable {
                name: t.name,
                default: t.default,
                min: t.min,
                max: t.max,
                unit: t.unit,
                help: t.help,
            })
            .collect()
    }
}

/// The ids are the guest's word and the core checks each; the collect reuses the list's
/// allocation (same layout).
impl FromWit<wit::DispatchAnswer> for Dispatch {
    fn from_wit(answer: wit::DispatchAnswer) -> Self {
        Dispatch {
            ids: answer.ids.into_iter().map(RequestId).collect(),
            wake_at_ns: answer.wake_at_ns,
        }
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

/// A store's memory cap, remembering whether the policy hit it. The cap is for the whole
/// policy: every memory of every core instance in its store counts, so a component cannot
/// multiply it by bringing more memories.
#[derive(Debug)]
pub(super) struct Caps {
    /// Most bytes of linear memory, all memories together.
    pub(super) memory_bytes: usize,
    /// A growth past the cap was refused (the fault is then a memory fault).
    pub(super) hit: bool,
    /// Linear memory granted so far, all memories together (wasm memories never shrink, so
    /// this is also the high-water mark).
    pub(super) peak: usize,
}

/// Core instances one policy's store may hold: the components `policy build` writes have
/// one; the cap keeps a component from taking the process's instance pool for itself.
pub const MAX_CORE_INSTANCES: usize = 4;
/// Linear memories, and tables, one policy's store may hold.
pub const MAX_MEMORIES: usize = 4;

#[cfg(test)]
impl Caps {
    /// Caps for a store the tests build by hand.
    pub(super) fn for_tests() -> Self {
        Self {
            memory_bytes: 1 << 20,
            hit: false,
            peak: 0,
        }
    }
}

impl ResourceLimiter for Caps {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        // The store's memories together: this one's growth added to what all hold.
        let total = self.peak.saturating_sub(current).saturating_add(desired);
        if total > self.memory_bytes {
            self.hit = true;
            return Err(wasmtime::Error::msg(format!(
                "memory would grow to {total} bytes (all the policy's memories together), past the policy's cap of {} bytes",
                self.memory_bytes
            )));
        }
        self.peak = total;
        Ok(true)
    }

    fn instances(&self) -> usize {
        MAX_CORE_INSTANCES
    }

    fn memories(&self) -> usize {
        MAX_MEMORIES
    }

    fn tables(&self) -> usize {
        MAX_MEMORIES
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= 100_000)
    }
}
