//! The simulator against recorded drives: DiskSim's descriptions import, the spec file the
//! importer writes is the same drive, and the demerit figures stay where BENCHMARKS.md says.

use std::path::{Path, PathBuf};

use schedhost::backend::sim::DeviceSpec;
use schedhost::backend::sim::drive::disksim::{import, import_parv, to_spec_text};
use schedhost::fidelity::{parse_trace, validate};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/validation")
        .join(name)
}

fn demerit(trace: &str, device: &DeviceSpec) -> f64 {
    let text = std::fs::read_to_string(data(trace)).unwrap();
    validate(&parse_trace(&text).unwrap(), device)
        .unwrap()
        .demerit_percent
}

#[test]
fn the_three_recorded_drives_import_and_validate_within_their_measured_demerit() {
    // The figures of BENCHMARKS.md ("Simulator validation"), with a little room: a change
    // that moves one past its bound changed the model and must say so there.
    for (drive, bound) in [("atlas10k", 4.9), ("cheetah4LP", 5.0), ("hp_c3323a", 2.9)] {
        let device = DeviceSpec::parse(data(&format!("{drive}.parv")).to_str().unwrap()).unwrap();
        let d = demerit(&format!("{drive}.trace"), &device);
        assert!(d <= bound, "{drive}: demerit {d:.2} % (bound {bound} %)");
    }
}

#[test]
fn an_imported_spec_file_is_the_same_drive_as_the_disksim_files() {
    let imported = import_parv(&data("hp_c3323a.parv")).unwrap();
    let text = to_spec_text(&imported, Path::new("hp_c3323a.parv"));
    let from_text = DeviceSpec::parse_file(Path::new("hp.spec"), &text).unwrap();
    let DeviceSpec::Drive(params) = &from_text else {
        panic!("not a drive: {from_text:?}")
    };
    assert_eq!(**params, imported.params);
    assert_eq!(
        demerit("hp_c3323a.trace", &from_text),
        demerit(
            "hp_c3323a.trace",
            &DeviceSpec::Drive(Box::new(imported.params.clone()))
        )
    );
}

#[test]
fn what_the_importer_cannot_represent_is_listed() {
    let imported = import(&data("cheetah4LP.diskspecs")).unwrap();
    let notes = imported.not_represented.join("\n");
    assert!(notes.contains("slipped"), "{notes}");
    assert!(notes.contains("Fast write level = 1"), "{notes}");
    assert!(imported.params.zones.len() > 1 && imported.params.seek.len() > 100);
}

#[test]
fn broken_disksim_files_and_specs_are_refused_with_file_and_reason() {
    let dir = std::env::temp_dir().join(format!("schedhost-disksim-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let specs = dir.join("bad.diskspecs");
    std::fs::write(
        &specs,
        "disksim_disk X {\n  Model = source missing.model,\n}\n",
    )
    .unwrap();
    let err = import(&specs).unwrap_err().to_string();
    assert!(err.contains("missing.model"), "{err}");
    std::fs::write(&specs, "disksim_disk X {\n  Model = source bad.model\n").unwrap();
    let err = import(&specs).unwrap_err().to_string();
    assert!(
        err.contains("bad.diskspecs") && err.contains("unclosed"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
    for (text, want) in [
        (
            "model = drive\nzone = 0 10 0 1 1 0\nseek = 1 1\n",
            "1 to 1048576 sectors per track",
        ),
        (
            "model = drive\nzone = 0 10 100 1 1 18446744073709551615\n",
            "more than the zone's",
        ),
        (
            "model = drive\nzone = 0 10 100 1 1 0\nseek = 5 1\nseek = 3 1\n",
            "distances must rise",
        ),
        (
            "model = drive\nzone = 0 9 100 1 1 0\nseek = 1 1\ncapacity_sectors = 99999999\n",
            "more than the zones hold",
        ),
    ] {
        let err = DeviceSpec::parse_file(Path::new("d.spec"), text)
            .unwrap_err()
            .to_string();
        assert!(err.contains(want), "{text:?}: {err}");
    }
}

#[test]
fn an_extreme_drive_spec_serves_its_requests_without_overflow() {
    // One revolution a minute, a million sectors a track and the longest seek allowed:
    // products of the two pass u64.
    let spec = DeviceSpec::parse_file(
        Path::new("slow.spec"),
        "model = drive\nrpm = 1\nsurfaces = 1\nzone = 0 3 1048576 1048575 1048575 0\nseek = 1 1000\ncapacity_sectors = 4194304\n",
    )
    .unwrap();
    let trace = parse_trace("R Hit 4194000 200 1 0\nW Hit 0 1048576 1 0\nR Hit 8 8 1 0\n").unwrap();
    let v = validate(&trace, &spec).unwrap();
    assert_eq!(v.requests, 3);
    assert!(v.simulated.max_us.is_finite() && v.simulated.max_us > 0.0);
}
