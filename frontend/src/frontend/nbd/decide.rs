//! What a transmission request asks of the scheduler, decided without I/O: which bios, or
//! which error, or whether the connection must end. Bounds and alignment are checked here
//! so that nothing malformed reaches the core.

use super::wire::{self, Request};

/// What the export allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExportBounds {
    /// Export size in bytes.
    pub size: u64,
    /// Offsets and lengths must be multiples of this (O_DIRECT's logical block, ≥ 512).
    pub block: u32,
    /// Largest read or write payload.
    pub max_payload: u32,
    /// Writes, trims and zeroing are refused.
    pub read_only: bool,
}

/// The I/O a request becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Work {
    /// Read `length` bytes and send them back.
    Read,
    /// Write the payload that follows the header.
    Write,
    /// Write zeroes (no payload).
    Zeroes,
    /// Discard the range (advisory).
    Trim,
    /// Make completed writes durable.
    Flush,
}

/// What to do with one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Submit I/O for `length` bytes at `offset`; with `fua`, flush before replying.
    Io {
        /// What the bios do.
        work: Work,
        /// First byte.
        offset: u64,
        /// Bytes.
        length: u32,
        /// Forced unit access: durable before the reply.
        fua: bool,
    },
    /// Reply with `error` after reading and dropping `skip` payload bytes.
    Refuse {
        /// The protocol's error value.
        error: u32,
        /// Payload bytes to read past.
        skip: u32,
    },
    /// Reply success at once: nothing to transfer.
    Nothing,
    /// `NBD_CMD_DISC`: finish what is in flight, then close.
    Disconnect,
    /// The stream cannot be followed any further: close it, saying why.
    Close(String),
}

/// Decides what `request` becomes under `limits`.
pub fn decide(request: &Request, limits: &ExportBounds) -> Decision {
    let fua = request.flags & wire::CMD_FLAG_FUA != 0;
    let (work, payload) = match request.kind {
        wire::CMD_READ => (Work::Read, 0),
        wire::CMD_WRITE => (Work::Write, request.length),
        wire::CMD_WRITE_ZEROES => (Work::Zeroes, 0),
        wire::CMD_TRIM => (Work::Trim, 0),
        wire::CMD_FLUSH => {
            return Decision::Io {
                work: Work::Flush,
                offset: 0,
                length: 0,
                fua: false,
            };
        }
        wire::CMD_DISC => return Decision::Disconnect,
        // An unknown command has no payload the server could know of.
        _ => {
            return Decision::Refuse {
                error: wire::EINVAL,
                skip: 0,
            };
        }
    };
    if payload > limits.max_payload {
        // Skipping that much would keep the connection busy for nothing; the protocol lets
        // the server close instead.
        return Decision::Close(format!(
            "a write of {payload} bytes exceeds the {} the export accepts",
            limits.max_payload
        ));
    }
    let refuse = |error| Decision::Refuse {
        error,
        skip: payload,
    };
    if work == Work::Read && request.length > limits.max_payload {
        return refuse(wire::EINVAL);
    }
    if limits.read_only && work != Work::Read {
        return refuse(wire::EPERM);
    }
    let end = request.offset.checked_add(u64::from(request.length));
    if end.is_none_or(|end| end > limits.size) {
        return refuse(match work {
            Work::Write | Work::Zeroes => wire::ENOSPC,
            _ => wire::EINVAL,
        });
    }
    let block = u64::from(limits.block.max(1));
    if !request.offset.is_multiple_of(block) || !u64::from(request.length).is_multiple_of(block) {
        return refuse(wire::EINVAL);
    }
    if request.length == 0 {
        return Decision::Nothing;
    }
    Decision::Io {
        work,
        offset: request.offset,
        length: request.length,
        fua: fua && work != Work::Read,
    }
}

