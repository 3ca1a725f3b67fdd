//! What the acceptor and the handshake threads share with the engine's thread: clients that
//! finished their handshake, and the server's state.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use super::net::Stream;
use crate::backend::ring::Notifier;

/// A client past its handshake, on its way to the engine's thread.
#[derive(Debug)]
pub struct Arrival {
    /// Its address, numbered.
    pub peer: String,
    /// The socket.
    pub stream: Stream,
    /// When it connected.
    pub started: Instant,
}

/// The server's shared state.
#[derive(Debug)]
pub struct Hub {
    /// Clients past their handshake that the engine has not taken yet.
    pub arrivals: Mutex<Vec<Arrival>>,
    /// Wakes the engine's ring.
    pub notifier: Arc<Notifier>,
    /// The server stops: no new clients, and each connection finishes what it sent.
    pub stopping: AtomicBool,
    /// The engine failed: handshakes end.
    pub failed: AtomicBool,
    /// Open connections, in their handshake or served.
    pub live: AtomicUsize,
}

impl Hub {
    /// Hands a client past its handshake to the engine and wakes it.
    pub fn arrive(&self, arrival: Arrival) {
        self.lock_arrivals().push(arrival);
        self.notifier.notify();
    }

    /// The clients that arrived since the last call.
    pub fn take_arrivals(&self, into: &mut Vec<Arrival>) {
        std::mem::swap(into, &mut *self.lock_arrivals());
    }

    /// True iff no client waits to be taken.
    pub fn no_arrivals(&self) -> bool {
        self.lock_arrivals().is_empty()
    }

    /// True iff the engine failed.
    pub fn has_failed(&self) -> bool {
        self.failed.load(Ordering::Acquire)
    }

    fn lock_arrivals(&self) -> std::sync::MutexGuard<'_, Vec<Arrival>> {
        self.arrivals.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
