use super::*;

#[test]
fn each_sparing_scheme_withholds_what_disksim_counts() {
    let zone = (10, 4, 100); // cylinders, surfaces, sectors per track
    let scheme = |scheme, range| Sparing { scheme, range };
    assert_eq!(scheme(0, 1).sectors(5, zone, 2), 0);
    assert_eq!(scheme(1, 1).sectors(5, zone, 2), 500, "tracks");
    assert_eq!(scheme(2, 1).sectors(5, zone, 2), 50, "per cylinder");
    assert_eq!(scheme(3, 1).sectors(5, zone, 2), 200, "per track");
    assert_eq!(
        scheme(4, 1).sectors(5, zone, 2),
        52,
        "per cylinder, slips to the end"
    );
    assert_eq!(scheme(7, 1).sectors(5, zone, 2), 2, "the slips");
    assert_eq!(
        scheme(8, 3).sectors(5, zone, 2),
        15,
        "per whole range of 3 cylinders"
    );
    assert_eq!(scheme(9, 1).sectors(5, zone, 2), 5, "per zone");
    assert_eq!(scheme(10, 1).sectors(5, zone, 2), 7);
    assert_eq!(
        scheme(1, 1).sectors(1_000, zone, 0),
        4_000,
        "never more than the zone"
    );
}

#[test]
fn disksim_blocks_lists_and_comments_parse_into_fields() {
    let text = "disksim_disk D {\n  Model = source d.model,  # the layout\n  Zones = [ z { A = 1, B = 2 }, z { A = 3 } ],\n  Sub = t { X = 0.5 }\n}\n";
    let (kind, name, fields) = first_block(Path::new("d"), text).unwrap();
    assert_eq!((kind.as_str(), name.as_str()), ("disksim_disk", "D"));
    assert_eq!(
        fields[0],
        ("Model".into(), Node::Scalar("source d.model".into()))
    );
    let Node::List(zones) = &fields[1].1 else {
        panic!("{fields:?}")
    };
    assert_eq!(zones.len(), 2);
    assert!(matches!(&fields[2].1, Node::Block { kind, .. } if kind == "t"));
}

#[test]
fn hpl_seek_curves_become_a_table_with_the_first_ten_and_single_cylinder_times() {
    let hpl = [300.0, 3.75, 0.33, 7.69, 0.0059, 0.2];
    let table = hpl_table(&hpl, &[], 3000);
    assert_eq!(table[0], (1, 0.2), "the single-cylinder time");
    let at = |d: u64| table.iter().find(|p| p.0 == d).unwrap().1;
    assert!((at(100) - (3.75 + 0.33 * 10.0)).abs() < 1e-9);
    let last = *table.last().unwrap();
    assert!(last.0 < 3000 && (last.1 - (7.69 + 0.0059 * last.0 as f64)).abs() < 1e-9);
    // Carried to the full stroke, the table stays on the curve's line.
    let mut extended = table.clone();
    extend_seeks_as_disksim(&mut extended, 2999);
    assert_eq!(extended.last().unwrap().0, 2999);
    assert!((extended.last().unwrap().1 - (7.69 + 0.0059 * 2999.0)).abs() < 1e-9);
    assert!(table.windows(2).all(|w| w[0].0 < w[1].0), "distances rise");
    let ten: Vec<f64> = (1..=10).map(f64::from).collect();
    let table = hpl_table(&[300.0, 3.75, 0.33, 7.69, 0.0059, -1.0], &ten, 3000);
    assert_eq!(&table[..3], &[(1, 1.0), (2, 2.0), (3, 3.0)]);
}

