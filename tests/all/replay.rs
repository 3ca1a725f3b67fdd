//! Trace replay: blkparse text and fio iologs parse into timed streams, bad lines are named
//! with their file and line, and a replay issues every recorded I/O once, at the recorded
//! pace (or scaled, or as fast as the depth allows), on simulated and real devices.

use std::path::Path;

use schedhost::backend::sim::DeviceSpec;
use schedhost::frontend::jobs::real;
use schedhost::frontend::jobs::sim;
use schedhost::frontend::jobs::{Pacing, jobs_for_trace};
use schedhost::frontend::outcome::Outcome;
use schedhost::frontend::plan::RunPlan;
use schedhost::frontend::replay::{Format, Trace, parse};
use schedhost::policy::native_policy;
use schedhost_sdk::Op;

const SAMPLE: &str = include_str!("../../examples/traces/blkparse-sample.txt");

const PACED: Pacing = Pacing {
    time_scale: 1.0,
    no_stall: false,
    depth: 64,
};

fn replay_sim(trace: &Trace, pacing: Pacing, device: &str) -> Outcome {
    let jobs = jobs_for_trace(trace, pacing, "t");
    let device = DeviceSpec::parse(device).unwrap();
    sim::run(
        &jobs,
        &device,
        native_policy("cfq").unwrap(),
        &[],
        &RunPlan::default(),
        &mut |_| {},
    )
    .unwrap()
}

fn two_tb_disk() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/devices/2tb-disk.spec")
        .display()
        .to_string()
}

fn assert_every_io_once(trace: &Trace, o: &Outcome) {
    let issued: u64 = o.submitters.iter().map(|s| s.issued).sum();
    let completed: u64 = o.submitters.iter().map(|s| s.completed).sum();
    assert_eq!(issued, trace.ios.len() as u64);
    assert_eq!(completed, issued);
    assert_eq!(o.core.bios, issued);
}

#[test]
fn replay_blkparse_sample_turns_queued_events_into_per_process_streams() {
    let trace = parse("sample", SAMPLE, None).unwrap();
    assert_eq!(trace.format, Format::Blkparse);
    assert_eq!(trace.ios.len(), 1063, "one I/O per Q event with data");
    assert_eq!(trace.streams.len(), 5);
    assert!(
        trace.streams[0].starts_with("pid 18615"),
        "{:?}",
        trace.streams
    );
    let recorded = trace.recorded.unwrap();
    assert_eq!((recorded.back_merges, recorded.front_merges), (1005, 0));
    assert_eq!(
        (recorded.plugs, recorded.unplugs, recorded.timer_unplugs),
        (44, 41, 1),
        "P, U and UT lines counted"
    );
    let first = trace.ios[0];
    assert_eq!(
        (first.op, first.sector, first.sectors),
        (Op::Read, 1_444_645_666, 256)
    );
    assert_eq!(first.at_ns, 0);
    assert!(trace.ios.windows(2).all(|w| w[0].at_ns <= w[1].at_ns));
}

#[test]
fn replay_blkparse_sample_completes_every_io_once_on_a_simulated_disk() {
    let trace = parse("sample", SAMPLE, None).unwrap();
    let outcome = replay_sim(&trace, PACED, &two_tb_disk());
    assert_every_io_once(&trace, &outcome);
    assert_eq!(outcome.submitters.len(), 5);
    assert!(
        outcome.core.back_merges > 0,
        "the replayed streams merge as they did"
    );
}

#[test]
fn replay_time_scale_and_no_stall_change_the_pace_not_the_ios() {
    let trace = parse("sample", SAMPLE, None).unwrap();
    let paced = replay_sim(&trace, PACED, &two_tb_disk());
    let half = Pacing {
        time_scale: 0.5,
        ..PACED
    };
    let fast = replay_sim(&trace, half, &two_tb_disk());
    let flat_out = Pacing {
        no_stall: true,
        ..PACED
    };
    let unpaced = replay_sim(&trace, flat_out, &two_tb_disk());
    for o in [&fast, &unpaced] {
        assert_every_io_once(&trace, o);
    }
    assert!(
        (fast.end_ns as f64) < 0.6 * paced.end_ns as f64,
        "{} vs {}",
        fast.end_ns,
        paced.end_ns
    );
    assert!(unpaced.end_ns < fast.end_ns);
}

