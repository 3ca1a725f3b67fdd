//! A connection's answer side: finished bios complete their requests (a FUA write's flush
//! first), and replies go out whole, in the order requests finish.

use super::*;

/// A simple reply: its header, and a read's slots (with the bytes of each the reply
/// carries), which the connection holds until the reply is sent or copied.
#[derive(Debug)]
pub(super) struct Reply {
    header: [u8; 16],
    error: u32,
    slots: Vec<(u32, usize)>,
}

impl Reply {
    pub(super) fn new(cookie: u64, error: u32, slots: Vec<(u32, usize)>) -> Self {
        Self {
            header: wire::simple_reply(cookie, error),
            error,
            slots,
        }
    }

    /// The slots whose bytes the reply carries: a read's, when it succeeded.
    fn carried(&self) -> &[(u32, usize)] {
        if self.error == 0 { &self.slots } else { &[] }
    }

    /// Its bytes in order: the header, then the data it carries.
    fn parts<'s>(&'s self, slots: &'s SlotAccess) -> impl Iterator<Item = &'s [u8]> + 's {
        let data = self.carried().iter().map(|&(slot, len)| {
            // SAFETY: the read finished, so no I/O uses its slots, and they stay this
            // request's until they are given back or parked.
            unsafe { &slots.slot(Lease::new(slot))[..len] }
        });
        std::iter::once(&self.header[..]).chain(data)
    }

    /// Its length in bytes.
    fn len(&self) -> usize {
        self.header.len() + self.carried().iter().map(|&(_, len)| len).sum::<usize>()
    }

    /// The iovecs it takes.
    fn iovecs(&self) -> usize {
        1 + self.carried().len()
    }
}

/// How many of `replies` (at least one) one send carries within the stream's iovec limit.
pub(super) fn fitting(replies: &[Reply]) -> usize {
    let mut iovecs = 0;
    let n = replies
        .iter()
        .take_while(|r| {
            iovecs += r.iovecs();
            iovecs <= libc::UIO_MAXIOV as usize
        })
        .count();
    n.max(1)
}

