//! The connection without a socket or a clock: bytes in, bios and replies out, deadlines on
//! the engine's time. Most tests run it under the server's own driver loops
//! (`super::super::link`) over a stream in memory; the byte-at-a-time tests feed it bytes
//! through its own interface.

use std::collections::VecDeque;

use super::super::link::{self, Transport};
use super::super::pool::Holder;
use super::*;

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
    shut: Option<Shutdown>,
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

    fn shutdown(&mut self, how: Shutdown) {
        self.shut = Some(how);
    }
}

/// The slots' bytes in plain memory.
impl SlotBytes for Vec<Vec<u8>> {
    fn bytes(&self, slot: u32) -> &[u8] {
        &self[slot as usize]
    }

    fn bytes_mut(&mut self, slot: u32) -> &mut [u8] {
        &mut self[slot as usize]
    }
}

/// The server side one connection needs: slots, their owners and the export's limits.
struct Server {
    slots: Vec<Vec<u8>>,
    pools: Pools,
    owners: Vec<Option<Owner>>,
    limits: ExportBounds,
}

impl Server {
    fn new() -> Self {
        Self {
            slots: vec![vec![0; CHUNK as usize]; 5],
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

    /// The connection's view for one call at `now`.
    fn env(&mut self, now: u64) -> Env<'_> {
        Env {
            pools: &mut self.pools,
            owners: &mut self.owners,
            slots: &mut self.slots,
            limits: &self.limits,
            chunk: CHUNK,
            timeout: std::time::Duration::from_secs(1),
            now,
        }
    }

    /// Runs `call` on `conn` at `now`, then does what the connection asked, as the
    /// server's driver does: returns `call`'s value and the bios it started.
    fn call<T>(
        &mut self,
        conn: &mut Conn,
        wire: &mut Memory,
        now: u64,
        call: impl FnOnce(&mut Conn, &mut Env<'_>, &mut Memory) -> T,
    ) -> (T, Vec<Bio>) {
        let mut env = self.env(now);
        let value = call(conn, &mut env, wire);
        let mut bios = Vec::new();
        link::act(conn, wire, &mut env, &mut |bio| bios.push(bio));
        (value, bios)
    }

    /// The server's read of `conn` at `now`: true iff it stopped for the turn's bound.
    fn read(&mut self, conn: &mut Conn, wire: &mut Memory, now: u64) -> (bool, Vec<Bio>) {
        self.call(conn, wire, now, |conn, env, wire| {
            link::read_in(conn, 1, wire, env)
        })
    }

    /// Bio `bio` finished with `status` at `now`, its reply left unsent.
    fn finish(&mut self, conn: &mut Conn, bio: &Bio, now: u64) {
        let slot = Lease::of_bio(bio.id).slot();
        let owner = self.owners[slot as usize]
            .take()
            .expect("the slot names its request");
        conn.finished(1, &mut self.env(now), owner, slot, 0);
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
    let (spent, bios) = server.read(&mut conn, &mut wire, 0);
    assert!(!spent, "nothing more to read");
    let [bio] = bios.as_slice() else {
        panic!("one bio, got {bios:?}")
    };
    assert_eq!(
        (bio.ctx, bio.op, bio.sector, bio.sectors),
        (7, Op::Write, 16, 8)
    );
    let slot = Lease::of_bio(bio.id).slot();
    assert!(
        server.slots[slot as usize].iter().all(|&b| b == 0x5a),
        "the payload is in the bio's buffer"
    );
    assert!(wire.output.is_empty(), "no reply before the write finished");
    let (_, more) = server.call(&mut conn, &mut wire, 5, |conn, env, _| {
        let owner = env.owners[slot as usize].take().expect("owned");
        conn.finished(1, env, owner, slot, 0);
    });
    assert!(more.is_empty());
    let mut reply = wire::SIMPLE_REPLY_MAGIC.to_be_bytes().to_vec();
    reply.extend_from_slice(&0u32.to_be_bytes());
    reply.extend_from_slice(&42u64.to_be_bytes());
    assert_eq!(wire.output, reply);
    assert_eq!(conn.tally.writes, 1);
    assert_eq!(conn.next_deadline(), None);
}

#[test]
fn a_write_payload_past_what_the_buffer_holds_is_read_straight_into_its_slot() {
    let (mut server, mut conn) = (Server::new(), connection());
    let header = request(wire::CMD_WRITE, 3, 0, CHUNK);
    let mut env = server.env(0);
    // The header and 100 bytes of the payload arrive together.
    let room = conn.rx_room();
    let h = header.len();
    room[..h].copy_from_slice(&header);
    room[h..h + 100].fill(0x11);
    assert!(conn.received(&mut env, Ok(Some(h + 100))));
    assert_eq!(conn.read(1, &mut env, &mut 64), Paused::Bytes);
    let Intake::Payload { slot, range } = conn.intake() else {
        panic!(
            "the payload's rest goes to its slot, got {:?}",
            conn.intake()
        )
    };
    assert_eq!(range, 100..CHUNK as usize, "after the 100 bytes buffered");
    env.slots.bytes_mut(slot)[range.clone()].fill(0x22);
    assert!(conn.received(&mut env, Ok(Some(range.len()))));
    assert_eq!(conn.read(1, &mut env, &mut 64), Paused::Bytes);
    let bios: Vec<Bio> = conn.drain_bios().collect();
    assert_eq!(
        bios.len(),
        1,
        "the write started once its payload was whole"
    );
    let data = env.slots.bytes(slot);
    assert!(data[..100].iter().all(|&b| b == 0x11) && data[100..].iter().all(|&b| b == 0x22));
    assert_eq!(conn.intake(), Intake::Buffer, "then the next header");
}

/// The bios, write payloads and replies of `input` fed to a connection in pieces of the
/// lengths `cuts` gives in turn, through the connection's own interface: where the next
/// bytes go, and how many came. Every bio finishes at once (a read with a byte of its
/// sector number), its reply collected.
fn fed_in_pieces(
    input: &[u8],
    cuts: &mut impl Iterator<Item = usize>,
) -> (Vec<(Bio, Vec<u8>)>, Vec<u8>) {
    let (mut server, mut conn, mut wire) = (Server::new(), connection(), Memory::default());
    let mut at = 0;
    let mut started = Vec::new();
    loop {
        let mut env = server.env(0);
        let mut budget = usize::MAX;
        let paused = conn.read(1, &mut env, &mut budget);
        let bios: Vec<Bio> = conn.drain_bios().collect();
        for bio in &bios {
            let slot = Lease::of_bio(bio.id).slot();
            // A write's bytes are its payload; a read's slot holds whatever was there.
            let bytes = if bio.op == Op::Write {
                env.slots.bytes(slot).to_vec()
            } else {
                Vec::new()
            };
            started.push((*bio, bytes));
        }
        for bio in &bios {
            if bio.op == Op::Read {
                // The device's data: a byte of its sector number.
                server.slots[Lease::of_bio(bio.id).slot() as usize].fill(bio.sector as u8);
            }
            server.finish(&mut conn, bio, 0);
        }
        link::write_out(&mut conn, &mut wire, &mut server.env(0));
        if paused == Paused::Waits && !bios.is_empty() {
            continue; // the bios finished: their slots are free again
        }
        if paused != Paused::Bytes || at == input.len() {
            break;
        }
        let want = cuts.next().unwrap_or(1).clamp(1, input.len() - at);
        let mut env = server.env(0);
        let place: &mut [u8] = match conn.intake() {
            Intake::Buffer => conn.rx_room(),
            Intake::Payload { slot, range } => &mut env.slots.bytes_mut(slot)[range],
            Intake::Nothing => break,
        };
        let n = want.min(place.len());
        place[..n].copy_from_slice(&input[at..at + n]);
        at += n;
        assert!(conn.received(&mut env, Ok(Some(n))));
    }
    (started, wire.output)
}

/// The replies in `output` (reads, cookies 11 to 13, carry a block when they succeed), by
/// cookie: a refusal is answered as it is read, so its place among the others depends on
/// when the bios before it finished.
fn by_cookie(output: &[u8]) -> std::collections::BTreeMap<u64, (u32, Vec<u8>)> {
    let mut replies = std::collections::BTreeMap::new();
    let mut at = 0;
    while at < output.len() {
        let error = u32::from_be_bytes(output[at + 4..at + 8].try_into().unwrap());
        let cookie = u64::from_be_bytes(output[at + 8..at + 16].try_into().unwrap());
        at += 16;
        let data = if (11..=13).contains(&cookie) && error == 0 {
            at += CHUNK as usize;
            output[at - CHUNK as usize..at].to_vec()
        } else {
            Vec::new()
        };
        assert!(
            replies.insert(cookie, (error, data)).is_none(),
            "cookie {cookie} answered twice"
        );
    }
    replies
}

#[test]
fn requests_fed_in_any_pieces_start_the_same_bios_with_the_same_bytes_and_the_same_replies() {
    let mut input = Vec::new();
    for (cookie, fill) in (1..=3u64).zip([0xa1u8, 0xb2, 0xc3]) {
        input.extend(request(wire::CMD_WRITE, cookie, cookie * 8192, 2 * CHUNK));
        input.extend(std::iter::repeat_n(fill, 2 * CHUNK as usize));
        input.extend(request(wire::CMD_READ, cookie + 10, 0, CHUNK));
        input.extend(request(wire::CMD_FLUSH, cookie + 20, 0, 0));
    }
    input.extend(request(wire::CMD_READ, 99, 1 << 21, CHUNK)); // past the end: refused
    let whole = fed_in_pieces(&input, &mut std::iter::repeat(input.len()));
    assert_eq!(
        whole.0.len(),
        3 * 2 + 3 + 3,
        "two bios a write, one a read or flush"
    );
    assert_eq!(by_cookie(&whole.1).len(), 10, "every request answered");
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    for seed in 0..40 {
        // Pieces of 1 byte, of up to 8, of up to 5000 (a header and a payload split
        // anywhere), drawn from a small generator.
        let most = [1, 8, 5000][seed % 3];
        let mut cuts = std::iter::from_fn(|| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            Some(1 + (state % most as u64) as usize)
        });
        let pieces = fed_in_pieces(&input, &mut cuts);
        let same = |a: &(Bio, Vec<u8>), b: &(Bio, Vec<u8>)| {
            (a.0.op, a.0.sector, a.0.sectors, &a.1) == (b.0.op, b.0.sector, b.0.sectors, &b.1)
        };
        assert!(
            pieces.0.len() == whole.0.len()
                && pieces.0.iter().zip(&whole.0).all(|(a, b)| same(a, b)),
            "seed {seed}: the bios and their bytes differ from the whole input's"
        );
        assert!(
            by_cookie(&pieces.1) == by_cookie(&whole.1),
            "seed {seed}: the replies differ"
        );
    }
}

#[test]
fn a_reply_the_client_does_not_take_is_due_on_the_engines_clock_and_closes_it_when_late() {
    let (mut server, mut conn, mut wire) = (Server::new(), connection(), Memory::default());
    wire.stalled = true;
    wire.input.extend(request(wire::CMD_FLUSH, 9, 0, 0));
    let (_, bios) = server.read(&mut conn, &mut wire, 3 * SECOND);
    let [flush] = bios.as_slice() else {
        panic!("one flush, got {bios:?}")
    };
    let at = 4 * SECOND;
    server.finish(&mut conn, flush, at);
    server.call(&mut conn, &mut wire, at, |_, _, _| ());
    assert!(conn.wants_output(), "the reply waits for the client");
    assert_eq!(
        conn.next_deadline(),
        Some(at + SECOND),
        "--reply-timeout from then"
    );
    server.call(&mut conn, &mut wire, at + SECOND - 1, |conn, env, _| {
        conn.enforce_deadlines(env)
    });
    assert!(conn.wants_output(), "not late yet");
    server.call(&mut conn, &mut wire, at + SECOND, |conn, env, _| {
        conn.enforce_deadlines(env)
    });
    assert!(
        !conn.wants_output() && conn.is_over(),
        "closed at its deadline"
    );
    assert_eq!(
        wire.shut,
        Some(Shutdown::Both),
        "the driver shut the stream"
    );
}

/// Three 4 KiB reads of `fill` bytes 1, 2 and 3 sent and run: their bios, in the order
/// the requests came (cookies 1, 2, 3).
fn three_reads(server: &mut Server, conn: &mut Conn, wire: &mut Memory) -> Vec<Bio> {
    for cookie in 1..=3u64 {
        wire.input
            .extend(request(wire::CMD_READ, cookie, cookie * 8192, CHUNK));
    }
    let (_, bios) = server.read(conn, wire, 0);
    assert_eq!(bios.len(), 3, "one bio per read");
    for (bio, fill) in bios.iter().zip(1u8..) {
        server.slots[Lease::of_bio(bio.id).slot() as usize].fill(fill);
    }
    bios
}

/// The reply to read `cookie` whose data is 4 KiB of `fill`.
fn read_reply(cookie: u64, fill: u8) -> Vec<u8> {
    let mut reply = wire::simple_reply(cookie, 0).to_vec();
    reply.extend(std::iter::repeat_n(fill, CHUNK as usize));
    reply
}

#[test]
fn replies_finished_in_one_reap_go_out_in_one_send_in_the_order_they_finished() {
    let (mut server, mut conn, mut wire) = (Server::new(), connection(), Memory::default());
    let reads = three_reads(&mut server, &mut conn, &mut wire);
    for &i in &[2, 0, 1] {
        server.finish(&mut conn, &reads[i], 1);
    }
    assert!(
        wire.output.is_empty(),
        "nothing goes out until the driver sends"
    );
    assert!(!conn.is_over(), "replies not sent are work left");
    server.call(&mut conn, &mut wire, 1, |_, _, _| ());
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
fn a_batch_the_stream_takes_in_part_keeps_the_rest_in_order_until_it_is_writable() {
    let (mut server, mut conn, mut wire) = (Server::new(), connection(), Memory::default());
    let reads = three_reads(&mut server, &mut conn, &mut wire);
    for bio in &reads {
        server.finish(&mut conn, bio, 1);
    }
    // The socket takes the first reply and ten bytes of the second.
    let first = read_reply(1, 1).len();
    wire.room = Some(first + 10);
    server.call(&mut conn, &mut wire, 1, |_, _, _| ());
    assert_eq!(wire.output.len(), first + 10);
    assert!(conn.wants_output(), "the rest waits for the client");
    assert_eq!(
        (server.pools.parked(), conn.holder.held),
        (2, 2),
        "the two replies not sent whole are copies that still count against the quota"
    );
    wire.room = None;
    server.call(&mut conn, &mut wire, 2, |_, _, _| ());
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
    let (_, bios) = server.read(&mut conn, &mut wire, 0);
    assert_eq!(bios.len(), 4, "the first read's bios");
    assert!(conn.wants_slots(), "the second read waits for a slot");
    wire.input.extend(request(wire::CMD_WRITE, 3, 0, CHUNK));
    wire.input.extend(vec![0x5a; CHUNK as usize]);
    wire.input.extend(request(wire::CMD_FLUSH, 4, 0, 0));
    wire.input.extend(request(wire::CMD_TRIM, 5, 0, CHUNK));
    let arrived = wire.input.len();
    let (_, more) = server.call(&mut conn, &mut wire, 1, |conn, env, _| {
        conn.stop_reading(env, arrived);
    });
    assert!(more.is_empty());
    // Sent after the stop: never read.
    let late = request(wire::CMD_READ, 9, 0, CHUNK);
    wire.input.extend(&late);
    let (_, bios_after) = server.read(&mut conn, &mut wire, 1);
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
    assert_eq!(wire.shut, Some(Shutdown::Read), "its read side is shut");
    assert!(!conn.is_over(), "the first read is still out");
    for bio in &bios {
        server.finish(&mut conn, bio, 2);
    }
    server.call(&mut conn, &mut wire, 2, |_, _, _| ());
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

/// Requests in a hostile stream, numbered by their cookies.
const COOKIES: u64 = 60;

/// A client's bytes drawn from `state`: requests of every command (known or not), with
/// flags, offsets and lengths inside and outside the export, writes' payloads, now and then
/// a bad magic, and the stream cut anywhere; the cookies are the requests' numbers.
fn hostile_stream(state: &mut u64) -> Vec<u8> {
    let mut next = move || {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    };
    let mut bytes = Vec::new();
    for cookie in 0..COOKIES {
        // Mostly what clients send; now and then a command the server does not know, and
        // rarely a disconnect (which ends the stream).
        let kind = match next() % 40 {
            0 => wire::CMD_DISC,
            1 | 2 => [5, 7, 99][(next() % 3) as usize],
            k => [0u16, 0, 1, 1, 3, 4, 6][(k % 7) as usize],
        };
        let flags = [0u16, 0, 0, wire::CMD_FLAG_FUA, 0xffff][(next() % 5) as usize];
        let offset = match next() % 4 {
            0 => (next() % 256) * 4096,
            1 => next() % (1 << 20),
            2 => (1 << 20) - 4096,
            _ => next(),
        };
        let length = match next() % 20 {
            0 => 0,
            1 => (next() % (2 << 20)) as u32,
            2..=4 => (next() % 20_000) as u32,
            5..=9 => 4096,
            _ => (next() % 32 + 1) as u32 * 512,
        };
        let mut header = request(kind, cookie, offset, length);
        header[4..6].copy_from_slice(&flags.to_be_bytes());
        if next() % 150 == 0 {
            header[0] ^= 0x40;
        }
        bytes.extend(header);
        if kind == wire::CMD_WRITE {
            let sent = if next() % 40 == 0 {
                next() % (u64::from(length) + 1)
            } else {
                u64::from(length)
            };
            bytes.extend(std::iter::repeat_n(
                cookie as u8,
                sent.min(1 << 21) as usize,
            ));
        }
    }
    let cut = bytes.len() - (next() % 64) as usize % bytes.len().max(1);
    bytes.truncate(cut);
    bytes
}

#[test]
fn hostile_bytes_in_any_pieces_end_with_every_slot_back_and_every_request_answered_at_most_once() {
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    for round in 0..60 {
        let input = hostile_stream(&mut state);
        let (mut server, mut conn, mut wire) = (Server::new(), connection(), Memory::default());
        let mut at = 0;
        let mut ended = false;
        for _ in 0..100_000 {
            let mut budget = usize::MAX;
            let paused = conn.read(1, &mut server.env(0), &mut budget);
            let bios: Vec<Bio> = conn.drain_bios().collect();
            for (i, bio) in bios.iter().enumerate() {
                let slot = Lease::of_bio(bio.id).slot();
                let owner = server.owners[slot as usize]
                    .take()
                    .expect("every bio holds a lent slot");
                // Now and then the device fails a bio.
                let status = if (round + i) % 7 == 0 { -libc::EIO } else { 0 };
                conn.finished(1, &mut server.env(0), owner, slot, status);
            }
            link::write_out(&mut conn, &mut wire, &mut server.env(0));
            let _ = conn.take_shutdown();
            if !bios.is_empty() {
                continue;
            }
            if paused != Paused::Bytes || ended {
                break;
            }
            let mut env = server.env(0);
            let got = if at == input.len() {
                ended = true;
                Ok(Some(0))
            } else {
                let want = 1 + (state % 9000) as usize;
                state = state.rotate_left(7) ^ 0x5bd1_e995;
                let place: &mut [u8] = match conn.intake() {
                    Intake::Buffer => conn.rx_room(),
                    Intake::Payload { slot, range } => &mut env.slots.bytes_mut(slot)[range],
                    Intake::Nothing => break,
                };
                let n = want.min(place.len()).min(input.len() - at);
                place[..n].copy_from_slice(&input[at..at + n]);
                at += n;
                Ok(Some(n))
            };
            conn.received(&mut env, got);
        }
        assert!(
            conn.is_over(),
            "round {round}: the connection has work left"
        );
        assert_eq!(conn.holder.held, 0, "round {round}: data slots still held");
        assert!(
            server.owners.iter().all(Option::is_none),
            "round {round}: a slot still lent"
        );
        let mut fresh = Holder::default();
        assert!(
            server.pools.take_data(4, &mut fresh).is_some()
                && server.pools.take_control(&fresh).is_some(),
            "round {round}: a slot never came back to the pool"
        );
        // Every reply is whole, to a request that was sent, and no request is answered twice.
        let reads = read_lengths(&input);
        let mut answered = std::collections::BTreeSet::new();
        let mut out = &wire.output[..];
        while !out.is_empty() {
            assert!(out.len() >= 16, "round {round}: a reply cut short");
            let magic = u32::from_be_bytes(out[..4].try_into().unwrap());
            assert_eq!(magic, wire::SIMPLE_REPLY_MAGIC, "round {round}");
            let error = u32::from_be_bytes(out[4..8].try_into().unwrap());
            let cookie = u64::from_be_bytes(out[8..16].try_into().unwrap());
            assert!(
                cookie < COOKIES && answered.insert(cookie),
                "round {round}: cookie {cookie}"
            );
            out = &out[16..];
            // A read answered without an error carries its data: the request's length.
            if let (0, Some(&len)) = (error, reads.get(&cookie)) {
                assert!(
                    out.len() >= len as usize,
                    "round {round}: a read's data cut short"
                );
                out = &out[len as usize..];
            }
        }
    }
}

/// The lengths of the reads (by cookie) among the requests in `input`, walking its headers
/// and skipping writes' payloads as the connection does while the stream is well formed.
fn read_lengths(input: &[u8]) -> std::collections::BTreeMap<u64, u32> {
    let mut reads = std::collections::BTreeMap::new();
    let mut at = 0;
    while at + wire::REQUEST_LEN <= input.len() {
        let header: &[u8; wire::REQUEST_LEN] =
            input[at..at + wire::REQUEST_LEN].try_into().unwrap();
        let Ok(request) = Request::parse(header) else {
            break;
        };
        at += wire::REQUEST_LEN;
        match request.kind {
            wire::CMD_READ => {
                reads.insert(request.cookie, request.length);
            }
            wire::CMD_WRITE => at += request.length as usize,
            _ => {}
        }
    }
    reads
}
