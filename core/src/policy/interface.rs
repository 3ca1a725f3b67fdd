//! The policy interface, declared once.
//!
//! The SDK declares every call a policy answers (`schedhost_sdk::__policy_calls!`, in
//! `sdk/src/interface.rs`): its export in the WIT, its name and arguments, and its answer.
//! [`policy_calls!`] adds the host's own `turn` and hands the list on. From it come the
//! [`PolicyBackend`] trait, the [`Call`] and [`Answered`] a wrapper sees, [`Wrapped`]'s
//! forwarding of every call through one [`Around`] hook (timing for the metrics, the
//! contract's recorder), [`super::NativePolicy`]'s calls into the SDK's runtime, and on the
//! component side the calls through the component API and through a component's core
//! module (`calls.rs`, `core_abi/`) and [`super::WasmPolicy`]'s methods; in the SDK, the
//! runtime's forwarding methods and a component's exports. A list expanded by
//! `macro_rules` rather than a build step: the compiler checks every expansion against the
//! trait, and there is no generated file to keep in step.
//!
//! What is written by hand is how each *type* crosses, once: to the component API's values
//! (`calls.rs`), to the canonical ABI's flat values and memory (`core_abi/cross.rs`, whose
//! layouts and the export table built from them are tested against `wit/policy.wit`). So a
//! new call is an entry in the SDK's list, its export in the WIT and its method on the
//! SDK's `Policy`.

use super::Fault;

/// Hands `$then` the interface's calls: the SDK's list ([`schedhost_sdk::__policy_calls`]),
/// every one an export of the WIT and answered by every backend, as `required`; and before
/// it the host's own calls, each with a default made of the others (`= default_fn`), as
/// `provided`. Each is `"wit-name" name(args) -> answer`; an argument may carry its shape
/// (`as Words`: packed records), which only the crossings read. (`turn` is the host's: the
/// component speaks it as `turn`, `turn-after-completion`, `turn-words` and `take-answer`.)
macro_rules! policy_calls {
    ($then:ident) => {
        schedhost_sdk::__policy_calls! { all [$then]
            provided {
                /// One driver turn: `turn`'s completions, merges, new requests and dispatch,
                /// heard in that order, in as few crossings as the backend can make it (a
                /// component: one, in flat scalars when there is at most one completion and
                /// one request and no merge, else as one `turn-words` list; and a second,
                /// `take-answer`, when more than one id is dispatched). The answer is the
                /// dispatch's, if one was asked for.
                "turn" turn(now_ns: u64, turn: &'a $crate::policy::Turn<'a>)
                    -> Option<schedhost_sdk::Dispatch> = $crate::policy::turn_by_parts;
            }
        }
    };
}
pub(super) use policy_calls;

