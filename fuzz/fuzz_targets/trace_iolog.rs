//! fio iologs (v2 and v3, detected from the header): parse or fail, never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use schedhost::frontend::replay::parse;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let v2 = format!("fio version 2 iolog\n{text}");
        let v3 = format!("fio version 3 iolog\n{text}");
        let _ = parse("fuzz", &v2, None);
        let _ = parse("fuzz", &v3, None);
    }
});
