//! One client connection after the handshake: a reader that turns requests into bios of
//! the connection's ctx, and a replier that answers each request once all its bios
//! finished. Replies may go out of order, as the protocol allows; each is written whole.

use std::collections::{HashMap, VecDeque};
use std::io::{self, IoSlice, Read};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::time::Duration;

use schedhost_sdk::{Op, PrioClass};

use super::hub::{Event, Hub, Owner, Pending, Quota, Submission};
use super::net::{Stream, read_full};
use super::plan::{self, Limits, Plan, Work};
use super::wire::{self, Request};
use crate::backend::ring::Lease;
use crate::core::Bio;
use crate::peer::{self, Bounded, Deadline};

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

/// The reader: requests in, bios out, until the client disconnects or breaks the protocol.
/// Returns why it stopped, if that was the client's fault.
pub fn read_requests(
    hub: &Hub,
    stream: &mut Stream,
    rules: ReadRules<'_>,
    replier: &Sender<Event>,
    quota: &Arc<Quota>,
    broken: &AtomicBool,
) -> Option<String> {
    let ReadRules {
        ctx,
        limits,
        payload_timeout,
    } = rules;
    let mut seq = 0u64;
    let outcome = loop {
        let mut header = [0u8; wire::REQUEST_LEN];
        match read_full(stream, &mut header) {
            Ok(true) => {}
            Ok(false) => break None,
            Err(e) => break Some(format!("reading a request: {e}")),
        }
        // Once a reply failed the client's stream is out of step: nothing read after that
        // may run, writes least of all.
        if broken.load(Ordering::Acquire) {
            break Some("a reply could not be sent; requests after it were not run".into());
        }
        let request = match Request::parse(&header) {
            Ok(r) => r,
            Err(e) => break Some(e.to_string()),
        };
        seq += 1;
        match plan::plan(&request, limits) {
            Plan::Disconnect => break None,
            Plan::Close(why) => break Some(why),
            Plan::Nothing => send(
                replier,
                Event::Reply {
                    cookie: request.cookie,
                    error: 0,
                },
            ),
            Plan::Refuse { error, skip } => {
                if let Err(e) = skip_bytes(stream, u64::from(skip)) {
                    break Some(format!("reading a refused write's payload: {e}"));
                }
                send(
                    replier,
                    Event::Reply {
                        cookie: request.cookie,
                        error,
                    },
                );
            }
            Plan::Io {
                work,
                offset,
                length,
                fua,
            } => {
                let io = Io {
                    seq,
                    cookie: request.cookie,
                    work,
                    offset,
                    length,
                    fua,
                    ctx,
                };
                if let Err(why) = submit(hub, stream, replier, &io, quota, payload_timeout) {
                    break why;
                }
            }
        }
    };
    send(replier, Event::Closed);
    outcome
}

/// One request's I/O.
struct Io {
    seq: u64,
    cookie: u64,
    work: Work,
    offset: u64,
    length: u32,
    fua: bool,
    ctx: u32,
}

impl Io {
    fn op(&self) -> Op {
        match self.work {
            Work::Read => Op::Read,
            Work::Write | Work::Zeroes => Op::Write,
            Work::Trim => Op::Discard,
            Work::Flush => Op::Flush,
        }
    }

    fn bio(&self, slot: u32, offset: u64, length: u32) -> Bio {
        Bio {
            id: u64::from(slot),
            ctx: self.ctx,
            op: self.op(),
            sector: offset / 512,
            sectors: length / 512,
            // The client waits for every reply, as a process waits for O_DIRECT I/O.
            sync: true,
            prio_class: PrioClass::Be,
            prio_level: 4,
        }
    }

    fn pending(&self, bios: usize, read_slots: Vec<(u32, usize)>) -> Pending {
        Pending {
            seq: self.seq,
            cookie: self.cookie,
            work: self.work,
            remaining: bios,
            read_slots,
            fua: self.fua,
            bytes: u64::from(self.length),
            ctx: self.ctx,
        }
    }
}

