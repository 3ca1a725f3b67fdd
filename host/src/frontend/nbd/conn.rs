//! One client connection after the handshake, on the engine's thread. Requests are read as
//! their bytes arrive, never waiting for more, and become bios of the connection's ctx; each
//! request is answered from the completion path once its bios finished. Replies may go out of
//! order, as the protocol allows; each is written whole.

use std::collections::{HashMap, VecDeque};
use std::io::IoSlice;
use std::time::{Duration, Instant};

use schedhost_sdk::{Op, PrioClass};

use super::net::Stream;
use super::plan::{self, Limits, Plan, Work};
use super::pool::Pools;
use super::wire::{self, Request};
use crate::backend::ring::{Lease, RingBackend, SlotAccess};
use crate::core::Bio;
use crate::engine::Engine;
use crate::frontend::jobs::real::RealError;

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

/// Requests one connection may start in one turn, so a pipelining client cannot keep the
/// engine from the others.
const REQUESTS_PER_TURN: usize = 64;

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

/// What a connection works with: the shared slots and their owners, the export's rules, and
/// the engine its bios go to.
pub struct Env<'a> {
    /// The free slots.
    pub pools: &'a mut Pools,
    /// Per slot, whose bio holds it.
    pub owners: &'a mut [Option<Owner>],
    /// The slots' memory.
    pub slots: &'a SlotAccess,
    /// The export's bounds.
    pub limits: &'a Limits,
    /// Bytes per bio.
    pub chunk: u32,
    /// How long a reply, or a write's payload piece, may take.
    pub timeout: Duration,
    /// Where bios go.
    pub engine: &'a mut Engine<RingBackend>,
    /// The engine's time now.
    pub now: u64,
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
    /// Reading and dropping a refused write's payload, then replying `error`.
    Skip { left: u64, cookie: u64, error: u32 },
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
        slot: Option<(u32, Instant)>,
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
    /// When it must have reached the client.
    due: Instant,
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
    /// The socket, non-blocking.
    pub stream: Stream,
    /// Data slots it holds, parked copies included (its quota's count).
    pub held: u32,
    /// What it did.
    pub tally: Tally,
    /// Why the server closed it, if the client broke the protocol.
    pub closed_because: Option<String>,
    /// A poll for readable is armed on the ring.
    pub polling_in: bool,
    /// A poll for writable is armed on the ring.
    pub polling_out: bool,
    rx: Box<[u8]>,
    rx_start: usize,
    rx_end: usize,
    reading: Reading,
    seq: u64,
    pending: HashMap<u64, Pending>,
    waiting: VecDeque<Waiting>,
    /// FUA requests whose writes finished, waiting for a control slot for their flush.
    flushes: VecDeque<u64>,
    /// A reply could not be sent: the stream is out of step, so nothing read after runs.
    broken: bool,
    /// The peer stopped reading (a send failed with EPIPE or ECONNRESET): replies are
    /// dropped, and only the bytes that had already arrived then are still read, so the
    /// requests a client sent before it disconnected run, and nothing sent later does.
    drain_left: Option<usize>,
}