/// The pieces of `length` bytes at `offset`, each at most `chunk` bytes: the bios one
/// request becomes, as the kernel splits a request at max_sectors_kb.
pub fn pieces(offset: u64, length: u32, chunk: u32) -> impl Iterator<Item = (u64, u32)> {
    let chunk = chunk.max(1);
    (0..length.div_ceil(chunk)).map(move |i| {
        let start = i * chunk;
        (offset + u64::from(start), chunk.min(length - start))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: ExportBounds = ExportBounds {
        size: 1 << 20,
        block: 512,
        max_payload: 1 << 16,
        read_only: false,
    };

    fn request(kind: u16, offset: u64, length: u32) -> Request {
        Request {
            flags: 0,
            kind,
            cookie: 7,
            offset,
            length,
        }
    }

    #[test]
    fn in_range_aligned_requests_become_io() {
        assert_eq!(
            decide(&request(wire::CMD_READ, 4096, 8192), &LIMITS),
            Decision::Io {
                work: Work::Read,
                offset: 4096,
                length: 8192,
                fua: false
            }
        );
        let mut fua = request(wire::CMD_WRITE, 0, 512);
        fua.flags = wire::CMD_FLAG_FUA;
        assert!(matches!(
            decide(&fua, &LIMITS),
            Decision::Io {
                work: Work::Write,
                fua: true,
                ..
            }
        ));
        assert_eq!(
            decide(&request(wire::CMD_READ, 0, 0), &LIMITS),
            Decision::Nothing
        );
    }

    #[test]
    fn out_of_range_unaligned_and_read_only_requests_are_refused_with_their_payload_skipped() {
        let past_end = decide(&request(wire::CMD_WRITE, (1 << 20) - 512, 1024), &LIMITS);
        assert_eq!(
            past_end,
            Decision::Refuse {
                error: wire::ENOSPC,
                skip: 1024
            }
        );
        let overflow = decide(&request(wire::CMD_READ, u64::MAX - 10, 512), &LIMITS);
        assert_eq!(
            overflow,
            Decision::Refuse {
                error: wire::EINVAL,
                skip: 0
            }
        );
        let unaligned = decide(&request(wire::CMD_WRITE, 100, 512), &LIMITS);
        assert_eq!(
            unaligned,
            Decision::Refuse {
                error: wire::EINVAL,
                skip: 512
            }
        );
        let read_only = ExportBounds {
            read_only: true,
            ..LIMITS
        };
        assert_eq!(
            decide(&request(wire::CMD_TRIM, 0, 512), &read_only),
            Decision::Refuse {
                error: wire::EPERM,
                skip: 0
            }
        );
        assert!(matches!(
            decide(&request(wire::CMD_READ, 0, 512), &read_only),
            Decision::Io { .. }
        ));
        assert_eq!(
            decide(&request(99, 0, 512), &LIMITS),
            Decision::Refuse {
                error: wire::EINVAL,
                skip: 0
            }
        );
    }

    #[test]
    fn oversized_writes_close_the_connection_and_oversized_reads_are_refused() {
        assert!(matches!(
            decide(&request(wire::CMD_WRITE, 0, 1 << 17), &LIMITS),
            Decision::Close(_)
        ));
        assert_eq!(
            decide(&request(wire::CMD_READ, 0, 1 << 17), &LIMITS),
            Decision::Refuse {
                error: wire::EINVAL,
                skip: 0
            }
        );
        // Zeroing has no payload, so any in-range length goes.
        assert!(matches!(
            decide(&request(wire::CMD_WRITE_ZEROES, 0, 1 << 20), &LIMITS),
            Decision::Io { .. }
        ));
    }

    #[test]
    fn pieces_cover_the_range_in_chunks() {
        let p: Vec<_> = pieces(1000, 10, 4).collect();
        assert_eq!(p, vec![(1000, 4), (1004, 4), (1008, 2)]);
        assert_eq!(pieces(0, 0, 4).count(), 0);
    }
}