#[test]
fn replay_iolog_v2_waits_and_v3_timestamps_set_the_issue_times() {
    let v2 = "fio version 2 iolog\n/dev/x add\n/dev/x open\n/dev/x read 0 4096\n/dev/x wait 1500\n/dev/x write 8192 8192\n/dev/x sync 0 0\n/dev/x close\n";
    let trace = parse("v2.log", v2, None).unwrap();
    assert_eq!(trace.format, Format::IologV2);
    let ops: Vec<(u64, Op, u64, u32)> = trace
        .ios
        .iter()
        .map(|io| (io.at_ns, io.op, io.sector, io.sectors))
        .collect();
    assert_eq!(
        ops,
        [
            (0, Op::Read, 0, 8),
            (1_500_000, Op::Write, 16, 16),
            (1_500_000, Op::Flush, 0, 0)
        ]
    );
    let v3 = "fio version 3 iolog\n0 a add\n10 a open\n20 a read 4096 4096\n2020 b write 0 512\n2500 a wait 99\n3000 a trim 8192 4096\n";
    let trace = parse("v3.log", v3, None).unwrap();
    assert_eq!(trace.format, Format::IologV3);
    assert_eq!(trace.streams, ["a", "b"]);
    let times: Vec<u64> = trace.ios.iter().map(|io| io.at_ns).collect();
    assert_eq!(
        times,
        [20_000, 2_020_000, 3_000_000],
        "v3 ignores wait, as fio does"
    );
    assert_eq!(trace.ios[2].op, Op::Discard);
}

#[test]
fn replay_bad_trace_lines_are_named_with_file_and_line() {
    let cases = [
        (
            "fio version 2 iolog\n/dev/x read 0 4096\n/dev/x fly 0 4096\n",
            "bad.log:3: unknown action `fly`",
        ),
        (
            "fio version 3 iolog\n0 a read 0 4096\nsoon a read 0 4096\n",
            "bad.log:3: timestamp \"soon\" is not microseconds",
        ),
        (
            "fio version 2 iolog\n/dev/x read 100 4096\n",
            "bad.log:2: offset 100 and length 4096 must be whole 512-byte sectors",
        ),
        (
            "fio version 2 iolog\n/dev/x read 0\n",
            "bad.log:2: `read` needs a length",
        ),
        (
            "  8,16   5        2     0.000001850 18615  Q   R many + 256 [java]\n",
            "bad.log:1: sector \"many\" is not a number",
        ),
        (
            "  8,16   5        2     0.00x 18615  Q   R 1 + 256 [java]\n",
            "bad.log:1: time \"0.00x\" is not seconds.nanoseconds",
        ),
        (
            "CPU0 (8,16):\n Reads Queued: 0\n",
            "bad.log: no Q (queued) events",
        ),
        // Found by the fuzzer: seconds that overflow nanoseconds.
        (
            "7,80 0 0 333333333333333.4503 1 Q W 0 + 8 [x]\n",
            "bad.log:1: time \"333333333333333.4503\" is not seconds.nanoseconds",
        ),
        (
            "fio version 2 iolog\n/dev/x read 18446744073709551104 4096\n",
            "bad.log:2: sector 36028797018963967 + 8 lies beyond 2^54 sectors",
        ),
    ];
    for (text, expected) in cases {
        let err = parse("bad.log", text, None).unwrap_err().to_string();
        assert!(err.starts_with(expected), "{err}\nexpected {expected}");
    }
}

#[test]
fn replay_iolog_on_a_real_file_writes_then_reads_back() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("replay");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut log = String::from("fio version 3 iolog\n0 f add\n");
    for i in 0..64u64 {
        log.push_str(&format!("{} f write {} 4096\n", i * 100, i * 4096));
    }
    for i in 0..64u64 {
        log.push_str(&format!("{} f read {} 4096\n", 10_000 + i * 100, i * 4096));
    }
    let trace = parse("real.log", &log, None).unwrap();
    let jobs = jobs_for_trace(&trace, PACED, "real.log");
    let done = real::run(
        &jobs,
        &[dir.join("replay.dat")],
        vec![native_policy("deadline").unwrap()],
        &[],
        &RunPlan::default(),
    )
    .unwrap();
    let o = &done.outcome;
    assert_eq!(o.submitters[0].issued, 128);
    assert_eq!(o.submitters[0].completed, 128);
    assert_eq!(o.stats[0].dirs[0].ios, 64);
    assert_eq!(o.stats[0].dirs[1].ios, 64);
    assert!(
        o.end_ns >= 16_300_000,
        "the recorded 16.3 ms are kept: {}",
        o.end_ns
    );
}

