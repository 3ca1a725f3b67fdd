//! The fit's checks: a spec fitted to probes of known devices serves them back.

use schedhost::backend::sim::DeviceModel as _;

use schedhost::backend::sim::SsdParams;

use super::fit::*;

#[test]
fn a_depth_1_tail_is_fitted_as_the_exponential_that_gives_its_p99() {
    let qd1 = Latency {
        mean_ns: 40_000.0,
        p99_ns: 76_000.0,
    };
    assert!((jitter_ns(qd1) - 10_000.0).abs() < 100.0);
    let flat = Latency {
        mean_ns: 40_000.0,
        p99_ns: 40_000.0,
    };
    assert_eq!(jitter_ns(flat), 0.0);
}

/// Probes of a device whose latency at depth `d` is `base_ns + (d − 1) × per_ahead_ns`.
fn linear_device(base_ns: f64, per_ahead_ns: f64) -> Probes {
    let iops = |d: u32| f64::from(d) * 1e9 / (base_ns + f64::from(d - 1) * per_ahead_ns);
    Probes {
        qd1_iops: iops(1),
        qd1_latency: Latency::default(),
        deeper_iops: DEEPER.map(iops),
        deeper_p99_ns: [0.0; DEEPER.len()],
        mixed_iops: None,
        together: None,
        write_bps: Some(1.0e9),
        write_4k_iops: Some(1e9 / 48_000.0),
        read_bps: 1.0e9,
    }
}

fn fitted(spec: &str, key: &str) -> u64 {
    spec.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(" = ")?.parse().ok())
        .unwrap_or_else(|| panic!("no {key} in\n{spec}"))
}

/// Reads the spec back as `compare --device` would.
fn spec_params(spec: &str) -> SsdParams {
    let parsed =
        schedhost::backend::sim::DeviceSpec::parse_file(std::path::Path::new("fitted.spec"), spec)
            .expect("the spec parses");
    let schedhost::backend::sim::DeviceSpec::Ssd(params) = parsed else {
        panic!("an ssd spec:\n{spec}");
    };
    params
}

/// Reads the spec back as `compare --device` would, and runs it.
fn spec_iops(spec: &str, depth: u32) -> f64 {
    closed_loop_iops(spec_params(spec), depth, 200_000_000)
}

/// Probes of the flash model itself with `params`: rates and tails as the model gives them
/// (no mixed probe: see [`with_mixed_probe`]).
fn probes_of(params: SsdParams) -> Probes {
    let run = |depth| closed_loop(params, depth, 200_000_000);
    let qd1 = run(1);
    Probes {
        qd1_iops: qd1.iops,
        qd1_latency: Latency {
            mean_ns: 1e9 / qd1.iops,
            p99_ns: qd1.p99_ns,
        },
        deeper_iops: DEEPER.map(|d| run(d).iops),
        deeper_p99_ns: DEEPER.map(|d| run(d).p99_ns),
        mixed_iops: None,
        together: Some(run(TOGETHER_DEPTH).per_instant / f64::from(TOGETHER_DEPTH)),
        write_bps: None,
        write_4k_iops: None,
        read_bps: 1.0e9,
    }
}

#[test]
fn a_tail_in_proportion_to_the_latency_is_fitted_at_depth_1_and_holds_at_every_depth() {
    // A device whose jitter is 400 ‰ of each request's time on it: its p99 stays about
    // twice its mean however deep the queue, as this machine's virtual disk's does.
    let device = SsdParams {
        channels: 6,
        dies_per_channel: 1,
        read_ns: 40_000,
        overhead_ns: 5_000,
        contention_ns: 5_000,
        jitter_permille: 400,
        channel_bytes_per_s: 10_000_000_000,
        capacity_sectors: 1 << 21,
        ..SsdParams::default()
    };
    let probes = probes_of(device);
    let spec = ssd_spec(&probes, 1 << 21);
    let permille = fitted(&spec, "jitter_permille");
    assert!((300..=500).contains(&permille), "{spec}");
    assert_the_spec_gives_the_probes_back(&spec, &probes);
}

/// At every depth past 1, `spec` simulates the probed p99 within −20 % and +25 % and the
/// probed IOPS within ±10 %.
fn assert_the_spec_gives_the_probes_back(spec: &str, probes: &Probes) {
    let fitted = spec_params(spec);
    for ((depth, p99), iops) in DEEPER
        .into_iter()
        .zip(probes.deeper_p99_ns)
        .zip(probes.deeper_iops)
    {
        let run = closed_loop(fitted, depth, 200_000_000);
        let (tail, rate) = (run.p99_ns / p99, run.iops / iops);
        assert!(
            (0.8..=1.25).contains(&tail) && (0.9..=1.1).contains(&rate),
            "depth {depth}: p99 {tail:.2}, IOPS {rate:.2} of the probed\n{spec}"
        );
    }
}

#[test]
fn a_device_that_completes_what_was_sent_together_is_fitted_so_and_one_that_does_not_is_not() {
    let device = |together| SsdParams {
        channels: 16,
        dies_per_channel: 1,
        read_ns: 40_000,
        overhead_ns: 5_000,
        contention_ns: 3_000,
        jitter_permille: 300,
        complete_together: together,
        channel_bytes_per_s: 10_000_000_000,
        capacity_sectors: 1 << 21,
        ..SsdParams::default()
    };
    for together in [false, true] {
        let probes = probes_of(device(together));
        let spec = ssd_spec(&probes, 1 << 21);
        assert_eq!(
            fitted(&spec, "complete_together"),
            u64::from(together),
            "{spec}"
        );
        assert_the_spec_gives_the_probes_back(&spec, &probes);
    }
}

