//! blkparse's default text output:
//!
//! ```text
//!   8,16   5        2     0.000001850 18615  Q   R 1444645666 + 256 [java]
//! ```
//!
//! device, cpu, sequence, seconds, pid, action, RWBS, sector `+` count, `[command]`. Every
//! Q (queued) event with data becomes an I/O of process `pid`; M and F events count the back
//! and front merges the traced kernel made, P, U and UT its plugs and unplugs. Lines that are not events (blkparse's summary at
//! the end, blank lines) are skipped; an event line that does not parse is an error.

use schedhost_sdk::Op;

use std::collections::HashMap;

use super::{
    Format, Streams, Trace, TraceError, TraceIo, TracedCounts, check_range, check_time, error,
};

pub(super) fn parse(source: &str, text: &str) -> Result<Trace, TraceError> {
    let mut ios = Vec::new();
    let mut streams = Streams::default();
    let mut pids: HashMap<u64, u32> = HashMap::new();
    let mut recorded = TracedCounts::default();
    let mut t0 = None;
    for (n, line) in text.lines().enumerate() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if !is_event(&fields) {
            continue;
        }
        let bad = |what: String| error(source, n + 1, what);
        if fields.len() < 7 {
            return Err(bad(format!(
                "an event needs at least 7 fields, found {}",
                fields.len()
            )));
        }
        match fields[5] {
            "M" => recorded.back_merges += 1,
            "F" => recorded.front_merges += 1,
            "P" => recorded.plugs += 1,
            "U" => recorded.unplugs += 1,
            "UT" => recorded.timer_unplugs += 1,
            _ => {}
        }
        if fields[5] != "Q" {
            continue;
        }
        let rwbs = fields[6];
        let Some((op, sync)) = decode_rwbs(rwbs) else {
            continue;
        };
        let at_ns = seconds_to_ns(fields[3])
            .ok_or_else(|| bad(format!("time {:?} is not seconds.nanoseconds", fields[3])))?;
        let pid: u64 = fields[4]
            .parse()
            .map_err(|_| bad(format!("pid {:?} is not a number", fields[4])))?;
        let (sector, sectors) = if op == Op::Flush {
            (0, 0)
        } else {
            if fields.len() < 10 || fields[8] != "+" {
                return Err(bad("a Q event with data needs `SECTOR + COUNT`".into()));
            }
            let sector = fields[7]
                .parse()
                .map_err(|_| bad(format!("sector {:?} is not a number", fields[7])))?;
            let sectors: u32 = fields[9]
                .parse()
                .map_err(|_| bad(format!("count {:?} is not a number", fields[9])))?;
            if sectors == 0 {
                continue;
            }
            check_range(sector, sectors).map_err(bad)?;
            (sector, sectors)
        };
        let stream = match pids.get(&pid) {
            Some(&s) => s,
            None => {
                let command = fields
                    .last()
                    .filter(|f| f.starts_with('['))
                    .copied()
                    .unwrap_or("");
                let label = format!("pid {pid} {command}").trim().to_owned();
                let s = streams.index(&label).map_err(bad)?;
                pids.insert(pid, s);
                s
            }
        };
        let start = *t0.get_or_insert(at_ns);
        ios.push(TraceIo {
            at_ns: check_time(Some(at_ns.saturating_sub(start))).map_err(bad)?,
            stream,
            op,
            sector,
            sectors,
            sync,
        });
    }
    Ok(Trace {
        format: Format::Blkparse,
        ios,
        streams: streams.into_names(),
        recorded: Some(recorded),
    })
}

/// An event line starts with the device as `MAJOR,MINOR`.
fn is_event(fields: &[&str]) -> bool {
    fields
        .first()
        .and_then(|f| f.split_once(','))
        .is_some_and(|(a, b)| {
            !a.is_empty()
                && !b.is_empty()
                && a.bytes().all(|c| c.is_ascii_digit())
                && b.bytes().all(|c| c.is_ascii_digit())
        })
}

/// The operation and sync flag of an RWBS string; `None` for events without data or flush
/// (`N`).
fn decode_rwbs(rwbs: &str) -> Option<(Op, bool)> {
    let sync = rwbs.contains('S');
    if rwbs.contains('D') {
        Some((Op::Discard, sync))
    } else if rwbs.contains('R') {
        // Read-ahead (A) is asynchronous; every other read has a waiter.
        Some((Op::Read, !rwbs.contains('A')))
    } else if rwbs.contains('W') {
        Some((Op::Write, sync))
    } else if rwbs.starts_with('F') {
        Some((Op::Flush, true))
    } else {
        None
    }
}

/// `12.000001850` → ns.
fn seconds_to_ns(text: &str) -> Option<u64> {
    let (secs, frac) = text.split_once('.').unwrap_or((text, ""));
    let secs: u64 = secs.parse().ok()?;
    if frac.len() > 9 || !frac.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let frac_ns: u64 = format!("{frac:0<9}").parse().ok()?;
    secs.checked_mul(1_000_000_000)?.checked_add(frac_ns)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blkparse_rwbs_and_times_decode() {
        assert_eq!(decode_rwbs("R"), Some((Op::Read, true)));
        assert_eq!(decode_rwbs("RA"), Some((Op::Read, false)));
        assert_eq!(decode_rwbs("WS"), Some((Op::Write, true)));
        assert_eq!(decode_rwbs("W"), Some((Op::Write, false)));
        assert_eq!(decode_rwbs("DS"), Some((Op::Discard, true)));
        assert_eq!(decode_rwbs("FN"), Some((Op::Flush, true)));
        assert_eq!(decode_rwbs("N"), None);
        assert_eq!(seconds_to_ns("0.000001850"), Some(1850));
        assert_eq!(seconds_to_ns("12.5"), Some(12_500_000_000));
        assert_eq!(seconds_to_ns("1.x"), None);
    }

    #[test]
    fn recorded_events_replay_their_queue_events_and_count_plugs_and_unplugs() {
        use crate::observe::events::text::line;
        use crate::observe::events::{Event, Kind};
        let plug = Event {
            at_ns: 8_750,
            kind: Kind::Plug,
            ctx: 18,
            op: 0,
            sync: false,
            sector: 0,
            sectors: 0,
            id: 0,
        };
        let queued = Event {
            kind: Kind::Queue,
            sector: 64,
            sectors: 8,
            ..plug
        };
        let unplug = Event {
            kind: Kind::Unplug(2),
            ..plug
        };
        let timer = Event {
            kind: Kind::UnplugTimer(1),
            ctx: 0,
            ..plug
        };
        let text = [
            line(1, &plug),
            line(2, &queued),
            line(3, &unplug),
            line(4, &timer),
        ]
        .join("\n");
        let trace = super::super::parse("events", &text, None).expect("the events parse");
        assert_eq!(trace.ios.len(), 1, "only the Q event is an I/O");
        let recorded = trace.recorded.expect("plugs are counted");
        assert_eq!(
            (recorded.plugs, recorded.unplugs, recorded.timer_unplugs),
            (1, 1, 1)
        );
    }
}
