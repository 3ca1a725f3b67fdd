//! The connection without a socket or a clock: bytes in, bios and replies out, deadlines on
//! the engine's time.

use std::collections::VecDeque;

use super::*;
use crate::backend::ring::Arena;

const CHUNK: u32 = 4096;
const SECOND: u64 = 1_000_000_000;

/// A stream in memory: what the client sent, what the server wrote, and whether the
/// client takes replies (a full socket takes nothing); `room` caps the bytes it takes from
/// here on, and `sends` counts the writes.
#[derive(Default)]
struct Memory {
    input: VecDeque<u8>,
    output: Vec<u8>,
    stalled: bool,
    room: Option<usize>,
    sends: usize,
}

impl Transport for Memory {
    fn recv_now(&mut self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        if self.input.is_empty() {
            return Ok(None);
        }
        let n = buf.len().min(self.input.len());
        for (b, byte) in buf.iter_mut().zip(self.input.drain(..n)) {
            *b = byte;
        }
        Ok(Some(n))
    }

    fn send_now(&mut self, parts: &[IoSlice<'_>]) -> io::Result<usize> {
        if self.stalled {
            return Ok(0);
        }
        self.sends += 1;
        let mut room = self.room.unwrap_or(usize::MAX);
        let before = self.output.len();
        for part in parts {
            let n = part.len().min(room);
            self.output.extend_from_slice(&part[..n]);
            room -= n;
        }
        let took = self.output.len() - before;
        self.room = self.room.map(|r| r - took);
        Ok(took)
    }

    fn unread_bytes(&self) -> usize {
        self.input.len()
    }

    fn shutdown_read(&mut self) {}

    fn shutdown(&mut self) {}
}

/// The server side one connection needs: slots, their owners and the export's limits.
struct Server {
    arena: Arena,
    pools: Pools,
    owners: Vec<Option<Owner>>,
    limits: ExportBounds,
}

impl Server {
    fn new() -> Self {
        Self {
            arena: Arena::new(&[CHUNK as usize; 5]),
            pools: Pools::new(4, 1, 4, 1),
            owners: vec![None; 5],
            limits: ExportBounds {
                size: 1 << 20,
                block: 512,
                max_payload: 1 << 20,
                read_only: false,
            },
        }
    }

