use super::cache::Stop;
use super::*;

/// A segment holding `start..end` and reading ahead from time 0, a sector every
/// `per_sector_ps`, towards `stream_to`, not to be stopped short of `min_to`.
fn reading_ahead(
    start: u64,
    end: u64,
    per_sector_ps: u64,
    (stream_to, min_to): (u64, u64),
) -> Segment {
    Segment {
        start,
        end,
        since_ps: 0,
        per_sector_ps,
        stream_to,
        seeking_until_ps: 0,
        min_to,
        streaming: true,
        used: 0,
        written: false,
        boundaries: Boundaries::NONE,
    }
}

#[test]
fn a_read_starting_in_a_segment_and_running_past_it_is_a_partial_hit_from_the_segments_end() {
    let mut drive = Drive::new(DriveParams::default());
    drive.segments.push(Segment {
        start: 0,
        end: 8,
        since_ps: 0,
        per_sector_ps: 1,
        stream_to: 8,
        seeking_until_ps: 0,
        min_to: 8,
        streaming: false,
        used: 0,
        written: false,
        boundaries: Boundaries::NONE,
    });
    assert_eq!(
        drive.held_from(4, 12),
        Some(8),
        "4..8 held, 8..12 from the media"
    );
    assert_eq!(
        drive.held_from(8, 12),
        None,
        "starts where the segment ends"
    );
    assert_eq!(
        drive.held_from(2, 6),
        None,
        "wholly held: a hit, not a partial one"
    );
    drive.params.buffer_cache = false;
    assert_eq!(drive.held_from(4, 12), None, "no buffer, no hits");
}

#[test]
fn alternate_surface_orders_reverse_the_heads_of_odd_cylinders_and_keep_every_angle() {
    let normal = Drive::new(DriveParams::default());
    let spt = 400;
    let cylinder = 4 * spt; // sectors per cylinder of the default drive
    for order in [SurfaceOrder::AlternateInZone, SurfaceOrder::Alternate] {
        let alternate = Drive::new(DriveParams {
            surface_order: order,
            ..DriveParams::default()
        });
        for lbn in [
            0,
            spt,
            3 * spt + 7,
            cylinder,
            cylinder + 3 * spt,
            2 * cylinder + spt,
        ] {
            let (a, n) = (alternate.place(lbn), normal.place(lbn));
            assert_eq!(
                (a.cylinder, a.track, a.angle),
                (n.cylinder, n.track, n.angle)
            );
            let want = if a.cylinder % 2 == 1 {
                3 - n.track
            } else {
                n.track
            };
            assert_eq!(a.surface, want, "{order:?}, lbn {lbn}");
        }
    }
    // Counted from the zone's first cylinder, or from the disk's.
    let zones = |first| DriveZone {
        first_cylinder: first,
        last_cylinder: first + 9,
        ..DriveParams::default().zones[0].clone()
    };
    let params = |order| DriveParams {
        surface_order: order,
        zones: vec![zones(0), zones(11)],
        capacity_sectors: 2 * 10 * cylinder,
        ..DriveParams::default()
    };
    let first_of_second_zone = 10 * cylinder;
    let in_zone = Drive::new(params(SurfaceOrder::AlternateInZone)).place(first_of_second_zone);
    let on_disk = Drive::new(params(SurfaceOrder::Alternate)).place(first_of_second_zone);
    assert_eq!((in_zone.cylinder, in_zone.surface), (11, 0));
    assert_eq!((on_disk.cylinder, on_disk.surface), (11, 3));
}

#[test]
fn a_zero_latency_read_sends_its_sectors_in_order_once_its_first_is_read() {
    // 7200 rpm, 400 sectors a track (20.8 µs a sector), a bus of 100 µs a sector. An
    // 8-sector read at LBN 100 with the head arriving halfway through its fifth sector:
    // zero-latency access starts at the next boundary and reads sectors 5..8 first, coming
    // round to 0..5 most of a revolution later; the bus sends in order, so it waits for
    // sector 0 (the 396th read from the start) and then sends all 8.
    let mut drive = Drive::new(DriveParams {
        immediate_read: true,
        bus_sector_ms: 0.1,
        ..DriveParams::default()
    });
    let per_sector = drive.rev_ps / 400;
    let request = DeviceRequest {
        id: 1,
        op: Op::Read,
        sector: 100,
        sectors: 8,
    };
    let at = 104 * drive.rev_ps / 400 + per_sector / 2;
    let media = drive.access(at, &request, false, (0, 0, 0), 0);
    assert_eq!(media.first_read, 5);
    assert!(media.start.abs_diff(105 * drive.rev_ps / 400) < 1_000);
    let sent = drive.read_sent(&request, &media);
    let expected = media.start + 396 * per_sector + 8 * drive.bus_ps(1);
    assert!(
        sent.abs_diff(expected) < 1_000,
        "{sent} against {expected} ps"
    );
}

