//! `compare`'s table as a chart: a panel per device, a line per policy.

use plotters::prelude::*;
use serde_json::Value;

use super::*;

/// `compare`'s table: a panel per device, in each one line per policy over the sweep
/// (mean, with ±stddev bars when cells were repeated), or one point per policy without a
/// sweep.
///
/// # Errors
/// A table too large to draw, or drawing failed.
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
    let repeat = doc["repeat"].as_u64().unwrap_or(1);
    let seed = doc["seed"].as_u64().unwrap_or(1);
    // Without a sweep the x axis is the policies themselves, one point each.
    let by_policy = sweep_key.is_empty() && rows.len() == 1;
    let svg = draw(|plot, legend| {
        let panels = plot.split_evenly((devices.len(), 1));
        let mut entries: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
        for (panel, device) in panels.iter().zip(&devices) {
            let mine: Vec<usize> = (0..policies.len())
                .filter(|&p| device_of(p) == *device)
                .collect();
            let title = format!("{label}: {device}, {repeat} run(s) per cell from seed {seed}");
            let n = if by_policy { mine.len() } else { rows.len() }.max(1);
            let mut chart = ChartBuilder::on(panel)
                .caption(title, ("sans-serif", 16))
                .margin(10)
                .x_label_area_size(36)
                .y_label_area_size(70)
                .build_cartesian_2d(-0.5f64..n as f64 - 0.5, 0f64..top)
                .map_err(err)?;
            let names: Vec<String> = if by_policy {
                mine.iter()
                    .map(|&p| policies[p].split(" @ ").next().unwrap_or("").to_owned())
                    .collect()
            } else {
                sweep.clone()
            };
            chart
                .configure_mesh()
                .x_labels(n.min(40))
                .x_label_formatter(&move |x| {
                    let i = x.round();
                    if (x - i).abs() < 1e-6 && i >= 0.0 {
                        names.get(i as usize).cloned().unwrap_or_default()
                    } else {
                        String::new()
                    }
                })
                .x_desc(if by_policy {
                    "policy".to_owned()
                } else {
                    sweep_key.clone()
                })
                .y_desc(label.clone())
                .y_label_formatter(&|y| tick(*y))
                .light_line_style(WHITE)
                .draw()
                .map_err(err)?;
            for (k, &p) in mine.iter().enumerate() {
                let (colour, _) = look(k);
                // Every point at its own sweep value, never shifted sideways: series that
                // coincide are told apart by their dashes and markers, not by moving them.
                let points: Vec<(f64, f64, f64)> = rows
                    .iter()
                    .enumerate()
                    .map(|(i, r)| {
                        let (m, s) = cell(r, p);
                        let x = if by_policy { k as f64 } else { i as f64 };
                        (x, m, s)
                    })
                    .collect();
                let line: Vec<(f64, f64)> = points.iter().map(|&(x, m, _)| (x, m)).collect();
                if !by_policy {
                    lines_from(&mut chart, k, &line)?;
                }
                // A marker per series (filled dot, ring, cross, triangle, then larger
                // rings), so points on top of one another all show.
                for &(x, m, _) in &points {
                    let at = (x, m);
                    match k % 4 {
                        0 => {
                            chart.draw_series(std::iter::once(Circle::new(at, 4, colour.filled())))
                        }
                        1 => chart.draw_series(std::iter::once(Circle::new(
                            at,
                            7,
                            colour.stroke_width(2),
                        ))),
                        2 => chart.draw_series(std::iter::once(Cross::new(
                            at,
                            6,
                            colour.stroke_width(2),
                        ))),
                        _ => chart.draw_series(std::iter::once(TriangleMarker::new(
                            at,
                            7 + 3 * (k / 4) as i32,
                            colour.stroke_width(2),
                        ))),
                    }
                    .map_err(err)?;
                }
                if repeat > 1 {
                    chart
                        .draw_series(points.iter().map(|&(x, m, s)| {
                            PathElement::new(
                                vec![(x, (m - s).max(0.0)), (x, m + s)],
                                colour.stroke_width(1),
                            )
                        }))
                        .map_err(err)?;
                }
                if entries.len() < mine.len() {
                    let name = policies[p]
                        .split(" @ ")
                        .next()
                        .unwrap_or(&policies[p])
                        .to_owned();
                    entries.push((name, line));
                }
            }
        }
        draw_legend(legend, &entries)
    })?;
    Ok(("compare.svg".to_owned(), svg))
}
