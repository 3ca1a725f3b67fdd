//! Per-request events, as blktrace records them: a bio queued (Q), merged into a request at
//! its back (M) or front (F), a request inserted into the policy (I), dispatched to the
//! device (D) and completed (C), and the queue plugged (P) and unplugged (U, or UT by its
//! timer). The core emits them when asked; writing and printing them
//! is the engine's (`schedhost_engine::observe::events`).

use schedhost_sdk::Op;
use serde::{Deserialize, Serialize};

/// What happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Kind {
    /// A bio arrived from its submitter (`id` is the bio's).
    Queue,
    /// A bio joined the back of request `id`.
    BackMerge,
    /// A bio joined the front of request `id`.
    FrontMerge,
    /// Request `id` was shown to the policy.
    Insert,
    /// Request `id` went to the device.
    Dispatch,
    /// Request `id` finished with this status (0 or a negative errno).
    Complete(i32),
    /// The queue (legacy) or the submitter's plug was plugged.
    Plug,
    /// A submitter unplugged it, with this many requests waiting.
    Unplug(u32),
    /// The plug's timer unplugged it, with this many requests waiting.
    UnplugTimer(u32),
}

impl Kind {
    /// blktrace's action letter.
    pub fn letter(self) -> char {
        match self {
            Kind::Queue => 'Q',
            Kind::BackMerge => 'M',
            Kind::FrontMerge => 'F',
            Kind::Insert => 'I',
            Kind::Dispatch => 'D',
            Kind::Complete(_) => 'C',
            Kind::Plug => 'P',
            Kind::Unplug(_) | Kind::UnplugTimer(_) => 'U',
        }
    }
}

/// One event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    /// On the run's clock (virtual or monotonic), in ns.
    pub at_ns: u64,
    /// What happened.
    pub kind: Kind,
    /// The submitter (software queue).
    pub ctx: u32,
    /// The operation: 0 read, 1 write, 2 flush, 3 discard.
    pub op: u8,
    /// The submitter waits for it.
    pub sync: bool,
    /// First sector of the bio (Q, M, F) or the request (I, D, C).
    pub sector: u64,
    /// Its length in sectors.
    pub sectors: u32,
    /// The bio's id (Q) or the request's (the others).
    pub id: u64,
}

/// The event's code for `op`.
pub fn op_code(op: Op) -> u8 {
    match op {
        Op::Read => 0,
        Op::Write => 1,
        Op::Flush => 2,
        Op::Discard => 3,
    }
}

/// The operation of code `code`, if it is one.
pub fn op_of(code: u8) -> Option<Op> {
    match code {
        0 => Some(Op::Read),
        1 => Some(Op::Write),
        2 => Some(Op::Flush),
        3 => Some(Op::Discard),
        _ => None,
    }
}
