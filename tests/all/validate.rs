//! The simulator against recorded drives: DiskSim's descriptions import, the spec file the
//! importer writes is the same drive, and the demerit figures stay where BENCHMARKS.md says.

use std::path::{Path, PathBuf};

use schedhost::backend::sim::drive::disksim::{import, import_parv, to_spec_text};
use schedhost::backend::sim::{DeviceSpec, SurfaceOrder};
use schedhost::fidelity::{Differences, disksim_figure, parse_trace, validate};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/validation")
        .join(name)
}

fn demerit(trace: &str, device: &DeviceSpec) -> f64 {
    let text = std::fs::read_to_string(data(trace)).unwrap();
    validate(&parse_trace(&text).unwrap(), device)
        .unwrap()
        .demerit_percent
}

#[test]
fn the_three_recorded_drives_import_and_validate_within_their_measured_demerit() {
    // The figures of BENCHMARKS.md ("Simulator validation"), with a little room: a change
    // that moves one past its bound changed the model and must say so there.
    // The Atlas's slips, modelled as DiskSim maps them, moved it from 4.23 % to 4.32 %;
    // reading the free blocks it declares, to 3.91 %. DiskSim's read water mark of 0 by
    // request size, a read sent as the media delivers it, moved the Cheetah from 5.45 % to
    // 7.10 % and the Atlas from 2.90 % to 2.77 %; a segment that holds only its size, the
    // Cheetah to 6.74 %; a read's bus waiting for each sector to be read, the Atlas to
    // 2.46 % and the Cheetah to 6.32 %; read-ahead aimed as DiskSim aims it, the Atlas to
    // 2.50 % and the HP to 1.89 %; the head left where read-ahead took it, the Cheetah to
    // 5.97 % and the HP to 1.88 %; read-ahead paying each track's skew, the HP to 1.89 %.
    for (drive, bound) in [("atlas10k", 3.0), ("cheetah4LP", 6.5), ("hp_c3323a", 2.0)] {
        let device = DeviceSpec::parse(data(&format!("{drive}.parv")).to_str().unwrap()).unwrap();
        let d = demerit(&format!("{drive}.trace"), &device);
        assert!(d <= bound, "{drive}: demerit {d:.2} % (bound {bound} %)");
    }
}

#[test]
fn the_cheetah_model_gives_disksims_own_times_for_random_reads() {
    // DiskSim's simulated response times for 56 random 8-block reads on the Cheetah 4LP,
    // from its per-request log (examples/validation/README.md): overhead, seek, rotation,
    // the first sector's read and 8 blocks over a bus slower than the media. Replayed with
    // the same arrivals, the model gives the same times to the µs.
    let device = DeviceSpec::parse(data("cheetah4LP.parv").to_str().unwrap()).unwrap();
    let text = std::fs::read_to_string(data("cheetah4LP.disksim-reads.trace")).unwrap();
    let v = validate(&parse_trace(&text).unwrap(), &device).unwrap();
    assert_eq!(v.requests, 56);
    assert!(
        v.demerit_us < 1.0,
        "{:.2} µs RMS from DiskSim",
        v.demerit_us
    );
}

/// What DiskSim's own validation run printed for a drive, transcribed (`NAME.disksim-*` in
/// examples/validation): its totals by name and its distribution's bucket edges (ms) with
/// the fraction of requests under each; its per-request differences are in the library's
/// table of DiskSim's figures.
struct DiskSimOutput {
    totals: std::collections::BTreeMap<String, f64>,
    cdf: Vec<(f64, f64)>,
    differences: Differences,
}

fn disksim_output(name: &str, trace: &str) -> DiskSimOutput {
    let text = std::fs::read_to_string(data(name)).unwrap();
    let mut out = DiskSimOutput {
        totals: std::collections::BTreeMap::new(),
        cdf: Vec::new(),
        differences: disksim_figure(trace).unwrap().own,
    };
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let (key, value) = line.split_once(' ').unwrap();
        let value: f64 = value.parse().unwrap();
        match key.parse::<f64>() {
            Ok(edge_ms) => out.cdf.push((edge_ms, value)),
            Err(_) => {
                out.totals.insert(key.to_owned(), value);
            }
        }
    }
    out
}

/// The mean of the model's times, in ms, over the requests of direction `op`.
fn mean_ms(
    trace: &[schedhost::fidelity::RecordedRequest],
    times: &[f64],
    op: schedhost_sdk::Op,
) -> f64 {
    let of_op: Vec<f64> = trace
        .iter()
        .zip(times)
        .filter(|(r, _)| r.op == op)
        .map(|(_, &us)| us)
        .collect();
    of_op.iter().sum::<f64>() / of_op.len() as f64 / 1000.0
}

/// `drive`'s validation trace replayed on its `.parv`: the trace and each request's time.
fn replayed(drive: &str) -> (Vec<schedhost::fidelity::RecordedRequest>, Vec<f64>) {
    let device = DeviceSpec::parse(data(&format!("{drive}.parv")).to_str().unwrap()).unwrap();
    let text = std::fs::read_to_string(data(&format!("{drive}.trace"))).unwrap();
    let trace = parse_trace(&text).unwrap();
    let times = schedhost::fidelity::replay(&trace, &device).unwrap();
    (trace, times)
}

#[test]
fn the_cheetah_replay_is_disksims_own_simulation_of_its_trace_bucket_by_bucket() {
    // DiskSim's own output for the Cheetah 4LP's validation trace (its distribution of
    // simulated times, bucket by bucket, and its totals: `cheetah4LP.disksim-cdf`). The
    // model was 124 ms short of DiskSim's summed 50 704 ms while read-ahead left the head
    // over the request's track; now the two agree to a request or two in every bucket.
    let disksim = disksim_output("cheetah4LP.disksim-cdf", "cheetah4LP.trace");
    let (trace, times) = replayed("cheetah4LP");
    assert_eq!(times.len() as f64, disksim.totals["requests"]);
    let n = times.len() as f64;
    // DiskSim's doubles put its 1 294 four-block read hits (0.068 + 4 × 0.106 ms) either
    // side of the 0.492 ms edge (655 under, 639 on it), where the model's picoseconds land
    // every one on it: that edge alone is not compared.
    for &(edge_ms, fraction) in disksim.cdf.iter().filter(|&&(edge, _)| edge != 0.492) {
        let under = times.iter().filter(|&&us| us < edge_ms * 1000.0).count();
        let ours = under as f64 / n;
        assert!(
            (ours - fraction).abs() <= 5e-4,
            "under {edge_ms} ms: {ours:.4} of the requests, DiskSim {fraction:.4}"
        );
    }
    let sum_ms: f64 = times.iter().sum::<f64>() / 1000.0;
    assert!(
        (sum_ms - disksim.totals["sum_ms"]).abs() < 1.0,
        "summed {sum_ms:.3} ms, DiskSim {}",
        disksim.totals["sum_ms"]
    );
    let write_mean_ms = mean_ms(&trace, &times, schedhost_sdk::Op::Write);
    assert!((write_mean_ms - disksim.totals["write_mean_ms"]).abs() < 1e-5);
    // Request by request, the differences fall where DiskSim's own did, to a request or
    // two a bucket (so the match above is not two different orders of the same times).
    assert_request_by_request(&disksim, (&trace, &times), 3);
}

#[test]
fn the_hp_replay_is_disksims_own_simulation_of_its_trace_to_one_revolution() {
    // DiskSim's output for the HP C3323A's trace (`hp_c3323a.disksim-totals`): the model
    // sums one revolution (11.1 ms) under DiskSim's 141 325 ms, its writes' mean is
    // DiskSim's to the µs and its reads' within 2 µs, and its per-request differences fall
    // in DiskSim's buckets to three requests a bucket; the longest request is DiskSim's to
    // the µs. Before a command arriving during a read-ahead's track switch waited out the
    // switch (as DiskSim's `DISK_SEEK_STOPTIME` has it) the model summed ten revolutions
    // under, its means 11 and 13 µs short.
    let disksim = disksim_output("hp_c3323a.disksim-totals", "hp_c3323a.trace");
    let (trace, times) = replayed("hp_c3323a");
    assert_eq!(times.len() as f64, disksim.totals["requests"]);
    let sum_ms: f64 = times.iter().sum::<f64>() / 1000.0;
    assert!(
        (sum_ms - disksim.totals["sum_ms"]).abs() < 15.0,
        "summed {sum_ms:.3} ms, DiskSim {}",
        disksim.totals["sum_ms"]
    );
    for (op, key) in [
        (schedhost_sdk::Op::Read, "read_mean_ms"),
        (schedhost_sdk::Op::Write, "write_mean_ms"),
    ] {
        let mean = mean_ms(&trace, &times, op);
        assert!(
            (mean - disksim.totals[key]).abs() < 0.003,
            "{key}: {mean:.6} against {}",
            disksim.totals[key]
        );
    }
    assert_request_by_request(&disksim, (&trace, &times), 3);
}

#[test]
fn the_hp_replay_falls_in_disksims_own_table_of_its_writes_row_for_row() {
    // DiskSim's output counts each write's recorded time less its simulated one in rows of
    // half a millisecond, truncated toward zero (`hp_c3323a.disksim-writes`): row 0 holds
    // -0.5 ms and under, row 1 (-0.5, +0.5), row k the half-millisecond [(k - 1) / 2, k / 2)
    // ms. The model's 2 961 writes fall in DiskSim's rows exactly, every row's count
    // DiskSim's (read truncated in microseconds instead, the first two rows would be 1 360
    // and 371 against DiskSim's 914 and 817: that is how the table's rows were settled).
    let text = std::fs::read_to_string(data("hp_c3323a.disksim-writes")).unwrap();
    let disksim: Vec<u32> = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.split_once(' ').unwrap().1.parse().unwrap())
        .collect();
    let (trace, times) = replayed("hp_c3323a");
    let mut ours = vec![0u32; disksim.len()];
    let mut past_the_table = 0;
    for (r, &us) in trace.iter().zip(&times) {
        if r.op != schedhost_sdk::Op::Write {
            continue;
        }
        let half_ms = ((r.service_us - us) / 500.0).trunc() as i64;
        let row = if half_ms < 0 { 0 } else { half_ms as usize + 1 };
        match ours.get_mut(row) {
            Some(n) => *n += 1,
            None => past_the_table += 1,
        }
    }
    assert_eq!(past_the_table, 0, "writes past DiskSim's last row");
    assert_eq!(ours.iter().sum::<u32>(), 2961);
    assert_eq!(ours, disksim, "the model's rows against DiskSim's");
}

