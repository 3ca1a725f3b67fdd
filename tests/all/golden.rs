//! Golden reports: every bundled job file under every bundled policy, run on the default
//! simulated disk, gives the same JSON report, byte for byte, as when the golden file was
//! written. The engine's refactors must not change a simulated result; a change that means
//! to (a model fix, a new field) rewrites the file with `SCHEDHOST_BLESS=1` and says why in
//! its commit.
//!
//! The file keeps each report's length and FNV-1a hash, not the report itself; on a mismatch
//! the test writes the report it got beside the file for a diff against `schedhost`'s own.

use std::fmt::Write;
use std::path::{Path, PathBuf};

use schedhost::backend::sim::DeviceSpec;
use schedhost::frontend::jobs::parse_job_file;
use schedhost::frontend::jobs::sim;
use schedhost::frontend::plan::RunPlan;
use schedhost::policy::native_policy;
use schedhost::report::{RunInfo, Summary, to_json};

const POLICIES: [&str; 6] = ["noop", "deadline", "cfq", "time-slice", "kyber", "bfq"];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The JSON report `schedhost --policy native:POLICY JOB --output-format json` prints.
fn report(job: &Path, policy: &str) -> String {
    let text = std::fs::read_to_string(job).unwrap();
    let name = job.file_name().unwrap().to_string_lossy().into_owned();
    let jobs = parse_job_file(&name, &text).unwrap();
    let device = DeviceSpec::parse("sim:hdd").unwrap();
    let outcome = sim::run(
        &jobs,
        &device,
        native_policy(policy).unwrap(),
        &[],
        &RunPlan::default(),
        &mut |_| {},
    )
    .unwrap();
    let info = RunInfo {
        policy_source: format!("native:{policy}"),
        device: "sim:hdd".into(),
        device_model: device.name().into(),
        seed: RunPlan::default().seed,
        settings: Vec::new(),
        real: None,
        trace: None,
    };
    let summary = Summary {
        info: &info,
        jobs: &jobs,
        outcome: &outcome,
    };
    format!("{:#}\n", to_json(&summary))
}

#[test]
fn golden_simulated_reports_are_byte_identical_for_every_bundled_job_and_policy() {
    let mut jobs: Vec<PathBuf> = std::fs::read_dir(root().join("examples/jobs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "fio"))
        .collect();
    jobs.sort();
    let mut got = String::new();
    let mut reports = Vec::new();
    for job in &jobs {
        for policy in POLICIES {
            let text = report(job, policy);
            let name = job.file_name().unwrap().to_string_lossy().into_owned();
            let _ = writeln!(
                got,
                "{name} {policy} {} {:016x}",
                text.len(),
                fnv1a(text.as_bytes())
            );
            reports.push((format!("{name}.{policy}.json"), text));
        }
    }
    let golden = root().join("tests/golden/sim-reports.txt");
    if std::env::var_os("SCHEDHOST_BLESS").is_some() {
        std::fs::write(&golden, &got).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&golden).unwrap();
    if want != got {
        let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("golden");
        std::fs::create_dir_all(&out).unwrap();
        for (name, text) in &reports {
            std::fs::write(out.join(name), text).unwrap();
        }
        let differ: Vec<&str> = got
            .lines()
            .zip(want.lines())
            .filter(|(g, w)| g != w)
            .map(|(g, _)| g)
            .collect();
        panic!(
            "simulated reports changed (this run's reports are in {}):\n{}",
            out.display(),
            differ.join("\n")
        );
    }
}
