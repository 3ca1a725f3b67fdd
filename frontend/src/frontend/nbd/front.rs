//! The NBD server as the engine's front-end, on the engine's thread: it accepts clients,
//! runs their handshakes and serves them. The ring says when the listener or a socket is
//! ready; requests become bios as their bytes arrive, and each reply goes out from where
//! its last bio's completion is reaped. No thread per connection, and no hand-off per
//! request.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

mod accepting;

use super::Offered;
use super::conn::Conn;
use super::greet::{Greeted, Greeting};
use super::handshake::Export;
use super::link::{self, Common, Link};
use super::net::Listener;
use super::pool::Pools;
use super::{AcceptErrors, ClientSummary, Departed, SlotPlan};
use crate::backend::ring::{Lease, RingBackend, SlotAccess};
use crate::engine::{Done, Engine, Feed, Flow, Frontend};
use crate::frontend::RunError;
use crate::observe::events::file::Writer;
use crate::observe::metrics::{Endpoint, exposition};

/// The token of the listener's poll (connections are numbered from 1).
const LISTENER: u64 = 0;

/// Clients accepted in one turn at most, so a flood of connections cannot keep the engine
/// from the clients it serves.
const ACCEPTS_PER_TURN: usize = 64;

/// How long accepting pauses after it failed (out of descriptors, say).
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);

/// The engine's side of the server.
pub struct Front<'a> {
    listener: &'a Listener,
    exports: &'a [Offered],
    /// What the handshake offers, in the exports' order.
    handshake: Vec<Export>,
    /// Set (by a signal) when the server is to stop.
    stop: &'a AtomicBool,
    max_clients: usize,
    handshake_timeout: Duration,
    /// Clients counted in: admitted in their handshake, or served.
    established: usize,
    /// Connections in their handshake.
    greetings: HashMap<u64, Greeting>,
    /// A poll on the listener is armed.
    listening: bool,
    /// Accepting failed; it resumes then.
    accept_paused_until: Option<u64>,
    accept_errors: AcceptErrors,
    /// The server stops: no new clients, and each connection finishes what it sent.
    stopping: bool,
    conns: HashMap<u64, Link>,
    next_id: u64,
    shared: Common,
    /// ctx numbers in use; a new client takes the lowest free one.
    ctxs: BTreeSet<u32>,
    /// Connections that waited for slots, in the order they started waiting.
    starved: VecDeque<u64>,
    /// Connections whose state changed this turn: their polls are armed, or they close.
    touched: Vec<u64>,
    /// Connections whose requests the reap's completions answered: their replies go out
    /// together once the reap's completions are all in.
    answered: Vec<u64>,
    /// Connections that stopped at the per-turn bound with more to read.
    busy: Vec<u64>,
    ready: Vec<u64>,
    /// Clients that left, in the order they left.
    pub clients: Departed,
    events: Option<&'a mut Writer>,
    metrics: Option<&'a Endpoint>,
}

/// What the server's front-end is set up with.
pub struct Setup<'a> {
    /// Where clients connect.
    pub listener: &'a Listener,
    /// What the handshake offers, and where each export's I/O goes.
    pub exports: &'a [Offered],
    /// Set when the server is to stop.
    pub stop: &'a AtomicBool,
    /// Clients served at once (`--max-clients`).
    pub max_clients: usize,
    /// How long a whole handshake may take (`--handshake-timeout`).
    pub handshake_timeout: Duration,
    /// The slots' layout.
    pub slots: SlotPlan,
    /// How many tenants share the slots (the exports' `tenant` is below it).
    pub tenants: usize,
    /// The slots' memory.
    pub access: SlotAccess,
    /// How long a reply, or a write's payload piece, may take (`--reply-timeout`).
    pub timeout: Duration,
    /// The event file (`--trace-events`).
    pub events: Option<&'a mut Writer>,
    /// The metrics endpoint (`--metrics`).
    pub metrics: Option<&'a Endpoint>,
}

