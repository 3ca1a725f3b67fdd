//! A connection's read side: requests parsed from the bytes the driver hands it, checked
//! against the export's limits, and started as bios; a write's payload into its slots first.

use super::*;

/// Where reading stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Paused {
    /// It needs more bytes: the driver reads into [`Conn::intake`]'s place.
    Bytes,
    /// It waits for slots, or its reading is over: nothing the stream brings helps now.
    Waits,
    /// The turn's steps are spent, with more to read.
    Spent,
}

/// What one step of reading did.
enum Step {
    /// A request was read and started (a write once its whole payload was in), refused,
    /// or skipped past; or reading ended.
    Went,
    /// It needs bytes that have not arrived.
    Bytes,
    /// It needs slots that are not free.
    Slots,
}

impl Conn {
    /// Starts what the bytes it holds make up, taking a step off `budget` for each request
    /// or write it moves on, and says why it stopped. It reads nothing itself: the driver
    /// fills [`Conn::intake`]'s place and calls [`Conn::received`].
    pub fn read(&mut self, id: u64, env: &mut Env<'_>, budget: &mut usize) -> Paused {
        self.start_flushes(id, env);
        loop {
            if self.broken {
                self.end_reading(env, None);
                return Paused::Waits;
            }
            if *budget == 0 {
                return Paused::Spent;
            }
            let step = match std::mem::replace(&mut self.reading, Reading::Done) {
                Reading::Done => return Paused::Waits,
                Reading::Header => self.read_header(env),
                Reading::Skip { left, reply } => self.skip(env, left, reply),
                Reading::Slots(io) => self.start_read(id, env, io),
                Reading::Control(io) => self.start_control(id, env, io),
                Reading::Payload {
                    io,
                    pieces,
                    next,
                    slot,
                    got,
                } => self.fill_payload(id, env, io, pieces, next, slot, got),
            };
            match step {
                Step::Went => *budget -= 1,
                Step::Slots => return Paused::Waits,
                Step::Bytes if self.drain_left == Some(0) => {
                    // What had arrived is read: nothing later is.
                    self.end_reading(env, None);
                    return Paused::Waits;
                }
                Step::Bytes => return Paused::Bytes,
            }
        }
    }

    /// Where the next bytes from the stream go: a write's payload straight into its slot
    /// once the buffer holds none of it, everything else into the receive buffer.
    pub fn intake(&self) -> Intake {
        if self.broken || self.drain_left == Some(0) {
            return Intake::Nothing;
        }
        match &self.reading {
            Reading::Payload {
                pieces,
                next,
                slot: Some((slot, _)),
                got,
                ..
            } if self.rx_start == self.rx_end => {
                let len = pieces[*next].1 as usize;
                let end = self.drain_left.map_or(len, |left| len.min(got + left));
                Intake::Payload {
                    slot: *slot,
                    range: *got..end,
                }
            }
            Reading::Header | Reading::Skip { .. } | Reading::Payload { slot: Some(_), .. } => {
                Intake::Buffer
            }
            _ => Intake::Nothing,
        }
    }

    /// The receive buffer's room for the next bytes ([`Intake::Buffer`]), no more than the
    /// bytes it may still read.
    pub fn rx_room(&mut self) -> &mut [u8] {
        if self.rx_start == self.rx_end {
            (self.rx_start, self.rx_end) = (0, 0);
        } else if self.rx_end == self.rx.len() {
            self.rx.copy_within(self.rx_start..self.rx_end, 0);
            (self.rx_start, self.rx_end) = (0, self.rx_end - self.rx_start);
        }
        let room = self.rx_window();
        &mut self.rx[self.rx_end..self.rx_end + room]
    }

    /// Bytes the receive buffer takes after its end, within what may still be read.
    fn rx_window(&self) -> usize {
        let room = self.rx.len() - self.rx_end;
        self.drain_left.map_or(room, |left| left.min(room))
    }

    /// The stream's answer to a read into [`Conn::intake`]'s place: `Some(n)` bytes
    /// (`Some(0)`: the stream ended), `None` (nothing had arrived), or its error. True iff
    /// bytes came.
    pub fn received(&mut self, env: &mut Env<'_>, got: io::Result<Option<usize>>) -> bool {
        let payload = matches!(self.intake(), Intake::Payload { .. });
        match got {
            Ok(None) => false,
            Ok(Some(0)) if payload => {
                let why = "reading a write's payload: the client closed the connection";
                self.end_reading(env, Some(why.into()));
                false
            }
            Ok(Some(0)) => {
                let partial =
                    self.rx_end > self.rx_start || !matches!(self.reading, Reading::Header);
                let why = partial
                    .then(|| "reading a request: the client left in the middle of one".to_owned());
                self.end_reading(env, why);
                false
            }
            Ok(Some(n)) => {
                if let (
                    true,
                    Reading::Payload {
                        pieces, next, got, ..
                    },
                ) = (payload, &mut self.reading)
                {
                    *got += n;
                    // The payload stays inside its piece's slot.
                    assert!(
                        *got <= pieces[*next].1 as usize,
                        "the stream filled a payload piece past its length"
                    );
                } else {
                    // The window of unread bytes stays inside the buffer.
                    let room = self.rx_window();
                    assert!(n <= room, "the stream read {n} bytes into {room}");
                    self.rx_end += n;
                }
                if let Some(left) = &mut self.drain_left {
                    *left = left.saturating_sub(n);
                }
                true
            }
            Err(e) => {
                let what = if payload {
                    "reading a write's payload"
                } else {
                    "reading a request"
                };
                self.end_reading(env, Some(format!("{what}: {e}")));
                false
            }
        }
    }

