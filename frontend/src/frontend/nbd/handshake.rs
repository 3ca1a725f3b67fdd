//! The fixed newstyle handshake, over any byte stream: greeting, client flags, then options
//! until `NBD_OPT_GO` or `NBD_OPT_EXPORT_NAME` starts transmission. Options this server
//! does not implement (TLS, structured replies, metadata contexts, extended headers) get
//! `NBD_REP_ERR_UNSUP`, after which every client used here falls back to simple replies.

use std::io::{self, Read, Write};

use super::net::read_full;
use super::wire::{self, InfoRequest};

/// Options a client may send before it must pick an export: enough for any real client,
/// and a bound on what a client looping on options can take.
const MAX_OPTIONS: usize = 256;

/// What is served, as the handshake describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Export {
    /// Its name; the empty name (the default export) reaches the server's first export.
    pub name: String,
    /// `NBD_INFO_DESCRIPTION`'s text; empty sends none.
    pub description: String,
    /// Bytes.
    pub size: u64,
    /// Transmission flags.
    pub flags: u16,
    /// Offsets and lengths must be multiples of it.
    pub min_block: u32,
    /// Requests of this size merge well.
    pub preferred_block: u32,
    /// Largest request payload.
    pub max_block: u32,
}

/// The export a client names, by its index in `exports`: the empty name (the default export)
/// is the first.
fn chosen(exports: &[Export], name: &str) -> Option<usize> {
    if name.is_empty() {
        return (!exports.is_empty()).then_some(0);
    }
    exports.iter().position(|e| e.name == name)
}

/// How a handshake ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Ended {
    /// Transmission starts now, on the export of this index.
    Transmission(usize),
    /// The client aborted, asked for an unknown export by `NBD_OPT_EXPORT_NAME`, or left.
    Closed,
}

/// Runs the server's side of the handshake on `stream`.
///
/// # Errors
/// A message naming what the client got wrong (bad magic, unknown flags, oversized option),
/// or the stream's error; the caller closes the connection.
pub fn negotiate<S: Read + Write>(stream: &mut S, exports: &[Export]) -> Result<Ended, String> {
    negotiate_admitting(stream, exports, &mut || true)
}

/// As [`negotiate`], asking `admit` before transmission starts; a client it refuses (the
/// server is full) is told so with `NBD_REP_ERR_POLICY` where the protocol allows a reply,
/// and closed. `admit` runs before the reply that starts transmission is written, so a
/// client is counted before it can know it was admitted. A blocking driver of the
/// handshake's state machine (`Negotiation`).
///
/// # Errors
/// As [`negotiate`].
pub fn negotiate_admitting<S: Read + Write>(
    stream: &mut S,
    exports: &[Export],
    admit: &mut dyn FnMut() -> bool,
) -> Result<Ended, String> {
    let io = |e: io::Error| format!("handshake: {e}");
    let mut negotiation = Negotiation::new();
    let mut input = Vec::new();
    loop {
        stream.write_all(&negotiation.take_output()).map_err(io)?;
        input.resize(negotiation.wants(), 0);
        if !read_full(stream, &mut input).map_err(io)? {
            return negotiation.ended_early();
        }
        if let Some(ended) = negotiation.feed(&mut input.as_slice(), exports, admit)? {
            stream.write_all(&negotiation.take_output()).map_err(io)?;
            return Ok(ended);
        }
    }
}

/// What the handshake waits for next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Need {
    /// The client's flags.
    Flags,
    /// An option's header.
    Header,
    /// Option `option`'s `length` bytes of data.
    Data { option: u32, length: u32 },
}

/// The server's side of the handshake without I/O: bytes from the client go in through
/// [`Negotiation::feed`], replies come out of [`Negotiation::take_output`]. The greeting is
/// the first output.
#[derive(Debug)]
pub struct Negotiation {
    need: Need,
    no_zeroes: bool,
    options: usize,
    out: Vec<u8>,
}

impl Default for Negotiation {
    fn default() -> Self {
        Self::new()
    }
}

