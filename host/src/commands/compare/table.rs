//! The compare table: text, JSON and CSV, and the figures in its cells.

use std::fmt::Write as _;

use serde_json::json;

use super::{Cell, CompareArgs, Metric, Runs};

impl CompareArgs {
    /// One metric's table: a block of rows per device (stacked, so two devices do not make
    /// one long row), a column per policy; `mean (stddev)` only when cells have repeats.
    pub(super) fn table(
        &self,
        metric: Metric,
        sweep_key: &str,
        columns: &[Cell<'_>],
        rows: &Rows,
    ) -> String {
        let mut out = String::new();
        let repeats = self.repeat > 1;
        let _ = writeln!(
            out,
            "{} on {}, {} run(s) per cell{}",
            metric.label(),
            self.devices.join(", "),
            self.repeat,
            if repeats { ": mean (stddev)" } else { "" }
        );
        let first = if sweep_key.is_empty() { "" } else { sweep_key };
        let fw = first.len().max(10);
        let mut any_ejected = false;
        for (device, name) in self.devices.iter().enumerate() {
            let mine: Vec<usize> = (0..columns.len())
                .filter(|&c| columns[c].device == device)
                .collect();
            if self.devices.len() > 1 {
                let _ = writeln!(out, "device {name}:");
            }
            let widths: Vec<usize> = mine
                .iter()
                .map(|&c| {
                    columns[c]
                        .policy
                        .label
                        .len()
                        .max(if repeats { 16 } else { 10 })
                })
                .collect();
            let _ = write!(out, "{first:<fw$}");
            for (&c, width) in mine.iter().zip(&widths) {
                let _ = write!(out, "  {:>width$}", columns[c].policy.label);
            }
            let _ = writeln!(out);
            for (value, cells) in rows {
                let _ = write!(out, "{value:<fw$}");
                for (&c, width) in mine.iter().zip(&widths) {
                    let runs = &cells[c];
                    let (mean, sd) = mean_stddev(&runs.values);
                    let mark = if runs.ejected > 0 { "*" } else { "" };
                    any_ejected |= runs.ejected > 0;
                    let cell = if repeats {
                        format!("{mark}{} ({})", figure(mean), figure(sd))
                    } else {
                        format!("{mark}{}", figure(mean))
                    };
                    let _ = write!(out, "  {cell:>width$}");
                }
                let _ = writeln!(out);
            }
        }
        if any_ejected {
            let _ = writeln!(
                out,
                "* the policy was ejected in some of the cell's runs: after the ejection its figures are the fallback FIFO's"
            );
        }
        out
    }

    pub(super) fn to_json(
        &self,
        metric: Metric,
        sweep_key: &str,
        columns: &[Cell<'_>],
        rows: &Rows,
    ) -> serde_json::Value {
        json!({
            "metric": metric.name(),
            "label": metric.label(),
            "device": self.devices.join(", "),
            "devices": self.devices,
            "repeat": self.repeat,
            "seed": self.flags.seed(),
            "sweep": sweep_key,
            "policies": columns.iter().map(|c| c.label.clone()).collect::<Vec<_>>(),
            "rows": rows.iter().map(|(value, cells)| json!({
                "value": value,
                "cells": cells.iter().zip(columns).map(|(runs, c)| {
                    let (mean, stddev) = mean_stddev(&runs.values);
                    json!({
                        "policy": c.policy.label,
                        "device": self.devices[c.device],
                        "mean": mean,
                        "stddev": stddev,
                        "values": runs.values,
                        "ejected_runs": runs.ejected,
                    })
                }).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
        })
    }
}

/// Per sweep value, each cell's runs.
pub(super) type Rows = Vec<(String, Vec<Runs>)>;

/// The table as CSV; with `metric`, each line starts with its name.
pub(super) fn to_csv(
    sweep_key: &str,
    columns: &[Cell<'_>],
    devices: &[String],
    rows: &Rows,
    metric: Option<&str>,
) -> String {
    let lead = |m: &str| metric.map_or(String::new(), |_| format!("{m},"));
    let mut out = format!(
        "{}{},policy,device,mean,stddev,values,ejected_runs\n",
        lead("metric"),
        if sweep_key.is_empty() {
            "sweep"
        } else {
            sweep_key
        }
    );
    for (value, cells) in rows {
        for (runs, c) in cells.iter().zip(columns) {
            let (mean, sd) = mean_stddev(&runs.values);
            let list: Vec<String> = runs.values.iter().map(|v| format!("{v:.3}")).collect();
            let _ = writeln!(
                out,
                "{}{value},{},{},{mean:.3},{sd:.3},{},{}",
                lead(metric.unwrap_or_default()),
                c.policy.label,
                devices[c.device],
                list.join(" "),
                runs.ejected
            );
        }
    }
    out
}

/// Mean and population standard deviation.
pub fn mean_stddev(values: &[f64]) -> (f64, f64) {
    let n = values.len().max(1) as f64;
    let mean = values.iter().sum::<f64>() / n;
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
    (mean, var.sqrt())
}

/// A figure with as many decimals as its size deserves.
pub fn figure(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_and_population_stddev() {
        assert_eq!(mean_stddev(&[2.0, 4.0]), (3.0, 1.0));
    }
}
