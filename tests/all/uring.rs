//! The io_uring driver on temp files: data verification through every policy, merged
//! requests in both directions, several devices, exactly-once completion, and the error
//! paths a user meets (existing files, missing files, short files, corrupt data).

use std::path::{Path, PathBuf};

use schedhost::backend::ring::{OpenRules, Target, TargetError};
use schedhost::core::{Nomerges, RqAffinity};
use schedhost::frontend::RunError;
use schedhost::frontend::jobs::real::{self, RealOutcome};
use schedhost::frontend::jobs::{JobSpec, parse_job_file};
use schedhost::frontend::plan::{RingOptions, RunPlan};
use schedhost::policy::{PolicyBackend, native_policy};

use crate::helpers::{component, runtime};

const POLICIES: [&str; 6] = ["noop", "deadline", "cfq", "time-slice", "kyber", "bfq"];

/// A fresh scratch directory under the target dir (a real filesystem with O_DIRECT, unlike
/// a tmpfs /tmp on some machines).
fn scratch(test: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("uring")
        .join(test);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn jobs(text: &str) -> Vec<JobSpec> {
    parse_job_file("test.fio", text).unwrap()
}

/// Policy `name` natively and, when built, as its component.
fn builds(name: &str) -> Vec<(&'static str, Box<dyn PolicyBackend>)> {
    let mut out: Vec<(&'static str, Box<dyn PolicyBackend>)> =
        vec![("native", native_policy(name).unwrap())];
    if let Some(path) = component(name) {
        let policy = runtime().load(&path).unwrap().instantiate().unwrap();
        out.push(("wasm", Box::new(policy)));
    }
    out
}

fn run(
    jobs: &[JobSpec],
    paths: &[PathBuf],
    policy: &str,
    options: &RunPlan,
) -> Result<RealOutcome, RunError> {
    let policies = paths
        .iter()
        .map(|_| native_policy(policy).unwrap())
        .collect();
    real::run(jobs, paths, policies, &[], options)
}

/// Every bio issued completed once, every request dispatched completed once.
fn assert_exactly_once(done: &RealOutcome) {
    let o = &done.outcome;
    for (s, stats) in o.submitters.iter().zip(&o.stats) {
        let ios: u64 = stats.dirs.iter().map(|d| d.ios).sum();
        assert_eq!(s.issued, s.completed, "ctx {}: issued vs completed", s.ctx);
        assert_eq!(ios, s.completed, "ctx {}: recorded vs completed", s.ctx);
        assert_eq!(stats.dirs.iter().map(|d| d.errors).sum::<u64>(), 0);
    }
    assert_eq!(o.core.dispatched, o.core.completed);
    assert_eq!(
        o.core.bios,
        o.submitters.iter().map(|s| s.issued).sum::<u64>()
    );
}

const RANDWRITE_VERIFY: &str = "
[w]
rw=randwrite
bs=4k
size=2m
iodepth=16
verify=crc32c
";

#[test]
fn uring_verifies_random_writes_through_every_policy_in_both_builds() {
    let dir = scratch("every_policy");
    let jobs = jobs(RANDWRITE_VERIFY);
    for name in POLICIES {
        for (build, policy) in builds(name) {
            let path = dir.join(format!("{name}-{build}.dat"));
            let done = real::run(&jobs, &[path], vec![policy], &[], &RunPlan::default())
                .unwrap_or_else(|e| panic!("{name} ({build}): {e}"));
            assert_exactly_once(&done);
            assert_eq!(
                done.outcome.verified_blocks, 512,
                "{name} ({build}): the verify pass reads back every block written"
            );
        }
    }
}

#[test]
fn uring_merges_sequential_bios_and_verifies_both_directions() {
    let dir = scratch("merges");
    let path = dir.join("seq.dat");
    let jobs = jobs(
        "
[w]
rw=write
bs=4k
size=4m
iodepth=32
verify=crc32c
",
    );
    let done = run(
        &jobs,
        std::slice::from_ref(&path),
        "deadline",
        &RunPlan::default(),
    )
    .unwrap();
    assert_exactly_once(&done);
    let c = done.outcome.core;
    assert!(
        c.back_merges > 0,
        "sequential writes and verify reads merge: {c:?}"
    );
    assert!(c.requests < c.bios);
    assert_eq!(done.outcome.verified_blocks, 1024);

    // Later read-only runs check what the first one wrote: one bio per request, so a
    // misplaced buffer in a merged write cannot cancel out in a merged read; then merged.
    let read = jobs_text_read(32);
    for nomerges in [Nomerges::Off, Nomerges::All] {
        let options = RunPlan {
            queue: schedhost::frontend::plan::QueueAttrs {
                nomerges,
                ..Default::default()
            },
            ..RunPlan::default()
        };
        let done = run(&read, std::slice::from_ref(&path), "noop", &options).unwrap();
        assert_exactly_once(&done);
        assert_eq!(done.outcome.core.back_merges > 0, nomerges == Nomerges::All);
        assert_eq!(done.outcome.verified_blocks, 1024);
    }
}

fn jobs_text_read(iodepth: u32) -> Vec<JobSpec> {
    jobs(&format!(
        "[r]\nrw=read\nbs=4k\nsize=4m\niodepth={iodepth}\nverify=crc32c\n"
    ))
}

#[test]
fn uring_mixed_reads_check_blocks_written_earlier_in_the_run() {
    let dir = scratch("mixed");
    let jobs = jobs(
        "
[m]
rw=randrw
bs=8k
size=1m
number_ios=2000
runtime=60s
time_based
iodepth=4
verify=crc32c
",
    );
    let done = run(&jobs, &[dir.join("m.dat")], "cfq", &RunPlan::default()).unwrap();
    assert_exactly_once(&done);
    let reads = done.outcome.stats[0].dirs[0].ios;
    assert!(
        done.outcome.verified_blocks > 128,
        "reads of written blocks are checked during the run and in the verify pass: {} of {reads}",
        done.outcome.verified_blocks
    );
}

#[test]
fn uring_stripes_blocks_over_several_devices_and_verifies_each() {
    let dir = scratch("stripes");
    let paths = [dir.join("a.dat"), dir.join("b.dat")];
    let jobs = jobs(RANDWRITE_VERIFY);
    let done = run(&jobs, &paths, "deadline", &RunPlan::default()).unwrap();
    assert_exactly_once(&done);
    assert_eq!(done.targets.len(), 2);
    for t in &done.targets {
        assert!(t.created);
        assert!(t.core.requests > 100, "{}: {:?}", t.path, t.core);
    }
    assert_eq!(done.outcome.verified_blocks, 512);
}

#[test]
fn uring_detects_a_corrupt_block_and_names_its_offset() {
    let dir = scratch("corrupt");
    let path = dir.join("c.dat");
    let write = jobs("[w]\nrw=write\nbs=4k\nsize=4m\niodepth=8\nverify=crc32c\n");
    run(
        &write,
        std::slice::from_ref(&path),
        "noop",
        &RunPlan::default(),
    )
    .unwrap();
    let mut data = std::fs::read(&path).unwrap();
    data[100 * 4096 + 2000] ^= 0x40;
    std::fs::write(&path, &data).unwrap();
    let err = run(&jobs_text_read(4), &[path], "noop", &RunPlan::default()).unwrap_err();
    match &err {
        RunError::Verify { mismatch, .. } => {
            assert_eq!(mismatch.offset, 100 * 4096);
            assert!(mismatch.problem.contains("corrupt"), "{err}");
        }
        other => panic!("expected a verify failure, got {other}"),
    }
}

#[test]
fn uring_refuses_to_overwrite_an_existing_file_without_the_flag() {
    let dir = scratch("overwrite");
    let path = dir.join("keep.dat");
    std::fs::write(&path, vec![7u8; 1 << 20]).unwrap();
    let write = jobs("[w]\nrw=write\nbs=4k\nsize=1m\n");
    let err = run(
        &write,
        std::slice::from_ref(&path),
        "noop",
        &RunPlan::default(),
    )
    .unwrap_err();
    assert!(
        matches!(err, RunError::Target(TargetError::WouldOverwrite { .. })),
        "{err}"
    );
    assert!(err.to_string().contains("--allow-overwrite"));
    assert!(
        std::fs::read(&path).unwrap().iter().all(|&b| b == 7),
        "the file is untouched"
    );
    let allowed = RunPlan {
        ring: RingOptions {
            allow_overwrite: true,
            ..RingOptions::default()
        },
        ..RunPlan::default()
    };
    let done = run(&write, std::slice::from_ref(&path), "noop", &allowed).unwrap();
    assert_exactly_once(&done);
    assert!(!std::fs::read(&path).unwrap().iter().all(|&b| b == 7));
}

#[test]
fn uring_read_only_jobs_neither_create_nor_outgrow_files() {
    let dir = scratch("readonly");
    let missing = dir.join("missing.dat");
    let read = jobs("[r]\nrw=randread\nbs=4k\nsize=1m\n");
    let err = run(
        &read,
        std::slice::from_ref(&missing),
        "noop",
        &RunPlan::default(),
    )
    .unwrap_err();
    assert!(
        matches!(err, RunError::Target(TargetError::Missing { .. })),
        "{err}"
    );
    assert!(!missing.exists());

    let short = dir.join("short.dat");
    std::fs::write(&short, vec![0u8; 64 << 10]).unwrap();
    let err = run(
        &read,
        std::slice::from_ref(&short),
        "noop",
        &RunPlan::default(),
    )
    .unwrap_err();
    assert!(
        err.to_string()
            .contains("holds 65536 bytes but the jobs need 1048576"),
        "{err}"
    );
    assert_eq!(std::fs::metadata(&short).unwrap().len(), 64 << 10);
}

#[test]
fn uring_refuses_a_directory_as_a_device() {
    let dir = scratch("directory");
    let read = jobs("[r]\nrw=read\nbs=4k\nsize=1m\n");
    let err = run(&read, &[dir], "noop", &RunPlan::default()).unwrap_err();
    assert!(
        err.to_string()
            .contains("not a regular file or a block device"),
        "{err}"
    );
}

#[test]
fn uring_runs_time_based_jobs_to_their_runtime() {
    let dir = scratch("runtime");
    let jobs = jobs("[r]\nrw=randwrite\nbs=4k\nsize=1m\niodepth=2\nruntime=200ms\ntime_based\n");
    let done = run(
        &jobs,
        &[dir.join("t.dat")],
        "time-slice",
        &RunPlan::default(),
    )
    .unwrap();
    assert_exactly_once(&done);
    let s = &done.outcome.submitters[0];
    let ran = s.finished_ns - s.started_ns;
    assert!(ran >= 200_000_000, "ran {ran} ns");
}

#[test]
fn uring_threads_complete_every_bio_once_under_each_rq_affinity() {
    let dir = scratch("rq_affinity");
    let jobs = jobs(
        "
[w]
rw=randwrite
bs=4k
size=1m
iodepth=8
numjobs=3
verify=crc32c

[m]
rw=randrw
bs=4k
size=1m
iodepth=4
numjobs=2
verify=crc32c
",
    );
    for (level, mode) in [
        (0, RqAffinity::Device),
        (1, RqAffinity::Group),
        (2, RqAffinity::Submitter),
    ] {
        for policy in ["noop", "cfq"] {
            let options = RunPlan {
                ring: RingOptions {
                    threads: Some(mode),
                    ..RingOptions::default()
                },
                ..RunPlan::default()
            };
            let path = dir.join(format!("{policy}-{level}.dat"));
            let done = run(&jobs, &[path], policy, &options)
                .unwrap_or_else(|e| panic!("rq_affinity={level} {policy}: {e}"));
            assert_exactly_once(&done);
            assert_eq!(done.outcome.submitters.len(), 5);
            assert!(
                done.outcome.verified_blocks >= 3 * 256,
                "rq_affinity={level} {policy}: every written block is read back: {}",
                done.outcome.verified_blocks
            );
        }
    }
}

#[test]
fn uring_threads_report_a_corrupt_block_checked_on_the_submitting_thread() {
    let dir = scratch("threads_corrupt");
    let path = dir.join("c.dat");
    let write = jobs("[w]\nrw=write\nbs=4k\nsize=1m\niodepth=4\nverify=crc32c\n");
    run(
        &write,
        std::slice::from_ref(&path),
        "noop",
        &RunPlan::default(),
    )
    .unwrap();
    let mut data = std::fs::read(&path).unwrap();
    data[7 * 4096 + 100] ^= 1;
    std::fs::write(&path, &data).unwrap();
    let read =
        jobs("[r]\nrw=read\nbs=4k\nsize=1m\niodepth=4\nnumjobs=2\nfilename=f\nverify=crc32c\n");
    let options = RunPlan {
        ring: RingOptions {
            threads: Some(RqAffinity::Submitter),
            ..RingOptions::default()
        },
        ..RunPlan::default()
    };
    let err = run(&read, &[path], "noop", &options).unwrap_err();
    match err {
        RunError::Verify { mismatch, .. } => assert_eq!(mismatch.offset, 7 * 4096),
        other => panic!("expected a verify failure, got {other}"),
    }
}

#[test]
fn uring_names_the_path_when_opening_is_not_permitted() {
    let dir = scratch("permission");
    let path = dir.join("locked.dat");
    std::fs::write(&path, vec![0u8; 1 << 20]).unwrap();
    let mut perms = std::fs::metadata(&path).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o444);
    std::fs::set_permissions(&path, perms).unwrap();
    // Root ignores the mode bits; the immutable attribute stops root too.
    let immutable = std::process::Command::new("chattr")
        .arg("+i")
        .arg(&path)
        .status()
        .is_ok_and(|s| s.success());
    let write = jobs("[w]\nrw=write\nbs=4k\nsize=1m\n");
    let allowed = RunPlan {
        ring: RingOptions {
            allow_overwrite: true,
            ..RingOptions::default()
        },
        ..RunPlan::default()
    };
    let result = run(&write, std::slice::from_ref(&path), "noop", &allowed);
    if immutable {
        let _ = std::process::Command::new("chattr")
            .arg("-i")
            .arg(&path)
            .status();
    }
    let err = result.unwrap_err().to_string();
    assert!(err.contains("locked.dat: opening it:"), "{err}");
    assert!(
        err.contains("Permission denied") || err.contains("Operation not permitted"),
        "{err}"
    );
}

#[test]
fn uring_swap_soak_thousand_swaps_through_the_control_socket_keep_data_verified() {
    use std::io::{BufRead, BufReader, Write};
    let dir = scratch("swap_soak");
    let socket = dir.join("ctl.sock");
    let jobs = jobs(
        "
[m]
rw=randrw
bs=4k
size=4m
iodepth=8
numjobs=2
runtime=8s
time_based
verify=crc32c
",
    );
    let names: Vec<String> = ["deadline", "cfq", "time-slice", "noop"]
        .iter()
        .map(|n| match component(n) {
            Some(path) => path.display().to_string(),
            None => format!("native:{n}"),
        })
        .collect();
    let client_socket = socket.clone();
    let client = std::thread::spawn(move || {
        for _ in 0..500 {
            if client_socket.exists() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let stream = std::os::unix::net::UnixStream::connect(&client_socket).unwrap();
        let mut writer = stream.try_clone().unwrap();
        let mut reader = BufReader::new(stream);
        let mut answer = String::new();
        for i in 0..1000 {
            writeln!(writer, "swap {}", names[i % 4]).unwrap();
            answer.clear();
            reader.read_line(&mut answer).unwrap();
            assert!(answer.contains("\"ok\":true"), "swap {i}: {answer}");
        }
    });
    let engine = runtime();
    let policies = vec![native_policy("noop").unwrap()];
    let done = real::run_controlled(
        &jobs,
        &[dir.join("soak.dat")],
        policies,
        &[],
        &RunPlan::default(),
        Some((socket.as_path(), &engine)),
    )
    .unwrap();
    client.join().unwrap();
    assert_exactly_once(&done);
    assert_eq!(done.outcome.swaps.len(), 1000);
    assert!(done.outcome.swaps.iter().all(|s| s.result.is_ok()));
    assert!(done.outcome.verified_blocks > 1000);
    assert!(done.outcome.ejections.is_empty());
}

#[test]
fn uring_watchdog_ejects_a_policy_that_asks_to_sleep_an_hour_within_its_period() {
    let Some(path) = component("chaos") else {
        return;
    };
    let dir = scratch("watchdog_sleep");
    let policy = runtime().load(&path).unwrap().instantiate().unwrap();
    let options = RunPlan {
        supervision: schedhost::core::Supervision {
            watchdog_ns: Some(500_000_000),
            ..Default::default()
        },
        ..RunPlan::default()
    };
    let started = std::time::Instant::now();
    let done = real::run(
        &jobs(RANDWRITE_VERIFY),
        &[dir.join("w.dat")],
        vec![Box::new(policy)],
        &[("mode".into(), 10), ("after".into(), 10)],
        &options,
    )
    .unwrap();
    assert_exactly_once(&done);
    let ejections = &done.outcome.ejections;
    assert_eq!(ejections.len(), 1, "{ejections:?}");
    assert_eq!(ejections[0].kind, "starved");
    // The policy asked to be woken an hour later; the run ends with its I/O done instead.
    assert!(started.elapsed() < std::time::Duration::from_secs(60));
}

#[test]
fn uring_refuses_to_write_to_a_block_device_in_use() {
    use std::os::unix::fs::OpenOptionsExt;

    let dir = scratch("busy_block_device");
    let backing = dir.join("loop.img");
    std::fs::write(&backing, vec![0u8; 8 << 20]).unwrap();
    // A loop device over a scratch file (needs root and the loop driver; skipped without).
    let attached = std::process::Command::new("losetup")
        .args(["-f", "--show"])
        .arg(&backing)
        .output();
    let Some(device) = attached
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()))
    else {
        eprintln!("skipping: no loop device (needs root)");
        return;
    };
    let rules = OpenRules {
        writes: true,
        allow_overwrite: true,
        direct: true,
    };
    // Held exclusively elsewhere, as a mount holds it: refused, naming it.
    let holder = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_EXCL)
        .open(&device)
        .unwrap();
    let busy = Target::open(&device, 0, rules);
    drop(holder);
    let free = Target::open(&device, 0, rules).map(drop);
    let _ = std::process::Command::new("losetup")
        .arg("-d")
        .arg(&device)
        .status();
    match busy {
        Err(TargetError::Busy { path }) => assert_eq!(path, device),
        other => panic!("expected Busy, got {other:?}"),
    }
    free.unwrap();
}