impl Negotiation {
    /// A handshake about to greet its client.
    pub fn new() -> Self {
        Self {
            need: Need::Flags,
            no_zeroes: false,
            options: 0,
            out: wire::greeting().to_vec(),
        }
    }

    /// Bytes the next step needs whole.
    pub fn wants(&self) -> usize {
        match self.need {
            Need::Flags => 4,
            Need::Header => 16,
            Need::Data { length, .. } => length as usize,
        }
    }

    /// What to send the client, taken.
    pub fn take_output(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.out)
    }

    /// The client left before sending [`Negotiation::wants`] bytes: quietly where a step
    /// begins (`have` is 0 there), an error inside one.
    ///
    /// # Errors
    /// The client left inside an option's data.
    pub fn ended_early(&self) -> Result<Ended, String> {
        match self.need {
            Need::Flags | Need::Header => Ok(Ended::Closed),
            Need::Data { .. } => Err("handshake: the client left inside an option".into()),
        }
    }

    /// Takes whole steps from the front of `input` (leaving a partial one there); `Some`
    /// once the handshake is over.
    ///
    /// # Errors
    /// What the client got wrong; the caller closes the connection.
    pub fn feed(
        &mut self,
        input: &mut &[u8],
        exports: &[Export],
        admit: &mut dyn FnMut() -> bool,
    ) -> Result<Option<Ended>, String> {
        while input.len() >= self.wants() {
            let (step, rest) = input.split_at(self.wants());
            *input = rest;
            if let Some(ended) = self.step(step, exports, admit)? {
                return Ok(Some(ended));
            }
        }
        Ok(None)
    }

    /// One whole step's bytes.
    fn step(
        &mut self,
        bytes: &[u8],
        exports: &[Export],
        admit: &mut dyn FnMut() -> bool,
    ) -> Result<Option<Ended>, String> {
        match self.need {
            Need::Flags => {
                let flags = u32::from_be_bytes(bytes.try_into().map_err(|_| "flags")?);
                let known = wire::CLIENT_FIXED_NEWSTYLE | wire::CLIENT_NO_ZEROES;
                if flags & !known != 0 {
                    return Err(format!("client flags {flags:#x} include unknown bits"));
                }
                self.no_zeroes = flags & wire::CLIENT_NO_ZEROES != 0;
                self.need = Need::Header;
            }
            Need::Header => {
                let header: &[u8; 16] = bytes.try_into().map_err(|_| "option header")?;
                let header = wire::parse_option_header(header)?;
                if header.length > wire::MAX_OPTION_LEN {
                    return Err(format!(
                        "option {} carries {} bytes; at most {} are accepted",
                        header.option,
                        header.length,
                        wire::MAX_OPTION_LEN
                    ));
                }
                self.need = Need::Data {
                    option: header.option,
                    length: header.length,
                };
            }
            Need::Data { option, .. } => {
                let asked = Asked {
                    option,
                    data: bytes,
                    no_zeroes: self.no_zeroes,
                };
                // Writing into a Vec cannot fail.
                let answered = answer(&mut self.out, exports, &asked, admit);
                if let Ok(Some(ended)) = answered {
                    return Ok(Some(ended));
                }
                self.options += 1;
                if self.options >= MAX_OPTIONS {
                    return Err(format!(
                        "more than {MAX_OPTIONS} options without choosing an export"
                    ));
                }
                self.need = Need::Header;
            }
        }
        Ok(None)
    }
}

/// One option as the client sent it.
struct Asked<'a> {
    option: u32,
    data: &'a [u8],
    no_zeroes: bool,
}

