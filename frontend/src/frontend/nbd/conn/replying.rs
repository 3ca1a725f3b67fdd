//! A connection's answer side: finished bios complete their requests (a FUA write's flush
//! first), and replies go out whole, in the order requests finish, in the sends the driver
//! makes of what [`Conn::transmit`] offers.

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

    /// Its bytes in order: the header, then the data it carries (a finished read's slots,
    /// this request's until they are given back or parked).
    fn parts<'s>(&'s self, slots: &'s dyn SlotBytes) -> impl Iterator<Item = &'s [u8]> + 's {
        let data = self
            .carried()
            .iter()
            .map(|&(slot, len)| &slots.bytes(slot)[..len]);
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
    pub fn finished(&mut self, id: u64, env: &mut Env<'_>, owner: Owner, slot: u32, status: i32) {
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
    }

    /// Starts the flushes FUA requests wait for, as control slots allow.
    pub(super) fn start_flushes(&mut self, id: u64, env: &mut Env<'_>) {
        while let Some(&seq) = self.flushes.front() {
            let Some(slot) = env.pools.take_control(&self.holder) else {
                return;
            };
            self.flushes.pop_front();
            let owner = Owner {
                conn: id,
                seq,
                frees: true,
            };
            self.submit(env, owner, slot, bio(self.ctx, Work::Flush, 0, 0, slot));
        }
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

    /// Queues `reply` for the next send, or gives its slots back if nothing more is sent.
    fn send(&mut self, env: &mut Env<'_>, reply: Reply) {
        if self.broken || self.peer_gone {
            self.give_back(env, &reply.slots);
        } else {
            self.outbox.push(reply);
        }
    }

    /// The bytes to send next, in order: the front copy a slow client has not taken, or else
    /// as many whole replies as one send carries within the stream's iovec limit, straight
    /// from their slots. Empty when nothing is to be sent. The driver sends what the stream
    /// takes and says how much ([`Conn::sent`]).
    pub fn transmit<'s>(&'s self, slots: &'s dyn SlotBytes) -> Vec<IoSlice<'s>> {
        if let Some(front) = self.waiting.front() {
            return vec![IoSlice::new(&front.bytes[front.sent..])];
        }
        let batch = &self.outbox[..fitting(&self.outbox).min(self.outbox.len())];
        batch
            .iter()
            .flat_map(|reply| reply.parts(slots))
            .map(IoSlice::new)
            .collect()
    }

    /// The stream took `n` bytes of what [`Conn::transmit`] offered. Replies sent whole give
    /// their slots back; once the stream takes less than it was offered, every reply not
    /// sent whole is copied out of the pool (a slow client holds its own memory, bounded by
    /// its quota, never the pool's) and goes out as the stream becomes writable.
    pub fn sent(&mut self, env: &mut Env<'_>, n: usize) {
        if let Some(front) = self.waiting.front_mut() {
            front.sent += n;
            assert!(
                front.sent <= front.bytes.len(),
                "the stream took more of a reply than it was given"
            );
            if front.sent == front.bytes.len() {
                let done = self.waiting.pop_front().map_or(0, |w| w.slots);
                env.pools.unpark(done, &mut self.holder);
            }
            if self.waiting.is_empty() {
                // Copies went first; the replies queued behind them go now.
                return;
            }
            return self.park_outbox(env, 0);
        }
        let offered = fitting(&self.outbox).min(self.outbox.len());
        let mut left = n;
        let mut whole = 0;
        for reply in &self.outbox[..offered] {
            let len = reply.len();
            if left < len {
                break;
            }
            left -= len;
            whole += 1;
        }
        // Replies go out whole and in order, never past their end.
        assert!(
            whole < offered || left == 0,
            "the stream took {left} bytes more than it was offered"
        );
        let holder = &mut self.holder;
        for reply in self.outbox.drain(..whole) {
            for &(slot, _) in &reply.slots {
                env.pools.put(slot, holder);
            }
        }
        if whole < offered {
            self.park_outbox(env, left);
        }
    }

    /// Copies every reply in the outbox out of the pool, the first with its first `sent`
    /// bytes already on the stream.
    fn park_outbox(&mut self, env: &mut Env<'_>, mut sent: usize) {
        for (i, reply) in std::mem::take(&mut self.outbox).into_iter().enumerate() {
            if self.broken || self.peer_gone {
                self.give_back(env, &reply.slots);
                continue;
            }
            if self.waiting.len() >= MAX_WAITING_REPLIES {
                self.give_back(env, &reply.slots);
                self.fail(env);
                continue;
            }
            let took = if i == 0 { std::mem::take(&mut sent) } else { 0 };
            self.park(env, &reply, took);
        }
    }

    /// Keeps a copy of what the stream did not take of `reply` (all but its first `sent`
    /// bytes), to go out when the stream is writable; its slots go back to the pool but
    /// still count against the connection's quota until the copy is sent.
    fn park(&mut self, env: &mut Env<'_>, reply: &Reply, sent: usize) {
        let mut bytes = Vec::with_capacity(reply.len() - sent);
        let mut skip = sent;
        for part in reply.parts(&*env.slots) {
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

    /// A send failed with `e`: a peer that closed its end gets no more replies but its
    /// buffered requests (the `arrived` bytes the stream holds) still run; any other failure
    /// closes the connection.
    pub fn send_failed(&mut self, env: &mut Env<'_>, e: &std::io::Error, arrived: usize) {
        use std::io::ErrorKind::{BrokenPipe, ConnectionReset};
        if matches!(e.kind(), BrokenPipe | ConnectionReset) {
            self.peer_gone = true;
            self.read_only_arrived(arrived);
            self.drop_waiting(env);
            self.drop_outbox(env);
        } else {
            self.fail(env);
        }
    }

    /// A reply could not be sent: nothing more is, the waiting copies are dropped, and the
    /// connection is closed both ways. Bios already out are still awaited: their slots are
    /// the pool's.
    pub(super) fn fail(&mut self, env: &mut Env<'_>) {
        self.drop_waiting(env);
        self.drop_outbox(env);
        if !self.broken {
            self.broken = true;
            self.shut(Shutdown::Both);
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

    /// Gives back the slots of the replies not yet offered: they will not be sent.
    fn drop_outbox(&mut self, env: &mut Env<'_>) {
        for reply in std::mem::take(&mut self.outbox) {
            self.give_back(env, &reply.slots);
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