#[test]
fn a_segment_found_done_reading_ahead_holds_only_its_size_from_then_on() {
    // A 282-sector segment that read 4 sectors and then 282 ahead (read-ahead over the
    // requested data): found done by a hit, its first 4 sectors are gone for every later
    // lookup, not only for one timed while it streamed.
    let mut drive = Drive::new(DriveParams {
        segment_sectors: 282,
        read_ahead_over_requested: true,
        ..DriveParams::default()
    });
    drive
        .segments
        .push(reading_ahead(1000, 1004, 1, (1004 + 282, 1004)));
    assert!(
        !drive.read_ahead_past(0, 1_000_000, (1004, 1008)),
        "done: idle"
    );
    let s = drive.segments[0];
    assert_eq!((s.start, s.end, s.streaming), (1004, 1286, false));
    assert_eq!(
        (drive.cylinder, drive.surface),
        (0, 3),
        "the head went idle over sector 1285"
    );
    assert_eq!(
        drive.held_from(1000, 1300),
        None,
        "1000..1004 were replaced"
    );
}

#[test]
fn a_command_waits_for_the_read_ahead_to_reach_its_minimum_and_no_longer() {
    // A segment reading ahead from sector 8 at 1 ns a sector since time 0, aimed at 520,
    // that must reach 108 before a command other than a hit may stop it. At 5 ns it has
    // read 5: the command waits until 108 is read (100 ns), and the read-ahead stops there.
    // With no minimum it stops at once (`stop_prefetch_in_sector`, the default).
    let stopped = |min_to| {
        let mut drive = Drive::new(DriveParams::default());
        drive
            .segments
            .push(reading_ahead(0, 8, 1_000, (520, min_to)));
        let stop = drive.stop_streaming(5_000);
        assert_eq!(stop.settling, 0, "stopped in the sector");
        (
            stop.after_minimum,
            drive.segments[0].end,
            drive.segments[0].streaming,
        )
    };
    assert_eq!(stopped(108), (100_000, 108, false));
    assert_eq!(stopped(8), (5_000, 13, false));
    assert_eq!(stopped(10), (5_000, 13, false), "past its minimum already");
}

#[test]
fn a_read_ahead_stopped_mid_sector_finishes_it_after_the_commands_overhead() {
    // Without `Stop prefetch in sector`, a command arriving 5.5 sectors into a read-ahead
    // (1 ns a sector) lets the sixth sector finish: half a sector more, which DiskSim adds
    // to the command's overhead (`disk_check_hda`) rather than overlapping it.
    let mut drive = Drive::new(DriveParams {
        stop_prefetch_in_sector: false,
        ..DriveParams::default()
    });
    drive.segments.push(reading_ahead(0, 8, 1_000, (520, 8)));
    let stop = drive.stop_streaming(5_500);
    assert_eq!(
        stop,
        Stop {
            after_minimum: 5_500,
            settling: 500
        }
    );
    assert_eq!(drive.segments[0].end, 14, "the sixth sector read whole");
}

#[test]
fn a_stopped_read_ahead_leaves_the_head_over_the_last_track_it_read() {
    // The default drive: 400 sectors a track, 4 surfaces. A read-ahead from sector 390
    // at 1 ns a sector, aimed at 900: stopped at 5 ns it has read 390..395, still on the
    // first track; at 20 ns 390..410, past the switch to the second surface; stopped
    // before reading a sector it leaves the head where the last command put it. The next
    // command positions from there (DiskSim's read-ahead moves the mechanism as it reads;
    // a read back on the first track pays the head switch).
    let stopped_at = |at_ps| {
        let mut drive = Drive::new(DriveParams::default());
        (drive.cylinder, drive.surface) = (7, 3);
        drive
            .segments
            .push(reading_ahead(380, 390, 1_000, (900, 390)));
        drive.stop_streaming(at_ps);
        (drive.segments[0].end, drive.cylinder, drive.surface)
    };
    assert_eq!(stopped_at(5_000), (395, 0, 0));
    assert_eq!(stopped_at(20_000), (410, 0, 1));
    assert_eq!(stopped_at(0), (390, 7, 3), "nothing read ahead yet");
    // Short of its minimum, the read-ahead goes on to it, and the head with it.
    let mut drive = Drive::new(DriveParams::default());
    drive
        .segments
        .push(reading_ahead(380, 390, 1_000, (900, 810)));
    drive.stop_streaming(5_000);
    assert_eq!((drive.cylinder, drive.surface), (0, 2), "sector 809");
}

