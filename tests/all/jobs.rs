//! fio job files and command-line options: what is accepted, and how bad input is reported.

use schedhost::frontend::jobs::{Direction, Pattern, parse_cmdline, parse_job_file, place};

#[test]
fn job_file_sections_inherit_global_options() {
    let jobs = parse_job_file(
        "j.fio",
        "; comment\n[global]\nbs=64k\nsize=1g\niodepth=4\n\n[reader]\nrw=randread\nnumjobs=3\n# another\n[writer]\nrw=rw\nrwmixread=70\nbs=8k\nruntime=2s\ntime_based\nprioclass=1\nprio=2\n",
    )
    .unwrap();
    assert_eq!(jobs.len(), 2);
    let (r, w) = (&jobs[0], &jobs[1]);
    assert_eq!(
        (
            r.name.as_str(),
            r.pattern,
            r.direction,
            r.bs,
            r.numjobs,
            r.iodepth
        ),
        ("reader", Pattern::Random, Direction::Read, 65536, 3, 4)
    );
    assert_eq!(
        (w.direction, w.rwmixread, w.read_pct(), w.bs),
        (Direction::Mixed, 70, 70, 8192)
    );
    assert_eq!(
        (w.runtime_ns, w.time_based, w.prioclass, w.prio),
        (Some(2_000_000_000), true, Some(1), Some(2))
    );
}

#[test]
fn rwmixread_applies_whichever_order_it_is_given() {
    let jobs = parse_job_file("j.fio", "[a]\nrwmixread=30\nrw=randrw\nsize=1m\n").unwrap();
    assert_eq!(jobs[0].read_pct(), 30);
}

#[test]
fn accepted_engine_options_do_not_change_the_job() {
    let jobs = parse_job_file(
        "j.fio",
        "[a]\nsize=1m\nioengine=libaio\ndirect=1\ndirectory=/tmp\nfilename=x\n",
    )
    .unwrap();
    assert_eq!(jobs[0].filename.as_deref(), Some("x"));
    assert!(jobs[0].direct);
}

#[test]
fn unsupported_option_is_named_with_its_line() {
    let err = parse_job_file("j.fio", "[a]\nsize=1m\nzonemode=zbd\n").unwrap_err();
    assert_eq!(
        err.to_string(),
        "j.fio:3: unsupported fio option `zonemode`"
    );
}

#[test]
fn verify_accepts_crc32c_and_names_the_methods_it_lacks() {
    let jobs = parse_job_file("j.fio", "[a]\nsize=1m\nverify=crc32c\n").unwrap();
    assert!(jobs[0].verify);
    let err = parse_job_file("j.fio", "[a]\nsize=1m\nverify=md5\n").unwrap_err();
    assert_eq!(
        err.to_string(),
        "j.fio:3: verify=md5 is not supported (crc32c, or 0 for none)"
    );
}

#[test]
fn bad_values_are_named_with_their_line() {
    let cases = [
        (
            "[a]\nsize=1m\nbs=4q\n",
            "j.fio:3: `4q`: unknown size unit `q`",
        ),
        (
            "[a]\nsize=1m\nbs=1000\n",
            "j.fio:3: bs=1000: a block size is a positive multiple of 512 bytes",
        ),
        (
            "[a]\nsize=1m\nrw=trim\n",
            "j.fio:3: rw=trim is not supported",
        ),
        (
            "[a]\nsize=1m\niodepth=0\n",
            "j.fio:3: iodepth=0 is out of range 1..=65536",
        ),
        (
            "[a]\nsize=1m\nbs=4k,8k\n",
            "j.fio:3: bs=4k,8k: separate read/write block sizes",
        ),
        (
            "size=1m\n[a]\n",
            "j.fio:1: `size=1m` comes before any [section]",
        ),
        ("[a\nsize=1m\n", "j.fio:1: bad section header `[a`"),
        ("[a]\nrw=read\n", "j.fio:1: job 'a': set size="),
        ("[global]\nsize=1m\n", "j.fio: no job defined"),
        (
            "[a]\nsize=1m\nruntime=5x\n",
            "j.fio:3: `5x`: unknown time unit `x`",
        ),
    ];
    for (text, expected) in cases {
        let err = parse_job_file("j.fio", text).unwrap_err().to_string();
        assert!(
            err.starts_with(expected),
            "for {text:?}: got {err:?}, expected it to start with {expected:?}"
        );
    }
}