/// Submits `io`'s bios; `Err` ends the connection (with a reason if the client caused it).
/// A write's payload must arrive within `payload_timeout` of when it is awaited.
fn submit(
    hub: &Hub,
    stream: &mut Stream,
    replier: &Sender<Event>,
    io: &Io,
    quota: &Arc<Quota>,
    payload_timeout: Duration,
) -> Result<(), Option<String>> {
    let owner = |frees| Owner {
        to: replier.clone(),
        seq: io.seq,
        frees,
        quota: Arc::clone(quota),
    };
    match io.work {
        Work::Read => {
            let pieces: Vec<_> = plan::pieces(io.offset, io.length, hub.chunk).collect();
            let slots = hub.pools.take_data(pieces.len(), quota).ok_or(None)?;
            let read_slots = slots
                .iter()
                .zip(&pieces)
                .map(|(&s, &(_, len))| (s, len as usize))
                .collect();
            send(replier, Event::Expect(io.pending(pieces.len(), read_slots)));
            hub.submit(
                slots
                    .iter()
                    .zip(&pieces)
                    .map(|(&slot, &(offset, len))| Submission {
                        slot,
                        bio: io.bio(slot, offset, len),
                        owner: owner(false),
                    }),
            );
            Ok(())
        }
        Work::Write | Work::Zeroes => {
            let pieces: Vec<_> = plan::pieces(io.offset, io.length, hub.chunk).collect();
            send(replier, Event::Expect(io.pending(pieces.len(), Vec::new())));
            for (done, &(offset, len)) in pieces.iter().enumerate() {
                let shortfall = |why| {
                    send(
                        replier,
                        Event::Shortfall {
                            seq: io.seq,
                            missing: pieces.len() - done,
                        },
                    );
                    why
                };
                let slot = hub
                    .pools
                    .take_data(1, quota)
                    .ok_or(None)
                    .map_err(shortfall)?[0];
                // SAFETY: the slot came off the free pool, so no I/O and no other thread
                // uses it until it is submitted below.
                let buf = unsafe { &mut hub.slots.slot_mut(Lease::new(slot))[..len as usize] };
                let filled = if io.work == Work::Zeroes {
                    buf.fill(0);
                    Ok(())
                } else {
                    read_payload(stream, buf, payload_timeout)
                };
                if let Err(e) = filled {
                    hub.pools.put(slot, quota);
                    return Err(shortfall(Some(format!("reading a write's payload: {e}"))));
                }
                hub.submit([Submission {
                    slot,
                    bio: io.bio(slot, offset, len),
                    owner: owner(true),
                }]);
            }
            Ok(())
        }
        Work::Trim | Work::Flush => {
            send(replier, Event::Expect(io.pending(1, Vec::new())));
            let Some(slot) = hub.pools.take_control() else {
                send(
                    replier,
                    Event::Shortfall {
                        seq: io.seq,
                        missing: 1,
                    },
                );
                return Err(None);
            };
            hub.submit([Submission {
                slot,
                bio: io.bio(slot, io.offset, io.length),
                owner: owner(true),
            }]);
            Ok(())
        }
    }
}

/// What the reader of one connection works by.
#[derive(Debug, Clone, Copy)]
pub struct ReadRules<'a> {
    /// The connection's software queue.
    pub ctx: u32,
    /// The export's bounds.
    pub limits: &'a Limits,
    /// How long a write's payload may take to arrive once its header has.
    pub payload_timeout: Duration,
}

/// How the replier writes to its client.
#[derive(Debug, Clone, Copy)]
pub struct ReplyRules {
    /// How long one whole reply may take to reach the client.
    pub timeout: Duration,
}

/// How often a replier with replies waiting for a slow client tries the socket again.
const RETRY_SLOW_CLIENT: Duration = Duration::from_millis(5);