/// Answers one option; `Some` when the handshake is over.
fn answer<S: Write>(
    stream: &mut S,
    exports: &[Export],
    asked: &Asked<'_>,
    admit: &mut dyn FnMut() -> bool,
) -> io::Result<Option<Ended>> {
    let Asked {
        option,
        data,
        no_zeroes,
    } = *asked;
    let reply = |stream: &mut S, kind: u32, payload: &[u8]| {
        stream.write_all(&wire::option_reply(option, kind, payload))
    };
    match option {
        wire::OPT_EXPORT_NAME => {
            let known = std::str::from_utf8(data)
                .ok()
                .and_then(|n| chosen(exports, n));
            let Some(index) = known.filter(|_| admit()) else {
                // The protocol has no error reply here: the server closes.
                return Ok(Some(Ended::Closed));
            };
            let export = &exports[index];
            stream.write_all(&wire::export_name_reply(
                export.size,
                export.flags,
                no_zeroes,
            ))?;
            Ok(Some(Ended::Transmission(index)))
        }
        wire::OPT_ABORT => {
            // The client may already be gone; the acknowledgement is a courtesy.
            let _ = reply(stream, wire::REP_ACK, &[]);
            Ok(Some(Ended::Closed))
        }
        wire::OPT_LIST => {
            if !data.is_empty() {
                reply(stream, wire::REP_ERR_INVALID, b"NBD_OPT_LIST takes no data")?;
                return Ok(None);
            }
            for export in exports {
                reply(stream, wire::REP_SERVER, &wire::server_entry(&export.name))?;
            }
            reply(stream, wire::REP_ACK, &[])?;
            Ok(None)
        }
        wire::OPT_INFO | wire::OPT_GO => match wire::parse_info_request(data) {
            Err(message) => {
                reply(stream, wire::REP_ERR_INVALID, message.as_bytes())?;
                Ok(None)
            }
            Ok(request) => {
                let Some(index) = chosen(exports, &request.name) else {
                    let message = format!("no export named '{}'", request.name);
                    reply(stream, wire::REP_ERR_UNKNOWN, message.as_bytes())?;
                    return Ok(None);
                };
                if option == wire::OPT_GO && !admit() {
                    reply(
                        stream,
                        wire::REP_ERR_POLICY,
                        b"the server has as many clients as it serves (--max-clients)",
                    )?;
                    return Ok(Some(Ended::Closed));
                }
                send_info(stream, option, &exports[index], &request)?;
                reply(stream, wire::REP_ACK, &[])?;
                Ok((option == wire::OPT_GO).then_some(Ended::Transmission(index)))
            }
        },
        wire::OPT_STARTTLS => {
            reply(stream, wire::REP_ERR_POLICY, b"TLS is not offered")?;
            Ok(None)
        }
        _ => {
            reply(stream, wire::REP_ERR_UNSUP, &[])?;
            Ok(None)
        }
    }
}

