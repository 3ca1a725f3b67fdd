//! Events as blkparse prints them, one line each:
//!
//! ```text
//!   0,0    0        1     0.000104000     3  Q  RS 1444645666 + 256 [ctx3]
//! ```
//!
//! device `0,0`, cpu 0, sequence, seconds, the ctx as pid, action, RWBS, sector `+` count,
//! and `[ctxN]` (`[status]` on completions, as blkparse puts the error there).
//! `schedhost replay` reads it back: each ctx becomes a stream of its Q events.

use std::fmt::Write;

use super::{Event, Kind};

/// One event's line, numbered `seq`.
pub fn line(seq: u64, event: &Event) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "  0,0    0 {seq:>8} {:>5}.{:09} {:>5}  {} {:>3} {} + {} ",
        event.at_ns / 1_000_000_000,
        event.at_ns % 1_000_000_000,
        event.ctx,
        event.kind.letter(),
        rwbs(event),
        event.sector,
        event.sectors,
    );
    match event.kind {
        Kind::Complete(status) => {
            let _ = write!(out, "[{status}]");
        }
        _ => {
            let _ = write!(out, "[ctx{}]", event.ctx);
        }
    }
    out
}

/// R, W, F (flush) or D (discard), then S when the submitter waits.
fn rwbs(event: &Event) -> String {
    let op = match event.op {
        0 => "R",
        1 => "W",
        2 => "F",
        _ => "D",
    };
    if event.sync && event.op != 2 {
        format!("{op}S")
    } else {
        op.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_have_blkparse_fields_in_order() {
        let e = Event {
            at_ns: 1_500_000_123,
            kind: Kind::Queue,
            ctx: 3,
            op: 0,
            sync: true,
            sector: 2048,
            sectors: 8,
            id: 9,
        };
        let text = line(7, &e);
        let fields: Vec<&str> = text.split_whitespace().collect();
        assert_eq!(
            fields,
            [
                "0,0",
                "0",
                "7",
                "1.500000123",
                "3",
                "Q",
                "RS",
                "2048",
                "+",
                "8",
                "[ctx3]"
            ]
        );
        let done = Event {
            kind: Kind::Complete(-5),
            op: 1,
            sync: false,
            ..e
        };
        assert!(
            line(8, &done).ends_with(" C   W 2048 + 8 [-5]"),
            "{}",
            line(8, &done)
        );
    }
}
