//! One client connection after the handshake, as a state machine: bytes in, actions out.
//! Requests are parsed from the bytes its driver hands it and become bios of the
//! connection's ctx; each request is answered once its bios finished. Replies may go out of
//! order, as the protocol allows; each is written whole.
//!
//! The connection owns no socket, no buffer arena and no clock. Its driver (`super::link`
//! for the server's sockets, an in-memory stream in the tests) asks it where the next bytes
//! go ([`Conn::intake`]: its own receive buffer, or straight into a write's slot), reads
//! into that place and says what came ([`Conn::received`]); it takes the bios the
//! connection started ([`Conn::drain_bios`]), the bytes it has to send ([`Conn::transmit`],
//! answered by [`Conn::sent`] or [`Conn::send_failed`]) and how its stream is to be shut
//! ([`Conn::take_shutdown`]). The slots' memory reaches it only through [`SlotBytes`], which
//! the driver implements over the arena. Time is the engine's `now`, and the connection says
//! when its next deadline falls ([`Conn::next_deadline`]).
//!
//! Invariants, asserted in every build where they are relied on:
//!
//! - A buffer slot is lent to one bio at a time (`Conn::submit`), and every bio that
//!   finishes holds one (the front's completion path): a slot's bytes are one request's.
//! - A request is answered once, after its last bio (`Conn::finished`): no bio finishes for
//!   a request already answered, nor more bios than it sent.
//! - A reply goes out in order and whole, never past its end (`Conn::sent`).
//! - The unread bytes stay inside the receive buffer (`Conn::received`).

use std::collections::{HashMap, VecDeque};
use std::io::{self, IoSlice};
use std::ops::Range;
use std::time::{Duration, Instant};

use schedhost_sdk::{Op, PrioClass};

use super::decide::{self, Decision, ExportBounds, Work};
use super::pool::{Holder, Pools};
use super::wire::{self, Request};
use crate::backend::ring::Lease;
use crate::core::Bio;

/// The buffer slots' bytes, lent by the driver, which owns the arena: the connection writes
/// a write's payload into a slot it holds (off the free pool, its bio not yet submitted)
/// and reads a finished read's data from one (not yet given back).
pub trait SlotBytes {
    /// Slot `slot`'s bytes.
    fn bytes(&self, slot: u32) -> &[u8];

    /// Slot `slot`'s bytes, to fill.
    fn bytes_mut(&mut self, slot: u32) -> &mut [u8];
}

/// Where the connection's next bytes from the stream go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Intake {
    /// It reads nothing now (it waits for slots, or its reading is over).
    Nothing,
    /// Into its receive buffer ([`Conn::rx_room`]).
    Buffer,
    /// Straight into `range` of slot `slot`: a write's payload, with no copy.
    Payload {
        /// The slot.
        slot: u32,
        /// The bytes of it still to fill.
        range: Range<usize>,
    },
}

/// How the connection's stream is to be shut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shutdown {
    /// Nothing more is read; replies still go out.
    Read,
    /// Both directions.
    Both,
}

mod reading;
pub use reading::Paused;
mod replying;
#[cfg(test)]
mod tests;

/// What a connection did, for the server's summary.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Tally {
    /// Reads answered with data.
    pub reads: u64,
    /// Writes completed.
    pub writes: u64,
    /// Flushes completed.
    pub flushes: u64,
    /// Trims completed.
    pub trims: u64,
    /// Write-zeroes completed.
    pub zeroes: u64,
    /// Bytes sent back to the client.
    pub bytes_read: u64,
    /// Bytes the client wrote.
    pub bytes_written: u64,
    /// Requests answered with an error.
    pub errors: u64,
}

impl Tally {
    /// Adds `other`'s counts.
    pub fn add(&mut self, other: &Self) {
        self.reads += other.reads;
        self.writes += other.writes;
        self.flushes += other.flushes;
        self.trims += other.trims;
        self.zeroes += other.zeroes;
        self.bytes_read += other.bytes_read;
        self.bytes_written += other.bytes_written;
        self.errors += other.errors;
    }

