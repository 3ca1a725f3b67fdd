//! Loading components: shapes the host refuses, and what it accepts.

use super::*;

/// Instantiates the component `wat` in a store under a `cap_mib` memory cap, as
/// [`LoadedPolicy::instantiate`] does; the error if it is refused.
fn instantiate_under_cap(wat: &str, cap_mib: usize) -> Result<(), String> {
    let runtime = WasmRuntime::new().expect("an engine");
    let bytes = wat::parse_str(wat).expect("the test component parses");
    let component = Component::from_binary(&runtime.engine, &bytes).expect("it compiles");
    let caps = Caps {
        memory_bytes: cap_mib << 20,
        hit: false,
        peak: 0,
    };
    let mut store = Store::new(&runtime.engine, caps);
    store.limiter(|caps| caps);
    Linker::<Caps>::new(&runtime.engine)
        .instantiate(&mut store, &component)
        .map(|_| ())
        .map_err(|e| format!("{e:#}"))
}

/// A component of `instances` core instances, each with a memory of `pages` pages.
fn many_memories(instances: usize, pages: u32) -> String {
    let mut wat = format!("(component (core module $m (memory {pages}))");
    for i in 0..instances {
        wat.push_str(&format!(" (core instance $i{i} (instantiate $m))"));
    }
    wat.push(')');
    wat
}

#[test]
fn the_memory_cap_holds_for_all_of_a_policys_memories_together() {
    // Three memories of 32 MiB: each within a 64 MiB cap, together past it.
    let err = instantiate_under_cap(&many_memories(3, 512), 64).unwrap_err();
    assert!(err.contains("all the policy's memories together"), "{err}");
    assert!(instantiate_under_cap(&many_memories(1, 512), 64).is_ok());
}

#[test]
fn a_policy_cannot_take_more_than_its_share_of_the_instance_pool() {
    // Sixteen tiny instances: no memory cap is near, the instance count is.
    let err = instantiate_under_cap(&many_memories(16, 1), 64).unwrap_err();
    assert!(err.contains("instance"), "{err}");
    let most = crate::policy::calls::MAX_CORE_INSTANCES;
    assert!(instantiate_under_cap(&many_memories(most, 1), 64).is_ok());
}