/// Read-ahead from sector 398 of a 400-sector track on a drive of 4 surfaces, 1 ns a
/// sector, 40 sectors of track skew and 60 of cylinder skew, starting on `surface`.
fn across_a_track(surface: u64) -> Segment {
    let mut s = reading_ahead(390, 398, 1_000, (900, 398));
    s.boundaries = Boundaries {
        first_cross: 2,
        sectors_per_track: 400,
        track_skew: 40,
        cylinder_skew: 60,
        surface,
        surfaces: 4,
    };
    s
}

#[test]
fn read_ahead_pays_each_track_boundarys_skew_and_stops_whole_only_over_a_sector() {
    // 398 and 399 are read by 2 ns, then the head crosses and the next track's first
    // sector comes round 40 sectors later (43 ns). Starting on the cylinder's last surface
    // the crossing is a cylinder switch (63 ns).
    let s = across_a_track(0);
    let ends: Vec<u64> = [1_000, 2_500, 42_999, 43_000, 44_000]
        .iter()
        .map(|&at| s.end_at(at))
        .collect();
    assert_eq!(ends, [399, 400, 400, 401, 402]);
    assert_eq!(s.read_after(3), 43_000);
    assert_eq!(across_a_track(3).read_after(3), 63_000, "a cylinder switch");
    // Without `Stop prefetch in sector`, stopped over the skew the command waits for the
    // next track's first sector to come round, unread (DiskSim lets that event come:
    // `DISK_SEEK_STOPTIME`); stopped inside it, that sector is read whole first. No head
    // switch: at 1 ns a sector any switch would outlast the skew, and a stop during a
    // switch waits for it (the next test).
    let stop = |at_ps| {
        let mut drive = Drive::new(DriveParams {
            stop_prefetch_in_sector: false,
            head_switch_ms: 0.0,
            ..DriveParams::default()
        });
        drive.segments.push(across_a_track(0));
        let stop = drive.stop_streaming(at_ps);
        (drive.segments[0].end, stop.settling)
    };
    assert_eq!(stop(20_000), (400, 22_000));
    assert_eq!(stop(42_500), (401, 500));
}

#[test]
fn a_command_stopping_read_ahead_mid_switch_waits_out_the_switch_after_its_overhead_from_the_new_track()
 {
    // The default drive at 7200 rpm: 400 sectors a track (20.8 µs a sector), 40 sectors of
    // track skew (833 µs) over a 0.8 ms head switch, 60 of cylinder skew (1.25 ms) over a
    // 1 ms one-cylinder seek. Read-ahead from sector 398 of a track reads 398 and 399 by
    // 41.7 µs and then switches; DiskSim times the switch as a seek from there
    // (`disk_initiate_seek`), and a command arriving during it lets the seek end, the rest
    // added to its own overhead (`disk_buffer_stopable_access` sets `DISK_SEEK_STOPTIME`,
    // `disk_check_hda` adds it), and positions from the new track.
    let stopped_at = |first_surface: u64, at_ps: u64| {
        let mut drive = Drive::new(DriveParams::default());
        let per_sector = drive.rev_ps / 400;
        let track_start = first_surface * 400;
        let mut s = reading_ahead(track_start + 390, track_start + 398, per_sector, (4_000, 0));
        s.boundaries = Boundaries {
            first_cross: 2,
            sectors_per_track: 400,
            track_skew: 40,
            cylinder_skew: 60,
            surface: first_surface,
            surfaces: 4,
        };
        drive.segments.push(s);
        let stop = drive.stop_streaming(at_ps);
        (
            stop.settling,
            drive.segments[0].end - track_start,
            (drive.cylinder, drive.surface),
        )
    };
    let crossed = 2 * Drive::new(DriveParams::default()).rev_ps / 400;
    // A head switch: 0.8 ms from the crossing.
    assert_eq!(
        stopped_at(0, crossed + 300_000_000),
        (500_000_000, 400, (0, 1)),
        "0.5 ms of the switch left, over surface 1"
    );
    assert_eq!(
        stopped_at(0, crossed + 800_000_000),
        (0, 400, (0, 1)),
        "switched, waiting for the skewed first sector: stopped at once, over surface 1"
    );
    assert_eq!(
        stopped_at(0, crossed - 1),
        (0, 399, (0, 0)),
        "still reading"
    );
    // From the cylinder's last surface, a one-cylinder seek (1 ms, longer than the switch).
    assert_eq!(
        stopped_at(3, crossed + 900_000_000),
        (100_000_000, 400, (1, 0)),
        "0.1 ms of the seek left, over the next cylinder"
    );
}

