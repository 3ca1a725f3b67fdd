//! Metrics request heads: find the head's end and parse it, or fail with a message; never
//! panic, whatever the bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use schedhost::observe::metrics::{head_end, parse_head};

fuzz_target!(|data: &[u8]| {
    let head = head_end(data).map_or(data, |end| &data[..end]);
    let _ = parse_head(head);
});
