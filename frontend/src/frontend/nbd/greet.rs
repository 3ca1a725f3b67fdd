//! A connection in its handshake, on the engine's thread: the greeting and the option
//! replies go out as the socket takes them, the client's bytes go into the [`Negotiation`]
//! as they arrive. Nothing here waits; the whole handshake runs under one deadline.

use std::time::Instant;

use super::handshake::{Ended, Export, Negotiation};
use super::net::Stream;

/// How far a handshake got.
#[derive(Debug)]
pub enum Greeted {
    /// It waits for the client.
    Waiting,
    /// Transmission starts on export `export` (an index into the server's exports); what
    /// the client sent past the handshake, and the handshake's last replies the socket has
    /// not taken yet.
    Transmission {
        export: usize,
        early: Vec<u8>,
        unsent: Vec<u8>,
    },
    /// It is over without transmission: why, if the client broke the protocol.
    Closed(Option<String>),
}

/// A connection in its handshake.
#[derive(Debug)]
pub struct Greeting {
    /// The socket, non-blocking.
    pub stream: Stream,
    /// Its address, numbered.
    pub peer: String,
    /// When it connected.
    pub started: Instant,
    /// When the whole handshake must be over (engine ns).
    pub due: u64,
    /// It was counted as a client (admitted), so leaving must count it out.
    pub admitted: bool,
    /// A poll for readable is armed.
    pub polling_in: bool,
    /// A poll for writable is armed.
    pub polling_out: bool,
    negotiation: Negotiation,
    /// Bytes of a step not yet whole (at most one option's).
    rx: Vec<u8>,
    /// Replies not yet taken by the socket.
    out: Vec<u8>,
}

impl Greeting {
    /// A new connection, its greeting ready to go.
    pub fn new(stream: Stream, peer: String, due: u64) -> Self {
        let mut negotiation = Negotiation::new();
        Self {
            stream,
            peer,
            started: Instant::now(),
            due,
            admitted: false,
            polling_in: false,
            polling_out: false,
            out: negotiation.take_output(),
            negotiation,
            rx: Vec::new(),
        }
    }

    /// True iff replies wait for the socket.
    pub fn wants_output(&self) -> bool {
        !self.out.is_empty()
    }

    /// Sends what is due and takes what arrived. `admit` counts the client in before the
    /// reply that starts transmission is written.
    pub fn progress(&mut self, exports: &[Export], admit: &mut dyn FnMut() -> bool) -> Greeted {
        if let Err(e) = self.send() {
            return Greeted::Closed(Some(format!("handshake: {e}")));
        }
        let mut buf = [0u8; 4096];
        loop {
            let n = match self.stream.recv_now(&mut buf) {
                Ok(Some(0)) if self.rx.is_empty() => {
                    return Greeted::Closed(self.negotiation.ended_early().err());
                }
                Ok(Some(0)) => {
                    let why = "handshake: the client left in the middle of a message";
                    return Greeted::Closed(Some(why.into()));
                }
                Ok(Some(n)) => n,
                Ok(None) => return Greeted::Waiting,
                Err(e) => return Greeted::Closed(Some(format!("handshake: {e}"))),
            };
            self.rx.extend_from_slice(&buf[..n]);
            let mut input = self.rx.as_slice();
            let mut counted = || {
                let yes = admit();
                self.admitted |= yes;
                yes
            };
            let fed = self.negotiation.feed(&mut input, exports, &mut counted);
            let early = input.to_vec();
            self.out.extend(self.negotiation.take_output());
            self.rx = early;
            match fed {
                Err(why) => return Greeted::Closed(Some(why)),
                Ok(Some(Ended::Closed)) => {
                    // The last replies are a courtesy to a client that is leaving.
                    let _ = self.send();
                    return Greeted::Closed(None);
                }
                Ok(Some(Ended::Transmission(export))) => {
                    if let Err(e) = self.send() {
                        return Greeted::Closed(Some(format!("handshake: {e}")));
                    }
                    return Greeted::Transmission {
                        export,
                        early: std::mem::take(&mut self.rx),
                        unsent: std::mem::take(&mut self.out),
                    };
                }
                Ok(None) => {
                    if let Err(e) = self.send() {
                        return Greeted::Closed(Some(format!("handshake: {e}")));
                    }
                }
            }
        }
    }

    /// Sends what the socket takes of the replies, without waiting.
    fn send(&mut self) -> std::io::Result<()> {
        while !self.out.is_empty() {
            let n = self.stream.send_now(&[std::io::IoSlice::new(&self.out)])?;
            if n == 0 {
                return Ok(());
            }
            self.out.drain(..n);
        }
        Ok(())
    }
}