impl Conn {
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
    ) -> Result<(), RunError> {
        if owner.frees {
            env.pools.put(slot, &mut self.holder);
        }
        let seq = owner.seq;
        // A request is answered once, after its last bio: a bio finishing for a request no
        // longer pending, or past its count, would answer it twice or early.
        let Some(p) = self.pending.get_mut(&seq) else {
            unreachable!("a bio of request {seq} finished after the request was answered")
        };
        assert!(
            p.remaining > 0,
            "request {seq}: more bios finished than it sent"
        );
        p.remaining -= 1;
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
    pub(super) fn start_flushes(&mut self, id: u64, env: &mut Env<'_>) -> Result<(), RunError> {
        while let Some(&seq) = self.flushes.front() {
            let Some(slot) = env.pools.take_control(&self.holder) else {
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
    pub(super) fn answer_if_done(&mut self, env: &mut Env<'_>, seq: u64) {
        if self.pending.get(&seq).is_none_or(|p| p.remaining > 0) {
            return;
        }
        let Some(p) = self.pending.remove(&seq) else {
            return;
        };
        self.tally.count(p.work, p.bytes, p.error);
        self.send(env, Reply::new(p.cookie, p.error, p.read_slots));
    }

    /// Answers a request that ran no I/O (refused, or nothing to do).
    pub(super) fn reply_at_once(&mut self, env: &mut Env<'_>, cookie: u64, error: u32) {
        if error != 0 {
            self.tally.errors += 1;
        }
        self.send(env, Reply::new(cookie, error, Vec::new()));
    }

    /// Holds replies back until [`Conn::uncork`], which writes them in one send: the
    /// completions of one reap reach the client in one write and one wake-up, not one each.
    pub fn cork(&mut self) {
        self.corked = true;
    }

    /// Sends the replies held back since [`Conn::cork`], in order, as few sends as the
    /// stream's iovec limit allows.
    pub fn uncork(&mut self, env: &mut Env<'_>) {
        self.corked = false;
        let mut outbox = std::mem::take(&mut self.outbox);
        let mut start = 0;
        while start < outbox.len() {
            let end = start + fitting(&outbox[start..]);
            self.send_now(env, &outbox[start..end]);
            start = end;
        }
        outbox.clear();
        self.outbox = outbox;
    }

    /// Sends `reply` now, or holds it back while corked.
    fn send(&mut self, env: &mut Env<'_>, reply: Reply) {
        if self.corked && !self.broken && !self.peer_gone {
            self.outbox.push(reply);
        } else {
            self.send_now(env, std::slice::from_ref(&reply));
        }
    }

    /// Sends simple replies, with a read's data from its slots when it succeeded, and gives
    /// the slots back (or parks them with a copy of what the socket did not take). Replies
    /// go out straight from the slots when the socket takes them whole (the common case: no
    /// copy); otherwise a slow client holds its own memory, bounded by its quota, never the
    /// pool's.
    fn send_now(&mut self, env: &mut Env<'_>, replies: &[Reply]) {
        if self.broken || self.peer_gone {
            self.give_back_all(env, replies);
            return;
        }
        let slots = env.slots;
        let parts: Vec<IoSlice<'_>> = replies
            .iter()
            .flat_map(|reply| reply.parts(slots))
            .map(IoSlice::new)
            .collect();
        let sent = if self.waiting.is_empty() {
            env.wire.send_now(&parts)
        } else {
            Ok(0)
        };
        drop(parts);
        let mut left = match sent {
            Ok(sent) => sent,
            Err(e) => {
                self.give_back_all(env, replies);
                self.send_failed(env, &e);
                return;
            }
        };
        for (i, reply) in replies.iter().enumerate() {
            let len = reply.len();
            let took = left.min(len);
            left -= took;
            if took == len {
                self.give_back(env, &reply.slots);
                continue;
            }
            if self.waiting.len() >= MAX_WAITING_REPLIES {
                self.give_back_all(env, &replies[i..]);
                self.fail(env);
                return;
            }
            self.park(env, reply, took);
        }
    }

    /// Keeps a copy of what the stream did not take of `reply` (all but its first `sent`
    /// bytes), to go out when the stream is writable; its slots go back to the pool but
    /// still count against the connection's quota until the copy is sent.
    fn park(&mut self, env: &mut Env<'_>, reply: &Reply, sent: usize) {
        let mut bytes = Vec::with_capacity(reply.len() - sent);
        let mut skip = sent;
        for part in reply.parts(env.slots) {
            let from = skip.min(part.len());
            bytes.extend_from_slice(&part[from..]);
            skip -= from;
        }
        let parked: Vec<u32> = reply.slots.iter().map(|&(slot, _)| slot).collect();
        let count = env.pools.park(&parked, &self.holder);
        self.waiting.push_back(Waiting {
            bytes,
            sent: 0,
            slots: count,
            due: env.due(),
        });
    }

    /// Sends what the stream takes of the waiting replies, without blocking.
    pub fn flush(&mut self, env: &mut Env<'_>) {
        while let Some(front) = self.waiting.front_mut() {
            match env
                .wire
                .send_now(&[IoSlice::new(&front.bytes[front.sent..])])
            {
                Ok(n) => {
                    front.sent += n;
                    assert!(
                        front.sent <= front.bytes.len(),
                        "the stream took more of a reply than it was given"
                    );
                }
                Err(e) => {
                    self.send_failed(env, &e);
                    return;
                }
            }
            if front.sent < front.bytes.len() {
                return;
            }
            let done = self.waiting.pop_front().map_or(0, |w| w.slots);
            env.pools.unpark(done, &mut self.holder);
        }
    }

    /// A send failed with `e`: a peer that closed its end gets no more replies but its
    /// buffered requests still run; any other failure closes the connection.
    pub(super) fn send_failed(&mut self, env: &mut Env<'_>, e: &std::io::Error) {
        use std::io::ErrorKind::{BrokenPipe, ConnectionReset};
        if matches!(e.kind(), BrokenPipe | ConnectionReset) {
            self.peer_gone = true;
            self.read_only_arrived(env);
            self.drop_waiting(env);
        } else {
            self.fail(env);
        }
    }

    /// A reply could not be sent: nothing more is, the waiting copies are dropped, and the
    /// connection is closed both ways. Bios already out are still awaited: their slots are
    /// the pool's.
    pub(super) fn fail(&mut self, env: &mut Env<'_>) {
        self.drop_waiting(env);
        if !self.broken {
            self.broken = true;
            env.wire.shutdown();
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
            env.pools.unpark(waiting.slots, &mut self.holder);
        }
    }

    /// Returns a reply's read slots to the pool.
    pub(super) fn give_back(&mut self, env: &mut Env<'_>, slots: &[(u32, usize)]) {
        for &(slot, _) in slots {
            env.pools.put(slot, &mut self.holder);
        }
    }

    /// Returns the read slots of replies that will not be sent to the pool.
    fn give_back_all(&mut self, env: &mut Env<'_>, replies: &[Reply]) {
        replies.iter().for_each(|r| self.give_back(env, &r.slots));
    }

    /// True once `want` bytes are buffered, reading what has arrived.
    pub(super) fn buffer(&mut self, want: usize, env: &mut Env<'_>) -> bool {
        while self.rx_end - self.rx_start < want {
            if !self.receive(env) {
                return false;
            }
        }
        true
    }

    /// Reads what has arrived into the buffer; false if nothing has (or the stream ended,
    /// which ends reading).
    pub(super) fn receive(&mut self, env: &mut Env<'_>) -> bool {
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
        match env
            .wire
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
                // The window of unread bytes stays inside the buffer.
                assert!(n <= room, "the stream read {n} bytes into {room}");
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
    pub(super) fn take_into(&mut self, buf: &mut [u8]) -> usize {
        let n = buf.len().min(self.rx_end - self.rx_start);
        buf[..n].copy_from_slice(&self.rx[self.rx_start..self.rx_start + n]);
        self.rx_start += n;
        n
    }
}