    fn count(&mut self, work: Work, bytes: u64, error: u32) {
        if error != 0 {
            self.errors += 1;
            return;
        }
        match work {
            Work::Read => {
                self.reads += 1;
                self.bytes_read += bytes;
            }
            Work::Write => {
                self.writes += 1;
                self.bytes_written += bytes;
            }
            Work::Zeroes => self.zeroes += 1,
            Work::Trim => self.trims += 1,
            Work::Flush => self.flushes += 1,
        }
    }
}

/// Most replies that may wait for a client at once. Read data counts against the client's
/// quota; replies without data (write acknowledgements) do not, so their number is bounded
/// here: a client that has not taken this many replies is not reading them.
const MAX_WAITING_REPLIES: usize = 4096;

/// Bytes read from a socket at once, beyond what a request being built takes directly.
const RX_BYTES: usize = 64 * 1024;

/// Steps (a request read and started, its payload included) one connection takes in one
/// turn, so a pipelining client cannot keep the engine from the others.
pub const REQUESTS_PER_TURN: usize = 64;

/// What a bio's completion is for: request `seq` of connection `conn`.
#[derive(Debug, Clone, Copy)]
pub struct Owner {
    /// The connection.
    pub conn: u64,
    /// The request.
    pub seq: u64,
    /// The slot goes back to the pool when the bio finishes (everything but reads, whose
    /// slots hold the reply's data).
    pub frees: bool,
}

/// What a connection works with for one call: the shared slots, their owners and their
/// bytes, the export's rules, and the engine's time.
pub struct Env<'a> {
    /// The free slots.
    pub pools: &'a mut Pools,
    /// Per slot, whose bio holds it.
    pub owners: &'a mut [Option<Owner>],
    /// The slots' memory, as the driver lends it.
    pub slots: &'a mut dyn SlotBytes,
    /// The export's bounds.
    pub limits: &'a ExportBounds,
    /// Bytes per bio.
    pub chunk: u32,
    /// How long a reply, or a write's payload piece, may take.
    pub timeout: Duration,
    /// The engine's time now (ns), which deadlines are on.
    pub now: u64,
}

impl Env<'_> {
    /// The deadline of something that may take `timeout` from now.
    fn due(&self) -> u64 {
        let timeout = u64::try_from(self.timeout.as_nanos()).unwrap_or(u64::MAX);
        self.now.saturating_add(timeout)
    }
}

/// A request whose bios are out.
#[derive(Debug)]
struct Pending {
    cookie: u64,
    work: Work,
    /// Bios still to finish.
    remaining: usize,
    /// A read's slots and lengths, in offset order: the reply's data.
    read_slots: Vec<(u32, usize)>,
    /// A flush is still owed before the reply (forced unit access).
    fua: bool,
    bytes: u64,
    /// The first error a bio reported.
    error: u32,
}

/// One request's I/O.
#[derive(Debug, Clone, Copy)]
struct Io {
    seq: u64,
    cookie: u64,
    work: Work,
    offset: u64,
    length: u32,
}

/// What the reader is doing.
#[derive(Debug)]
enum Reading {
    /// Waiting for a request header.
    Header,
    /// Reading and dropping a write's payload, then replying with the `(cookie, error)`
    /// if one is given.
    Skip {
        left: u64,
        reply: Option<(u64, u32)>,
    },
    /// A read waits for all its slots.
    Slots(Io),
    /// A flush or trim waits for a control slot.
    Control(Io),
    /// A write's payload: `pieces[next..]` still to fill; the current one into `slot`, with
    /// `got` bytes so far, due by `due`.
    Payload {
        io: Io,
        pieces: Vec<(u64, u32)>,
        next: usize,
        slot: Option<(u32, u64)>,
        got: usize,
    },
    /// No more requests are read.
    Done,
}

/// A reply the client has not taken yet, copied out of the buffer pool.
#[derive(Debug)]
struct Waiting {
    bytes: Vec<u8>,
    /// Bytes of it already sent.
    sent: usize,
    /// Data slots its copy stands for, still counted against the connection's quota.
    slots: usize,
    /// When it must have reached the client (engine ns).
    due: u64,
}

