//! fio job files: parse or fail with file and line, never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use schedhost::frontend::jobs::parse_job_file;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = parse_job_file("fuzz.fio", text);
    }
});
