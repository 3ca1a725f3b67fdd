//! The NBD server as the engine's front-end, on the engine's thread: every connection past
//! its handshake is served here. The ring says when a socket is readable or writable;
//! requests become bios as their bytes arrive, and each reply goes out from where its last
//! bio's completion is reaped. No thread per connection, and no hand-off per request.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use super::conn::{Conn, Env, Owner};
use super::hub::{Arrival, Hub};
use super::plan::Limits;
use super::pool::Pools;
use super::{ClientSummary, SlotPlan};
use crate::backend::ring::{Lease, RingBackend, SlotAccess};
use crate::engine::{Backend, Done, Engine, Flow, Frontend};
use crate::frontend::jobs::real::RealError;
use crate::observe::events::file::Writer;
use crate::observe::metrics::{Endpoint, exposition};

/// The engine's side of the server.
pub struct Front<'a> {
    hub: &'a Hub,
    /// Clients past the handshake, which admission counts.
    established: &'a AtomicUsize,
    /// Where the engine's time starts, to turn deadlines into its nanoseconds.
    clock: Instant,
    conns: HashMap<u64, Conn>,
    next_id: u64,
    pools: Pools,
    /// Per buffer slot, whose bio holds it.
    owners: Vec<Option<Owner>>,
    slots: SlotAccess,
    limits: Limits,
    chunk: u32,
    timeout: Duration,
    /// ctx numbers in use; a new client takes the lowest free one.
    ctxs: BTreeSet<u32>,
    /// Connections that waited for slots, in the order they started waiting.
    starved: VecDeque<u64>,
    /// Connections whose state changed this turn: their polls are armed, or they close.
    touched: Vec<u64>,
    /// Connections that stopped at the per-turn bound with more to read.
    busy: Vec<u64>,
    ready: Vec<u64>,
    arrivals: Vec<Arrival>,
    stopped_reading: bool,
    /// Clients that left, in the order they left.
    pub clients: Vec<ClientSummary>,
    events: Option<&'a mut Writer>,
    metrics: Option<&'a Endpoint>,
}

/// What the server's front-end is set up with.
pub struct Setup<'a> {
    /// Shared with the acceptor and the handshakes.
    pub hub: &'a Hub,
    /// Clients past the handshake.
    pub established: &'a AtomicUsize,
    /// The slots' layout.
    pub slots: SlotPlan,
    /// The slots' memory.
    pub access: SlotAccess,
    /// The export's bounds.
    pub limits: Limits,
    /// How long a reply, or a write's payload piece, may take (`--reply-timeout`).
    pub timeout: Duration,
    /// The event file (`--trace-events`).
    pub events: Option<&'a mut Writer>,
    /// The metrics endpoint (`--metrics`).
    pub metrics: Option<&'a Endpoint>,
}

impl<'a> Front<'a> {
    /// The server's side over `setup`, on the clock the engine's time counts from.
    pub fn new(setup: Setup<'a>, clock: Instant) -> Self {
        let plan = setup.slots;
        Self {
            hub: setup.hub,
            established: setup.established,
            clock,
            conns: HashMap::new(),
            next_id: 0,
            pools: Pools::new(plan.data, plan.control, plan.per_connection),
            owners: vec![None; (plan.data + plan.control) as usize],
            slots: setup.access,
            limits: setup.limits,
            chunk: plan.chunk,
            timeout: setup.timeout,
            ctxs: BTreeSet::new(),
            starved: VecDeque::new(),
            touched: Vec::new(),
            busy: Vec::new(),
            ready: Vec::new(),
            arrivals: Vec::new(),
            stopped_reading: false,
            clients: Vec::new(),
            events: setup.events,
            metrics: setup.metrics,
        }
    }

    /// Connection `id` reads what it can, and waits in line for slots if it must.
    fn serve(
        &mut self,
        id: u64,
        engine: &mut Engine<RingBackend>,
        now: u64,
    ) -> Result<(), RealError> {
        let Some(conn) = self.conns.get_mut(&id) else {
            return Ok(());
        };
        let mut env = Env {
            pools: &mut self.pools,
            owners: &mut self.owners,
            slots: &self.slots,
            limits: &self.limits,
            chunk: self.chunk,
            timeout: self.timeout,
            engine,
            now,
        };
        if conn.wants_output() {
            conn.flush(&mut env);
        }
        let more = conn.read(id, &mut env)?;
        if more {
            self.busy.push(id);
        }
        if conn.wants_slots() && !self.starved.contains(&id) {
            self.starved.push_back(id);
        }
        self.touched.push(id);
        Ok(())
    }

