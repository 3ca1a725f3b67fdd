//! SVG plots from the JSON reports: the completion-latency CDF of each run (log x) and its
//! tail (1 − CDF on a log axis, where schedulers differ), bios completed per second per
//! ctx over the run, and `compare`'s table as a chart, a panel per device. Plots are drawn
//! from the JSON, so `schedhost plot` redraws any saved report and `--plot DIR` on `run`
//! and `compare` draws the one just made. Each series has its own colour and dash, so two
//! lines on top of each other both show; legends sit beside the data, never on it; titles
//! name the policy, device, jobs and seed.

use plotters::element::DashedPathElement;
use plotters::prelude::*;
use serde_json::Value;

mod compare;
mod render;

pub use compare::compare;
#[cfg(test)]
use render::parsed_with;
pub use render::{pdf, png};

/// Plot size in pixels.
const SIZE: (u32, u32) = (1000, 540);
/// Width of the legend column at the right.
const LEGEND_WIDTH: u32 = 210;

/// Lines one chart draws; past them the legend says how many were left out. A report is
/// an input like any other: its size must not decide the size of the SVG.
const MAX_SERIES: usize = 64;
/// Points one line keeps (evenly thinned, its last point kept): far more than 800 pixels
/// across can show.
const MAX_POINTS_PER_SERIES: usize = 2000;
/// Rows of a `compare` chart (sweep values along the x axis).
const MAX_COMPARE_ROWS: usize = 1000;

/// Series colours, in order.
const PALETTE: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

/// A drawn plot: its file name and SVG text.
pub type Svg = (String, String);

/// What a JSON document is.
#[derive(Debug)]
pub enum Report<'a> {
    /// A `run` report (fio-shaped).
    Run(&'a Value),
    /// A `compare` table.
    Compare(&'a Value),
}

impl<'a> Report<'a> {
    /// Recognises `doc`.
    ///
    /// # Errors
    /// It is neither a run report nor a compare table.
    pub fn of(doc: &'a Value) -> Result<Self, String> {
        if doc["jobs"].is_array() && doc["schedhost"].is_object() {
            Ok(Self::Run(doc))
        } else if doc["rows"].is_array() && doc["policies"].is_array() {
            Ok(Self::Compare(doc))
        } else {
            Err(
                "not a schedhost JSON report (from `run --output-format json` or `compare --json`)"
                    .into(),
            )
        }
    }
}

/// The label of a run report: its policy source.
pub fn run_label(doc: &Value) -> String {
    let policy = &doc["schedhost"]["policy"];
    policy["source"]
        .as_str()
        .or(policy["name"].as_str())
        .unwrap_or("run")
        .rsplit('/')
        .next()
        .unwrap_or("run")
        .trim_end_matches(".wasm")
        .to_owned()
}

/// Plots for run reports: one latency CDF over all of them, and bios per second per ctx for
/// each.
///
/// # Errors
/// Drawing failed (it does not, for valid reports).
pub fn runs(runs: &[&Value]) -> Result<Vec<Svg>, String> {
    let curves = latency_curves(runs);
    let about = runs_title(runs);
    let mut out = vec![
        (
            "latency-cdf.svg".to_owned(),
            cdf_chart(
                &format!("Completion latency CDF: {about}"),
                "latency (µs, log scale)",
                "fraction of bios",
                &curves,
            )?,
        ),
        (
            "latency-tail.svg".to_owned(),
            tail_chart(&format!("Latency tail: {about}"), &curves)?,
        ),
    ];
    for (i, doc) in runs.iter().enumerate() {
        let name = if runs.len() == 1 {
            "iops.svg".to_owned()
        } else {
            format!("iops-{}-{}.svg", i + 1, file_safe(&run_label(doc)))
        };
        out.push((name, iops_over_time(doc)?));
    }
    Ok(out)
}

/// One curve per run, job and direction with completions.
fn latency_curves(runs: &[&Value]) -> Vec<(String, Vec<(f64, f64)>)> {
    let mut curves: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    for doc in runs {
        let label = run_label(doc);
        let names = job_names(doc);
        for (job, name) in doc["jobs"].as_array().into_iter().flatten().zip(&names) {
            for dir in ["read", "write"] {
                let points: Vec<(f64, f64)> = job["schedhost"]["latency_cdf"][dir]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|p| {
                        Some((plausible(&p["ns"])? / 1000.0, plausible(&p["fraction"])?))
                    })
                    .collect();
                if !points.is_empty() {
                    let who = if runs.len() > 1 {
                        format!("{label} ")
                    } else {
                        String::new()
                    };
                    curves.push((format!("{who}{name} {dir}"), points));
                }
            }
        }
    }
    curves
}

