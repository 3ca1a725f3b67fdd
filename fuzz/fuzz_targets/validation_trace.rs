//! DiskSim validation traces: parse or fail, and a short one replays on the `drive` model
//! without a panic or a hang.
#![no_main]

use libfuzzer_sys::fuzz_target;
use schedhost::backend::sim::{DeviceSpec, DriveParams};
use schedhost::fidelity::{parse_trace, validate};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(trace) = parse_trace(text) else {
        return;
    };
    if trace.len() <= 256 {
        let _ = validate(&trace, &DeviceSpec::Drive(Box::new(DriveParams::default())));
    }
});