/// Most replies that may wait for a client at once. Read data counts against the client's
/// quota; replies without data (write acknowledgements) do not, so their number is bounded
/// here: a client that has not taken this many replies is not reading them.
const MAX_WAITING_REPLIES: usize = 4096;

/// The replier: answers requests as their bios finish, until the reader stopped and
/// nothing is pending. Returns what the connection did. Once a reply cannot be sent (the
/// client left, or did not take it within the reply deadline) the connection is closed
/// both ways and `broken` set, so the reader runs nothing more; bios already submitted
/// are still awaited, since their slots are the pool's.
pub fn reply(
    hub: &Hub,
    mut stream: Stream,
    events: &Receiver<Event>,
    me: &Sender<Event>,
    quota: &Arc<Quota>,
    broken: &AtomicBool,
    rules: ReplyRules,
) -> Tally {
    let mut pending: HashMap<u64, Pending> = HashMap::new();
    let mut errors: HashMap<u64, u32> = HashMap::new();
    let mut tally = Tally::default();
    let mut closed = false;
    let mut out = Replies {
        hub,
        stream: &mut stream,
        quota,
        broken,
        rules,
        waiting: VecDeque::new(),
    };
    while !(closed && pending.is_empty()) {
        let wait = if out.waiting.is_empty() {
            Duration::from_millis(100)
        } else {
            RETRY_SLOW_CLIENT
        };
        let event = events.recv_timeout(wait);
        out.flush();
        let event = match event {
            Ok(event) => event,
            // Bios still out will never finish if the ring thread failed.
            Err(RecvTimeoutError::Timeout) if !hub.has_failed() => continue,
            Err(_) => break,
        };
        let finished = match event {
            Event::Expect(p) => {
                pending.insert(p.seq, p);
                None
            }
            Event::Reply { cookie, error } => {
                if error != 0 {
                    tally.errors += 1;
                }
                out.send(cookie, error, &[]);
                None
            }
            Event::Done { seq, status } => {
                if let Some(p) = pending.get_mut(&seq) {
                    p.remaining = p.remaining.saturating_sub(1);
                    let error = bio_error(p.work, status);
                    if error != 0 {
                        errors.entry(seq).or_insert(error);
                    }
                }
                Some(seq)
            }
            Event::Shortfall { seq, missing } => {
                if let Some(p) = pending.get_mut(&seq) {
                    p.remaining = p.remaining.saturating_sub(missing);
                    // Nobody will read this reply: the payload never arrived.
                    errors.insert(seq, wire::EIO);
                }
                Some(seq)
            }
            Event::Closed => {
                closed = true;
                None
            }
        };
        let Some(seq) = finished else { continue };
        if pending.get(&seq).is_none_or(|p| p.remaining > 0) {
            continue;
        }
        let mut error = errors.get(&seq).copied().unwrap_or(0);
        if let Some(p) = pending.get_mut(&seq)
            && p.fua
            && error == 0
        {
            if flush_for_fua(hub, me, p, quota) {
                continue;
            }
            // No flush could be started (the server is failing): the data is not known to
            // be durable, so the write is not acknowledged as if it were.
            error = wire::EIO;
        }
        let Some(p) = pending.remove(&seq) else {
            continue;
        };
        errors.remove(&seq);
        tally.count(p.work, p.bytes, error);
        out.send(p.cookie, error, &p.read_slots);
    }
    out.finish();
    let _ = stream.shutdown();
    tally
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
    deadline: Deadline,
}

/// The replier's side of the socket. A reply goes out straight from the buffer slots when
/// the socket takes it whole at once (the common case: no copy). When it does not, or when
/// earlier replies still wait, it is copied out and its slots go back to the pool at once:
/// a slow client holds its own memory (bounded by its quota, which the copies still count
/// against, so its reader stops), never the pool's. Each waiting reply must reach the
/// client within the reply deadline, however the client paces its reads.
struct Replies<'a> {
    hub: &'a Hub,
    stream: &'a mut Stream,
    quota: &'a Arc<Quota>,
    broken: &'a AtomicBool,
    rules: ReplyRules,
    waiting: VecDeque<Waiting>,
}

