//! SVG plots from the JSON reports, sized for a paper: the completion-latency tail of each
//! run (1 − CDF on a log axis against latency on a log axis, where schedulers differ) or its
//! CDF, bios completed per second per job over the run (linear, log or a panel per job),
//! and `compare`'s table as a chart, a panel per device. Plots are drawn from the JSON, so
//! `schedhost plot` redraws any saved report and `--plot DIR` on `run` and `compare` draws
//! the one just made. Pages are sized in inches with text in points (3.5 inches and 8 pt by
//! default: a column's width); each series has its own colour, dash and marker, so series
//! drawn over one another all show; the legend sits under the chart, never on it.

use plotters::prelude::*;
use serde_json::Value;

mod compare;
mod page;
mod render;
mod series;

pub use compare::compare;
use page::{Page, draw, line, lines};
#[cfg(test)]
use render::parsed_with;
pub use render::{pdf, png};

/// Lines one chart draws; past them the legend says how many were left out. A report is
/// an input like any other: its size must not decide the size of the SVG.
const MAX_SERIES: usize = 64;
/// Points one line keeps (evenly thinned, its last point kept): far more than a page's
/// width can show.
const MAX_POINTS_PER_SERIES: usize = 2000;
/// Rows of a `compare` chart (sweep values along the x axis).
const MAX_COMPARE_ROWS: usize = 1000;
/// The lowest fraction a tail plot shows: one bio in 10 000.
const TAIL_FLOOR: f64 = 1e-4;

/// A drawn plot: its file name and SVG text.
pub type Svg = (String, String);

/// A series: its label and its points.
type Series = (String, Vec<(f64, f64)>);

/// How plots are drawn: the page and what goes on it.
#[derive(Debug, Clone)]
pub struct Options {
    /// Width and height in inches; `None` takes each plot kind's default (3.5 inches wide).
    pub size_in: Option<(f64, f64)>,
    /// Text size in points.
    pub font_pt: f64,
    /// Whether plots carry a title (a paper's caption usually replaces it).
    pub title: bool,
    /// Which latency plots a run gets.
    pub latency: Latency,
    /// The y axis of IOPS over time and of `compare`'s chart.
    pub y: Scale,
    /// IOPS over time as a panel per job, each with its own y axis.
    pub panels: bool,
    /// Only these jobs (by job name, or a clone's `name.k`); empty: all.
    pub series: Vec<String>,
    /// A job's clones (`numjobs`) as one series: completions summed, latencies merged.
    pub per_job: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            size_in: None,
            font_pt: 8.0,
            title: true,
            latency: Latency::Tail,
            y: Scale::Auto,
            panels: false,
            series: Vec::new(),
            per_job: false,
        }
    }
}

/// Which latency plots a run gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Latency {
    /// 1 − CDF on a log axis (`latency-tail.svg`): every decade of the tail shows.
    Tail,
    /// The CDF on a linear axis (`latency-cdf.svg`): the median's region shows.
    Cdf,
    /// Both.
    Both,
}

/// A y axis's scale.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    /// Log where the values span more than a decade (`compare`), linear for IOPS over time.
    Auto,
    /// Linear from zero.
    Linear,
    /// Log.
    Log,
}

/// Each plot kind's page when `--size` names none, in inches.
const RUN_PAGE: (f64, f64) = (3.5, 2.6);

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

