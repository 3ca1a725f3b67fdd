//! Plugging: the legacy queue plug holds dispatch until its threshold, its timer or a
//! waiting submitter lets go, and bios merge into what it holds; the per-submitter plug
//! flushes a full plug early; both show as P, U and UT events.

use schedhost::core::event::Kind;
use schedhost::core::{Action, Bio, Config, Core, LEGACY_UNPLUG_DELAY_NS, Plug};
use schedhost::policy::NativePolicy;
use schedhost_policy_noop::Noop;

use crate::helpers::dispatched;
use schedhost_sdk::{Op, PrioClass};

fn core(plug: Plug, queue_depth: u32) -> Core {
    let mut config = Config::for_device(1, queue_depth, 2560);
    config.plug = plug;
    let mut core = Core::new(
        config,
        Box::new(NativePolicy::<Noop>::default()),
        &[],
        Box::new(schedhost::policy::builtin_fifo),
    )
    .expect("noop starts");
    core.record_events(true);
    core
}

fn write(id: u64, ctx: u32, sector: u64, sync: bool) -> Bio {
    Bio {
        id,
        ctx,
        op: Op::Write,
        sector,
        sectors: 8,
        sync,
        prio_class: PrioClass::None,
        prio_level: 4,
    }
}

fn kinds(core: &mut Core) -> Vec<Kind> {
    let mut events = Vec::new();
    core.take_events(&mut events);
    events
        .into_iter()
        .map(|e| e.kind)
        .filter(|k| matches!(k, Kind::Plug | Kind::Unplug(_) | Kind::UnplugTimer(_)))
        .collect()
}

#[test]
fn legacy_plug_holds_async_writes_until_its_timer_and_bios_merge_meanwhile() {
    let mut core = core(Plug::legacy(), 32);
    core.submit(0, write(1, 0, 0, false)).unwrap();
    assert!(
        dispatched(&mut core, 0).is_empty(),
        "a plugged queue dispatches nothing"
    );
    assert_eq!(
        core.poll_timeout(),
        Some(LEGACY_UNPLUG_DELAY_NS),
        "the plug's timer"
    );
    // Another submitter's bio merges into the request the elevator holds.
    core.submit(1_000, write(2, 1, 8, false)).unwrap();
    assert!(dispatched(&mut core, 1_000).is_empty());
    assert!(dispatched(&mut core, LEGACY_UNPLUG_DELAY_NS - 1).is_empty());
    assert_eq!(dispatched(&mut core, LEGACY_UNPLUG_DELAY_NS), [(0, 16)]);
    assert_eq!(kinds(&mut core), [Kind::Plug, Kind::UnplugTimer(1)]);
    let stats = core.stats();
    assert_eq!(
        (stats.plugs, stats.timer_unplugs, stats.back_merges),
        (1, 1, 1)
    );
}

#[test]
fn legacy_plug_lets_go_at_unplug_thresh_requests() {
    let mut core = core(Plug::legacy(), 32);
    for (id, sector) in [(1, 0), (2, 100), (3, 200)] {
        core.submit(0, write(id, 0, sector, false)).unwrap();
    }
    assert!(dispatched(&mut core, 0).is_empty());
    core.submit(10, write(4, 0, 300, false)).unwrap();
    assert_eq!(
        dispatched(&mut core, 10).len(),
        4,
        "the fourth request unplugs"
    );
    assert_eq!(core.stats().threshold_unplugs, 1);
    assert_eq!(
        kinds(&mut core),
        [Kind::Plug],
        "the kernel traces no threshold unplug"
    );
}

#[test]
fn a_bio_its_submitter_waits_for_unplugs_the_queue_at_once() {
    let mut core = core(Plug::legacy(), 32);
    core.submit(0, write(1, 0, 0, false)).unwrap();
    core.submit(5, write(2, 1, 1000, true)).unwrap();
    assert_eq!(dispatched(&mut core, 5).len(), 2);
    assert_eq!(kinds(&mut core), [Kind::Plug, Kind::Unplug(2)]);
    assert_eq!(core.stats().unplugs, 1);
}

#[test]
fn legacy_plug_does_not_plug_a_queue_with_requests_waiting() {
    // Depth 1: the first request waits in the elevator behind the one on the device.
    let mut core = core(Plug::legacy(), 1);
    core.submit(0, write(1, 0, 0, true)).unwrap();
    assert_eq!(dispatched(&mut core, 0).len(), 1);
    core.submit(1, write(2, 0, 100, false)).unwrap();
    assert_eq!(kinds(&mut core), [Kind::Plug, Kind::Unplug(1), Kind::Plug]);
    core.submit(2, write(3, 0, 200, false)).unwrap();
    assert_eq!(kinds(&mut core), [], "one request waits: no second plug");
}

#[test]
fn a_full_submitter_plug_flushes_before_the_next_request_joins() {
    let plug = Plug::Submitter {
        max_requests: 2,
        max_bytes: 1 << 20,
    };
    let mut core = core(plug, 32);
    for (id, sector) in [(1, 0), (2, 100), (3, 200)] {
        core.submit(0, write(id, 0, sector, false)).unwrap();
    }
    let mut early = Vec::new();
    while let Some(action) = core.poll_action() {
        if let Action::Dispatch { sector, .. } = action {
            early.push(sector);
        }
    }
    assert_eq!(
        early,
        [0, 100],
        "the full plug went to the device before the run"
    );
    assert_eq!(
        dispatched(&mut core, 0),
        [(200, 8)],
        "the batch's end flushes the rest"
    );
    assert_eq!(
        kinds(&mut core),
        [Kind::Plug, Kind::Unplug(2), Kind::Plug, Kind::Unplug(1)]
    );
}

#[test]
fn without_a_plug_nothing_is_held_or_recorded() {
    let mut core = core(Plug::None, 32);
    core.submit(0, write(1, 0, 0, false)).unwrap();
    assert_eq!(dispatched(&mut core, 0).len(), 1);
    assert_eq!(core.poll_timeout(), None);
    assert_eq!(kinds(&mut core), []);
}