/// Each job entry's name in a legend: its job name, and for the clones of a job
/// (`numjobs`), which clone (`reader.0`, `reader.1`), as fio numbers them.
fn job_names(doc: &Value) -> Vec<String> {
    let jobs = doc["jobs"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let name = |j: &Value| j["jobname"].as_str().unwrap_or("job").to_owned();
    let mut seen: Vec<(String, usize)> = Vec::new();
    jobs.iter()
        .map(|j| {
            let n = name(j);
            let clones = jobs.iter().filter(|o| name(o) == n).count();
            let k = match seen.iter_mut().find(|(s, _)| *s == n) {
                Some((_, k)) => {
                    *k += 1;
                    *k
                }
                None => {
                    seen.push((n.clone(), 0));
                    0
                }
            };
            if clones > 1 { format!("{n}.{k}") } else { n }
        })
        .collect()
}

/// What a set of runs was, for a title: `cfq on sim:hdd, seed 1, jobs reader`, or for
/// runs overlaid, their policies against one another (`noop vs cfq on sim:hdd`).
fn runs_title(runs: &[&Value]) -> String {
    let mut title = if let [one] = runs {
        run_title(one)
    } else {
        let labels: Vec<String> = runs.iter().map(|doc| run_label(doc)).collect();
        let mut devices: Vec<&str> = runs
            .iter()
            .map(|doc| doc["schedhost"]["device"]["spec"].as_str().unwrap_or("?"))
            .collect();
        devices.dedup();
        format!("{} on {}", labels.join(" vs "), devices.join(", "))
    };
    if title.chars().count() > 90 {
        title = title.chars().take(87).collect::<String>() + "...";
    }
    title
}

/// One run, for a title: its policy, device, seed and job names.
fn run_title(doc: &Value) -> String {
    let section = &doc["schedhost"];
    let mut jobs: Vec<&str> = doc["jobs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|j| j["jobname"].as_str())
        .collect();
    jobs.dedup();
    let jobs = match jobs.len() {
        0 => String::new(),
        1..=3 => format!(", jobs {}", jobs.join(" ")),
        n => format!(", {n} jobs"),
    };
    let device = section["device"]["spec"].as_str().unwrap_or("?");
    let seed = section["seed"]
        .as_u64()
        .map(|s| format!(", seed {s}"))
        .unwrap_or_default();
    format!("{} on {device}{seed}{jobs}", run_label(doc))
}

/// The tail of each curve: 1 − CDF on a log axis against latency on a log axis, down to
/// one bio in 10 000.
fn tail_chart(title: &str, curves: &[(String, Vec<(f64, f64)>)]) -> Result<String, String> {
    let floor = 1e-4;
    let tails: Vec<(String, Vec<(f64, f64)>)> = curves
        .iter()
        .map(|(label, points)| {
            let tail = points
                .iter()
                .map(|&(x, q)| (x, (1.0 - q).max(floor)))
                .collect();
            (label.clone(), tail)
        })
        .collect();
    let (lo, hi) = x_range(&tails);
    draw(|plot, legend| {
        let mut chart = ChartBuilder::on(plot)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d((lo..hi).log_scale(), (floor * 0.9..1.0).log_scale())
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("latency (µs, log scale)")
            .y_desc("fraction of bios slower (log)")
            .x_label_formatter(&|x| log_tick(*x))
            .y_label_formatter(&|y| fraction_tick(*y))
            .light_line_style(WHITE)
            .draw()
            .map_err(err)?;
        lines(&mut chart, &tails)?;
        draw_legend(legend, &tails)
    })
}

/// The x range of `curves`, padded, for a log axis.
fn x_range(curves: &[(String, Vec<(f64, f64)>)]) -> (f64, f64) {
    let (lo, hi) = curves
        .iter()
        .flat_map(|(_, p)| p.iter().map(|&(x, _)| x))
        .fold((f64::MAX, 0f64), |(lo, hi), x| (lo.min(x), hi.max(x)));
    if hi <= 0.0 {
        (1.0, 10.0)
    } else {
        ((lo * 0.8).max(0.01), (hi * 1.25).max(lo * 10.0))
    }
}

/// CDF curves (x in µs) on one chart with a log x axis fitted to them.
fn cdf_chart(
    title: &str,
    x_desc: &str,
    y_desc: &str,
    curves: &[(String, Vec<(f64, f64)>)],
) -> Result<String, String> {
    let (lo, hi) = x_range(curves);
    draw(|plot, legend| {
        let mut chart = ChartBuilder::on(plot)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(55)
            .build_cartesian_2d((lo..hi).log_scale(), 0f64..1.0)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc(x_desc)
            .y_desc(y_desc)
            .x_label_formatter(&|x| log_tick(*x))
            .light_line_style(WHITE)
            .draw()
            .map_err(err)?;
        lines(&mut chart, curves)?;
        draw_legend(legend, curves)
    })
}

/// Response-time CDFs of named distributions (each ascending, in µs) on one log-x chart:
/// `validate`'s measured drive against the model.
///
/// # Errors
/// Drawing failed.
pub fn distributions(title: &str, series: &[(String, &[f64])]) -> Result<String, String> {
    let curves: Vec<(String, Vec<(f64, f64)>)> = series
        .iter()
        .map(|(label, sorted)| {
            let n = sorted.len().max(1) as f64;
            let points = sorted
                .iter()
                .enumerate()
                .filter(|(_, x)| x.is_finite() && **x > 0.0)
                .map(|(i, &x)| (x, (i + 1) as f64 / n))
                .collect();
            (label.clone(), points)
        })
        .collect();
    cdf_chart(
        title,
        "response time (µs, log scale)",
        "fraction of requests",
        &curves,
    )
}

/// Bios completed per second by each ctx, from the run's 10 ms timeline.
fn iops_over_time(doc: &Value) -> Result<String, String> {
    let names = job_names(doc);
    let mut series: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    for (index, job) in doc["jobs"].as_array().into_iter().flatten().enumerate() {
        let timeline = &job["schedhost"]["timeline"];
        let bucket_ns = timeline["bucket_ns"].as_f64().unwrap_or(1e7);
        // A zero or absurd width would draw an unbounded axis (plotters never returns).
        if !(1.0..=1e18).contains(&bucket_ns) {
            return Err(format!(
                "jobs[{index}].schedhost.timeline.bucket_ns is {bucket_ns}: expected nanoseconds from 1 to 1e18"
            ));
        }
        let bucket_s = bucket_ns / 1e9;
        let counts: Vec<f64> = timeline["ios"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(plausible)
            .filter(|n| *n >= 0.0)
            .collect();
        // Long runs are drawn with wider bins, about 200 across the plot.
        let group = counts.len().div_ceil(200).max(1);
        let points = counts
            .chunks(group)
            .enumerate()
            .map(|(i, c)| {
                let width = bucket_s * c.len() as f64;
                ((i * group) as f64 * bucket_s, c.iter().sum::<f64>() / width)
            })
            .collect();
        series.push((names.get(index).cloned().unwrap_or_default(), points));
    }
    let end = series
        .iter()
        .filter_map(|(_, p)| p.last().map(|l| l.0))
        .fold(0f64, f64::max)
        .max(0.01);
    let top = series
        .iter()
        .flat_map(|(_, p)| p.iter().map(|&(_, y)| y))
        .fold(0f64, f64::max)
        .max(1.0)
        * 1.1;
    let title = format!("Bios completed per second, per ctx: {}", run_title(doc));
    draw(|plot, legend| {
        let mut chart = ChartBuilder::on(plot)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(65)
            .build_cartesian_2d(0f64..end * 1.02, 0f64..top)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("time (s)")
            .y_desc("IOPS")
            .y_label_formatter(&|y| tick(*y))
            .light_line_style(WHITE)
            .draw()
            .map_err(err)?;
        lines(&mut chart, &series)?;
        draw_legend(legend, &series)
    })
}

/// Series `i`'s look: a colour and a dash, both cycling (8 colours, 4 dashes), so no two
/// of the first eight look alike and lines drawn over one another still both show.
fn look(i: usize) -> (RGBColor, Option<(u32, u32)>) {
    const DASHES: [Option<(u32, u32)>; 4] = [None, Some((10, 5)), Some((3, 4)), Some((16, 4))];
    (PALETTE[i % PALETTE.len()], DASHES[i % DASHES.len()])
}

/// Draws each (label, points) series as a line in its [`look`].
fn lines<'a, X, Y>(
    chart: &mut ChartContext<'a, SVGBackend<'a>, Cartesian2d<X, Y>>,
    series: &[(String, Vec<(f64, f64)>)],
) -> Result<(), String>
where
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    for (i, (_, points)) in series.iter().take(MAX_SERIES).enumerate() {
        let points: Vec<(f64, f64)> = thinned(points).collect();
        lines_from(chart, i, &points)?;
    }
    Ok(())
}

/// The legend in its own column beside the plot: each series' look and label, as many as
/// fit, and how many more were left out.
fn draw_legend(
    area: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    series: &[(String, Vec<(f64, f64)>)],
) -> Result<(), String> {
    let row = 20;
    let fit = ((SIZE.1 as i32 - 60) / row).max(1) as usize;
    let shown = series.len().min(MAX_SERIES).min(fit);
    for (i, (label, _)) in series.iter().take(shown).enumerate() {
        let y = 50 + i as i32 * row;
        let (colour, dash) = look(i);
        let style = colour.stroke_width(2);
        let ends = vec![(8, y), (40, y)];
        match dash {
            None => area.draw(&PathElement::new(ends, style)).map_err(err)?,
            Some((on, off)) => area
                .draw(&DashedPathElement::new(ends, on, off, style))
                .map_err(err)?,
        }
        let mut text: String = label.chars().take(30).collect();
        if label.chars().count() > 30 {
            text.push_str("...");
        }
        area.draw(&Text::new(text, (48, y - 7), ("sans-serif", 13)))
            .map_err(err)?;
    }
    if series.len() > shown {
        let y = 50 + shown as i32 * row;
        let more = format!("(and {} more, not drawn)", series.len() - shown);
        area.draw(&Text::new(more, (8, y - 7), ("sans-serif", 13)))
            .map_err(err)?;
    }
    Ok(())
}

/// At most [`MAX_POINTS_PER_SERIES`] of `points`, evenly spaced, the last one included.
fn thinned(points: &[(f64, f64)]) -> impl Iterator<Item = (f64, f64)> + '_ {
    let step = points.len().div_ceil(MAX_POINTS_PER_SERIES).max(1);
    let last = points.len().saturating_sub(1);
    points
        .iter()
        .enumerate()
        .filter(move |(i, _)| i % step == 0 || *i == last)
        .map(|(_, &p)| p)
}