#[test]
fn a_command_during_a_resumed_read_aheads_seek_lets_the_seek_end_after_its_overhead() {
    // An idle segment holding 0..8 with the head 500 cylinders away: read-ahead resumed on
    // a hit seeks back to sector 8 first. The mechanism is not held for that seek (a hit
    // is served at once, as DiskSim's `disk_buffer_stopable_access` takes a hit first);
    // a command stopping the read-ahead 0.1 ms before the seek ends lets it end, the rest
    // added to its own overhead as DiskSim's `DISK_SEEK_STOPTIME` is, from sector 8's
    // track, nothing read.
    let mut drive = Drive::new(DriveParams::default());
    let mut idle = reading_ahead(0, 8, 1, (8, 8));
    idle.streaming = false;
    drive.segments.push(idle);
    drive.cylinder = 500;
    drive.resume_read_ahead(0, 0, (0, 8));
    let seek_ps = ms_ps(drive.seek_ms(500));
    let s = drive.segments[0];
    assert!(s.streaming);
    assert_eq!(s.seeking_until_ps, seek_ps);
    assert!(
        s.since_ps >= seek_ps,
        "its first sector comes round after the seek"
    );
    assert_eq!(drive.mech_free_ps, 0, "the mechanism is not held for it");
    let stop = drive.stop_streaming(seek_ps - 100_000_000);
    assert_eq!(stop.settling, 100_000_000);
    assert_eq!(drive.segments[0].end, 8, "nothing read ahead");
    assert_eq!(
        (drive.cylinder, drive.surface),
        (0, 0),
        "over sector 8's track"
    );
    assert!(!drive.segments[0].streaming);
}

/// Submits `request` at `at_ns` and runs the drive until it completes: when, in ns.
fn completion_of(drive: &mut Drive, at_ns: u64, request: DeviceRequest) -> u64 {
    drive.submit(at_ns, request);
    let mut now = at_ns;
    loop {
        now = now.max(drive.next_event().expect("an event is due"));
        if let Some((id, 0)) = drive.poll(now)
            && id == request.id
        {
            return now;
        }
    }
}

fn write_back_drive() -> Drive {
    Drive::new(DriveParams {
        overheads: Overheads {
            read_hit: [0.1, 0.1],
            read_miss: [1.0, 1.0],
            write_hit: [1.0, 1.0],
            write_miss: [1.0, 1.0],
            completion: [0.0, 0.0],
            ..Overheads::default()
        },
        ..DriveParams::default()
    })
}

fn request(id: u64, op: Op, sector: u64) -> DeviceRequest {
    DeviceRequest {
        id,
        op,
        sector,
        sectors: 8,
    }
}

#[test]
fn a_command_behind_a_buffered_write_going_to_the_media_overlaps_its_overhead_with_it() {
    // A buffered write is reported once its data has crossed the bus, and goes on to the
    // media. A write taken at that report waits for the mechanism, but its 1 ms command
    // overhead runs from its arrival (DiskSim sets `overhead_done` at arrival): its data
    // crosses once the first write is on the media, not 1 ms after.
    let mut drive = write_back_drive();
    let first_done = completion_of(&mut drive, 0, request(1, Op::Write, 0));
    let on_media_ps = drive.mech_free_ps;
    assert!(
        on_media_ps > (first_done + 1_000_000) * PS_PER_NS,
        "still going to the media 1 ms after its report"
    );
    let second_done = completion_of(&mut drive, first_done, request(2, Op::Write, 8_000_000));
    let bus_ps = drive.bus_ps(8);
    assert_eq!(second_done, (on_media_ps + bus_ps).div_ceil(PS_PER_NS));
    // Taken with the mechanism free, the overhead comes first, as before.
    let mut idle = write_back_drive();
    let alone = completion_of(&mut idle, 0, request(3, Op::Write, 8_000_000));
    assert_eq!(alone, (1_000_000_000 + bus_ps).div_ceil(PS_PER_NS));
}

#[test]
fn a_read_hit_waiting_for_the_mechanism_pays_the_read_miss_overhead() {
    // DiskSim takes a read it cannot serve at once by disconnecting, with the read-miss
    // overhead (`disk_read_arrive`), whether or not the buffer holds its data: a hit on the
    // data of a write still going to the media is sent once the mechanism is free, or 1 ms
    // (the miss overhead, not the 0.1 ms hit one) after arrival, whichever is later.
    let mut drive = write_back_drive();
    let written = completion_of(&mut drive, 0, request(1, Op::Write, 8_000_000));
    let on_media_ps = drive.mech_free_ps;
    let hit = completion_of(&mut drive, written, request(2, Op::Read, 8_000_000));
    let bus_ps = drive.bus_ps(8);
    let miss_overhead_done = (written * PS_PER_NS + 1_000_000_000).max(on_media_ps);
    assert_eq!(hit, (miss_overhead_done + bus_ps).div_ceil(PS_PER_NS));
    // The same hit with the mechanism free pays the hit overhead.
    let idle_hit = completion_of(
        &mut drive,
        hit + 50_000_000,
        request(3, Op::Read, 8_000_000),
    );
    assert_eq!(
        idle_hit - (hit + 50_000_000),
        (100_000_000 + bus_ps).div_ceil(PS_PER_NS)
    );
}