#[test]
fn command_line_options_make_jobs_like_fio() {
    let opts: Vec<String> = [
        "--bs=8k",
        "--size=4m",
        "--name=a",
        "--rw=randwrite",
        "--name=b",
        "--iodepth=2",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let jobs = parse_cmdline(&opts).unwrap();
    assert_eq!(jobs.len(), 2);
    assert_eq!(
        (jobs[0].name.as_str(), jobs[0].bs, jobs[0].rw_name()),
        ("a", 8192, "randwrite")
    );
    assert_eq!(
        (jobs[1].name.as_str(), jobs[1].iodepth, jobs[1].rw_name()),
        ("b", 2, "read")
    );
    let anonymous = parse_cmdline(&["--rw=read".to_owned(), "--size=1m".to_owned()]).unwrap();
    assert_eq!(anonymous[0].name, "job");
    let err = parse_cmdline(&["--size=1m".to_owned(), "--bogus=1".to_owned()])
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "command line option --bogus: unsupported fio option `bogus`"
    );
}

#[test]
fn clones_get_their_own_regions_unless_offset_increment_shares_a_file() {
    let jobs = parse_job_file(
        "j.fio",
        "[a]\nsize=1m\nnumjobs=3\n[b]\nsize=1m\nnumjobs=2\noffset_increment=1m\n",
    )
    .unwrap();
    let places = place(&jobs, 1 << 30).unwrap();
    let starts: Vec<u64> = places.iter().map(|p| p.region_start).collect();
    // Three files for a (1 MiB apart, aligned), one shared file for b with clones 1 MiB apart.
    assert_eq!(starts, vec![0, 2048, 4096, 6144, 8192]);
    assert!(places.iter().all(|p| p.region_sectors == 2048));
}

#[test]
fn jobs_larger_than_the_device_are_refused_by_name() {
    let jobs = parse_job_file("j.fio", "[big]\nsize=2g\nnumjobs=2\n").unwrap();
    let err = place(&jobs, 3 << 21).unwrap_err();
    assert!(err.starts_with("job 'big': its files need"), "{err}");
}

#[test]
fn stonewall_starts_a_new_phase_and_group() {
    let jobs = parse_job_file(
        "j.fio",
        "[a]\nsize=1m\n[b]\nsize=1m\nstonewall\n[c]\nsize=1m\nnew_group\n",
    )
    .unwrap();
    let places = place(&jobs, 1 << 30).unwrap();
    let shape: Vec<(u32, u32)> = places.iter().map(|p| (p.phase, p.group)).collect();
    assert_eq!(shape, vec![(0, 0), (1, 1), (1, 2)]);
}

#[test]
fn ramp_time_runs_before_runtime_and_counts_only_what_completes_after_it() {
    use schedhost::backend::sim::DeviceSpec;
    use schedhost::frontend::jobs::sim;
    use schedhost::frontend::plan::RunPlan;
    use schedhost::observe::stats::TIMELINE_BUCKET_NS;
    use schedhost::policy::native_policy;

    let jobs = parse_job_file(
        "r.fio",
        "[r]\nrw=randread\nbs=4k\nsize=1g\ntime_based\nruntime=100ms\nramp_time=50ms\n",
    )
    .unwrap();
    assert_eq!(jobs[0].ramp_ns, 50_000_000);
    let o = sim::run(
        &jobs,
        &DeviceSpec::parse("sim:ssd").unwrap(),
        native_policy("noop").unwrap(),
        &[],
        &RunPlan::default(),
        &mut |_| {},
    )
    .unwrap();
    let (sub, stats) = (&o.submitters[0], &o.stats[0]);
    assert_eq!(
        sub.started_ns, 50_000_000,
        "rates count from the end of the ramp"
    );
    assert!(
        o.end_ns >= 150_000_000,
        "the ramp adds to the runtime: {}",
        o.end_ns
    );
    let counted = stats.dirs[0].ios;
    assert!(
        counted > 0 && counted < sub.completed,
        "{counted} counted of {} completed",
        sub.completed
    );
    let ramp_buckets = (50_000_000 / TIMELINE_BUCKET_NS) as usize;
    assert!(stats.timeline[..ramp_buckets].iter().all(|&n| n == 0));
    let share = counted as f64 / sub.completed as f64;
    assert!(
        (0.6..0.73).contains(&share),
        "100 of 150 ms counted: {share}"
    );
}

