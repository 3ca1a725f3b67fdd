//! schedhost's integration tests: one binary, one module per feature.

#![allow(
    clippy::unwrap_used,
    reason = "a failed unwrap is a failed test, with its location"
)]

mod answers;
mod anticipatory;
mod bfq;
mod c_policy;
mod cfq;
mod conservation;
mod deadline;
mod determinism;
mod events;
mod faults;
mod golden;
mod helpers;
mod hostile_peers;
mod jobs;
mod kyber;
mod loading;
mod merging;
mod nbd;
mod plugging;
mod policy_check;
mod policy_rules;
mod replay;
mod reproduction;
mod sandbox;
mod sdk_example;
mod swaps;
mod time_slice;
mod uring;
mod validate;