/// Series `k`'s line through `points` in its [`look`].
fn lines_from<'a, X, Y>(
    chart: &mut ChartContext<'a, SVGBackend<'a>, Cartesian2d<X, Y>>,
    k: usize,
    points: &[(f64, f64)],
) -> Result<(), String>
where
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    let (colour, dash) = look(k);
    let style = colour.stroke_width(2);
    match dash {
        None => chart
            .draw_series(LineSeries::new(points.iter().copied(), style))
            .map(|_| ())
            .map_err(err),
        Some((on, off)) => chart
            .draw_series(DashedLineSeries::new(points.to_vec(), on, off, style))
            .map(|_| ())
            .map_err(err),
    }
}

/// A drawing area of a plot.
type Area<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;

/// Runs `paint` on a white SVG canvas, split into the plot and the legend column at its
/// right, and returns the SVG text.
fn draw(paint: impl FnOnce(&Area<'_>, &Area<'_>) -> Result<(), String>) -> Result<String, String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let (plot, legend) = root.split_horizontally(SIZE.0 - LEGEND_WIDTH);
        paint(&plot, &legend)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

/// A log axis's tick label: only at 1, 2 and 5 times a power of ten, so the labels of a
/// decade's crowded upper ticks do not run into one another.
fn log_tick(v: f64) -> String {
    if !(v.is_finite() && v > 0.0) {
        return String::new();
    }
    let lead = v / 10f64.powf(v.log10().floor());
    if [1.0, 2.0, 5.0].iter().any(|d| (lead - d).abs() < 1e-6 * d) {
        tick(v)
    } else {
        String::new()
    }
}