/// The default drive with `overheads` and its other parameters changed by `with`.
fn drive_with(overheads: Overheads, with: impl FnOnce(&mut DriveParams)) -> Drive {
    let mut params = DriveParams {
        overheads,
        ..DriveParams::default()
    };
    with(&mut params);
    Drive::new(params)
}

/// `base` with a 0.2 ms reselection, 0.1 ms data preparation and the `disconnect`
/// overheads (after a read's command, after a read and after a write; after a write's data).
fn bus_protocol(base: Overheads, disconnect: [f64; 3]) -> Overheads {
    Overheads {
        reselect: 0.2,
        data_prep: 0.1,
        disconnect,
        ..base
    }
}

#[test]
fn a_read_miss_reconnects_at_its_water_mark_and_pays_reselection_and_preparation() {
    // 8 sectors at a track's start, the bus 0.1 ms a sector (slower than the media's
    // 0.021): reconnecting at the first sector, the last crosses 8 bus times after it; at
    // a mark of half the request, after the fourth, 3 sectors later, plus the 0.2 ms
    // reselection and 0.1 ms data preparation DiskSim's `disk_check_bus` charges.
    let misses = Overheads {
        read_miss: [1.0, 1.0],
        ..Overheads::default()
    };
    let slow_bus = |p: &mut DriveParams| p.bus_sector_ms = 0.1;
    let mut at_first = drive_with(misses, slow_bus);
    let mut at_half = drive_with(bus_protocol(misses, [0.05, 0.05, 0.0]), |p| {
        slow_bus(p);
        p.read_water_mark = 0.5;
    });
    let read = request(1, Op::Read, 8_000_000);
    let first = completion_of(&mut at_first, 0, read);
    let half = completion_of(&mut at_half, 0, read);
    let per_sector_ps = at_half.rev_ps / 400;
    let later_ps = 3 * per_sector_ps + 300_000_000;
    assert!(
        (half - first).abs_diff(later_ps / PS_PER_NS) <= 1,
        "{half} - {first} ns against {later_ps} ps"
    );
    assert_eq!(at_half.read_mark(8), 4);
    assert_eq!(at_half.read_mark(1), 1, "at least one sector");
}

#[test]
fn a_write_through_write_reselects_for_its_completion_and_a_hit_pays_the_data_preparation() {
    let overheads = Overheads {
        read_hit: [0.1, 0.1],
        write_miss: [1.0, 1.0],
        ..Overheads::default()
    };
    let through = |p: &mut DriveParams| p.write_back = false;
    let mut plain = drive_with(overheads, through);
    let mut reselecting = drive_with(bus_protocol(overheads, [0.0, 0.0, 0.3]), through);
    // The data is in long before the far seek ends, so the preparation delays nothing and
    // the disconnect is over: the completion waits for the reselection alone.
    let write = request(1, Op::Write, 8_000_000);
    let a = completion_of(&mut plain, 0, write);
    let b = completion_of(&mut reselecting, 0, write);
    assert_eq!(b - a, 200_000);
    // A hit on the written data, 50 ms on: its data crosses after the hit overhead and the
    // preparation.
    let hit = request(2, Op::Read, 8_000_000);
    let a_hit = completion_of(&mut plain, a + 50_000_000, hit) - (a + 50_000_000);
    let b_hit = completion_of(&mut reselecting, b + 50_000_000, hit) - (b + 50_000_000);
    assert_eq!(b_hit - a_hit, 100_000);
}

#[test]
fn the_write_settling_delay_applies_to_a_seek_or_head_switch_and_not_to_a_write_in_place() {
    // DiskSim adds it to a nonzero positioning only (`dm_seek_time_g1`): a write on the
    // track the head is on, with no switch, takes none.
    let mut drive = drive_with(Overheads::default(), |p| p.write_settle_ms = 0.5);
    let far = request(1, Op::Write, 8_000_000);
    let seek_ps = ms_ps(drive.seek_ms(drive.place(far.sector).cylinder));
    let positioned = drive.access(0, &far, true, (0, 0, 0), 0).positioned;
    assert_eq!(
        positioned,
        seek_ps + 500_000_000,
        "a seek, then the settling"
    );
    let in_place = request(2, Op::Write, 8_000_100);
    let at = 50_000_000_000;
    assert_eq!(
        drive.access(at, &in_place, true, (0, 0, 0), 0).positioned,
        at,
        "the head is there"
    );
    let read = request(3, Op::Read, 8_000_200);
    assert_eq!(drive.access(at, &read, false, (0, 0, 0), 0).positioned, at);
}

