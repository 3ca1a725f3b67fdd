//! A compare column: a policy with its settings, and the sweep of a policy's tunable.

use anyhow::{Context, Result, bail};
use schedhost::policy::{Loaded, WasmRuntime, load};

use crate::commands::flags::{policy_and_tunables, policy_tunables};

/// A policy: how to build it and its settings.
pub struct Column {
    /// Its name as `--policy` gave it, without tunables (`cfq`, a path's stem).
    pub name: String,
    pub label: String,
    pub loaded: Loaded,
    pub settings: Vec<(String, i64)>,
}

/// `NAME[:k=v,k=v]` → a loaded policy with settings.
pub fn column(runtime: &WasmRuntime, spec: &str) -> Result<Column> {
    let name = policy_and_tunables(spec).0.to_owned();
    let settings = policy_tunables(spec)?;
    let (_, loaded) = load(runtime, &name).with_context(|| format!("--policy {spec}"))?;
    let base = name.strip_prefix("native:").unwrap_or(&name);
    let base = std::path::Path::new(base)
        .file_stem()
        .map_or(base.to_owned(), |s| s.to_string_lossy().into_owned());
    Ok(Column {
        name: base,
        label: column_label(spec),
        loaded,
        settings,
    })
}

/// `--sweep POLICY.TUNABLE=V1,V2`: the policy's columns take the tunable at each row's
/// value; the others run as given.
pub struct TunableSweep {
    policy: String,
    tunable: String,
    values: Vec<i64>,
}

/// The tunable sweep `key` names, if it names one (`cfq.slice_idle`).
///
/// # Errors
/// A policy no column runs, or a value that is not an integer.
pub(super) fn tunable_sweep(
    key: &str,
    columns: &[Column],
    values: &[String],
) -> Result<Option<TunableSweep>> {
    let Some((policy, tunable)) = key.split_once('.') else {
        return Ok(None);
    };
    if !columns.iter().any(|c| c.name == policy) {
        let names: Vec<&str> = columns.iter().map(|c| c.name.as_str()).collect();
        bail!(
            "--sweep {key}: no column runs {policy} (the columns run {})",
            names.join(", ")
        );
    }
    let values = values
        .iter()
        .map(|v| {
            v.parse::<i64>()
                .map_err(|_| anyhow::anyhow!("--sweep {key}={v}: a tunable takes integers"))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Some(TunableSweep {
        policy: policy.to_owned(),
        tunable: tunable.to_owned(),
        values,
    }))
}

/// A column's settings in row `row`: its own, with a swept tunable's value on top.
pub(super) fn row_settings(
    column: &Column,
    sweep: Option<&TunableSweep>,
    row: usize,
) -> Vec<(String, i64)> {
    let mut settings = column.settings.clone();
    if let Some(s) = sweep.filter(|s| s.policy == column.name) {
        settings.retain(|(name, _)| *name != s.tunable);
        settings.push((s.tunable.clone(), s.values[row]));
    }
    settings
}

/// A column's heading: the policy's name (a component's file stem, `(native)` for a
/// native build), then its tunables: `cfq (native) quantum=1`.
pub(super) fn column_label(spec: &str) -> String {
    let (name, tunables) = policy_and_tunables(spec);
    let native = name.starts_with("native:");
    let name = name.strip_prefix("native:").unwrap_or(name);
    let stem = std::path::Path::new(name)
        .file_stem()
        .map_or(name.to_owned(), |s| s.to_string_lossy().into_owned());
    let mut label = stem;
    if native {
        label.push_str(" (native)");
    }
    if !tunables.is_empty() {
        label.push(' ');
        label.push_str(&tunables.replace(',', " "));
    }
    label
}

/// `key=a..b` (inclusive, step 1) or `key=a,b,c`.
pub(super) fn parse_sweep(sweep: &str) -> Result<(String, Vec<String>)> {
    let Some((key, values)) = sweep.split_once('=') else {
        bail!("--sweep {sweep}: expected OPTION=VALUES, e.g. numjobs=1..8 or iodepth=1,32,2048");
    };
    let values: Vec<String> = match values.split_once("..") {
        Some((a, b)) => {
            let (a, b): (u64, u64) = (
                a.trim()
                    .parse()
                    .map_err(|_| anyhow::anyhow!("--sweep {sweep}: `{a}` is not an integer"))?,
                b.trim()
                    .parse()
                    .map_err(|_| anyhow::anyhow!("--sweep {sweep}: `{b}` is not an integer"))?,
            );
            if a > b || b - a > 10_000 {
                bail!(
                    "--sweep {sweep}: a range runs from the smaller to the larger value, at most 10000 steps"
                );
            }
            (a..=b).map(|v| v.to_string()).collect()
        }
        None => values
            .split(',')
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
            .collect(),
    };
    if values.is_empty() {
        bail!("--sweep {sweep}: no values");
    }
    Ok((key.trim().to_owned(), values))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sweep_accepts_ranges_and_lists() {
        assert_eq!(
            parse_sweep("numjobs=1..3").unwrap(),
            ("numjobs".into(), vec!["1".into(), "2".into(), "3".into()])
        );
        assert_eq!(parse_sweep("iodepth=1,32").unwrap().1, vec!["1", "32"]);
        assert!(
            parse_sweep("numjobs=3..1")
                .unwrap_err()
                .to_string()
                .contains("smaller to the larger")
        );
        assert!(parse_sweep("numjobs").is_err());
    }
}
