//! Calling a policy component through its one core module.
//!
//! A component call through wasmtime's component API costs about 90 ns on its own (lifting,
//! lowering and the component's call protocol; `schedhost bench --phases`), a core wasm call
//! about 11 ns. Every SDK-built policy is a component wrapping exactly one core module
//! without imports, whose exports are the interface's functions under their canonical-ABI
//! names. For those, the host instantiates that module alone and speaks the canonical ABI
//! itself: flat scalars straight through, lists and strings through the module's
//! `cabi_realloc` and memory, results read from the return area, then the post-return
//! function. Components of another shape run through the component API ([`super::wasm`]).
//!
//! The sandbox is the same: the same code runs in the same store, under the same memory cap,
//! epoch deadline and fuel. What the guest writes is not trusted: every pointer and length is
//! checked against its memory before it is read, lengths are bounded before anything is
//! copied, and text must be UTF-8.

use schedhost_sdk::Dispatch;
use wasmtime::{Func, Instance, Module, Store, TypedFunc, ValRaw, ValType};

use super::calls::{Caps, INTERFACE, INTERFACE_VERSION, Scheduler, turn_counts, turn_len};

/// Most ids a dispatch answer is read with: more than any budget, so an oversized answer is
/// still seen as one (the core refuses it) without copying what a guest claims.
const MAX_ANSWER_IDS: u32 = 1 << 16;
/// Most bytes of saved state read back.
const MAX_STATE_BYTES: u32 = 64 << 20;

mod cross;
mod guest;
mod layout;

use cross::{Flats, Lift, Lower, MAX_FLAT};
use guest::{Guest, bad};
use layout::Flat;

/// The core module of a component, if the component is one this module can call.
#[derive(Clone)]
pub(super) struct CoreModule {
    module: Module,
}

impl CoreModule {
    /// The component's one core module, if it has exactly one, it imports nothing, and it
    /// exports the interface's functions with their canonical-ABI types.
    pub(super) fn extract(engine: &wasmtime::Engine, component: &[u8]) -> Option<Self> {
        // Every core module at any depth: the nested components wit-component writes only
        // re-export the interface's types, and hold no code.
        let mut modules = Vec::new();
        for payload in wasmparser::Parser::new(0).parse_all(component) {
            if let wasmparser::Payload::ModuleSection {
                unchecked_range, ..
            } = payload.ok()?
            {
                modules.push(unchecked_range);
            }
        }
        let [range] = modules.as_slice() else {
            return None;
        };
        let module = Module::new(engine, component.get(range.clone())?).ok()?;
        if module.imports().len() != 0 {
            return None;
        }
        let core = Self { module };
        core.has_every_export().then_some(core)
    }

    /// True iff every export the calls need is there with its core type (the typed lookups
    /// at instantiation would fail otherwise).
    fn has_every_export(&self) -> bool {
        use wasmtime::ValType::{I32, I64};
        let func = |name: &str, params: &[wasmtime::ValType], results: &[wasmtime::ValType]| {
            self.module
                .get_export(name)
                .and_then(|e| e.func().cloned())
                .is_some_and(|ty| {
                    let p: Vec<_> = ty.params().collect();
                    let r: Vec<_> = ty.results().collect();
                    p.len() == params.len()
                        && r.len() == results.len()
                        && p.iter().zip(params).all(|(a, b)| a.matches(b))
                        && r.iter().zip(results).all(|(a, b)| a.matches(b))
                })
        };
        let core = |types: &[layout::Flat]| -> Vec<wasmtime::ValType> {
            types
                .iter()
                .map(|t| match t {
                    layout::Flat::I32 => I32,
                    layout::Flat::I64 => I64,
                })
                .collect()
        };
        self.module
            .get_export("memory")
            .is_some_and(|e| e.memory().is_some())
            && func("cabi_realloc", &[I32, I32, I32, I32], &[I32])
            && exports().iter().all(|(name, params, results)| {
                func(&export_name(name), &core(params), &core(results))
            })
    }
}

/// The export `name` of the interface under its canonical-ABI name.
fn export_name(name: &str) -> String {
    format!("{INTERFACE}@{INTERFACE_VERSION}#{name}")
}

/// One export of the interface in a core instance: its function, the core type it has, and
/// its post-return function if it has one.
struct Export {
    func: Func,
    params: usize,
    /// Bit i set: parameter i is `i64`.
    wide: u32,
    results: usize,
    post: Option<TypedFunc<u32, ()>>,
}

