//! The same seed gives byte-identical JSON; a different seed gives a different random run.

use schedhost::device::DeviceSpec;
use schedhost::policy::{PolicyBackend, WasmRuntime};
use schedhost::report::{RunInfo, Summary, to_json};
use schedhost::sim::{self, SimOptions};
use schedhost::workload::parse_job_file;

use crate::helpers::{component, runtime};

const JOB: &str = "[global]\nbs=4k\nsize=32m\nruntime=500ms\n[rand]\nrw=randread\niodepth=8\nnumjobs=2\n[seq]\nrw=write\niodepth=2\n";

fn json_for(policy: Box<dyn PolicyBackend>, seed: u64) -> String {
    let jobs = parse_job_file("det.fio", JOB).unwrap();
    let device = DeviceSpec::parse("sim:hdd").unwrap();
    let options = SimOptions {
        seed,
        ..SimOptions::default()
    };
    let outcome = sim::run(&jobs, &device, policy, &[], options, &mut |_| {}).unwrap();
    let info = RunInfo {
        policy_source: "x".into(),
        device: "sim:hdd".into(),
        device_model: "hdd".into(),
        seed,
        settings: vec![],
        real: None,
        trace: None,
    };
    serde_json::to_string_pretty(&to_json(&Summary {
        info: &info,
        jobs: &jobs,
        outcome: &outcome,
    }))
    .unwrap()
}

fn wasm_noop(runtime: &WasmRuntime) -> Option<Box<dyn PolicyBackend>> {
    let path = component("noop")?;
    Some(Box::new(
        runtime.load(&path).unwrap().instantiate().unwrap(),
    ))
}

#[test]
fn same_seed_gives_byte_identical_json() {
    let native = || schedhost::policy::native_policy("noop").unwrap();
    let a = json_for(native(), 7);
    assert_eq!(a, json_for(native(), 7));
    assert_ne!(a, json_for(native(), 8), "the seed drives the random job");
    let runtime = runtime();
    if let (Some(x), Some(y)) = (wasm_noop(&runtime), wasm_noop(&runtime)) {
        assert_eq!(json_for(x, 7), json_for(y, 7));
    }
}

#[test]
fn noop_component_and_native_noop_schedule_identically() {
    let runtime = runtime();
    let Some(wasm) = wasm_noop(&runtime) else {
        return;
    };
    let native = schedhost::policy::native_policy("noop").unwrap();
    assert_eq!(json_for(wasm, 3), json_for(native, 3));
}