/// One connection in its transmission phase.
#[derive(Debug)]
pub struct Conn {
    /// Its address, numbered.
    pub peer: String,
    /// Its software queue.
    pub ctx: u32,
    /// When it connected.
    pub started: Instant,
    /// The export it chose: an index into the server's exports, whose bounds its requests
    /// are held to.
    pub export: usize,
    /// Data slots it holds, parked copies included (its quota's count), and its tenant.
    pub holder: Holder,
    /// What it did.
    pub tally: Tally,
    /// Why the server closed it, if the client broke the protocol.
    pub closed_because: Option<String>,
    rx: Box<[u8]>,
    rx_start: usize,
    rx_end: usize,
    reading: Reading,
    seq: u64,
    pending: HashMap<u64, Pending>,
    waiting: VecDeque<Waiting>,
    /// Replies made and not yet offered to the stream, in the order they were made: they go
    /// out when the driver transmits, so the completions of one reap leave in one send.
    outbox: Vec<replying::Reply>,
    /// Bios started and not yet taken by the driver, in order.
    bios: Vec<Bio>,
    /// How the stream is to be shut, not yet taken by the driver.
    shutdown: Option<Shutdown>,
    /// FUA requests whose writes finished, waiting for a control slot for their flush.
    flushes: VecDeque<u64>,
    /// A reply could not be sent: the stream is out of step, so nothing read after runs.
    broken: bool,
    /// Only this many more bytes are read: those that had arrived when the peer left or
    /// the server began to stop. The requests a client sent before then are answered, and
    /// nothing sent later is read.
    drain_left: Option<usize>,
    /// The peer stopped reading (a send failed with EPIPE or ECONNRESET): replies are
    /// dropped, and the requests that had arrived still run.
    peer_gone: bool,
    /// The server is stopping: requests that have not started are refused with
    /// `ESHUTDOWN`, and those that have finish.
    stopping: bool,
}

impl Conn {
    /// The connection is on export `export` (an index into the server's exports), and its
    /// slots come from `tenant`'s share.
    pub fn on_export(mut self, export: usize, tenant: usize) -> Self {
        self.export = export;
        self.holder.tenant = tenant;
        self
    }

    /// A connection past its handshake, with what the client sent after it (`early`) and
    /// the handshake's replies the stream has not taken yet (`unsent`, due by `due`, engine
    /// ns).
    pub fn new(
        (peer, ctx, started): (String, u32, Instant),
        early: &[u8],
        (unsent, due): (Vec<u8>, u64),
    ) -> Self {
        let mut rx = vec![0; RX_BYTES.max(early.len())].into_boxed_slice();
        rx[..early.len()].copy_from_slice(early);
        let mut waiting = VecDeque::new();
        if !unsent.is_empty() {
            waiting.push_back(Waiting {
                bytes: unsent,
                sent: 0,
                slots: 0,
                due,
            });
        }
        Self {
            peer,
            ctx,
            started,
            export: 0,
            holder: Holder::default(),
            tally: Tally::default(),
            closed_because: None,
            rx,
            rx_start: 0,
            rx_end: early.len(),
            reading: Reading::Header,
            seq: 0,
            pending: HashMap::new(),
            waiting,
            outbox: Vec::new(),
            bios: Vec::new(),
            shutdown: None,
            flushes: VecDeque::new(),
            broken: false,
            drain_left: None,
            peer_gone: false,
            stopping: false,
        }
    }

    /// True once nothing is left to do: no more requests, none out, no reply waiting, no
    /// bio or shutdown the driver has not taken.
    pub fn is_over(&self) -> bool {
        matches!(self.reading, Reading::Done)
            && self.pending.is_empty()
            && self.waiting.is_empty()
            && self.outbox.is_empty()
            && self.flushes.is_empty()
            && self.bios.is_empty()
            && self.shutdown.is_none()
    }