#[test]
fn a_seek_that_changes_heads_takes_the_head_switch_where_that_is_longer() {
    // DiskSim's `dm_seek_time_g1` takes the longer of the seek and the head switch whenever
    // the heads differ; a switch slower than a one-cylinder seek is what shows it.
    let slow_switch = || drive_with(Overheads::default(), |p| p.head_switch_ms = 5.0);
    let drive = slow_switch();
    let next = |cylinder, surface| {
        (0..u64::MAX)
            .map(|s| s * 50)
            .find(|&s| {
                let at = drive.place(s);
                at.cylinder == cylinder && at.surface == surface
            })
            .unwrap()
    };
    let (same_head, other_head) = (next(1, 0), next(1, 1));
    let one_cylinder = ms_ps(drive.seek_ms(1));
    assert!(one_cylinder < 5_000_000_000);
    let positioned = |sector| {
        let read = request(1, Op::Read, sector);
        slow_switch()
            .access(0, &read, false, (0, 0, 0), 0)
            .positioned
    };
    assert_eq!(positioned(same_head), one_cylinder);
    assert_eq!(positioned(other_head), 5_000_000_000);
}

#[test]
fn a_write_positions_for_at_least_the_minimum_seek_delay() {
    // DiskSim's `Minimum seek delay`: 0.6 ms for the HP C2247A, even on the track the head
    // is on (`serve` passes no minimum for a write joining the one still going to the
    // media, which does not position).
    let mut drive = drive_with(Overheads::default(), |p| p.min_write_seek_ms = 0.6);
    let far = request(1, Op::Write, 8_000_000);
    let seek_ps = ms_ps(drive.seek_ms(drive.place(far.sector).cylinder));
    assert_eq!(
        drive
            .access(0, &far, true, (0, 0, 0), 600_000_000)
            .positioned,
        seek_ps,
        "a longer seek"
    );
    let in_place = request(2, Op::Write, 8_000_100);
    let at = 50_000_000_000;
    assert_eq!(
        drive
            .access(at, &in_place, true, (0, 0, 0), 600_000_000)
            .positioned,
        at + 600_000_000
    );
}

#[test]
fn a_write_crosses_the_bus_at_the_write_time_and_a_read_at_the_read_time() {
    // DiskSim's HP C2247A: 0.1701 ms a block reading, 0.18686 writing.
    let mut drive = drive_with(Overheads::default(), |p| {
        p.bus_sector_ms = 0.1;
        p.write_bus_sector_ms = Some(0.2);
    });
    // Buffered, a write completes once its 8 blocks have crossed: 1.6 ms.
    let written = completion_of(&mut drive, 0, request(1, Op::Write, 8_000_000));
    assert_eq!(written, 1_600_000);
    // A hit on them, the mechanism idle long after: 8 blocks at 0.1 ms.
    let at = 100_000_000;
    let hit = completion_of(&mut drive, at, request(2, Op::Read, 8_000_000));
    assert_eq!(hit - at, 800_000);
}

#[test]
fn with_extra_write_disconnects_a_write_waits_for_ten_sectors_of_its_data_before_the_media() {
    // DiskSim's `disk_buffer_block_available` for the HP C2247A's firmware: a write under
    // 45 sectors goes to the media once min(10, its length) are in the buffer, a longer one
    // once 15 are.
    let drive = drive_with(Overheads::default(), |p| p.extra_write_disconnect = true);
    assert_eq!(
        [1, 8, 10, 30, 44, 45, 200].map(|n| drive.write_gate(n)),
        [1, 8, 10, 10, 10, 15, 15]
    );
    // A 30-sector write in place, its data crossing at 1 µs a sector from time 0 (faster
    // than the media's 21): without the rule its first sector could go once it is in,
    // with it once the tenth is.
    let bus = |p: &mut DriveParams| p.write_bus_sector_ms = Some(0.001);
    let write = DeviceRequest {
        sectors: 30,
        ..request(1, Op::Write, 0)
    };
    let mut gated = drive_with(Overheads::default(), |p| {
        bus(p);
        p.extra_write_disconnect = true;
    });
    let gate_ps = gated.write_bus_ps(gated.write_gate(write.sectors));
    let one_ps = gated.write_bus_ps(1);
    assert_eq!(
        gated
            .access(0, &write, true, (0, one_ps, gate_ps), 0)
            .positioned,
        10 * one_ps
    );
    let mut plain = drive_with(Overheads::default(), bus);
    assert_eq!(plain.write_gate(write.sectors), 1);
    assert_eq!(
        plain
            .access(0, &write, true, (0, one_ps, one_ps), 0)
            .positioned,
        one_ps
    );
}

