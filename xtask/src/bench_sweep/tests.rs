use super::*;

#[test]
fn cells_are_a_function_of_the_seed_and_stay_in_their_ranges() {
    let (a, b) = (cells(7, 200, RUNTIME_MS), cells(7, 200, RUNTIME_MS));
    assert!(
        a.iter()
            .zip(&b)
            .all(|(x, y)| x.command(Some(1000)) == y.command(Some(1000)))
    );
    assert_ne!(cells(8, 1, RUNTIME_MS)[0].command(None), a[0].command(None));
    for c in &a {
        assert!((2..=6).contains(&c.weights.len()));
        assert!(c.weights.iter().all(|w| (1..=1000).contains(w)));
        assert!((1..=512).contains(&c.iodepth) && (16..=4096).contains(&c.nr_requests));
    }
    assert!(a.iter().any(|c| c.iodepth <= 4) && a.iter().any(|c| c.iodepth >= 128));
    assert!(a.iter().any(|c| c.limit.is_some()) && a.iter().any(|c| c.limit.is_none()));
    assert!(a.iter().any(|c| c.swap.is_some()) && a.iter().any(|c| c.swap.is_none()));
    assert!(DEVICES.iter().all(|d| a.iter().any(|c| c.device == *d)));
}

/// `logs`, one per group, written as fio names them into a directory of their own and read
/// back as a 1 s run's.
fn logs_read_back(name: &str, logs: &[&str]) -> Logged {
    let dir = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (g, log) in logs.iter().enumerate() {
        std::fs::write(dir.join(format!("g{g}_iops.{}.log", g + 1)), log).unwrap();
    }
    let logged = read_logs(&dir, logs.len(), 1000).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    logged
}

#[test]
fn shares_count_io_after_the_ramp_and_before_the_run_time_ends_starvation_over_the_run_the_ramp_too_and_windows_see_it_all()
 {
    // 1 s run: ten windows, the first two the ramp; the last entry is the drain.
    let logged = logs_read_back(
        "sweep-logs-test",
        &["100, 5000, 0, 0, 0\n300, 100, 0, 0, 0\n1000, 200, 0, 0, 0\n1500, 9000, 0, 0, 0\n"],
    );
    assert_eq!(logged.ios, vec![30.0]);
    // Starvation over the run is judged on everything within the run time, not the drain.
    assert_eq!(logged.in_run, vec![530.0]);
    let seen: Vec<usize> = (0..10).filter(|&w| logged.windows[0][w]).collect();
    assert_eq!(seen, vec![0, 2, 9]);
}

#[test]
fn each_window_counts_what_every_group_completed_in_it_so_a_limit_is_owed_by_the_policy_that_ran_it()
 {
    let logged = logs_read_back(
        "sweep-window-test",
        &[
            "100, 5000, 0, 0, 0\n600, 100, 0, 0, 0\n",
            "100, 1000, 0, 0, 0\n1000, 300, 0, 0, 0\n",
        ],
    );
    let mut expected = vec![0.0; 10];
    (expected[0], expected[5], expected[9]) = (600.0, 10.0, 30.0);
    assert_eq!(logged.window_ios, expected);
}