/// The `NBD_REP_INFO` replies: the export's size and flags always, the block sizes always
/// (so a client aligns its requests), the name and description when asked.
fn send_info<S: Write>(
    stream: &mut S,
    option: u32,
    export: &Export,
    request: &InfoRequest,
) -> io::Result<()> {
    let mut infos = vec![
        wire::info_export(export.size, export.flags),
        wire::info_block_size(export.min_block, export.preferred_block, export.max_block),
    ];
    if request.wanted.contains(&wire::INFO_NAME) {
        infos.push(wire::info_text(wire::INFO_NAME, &export.name));
    }
    // The description is sent only when the server was given one: by default nothing about
    // the host (such as the exported path) reaches a client.
    if request.wanted.contains(&wire::INFO_DESCRIPTION) && !export.description.is_empty() {
        infos.push(wire::info_text(wire::INFO_DESCRIPTION, &export.description));
    }
    for info in infos {
        stream.write_all(&wire::option_reply(option, wire::REP_INFO, &info))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scripted client: what it sends, and what the server wrote back.
    struct Script {
        input: io::Cursor<Vec<u8>>,
        output: Vec<u8>,
    }

    impl Read for Script {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.input.read(buf)
        }
    }

    impl Write for Script {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.output.extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn export() -> Export {
        Export {
            name: "disk".into(),
            description: "test".into(),
            size: 1 << 20,
            flags: wire::TX_HAS_FLAGS | wire::TX_SEND_FLUSH,
            min_block: 512,
            preferred_block: 4096,
            max_block: 1 << 25,
        }
    }

    fn option(option: u32, data: &[u8]) -> Vec<u8> {
        let mut out = wire::OPTS_MAGIC.to_be_bytes().to_vec();
        out.extend_from_slice(&option.to_be_bytes());
        out.extend_from_slice(&(data.len() as u32).to_be_bytes());
        out.extend_from_slice(data);
        out
    }

    fn go(name: &str) -> Vec<u8> {
        let mut data = (name.len() as u32).to_be_bytes().to_vec();
        data.extend_from_slice(name.as_bytes());
        data.extend_from_slice(&0u16.to_be_bytes());
        option(wire::OPT_GO, &data)
    }

    fn run(input: Vec<u8>) -> (Result<Ended, String>, Vec<u8>) {
        let mut script = Script {
            input: io::Cursor::new(input),
            output: Vec::new(),
        };
        let result = negotiate(&mut script, &[export()]);
        (result, script.output)
    }

    /// The option replies in `out` after the greeting: (option, type, payload).
    fn replies(out: &[u8]) -> Vec<(u32, u32, Vec<u8>)> {
        let mut rest = &out[18..];
        let mut found = Vec::new();
        while rest.len() >= 20 {
            let option = u32::from_be_bytes(rest[8..12].try_into().unwrap());
            let kind = u32::from_be_bytes(rest[12..16].try_into().unwrap());
            let len = u32::from_be_bytes(rest[16..20].try_into().unwrap()) as usize;
            found.push((option, kind, rest[20..20 + len].to_vec()));
            rest = &rest[20 + len..];
        }
        found
    }

    #[test]
    fn a_handshake_fed_a_byte_at_a_time_answers_as_one_fed_at_once() {
        let mut input = 3u32.to_be_bytes().to_vec();
        input.extend(option(wire::OPT_LIST, &[]));
        input.extend(go(""));
        // What follows the handshake is left for transmission.
        input.extend_from_slice(b"early");
        let (whole, whole_out) = run(input.clone());
        assert_eq!(whole, Ok(Ended::Transmission(0)));
        let mut negotiation = Negotiation::new();
        let mut out = negotiation.take_output();
        let mut held = Vec::new();
        let mut bytes = input.iter();
        let ended = loop {
            let Some(&b) = bytes.next() else {
                panic!("the handshake never ended");
            };
            held.push(b);
            let mut rest = held.as_slice();
            let fed = negotiation.feed(&mut rest, &[export()], &mut || true);
            held = rest.to_vec();
            out.extend(negotiation.take_output());
            if let Some(ended) = fed.unwrap() {
                break ended;
            }
        };
        assert_eq!(ended, Ended::Transmission(0));
        assert_eq!(out, whole_out);
        let early: Vec<u8> = held.iter().chain(bytes).copied().collect();
        assert_eq!(early, b"early");
    }

    #[test]
    fn go_with_the_default_name_starts_transmission_after_info_and_ack() {
        let mut input = 3u32.to_be_bytes().to_vec();
        input.extend(go(""));
        let (result, out) = run(input);
        assert_eq!(result, Ok(Ended::Transmission(0)));
        assert_eq!(&out[..18], &wire::greeting());
        let replies = replies(&out);
        let kinds: Vec<u32> = replies.iter().map(|r| r.1).collect();
        assert_eq!(kinds, vec![wire::REP_INFO, wire::REP_INFO, wire::REP_ACK]);
        assert_eq!(&replies[0].2[2..10], &(1u64 << 20).to_be_bytes());
    }

    #[test]
    fn unknown_export_gets_err_unknown_and_the_client_may_try_again() {
        let mut input = 1u32.to_be_bytes().to_vec();
        input.extend(go("other"));
        input.extend(go("disk"));
        let (result, out) = run(input);
        assert_eq!(result, Ok(Ended::Transmission(0)));
        let replies = replies(&out);
        assert_eq!(replies[0].1, wire::REP_ERR_UNKNOWN);
        assert_eq!(replies.last().unwrap().1, wire::REP_ACK);
    }

    #[test]
    fn list_names_the_export_and_unsupported_options_are_refused() {
        let mut input = 1u32.to_be_bytes().to_vec();
        input.extend(option(wire::OPT_LIST, &[]));
        input.extend(option(8, &[])); // structured replies
        input.extend(option(wire::OPT_ABORT, &[]));
        let (result, out) = run(input);
        assert_eq!(result, Ok(Ended::Closed));
        let replies = replies(&out);
        assert_eq!(replies[0].1, wire::REP_SERVER);
        assert_eq!(&replies[0].2[4..], b"disk");
        assert_eq!(replies[1].1, wire::REP_ACK);
        assert_eq!(replies[2].1, wire::REP_ERR_UNSUP);
        assert_eq!(replies[3].1, wire::REP_ACK);
    }

    #[test]
    fn several_exports_are_listed_and_each_is_reached_by_its_name_the_first_by_default() {
        let second = Export {
            name: "other".into(),
            size: 1 << 21,
            ..export()
        };
        let exports = [export(), second];
        let mut input = 1u32.to_be_bytes().to_vec();
        input.extend(option(wire::OPT_LIST, &[]));
        input.extend(go("other"));
        let mut script = Script {
            input: io::Cursor::new(input),
            output: Vec::new(),
        };
        assert_eq!(negotiate(&mut script, &exports), Ok(Ended::Transmission(1)));
        let replies = replies(&script.output);
        assert_eq!(&replies[0].2[4..], b"disk");
        assert_eq!(&replies[1].2[4..], b"other");
        // The GO's size is the chosen export's.
        assert_eq!(&replies[3].2[2..10], &(1u64 << 21).to_be_bytes());
        let mut by_default = 1u32.to_be_bytes().to_vec();
        by_default.extend(go(""));
        let mut script = Script {
            input: io::Cursor::new(by_default),
            output: Vec::new(),
        };
        assert_eq!(negotiate(&mut script, &exports), Ok(Ended::Transmission(0)));
    }

    #[test]
    fn export_name_option_replies_without_option_header() {
        let mut input = 0u32.to_be_bytes().to_vec();
        input.extend(option(wire::OPT_EXPORT_NAME, b"disk"));
        let (result, out) = run(input);
        assert_eq!(result, Ok(Ended::Transmission(0)));
        assert_eq!(out.len(), 18 + 8 + 2 + 124);
    }

    #[test]
    fn hostile_handshakes_end_with_a_message() {
        let (result, _) = run(0x80u32.to_be_bytes().to_vec());
        assert!(result.unwrap_err().contains("unknown bits"));
        let mut huge = 1u32.to_be_bytes().to_vec();
        huge.extend_from_slice(&wire::OPTS_MAGIC.to_be_bytes());
        huge.extend_from_slice(&wire::OPT_GO.to_be_bytes());
        huge.extend_from_slice(&u32::MAX.to_be_bytes());
        assert!(run(huge).0.unwrap_err().contains("at most"));
        let mut bad_magic = 1u32.to_be_bytes().to_vec();
        bad_magic.extend_from_slice(&[0u8; 16]);
        assert!(run(bad_magic).0.unwrap_err().contains("option magic"));
        let mut truncated = 1u32.to_be_bytes().to_vec();
        truncated.extend_from_slice(&wire::OPTS_MAGIC.to_be_bytes()[..5]);
        assert!(run(truncated).0.is_err());
        let mut endless = 1u32.to_be_bytes().to_vec();
        for _ in 0..300 {
            endless.extend(option(99, &[]));
        }
        assert!(run(endless).0.unwrap_err().contains("options"));
    }

    #[test]
    fn a_client_that_leaves_during_the_handshake_is_closed_quietly() {
        assert_eq!(run(Vec::new()).0, Ok(Ended::Closed));
        assert_eq!(run(1u32.to_be_bytes().to_vec()).0, Ok(Ended::Closed));
    }
}
