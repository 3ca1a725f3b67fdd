//! Containers every real policy needs, deterministic on every target, and laid out for a
//! component's 32-bit linear memory and a request's churn: direct indices by the host's
//! request slots instead of hashing, a one-multiply table for one-word keys, sorted vectors
//! and deques instead of B-trees, and no allocation per request once a queue has grown to
//! its depth.

mod elevator;
mod expiry_fifo;
mod id_map;
mod sector_set;
mod word_map;

pub use elevator::{ElevatorQueue, Extent};
pub use expiry_fifo::{Due, ExpiryFifo};
pub use id_map::{DENSE_SLOTS, IdHasher, IdMap, IdSet};
pub use sector_set::{Positioned, SectorSet};
pub use word_map::{Word, WordMap};

/// One step of a fixed pseudo-random walk (xorshift64), for the model tests that drive a
/// collection and a plain model with the same operations.
#[cfg(test)]
pub(crate) fn xorshift(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}
