use super::*;

#[test]
fn spec_file_overrides_named_parameters() {
    let spec = DeviceSpec::parse_file(
        Path::new("d.spec"),
        "# slow disk\nmodel = hdd\nrpm = 5400\nncq_depth = 1\n",
    )
    .unwrap();
    let DeviceSpec::Hdd(p) = spec else {
        panic!("expected hdd")
    };
    assert_eq!((p.rpm, p.ncq_depth, p.heads), (5400, 1, 4));
}

#[test]
fn spec_file_errors_name_line_and_key() {
    let err = DeviceSpec::parse_file(Path::new("d.spec"), "model = hdd\nspeed = 3\n")
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("d.spec:2: unknown hdd parameter `speed`"),
        "{err}"
    );
    let err = DeviceSpec::parse_file(Path::new("d.spec"), "rpm = 3\n")
        .unwrap_err()
        .to_string();
    assert!(err.contains("d.spec:1: `rpm` before `model"), "{err}");
    let err = DeviceSpec::parse_file(Path::new("d.spec"), "model = ssd\nchannels = 0\n")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("d.spec:2: `channels` must be at least 1"),
        "{err}"
    );
}

#[test]
fn spec_values_that_size_tables_or_wrap_addresses_are_bounded() {
    for (text, key) in [
        ("model = ssd\nchannels = 4000000000\n", "channels"),
        (
            "model = hdd\ncapacity_sectors = 18446744073709551615\n",
            "capacity_sectors",
        ),
        (
            "model = null\nlatency_ns = 18446744073709551615\n",
            "latency_ns",
        ),
        ("model = hdd\ncache_segments = 99999999\n", "cache_segments"),
    ] {
        let err = DeviceSpec::parse_file(Path::new("d.spec"), text)
            .unwrap_err()
            .to_string();
        assert!(err.contains(&format!("d.spec:2: `{key}`")), "{err}");
        assert!(err.contains("limit"), "{err}");
    }
}