/// A fraction's label on a log axis, as a decimal (`0.1`, `0.001`, `0.0001`): only at
/// powers of ten, so every decade is labelled once and none is written `1e-1`.
fn fraction_tick(v: f64) -> String {
    if !(v.is_finite() && v > 0.0) {
        return String::new();
    }
    let exponent = v.log10().round();
    if (v.log10() - exponent).abs() > 1e-6 {
        return String::new();
    }
    let places = (-exponent).max(0.0) as usize;
    format!("{v:.places$}")
}

/// A tick's label: short and without trailing zeros (`45k`, `2.5M`, `100`, `0.25`).
fn tick(v: f64) -> String {
    let trim = |s: String| {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_owned()
        } else {
            s
        }
    };
    let a = v.abs();
    if a >= 1e6 {
        format!("{}M", trim(format!("{:.1}", v / 1e6)))
    } else if a >= 1e4 {
        format!("{}k", trim(format!("{:.1}", v / 1e3)))
    } else if a >= 1.0 || a == 0.0 {
        trim(format!("{v:.1}"))
    } else {
        trim(format!("{v:.3}"))
    }
}

/// A number from a report, if it is one a plot can draw: a file's values are not trusted,
/// and a range built from 1e308 overflows to infinity, which plotters cannot lay out.
fn plausible(value: &Value) -> Option<f64> {
    value.as_f64().filter(|x| x.is_finite() && x.abs() <= 1e15)
}

