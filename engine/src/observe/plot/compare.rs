//! `compare`'s table as a chart: a panel per device, a line per policy.

use plotters::prelude::*;
use serde_json::Value;

use super::page::Page;
use super::{MAX_COMPARE_ROWS, MAX_SERIES, Options, Scale, Svg, draw, err, plausible, tick};

/// `compare`'s table: a panel per device, in each one line per policy over the sweep
/// (mean, with ±stddev bars when cells were repeated), or one point per policy without a
/// sweep; the y axis is log where the means span more than a decade (unless `options`
/// say otherwise).
///
/// # Errors
/// A table too large to draw, or drawing failed.
pub fn compare(doc: &Value, options: &Options) -> Result<Svg, String> {
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
    // The cells of each device, in column order: a panel each.
    let first = rows.first();
    let device_of = |p: usize| -> String {
        first
            .and_then(|r| r["cells"][p]["device"].as_str())
            .unwrap_or("")
            .to_owned()
    };
    let mut devices: Vec<String> = Vec::new();
    for p in 0..policies.len() {
        let d = device_of(p);
        if !devices.contains(&d) {
            devices.push(d);
        }
    }
    if devices.is_empty() {
        devices.push(String::new());
    }
    let means: Vec<(f64, f64)> = rows
        .iter()
        .flat_map(|r| (0..policies.len()).map(move |p| (r, p)))
        .map(|(r, p)| cell(r, p))
        .collect();
    let top = means
        .iter()
        .map(|(m, s)| m + s)
        .fold(0f64, f64::max)
        .max(1e-9);
    let least = means
        .iter()
        .map(|&(m, _)| m)
        .filter(|m| *m > 0.0)
        .fold(f64::MAX, f64::min)
        .min(top);
    // Log when the means span more than a decade: a linear axis would put the small ones
    // on zero.
    let log = match options.y {
        Scale::Log => true,
        Scale::Linear => false,
        Scale::Auto => top / least > 10.0,
    };
    let (floor, ceiling) = if log {
        (least * 0.7, top * 1.4)
    } else {
        (0.0, top * 1.15)
    };
    let label = doc["label"].as_str().unwrap_or("value").to_owned();
    let sweep_key = doc["sweep"].as_str().unwrap_or("").to_owned();
    let repeat = doc["repeat"].as_u64().unwrap_or(1);
    let seed = doc["seed"].as_u64().unwrap_or(1);
    // Without a sweep the x axis is the policies themselves, one point each, and needs no
    // legend to say which is which.
    let by_policy = sweep_key.is_empty() && rows.len() == 1;
    let name_of = |p: usize| -> String {
        policies[p]
            .split(" @ ")
            .next()
            .unwrap_or(&policies[p])
            .to_owned()
    };
    let first_panel: Vec<usize> = (0..policies.len())
        .filter(|&p| device_of(p) == devices[0])
        .collect();
    let labels: Vec<String> = if by_policy {
        Vec::new()
    } else {
        first_panel.iter().map(|&p| name_of(p)).collect()
    };
    let panels = devices.len().min(8) as f64;
    let page = Page::new(options, (3.5, 0.4 + 2.0 * panels));
    let svg = draw(&page, &labels, |plot, shown| {
        let shown = if by_policy { MAX_SERIES } else { shown };
        let panels = plot.split_evenly((devices.len(), 1));
        for (panel, device) in panels.iter().zip(&devices) {
            let mine: Vec<usize> = (0..policies.len())
                .filter(|&p| device_of(p) == *device)
                .take(shown)
                .collect();
            // The y axis names the metric; the panel names its device and runs.
            let runs = if repeat > 1 {
                format!("mean of {repeat} runs per cell from seed {seed}")
            } else {
                format!("seed {seed}")
            };
            let title = format!("{device}, {runs}");
            let n = if by_policy { mine.len() } else { rows.len() }.max(1);
            let names: Vec<String> = if by_policy {
                mine.iter().map(|&p| name_of(p)).collect()
            } else {
                sweep.clone()
            };
            let x_desc = if by_policy {
                "policy".to_owned()
            } else {
                sweep_key.clone()
            };
            let x_label = move |x: &f64| {
                let i = x.round();
                if (x - i).abs() < 1e-6 && i >= 0.0 {
                    names.get(i as usize).cloned().unwrap_or_default()
                } else {
                    String::new()
                }
            };
            let points_of = |k: usize, p: usize| -> Vec<(f64, f64, f64)> {
                rows.iter()
                    .enumerate()
                    .map(|(i, r)| {
                        let (m, s) = cell(r, p);
                        let x = if by_policy { k as f64 } else { i as f64 };
                        (x, m, s)
                    })
                    .collect()
            };
            let mut builder = super::chart_on(&page, panel, &title, 6);
            let x = -0.5f64..n as f64 - 0.5;
            macro_rules! plot_panel {
                ($chart:expr) => {{
                    let mut chart = $chart;
                    chart
                        .configure_mesh()
                        .x_labels(n.min(40))
                        .y_labels(6)
                        .x_label_formatter(&x_label)
                        .x_desc(x_desc.clone())
                        .y_desc(if log { log_desc(&label) } else { label.clone() })
                        .y_label_formatter(&|y| {
                            if log {
                                super::log_tick(*y, floor, ceiling)
                            } else {
                                tick(*y)
                            }
                        })
                        .label_style(page.label_font())
                        .axis_desc_style(page.label_font())
                        .light_line_style(WHITE)
                        .draw()
                        .map_err(err)?;
                    for (k, &p) in mine.iter().enumerate() {
                        let points = points_of(k, p);
                        let line: Vec<(f64, f64)> =
                            points.iter().map(|&(x, m, _)| (x, m.max(floor))).collect();
                        if !by_policy {
                            super::line(&page, &mut chart, k, &line)?;
                        }
                        markers(&page, &mut chart, k, &line)?;
                        if repeat > 1 {
                            let (colour, _) = page.look(k);
                            chart
                                .draw_series(points.iter().map(|&(x, m, s)| {
                                    PathElement::new(
                                        vec![(x, (m - s).max(floor)), (x, (m + s).max(floor))],
                                        colour.stroke_width(1),
                                    )
                                }))
                                .map_err(err)?;
                        }
                    }
                }};
            }
            if log {
                plot_panel!(
                    builder
                        .build_cartesian_2d(x, (floor..ceiling).log_scale())
                        .map_err(err)?
                );
            } else {
                plot_panel!(builder.build_cartesian_2d(x, floor..ceiling).map_err(err)?);
            }
        }
        Ok(())
    })?;
    Ok(("compare.svg".to_owned(), svg))
}

