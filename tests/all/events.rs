//! `--trace-events`: the core records each bio's arrival and merge and each request's insert,
//! dispatch and completion; the file round-trips; the text replays the same I/Os.

use std::collections::HashMap;

use schedhost::backend::sim::DeviceSpec;
use schedhost::frontend::jobs::parse_job_file;
use schedhost::frontend::jobs::sim;
use schedhost::frontend::outcome::Outcome;
use schedhost::frontend::plan::RunPlan;
use schedhost::frontend::replay::{Format, parse};
use schedhost::observe::events::{Kind, file, text};
use schedhost::policy::native_policy;

fn recorded(policy: &str, record: bool) -> Outcome {
    let jobs = parse_job_file(
        "t.fio",
        "[seq]\nrw=read\nbs=4k\nsize=2m\niodepth=8\nnumjobs=2\n\n[rand]\nrw=randwrite\nbs=8k\nsize=2m\niodepth=4\nnumber_ios=200\n",
    )
    .unwrap();
    let options = RunPlan {
        observe: schedhost::frontend::plan::Observe {
            record_events: record,
            ..Default::default()
        },
        ..RunPlan::default()
    };
    let device = DeviceSpec::parse("sim:hdd").unwrap();
    sim::run(
        &jobs,
        &device,
        native_policy(policy).unwrap(),
        &[],
        &options,
        &mut |_| {},
    )
    .unwrap()
}

#[test]
fn events_account_for_every_bio_merge_dispatch_and_completion() {
    let outcome = recorded("deadline", true);
    let count =
        |want: fn(Kind) -> bool| outcome.events.iter().filter(|e| want(e.kind)).count() as u64;
    let core = &outcome.core;
    assert_eq!(count(|k| k == Kind::Queue), core.bios);
    assert_eq!(count(|k| k == Kind::BackMerge), core.back_merges);
    assert_eq!(count(|k| k == Kind::FrontMerge), core.front_merges);
    assert_eq!(count(|k| k == Kind::Dispatch), core.dispatched);
    assert_eq!(count(|k| matches!(k, Kind::Complete(_))), core.completed);
    assert!(core.back_merges > 0, "sequential readers merge");
    // Each request: inserted, then dispatched, then completed, in time order.
    let mut seen: HashMap<u64, Vec<(Kind, u64)>> = HashMap::new();
    for e in outcome
        .events
        .iter()
        .filter(|e| !matches!(e.kind, Kind::Queue | Kind::BackMerge | Kind::FrontMerge))
    {
        seen.entry(e.id).or_default().push((e.kind, e.at_ns));
    }
    for (id, life) in &seen {
        let kinds: Vec<Kind> = life.iter().map(|l| l.0).collect();
        assert_eq!(
            kinds,
            vec![Kind::Insert, Kind::Dispatch, Kind::Complete(0)],
            "request {id}"
        );
        assert!(
            life.windows(2).all(|w| w[0].1 <= w[1].1),
            "request {id}: {life:?}"
        );
    }
    assert!(outcome.events.windows(2).all(|w| w[0].at_ns <= w[1].at_ns));
}

#[test]
fn events_are_not_recorded_unless_asked() {
    assert!(recorded("noop", false).events.is_empty());
}

#[test]
fn recorded_events_round_trip_through_the_file_and_replay_as_the_same_ios() {
    let outcome = recorded("cfq", true);
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("events");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("run.events");
    let header = file::Header {
        device: "sim:hdd".into(),
        policy: "cfq".into(),
    };
    let mut writer = file::Writer::create(&path, &header).unwrap();
    writer.write(&outcome.events).unwrap();
    writer.finish().unwrap();
    let (read_header, events) = file::read(&path).unwrap();
    assert_eq!(read_header, header);
    assert_eq!(events, outcome.events);

    let lines: Vec<String> = events
        .iter()
        .enumerate()
        .map(|(i, e)| text::line(i as u64 + 1, e))
        .collect();
    let trace = parse("run.txt", &lines.join("\n"), None).unwrap();
    assert_eq!(trace.format, Format::Blkparse);
    let queued: Vec<_> = events.iter().filter(|e| e.kind == Kind::Queue).collect();
    assert_eq!(trace.ios.len(), queued.len());
    assert_eq!(trace.streams.len(), 3, "one stream per ctx");
    for (io, q) in trace.ios.iter().zip(&queued) {
        assert_eq!((io.sector, io.sectors), (q.sector, q.sectors));
    }
    let recorded = trace.recorded.unwrap();
    assert_eq!(
        (recorded.back_merges, recorded.front_merges),
        (outcome.core.back_merges, outcome.core.front_merges)
    );
}
