//! The seed experiments on the simulated HDD, checked by shape (ratios between policies), not
//! by absolute figures. Each runs the examples/jobs file with a shorter runtime.

use schedhost::device::DeviceSpec;
use schedhost::outcome::Outcome;
use schedhost::policy::native_policy;
use schedhost::sim::{self, SimOptions};
use schedhost::workload::{JobSpec, parse_job_file};

fn jobs(file: &str, overrides: &[(&str, &str)]) -> Vec<JobSpec> {
    let path = format!("{}/../examples/jobs/{file}", env!("CARGO_MANIFEST_DIR"));
    let mut jobs = parse_job_file(file, &std::fs::read_to_string(path).unwrap()).unwrap();
    for job in &mut jobs {
        for (key, value) in overrides {
            job.set_option(key, value).unwrap();
        }
    }
    jobs
}

fn run(policy: &str, settings: &[(&str, i64)], jobs: &[JobSpec]) -> Outcome {
    let settings: Vec<(String, i64)> = settings
        .iter()
        .map(|(k, v)| ((*k).to_owned(), *v))
        .collect();
    let device = DeviceSpec::parse("sim:hdd").unwrap();
    sim::run(
        jobs,
        &device,
        native_policy(policy).unwrap(),
        &settings,
        SimOptions::default(),
        &mut |_| {},
    )
    .unwrap()
}

fn read_iops(o: &Outcome) -> f64 {
    o.stats
        .iter()
        .zip(&o.submitters)
        .map(|(s, sub)| s.dirs[0].ios as f64 / ((sub.finished_ns - sub.started_ns) as f64 / 1e9))
        .sum()
}

fn max_read_latency(o: &Outcome) -> u64 {
    o.stats
        .iter()
        .map(|s| s.dirs[0].clat.max())
        .max()
        .unwrap_or(0)
}

#[test]
fn seed1_one_reader_runs_alike_under_every_policy() {
    let jobs = jobs("seed1-sequential-readers.fio", &[("runtime", "1s")]);
    let iops: Vec<f64> = ["noop", "deadline", "cfq", "time-slice", "kyber", "bfq"]
        .iter()
        .map(|p| read_iops(&run(p, &[], &jobs)))
        .collect();
    let (lo, hi) = iops
        .iter()
        .fold((f64::MAX, 0f64), |(lo, hi), &v| (lo.min(v), hi.max(v)));
    assert!(hi <= lo * 1.2, "{iops:?}");
    assert!(
        (15_000.0..25_000.0).contains(&lo),
        "one sequential reader streams from the drive's cache: {lo}"
    );
}

#[test]
fn seed1_cfq_at_least_doubles_noop_with_eight_readers() {
    let jobs = jobs(
        "seed1-sequential-readers.fio",
        &[("runtime", "1s"), ("numjobs", "8")],
    );
    let (noop, cfq) = (
        read_iops(&run("noop", &[], &jobs)),
        read_iops(&run("cfq", &[], &jobs)),
    );
    assert!(cfq >= 2.0 * noop, "cfq {cfq:.0} vs noop {noop:.0}");
}

#[test]
fn seed3_deadline_keeps_up_with_noop_at_iodepth_2048() {
    let jobs = jobs("seed3-deep-queue.fio", &[("runtime", "2s")]);
    let (noop, deadline) = (
        read_iops(&run("noop", &[], &jobs)),
        read_iops(&run("deadline", &[], &jobs)),
    );
    assert!(
        deadline >= 0.95 * noop,
        "deadline {deadline:.0} vs noop {noop:.0}"
    );
}

#[test]
fn seed4_cfq_bounds_read_latency_under_a_streaming_writer() {
    let jobs = jobs("seed4-writer-readers.fio", &[("runtime", "5s")]);
    let (noop, cfq) = (
        max_read_latency(&run("noop", &[], &jobs)),
        max_read_latency(&run("cfq", &[], &jobs)),
    );
    assert!(
        cfq * 10 <= noop,
        "max read latency: cfq {cfq} ns vs noop {noop} ns"
    );
}
