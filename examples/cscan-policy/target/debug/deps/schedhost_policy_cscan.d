/work/main/examples/cscan-policy/target/debug/deps/schedhost_policy_cscan.d: src/lib.rs

/work/main/examples/cscan-policy/target/debug/deps/libschedhost_policy_cscan.so: src/lib.rs

/work/main/examples/cscan-policy/target/debug/deps/libschedhost_policy_cscan.rlib: src/lib.rs

src/lib.rs:

# env-dep:CARGO_PKG_VERSION=0.1.0