/// `probes` with the mixed probe of the flash model with `params`.
fn with_mixed_probe(probes: Probes, params: SsdParams) -> Probes {
    Probes {
        mixed_iops: Some(closed_loop_of(params, MIXED_DEPTH, 200_000_000, true).iops),
        ..probes
    }
}

#[test]
fn writes_that_slow_what_runs_beside_them_are_fitted_from_the_mixed_probe_and_only_from_it() {
    // Writes alone as fast as reads, but each on the device adds 15 µs to a new request.
    let device = SsdParams {
        channels: 16,
        dies_per_channel: 1,
        read_ns: 40_000,
        program_ns: 40_000,
        overhead_ns: 5_000,
        write_contention_ns: 15_000,
        channel_bytes_per_s: 10_000_000_000,
        capacity_sectors: 1 << 21,
        ..SsdParams::default()
    };
    let probes = with_mixed_probe(probes_of(device), device);
    let spec = ssd_spec(&probes, 1 << 21);
    assert!(
        (10_000..=20_000).contains(&fitted(&spec, "write_contention_ns")),
        "{spec}"
    );
    let mixed = closed_loop_of(spec_params(&spec), MIXED_DEPTH, 200_000_000, true).iops;
    let ratio = mixed / probes.mixed_iops.unwrap_or_default();
    assert!((0.95..=1.05).contains(&ratio), "{ratio:.3}\n{spec}");
    // Without a mixed probe (no writes allowed) there is nothing to fit it from.
    let spec = ssd_spec(&probes_of(device), 1 << 21);
    assert_eq!(fitted(&spec, "write_contention_ns"), 0, "{spec}");
}

#[test]
fn a_device_whose_latency_grows_with_its_queue_is_fitted_with_contention() {
    // Like this machine's virtual disk: 33 µs alone, 6 µs more per request ahead.
    let probes = linear_device(33_000.0, 6_000.0);
    let spec = ssd_spec(&probes, 1 << 21);
    // Dies colliding explain part of the growth, contention the rest.
    assert!(fitted(&spec, "contention_ns") > 0, "{spec}");
    for (depth, iops) in [(1, probes.qd1_iops)]
        .into_iter()
        .chain(DEEPER.into_iter().zip(probes.deeper_iops))
    {
        let ratio = spec_iops(&spec, depth) / iops;
        assert!(
            (0.9..=1.1).contains(&ratio),
            "depth {depth}: {ratio:.2} of the probed IOPS\n{spec}"
        );
    }
}

#[test]
fn a_device_that_scales_with_its_queue_is_fitted_with_dies_and_no_contention() {
    // Flash that serves 16 requests at once: IOPS grow with depth up to 16.
    let iops = |d: u32| f64::from(d.min(16)) * 1e9 / 33_000.0;
    let probes = Probes {
        qd1_iops: iops(1),
        qd1_latency: Latency::default(),
        deeper_iops: DEEPER.map(iops),
        deeper_p99_ns: [0.0; DEEPER.len()],
        mixed_iops: None,
        together: None,
        write_bps: None,
        write_4k_iops: None,
        read_bps: 1.0e9,
    };
    let spec = ssd_spec(&probes, 1 << 21);
    assert_eq!(fitted(&spec, "contention_ns"), 0, "{spec}");
    assert!(fitted(&spec, "channels") >= 16, "{spec}");
}

#[test]
fn the_fitted_program_time_gives_a_4k_random_write_at_depth_1_its_probed_latency() {
    // Writes slower than reads (48 µs against 33 µs), as this machine's virtual disk's are.
    let spec = ssd_spec(&linear_device(33_000.0, 6_000.0), 1 << 21);
    let parsed =
        schedhost::backend::sim::DeviceSpec::parse_file(std::path::Path::new("fitted.spec"), &spec)
            .expect("the spec parses");
    let schedhost::backend::sim::DeviceSpec::Ssd(params) = parsed else {
        panic!("an ssd spec:\n{spec}");
    };
    // The probes give no spread, so there is no jitter: a write takes its probed 48 µs.
    let mut device = schedhost::backend::sim::Ssd::new(params);
    device.submit(
        0,
        schedhost::backend::sim::DeviceRequest {
            id: 1,
            op: schedhost_sdk::Op::Write,
            sector: 8,
            sectors: 8,
        },
    );
    let done = device.next_event().expect("a completion");
    assert!((47_000..=49_000).contains(&done), "{done} ns\n{spec}");
}

#[test]
fn a_probes_rounds_give_their_median_whatever_their_order() {
    assert_eq!(super::median(vec![]), 0.0);
    assert_eq!(super::median(vec![7.0]), 7.0);
    assert_eq!(super::median(vec![30.0, 10.0, 20.0]), 20.0);
    // One slow round of three moves nothing.
    assert_eq!(super::median(vec![100.0, 9.0, 101.0]), 100.0);
    assert_eq!(super::median(vec![4.0, 1.0, 3.0, 2.0]), 2.5);
}
