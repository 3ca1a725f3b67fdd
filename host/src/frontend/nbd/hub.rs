//! What the connections and the ring thread share: the inbox of bios, the buffer slots
//! and who gets told when a bio finishes.
//!
//! Slots are of two kinds. Data slots (one bio's payload each) are taken by a connection's
//! reader: a read takes all of its slots at once, so partly-built reads can never hold the
//! pool between them; a write takes one slot per piece and submits it at once. Control
//! slots carry flushes and trims, which have no payload. The ring thread gives back the
//! slots of writes, flushes and trims when they finish; a read's slots go back after its
//! data was sent.
//!
//! Each connection may hold at most a quota of data slots. A read's slots go back to the
//! pool as soon as its reply is on the socket or, when the client does not take it at once,
//! copied out of them ([`Pools::park`]): the copy still counts against the connection's
//! quota, so a client that stops reading its replies stops its own reader, but it holds no
//! slot another client needs. Only I/O on the device holds slots, and the device finishes.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Condvar, Mutex, PoisonError};

use std::sync::Arc;

use super::plan::Work;
use crate::backend::ring::{Notifier, SlotAccess};
use crate::core::Bio;

/// What a connection's replier is told.
#[derive(Debug)]
pub enum Event {
    /// Request `seq` was submitted as `bios` bios (see [`super::session`]).
    Expect(Pending),
    /// Reply `error` to `cookie` at once (a refused or empty request).
    Reply { cookie: u64, error: u32 },
    /// A bio of request `seq` finished.
    Done { seq: u64, status: i32 },
    /// `missing` bios of request `seq` will never be submitted: its payload never came.
    Shortfall { seq: u64, missing: usize },
    /// The reader stopped: no more requests.
    Closed,
}

/// A request submitted and not yet answered.
#[derive(Debug)]
pub struct Pending {
    pub seq: u64,
    pub cookie: u64,
    pub work: Work,
    /// Bios still to finish.
    pub remaining: usize,
    /// A read's slots and lengths, in offset order: the reply's data.
    pub read_slots: Vec<(u32, usize)>,
    pub fua: bool,
    pub bytes: u64,
    /// The connection's ctx, which its FUA flush also carries.
    pub ctx: u32,
}

/// Who is told when a bio finishes.
#[derive(Debug)]
pub struct Owner {
    pub to: Sender<Event>,
    pub seq: u64,
    /// The ring thread returns the slot to the pool (everything but reads).
    pub frees: bool,
    /// The connection's quota, which a data slot counts against.
    pub quota: Arc<Quota>,
}

/// Data slots one connection holds.
#[derive(Debug, Default)]
pub struct Quota {
    held: AtomicU32,
}

/// A bio on its way to the ring thread.
#[derive(Debug)]
pub struct Submission {
    pub slot: u32,
    pub bio: Bio,
    pub owner: Owner,
}

#[derive(Debug, Default)]
struct Free {
    data: Vec<u32>,
    control: Vec<u32>,
    closed: bool,
}

/// The free slots.
#[derive(Debug)]
pub struct Pools {
    free: Mutex<Free>,
    ready: Condvar,
    data_slots: u32,
    /// Data slots one connection may hold at once.
    per_connection: u32,
}

impl Pools {
    /// `data` data slots numbered from 0, then `control` control slots; a connection holds
    /// at most `per_connection` data slots.
    pub fn new(data: u32, control: u32, per_connection: u32) -> Self {
        Self {
            free: Mutex::new(Free {
                data: (0..data).rev().collect(),
                control: (data..data + control).rev().collect(),
                closed: false,
            }),
            ready: Condvar::new(),
            data_slots: data,
            per_connection: per_connection.clamp(1, data.max(1)),
        }
    }

