//! Policies linked into the host through the SDK's native mode: the same crate a component
//! is built from, called directly. Used for the wasm-vs-native benchmark and in tests.

use schedhost_sdk::{Policy, Runtime};

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

/// Every required call goes straight to the SDK's runtime, which has a method of the same
/// name and arguments for each; the provided ones keep their defaults.
macro_rules! native_calls {
    (
        provided { $($provided:tt)* }
        required { $($(#[$doc:meta])* $wit:literal $name:ident($($arg:ident: $ty:ty $(as $shape:ty)?),* $(,)?) -> $ret:ty;)* }
    ) => {
        #[allow(
            clippy::extra_unused_lifetimes,
            reason = "every call is declared with 'a, whether its arguments borrow or not"
        )]
        impl<P: Policy + Send + 'static> PolicyBackend for NativePolicy<P> {
            $(fn $name<'a>(&mut self, $($arg: $ty),*) -> Result<$ret, Fault> {
                Ok(self.0.$name($($arg),*))
            })*

            fn fresh(&self) -> Option<Box<dyn PolicyBackend>> {
                Some(Box::new(Self::default()))
            }

            fn give_back(&mut self, answer: schedhost_sdk::Dispatch) {
                self.0.give_back(answer);
            }
        }
    };
}
super::interface::policy_calls!(native_calls);

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
    (
        "anticipatory",
        make::<schedhost_policy_anticipatory::Anticipatory>,
    ),
    ("mclock", make::<schedhost_policy_mclock::Mclock>),
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