impl Export {
    fn find(instance: &Instance, store: &mut Store<Caps>, name: &str) -> wasmtime::Result<Self> {
        let full = export_name(name);
        let func = instance
            .get_func(&mut *store, &full)
            .ok_or_else(|| wasmtime::Error::msg(format!("the policy does not export {full}")))?;
        let ty = func.ty(&*store);
        let mut wide = 0;
        for (i, param) in ty.params().enumerate() {
            if param.matches(&ValType::I64) {
                wide |= 1 << i;
            }
        }
        let post = instance
            .get_typed_func::<u32, ()>(&mut *store, &format!("cabi_post_{full}"))
            .ok();
        Ok(Self {
            func,
            params: ty.params().len(),
            wide,
            results: ty.results().len(),
            post,
        })
    }

    /// Calls the function with the lowered `flat`, reads its answer with `lift`, then lets
    /// the guest free what the answer held (its post-return function, if it has one).
    fn call<T>(
        &self,
        store: &mut Store<Caps>,
        mut flat: Flats,
        lift: impl FnOnce(&Store<Caps>, &[ValRaw]) -> wasmtime::Result<T>,
    ) -> wasmtime::Result<T> {
        // The values must be what the function takes, one for one and of its types, and its
        // results must fit where they are written: checked here, against the function's own
        // type, so a lowering that drifted from its `FLAT` fails the call instead of
        // crossing.
        if flat.len != self.params || flat.wide != self.wide || self.results > MAX_FLAT {
            return Err(bad("a call lowered to values its export does not take"));
        }
        // SAFETY: `flat.vals` holds exactly the function's parameters, each of its type (all
        // are i32 or i64, checked just above against `func.ty`), and has room for its
        // results; there are no reference types, and the call is not made from inside
        // another call into the store.
        unsafe { self.func.call_unchecked(&mut *store, &mut flat.vals[..]) }?;
        let results = &flat.vals[..self.results];
        let answer = lift(store, results)?;
        if let (Some(post), [area]) = (&self.post, results) {
            post.call(store, area.get_u32())?;
        }
        Ok(answer)
    }
}

/// `turn`'s flat scalars: the time, the control word and the request's words. Like every
/// turn crossing, it answers a pointer to its two result words.
type TurnFlat = TypedFunc<(u64, u64, u64, u64, u64, u64, u64), u32>;
/// `turn-after-completion`'s flat scalars: the completion's words, then the turn's.
type TurnAfterCompletion =
    TypedFunc<(u64, u64, u64, u64, u64, u64, u64, u64, u64, u64, u64, u64), u32>;
/// `turn-words`' flat values: the time, the control word, the three counts, and the list's
/// pointer and length.
type TurnWords = TypedFunc<(u64, u64, u32, u32, u32, u32, u32), u32>;