/// The trait, [`Call`], [`Answered`] and [`Wrapped`]'s forwarding, from the list.
macro_rules! declare {
    (
        provided { $($(#[$pdoc:meta])* $pwit:literal $pname:ident($($parg:ident: $pty:ty),* $(,)?) -> $pret:ty = $pdefault:path;)* }
        required { $($(#[$rdoc:meta])* $rwit:literal $rname:ident($($rarg:ident: $rty:ty $(as $rshape:ty)?),* $(,)?) -> $rret:ty;)* }
    ) => {
        /// A running policy instance for one device. Every call may fail with a [`Fault`];
        /// answers that are the policy's own refusals (a bad tunable) come back as
        /// `Ok(Err(message))`.
        #[allow(
            clippy::extra_unused_lifetimes,
            reason = "every call is declared with 'a, whether its arguments borrow or not"
        )]
        pub trait PolicyBackend: Send {
            $($(#[$rdoc])* fn $rname<'a>(&mut self, $($rarg: $rty),*) -> Result<$rret, Fault>;)*
            $($(#[$pdoc])* fn $pname<'a>(&mut self, $($parg: $pty),*) -> Result<$pret, Fault> {
                $pdefault(self, $($parg),*)
            })*

            /// A new, uninitialised instance of the same policy (for restarts after a
            /// fault), if the backend can make one.
            fn fresh(&self) -> Option<Box<dyn PolicyBackend>> {
                None
            }

            /// The most linear memory the instance has held, if it runs in a sandbox that
            /// counts it.
            fn memory_bytes(&mut self) -> Option<u64> {
                None
            }

            /// A dispatch answer the caller has acted on, handed back so the backend's next
            /// answer reuses its id list: one allocation per I/O saved.
            fn give_back(&mut self, answer: schedhost_sdk::Dispatch) {
                drop(answer);
            }
        }

        /// One call on its way to the policy, with its arguments.
        #[derive(Debug, Clone, Copy)]
        #[allow(non_camel_case_types, missing_docs, reason = "a variant per call, named as the call")]
        pub enum Call<'a> {
            $($rname { $($rarg: $rty),* },)*
            $($pname { $($parg: $pty),* },)*
        }

        /// A call's answer, as the policy gave it.
        #[derive(Debug, Clone, Copy)]
        #[allow(non_camel_case_types, missing_docs, reason = "a variant per call, named as the call")]
        pub enum Answered<'a> {
            $($rname(Result<&'a $rret, &'a Fault>),)*
            $($pname(Result<&'a $pret, &'a Fault>),)*
        }

        #[allow(
            clippy::extra_unused_lifetimes,
            reason = "every call is declared with 'a, whether its arguments borrow or not"
        )]
        impl<H: Around> PolicyBackend for Wrapped<H> {
            $(fn $rname<'a>(&mut self, $($rarg: $rty),*) -> Result<$rret, Fault> {
                let call = Call::$rname { $($rarg),* };
                self.hook.before(self.inner.as_mut(), &call)?;
                let answer = self.inner.$rname($($rarg),*);
                self.hook.after(self.inner.as_mut(), &call, Answered::$rname(answer.as_ref()));
                answer
            })*
            $(fn $pname<'a>(&mut self, $($parg: $pty),*) -> Result<$pret, Fault> {
                let call = Call::$pname { $($parg),* };
                self.hook.before(self.inner.as_mut(), &call)?;
                let answer = self.inner.$pname($($parg),*);
                self.hook.after(self.inner.as_mut(), &call, Answered::$pname(answer.as_ref()));
                answer
            })*

            fn fresh(&self) -> Option<Box<dyn PolicyBackend>> {
                let inner = self.inner.fresh()?;
                Some(Box::new(Wrapped::new(inner, self.hook.fresh()?)))
            }

            fn memory_bytes(&mut self) -> Option<u64> {
                self.inner.memory_bytes()
            }

            fn give_back(&mut self, answer: schedhost_sdk::Dispatch) {
                self.inner.give_back(answer);
            }
        }
    };
}
policy_calls!(declare);

/// What a wrapper does around every call of the policy it wraps.
pub trait Around: Send + 'static {
    /// Before `call` reaches the policy, `inner`. An error answers the call instead of the
    /// policy (a recorder whose own calls of it failed).
    ///
    /// # Errors
    /// The fault to answer with.
    fn before(&mut self, inner: &mut dyn PolicyBackend, call: &Call<'_>) -> Result<(), Fault> {
        let _ = (inner, call);
        Ok(())
    }

    /// After the policy, `inner`, answered `call` with `answer`.
    fn after(&mut self, inner: &mut dyn PolicyBackend, call: &Call<'_>, answer: Answered<'_>);

    /// The same hook for a fresh instance of the policy (a restart), if it can follow one.
    fn fresh(&self) -> Option<Self>
    where
        Self: Sized;
}

/// `inner` with every call going through `hook`.
pub struct Wrapped<H> {
    inner: Box<dyn PolicyBackend>,
    hook: H,
}

impl<H: Around> Wrapped<H> {
    /// Wraps `inner` in `hook`.
    pub fn new(inner: Box<dyn PolicyBackend>, hook: H) -> Self {
        Self { inner, hook }
    }
}

impl<H: std::fmt::Debug> std::fmt::Debug for Wrapped<H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wrapped")
            .field("hook", &self.hook)
            .finish_non_exhaustive()
    }
}
