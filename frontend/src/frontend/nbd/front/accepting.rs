//! New clients: accepted while the server has room, greeted through their handshake on the
//! engine's clock, and handed on as connections once it ends.

use super::*;

impl Front<'_> {
    /// Accepts the clients waiting, as room allows: past `--max-clients` clients a new one
    /// is closed; when they and the handshakes in progress reach it, the oldest handshake is
    /// ended, so sockets that never speak cannot keep a real client out.
    pub(super) fn accept(&mut self, now: u64) {
        for _ in 0..ACCEPTS_PER_TURN {
            let (stream, address) = match self.listener.accept() {
                Ok(Some(accepted)) => accepted,
                Ok(None) => return,
                Err(e) => {
                    let _ = self.accept_errors.note(&e);
                    self.accept_paused_until = Some(now.saturating_add(nanos(ACCEPT_PAUSE)));
                    return;
                }
            };
            if self.established >= self.max_clients {
                tracing::warn!(%address, "turning a client away: {} are connected (--max-clients)", self.max_clients);
                let _ = stream.shutdown();
                continue;
            }
            if self.established + self.greetings.len() >= self.max_clients
                && let Some(oldest) = self
                    .greetings
                    .iter()
                    .min_by_key(|(_, g)| g.started)
                    .map(|(&id, _)| id)
            {
                tracing::warn!(%address, "ending the oldest unfinished handshake to make room");
                self.end_greeting(oldest, None);
            }
            self.next_id += 1;
            let id = self.next_id;
            // Unix clients share the socket's name; the number tells them apart.
            let peer = format!("#{id} {address}");
            let due = now.saturating_add(nanos(self.handshake_timeout));
            self.greetings.insert(id, Greeting::new(stream, peer, due));
            self.busy.push(id);
        }
        // More may wait: look again next turn.
        self.listening = false;
        self.busy.push(LISTENER);
    }

    /// Handshake `id` takes a step at `now`; past it, the client is served, its ctx placed
    /// on its export's device and in its export's group.
    pub(super) fn greet(&mut self, id: u64, feed: &mut Feed<'_, RingBackend>, now: u64) {
        let Some(greeting) = self.greetings.get_mut(&id) else {
            return;
        };
        let (established, max) = (&mut self.established, self.max_clients);
        let mut admit = || {
            let room = *established < max;
            *established += usize::from(room);
            room
        };
        match greeting.progress(&self.handshake, &mut admit) {
            Greeted::Waiting => self.touched.push(id),
            Greeted::Closed(why) => self.end_greeting(id, why),
            Greeted::Transmission {
                export,
                early,
                unsent,
            } => {
                let Some(greeting) = self.greetings.remove(&id) else {
                    return;
                };
                let ctx = (0..).find(|c| !self.ctxs.contains(c)).unwrap_or(0);
                self.ctxs.insert(ctx);
                let offered = &self.exports[export];
                feed.place(ctx, offered.lane, offered.group);
                tracing::info!(peer = %greeting.peer, ctx, export = %offered.export.name, "client connected");
                let conn = Conn::new(
                    (greeting.peer, ctx, greeting.started),
                    &early,
                    (unsent, now.saturating_add(nanos(self.shared.timeout))),
                )
                .on_export(export, offered.tenant);
                // Its handshake's polls stay armed; they now wake the connection.
                let link = Link {
                    stream: greeting.stream,
                    polling_in: greeting.polling_in,
                    polling_out: greeting.polling_out,
                    conn,
                };
                self.conns.insert(id, link);
                // It may have sent requests already.
                self.busy.push(id);
            }
        }
    }

    /// Handshake `id` is over without transmission.
    pub(super) fn end_greeting(&mut self, id: u64, why: Option<String>) {
        let Some(greeting) = self.greetings.remove(&id) else {
            return;
        };
        match why {
            Some(why) => tracing::warn!(peer = %greeting.peer, "closing: {why}"),
            None => tracing::debug!(peer = %greeting.peer, "client left during the handshake"),
        }
        if greeting.admitted {
            self.established -= 1;
        }
        let _ = greeting.stream.shutdown();
    }
}
