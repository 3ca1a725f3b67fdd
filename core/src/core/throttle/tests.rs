use schedhost_sdk::PrioClass;

use super::latency::LATENCY_WINDOW_NS;
use super::*;

fn read(id: u64) -> Bio {
    Bio {
        id,
        ctx: 0,
        op: Op::Read,
        sector: id * 8,
        sectors: 8,
        sync: true,
        prio_class: PrioClass::None,
        prio_level: 4,
    }
}

fn throttle(limits: GroupSpec) -> Throttle {
    Throttle::new(vec![limits], vec![Some(0)])
}

/// Releases everything that waits, in order, returning when each went.
fn drain(t: &mut Throttle) -> Vec<u64> {
    let mut at = Vec::new();
    while let Some(when) = t.next_release() {
        while t.release(when).is_some() {
            at.push(when);
        }
    }
    at
}

#[test]
fn an_iops_limit_spaces_bios_to_the_nanosecond() {
    let mut t = throttle(GroupSpec {
        riops: Some(3),
        ..GroupSpec::default()
    });
    assert!(t.admit(0, read(0)).is_some(), "the first goes at once");
    for id in 1..4 {
        assert!(t.admit(0, read(id)).is_none());
    }
    assert_eq!(drain(&mut t), [333_333_334, 666_666_667, 1_000_000_000]);
    assert_eq!(t.stats()[0].throttled, 3);
}

#[test]
fn one_iops_lets_one_bio_a_second() {
    let mut t = throttle(GroupSpec {
        riops: Some(1),
        ..GroupSpec::default()
    });
    for id in 0..4 {
        let _ = t.admit(0, read(id));
    }
    assert_eq!(drain(&mut t), [1_000_000_000, 2_000_000_000, 3_000_000_000]);
}

#[test]
fn a_burst_goes_at_once_then_the_rate_holds() {
    let mut t = throttle(GroupSpec {
        riops: Some(10),
        iops_burst: [2, 0],
        ..GroupSpec::default()
    });
    let now: Vec<bool> = (0..5).map(|id| t.admit(0, read(id)).is_some()).collect();
    assert_eq!(now, [true, true, true, false, false], "1 + a burst of 2");
    assert_eq!(drain(&mut t), [100_000_000, 200_000_000]);
}

#[test]
fn a_byte_rate_charges_each_bio_its_size_and_order_is_kept() {
    let mut t = throttle(GroupSpec {
        rbps: Some(4096),
        ..GroupSpec::default()
    });
    assert!(t.admit(0, read(0)).is_some());
    assert!(t.admit(0, read(1)).is_none());
    assert_eq!(t.next_release(), Some(1_000_000_000), "4 KiB at 4 KiB/s");
    assert!(t.release(999_999_999).is_none());
    assert_eq!(
        t.release(1_000_000_000).map(|(b, at)| (b.id, at)),
        Some((1, 0))
    );
}

#[test]
fn new_limits_take_over_from_now_and_unknown_groups_are_named() {
    let mut t = throttle(GroupSpec {
        name: "a".into(),
        riops: Some(1),
        ..GroupSpec::default()
    })
    .with_default(0);
    let _ = t.admit(0, read(0));
    let late = Bio { ctx: 7, ..read(1) };
    assert!(
        t.admit(0, late).is_none(),
        "a ctx past the map is the default group's"
    );
    let faster = GroupSpec {
        name: "a".into(),
        riops: Some(1000),
        ..GroupSpec::default()
    };
    t.set_limits(500_000_000, faster).unwrap();
    assert_eq!(
        t.next_release(),
        Some(500_500_000),
        "the new rate starts now, repaying the half I/O still owed"
    );
    let missing = GroupSpec {
        name: "b".into(),
        ..GroupSpec::default()
    };
    assert!(
        t.set_limits(0, missing)
            .unwrap_err()
            .contains("no group \"b\"")
    );
}

#[test]
fn a_missed_latency_target_halves_looser_groups_depth_and_a_met_one_grows_it_back() {
    let fast = GroupSpec {
        name: "fast".into(),
        latency_target_ns: Some(100_000),
        ..GroupSpec::default()
    };
    let bulk = GroupSpec {
        name: "bulk".into(),
        ..GroupSpec::default()
    };
    let mut t = Throttle::new(vec![fast, bulk], vec![Some(0), Some(1)]).with_base_depth(32);
    let bulk_read = |id| Bio { ctx: 1, ..read(id) };
    for id in 0..20 {
        assert!(t.admit(0, bulk_read(id)).is_some(), "no cut yet");
    }
    // The fast group's mean is 300 µs over a window: bulk goes to 16, then 8.
    t.on_complete(50_000_000, 0, 300_000);
    t.on_complete(LATENCY_WINDOW_NS, 0, 300_000);
    assert_eq!(t.stats()[1].allowed_depth, Some(16));
    assert_eq!(t.stats()[0].missed_windows, 1);
    // 20 in flight, 16 allowed: the next bulk bio waits, with no time to wake for.
    assert!(t.admit(LATENCY_WINDOW_NS, bulk_read(20)).is_none());
    assert_eq!(
        t.next_release(),
        None,
        "a completion lets it go, not a timer"
    );
    for _ in 0..5 {
        t.on_complete(LATENCY_WINDOW_NS + 1, 1, 10_000);
    }
    assert!(
        t.release(LATENCY_WINDOW_NS + 1).is_some(),
        "15 in flight: room again"
    );
    t.on_complete(2 * LATENCY_WINDOW_NS, 0, 300_000);
    assert_eq!(t.stats()[1].allowed_depth, Some(8));
    // A window met: bulk grows back by a sixteenth of 32 per window, then is uncut.
    t.on_complete(3 * LATENCY_WINDOW_NS, 0, 50_000);
    assert_eq!(t.stats()[1].allowed_depth, Some(10));
    assert_eq!(
        t.stats()[0].allowed_depth,
        None,
        "the tight group is never cut"
    );
}

