/work/main/examples/cscan-policy/target/debug/deps/schedhost_sdk-6018cb6f50464a9b.d: /work/main/sdk/src/lib.rs /work/main/sdk/src/collections.rs /work/main/sdk/src/policy.rs /work/main/sdk/src/runtime.rs /work/main/sdk/src/types.rs

/work/main/examples/cscan-policy/target/debug/deps/libschedhost_sdk-6018cb6f50464a9b.rlib: /work/main/sdk/src/lib.rs /work/main/sdk/src/collections.rs /work/main/sdk/src/policy.rs /work/main/sdk/src/runtime.rs /work/main/sdk/src/types.rs

/work/main/examples/cscan-policy/target/debug/deps/libschedhost_sdk-6018cb6f50464a9b.rmeta: /work/main/sdk/src/lib.rs /work/main/sdk/src/collections.rs /work/main/sdk/src/policy.rs /work/main/sdk/src/runtime.rs /work/main/sdk/src/types.rs

/work/main/sdk/src/lib.rs:
/work/main/sdk/src/collections.rs:
/work/main/sdk/src/policy.rs:
/work/main/sdk/src/runtime.rs:
/work/main/sdk/src/types.rs:
