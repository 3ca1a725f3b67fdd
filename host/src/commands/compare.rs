//! `schedhost compare`: the same jobs under several policies, optionally swept over a fio
//! option and repeated with different seeds, as a table like the kernel community's
//! (rows = sweep value, columns = policies, cells = mean (stddev) of one metric).

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use schedhost::backend::sim::FaultPlan;
use schedhost::frontend::jobs::JobSpec;
use schedhost::frontend::outcome::Outcome;
use schedhost::frontend::plan::{Observe, RunPlan};
use schedhost::frontend::run::{Device, PolicyPlan, run};
use schedhost::observe::stats::OpStats;
use schedhost::policy::{Loaded, WasmRuntime, load};
use schedhost::report::rates;
use serde_json::json;

use super::plan::{QueueArgs, RingArgs, SandboxArgs, parse_device};
use super::run::read_jobs;

/// What a cell shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Metric {
    /// Read IOPS summed over jobs.
    ReadIops,
    /// Write IOPS summed over jobs.
    WriteIops,
    /// Smallest read completion latency, ms.
    ReadMinLat,
    /// Largest read completion latency, ms.
    ReadMaxLat,
    /// 99th percentile of read completion latency over all jobs, ms.
    ReadP99Lat,
    /// Largest write completion latency, ms.
    WriteMaxLat,
    /// 99th percentile of write completion latency over all jobs, ms.
    WriteP99Lat,
    /// Longest a read waited in the scheduler (submission to dispatch), ms.
    ReadMaxSched,
    /// Longest a write waited in the scheduler (submission to dispatch), ms.
    WriteMaxSched,
}

impl Metric {
    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Metric::ReadIops => "read-iops",
            Metric::WriteIops => "write-iops",
            Metric::ReadMinLat => "read-min-lat",
            Metric::ReadMaxLat => "read-max-lat",
            Metric::ReadP99Lat => "read-p99-lat",
            Metric::WriteMaxLat => "write-max-lat",
            Metric::WriteP99Lat => "write-p99-lat",
            Metric::ReadMaxSched => "read-max-sched",
            Metric::WriteMaxSched => "write-max-sched",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Metric::ReadIops => "read IOPS (sum over jobs)",
            Metric::WriteIops => "write IOPS (sum over jobs)",
            Metric::ReadMinLat => "min read latency (ms)",
            Metric::ReadMaxLat => "max read latency (ms)",
            Metric::ReadP99Lat => "p99 read latency (ms)",
            Metric::WriteMaxLat => "max write latency (ms)",
            Metric::WriteP99Lat => "p99 write latency (ms)",
            Metric::ReadMaxSched => "max read time in the scheduler (ms)",
            Metric::WriteMaxSched => "max write time in the scheduler (ms)",
        }
    }

    /// This metric of a run.
    pub fn of(self, outcome: &Outcome) -> f64 {
        let dir = usize::from(matches!(
            self,
            Metric::WriteIops | Metric::WriteMaxLat | Metric::WriteP99Lat | Metric::WriteMaxSched
        ));
        match self {
            Metric::ReadIops | Metric::WriteIops => outcome
                .stats
                .iter()
                .zip(&outcome.submitters)
                .map(|(s, sub)| {
                    rates(&s.dirs[dir], sub.finished_ns.saturating_sub(sub.started_ns)).iops
                })
                .sum(),
            _ => {
                let mut all = OpStats::default();
                for s in &outcome.stats {
                    all.merge(&s.dirs[dir]);
                }
                if all.clat.is_empty() {
                    return 0.0;
                }
                let ns = match self {
                    Metric::ReadMinLat => all.clat.min(),
                    Metric::ReadMaxLat | Metric::WriteMaxLat => all.clat.max(),
                    Metric::ReadMaxSched | Metric::WriteMaxSched => all.sched.max(),
                    _ => all.clat.value_at_percentile(99.0),
                };
                ns as f64 / 1e6
            }
        }
    }
}