#[test]
fn a_percentile_target_starts_looser_groups_at_one_and_grows_them_back_short_of_the_depth_that_missed()
 {
    let fast = GroupSpec {
        name: "fast".into(),
        latency_target_ns: Some(100_000),
        latency_permille: Some(990),
        ..GroupSpec::default()
    };
    let bulk = GroupSpec {
        name: "bulk".into(),
        ..GroupSpec::default()
    };
    let mut t = Throttle::new(vec![fast, bulk], vec![Some(0), Some(1)]).with_base_depth(32);
    let depth = |t: &Throttle| t.stats()[1].allowed_depth;
    assert_eq!(depth(&t), Some(1), "held from the first I/O");
    // Window `w` of the fast group's: 100 I/Os, `over` of them over the target; the last
    // ends the window.
    let window = |t: &mut Throttle, w: u64, over: u32| {
        for i in 0..100u32 {
            let latency = if i < over { 300_000 } else { 50_000 };
            let at = if i == 99 {
                w * LATENCY_WINDOW_NS
            } else {
                (w - 1) * LATENCY_WINDOW_NS + 1 + u64::from(i)
            };
            t.on_complete(at, 0, latency);
        }
    };
    // All under the target: bulk doubles (it never missed).
    window(&mut t, 1, 0);
    assert_eq!(depth(&t), Some(2));
    window(&mut t, 2, 0);
    assert_eq!(depth(&t), Some(4));
    window(&mut t, 3, 0);
    assert_eq!(depth(&t), Some(8));
    // 2 of 100 over the target: more than the 99th percentile leaves. Halved, and the
    // depth that missed less one is the ceiling.
    window(&mut t, 4, 2);
    assert_eq!(depth(&t), Some(4));
    assert_eq!(t.stats()[0].missed_windows, 1);
    // 1 of 100: within the allowance but past half of it: held where it is.
    window(&mut t, 5, 1);
    assert_eq!(depth(&t), Some(4));
    // Calm windows: a quarter at a time, up to the ceiling of 7, not past it.
    window(&mut t, 6, 0);
    assert_eq!(depth(&t), Some(5));
    window(&mut t, 7, 0);
    assert_eq!(depth(&t), Some(6));
    window(&mut t, 8, 0);
    assert_eq!(depth(&t), Some(7));
    for w in 9..=14 {
        window(&mut t, w, 0);
        assert_eq!(depth(&t), Some(7), "window {w}");
    }
    // The tenth calm window in a row probes one past the ceiling.
    window(&mut t, 15, 0);
    assert_eq!(depth(&t), Some(8));
    assert_eq!(
        t.stats()[0].allowed_depth,
        None,
        "the tight group is never cut"
    );
}

#[test]
fn a_discard_is_charged_one_sector_against_a_byte_rate() {
    let mut t = throttle(GroupSpec {
        wbps: Some(4096),
        ..GroupSpec::default()
    });
    // A TRIM of 1 GiB, then a 4 KiB write.
    let trim = Bio {
        op: Op::Discard,
        sectors: 2 << 20,
        ..read(0)
    };
    assert!(t.admit(0, trim).is_some());
    let write = Bio {
        op: Op::Write,
        ..read(1)
    };
    assert!(t.admit(0, write).is_none());
    assert_eq!(
        t.next_release(),
        Some(125_000_000),
        "512 bytes at 4 KiB/s, not 1 GiB"
    );
    assert_eq!(
        t.stats()[0].bytes[1],
        1 << 30,
        "the report keeps its length"
    );
}

