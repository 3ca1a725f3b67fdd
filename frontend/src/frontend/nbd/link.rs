//! The driver's side of a served client, which the sans-IO connection does not see: the
//! socket and its armed polls ([`Link`]), the stream the connection's bytes come from and
//! go to ([`Transport`]), the slots' bytes over the ring's arena ([`SlotBytes`]), and the
//! loops that carry bytes and bios between them ([`read_in`], [`write_out`], [`act`]).

use std::io::{self, IoSlice};
use std::time::Duration;

use super::conn::{Conn, Env, Intake, Owner, Paused, REQUESTS_PER_TURN, Shutdown, SlotBytes};
use super::decide::ExportBounds;
use super::net::Stream;
use super::pool::Pools;
use crate::backend::ring::{Lease, SlotAccess};
use crate::core::Bio;

/// A served client: its socket, the polls armed on it, and the connection, which owns no
/// socket of its own.
pub(super) struct Link {
    pub(super) stream: Stream,
    /// A poll for readable is armed on the ring.
    pub(super) polling_in: bool,
    /// A poll for writable is armed on the ring.
    pub(super) polling_out: bool,
    pub(super) conn: Conn,
}

/// The byte stream a connection's driver reads requests from and writes replies to,
/// without ever waiting: the client's non-blocking socket, or bytes in memory in a test.
pub trait Transport {
    /// Reads what has arrived into `buf`: `Some(0)` at the end of the stream, `None` if
    /// nothing has arrived.
    ///
    /// # Errors
    /// The stream failed.
    fn recv_now(&mut self, buf: &mut [u8]) -> io::Result<Option<usize>>;

    /// Writes what the stream takes of `parts` now; returns how many bytes.
    ///
    /// # Errors
    /// The stream failed (`BrokenPipe` or `ConnectionReset` when the peer left).
    fn send_now(&mut self, parts: &[IoSlice<'_>]) -> io::Result<usize>;

    /// Bytes that arrived and have not been read.
    fn unread_bytes(&self) -> usize;

    /// Shuts the stream `how`.
    fn shutdown(&mut self, how: Shutdown);
}

/// A connection's stream is its socket.
impl Transport for Stream {
    fn recv_now(&mut self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        Stream::recv_now(self, buf)
    }

    fn send_now(&mut self, parts: &[IoSlice<'_>]) -> io::Result<usize> {
        Stream::send_now(self, parts)
    }

    fn unread_bytes(&self) -> usize {
        Stream::unread_bytes(self)
    }

    fn shutdown(&mut self, how: Shutdown) {
        // A socket the peer already closed cannot be shut again; nothing is lost.
        let _ = match how {
            Shutdown::Read => Stream::shutdown_read(self),
            Shutdown::Both => Stream::shutdown(self),
        };
    }
}

/// The connections see the ring's arena through this: a slot's bytes by its number.
impl SlotBytes for SlotAccess {
    fn bytes(&self, slot: u32) -> &[u8] {
        // SAFETY: a connection reads only the slots of its finished reads that it has not
        // given back: no I/O uses them, and only the engine's thread touches the pool.
        unsafe { self.slot(Lease::new(slot)) }
    }

    fn bytes_mut(&mut self, slot: u32) -> &mut [u8] {
        // SAFETY: a connection fills only a slot it took off the free pool and has not yet
        // lent to a bio (its lending asserts the slot had no owner), so no I/O uses it, and
        // the exclusive borrow of the view means no other reference into it is alive here.
        unsafe { self.slot_mut(Lease::new(slot)) }
    }
}

/// Reads into `conn` what `wire` has for it and starts what that makes up, up to a turn's
/// steps. Returns true iff it stopped only for the turn's bound, with more to read.
pub(super) fn read_in(
    conn: &mut Conn,
    id: u64,
    wire: &mut dyn Transport,
    env: &mut Env<'_>,
) -> bool {
    let mut budget = REQUESTS_PER_TURN;
    loop {
        match conn.read(id, env, &mut budget) {
            Paused::Spent => return true,
            Paused::Waits => return false,
            Paused::Bytes => {}
        }
        let got = match conn.intake() {
            Intake::Nothing => return false,
            Intake::Buffer => {
                let room = conn.rx_room();
                if room.is_empty() {
                    return false;
                }
                wire.recv_now(room)
            }
            Intake::Payload { slot, range } => wire.recv_now(&mut env.slots.bytes_mut(slot)[range]),
        };
        if !conn.received(env, got) {
            return false;
        }
    }
}

/// Sends what `conn` has to send, as far as `wire` takes it now.
pub(super) fn write_out(conn: &mut Conn, wire: &mut dyn Transport, env: &mut Env<'_>) {
    loop {
        let parts = conn.transmit(&*env.slots);
        if parts.is_empty() {
            return;
        }
        let offered: usize = parts.iter().map(|p| p.len()).sum();
        let sent = wire.send_now(&parts);
        drop(parts);
        match sent {
            Ok(n) => {
                conn.sent(env, n);
                if n < offered {
                    return;
                }
            }
            Err(e) => {
                conn.send_failed(env, &e, wire.unread_bytes());
                return;
            }
        }
    }
}

/// Carries out what `conn` asked for: its bios to `bios` (the engine's feed), its replies
/// to the stream, and the stream's shutdown.
pub(super) fn act(
    conn: &mut Conn,
    wire: &mut dyn Transport,
    env: &mut Env<'_>,
    bios: &mut dyn FnMut(Bio),
) {
    conn.drain_bios().for_each(&mut *bios);
    write_out(conn, wire, env);
    // Sends that failed may have asked for a shutdown; nothing they do starts a bio.
    if let Some(how) = conn.take_shutdown() {
        wire.shutdown(how);
    }
}

/// What every connection works with: the buffer slots and who holds them, and each
/// export's rules.
pub(super) struct Common {
    pub(super) pools: Pools,
    /// Per buffer slot, whose bio holds it.
    pub(super) owners: Vec<Option<Owner>>,
    pub(super) slots: SlotAccess,
    /// Per export, its bounds.
    pub(super) limits: Vec<ExportBounds>,
    pub(super) chunk: u32,
    pub(super) timeout: Duration,
}

impl Common {
    /// A connection's view of it for one call: its export's bounds and the time.
    pub(super) fn env(&mut self, export: usize, now: u64) -> Env<'_> {
        Env {
            pools: &mut self.pools,
            owners: &mut self.owners,
            slots: &mut self.slots,
            limits: &self.limits[export],
            chunk: self.chunk,
            timeout: self.timeout,
            now,
        }
    }
}