fn err(e: impl std::fmt::Display) -> String {
    format!("drawing the plot: {e}")
}

/// `a/b c.wasm` → `a-b-c.wasm`, for file names.
fn file_safe(label: &str) -> String {
    label
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
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
        let err = compare(&doc).unwrap_err();
        assert!(err.contains("at most 64 policies"), "{err}");
        let many: Vec<Value> = (0..100)
            .map(|c| json!({ "jobname": "j", "schedhost": {
                "ctx": c,
                "timeline": { "bucket_ns": 1e7, "ios": [1, 2, 3] },
                "latency_cdf": { "read": (1..3000).map(|i| json!({ "ns": i * 1000, "fraction": f64::from(i) / 3e3 })).collect::<Vec<_>>() },
            }}))
            .collect();
        let doc = json!({ "jobs": many, "schedhost": { "policy": { "name": "noop" } } });
        let svgs = runs(&[&doc]).unwrap();
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
            .map(|&v| log_tick(v))
            .collect();
        assert_eq!(
            log,
            ["1000", "2000", "", "5000", "", ""],
            "1, 2 and 5 of a decade"
        );
    }

    #[test]
    fn every_run_plot_renders_to_a_png_and_a_pdf() {
        let doc = report(json!(10_000_000), json!([5, 6, 7]));
        for (name, svg) in runs(&[&doc]).unwrap() {
            let png = png(&svg).unwrap();
            assert!(png.starts_with(b"\x89PNG"), "{name}");
            let pdf = pdf(&svg).unwrap();
            assert!(pdf.starts_with(b"%PDF"), "{name}");
        }
    }

    #[test]
    fn a_machine_without_fonts_still_gets_its_pdf_without_the_text() {
        let doc = report(json!(10_000_000), json!([5, 6, 7]));
        let (_, svg) = runs(&[&doc]).unwrap().remove(0);
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
        let err = runs(&[&doc]).unwrap_err();
        assert!(
            err.contains("jobs[0].schedhost.timeline.bucket_ns"),
            "{err}"
        );
    }

    #[test]
    fn absurd_values_in_a_report_are_left_out_of_the_axes() {
        let doc = report(json!(10_000_000), json!([1, 1e300, 3]));
        assert!(runs(&[&doc]).is_ok());
    }
}