#[derive(Debug, clap::Args)]
pub struct CompareArgs {
    /// A policy to compare, repeatable: NAME, PATH.wasm or native:NAME, with tunables after a
    /// colon: --policy time-slice:time_slice_us=250.
    #[arg(long = "policy", short = 'p', required = true)]
    pub policies: Vec<String>,
    /// fio job files; fio options may be given instead or as well.
    pub jobs: Vec<PathBuf>,
    /// A device, repeatable (each is a group of columns): sim:hdd, sim:ssd, sim:null, a spec
    /// file, a DiskSim .diskspecs or .parv, or real files and block devices (a:b).
    #[arg(long = "device", default_value = "sim:hdd")]
    pub devices: Vec<String>,
    /// Threads for the simulated cells (default: every core). The table does not depend on
    /// it; real devices are measured one cell at a time.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub threads: Option<u32>,
    /// Sweep a fio option over every job: numjobs=1..8 or iodepth=1,32,2048.
    #[arg(long, value_name = "OPTION=VALUES")]
    pub sweep: Option<String>,
    /// Runs per cell, with seeds seed, seed+1, …
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub repeat: u32,
    /// First seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// What each cell shows.
    #[arg(long, value_enum, default_value_t = Metric::ReadIops)]
    pub metric: Metric,
    /// Also write the table as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Also write the table as CSV (sweep, policy, mean, stddev, values).
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Draw the table as an SVG chart (compare.svg) into DIR.
    #[arg(long, value_name = "DIR")]
    pub plot: Option<PathBuf>,
    /// The queue's attributes, as `run`'s, for every run.
    #[command(flatten)]
    pub queue: QueueArgs,
    /// Real devices: how they are driven, as `run`'s.
    #[command(flatten)]
    pub ring: RingArgs,
    /// The sandbox, as `run`'s: every cell's policy runs under these limits.
    #[command(flatten)]
    pub sandbox: SandboxArgs,
}

/// A policy: how to build it and its settings.
pub struct Column {
    pub label: String,
    pub loaded: Loaded,
    pub settings: Vec<(String, i64)>,
}

/// A column of the table: a policy on a device.
struct Cell<'a> {
    label: String,
    device: usize,
    policy: &'a Column,
}

/// A cell's runs: the metric of each, and how many had their policy ejected (their figures
/// are partly the fallback FIFO's, and are marked as such).
#[derive(Debug, Clone, Default)]
struct Runs {
    values: Vec<f64>,
    ejected: usize,
}

/// One run's metric, and whether its policy was ejected.
#[derive(Debug, Clone, Copy)]
struct Measured {
    value: f64,
    ejected: bool,
}

/// One run of the table: a row's jobs, a column, a seed.
#[derive(Debug, Clone, Copy)]
struct Trial {
    row: usize,
    column: usize,
    seed: u64,
}

