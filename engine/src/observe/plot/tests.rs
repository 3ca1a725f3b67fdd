use serde_json::json;

use super::*;

fn report(bucket_ns: Value, ios: Value) -> Value {
    json!({ "jobs": [{ "jobname": "j", "schedhost": {
        "ctx": 0,
        "timeline": { "bucket_ns": bucket_ns, "ios": ios },
        "latency_cdf": { "read": [{ "ns": 1000, "fraction": 0.5 }, { "ns": 1e308, "fraction": 1.0 }] },
    } }] })
}

#[test]
fn a_small_report_cannot_ask_for_a_huge_chart() {
    // 8 KiB of JSON once asked for a million points.
    let policies: Vec<String> = (0..1000).map(|i| format!("p{i}")).collect();
    let rows: Vec<Value> = (0..1000).map(|_| json!({})).collect();
    let doc = json!({ "policies": policies, "rows": rows });
    let err = compare(&doc, &Options::default()).unwrap_err();
    assert!(err.contains("at most 64 policies"), "{err}");
    let many: Vec<Value> = (0..100)
        .map(|c| json!({ "jobname": "j", "schedhost": {
            "ctx": c,
            "timeline": { "bucket_ns": 1e7, "ios": [1, 2, 3] },
            "latency_cdf": { "read": (1..3000).map(|i| json!({ "ns": i * 1000, "fraction": f64::from(i) / 3e3 })).collect::<Vec<_>>() },
        }}))
        .collect();
    let doc = json!({ "jobs": many, "schedhost": { "policy": { "name": "noop" } } });
    let svgs = runs(&[&doc], &Options::default()).unwrap();
    let total: usize = svgs.iter().map(|(_, svg)| svg.len()).sum();
    // 64 lines of at most 2000 points, not 100 of 3000.
    assert!(total < 4 << 20, "{total} bytes of SVG");
    assert!(
        svgs[0].1.contains("more, not drawn"),
        "the legend says what it left out"
    );
}

#[test]
fn tick_labels_are_short_and_carry_no_trailing_zeros() {
    let labels: Vec<String> = [45_000.0, 2_500_000.0, 100.0, 0.25, 0.0, 1500.0, 12.5]
        .iter()
        .map(|&v| tick(v))
        .collect();
    assert_eq!(labels, ["45k", "2.5M", "100", "0.25", "0", "1500", "12.5"]);
    let log: Vec<String> = [1000.0, 2000.0, 3000.0, 5000.0, 7000.0, 9000.0]
        .iter()
        .map(|&v| log_tick(v, 500.0, 20_000.0))
        .collect();
    assert_eq!(
        log,
        ["1000", "2000", "", "5000", "", ""],
        "1, 2 and 5 of a decade"
    );
}

#[test]
fn a_log_axis_over_more_than_two_decades_labels_only_its_powers_of_ten() {
    let labels: Vec<String> = [10.0, 20.0, 50.0, 100.0]
        .iter()
        .map(|&v| log_tick(v, 1.0, 10_000.0))
        .collect();
    assert_eq!(labels, ["10", "", "", "100"]);
}

#[test]
fn a_page_states_its_size_in_inches_and_its_text_in_points() {
    let doc = report(json!(10_000_000), json!([5, 6, 7]));
    let options = Options {
        size_in: Some((3.5, 2.5)),
        font_pt: 9.0,
        ..Options::default()
    };
    let (name, svg) = runs(&[&doc], &options).unwrap().remove(0);
    assert_eq!(
        name, "latency-tail.svg",
        "the tail is the default latency plot"
    );
    assert!(
        svg.contains("width=\"3.5in\" height=\"2.5in\" viewBox=\"0 0 336 240\""),
        "{}",
        &svg[..200]
    );
    // 9 pt at 96 pixels per inch: 12 px.
    assert!(svg.contains("font-size=\"12\""), "axis labels at 9 pt");
    let png = png(&svg, 300).unwrap();
    let width = u32::from_be_bytes(png[16..20].try_into().unwrap());
    assert_eq!(width, 1050, "3.5 inches at 300 dpi");
}

#[test]
fn compare_goes_log_where_its_means_span_more_than_a_decade_and_needs_no_legend_without_a_sweep() {
    let table = |slow: f64| {
        json!({ "policies": ["noop @ sim:ssd", "cfq @ sim:ssd"], "label": "p99 read latency (ms)",
                "sweep": "", "rows": [{ "value": "", "cells": [
                    { "mean": 0.148, "stddev": 0, "device": "sim:ssd" },
                    { "mean": slow, "stddev": 0, "device": "sim:ssd" }] }] })
    };
    let (_, wide) = compare(&table(20.0), &Options::default()).unwrap();
    assert!(
        wide.contains("p99 read latency (ms, log)"),
        "0.148 and 20 span two decades"
    );
    assert!(
        wide.contains("\n1\n</text>") && wide.contains("\n10\n</text>"),
        "decades labelled"
    );
    let (_, near) = compare(&table(0.3), &Options::default()).unwrap();
    assert!(
        near.contains("p99 read latency (ms)\n"),
        "linear within a decade"
    );
    let linear = Options {
        y: Scale::Linear,
        ..Options::default()
    };
    let (_, forced) = compare(&table(20.0), &linear).unwrap();
    assert!(!forced.contains(", log)"), "--y linear");
    // The x axis names the policies: a legend would only repeat it.
    assert_eq!(wide.matches(">\nnoop\n</text>").count(), 1);
}

#[test]
fn every_run_plot_renders_to_a_png_and_a_pdf() {
    let doc = report(json!(10_000_000), json!([5, 6, 7]));
    for (name, svg) in runs(&[&doc], &Options::default()).unwrap() {
        let png = png(&svg, 300).unwrap();
        assert!(png.starts_with(b"\x89PNG"), "{name}");
        let pdf = pdf(&svg).unwrap();
        assert!(pdf.starts_with(b"%PDF"), "{name}");
    }
}

#[test]
fn a_machine_without_fonts_still_gets_its_pdf_without_the_text() {
    let doc = report(json!(10_000_000), json!([5, 6, 7]));
    let (_, svg) = runs(&[&doc], &Options::default()).unwrap().remove(0);
    let none = std::sync::Arc::new(resvg::usvg::fontdb::Database::new());
    let tree = parsed_with(&svg, &none).unwrap();
    let pdf = svg2pdf::to_pdf(
        &tree,
        svg2pdf::ConversionOptions::default(),
        svg2pdf::PageOptions::default(),
    )
    .unwrap();
    assert!(pdf.starts_with(b"%PDF"));
}

#[test]
fn a_zero_bucket_width_is_an_error_naming_the_field_not_a_hang() {
    let doc = report(json!(0), json!([1, 2, 3]));
    let err = runs(&[&doc], &Options::default()).unwrap_err();
    assert!(
        err.contains("jobs[0].schedhost.timeline.bucket_ns"),
        "{err}"
    );
}

#[test]
fn absurd_values_in_a_report_are_left_out_of_the_axes() {
    let doc = report(json!(10_000_000), json!([1, 1e300, 3]));
    assert!(runs(&[&doc], &Options::default()).is_ok());
}