impl Conn {
    /// A connection past its handshake, with what the client sent after it (`early`) and
    /// the handshake's replies the socket has not taken yet (`unsent`, due by `due`).
    pub fn new(
        stream: Stream,
        (peer, ctx, started): (String, u32, Instant),
        early: &[u8],
        (unsent, due): (Vec<u8>, Instant),
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
            stream,
            held: 0,
            tally: Tally::default(),
            closed_because: None,
            polling_in: false,
            polling_out: false,
            rx,
            rx_start: 0,
            rx_end: early.len(),
            reading: Reading::Header,
            seq: 0,
            pending: HashMap::new(),
            waiting,
            flushes: VecDeque::new(),
            broken: false,
            drain_left: None,
        }
    }

    /// True once nothing is left to do: no more requests, none out, no reply waiting.
    pub fn is_over(&self) -> bool {
        matches!(self.reading, Reading::Done)
            && self.pending.is_empty()
            && self.waiting.is_empty()
            && self.flushes.is_empty()
    }

    /// True iff it waits for the socket to become readable (not for slots or deadlines).
    pub fn wants_input(&self) -> bool {
        !self.broken
            && matches!(
                self.reading,
                Reading::Header | Reading::Skip { .. } | Reading::Payload { slot: Some(_), .. }
            )
    }

    /// True iff replies wait for the socket to take them.
    pub fn wants_output(&self) -> bool {
        !self.waiting.is_empty()
    }

    /// True iff it waits for slots to come back.
    pub fn wants_slots(&self) -> bool {
        !self.flushes.is_empty()
            || matches!(
                self.reading,
                Reading::Slots(_) | Reading::Control(_) | Reading::Payload { slot: None, .. }
            )
    }

    /// The earliest deadline it runs under: a waiting reply's, or a payload piece's.
    pub fn next_deadline(&self) -> Option<Instant> {
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

    /// Stops reading requests (the server is stopping): what was sent still finishes.
    pub fn stop_reading(&mut self, env: &mut Env<'_>) {
        self.end_reading(env, None);
        let _ = self.stream.shutdown_read();
    }

    /// Closes a connection past a deadline it was given `now`.
    pub fn enforce_deadlines(&mut self, env: &mut Env<'_>, now: Instant) {
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

    /// Reads and starts what the client sent, as far as it goes without waiting. Returns
    /// true iff it stopped only for the per-turn bound, with more to read.
    ///
    /// # Errors
    /// The engine's (a policy fault that stops the server).
    pub fn read(&mut self, id: u64, env: &mut Env<'_>) -> Result<bool, RealError> {
        self.start_flushes(id, env)?;
        for _ in 0..REQUESTS_PER_TURN {
            if self.broken {
                self.end_reading(env, None);
                return Ok(false);
            }
            let progressed = match std::mem::replace(&mut self.reading, Reading::Done) {
                Reading::Done => return Ok(false),
                Reading::Header => self.read_header(env)?,
                Reading::Skip {
                    left,
                    cookie,
                    error,
                } => self.skip(env, left, cookie, error),
                Reading::Slots(io) => self.start_read(id, env, io)?,
                Reading::Control(io) => self.start_control(id, env, io)?,
                Reading::Payload {
                    io,
                    pieces,
                    next,
                    slot,
                    got,
                } => self.fill_payload(id, env, io, pieces, next, slot, got)?,
            };
            if !progressed {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Takes a request header if one has arrived; false if it has not.
    fn read_header(&mut self, env: &mut Env<'_>) -> Result<bool, RealError> {
        self.reading = Reading::Header;
        if !self.buffer(wire::REQUEST_LEN, env) {
            return Ok(false);
        }
        let mut header = [0u8; wire::REQUEST_LEN];
        header.copy_from_slice(&self.rx[self.rx_start..self.rx_start + wire::REQUEST_LEN]);
        self.rx_start += wire::REQUEST_LEN;
        let request = match Request::parse(&header) {
            Ok(r) => r,
            Err(e) => {
                self.end_reading(env, Some(e.to_string()));
                return Ok(false);
            }
        };
        self.seq += 1;
        let io = |work, offset, length| Io {
            seq: self.seq,
            cookie: request.cookie,
            work,
            offset,
            length,
        };
        match plan::plan(&request, env.limits) {
            Plan::Disconnect => self.end_reading(env, None),
            Plan::Close(why) => self.end_reading(env, Some(why)),
            Plan::Nothing => self.reply_at_once(env, request.cookie, 0),
            Plan::Refuse { error, skip } => {
                self.reading = Reading::Skip {
                    left: u64::from(skip),
                    cookie: request.cookie,
                    error,
                };
            }
            Plan::Io {
                work,
                offset,
                length,
                fua,
            } => {
                let io = io(work, offset, length);
                let bios = match work {
                    Work::Read | Work::Write | Work::Zeroes => {
                        plan::pieces(offset, length, env.chunk).count()
                    }
                    Work::Trim | Work::Flush => 1,
                };
                self.pending.insert(
                    io.seq,
                    Pending {
                        cookie: io.cookie,
                        work,
                        remaining: bios,
                        read_slots: Vec::new(),
                        fua,
                        bytes: u64::from(length),
                        error: 0,
                    },
                );
                self.reading = match work {
                    Work::Read => Reading::Slots(io),
                    Work::Trim | Work::Flush => Reading::Control(io),
                    Work::Write | Work::Zeroes => Reading::Payload {
                        io,
                        pieces: plan::pieces(offset, length, env.chunk).collect(),
                        next: 0,
                        slot: None,
                        got: 0,
                    },
                };
            }
        }
        Ok(true)
    }

    /// Drops a refused write's payload as it arrives, then replies.
    fn skip(&mut self, env: &mut Env<'_>, mut left: u64, cookie: u64, error: u32) -> bool {
        loop {
            let buffered = (self.rx_end - self.rx_start) as u64;
            let take = buffered.min(left);
            self.rx_start += take as usize;
            left -= take;
            if left == 0 {
                self.reply_at_once(env, cookie, error);
                self.reading = Reading::Header;
                return true;
            }
            self.reading = Reading::Skip {
                left,
                cookie,
                error,
            };
            if !self.receive(env) {
                return false;
            }
        }
    }

    /// Submits a read once all its slots are free at once.
    fn start_read(&mut self, id: u64, env: &mut Env<'_>, io: Io) -> Result<bool, RealError> {
        let pieces: Vec<_> = plan::pieces(io.offset, io.length, env.chunk).collect();
        let Some(slots) = env.pools.take_data(pieces.len(), &mut self.held) else {
            self.reading = Reading::Slots(io);
            return Ok(false);
        };
        self.reading = Reading::Header;
        if let Some(p) = self.pending.get_mut(&io.seq) {
            p.read_slots = slots
                .iter()
                .zip(&pieces)
                .map(|(&s, &(_, len))| (s, len as usize))
                .collect();
        }
        let owner = Owner {
            conn: id,
            seq: io.seq,
            frees: false,
        };
        for (&slot, &(offset, len)) in slots.iter().zip(&pieces) {
            Self::submit(env, owner, slot, bio(self.ctx, io.work, offset, len, slot))?;
        }
        Ok(true)
    }

    /// Submits a flush or trim once a control slot is free.
    fn start_control(&mut self, id: u64, env: &mut Env<'_>, io: Io) -> Result<bool, RealError> {
        let Some(slot) = env.pools.take_control() else {
            self.reading = Reading::Control(io);
            return Ok(false);
        };
        self.reading = Reading::Header;
        let bio = bio(self.ctx, io.work, io.offset, io.length, slot);
        let owner = Owner {
            conn: id,
            seq: io.seq,
            frees: true,
        };
        Self::submit(env, owner, slot, bio)?;
        Ok(true)
    }

    /// Fills a write's pieces from the socket, submitting each as it is whole.
    #[allow(clippy::too_many_arguments)]
    fn fill_payload(
        &mut self,
        id: u64,
        env: &mut Env<'_>,
        io: Io,
        pieces: Vec<(u64, u32)>,
        mut next: usize,
        mut slot: Option<(u32, Instant)>,
        mut got: usize,
    ) -> Result<bool, RealError> {
        while next < pieces.len() {
            let (offset, len) = pieces[next];
            let len = len as usize;
            let (s, _) = match slot {
                Some(held) => held,
                None => {
                    let Some(taken) = env.pools.take_data(1, &mut self.held) else {
                        self.reading = Reading::Payload {
                            io,
                            pieces,
                            next,
                            slot: None,
                            got,
                        };
                        return Ok(false);
                    };
                    // A client that drips its payload holds this slot no longer than this.
                    let held = (taken[0], Instant::now() + env.timeout);
                    slot = Some(held);
                    held
                }
            };
            // SAFETY: the slot came off the free pool, so no I/O uses it until it is
            // submitted below, and only this thread touches the pool's slots.
            let buf = unsafe { &mut env.slots.slot_mut(Lease::new(s))[..len] };
            if io.work == Work::Zeroes {
                buf.fill(0);
                got = len;
            }
            got += self.take_into(&mut buf[got..]);
            while got < len {
                match self.stream.recv_now(&mut buf[got..]) {
                    Ok(Some(0)) => {
                        let why = "reading a write's payload: the client closed the connection";
                        return self.abandon_payload(env, io, pieces.len() - next, s, why);
                    }
                    Ok(Some(n)) => got += n,
                    Ok(None) => {
                        self.reading = Reading::Payload {
                            io,
                            pieces,
                            next,
                            slot,
                            got,
                        };
                        return Ok(false);
                    }
                    Err(e) => {
                        let why = format!("reading a write's payload: {e}");
                        return self.abandon_payload(env, io, pieces.len() - next, s, &why);
                    }
                }
            }
            let owner = Owner {
                conn: id,
                seq: io.seq,
                frees: true,
            };
            Self::submit(env, owner, s, bio(self.ctx, io.work, offset, len as u32, s))?;
            next += 1;
            slot = None;
            got = 0;
        }
        self.reading = Reading::Header;
        Ok(true)
    }

    /// A write's payload stopped coming: its unsent pieces are failed, the slot goes back,
    /// and the connection reads nothing more.
    fn abandon_payload(
        &mut self,
        env: &mut Env<'_>,
        io: Io,
        missing: usize,
        slot: u32,
        why: &str,
    ) -> Result<bool, RealError> {
        env.pools.put(slot, &mut self.held);
        self.shortfall(env, io.seq, missing);
        self.end_reading(env, Some(why.to_owned()));
        Ok(false)
    }

    /// `missing` bios of request `seq` will never be submitted.
    fn shortfall(&mut self, env: &mut Env<'_>, seq: u64, missing: usize) {
        if let Some(p) = self.pending.get_mut(&seq) {
            p.remaining = p.remaining.saturating_sub(missing);
            // Nobody will read this reply: the payload never came.
            p.error = wire::EIO;
        }
        self.answer_if_done(env, seq);
    }

    /// No more requests are read; `why` if the client broke the protocol. A write whose
    /// payload was still awaited is failed.
    fn end_reading(&mut self, env: &mut Env<'_>, why: Option<String>) {
        match std::mem::replace(&mut self.reading, Reading::Done) {
            Reading::Payload {
                io,
                pieces,
                next,
                slot,
                ..
            } => {
                if let Some((s, _)) = slot {
                    env.pools.put(s, &mut self.held);
                }
                self.shortfall(env, io.seq, pieces.len() - next);
            }
            Reading::Slots(io) | Reading::Control(io) => self.shortfall(env, io.seq, usize::MAX),
            _ => {}
        }
        if self.closed_because.is_none() {
            self.closed_because = why;
        }
    }

    /// Hands `bio`, holding `slot`, to the engine for request `seq` of connection `id`.
    fn submit(env: &mut Env<'_>, owner: Owner, slot: u32, bio: Bio) -> Result<(), RealError> {
        env.owners[slot as usize] = Some(owner);
        env.engine.submit::<RealError>(env.now, bio)
    }

    /// A bio of request `seq` finished with `status`, holding `slot`.
    ///
    /// # Errors
    /// The engine's, starting a FUA request's flush.
    pub fn finished(
        &mut self,
        id: u64,
        env: &mut Env<'_>,
        owner: Owner,
        slot: u32,
        status: i32,
    ) -> Result<(), RealError> {
        if owner.frees {
            env.pools.put(slot, &mut self.held);
        }
        let seq = owner.seq;
        let Some(p) = self.pending.get_mut(&seq) else {
            return Ok(());
        };
        p.remaining = p.remaining.saturating_sub(1);
        let error = bio_error(p.work, status);
        if p.error == 0 {
            p.error = error;
        }
        if p.remaining == 0 && p.fua && p.error == 0 {
            // The data is durable only after a flush: the reply waits for it.
            p.fua = false;
            p.remaining = 1;
            self.flushes.push_back(seq);
            return self.start_flushes(id, env);
        }
        self.answer_if_done(env, seq);
        Ok(())
    }

    /// Starts the flushes FUA requests wait for, as control slots allow.
    fn start_flushes(&mut self, id: u64, env: &mut Env<'_>) -> Result<(), RealError> {
        while let Some(&seq) = self.flushes.front() {
            let Some(slot) = env.pools.take_control() else {
                return Ok(());
            };
            self.flushes.pop_front();
            let owner = Owner {
                conn: id,
                seq,
                frees: true,
            };
            Self::submit(env, owner, slot, bio(self.ctx, Work::Flush, 0, 0, slot))?;
        }
        Ok(())
    }

    /// Replies to request `seq` if all its bios finished.
    fn answer_if_done(&mut self, env: &mut Env<'_>, seq: u64) {
        if self.pending.get(&seq).is_none_or(|p| p.remaining > 0) {
            return;
        }
        let Some(p) = self.pending.remove(&seq) else {
            return;
        };
        self.tally.count(p.work, p.bytes, p.error);
        self.send(env, p.cookie, p.error, &p.read_slots);
    }

    /// Answers a request that ran no I/O (refused, or nothing to do).
    fn reply_at_once(&mut self, env: &mut Env<'_>, cookie: u64, error: u32) {
        if error != 0 {
            self.tally.errors += 1;
        }
        self.send(env, cookie, error, &[]);
    }

    /// Sends a simple reply, with a read's data from `slots` when it succeeded, and gives
    /// the slots back (or parks them with a copy of what the socket did not take). A reply
    /// goes out straight from the slots when the socket takes it whole (the common case: no
    /// copy); otherwise a slow client holds its own memory, bounded by its quota, never the
    /// pool's.
    fn send(&mut self, env: &mut Env<'_>, cookie: u64, error: u32, slots: &[(u32, usize)]) {
        if self.broken || self.drain_left.is_some() {
            self.give_back(env, slots);
            return;
        }
        let header = wire::simple_reply(cookie, error);
        let data = slots.iter().filter(|_| error == 0).map(|&(slot, len)| {
            // SAFETY: the read finished, so no I/O uses its slots, and they stay this
            // request's until they are given back or parked below.
            unsafe { &env.slots.slot(Lease::new(slot))[..len] }
        });
        let parts: Vec<IoSlice<'_>> = std::iter::once(&header[..])
            .chain(data)
            .map(IoSlice::new)
            .collect();
        let total: usize = parts.iter().map(|p| p.len()).sum();
        let sent = if self.waiting.is_empty() {
            self.stream.send_now(&parts)
        } else {
            Ok(0)
        };
        let sent = match sent {
            Ok(sent) => sent,
            Err(e) => {
                drop(parts);
                self.give_back(env, slots);
                self.send_failed(env, &e);
                return;
            }
        };
        if sent < total {
            if self.waiting.len() >= MAX_WAITING_REPLIES {
                drop(parts);
                self.give_back(env, slots);
                self.fail(env);
                return;
            }
            let mut bytes = Vec::with_capacity(total - sent);
            let mut skip = sent;
            for part in &parts {
                let from = skip.min(part.len());
                bytes.extend_from_slice(&part[from..]);
                skip -= from;
            }
            drop(parts);
            let parked: Vec<u32> = slots.iter().map(|&(slot, _)| slot).collect();
            let count = env.pools.park(&parked);
            self.waiting.push_back(Waiting {
                bytes,
                sent: 0,
                slots: count,
                due: Instant::now() + env.timeout,
            });
            return;
        }
        drop(parts);
        self.give_back(env, slots);
    }

    /// Sends what the socket takes of the waiting replies, without blocking.
    pub fn flush(&mut self, env: &mut Env<'_>) {
        while let Some(front) = self.waiting.front_mut() {
            match self
                .stream
                .send_now(&[IoSlice::new(&front.bytes[front.sent..])])
            {
                Ok(n) => front.sent += n,
                Err(e) => {
                    self.send_failed(env, &e);
                    return;
                }
            }
            if front.sent < front.bytes.len() {
                return;
            }
            let done = self.waiting.pop_front().map_or(0, |w| w.slots);
            env.pools.unpark(done, &mut self.held);
        }
    }

    /// A send failed with `e`: a peer that closed its end gets no more replies but its
    /// buffered requests still run; any other failure closes the connection.
    fn send_failed(&mut self, env: &mut Env<'_>, e: &std::io::Error) {
        use std::io::ErrorKind::{BrokenPipe, ConnectionReset};
        if matches!(e.kind(), BrokenPipe | ConnectionReset) {
            if self.drain_left.is_none() {
                self.drain_left = Some(self.stream.unread_bytes());
            }
            self.drop_waiting(env);
        } else {
            self.fail(env);
        }
    }

    /// A reply could not be sent: nothing more is, the waiting copies are dropped, and the
    /// connection is closed both ways. Bios already out are still awaited: their slots are
    /// the pool's.
    fn fail(&mut self, env: &mut Env<'_>) {
        self.drop_waiting(env);
        if !self.broken {
            self.broken = true;
            let _ = self.stream.shutdown();
        }
        self.end_reading(env, None);
    }

    /// Data slots its waiting copies stand for.
    pub fn parked_slots(&self) -> usize {
        self.waiting.iter().map(|w| w.slots).sum()
    }

    /// The server's room for copies is full and this connection holds the most: it is
    /// closed, its copies dropped.
    pub fn shed(&mut self, env: &mut Env<'_>) {
        self.closed_because.get_or_insert_with(|| {
            "it stopped taking its replies while the server's room for slow clients' copies was full, and it held the most".into()
        });
        self.fail(env);
    }

    /// Drops the waiting copies, and their parked slots' count.
    pub fn drop_waiting(&mut self, env: &mut Env<'_>) {
        for waiting in self.waiting.drain(..) {
            env.pools.unpark(waiting.slots, &mut self.held);
        }
    }

    /// Returns a reply's read slots to the pool.
    fn give_back(&mut self, env: &mut Env<'_>, slots: &[(u32, usize)]) {
        for &(slot, _) in slots {
            env.pools.put(slot, &mut self.held);
        }
    }

    /// True once `want` bytes are buffered, reading what has arrived.
    fn buffer(&mut self, want: usize, env: &mut Env<'_>) -> bool {
        while self.rx_end - self.rx_start < want {
            if !self.receive(env) {
                return false;
            }
        }
        true
    }

    /// Reads what has arrived into the buffer; false if nothing has (or the stream ended,
    /// which ends reading).
    fn receive(&mut self, env: &mut Env<'_>) -> bool {
        if self.rx_start == self.rx_end {
            (self.rx_start, self.rx_end) = (0, 0);
        } else if self.rx_end == self.rx.len() {
            self.rx.copy_within(self.rx_start..self.rx_end, 0);
            (self.rx_start, self.rx_end) = (0, self.rx_end - self.rx_start);
        }
        let room = match self.drain_left {
            Some(0) => {
                self.end_reading(env, None);
                return false;
            }
            Some(left) => left.min(self.rx.len() - self.rx_end),
            None => self.rx.len() - self.rx_end,
        };
        match self
            .stream
            .recv_now(&mut self.rx[self.rx_end..self.rx_end + room])
        {
            Ok(Some(0)) => {
                let partial =
                    self.rx_end > self.rx_start || !matches!(self.reading, Reading::Header);
                let why = partial
                    .then(|| "reading a request: the client left in the middle of one".to_owned());
                self.end_reading(env, why);
                false
            }
            Ok(Some(n)) => {
                self.rx_end += n;
                if let Some(left) = &mut self.drain_left {
                    *left = left.saturating_sub(n);
                }
                true
            }
            Ok(None) => false,
            Err(e) => {
                self.end_reading(env, Some(format!("reading a request: {e}")));
                false
            }
        }
    }

    /// Moves buffered bytes into `buf`; returns how many.
    fn take_into(&mut self, buf: &mut [u8]) -> usize {
        let n = buf.len().min(self.rx_end - self.rx_start);
        buf[..n].copy_from_slice(&self.rx[self.rx_start..self.rx_start + n]);
        self.rx_start += n;
        n
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