/// Plots for run reports: the latency tail (or CDF, or both) over all of them, and bios
/// per second per job for each.
///
/// # Errors
/// A `--series` name matches no job, or a report's timeline cannot be drawn.
pub fn runs(runs: &[&Value], options: &Options) -> Result<Vec<Svg>, String> {
    series::check_series(runs, options)?;
    let curves = series::latency_curves(runs, options);
    let about = runs_title(runs);
    let mut out = Vec::new();
    if options.latency != Latency::Cdf {
        out.push((
            "latency-tail.svg".to_owned(),
            tail_chart(options, &about, &curves)?,
        ));
    }
    if options.latency != Latency::Tail {
        let chart = cdf_chart(
            options,
            &about,
            "latency (µs, log scale)",
            "fraction of bios",
            &curves,
        )?;
        out.push(("latency-cdf.svg".to_owned(), chart));
    }
    for (i, doc) in runs.iter().enumerate() {
        let name = if runs.len() == 1 {
            "iops.svg".to_owned()
        } else {
            format!("iops-{}-{}.svg", i + 1, file_safe(&run_label(doc)))
        };
        out.push((name, iops_over_time(doc, options)?));
    }
    Ok(out)
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
fn tail_chart(options: &Options, title: &str, curves: &[Series]) -> Result<String, String> {
    let tails: Vec<Series> = curves
        .iter()
        .map(|(label, points)| {
            let tail = points
                .iter()
                .map(|&(x, q)| (x, (1.0 - q).max(TAIL_FLOOR)))
                .collect();
            (label.clone(), tail)
        })
        .collect();
    let (lo, hi) = x_range(&tails);
    let page = Page::new(options, RUN_PAGE);
    let labels = labels_of(&tails);
    draw(&page, &labels, |area, shown| {
        let mut chart = chart_on(&page, area, title, 6)
            .build_cartesian_2d((lo..hi).log_scale(), (TAIL_FLOOR * 0.9..1.0).log_scale())
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("latency (µs, log scale)")
            .y_desc("fraction slower (log)")
            .x_label_formatter(&|x| log_tick(*x, lo, hi))
            .y_label_formatter(&|y| fraction_tick(*y))
            .label_style(page.label_font())
            .axis_desc_style(page.label_font())
            .light_line_style(WHITE)
            .draw()
            .map_err(err)?;
        lines(&page, &mut chart, &tails, shown)
    })
}

/// A chart builder on `area` with `page`'s margins, label areas (y tick labels up to
/// `y_chars` long) and title.
fn chart_on<'a, 'b>(
    page: &Page,
    area: &'a page::Area<'b>,
    title: &str,
    y_chars: usize,
) -> ChartBuilder<'a, 'b, SVGBackend<'b>> {
    captioned(page, area, page.title(title), y_chars)
}

/// A chart builder on `area` with `page`'s margins and label areas, and `caption` above.
fn captioned<'a, 'b>(
    page: &Page,
    area: &'a page::Area<'b>,
    caption: Option<String>,
    y_chars: usize,
) -> ChartBuilder<'a, 'b, SVGBackend<'b>> {
    let mut builder = ChartBuilder::on(area);
    builder
        .margin(page.margin())
        .x_label_area_size(page.x_label_area())
        .y_label_area_size(page.y_label_area(y_chars));
    if let Some(caption) = caption {
        builder.caption(caption, page.caption_font());
    }
    builder
}

/// The labels of `series`, in order.
fn labels_of(series: &[Series]) -> Vec<String> {
    series.iter().map(|(label, _)| label.clone()).collect()
}

/// The x range of `curves`, padded, for a log axis.
fn x_range(curves: &[Series]) -> (f64, f64) {
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

/// CDF curves (x in µs) on one chart: a log x axis fitted to them, the fraction from 0 to 1.
fn cdf_chart(
    options: &Options,
    title: &str,
    x_desc: &str,
    y_desc: &str,
    curves: &[Series],
) -> Result<String, String> {
    let (lo, hi) = x_range(curves);
    let page = Page::new(options, RUN_PAGE);
    let labels = labels_of(curves);
    draw(&page, &labels, |area, shown| {
        let mut chart = chart_on(&page, area, title, 3)
            .build_cartesian_2d((lo..hi).log_scale(), 0f64..1.0001)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc(x_desc)
            .y_desc(y_desc)
            .x_label_formatter(&|x| log_tick(*x, lo, hi))
            .y_labels(6)
            .y_label_formatter(&|y| tick(*y))
            .label_style(page.label_font())
            .axis_desc_style(page.label_font())
            .light_line_style(WHITE)
            .draw()
            .map_err(err)?;
        lines(&page, &mut chart, curves, shown)
    })
}

/// Response-time CDFs of named distributions (each ascending, in µs) on one log-x chart:
/// `validate`'s measured drive against the model.
///
/// # Errors
/// Drawing failed.
pub fn distributions(title: &str, series: &[(String, &[f64])]) -> Result<String, String> {
    let curves: Vec<Series> = series
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
        &Options::default(),
        title,
        "response time (µs, log scale)",
        "fraction of requests",
        &curves,
    )
}

