/work/main/examples/cscan-policy/target/debug/deps/schedhost_policy_cscan-d660ee6b4cb8940d.d: src/lib.rs

/work/main/examples/cscan-policy/target/debug/deps/schedhost_policy_cscan-d660ee6b4cb8940d: src/lib.rs

src/lib.rs:

# env-dep:CARGO_PKG_VERSION=0.1.0