impl Replies<'_> {
    /// Sends a simple reply, with a read's data from `slots` when it succeeded, and gives
    /// the slots back (or parks them with a copy of what is left to send).
    fn send(&mut self, cookie: u64, error: u32, slots: &[(u32, usize)]) {
        if self.broken.load(Ordering::Acquire) {
            self.give_back(slots);
            return;
        }
        let header = wire::simple_reply(cookie, error);
        let data = slots.iter().filter(|_| error == 0).map(|&(slot, len)| {
            // SAFETY: the read finished, so no I/O uses its slots, and they stay this
            // request's until they are given back or parked below.
            unsafe { &self.hub.slots.slot(Lease::new(slot))[..len] }
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
            Err(_) => {
                drop(parts);
                self.give_back(slots);
                self.fail();
                return;
            }
        };
        if sent < total {
            if self.waiting.len() >= MAX_WAITING_REPLIES {
                drop(parts);
                self.give_back(slots);
                self.fail();
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
            self.hub.pools.park(&parked);
            self.waiting.push_back(Waiting {
                bytes,
                sent: 0,
                slots: parked.len(),
                deadline: Deadline::after(self.rules.timeout),
            });
            return;
        }
        drop(parts);
        self.give_back(slots);
    }

    /// Sends what the socket takes of the waiting replies, without blocking; fails the
    /// connection once the oldest one is past its deadline.
    fn flush(&mut self) {
        while let Some(front) = self.waiting.front_mut() {
            if front.deadline.remaining("a reply").is_err() {
                self.fail();
                return;
            }
            match self
                .stream
                .send_now(&[IoSlice::new(&front.bytes[front.sent..])])
            {
                Ok(n) => front.sent += n,
                Err(_) => {
                    self.fail();
                    return;
                }
            }
            if front.sent < front.bytes.len() {
                return;
            }
            let done = self.waiting.pop_front().map_or(0, |w| w.slots);
            self.hub.pools.unpark(done, self.quota);
        }
    }

    /// The connection is ending: the waiting replies still get until their deadlines.
    fn finish(&mut self) {
        while let Some(front) = self.waiting.pop_front() {
            let written = !self.broken.load(Ordering::Acquire)
                && peer::write_all(
                    self.stream,
                    &mut [IoSlice::new(&front.bytes[front.sent..])],
                    front.deadline,
                )
                .is_ok();
            self.hub.pools.unpark(front.slots, self.quota);
            if !written {
                self.fail();
            }
        }
    }

    /// A reply could not be sent: nothing more is, the waiting copies are dropped, and the
    /// connection is closed both ways so the reader stops.
    fn fail(&mut self) {
        for waiting in self.waiting.drain(..) {
            self.hub.pools.unpark(waiting.slots, self.quota);
        }
        if !self.broken.swap(true, Ordering::AcqRel) {
            let _ = self.stream.shutdown();
        }
    }

    /// Returns a reply's read slots to the pool.
    fn give_back(&self, slots: &[(u32, usize)]) {
        for &(slot, _) in slots {
            self.hub.pools.put(slot, self.quota);
        }
    }
}

/// Starts the flush a FUA request waits for; false if the server is stopping.
fn flush_for_fua(hub: &Hub, me: &Sender<Event>, p: &mut Pending, quota: &Arc<Quota>) -> bool {
    p.fua = false;
    let Some(slot) = hub.pools.take_control() else {
        return false;
    };
    p.remaining = 1;
    hub.submit([Submission {
        slot,
        bio: Bio {
            id: u64::from(slot),
            ctx: p.ctx,
            op: Op::Flush,
            sector: 0,
            sectors: 0,
            sync: true,
            prio_class: PrioClass::Be,
            prio_level: 4,
        },
        owner: Owner {
            to: me.clone(),
            seq: p.seq,
            frees: true,
            quota: Arc::clone(quota),
        },
    }]);
    true
}

/// The reply's error value for a bio that finished with `status`; a trim the device
/// cannot do is still a success, since trimming is advisory.
fn bio_error(work: Work, status: i32) -> u32 {
    match status {
        0 => 0,
        s if work == Work::Trim && -s == libc::EOPNOTSUPP => 0,
        s => wire::error_of_errno(-s),
    }
}

/// Fills `buf` with a write's payload. What has arrived is taken without blocking (the
/// common case: no extra system call); the rest must arrive within `timeout`, so a client
/// that drips its payload holds its data slot no longer than that.
fn read_payload(stream: &mut Stream, buf: &mut [u8], timeout: Duration) -> io::Result<()> {
    let mut got = 0;
    while got < buf.len() {
        match stream.recv_now(&mut buf[got..])? {
            Some(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Some(n) => got += n,
            None => break,
        }
    }
    if got == buf.len() {
        return Ok(());
    }
    let deadline = Deadline::after(timeout);
    let rest =
        Bounded::new(stream, deadline, "reading a write's payload").read_exact(&mut buf[got..]);
    // Between requests a client may stay silent as long as it likes.
    stream.clear_read_timeout()?;
    rest
}

/// Reads and drops `n` bytes.
fn skip_bytes(stream: &mut Stream, n: u64) -> io::Result<()> {
    let copied = io::copy(&mut Read::by_ref(stream).take(n), &mut io::sink())?;
    if copied < n {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    Ok(())
}

fn send(to: &Sender<Event>, event: Event) {
    // The replier outlives the reader (it exits only after `Closed`), so this cannot fail
    // while the reader runs.
    let _ = to.send(event);
}

#[cfg(test)]
mod tests {
    use std::os::unix::net::UnixStream;
    use std::sync::Mutex;
    use std::sync::atomic::AtomicUsize;
    use std::sync::mpsc;

    use super::*;
    use crate::backend::ring::{Arena, Notifier};
    use crate::frontend::nbd::hub::Pools;

    #[test]
    fn a_fua_write_is_not_acknowledged_when_its_flush_cannot_start() {
        let arena = Arena::new(&[4096, 0]);
        let hub = Hub {
            inbox: Mutex::new(Vec::new()),
            notifier: Notifier::new().unwrap(),
            slots: arena.access(),
            pools: Pools::new(1, 1, 1),
            chunk: 4096,
            stopping: AtomicBool::new(false),
            failed: AtomicBool::new(false),
            live: AtomicUsize::new(0),
        };
        let (server, mut client) = UnixStream::pair().unwrap();
        let (to_replier, events) = mpsc::channel();
        let quota = Arc::new(Quota::default());
        let broken = AtomicBool::new(false);
        to_replier
            .send(Event::Expect(Pending {
                seq: 1,
                cookie: 77,
                work: Work::Write,
                remaining: 1,
                read_slots: Vec::new(),
                fua: true,
                bytes: 4096,
                ctx: 0,
            }))
            .unwrap();
        // The ring failed: the pools closed, so no flush can take a slot.
        hub.pools.close();
        to_replier.send(Event::Done { seq: 1, status: 0 }).unwrap();
        to_replier.send(Event::Closed).unwrap();
        let rules = ReplyRules {
            timeout: Duration::from_secs(5),
        };
        let me = to_replier.clone();
        let tally = reply(
            &hub,
            Stream::Unix(server),
            &events,
            &me,
            &quota,
            &broken,
            rules,
        );
        let mut header = [0u8; 16];
        client.read_exact(&mut header).unwrap();
        let error = u32::from_be_bytes(header[4..8].try_into().unwrap());
        let cookie = u64::from_be_bytes(header[8..16].try_into().unwrap());
        assert_eq!(
            (cookie, error),
            (77, wire::EIO),
            "acknowledged without a flush"
        );
        assert_eq!(tally.writes, 0);
        assert_eq!(tally.errors, 1);
    }
}
