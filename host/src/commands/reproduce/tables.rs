//! A seed's table as markdown and as JSON.

use std::fmt::Write as _;

use serde_json::{Value, json};

use crate::commands::compare::{figure, mean_stddev};

use super::*;

pub(super) fn verdict(holds: bool) -> &'static str {
    if holds { "holds" } else { "does not hold" }
}

/// The table in markdown: the command, the figures with the seed's beside them, ratios to
/// the first policy, and the shapes.
pub(super) fn markdown(table: &Table, m: &Measured, shapes: &[Shape]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}\n", table.caption);
    let _ = writeln!(out, "```sh\n{}\n```\n", table.command);
    let _ = write!(out, "| |");
    for (label, _) in &table.policies {
        let _ = write!(out, " {label} |");
    }
    let _ = writeln!(out, " seed |");
    let _ = write!(out, "| --- |");
    for _ in &table.policies {
        let _ = write!(out, " ---: |");
    }
    let _ = writeln!(out, " --- |");
    for (r, row) in table.rows.iter().enumerate() {
        let _ = write!(out, "| {} |", row.label);
        for p in 0..table.policies.len() {
            let (mean, sd) = mean_stddev(&m.cells[r][p]);
            if m.cells[r][p].len() > 1 {
                let _ = write!(out, " {} ({}) |", figure(mean), figure(sd));
            } else {
                let _ = write!(out, " {} |", figure(mean));
            }
        }
        let _ = writeln!(out, " {} |", row.seed);
    }
    let first = &table.policies[0].0;
    let _ = writeln!(out, "\nRatios to {first}:\n");
    for (r, row) in table.rows.iter().enumerate() {
        let base = m.mean(r, 0).max(1e-9);
        let ratios: Vec<String> = (1..table.policies.len())
            .map(|p| format!("{} {:.3}", table.policies[p].0, m.mean(r, p) / base))
            .collect();
        let _ = writeln!(out, "- {}: {}", row.label, ratios.join(", "));
    }
    let _ = writeln!(out);
    for shape in shapes {
        // The figure against the seed's first, then the shape the seed's claim has.
        match shape.figure {
            Some(figure) => {
                let _ = writeln!(
                    out,
                    "- {}: {}; as a shape: {}",
                    shape.claim,
                    figure.verdict(),
                    verdict(shape.holds)
                );
            }
            None => {
                let _ = writeln!(out, "- {}: {}", shape.claim, verdict(shape.holds));
            }
        }
    }
    let _ = writeln!(out);
    out
}

/// The table as JSON, in the shape `schedhost plot` draws (policies, rows of cells with a
/// mean and a stddev), with the seed's figures and the shapes.
pub(super) fn table_json(table: &Table, m: &Measured, shapes: &[Shape]) -> Value {
    json!({
        "id": table.id,
        "caption": table.caption,
        "label": table.caption,
        "sweep": "",
        "repeat": table.repeat,
        "policies": table.policies.iter().map(|(l, _)| l.clone()).collect::<Vec<_>>(),
        "rows": table.rows.iter().enumerate().map(|(r, row)| json!({
            "value": row.label,
            "metric": row.metric.name(),
            "seed": row.seed,
            "cells": (0..table.policies.len()).map(|p| {
                let (mean, stddev) = mean_stddev(&m.cells[r][p]);
                json!({
                    "policy": table.policies[p].0,
                    "mean": mean,
                    "stddev": stddev,
                    "values": m.cells[r][p],
                    "ratio": mean / m.mean(r, 0).max(1e-9),
                })
            }).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "shapes": shapes.iter().map(|s| {
            let mut shape = json!({ "claim": s.claim, "holds": s.holds });
            if let Some(f) = s.figure {
                shape["measured"] = json!(f.measured);
                shape["seed_figure"] = json!(f.seed);
                shape["tolerance"] = json!(FIGURE_TOLERANCE);
                shape["matches_seed"] = json!(f.matches());
            }
            shape
        }).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_figure_is_judged_against_the_seeds_with_its_tolerance_not_by_its_direction() {
        let far = Figure {
            measured: 3.04,
            seed: 1.48,
        };
        assert!(
            !far.matches(),
            "2× the seed's figure is not the seed's figure"
        );
        assert_eq!(
            far.verdict(),
            "3.04× against the seed's 1.48× (+105 %, tolerance ±15 %): does not match"
        );
        let near = Figure {
            measured: 1.60,
            seed: 1.48,
        };
        assert!(near.matches());
    }
}