#[test]
fn the_rms_tool_gives_disksims_stated_hp_figure_from_disksims_own_output_and_the_model_its_own() {
    // DiskSim's own simulated distribution for the HP C3323A's trace
    // (`hp_c3323a.disksim-dist`, from its output), read by the library's copy of DiskSim's
    // rms tool against the trace, is the figure `runvalid` states (0.306): the tool is
    // DiskSim's. Each bucket's requests stand in at its upper edge less half a µs, which
    // is in the bucket whatever its width.
    let text = std::fs::read_to_string(data("hp_c3323a.disksim-dist")).unwrap();
    let mut disksim = Vec::new();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let (edge_ms, requests) = line.split_once(' ').unwrap();
        let edge_us: f64 = edge_ms.parse::<f64>().unwrap() * 1000.0;
        let requests: usize = requests.parse().unwrap();
        disksim.extend(std::iter::repeat_n(edge_us - 0.5, requests));
    }
    let (trace, times) = replayed("hp_c3323a");
    let recorded: Vec<f64> = trace.iter().map(|r| r.service_us).collect();
    assert_eq!(disksim.len(), recorded.len());
    let theirs = schedhost::fidelity::disksim_rms_ms(&recorded, &disksim);
    assert_eq!(
        (theirs * 1000.0).round(),
        306.0,
        "DiskSim's own by the tool: {theirs}"
    );
    // The model, read the same way, is at it to the three decimals DiskSim states (0.3064
    // against 0.3057; 0.3144 before the track-switch rule), its distribution within 5 µs
    // of DiskSim's by the same tool (15 µs before). This holds the figure where it is
    // measured, not where it is wanted.
    let ours = schedhost::fidelity::disksim_rms_ms(&recorded, &times);
    assert!(
        (ours - 0.3064).abs() < 0.0005,
        "the model by the tool: {ours}"
    );
    assert_eq!(
        (ours * 1000.0).round(),
        306.0,
        "the model by the tool: {ours}"
    );
    let apart = schedhost::fidelity::disksim_rms_ms(&disksim, &times);
    assert!(apart < 0.006, "the model from DiskSim's run: {apart} ms");
}

#[test]
fn the_atlas_replay_agrees_with_the_drive_request_by_request_at_least_as_often_as_disksim() {
    // The Atlas 10K is the one of the three where the model and DiskSim part (its free
    // blocks, BENCHMARKS.md): request by request the model is within a millisecond of the
    // recorded time on more requests than DiskSim's own run (6 792 of 10 000), and it misses
    // by each of DiskSim's amounts no more often than DiskSim does, to 1 % of the requests.
    let (trace, times) = replayed("atlas10k");
    let ours = Differences::count(&trace, &times);
    let theirs = disksim_figure("atlas10k.trace").unwrap().own;
    assert_eq!(ours.total(), theirs.total());
    assert!(
        ours.within_one_ms() >= theirs.within_one_ms(),
        "within 1 ms: {:.4} of the requests, DiskSim {:.4}",
        ours.within_one_ms(),
        theirs.within_one_ms()
    );
    let misses = ours.requests.iter().zip(&theirs.requests).enumerate();
    for (bucket, (&o, &d)) in misses.filter(|&(bucket, _)| bucket != 3) {
        assert!(
            o <= d + 100,
            "bucket {bucket}: {:?} against {:?}",
            ours.requests,
            theirs.requests
        );
    }
}

/// Each of DiskSim's per-request buckets within `slack` requests of the model's, and the
/// longest request DiskSim's to the µs.
fn assert_request_by_request(
    disksim: &DiskSimOutput,
    (trace, times): (&[schedhost::fidelity::RecordedRequest], &[f64]),
    slack: u32,
) {
    let ours = Differences::count(trace, times).requests;
    let theirs = disksim.differences.requests;
    for (bucket, (&o, &d)) in ours.iter().zip(&theirs).enumerate() {
        assert!(
            o.abs_diff(d) <= slack,
            "diff bucket {bucket}: {ours:?} against {theirs:?}"
        );
    }
    let max_ms = times.iter().copied().fold(0.0, f64::max) / 1000.0;
    assert!(
        (max_ms - disksim.totals["max_ms"]).abs() < 1e-3,
        "longest {max_ms} ms"
    );
}

#[test]
fn an_imported_spec_file_is_the_same_drive_as_the_disksim_files() {
    let imported = import_parv(&data("hp_c3323a.parv")).unwrap();
    let text = to_spec_text(&imported, Path::new("hp_c3323a.parv"));
    let from_text = DeviceSpec::parse_file(Path::new("hp.spec"), &text).unwrap();
    let DeviceSpec::Drive(params) = &from_text else {
        panic!("not a drive: {from_text:?}")
    };
    assert_eq!(**params, imported.params);
    assert_eq!(
        demerit("hp_c3323a.trace", &from_text),
        demerit(
            "hp_c3323a.trace",
            &DeviceSpec::Drive(Box::new(imported.params.clone()))
        )
    );
}

#[test]
fn what_the_importer_cannot_represent_is_listed() {
    let imported = import(&data("cheetah4LP.diskspecs")).unwrap();
    let notes = imported.not_represented.join("\n");
    assert!(notes.contains("Fast write level = 1"), "{notes}");
    // Its slips are in the LBN map now, and its one defect is listed as its own spare.
    assert!(!notes.contains("slipped"), "{notes}");
    let slips: usize = imported.params.zones.iter().map(|z| z.slips.len()).sum();
    assert_eq!(slips, 20);
    assert!(imported.params.zones.iter().all(|z| z.remaps.is_empty()));
    assert!(imported.params.zones.len() > 1 && imported.params.seek.len() > 100);
}

#[test]
fn a_read_water_mark_of_zero_by_request_size_sends_reads_as_the_media_delivers_them() {
    // The Cheetah and the Atlas declare a mark of 0 by request size without holding the
    // bus: DiskSim reconnects once one sector is buffered and follows the media, giving the
    // bus up and taking it back between sectors; the model's overlapped transfer, and
    // nothing left to list.
    for drive in ["cheetah4LP", "atlas10k"] {
        let imported = import(&data(&format!("{drive}.diskspecs"))).unwrap();
        assert!(!imported.params.transfer_after_media, "{drive}");
        let notes = imported.not_represented.join("\n");
        assert!(!notes.contains("water mark"), "{drive}: {notes}");
    }
    // A mark between 0 and the whole request reconnects once that share is buffered.
    let halfway = cheetah_declaring(
        "High (read) water mark = 0.000000,",
        "High (read) water mark = 0.5,",
    );
    assert!(!halfway.params.transfer_after_media);
    assert_eq!(halfway.params.read_water_mark, 0.5);
    assert!(
        halfway
            .not_represented
            .iter()
            .all(|n| !n.contains("High (read) water mark")),
        "{:?}",
        halfway.not_represented
    );
    // The whole request (the HP's 1) waits for the last sector.
    let whole = import_parv(&data("hp_c3323a.parv")).unwrap();
    assert!(whole.params.transfer_after_media);
}

/// The Cheetah with one line of its .diskspecs replaced.
fn cheetah_declaring(from: &str, to: &str) -> schedhost::backend::sim::drive::disksim::Imported {
    let files = [
        "cheetah4LP.diskspecs",
        "cheetah4LP.model",
        "cheetah4LP.seek",
    ];
    let dir = edited_copy(&files, &[("cheetah4LP.diskspecs", from, to)]);
    let imported = import(&dir.join("cheetah4LP.diskspecs")).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    imported
}

#[test]
fn a_minimum_read_ahead_imports_and_disksims_postpass_rules_apply() {
    // The three drives declare 0. A minimum imports as itself and is not listed; where
    // nothing is read ahead DiskSim takes it as 0, and a maximum under it as the minimum.
    let min = cheetah_declaring(
        "Minimum read-ahead (blks) = 0,",
        "Minimum read-ahead (blks) = 64,",
    );
    assert_eq!(min.params.min_read_ahead_sectors, 64);
    assert_eq!(min.params.max_read_ahead_sectors, 282);
    assert!(
        !min.not_represented
            .iter()
            .any(|n| n.contains("Minimum read-ahead")),
        "{:?}",
        min.not_represented
    );
    let spec = to_spec_text(&min, Path::new("cheetah4LP.diskspecs"));
    assert!(spec.contains("min_read_ahead_sectors = 64"), "{spec}");
    let edited = |changes: &[(&str, &str, &str)]| {
        let files = [
            "cheetah4LP.diskspecs",
            "cheetah4LP.model",
            "cheetah4LP.seek",
        ];
        let dir = edited_copy(&files, changes);
        import(&dir.join("cheetah4LP.diskspecs")).unwrap().params
    };
    let min_line = "Minimum read-ahead (blks) = 0,";
    let over_max = edited(&[
        (
            "cheetah4LP.diskspecs",
            min_line,
            "Minimum read-ahead (blks) = 64,",
        ),
        (
            "cheetah4LP.diskspecs",
            "Maximum read-ahead (blks) = 282,",
            "Maximum read-ahead (blks) = 16,",
        ),
    ]);
    assert_eq!(over_max.max_read_ahead_sectors, 64);
    let none = edited(&[
        (
            "cheetah4LP.diskspecs",
            min_line,
            "Minimum read-ahead (blks) = 64,",
        ),
        (
            "cheetah4LP.diskspecs",
            "Buffer continuous read = 3,",
            "Buffer continuous read = 0,",
        ),
    ]);
    assert_eq!(
        (none.min_read_ahead_sectors, none.max_read_ahead_sectors),
        (0, 0)
    );
}