impl CompareArgs {
    pub fn execute(self, fio_options: Vec<String>) -> Result<()> {
        let jobs = read_jobs(&self.jobs, &fio_options)?;
        let devices = self
            .devices
            .iter()
            .map(|d| parse_device(d).with_context(|| format!("--device {d}")))
            .collect::<Result<Vec<_>>>()?;
        let runtime = self.sandbox.runtime()?;
        let policies = self
            .policies
            .iter()
            .map(|spec| column(&runtime, spec))
            .collect::<Result<Vec<_>>>()?;
        let columns: Vec<Cell<'_>> = (0..devices.len())
            .flat_map(|device| policies.iter().map(move |policy| (device, policy)))
            .map(|(device, policy)| Cell {
                label: if devices.len() > 1 {
                    format!("{} @ {}", policy.label, self.devices[device])
                } else {
                    policy.label.clone()
                },
                device,
                policy,
            })
            .collect();
        let (sweep_key, sweep_values) = match &self.sweep {
            Some(sweep) => parse_sweep(sweep)?,
            None => (String::new(), vec![String::new()]),
        };
        let mut row_jobs = Vec::new();
        for value in &sweep_values {
            let mut jobs = jobs.clone();
            if !sweep_key.is_empty() {
                for job in &mut jobs {
                    job.set_option(&sweep_key, value).map_err(|e| {
                        anyhow::anyhow!("--sweep {sweep_key}={value}: job '{}': {e}", job.name)
                    })?;
                }
            }
            row_jobs.push(jobs);
        }
        let work: Vec<Trial> = (0..row_jobs.len())
            .flat_map(|row| (0..columns.len()).map(move |column| (row, column)))
            .flat_map(|(row, column)| {
                (0..u64::from(self.repeat)).map(move |i| Trial {
                    row,
                    column,
                    seed: self.seed + i,
                })
            })
            .collect();
        let values = self.measure(&work, &row_jobs, &devices, &columns, &sweep_values)?;
        let mut rows = Vec::new();
        let mut at = 0;
        for value in &sweep_values {
            let mut cells = Vec::new();
            for _ in &columns {
                let n = self.repeat as usize;
                let runs = &values[at..at + n];
                cells.push(Runs {
                    values: runs.iter().map(|m| m.value).collect(),
                    ejected: runs.iter().filter(|m| m.ejected).count(),
                });
                at += n;
            }
            rows.push((value.clone(), cells));
        }
        print!(
            "{}",
            schedhost::output::printable_lines(&self.table(&sweep_key, &columns, &rows))
        );
        if let Some(path) = &self.json {
            std::fs::write(
                path,
                format!("{:#}\n", self.to_json(&sweep_key, &columns, &rows)),
            )
            .with_context(|| format!("writing {}", path.display()))?;
        }
        if let Some(path) = &self.csv {
            std::fs::write(path, to_csv(&sweep_key, &columns, &rows))
                .with_context(|| format!("writing {}", path.display()))?;
        }
        if let Some(dir) = &self.plot {
            let doc = self.to_json(&sweep_key, &columns, &rows);
            let svg = schedhost::observe::plot::compare(&doc).map_err(anyhow::Error::msg)?;
            super::plot::write(dir, &[svg])?;
        }
        Ok(())
    }

