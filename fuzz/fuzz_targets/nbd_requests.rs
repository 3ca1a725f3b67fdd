//! An NBD client's bytes: the handshake, then transmission requests through the planner.
//! Never a panic; every planned I/O lies inside the export and its bios cover it exactly.
#![no_main]

use std::io::{Cursor, Read, Write};

use libfuzzer_sys::fuzz_target;
use schedhost::frontend::nbd::{
    CHUNK, Decision, Ended, Export, ExportBounds, REQUEST_LEN, Request, decide, negotiate,
    pieces,
};

/// The fuzzer's bytes as what the client sends; the server's answers are dropped.
struct Client<'a> {
    input: Cursor<&'a [u8]>,
}

impl Read for Client<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.input.read(buf)
    }
}

impl Write for Client<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

const LIMITS: ExportBounds = ExportBounds {
    size: 1 << 30,
    block: 512,
    max_payload: 32 << 20,
    read_only: false,
};

fuzz_target!(|data: &[u8]| {
    let export = Export {
        name: "disk".into(),
        description: "fuzz".into(),
        size: LIMITS.size,
        flags: 1,
        min_block: LIMITS.block,
        preferred_block: CHUNK,
        max_block: LIMITS.max_payload,
    };
    let mut client = Client {
        input: Cursor::new(data),
    };
    if negotiate(&mut client, std::slice::from_ref(&export)) != Ok(Ended::Transmission(0)) {
        return;
    }
    let mut rest = &data[client.input.position() as usize..];
    while rest.len() >= REQUEST_LEN {
        let (header, tail) = rest.split_at(REQUEST_LEN);
        rest = tail;
        let Ok(request) = Request::parse(header.try_into().expect("REQUEST_LEN bytes")) else {
            break;
        };
        match decide(&request, &LIMITS) {
            Decision::Io { offset, length, .. } => {
                assert!(offset + u64::from(length) <= LIMITS.size);
                let covered: u64 = pieces(offset, length, CHUNK).map(|(_, l)| u64::from(l)).sum();
                assert_eq!(covered, u64::from(length));
            }
            Decision::Refuse { skip, .. } => rest = &rest[(skip as usize).min(rest.len())..],
            Decision::Nothing => {}
            Decision::Disconnect | Decision::Close(_) => break,
        }
    }
});