/// The interface's functions in one core instance, their export table and their calls,
/// from the interface's list: each call lowers its arguments by their types' [`Lower`] and
/// lifts its answer by [`Lift`].
macro_rules! core_calls {
    (
        provided { $($provided:tt)* }
        required { $($(#[$doc:meta])* $wit:literal $name:ident($($arg:ident: $ty:ty $(as $shape:ty)?),* $(,)?) -> $ret:ty;)* }
    ) => {
        /// Every export of the interface the host calls, with its core signature (params,
        /// results), each built from its types' flat forms: what a component's one core
        /// module must export to be called directly. Checked against the WIT's
        /// canonical-ABI signatures by `exports_match_the_wit`.
        #[allow(
            clippy::extra_unused_lifetimes,
            reason = "the argument types name 'a; their flat forms do not depend on it"
        )]
        pub(super) fn exports<'a>() -> Vec<(&'static str, Vec<Flat>, Vec<Flat>)> {
            let mut list = vec![$({
                let params: &[&[Flat]] = &[$(<$ty as Lower<$($shape)?>>::FLAT),*];
                ($wit, params.concat(), <$ret as Lift>::FLAT.to_vec())
            },)*];
            list.extend(
                layout::TURN_EXPORTS
                    .iter()
                    .map(|(name, params, results)| (*name, params.to_vec(), results.to_vec())),
            );
            list
        }

        /// The interface's functions in one core instance.
        pub(super) struct CoreCalls {
            guest: Guest,
            realloc: TypedFunc<(u32, u32, u32, u32), u32>,
            $($name: Export,)*
            turn: TurnFlat,
            turn_after_completion: TurnAfterCompletion,
            turn_words: TurnWords,
            take_answer: Export,
        }

        impl CoreModule {
            /// Instantiates the module in `store` and looks up every function once.
            pub(super) fn instantiate(&self, store: &mut Store<Caps>) -> wasmtime::Result<CoreCalls> {
                let instance = Instance::new(&mut *store, &self.module, &[])?;
                Ok(CoreCalls {
                    guest: Guest(
                        instance
                            .get_memory(&mut *store, "memory")
                            .ok_or_else(|| wasmtime::Error::msg("the policy exports no memory"))?,
                    ),
                    realloc: instance.get_typed_func(&mut *store, "cabi_realloc")?,
                    $($name: Export::find(&instance, store, $wit)?,)*
                    turn: instance.get_typed_func(&mut *store, &export_name("turn"))?,
                    turn_after_completion: instance
                        .get_typed_func(&mut *store, &export_name("turn-after-completion"))?,
                    turn_words: instance.get_typed_func(&mut *store, &export_name("turn-words"))?,
                    take_answer: Export::find(&instance, store, "take-answer")?,
                })
            }
        }

        #[allow(
            clippy::extra_unused_lifetimes,
            reason = "every call is declared with 'a, whether its arguments borrow or not"
        )]
        impl Scheduler for CoreCalls {
            $(fn $name<'a>(&self, store: &mut Store<Caps>, $($arg: $ty),*) -> wasmtime::Result<$ret> {
                #[allow(unused_mut, reason = "a call without arguments lowers nothing")]
                let mut flat = Flats::default();
                $(<$ty as Lower<$($shape)?>>::lower($arg, self, store, &mut flat)?;)*
                self.$name.call(store, flat, |store, results| {
                    <$ret as Lift>::lift(&self.guest, store, results)
                })
            })*

            fn turn_flat(
                &self,
                store: &mut Store<Caps>,
                now_ns: u64,
                control: u64,
                r: &[u64; 5],
            ) -> wasmtime::Result<(u64, u64)> {
                let area = self
                    .turn
                    .call(&mut *store, (now_ns, control, r[0], r[1], r[2], r[3], r[4]))?;
                self.guest.two_words(store, area)
            }

            fn turn_after_completion(
                &self,
                store: &mut Store<Caps>,
                now_ns: u64,
                control: u64,
                c: &[u64; 5],
                r: &[u64; 5],
            ) -> wasmtime::Result<(u64, u64)> {
                let area = self.turn_after_completion.call(
                    &mut *store,
                    (
                        now_ns, control, c[0], c[1], c[2], c[3], c[4], r[0], r[1], r[2], r[3], r[4],
                    ),
                )?;
                self.guest.two_words(store, area)
            }

            fn turn_words(
                &self,
                store: &mut Store<Caps>,
                now_ns: u64,
                control: u64,
                turn: &crate::policy::Turn<'_>,
            ) -> wasmtime::Result<(u64, u64)> {
                let counts = turn_counts(turn)?;
                let words = turn_len(turn)?;
                let bytes = words
                    .checked_mul(8)
                    .ok_or_else(|| bad("an argument past 4 GiB"))?;
                let (ptr, target) = self.allocate(store, bytes, 8)?;
                let rest = cross::write_packed(turn.completions, target)?;
                let rest = cross::write_packed(turn.merges, rest)?;
                cross::write_packed(turn.requests, rest)?;
                let len = u32::try_from(words).map_err(|_| bad("an argument past 4 GiB"))?;
                let area = self.turn_words.call(
                    &mut *store,
                    (now_ns, control, counts[0], counts[1], counts[2], ptr, len),
                )?;
                self.guest.two_words(store, area)
            }

            fn take_answer(&self, store: &mut Store<Caps>) -> wasmtime::Result<Dispatch> {
                self.take_answer.call(store, Flats::default(), |store, results| {
                    Dispatch::lift(&self.guest, store, results)
                })
            }
        }
    };
}
super::interface::policy_calls!(core_calls);

impl CoreCalls {
    /// Room for `len` bytes in guest memory, allocated by its `cabi_realloc` at `align`: the
    /// pointer and the slice to fill.
    fn allocate<'s>(
        &self,
        store: &'s mut Store<Caps>,
        len: usize,
        align: u32,
    ) -> wasmtime::Result<(u32, &'s mut [u8])> {
        let size = u32::try_from(len).map_err(|_| bad("an argument past 4 GiB"))?;
        let ptr = self.realloc.call(&mut *store, (0, 0, align, size))?;
        if ptr % align.max(1) != 0 {
            return Err(bad("a misaligned allocation"));
        }
        let start = ptr as usize;
        let target = self
            .guest
            .0
            .data_mut(store)
            .get_mut(start..start + len)
            .ok_or_else(|| bad("an allocation outside memory"))?;
        Ok((ptr, target))
    }

    /// Copies `bytes` into guest memory; the pointer.
    fn lower(&self, store: &mut Store<Caps>, bytes: &[u8], align: u32) -> wasmtime::Result<u32> {
        let (ptr, target) = self.allocate(store, bytes.len(), align)?;
        target.copy_from_slice(bytes);
        Ok(ptr)
    }
}

#[cfg(test)]
mod tests;