#[test]
fn slips_push_the_skew_of_later_tracks_under_spares_per_cylinder_or_track_as_disksim_assumes() {
    // The default drive: 4 surfaces of 400 sectors, one zone of 10 cylinders here.
    let (spt, surfaces) = (400, 4);
    let cylinder = spt * surfaces;
    let drive = |scheme: u8, slips: Vec<u64>| {
        let zone = DriveZone {
            last_cylinder: 9,
            spares: 10 * surfaces,
            slips,
            ..DriveParams::default().zones[0].clone()
        };
        Drive::new(DriveParams {
            sparing_scheme: scheme,
            zones: vec![zone],
            capacity_sectors: 10 * (cylinder - surfaces),
            ..DriveParams::default()
        })
    };
    // One slip, five sectors into the zone's first track.
    let angle = |scheme, slips, lbn| {
        let p = drive(scheme, slips).place(lbn);
        (p.cylinder, p.track, p.angle)
    };
    for scheme in [2u8, 4, 5, 6] {
        // Cylinder 1's first LBN lies on its first sector with or without the slip (a
        // spare of cylinder 0 takes it up), one sector further round with it
        // (`g1_map_pbn_skew`).
        let lbn = cylinder - surfaces;
        let (c, t, plain) = angle(scheme, vec![], lbn);
        assert_eq!((c, t), (1, 0), "scheme {scheme}");
        assert_eq!(angle(scheme, vec![5], lbn), (1, 0, (plain + 1) % spt));
        // Within the slip's own cylinder only the map moves: an LBN lands one sector on,
        // where the next LBN lands without the slip, at that sector's angle.
        let in_first = 2 * spt;
        assert_eq!(
            angle(scheme, vec![5], in_first - 1),
            angle(scheme, vec![], in_first),
            "scheme {scheme}"
        );
    }
    // Spares per track: every track after the slip's.
    let (c, t, plain) = angle(3, vec![], spt - 1);
    assert_eq!((c, t), (0, 1));
    assert_eq!(angle(3, vec![5], spt - 1), (0, 1, (plain + 1) % spt));
    // Spares per zone or range: the slip moves the map, not the skew.
    for scheme in [8u8, 9, 10] {
        let lbn = 2 * cylinder;
        let with = drive(scheme, vec![5]).place(lbn);
        let without = drive(scheme, vec![]).place(lbn + 1);
        assert_eq!(with.angle, without.angle, "scheme {scheme}");
    }
}

/// A drive whose media outruns its bus: 100 sectors a track at 6 000 rpm (0.1 ms a sector,
/// 10 ms a revolution), no skews, 0.25 ms a sector across the bus, segments of `segment`
/// sectors, no overheads, the head on sector 0 of cylinder 0.
fn slow_bus_drive(segment: u64, read_direct_to_buffer: bool) -> Drive {
    Drive::new(DriveParams {
        rpm: 6000.0,
        zones: vec![DriveZone {
            first_cylinder: 0,
            last_cylinder: 9999,
            sectors_per_track: 100,
            track_skew: 0,
            cylinder_skew: 0,
            ..DriveParams::default().zones[0].clone()
        }],
        bus_sector_ms: 0.25,
        overheads: Overheads::default(),
        segment_sectors: segment,
        max_read_ahead_sectors: segment,
        read_direct_to_buffer,
        ..DriveParams::default()
    })
}