impl<'a> Front<'a> {
    /// The server's side over `setup`; its deadlines are on the engine's clock.
    pub fn new(setup: Setup<'a>) -> Self {
        let plan = setup.slots;
        Self {
            listener: setup.listener,
            exports: setup.exports,
            handshake: setup.exports.iter().map(|e| e.export.clone()).collect(),
            stop: setup.stop,
            max_clients: setup.max_clients.max(1),
            handshake_timeout: setup.handshake_timeout,
            established: 0,
            greetings: HashMap::new(),
            listening: false,
            accept_paused_until: None,
            accept_errors: AcceptErrors::default(),
            stopping: false,
            conns: HashMap::new(),
            next_id: 0,
            shared: Common {
                pools: Pools::new(plan.data, plan.control, plan.per_connection, setup.tenants),
                owners: vec![None; (plan.data + plan.control) as usize],
                slots: setup.access,
                limits: setup.exports.iter().map(|e| e.limits).collect(),
                chunk: plan.chunk,
                timeout: setup.timeout,
            },
            ctxs: BTreeSet::new(),
            starved: VecDeque::new(),
            touched: Vec::new(),
            answered: Vec::new(),
            busy: Vec::new(),
            ready: Vec::new(),
            clients: Departed::default(),
            events: setup.events,
            metrics: setup.metrics,
        }
    }

    /// Connection `id` reads what it can, sends what it has, and waits in line for slots
    /// if it must.
    fn serve(&mut self, id: u64, feed: &mut Feed<'_, RingBackend>, now: u64) {
        let Some(Link { stream, conn, .. }) = self.conns.get_mut(&id) else {
            return;
        };
        let mut env = self.shared.env(conn.export, now);
        let more = link::read_in(conn, id, stream, &mut env);
        link::act(conn, stream, &mut env, &mut |bio| feed.submit(bio));
        if more {
            self.busy.push(id);
        }
        if conn.wants_slots() && !self.starved.contains(&id) {
            self.starved.push_back(id);
        }
        self.touched.push(id);
    }

    /// Carries out what connection `id` asked for in a call that read nothing.
    fn act(&mut self, id: u64, feed: &mut Feed<'_, RingBackend>, now: u64) {
        if let Some(Link { stream, conn, .. }) = self.conns.get_mut(&id) {
            let mut env = self.shared.env(conn.export, now);
            link::act(conn, stream, &mut env, &mut |bio| feed.submit(bio));
            self.touched.push(id);
        }
    }

    /// Connections waiting for slots try again, in the order they began waiting. The first
    /// of a tenant still short keeps its place and the rest of that tenant wait behind it;
    /// other tenants' connections go on, so a tenant held at its share (its group's limit
    /// holding its bios) never keeps another waiting.
    fn serve_starved(&mut self, feed: &mut Feed<'_, RingBackend>, now: u64) {
        let waiting = std::mem::take(&mut self.starved);
        let mut short: Vec<usize> = Vec::new();
        let mut kept = VecDeque::new();
        for id in waiting {
            let tenant = self.conns.get(&id).map(|l| l.conn.holder.tenant);
            let Some(tenant) = tenant else { continue };
            if short.contains(&tenant) {
                kept.push_back(id);
                continue;
            }
            self.serve(id, feed, now);
            if self.starved.back() == Some(&id) {
                // Still short: it keeps its place in line.
                self.starved.pop_back();
                kept.push_back(id);
                short.push(tenant);
            }
        }
        // Those that began waiting during this pass queue behind the ones that kept waiting.
        kept.extend(self.starved.drain(..));
        self.starved = kept;
    }

    /// The server stops: no new clients, handshakes end, and every connection answers what
    /// had arrived (see [`Conn::stop_reading`]) and reads nothing more.
    fn stop_serving(&mut self, feed: &mut Feed<'_, RingBackend>, now: u64) {
        self.stopping = true;
        let greetings: Vec<u64> = self.greetings.keys().copied().collect();
        for id in greetings {
            self.end_greeting(id, None);
        }
        let ids: Vec<u64> = self.conns.keys().copied().collect();
        for id in ids {
            let Some(Link { stream, conn, .. }) = self.conns.get_mut(&id) else {
                continue;
            };
            let mut env = self.shared.env(conn.export, now);
            conn.stop_reading(&mut env, stream.unread_bytes());
            self.act(id, feed, now);
            // Read now what had arrived: refused at once, and a connection with nothing
            // buffered ends its reading without waiting for a byte that may never come.
            self.busy.push(id);
        }
    }

    /// While the copies of slow clients' replies hold more than the pool's size, closes the
    /// connection holding the most (ties: the lowest id), so the total stays bounded and a
    /// client that reads its replies is never the one closed for others' sake.
    fn shed_slow(&mut self, feed: &mut Feed<'_, RingBackend>, now: u64) {
        while self.shared.pools.over_budget() {
            let greediest = self
                .conns
                .iter()
                .map(|(&id, l)| (l.conn.parked_slots(), std::cmp::Reverse(id)))
                .filter(|&(parked, _)| parked > 0)
                .max();
            let Some((_, std::cmp::Reverse(id))) = greediest else {
                return;
            };
            if let Some(Link { conn, .. }) = self.conns.get_mut(&id) {
                conn.shed(&mut self.shared.env(conn.export, now));
                self.act(id, feed, now);
            }
        }
    }

