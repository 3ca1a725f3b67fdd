//! The connection without a socket or a clock: bytes in, bios and replies out, deadlines on
//! the engine's time.

use std::collections::VecDeque;

use super::*;
use crate::backend::ring::Arena;

const CHUNK: u32 = 4096;
const SECOND: u64 = 1_000_000_000;

/// A stream in memory: what the client sent, what the server wrote, and whether the
/// client takes replies (a full socket takes nothing).
#[derive(Default)]
struct Memory {
    input: VecDeque<u8>,
    output: Vec<u8>,
    stalled: bool,
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
        parts.iter().for_each(|p| self.output.extend_from_slice(p));
        Ok(parts.iter().map(|p| p.len()).sum())
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
    limits: Limits,
}

impl Server {
    fn new() -> Self {
        Self {
            arena: Arena::new(&[CHUNK as usize; 5]),
            pools: Pools::new(4, 1, 4),
            owners: vec![None; 5],
            limits: Limits {
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