#[test]
fn replay_on_a_real_file_writes_a_long_io_whole_among_short_ones() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("replay-mixed");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // Mostly 4 KiB writes, so 4 KiB is the stream's typical block; one 128 KiB write at 1 MiB.
    let mut log = String::from("fio version 3 iolog\n0 f add\n");
    for i in 0..10u64 {
        log.push_str(&format!("{} f write {} 4096\n", i * 10, i * 4096));
    }
    log.push_str("200 f write 1048576 131072\n");
    let trace = parse("mixed.log", &log, None).unwrap();
    let jobs = jobs_for_trace(&trace, PACED, "mixed.log");
    let path = dir.join("mixed.dat");
    let done = real::run(
        &jobs,
        std::slice::from_ref(&path),
        vec![native_policy("noop").unwrap()],
        &[],
        &RunPlan::default(),
    )
    .unwrap();
    let written = done.outcome.stats[0].dirs[1].bytes;
    assert_eq!(written, 10 * 4096 + 131_072);
    // The file was created sparse (zeros); every block of the long write now holds its
    // (random) buffer, not just the first 4 KiB.
    let data = std::fs::read(&path).unwrap();
    for (i, block) in data[1_048_576..1_048_576 + 131_072]
        .chunks(4096)
        .enumerate()
    {
        assert!(
            block.iter().any(|&b| b != 0),
            "block {i} of the 128 KiB write is zeros"
        );
    }
}

#[test]
fn replay_on_a_real_file_refuses_buffers_past_the_limit_up_front() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("replay-huge");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // One 4 GiB I/O at depth 64 would need a 256 GiB buffer arena.
    let log = "fio version 3 iolog\n0 f add\n0 f write 0 4294966784\n";
    let trace = parse("huge.log", log, None).unwrap();
    let jobs = jobs_for_trace(&trace, PACED, "huge.log");
    let path = dir.join("huge.dat");
    let err = real::run(
        &jobs,
        std::slice::from_ref(&path),
        vec![native_policy("noop").unwrap()],
        &[],
        &RunPlan::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("2048 MiB buffer limit"), "{err}");
    assert!(
        !path.exists(),
        "a run refused while setting up leaves no file behind"
    );
}

#[test]
fn replay_with_the_legacy_plug_merges_and_plugs_as_the_traced_kernel_did() {
    let trace = parse("sample", SAMPLE, None).unwrap();
    let recorded = trace.recorded.unwrap();
    // The traced kernel bounded requests (nr_requests), not bios: a stream's depth must
    // not hold its bios back where that kernel merged them.
    let pacing = Pacing {
        depth: 1024,
        ..PACED
    };
    let jobs = jobs_for_trace(&trace, pacing, "t");
    let device = DeviceSpec::parse(&two_tb_disk()).unwrap();
    let mut plan = RunPlan::default();
    plan.queue.plug = schedhost::core::Plug::legacy();
    let o = sim::run(
        &jobs,
        &device,
        native_policy("cfq").unwrap(),
        &[],
        &plan,
        &mut |_| {},
    )
    .unwrap();
    assert_every_io_once(&trace, &o);
    let want = (recorded.back_merges + recorded.front_merges) as f64;
    let got = (o.core.back_merges + o.core.front_merges) as f64;
    assert!(
        (got - want).abs() <= 0.2 * want,
        "merges {got} against the trace's {want}"
    );
    let same_order = |got: u64, want: u64| got * 2 >= want && got <= want * 2;
    assert!(
        same_order(o.core.plugs, recorded.plugs),
        "plugs {} against the trace's {}",
        o.core.plugs,
        recorded.plugs
    );
    let unplugs = o.core.unplugs + o.core.timer_unplugs;
    let recorded_unplugs = recorded.unplugs + recorded.timer_unplugs;
    assert!(
        same_order(unplugs, recorded_unplugs),
        "unplugs {unplugs} against the trace's {recorded_unplugs}"
    );
}
