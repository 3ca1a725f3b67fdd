//! Loading policies: files that are not components, components of other interfaces or
//! versions, and imports are refused with a message naming the file and the problem.

use std::path::Path;

use schedhost::policy::{LoadError, PolicyBackend, resolve};
use schedhost_sdk::INTERFACE_VERSION;

use crate::helpers::{component, runtime};

fn load_wat(wat: &str) -> LoadError {
    let bytes = wat::parse_str(wat).expect("test component parses");
    runtime()
        .load_bytes(Path::new("p.wasm"), &bytes)
        .expect_err("must be refused")
}

#[test]
fn text_file_is_not_wasm() {
    let err = runtime()
        .load_bytes(Path::new("job.fio"), b"[global]\n")
        .unwrap_err();
    assert!(matches!(err, LoadError::NotWasm { .. }));
    assert_eq!(
        err.to_string(),
        "job.fio is not a WebAssembly file (it does not start with \\0asm)"
    );
}

#[test]
fn core_module_is_refused_with_build_hint() {
    let err = runtime()
        .load_bytes(Path::new("m.wasm"), b"\0asm\x01\0\0\0")
        .unwrap_err();
    assert!(matches!(err, LoadError::CoreModule { .. }));
    assert!(err.to_string().contains("cargo xtask build"), "{err}");
}

#[test]
fn truncated_component_is_invalid() {
    let err = runtime()
        .load_bytes(Path::new("t.wasm"), b"\0asm\x0d\0\x01\0\x01\x05")
        .unwrap_err();
    assert!(matches!(err, LoadError::Invalid { .. }), "{err}");
    assert!(
        err.to_string()
            .starts_with("t.wasm is not a valid component"),
        "{err}"
    );
}

#[test]
fn component_of_another_interface_version_is_refused() {
    let err = load_wat(
        r#"(component (instance $i) (export "schedhost:policy/scheduler@0.1.0" (instance $i)))"#,
    );
    assert!(matches!(err, LoadError::Version { .. }), "{err}");
    assert_eq!(
        err.to_string(),
        format!(
            "p.wasm implements schedhost:policy/scheduler@0.1.0, but this schedhost speaks schedhost:policy/scheduler@{INTERFACE_VERSION}; rebuild the policy from its source against schedhost-sdk {INTERFACE_VERSION} (`cargo xtask build-policy DIR`)"
        )
    );
}

#[test]
fn component_without_the_interface_is_not_a_policy() {
    let err =
        load_wat(r#"(component (instance $i) (export "example:other/thing@1.0.0" (instance $i)))"#);
    assert!(matches!(err, LoadError::NotPolicy { .. }), "{err}");
    assert!(
        err.to_string()
            .contains("it exports: example:other/thing@1.0.0"),
        "{err}"
    );
}

#[test]
fn component_with_the_name_but_not_the_functions_is_invalid() {
    let err = load_wat(&format!(
        r#"(component (instance $i) (export "schedhost:policy/scheduler@{INTERFACE_VERSION}" (instance $i)))"#,
    ));
    assert!(matches!(err, LoadError::Invalid { .. }), "{err}");
}

#[test]
fn component_with_imports_is_refused() {
    let err = load_wat(r#"(component (import "wasi:cli/environment@0.2.0" (instance)))"#);
    assert!(matches!(err, LoadError::Imports { .. }), "{err}");
    assert!(
        err.to_string()
            .contains("imports wasi:cli/environment@0.2.0"),
        "{err}"
    );
}

#[test]
fn unknown_policy_name_lists_where_it_looked() {
    let err = resolve("no-such-policy").unwrap_err().to_string();
    assert!(
        err.contains("no bundled policy 'no-such-policy'") && err.contains("native:NAME"),
        "{err}"
    );
    let err = resolve("missing/dir/p.wasm").unwrap_err().to_string();
    assert_eq!(err, "policy file missing/dir/p.wasm does not exist");
}

#[test]
fn bundled_noop_component_reports_its_identity() {
    let Some(path) = component("noop") else {
        return;
    };
    let mut policy = runtime().load(&path).unwrap().instantiate().unwrap();
    let info = policy.info().unwrap();
    assert_eq!((info.name.as_str(), info.merge_veto), ("noop", false));
    assert!(policy.tunables().unwrap().is_empty());
}

#[test]
fn every_native_name_constructs_that_policy() {
    for name in schedhost::policy::native_names() {
        let mut policy = schedhost::policy::native_policy(name)
            .unwrap_or_else(|| panic!("native:{name} is listed but not built"));
        assert_eq!(policy.info().unwrap().name, name);
        assert!(matches!(
            resolve(&format!("native:{name}")),
            Ok(schedhost::policy::PolicySource::Native(_))
        ));
    }
}

#[test]
fn every_bundled_component_matches_its_native_twin() {
    for name in schedhost::policy::native_names() {
        let Some(path) = component(name) else {
            continue;
        };
        let mut wasm = runtime().load(&path).unwrap().instantiate().unwrap();
        let mut native = schedhost::policy::native_policy(name).unwrap();
        assert_eq!(wasm.info().unwrap(), native.info().unwrap(), "{name}");
        assert_eq!(
            wasm.tunables().unwrap(),
            native.tunables().unwrap(),
            "{name}"
        );
    }
}