    /// Connections waiting for slots try again, in the order they began waiting; the first
    /// still short keeps its place and the rest wait behind it.
    fn serve_starved(
        &mut self,
        engine: &mut Engine<RingBackend>,
        now: u64,
    ) -> Result<(), RealError> {
        while let Some(&id) = self.starved.front() {
            self.starved.pop_front();
            self.serve(id, engine, now)?;
            if self.starved.back() == Some(&id) {
                // Still short: back to the head of the line.
                self.starved.pop_back();
                self.starved.push_front(id);
                return Ok(());
            }
        }
        Ok(())
    }

    /// Takes the clients that finished their handshake.
    fn admit(&mut self) {
        self.hub.take_arrivals(&mut self.arrivals);
        for arrival in std::mem::take(&mut self.arrivals) {
            if let Err(e) = arrival.stream.set_nonblocking() {
                tracing::warn!(peer = %arrival.peer, "closing: {e}");
                self.established.fetch_sub(1, Ordering::AcqRel);
                self.hub.live.fetch_sub(1, Ordering::AcqRel);
                continue;
            }
            let ctx = (0..).find(|c| !self.ctxs.contains(c)).unwrap_or(0);
            self.ctxs.insert(ctx);
            tracing::info!(peer = %arrival.peer, ctx, "client connected");
            self.next_id += 1;
            let id = self.next_id;
            let conn = Conn::new(arrival.stream, arrival.peer, ctx, arrival.started);
            self.conns.insert(id, conn);
            // It may have sent requests already.
            self.busy.push(id);
        }
    }

    /// The server stops: every connection finishes what it sent and reads nothing more.
    fn stop_reading(&mut self, engine: &mut Engine<RingBackend>, now: u64) {
        let ids: Vec<u64> = self.conns.keys().copied().collect();
        for id in ids {
            let Some(conn) = self.conns.get_mut(&id) else {
                continue;
            };
            let mut env = Env {
                pools: &mut self.pools,
                owners: &mut self.owners,
                slots: &self.slots,
                limits: &self.limits,
                chunk: self.chunk,
                timeout: self.timeout,
                engine: &mut *engine,
                now,
            };
            conn.stop_reading(&mut env);
            self.touched.push(id);
        }
    }

    /// Closes connections past a deadline.
    fn enforce_deadlines(&mut self, engine: &mut Engine<RingBackend>, now: u64) {
        let at = Instant::now();
        for (&id, conn) in &mut self.conns {
            if conn.next_deadline().is_none_or(|due| due > at) {
                continue;
            }
            let mut env = Env {
                pools: &mut self.pools,
                owners: &mut self.owners,
                slots: &self.slots,
                limits: &self.limits,
                chunk: self.chunk,
                timeout: self.timeout,
                engine: &mut *engine,
                now,
            };
            conn.enforce_deadlines(&mut env, at);
            self.touched.push(id);
        }
    }

    /// Arms the polls the touched connections wait on, and closes the ones that are over.
    fn settle_touched(&mut self, engine: &mut Engine<RingBackend>) -> Result<(), RealError> {
        let mut touched = std::mem::take(&mut self.touched);
        touched.sort_unstable();
        touched.dedup();
        for &id in &touched {
            let Some(conn) = self.conns.get_mut(&id) else {
                continue;
            };
            if conn.is_over() {
                self.close(id);
                continue;
            }
            // One poll per direction, told apart by the token's low bit.
            let fd = conn.stream.raw_fd();
            if conn.wants_input() && !conn.polling_in {
                conn.polling_in = true;
                engine.backend.poll(fd, libc::POLLIN as u32, id << 1)?;
            }
            if conn.wants_output() && !conn.polling_out {
                conn.polling_out = true;
                engine.backend.poll(fd, libc::POLLOUT as u32, id << 1 | 1)?;
            }
        }
        touched.clear();
        self.touched = touched;
        Ok(())
    }

    /// Connection `id` is over: its summary is kept and its ctx freed.
    fn close(&mut self, id: u64) {
        let Some(conn) = self.conns.remove(&id) else {
            return;
        };
        let _ = conn.stream.shutdown();
        self.ctxs.remove(&conn.ctx);
        self.starved.retain(|&s| s != id);
        if let Some(why) = &conn.closed_because {
            tracing::warn!(peer = %conn.peer, ctx = conn.ctx, "closed: {why}");
        }
        tracing::info!(
            peer = %conn.peer,
            ctx = conn.ctx,
            reads = conn.tally.reads,
            writes = conn.tally.writes,
            "client left"
        );
        self.clients.push(ClientSummary {
            peer: conn.peer,
            ctx: conn.ctx,
            seconds: conn.started.elapsed().as_secs_f64(),
            tally: conn.tally,
            closed_because: conn.closed_because,
        });
        self.established.fetch_sub(1, Ordering::AcqRel);
        self.hub.live.fetch_sub(1, Ordering::AcqRel);
    }