#[test]
fn a_measured_seek_table_runs_on_to_the_full_stroke_as_disksim_extrapolates_it() {
    // DiskSim's `dm_mech_g1_seek_extracted` carries the line through the last two points
    // past the table's end; the model would hold the last time there.
    let mut table = vec![(1, 1.0), (100, 5.0), (200, 7.0)];
    extend_seeks_as_disksim(&mut table, 300);
    assert_eq!(table.last(), Some(&(300, 9.0)));
    // A table that reaches the full stroke, or has no line to extend, stays as it is.
    let mut full = vec![(1, 1.0), (300, 9.0)];
    extend_seeks_as_disksim(&mut full, 300);
    assert_eq!(full.len(), 2);
    let mut one = vec![(1, 1.0)];
    extend_seeks_as_disksim(&mut one, 300);
    assert_eq!(one, vec![(1, 1.0)]);
    // A falling end (DiskSim's own Atlas 10K table falls between some points) stops at zero.
    let mut falling = vec![(1, 3.0), (2, 1.0)];
    extend_seeks_as_disksim(&mut falling, 999);
    assert_eq!(falling.last(), Some(&(999, 0.0)));
}

#[test]
fn malformed_disksim_files_name_the_line() {
    for (text, want) in [
        ("d D {\n A = 1,\n B 2\n}", "line 4: `B 2` has no `=`"),
        ("d D {\n A = [ 1, 2\n", "unclosed `[`"),
        ("d D {\n A = 1,\n", "unclosed `{`"),
    ] {
        let err = first_block(Path::new("x.diskspecs"), text)
            .unwrap_err()
            .to_string();
        assert!(err.contains(want), "{err}");
    }
    let deep = format!("d D {{ {} }}", "A = t { ".repeat(40));
    let err = first_block(Path::new("x"), &deep).unwrap_err().to_string();
    assert!(err.contains("nested more than"), "{err}");
}

#[test]
fn a_seek_curve_of_years_is_refused_by_name() {
    // c + d·x with d = 1e8 ms per cylinder: years at the full stroke.
    let table = hpl_table(&[300.0, 3.75, 0.33, 7.69, 1e8, 0.2], &[], 3000);
    let err = physical_seeks(Path::new("x.model"), &table)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("HPL seek equation values") && err.contains("at most 1000 ms"),
        "{err}"
    );
    let real = hpl_table(&[300.0, 3.75, 0.33, 7.69, 0.0059, 0.2], &[], 3000);
    assert!(physical_seeks(Path::new("x.model"), &real).is_ok());
}

#[test]
fn a_measured_seek_of_years_is_refused_in_the_files_own_words() {
    let dir = std::env::temp_dir().join(format!("schedhost-seek-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("d.seek");
    std::fs::write(&path, "Seek distances measured: 2\n1, 1.0\n2, 1e300\n").unwrap();
    let err = read_seek(&path).unwrap_err().to_string();
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(
        err.contains("line 3: a seek of `1e300` ms") && err.contains("at most 1000 ms"),
        "{err}"
    );
    assert!(
        err.len() < 200,
        "the value is not printed out in full: {err}"
    );
}

#[test]
fn hplplus10_takes_its_first_ten_seeks_before_the_single_cylinder_value_and_the_curve_after() {
    let hpl = [300.0, 3.0, 0.5, 8.0, 0.01, 0.9];
    let ten: Vec<f64> = (1..=10).map(|d| f64::from(d) / 10.0).collect();
    let table = hpl_table(&hpl, &ten, 1000);
    let at = |d: u64| table.iter().find(|&&(x, _)| x == d).unwrap().1;
    assert_eq!(
        at(1),
        0.1,
        "the first of the ten, not the single-cylinder 0.9"
    );
    assert_eq!(at(10), 1.0);
    assert_eq!(at(11), 3.0 + 0.5 * 11f64.sqrt());
    assert_eq!(at(300), 8.0 + 0.01 * 300.0);
    // Plain hpl: the single-cylinder value, then the curve.
    let table = hpl_table(&hpl, &[], 1000);
    assert_eq!(table[0], (1, 0.9));
    assert_eq!(table[1], (2, 3.0 + 0.5 * 2f64.sqrt()));
}

#[test]
fn brackets_nested_past_the_limit_are_refused_not_recursed_into() {
    // 60 000 brackets overflowed the stack when only blocks counted against the limit.
    let deep = format!("d D {{ A = {} }}", "[".repeat(60_000));
    let err = first_block(Path::new("x"), &deep).unwrap_err().to_string();
    assert!(err.contains("nested more than"), "{err}");
}
