//! blkparse text: any input parses or fails with a located error, never panics.
#![no_main]

use libfuzzer_sys::fuzz_target;
use schedhost::frontend::replay::{Format, parse};

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = parse("fuzz", text, Some(Format::Blkparse));
    }
});