    /// Runs `call` on `conn` over `wire` at `now`; returns the bios it handed over.
    fn call<T>(
        &mut self,
        wire: &mut Memory,
        now: u64,
        call: impl FnOnce(&mut Env<'_>) -> T,
    ) -> (T, Vec<Bio>) {
        let slots = self.arena.access();
        let mut bios = Vec::new();
        let mut env = Env {
            pools: &mut self.pools,
            owners: &mut self.owners,
            slots: &slots,
            limits: &self.limits,
            chunk: CHUNK,
            timeout: std::time::Duration::from_secs(1),
            wire,
            bios: &mut bios,
            now,
        };
        (call(&mut env), bios)
    }
}

fn request(kind: u16, cookie: u64, offset: u64, length: u32) -> Vec<u8> {
    let mut r = wire::REQUEST_MAGIC.to_be_bytes().to_vec();
    r.extend_from_slice(&0u16.to_be_bytes());
    r.extend_from_slice(&kind.to_be_bytes());
    r.extend_from_slice(&cookie.to_be_bytes());
    r.extend_from_slice(&offset.to_be_bytes());
    r.extend_from_slice(&length.to_be_bytes());
    r
}

fn connection() -> Conn {
    Conn::new(("memory".into(), 7, Instant::now()), &[], (Vec::new(), 0))
}

#[test]
fn a_write_in_becomes_a_bio_whose_completion_sends_the_reply_out() {
    let (mut server, mut conn, mut wire) = (Server::new(), connection(), Memory::default());
    wire.input.extend(request(wire::CMD_WRITE, 42, 8192, CHUNK));
    wire.input.extend(vec![0x5a; CHUNK as usize]);
    let (read, bios) = server.call(&mut wire, 0, |env| conn.read(1, env));
    assert!(!read.unwrap(), "nothing more to read");
    let [bio] = bios.as_slice() else {
        panic!("one bio, got {bios:?}")
    };
    assert_eq!(
        (bio.ctx, bio.op, bio.sector, bio.sectors),
        (7, Op::Write, 16, 8)
    );
    let slot = Lease::of_bio(bio.id).slot();
    // SAFETY: the bio is not on any device; only this test touches the slot.
    let data = unsafe { server.arena.access().slot(Lease::new(slot)).to_vec() };
    assert!(
        data.iter().all(|&b| b == 0x5a),
        "the payload is in the bio's buffer"
    );
    assert!(wire.output.is_empty(), "no reply before the write finished");
    let owner = server.owners[slot as usize]
        .take()
        .expect("the slot names its request");
    let (done, more) = server.call(&mut wire, 5, |env| conn.finished(1, env, owner, slot, 0));
    done.unwrap();
    assert!(more.is_empty());
    let mut reply = wire::SIMPLE_REPLY_MAGIC.to_be_bytes().to_vec();
    reply.extend_from_slice(&0u32.to_be_bytes());
    reply.extend_from_slice(&42u64.to_be_bytes());
    assert_eq!(wire.output, reply);
    assert_eq!(conn.tally.writes, 1);
    assert_eq!(conn.next_deadline(), None);
}

#[test]
fn a_reply_the_client_does_not_take_is_due_on_the_engines_clock_and_closes_it_when_late() {
    let (mut server, mut conn, mut wire) = (Server::new(), connection(), Memory::default());
    wire.stalled = true;
    wire.input.extend(request(wire::CMD_FLUSH, 9, 0, 0));
    let (_, bios) = server.call(&mut wire, 3 * SECOND, |env| conn.read(1, env));
    let [flush] = bios.as_slice() else {
        panic!("one flush, got {bios:?}")
    };
    let slot = Lease::of_bio(flush.id).slot();
    let owner = server.owners[slot as usize].take().expect("owned");
    let at = 4 * SECOND;
    let (done, _) = server.call(&mut wire, at, |env| conn.finished(1, env, owner, slot, 0));
    done.unwrap();
    assert!(conn.wants_output(), "the reply waits for the client");
    assert_eq!(
        conn.next_deadline(),
        Some(at + SECOND),
        "--reply-timeout from then"
    );
    server.call(&mut wire, at + SECOND - 1, |env| {
        conn.enforce_deadlines(env)
    });
    assert!(conn.wants_output(), "not late yet");
    server.call(&mut wire, at + SECOND, |env| conn.enforce_deadlines(env));
    assert!(
        !conn.wants_output() && conn.is_over(),
        "closed at its deadline"
    );
}

/// Three 4 KiB reads of `fill` bytes 1, 2 and 3 sent and run: their bios' slots and owners,
/// in the order the requests came (cookies 1, 2, 3).
fn three_reads(server: &mut Server, conn: &mut Conn, wire: &mut Memory) -> Vec<(u32, Owner)> {
    for cookie in 1..=3u64 {
        wire.input
            .extend(request(wire::CMD_READ, cookie, cookie * 8192, CHUNK));
    }
    let (_, bios) = server.call(wire, 0, |env| conn.read(1, env));
    assert_eq!(bios.len(), 3, "one bio per read");
    bios.iter()
        .zip(1u8..)
        .map(|(bio, fill)| {
            let slot = Lease::of_bio(bio.id).slot();
            let access = server.arena.access();
            // SAFETY: the bio is not on any device; only this test touches the slot.
            unsafe { access.slot_mut(Lease::new(slot)) }.fill(fill);
            (slot, server.owners[slot as usize].take().expect("owned"))
        })
        .collect()
}

/// The reply to read `cookie` whose data is 4 KiB of `fill`.
fn read_reply(cookie: u64, fill: u8) -> Vec<u8> {
    let mut reply = wire::simple_reply(cookie, 0).to_vec();
    reply.extend(std::iter::repeat_n(fill, CHUNK as usize));
    reply
}

#[test]
fn replies_finished_while_corked_go_out_in_one_send_in_the_order_they_finished() {
    let (mut server, mut conn, mut wire) = (Server::new(), connection(), Memory::default());
    let reads = three_reads(&mut server, &mut conn, &mut wire);
    conn.cork();
    for &i in &[2, 0, 1] {
        let (slot, owner) = reads[i];
        let (done, _) = server.call(&mut wire, 1, |env| conn.finished(1, env, owner, slot, 0));
        done.unwrap();
    }
    assert!(wire.output.is_empty(), "nothing goes out while corked");
    assert!(!conn.is_over(), "held replies are work left");
    server.call(&mut wire, 1, |env| conn.uncork(env));
    assert_eq!(wire.sends, 1, "one write for the three replies");
    let expected = [read_reply(3, 3), read_reply(1, 1), read_reply(2, 2)].concat();
    assert_eq!(wire.output, expected);
    assert_eq!(
        (conn.holder.held, conn.tally.reads),
        (0, 3),
        "every slot given back"
    );
}

#[test]
fn a_corked_batch_the_stream_takes_in_part_keeps_the_rest_in_order_until_it_is_writable() {
    let (mut server, mut conn, mut wire) = (Server::new(), connection(), Memory::default());
    let reads = three_reads(&mut server, &mut conn, &mut wire);
    conn.cork();
    for &(slot, owner) in &reads {
        let (done, _) = server.call(&mut wire, 1, |env| conn.finished(1, env, owner, slot, 0));
        done.unwrap();
    }
    // The socket takes the first reply and ten bytes of the second.
    let first = read_reply(1, 1).len();
    wire.room = Some(first + 10);
    server.call(&mut wire, 1, |env| conn.uncork(env));
    assert_eq!(wire.output.len(), first + 10);
    assert!(conn.wants_output(), "the rest waits for the client");
    assert_eq!(
        (server.pools.parked(), conn.holder.held),
        (2, 2),
        "the two replies not sent whole are copies that still count against the quota"
    );
    wire.room = None;
    server.call(&mut wire, 2, |env| conn.flush(env));
    let expected = [read_reply(1, 1), read_reply(2, 2), read_reply(3, 3)].concat();
    assert_eq!(wire.output, expected, "every byte once, in order");
    assert_eq!((server.pools.parked(), conn.holder.held), (0, 0));
    assert!(!conn.wants_output());
}

#[test]
fn one_send_carries_whole_replies_within_the_streams_iovec_limit() {
    use super::replying::{Reply, fitting};
    let read = |slots: u32| Reply::new(0, 0, (0..slots).map(|s| (s, 512)).collect());
    let failed = Reply::new(0, 5, (0..2000).map(|s| (s, 512)).collect());
    let max = libc::UIO_MAXIOV as usize;
    // 3 replies of 1 + 340 iovecs fit in 1024; a fourth would not.
    let replies: Vec<Reply> = (0..4).map(|_| read(340)).collect();
    assert_eq!(fitting(&replies), 3);
    assert_eq!(fitting(&replies[3..]), 1);
    assert_eq!(
        fitting(&[read(max as u32)]),
        1,
        "one reply goes alone even past the limit"
    );
    assert_eq!(
        fitting(&[failed, read(1)]),
        2,
        "an error reply carries its header only"
    );
}

/// The simple replies in `output` without data: (cookie, error) each, `data` bytes of read
/// data skipped after the reply to `read_cookie`.
fn replies(output: &[u8], read_cookie: u64, data: usize) -> Vec<(u64, u32)> {
    let mut at = 0;
    let mut out = Vec::new();
    while at + 16 <= output.len() {
        let error = u32::from_be_bytes(output[at + 4..at + 8].try_into().unwrap());
        let cookie = u64::from_be_bytes(output[at + 8..at + 16].try_into().unwrap());
        at += 16;
        if cookie == read_cookie && error == 0 {
            at += data;
        }
        out.push((cookie, error));
    }
    out
}

#[test]
fn a_stopping_server_answers_every_request_that_had_arrived_and_reads_nothing_later() {
    let (mut server, mut conn, mut wire) = (Server::new(), connection(), Memory::default());
    // A read of every data slot; then a read waiting for a slot; then a write, a flush
    // and a trim still in the stream when the server stops.
    wire.input.extend(request(wire::CMD_READ, 1, 0, 4 * CHUNK));
    wire.input.extend(request(wire::CMD_READ, 2, 0, CHUNK));
    let (_, bios) = server.call(&mut wire, 0, |env| conn.read(1, env));
    assert_eq!(bios.len(), 4, "the first read's bios");
    assert!(conn.wants_slots(), "the second read waits for a slot");
    wire.input.extend(request(wire::CMD_WRITE, 3, 0, CHUNK));
    wire.input.extend(vec![0x5a; CHUNK as usize]);
    wire.input.extend(request(wire::CMD_FLUSH, 4, 0, 0));
    wire.input.extend(request(wire::CMD_TRIM, 5, 0, CHUNK));
    let (_, more) = server.call(&mut wire, 1, |env| {
        conn.stop_reading(env);
        // Sent after the stop: never read.
        env.wire.unread_bytes()
    });
    assert!(more.is_empty());
    let late = request(wire::CMD_READ, 9, 0, CHUNK);
    wire.input.extend(&late);
    let (_, bios_after) = server.call(&mut wire, 1, |env| conn.read(1, env));
    assert!(bios_after.is_empty(), "nothing new starts once stopping");
    assert_eq!(
        replies(&wire.output, 0, 0),
        [
            (2, wire::ESHUTDOWN),
            (3, wire::ESHUTDOWN),
            (4, wire::ESHUTDOWN),
            (5, wire::ESHUTDOWN)
        ],
        "the requests not started are refused, each once"
    );
    assert!(!conn.is_over(), "the first read is still out");
    for bio in &bios {
        let slot = Lease::of_bio(bio.id).slot();
        let owner = server.owners[slot as usize].take().expect("owned");
        let (done, _) = server.call(&mut wire, 2, |env| conn.finished(1, env, owner, slot, 0));
        done.unwrap();
    }
    assert_eq!(
        replies(&wire.output, 1, 4 * CHUNK as usize).last(),
        Some(&(1, 0)),
        "the started read finishes with its data"
    );
    assert!(conn.is_over(), "nothing left: the connection can close");
    assert_eq!(
        wire.input.len(),
        late.len(),
        "the late request was not read"
    );
}