    /// The engine's nanoseconds at `at`.
    fn ns(&self, at: Instant) -> u64 {
        at.saturating_duration_since(self.clock).as_nanos() as u64
    }
}

impl Frontend<RingBackend> for Front<'_> {
    type Error = RealError;

    /// Each finished bio goes to its request; a request whose bios all finished is
    /// answered here, and connections waiting for slots try again.
    fn complete(
        &mut self,
        now: u64,
        done: &[Done],
        engine: &mut Engine<RingBackend>,
    ) -> Result<(), RealError> {
        for finished in done {
            let lease = Lease::of_bio(finished.bio.bio);
            let Some(owner) = self.owners.get_mut(lease.index()).and_then(Option::take) else {
                continue;
            };
            let Some(conn) = self.conns.get_mut(&owner.conn) else {
                continue;
            };
            let mut env = Env {
                pools: &mut self.pools,
                owners: &mut self.owners,
                slots: &self.slots,
                limits: &self.limits,
                chunk: self.chunk,
                timeout: self.timeout,
                engine: &mut *engine,
                now,
            };
            conn.finished(
                owner.conn,
                &mut env,
                owner,
                lease.slot(),
                finished.bio.status,
            )?;
            self.touched.push(owner.conn);
        }
        if !done.is_empty() {
            self.serve_starved(engine, now)?;
        }
        Ok(())
    }

    fn issue(&mut self, now: u64, engine: &mut Engine<RingBackend>) -> Result<(), RealError> {
        self.admit();
        if self.hub.stopping.load(Ordering::Acquire) && !self.stopped_reading {
            self.stopped_reading = true;
            self.stop_reading(engine, now);
        }
        engine.backend.take_ready(&mut self.ready);
        let mut ready = std::mem::take(&mut self.ready);
        for token in ready.iter_mut() {
            // Its poll fired: it is armed no more.
            let (id, writable) = (*token >> 1, *token & 1 == 1);
            if let Some(conn) = self.conns.get_mut(&id) {
                if writable {
                    conn.polling_out = false;
                } else {
                    conn.polling_in = false;
                }
            }
            *token = id;
        }
        ready.append(&mut self.busy);
        ready.sort_unstable();
        ready.dedup();
        for &id in &ready {
            if self.stopped_reading
                && let Some(conn) = self.conns.get_mut(&id)
            {
                let mut env = Env {
                    pools: &mut self.pools,
                    owners: &mut self.owners,
                    slots: &self.slots,
                    limits: &self.limits,
                    chunk: self.chunk,
                    timeout: self.timeout,
                    engine: &mut *engine,
                    now,
                };
                conn.stop_reading(&mut env);
            }
            self.serve(id, engine, now)?;
        }
        ready.clear();
        self.ready = ready;
        self.serve_starved(engine, now)?;
        self.enforce_deadlines(engine, now);
        Ok(())
    }

    fn settle(&mut self, _now: u64, engine: &mut Engine<RingBackend>) -> Result<(), RealError> {
        self.settle_touched(engine)?;
        if let Some(metrics) = self.metrics {
            for scrape in metrics.take() {
                let page = exposition::render(&engine.views(), engine.swaps().len());
                let _ = scrape.send(page);
            }
        }
        if let Some(writer) = self.events.as_deref_mut() {
            let events = engine.take_events();
            writer.write(&events).map_err(|source| RealError::Ring {
                action: "writing --trace-events",
                source,
            })?;
        }
        Ok(())
    }

    /// Over once the server is stopping, no connection is left and no I/O is anywhere.
    fn flow(&mut self, engine: &Engine<RingBackend>) -> Flow {
        let hub = self.hub;
        let quiet = engine.backend.inflight() == 0 && engine.queued() == 0;
        if hub.stopping.load(Ordering::Acquire)
            && hub.live.load(Ordering::Acquire) == 0
            && self.conns.is_empty()
            && quiet
            && hub.no_arrivals()
        {
            Flow::Done
        } else {
            Flow::Wait
        }
    }

    /// At once if a connection has more to read; else the earliest reply or payload
    /// deadline.
    fn next_wake(&self, now: u64, _deadlines: bool) -> Option<u64> {
        if !self.busy.is_empty() {
            return Some(now);
        }
        self.conns
            .values()
            .filter_map(Conn::next_deadline)
            .min()
            .map(|due| self.ns(due))
    }

    /// The acceptor and the handshakes notify when they change what ends the loop.
    fn fed_from_outside(&self) -> bool {
        true
    }
}