#[test]
fn the_drives_fcfs_queue_is_not_listed_but_another_policy_or_a_timeout_scheme_on_is() {
    // DiskSim's FCFS (1) is the model's arrival order.
    let atlas = import(&data("atlas10k.diskspecs")).unwrap();
    let listed = atlas.not_represented.join("\n");
    assert!(!listed.contains("Scheduler"), "{listed}");
    let notes = |from: &str, to: &str| {
        atlas_edited("atlas10k.diskspecs", from, to)
            .unwrap()
            .not_represented
            .join("\n")
    };
    let sptf = notes("Scheduling policy = 1,", "Scheduling policy = 8,");
    assert!(sptf.contains("Scheduling policy = 8 (FCFS is 1)"), "{sptf}");
    let timeouts = notes(
        "Scheduling timeout scheme = 0,",
        "Scheduling timeout scheme = 1,",
    );
    assert!(
        timeouts.contains("Scheduling timeout scheme = 1"),
        "{timeouts}"
    );
    // Under FCFS a cylinder mapping orders nothing.
    let mapping = notes(
        "Cylinder mapping strategy = 0,",
        "Cylinder mapping strategy = 1,",
    );
    assert!(!mapping.contains("Scheduler"), "{mapping}");
}

#[test]
fn a_writes_low_water_mark_and_a_held_write_bus_import_as_disksim_reads_them() {
    // The mark in blocks as `disk_select_bus_request` takes it: by the request's size,
    // max(1, mark × the segment) for a write longer than its segment; else the mark × the
    // segment rounded up. A write's room is represented: nothing about it is listed.
    let room = |imported: &schedhost::backend::sim::drive::disksim::Imported| {
        assert!(
            !imported
                .not_represented
                .iter()
                .any(|n| n.contains("water mark") || n.contains("room")),
            "{:?}",
            imported.not_represented
        );
        (
            imported.params.write_water_mark,
            imported.params.write_holds_bus,
        )
    };
    // The HP: a mark of its whole 512-block segment, by request size.
    assert_eq!(room(&hp_declaring(&[])), (512, false));
    let by_segment = hp_declaring(&[
        (
            "Set watermark by reqsize = 1",
            "Set watermark by reqsize = 0",
        ),
        (
            "Low (write) water mark = 1.000000",
            "Low (write) water mark = 0.0",
        ),
    ]);
    assert_eq!(room(&by_segment), (0, false));
    let held = hp_declaring(&[(
        "Hold bus entire write xfer = 0",
        "Hold bus entire write xfer = 1",
    )]);
    assert_eq!(room(&held), (512, true));
    // The Atlas: 0 by request size is one block; half of its 374, 187.
    let atlas = |from: &str, to: &str| atlas_edited("atlas10k.diskspecs", from, to).unwrap();
    let zero = atlas(
        "Low (write) water mark = 0.000000",
        "Low (write) water mark = 0.0",
    );
    assert_eq!(room(&zero), (1, false));
    let half = atlas(
        "Low (write) water mark = 0.000000",
        "Low (write) water mark = 0.5",
    );
    assert_eq!(room(&half), (187, false));
}

#[test]
fn a_remapped_defect_is_listed_as_timed_in_place_and_one_that_is_its_own_spare_is_not() {
    let remapped = |to: &str| {
        let files = [
            "cheetah4LP.diskspecs",
            "cheetah4LP.model",
            "cheetah4LP.seek",
        ];
        let change = format!("233375,\n               {to}\n");
        let dir = edited_copy(
            &files,
            &[(
                "cheetah4LP.model",
                "233375,\n               233375\n",
                change.as_str(),
            )],
        );
        let imported = import(&dir.join("cheetah4LP.diskspecs")).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        imported.not_represented.join("\n")
    };
    // The Cheetah's one defect names itself as its spare: DiskSim does not move it.
    assert!(!remapped("233375").contains("remapped defects"));
    let notes = remapped("233400");
    assert!(
        notes.contains("1 remapped defects: the LBN map sends each to its spare"),
        "{notes}"
    );
}

#[test]
fn read_directly_to_buffer_imports_as_when_a_read_sectors_room_is_checked_and_survives_the_spec_file()
 {
    // DiskSim checks a read sector's room as the head reaches it (1) or once it is read
    // (0, `disk_buffer_sector_done`); either way the model represents it, with nothing
    // listed.
    for (declared, at_head) in [("1", true), ("0", false)] {
        let imported = atlas_edited(
            "atlas10k.diskspecs",
            "Read directly to buffer = 1",
            &format!("Read directly to buffer = {declared}"),
        )
        .unwrap();
        assert_eq!(imported.params.read_direct_to_buffer, at_head);
        assert!(
            imported
                .not_represented
                .iter()
                .all(|n| !n.contains("Read directly to buffer")),
            "{:?}",
            imported.not_represented
        );
        assert_eq!(through_spec_file(&imported), imported.params);
    }
}

