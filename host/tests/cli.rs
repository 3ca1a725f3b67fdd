//! The `schedhost` binary: reports, determinism and error messages as a user sees them.

use std::path::PathBuf;
use std::process::{Command, Output};

fn schedhost(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_schedhost"))
        .args(args)
        .output()
        .expect("schedhost starts")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn temp_file(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("schedhost-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// Asserts a failed run: non-zero exit, one clear message, no panic.
fn assert_fails_with(out: &Output, expected: &str) {
    let err = stderr(out);
    assert!(
        !out.status.success(),
        "expected failure, got success; stderr: {err}"
    );
    assert!(err.contains(expected), "stderr lacks {expected:?}:\n{err}");
    assert!(
        !err.contains("panicked") && !err.contains("RUST_BACKTRACE"),
        "panic:\n{err}"
    );
}

const QUICK: [&str; 6] = [
    "--name=r",
    "--rw=randread",
    "--bs=4k",
    "--size=16m",
    "--iodepth=4",
    "--runtime=200ms",
];

#[test]
fn json_report_has_fio_shape_and_schedhost_section() {
    let mut args = vec!["--policy", "native:noop", "--output-format", "json"];
    args.extend(QUICK);
    let out = schedhost(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("valid JSON");
    let read = &v["jobs"][0]["read"];
    assert!(read["iops"].as_f64().unwrap() > 0.0);
    assert!(read["total_ios"].as_u64().unwrap() > 0);
    assert!(read["io_bytes"].as_u64().unwrap() > 0);
    assert!(read["clat_ns"]["percentile"]["99.000000"].as_u64().unwrap() > 0);
    assert!(read["clat_ns"]["max"].as_u64() >= read["clat_ns"]["min"].as_u64());
    assert_eq!(v["schedhost"]["policy"]["name"], "noop");
    assert_eq!(v["schedhost"]["device"]["model"], "hdd");
    let requests = &v["schedhost"]["requests"];
    assert_eq!(requests["dispatched"], requests["completed"]);
}

#[test]
fn same_seed_gives_byte_identical_json_from_the_binary() {
    let run = |seed: &str| {
        let mut args = vec![
            "--policy",
            "native:noop",
            "--output-format",
            "json",
            "--seed",
            seed,
        ];
        args.extend(QUICK);
        schedhost(&args).stdout
    };
    assert_eq!(run("5"), run("5"));
    assert_ne!(run("5"), run("6"));
}

#[test]
fn text_report_shows_job_group_and_scheduler_summary() {
    let mut args = vec!["--policy", "native:noop"];
    args.extend(QUICK);
    let out = schedhost(&args);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("r: (groupid=0, jobs=1)"), "{text}");
    assert!(text.contains("read: IOPS="), "{text}");
    assert!(text.contains("clat percentiles"), "{text}");
    assert!(text.contains("Run status group 0 (all jobs):"), "{text}");
    assert!(text.contains("schedhost: policy noop"), "{text}");
}

#[test]
fn missing_policy_file_is_named() {
    let mut args = vec!["--policy", "missing/policy.wasm"];
    args.extend(QUICK);
    assert_fails_with(
        &schedhost(&args),
        "policy file missing/policy.wasm does not exist",
    );
}

#[test]
fn non_wasm_policy_file_is_named() {
    let path = temp_file("notwasm.wasm", "hello");
    let mut args = vec!["--policy", path.to_str().unwrap()];
    args.extend(QUICK);
    assert_fails_with(&schedhost(&args), "is not a WebAssembly file");
}

#[test]
fn broken_job_file_names_file_and_line() {
    let path = temp_file("broken.fio", "[a]\nsize=1m\nverify=crc32c\n");
    let out = schedhost(&["--policy", "native:noop", path.to_str().unwrap()]);
    assert_fails_with(&out, "broken.fio:3: unsupported fio option `verify`");
}

#[test]
fn unknown_tunable_is_refused_by_the_policy() {
    let mut args = vec!["--policy", "native:noop", "--set", "fifo_batch=4"];
    args.extend(QUICK);
    assert_fails_with(
        &schedhost(&args),
        "noop has no tunables (asked for 'fifo_batch')",
    );
}

#[test]
fn missing_job_and_bad_device_are_explained() {
    assert_fails_with(&schedhost(&["--policy", "native:noop"]), "no job given");
    let mut args = vec!["--policy", "native:noop", "--device", "sim:tape"];
    args.extend(QUICK);
    assert_fails_with(
        &schedhost(&args),
        "--device sim:tape: not a simulated device",
    );
}

#[test]
fn inspect_lists_tunables_of_a_component() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/policies/cscan.wasm");
    if !path.is_file() {
        assert!(
            std::env::var_os("SCHEDHOST_REQUIRE_WASM").is_none(),
            "{} missing",
            path.display()
        );
        eprintln!("skipping: {} not built", path.display());
        return;
    }
    let out = schedhost(&["policy", "inspect", path.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(text.contains("policy:     cscan 0.1.0"), "{text}");
    assert!(
        text.contains("interface:  schedhost:policy/scheduler@0.1.0"),
        "{text}"
    );
    assert!(
        text.contains("max_sweep_kb  default 4096 KiB, range 4..=1073741824"),
        "{text}"
    );
}