    /// Sends the replies the reap's completions made, one send per connection, then closes
    /// the slowest if the copies of what their streams did not take are over the pool's room.
    fn answer_reaped(&mut self, feed: &mut Feed<'_, RingBackend>, now: u64) {
        let mut answered = std::mem::take(&mut self.answered);
        answered.sort_unstable();
        answered.dedup();
        for &id in &answered {
            self.act(id, feed, now);
        }
        answered.clear();
        self.answered = answered;
        self.shed_slow(feed, now);
    }

    /// Closes handshakes and connections past a deadline at `now`.
    fn enforce_deadlines(&mut self, feed: &mut Feed<'_, RingBackend>, now: u64) {
        let late: Vec<u64> = self
            .greetings
            .iter()
            .filter(|(_, g)| g.due <= now)
            .map(|(&id, _)| id)
            .collect();
        for id in late {
            let why = "the handshake took longer than --handshake-timeout";
            self.end_greeting(id, Some(why.into()));
        }
        let late: Vec<u64> = self
            .conns
            .iter()
            .filter(|(_, l)| l.conn.next_deadline().is_some_and(|due| due <= now))
            .map(|(&id, _)| id)
            .collect();
        for id in late {
            if let Some(Link { conn, .. }) = self.conns.get_mut(&id) {
                conn.enforce_deadlines(&mut self.shared.env(conn.export, now));
                self.act(id, feed, now);
            }
        }
    }

    /// Arms the polls the touched connections wait on, and closes the ones that are over.
    fn rearm_touched(
        &mut self,
        feed: &mut Feed<'_, RingBackend>,
        now: u64,
    ) -> Result<(), RunError> {
        let mut touched = std::mem::take(&mut self.touched);
        touched.sort_unstable();
        touched.dedup();
        if !self.stopping && !self.listening && self.accept_paused_until.is_none_or(|t| t <= now) {
            self.listening = true;
            self.accept_paused_until = None;
            let fd = self.listener.raw_fd();
            feed.watch(fd, libc::POLLIN as u32, LISTENER << 1)?;
        }
        for &id in &touched {
            if let Some(greeting) = self.greetings.get_mut(&id) {
                let fd = greeting.stream.raw_fd();
                if !greeting.polling_in {
                    greeting.polling_in = true;
                    feed.watch(fd, libc::POLLIN as u32, id << 1)?;
                }
                if greeting.wants_output() && !greeting.polling_out {
                    greeting.polling_out = true;
                    feed.watch(fd, libc::POLLOUT as u32, id << 1 | 1)?;
                }
                continue;
            }
            let Some(link) = self.conns.get_mut(&id) else {
                continue;
            };
            if link.conn.is_over() {
                self.close(id);
                continue;
            }
            // One poll per direction, told apart by the token's low bit.
            let fd = link.stream.raw_fd();
            if link.conn.wants_input() && !link.polling_in {
                link.polling_in = true;
                feed.watch(fd, libc::POLLIN as u32, id << 1)?;
            }
            if link.conn.wants_output() && !link.polling_out {
                link.polling_out = true;
                feed.watch(fd, libc::POLLOUT as u32, id << 1 | 1)?;
            }
        }
        touched.clear();
        self.touched = touched;
        Ok(())
    }

    /// Connection `id` is over: its summary is kept and its ctx freed.
    fn close(&mut self, id: u64) {
        let Some(Link { stream, conn, .. }) = self.conns.remove(&id) else {
            return;
        };
        let _ = stream.shutdown();
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
            export: self.exports[conn.export].export.name.clone(),
            ctx: conn.ctx,
            seconds: conn.started.elapsed().as_secs_f64(),
            tally: conn.tally,
            closed_because: conn.closed_because,
        });
        self.established -= 1;
    }
}