#[test]
fn broken_disksim_files_and_specs_are_refused_with_file_and_reason() {
    let dir = std::env::temp_dir().join(format!("schedhost-disksim-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let specs = dir.join("bad.diskspecs");
    std::fs::write(
        &specs,
        "disksim_disk X {\n  Model = source missing.model,\n}\n",
    )
    .unwrap();
    let err = import(&specs).unwrap_err().to_string();
    assert!(err.contains("missing.model"), "{err}");
    std::fs::write(&specs, "disksim_disk X {\n  Model = source bad.model\n").unwrap();
    let err = import(&specs).unwrap_err().to_string();
    assert!(
        err.contains("bad.diskspecs") && err.contains("unclosed"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
    for (text, want) in [
        (
            "model = drive\nzone = 0 10 0 1 1 0\nseek = 1 1\n",
            "1 to 1048576 sectors per track",
        ),
        (
            "model = drive\nzone = 0 10 100 1 1 18446744073709551615\n",
            "more than the zone's",
        ),
        (
            "model = drive\nzone = 0 10 100 1 1 0\nseek = 5 1\nseek = 3 1\n",
            "distances must rise",
        ),
        (
            "model = drive\nzone = 0 9 100 1 1 0\nseek = 1 1\ncapacity_sectors = 99999999\n",
            "more than the zones hold",
        ),
    ] {
        let err = spec_refusal(text);
        assert!(err.contains(want), "{text:?}: {err}");
    }
}

#[test]
fn an_extreme_drive_spec_serves_its_requests_without_overflow() {
    // One revolution a minute, a million sectors a track and the longest seek allowed:
    // products of the two pass u64.
    let slow = "model = drive\nrpm = 1\nsurfaces = 1\nzone = 0 3 1048576 1048575 1048575 0\nseek = 1 1000\ncapacity_sectors = 4194304\n";
    let spec = DeviceSpec::parse_file(Path::new("slow.spec"), slow).unwrap();
    let trace = parse_trace("R Hit 4194000 200 1 0\nW Hit 0 1048576 1 0\nR Hit 8 8 1 0\n").unwrap();
    let v = validate(&trace, &spec).unwrap();
    assert_eq!(v.requests, 3);
    assert!(v.simulated.max_us.is_finite() && v.simulated.max_us > 0.0);
    // The same with an hour for every controller step and a write's bus an hour a sector:
    // the replay runs past its bound and says so, where an addition would have overflowed.
    let hours = format!(
        "{slow}data_prep_ms = 3600000\nreselect_ms = 3600000\nwrite_disconnect_ms = 3600000\nread_disconnect_after_read_ms = 3600000\nmin_write_seek_ms = 3600000\nwrite_bus_sector_ms = 3600000\nread_water_mark = 1\nwrite_back = 0\nextra_write_disconnect = 1\n"
    );
    let spec = DeviceSpec::parse_file(Path::new("hours.spec"), &hours).unwrap();
    let err = validate(&trace, &spec).unwrap_err();
    assert!(err.contains("100 days"), "{err}");
}

/// What a spec file of `text` is refused with.
fn spec_refusal(text: &str) -> String {
    DeviceSpec::parse_file(Path::new("s.spec"), text)
        .unwrap_err()
        .to_string()
}

/// atlas10k's drive copied into a folder of its own, `from` replaced by `to` in its `file`
/// (`.model` or `.diskspecs`), and imported.
fn atlas_edited(
    file: &str,
    from: &str,
    to: &str,
) -> Result<schedhost::backend::sim::drive::disksim::Imported, String> {
    let files = ["atlas10k.diskspecs", "atlas10k.model", "atlas10k.seek"];
    let dir = edited_copy(&files, &[(file, from, to)]);
    let imported = import(&dir.join("atlas10k.diskspecs"));
    let _ = std::fs::remove_dir_all(&dir);
    imported.map_err(|e| e.to_string())
}

/// `imported` written as a spec file and read back: the drive the file describes.
fn through_spec_file(
    imported: &schedhost::backend::sim::drive::disksim::Imported,
) -> schedhost::backend::sim::DriveParams {
    let text = to_spec_text(imported, Path::new("drive.parv"));
    match DeviceSpec::parse_file(Path::new("drive.spec"), &text).unwrap() {
        DeviceSpec::Drive(params) => *params,
        other => panic!("not a drive: {other:?}"),
    }
}

/// `files` of `examples/validation` copied into a folder of their own (one per call: the
/// tests run on threads of one process), with lines replaced (`file`, `from`, `to` each).
fn edited_copy(files: &[&str], changes: &[(&str, &str, &str)]) -> PathBuf {
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("schedhost-edited-{}-{call}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for &name in files {
        let mut text = std::fs::read_to_string(data(name)).unwrap();
        for &(_, from, to) in changes.iter().filter(|c| c.0 == name) {
            assert!(text.contains(from), "{name} has no {from:?}");
            text = text.replace(from, to);
        }
        std::fs::write(dir.join(name), text).unwrap();
    }
    dir
}

/// atlas10k's drive with its write settling delay set to `settle` (text).
fn atlas_with_settle(settle: &str) -> Result<schedhost::backend::sim::drive::DriveParams, String> {
    atlas_edited(
        "atlas10k.model",
        "Add. write settling delay = 0.48700",
        &format!("Add. write settling delay = {settle}"),
    )
    .map(|i| i.params)
}

#[test]
fn disksims_lbn_to_pbn_mapping_scheme_is_the_drives_surface_order_and_a_bad_one_is_refused() {
    let atlas = import(&data("atlas10k.diskspecs")).unwrap();
    assert_eq!(atlas.params.surface_order, SurfaceOrder::AlternateInZone);
    assert!(
        !atlas
            .not_represented
            .iter()
            .any(|n| n.contains("LBN-to-PBN")),
        "{:?}",
        atlas.not_represented
    );
    let err = spec_refusal("model = drive\nsurface_order = 3\n");
    assert!(err.contains("surface_order = 3"), "{err}");
}

#[test]
fn a_drive_with_disksims_hplplus10_seek_type_imports_with_its_first_ten_seeks() {
    // DiskSim's loader names the type `hplplus10` (`dm_mech_g1`); a drive of its suite
    // declaring it did not import.
    let imported = atlas_edited(
        "atlas10k.model",
        "Seek type = extracted,",
        "Seek type = hplplus10,\n      HPL seek equation values = [ 600, 1.5, 0.1, 4.0, 0.0005, -1 ],\n      First ten seek times = [ 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7, 1.8, 1.9, 2.0 ],",
    )
    .unwrap();
    let seek = &imported.params.seek;
    assert_eq!(&seek[..3], &[(1, 1.1), (2, 1.2), (3, 1.3)]);
    assert_eq!(seek[10], (11, 1.5 + 0.1 * 11f64.sqrt()));
    let err = atlas_edited(
        "atlas10k.model",
        "Seek type = extracted,",
        "Seek type = 1st10+hpl,",
    )
    .unwrap_err();
    assert!(err.contains("`hpl` and `hplplus10`"), "{err}");
}

#[test]
fn seek_values_the_seek_type_does_not_use_are_ignored_and_an_unknown_list_is_noted_as_written() {
    // DiskSim's DEC RZ26 declares `Seek type = extracted` and still carries an HPL equation;
    // only the hpl types use it.
    let imported = atlas_edited(
        "atlas10k.model",
        "Seek type = extracted,",
        "Seek type = extracted,\n      Average seek time = 1.1,\n      HPL seek equation values = [ 300, 3.75, 0.33, 7.69, 0.0059, -1 ],\n      First ten seek times = [ 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7, 1.8, 1.9, 2.0 ],",
    )
    .unwrap();
    assert!(
        !imported
            .not_represented
            .iter()
            .any(|n| n.contains("HPL") || n.contains("First ten") || n.contains("Average")),
        "{:?}",
        imported.not_represented
    );
    let imported = atlas_edited(
        "atlas10k.model",
        "Seek type = extracted,",
        "Seek type = extracted,\n      Servo wedge times = [ 0.5, 1.5 ],",
    )
    .unwrap();
    assert!(
        imported
            .not_represented
            .iter()
            .any(|n| n.ends_with("Servo wedge times = [ 0.5, 1.5 ]")),
        "{:?}",
        imported.not_represented
    );
}

#[test]
fn negative_overheads_add_to_the_per_request_one_and_a_negative_sum_takes_no_time() {
    let adjusted = atlas_edited(
        "atlas10k.diskspecs",
        "Read hit over. after read = 0.184000",
        "Read hit over. after read = -0.1",
    )
    .unwrap();
    // The Atlas's per-request overhead is 0: the sum is negative and taken as none.
    assert_eq!(adjusted.params.overheads.read_hit[0], 0.0);
    let notes = adjusted.not_represented.join("\n");
    assert!(
        notes.contains("Read hit over. after read: negative in sum"),
        "{notes}"
    );
    let completion = atlas_edited(
        "atlas10k.diskspecs",
        "Read completion overhead = 0.000000",
        "Read completion overhead = -0.05",
    )
    .unwrap();
    assert_eq!(completion.params.overheads.completion[0], 0.0);
    let absurd = atlas_edited(
        "atlas10k.diskspecs",
        "Read hit over. after read = 0.184000",
        "Read hit over. after read = -5000",
    )
    .unwrap_err();
    assert!(absurd.contains("Read hit over. after read"), "{absurd}");
}

#[test]
fn a_negative_write_settling_delay_imports_with_disksims_meaning_and_shortens_writes() {
    let negative = atlas_with_settle("-0.48").unwrap();
    assert_eq!(negative.write_settle_ms, -0.48);
    // A spec file takes it within a second either way.
    let err = spec_refusal("model = drive\nwrite_settle_ms = -5000\n");
    assert!(err.contains("from -1000 to 1000"), "{err}");
    let zero = atlas_with_settle("0").unwrap();
    // Writes far apart: each seeks, and the settle adjusts every one of them.
    let text: String = (0..200u64)
        .map(|i| format!("W Miss {} 8 1000 5000\n", (i * 7_919_111) % 17_000_000))
        .collect();
    let trace = parse_trace(&text).unwrap();
    let mean = |params: &schedhost::backend::sim::drive::DriveParams| {
        let v = validate(&trace, &DeviceSpec::Drive(Box::new(params.clone()))).unwrap();
        v.simulated.mean_us
    };
    assert!(
        mean(&negative) < mean(&zero),
        "{} µs with -0.48 ms against {} µs with none",
        mean(&negative),
        mean(&zero)
    );
    let absurd = atlas_with_settle("-2000").unwrap_err();
    assert!(absurd.contains("Add. write settling delay"), "{absurd}");
    assert!(absurd.contains("-1000"), "{absurd}");
}

#[test]
fn track_sparing_withholds_whole_tracks_so_the_hp_drive_holds_exactly_its_block_count() {
    // The HP C3323A spares whole tracks at each zone's end (DiskSim's TRACK_SPARING): its
    // zones less those hold exactly its 2 056 008 blocks.
    let imported = import_parv(&data("hp_c3323a.parv")).unwrap();
    assert_eq!(imported.params.capacity_sectors, 2_056_008);
    assert_eq!(imported.params.zoned_sectors(), 2_056_008);
    assert!(
        !imported
            .not_represented
            .iter()
            .any(|n| n.starts_with("Block count")),
        "{:?}",
        imported.not_represented
    );
    // The Cheetah's per-range spares (scheme 8, 12 cylinders a range) bring its zones to
    // within 740 sectors of its block count (0.008 %), from 59 060; its capacity is the
    // zones' total, as DiskSim takes it over `Block count` (`checknumblocks`), and the
    // importer no longer calls the difference unrepresented.
    let cheetah = import(&data("cheetah4LP.diskspecs")).unwrap();
    assert_eq!(cheetah.params.zoned_sectors(), 8_887_940);
    assert_eq!(cheetah.params.capacity_sectors, 8_887_940);
    assert!(
        !cheetah
            .not_represented
            .iter()
            .any(|n| n.contains("Block count")),
        "{:?}",
        cheetah.not_represented
    );
}

/// The drive of `parv` as imported, with `change` applied, replaying `trace`: each
/// request's time.
fn imported_replay(
    parv: &str,
    trace: &str,
    change: impl Fn(&mut schedhost::backend::sim::drive::DriveParams),
) -> Vec<f64> {
    let mut params = import_parv(&data(parv)).unwrap().params;
    change(&mut params);
    schedhost::fidelity::replay(
        &parse_trace(trace).unwrap(),
        &DeviceSpec::Drive(Box::new(params)),
    )
    .unwrap()
}

/// The HP C3323A, as [`imported_replay`].
fn hp_replay(
    trace: &str,
    change: impl Fn(&mut schedhost::backend::sim::drive::DriveParams),
) -> Vec<f64> {
    imported_replay("hp_c3323a.parv", trace, change)
}

#[test]
fn a_write_puts_no_sector_on_the_media_before_it_has_crossed_the_bus() {
    // The HP writes through, and its bus (0.1455 ms a block) is slower than its outer
    // zones' media (11.1 ms a revolution over 120 sectors, 0.0927 ms a sector). A 64-sector
    // write crosses the bus for 9.31 ms after the command overhead (3.29 ms after a read);
    // its last sector can go on the media only after that, so the write reports at least a
    // sector's time after the bus is done, wherever it starts.
    let received_us = 3290.0 + 64.0 * 145.5;
    for start in [0u64, 30, 60, 90, 200, 500, 2000, 5000] {
        let done = hp_replay(&format!("W Hit {start} 64 1 0\n"), |_| {})[0];
        assert!(
            done >= received_us + 92.0,
            "a write at {start} reported at {done} µs, before its last sector could be written"
        );
    }
}

/// One replay of `trace` on the generic drive (7200 rpm, 4 surfaces of 400 sectors a track,
/// skews of 40 sectors a track and 60 a cylinder) with no overheads, changed by `change`.
fn generic_replay(
    trace: &str,
    change: impl Fn(&mut schedhost::backend::sim::drive::DriveParams),
) -> Vec<f64> {
    let mut params = schedhost::backend::sim::drive::DriveParams {
        write_back: false,
        cache_segments: 1,
        ..Default::default()
    };
    change(&mut params);
    schedhost::fidelity::replay(
        &parse_trace(trace).unwrap(),
        &DeviceSpec::Drive(Box::new(params)),
    )
    .unwrap()
}

#[test]
fn a_read_sends_each_sector_once_it_is_read_and_a_track_switch_holds_the_rest_back() {
    // DiskSim's per-request log of the Cheetah 4LP (`valid/log_sim_results.csv`) times a
    // read miss as overhead + seek + latency + one sector's read + every sector's bus time
    // where the bus (0.106 ms a block) is slower than the media: the bus waits for the first
    // sector to be buffered. Here the bus takes 100 µs a sector and the media 20.8 (8.33 ms
    // over 400 sectors), with no overheads. From LBN 0 at time 0 (under the head at once):
    // 20.8 + 8 × 100 µs. From LBN 396, four sectors before the track's end, the head waits
    // 396 sectors, reads 4, passes the track skew (40 sectors) and reads the fifth at
    // (4 + 40 + 1) × 20.8 µs from the first: the four sectors after it follow on the bus.
    let per_sector_us = 60_000.0 / 7200.0 / 400.0 * 1000.0;
    let read = |lbn: u64| {
        generic_replay(&format!("R Miss {lbn} 8 1 0\n"), |p| {
            p.bus_sector_ms = 0.1;
        })[0]
    };
    let at_start = read(0);
    let expected = per_sector_us + 800.0;
    assert!(
        (at_start - expected).abs() < 1.0,
        "from LBN 0: {at_start:.1} µs, expected {expected:.1}"
    );
    let across = read(396);
    let expected = 396.0 * per_sector_us + 45.0 * per_sector_us + 400.0;
    assert!(
        (across - expected).abs() < 1.0,
        "across the track switch: {across:.1} µs, expected {expected:.1}"
    );
}

#[test]
fn a_hit_on_sectors_still_being_read_ahead_sends_each_as_it_arrives() {
    // The generic drive's bus (5 µs a sector) is faster than its media (20.8 µs). A read
    // of 0..8 from the head's position ends when its last sector is read and sent (8 × 20.8
    // + 5 µs); 8..16 asked for at once is a hit on the read-ahead, whose sectors arrive one
    // a sector time from then: the last is read 8 sector times later and sent 5 µs after,
    // not 8 bus times after it.
    let per_sector_us = 60_000.0 / 7200.0 / 400.0 * 1000.0;
    let times = generic_replay("R Miss 0 8 1 0\nR Miss 8 8 1 0\n", |_| {});
    assert!(
        (times[0] - (8.0 * per_sector_us + 5.0)).abs() < 1.0,
        "{times:?}"
    );
    assert!((times[1] - 8.0 * per_sector_us).abs() < 1.0, "{times:?}");
}

#[test]
fn no_sector_before_a_track_switch_overtakes_the_bus_either() {
    // Bus 30 µs a sector, media 20.8 µs (8.33 ms over 400 sectors). A 220-sector write
    // with 200 sectors left on its first track: the 200th arrives at 6 000 µs and is written
    // after it, and the track switch (40 sectors at least) and 20 more sectors follow, so the
    // write ends at 6 000 + (1 + 40 + 20) * 20.8 = 7 271 µs at the earliest. The request's
    // last sector alone would allow 6 621 µs.
    let per_sector_us = 60_000.0 / 7200.0 / 400.0 * 1000.0;
    let earliest = 200.0 * 30.0 + 61.0 * per_sector_us;
    for track in 0..8u64 {
        let lbn = track * 400 + 200;
        let done = generic_replay(&format!("W Hit {lbn} 220 1 0\n"), |p| {
            p.bus_sector_ms = 0.03;
        })[0];
        assert!(
            done >= earliest - 1.0,
            "a write at {lbn} reported at {done:.0} µs, before the last sector of its first \
             track could be written"
        );
    }
}

#[test]
fn a_cylinder_switch_costs_the_cylinder_skew_and_a_track_switch_the_track_skew() {
    // Two sectors either side of a boundary, read from the drive's first cylinder, where the
    // first sector's place does not depend on the cylinder skew: raising that skew by 20
    // sectors delays the read across the cylinder boundary by 20 sectors' time, and the read
    // across a track boundary not at all.
    let per_sector_us = 60_000.0 / 7200.0 / 400.0 * 1000.0;
    let read = |lbn: u64, cylinder_skew: u64| {
        generic_replay(&format!("R Hit {lbn} 2 1 0\n"), |p| {
            p.zones[0].cylinder_skew = cylinder_skew;
        })[0]
    };
    let across_cylinder = read(4 * 400 - 1, 60) - read(4 * 400 - 1, 40);
    assert!(
        (across_cylinder - 20.0 * per_sector_us).abs() < 1.0,
        "across the cylinder boundary: {across_cylinder:.1} µs more"
    );
    let across_track = read(400 - 1, 60) - read(400 - 1, 40);
    assert!(
        across_track.abs() < 0.01,
        "across a track boundary: {across_track:.1} µs more"
    );
}

/// The Seagate Cheetah 4LP, as [`imported_replay`].
fn cheetah_replay(
    trace: &str,
    change: impl Fn(&mut schedhost::backend::sim::drive::DriveParams),
) -> Vec<f64> {
    imported_replay("cheetah4LP.parv", trace, change)
}

#[test]
fn read_ahead_past_a_segments_size_replaces_the_data_the_read_returned() {
    // The Cheetah's segments hold 282 sectors and it reads ahead 282 past a read. Reading
    // 4 sectors, then the next 4 (a hit), then the first 4 again, each 40 ms apart (the
    // read-ahead long done): the first 4 have left the segment, as on the drive, where
    // such a re-read is a miss. Where the read-ahead stops at the segment's end (no
    // maximum read-ahead, and the data returned kept), they stay.
    let trace = "R Hit 1000000 4 1 40000\nR Hit 1000004 4 1 40000\nR Hit 1000000 4 1 0\n";
    let over = cheetah_replay(trace, |_| {});
    let kept = cheetah_replay(trace, |p| {
        p.read_ahead_over_requested = false;
        p.max_read_ahead_sectors = 0;
    });
    // A hit: the read-hit overhead and 4 sectors over the bus (0.068 + 4 × 0.106 ms).
    let hit_us = 68.0 + 4.0 * 106.0 + 1.0;
    assert!(over[1] <= hit_us && kept[1] <= hit_us, "{over:?} {kept:?}");
    assert!(kept[2] <= hit_us, "kept: the re-read hits ({} µs)", kept[2]);
    assert!(
        over[2] > 607.0 + 4.0 * 106.0,
        "replaced: the re-read pays the miss overhead and the media ({} µs)",
        over[2]
    );
}

/// Sequential 100-sector reads on the HP, `gap_us` apart: the first reads ahead 256
/// sectors (to 356); the fourth ends at 400, past that.
fn hp_sequential(gap_us: u32) -> String {
    (0..4)
        .map(|i| format!("R Hit {} 100 1 {gap_us}\n", i * 100))
        .collect()
}

#[test]
fn a_hit_on_a_segment_still_reading_ahead_moves_its_read_ahead_past_the_hit() {
    // 1 ms apart the segment is still reading ahead at each hit (256 sectors take 24 ms),
    // and each hit aims it past itself whatever `Read-ahead on idle hit` says (DiskSim
    // raises the segment's read-ahead end for every read it serves): the fourth read hits.
    // From a cold drive, 300..400 goes to the media.
    let trace = hp_sequential(1_000);
    for on_idle_hit in [false, true] {
        let times = hp_replay(&trace, |p| {
            p.read_ahead_on_hit = on_idle_hit;
            p.immediate_partial_hit = false;
        });
        let cold = hp_replay("R Hit 300 100 1 0\n", |_| {})[0];
        assert!(
            times[3] < 0.6 * cold,
            "on idle hit {on_idle_hit}: the fourth took {} µs, a cold read {cold} µs",
            times[3]
        );
    }
}

#[test]
fn read_ahead_on_idle_hit_resumes_an_idle_segments_read_ahead() {
    // 400 ms apart the segment has stopped (at 356) before each hit. The drive declaring
    // `Read-ahead on idle hit` goes back to reading ahead past the second read, and the
    // fourth hits; without it, the fourth holds 300..356 and reads 356..400 from the media.
    let trace = hp_sequential(400_000);
    let declared = import_parv(&data("hp_c3323a.parv")).unwrap().params;
    assert!(declared.read_ahead_on_hit, "the HP declares it");
    let replay = |on: bool| {
        hp_replay(&trace, |p| {
            p.read_ahead_on_hit = on;
            p.immediate_partial_hit = false;
        })
    };
    let (on, off) = (replay(true), replay(false));
    assert_eq!(on[..2], off[..2], "the first two are the same either way");
    assert!(
        on[3] < 0.6 * off[3],
        "the fourth hits with it ({} µs) and goes to the media without ({} µs)",
        on[3],
        off[3]
    );
}

#[test]
fn a_separate_write_segment_leaves_the_read_segments_to_reads() {
    // Read A, two writes elsewhere, read A again: with two shared segments the writes evict
    // A; with one of them kept for writes, A stays.
    let trace = "R Hit 0 8 1 1000\nW Hit 500000 8 1 1000\nW Hit 900000 8 1 1000\nR Hit 0 8 1 0\n";
    let shared = hp_replay(trace, |p| {
        p.cache_segments = 2;
        p.separate_write_segment = false;
    });
    let separate = hp_replay(trace, |p| {
        p.cache_segments = 2;
        p.separate_write_segment = true;
    });
    assert!(
        separate[3] < shared[3] / 2.0,
        "A hits with a write segment of its own ({} µs), not without ({} µs)",
        separate[3],
        shared[3]
    );
}

#[test]
fn a_write_that_appends_to_the_write_still_going_to_the_media_joins_it_at_once() {
    // On the Atlas (write-back), a write starting where the last one ended, issued while
    // that one is still being written, joins its segment at once and pays the write-hit
    // overhead after a write (0.189 ms) and the bus (8 × 0.099 ms); without `Combine seq
    // writes` it first waits for the mechanism to finish the last one.
    let trace = "W Hit 1000 8 1 0\nW Hit 1008 8 1 0\nW Hit 5000 8 1 0\n";
    let declared = import_parv(&data("atlas10k.parv")).unwrap().params;
    assert!(declared.combine_seq_writes, "the Atlas declares it");
    let atlas =
        |combine: bool| imported_replay("atlas10k.parv", trace, |p| p.combine_seq_writes = combine);
    let (on, off) = (atlas(true), atlas(false));
    assert!((on[1] - 981.0).abs() < 1.0, "appended: {} µs", on[1]);
    assert!(off[1] > on[1] + 308.0, "not appended: {} µs", off[1]);
}

#[test]
fn a_write_pays_the_hit_overhead_with_fast_writes_and_the_miss_one_without() {
    // DiskSim's `disk_write_arrive`: "hit" is the buffer taking the write. An idle Atlas
    // takes a lone 4-sector write in the write-hit overhead after a read (0.186 ms) plus
    // the bus (4 × 0.099 ms) when it writes back; writing through, it pays the miss's
    // 0.34492 ms and reports only once the sectors are on the media.
    let trace = "W Hit 1000 4 1 0\n";
    let atlas = |write_back: bool| {
        imported_replay("atlas10k.parv", trace, |p| p.write_back = write_back)[0]
    };
    let (back, through) = (atlas(true), atlas(false));
    assert!((back - 582.0).abs() < 1.0, "written back: {back} µs");
    assert!(
        through > 345.0 + 396.0,
        "written through: {through} µs, at least the miss overhead and the bus"
    );
}

#[test]
fn an_imported_drives_slips_survive_its_spec_file_and_bad_slip_lines_are_refused_by_name() {
    let atlas = import_parv(&data("atlas10k.parv")).unwrap();
    let text = to_spec_text(&atlas, Path::new("atlas10k.parv"));
    assert!(
        text.contains("slips = 0 55017 358148"),
        "the first zone's slips"
    );
    let DeviceSpec::Drive(params) = DeviceSpec::parse_file(Path::new("a.spec"), &text).unwrap()
    else {
        panic!("not a drive")
    };
    assert_eq!(*params, atlas.params);
    let zone =
        "model = drive\nsurfaces = 2\nseek = 1 1\ncapacity_sectors = 10\nzone = 0 4 10 0 0 0\n";
    for (line, named) in [
        ("slips = 1 3", "number of a zone given above"),
        ("slips = 0 x", "\"x\" is not a position"),
        ("remap = 0 5", "expected `zone defect spare`"),
        ("slips = 0 100", "past the zone's 100 sectors"),
        (
            "sparing_scheme = 1\nslips = 0 10",
            "past the zone's 10 tracks",
        ),
    ] {
        let err = spec_refusal(&format!("{zone}{line}\n"));
        assert!(err.contains(named), "{line}: {err}");
    }
}

#[test]
fn read_ahead_stops_where_the_drives_continuous_read_says_at_the_track_or_cylinder_end_or_not_at_all()
 {
    use schedhost::backend::sim::ContinuousRead;
    use schedhost::fidelity::replay;
    // The default drive: 4 surfaces of 400 sectors a track, 512 sectors of read-ahead in
    // 512-sector segments. A read at 0, 20 ms for the read-ahead to stream, then a read on
    // the next track (400) and one on the same track (8).
    let time = |mode, second: u64| {
        let params = schedhost::backend::sim::DriveParams {
            continuous_read: mode,
            ..Default::default()
        };
        let trace = parse_trace(&format!(
            "R Miss 0 8 1000 20000\nR Miss {second} 8 1000 0\n"
        ))
        .unwrap();
        replay(&trace, &DeviceSpec::Drive(Box::new(params))).unwrap()[1]
    };
    let hit = time(ContinuousRead::SegmentEnd, 400);
    assert!(
        hit < 1000.0,
        "to the segment's end the next track is in the buffer: {hit} µs"
    );
    assert!(
        time(ContinuousRead::CylinderEnd, 400) < 1000.0,
        "the cylinder's end"
    );
    let next_track = time(ContinuousRead::TrackEnd, 400);
    assert!(
        next_track > 2.0 * hit,
        "the track's end stops it: {next_track} µs"
    );
    assert!(
        time(ContinuousRead::TrackEnd, 8) < 1000.0,
        "the same track is read ahead"
    );
    let none = time(ContinuousRead::None, 8);
    assert!(none > 2.0 * hit, "no read-ahead: {none} µs");
    // DEC's scheme: to the end of the track the next sector is on; the track after it too
    // where the segment began on an earlier track (a read across a track's end).
    assert!(time(ContinuousRead::Dec, 8) < 1000.0, "DEC: the same track");
    assert!(
        time(ContinuousRead::Dec, 400) > 2.0 * hit,
        "DEC: a read within a track stops at its end"
    );
    let across = |second: u64| {
        // Segments large enough that the scheme, not the segment, ends the read-ahead.
        let params = schedhost::backend::sim::DriveParams {
            continuous_read: ContinuousRead::Dec,
            segment_sectors: 4096,
            ..Default::default()
        };
        let trace = parse_trace(&format!(
            "R Miss 396 8 1000 20000\nR Miss {second} 8 1000 0\n"
        ))
        .unwrap();
        replay(&trace, &DeviceSpec::Drive(Box::new(params))).unwrap()[1]
    };
    assert!(
        across(1192) < 1000.0,
        "DEC: a read into the next track reads the track after it too"
    );
    assert!(across(1200) > 2.0 * hit, "DEC: and no further");
    let err = spec_refusal("model = drive\ncontinuous_read = 5\n");
    assert!(err.contains("continuous_read = 5"), "{err}");
}

#[test]
fn without_the_buffer_cache_every_read_goes_to_the_media_and_disksims_refusals_hold() {
    use schedhost::fidelity::replay;
    let time = |buffer_cache| {
        let params = schedhost::backend::sim::DriveParams {
            buffer_cache,
            ..Default::default()
        };
        let trace = parse_trace("R Miss 0 8 1000 20000\nR Miss 8 8 1000 0\n").unwrap();
        replay(&trace, &DeviceSpec::Drive(Box::new(params))).unwrap()[1]
    };
    let (hit, miss) = (time(true), time(false));
    assert!(miss > 2.0 * hit, "{hit} µs cached, {miss} µs without");
    let err = atlas_edited(
        "atlas10k.diskspecs",
        "Enable caching in buffer = 1",
        "Enable caching in buffer = 0",
    )
    .unwrap_err();
    assert!(err.contains("need the cache"), "{err}");
    let atlas = import(&data("atlas10k.diskspecs")).unwrap();
    assert!(atlas.params.buffer_cache);
    let notes = atlas.not_represented.join("\n");
    assert!(
        !notes.contains("Enable caching") && !notes.contains("Calc sector"),
        "{notes}"
    );
    // DiskSim reads 2 only as on, as the HP C2490A of its suite declares it.
    let two = atlas_edited(
        "atlas10k.diskspecs",
        "Enable caching in buffer = 1",
        "Enable caching in buffer = 2",
    )
    .unwrap();
    assert!(two.params.buffer_cache);
    assert_eq!(two.not_represented, atlas.not_represented);
}

#[test]
fn any_count_of_write_segments_up_to_the_segments_imports_alike_and_more_is_refused() {
    // DiskSim reads the count only to recycle a read's segment for a write that found none
    // free, which one command at a time never leaves; the Cheetah 9LP of its suite declares
    // 3 of its 3 segments. The Atlas 10K declares 1 of 10.
    let atlas = import(&data("atlas10k.diskspecs")).unwrap();
    let edit = |n: &str| {
        atlas_edited(
            "atlas10k.diskspecs",
            "Maximum number of write segments = 1",
            &format!("Maximum number of write segments = {n}"),
        )
    };
    let ten = edit("10").unwrap();
    assert_eq!(ten.not_represented, atlas.not_represented);
    assert_eq!(through_spec_file(&ten), through_spec_file(&atlas));
    // As DiskSim refuses more write segments than segments, or none.
    for n in ["11", "0"] {
        let err = edit(n).unwrap_err();
        assert!(err.contains("Maximum number of write segments"), "{err}");
    }
}

#[test]
fn read_any_free_blocks_keeps_the_sectors_the_head_passed_while_waiting_for_a_miss() {
    use schedhost::fidelity::replay;
    // A miss three cylinders on, then a read just before it on its track: in the buffer
    // when the drive keeps what passed under the head while it waited, a miss otherwise.
    let time = |read_free_blocks| {
        let params = schedhost::backend::sim::DriveParams {
            read_free_blocks,
            ..Default::default()
        };
        let trace =
            parse_trace("R Miss 0 8 1000 0\nR Miss 5100 8 1000 0\nR Miss 5092 8 1000 0\n").unwrap();
        replay(&trace, &DeviceSpec::Drive(Box::new(params))).unwrap()[2]
    };
    let (kept, not) = (time(true), time(false));
    assert!(not > 2.0 * kept, "{kept} µs kept, {not} µs without");
    let atlas = import(&data("atlas10k.diskspecs")).unwrap();
    assert!(atlas.params.read_free_blocks);
}

#[test]
fn read_ahead_over_requested_runs_a_segment_past_the_read_and_a_prefetch_may_finish_its_sector() {
    use schedhost::fidelity::replay;
    let params = |over, in_sector| schedhost::backend::sim::DriveParams {
        read_ahead_over_requested: over,
        stop_prefetch_in_sector: in_sector,
        ..Default::default()
    };
    // The default drive: 512-sector segments. A 200-sector read, time to stream, then a
    // read 600 sectors on. Without a maximum read-ahead, DiskSim's
    // `disk_buffer_get_max_readahead` reads a segment from the read's start (to 512: a
    // miss), or a segment past its end where read-ahead may replace the data returned (to
    // 712: a hit); with one (512 here), that far past the end either way.
    let second = |p, trace: &str| {
        replay(
            &parse_trace(trace).unwrap(),
            &DeviceSpec::Drive(Box::new(p)),
        )
        .unwrap()[1]
    };
    let far = "R Miss 0 200 1000 40000\nR Miss 600 8 1000 0\n";
    let no_maximum = |over| {
        let mut p = params(over, true);
        p.max_read_ahead_sectors = 0;
        second(p, far)
    };
    let (kept, replaced) = (no_maximum(false), no_maximum(true));
    assert!(kept > 2.0 * replaced, "{replaced} µs hit, {kept} µs miss");
    let with_maximum = second(params(false, true), far);
    assert!(
        (with_maximum - replaced).abs() < 1.0,
        "with a maximum read-ahead: {with_maximum} µs"
    );
    // A miss elsewhere a few µs after the read: the read-ahead under way stops mid-sector, or
    // finishes its sector first (20.8 µs at 7200 rpm and 400 sectors a track). The head then
    // reaches the target later, which costs nothing where it waits for the target's sector
    // anyway and a revolution (8.33 ms) where that sector was just coming round.
    let mut revolutions = 0;
    for (think, target) in (2..=20)
        .step_by(6)
        .flat_map(|t| (900_000..900_400).map(move |s| (t, s)))
    {
        let trace = format!("R Miss 0 8 1000 {think}\nR Miss {target} 8 1000 0\n");
        let (now, after) = (
            second(params(false, true), &trace),
            second(params(false, false), &trace),
        );
        let lost = after - now;
        assert!(
            lost.abs() < 1.0 || (lost - 8333.3).abs() < 30.0,
            "{target}: {now} µs, {after} µs"
        );
        revolutions += usize::from(lost > 1.0);
    }
    assert!(revolutions > 0, "no target came round within the sector");
}

#[test]
fn a_spec_may_give_the_rotational_attribute_its_device_reports() {
    let told = |text: &str| {
        let spec = DeviceSpec::parse_file(Path::new("s.spec"), text).unwrap();
        spec.build().geometry().rotational
    };
    assert!(!told("model = ssd\n"));
    assert!(told("model = ssd\nrotational = 1\n"));
    assert!(told("model = hdd\n"));
    assert!(!told("model = hdd\nrotational = 0\n"));
    let err = spec_refusal("model = ssd\nrotational = yes\n");
    assert!(err.contains("0 or 1"), "{err}");
}

#[test]
fn per_range_spares_are_skipped_at_the_end_of_every_whole_range() {
    use schedhost::backend::sim::drive::DriveZone;
    // 5 cylinders of 2 tracks of 10 sectors, ranges of 2 cylinders with 3 spares each:
    // 37 LBNs in a range's 40 sectors, and the fifth cylinder has no spares.
    let zone = DriveZone {
        first_cylinder: 0,
        last_cylinder: 4,
        sectors_per_track: 10,
        spares: 6,
        range_cylinders: 2,
        ..DriveZone::default()
    };
    let at = |zone: &DriveZone, lbn| zone.physical(lbn, 2, 8);
    assert_eq!(zone.lbns(2), 94);
    assert_eq!(at(&zone, 36), 36, "the last LBN of the first range");
    assert_eq!(at(&zone, 37), 40, "the second range starts past 3 spares");
    assert_eq!(
        at(&zone, 74),
        80,
        "the leftover cylinder, after both ranges"
    );
    assert_eq!(at(&zone, 93), 99, "the last LBN is the zone's last sector");
    let at_end = DriveZone {
        range_cylinders: 0,
        ..zone.clone()
    };
    assert_eq!(
        at_end.physical(37, 2, 9),
        37,
        "spares at the zone's end move nothing"
    );
}

#[test]
fn slips_push_later_lbns_on_and_remapped_defects_move_to_their_spares_as_disksim_maps_them() {
    use schedhost::backend::sim::drive::DriveZone;
    // Spares per zone (DiskSim's g1_ltop_sectperzonespare): a slip at 5 is stepped over,
    // and one at 7 too, counted against where the first put the LBN.
    let zone = DriveZone {
        first_cylinder: 0,
        last_cylinder: 4,
        sectors_per_track: 10,
        spares: 6,
        slips: vec![5, 7],
        remaps: vec![(20, 95)],
        ..DriveZone::default()
    };
    let at = |zone: &DriveZone, lbn| zone.physical(lbn, 2, 9);
    assert_eq!(
        [at(&zone, 4), at(&zone, 5), at(&zone, 6), at(&zone, 7)],
        [4, 6, 8, 9]
    );
    // LBN 18 lands past both slips on 20, a remapped defect, and goes to its spare.
    assert_eq!(at(&zone, 18), 95);
    assert_eq!(at(&zone, 19), 21);
    // Under per-range spares the slips and remaps count within the range.
    let ranged = DriveZone {
        range_cylinders: 2,
        slips: vec![42],
        remaps: vec![(45, 39)],
        ..zone.clone()
    };
    assert_eq!(
        at(&ranged, 37),
        40,
        "the second range's first LBN, before its slip"
    );
    assert_eq!(at(&ranged, 39), 43, "past the slip at 42");
    assert_eq!(
        at(&ranged, 41),
        40 + 39,
        "45 remapped to the range's spare 39"
    );
    // Under track sparing slips are tracks: a slipped track 1 sends track 1's LBNs on to 2.
    let tracks = DriveZone {
        spares: 0,
        slips: vec![1],
        remaps: Vec::new(),
        ..zone.clone()
    };
    assert_eq!(tracks.physical(13, 2, 1), 23);
    assert_eq!(tracks.physical(3, 2, 1), 3);
}

#[test]
fn spares_per_cylinder_and_per_track_sit_at_each_ones_end_and_slips_stay_or_slip_to_the_end() {
    use schedhost::backend::sim::drive::DriveZone;
    // 5 cylinders of 2 tracks of 10 sectors. Per cylinder (DiskSim's scheme 2), 2 spares
    // each: 18 LBNs a cylinder, then the next cylinder's first sector.
    let per_cylinder = DriveZone {
        first_cylinder: 0,
        last_cylinder: 4,
        sectors_per_track: 10,
        spares: 10,
        ..DriveZone::default()
    };
    let at = |zone: &DriveZone, lbn, scheme| zone.physical(lbn, 2, scheme);
    assert_eq!(
        [17, 18, 19].map(|lbn| at(&per_cylinder, lbn, 2)),
        [17, 20, 21]
    );
    // A slip in the first cylinder pushes its later LBNs on, and its last past the
    // cylinder's LBNs into the next cylinder, onto the same sector as that cylinder's first
    // LBN: DiskSim's `g1_ltop_sectpercylspare` does so (its map back from sectors puts that
    // LBN in the cylinder's first spare instead; the simulation positions by this one).
    // In the second cylinder it moves nothing (scheme 2), or everything (4: slip to the
    // end, the spares then 5 × 2 plus the one slip).
    let slipped = DriveZone {
        slips: vec![3],
        ..per_cylinder.clone()
    };
    assert_eq!(
        [2, 3, 17, 18].map(|lbn| at(&slipped, lbn, 2)),
        [2, 4, 20, 20]
    );
    let to_end = DriveZone {
        spares: 11,
        ..slipped.clone()
    };
    assert_eq!([18, 19].map(|lbn| at(&to_end, lbn, 4)), [21, 22]);
    // A remapped defect moves to its spare, a position in the zone.
    let remapped = DriveZone {
        remaps: vec![(22, 39)],
        ..per_cylinder.clone()
    };
    assert_eq!(at(&remapped, 20, 2), 39);
    // Per track (scheme 3), 1 spare each: 9 LBNs a track.
    let per_track = DriveZone {
        spares: 10,
        slips: vec![12],
        ..per_cylinder.clone()
    };
    assert_eq!(
        [8, 9, 10, 11].map(|lbn| at(&per_track, lbn, 3)),
        [8, 10, 11, 13]
    );
}

#[test]
fn the_cheetahs_spares_sit_in_its_ranges_and_its_spec_file_says_so() {
    let imported = import_parv(&data("cheetah4LP.parv")).unwrap();
    assert!(
        imported
            .params
            .zones
            .iter()
            .all(|z| z.range_cylinders == 12)
    );
    assert_eq!(through_spec_file(&imported), imported.params);
    let long = spec_refusal("model = drive\nsurfaces = 2\nzone = 0 9 100 0 0 10 0 0 11\n");
    assert!(long.contains("longer than the zone"), "{long}");
}

#[test]
fn a_partial_hit_sends_its_held_sectors_at_once_when_the_drive_transfers_partial_hits_immediately()
{
    // Reads 400 ms apart without read-ahead on idle hits: the fourth read holds 300..356
    // in the buffer and reads 356..400 from the media. Sending the 56 held sectors at once,
    // while the mechanism gets to sector 356, saves up to their bus time (56 × 0.1455 ms)
    // when the rest waits for the media anyway; the first three, all hits or all misses,
    // are the same.
    let trace = hp_sequential(400_000);
    let declared = import_parv(&data("hp_c3323a.parv")).unwrap().params;
    assert!(declared.immediate_partial_hit, "the HP declares it");
    let replay = |immediate: bool| {
        hp_replay(&trace, |p| {
            p.read_ahead_on_hit = false;
            p.immediate_partial_hit = immediate;
        })
    };
    let (at_once, waiting) = (replay(true), replay(false));
    assert_eq!(
        at_once[..3],
        waiting[..3],
        "no partial hit among the first three"
    );
    let saved = waiting[3] - at_once[3];
    assert!(
        saved > 0.0 && saved <= 56.0 * 145.5 + 1.0,
        "the partial hit finished {saved:.1} µs sooner ({} against {} µs)",
        at_once[3],
        waiting[3]
    );
}

#[test]
fn zero_latency_reads_start_under_the_head_inside_a_one_track_request_and_are_never_slower() {
    // One 40-sector read from a drive at rest (7200 rpm, 400 sectors a track: 20.8 µs a
    // sector), its first sector placed at every ninth angle of a track, so the head lands
    // before, inside and after it. Inside, the read starts at the sector under the head and
    // ends a revolution later (boundary to boundary), sooner than waiting for the first
    // sector; elsewhere nothing changes. A request over two tracks is never zero-latency.
    let revolution_us = 60_000.0 / 7200.0 * 1000.0;
    let read = |lbn: u64, sectors: u32, on: bool| {
        generic_replay(&format!("R Miss {lbn} {sectors} 1 0\n"), |p| {
            p.immediate_read = on;
        })[0]
    };
    let mut sooner = 0;
    for offset in (0..360).step_by(9) {
        let lbn = 30 * 400 + offset;
        let (on, off) = (read(lbn, 40, true), read(lbn, 40, false));
        assert!(
            on <= off + 0.01,
            "offset {offset}: {on} µs with it, {off} without"
        );
        assert!(
            off - on < revolution_us,
            "offset {offset} saved more than a revolution"
        );
        if on + 1.0 < off {
            sooner += 1;
        }
    }
    assert!(
        sooner >= 3,
        "only {sooner} of 40 angles landed inside the request"
    );
    let across = 30 * 400 + 380;
    assert!(
        (read(across, 40, true) - read(across, 40, false)).abs() < 0.01,
        "the two-track request is the same either way"
    );
}

#[test]
fn a_drive_that_drops_returned_data_misses_a_reread_but_still_hits_its_read_ahead() {
    // DiskSim's `Read-ahead over requested = -1`: once a read completes, its segment holds
    // only what was read ahead past it. Read 0..100, then the same sectors again, then the
    // 100 after them (read ahead meanwhile: the waits between commands are 40 ms).
    let trace = "R Hit 0 100 1 40000\nR Hit 0 100 1 40000\nR Hit 100 100 1 0\n";
    let replay = |drop: bool| {
        hp_replay(trace, |p| {
            p.drop_returned_data = drop;
            p.read_ahead_over_requested = drop;
        })
    };
    let (dropped, kept) = (replay(true), replay(false));
    assert_eq!(dropped[0], kept[0], "the first read is a miss either way");
    // A hit costs the hit overhead and the bus (100 × 0.1455 ms); a miss adds the media.
    assert!(
        dropped[1] > kept[1] + 1000.0,
        "the re-read went to the media: {} µs against a hit's {} µs",
        dropped[1],
        kept[1]
    );
    let hit = kept[1];
    assert!(
        (dropped[2] - hit).abs() < 1000.0,
        "the sectors after it were read ahead and hit: {} µs (a hit: {hit} µs)",
        dropped[2]
    );
}

/// The HP C3323A imported with lines of its disk spec replaced (`from`, `to` each).
fn hp_declaring(changes: &[(&str, &str)]) -> schedhost::backend::sim::drive::disksim::Imported {
    let changes: Vec<_> = changes
        .iter()
        .map(|&(from, to)| ("hp_c3323a_validate.diskspecs", from, to))
        .collect();
    hp_with(&changes)
}

/// The HP C3323A imported with lines of its files replaced (`file`, `from`, `to` each).
fn hp_with(changes: &[(&str, &str, &str)]) -> schedhost::backend::sim::drive::disksim::Imported {
    let files = [
        "hp_c3323a.parv",
        "hp_c3323a_validate.diskspecs",
        "hp_c3323a_validate.model",
        "hp_c3323a_validate.seek",
    ];
    let dir = edited_copy(&files, changes);
    let imported = import_parv(&dir.join("hp_c3323a.parv")).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    imported
}

#[test]
fn read_ahead_over_requested_minus_one_imports_as_dropping_the_returned_data() {
    let imported = hp_declaring(&[(
        "Read-ahead over requested = 0,",
        "Read-ahead over requested = -1,",
    )]);
    assert!(imported.params.drop_returned_data && imported.params.read_ahead_over_requested);
    assert!(
        imported
            .not_represented
            .iter()
            .all(|n| !n.contains("Read-ahead over requested")),
        "represented, so not noted: {:?}",
        imported.not_represented
    );
    let declared = import_parv(&data("hp_c3323a.parv")).unwrap().params;
    assert!(!declared.drop_returned_data, "the HP declares 0");
}

#[test]
fn a_drive_that_never_disconnects_sends_read_data_as_the_media_delivers_it_whatever_its_mark() {
    // The HP's mark (1, by request size) has its reads cross the bus after their last
    // sector; never disconnecting, DiskSim keeps the bus from the command on and sends the
    // data as it is read, so no mark applies and nothing is left unrepresented.
    let declared = import_parv(&data("hp_c3323a.parv")).unwrap();
    assert!(declared.params.transfer_after_media);
    let connected = hp_declaring(&[
        ("Never disconnect = 0,", "Never disconnect = 1,"),
        (
            "Hold bus entire write xfer = 0,",
            "Hold bus entire write xfer = 1,",
        ),
    ]);
    assert!(!connected.params.transfer_after_media);
    let noted = connected.not_represented.join("\n");
    assert!(
        !noted.contains("Never disconnect")
            && !noted.contains("Hold bus")
            && !noted.contains("water mark = 1 "),
        "{noted}"
    );
    // Holding the bus for the whole read at a mark of 0 by request size: one sector
    // buffered, then the rest as it is read.
    let held = hp_declaring(&[(
        "High (read) water mark = 1.000000,",
        "High (read) water mark = 0.000000,",
    )]);
    assert!(
        !held.params.transfer_after_media,
        "the HP holds the bus for its reads"
    );
}

#[test]
fn zones_that_end_past_or_short_of_the_declared_cylinders_are_mapped_as_their_zones_say() {
    // DiskSim's layout counts a zone's blocks from its own cylinders
    // (`dm_layout_g1_compute_blksinband`), whatever `Number of cylinders` says; a drive of
    // its suite declares 2629 cylinders and a last zone ending at cylinder 2629. The HP's
    // zones end at 2981 of 2982: declared one short, and one long, it maps the same.
    let declared = import_parv(&data("hp_c3323a.parv")).unwrap();
    for cylinders in ["2981", "2983"] {
        let declaring = format!("Number of cylinders = {cylinders},");
        let imported = hp_with(&[(
            "hp_c3323a_validate.model",
            "Number of cylinders = 2982,",
            &declaring,
        )]);
        assert_eq!(imported.params, declared.params, "{cylinders} cylinders");
        assert_eq!(
            imported.not_represented, declared.not_represented,
            "nothing more is listed at {cylinders} cylinders"
        );
    }
}

#[test]
fn a_bus_slower_than_the_drive_sets_the_transfer_as_disksim_takes_it_in_each_direction() {
    // DiskSim's `disk_get_blktranstime`: a block crosses at the slower of the disk's bus and
    // the disk itself. The HP's bus is 0.1455 ms a block either way, its disk 0.
    let declared = import_parv(&data("hp_c3323a.parv")).unwrap();
    assert_eq!(declared.params.bus_sector_ms, 0.1455);
    assert!(
        declared.not_represented.iter().all(|n| !n.contains("bus")),
        "{:?}",
        declared.not_represented
    );
    let unequal = hp_with(&[(
        "hp_c3323a.parv",
        "Write block transfer time = 0.14550,",
        "Write block transfer time = 0.2,",
    )]);
    assert_eq!(
        (
            unequal.params.bus_sector_ms,
            unequal.params.write_bus_sector_ms
        ),
        (0.1455, Some(0.2)),
        "each direction its own"
    );
    assert!(
        unequal.not_represented.iter().all(|n| !n.contains("bus")),
        "{:?}",
        unequal.not_represented
    );
    assert_eq!(through_spec_file(&unequal), unequal.params);
}

#[test]
fn the_controllers_reselect_preparation_disconnect_and_minimum_seek_delays_import_and_survive_the_spec_file()
 {
    // DiskSim's HP C2247A declares them all; the HP C3323A with its values.
    let imported = hp_declaring(&[
        (
            "Data preparation overhead = 0.000000",
            "Data preparation overhead = 0.025190",
        ),
        (
            "First reselect overhead = 0.000000",
            "First reselect overhead = 0.162490",
        ),
        (
            "Other reselect overhead = 0.000000",
            "Other reselect overhead = 0.128830",
        ),
        (
            "Read disconnect afterread = 0.000000",
            "Read disconnect afterread = 0.022660",
        ),
        (
            "Read disconnect afterwrite = 0.000000",
            "Read disconnect afterwrite = 0.045510",
        ),
        (
            "Write disconnect overhead = 0.000000",
            "Write disconnect overhead = 0.165650",
        ),
        (
            "High (read) water mark = 1.000000",
            "High (read) water mark = 0.750000",
        ),
        (
            "Minimum seek delay = 0.000000",
            "Minimum seek delay = 0.600000",
        ),
    ]);
    assert_eq!(imported.params.min_write_seek_ms, 0.6);
    let o = &imported.params.overheads;
    assert_eq!(
        (o.data_prep, o.reselect, o.disconnect),
        (0.02519, 0.16249, [0.02266, 0.04551, 0.16565])
    );
    assert_eq!(imported.params.read_water_mark, 0.75);
    assert!(!imported.params.transfer_after_media);
    // Charged to no request of DiskSim's (its extra write disconnect is never flagged).
    assert!(
        imported
            .not_represented
            .iter()
            .all(|n| !n.contains("reselect") && !n.contains("High (read) water mark")),
        "{:?}",
        imported.not_represented
    );
    assert_eq!(through_spec_file(&imported), imported.params);
    let err = spec_refusal("model = drive\nread_water_mark = 1.5\n");
    assert!(
        err.contains("read_water_mark") && err.contains("0 to 1"),
        "{err}"
    );
}

#[test]
fn spares_at_the_zones_end_step_over_every_slip_before_an_lbn_as_disksims_per_cylinder_map_does() {
    use schedhost::backend::sim::drive::DriveZone;
    // Scheme 7: 5 cylinders of 2 tracks of 10 sectors, slips at 3 and 25; the zone withholds
    // the two slips (`dm_layout_g1_compute_blksinband`) and DiskSim maps it as per cylinder
    // with no spares, slipping to the end (`issliptoend`).
    let zone = DriveZone {
        first_cylinder: 0,
        last_cylinder: 4,
        sectors_per_track: 10,
        spares: 2,
        slips: vec![3, 25],
        ..DriveZone::default()
    };
    assert_eq!(
        [2, 3, 18, 19, 23, 24, 97].map(|lbn| zone.physical(lbn, 2, 7)),
        [2, 4, 19, 20, 24, 26, 99]
    );
    // Imported: the slips stay in the map, and a spare count declared under the scheme,
    // which DiskSim's map holds back in each cylinder but its zone does not, is listed.
    let atlas = import(&data("atlas10k.diskspecs")).unwrap();
    let at_end = atlas_edited(
        "atlas10k.model",
        "Sparing scheme used = 9",
        "Sparing scheme used = 7",
    )
    .unwrap();
    assert_eq!(at_end.params.sparing_scheme, 7);
    let slips = |p: &schedhost::backend::sim::DriveParams| {
        p.zones.iter().map(|z| z.slips.len()).sum::<usize>()
    };
    assert!(slips(&at_end.params) > 0);
    assert_eq!(slips(&at_end.params), slips(&atlas.params));
    let notes = at_end.not_represented.join("\n");
    assert!(!notes.contains("does not step over"), "{notes}");
    assert!(
        notes.contains("zone 0: Number of spares = 89 under sparing scheme 7"),
        "{notes}"
    );
    assert_eq!(through_spec_file(&at_end), at_end.params);
}