/// The sweep's lean version, in the test command: a few cells of a fixed seed under the
/// debug host the workspace's tests built. What holds whatever the policy is asserted:
/// nothing lost, no limit exceeded, and on flash under policies that do not slice, no
/// group starved in any owed window; throughput, shares, reaching a limit and starvation
/// over the run elsewhere are the policies' and printed (a disk's queue served in arrival
/// or sector order can leave a group's first request behind more than a run's worth of
/// others; the full sweep measures where each stops holding: BENCHMARKS.md).
#[test]
fn a_lean_sweep_loses_nothing_exceeds_no_limit_and_starves_no_group() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| root.join("target"), std::path::PathBuf::from);
    let schedhost = target.join("debug/schedhost");
    assert!(
        schedhost.exists(),
        "{} is missing: the workspace's tests build it (cargo build -p schedhost)",
        schedhost.display()
    );
    let cells = cells(LEAN_SEED, LEAN_CELLS, LEAN_RUNTIME_MS);
    let sweep = judge_cells(root, &schedhost, &cells).unwrap();
    let (guaranteed, measured): (Vec<&Finding>, Vec<&Finding>) =
        sweep.findings.iter().partition(|f| {
            [INVARIANTS[0], INVARIANTS[4]].contains(&f.invariant)
                || ([INVARIANTS[2], INVARIANTS[6]].contains(&f.invariant)
                    && cells[f.cell].windows_judged())
        });
    let show = |f: &&Finding| {
        format!(
            "{} on cell {}: {}\n  {}",
            f.invariant,
            f.cell,
            f.what,
            cells[f.cell].command(sweep.rates[f.cell])
        )
    };
    for f in &measured {
        eprintln!("measured, not asserted: {}", show(f));
    }
    let found: Vec<String> = guaranteed.iter().map(show).collect();
    assert!(found.is_empty(), "{found:#?}");
    for invariant in [0, 2, 4] {
        assert!(
            sweep.checked[invariant] > 0,
            "{} was checked on no cell",
            INVARIANTS[invariant]
        );
    }
}

#[test]
fn the_shares_cap_the_device_where_the_heaviest_groups_iodepth_over_its_part_is_under_noops_depth()
{
    let cell = |policy, weights: Vec<u32>, iodepth| Cell {
        policy,
        device: FLASH,
        weights,
        iodepth,
        nr_requests: 4096,
        seed: 1,
        limit: None,
        swap: None,
        runtime_ms: RUNTIME_MS,
    };
    // Weight 312 of 316 at iodepth 84: 85 on the device, of noop's 168.
    assert_eq!(cell("mclock", vec![4, 312], 84).shares_depth(256), Some(85));
    // noop holds at most the device's tags: 202 of 256.
    assert_eq!(cell("bfq", vec![4, 312], 200).shares_depth(256), Some(202));
    // Equal weights ask for all noop holds; a policy without the bound asks for nothing.
    assert_eq!(cell("mclock", vec![7, 7], 84).shares_depth(256), None);
    assert_eq!(cell("deadline", vec![4, 312], 84).shares_depth(256), None);
    let swapped = Cell {
        swap: Some("mclock"),
        ..cell("kyber", vec![4, 312], 84)
    };
    assert_eq!(swapped.shares_depth(256), Some(85));
}

#[test]
fn a_limit_is_judged_for_reaching_only_where_noop_brought_the_group_to_its_rate() {
    // Two groups of equal weight under mclock, 1 s, g0 held to 1 000 IOPS; every window
    // completes 10 000 I/Os, so g0's part (5 000 a window) is twice its rate many times
    // over, and it completed 80 a window past the ramp: 80 % of its rate.
    let cell = Cell {
        policy: "mclock",
        device: FLASH,
        weights: vec![1, 1],
        iodepth: 1,
        nr_requests: 64,
        seed: 1,
        limit: Some((0, 0.1)),
        swap: None,
        runtime_ms: 1000,
    };
    let logged = Logged {
        windows: vec![vec![true; 10]; 2],
        ios: vec![640.0, 8_000.0],
        in_run: vec![800.0, 9_000.0],
        window_ios: vec![10_000.0; 10],
        group_window_ios: vec![vec![80.0; 10], vec![9_920.0; 10]],
    };
    let ran = |g0: f64| Ran {
        ios: vec![g0, 90_000.0],
        seconds: vec![1.0, 1.0],
        iops: g0 + 90_000.0,
        conserved: true,
        held: 0.0,
        tags: 64,
    };
    let judged = |noop_g0: f64| {
        let mut sweep = Sweep::default();
        sweep.rates.push(Some(1000));
        limit(
            &mut sweep,
            0,
            &cell,
            (&ran(800.0), &ran(noop_g0)),
            &logged,
            Some(1000),
        );
        (sweep.checked[5], sweep.held[5], sweep.unbound.len())
    };
    // Noop brought it to its rate: the policy left it short, a miss.
    assert_eq!(judged(1000.0), (1, 0, 0));
    // Noop too left it at 800 (one request at a time at the device's latency): the limit
    // never bound, and the cell is named, not judged.
    assert_eq!(judged(800.0), (0, 0, 1));
}