#[test]
fn a_limits_change_keeps_the_debt_of_a_rate_it_did_not_change_and_carries_a_changed_one() {
    let spec = |riops: u64, weight: u32| GroupSpec {
        name: "a".into(),
        riops: Some(riops),
        weight,
        ..GroupSpec::default()
    };
    let mut t = throttle(spec(1, 100));
    for id in 0..3 {
        let _ = t.admit(0, read(id));
    }
    // Re-sending the same rate with another weight forgives nothing.
    t.set_limits(500_000_000, spec(1, 200)).unwrap();
    assert_eq!(t.next_release(), Some(1_000_000_000));
    // Half an I/O still owed at 0.5 s, repaid at 2 IOPS: due at 0.75 s.
    t.set_limits(500_000_000, spec(2, 200)).unwrap();
    assert_eq!(t.next_release(), Some(750_000_000));
    assert_eq!(drain(&mut t), [750_000_000, 1_250_000_000]);
}

#[test]
fn a_backlog_held_by_a_latency_cut_goes_out_at_the_rate_once_it_lifts() {
    let fast = GroupSpec {
        name: "fast".into(),
        latency_target_ns: Some(100_000),
        ..GroupSpec::default()
    };
    let bulk = GroupSpec {
        name: "bulk".into(),
        riops: Some(100),
        ..GroupSpec::default()
    };
    let mut t = Throttle::new(vec![fast, bulk], vec![Some(0), Some(1)]).with_base_depth(2);
    let bulk_read = |id| Bio { ctx: 1, ..read(id) };
    assert!(t.admit(0, bulk_read(0)).is_some());
    // The fast group misses its target: bulk may have 1 in flight, and has it.
    t.on_complete(LATENCY_WINDOW_NS, 0, 300_000);
    assert_eq!(t.stats()[1].allowed_depth, Some(1));
    for id in 1..400 {
        assert!(t.admit(LATENCY_WINDOW_NS, bulk_read(id)).is_none());
    }
    assert_eq!(t.next_release(), None, "held by the depth");
    // At 3 s its one I/O completes and the next window lifts the cut.
    t.on_complete(3_000_000_000, 1, 10_000);
    assert_eq!(t.stats()[1].allowed_depth, None);
    let mut went = Vec::new();
    let mut now = 3_000_000_000;
    while let Some(when) = t.next_release() {
        now = now.max(when);
        while t.release(now).is_some() {
            went.push(now);
        }
    }
    let first_second = went.iter().filter(|&&at| at < 4_000_000_000).count();
    assert_eq!(went[0], 3_000_000_000, "eligible when the room came");
    // The rate, one for the I/O at the start, and a slice's worth (20 ms at 100 IOPS) of
    // the rate left unused while held.
    assert!(
        first_second <= 103,
        "{first_second} I/Os in the second after the cut lifted, against riops=100"
    );
}

#[test]
fn a_group_idle_under_a_slice_gets_the_rate_it_left_unused_and_never_more_than_a_slice_of_it() {
    let flash = throttle(GroupSpec {
        riops: Some(1000),
        ..GroupSpec::default()
    });
    for (mut t, slice_ios) in [
        (flash, 20),
        (
            throttle(GroupSpec {
                riops: Some(1000),
                ..GroupSpec::default()
            })
            .with_slice_for(true),
            100,
        ),
    ] {
        // One a millisecond from 0 to 4 ms, then nothing until 10 ms: the five it did
        // not send go at once with the one due, as blk-throttle lets a group use its
        // slice.
        for id in 0..5 {
            assert!(t.admit(id * 1_000_000, read(id)).is_some());
        }
        let mut at_once = 0;
        while t.admit(10_000_000, read(100 + at_once)).is_some() {
            at_once += 1;
        }
        assert_eq!(at_once, 6, "5 to 9 ms unused, and 10 ms on time");
        // Idle for a second: a slice's worth at once, not a second's.
        let mut t2 = throttle(GroupSpec {
            riops: Some(1000),
            ..GroupSpec::default()
        })
        .with_slice_for(slice_ios == 100);
        assert!(t2.admit(0, read(0)).is_some());
        let mut burst = 0;
        while t2.admit(2_000_000_000, read(1000 + burst)).is_some() {
            burst += 1;
        }
        assert_eq!(
            burst,
            slice_ios + 1,
            "a slice of {slice_ios} I/Os, and the one due now"
        );
    }
    // A group's first bio at 5 s left nothing unused before it: the next waits 1 ms.
    let mut t = throttle(GroupSpec {
        riops: Some(1000),
        ..GroupSpec::default()
    });
    assert!(t.admit(5_000_000_000, read(0)).is_some());
    assert!(t.admit(5_000_000_000, read(1)).is_none());
    assert_eq!(t.next_release(), Some(5_001_000_000));
}

#[test]
fn writes_and_other_groups_are_not_held_by_a_read_limit() {
    let mut t = Throttle::new(
        vec![GroupSpec {
            riops: Some(1),
            ..GroupSpec::default()
        }],
        vec![Some(0), None],
    );
    let _ = t.admit(0, read(0));
    let write = Bio {
        op: Op::Write,
        ..read(1)
    };
    assert!(t.admit(0, write).is_some());
    let other = Bio { ctx: 1, ..read(2) };
    assert!(t.admit(0, other).is_some());
}
