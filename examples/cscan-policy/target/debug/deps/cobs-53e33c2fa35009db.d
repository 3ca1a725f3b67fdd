/work/main/examples/cscan-policy/target/debug/deps/cobs-53e33c2fa35009db.d: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/cobs-0.3.0/src/lib.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/cobs-0.3.0/src/dec.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/cobs-0.3.0/src/enc.rs

/work/main/examples/cscan-policy/target/debug/deps/libcobs-53e33c2fa35009db.rlib: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/cobs-0.3.0/src/lib.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/cobs-0.3.0/src/dec.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/cobs-0.3.0/src/enc.rs

/work/main/examples/cscan-policy/target/debug/deps/libcobs-53e33c2fa35009db.rmeta: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/cobs-0.3.0/src/lib.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/cobs-0.3.0/src/dec.rs /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/cobs-0.3.0/src/enc.rs

/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/cobs-0.3.0/src/lib.rs:
/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/cobs-0.3.0/src/dec.rs:
/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/cobs-0.3.0/src/enc.rs:
