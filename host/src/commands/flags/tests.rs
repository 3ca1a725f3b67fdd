use super::*;

#[derive(Debug, clap::Parser)]
struct Flags {
    #[command(flatten)]
    flags: RunFlags,
}

fn flags(args: &[&str]) -> RunFlags {
    use clap::Parser;
    Flags::try_parse_from(std::iter::once("schedhost").chain(args.iter().copied()))
        .expect("the flags parse")
        .flags
}

#[test]
fn the_plan_takes_the_defaults_for_flags_not_given_and_the_flags_given() {
    let sim = Scope::all("run", Devices::Either);
    let plan = flags(&[])
        .plan(&sim, FaultPlan::default(), false)
        .expect("a plan");
    assert_eq!(plan, RunPlan::default());
    let given = flags(&["--seed", "7", "--nr-requests", "64", "--on-fault", "abort"]);
    let plan = given
        .plan(&sim, FaultPlan::default(), false)
        .expect("a plan");
    assert_eq!(plan.seed, 7);
    assert_eq!(plan.queue.nr_requests, Some(64));
    assert_eq!(plan.supervision.on_fault, OnFault::Abort);
}

#[test]
fn a_flag_the_command_decides_itself_is_refused_with_the_command_the_flag_and_why() {
    let check = Scope {
        own_on_fault: Some("a round ends at the first fault"),
        ..Scope::all("policy check", Devices::Sim)
    };
    for (args, named) in [
        (&["--on-fault", "fallback"][..], "--on-fault"),
        (&["--sqpoll", "5"], "--sqpoll"),
        (&["--queue-depth", "8"], "--queue-depth"),
        (&["--allow-overwrite"], "--allow-overwrite"),
        (&["--status-interval", "1"], "--status-interval"),
    ] {
        let error = flags(args)
            .plan(&check, FaultPlan::default(), false)
            .expect_err(named)
            .to_string();
        assert!(
            error.starts_with("policy check: ") && error.contains(named),
            "{named}: {error}"
        );
    }
    let plan =
        flags(&["--seed", "3", "--plug", "legacy"]).plan(&check, FaultPlan::default(), false);
    assert!(plan.is_ok(), "what the check honours is taken: {plan:?}");
}

#[test]
fn watchdog_takes_seconds_with_zero_for_off_and_refuses_the_rest() {
    assert_eq!(parse_watchdog("2.5"), Ok(Watchdog(Some(2_500_000_000))));
    assert_eq!(parse_watchdog("0"), Ok(Watchdog(None)));
    for bad in ["-1", "nan", "inf", "1e12", "ten"] {
        assert!(parse_watchdog(bad).is_err(), "{bad} was taken");
    }
}

#[test]
fn a_device_is_simulated_by_its_name_and_real_otherwise_with_a_plan_after_its_at() {
    let (device, faults) = parse_device("sim:ssd@read_errors=0.5").unwrap();
    assert!(matches!(device, Device::Sim(ref s) if s.name() == "ssd"));
    assert!(!faults.is_empty());
    // An `@` in a file name is a file name; a plan after it has an `=`.
    let (device, faults) = parse_device("a@b.img:c.img").unwrap();
    let Device::Real(paths) = device else {
        panic!("real")
    };
    assert_eq!(paths, ["a@b.img", "c.img"].map(std::path::PathBuf::from));
    assert!(faults.is_empty());
    let (_, faults) = parse_device("d.img@busy=0.1").unwrap();
    assert!(!faults.is_empty());
    assert!(parse_device(":").is_err());
}

#[test]
fn plug_takes_a_mode_with_the_kernels_defaults_and_names_a_bad_key_or_value() {
    assert_eq!(parse_plug("none"), Ok(Plug::None));
    assert_eq!(parse_plug("legacy"), Ok(Plug::legacy()));
    assert_eq!(
        parse_plug("legacy:unplug_thresh=8,unplug_delay_us=500"),
        Ok(Plug::Legacy {
            unplug_thresh: 8,
            unplug_delay_ns: 500_000
        })
    );
    assert_eq!(
        parse_plug("submitter:max_requests=16"),
        Ok(Plug::Submitter {
            max_requests: 16,
            max_bytes: 128 * 1024
        })
    );
    for (bad, named) in [
        ("old", "\"old\""),
        ("legacy:max_requests=4", "max_requests"),
        ("legacy:unplug_thresh=0", "unplug_thresh=0"),
        ("legacy:unplug_delay_us=2000000", "unplug_delay_us=2000000"),
        ("submitter:max_bytes=-1", "max_bytes=-1"),
        ("legacy:unplug_thresh=2,unplug_thresh=3", "twice"),
        ("legacy:unplug_thresh", "KEY=N"),
    ] {
        let message = parse_plug(bad).expect_err(bad);
        assert!(message.contains(named), "{bad}: {message}");
    }
}
