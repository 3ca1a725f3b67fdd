//! Backends: what the engine dispatches to. The simulated device models in virtual time
//! ([`sim`]) and io_uring on real files and block devices ([`ring`]).

pub mod ring;
pub mod sim;