/// fio-genzipf's share of the hits for the hottest tenth of the blocks hit, over 1 GiB of
/// 4 KiB blocks; `None` without fio's package (required under `cargo xtask test`).
fn genzipf_top_tenth(kind: &str, input: &str) -> Option<f64> {
    let tool = std::path::Path::new("/usr/bin/fio-genzipf");
    if !tool.is_file() {
        assert!(
            std::env::var_os("SCHEDHOST_REQUIRE_WASM").is_none(),
            "fio-genzipf missing (fio's package)"
        );
        eprintln!("skipping: fio-genzipf not installed");
        return None;
    }
    let out = std::process::Command::new(tool)
        .args(["-t", kind, "-i", input, "-b", "4096", "-g", "1", "-o", "10"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let row = text.lines().find(|l| l.starts_with("Top"))?;
    // `Top  10.00%   88.76%   88.76%   232686   908.93M`: the third figure is Sum %.
    let sum = row.split_whitespace().nth(3)?.trim_end_matches('%');
    Some(sum.parse::<f64>().ok()? / 100.0)
}

#[test]
fn skewed_random_distributions_give_fio_genzipfs_hot_set_share() {
    use schedhost::frontend::jobs::distribution::{Distribution, hot_share};
    for (kind, input) in [("zipf", "1.2"), ("zipf", "0.8"), ("pareto", "0.2")] {
        let Some(fio) = genzipf_top_tenth(kind, input) else {
            return;
        };
        let distribution = Distribution::parse(&format!("{kind}:{input}")).unwrap();
        let blocks = 262_144;
        let ours = hot_share(distribution, blocks, blocks, 0.1, 1);
        assert!(
            (ours - fio).abs() <= 0.015,
            "{kind}:{input}: the hottest tenth takes {ours:.4} here, {fio:.4} in fio-genzipf"
        );
    }
}

#[test]
fn random_distribution_and_rate_are_taken_and_bad_values_named() {
    let jobs = parse_cmdline(&[
        "--name=z".into(),
        "--rw=randread".into(),
        "--size=64m".into(),
        "--random_distribution=zipf:1.1".into(),
        "--rate=1m".into(),
    ])
    .unwrap();
    assert_eq!(
        jobs[0].rate_bytes,
        [Some(1 << 20); 2],
        "rate=R caps each direction"
    );
    for (value, expected) in [
        ("1m,2m", [Some(1 << 20), Some(2 << 20)]),
        (",512k", [None, Some(512 << 10)]),
        ("4k,", [Some(4096), None]),
    ] {
        let jobs = parse_cmdline(&[
            "--name=z".into(),
            "--rw=randrw".into(),
            "--size=64m".into(),
            format!("--rate={value}"),
        ])
        .unwrap();
        assert_eq!(jobs[0].rate_bytes, expected, "rate={value}");
    }
    for (bad, named) in [
        ("--random_distribution=zipf:1", "not 1"),
        ("--random_distribution=lognormal:2", "not supported"),
        ("--rate=1m,2m,3m", "trim rates are not supported"),
        ("--rate=,", "give a rate"),
    ] {
        let err = parse_cmdline(&["--name=z".into(), "--size=1m".into(), bad.into()])
            .unwrap_err()
            .to_string();
        assert!(err.contains(named), "{bad}: {err}");
    }
}

#[test]
fn bssplit_reads_fios_syntax_and_shares_what_is_left() {
    let split = |v: &str| {
        parse_cmdline(&[
            "--name=b".into(),
            "--size=64m".into(),
            format!("--bssplit={v}"),
        ])
        .map(|jobs| jobs[0].bssplit.clone())
        .map_err(|e| e.to_string())
    };
    assert_eq!(
        split("4k/10:64k/50:32k/40"),
        Ok(vec![(4096, 10), (65536, 50), (32768, 40)])
    );
    assert_eq!(
        split("4k/50:1k/:32k/"),
        Ok(vec![(4096, 50), (1024, 25), (32768, 25)])
    );
    assert_eq!(split("8k:16k"), Ok(vec![(8192, 50), (16384, 50)]));
    for (bad, named) in [
        ("4k/70:8k/40", "over 100"),
        ("4k/10:64k/50", "not 100"),
        ("3000/100", "not a block size"),
        ("4k/101", "not a percentage"),
        ("4k/50,8k/50", "separate read and write"),
    ] {
        let err = split(bad).unwrap_err();
        assert!(err.contains(named), "{bad}: {err}");
    }
    let verify = parse_cmdline(&[
        "--name=b".into(),
        "--rw=write".into(),
        "--size=64m".into(),
        "--bssplit=4k/50:8k/50".into(),
        "--verify=crc32c".into(),
    ])
    .unwrap_err()
    .to_string();
    assert!(verify.contains("bssplit= with verify="), "{verify}");
}
