//! SVG plots from the JSON reports: the completion-latency CDF of each run (log x), bios
//! completed per second per ctx over the run, and `compare`'s table as a chart. Plots are
//! drawn from the JSON, so `schedhost plot` redraws any saved report and `--plot DIR` on
//! `run` and `compare` draws the one just made.

use plotters::prelude::*;
use serde_json::Value;

/// Plot size in pixels.
const SIZE: (u32, u32) = (800, 480);

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
    let mut out = vec![("latency-cdf.svg".to_owned(), latency_cdf(runs)?)];
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
fn latency_cdf(runs: &[&Value]) -> Result<String, String> {
    let mut curves: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    for doc in runs {
        let label = run_label(doc);
        for job in doc["jobs"].as_array().into_iter().flatten() {
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
                    let ctx = job["schedhost"]["ctx"].as_u64().unwrap_or(0);
                    curves.push((format!("{label} ctx{ctx} {dir}"), points));
                }
            }
        }
    }
    cdf_chart(
        "Completion latency CDF",
        "latency (µs, log scale)",
        "fraction of bios",
        &curves,
    )
}

/// CDF curves (x in µs) on one chart with a log x axis fitted to them.
fn cdf_chart(
    title: &str,
    x_desc: &str,
    y_desc: &str,
    curves: &[(String, Vec<(f64, f64)>)],
) -> Result<String, String> {
    let (lo, hi) = curves
        .iter()
        .flat_map(|(_, p)| p.iter().map(|&(x, _)| x))
        .fold((f64::MAX, 0f64), |(lo, hi), x| (lo.min(x), hi.max(x)));
    let (lo, hi) = if hi <= 0.0 {
        (1.0, 10.0)
    } else {
        ((lo * 0.8).max(0.01), (hi * 1.25).max(lo * 10.0))
    };
    draw(|root| {
        let mut chart = ChartBuilder::on(root)
            .caption(title, ("sans-serif", 22))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(55)
            .build_cartesian_2d((lo..hi).log_scale(), 0f64..1.0)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc(x_desc)
            .y_desc(y_desc)
            .draw()
            .map_err(err)?;
        lines(&mut chart, curves, SeriesLabelPosition::LowerRight)?;
        Ok(())
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
        let ctx = job["schedhost"]["ctx"].as_u64().unwrap_or(0);
        let name = job["jobname"].as_str().unwrap_or("job");
        series.push((format!("ctx{ctx} ({name})"), points));
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
    let title = format!("Bios completed per second, per ctx ({})", run_label(doc));
    draw(|root| {
        let mut chart = ChartBuilder::on(root)
            .caption(title, ("sans-serif", 22))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(65)
            .build_cartesian_2d(0f64..end * 1.02, 0f64..top)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("time (s)")
            .y_desc("IOPS")
            .draw()
            .map_err(err)?;
        lines(&mut chart, &series, SeriesLabelPosition::UpperRight)?;
        Ok(())
    })
}

/// Draws each (label, points) series as a line in the palette's next colour, with a legend
/// at `position`.
fn lines<'a, X, Y>(
    chart: &mut ChartContext<'a, SVGBackend<'a>, Cartesian2d<X, Y>>,
    series: &[(String, Vec<(f64, f64)>)],
    position: SeriesLabelPosition,
) -> Result<(), String>
where
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    for (i, (label, points)) in series.iter().take(MAX_SERIES).enumerate() {
        let colour = PALETTE[i % PALETTE.len()];
        let label = if i + 1 == MAX_SERIES && series.len() > MAX_SERIES {
            format!(
                "{label} (and {} more, not drawn)",
                series.len() - MAX_SERIES
            )
        } else {
            label.clone()
        };
        chart
            .draw_series(LineSeries::new(thinned(points), colour.stroke_width(2)))
            .map_err(err)?
            .label(label)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], colour.stroke_width(2))
            });
    }
    if !series.is_empty() {
        chart
            .configure_series_labels()
            .position(position)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
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

/// `compare`'s table: one line per policy over the sweep (mean, with ±stddev bars), or one
/// point per policy without a sweep.
///
/// # Errors
/// Drawing failed.
pub fn compare(doc: &Value) -> Result<Svg, String> {
    let policies: Vec<String> = doc["policies"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p.as_str().map(str::to_owned))
        .collect();
    let rows = doc["rows"].as_array().cloned().unwrap_or_default();
    if policies.len() > MAX_SERIES || rows.len() > MAX_COMPARE_ROWS {
        return Err(format!(
            "the table has {} policies and {} rows; a chart draws at most {MAX_SERIES} policies and {MAX_COMPARE_ROWS} rows",
            policies.len(),
            rows.len()
        ));
    }
    let sweep: Vec<String> = rows
        .iter()
        .map(|r| r["value"].as_str().unwrap_or("").to_owned())
        .collect();
    let cell = |row: &Value, p: usize| -> (f64, f64) {
        let c = &row["cells"][p];
        (
            plausible(&c["mean"]).unwrap_or(0.0),
            plausible(&c["stddev"]).unwrap_or(0.0),
        )
    };
    let top = rows
        .iter()
        .flat_map(|r| (0..policies.len()).map(move |p| (r, p)))
        .map(|(r, p)| {
            let (m, s) = cell(r, p);
            m + s
        })
        .fold(0f64, f64::max)
        .max(1e-9)
        * 1.15;
    let label = doc["label"].as_str().unwrap_or("value").to_owned();
    let sweep_key = doc["sweep"].as_str().unwrap_or("").to_owned();
    let n = rows.len().max(1);
    let svg = draw(|root| {
        let mut chart = ChartBuilder::on(root)
            .caption(format!("{label} by policy"), ("sans-serif", 22))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(-0.5f64..n as f64 - 0.5, 0f64..top)
            .map_err(err)?;
        let names = sweep.clone();
        chart
            .configure_mesh()
            .x_labels(n)
            .x_label_formatter(&move |x| {
                let i = x.round();
                if (x - i).abs() < 1e-6 && i >= 0.0 {
                    names.get(i as usize).cloned().unwrap_or_default()
                } else {
                    String::new()
                }
            })
            .x_desc(if sweep_key.is_empty() {
                "run".to_owned()
            } else {
                sweep_key.clone()
            })
            .y_desc(label.clone())
            .draw()
            .map_err(err)?;
        for (p, policy) in policies.iter().enumerate() {
            let colour = PALETTE[p % PALETTE.len()];
            // Policies side by side within a sweep value, so their bars do not overlap.
            let shift = (p as f64 - (policies.len() as f64 - 1.0) / 2.0) * 0.08;
            let points: Vec<(f64, f64, f64)> = rows
                .iter()
                .enumerate()
                .map(|(i, r)| {
                    let (m, s) = cell(r, p);
                    (i as f64 + shift, m, s)
                })
                .collect();
            chart
                .draw_series(LineSeries::new(
                    points.iter().map(|&(x, m, _)| (x, m)),
                    colour.stroke_width(2),
                ))
                .map_err(err)?
                .label(policy.clone())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], colour.stroke_width(2))
                });
            chart
                .draw_series(
                    points
                        .iter()
                        .map(|&(x, m, _)| Circle::new((x, m), 4, colour.filled())),
                )
                .map_err(err)?;
            chart
                .draw_series(points.iter().map(|&(x, m, s)| {
                    PathElement::new(
                        vec![(x, (m - s).max(0.0)), (x, m + s)],
                        colour.stroke_width(1),
                    )
                }))
                .map_err(err)?;
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(err)?;
        Ok(())
    })?;
    Ok(("compare.svg".to_owned(), svg))
}

/// Runs `paint` on a white SVG canvas and returns the SVG text.
fn draw(
    paint: impl FnOnce(&DrawingArea<SVGBackend<'_>, plotters::coord::Shift>) -> Result<(), String>,
) -> Result<String, String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        paint(&root)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
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
        assert!(svgs[0].1.contains("36 more, not drawn"));
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
