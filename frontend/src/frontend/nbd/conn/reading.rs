//! A connection's read side: requests parsed as their bytes arrive, checked against the
//! export's limits, and started as bios; a write's payload read into its buffers first.

use super::*;

impl Conn {
    /// Reads and starts what the client sent, as far as it goes without waiting. Returns
    /// true iff it stopped only for the per-turn bound, with more to read.
    ///
    /// # Errors
    /// The engine's (a policy fault that stops the server).
    pub fn read(&mut self, id: u64, env: &mut Env<'_>) -> Result<bool, RunError> {
        self.start_flushes(id, env)?;
        for _ in 0..REQUESTS_PER_TURN {
            if self.broken {
                self.end_reading(env, None);
                return Ok(false);
            }
            let progressed = match std::mem::replace(&mut self.reading, Reading::Done) {
                Reading::Done => return Ok(false),
                Reading::Header => self.read_header(env)?,
                Reading::Skip { left, reply } => self.skip(env, left, reply),
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
    pub(super) fn read_header(&mut self, env: &mut Env<'_>) -> Result<bool, RunError> {
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
        match decide::decide(&request, env.limits) {
            Decision::Disconnect => self.end_reading(env, None),
            Decision::Close(why) => self.end_reading(env, Some(why)),
            Decision::Nothing => self.reply_at_once(env, request.cookie, 0),
            Decision::Refuse { error, skip } => {
                self.reading = Reading::Skip {
                    left: u64::from(skip),
                    reply: Some((request.cookie, error)),
                };
            }
            Decision::Io { work, length, .. } if self.stopping => {
                // Arrived before the stop, not started: refused, its payload dropped.
                let left = if work == Work::Write {
                    u64::from(length)
                } else {
                    0
                };
                self.reading = Reading::Skip {
                    left,
                    reply: Some((request.cookie, wire::ESHUTDOWN)),
                };
            }
            Decision::Io {
                work,
                offset,
                length,
                fua,
            } => {
                let io = io(work, offset, length);
                let bios = match work {
                    Work::Read | Work::Write | Work::Zeroes => {
                        decide::pieces(offset, length, env.chunk).count()
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
                        pieces: decide::pieces(offset, length, env.chunk).collect(),
                        next: 0,
                        slot: None,
                        got: 0,
                    },
                };
            }
        }
        Ok(true)
    }

    /// Drops a write's payload as it arrives, then replies (if it is to).
    pub(super) fn skip(
        &mut self,
        env: &mut Env<'_>,
        mut left: u64,
        reply: Option<(u64, u32)>,
    ) -> bool {
        loop {
            let buffered = (self.rx_end - self.rx_start) as u64;
            let take = buffered.min(left);
            self.rx_start += take as usize;
            left -= take;
            if left == 0 {
                if let Some((cookie, error)) = reply {
                    self.reply_at_once(env, cookie, error);
                }
                self.reading = Reading::Header;
                return true;
            }
            self.reading = Reading::Skip { left, reply };
            if !self.receive(env) {
                return false;
            }
        }
    }

    /// Submits a read once all its slots are free at once.
    pub(super) fn start_read(
        &mut self,
        id: u64,
        env: &mut Env<'_>,
        io: Io,
    ) -> Result<bool, RunError> {
        let pieces: Vec<_> = decide::pieces(io.offset, io.length, env.chunk).collect();
        let Some(slots) = env.pools.take_data(pieces.len(), &mut self.holder) else {
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
    pub(super) fn start_control(
        &mut self,
        id: u64,
        env: &mut Env<'_>,
        io: Io,
    ) -> Result<bool, RunError> {
        let Some(slot) = env.pools.take_control(&self.holder) else {
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
    pub(super) fn fill_payload(
        &mut self,
        id: u64,
        env: &mut Env<'_>,
        io: Io,
        pieces: Vec<(u64, u32)>,
        mut next: usize,
        mut slot: Option<(u32, u64)>,
        mut got: usize,
    ) -> Result<bool, RunError> {
        while next < pieces.len() {
            let (offset, len) = pieces[next];
            let len = len as usize;
            let (s, _) = match slot {
                Some(held) => held,
                None => {
                    let Some(taken) = env.pools.take_data(1, &mut self.holder) else {
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
                    let held = (taken[0], env.due());
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
                match env.wire.recv_now(&mut buf[got..]) {
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
    pub(super) fn abandon_payload(
        &mut self,
        env: &mut Env<'_>,
        io: Io,
        missing: usize,
        slot: u32,
        why: &str,
    ) -> Result<bool, RunError> {
        env.pools.put(slot, &mut self.holder);
        self.shortfall(env, io.seq, missing);
        self.end_reading(env, Some(why.to_owned()));
        Ok(false)
    }

    /// `missing` bios of request `seq` will never be submitted: it fails, with `ESHUTDOWN`
    /// when the server is stopping, else `EIO` (its payload never came, or the connection
    /// broke).
    pub(super) fn shortfall(&mut self, env: &mut Env<'_>, seq: u64, missing: usize) {
        let error = if self.stopping {
            wire::ESHUTDOWN
        } else {
            wire::EIO
        };
        if let Some(p) = self.pending.get_mut(&seq) {
            p.remaining = p.remaining.saturating_sub(missing);
            p.error = error;
        }
        self.answer_if_done(env, seq);
    }

    /// No more requests are read; `why` if the client broke the protocol. A write whose
    /// payload was still awaited is failed.
    pub(super) fn end_reading(&mut self, env: &mut Env<'_>, why: Option<String>) {
        match std::mem::replace(&mut self.reading, Reading::Done) {
            Reading::Payload {
                io,
                pieces,
                next,
                slot,
                ..
            } => {
                if let Some((s, _)) = slot {
                    env.pools.put(s, &mut self.holder);
                }
                self.shortfall(env, io.seq, pieces.len() - next);
            }
            Reading::Slots(io) | Reading::Control(io) => self.shortfall(env, io.seq, usize::MAX),
            // A refused request is answered even if its payload stopped coming.
            Reading::Skip {
                reply: Some((cookie, error)),
                ..
            } => self.reply_at_once(env, cookie, error),
            _ => {}
        }
        if self.closed_because.is_none() {
            self.closed_because = why;
        }
        if self.stopping {
            // What arrived is read: the stream's read side is over.
            env.wire.shutdown_read();
        }
    }

    /// Hands `bio`, holding `slot`, to the engine for request `seq` of connection `id`.
    pub(super) fn submit(
        env: &mut Env<'_>,
        owner: Owner,
        slot: u32,
        bio: Bio,
    ) -> Result<(), RunError> {
        let held = env.owners[slot as usize].replace(owner);
        assert!(
            held.is_none(),
            "slot {slot} lent to a second bio while the first is out"
        );
        env.bios.submit(bio);
        Ok(())
    }
}
