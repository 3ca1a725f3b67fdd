//! fio iologs. Version 2: `FILE ACTION [OFFSET LENGTH]`, untimed, with `FILE wait USECS`
//! lines for pauses. Version 3: `USECS FILE ACTION [OFFSET LENGTH]`, a timestamp on every
//! line (fio ignores `wait` there, and so does this). Offsets and lengths are bytes; each
//! file is a stream. `add`, `open` and `close` lines are accepted and do nothing.

use schedhost_sdk::Op;

use super::{Format, Streams, Trace, TraceError, TraceIo, check_range, check_time, error};

pub(super) fn parse(source: &str, text: &str, format: Format) -> Result<Trace, TraceError> {
    let v3 = format == Format::IologV3;
    let mut lines = text.lines().enumerate();
    let header = if v3 {
        "fio version 3 iolog"
    } else {
        "fio version 2 iolog"
    };
    match lines.next() {
        Some((_, first)) if first.trim().starts_with(header) => {}
        _ => return Err(error(source, 1, format!("expected the header `{header}`"))),
    }
    let (mut ios, mut streams) = (Vec::new(), Streams::default());
    let mut clock_ns = 0u64;
    for (n, line) in lines {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.is_empty() {
            continue;
        }
        let bad = |what: String| error(source, n + 1, what);
        let (stamp, rest) = if v3 {
            let us: u64 = fields[0]
                .parse()
                .map_err(|_| bad(format!("timestamp {:?} is not microseconds", fields[0])))?;
            (Some(us), &fields[1..])
        } else {
            (None, &fields[..])
        };
        if rest.len() < 2 {
            return Err(bad(format!(
                "expected FILE ACTION, found {:?}",
                line.trim()
            )));
        }
        let (file, action) = (rest[0], rest[1]);
        if let Some(us) = stamp {
            clock_ns = check_time(us.checked_mul(1000)).map_err(bad)?;
        }
        let number = |i: usize, what: &str| -> Result<u64, TraceError> {
            rest.get(i)
                .ok_or_else(|| bad(format!("`{action}` needs {what}")))?
                .parse()
                .map_err(|_| bad(format!("{what} {:?} is not a number", rest[i])))
        };
        let op = match action {
            "add" | "open" | "close" => continue,
            "wait" if v3 => continue,
            "wait" => {
                let delay = number(2, "a delay in microseconds")?;
                let later = delay
                    .checked_mul(1000)
                    .and_then(|ns| clock_ns.checked_add(ns));
                clock_ns = check_time(later).map_err(bad)?;
                continue;
            }
            "read" => Op::Read,
            "write" => Op::Write,
            "trim" => Op::Discard,
            "sync" | "datasync" => Op::Flush,
            other => {
                return Err(bad(format!(
                    "unknown action `{other}` (read, write, trim, sync, datasync, wait, add, open, close)"
                )));
            }
        };
        let (sector, sectors) = if op == Op::Flush {
            (0, 0)
        } else {
            let (offset, length) = (number(2, "an offset")?, number(3, "a length")?);
            if offset % 512 != 0 || length % 512 != 0 || length == 0 {
                return Err(bad(format!(
                    "offset {offset} and length {length} must be whole 512-byte sectors, length above 0"
                )));
            }
            let sectors = u32::try_from(length / 512)
                .map_err(|_| bad(format!("length {length} is too large for one I/O")))?;
            check_range(offset / 512, sectors).map_err(bad)?;
            (offset / 512, sectors)
        };
        let stream = streams.index(file).map_err(bad)?;
        ios.push(TraceIo {
            at_ns: clock_ns,
            stream,
            op,
            sector,
            sectors,
            // fio waited for every I/O it logged.
            sync: true,
        });
    }
    Ok(Trace {
        format,
        ios,
        streams: streams.into_names(),
        recorded: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_v3_timestamp_past_the_longest_replay_is_refused_with_its_line() {
        let text = "fio version 3 iolog\n0 f add\n1000000000000000 f read 0 4096\n";
        let err = parse("t.log", text, Format::IologV3).unwrap_err();
        assert_eq!(err.location.line, 3);
        assert!(err.message.contains("366 days"), "{}", err.message);
    }

    #[test]
    fn more_streams_than_submitters_are_refused_with_the_line() {
        let mut text = String::from("fio version 2 iolog\n");
        for f in 0..70_000 {
            text.push_str(&format!("f{f} read 0 4096\n"));
        }
        let err = parse("many.log", &text, Format::IologV2).unwrap_err();
        assert_eq!(err.location.line, 65_538);
        assert!(
            err.message.contains("more than 65536 streams"),
            "{}",
            err.message
        );
    }

    #[test]
    fn a_v2_wait_that_would_overflow_is_refused_with_its_line() {
        let text = "fio version 2 iolog\nf add\nf wait 18446744073709551615\nf read 0 4096\n";
        let err = parse("t.log", text, Format::IologV2).unwrap_err();
        assert_eq!(err.location.line, 3);
        let text = "fio version 2 iolog\nf wait 1000\nf read 0 4096\n";
        let trace = parse("t.log", text, Format::IologV2).unwrap();
        assert_eq!(trace.ios[0].at_ns, 1_000_000);
    }
}