impl Frontend<RingBackend> for Front<'_> {
    type Error = RunError;

    /// Each finished bio goes to its request; the requests whose bios all finished are
    /// answered together, one send per connection for the whole reap, and connections
    /// waiting for slots try again.
    fn complete(
        &mut self,
        now: u64,
        done: &[Done],
        feed: &mut Feed<'_, RingBackend>,
    ) -> Result<(), RunError> {
        for finished in done {
            let lease = Lease::of_bio(finished.bio.bio);
            // Every bio the server submits holds a slot it lent, until this completion.
            let owner = self
                .shared
                .owners
                .get_mut(lease.index())
                .and_then(Option::take);
            let Some(owner) = owner else {
                unreachable!("bio {} finished holding no lent slot", finished.bio.bio)
            };
            let Some(Link { conn, .. }) = self.conns.get_mut(&owner.conn) else {
                continue;
            };
            let mut env = self.shared.env(conn.export, now);
            conn.finished(
                owner.conn,
                &mut env,
                owner,
                lease.slot(),
                finished.bio.status,
            );
            self.answered.push(owner.conn);
        }
        self.answer_reaped(feed, now);
        if !done.is_empty() {
            self.serve_starved(feed, now);
        }
        Ok(())
    }

    fn issue(&mut self, now: u64, feed: &mut Feed<'_, RingBackend>) -> Result<(), RunError> {
        if !self.stopping && self.stop.load(Ordering::Acquire) {
            self.stop_serving(feed, now);
        }
        if self.stopping {
            // Bios their group's io.max holds have not started: while the server stops they
            // are refused (ESHUTDOWN to their clients), not waited out at the group's rate.
            let refused = feed.refuse_held(now, -libc::ESHUTDOWN);
            if refused > 0 {
                tracing::info!(refused, "stopping: refused the bios group limits held");
            }
        }
        feed.take_ready(&mut self.ready);
        let mut ready = std::mem::take(&mut self.busy);
        for &token in &self.ready {
            // Its poll fired: it is armed no more.
            let (id, writable) = (token >> 1, token & 1 == 1);
            if id == LISTENER {
                self.listening = false;
            } else if let Some(g) = self.greetings.get_mut(&id) {
                if writable {
                    g.polling_out = false;
                } else {
                    g.polling_in = false;
                }
            } else if let Some(link) = self.conns.get_mut(&id) {
                if writable {
                    link.polling_out = false;
                } else {
                    link.polling_in = false;
                }
            }
            ready.push(id);
        }
        ready.sort_unstable();
        ready.dedup();
        if ready.first() == Some(&LISTENER) && !self.stopping {
            self.accept(now);
        }
        for &id in ready.iter().filter(|&&id| id != LISTENER) {
            if self.greetings.contains_key(&id) {
                self.greet(id, feed, now);
            } else {
                self.serve(id, feed, now);
            }
        }
        ready.clear();
        self.ready = ready;
        self.serve_starved(feed, now);
        self.enforce_deadlines(feed, now);
        Ok(())
    }

    fn end_turn(&mut self, now: u64, feed: &mut Feed<'_, RingBackend>) -> Result<(), RunError> {
        self.rearm_touched(feed, now)?;
        if let Some(metrics) = self.metrics {
            for scrape in metrics.take() {
                let page = exposition::render(
                    &feed.views(),
                    feed.engine().swaps().len(),
                    feed.engine().sets().len(),
                );
                let _ = scrape.send(page);
            }
        }
        if let Some(writer) = self.events.as_deref_mut() {
            let events = feed.take_events();
            writer.write(&events).map_err(|source| RunError::Ring {
                action: "writing --trace-events",
                source,
            })?;
        }
        Ok(())
    }

    /// Over once the server is stopping, no connection is left and no I/O is anywhere.
    fn flow(&mut self, engine: &Engine<RingBackend>) -> Flow {
        let quiet = engine.inflight() == 0 && engine.queued() == 0;
        if self.stopping && self.conns.is_empty() && self.greetings.is_empty() && quiet {
            Flow::Done
        } else {
            Flow::Wait
        }
    }

    /// At once if a connection has more to read; else the earliest handshake, reply or
    /// payload deadline, or when accepting resumes.
    fn next_wake(&self, now: u64, _deadlines: bool) -> Option<u64> {
        if !self.busy.is_empty() {
            return Some(now);
        }
        let conns = self.conns.values().filter_map(|l| l.conn.next_deadline());
        let greetings = self.greetings.values().map(|g| g.due);
        conns.chain(greetings).chain(self.accept_paused_until).min()
    }

    /// The stop watcher and the control and metrics threads wake the ring when they have
    /// something for it.
    fn fed_from_outside(&self) -> bool {
        true
    }
}

/// `d` in the engine's nanoseconds, saturating.
fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}
