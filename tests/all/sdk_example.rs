//! The out-of-tree example policy (examples/cscan-policy), built with the SDK as a third
//! party would: it runs as a component and natively with identical results, and its tunable
//! is validated the same way in both.

use schedhost::backend::sim::DeviceSpec;
use schedhost::frontend::jobs::parse_job_file;
use schedhost::frontend::jobs::sim;
use schedhost::frontend::plan::RunPlan;
use schedhost::policy::{NativePolicy, PolicyBackend};
use schedhost::report::{RunInfo, Summary, to_json};
use schedhost_policy_cscan::Cscan;

use crate::helpers::{component, runtime};

fn run(policy: Box<dyn PolicyBackend>, settings: &[(String, i64)]) -> String {
    let jobs = parse_job_file(
        "x.fio",
        "[global]\nbs=4k\nsize=16m\nruntime=300ms\n[r]\nrw=randread\niodepth=16\nnumjobs=3\n",
    )
    .unwrap();
    // A disk that serves in the order it is sent, so the order is the policy's: `sim:hdd`
    // reorders up to 31 commands itself, and C-SCAN ahead of that gains nothing to measure.
    let disk = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../examples/devices/in-order-disk.spec"
    );
    let device = DeviceSpec::parse(disk).unwrap();
    let outcome = sim::run(
        &jobs,
        &device,
        policy,
        settings,
        &RunPlan::default(),
        &mut |_| {},
    )
    .unwrap();
    let info = RunInfo {
        policy_source: "cscan".into(),
        device: "in-order-disk.spec".into(),
        device_model: "hdd".into(),
        seed: 1,
        settings: settings.to_vec(),
        real: None,
        trace: None,
    };
    serde_json::to_string(&to_json(&Summary {
        info: &info,
        jobs: &jobs,
        outcome: &outcome,
    }))
    .unwrap()
}

#[test]
fn example_policy_runs_as_component_and_natively_with_identical_results() {
    let Some(path) = component("cscan") else {
        return;
    };
    let runtime = runtime();
    let settings = vec![("max_sweep_kb".to_owned(), 64)];
    let wasm = run(
        Box::new(runtime.load(&path).unwrap().instantiate().unwrap()),
        &settings,
    );
    let native = run(Box::new(NativePolicy::<Cscan>::default()), &settings);
    assert_eq!(wasm, native);
}

#[test]
fn example_policy_rejects_out_of_range_tunable_in_both_modes() {
    let setup = schedhost_sdk::Setup {
        hw_queues: 1,
        queue_depth: 4,
        nr_requests: 8,
        rotational: true,
    };
    let bad = [("max_sweep_kb".to_owned(), 1)];
    let mut native = NativePolicy::<Cscan>::default();
    let native_err = native.init(&setup, &bad).unwrap().unwrap_err();
    assert_eq!(
        native_err,
        "cscan: max_sweep_kb=1 is out of range 4..=1073741824 KiB"
    );
    let Some(path) = component("cscan") else {
        return;
    };
    let mut wasm = runtime().load(&path).unwrap().instantiate().unwrap();
    assert_eq!(wasm.init(&setup, &bad).unwrap().unwrap_err(), native_err);
}

#[test]
fn cscan_serves_a_sweep_in_sector_order_through_the_host() {
    // C-SCAN on a random job must see fewer long seeks than FIFO: its mean latency is lower.
    let mean = |json: &str| -> f64 {
        let v: serde_json::Value = serde_json::from_str(json).unwrap();
        v["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|j| j["read"]["clat_ns"]["mean"].as_f64().unwrap())
            .sum::<f64>()
    };
    let cscan = run(Box::new(NativePolicy::<Cscan>::default()), &[]);
    let noop = run(schedhost::policy::native_policy("noop").unwrap(), &[]);
    assert!(
        mean(&cscan) < mean(&noop),
        "cscan {} vs noop {}",
        mean(&cscan),
        mean(&noop)
    );
}
