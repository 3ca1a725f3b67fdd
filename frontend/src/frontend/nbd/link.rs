//! The socket side of a served client, which the sans-IO connection does not see: the
//! socket and its armed polls ([`Link`]), the socket as the connection's [`Transport`], the
//! engine's feed as its [`BioSink`], and what every connection shares ([`Common`]).

use std::time::Duration;

use super::conn::{BioSink, Conn, Env, Owner, Transport};
use super::decide::ExportBounds;
use super::net::Stream;
use super::pool::Pools;
use crate::backend::ring::SlotAccess;
use crate::core::Bio;
use crate::engine::{Backend, Feed};

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

/// A connection's stream is its socket.
impl Transport for Stream {
    fn recv_now(&mut self, buf: &mut [u8]) -> std::io::Result<Option<usize>> {
        Stream::recv_now(self, buf)
    }

    fn send_now(&mut self, parts: &[std::io::IoSlice<'_>]) -> std::io::Result<usize> {
        Stream::send_now(self, parts)
    }

    fn unread_bytes(&self) -> usize {
        Stream::unread_bytes(self)
    }

    fn shutdown_read(&mut self) {
        let _ = Stream::shutdown_read(self);
    }

    fn shutdown(&mut self) {
        let _ = Stream::shutdown(self);
    }
}

/// A connection's bios go to the engine's feed.
impl<B: Backend> BioSink for Feed<'_, B> {
    fn submit(&mut self, bio: Bio) {
        Feed::submit(self, bio);
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
    /// A connection's view of it for one call: its export's bounds, its stream, where its
    /// bios go, the time.
    pub(super) fn env<'e>(
        &'e mut self,
        export: usize,
        wire: &'e mut dyn Transport,
        bios: &'e mut dyn BioSink,
        now: u64,
    ) -> Env<'e> {
        Env {
            pools: &mut self.pools,
            owners: &mut self.owners,
            slots: &self.slots,
            limits: &self.limits[export],
            chunk: self.chunk,
            timeout: self.timeout,
            wire,
            bios,
            now,
        }
    }
}