#[test]
fn a_read_longer_than_its_segment_waits_for_the_bus_to_free_room_as_disksim_reads_it() {
    let read = DeviceRequest {
        id: 1,
        op: Op::Read,
        sector: 0,
        sectors: 30,
    };
    // With room for all of it the head reads sectors 0..30 by 3 ms, and the bus sends each
    // from the first's read (0.1 ms) on: 0.1 + 30 × 0.25 = 7.6 ms.
    let mut roomy = slow_bus_drive(64, true);
    assert_eq!(completion_of(&mut roomy, 0, read), 7_600_000);
    assert_eq!(roomy.mech_free_ps, 3_000_000_000);
    // With 10 sectors of room, sector j needs sector j - 10 sent (at 0.1 + (j - 9) × 0.25
    // ms), checked as the head reaches it (j × 0.1 ms): sectors 0..15 go in the first pass,
    // sector 15 waits a revolution (to 11.6 ms), and in that one the rest all find room,
    // the last read at 13.0 ms; the bus, idle from 3.85 ms, sends 15..30 from 11.6 ms:
    // 11.6 + 15 × 0.25 = 15.35 ms.
    let mut held = slow_bus_drive(10, true);
    assert_eq!(completion_of(&mut held, 0, read), 15_350_000);
    assert_eq!(
        held.mech_free_ps, 13_000_000_000,
        "the head busy to the last"
    );
    // Checked once the sector is read (`Read directly to buffer = 0`), each has a sector's
    // time more: sector 16 waits the revolution instead, read at 11.7 ms, and the bus
    // sends 16..30 from there: 11.7 + 14 × 0.25 = 15.2 ms.
    let mut after = slow_bus_drive(10, false);
    assert_eq!(completion_of(&mut after, 0, read), 15_200_000);
    assert_eq!(after.mech_free_ps, 13_000_000_000);
}

#[test]
fn a_read_through_a_one_sector_segment_reads_a_sector_a_revolution_up_to_the_longest_read() {
    // Sector j waits for sector j - 1 to cross the bus, 0.25 ms after it was read, by which
    // time its own pass has begun: one revolution each. Read at 0.1 (j + 1) + 10 j ms, the
    // last sent 0.25 ms after it: for the 2^20 sectors a validation trace may ask in one
    // read, 0.1 × 2^20 + 10 × (2^20 - 1) + 0.25 ms.
    let mut one = slow_bus_drive(1, true);
    let read = DeviceRequest {
        id: 1,
        op: Op::Read,
        sector: 0,
        sectors: room::MAX_ROOM_SECTORS,
    };
    let n = u64::from(room::MAX_ROOM_SECTORS);
    let expected_ps = n * 100_000_000 + (n - 1) * 10_000_000_000 + 250_000_000;
    assert_eq!(completion_of(&mut one, 0, read), expected_ps / PS_PER_NS);
}

/// A buffered write of 30 sectors from sector 10 of a 100-sector track (1 ms a sector, a
/// 100 ms revolution) through a 10-sector segment, its data crossing at 0.25 ms a sector
/// with no overheads but a 0.5 ms reselection: when it is reported, and when its last
/// sector is on the media, in ms.
fn write_through_a_small_segment(mark: u64, holds_bus: bool) -> (f64, f64) {
    let mut drive = drive_with(
        Overheads {
            reselect: 0.5,
            ..Overheads::default()
        },
        |p| {
            p.rpm = 600.0;
            p.zones[0].sectors_per_track = 100;
            p.segment_sectors = 10;
            p.write_water_mark = mark;
            p.write_holds_bus = holds_bus;
            p.bus_sector_ms = 0.25;
        },
    );
    let write = DeviceRequest {
        id: 1,
        op: Op::Write,
        sector: 10,
        sectors: 30,
    };
    let reported = completion_of(&mut drive, 0, write);
    (reported as f64 / 1e6, drive.mech_free_ps as f64 / 1e9)
}

#[test]
fn a_write_longer_than_its_segment_refills_it_at_the_low_water_mark_as_disksim_writes_it() {
    // The first 10 sectors' data is in by 2.5 ms; the head, positioned at once, waits for
    // sector 10 (10 ms) and writes a sector a millisecond from there. With a mark of 2 the
    // drive reselects as the 8th sector is written (18 ms, 2 of the segment left) and sends
    // the 8 sectors of room (18.75–20.5 ms), again at 26 ms (26.75–28.5) and at 34 ms for
    // the last 4 (34.75–35.5): every sector's data is in before the head reaches it, the
    // write is on the media at 40 ms and reported once its last data is in, 35.5 ms.
    assert_eq!(write_through_a_small_segment(2, false), (35.5, 40.0));
    // With a mark of 0 the drive waits for the segment to drain: the 10th sector is
    // written at 20 ms, the refill's first data is in at 20.75, the head has passed the
    // 11th sector and writes it a revolution later (121 ms); the same again from the 21st
    // (the refill at 130.5 ms, its first data at 130.75, the sector under the head at 130):
    // on the media at 240 ms, reported at 133 ms.
    assert_eq!(write_through_a_small_segment(0, false), (133.0, 240.0));
    // Holding the bus, the drive takes each sector's data as soon as its room frees, no
    // reselection: the 11th sector's data comes in as the 1st is written (11.25 ms), and
    // the last as the 20th is (30.25 ms), all before the head.
    assert_eq!(write_through_a_small_segment(0, true), (30.25, 40.0));
}
