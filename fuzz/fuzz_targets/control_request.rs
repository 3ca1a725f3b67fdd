//! Control socket request lines: parse or fail with a message, never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use schedhost::control::parse_request;

fuzz_target!(|data: &[u8]| {
    if let Ok(line) = std::str::from_utf8(data) {
        let _ = parse_request(line);
    }
});