/// Bios completed per second by each job, from the run's 10 ms timeline: on one linear or
/// log axis, or a panel per job.
fn iops_over_time(doc: &Value, options: &Options) -> Result<String, String> {
    let mut series: Vec<Series> = Vec::new();
    for (index, job) in series::jobs(doc, options).iter().enumerate() {
        series.push((job.name.clone(), job.iops(index)?));
    }
    let end = series
        .iter()
        .filter_map(|(_, p)| p.last().map(|l| l.0))
        .fold(0f64, f64::max)
        .max(0.01);
    let title = run_title(doc);
    let labels = labels_of(&series);
    if options.panels {
        let tall = (RUN_PAGE.0, 0.9 + 1.1 * series.len().clamp(1, 6) as f64);
        let page = Page::new(options, tall);
        return draw(&page, &labels, |area, shown| {
            let area = match page.title(&title) {
                Some(title) => area.titled(&title, page.caption_font()).map_err(err)?,
                None => area.clone(),
            };
            let panels = area.split_evenly((shown.max(1), 1));
            let last = shown.min(series.len()).saturating_sub(1);
            for (k, panel) in panels.iter().enumerate().take(series.len()) {
                // Each panel is captioned by its job; only the bottom one names the x axis.
                let caption = Some(series[k].0.clone());
                let one = &series[k..=k];
                iops_panel(&page, panel, caption, k == last, end, one, k, options.y)?;
            }
            Ok(())
        });
    }
    let page = Page::new(options, RUN_PAGE);
    draw(&page, &labels, |area, shown| {
        let caption = page.title(&title);
        iops_panel(
            &page,
            area,
            caption,
            true,
            end,
            &series[..shown],
            0,
            options.y,
        )
    })
}

/// One IOPS chart of `series` over `0..end` seconds, the first in look `first`, with the x
/// axis described if `x_desc`.
#[expect(
    clippy::too_many_arguments,
    reason = "one chart's every choice, each named"
)]
fn iops_panel(
    page: &Page,
    area: &page::Area<'_>,
    caption: Option<String>,
    x_desc: bool,
    end: f64,
    series: &[Series],
    first: usize,
    scale: Scale,
) -> Result<(), String> {
    let top = series
        .iter()
        .flat_map(|(_, p)| p.iter().map(|&(_, y)| y))
        .fold(0f64, f64::max)
        .max(1.0);
    let mut builder = captioned(page, area, caption, 5);
    let x = 0f64..end * 1.02;
    let x_desc = if x_desc { "time (s)" } else { "" };
    if scale == Scale::Log {
        // Seconds without a completion sit on the axis's floor, one bio per second.
        let floored: Vec<Series> = series
            .iter()
            .map(|(l, p)| (l.clone(), p.iter().map(|&(t, y)| (t, y.max(1.0))).collect()))
            .collect();
        let hi = top * 1.5;
        let mut chart = builder
            .build_cartesian_2d(x, (0.8f64..hi).log_scale())
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc(x_desc)
            .x_labels(6)
            .x_label_formatter(&|t| tick(*t))
            .y_desc("IOPS (log)")
            .y_label_formatter(&|y| log_tick(*y, 0.8, hi))
            .label_style(page.label_font())
            .axis_desc_style(page.label_font())
            .light_line_style(WHITE)
            .draw()
            .map_err(err)?;
        for (k, (_, points)) in floored.iter().enumerate() {
            line(page, &mut chart, first + k, points)?;
        }
        Ok(())
    } else {
        let mut chart = builder
            .build_cartesian_2d(x, 0f64..top * 1.1)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc(x_desc)
            .x_labels(6)
            .x_label_formatter(&|t| tick(*t))
            .y_desc("IOPS")
            .y_labels(5)
            .y_label_formatter(&|y| tick(*y))
            .label_style(page.label_font())
            .axis_desc_style(page.label_font())
            .light_line_style(WHITE)
            .draw()
            .map_err(err)?;
        for (k, (_, points)) in series.iter().enumerate() {
            line(page, &mut chart, first + k, points)?;
        }
        Ok(())
    }
}

/// A tick's label on a log axis from `lo` to `hi`: at 1, 2 and 5 times a power of ten over
/// a span of two decades or less, else at powers of ten only, so that labels never run
/// into one another at a column's width.
fn log_tick(v: f64, lo: f64, hi: f64) -> String {
    if !(v.is_finite() && v > 0.0) {
        return String::new();
    }
    let lead = v / 10f64.powf(v.log10().floor());
    let leads: &[f64] = if hi / lo > 100.0 {
        &[1.0]
    } else {
        &[1.0, 2.0, 5.0]
    };
    if leads.iter().any(|d| (lead - d).abs() < 1e-6 * d) {
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
mod tests;