/// Series `k`'s marker at each of `points` (filled dot, ring, cross, triangle, then larger
/// rings and triangles), so points on top of one another all show; never shifted sideways.
fn markers<'a, Y>(
    page: &Page,
    chart: &mut ChartContext<
        'a,
        SVGBackend<'a>,
        Cartesian2d<plotters::coord::types::RangedCoordf64, Y>,
    >,
    k: usize,
    points: &[(f64, f64)],
) -> Result<(), String>
where
    Y: Ranged<ValueType = f64>,
{
    let (colour, _) = page.look(k);
    let size = page.marker();
    let stroke = colour.stroke_width(page.stroke());
    let grow = size * (k / 4) as i32 / 2;
    for &at in points {
        match k % 4 {
            0 => chart.draw_series(std::iter::once(Circle::new(
                at,
                size + grow,
                colour.filled(),
            ))),
            1 => chart.draw_series(std::iter::once(Circle::new(at, size * 2 + grow, stroke))),
            2 => chart.draw_series(std::iter::once(Cross::new(at, size * 2 + grow, stroke))),
            _ => chart.draw_series(std::iter::once(TriangleMarker::new(
                at,
                size * 2 + grow,
                stroke,
            ))),
        }
        .map_err(err)?;
    }
    Ok(())
}

/// An axis description said to be on a log scale: `latency (ms)` → `latency (ms, log)`.
fn log_desc(label: &str) -> String {
    match label.strip_suffix(')') {
        Some(open) if open.contains('(') => format!("{open}, log)"),
        _ => format!("{label} (log)"),
    }
}
