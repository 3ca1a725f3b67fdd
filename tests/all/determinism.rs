//! The same seed gives byte-identical JSON; a different seed gives a different random run.

use schedhost::backend::sim::DeviceSpec;
use schedhost::frontend::jobs::parse_job_file;
use schedhost::frontend::jobs::sim;
use schedhost::frontend::plan::RunPlan;
use schedhost::policy::{PolicyBackend, WasmRuntime};
use schedhost::report::{RunInfo, Summary, to_json};

use crate::helpers::{component, runtime};

const JOB: &str = "[global]\nbs=4k\nsize=32m\nruntime=500ms\n[rand]\nrw=randread\niodepth=8\nnumjobs=2\n[seq]\nrw=write\niodepth=2\n";

fn json_for(policy: Box<dyn PolicyBackend>, seed: u64) -> String {
    let jobs = parse_job_file("det.fio", JOB).unwrap();
    let device = DeviceSpec::parse("sim:hdd").unwrap();
    let options = RunPlan {
        seed,
        ..RunPlan::default()
    };
    let outcome = sim::run(&jobs, &device, policy, &[], &options, &mut |_| {}).unwrap();
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

#[test]
fn every_policy_schedules_identically_natively_through_its_core_module_and_through_the_component_api()
 {
    let runtime = runtime();
    for name in ["noop", "deadline", "cfq", "time-slice", "kyber", "bfq"] {
        let Some(path) = component(name) else {
            return;
        };
        let loaded = runtime.load(&path).unwrap();
        assert_eq!(loaded.crossing(), "core module", "{name}");
        let component_api = loaded.clone().through_component();
        assert_eq!(component_api.crossing(), "component");
        let native = json_for(schedhost::policy::native_policy(name).unwrap(), 5);
        let core = json_for(Box::new(loaded.instantiate().unwrap()), 5);
        let api = json_for(Box::new(component_api.instantiate().unwrap()), 5);
        assert_eq!(core, native, "{name}: core module against native");
        assert_eq!(api, native, "{name}: component API against native");
    }
}