    /// The bios it started since the driver last took them, in order: the driver submits
    /// them (their slots already hold what they write).
    pub fn drain_bios(&mut self) -> std::vec::Drain<'_, Bio> {
        self.bios.drain(..)
    }

    /// How the stream is to be shut, once: the driver shuts it.
    pub fn take_shutdown(&mut self) -> Option<Shutdown> {
        self.shutdown.take()
    }

    /// Asks the driver to shut the stream `how`; a pending `Both` is not narrowed to `Read`.
    fn shut(&mut self, how: Shutdown) {
        if self.shutdown != Some(Shutdown::Both) {
            self.shutdown = Some(how);
        }
    }

    /// True iff it waits for the stream to become readable (not for slots or deadlines).
    pub fn wants_input(&self) -> bool {
        !self.broken
            && matches!(
                self.reading,
                Reading::Header | Reading::Skip { .. } | Reading::Payload { slot: Some(_), .. }
            )
    }

    /// True iff replies wait for the stream to take them.
    pub fn wants_output(&self) -> bool {
        !self.waiting.is_empty() || !self.outbox.is_empty()
    }

    /// True iff it waits for slots to come back.
    pub fn wants_slots(&self) -> bool {
        !self.flushes.is_empty()
            || matches!(
                self.reading,
                Reading::Slots(_) | Reading::Control(_) | Reading::Payload { slot: None, .. }
            )
    }

    /// The earliest deadline it runs under (engine ns): a waiting reply's, or a payload
    /// piece's.
    pub fn next_deadline(&self) -> Option<u64> {
        let reply = self.waiting.front().map(|w| w.due);
        let payload = match &self.reading {
            Reading::Payload {
                slot: Some((_, due)),
                ..
            } => Some(*due),
            _ => None,
        };
        reply.into_iter().chain(payload).min()
    }

    /// The server is stopping: every request that had arrived is answered, the ones
    /// already started when they finish, the rest (those waiting for slots, and those still
    /// in the stream's buffers) at once with `ESHUTDOWN`, as the protocol asks of a server
    /// shutting down. Nothing that arrives later is read. The caller reads the connection
    /// again this turn, so one with nothing buffered ends its reading then. `arrived`: the
    /// bytes that had arrived on the stream and were not read yet.
    pub fn stop_reading(&mut self, env: &mut Env<'_>, arrived: usize) {
        if self.stopping {
            return;
        }
        self.stopping = true;
        self.read_only_arrived(arrived);
        self.reading = match std::mem::replace(&mut self.reading, Reading::Header) {
            Reading::Slots(io) | Reading::Control(io) => {
                self.shortfall(env, io.seq, usize::MAX);
                Reading::Header
            }
            Reading::Payload {
                io,
                pieces,
                next,
                slot: None,
                ..
            } => {
                self.shortfall(env, io.seq, pieces.len() - next);
                // The pieces not yet read are still in the stream: dropped as they come.
                let left = if io.work == Work::Write {
                    pieces[next..].iter().map(|&(_, len)| u64::from(len)).sum()
                } else {
                    0
                };
                Reading::Skip { left, reply: None }
            }
            other => other,
        };
    }

    /// From now on, only the `arrived` bytes the stream holds are read.
    fn read_only_arrived(&mut self, arrived: usize) {
        self.drain_left = Some(self.drain_left.map_or(arrived, |left| left.min(arrived)));
    }

    /// Closes a connection past a deadline, as of `env.now`.
    pub fn enforce_deadlines(&mut self, env: &mut Env<'_>) {
        let now = env.now;
        if self.waiting.front().is_some_and(|w| w.due <= now) {
            self.fail(env);
        }
        if let Reading::Payload {
            slot: Some((_, due)),
            ..
        } = &self.reading
            && *due <= now
        {
            let why =
                "reading a write's payload: the client sent too little within --reply-timeout";
            self.end_reading(env, Some(why.into()));
        }
    }
}

/// The bio of `work` on `length` bytes at `offset`, holding `slot` (its id), for `ctx`.
fn bio(ctx: u32, work: Work, offset: u64, length: u32, slot: u32) -> Bio {
    let op = match work {
        Work::Read => Op::Read,
        Work::Write | Work::Zeroes => Op::Write,
        Work::Trim => Op::Discard,
        Work::Flush => Op::Flush,
    };
    Bio {
        id: Lease::new(slot).bio_id(),
        ctx,
        op,
        sector: offset / 512,
        sectors: length / 512,
        // The client waits for every reply, as a process waits for O_DIRECT I/O.
        sync: true,
        prio_class: PrioClass::Be,
        prio_level: 4,
    }
}

/// The reply's error value for a bio that finished with `status`; a trim the device cannot
/// do is still a success, since trimming is advisory.
fn bio_error(work: Work, status: i32) -> u32 {
    match status {
        0 => 0,
        s if work == Work::Trim && -s == libc::EOPNOTSUPP => 0,
        s => wire::error_of_errno(-s),
    }
}
