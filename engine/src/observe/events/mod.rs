//! Per-request events, as blktrace records them: a bio queued (Q), merged into a request at
//! its back (M) or front (F), a request inserted into the policy (I), dispatched to the
//! device (D) and completed (C).
//!
//! The core records them ([`crate::core::event`]) only when asked (`--trace-events FILE`); [`file`](mod@file) writes them as
//! postcard frames and reads them back, and [`text`] prints them in blkparse's layout, which
//! `schedhost replay` reads, so a recorded run replays under another policy.

pub mod file;
pub mod text;

pub use crate::core::event::{Event, Kind, op_code, op_of};