    /// Takes a request header if one has arrived.
    fn read_header(&mut self, env: &mut Env<'_>) -> Step {
        self.reading = Reading::Header;
        if self.rx_end - self.rx_start < wire::REQUEST_LEN {
            return Step::Bytes;
        }
        let mut header = [0u8; wire::REQUEST_LEN];
        header.copy_from_slice(&self.rx[self.rx_start..self.rx_start + wire::REQUEST_LEN]);
        self.rx_start += wire::REQUEST_LEN;
        let request = match Request::parse(&header) {
            Ok(r) => r,
            Err(e) => {
                self.end_reading(env, Some(e.to_string()));
                return Step::Went;
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
        Step::Went
    }

    /// Drops a write's payload as it arrives, then replies (if it is to).
    fn skip(&mut self, env: &mut Env<'_>, mut left: u64, reply: Option<(u64, u32)>) -> Step {
        let buffered = (self.rx_end - self.rx_start) as u64;
        let take = buffered.min(left);
        self.rx_start += take as usize;
        left -= take;
        if left > 0 {
            self.reading = Reading::Skip { left, reply };
            return Step::Bytes;
        }
        if let Some((cookie, error)) = reply {
            self.reply_at_once(env, cookie, error);
        }
        self.reading = Reading::Header;
        Step::Went
    }

    /// Submits a read once all its slots are free at once.
    fn start_read(&mut self, id: u64, env: &mut Env<'_>, io: Io) -> Step {
        let pieces: Vec<_> = decide::pieces(io.offset, io.length, env.chunk).collect();
        let Some(slots) = env.pools.take_data(pieces.len(), &mut self.holder) else {
            self.reading = Reading::Slots(io);
            return Step::Slots;
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
            self.submit(env, owner, slot, bio(self.ctx, io.work, offset, len, slot));
        }
        Step::Went
    }

    /// Submits a flush or trim once a control slot is free.
    fn start_control(&mut self, id: u64, env: &mut Env<'_>, io: Io) -> Step {
        let Some(slot) = env.pools.take_control(&self.holder) else {
            self.reading = Reading::Control(io);
            return Step::Slots;
        };
        self.reading = Reading::Header;
        let bio = bio(self.ctx, io.work, io.offset, io.length, slot);
        let owner = Owner {
            conn: id,
            seq: io.seq,
            frees: true,
        };
        self.submit(env, owner, slot, bio);
        Step::Went
    }

    /// Fills a write's pieces from the bytes buffered (the rest comes straight into the
    /// slot: [`Conn::intake`]), submitting each as it is whole.
    #[allow(clippy::too_many_arguments)]
    fn fill_payload(
        &mut self,
        id: u64,
        env: &mut Env<'_>,
        io: Io,
        pieces: Vec<(u64, u32)>,
        mut next: usize,
        mut slot: Option<(u32, u64)>,
        mut got: usize,
    ) -> Step {
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
                        return Step::Slots;
                    };
                    // A client that drips its payload holds this slot no longer than this.
                    let held = (taken[0], env.due());
                    slot = Some(held);
                    held
                }
            };
            let buf = &mut env.slots.bytes_mut(s)[..len];
            if io.work == Work::Zeroes {
                buf.fill(0);
                got = len;
            }
            got += self.take_into(&mut buf[got..]);
            if got < len {
                self.reading = Reading::Payload {
                    io,
                    pieces,
                    next,
                    slot,
                    got,
                };
                return Step::Bytes;
            }
            let owner = Owner {
                conn: id,
                seq: io.seq,
                frees: true,
            };
            self.submit(env, owner, s, bio(self.ctx, io.work, offset, len as u32, s));
            next += 1;
            slot = None;
            got = 0;
        }
        self.reading = Reading::Header;
        Step::Went
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
            self.shut(Shutdown::Read);
        }
    }

    /// Starts `bio`, holding `slot`, for `owner`: the driver submits it.
    pub(super) fn submit(&mut self, env: &mut Env<'_>, owner: Owner, slot: u32, bio: Bio) {
        let held = env.owners[slot as usize].replace(owner);
        assert!(
            held.is_none(),
            "slot {slot} lent to a second bio while the first is out"
        );
        self.bios.push(bio);
    }
}