    /// Every run's metric, in `work`'s order: simulated runs on a pool of threads (each run
    /// is deterministic, so the pool's size and order change nothing), then real ones, one at
    /// a time so they do not disturb each other.
    fn measure(
        &self,
        work: &[Trial],
        row_jobs: &[Vec<JobSpec>],
        devices: &[(Device, FaultPlan)],
        columns: &[Cell<'_>],
        sweep_values: &[String],
    ) -> Result<Vec<Measured>> {
        let measure = |w: &Trial| -> Result<Measured> {
            let cell = &columns[w.column];
            let context = || {
                format!(
                    "policy {} on {} at sweep value {:?}, seed {}",
                    cell.policy.label, self.devices[cell.device], sweep_values[w.row], w.seed
                )
            };
            let (device, faults) = &devices[cell.device];
            let plan = RunPlan {
                seed: w.seed,
                queue: self.queue.attrs(),
                supervision: self.sandbox.supervision(),
                observe: Observe::default(),
                faults: *faults,
                ring: self.ring.options(),
            };
            let policy = PolicyPlan::fixed(&cell.policy.loaded, &cell.policy.settings);
            let outcome = run(&row_jobs[w.row], device, policy, &plan, &mut |_| {})
                .with_context(context)?
                .outcome;
            Ok(Measured {
                value: self.metric.of(&outcome),
                ejected: !outcome.ejections.is_empty(),
            })
        };
        let simulated = |w: &Trial| matches!(devices[columns[w.column].device].0, Device::Sim(_));
        let sims: Vec<Trial> = work.iter().copied().filter(simulated).collect();
        let mut sim_values = parallel(&sims, self.threads, measure).into_iter();
        let mut values = Vec::with_capacity(work.len());
        for w in work {
            values.push(if simulated(w) {
                sim_values
                    .next()
                    .context("a simulated run went missing")??
            } else {
                measure(w)?
            });
        }
        Ok(values)
    }

    fn table(&self, sweep_key: &str, columns: &[Cell<'_>], rows: &[(String, Vec<Runs>)]) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{} on {}, {} run(s) per cell: mean (stddev)",
            self.metric.label(),
            self.devices.join(", "),
            self.repeat
        );
        let first = if sweep_key.is_empty() { "" } else { sweep_key };
        let widths: Vec<usize> = columns.iter().map(|c| c.label.len().max(16)).collect();
        let _ = write!(out, "{first:<10}");
        for (c, width) in columns.iter().zip(&widths) {
            let _ = write!(out, "  {:>width$}", c.label);
        }
        let _ = writeln!(out);
        let mut any_ejected = false;
        for (value, cells) in rows {
            let _ = write!(out, "{value:<10}");
            for (runs, width) in cells.iter().zip(&widths) {
                let (mean, sd) = mean_stddev(&runs.values);
                let mark = if runs.ejected > 0 { "*" } else { "" };
                any_ejected |= runs.ejected > 0;
                let _ = write!(
                    out,
                    "  {:>width$}",
                    format!("{mark}{} ({})", figure(mean), figure(sd))
                );
            }
            let _ = writeln!(out);
        }
        if any_ejected {
            let _ = writeln!(
                out,
                "* the policy was ejected in some of the cell's runs: after the ejection its figures are the fallback FIFO's"
            );
        }
        out
    }

    fn to_json(
        &self,
        sweep_key: &str,
        columns: &[Cell<'_>],
        rows: &[(String, Vec<Runs>)],
    ) -> serde_json::Value {
        json!({
            "metric": self.metric.name(),
            "label": self.metric.label(),
            "device": self.devices.join(", "),
            "devices": self.devices,
            "repeat": self.repeat,
            "seed": self.seed,
            "sweep": sweep_key,
            "policies": columns.iter().map(|c| c.label.clone()).collect::<Vec<_>>(),
            "rows": rows.iter().map(|(value, cells)| json!({
                "value": value,
                "cells": cells.iter().zip(columns).map(|(runs, c)| {
                    let (mean, stddev) = mean_stddev(&runs.values);
                    json!({
                        "policy": c.label,
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

fn to_csv(sweep_key: &str, columns: &[Cell<'_>], rows: &[(String, Vec<Runs>)]) -> String {
    let mut out = format!(
        "{},policy,mean,stddev,values,ejected_runs\n",
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
                "{value},{},{mean:.3},{sd:.3},{},{}",
                c.label,
                list.join(" "),
                runs.ejected
            );
        }
    }
    out
}

/// `NAME[:k=v,k=v]` → a loaded policy with settings.
pub fn column(runtime: &WasmRuntime, spec: &str) -> Result<Column> {
    let (name, settings) = match spec.strip_prefix("native:") {
        Some(rest) => {
            let (n, s) = rest.split_once(':').unwrap_or((rest, ""));
            (format!("native:{n}"), s)
        }
        None => {
            let (n, s) = spec.split_once(':').unwrap_or((spec, ""));
            (n.to_owned(), s)
        }
    };
    let settings = settings
        .split(',')
        .filter(|s| !s.is_empty())
        .map(|s| super::parse_setting(s).map_err(|e| anyhow::anyhow!("--policy {spec}: {e}")))
        .collect::<Result<Vec<_>>>()?;
    let (_, loaded) = load(runtime, &name).with_context(|| format!("--policy {spec}"))?;
    Ok(Column {
        label: spec.to_owned(),
        loaded,
        settings,
    })
}

/// `f` of every item, on `threads` threads (default: every core), in the items' order. For
/// simulated runs: each is deterministic, so the pool's size and order change nothing.
pub fn parallel<T: Sync, R: Send>(
    items: &[T],
    threads: Option<u32>,
    f: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    let threads = threads
        .map_or_else(
            || std::thread::available_parallelism().map_or(1, usize::from),
            |n| n as usize,
        )
        .min(items.len().max(1));
    let slots: Vec<std::sync::Mutex<Option<R>>> =
        items.iter().map(|_| std::sync::Mutex::new(None)).collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                loop {
                    let k = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(item) = items.get(k) else {
                        break;
                    };
                    let result = f(item);
                    *slots[k]
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(result);
                }
            });
        }
    });
    slots
        .into_iter()
        .zip(items)
        .map(|(slot, item)| {
            slot.into_inner()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .unwrap_or_else(|| f(item))
        })
        .collect()
}

/// `key=a..b` (inclusive, step 1) or `key=a,b,c`.
fn parse_sweep(sweep: &str) -> Result<(String, Vec<String>)> {
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

    #[test]
    fn mean_and_population_stddev() {
        assert_eq!(mean_stddev(&[2.0, 4.0]), (3.0, 1.0));
    }
}