    /// `n` data slots for a connection with `quota`, waiting until that many are free and
    /// within its quota; `None` once the server stops.
    pub fn take_data(&self, n: usize, quota: &Quota) -> Option<Vec<u32>> {
        let mut free = self.lock();
        loop {
            if free.closed {
                return None;
            }
            // Quota counts change only under the pool's lock. A connection holding nothing
            // may take more than its quota at once, so no request waits forever.
            let held = quota.held.load(Ordering::Relaxed) as usize;
            let within = held == 0 || held + n <= self.per_connection as usize;
            if free.data.len() >= n && within {
                quota.held.store((held + n) as u32, Ordering::Relaxed);
                let at = free.data.len() - n;
                return Some(free.data.split_off(at));
            }
            free = self
                .ready
                .wait(free)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// A control slot, waiting until one is free; `None` once the server stops.
    pub fn take_control(&self) -> Option<u32> {
        let mut free = self.lock();
        loop {
            if free.closed {
                return None;
            }
            if let Some(slot) = free.control.pop() {
                return Some(slot);
            }
            free = self
                .ready
                .wait(free)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Gives `slot` back; a data slot leaves `quota`.
    pub fn put(&self, slot: u32, quota: &Quota) {
        let mut free = self.lock();
        if slot < self.data_slots {
            free.data.push(slot);
            let held = quota.held.load(Ordering::Relaxed);
            quota.held.store(held.saturating_sub(1), Ordering::Relaxed);
        } else {
            free.control.push(slot);
        }
        drop(free);
        self.ready.notify_all();
    }

    /// Gives `slots` back to the pool while their data waits, copied, for a slow client:
    /// they still count against `quota` until [`Self::unpark`].
    pub fn park(&self, slots: &[u32]) {
        let mut free = self.lock();
        free.data
            .extend(slots.iter().filter(|&&s| s < self.data_slots));
        drop(free);
        self.ready.notify_all();
    }

    /// The copy of `n` parked slots' data has been sent (or dropped): they leave `quota`.
    pub fn unpark(&self, n: usize, quota: &Quota) {
        let free = self.lock();
        let held = quota.held.load(Ordering::Relaxed);
        quota
            .held
            .store(held.saturating_sub(n as u32), Ordering::Relaxed);
        drop(free);
        self.ready.notify_all();
    }

    /// Wakes every waiter with `None`: the server is stopping after a failure.
    pub fn close(&self) {
        self.lock().closed = true;
        self.ready.notify_all();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Free> {
        self.free.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Shared by the ring thread, the acceptor and every connection.
pub struct Hub {
    pub inbox: Mutex<Vec<Submission>>,
    pub notifier: Arc<Notifier>,
    pub slots: SlotAccess,
    pub pools: Pools,
    /// Bytes per data slot: the largest bio.
    pub chunk: u32,
    /// No new connections; the ring thread ends once the live ones are gone.
    pub stopping: AtomicBool,
    /// The ring thread failed: connections end without waiting for their I/O.
    pub failed: AtomicBool,
    /// Connections whose replier is still running.
    pub live: AtomicUsize,
}

impl Hub {
    /// Hands bios to the ring thread and wakes it.
    pub fn submit(&self, submissions: impl IntoIterator<Item = Submission>) {
        self.inbox
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend(submissions);
        self.notifier.notify();
    }

    /// The bios waiting for the ring thread.
    pub fn take_inbox(&self, into: &mut Vec<Submission>) {
        std::mem::swap(
            into,
            &mut *self.inbox.lock().unwrap_or_else(PoisonError::into_inner),
        );
    }

    /// True iff no bio waits for the ring thread.
    pub fn inbox_is_empty(&self) -> bool {
        self.inbox
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_empty()
    }

    /// True iff the ring thread failed.
    pub fn has_failed(&self) -> bool {
        self.failed.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_waits_until_all_its_slots_are_free_at_once() {
        let pools = Arc::new(Pools::new(4, 1, 4));
        let (a, b) = (Arc::new(Quota::default()), Arc::new(Quota::default()));
        let held = pools.take_data(3, &a).unwrap();
        assert_eq!(held.len(), 3);
        let waiter = {
            let (pools, b) = (Arc::clone(&pools), Arc::clone(&b));
            std::thread::spawn(move || pools.take_data(2, &b))
        };
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert!(!waiter.is_finished(), "only one slot is free");
        pools.put(held[0], &a);
        let got = waiter.join().unwrap().unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(pools.take_control(), Some(4));
    }

    #[test]
    fn one_connection_cannot_take_more_than_its_quota() {
        let pools = Arc::new(Pools::new(8, 0, 3));
        let greedy = Arc::new(Quota::default());
        let held = pools.take_data(3, &greedy).unwrap();
        let blocked = {
            let (pools, greedy) = (Arc::clone(&pools), Arc::clone(&greedy));
            std::thread::spawn(move || pools.take_data(1, &greedy))
        };
        // Another connection still gets slots while the greedy one waits; one holding
        // nothing may even take more than its quota at once.
        let other = Quota::default();
        assert_eq!(pools.take_data(5, &other).map(|s| s.len()), Some(5));
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert!(!blocked.is_finished(), "over its quota");
        pools.put(held[0], &greedy);
        assert_eq!(blocked.join().unwrap().map(|s| s.len()), Some(1));
    }

    #[test]
    fn parked_slots_serve_other_connections_but_still_count_against_their_own() {
        let pools = Pools::new(4, 0, 4);
        let (slow, other) = (Quota::default(), Quota::default());
        let held = pools.take_data(4, &slow).unwrap();
        pools.park(&held);
        // The pool has every slot again for others …
        assert_eq!(pools.take_data(4, &other).map(|s| s.len()), Some(4));
        // … while the slow connection's quota is still spent until its copy is sent.
        assert_eq!(slow.held.load(Ordering::Relaxed), 4);
        pools.unpark(4, &slow);
        assert_eq!(slow.held.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn closing_the_pools_releases_waiters() {
        let pools = Arc::new(Pools::new(1, 0, 1));
        let _held = pools.take_data(1, &Quota::default()).unwrap();
        let waiter = {
            let pools = Arc::clone(&pools);
            std::thread::spawn(move || pools.take_control())
        };
        pools.close();
        assert_eq!(waiter.join().unwrap(), None);
    }
}
